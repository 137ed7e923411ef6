//! `weft eval`: rollouts of the plain coarse step, the corrected coarse step,
//! and the plain alternatives that spend more compute instead (a mesh twice
//! as fine, the coarse mesh at half and at a quarter of the time step),
//! against the fine reference; per family and overall, with each one's
//! cost ([`Report::pareto`]).

use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use weft_core::prelude::*;

use crate::learn::dataset::Trajectory;
use crate::learn::gnn::{corrected_error, corrected_rollout, Trained};
use crate::learn::metrics::{mean, rmse};
use crate::sim::corrector::{Int8, Plain};
use crate::sim::rollout;
use crate::sim::scenario::Scenario;
use weft_weights::format::NetworkData;

/// One rollout's errors and costs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Rollout {
    pub name: String,
    pub family: String,
    pub split: String,
    /// Position RMSE (m) over the coarse nodes per step, against the fine
    /// reference restricted to them.
    pub rmse_plain: Vec<f32>,
    pub rmse_corrected: Vec<f32>,
    pub rmse_fine2: Vec<f32>,
    /// The plain coarse mesh with two physics steps of `dt / 2` per frame.
    #[serde(default)]
    pub rmse_half_dt: Vec<f32>,
    /// The plain coarse mesh with four physics steps of `dt / 4` per frame.
    #[serde(default)]
    pub rmse_quarter_dt: Vec<f32>,
    /// Corrected by the int8 network of `weft_core::gnn::int8`.
    pub rmse_int8: Vec<f32>,
    /// Mean over steps.
    pub mean_plain: f32,
    pub mean_corrected: f32,
    pub mean_fine2: f32,
    #[serde(default)]
    pub mean_half_dt: f32,
    #[serde(default)]
    pub mean_quarter_dt: f32,
    pub mean_int8: f32,
    /// Seconds per coarse step.
    pub cost_plain: f64,
    pub cost_corrected: f64,
    pub cost_fine2: f64,
    #[serde(default)]
    pub cost_half_dt: f64,
    #[serde(default)]
    pub cost_quarter_dt: f64,
    pub cost_int8: f64,
    pub cost_fine: f64,
    /// Set when a rollout stopped early (non-finite state).
    pub failures: Vec<String>,
}

/// Evaluates one trajectory (its fine reference is `traj.x`).
pub fn evaluate(
    traj: &Trajectory,
    model: Option<&Trained>,
    int8: Option<&NetworkData>,
    steps: usize,
) -> Result<Rollout> {
    let scn = &traj.scenario;
    let steps = steps.min(traj.x.len() - 1);
    let n = traj.x[0].len();
    let all: Vec<usize> = (0..n).collect();
    let mut r = Rollout {
        name: scn.name.clone(),
        family: traj.family.name().into(),
        split: traj.split.clone(),
        cost_fine: traj.fine_seconds as f64 / (traj.x.len() - 1) as f64,
        ..Rollout::default()
    };
    let errors = |xs: &[Vec<Vec3>]| -> Vec<f32> { xs.iter().zip(&traj.x).skip(1).map(|(a, b)| rmse(a, b)).collect() };

    let (xs, cost, fail) = rollout(scn, steps, &all, &mut Plain)?;
    (r.rmse_plain, r.cost_plain) = (errors(&xs), cost);
    r.failures.extend(fail.map(|f| format!("plain: {f}")));

    let fine2 = scn.refined(2, 1);
    let map: Vec<usize> = (0..n).map(|i| scn.refine_node(i, 2)).collect();
    let (xs, cost, fail) = rollout(&fine2, steps, &map, &mut Plain)?;
    (r.rmse_fine2, r.cost_fine2) = (errors(&xs), cost);
    r.failures.extend(fail.map(|f| format!("fine2: {f}")));

    let (xs, cost, fail) = rollout(&scn.refined(1, 2), steps, &all, &mut Plain)?;
    (r.rmse_half_dt, r.cost_half_dt) = (errors(&xs), cost);
    r.failures.extend(fail.map(|f| format!("half dt: {f}")));

    let (xs, cost, fail) = rollout(&scn.refined(1, 4), steps, &all, &mut Plain)?;
    (r.rmse_quarter_dt, r.cost_quarter_dt) = (errors(&xs), cost);
    r.failures.extend(fail.map(|f| format!("quarter dt: {f}")));

    if let Some(m) = model {
        let (xs, cost, fail) = corrected_rollout(scn, steps, m)?;
        (r.rmse_corrected, r.cost_corrected) = (errors(&xs), cost);
        r.failures.extend(fail.map(|f| format!("corrected: {f}")));
    }
    if let Some(net) = int8 {
        let (xs, cost, fail) = rollout(scn, steps, &all, &mut Int8::new(net))?;
        (r.rmse_int8, r.cost_int8) = (errors(&xs), cost);
        r.failures.extend(fail.map(|f| format!("int8: {f}")));
    }
    r.mean_plain = mean(&r.rmse_plain);
    r.mean_int8 = mean(&r.rmse_int8);
    r.mean_corrected = mean(&r.rmse_corrected);
    r.mean_fine2 = mean(&r.rmse_fine2);
    r.mean_half_dt = mean(&r.rmse_half_dt);
    r.mean_quarter_dt = mean(&r.rmse_quarter_dt);
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
/// default its own).
fn trajectories(source: &Source, data: &Path, steps: Option<usize>) -> Result<Vec<Trajectory>> {
    let trajs = match source {
        Source::Scenario(path) => {
            let mut scn = Scenario::load(path)?;
            if let Some(s) = steps {
                scn.time.steps = s as u32;
            }
            let spec = crate::learn::dataset::load_index(data).map(|i| i.spec).unwrap_or_default();
            for w in crate::learn::dataset::outside_training(&scn, &spec) {
                eprintln!("warning: {}: {w}", path.display());
            }
            let (x, v, secs) =
                crate::learn::dataset::fine_reference(&scn, spec.k, spec.time_substeps, spec.fine_integrator)?;
            vec![Trajectory {
                scenario: scn,
                family: crate::learn::families::Family::Hang,
                seed: 0,
                split: "scenario".into(),
                x,
                v,
                fine_seconds: secs,
            }]
        }
        Source::Split(split) => crate::learn::dataset::load_split(data, Some(split))?,
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
    let int8 = int8.map(crate::learn::quantize::load).transpose()?;
    let trajs = trajectories(source, data, steps)?;
    if horizons {
        let name = matches!(source, Source::Scenario(_)).then_some("scenario");
        let rep = crate::learn::horizons::report(&trajs, name, data, trained.as_ref(), int8.as_ref(), true)?;
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
    let rep = report(rollouts, steps);
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("report.json"), serde_json::to_string_pretty(&rep)?)?;
    let text = summary(&rep, steps, out);
    Ok((text, Some(rep)))
}

/// What `weft eval` prints: the overall line, the tables, the failures.
fn summary(rep: &Report, steps: usize, out: &Path) -> String {
    use std::fmt::Write;
    let int8_part = if rep.rollouts.iter().any(|r| !r.rmse_int8.is_empty()) {
        format!(
            "int8 {:.4} m ({:.3}× plain, {:.3}× float)",
            rep.overall_int8, rep.ratio_int8_plain, rep.ratio_int8_corrected
        )
    } else {
        "no int8 column".into()
    };
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{} rollouts × {steps} steps: mean position RMSE plain {:.4} m, corrected {:.4} m ({:.3}× plain), \
         {int8_part}, 2× finer {:.4} m, plain at dt/2 {:.4} m, at dt/4 {:.4} m; \
         s/step plain {:.2e}, corrected {:.2e}, int8 {:.2e}, 2× finer {:.2e}, dt/2 {:.2e}, dt/4 {:.2e}, fine {:.2e}; wrote {}",
        rep.rollouts.len(),
        rep.overall_plain,
        rep.overall_corrected,
        rep.ratio_corrected_plain,
        rep.overall_fine2,
        rep.overall_half_dt,
        rep.overall_quarter_dt,
        rep.cost_plain,
        rep.cost_corrected,
        rep.cost_int8,
        rep.cost_fine2,
        rep.cost_half_dt,
        rep.cost_quarter_dt,
        rep.cost_fine,
        out.display()
    );
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

/// `weft gain`: rolls out the validation split (or `split`) with each
/// candidate factor on the network's corrections, writes the best into the
/// model's JSON; returns the report.
pub fn choose_gain(model: &Path, data: &Path, split: &str, gains: &[f32], steps: usize) -> Result<String> {
    use std::fmt::Write;
    let mut out = String::new();
    let mut trained = Trained::load(model, &candle_core::Device::Cpu)?;
    let trajs = crate::learn::dataset::load_split(data, Some(split))?;
    if trajs.is_empty() || gains.is_empty() {
        anyhow::bail!("nothing to choose from: split {split:?} of {} and {} gains", data.display(), gains.len());
    }
    let plain =
        mean(&trajs.iter().map(|t| evaluate(t, None, None, steps).map(|r| r.mean_plain)).collect::<Result<Vec<_>>>()?);
    let mut best = (f32::INFINITY, 1.0f32);
    for &g in gains {
        trained.meta.gain = g;
        let errs = trajs.iter().map(|t| corrected_error(t, &trained, steps)).collect::<Result<Vec<_>>>()?;
        let corrected = mean(&errs);
        let _ =
            writeln!(out, "gain {g}: corrected {corrected:.4} m, plain {plain:.4} m ({:.3}× plain)", corrected / plain);
        if corrected < best.0 {
            best = (corrected, g);
        }
    }
    trained.meta.gain = best.1;
    let json = model.with_extension("json");
    std::fs::write(&json, serde_json::to_string_pretty(&trained.meta)?)?;
    let _ = writeln!(out, "gain {} written to {}", best.1, json.display());

    Ok(out)
}

/// Everything `weft eval` writes.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Report {
    pub steps: usize,
    pub rollouts: Vec<Rollout>,
    /// Per-step RMSE averaged over the rollouts.
    pub mean_rmse_plain: Vec<f32>,
    pub mean_rmse_corrected: Vec<f32>,
    pub mean_rmse_fine2: Vec<f32>,
    #[serde(default)]
    pub mean_rmse_half_dt: Vec<f32>,
    #[serde(default)]
    pub mean_rmse_quarter_dt: Vec<f32>,
    pub mean_rmse_int8: Vec<f32>,
    /// Averages over steps and rollouts.
    pub overall_plain: f32,
    pub overall_corrected: f32,
    pub overall_fine2: f32,
    #[serde(default)]
    pub overall_half_dt: f32,
    #[serde(default)]
    pub overall_quarter_dt: f32,
    pub overall_int8: f32,
    /// corrected / plain.
    pub ratio_corrected_plain: f32,
    pub ratio_corrected_fine2: f32,
    #[serde(default)]
    pub ratio_corrected_half_dt: f32,
    pub ratio_int8_plain: f32,
    /// int8 corrected / float corrected.
    pub ratio_int8_corrected: f32,
    /// Mean seconds per coarse step.
    pub cost_plain: f64,
    pub cost_corrected: f64,
    pub cost_fine2: f64,
    #[serde(default)]
    pub cost_half_dt: f64,
    #[serde(default)]
    pub cost_quarter_dt: f64,
    pub cost_int8: f64,
    pub cost_fine: f64,
    /// The same means per family (and the rollouts' count).
    #[serde(default)]
    pub families: Vec<FamilyRow>,
}

/// Mean position RMSE (m) of one family's rollouts, each column.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FamilyRow {
    pub family: String,
    pub rollouts: usize,
    pub plain: f32,
    pub corrected: f32,
    pub int8: f32,
    pub fine2: f32,
    pub half_dt: f32,
    pub quarter_dt: f32,
}

impl FamilyRow {
    /// The column means of `rollouts`, named `family`.
    fn of(family: &str, rollouts: &[&Rollout]) -> FamilyRow {
        let col = |pick: fn(&Rollout) -> f32| mean(&rollouts.iter().map(|r| pick(r)).collect::<Vec<_>>());
        FamilyRow {
            family: family.to_string(),
            rollouts: rollouts.len(),
            plain: col(|r| r.mean_plain),
            corrected: col(|r| r.mean_corrected),
            int8: col(|r| r.mean_int8),
            fine2: col(|r| r.mean_fine2),
            half_dt: col(|r| r.mean_half_dt),
            quarter_dt: col(|r| r.mean_quarter_dt),
        }
    }
}

/// One plain alternative against the corrected step.
#[derive(Clone, Debug, PartialEq)]
pub struct Alternative {
    pub name: &'static str,
    /// Mean position RMSE (m).
    pub error: f32,
    /// Seconds per frame over the corrected step's ([`Report::corrected_step`]).
    pub cost_ratio: f64,
    /// It costs less than `budget` times the corrected step and the
    /// corrected step is not more accurate.
    pub beats_corrected: bool,
}

impl Report {
    /// The corrected step the alternatives are held against: the int8
    /// network's (what the device runs) when it was evaluated, else the
    /// float one's; `(name, mean error, seconds per frame)`.
    pub fn corrected_step(&self) -> (&'static str, f32, f64) {
        if self.rollouts.iter().any(|r| !r.rmse_int8.is_empty()) {
            ("int8-corrected", self.overall_int8, self.cost_int8)
        } else {
            ("float-corrected", self.overall_corrected, self.cost_corrected)
        }
    }

    /// The plain alternatives against the corrected step
    /// ([`Report::corrected_step`]): each one's error and cost, and whether
    /// it beats the corrected step at less than `budget` times its cost (the
    /// goal: none does for `budget` 3).
    pub fn pareto(&self, budget: f64) -> Vec<Alternative> {
        let (_, corrected, cost) = self.corrected_step();
        let base = cost.max(f64::MIN_POSITIVE);
        [
            ("plain", self.overall_plain, self.cost_plain),
            ("2× finer mesh", self.overall_fine2, self.cost_fine2),
            ("dt / 2", self.overall_half_dt, self.cost_half_dt),
            ("dt / 4", self.overall_quarter_dt, self.cost_quarter_dt),
        ]
        .into_iter()
        .map(|(name, error, cost)| {
            let cost_ratio = cost / base;
            Alternative { name, error, cost_ratio, beats_corrected: cost_ratio < budget && error <= corrected }
        })
        .collect()
    }
}

/// The per-family table (mean position RMSE, and corrected / plain) and
/// the plain alternatives against the corrected step, as `weft eval` prints
/// them.
pub fn tables(rep: &Report, budget: f64) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "family        n    plain (m)  corrected  int8     corrected/plain  int8/plain  2× finer  dt/2     dt/4"
    );
    let row = |s: &mut String, name: &str, n: usize, c: [f32; 6]| {
        let _ = writeln!(
            s,
            "{name:<12} {n:>3}  {:>9.4}  {:>9.4}  {:>7.4}  {:>15.3}  {:>10.3}  {:>8.4}  {:>7.4}  {:>7.4}",
            c[0],
            c[1],
            c[2],
            c[1] / c[0],
            c[2] / c[0],
            c[3],
            c[4],
            c[5]
        );
    };
    for f in &rep.families {
        row(&mut s, &f.family, f.rollouts, [f.plain, f.corrected, f.int8, f.fine2, f.half_dt, f.quarter_dt]);
    }
    let all = [
        rep.overall_plain,
        rep.overall_corrected,
        rep.overall_int8,
        rep.overall_fine2,
        rep.overall_half_dt,
        rep.overall_quarter_dt,
    ];
    row(&mut s, "all", rep.rollouts.len(), all);
    let (name, error, cost) = rep.corrected_step();
    let _ = writeln!(
        s,
        "plain alternatives against the {name} step ({error:.4} m, {:.2} ms per frame on this host):",
        cost * 1e3
    );
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
            a.name, a.error, a.cost_ratio
        );
    }
    s
}

fn per_step(rollouts: &[Rollout], pick: impl Fn(&Rollout) -> &Vec<f32>) -> Vec<f32> {
    let len = rollouts.iter().map(|r| pick(r).len()).max().unwrap_or(0);
    (0..len)
        .map(|t| {
            let vals: Vec<f32> = rollouts.iter().filter_map(|r| pick(r).get(t).copied()).collect();
            mean(&vals)
        })
        .collect()
}

pub fn report(rollouts: Vec<Rollout>, steps: usize) -> Report {
    let m = |f: fn(&Rollout) -> f64| rollouts.iter().map(f).sum::<f64>() / rollouts.len().max(1) as f64;
    let mut rep = Report {
        steps,
        mean_rmse_plain: per_step(&rollouts, |r| &r.rmse_plain),
        mean_rmse_corrected: per_step(&rollouts, |r| &r.rmse_corrected),
        mean_rmse_fine2: per_step(&rollouts, |r| &r.rmse_fine2),
        mean_rmse_half_dt: per_step(&rollouts, |r| &r.rmse_half_dt),
        mean_rmse_quarter_dt: per_step(&rollouts, |r| &r.rmse_quarter_dt),
        mean_rmse_int8: per_step(&rollouts, |r| &r.rmse_int8),
        cost_plain: m(|r| r.cost_plain),
        cost_corrected: m(|r| r.cost_corrected),
        cost_fine2: m(|r| r.cost_fine2),
        cost_half_dt: m(|r| r.cost_half_dt),
        cost_quarter_dt: m(|r| r.cost_quarter_dt),
        cost_int8: m(|r| r.cost_int8),
        cost_fine: m(|r| r.cost_fine),
        ..Report::default()
    };
    let all = FamilyRow::of("all", &rollouts.iter().collect::<Vec<_>>());
    (rep.overall_plain, rep.overall_corrected, rep.overall_int8) = (all.plain, all.corrected, all.int8);
    (rep.overall_fine2, rep.overall_half_dt, rep.overall_quarter_dt) = (all.fine2, all.half_dt, all.quarter_dt);
    let mut names: Vec<&str> = rollouts.iter().map(|r| r.family.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    rep.families = names
        .iter()
        .map(|&f| FamilyRow::of(f, &rollouts.iter().filter(|r| r.family == f).collect::<Vec<_>>()))
        .collect();
    rep.ratio_int8_plain = rep.overall_int8 / rep.overall_plain;
    rep.ratio_int8_corrected = rep.overall_int8 / rep.overall_corrected;
    rep.ratio_corrected_plain = rep.overall_corrected / rep.overall_plain;
    rep.ratio_corrected_fine2 = rep.overall_corrected / rep.overall_fine2;
    rep.ratio_corrected_half_dt = rep.overall_corrected / rep.overall_half_dt;
    rep.rollouts = rollouts;
    rep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alternative_beats_the_corrected_step_only_when_cheaper_than_the_budget_and_as_accurate() {
        let rep = Report {
            rollouts: vec![Rollout { rmse_int8: vec![0.05], ..Rollout::default() }],
            overall_int8: 0.05,
            cost_int8: 1.0,
            overall_corrected: 0.04,
            cost_corrected: 10.0,
            overall_plain: 0.08,
            cost_plain: 0.5,
            overall_half_dt: 0.05,
            cost_half_dt: 1.2,
            overall_quarter_dt: 0.03,
            cost_quarter_dt: 3.5,
            overall_fine2: 0.02,
            cost_fine2: 2.0,
            ..Report::default()
        };
        // Held against the int8 step (0.05 m, 1 s), budget 3.
        let beats: Vec<(&str, bool)> = rep.pareto(3.0).iter().map(|a| (a.name, a.beats_corrected)).collect();
        assert_eq!(beats, [("plain", false), ("2× finer mesh", true), ("dt / 2", true), ("dt / 4", false)]);
        let float = Report { rollouts: vec![Rollout::default()], ..rep };
        assert_eq!(float.corrected_step().0, "float-corrected");
        // Held against the float step (0.04 m, 10 s): all cost under 30 s.
        let beats: Vec<bool> = float.pareto(3.0).iter().map(|a| a.beats_corrected).collect();
        assert_eq!(beats, [false, true, false, true]);
    }
}
