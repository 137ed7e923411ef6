//! weft in the browser: `weft-core` and the baked int8 network
//! (`weft-weights`) compiled to WebAssembly behind plain exports
//! ([`exports`]; no JavaScript generator), and the same code on the
//! desktop, which the browser test compares against bit for bit.
//!
//! A [`Sim`] runs one scene twice side by side, on the board's 16×16 cloth
//! or on a disc of 217 nodes (a mesh that is not a grid):
//! the plain coarse step, and the corrected one (the coarse step on the
//! network's calibrated membrane, then the network, its guard on). Its
//! memory is made once, when the first scene loads; a step allocates
//! nothing, as on the board. Bad input (a scene out of range, a drag
//! target that is not finite) is a [`WebError`], and the simulation keeps
//! running as it was.
#![deny(unsafe_code)]

#[path = "../../firmware/src/scene.rs"]
#[allow(dead_code)]
mod board;
pub mod exports;
mod scenes;

use std::cell::RefCell;

pub use scenes::{WebScene, SCENES};
use weft_core::gnn::int8::{Checked, Scratch};
use weft_core::math::Vec3;
use weft_core::mesh::Mesh;
use weft_core::model::{Collider, Model, ParamError, Pin, Scene, Shape, Wind};
use weft_core::physics::state::{State, StateError, Warnings};
use weft_core::physics::StepReport;
use weft_core::storage::MeshBuffers;

/// Why a call was refused; the simulation is as it was before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum WebError {
    /// No scene has that index.
    SceneOutOfRange = 1,
    /// A drag target that is NaN or infinite.
    NotFinite = 2,
    /// No scene is loaded yet.
    NotLoaded = 3,
    /// The physics step failed (its state was kept).
    Physics = 4,
    /// The network could not run (the physics step's result was kept).
    Network = 5,
    /// The scene's model or state could not be built.
    Setup = 6,
}

impl WebError {
    pub const ALL: [WebError; 6] = [
        WebError::SceneOutOfRange,
        WebError::NotFinite,
        WebError::NotLoaded,
        WebError::Physics,
        WebError::Network,
        WebError::Setup,
    ];

    pub fn message(self) -> &'static str {
        match self {
            WebError::SceneOutOfRange => "no scene has that index",
            WebError::NotFinite => "the drag target is not a finite position",
            WebError::NotLoaded => "no scene is loaded",
            WebError::Physics => "the physics step failed; the cloth is as it was",
            WebError::Network => "the network could not run; the cloth keeps the physics step",
            WebError::Setup => "the scene could not be built",
        }
    }
}

impl From<ParamError> for WebError {
    fn from(_: ParamError) -> Self {
        WebError::Setup
    }
}

impl From<StateError> for WebError {
    fn from(_: StateError) -> Self {
        WebError::Setup
    }
}

/// Which of the two cloths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cloth {
    Plain = 0,
    Corrected = 1,
}

/// One mesh's two cloths, plain and corrected, in memory made once.
struct Cloths {
    mesh: Mesh<'static>,
    triangles: Vec<u16>,
    states: [State<'static>; 2],
    /// The start velocities of a restart (made once, reused).
    start: Vec<Vec3>,
}

impl Cloths {
    /// The cloths of `shape` for `setting`.
    fn new(shape: ClothMesh, setting: &Setting, net: &Checked) -> Result<Cloths, WebError> {
        let buffers = Box::leak(Box::new(MeshBuffers::<
            { board::COUNTS.nodes },
            { board::COUNTS.triangles },
            { board::COUNTS.edges },
            { board::COUNTS.hinges },
        >::new()));
        let mesh = match shape {
            ClothMesh::Grid => Mesh::grid(&board::grid(), buffers.storage()),
            ClothMesh::Disc => {
                let (x, t) = scenes::disc();
                Mesh::from_triangles(&x, &t, buffers.storage())
            }
        }
        .map_err(|_| WebError::Setup)?;
        let triangles = mesh.triangles().iter().flat_map(|t| t.nodes).collect();
        let states = [Cloth::Plain, Cloth::Corrected].map(|cloth| {
            let memory = Box::leak(Box::new(board::StateMemory::new()));
            Ok::<_, WebError>(State::new(&setting.model(mesh, cloth, net)?, memory.storage())?)
        });
        let [plain, corrected] = states;
        Ok(Cloths { mesh, triangles, states: [plain?, corrected?], start: vec![Vec3::ZERO; mesh.node_count()] })
    }

    /// Both cloths from rest in `setting` (pinned nodes moving with their
    /// pins).
    fn restart(&mut self, setting: &Setting, net: &Checked) -> Result<(), WebError> {
        for cloth in [Cloth::Plain, Cloth::Corrected] {
            let model = setting.model(self.mesh, cloth, net)?;
            self.start.fill(Vec3::ZERO);
            for pin in model.scene.pins {
                self.start[pin.node as usize] = pin.start_velocity();
            }
            let state = &mut self.states[cloth as usize];
            state.set_positions(model.mesh.rest())?;
            state.set_velocities(&self.start)?;
            state.set_previous_start_velocities(&self.start)?;
            state.set_steps(0)?;
            state.warnings = Warnings::default();
        }
        Ok(())
    }
}

/// The page's meshes: the board's grid, and a disc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClothMesh {
    Grid,
    Disc,
}

/// One scene, plain and corrected side by side.
pub struct Sim {
    scene: WebScene,
    setting: Setting,
    grid: Cloths,
    /// The disc's cloths, made when a scene first needs them.
    disc: Option<Cloths>,
    latents: &'static mut [i8],
    net: Checked<'static, 'static>,
    /// The last step of each cloth, and the corrected step's dynamic edges.
    reports: [StepReport; 2],
    dynamic_edges: usize,
    /// The first collider's sphere for drawing: centre and radius (radius 0
    /// without one).
    sphere: [f32; 4],
}

impl Sim {
    /// A simulation of `scene`, with its memory.
    pub fn new(scene: WebScene) -> Result<Sim, WebError> {
        let net = weft_weights::NETWORK.check().map_err(|_| WebError::Setup)?;
        let setting = Setting::of(WebScene::Swing);
        let grid = Cloths::new(ClothMesh::Grid, &setting, &net)?;
        let latents = Box::leak(vec![0i8; board::SCRATCH.latents].into_boxed_slice());
        let mut sim = Sim {
            scene,
            setting,
            grid,
            disc: None,
            latents,
            net,
            reports: [StepReport::default(); 2],
            dynamic_edges: 0,
            sphere: [0.0; 4],
        };
        sim.load(scene)?;
        Ok(sim)
    }

    /// The cloths of the current scene, with its setting, the network and
    /// its latents.
    fn parts(&mut self) -> (&Setting, &mut Cloths, Checked<'static, 'static>, &mut [i8]) {
        let cloths = match (self.scene.shape(), &mut self.disc) {
            (ClothMesh::Disc, Some(d)) => d,
            _ => &mut self.grid,
        };
        (&self.setting, cloths, self.net, &mut *self.latents)
    }

    /// Starts `scene` from rest (its pinned nodes moving with their pins).
    pub fn load(&mut self, scene: WebScene) -> Result<(), WebError> {
        let setting = Setting::of(scene);
        if scene.shape() == ClothMesh::Disc && self.disc.is_none() {
            self.disc = Some(Cloths::new(ClothMesh::Disc, &setting, &self.net)?);
        }
        (self.setting, self.scene) = (setting, scene);
        let (setting, cloths, net, _) = self.parts();
        cloths.restart(setting, &net)?;
        self.reports = [StepReport::default(); 2];
        self.dynamic_edges = 0;
        self.update_sphere();
        Ok(())
    }

    /// One physics step of `cloth`.
    pub fn physics(&mut self, cloth: Cloth) -> Result<(), WebError> {
        let (setting, cloths, net, _) = self.parts();
        let model = setting.model(cloths.mesh, cloth, &net)?;
        let report =
            weft_core::physics::step(&model, &mut cloths.states[cloth as usize]).map_err(|_| WebError::Physics)?;
        self.reports[cloth as usize] = report;
        Ok(())
    }

    /// The network's correction of the corrected cloth's last physics
    /// step ([`weft_core::step::step2`]).
    pub fn correct(&mut self) -> Result<(), WebError> {
        let (setting, cloths, net, latents) = self.parts();
        let model = setting.model(cloths.mesh, Cloth::Corrected, &net)?;
        let mut scratch = Scratch { latents };
        let state = &mut cloths.states[Cloth::Corrected as usize];
        let report = weft_core::step::step2(&model, state, net, &mut scratch).map_err(|_| WebError::Network)?;
        self.dynamic_edges = report.dynamic_edges;
        Ok(())
    }

    /// One frame: the plain cloth's step, and the corrected cloth's step
    /// and correction.
    pub fn frame(&mut self) -> Result<(), WebError> {
        self.physics(Cloth::Plain)?;
        self.physics(Cloth::Corrected)?;
        self.correct()
    }

    /// Moves what the user drags to `target`: the sphere's centre where the
    /// scene has one, else the pins (together, the first onto `target`).
    pub fn drag(&mut self, target: Vec3) -> Result<(), WebError> {
        if !target.is_finite() {
            return Err(WebError::NotFinite);
        }
        if let Some(c) = self.setting.colliders.iter_mut().find(|c| matches!(c.shape, Shape::Sphere { .. })) {
            if let Shape::Sphere { center, .. } = &mut c.shape {
                *center = target;
            }
        } else if let Some(first) = self.setting.pins.first().map(|p| p.anchor) {
            for p in &mut self.setting.pins {
                p.anchor += target - first;
            }
        }
        self.update_sphere();
        Ok(())
    }

    fn update_sphere(&mut self) {
        self.sphere = self
            .setting
            .colliders
            .iter()
            .find_map(|c| match c.shape {
                Shape::Sphere { center, radius } => Some([center.x, center.y, center.z, radius]),
                _ => None,
            })
            .unwrap_or([0.0; 4]);
    }

    pub fn scene(&self) -> WebScene {
        self.scene
    }
    fn cloths(&self) -> &Cloths {
        match (self.scene.shape(), &self.disc) {
            (ClothMesh::Disc, Some(d)) => d,
            _ => &self.grid,
        }
    }
    pub fn positions(&self, cloth: Cloth) -> &[Vec3] {
        self.cloths().states[cloth as usize].positions()
    }
    pub fn triangles(&self) -> &[u16] {
        &self.cloths().triangles
    }
    pub fn sphere(&self) -> &[f32; 4] {
        &self.sphere
    }
    /// The first pin's anchor, or the sphere's centre: where a drag starts.
    pub fn handle(&self) -> Vec3 {
        match self.sphere {
            [x, y, z, r] if r > 0.0 => Vec3::new(x, y, z),
            _ => self.setting.pins.first().map_or(Vec3::ZERO, |p| p.anchor),
        }
    }
    pub fn report(&self, cloth: Cloth) -> &StepReport {
        &self.reports[cloth as usize]
    }
    pub fn dynamic_edges(&self) -> usize {
        self.dynamic_edges
    }
    /// The board's checksum of `cloth`'s positions and velocities
    /// (`firmware/src/scene.rs`).
    pub fn checksum(&self, cloth: Cloth) -> u32 {
        let s = &self.cloths().states[cloth as usize];
        board::checksum(s.positions(), s.velocities())
    }
}

/// A scene's pins, colliders and wind as they are now (where the user
/// dragged them).
struct Setting {
    pins: Vec<Pin>,
    colliders: Vec<Collider>,
    wind: Option<Wind>,
}

impl Setting {
    fn of(scene: WebScene) -> Setting {
        Setting { pins: scene.pins(), colliders: scene.colliders(), wind: scene.wind() }
    }

    /// The model of `cloth` on `mesh`.
    fn model(&self, mesh: Mesh<'static>, cloth: Cloth, net: &Checked) -> Result<Model<'_>, WebError> {
        let scene = Scene { pins: &self.pins, colliders: &self.colliders, wind: self.wind, ..Scene::default() };
        Ok(Model::new(mesh, material(cloth, net)?, scene, board::params())?)
    }
}

/// The plain cloth's material, or the one the network corrects (on its
/// calibrated membrane).
fn material(cloth: Cloth, net: &Checked) -> Result<weft_core::model::Material, ParamError> {
    match cloth {
        Cloth::Plain => Ok(board::MATERIAL),
        Cloth::Corrected => board::corrected_material(net),
    }
}

thread_local! {
    /// The page's simulation (WebAssembly runs on one thread).
    static SIM: RefCell<Option<Sim>> = const { RefCell::new(None) };
}

/// Runs `f` on the page's simulation, or [`WebError::NotLoaded`].
pub fn with_sim<R>(f: impl FnOnce(&mut Sim) -> Result<R, WebError>) -> Result<R, WebError> {
    SIM.with(|s| s.borrow_mut().as_mut().ok_or(WebError::NotLoaded).and_then(f))
}

/// Loads scene `index` into the page's simulation (made on first use).
pub fn load(index: usize) -> Result<(), WebError> {
    let scene = *SCENES.get(index).ok_or(WebError::SceneOutOfRange)?;
    SIM.with(|s| {
        let mut s = s.borrow_mut();
        match s.as_mut() {
            Some(sim) => sim.load(scene),
            None => {
                *s = Some(Sim::new(scene)?);
                Ok(())
            }
        }
    })
}

/// The checksums of scene `index` after `frames` frames from rest, plain
/// and corrected: what the browser test compares.
pub fn checksums(index: usize, frames: u32) -> Result<[u32; 2], WebError> {
    load(index)?;
    with_sim(|sim| {
        for _ in 0..frames {
            sim.frame()?;
        }
        Ok([sim.checksum(Cloth::Plain), sim.checksum(Cloth::Corrected)])
    })
}
