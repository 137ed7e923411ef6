//! One cloth's memory on the page ([`Cloths`]: its mesh and the plain and
//! corrected states, made once and kept for every scene with the same
//! cloth) and a scene's [`Setting`] (what a model is made of, with the
//! pins and colliders where the user dragged them).

use weft_core::gnn::int8::Checked;
use weft_core::math::Vec3;
use weft_core::mesh::Mesh;
use weft_core::model::{CoarseGrain, Collider, Material, Model, Pin, Scene, StepParams, Wind};
use weft_core::physics::state::{State, Warnings};
use weft_scene::build::{self, ModelParts};
use weft_scene::envelope::{Envelope, FALLBACK_INTEGRATOR};
use weft_scene::storage::{self, VecStateStorage};
use weft_scene::Scenario;

use crate::{refused, Cloth, WebError};

/// Pair storage a node: the board's (`firmware/build.rs`), half the
/// desktop's.
const PAIRS_PER_NODE: usize = weft_core::gnn::int8::PAIRS_PER_NODE / 2;

/// A scene's pins, colliders and wind as they are now (where the user
/// dragged them), and the rest of its model.
pub struct Setting {
    pub pins: Vec<Pin>,
    pub colliders: Vec<Collider>,
    pub wind: Option<Wind>,
    gravity: Vec3,
    material: Material,
    /// The file's step parameters, once the cloth's mesh is known
    /// ([`Setting::params`]).
    params: Option<StepParams>,
    pub substeps: u32,
    /// Why the scene lies outside the network's training envelope, the
    /// reasons joined by `; ` (empty: inside). Outside, the corrected cloth runs the scene's fallback, as
    /// the desktop and the board do: the plain BDF2 step on the file's
    /// material, uncorrected ([`weft_scene::envelope::Envelope::fallback`]).
    pub outside: String,
}

impl Setting {
    pub fn of(scn: &Scenario) -> Setting {
        // Pins and colliders were checked when the file was parsed; a
        // failure here leaves them empty and the model's check names it.
        let rest = scn.rest_positions();
        Setting {
            pins: scn.core_pins(&rest).unwrap_or_default(),
            colliders: scn.core_colliders().unwrap_or_default(),
            wind: scn.wind.map(Wind::from),
            gravity: Vec3::from_array(scn.gravity),
            material: Material::from(scn.material),
            params: None,
            substeps: scn.time.substeps,
            outside: scn.outside_envelope().join("; "),
        }
    }

    /// Whether the network corrects the corrected cloth (the scene lies
    /// inside the training envelope).
    pub fn corrected(&self) -> bool {
        self.outside.is_empty()
    }

    /// The model of `cloth` on `mesh`.
    pub fn model(&self, mesh: Mesh<'static>, cloth: Cloth, net: &Checked) -> Result<Model<'_>, WebError> {
        let scene = Scene { gravity: self.gravity, pins: &self.pins, colliders: &self.colliders, wind: self.wind };
        let mut params = self.params.ok_or(WebError::Setup)?;
        let material = match cloth {
            Cloth::Corrected if self.corrected() => {
                self.material.coarse_grained(net.coarse).map_err(|_| WebError::Setup)?
            }
            Cloth::Corrected => {
                params.integrator = FALLBACK_INTEGRATOR.into();
                self.material
            }
            Cloth::Plain => self.material,
        };
        Model::new(mesh, material, scene, params).map_err(|_| WebError::Setup)
    }
}

/// One mesh's two cloths, plain and corrected, in memory made once.
pub struct Cloths {
    pub mesh: Mesh<'static>,
    pub triangles: Vec<u16>,
    pub states: [State<'static>; 2],
    /// The pair storage of each state.
    pub pairs: usize,
    /// The start velocities of a restart (made once, reused).
    start: Vec<Vec3>,
}

impl Cloths {
    /// What makes two scenes' cloths share memory: the same rest mesh
    /// (the cloth's keys but its start velocity and spin), the same
    /// integrator and warm start (the state's layout), whether the
    /// corrected cloth runs the fallback step (its layout), and pair
    /// storage.
    pub fn key(scn: &Scenario, setting: &Setting) -> String {
        let cloth = weft_scene::spec::ClothSpec { velocity: [0.0; 3], spin: [0.0; 3], ..scn.cloth.clone() };
        let s = &scn.solver;
        let corrected = setting.corrected();
        format!("{cloth:?} {:?} {} {corrected} {}", s.integrator, s.warm_start, Self::pairs(scn))
    }

    fn pairs(scn: &Scenario) -> usize {
        scn.max_pairs().max(PAIRS_PER_NODE * scn.node_count())
    }

    /// The cloths of `scn`. Their memory lives as long as the page.
    pub fn new(scn: &Scenario, net: &Checked) -> Result<Cloths, WebError> {
        let parts = Box::leak(Box::new(ModelParts::default()));
        let mesh = build::model(scn, CoarseGrain::NONE, parts).map_err(refused)?.mesh;
        let triangles = mesh.triangles().iter().flat_map(|t| t.nodes).collect();
        let pairs = Self::pairs(scn);
        let mut setting = Setting::of(scn);
        setting.params = Some(scn.params(mesh.min_edge_length()));
        let states = [Cloth::Plain, Cloth::Corrected].map(|cloth| {
            let model = setting.model(mesh, cloth, net)?;
            let memory = Box::leak(Box::new(VecStateStorage::with_sizes(storage::board_sizes(&model, pairs))));
            State::new(&model, memory.storage()).map_err(|_| WebError::Setup)
        });
        let [plain, corrected] = states;
        Ok(Cloths { mesh, triangles, states: [plain?, corrected?], pairs, start: vec![Vec3::ZERO; mesh.node_count()] })
    }

    /// Both cloths at the start of `scn` in `setting` (pinned nodes moving
    /// with their pins, free ones with the file's start velocities), and
    /// `setting`'s step parameters for this mesh.
    pub fn restart(&mut self, setting: &mut Setting, scn: &Scenario, net: &Checked) -> Result<(), WebError> {
        setting.params = Some(scn.params(self.mesh.min_edge_length()));
        for cloth in [Cloth::Plain, Cloth::Corrected] {
            let model = setting.model(self.mesh, cloth, net)?;
            match build::start_velocities(scn, &model).map_err(refused)? {
                Some(v) => self.start.copy_from_slice(&v),
                None => {
                    self.start.fill(Vec3::ZERO);
                    for pin in model.scene.pins {
                        self.start[pin.node as usize] = pin.start_velocity();
                    }
                }
            }
            let state = &mut self.states[cloth as usize];
            let setup = |_| WebError::Setup;
            state.set_positions(model.mesh.rest()).map_err(setup)?;
            state.set_velocities(&self.start).map_err(setup)?;
            state.set_previous_start_velocities(&self.start).map_err(setup)?;
            state.set_steps(0).map_err(setup)?;
            state.warnings = Warnings::default();
        }
        Ok(())
    }
}
