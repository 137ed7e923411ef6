//! Property tests over random cloths, materials, time steps and scenes.
mod common;
use common::*;
use proptest::prelude::*;
use weft_core::model::{Collider, Shape, Taut};
use weft_core::physics::stencil::{BendingStencil, PER_NODE};
use weft_core::physics::{energy, step, StepError};
use weft_core::prelude::*;

fn material() -> impl Strategy<Value = Material> {
    let taut =
        prop::option::of((1e-3f32..0.1, 1.0f32..20.0).prop_map(|(strain, stiffening)| Taut { strain, stiffening }));
    let ranges = (0.05f32..1.0, 50.0f32..5000.0, 0.0f32..0.45, 0.0f32..1e-3, 0.0f32..1.0, 1e-5f32..1e-3, 0.01f32..1.0);
    (ranges, taut).prop_map(
        |((density, stretch, poisson, bending, damping_mass, damping_stiffness, compression), taut)| Material {
            density,
            stretch,
            poisson,
            bending,
            damping_mass,
            damping_stiffness,
            compression,
            taut,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("WEFT_PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48), ..ProptestConfig::default() })]

    /// With damping and no external force, total energy never rises from
    /// one step to the next by more than the step's own allowance (a
    /// twentieth of the energies at stake and the rounding bound of the
    /// energies as the audit evaluates them, the grid's bending stencil
    /// among them: [`weft_core::physics::EnergyAudit`]) without the state
    /// counting it.
    #[test]
    fn damped_cloth_never_gains_energy_uncounted(
        nx in 2usize..10, ny in 2usize..10, size in 0.2f32..2.0,
        mat in material(), dt in 0.001f32..0.04, seed in any::<u64>(), amp in 0.0f32..0.2,
    ) {
        let grid = Grid::horizontal(nx, ny, size, size, 0.0);
        let mut rng = Rng(seed | 1);
        let params = StepParams { dt, cg_tolerance: 1e-6, cg_max_iterations: 2000, ..StepParams::default() };
        with_cloth(&grid, mat, no_gravity(), params, 0, |model, state| {
            let spacing = size / (nx.max(ny) - 1) as f32;
            let x: Vec<Vec3> = state.positions().iter().map(|p| *p + rng.vec3(amp * spacing)).collect();
            state.set_positions(&x).unwrap();
            // The audit measures the bending through the grid's stencil,
            // whose sum of signed squared differences cancels: its rounding
            // bound, as the audit takes it.
            let mut pool = vec![0.0; PER_NODE * model.mesh.node_count()];
            let stencil = BendingStencil::new(&model.mesh, model.material.plate(), &mut pool).unwrap();
            let bound = |x: &[Vec3]| {
                let el = weft_core::physics::elastic(model, x, &mut []);
                el.noise.max(f32::EPSILON * stencil.energy_and_noise(x).1)
            };
            let mut e = energy(model, state.positions(), state.velocities()).total();
            let mut noise0 = bound(state.positions());
            for k in 0..40 {
                let counted = state.warnings.energy_rose;
                step(model, state).unwrap();
                let e1 = energy(model, state.positions(), state.velocities()).total();
                // The energies' own rounding bounds (positions far from the
                // origin cancel in the strains).
                let noise = bound(state.positions());
                let allowed = e + 0.05 * (e + e1) + 4.0 * (noise + noise0) + 8.0 * f32::EPSILON * (e + e1) + 1e-9;
                prop_assert!(e1 <= allowed || state.warnings.energy_rose > counted,
                    "step {}: energy rose {} -> {} (noise {}), not counted", k, e, e1, noise);
                (e, noise0) = (e1, noise);
            }
            Ok(())
        })?;
    }

    /// Random scenes never panic: every step is finite or a typed error
    /// that leaves a finite state.
    #[test]
    fn random_scenes_stay_finite_or_fail_typed(
        nx in 2usize..24, ny in 2usize..24, mat in material(), dt in 0.0005f32..0.05,
        seed in any::<u64>(), n_pins in 0usize..5, n_colliders in 0usize..4, self_contact in any::<bool>(),
        wind in -20.0f32..20.0,
    ) {
        let mut rng = Rng(seed | 1);
        let grid = Grid::horizontal(nx, ny, rng.uniform(0.2, 2.0), rng.uniform(0.2, 2.0), rng.uniform(0.0, 1.0));
        let n = nx * ny;
        let mut pins: Vec<Pin> = Vec::new();
        for _ in 0..n_pins {
            let node = (rng.next_u64() % n as u64) as u16;
            if pins.iter().all(|p| p.node != node) {
                let motion = match rng.next_u64() % 3 {
                    0 => PinMotion::Fixed,
                    1 => PinMotion::Linear { velocity: rng.vec3(1.0) },
                    _ => PinMotion::Oscillate { amplitude: rng.vec3(0.3), frequency: rng.uniform(0.0, 3.0) },
                };
                pins.push(Pin { node, anchor: grid.position(node as usize % nx, node as usize / nx), motion });
            }
        }
        let colliders: Vec<Collider> = (0..n_colliders).map(|_| {
            let shape = match rng.next_u64() % 3 {
                0 => Shape::Plane { normal: Vec3::new(rng.uniform(-0.3, 0.3), 1.0, rng.uniform(-0.3, 0.3)), offset: rng.uniform(-0.5, 0.2) },
                1 => Shape::Sphere { center: rng.vec3(0.5), radius: rng.uniform(0.05, 0.6) },
                _ => Shape::Capsule { a: rng.vec3(0.5), b: rng.vec3(0.5), radius: rng.uniform(0.02, 0.3) },
            };
            Collider { shape, velocity: rng.vec3(0.2), thickness: rng.uniform(0.0, 0.02), friction: rng.uniform(0.0, 1.0) }
        }).collect();
        let scene = Scene {
            pins: &pins,
            colliders: &colliders,
            wind: Some(Wind { gust: 0.5, gust_frequency: 1.0, ..Wind::new(Vec3::new(wind, 0.0, 0.3 * wind)) }),
            ..Scene::default()
        };
        let spacing = 0.2 / nx as f32;
        let params = StepParams {
            dt,
            self_contact: if self_contact { Some(SelfContact { radius: spacing }) } else { None },
            ..StepParams::default()
        };
        with_cloth(&grid, mat, scene, params, 64, |model, state| {
            for _ in 0..8 {
                match step(model, state) {
                    Ok(_) => {}
                    Err(StepError::NonFinite) => {}
                    Err(e) => prop_assert!(false, "unexpected error {:?}", e),
                }
                prop_assert!(state.positions().iter().all(|p| p.is_finite()));
                prop_assert!(state.velocities().iter().all(|p| p.is_finite()));
            }
            Ok(())
        })?;
    }

    /// A cloth falling under gravity onto resting colliders, with fixed
    /// pins and self-contact: every step is finite, the total energy
    /// (kinetic, elastic, gravity) stays within the drop's energy of where
    /// it started unless the state counted a step that gained energy
    /// (`Warnings::energy_rose`), and the run is deterministic (a second
    /// run gives the same bits).
    #[test]
    fn falling_cloth_is_bounded_and_deterministic(
        nx in 2usize..16, ny in 2usize..16, mat in material(), dt in 0.002f32..0.04,
        seed in any::<u64>(), n_pins in 0usize..3, n_colliders in 0usize..3, self_contact in any::<bool>(),
    ) {
        let mut rng = Rng(seed | 1);
        let size = rng.uniform(0.3, 1.5);
        let grid = Grid::horizontal(nx, ny, size, size, 0.5);
        let n = nx * ny;
        let mut pins: Vec<Pin> = Vec::new();
        for _ in 0..n_pins {
            let node = (rng.next_u64() % n as u64) as u16;
            if pins.iter().all(|p| p.node != node) {
                pins.push(Pin::fixed(node, grid.position(node as usize % nx, node as usize / nx)));
            }
        }
        let colliders: Vec<Collider> = (0..n_colliders).map(|_| {
            let shape = match rng.next_u64() % 2 {
                0 => Shape::Plane { normal: Vec3::new(0.0, 1.0, 0.0), offset: rng.uniform(-0.3, 0.3) },
                _ => Shape::Sphere { center: Vec3::new(rng.uniform(-0.3, 0.3), rng.uniform(-0.5, 0.0), rng.uniform(-0.3, 0.3)), radius: rng.uniform(0.05, 0.4) },
            };
            Collider { shape, velocity: Vec3::ZERO, thickness: rng.uniform(0.0, 0.01), friction: rng.uniform(0.0, 1.0) }
        }).collect();
        let scene = Scene { pins: &pins, colliders: &colliders, ..Scene::default() };
        let params = StepParams {
            dt,
            self_contact: if self_contact { Some(SelfContact { radius: 0.3 * size / nx.max(ny) as f32 }) } else { None },
            ..StepParams::default()
        };
        let run = || with_cloth(&grid, mat, scene, params, 8 * n, |model, state| {
            let e0 = energy(model, state.positions(), state.velocities()).total();
            let mut high = e0;
            for _ in 0..12 {
                if step(model, state).is_err() {
                    break;
                }
                high = high.max(energy(model, state.positions(), state.velocities()).total());
            }
            let finite = state.positions().iter().chain(state.velocities()).all(|p| p.is_finite());
            let counted = state.warnings.energy_rose;
            (finite, e0, high, counted, state.positions().to_vec(), state.velocities().to_vec())
        });
        let (finite, e0, high, counted, x, v) = run();
        prop_assert!(finite);
        // The cloth starts at rest 0.5 m up: the drop's energy scale. A step
        // that gains energy is counted; uncounted, none grows past it.
        let drop = 9.81 * mat.density * size * size * 0.5;
        prop_assert!(high <= e0 + drop + 1e-6 || counted > 0, "energy rose from {} to {} uncounted", e0, high);
        let (_, _, _, _, x2, v2) = run();
        prop_assert!(x == x2 && v == v2, "two runs differ");
    }
}
