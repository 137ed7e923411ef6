//! weft in the browser: `weft-core` and the baked int8 network
//! (`weft-weights`) compiled to WebAssembly behind plain exports
//! ([`exports`]; no JavaScript generator), and the same code on the
//! desktop, which the browser test compares against bit for bit.
//!
//! The page's scenes are scene files, the format `weft simulate` reads
//! and the board bakes (`weft-scene`): the board's own
//! (`firmware/scenes/*.toml`) and two of the page's (`web/scenes/`). A
//! [`Sim`] runs one scene twice side by side: the plain coarse step, and
//! the corrected one (the coarse step on the network's calibrated
//! membrane, then the network, its guard on), as the board runs it; a
//! scene outside the network's training envelope runs its plain BDF2
//! fallback there instead, as on the desktop and the board. The
//! page shows the scene's file in an editor; an edited file is parsed and
//! checked like any other ([`load_text`]), and a refused one leaves the
//! last good scene running, its [`weft_scene::SceneError`] shown.
//!
//! Memory: a cloth's mesh and states are made the first time a scene with
//! that cloth loads and kept for every later scene with the same cloth
//! (pins, colliders, wind, material and time may change freely); a step
//! allocates nothing, as on the board. Bad input (a scene out of range, a
//! refused file, a drag target that is not finite) is a [`WebError`], and
//! the simulation keeps running as it was.
#![deny(unsafe_code)]

mod cloths;
pub mod exports;

use std::cell::RefCell;
use std::collections::HashMap;

use cloths::{Cloths, Setting};
use weft_core::gnn::int8::{Checked, Scratch, ScratchSizes};
use weft_core::math::Vec3;
use weft_core::model::Shape;
use weft_core::physics::StepReport;
use weft_scene::{ErrorKind, Scenario, SceneError};

/// The page's scenes, `(name, scene file)`, in the order it lists them:
/// the board's swing and drape, a hang and a flag, the board's tablecloth.
pub const SCENES: [(&str, &str); 5] = [
    ("swing", include_str!("../../firmware/scenes/swing.toml")),
    ("drape", include_str!("../../firmware/scenes/drape.toml")),
    ("hang", include_str!("../scenes/hang.toml")),
    ("flag", include_str!("../scenes/flag.toml")),
    ("tablecloth", include_str!("../../firmware/scenes/tablecloth.toml")),
];

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
    /// The scene file was refused ([`last_error`] says why, naming the key).
    Scene = 7,
}

impl WebError {
    pub const ALL: [WebError; 7] = [
        WebError::SceneOutOfRange,
        WebError::NotFinite,
        WebError::NotLoaded,
        WebError::Physics,
        WebError::Network,
        WebError::Setup,
        WebError::Scene,
    ];

    pub fn message(self) -> &'static str {
        match self {
            WebError::SceneOutOfRange => "no scene has that index",
            WebError::NotFinite => "the drag target is not a finite position",
            WebError::NotLoaded => "no scene is loaded",
            WebError::Physics => "the physics step failed; the cloth is as it was",
            WebError::Network => "the network could not run; the cloth keeps the physics step",
            WebError::Setup => "the scene could not be built",
            WebError::Scene => "the scene file was refused; the last good scene keeps running",
        }
    }
}

/// Which of the two cloths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cloth {
    Plain = 0,
    Corrected = 1,
}

/// A scene file as the page reads it: meshes come from `cloth.shape` or
/// the grid, since the page has no files to read.
pub fn parse(text: &str) -> Result<Scenario, SceneError> {
    Scenario::parse_with(text, &|file, _| {
        Err(SceneError::new(
            "",
            ErrorKind::Io,
            format!("the page reads no files ({}): use `cloth.shape` or a grid", file.display()),
        ))
    })
}

/// One scene, plain and corrected side by side.
pub struct Sim {
    name: String,
    text: String,
    setting: Setting,
    /// Every cloth loaded so far, by [`Cloths::key`]; `current` is this
    /// scene's.
    cloths: HashMap<String, Cloths>,
    current: String,
    latents: Vec<i8>,
    net: Checked<'static, 'static>,
    /// The last step of each cloth, and the corrected step's dynamic edges.
    reports: [StepReport; 2],
    dynamic_edges: usize,
    /// The first collider's sphere for drawing: centre and radius (radius 0
    /// without one).
    sphere: [f32; 4],
}

impl Sim {
    /// A simulation of scene file `text` (called `name`), with its memory.
    pub fn new(name: &str, text: &str) -> Result<Sim, WebError> {
        let net = weft_weights::NETWORK.check().map_err(|_| WebError::Setup)?;
        let scn = parse(text).map_err(refused)?;
        let mut sim = Sim {
            name: String::new(),
            text: String::new(),
            setting: Setting::of(&scn),
            cloths: HashMap::new(),
            current: String::new(),
            latents: Vec::new(),
            net,
            reports: [StepReport::default(); 2],
            dynamic_edges: 0,
            sphere: [0.0; 4],
        };
        sim.load_scene(name, text, scn)?;
        Ok(sim)
    }

    /// Starts scene file `text` (called `name`) from its start; a refused
    /// file changes nothing.
    pub fn load(&mut self, name: &str, text: &str) -> Result<(), WebError> {
        let scn = parse(text).map_err(refused)?;
        self.load_scene(name, text, scn)
    }

    fn load_scene(&mut self, name: &str, text: &str, scn: Scenario) -> Result<(), WebError> {
        let mut setting = Setting::of(&scn);
        let key = Cloths::key(&scn, &setting);
        if !self.cloths.contains_key(&key) {
            let cloths = Cloths::new(&scn, &self.net)?;
            self.cloths.insert(key.clone(), cloths);
        }
        let cloths = self.cloths.get_mut(&key).ok_or(WebError::Setup)?;
        cloths.restart(&mut setting, &scn, &self.net)?;
        let sizes = ScratchSizes::new(cloths.mesh.counts(), cloths.pairs, self.net.latent);
        if self.latents.len() < sizes.latents {
            self.latents = vec![0; sizes.latents];
        }
        (self.setting, self.current) = (setting, key);
        (self.name, self.text) = (name.to_string(), text.to_string());
        self.reports = [StepReport::default(); 2];
        self.dynamic_edges = 0;
        self.update_sphere();
        Ok(())
    }

    /// The current scene's cloths, with its setting, the network and the
    /// latents.
    fn parts(&mut self) -> Result<(&Setting, &mut Cloths, Checked<'static, 'static>, &mut [i8]), WebError> {
        let cloths = self.cloths.get_mut(&self.current).ok_or(WebError::NotLoaded)?;
        Ok((&self.setting, cloths, self.net, &mut self.latents))
    }

    /// One physics step of `cloth`.
    pub fn physics(&mut self, cloth: Cloth) -> Result<(), WebError> {
        let (setting, cloths, net, _) = self.parts()?;
        let model = setting.model(cloths.mesh, cloth, &net)?;
        let report =
            weft_core::physics::step(&model, &mut cloths.states[cloth as usize]).map_err(|_| WebError::Physics)?;
        self.reports[cloth as usize] = report;
        Ok(())
    }

    /// The network's correction of the corrected cloth's last physics
    /// step ([`weft_core::step::step2`]).
    pub fn correct(&mut self) -> Result<(), WebError> {
        let (setting, cloths, net, latents) = self.parts()?;
        if !setting.corrected() {
            // Outside the training envelope: the fallback step stands.
            self.dynamic_edges = 0;
            return Ok(());
        }
        let model = setting.model(cloths.mesh, Cloth::Corrected, &net)?;
        let mut scratch = Scratch { latents };
        let state = &mut cloths.states[Cloth::Corrected as usize];
        let report = weft_core::step::step2(&model, state, net, &mut scratch).map_err(|_| WebError::Network)?;
        self.dynamic_edges = report.dynamic_edges;
        Ok(())
    }

    /// One frame (`time.substeps` steps): the plain cloth's step, and the
    /// corrected cloth's step and correction.
    pub fn frame(&mut self) -> Result<(), WebError> {
        for _ in 0..self.setting.substeps {
            self.physics(Cloth::Plain)?;
            self.physics(Cloth::Corrected)?;
            self.correct()?;
        }
        Ok(())
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

    /// Why the scene lies outside the network's training envelope, where
    /// the corrected cloth runs the plain BDF2 fallback, the reasons
    /// joined by `; ` (empty: inside).
    pub fn outside(&self) -> &str {
        &self.setting.outside
    }

    /// The scene's name and its file as loaded.
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn text(&self) -> &str {
        &self.text
    }
    fn cloths(&self) -> &Cloths {
        // `current` always names a loaded cloth (set with it in `load_scene`).
        &self.cloths[&self.current]
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
    /// ([`weft_core::physics::state::checksum`]).
    pub fn checksum(&self, cloth: Cloth) -> u32 {
        self.cloths().states[cloth as usize].checksum()
    }
}

thread_local! {
    /// The page's simulation (WebAssembly runs on one thread).
    static SIM: RefCell<Option<Sim>> = const { RefCell::new(None) };
    /// Why the last scene file was refused (empty: none was).
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Keeps `e` as [`last_error`] and returns [`WebError::Scene`].
fn refused(e: SceneError) -> WebError {
    LAST_ERROR.with(|l| *l.borrow_mut() = e.to_string());
    WebError::Scene
}

/// Why the last scene file was refused, as `weft simulate` says it
/// (`key: problem`).
pub fn last_error() -> String {
    LAST_ERROR.with(|l| l.borrow().clone())
}

/// `f` of [`last_error`], without copying it.
pub fn with_last_error<R>(f: impl FnOnce(&str) -> R) -> R {
    LAST_ERROR.with(|l| f(&l.borrow()))
}

/// Runs `f` on the page's simulation, or [`WebError::NotLoaded`].
pub fn with_sim<R>(f: impl FnOnce(&mut Sim) -> Result<R, WebError>) -> Result<R, WebError> {
    SIM.with(|s| s.borrow_mut().as_mut().ok_or(WebError::NotLoaded).and_then(f))
}

/// Loads scene file `text` (called `name`) into the page's simulation
/// (made on first use).
pub fn load_text(name: &str, text: &str) -> Result<(), WebError> {
    SIM.with(|s| {
        let mut s = s.borrow_mut();
        match s.as_mut() {
            Some(sim) => sim.load(name, text),
            None => {
                *s = Some(Sim::new(name, text)?);
                Ok(())
            }
        }
    })
}

/// Loads built-in scene `index` ([`SCENES`]).
pub fn load(index: usize) -> Result<(), WebError> {
    let (name, text) = *SCENES.get(index).ok_or(WebError::SceneOutOfRange)?;
    load_text(name, text)
}

/// The checksums of scene `index` after `frames` frames from its start,
/// plain and corrected: what the browser test compares.
pub fn checksums(index: usize, frames: u32) -> Result<[u32; 2], WebError> {
    load(index)?;
    run_frames(frames)
}

/// The checksums of the loaded scene after `frames` more frames.
pub fn run_frames(frames: u32) -> Result<[u32; 2], WebError> {
    with_sim(|sim| {
        for _ in 0..frames {
            sim.frame()?;
        }
        Ok([sim.checksum(Cloth::Plain), sim.checksum(Cloth::Corrected)])
    })
}
