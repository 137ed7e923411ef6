//! The warm start (`StepParams::warm_start`): a cloth held at rest by
//! friction takes a fraction of the iterations a step from its last solve,
//! and ends where the same run started cold ends, within what the
//! solver's tolerance allows.
mod common;
use common::*;
use weft_core::physics::step;
use weft_core::prelude::*;

/// Stands a 16×16 cloth on its lower edge and lets it fold onto the
/// ground (friction holds it there) for `settle` steps, then runs `steps`
/// more; returns the CG iterations of those and the final positions.
fn rest_on_ground(warm_start: bool, shift: f32, settle: usize, steps: usize) -> (u32, Vec<Vec3>) {
    let grid = Grid::vertical(16, 16, 1.0, 1.0, 0.01);
    let colliders =
        [Collider { friction: 0.8, ..Collider::new(Shape::Plane { normal: Vec3::new(0.0, 1.0, 0.0), offset: 0.0 }) }];
    let scene = Scene { colliders: &colliders, ..Scene::default() };
    let params = StepParams { warm_start, dt: 1.0 / 240.0, cg_max_iterations: 400, ..StepParams::default() };
    with_cloth(&grid, Material::COTTON, scene, params, 0, |model, state| {
        // Tipped over: the upper edge starts moving sideways.
        let v: Vec<Vec3> = state.positions().iter().map(|p| Vec3::new(0.0, 0.0, 0.8 * p.y)).collect();
        state.set_velocities(&v).unwrap();
        let x: Vec<Vec3> = state.positions().iter().map(|p| *p + Vec3::new(shift, 0.0, 0.0)).collect();
        state.set_positions(&x).unwrap();
        let mut iterations = 0;
        for k in 0..settle + steps {
            let r = step(model, state).unwrap();
            assert!(r.converged, "step {k} did not converge");
            if k >= settle {
                iterations += r.cg_iterations;
            }
        }
        (iterations, state.positions().to_vec())
    })
}

#[test]
fn a_cloth_at_rest_on_colliders_solves_from_its_last_step() {
    let (settle, steps) = (960, 120);
    let (cold, x_cold) = rest_on_ground(false, 0.0, settle, steps);
    let (warm, x_warm) = rest_on_ground(true, 0.0, settle, steps);
    let (_, x_moved) = rest_on_ground(false, 1e-6, settle, steps);
    let rms =
        |a: &[Vec3], b: &[Vec3]| (a.iter().zip(b).map(|(p, q)| (*p - *q).norm2()).sum::<f32>() / a.len() as f32).sqrt();
    let (change, floor) = (rms(&x_cold, &x_warm), rms(&x_cold, &x_moved));
    println!(
        "CG iterations over {steps} steps at rest: {cold} cold, {warm} warm; \
         change {change:.2e} m RMS, against {floor:.2e} m from a start moved 1 µm"
    );
    assert!(cold >= 2 * steps as u32, "the cold solves ({cold} iterations) were not work to save");
    assert!(4 * warm <= cold, "{warm} iterations warm against {cold} cold");
    assert!(change < 3.0 * floor, "the warm start moved the cloth {change} m RMS, a start moved 1 µm {floor} m");
}
