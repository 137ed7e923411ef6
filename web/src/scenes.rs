//! The page's scenes, on the board's 16×16 cloth and material: the board's
//! swing and drape (`firmware/src/scene.rs`), a hang (the swing without
//! its sphere) and a flag (held on one side edge in gusting wind).

use weft_core::math::Vec3;
use weft_core::mesh::NodeId;
use weft_core::model::{Collider, Pin, Shape, Wind};

use crate::board::{self, Scenario, N};

/// One of the page's scenes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebScene {
    Swing,
    Drape,
    Hang,
    Flag,
}

/// The scenes in the order the page lists them.
pub const SCENES: [WebScene; 4] = [WebScene::Swing, WebScene::Drape, WebScene::Hang, WebScene::Flag];

impl WebScene {
    pub fn name(self) -> &'static str {
        match self {
            WebScene::Swing => "swing",
            WebScene::Drape => "drape",
            WebScene::Hang => "hang",
            WebScene::Flag => "flag",
        }
    }

    /// The pins: the board's for the swing and the drape, the swing's two
    /// back corners for the hang, the left edge for the flag.
    pub fn pins(self) -> Vec<Pin> {
        let g = board::grid();
        match self {
            WebScene::Swing | WebScene::Hang => Scenario::Swing.pins().as_slice().to_vec(),
            WebScene::Drape => Scenario::Drape.pins().as_slice().to_vec(),
            WebScene::Flag => (0..N).map(|j| Pin::fixed(g.node(0, j) as NodeId, g.position(0, j))).collect(),
        }
    }

    /// The colliders: the board's sphere and ground, or the ground alone.
    pub fn colliders(self) -> Vec<Collider> {
        match self {
            WebScene::Swing => Scenario::Swing.colliders().to_vec(),
            WebScene::Drape => Scenario::Drape.colliders().to_vec(),
            WebScene::Hang | WebScene::Flag => {
                let ground = Shape::Plane { normal: Vec3::new(0.0, 1.0, 0.0), offset: 0.0 };
                vec![Collider { friction: 0.5, ..Collider::new(ground) }]
            }
        }
    }

    /// The flag's wind: 4 m/s along the cloth, gusting by a quarter once a
    /// second.
    pub fn wind(self) -> Option<Wind> {
        (self == WebScene::Flag).then(|| Wind {
            gust: 0.25,
            gust_frequency: 1.0,
            ..Wind::new(Vec3::new(4.0, 0.0, 0.5))
        })
    }
}
