//! The firmware's built-in scenario run on the desktop through `weft-core`
//! (portable int8 kernel), for the bit-exactness test and the solve report.

use weft_core::mesh::Mesh;
use weft_core::model::{Collider, Material, Model, StepParams};
use weft_core::physics::state::State;
use weft_core::physics::StepReport;
use weft_core::storage::MeshBuffers;
use weft_tests::scene::{self, GnnMemory, Scenario, StateMemory, COUNTS};

/// A built-in scene's mesh storage.
type SceneMesh = MeshBuffers<{ COUNTS.nodes }, { COUNTS.triangles }, { COUNTS.edges }, { COUNTS.hinges }>;

/// `scenario`'s model (the disc for the tablecloth, else the grid) with
/// `material` and `params`, its mesh in `mb`.
fn scene_model<'a>(
    scenario: Scenario,
    mb: &'a mut SceneMesh,
    material: Material,
    params: StepParams,
    pins: &'a scene::Pins,
    colliders: &'a [Collider],
) -> Model<'a> {
    let mesh = match scenario {
        Scenario::Tablecloth => {
            let (x, t) = scene::disc().unwrap();
            Mesh::from_triangles(&x, &t, mb.storage()).unwrap()
        }
        _ => Mesh::grid(&scene::grid(), mb.storage()).unwrap(),
    };
    Model::new(mesh, material, scene::scene(pins.as_slice(), colliders), params).unwrap()
}

/// Runs `steps` steps of `scenario` with `params`, corrected by the baked
/// network or plain, calling `each(step, report, model, state)` after every
/// step; returns the final checksum and the positions.
#[allow(dead_code)]
pub fn run(
    scenario: Scenario,
    params: StepParams,
    corrected: bool,
    steps: u32,
    mut each: impl FnMut(u32, &StepReport, &Model, &State),
) -> (u32, Vec<weft_core::math::Vec3>) {
    let mut mb = Box::new(SceneMesh::new());
    let mut sb = Box::new(StateMemory::new());
    let mut gb = Box::new(GnnMemory::new());
    let (pins, colliders) = (scenario.pins(), scenario.colliders());
    let material = if corrected { scene::corrected_material(&weft_weights::NETWORK).unwrap() } else { scene::MATERIAL };
    let model = scene_model(scenario, &mut mb, material, params, &pins, &colliders);
    let mut state = State::new(&model, sb.storage()).unwrap();
    let mut scratch = gb.scratch();
    for s in 0..steps {
        let report = if corrected {
            weft_core::step::step(&model, &mut state, weft_weights::NETWORK.check().unwrap(), &mut scratch).unwrap().0
        } else {
            weft_core::physics::step(&model, &mut state).unwrap()
        };
        each(s, &report, &model, &state);
    }
    (scene::checksum(state.positions(), state.velocities()), state.positions().to_vec())
}
