//! The local–global step ([`weft_core::physics::local_global`]): its factor
//! against the constant matrix it factors, rest and gravity, colliders,
//! and its errors.
mod common;
use common::*;
use weft_core::physics::local_global::{band, factor_floats, Iterations, LocalGlobal, LocalGlobalError};
use weft_core::physics::stencil::Bending;
use weft_core::prelude::*;

/// Buffers for a model's factor and pins.
fn buffers(model: &Model) -> (Vec<f32>, Vec<u8>) {
    let n = model.mesh.node_count();
    (vec![0.0; factor_floats(n, band(&model.mesh))], vec![0; n])
}

/// Runs `steps` local–global steps of `iterations` from rest; returns the
/// positions and velocities.
fn run(model: &Model, steps: u32, iterations: u32) -> (Vec<Vec3>, Vec<Vec3>) {
    let (mut f, mut p) = buffers(model);
    let lg = LocalGlobal::new(model, &mut f, &mut p).unwrap();
    let n = model.mesh.node_count();
    let (mut x, mut v) = (model.mesh.rest().to_vec(), vec![Vec3::ZERO; n]);
    let mut work = vec![vec![Vec3::ZERO; n]; 4];
    let [a, b, c, d] = work.as_mut_slice() else { unreachable!() };
    let bending = Bending::MatrixFree(model.material.plate());
    let iterations = Iterations { count: iterations, chebyshev: None };
    for s in 0..steps {
        let t = f64::from(s) * f64::from(model.params.dt);
        lg.step(model, bending, iterations, t, &mut x, &mut v, [a, b, c, d]).unwrap();
    }
    (x, v)
}

#[test]
fn the_factor_solves_the_constant_matrix() {
    let grid = Grid::horizontal(6, 5, 0.5, 0.4, 1.0);
    let params = StepParams::default();
    with_pinned(&grid, Material::COTTON, &[0, 5], params, |model, _| {
        let (mut f, mut p) = buffers(model);
        let lg = LocalGlobal::new(model, &mut f, &mut p).unwrap();
        assert_eq!(lg.band(), 6 + 1, "a grid's band is a row and a diagonal");
        let n = model.mesh.node_count();
        let mut rng = Rng(7);
        let r: Vec<Vec3> = (0..n).map(|_| rng.vec3(1.0)).collect();
        let mut x = r.clone();
        lg.solve(&mut x);
        // Q x from the triangles, as the module's doc defines Q.
        let pinned = |i: usize| i == 0 || i == 5;
        let h = params.dt;
        let (mu, _) = model.material.lame();
        let mut qx: Vec<Vec3> = (0..n).map(|i| x[i] * (model.mass(i) / (h * h))).collect();
        for t in model.mesh.triangles() {
            for (&a, ga) in t.nodes.iter().zip(&t.grad) {
                for (&c, gc) in t.nodes.iter().zip(&t.grad) {
                    let (i, j) = (a as usize, c as usize);
                    if !pinned(i) && !pinned(j) {
                        qx[i] += x[j] * (2.0 * mu * t.area * (ga[0] * gc[0] + ga[1] * gc[1]));
                    }
                }
            }
        }
        for i in [0, 5] {
            qx[i] = x[i];
        }
        let scale = r.iter().map(|v| v.norm()).fold(0.0f32, f32::max);
        let worst = qx.iter().zip(&r).map(|(a, b)| (*a - *b).norm()).fold(0.0f32, f32::max);
        assert!(worst < 1e-4 * scale, "Q Q⁻¹ r differs from r by {worst:e} (r up to {scale})");
    });
}

#[test]
fn a_cloth_at_rest_without_gravity_stays_at_rest() {
    let grid = Grid::horizontal(8, 8, 0.6, 0.6, 0.5);
    with_cloth(&grid, Material::COTTON, no_gravity(), StepParams::default(), 0, |model, _| {
        let (x, v) = run(model, 20, 10);
        let moved = x.iter().zip(model.mesh.rest()).map(|(a, b)| (*a - *b).norm()).fold(0.0f32, f32::max);
        let speed = v.iter().map(|v| v.norm()).fold(0.0f32, f32::max);
        assert!(moved < 1e-6 && speed < 1e-4, "moved {moved:e} m, speed {speed:e} m/s");
    });
}

#[test]
fn a_hanging_cloth_holds_its_pins_and_barely_stretches() {
    let grid = Grid::horizontal(8, 8, 0.6, 0.6, 1.0);
    with_pinned(&grid, Material::COTTON, &[56, 63], StepParams::default(), |model, _| {
        let (x, _) = run(model, 120, 20);
        for i in [56, 63] {
            assert_eq!(x[i], model.mesh.rest()[i], "pin {i} moved");
        }
        let strain = model
            .mesh
            .edges()
            .iter()
            .map(|e| {
                let (a, b) = (e.a as usize, e.b as usize);
                (x[a] - x[b]).norm() / (model.mesh.rest()[a] - model.mesh.rest()[b]).norm() - 1.0
            })
            .fold(0.0f32, f32::max);
        let drop = model.mesh.rest()[0].y - x[0].y;
        assert!(drop > 0.3, "the free corner fell {drop} m");
        assert!(strain < 0.05, "an edge stretched by {strain}");
    });
}

#[test]
fn the_ground_holds_a_dropped_cloth() {
    let grid = Grid::horizontal(8, 8, 0.6, 0.6, 0.05);
    let ground = [Collider::new(Shape::Plane { normal: Vec3::new(0.0, 1.0, 0.0), offset: 0.0 })];
    let scene = Scene { colliders: &ground, ..Scene::default() };
    with_cloth(&grid, Material::COTTON, scene, StepParams::default(), 0, |model, _| {
        let (x, v) = run(model, 60, 10);
        let lowest = x.iter().map(|p| p.y).fold(f32::INFINITY, f32::min);
        let into = v.iter().map(|v| v.y).fold(f32::INFINITY, f32::min);
        assert!(lowest >= ground[0].thickness - 1e-5, "a node at y = {lowest}");
        assert!(into > -1e-3, "a node moves into the ground at {into} m/s");
    });
}

#[test]
fn short_buffers_wrong_lengths_and_non_finite_steps_are_errors() {
    let grid = Grid::horizontal(5, 5, 0.4, 0.4, 1.0);
    with_cloth(&grid, Material::COTTON, Scene::default(), StepParams::default(), 0, |model, _| {
        let n = model.mesh.node_count();
        let (mut f, mut p) = buffers(model);
        let mut short = vec![0.0; f.len() - 1];
        assert!(matches!(LocalGlobal::new(model, &mut short, &mut p), Err(LocalGlobalError::Storage { .. })));
        let lg = LocalGlobal::new(model, &mut f, &mut p).unwrap();
        let bending = Bending::MatrixFree(model.material.plate());
        let mut work = vec![vec![Vec3::ZERO; n]; 4];
        let [a, b, c, d] = work.as_mut_slice() else { unreachable!() };
        let five = Iterations { count: 5, chebyshev: None };
        let mut x = model.mesh.rest().to_vec();
        let mut v = vec![Vec3::ZERO; n - 1];
        assert_eq!(lg.step(model, bending, five, 0.0, &mut x, &mut v, [a, b, c, d]), Err(LocalGlobalError::Length));
        let mut v = vec![Vec3::ZERO; n];
        v[3] = Vec3::new(f32::NAN, 0.0, 0.0);
        let (x0, v0) = (x.clone(), v.clone());
        assert_eq!(lg.step(model, bending, five, 0.0, &mut x, &mut v, [a, b, c, d]), Err(LocalGlobalError::NonFinite));
        assert_eq!(x, x0, "positions changed by a failed step");
        let bits = |v: &[Vec3]| v.iter().flat_map(|p| [p.x, p.y, p.z].map(f32::to_bits)).collect::<Vec<_>>();
        assert_eq!(bits(&v), bits(&v0), "velocities changed by a failed step");
    });
}

#[test]
fn a_hanging_strip_matches_the_bar_elongation() {
    // The membrane `μ A ‖F − R‖²` along a strip is as stiff as `2μ`, which
    // is Young's modulus when ν = 0: the bar's elongation, as the
    // linearised step's own test (`dynamics.rs`) holds it.
    let strip = HangingStrip::new();
    let params = StepParams { dt: 0.02, ..StepParams::default() };
    with_pinned(&strip.grid, strip.material, &strip.top, params, |model, _| {
        let (x, v) = run(model, 1500, 50);
        strip.assert_elongation(&x, &v);
    });
}
