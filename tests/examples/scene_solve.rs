//! The firmware's scene on the desktop, step by step: CG iterations,
//! substeps and convergence of the physics (the corrected step, as on the
//! board). `cargo run --release -p weft-tests --example scene_solve`
use weft_core::gnn::int8::ScratchBuffers;
use weft_core::mesh::Mesh;
use weft_core::model::Model;
use weft_core::state::State;
use weft_core::storage::{MeshBuffers, StateBuffers};
use weft_tests::scene::{self, COUNTS, SCRATCH, STATE};

fn main() {
    let mut mb =
        Box::new(MeshBuffers::<{ COUNTS.nodes }, { COUNTS.triangles }, { COUNTS.edges }, { COUNTS.hinges }>::new());
    let mut sb = Box::new(StateBuffers::<
        { STATE.vec3 },
        { STATE.mat3 },
        { STATE.flags },
        { STATE.cells },
        { STATE.pairs },
        { STATE.solver },
    >::new());
    let mut gb = Box::new(ScratchBuffers::<{ SCRATCH.latents }>::new());
    let (pins, colliders) = (scene::pins(), scene::colliders());
    let mesh = Mesh::grid(&scene::grid(), mb.storage()).unwrap();
    let mut params = scene::params();
    if let Some(t) = std::env::var("WEFT_CG_TOLERANCE").ok().and_then(|t| t.parse().ok()) {
        params.cg_tolerance = t;
    }
    let model = Model::new(mesh, scene::MATERIAL, scene::scene(&pins, &colliders), params).unwrap();
    let mut state = State::new(&model, sb.storage()).unwrap();
    let mut scratch = gb.scratch();
    let corrected = std::env::args().nth(1).as_deref() != Some("plain");
    let (mut its, mut worst, mut unconv) = (0u32, 0u32, 0u32);
    let t = std::time::Instant::now();
    for s in 0..scene::STEPS {
        let r = if corrected {
            weft_core::step::step(&model, &mut state, weft_weights::NETWORK.check().unwrap(), &mut scratch).unwrap().0
        } else {
            weft_core::physics::step(&model, &mut state).unwrap()
        };
        its += r.cg_iterations;
        worst = worst.max(r.cg_iterations);
        unconv += u32::from(!r.converged);
        println!(
            "step {s:2}: cg {:4} substeps {:2} converged {} residual {:.2e} contacts {}",
            r.cg_iterations, r.substeps, r.converged, r.residual, r.contacts
        );
    }
    println!(
        "mean cg {:.1}, worst {worst}, unconverged {unconv}/{}, checksum {:08x}, {:.1} ms",
        its as f32 / scene::STEPS as f32,
        scene::STEPS,
        scene::checksum(state.positions(), state.velocities()),
        t.elapsed().as_secs_f64() * 1e3
    );
}
