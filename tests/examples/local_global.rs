//! A local–global (projective-dynamics) step on the device's scenes, plain,
//! side by side with the linearised backward-Euler step of `weft-core`: a
//! constant matrix factored once (banded Cholesky, the grid's natural order)
//! and a fixed number of local projections and global solves a step.
//!
//! ```sh
//! cargo run --release -p weft-tests --example local_global -- [drape] [chebyshev=0.95] 200 5 10 20   # accuracy
//! cargo run --release -p weft-tests --example local_global -- bench [drape] [chebyshev=0.95] 5 10 20 # time
//! cargo run --release -p weft-tests --example local_global -- cantilever 10 50 200             # the elastica
//! ```
//!
//! Accuracy: the positions' RMS distance after 1, 5, 15, 30 and 60 steps
//! from `weft-core`'s step at a quarter of the time step solved to 1e-6,
//! for `weft-core`'s step at the device's settings and for the local–global
//! step at each iteration count; and each count's distance from the first
//! (the most iterations). Time: 60 steps, the median of 15 runs in turn.
//!
//! Cantilever: the strip of the elastica test (`core/tests/elastica.rs`:
//! overhang l/c = 2 in 16½ cells, two across, ν = 0, clamped by two node
//! columns, 600 steps of 0.01 s) with the local–global step at each
//! count, its chord angle against the heavy elastica's 41.49°.
//!
//! The local–global step and its model: `weft_core::physics::local_global`.
#[path = "../host.rs"]
mod host;
use weft_core::math::Vec3;
use weft_core::mesh::{Grid, Mesh, NodeId};
use weft_core::model::{Material, Model, Pin, Scene, StepParams};
use weft_core::physics::local_global::{self, Iterations, LocalGlobal};
use weft_core::physics::stencil::Bending;
use weft_host::sim::storage::VecMeshStorage;
use weft_tests::scene::{self, Scenario};

/// Steps after which positions are compared.
const AT: [u32; 5] = [1, 5, 15, 30, 60];

/// The local–global step at `iterations`: positions after each of
/// [`AT`]'s steps, the run's time and its final checksum.
fn local_global(scenario: Scenario, iterations: Iterations) -> (Vec<Vec<Vec3>>, f64, u32) {
    let mut out = Vec::new();
    let clock = std::time::Instant::now();
    let sum = host::local_global(scenario, iterations, |s, x| {
        if AT.contains(&(s + 1)) {
            out.push(x.to_vec());
        }
    });
    (out, clock.elapsed().as_secs_f64(), sum)
}

/// `weft-core`'s plain step: positions after each of [`AT`]'s steps
/// (`per` steps a frame), and the run's time.
fn linearised(scenario: Scenario, params: StepParams, per: u32) -> (Vec<Vec<Vec3>>, f64) {
    let mut out = Vec::new();
    let clock = std::time::Instant::now();
    host::run(scenario, params, false, per * scene::STEPS, |s, _, _, state| {
        if (s + 1) % per == 0 && AT.contains(&((s + 1) / per)) {
            out.push(state.positions().to_vec());
        }
    });
    (out, clock.elapsed().as_secs_f64())
}

fn rms(a: &[Vec3], b: &[Vec3]) -> f32 {
    (a.iter().zip(b).map(|(p, q)| (*p - *q).norm2()).sum::<f32>() / a.len() as f32).sqrt()
}

fn distances(a: &[Vec<Vec3>], b: &[Vec<Vec3>]) -> String {
    AT.iter().zip(a.iter().zip(b)).map(|(s, (a, b))| format!("{s}: {:.2e}", rms(a, b))).collect::<Vec<_>>().join("  ")
}

/// The elastica test's strip ([`cantilever`]) at each iteration count.
fn cantilever(counts: &[u32], chebyshev: Option<f32>) {
    const EXACT: f32 = 41.49;
    let (l, cells, across) = (2.0f32, 16usize, 2usize);
    let mat = Material { poisson: 0.0, damping_mass: 8.0, ..Material::COTTON };
    let c = (mat.bending / (mat.density * 9.81)).powf(1.0 / 3.0);
    let dx = l * c / (cells as f32 + 0.5);
    let grid = Grid::horizontal(cells + 2, across + 1, dx * (cells + 1) as f32, dx * across as f32, 0.0);
    let mut storage = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(&grid, storage.storage()).expect("a grid");
    let clamp = (0..grid.ny).flat_map(|j| [grid.node(0, j), grid.node(1, j)]);
    let pins: Vec<Pin> = clamp.map(|i| Pin::fixed(i as NodeId, mesh.rest()[i])).collect();
    let params = StepParams { dt: 0.01, ..StepParams::default() };
    let model = Model::new(mesh, mat, Scene { pins: &pins, ..Scene::default() }, params).expect("the strip");
    let n = model.mesh.node_count();
    let bending = Bending::MatrixFree(model.material.plate());
    for &count in counts {
        let (mut factor, mut pinned) =
            (vec![0.0; local_global::factor_floats(n, local_global::band(&model.mesh))], vec![0; n]);
        let step = LocalGlobal::new(&model, &mut factor, &mut pinned).expect("a definite matrix");
        let (mut x, mut v) = (model.mesh.rest().to_vec(), vec![Vec3::ZERO; n]);
        let mut work = vec![vec![Vec3::ZERO; n]; 4];
        let [a, b, c, d] = work.as_mut_slice() else { unreachable!("four vectors") };
        for s in 0..600 {
            let t = f64::from(s) * f64::from(params.dt);
            step.step(&model, bending, Iterations { count, chebyshev }, t, &mut x, &mut v, [a, b, c, d])
                .expect("a step");
        }
        let mean =
            |i: usize| (0..grid.ny).map(|j| x[grid.node(i, j)]).fold(Vec3::ZERO, |a, p| a + p) * (1.0 / grid.ny as f32);
        let chord = mean(grid.nx - 1) - (mean(0) + mean(1)) * 0.5;
        let angle = (-chord.y).atan2(chord.x).to_degrees();
        let speed = v.iter().map(|v| v.norm()).fold(0.0f32, f32::max);
        println!("local-global, {count} iterations: chord angle {angle:.2}° (the elastica: {EXACT}°), |v| up to {speed:.1e} m/s");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scenario = if args.iter().any(|a| a == "drape") { Scenario::Drape } else { Scenario::Swing };
    let mut counts: Vec<u32> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if counts.is_empty() {
        counts = vec![200, 5, 10, 20];
    }
    let chebyshev = args.iter().find_map(|a| a.strip_prefix("chebyshev=")).and_then(|r| r.parse().ok());
    if args.iter().any(|a| a == "cantilever") {
        cantilever(&counts, chebyshev);
        return;
    }
    let at = |count: u32| Iterations { count, chebyshev };
    let params = scene::params();
    let (band, floats) = (scene::local_global::BAND, scene::local_global::FACTOR);
    println!("{}: the factor's band {band} ({floats} floats, {} bytes in f32)", scenario.name(), 4 * floats);
    if args.iter().any(|a| a == "bench") {
        const RUNS: usize = 15;
        let mut times = vec![Vec::with_capacity(RUNS); counts.len() + 1];
        for _ in 0..RUNS {
            times[0].push(linearised(scenario, params, 1).1);
            for (k, &i) in counts.iter().enumerate() {
                times[k + 1].push(local_global(scenario, at(i)).1);
            }
        }
        let median = |t: &mut Vec<f64>| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        };
        let today = median(&mut times[0]);
        println!("linearised step, {} steps: {:.2} ms (median of {RUNS})", scene::STEPS, today * 1e3);
        for (k, t) in counts.iter().zip(&mut times[1..]) {
            let m = median(t);
            println!("local-global, {k} iterations: {:.2} ms, {:.2} of the linearised step's time", m * 1e3, m / today);
        }
        return;
    }
    let (today, _) = linearised(scenario, params, 1);
    let tight = StepParams { dt: params.dt * 0.25, cg_tolerance: 1e-6, cg_max_iterations: 20_000, ..params };
    let (reference, _) = linearised(scenario, tight, 4);
    println!("RMS distance (m) after steps from the linearised step at dt/4 solved to 1e-6:");
    println!("  linearised step (the device's settings): {}", distances(&today, &reference));
    let runs: Vec<_> = counts.iter().map(|&k| local_global(scenario, at(k))).collect();
    for (k, (x, _, sum)) in counts.iter().zip(&runs) {
        println!("  local-global, {k} iterations: {}  (checksum {sum:08x})", distances(x, &reference));
    }
    println!("from local-global at {} iterations:", counts[0]);
    for (k, (x, _, _)) in counts.iter().zip(&runs).skip(1) {
        println!("  local-global, {k} iterations: {}", distances(x, &runs[0].0));
    }
}
