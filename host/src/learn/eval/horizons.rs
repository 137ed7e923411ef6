//! Errors at horizons, the way learned simulators are measured: rollouts of
//! 1, 10 and 50 frames ([`HORIZONS`]) started from the reference's
//! restricted state every [`START_EVERY`] frames, for every [`Column`],
//! against the reference; each cell beside its floor, the reference's own
//! change over the same horizon when started 1 µm apart ([`floors`]). A
//! cell whose floor exceeds a third of plain's error is unmeasurable and
//! kept out of the overall means.
//!
//! Each column's cost is given as device instructions per frame from a
//! per-stage model calibrated on the firmware's QEMU counts
//! ([`device_per_frame`]), beside host time.
use crate::learn::data::families::Family;
use crate::learn::eval::device::{device_per_frame, network_cost};
use crate::sim::build::{self, ModelParts};
use crate::sim::obj::subdivide_values;
use crate::sim::scenario::Scenario;
use std::path::Path;
use std::time::Instant;
use weft_core::math::Vec3;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::learn::data::metrics::{mean, rmse};
use crate::learn::data::{Frames, Trajectory};
use crate::learn::eval::columns::Column;
use crate::learn::network::Trained;
use crate::sim::corrector::{Corrector, Grained};
use weft_core::model::CoarseGrain;

use crate::sim::{self, Restart};
use weft_weights::format::NetworkData;

/// Frames per rollout.
pub const HORIZONS: [usize; 3] = [1, 10, 50];

/// Frames between the starts of the rollouts.
pub const START_EVERY: usize = 20;

/// A cell is unmeasurable when its floor exceeds this share of plain's error.
pub const MEASURABLE: f32 = 1.0 / 3.0;

/// Per horizon, the mean RMSE over the first `h` frames of every window.
pub type Windows = [Vec<f32>; 3];

/// The errors of one column on one trajectory, and its CG iterations and
/// host seconds per frame.
pub struct ColumnRun {
    pub windows: Windows,
    pub cg_per_frame: f64,
    pub seconds_per_frame: f64,
}

/// The mean error of `col` on `traj` over the windows of horizon `h` (one
/// of [`HORIZONS`]; `None` for another horizon or a column that cannot run).
pub fn horizon_error(traj: &Trajectory, col: Column, float: Option<&Trained>, h: usize) -> Result<Option<f32>> {
    horizon_error_with(traj, col, float, None, h)
}

/// [`horizon_error`] with the int8 network too (for [`Column::Int8`]).
pub fn horizon_error_with(
    traj: &Trajectory,
    col: Column,
    float: Option<&Trained>,
    int8: Option<&NetworkData>,
    h: usize,
) -> Result<Option<f32>> {
    let Some(k) = HORIZONS.iter().position(|&x| x == h) else { return Ok(None) };
    let run = run_column(traj, col, float, int8, h)?;
    Ok(run.map(|r| mean(&r.windows[k])))
}

/// The mean errors of `col` on `traj` at every horizon of [`HORIZONS`]
/// (`None` for a column that cannot run).
pub fn horizon_errors(
    traj: &Trajectory,
    col: Column,
    float: Option<&Trained>,
    int8: Option<&NetworkData>,
) -> Result<Option<[f32; 3]>> {
    let run = run_column(traj, col, float, int8, HORIZONS[2])?;
    Ok(run.map(|r| [0, 1, 2].map(|k| mean(&r.windows[k]))))
}

/// The mean errors at every horizon of [`HORIZONS`] of the plain step on
/// the membrane grained by `grain` (`weft calibrate`'s candidates): the
/// [`Grained`] corrector, as the coarse-grain column runs it.
/// Factors out of bounds are an error (a rollout that fails would only
/// count as an infinite error).
pub fn grained_horizon_errors(traj: &Trajectory, grain: CoarseGrain) -> Result<[f32; 3]> {
    grain.validate().map_err(crate::sim::scenario::toml_key)?;
    let run = run_with(traj, Column::Plain, HORIZONS[2], &|| Some(Box::new(Grained(grain))))?;
    Ok(run.map_or([f32::INFINITY; 3], |r| [0, 1, 2].map(|k| mean(&r.windows[k]))))
}

/// Rolls `col` out from every start of `traj`, each rollout `longest`
/// frames at most ([`HORIZONS`]' windows up to it).
fn run_column(
    traj: &Trajectory,
    col: Column,
    float: Option<&Trained>,
    int8: Option<&NetworkData>,
    longest: usize,
) -> Result<Option<ColumnRun>> {
    run_with(traj, col, longest, &|| col.corrector(float, int8))
}

/// [`run_column`] with the corrector of every start made by `corrector`
/// (`None`: the column cannot run).
fn run_with<'m>(
    traj: &Trajectory,
    col: Column,
    longest: usize,
    corrector: &dyn Fn() -> Option<Box<dyn Corrector + 'm>>,
) -> Result<Option<ColumnRun>> {
    let frames = traj.x.len() - 1;
    let scn = col.scenario(&traj.scenario);
    let nodes = col.nodes(&traj.scenario);
    let mut run = ColumnRun { windows: Default::default(), cg_per_frame: 0.0, seconds_per_frame: 0.0 };
    let (mut cg, mut stepped) = (0u64, 0usize);
    let t0 = Instant::now();
    for s in (0..frames).step_by(START_EVERY) {
        let Some(mut corrector) = corrector() else { return Ok(None) };
        let len = longest.min(HORIZONS[2]).min(frames - s);
        let mut scn = scn.clone();
        scn.time.steps = len as u32;
        // The start on this column's mesh.
        let k = col.refinement();
        let (x0, v0) = if k > 1 {
            let (mut x, mut v) = (finer(&traj.scenario, &traj.x[s], k), finer(&traj.scenario, &traj.v[s], k));
            out_of_colliders(&scn, s, &mut x, &mut v)?;
            (x, v)
        } else {
            (traj.x[s].clone(), traj.v[s].clone())
        };
        // The frame before's velocities for the network's history (the
        // finer columns are plain steps, which do not read it).
        let v_before = (s > 0 && k == 1).then(|| traj.v[s - 1].as_slice());
        let restart = Restart { x: &x0, v: &v0, v_before, frame: s as u32 };
        let mut errs = Vec::with_capacity(len);
        let mut at = Vec::with_capacity(nodes.len());
        let r = sim::run_from(&scn, Some(restart), false, corrector.as_mut(), |f, _, st| {
            if f > 0 {
                at.clear();
                at.extend(nodes.iter().map(|&i| st.positions()[i]));
                errs.push(rmse(&at, &traj.x[s + f as usize]));
            }
            Ok(())
        });
        if let Ok(summary) = &r {
            cg += summary.frames.iter().map(|f| f.cg_iterations as u64).sum::<u64>();
            stepped += len;
        }
        // A rollout that failed keeps its last error for the frames it
        // missed.
        let last = errs.last().copied().unwrap_or(f32::INFINITY);
        errs.resize(len, last);
        for (k, &h) in HORIZONS.iter().enumerate() {
            if h <= len {
                run.windows[k].push(mean(&errs[..h]));
            }
        }
    }
    run.cg_per_frame = cg as f64 / stepped.max(1) as f64;
    run.seconds_per_frame = t0.elapsed().as_secs_f64() / stepped.max(1) as f64;
    Ok(Some(run))
}

/// Adds the mean RMSE between two restricted rollouts over each horizon's
/// first frames to that horizon's windows.
pub(crate) fn push_windows(windows: &mut Windows, a: &Frames, b: &Frames) {
    let errs: Vec<f32> = a.iter().zip(b).map(|(p, q)| rmse(p, q)).collect();
    for (k, &h) in HORIZONS.iter().enumerate() {
        if h <= errs.len() {
            windows[k].push(mean(&errs[..h]));
        }
    }
}

/// One column's cell of a family: mean error per horizon and cost.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Cells {
    pub error: [f32; 3],
    pub windows: [usize; 3],
    pub cg_per_frame: f64,
    pub device_per_frame: f64,
    pub seconds_per_frame: f64,
}

/// The horizon report: per family (and `overall`), per column.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Report {
    pub rows: Vec<(String, Column, Cells)>,
    /// Per family, the floor per horizon (when `weft floors` has run).
    pub floors: Vec<(String, [f32; 3])>,
    /// Per family, the coarse state's floor per horizon ([`Floor::coarse`]).
    #[serde(default)]
    pub coarse_floors: Vec<(String, [f32; 3])>,
}

/// The horizon errors of every column on `trajs`, per family (or all
/// under `name`) and overall.
pub fn report(
    trajs: &[Trajectory],
    name: Option<&str>,
    data: &Path,
    float: Option<&Trained>,
    int8: Option<&NetworkData>,
    progress: bool,
) -> Result<Report> {
    let floors: Floors = std::fs::read_to_string(data.join("floors.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let family = |t: &Trajectory| name.unwrap_or(t.family.name()).to_string();
    let mut families: Vec<String> = Vec::new();
    for t in trajs {
        if !families.contains(&family(t)) {
            families.push(family(t));
        }
    }
    let bar = crate::progress_bar((trajs.len() * Column::ALL.len()) as u64, "horizon rollouts", progress);
    let mut acc: Vec<Sums> = Vec::new();
    for t in trajs {
        for col in Column::ALL {
            bar.inc(1);
            let Some(run) = run_column(t, col, float, int8, HORIZONS[2])? else { continue };
            let key = family(t);
            let i = match acc.iter().position(|a| a.family == key && a.col == col) {
                Some(i) => i,
                None => {
                    acc.push(Sums { family: key, col, ..Sums::default() });
                    acc.len() - 1
                }
            };
            acc[i].add(&run.windows, run.cg_per_frame, run.seconds_per_frame);
        }
    }
    bar.finish_and_clear();
    let substeps = trajs.first().map_or(1, |t| t.scenario.time.substeps);
    // A column's mesh against the coarse one (the 31×31 column's steps
    // cost about its nodes' share more; the device does not hold it).
    let scale = |col: Column| trajs.first().map_or(1.0, |t| col.mesh_scale(&t.scenario));
    let per_network = network_cost(float, int8);
    let mut rep = Report::default();
    for fam in &families {
        if let Some(f) = floors.families.iter().find(|f| f.family.name() == fam) {
            rep.floors.push((fam.clone(), f.floor));
            if let Some(c) = f.coarse {
                rep.coarse_floors.push((fam.clone(), c));
            }
        }
        for a in acc.iter().filter(|a| &a.family == fam) {
            rep.rows.push((fam.clone(), a.col, a.cells(substeps, per_network, scale(a.col))));
        }
    }
    // Overall: every measurable family's windows.
    for col in Column::ALL {
        let mut all = Sums { family: "overall".into(), col, ..Sums::default() };
        for a in acc.iter().filter(|a| a.col == col) {
            let plain = rep.rows.iter().find(|r| r.0 == a.family && r.1 == Column::Plain).map(|r| r.2.error);
            for (k, wk) in all.windows.iter_mut().enumerate() {
                if measurable(&rep, &a.family, k, plain) {
                    wk.extend_from_slice(&a.windows[k]);
                }
            }
            (all.cg, all.seconds, all.runs) = (all.cg + a.cg, all.seconds + a.seconds, all.runs + a.runs);
        }
        if all.runs > 0 {
            rep.rows.push(("overall".into(), col, all.cells(substeps, per_network, scale(col))));
        }
    }
    Ok(rep)
}

/// One family's (or the overall) sums of one column over its rollouts.
#[derive(Default)]
struct Sums {
    family: String,
    col: Column,
    windows: Windows,
    /// CG iterations and seconds per frame, summed over the rollouts.
    cg: f64,
    seconds: f64,
    runs: usize,
}

impl Sums {
    fn add(&mut self, windows: &Windows, cg: f64, seconds: f64) {
        for (wk, rk) in self.windows.iter_mut().zip(windows) {
            wk.extend_from_slice(rk);
        }
        (self.cg, self.seconds, self.runs) = (self.cg + cg, self.seconds + seconds, self.runs + 1);
    }

    /// The report's cells, with the device cost from the stage model
    /// (`per_network`: [`network_cost`] of the evaluated network).
    fn cells(&self, substeps: u32, per_network: f64, mesh_scale: f64) -> Cells {
        let n = self.runs.max(1) as f64;
        Cells {
            error: [0, 1, 2].map(|k| mean(&self.windows[k])),
            windows: [0, 1, 2].map(|k| self.windows[k].len()),
            cg_per_frame: self.cg / n,
            device_per_frame: device_per_frame(self.col, substeps, self.cg / n, mesh_scale, per_network),
            seconds_per_frame: self.seconds / n,
        }
    }
}

/// Whether family `fam`'s horizon `k` is measurable: its floor (when known)
/// is at most [`MEASURABLE`] of plain's error.
fn measurable(rep: &Report, fam: &str, k: usize, plain: Option<[f32; 3]>) -> bool {
    match (rep.floors.iter().find(|f| f.0 == fam), plain) {
        (Some(f), Some(p)) => f.1[k] <= MEASURABLE * p[k],
        _ => true,
    }
}

impl Report {
    /// The table: per family and overall, each column's error at every
    /// horizon as a multiple of plain, the floor beside it, `*` where
    /// unmeasurable; and each column's cost.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let mut families: Vec<&str> = Vec::new();
        for r in &self.rows {
            if !families.contains(&r.0.as_str()) {
                families.push(&r.0);
            }
        }
        for fam in families {
            let plain = self.rows.iter().find(|r| r.0 == fam && r.1 == Column::Plain).map(|r| r.2.error);
            let Some(plain) = plain else { continue };
            out += &format!(
                "\n{fam}: plain error {:.2e} / {:.2e} / {:.2e} m at 1 / 10 / 50 frames\n",
                plain[0], plain[1], plain[2]
            );
            out +=
                "  column        × plain at  1       10       50     CG/frame  device M instr/frame  host ms/frame\n";
            for (label, floors) in [("floor (1 µm)", &self.floors), ("floor (coarse)", &self.coarse_floors)] {
                if let Some(f) = floors.iter().find(|f| f.0 == fam) {
                    out += &format!(
                        "  {label:<22}  {:>7.3}  {:>7.3}  {:>7.3}\n",
                        f.1[0] / plain[0],
                        f.1[1] / plain[1],
                        f.1[2] / plain[2]
                    );
                }
            }
            for (_, col, c) in self.rows.iter().filter(|r| r.0 == fam) {
                let mark =
                    |k: usize| if fam != "overall" && !measurable(self, fam, k, Some(plain)) { "*" } else { " " };
                out += &format!(
                    "  {:<24}{:>7.3}{} {:>7.3}{} {:>7.3}{} {:>8.1}  {:>20.1}  {:>13.2}\n",
                    col.label(),
                    c.error[0] / plain[0],
                    mark(0),
                    c.error[1] / plain[1],
                    mark(1),
                    c.error[2] / plain[2],
                    mark(2),
                    c.cg_per_frame,
                    c.device_per_frame / 1e6,
                    c.seconds_per_frame * 1e3
                );
            }
        }
        out += "\n* the floor exceeds a third of plain's error: unmeasurable, left out of the overall rows\n";
        out
    }
}

/// The floor of a family: per horizon, the reference's own change over the
/// horizon between two fine rollouts restarted from the same fine state,
/// one of them moved [`PERTURBATION`], averaged over the starts.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Floor {
    pub family: Family,
    pub seed: u64,
    /// Per horizon of [`HORIZONS`] (m).
    pub floor: [f32; 3],
    /// Per horizon (m), the coarse state's floor: the reference restarted
    /// from its own state restricted to the coarse nodes and interpolated
    /// back ([`prolongate`]), against the reference. What the fine
    /// physics itself gets wrong when it knows only what a corrector of
    /// the coarse state sees (an estimate, not a bound: a corrector may
    /// guess the nodes between better than an interpolation does).
    #[serde(default)]
    pub coarse: Option<[f32; 3]>,
    pub seconds: f32,
}

/// Values at the coarse nodes of `scn` carried onto its cloth `k` times
/// finer: [`prolongate`] on a rectangle, [`subdivide_values`] on a mesh
/// (`k` a power of two).
pub fn finer(scn: &Scenario, coarse: &[Vec3], k: usize) -> Vec<Vec3> {
    match &scn.mesh {
        Some(m) => subdivide_values(m, k.trailing_zeros(), coarse),
        None => prolongate(coarse, scn.cloth.resolution[0], scn.cloth.resolution[1], k),
    }
}

/// The fine grid's state from the coarse grid's (`nx` × `ny` nodes, the
/// fine grid `k` times finer): Catmull–Rom in each grid direction, so that
/// the interpolated cloth has no kinks at the coarse edges (a bilinear one
/// would, and its bending forces would move it in the first step); the
/// grid's edges extend their last cells linearly. The coarse nodes keep
/// their values (restricting the result gives `coarse` back) and a coarse
/// grid's affine state interpolates to the fine grid's.
pub fn prolongate(coarse: &[Vec3], nx: usize, ny: usize, k: usize) -> Vec<Vec3> {
    let (fx, fy) = ((nx - 1) * k + 1, (ny - 1) * k + 1);
    // Along one direction of `n` nodes: node `c`'s value at `c + t`.
    let along = |n: usize, at: &dyn Fn(usize) -> Vec3, c: usize, t: f32| {
        let p = |i: isize| -> Vec3 {
            if i < 0 {
                at(0) * 2.0 - at(1)
            } else if i as usize >= n {
                at(n - 1) * 2.0 - at(n - 2)
            } else {
                at(i as usize)
            }
        };
        let c = c as isize;
        let (t2, t3) = (t * t, t * t * t);
        p(c - 1) * (0.5 * (-t + 2.0 * t2 - t3))
            + p(c) * (0.5 * (2.0 - 5.0 * t2 + 3.0 * t3))
            + p(c + 1) * (0.5 * (t + 4.0 * t2 - 3.0 * t3))
            + p(c + 2) * (0.5 * (t3 - t2))
    };
    // The cell and the parameter in it of fine node `f`.
    let cell = |f: usize, n: usize| {
        let c = (f / k).min(n - 2);
        (c, f as f32 / k as f32 - c as f32)
    };
    // Every coarse row interpolated along x, then every fine column along y.
    let rows: Vec<Vec<Vec3>> = (0..ny)
        .map(|j| {
            (0..fx)
                .map(|i| {
                    let (c, t) = cell(i, nx);
                    along(nx, &|a| coarse[j * nx + a], c, t)
                })
                .collect()
        })
        .collect();
    let mut out = vec![Vec3::ZERO; fx * fy];
    for j in 0..fy {
        let (c, t) = cell(j, ny);
        for i in 0..fx {
            out[j * fx + i] = along(ny, &|b| rows[b][i], c, t);
        }
    }
    out
}

/// The floors of a data set, kept in `floors.json` beside its index.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Floors {
    pub families: Vec<Floor>,
}

/// Puts the free nodes of an interpolated state of `scn` at frame `frame`
/// that lie inside a collider on its surface (as a step's contacts do).
pub(crate) fn out_of_colliders(
    scn: &sim::scenario::Scenario,
    frame: usize,
    x: &mut [Vec3],
    v: &mut [Vec3],
) -> Result<()> {
    let mut parts = ModelParts::default();
    let model = &build::model(scn, CoarseGrain::NONE, &mut parts)?;
    let mut pinned = vec![0; x.len()];
    model.scene.mark_pinned(&mut pinned);
    weft_core::contact::collide(model.scene.colliders, frame as f32 * scn.time.dt, &pinned, x, v);
    Ok(())
}
