//! `weft eval`: rollouts from each scene's own start of the plain coarse
//! step, the corrected coarse step, and the plain alternatives that spend
//! more compute instead (smaller time steps, BDF2, a mesh twice as fine),
//! against the fine reference; per family and overall, each column with
//! its device cost, and the corrected columns' frontier ratios against the
//! plain step of the same cost ([`crate::learn::eval::frontier`]).

use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::learn::data::metrics::{frame_errors, mean};
use crate::learn::data::Trajectory;
use crate::learn::eval::columns::Column;
use crate::learn::eval::device::{device_per_frame, network_cost};
use crate::learn::eval::frontier::{self, Point, FRONTIER_HORIZONS};
use crate::learn::network::Trained;
use crate::sim::rollout;
use crate::sim::scenario::Scenario;
use weft_weights::format::NetworkData;

/// One column's rollout of one trajectory.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Run {
    pub column: Column,
    /// Position RMSE (m) over the coarse nodes per frame, against the fine
    /// reference restricted to them.
    pub rmse: Vec<f32>,
    /// Its mean over the frames.
    pub mean: f32,
    /// Seconds per frame on this host.
    pub cost: f64,
    /// CG iterations per frame.
    #[serde(default)]
    pub cg_per_frame: f64,
    /// The board's instructions per frame
    /// ([`crate::learn::eval::device::device_per_frame`]).
    #[serde(default)]
    pub device_per_frame: f64,
}

/// One trajectory's runs, every column evaluated.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Rollout {
    pub name: String,
    pub family: String,
    pub split: String,
    pub runs: Vec<Run>,
    /// Seconds per frame of the fine reference.
    pub cost_fine: f64,
    /// Set when a rollout stopped early (non-finite state).
    pub failures: Vec<String>,
}

impl Rollout {
    /// The run of `column`, if it was evaluated.
    pub fn run(&self, column: Column) -> Option<&Run> {
        self.runs.iter().find(|r| r.column == column)
    }
}

/// Evaluates one trajectory (its fine reference is `traj.x`) in every
/// column whose model is given.
pub fn evaluate(
    traj: &Trajectory,
    model: Option<&Trained>,
    int8: Option<&NetworkData>,
    steps: usize,
) -> Result<Rollout> {
    let scn = &traj.scenario;
    let steps = steps.min(traj.x.len() - 1);
    let mut r = Rollout {
        name: scn.name.clone(),
        family: traj.family.name().into(),
        split: traj.split.clone(),
        cost_fine: traj.fine_seconds as f64 / (traj.x.len() - 1) as f64,
        ..Rollout::default()
    };
    let per_network = network_cost(model, int8);
    for column in Column::ALL {
        let Some(mut corrector) = column.corrector(model, int8) else { continue };
        let run = rollout(&column.scenario(scn), steps, &column.nodes(scn), corrector.as_mut())?;
        let rmse = frame_errors(&run.x, &traj.x);
        // A guarded network that ran the scene's plain fallback costs none.
        let network = if run.plain_outside { 0.0 } else { per_network };
        let device = device_per_frame(column, scn.time.substeps, run.cg_per_frame, column.mesh_scale(scn), network);
        r.runs.push(Run {
            column,
            mean: mean(&rmse),
            rmse,
            cost: run.seconds_per_frame,
            cg_per_frame: run.cg_per_frame,
            device_per_frame: device,
        });
        r.failures.extend(run.failure.map(|f| format!("{}: {f}", column.label())));
    }
    Ok(r)
}

/// What `weft eval` rolls out: the trajectories of a data set split, or
/// scenario files (whose fine references are simulated first).
pub enum Source {
    Split(String),
    Scenarios(Vec<std::path::PathBuf>),
}

/// The trajectories `source` names: a split of the data set in `data`, or
/// scenario files, each with its fine reference simulated here (`steps`
/// frames, by default its own) or read from where an earlier run wrote the
/// same scenario's (with the same refinement): `out/reference.safetensors`
/// for one scenario, `out/references/STEM.safetensors` for several.
fn trajectories(source: &Source, data: &Path, steps: Option<usize>, out: &Path) -> Result<Vec<Trajectory>> {
    let trajs = match source {
        Source::Scenarios(paths) => {
            let mut trajs = Vec::new();
            for path in paths {
                let cache = match paths.len() {
                    1 => out.join("reference.safetensors"),
                    _ => {
                        out.join("references").join(path.file_stem().unwrap_or_default()).with_extension("safetensors")
                    }
                };
                trajs.push(scenario_trajectory(path, data, steps, &cache)?);
            }
            trajs
        }
        Source::Split(split) => crate::learn::data::load_split(data, Some(split))?,
    };
    if trajs.is_empty() {
        anyhow::bail!("nothing to evaluate in {} of {}", source.name(), data.display());
    }
    Ok(trajs)
}

/// The scenario file at `path` with its fine reference, read from `cache`
/// when an earlier run wrote the same scenario's there, else simulated
/// here and written there.
fn scenario_trajectory(path: &Path, data: &Path, steps: Option<usize>, cache: &Path) -> Result<Trajectory> {
    let mut scn = Scenario::load(path)?;
    if let Some(s) = steps {
        scn.time.steps = s as u32;
    }
    let spec = crate::learn::data::load_index(data).map(|i| i.spec).unwrap_or_default();
    for w in crate::learn::data::outside_training(&scn, &spec) {
        eprintln!("warning: {}: {w}", path.display());
    }
    let cached = crate::learn::data::read_trajectory(cache).ok().filter(|t| t.scenario == scn);
    if let Some(t) = cached {
        return Ok(t);
    }
    let (x, v, secs) = crate::learn::data::fine_reference(&scn, spec.k, spec.time_substeps, spec.fine_integrator)?;
    let t = Trajectory {
        scenario: scn,
        family: crate::learn::data::families::Family::Hang,
        seed: 0,
        split: "scenario".into(),
        x,
        v,
        fine_seconds: secs,
    };
    if let Some(dir) = cache.parent() {
        std::fs::create_dir_all(dir)?;
    }
    crate::learn::data::write_trajectory(cache, &t, &spec)?;
    Ok(t)
}

/// `weft eval`: rolls out every trajectory of `source` plain, corrected by
/// the float model at `model` (when it exists) and by the int8 network
/// `int8` (when given), and the plain alternatives; writes `report.json`
/// into `out`; returns the printed report and the report itself (which
/// `view::plot` draws; none with `horizons`, whose table is the report). A scenario outside the
/// training envelope is warned about on stderr; `steps` defaults to the
/// trajectories' length.
pub fn command(
    source: &Source,
    data: &Path,
    model: &Path,
    int8: Option<NetworkData>,
    steps: Option<usize>,
    horizons: bool,
    out: &Path,
) -> Result<(String, Option<Report>)> {
    let trained = if model.with_extension("json").exists() {
        Some(Trained::load(model, &candle_core::Device::Cpu)?)
    } else {
        eprintln!("no model at {} — plain columns only", model.display());
        None
    };
    let trajs = trajectories(source, data, steps, out)?;
    if horizons {
        let name = matches!(source, Source::Scenarios(_)).then_some("scenario");
        let rep = crate::learn::eval::horizons::report(&trajs, name, data, trained.as_ref(), int8.as_ref(), true)?;
        crate::sim::files::write_json(&out.join("horizons.json"), &rep)?;
        return Ok((rep.table(), None));
    }
    let steps = steps.unwrap_or_else(|| trajs.iter().map(|t| t.x.len() - 1).max().unwrap_or(200));
    let bar = crate::progress_bar(trajs.len() as u64, "rollouts from the start, every column", true);
    let mut rollouts = Vec::new();
    for t in &trajs {
        bar.set_message(format!("{}-{}", t.family.name(), t.seed));
        let mut r = evaluate(t, trained.as_ref(), int8.as_ref(), steps)?;
        if let Source::Scenarios(_) = source {
            r.family = "scenario".into();
        }
        rollouts.push(r);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let resolution = trajs.first().map_or([0, 0], |t| t.scenario.cloth.resolution);
    let rep = report(rollouts, steps, resolution);
    crate::sim::files::write_json(&out.join("report.json"), &rep)?;
    let text = summary(&rep, steps, out);
    Ok((text, Some(rep)))
}

/// What `weft eval` prints: the overall line, the tables, the failures.
fn summary(rep: &Report, steps: usize, out: &Path) -> String {
    use std::fmt::Write;
    let mut text = String::new();
    let _ = write!(
        text,
        "{} rollouts × {steps} frames, mean position RMSE and host seconds per frame:",
        rep.rollouts.len()
    );
    for c in &rep.columns {
        let _ = write!(text, " {} {:.4} m ({:.2e} s);", c.column.label(), c.overall, c.cost);
    }
    let _ = writeln!(text, " fine reference {:.2e} s; wrote {}", rep.cost_fine, out.display());
    text.push_str(&tables(rep));
    for r in &rep.rollouts {
        for f in &r.failures {
            let _ = writeln!(text, "{}: {f}", r.name);
        }
    }
    text
}

impl Source {
    fn name(&self) -> String {
        match self {
            Source::Split(s) => format!("split {s:?}"),
            Source::Scenarios(p) => {
                format!("scenarios {}", p.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))
            }
        }
    }
}

/// One column over all rollouts.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ColumnStats {
    pub column: Column,
    /// Per-frame RMSE averaged over the rollouts.
    pub per_frame: Vec<f32>,
    /// Averaged over frames and rollouts.
    pub overall: f32,
    /// Mean seconds per frame on this host.
    pub cost: f64,
    /// Mean CG iterations per frame.
    #[serde(default)]
    pub cg_per_frame: f64,
    /// Mean board instructions per frame
    /// ([`crate::learn::eval::device::device_per_frame`]): the frontier's cost.
    #[serde(default)]
    pub device_per_frame: f64,
}

/// Everything `weft eval` writes.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Report {
    pub steps: usize,
    /// Coarse nodes per side of the evaluated cloths.
    pub resolution: [usize; 2],
    pub rollouts: Vec<Rollout>,
    /// Every evaluated column, in [`Column::ALL`]'s order.
    pub columns: Vec<ColumnStats>,
    /// Mean seconds per frame of the fine reference.
    pub cost_fine: f64,
    /// The same means per family (and the rollouts' count).
    pub families: Vec<FamilyRow>,
    /// The corrected columns' frontier ratios, pooled, per family and per
    /// scenario ([`crate::learn::eval::frontier`]).
    #[serde(default)]
    pub frontier: Vec<FrontierRow>,
}

/// Mean position RMSE (m) of one family's rollouts, each column.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FamilyRow {
    pub family: String,
    pub rollouts: usize,
    pub means: Vec<(Column, f32)>,
}

impl FamilyRow {
    /// The column means of `rollouts`, named `family`.
    fn of(family: &str, rollouts: &[&Rollout]) -> FamilyRow {
        let means = Column::ALL
            .into_iter()
            .filter_map(|c| {
                let m: Vec<f32> = rollouts.iter().filter_map(|r| r.run(c)).map(|r| r.mean).collect();
                (!m.is_empty()).then(|| (c, mean(&m)))
            })
            .collect();
        FamilyRow { family: family.to_string(), rollouts: rollouts.len(), means }
    }

    pub fn mean(&self, column: Column) -> Option<f32> {
        self.means.iter().find(|m| m.0 == column).map(|m| m.1)
    }
}

/// Over what a frontier ratio pools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Every rollout.
    #[default]
    Pooled,
    /// One family's rollouts.
    Family,
    /// One rollout.
    Scenario,
}

/// One corrected column's frontier ratio at [`FRONTIER_HORIZONS`] over
/// some rollouts: their per-frame errors averaged, each column at its mean
/// device cost over them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FrontierRow {
    pub scope: Scope,
    /// "all", the family's or the scenario's name.
    pub name: String,
    pub column: Column,
    pub ratio: [f64; 3],
}

impl Report {
    /// The stats of `column`, if it was evaluated.
    pub fn column(&self, column: Column) -> Option<&ColumnStats> {
        self.columns.iter().find(|c| c.column == column)
    }

    /// The corrected step the alternatives are held against: the int8
    /// network's (what the device runs) when it was evaluated, else the
    /// float one's.
    pub fn corrected_step(&self) -> Option<&ColumnStats> {
        self.column(Column::Int8).or_else(|| self.column(Column::Float))
    }

    /// `a`'s overall error over `b`'s.
    pub fn ratio(&self, a: Column, b: Column) -> Option<f32> {
        Some(self.column(a)?.overall / self.column(b)?.overall)
    }

    /// The pooled frontier ratio of `column`.
    pub fn frontier_ratio(&self, column: Column) -> Option<[f64; 3]> {
        self.frontier.iter().find(|r| r.scope == Scope::Pooled && r.column == column).map(|r| r.ratio)
    }
}

/// The frontier rows of `rollouts` pooled under `name`: each corrected
/// column's ratio against the plain columns, every column's per-frame
/// errors averaged over the rollouts and its cost their mean.
fn frontier_rows(scope: Scope, name: &str, rollouts: &[&Rollout]) -> Vec<FrontierRow> {
    let stats: Vec<(Column, f64, Vec<f32>)> = Column::ALL
        .into_iter()
        .filter_map(|c| {
            let runs: Vec<&Run> = rollouts.iter().filter_map(|r| r.run(c)).collect();
            let cost = runs.iter().map(|r| r.device_per_frame).sum::<f64>() / runs.len().max(1) as f64;
            (!runs.is_empty()).then(|| (c, cost, per_frame(&runs)))
        })
        .collect();
    let points: Vec<Point> =
        stats.iter().map(|(c, cost, pf)| Point { column: *c, cost: *cost, per_frame: pf }).collect();
    stats
        .iter()
        .filter(|s| s.0.corrected())
        .filter_map(|s| {
            let ratio = frontier::ratios(&points, s.0)?;
            Some(FrontierRow { scope, name: name.to_string(), column: s.0, ratio })
        })
        .collect()
}

/// The per-family table (mean position RMSE of every column, and each one
/// over plain), every column's device cost and from-start errors × plain
/// at [`FRONTIER_HORIZONS`], and the frontier ratios, as `weft eval`
/// prints them.
pub fn tables(rep: &Report) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let cols: Vec<Column> = rep.columns.iter().map(|c| c.column).collect();
    // Each column as wide as its heading, at least 16.
    let head = |c: Column| format!("{} (m)", c.label());
    let width = |c: Column| head(c).chars().count().max(16);
    let _ = write!(s, "{:<12} {:>3}", "family", "n");
    for &c in &cols {
        let _ = write!(s, "  {:>w$}", head(c), w = width(c));
    }
    let _ = writeln!(s, "  × plain");
    let row = |s: &mut String, name: &str, n: usize, value: &dyn Fn(Column) -> Option<f32>| {
        let _ = write!(s, "{name:<12} {n:>3}");
        let plain = value(Column::Plain);
        let mut ratios = Vec::new();
        for &c in &cols {
            let v = value(c);
            let _ = write!(s, "  {:>w$}", v.map_or("—".into(), |v| format!("{v:.4}")), w = width(c));
            if let (Some(v), Some(p), false) = (v, plain, c == Column::Plain) {
                ratios.push(format!("{} {:.3}", c.label(), v / p));
            }
        }
        let _ = writeln!(s, "  {}", ratios.join(", "));
    };
    for f in &rep.families {
        row(&mut s, &f.family, f.rollouts, &|c| f.mean(c));
    }
    row(&mut s, "all", rep.rollouts.len(), &|c| rep.column(c).map(|c| c.overall));
    // Every column from the start: cost and error × plain at the horizons.
    let [k1, k2, k3] = FRONTIER_HORIZONS;
    let _ = writeln!(
        s,
        "from each scene's start, every rollout pooled ({k1} / {k2} / {k3} frames: mean RMSE over frames 1–k):"
    );
    let _ = writeln!(s, "  {:<18} {:>14} {:>9}   {:<23}", "column", "M instr/frame", "× plain", "error × plain");
    let plain = rep.column(Column::Plain);
    for c in &rep.columns {
        let (Some(p), true) = (plain, !c.per_frame.is_empty()) else { continue };
        let r =
            FRONTIER_HORIZONS.map(|k| frontier::window_mean(&c.per_frame, k) / frontier::window_mean(&p.per_frame, k));
        let _ = writeln!(
            s,
            "  {:<18} {:>14.2} {:>9.2}   {:.3} / {:.3} / {:.3}",
            c.column.label(),
            c.device_per_frame / 1e6,
            c.device_per_frame / p.device_per_frame.max(f64::MIN_POSITIVE),
            r[0],
            r[1],
            r[2]
        );
    }
    if !rep.frontier.is_empty() {
        let _ = writeln!(
            s,
            "frontier ratio (the corrected step's error over the best plain step of its device cost) at {k1} / {k2} / {k3} frames:"
        );
    }
    for r in &rep.frontier {
        let scope = match r.scope {
            Scope::Pooled => "pooled",
            Scope::Family => "family",
            Scope::Scenario => "scenario",
        };
        let _ = writeln!(
            s,
            "  {:<6} {:<8} {:<22} {:.3} / {:.3} / {:.3}",
            r.column.label(),
            scope,
            r.name,
            r.ratio[0],
            r.ratio[1],
            r.ratio[2]
        );
    }
    s
}

/// The per-frame mean of `runs`.
fn per_frame(runs: &[&Run]) -> Vec<f32> {
    let len = runs.iter().map(|r| r.rmse.len()).max().unwrap_or(0);
    (0..len).map(|t| mean(&runs.iter().filter_map(|r| r.rmse.get(t).copied()).collect::<Vec<_>>())).collect()
}

/// The report of `rollouts` of `steps` frames of cloths `resolution` nodes
/// a side.
pub fn report(rollouts: Vec<Rollout>, steps: usize, resolution: [usize; 2]) -> Report {
    let all = FamilyRow::of("all", &rollouts.iter().collect::<Vec<_>>());
    let columns = all
        .means
        .iter()
        .map(|&(column, overall)| {
            let runs: Vec<&Run> = rollouts.iter().filter_map(|r| r.run(column)).collect();
            let avg = |f: &dyn Fn(&Run) -> f64| runs.iter().map(|r| f(r)).sum::<f64>() / runs.len().max(1) as f64;
            ColumnStats {
                column,
                per_frame: per_frame(&runs),
                overall,
                cost: avg(&|r| r.cost),
                cg_per_frame: avg(&|r| r.cg_per_frame),
                device_per_frame: avg(&|r| r.device_per_frame),
            }
        })
        .collect();
    let mut names: Vec<&str> = rollouts.iter().map(|r| r.family.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let of_family = |name: &str| rollouts.iter().filter(|r| r.family == name).collect::<Vec<_>>();
    let families = names.iter().map(|name| FamilyRow::of(name, &of_family(name))).collect();
    let mut frontier = frontier_rows(Scope::Pooled, "all", &rollouts.iter().collect::<Vec<_>>());
    if rollouts.len() > 1 {
        for name in &names {
            frontier.extend(frontier_rows(Scope::Family, name, &of_family(name)));
        }
        for r in &rollouts {
            frontier.extend(frontier_rows(Scope::Scenario, &r.name, &[r]));
        }
    }
    let cost_fine = rollouts.iter().map(|r| r.cost_fine).sum::<f64>() / rollouts.len().max(1) as f64;
    Report { steps, resolution, rollouts, columns, cost_fine, families, frontier }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(column: Column, rmse: Vec<f32>, device: f64) -> Run {
        Run { column, mean: mean(&rmse), rmse, cost: 1.0, cg_per_frame: 0.0, device_per_frame: device }
    }

    /// The pooled ratio averages the rollouts' per-frame errors first, and
    /// a family's ratio uses that family's costs.
    #[test]
    fn the_report_holds_each_corrected_column_against_the_plain_envelope() {
        let a = Rollout {
            name: "a".into(),
            family: "drape".into(),
            runs: vec![
                run(Column::Plain, vec![0.04; 200], 10.0),
                run(Column::QuarterDt, vec![0.01; 200], 30.0),
                run(Column::Int8, vec![0.02; 200], 12.0),
            ],
            ..Rollout::default()
        };
        let b = Rollout {
            name: "b".into(),
            family: "hang".into(),
            runs: vec![
                run(Column::Plain, vec![0.02; 200], 10.0),
                run(Column::QuarterDt, vec![0.01; 200], 30.0),
                run(Column::Int8, vec![0.04; 200], 12.0),
            ],
            ..Rollout::default()
        };
        let rep = report(vec![a, b], 200, [16, 16]);
        // Pooled: plain 0.03 at 10, dt/4 0.01 at 30; at 12 the envelope is
        // 0.03 − 0.02 · 2/20 = 0.028, and int8's pooled error is 0.03.
        let r = rep.frontier_ratio(Column::Int8).unwrap();
        for x in r {
            assert!((x - 0.03 / 0.028).abs() < 1e-5, "{r:?}");
        }
        let drape = rep.frontier.iter().find(|f| f.scope == Scope::Family && f.name == "drape").unwrap();
        assert!((drape.ratio[0] - 0.02 / 0.037).abs() < 1e-5, "{drape:?}");
        assert_eq!(rep.frontier.iter().filter(|f| f.scope == Scope::Scenario).count(), 2);
        assert_eq!(rep.column(Column::Int8).unwrap().device_per_frame, 12.0);
    }

    /// Every column's values end where its heading ends, however long the
    /// heading.
    #[test]
    fn the_table_keeps_every_column_under_its_heading() {
        let runs = Column::ALL
            .iter()
            .enumerate()
            .map(|(k, &column)| run(column, vec![0.01 * (k + 1) as f32; 4], 1.0))
            .collect();
        let rollout = Rollout { name: "a".into(), family: "drape".into(), runs, ..Rollout::default() };
        let text = tables(&report(vec![rollout], 4, [5, 5]));
        let lines: Vec<Vec<char>> = text.lines().map(|l| l.chars().collect()).collect();
        let head = &lines[0];
        let ends: Vec<usize> = (2..head.len()).filter(|&i| head[i - 2..=i] == ['(', 'm', ')']).collect();
        assert_eq!(ends.len(), Column::ALL.len(), "{text}");
        let rows: Vec<_> = lines[1..].iter().filter(|l| l.starts_with(&['d', 'r', 'a', 'p', 'e'])).collect();
        assert_eq!(rows.len(), 1, "{text}");
        for row in rows {
            for &e in &ends {
                assert!(row[e].is_ascii_digit() && row.get(e + 1).is_none_or(|c| *c == ' '), "{text}");
            }
        }
    }
}
