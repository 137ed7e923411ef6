//! How far a coarse grain per triangle could take the coarse step: an upper
//! bound for a network that would predict every triangle's membrane factor.
//!
//! For each trajectory of a split, rollouts of 10 frames from frames 0 and
//! 100 (two of `weft eval --horizons`' starts) on the membrane grained by
//! `STRETCH COMPRESSION`. At every frame of the *per-triangle* column, each
//! triangle's membrane energy gets its own factor (on top of the grain),
//! fitted to the reference's next frame: [`GAUSS_NEWTON`] Gauss–Newton
//! steps on the log-factors' finite-difference Jacobian (a coarse step per
//! factor), ridge-damped and bounded to [`LOW`, `HIGH`], each halved while
//! it does not lower the error; the rollout goes on from the step taken with them. The *node
//! mass* column fits a factor on every node's mass instead (its weight with
//! it: inertia against the elastic forces), and *both* fits the two sets
//! together. The *per-frame* column fits one membrane factor for the whole
//! cloth per frame (the best of a ladder, from which the others start;
//! `FACTORS=1` prints the factors chosen). Beside them: plain and the grain
//! alone. Prints each column × plain at 1 and 10 frames, per family and
//! overall (the mean errors of the windows every column finished).
//!
//! The fitted factors see the reference, so these columns bound what a
//! network predicting such factors from the state, one frame at a time,
//! could do (factors chosen for a whole window could do somewhat better;
//! that is not measured here); they are not a method.
//! (`[GAUSS_NEWTON=N] cargo run --release -p weft-host --example grain_oracle -- DATA [SPLIT [STRETCH COMPRESSION [RIDGE]]]`)
use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use weft_core::mesh::{MeshParts, Triangle};
use weft_core::model::CoarseGrain;
use weft_core::prelude::*;
use weft_host::learn::data::metrics::{mean, rmse};
use weft_host::learn::data::{self, Trajectory};
use weft_host::sim::build::{self, ModelParts};
use weft_host::sim::storage::VecStateStorage;

const STARTS: [usize; 2] = [0, 100];
const FRAMES: usize = 10;
/// Bounds on a triangle's factor (a multiplier on the grained membrane).
const LOW: f32 = 0.05;
const HIGH: f32 = 4.0;
/// Relative finite-difference step on a factor.
const DELTA: f32 = 0.1;
/// Gauss–Newton steps per frame from the best whole-cloth factor, unless
/// `GAUSS_NEWTON` says otherwise.
const GAUSS_NEWTON: usize = 3;
/// The whole cloth's factor ladder (the per-frame column; the per-triangle fit starts from its best).
const LADDER: [f32; 10] = [0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0];

/// Column order in the output.
const COLUMNS: [&str; 6] = ["plain", "grain", "per frame", "per triangle", "node mass", "both"];

/// One coarse step from `(x, v)` at `step` with every triangle's membrane
/// energy times its factor in `scale` (the first of them) and every node's
/// mass (and so its weight) times its own (the rest).
fn step_scaled(base: &Model, scale: &[f32], state: &mut State, x: &[Vec3], v: &[Vec3], step: u64) -> Result<Vec<Vec3>> {
    let parts = base.mesh.parts();
    let nt = parts.triangles.len();
    let tris: Vec<Triangle> =
        parts.triangles.iter().zip(scale).map(|(t, &s)| Triangle { area: t.area * s, ..*t }).collect();
    let area: Vec<f32> = parts.node_area.iter().zip(&scale[nt..]).map(|(a, &s)| a * s).collect();
    let mesh = Mesh::from_parts(MeshParts { triangles: &tris, node_area: &area, ..parts })?;
    let model = Model::new(mesh, base.material, base.scene, base.params).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    state.set_positions(x)?;
    state.set_velocities(v)?;
    state.set_steps(step)?;
    physics::step(&model, state)?;
    Ok(state.positions().to_vec())
}

/// Solves `(A + μ I) d = b` for symmetric positive definite `A` (row-major
/// `n × n`) by Cholesky.
fn ridge_solve(a: &[f64], b: &[f64], n: usize, mu: f64) -> Vec<f64> {
    let mut l = vec![0.0f64; n * n];
    for i in 0..n {
        for j in 0..=i {
            let mut s = a[i * n + j] + if i == j { mu } else { 0.0 };
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            l[i * n + j] = if i == j { s.max(1e-300).sqrt() } else { s / l[j * n + j] };
        }
    }
    let mut y = vec![0.0; n];
    for i in 0..n {
        let s: f64 = (0..i).map(|k| l[i * n + k] * y[k]).sum();
        y[i] = (b[i] - s) / l[i * n + i];
    }
    let mut d = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| l[k * n + i] * d[k]).sum();
        d[i] = (y[i] - s) / l[i * n + i];
    }
    d
}

/// The positions of the step from `(x, v)` with the factors numbered in
/// `free` (indices into [`step_scaled`]'s scale) fitted to `target`.
fn fit_factors(
    model: &Model,
    state: &mut State,
    at: (&[Vec3], &[Vec3], u64),
    target: &[Vec3],
    ridge: f64,
    free: &[usize],
) -> Result<Vec<Vec3>> {
    let (mut scale, mut xs) = fit_whole(model, state, at, target)?;
    let steps = std::env::var("GAUSS_NEWTON").ok().and_then(|s| s.parse().ok()).unwrap_or(GAUSS_NEWTON);
    for _ in 0..steps {
        (scale, xs) = gauss_newton(model, state, at, target, ridge, scale, free)?;
    }
    Ok(xs)
}

/// One Gauss–Newton step on the factors numbered in `free` from `scale`:
/// the factors and the positions they give (`scale`'s own when no step
/// lowers the error).
fn gauss_newton(
    model: &Model,
    state: &mut State,
    (x, v, step): (&[Vec3], &[Vec3], u64),
    target: &[Vec3],
    ridge: f64,
    scale: Vec<f32>,
    free: &[usize],
) -> Result<(Vec<f32>, Vec<Vec3>)> {
    let n = free.len();
    let base = step_scaled(model, &scale, state, x, v, step)?;
    let rows = base.len() * 3;
    let flat = |p: &[Vec3]| p.iter().flat_map(|q| [q.x as f64, q.y as f64, q.z as f64]).collect::<Vec<f64>>();
    let b0 = flat(&base);
    let mut jac = vec![0.0f64; rows * n];
    for (e, &k) in free.iter().enumerate() {
        let mut s = scale.clone();
        s[k] *= 1.0 + DELTA;
        let xe = flat(&step_scaled(model, &s, state, x, v, step)?);
        for r in 0..rows {
            // d x / d ln(factor)
            jac[r * n + e] = (xe[r] - b0[r]) / (DELTA as f64).ln_1p();
        }
    }
    let resid: Vec<f64> = flat(target).iter().zip(&b0).map(|(t, b)| t - b).collect();
    let mut jtj = vec![0.0f64; n * n];
    let mut jtr = vec![0.0f64; n];
    for r in 0..rows {
        let row = &jac[r * n..(r + 1) * n];
        for i in 0..n {
            if row[i] == 0.0 {
                continue;
            }
            jtr[i] += row[i] * resid[r];
            for j in 0..=i {
                jtj[i * n + j] += row[i] * row[j];
            }
        }
    }
    for i in 0..n {
        for j in 0..i {
            jtj[j * n + i] = jtj[i * n + j];
        }
    }
    let trace = (0..n).map(|i| jtj[i * n + i]).sum::<f64>() / n as f64;
    let d = ridge_solve(&jtj, &jtr, n, ridge * trace.max(1e-30));
    let mut best = (scale.clone(), rmse(&base, target), base);
    let mut step_len = 1.0f64;
    for _ in 0..4 {
        let mut s = scale.clone();
        for (&di, &k) in d.iter().zip(free) {
            s[k] = (scale[k] as f64 * (step_len * di).exp()).clamp(LOW as f64, HIGH as f64) as f32;
        }
        let xs = step_scaled(model, &s, state, x, v, step)?;
        let err = rmse(&xs, target);
        if err < best.1 {
            best = (s, err, xs);
            break;
        }
        step_len *= 0.5;
    }
    Ok((best.0, best.2))
}

/// The best of [`LADDER`] as one factor on every triangle.
fn fit_whole(
    model: &Model,
    state: &mut State,
    (x, v, step): (&[Vec3], &[Vec3], u64),
    target: &[Vec3],
) -> Result<(Vec<f32>, Vec<Vec3>)> {
    let (nt, nn) = (model.mesh.triangles().len(), model.mesh.node_count());
    let mut best: Option<(f32, Vec<f32>, Vec<Vec3>)> = None;
    for c in LADDER {
        let mut s = vec![c; nt];
        s.resize(nt + nn, 1.0);
        let xs = step_scaled(model, &s, state, x, v, step)?;
        let err = rmse(&xs, target);
        if best.as_ref().is_none_or(|b| err < b.0) {
            best = Some((err, s, xs));
        }
    }
    best.map(|b| (b.1, b.2)).context("empty ladder")
}

/// The errors of column `col` over `FRAMES` frames from frame `s`.
fn window(t: &Trajectory, s: usize, col: usize, grain: CoarseGrain, ridge: f64) -> Result<Vec<f32>> {
    let g = if col == 0 { CoarseGrain::NONE } else { grain };
    let scn = &t.scenario;
    if scn.time.substeps != 1 {
        bail!("the coarse scenario takes {} steps a frame; one is expected", scn.time.substeps);
    }
    let mut parts = ModelParts::default();
    let model = &build::model(scn, g, &mut parts)?;
    let mut storage = VecStateStorage::new(model, scn.max_pairs());
    let mut state = build::start(scn, model, &mut storage)?;
    let h = model.params.dt;
    let (mut x, mut v) = (t.x[s].clone(), t.v[s].clone());
    let (nt, nn) = (model.mesh.triangles().len(), model.mesh.node_count());
    let mut errs = Vec::with_capacity(FRAMES);
    let mut chosen = Vec::new();
    for f in 0..FRAMES.min(t.x.len() - 1 - s) {
        let target = &t.x[s + f + 1];
        let at = (x.as_slice(), v.as_slice(), (s + f) as u64);
        let next = match col {
            2 => {
                let (scale, next) = fit_whole(model, &mut state, at, target)?;
                chosen.push(scale[0]);
                next
            }
            3..=5 => {
                let free: Vec<usize> = match col {
                    3 => (0..nt).collect(),
                    4 => (nt..nt + nn).collect(),
                    _ => (0..nt + nn).collect(),
                };
                fit_factors(model, &mut state, at, target, ridge, &free)?
            }
            _ => step_scaled(model, &vec![1.0; nt + nn], &mut state, at.0, at.1, at.2)?,
        };
        // Backward Euler with one step a frame: x' = x + h v', except
        // where the strain limiter moved positions further than the
        // velocities (docs/results/2026-12-06-learning.md gives what that changes).
        v = next.iter().zip(&x).map(|(a, b)| (*a - *b) * (1.0 / h)).collect();
        x = next;
        errs.push(rmse(&x, target));
    }
    if std::env::var_os("FACTORS").is_some() && !chosen.is_empty() {
        eprintln!("factors {} {} from {s}: {chosen:?}", t.family.name(), t.seed);
    }
    Ok(errs)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let data = std::path::Path::new(args.get(1).context("DATA")?);
    let split = args.get(2).map_or("val", |s| s.as_str());
    let stretch = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(0.4);
    let compression = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(0.4);
    let ridge = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(1e-3);
    let grain = CoarseGrain { stretch, compression, taut: None };
    let trajs = data::load_split(data, Some(split))?;
    let jobs: Vec<(usize, usize, usize)> = (0..trajs.len())
        .flat_map(|i| STARTS.iter().flat_map(move |&s| (0..COLUMNS.len()).map(move |c| (i, s, c))))
        .filter(|&(i, s, _)| s + FRAMES < trajs[i].x.len())
        .collect();
    let t0 = std::time::Instant::now();
    let rows: Vec<((usize, usize, usize), Vec<f32>)> = jobs
        .par_iter()
        .filter_map(|&(i, s, c)| match window(&trajs[i], s, c, grain, ridge) {
            Ok(e) if e.len() == FRAMES => Some(((i, s, c), e)),
            Ok(_) => None,
            Err(e) => {
                eprintln!("{} {} from {s}, {}: {e:#}", trajs[i].family.name(), trajs[i].seed, COLUMNS[c]);
                None
            }
        })
        .collect();
    let errs = |key| rows.iter().find(|r| r.0 == key).map(|r| [r.1[0] as f64, mean(&r.1) as f64]);
    // Per family and overall, per column: the sums of the errors at 1 and 10 frames over the
    // windows every column finished.
    let mut fams: std::collections::BTreeMap<&str, (usize, Vec<[f64; 2]>)> = Default::default();
    for &(i, s, c) in &jobs {
        if c != 0 {
            continue;
        }
        let cols: Option<Vec<[f64; 2]>> = (0..COLUMNS.len()).map(|c| errs((i, s, c))).collect();
        let Some(cols) = cols else { continue };
        for name in [trajs[i].family.name(), "all"] {
            let e = fams.entry(name).or_insert_with(|| (0, vec![[0.0; 2]; COLUMNS.len()]));
            e.0 += 1;
            for (sum, col) in e.1.iter_mut().zip(&cols) {
                sum[0] += col[0];
                sum[1] += col[1];
            }
        }
    }
    println!(
        "grain: stretch × {stretch}, compression × {compression}; ridge {ridge}; {split}: {} trajectories",
        trajs.len()
    );
    println!("mean error × plain's at 1 / 10 frames; {:.0} s", t0.elapsed().as_secs_f64());
    println!("{:<8} {:>4} | {}", "family", "win", COLUMNS.map(|c| format!("{c:>13}")).join(" | "));
    for (name, (n, cols)) in &fams {
        let p = cols[0];
        let cells: Vec<String> = cols.iter().map(|c| format!("{:.3} / {:.3}", c[0] / p[0], c[1] / p[1])).collect();
        println!(
            "{name:<8} {n:>4} | {}   (plain {:.2e} / {:.2e} m)",
            cells.join(" | "),
            p[0] / *n as f64,
            p[1] / *n as f64
        );
    }
    Ok(())
}
