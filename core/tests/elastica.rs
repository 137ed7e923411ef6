//! Bending against the exact heavy elastica: a cantilever strip clamped
//! along two node columns droops under its own weight. With plate
//! stiffness `D`, areal density `ρ` and `c = (D / ρg)^(1/3)`, the angle of
//! the chord from the clamp to the tip depends only on the overhang `l/c`;
//! the exact value comes from shooting the elastica ODE here.
//!
//! The strips here have ν = 0 (no anticlastic curl near the clamp to
//! model): a beam of stiffness `D` per unit width. A simply supported plate
//! against Navier's solution checks the twisting term the strips do not use.
mod common;
use common::*;
use weft_core::physics::step;
use weft_core::prelude::*;

/// `θ'' = −(l − σ) cos θ`, `θ(0) = 0`, `θ'(l) = 0` (σ = s/c, θ the droop
/// below horizontal): the chord angle (degrees) of the exact solution, by
/// RK4 and bisection on `θ'(0)` (f64).
fn elastica_chord_angle(l: f64) -> f64 {
    let n = 4000;
    let h = l / n as f64;
    let run = |k0: f64| {
        // State: θ, θ', x, y.
        let f = |s: f64, y: [f64; 4]| [y[1], -(l - s) * y[0].cos(), y[0].cos(), -y[0].sin()];
        let mut y = [0.0, k0, 0.0, 0.0];
        for i in 0..n {
            let s = i as f64 * h;
            let k1 = f(s, y);
            let add =
                |a: [f64; 4], b: [f64; 4], t: f64| [a[0] + t * b[0], a[1] + t * b[1], a[2] + t * b[2], a[3] + t * b[3]];
            let k2 = f(s + 0.5 * h, add(y, k1, 0.5 * h));
            let k3 = f(s + 0.5 * h, add(y, k2, 0.5 * h));
            let k4 = f(s + h, add(y, k3, h));
            for j in 0..4 {
                y[j] += h / 6.0 * (k1[j] + 2.0 * k2[j] + 2.0 * k3[j] + k4[j]);
            }
        }
        y
    };
    // θ'(l) grows with θ'(0); the root curvature lies in [0, l²/2].
    let (mut lo, mut hi) = (0.0, 0.5 * l * l);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if run(mid)[1] > 0.0 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let y = run(0.5 * (lo + hi));
    (-y[3]).atan2(y[2]).to_degrees()
}

/// The FEM strip's chord angle (degrees): `cells + ½` cells along the
/// overhang `l·c`, `across` cells of width `aspect × ` the cell length across it,
/// one more cell in the clamp (two node columns pinned), settled by
/// damped steps. Settled means that its chord angle at steps 500, 550 and
/// 600 lies within 0.1° (a tenth of what the elastica test allows; a
/// strip still swinging moves by degrees) and no node moves faster than
/// 1e-3 m/s. Neither goes to zero: from step 400 on the strips jitter at a
/// rounding floor, up to 0.02° and 1e-5 to about 1e-4 m/s from step to
/// step, not decreasing, which a bound on the last step's speed alone
/// would sample.
fn strip_chord_angle(l: f32, cells: usize, across: usize, aspect: f32) -> f32 {
    let mat = Material { poisson: 0.0, damping_mass: 8.0, ..Material::COTTON };
    let c = (mat.bending / (mat.density * 9.81)).powf(1.0 / 3.0);
    // Two pinned node columns hold the slope zero across the cell between
    // them, at its centre (the ghost-cell clamp): the overhang starts there.
    let dx = l * c / (cells as f32 + 0.5);
    let grid = Grid::horizontal(cells + 2, across + 1, dx * (cells + 1) as f32, dx * aspect * across as f32, 0.0);
    let clamp: Vec<usize> = (0..grid.ny).flat_map(|j| [grid.node(0, j), grid.node(1, j)]).collect();
    let params = StepParams { dt: 0.01, cg_tolerance: 1e-6, cg_max_iterations: 2000, ..StepParams::default() };
    with_pinned(&grid, mat, &clamp, params, |model, state| {
        let angle = |x: &[Vec3]| {
            let mean = |i: usize| {
                (0..grid.ny).map(|j| x[grid.node(i, j)]).fold(Vec3::ZERO, |a, p| a + p) * (1.0 / grid.ny as f32)
            };
            let d = mean(grid.nx - 1) - (mean(0) + mean(1)) * 0.5;
            (-d.y).atan2(d.x).to_degrees()
        };
        let mut angles = Vec::new();
        for k in 1..=600 {
            step(model, state).unwrap();
            if k >= 500 && k % 50 == 0 {
                angles.push(angle(state.positions()));
            }
        }
        let v = state.velocities().iter().map(|v| v.norm()).fold(0.0, f32::max);
        let drift = angles.iter().map(|a| (a - angles[0]).abs()).fold(0.0, f32::max);
        assert!(
            drift < 0.1 && v < 1e-3,
            "strip not at rest: the chord angle moved {drift}° (steps 500–600), |v| = {v}"
        );
        angle(state.positions())
    })
}

#[test]
fn shooting_reproduces_the_tabulated_elastica() {
    // Independent values of the heavy cantilever elastica's chord angle.
    for (l, deg) in [(1.5, 22.18), (2.0, 41.49), (2.5, 56.89)] {
        let a = elastica_chord_angle(l);
        assert!((a - deg).abs() < 0.01, "l/c {l}: {a:.3}° vs {deg}°");
    }
}

#[test]
fn cantilever_matches_the_elastica_within_a_degree_on_three_cell_shapes() {
    // (cell width / length, cells across)
    for (aspect, across) in [(1.0f32, 2), (0.25, 4), (4.0, 1)] {
        for l in [1.5f32, 2.0, 2.5] {
            let exact = elastica_chord_angle(l as f64) as f32;
            let a = strip_chord_angle(l, 16, across, aspect);
            println!("l/c {l}: cells 1:{aspect} → {a:.3}° (exact {exact:.3}°, {:+.3}°)", a - exact);
            assert!((a - exact).abs() < 1.0, "l/c {l}, cells 1:{aspect}: {a:.3}° vs exact {exact:.3}°");
        }
    }
}

#[test]
fn cantilever_converges_under_refinement() {
    let exact = elastica_chord_angle(2.0) as f32;
    let errors: Vec<f32> =
        [6usize, 12, 24].iter().map(|&cells| (strip_chord_angle(2.0, cells, 2, 1.0) - exact).abs()).collect();
    println!("chord-angle errors at 6 / 12 / 24 cells: {errors:?}");
    // At least first order: each halving of the cell at least halves the error.
    assert!(errors[1] < 0.5 * errors[0] && errors[2] < 0.5 * errors[1], "no convergence: {errors:?}");
}
/// Centre deflection of a square plate, its border nodes pinned (simply
/// supported: the border triangles' free unknowns leave the edge moment
/// free), sagging under its own weight; settled by damped steps. Stiff
/// enough that the sag is far below the membrane's reach.
fn plate_centre_sag(n: usize) -> f32 {
    let mat = Material { bending: 1.0, damping_mass: 200.0, ..Material::COTTON };
    let side = 0.5;
    let grid = Grid::horizontal(n, n, side, side, 0.0);
    let border: Vec<usize> =
        (0..n * n).filter(|&k| k % n == 0 || k / n == 0 || k % n == n - 1 || k / n == n - 1).collect();
    let params = StepParams { dt: 0.01, cg_tolerance: 1e-7, cg_max_iterations: 4000, ..StepParams::default() };
    with_pinned(&grid, mat, &border, params, |model, state| {
        for _ in 0..300 {
            step(model, state).unwrap();
        }
        let c = grid.node(n / 2, n / 2);
        (state.positions()[c] - model.mesh.rest()[c]).y
    })
}

#[test]
fn simply_supported_plate_matches_navier() {
    // Navier's series for a uniformly loaded, simply supported square plate
    // of side a: w = 0.00406235 q a⁴ / D at the centre, whatever ν (the
    // twisting moments carry part of the load: a model without them sags
    // too far, one too stiff in twist too little).
    let mat = Material { bending: 1.0, ..Material::COTTON };
    let navier = 0.00406235 * mat.density * 9.81 * 0.5f32.powi(4) / mat.bending;
    let sags: Vec<f32> = [9usize, 17].iter().map(|&n| -plate_centre_sag(n) / navier).collect();
    println!("centre sag / Navier at 8 and 16 cells: {sags:?}");
    for s in &sags {
        assert!((s - 1.0).abs() < 0.03, "sag / Navier {sags:?}");
    }
    assert!((sags[1] - 1.0).abs() < (sags[0] - 1.0).abs(), "no convergence: {sags:?}");
}
