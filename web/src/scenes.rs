//! The page's scenes, on the board's material: on its 16×16 cloth the
//! board's swing and drape (`firmware/src/scene.rs`), a hang (the swing
//! without its sphere) and a flag (held on one side edge in gusting wind);
//! and a round tablecloth (`host/scenarios/meshes/disc.obj`, a mesh that is
//! not a grid) dropped onto a sphere.

use weft_core::math::Vec3;
use weft_core::mesh::NodeId;
use weft_core::model::{Collider, Pin, Shape, Wind};

use crate::board::{self, Scenario, N};
use crate::ClothMesh;

/// One of the page's scenes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebScene {
    Swing,
    Drape,
    Hang,
    Flag,
    Tablecloth,
}

/// The scenes in the order the page lists them.
pub const SCENES: [WebScene; 5] =
    [WebScene::Swing, WebScene::Drape, WebScene::Hang, WebScene::Flag, WebScene::Tablecloth];

/// The disc of `weft mesh disc` (217 nodes in rings, 0.4 m radius),
/// horizontal at 0.9 m: the board's tablecloth ([`board::disc`]).
pub fn disc() -> (Vec<Vec3>, Vec<[NodeId; 3]>) {
    board::disc().map_or((Vec::new(), Vec::new()), |(x, t)| (x.to_vec(), t.to_vec()))
}

impl WebScene {
    pub fn name(self) -> &'static str {
        match self {
            WebScene::Swing => "swing",
            WebScene::Drape => "drape",
            WebScene::Hang => "hang",
            WebScene::Flag => "flag",
            WebScene::Tablecloth => "tablecloth",
        }
    }

    /// The mesh the scene's cloth is.
    pub fn shape(self) -> ClothMesh {
        if self == WebScene::Tablecloth {
            ClothMesh::Disc
        } else {
            ClothMesh::Grid
        }
    }

    /// The pins: the board's for the swing and the drape, the swing's two
    /// back corners for the hang, the left edge for the flag.
    pub fn pins(self) -> Vec<Pin> {
        let g = board::grid();
        match self {
            WebScene::Swing | WebScene::Hang => Scenario::Swing.pins().as_slice().to_vec(),
            WebScene::Drape | WebScene::Tablecloth => Scenario::Drape.pins().as_slice().to_vec(),
            WebScene::Flag => (0..N).map(|j| Pin::fixed(g.node(0, j) as NodeId, g.position(0, j))).collect(),
        }
    }

    /// The colliders: the board's sphere and ground, or the ground alone.
    pub fn colliders(self) -> Vec<Collider> {
        match self {
            WebScene::Swing => Scenario::Swing.colliders().to_vec(),
            WebScene::Drape => Scenario::Drape.colliders().to_vec(),
            WebScene::Tablecloth => Scenario::Tablecloth.colliders().to_vec(),
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
