//! `weft eval`: rollouts of the plain coarse step, the corrected coarse step,
//! and the plain alternatives that spend more compute instead (a mesh twice
//! as fine, the coarse mesh at half and at a quarter of the time step),
//! against the fine reference; per family and overall, with each one's
//! cost ([`Report::pareto`]).

use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::learn::data::Trajectory;
use crate::learn::eval::columns::Column;
use crate::learn::eval::metrics::{frame_errors, mean};
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
    for column in Column::ALL {
        let Some(mut corrector) = column.corrector(model, int8) else { continue };
        let (xs, cost, fail) = rollout(&column.scenario(scn), steps, &column.nodes(scn), corrector.as_mut())?;
        let rmse = frame_errors(&xs, &traj.x);
        r.runs.push(Run { column, mean: mean(&rmse), rmse, cost });
        r.failures.extend(fail.map(|f| format!("{}: {f}", column.label())));
    }
    Ok(r)
}

/// What `weft eval` rolls out: the trajectories of a data set split, or a
/// scenario file (whose fine reference is simulated first).
pub enum Source {
    Split(String),
    Scenario(std::path::PathBuf),
}

/// The trajectories `source` names: a split of the data set in `data`, or a
/// scenario file with its fine reference simulated here (`steps` frames, by
/// default its own), or read from `out/reference.safetensors` where an
/// earlier run wrote the same scenario's (with the same refinement).
fn trajectories(source: &Source, data: &Path, steps: Option<usize>, out: &Path) -> Result<Vec<Trajectory>> {
    let trajs = match source {
        Source::Scenario(path) => {
            let mut scn = Scenario::load(path)?;
            if let Some(s) = steps {
                scn.time.steps = s as u32;
            }
            let spec = crate::learn::data::load_index(data).map(|i| i.spec).unwrap_or_default();
            for w in crate::learn::data::outside_training(&scn, &spec) {
                eprintln!("warning: {}: {w}", path.display());
            }
            let cache = out.join("reference.safetensors");
            let cached = crate::learn::data::read_trajectory(&cache).ok().filter(|t| t.scenario == scn);
            let t = match cached {
                Some(t) => t,
                None => {
                    let (x, v, secs) =
                        crate::learn::data::fine_reference(&scn, spec.k, spec.time_substeps, spec.fine_integrator)?;
                    let t = Trajectory {
                        scenario: scn,
                        family: crate::learn::data::families::Family::Hang,
                        seed: 0,
                        split: "scenario".into(),
                        x,
                        v,
                        fine_seconds: secs,
                    };
                    std::fs::create_dir_all(out)?;
                    crate::learn::data::write_trajectory(&cache, &t, &spec)?;
                    t
                }
            };
            vec![t]
        }
        Source::Split(split) => crate::learn::data::load_split(data, Some(split))?,
    };
    if trajs.is_empty() {
        anyhow::bail!("nothing to evaluate in {} of {}", source.name(), data.display());
    }
    Ok(trajs)
}

/// `weft eval` asks whether any plain alternative costing less than this
/// many corrected steps is as accurate.
pub const PARETO_BUDGET: f64 = 3.0;

/// `weft eval`: rolls out every trajectory of `source` plain, corrected by
/// the float model at `model` (when it exists) and by the int8 model file
/// `int8` (when given), and the plain alternatives; writes `report.json`
/// into `out`; returns the printed report and the report itself (which
/// `view::plot` draws; none with `horizons`, whose table is the report). A scenario outside the
/// training envelope is warned about on stderr; `steps` defaults to the
/// trajectories' length.
pub fn command(
    source: &Source,
    data: &Path,
    model: &Path,
    int8: Option<&Path>,
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
    let int8 = int8.map(crate::learn::quantise::load).transpose()?;
    let trajs = trajectories(source, data, steps, out)?;
    if horizons {
        let name = matches!(source, Source::Scenario(_)).then_some("scenario");
        let rep = crate::learn::eval::horizons::report(&trajs, name, data, trained.as_ref(), int8.as_ref(), true)?;
        std::fs::create_dir_all(out)?;
        std::fs::write(out.join("horizons.json"), serde_json::to_string_pretty(&rep)?)?;
        return Ok((rep.table(), None));
    }
    let steps = steps.unwrap_or_else(|| trajs.first().map_or(200, |t| t.x.len() - 1));
    let bar = crate::progress_bar(
        trajs.len() as u64,
        "rollouts, each plain, corrected, int8, 2× finer, at dt/2 and dt/4",
        true,
    );
    let mut rollouts = Vec::new();
    for t in &trajs {
        bar.set_message(format!("{}-{}", t.family.name(), t.seed));
        let mut r = evaluate(t, trained.as_ref(), int8.as_ref(), steps)?;
        if let Source::Scenario(_) = source {
            r.family = "scenario".into();
        }
        rollouts.push(r);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let resolution = trajs.first().map_or([0, 0], |t| t.scenario.cloth.resolution);
    let rep = report(rollouts, steps, resolution);
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("report.json"), serde_json::to_string_pretty(&rep)?)?;
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
    text.push_str(&tables(rep, PARETO_BUDGET));
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
            Source::Scenario(p) => format!("scenario {}", p.display()),
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
    /// Mean seconds per frame.
    pub cost: f64,
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

/// One plain alternative against the corrected step.
#[derive(Clone, Debug, PartialEq)]
pub struct Alternative {
    pub column: Column,
    /// Mean position RMSE (m).
    pub error: f32,
    /// Seconds per frame over the corrected step's ([`Report::corrected_step`]).
    pub cost_ratio: f64,
    /// It costs less than `budget` times the corrected step and the
    /// corrected step is not more accurate.
    pub beats_corrected: bool,
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

    /// The plain alternatives against the corrected step
    /// ([`Report::corrected_step`]): each one's error and cost, and whether
    /// it beats the corrected step at less than `budget` times its cost (the
    /// goal: none does for `budget` 3).
    pub fn pareto(&self, budget: f64) -> Vec<Alternative> {
        let Some(corrected) = self.corrected_step() else { return Vec::new() };
        let base = corrected.cost.max(f64::MIN_POSITIVE);
        self.columns
            .iter()
            .filter(|c| !c.column.corrected())
            .map(|c| {
                let cost_ratio = c.cost / base;
                Alternative {
                    column: c.column,
                    error: c.overall,
                    cost_ratio,
                    beats_corrected: cost_ratio < budget && c.overall <= corrected.overall,
                }
            })
            .collect()
    }
}

/// The per-family table (mean position RMSE of every column, and each one
/// over plain) and the plain alternatives against the corrected step, as
/// `weft eval` prints them.
pub fn tables(rep: &Report, budget: f64) -> String {
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
    if let Some(corrected) = rep.corrected_step() {
        let _ = writeln!(
            s,
            "plain alternatives against the {} step ({:.4} m, {:.2} ms per frame on this host):",
            corrected.column.label(),
            corrected.overall,
            corrected.cost * 1e3
        );
    }
    for a in rep.pareto(budget) {
        let verdict = if a.beats_corrected {
            format!("as accurate at under {budget}× the cost: the correction does not pay")
        } else if a.cost_ratio < budget {
            "less accurate".to_string()
        } else {
            format!("costs {budget}× or more")
        };
        let _ = writeln!(
            s,
            "  {:<14} {:.4} m at {:.2}× the corrected step's cost: {verdict}",
            a.column.label(),
            a.error,
            a.cost_ratio
        );
    }
    s
}

/// The per-frame mean of `column` over the rollouts that ran it.
fn per_frame(rollouts: &[Rollout], column: Column) -> Vec<f32> {
    let runs: Vec<&Run> = rollouts.iter().filter_map(|r| r.run(column)).collect();
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
            let costs: Vec<f64> = rollouts.iter().filter_map(|r| r.run(column)).map(|r| r.cost).collect();
            ColumnStats {
                column,
                per_frame: per_frame(&rollouts, column),
                overall,
                cost: costs.iter().sum::<f64>() / costs.len().max(1) as f64,
            }
        })
        .collect();
    let mut names: Vec<&str> = rollouts.iter().map(|r| r.family.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let families = names
        .iter()
        .map(|name| FamilyRow::of(name, &rollouts.iter().filter(|r| r.family == *name).collect::<Vec<_>>()))
        .collect();
    let cost_fine = rollouts.iter().map(|r| r.cost_fine).sum::<f64>() / rollouts.len().max(1) as f64;
    Report { steps, resolution, rollouts, columns, cost_fine, families }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(column: Column, overall: f32, cost: f64) -> ColumnStats {
        ColumnStats { column, overall, cost, ..ColumnStats::default() }
    }

    #[test]
    fn an_alternative_beats_the_corrected_step_only_when_cheaper_than_the_budget_and_as_accurate() {
        let rep = Report {
            columns: vec![
                stats(Column::Plain, 0.08, 0.5),
                stats(Column::Float, 0.04, 10.0),
                stats(Column::Int8, 0.05, 1.0),
                stats(Column::HalfDt, 0.05, 1.2),
                stats(Column::QuarterDt, 0.03, 3.5),
                stats(Column::Fine2, 0.02, 2.0),
            ],
            ..Report::default()
        };
        // Held against the int8 step (0.05 m, 1 s), budget 3.
        assert_eq!(rep.corrected_step().map(|c| c.column), Some(Column::Int8));
        let beats: Vec<(Column, bool)> = rep.pareto(3.0).iter().map(|a| (a.column, a.beats_corrected)).collect();
        assert_eq!(
            beats,
            [(Column::Plain, false), (Column::HalfDt, true), (Column::QuarterDt, false), (Column::Fine2, true)]
        );
        let mut float = rep.clone();
        float.columns.retain(|c| c.column != Column::Int8);
        assert_eq!(float.corrected_step().map(|c| c.column), Some(Column::Float));
        // Held against the float step (0.04 m, 10 s): all cost under 30 s.
        let beats: Vec<bool> = float.pareto(3.0).iter().map(|a| a.beats_corrected).collect();
        assert_eq!(beats, [false, false, true, true]);
    }

    /// Every column's values end where its heading ends, however long the
    /// heading.
    #[test]
    fn the_table_keeps_every_column_under_its_heading() {
        let runs = Column::ALL
            .iter()
            .enumerate()
            .map(|(k, &column)| Run {
                column,
                rmse: vec![0.01 * (k + 1) as f32; 4],
                mean: 0.01 * (k + 1) as f32,
                cost: 1.0,
            })
            .collect();
        let rollout = Rollout { name: "a".into(), family: "drape".into(), runs, ..Rollout::default() };
        let text = tables(&report(vec![rollout], 4, [5, 5]), 3.0);
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
