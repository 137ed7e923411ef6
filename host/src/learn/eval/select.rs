//! `weft select`: which network ships, by the frontier
//! ([`crate::learn::eval::frontier`]). Every arm of an A/B is trained with
//! two seeds or more, and each run leaves `weft eval --split val`'s
//! `eval-val/report.json` (from each scene's start). A run's score is the
//! mean of its corrected step's pooled frontier ratios at 10 and 50
//! frames (int8 where the report has it, else float); an arm's score is
//! the mean over its seeds. The whole-rollout guard: every seed's ratio
//! over 200 frames is at most 1 (over whole rollouts the correction is
//! never worse than the plain step of its cost). A network ships only if
//! its arm passes the guard and scores below the baseline (the shipped
//! network's report on the same split, when it passes the guard too),
//! and then the arm's best seed is the one. When neither an arm nor the
//! baseline passes, the fallback is no network: the best plain step (by
//! the same mean of 10 and 50 frames) at the baseline's device budget,
//! named from its report.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::learn::eval::columns::Column;
use crate::learn::eval::frontier::{window_mean, FRONTIER_HORIZONS};
use crate::learn::eval::Report;

/// One run's figures: its corrected column and that column's pooled
/// frontier ratios at [`FRONTIER_HORIZONS`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scored {
    pub column: Column,
    pub ratio: [f64; 3],
}

impl Scored {
    /// The ranking score: the mean of the ratios at 10 and 50 frames.
    pub fn score(&self) -> f64 {
        0.5 * (self.ratio[0] + self.ratio[1])
    }
    /// The whole-rollout guard: at most 1 over 200 frames.
    pub fn guarded(&self) -> bool {
        self.ratio[2] <= 1.0
    }
}

/// The corrected column of `rep` (int8, else float) and its ratios.
pub fn scored(rep: &Report) -> Option<Scored> {
    let column = rep.corrected_step()?.column;
    Some(Scored { column, ratio: rep.frontier_ratio(column)? })
}

/// An arm: its name and its runs (folders holding `eval-val/report.json`,
/// or report files).
#[derive(Clone, Debug)]
pub struct Arm {
    pub name: String,
    pub runs: Vec<PathBuf>,
}

impl std::str::FromStr for Arm {
    type Err = String;
    /// `NAME=RUN,RUN…`
    fn from_str(s: &str) -> Result<Arm, String> {
        let (name, runs) = s.split_once('=').ok_or_else(|| format!("expected NAME=RUN,RUN…, got {s:?}"))?;
        Ok(Arm { name: name.into(), runs: runs.split(',').map(PathBuf::from).collect() })
    }
}

/// The validation report of a run folder (or a report file).
pub fn read_report(run: &Path) -> Result<Report> {
    let path = if run.is_dir() { run.join("eval-val").join("report.json") } else { run.to_path_buf() };
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| path.display().to_string())
}

fn read_scored(run: &Path) -> Result<(Scored, Report)> {
    let rep = read_report(run)?;
    let s = scored(&rep).with_context(|| format!("{}: no corrected column with a frontier ratio", run.display()))?;
    Ok((s, rep))
}

/// The plain column with the lowest error by the ranking's measure (the
/// mean of its errors over 10 and 50 frames from the start, each over
/// backward Euler's) among those no dearer than `budget` device
/// instructions a frame (the cheapest when every one is dearer).
pub fn best_plain(rep: &Report, budget: f64) -> Option<Column> {
    let plain: Vec<_> = rep.columns.iter().filter(|c| !c.column.corrected() && !c.per_frame.is_empty()).collect();
    let [k10, k50, _] = FRONTIER_HORIZONS;
    let unit = |k: usize| rep.column(Column::Plain).map_or(1.0, |p| window_mean(&p.per_frame, k));
    let error = |c: &crate::learn::eval::ColumnStats| {
        0.5 * (window_mean(&c.per_frame, k10) / unit(k10) + window_mean(&c.per_frame, k50) / unit(k50))
    };
    let affordable = plain.iter().filter(|c| c.device_per_frame <= budget);
    match affordable.min_by(|a, b| error(a).total_cmp(&error(b))) {
        Some(c) => Some(c.column),
        None => plain.iter().min_by(|a, b| a.device_per_frame.total_cmp(&b.device_per_frame)).map(|c| c.column),
    }
}

/// What `weft select` decides.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// This arm ships, as this run (its best seed).
    Arm(String, PathBuf),
    /// The baseline stays.
    Baseline,
    /// No network passes the guard: the plain step of this column.
    Plain(Column),
}

/// The report and the decision.
pub fn select(baseline: &Path, arms: &[Arm]) -> Result<(String, Decision)> {
    use std::fmt::Write;
    let (base, base_rep) = read_scored(baseline)?;
    let fmt = |s: &Scored| format!("{:.3} / {:.3} / {:.3}", s.ratio[0], s.ratio[1], s.ratio[2]);
    let mut out = format!(
        "frontier ratios at 10 / 50 / 200 frames from the start (score: mean of 10 and 50; guard: 200 ≤ 1)\n\
         baseline {}: {} {}, score {:.3}{}\n",
        baseline.display(),
        base.column.label(),
        fmt(&base),
        base.score(),
        if base.guarded() { "" } else { ", fails the guard" }
    );
    let mut best: Option<(f64, String, PathBuf)> = None;
    for arm in arms {
        let runs = arm.runs.iter().map(|r| read_scored(r).map(|s| (s.0, r.clone()))).collect::<Result<Vec<_>>>()?;
        let mean = runs.iter().map(|r| r.0.score()).sum::<f64>() / runs.len().max(1) as f64;
        let guarded = runs.iter().all(|r| r.0.guarded());
        let each: Vec<String> = runs.iter().map(|r| format!("{} ({})", fmt(&r.0), r.0.column.label())).collect();
        let _ = writeln!(
            out,
            "{}: score {mean:.3} over {} seeds{}: {}",
            arm.name,
            runs.len(),
            if guarded { "" } else { ", fails the guard" },
            each.join(", ")
        );
        let beats_base = !base.guarded() || mean < base.score();
        if runs.len() >= 2 && guarded && beats_base && best.as_ref().is_none_or(|b| mean < b.0) {
            let seed = runs.iter().min_by(|a, b| a.0.score().total_cmp(&b.0.score())).map(|r| r.1.clone());
            best = seed.map(|s| (mean, arm.name.clone(), s));
        }
    }
    let decision = match best {
        Some((m, name, run)) => {
            let _ = writeln!(out, "ships: {name} ({m:.3}), its seed {}", run.display());
            Decision::Arm(name, run)
        }
        None if base.guarded() => {
            let _ = writeln!(out, "ships: none; the baseline stays");
            Decision::Baseline
        }
        None => {
            let budget = base_rep.corrected_step().map_or(0.0, |c| c.device_per_frame);
            let plain = best_plain(&base_rep, budget).unwrap_or(Column::Plain);
            let _ = writeln!(
                out,
                "ships: no network passes the guard; the best plain step at the baseline's budget ({:.2} M instructions a frame) is {}",
                budget / 1e6,
                plain.label()
            );
            Decision::Plain(plain)
        }
    };
    Ok((out, decision))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::eval::{Rollout, Run};

    /// A report of one rollout: plain (cost 10, error `p` every frame),
    /// BDF2 (cost 9, error 0.9 p) and dt/4 (cost 25, 0.4 p), and int8 at
    /// cost 12 with `net` for the first 50 frames and `late` after.
    fn report(p: f32, net: f32, late: f32) -> Report {
        let run = |column, e: Vec<f32>, cost| Run {
            column,
            mean: 0.0,
            rmse: e,
            cost: 0.0,
            cg_per_frame: 0.0,
            device_per_frame: cost,
        };
        let r = Rollout {
            name: "a".into(),
            family: "hang".into(),
            runs: vec![
                run(Column::Plain, vec![p; 200], 10.0),
                run(Column::Bdf2, vec![0.9 * p; 200], 9.0),
                run(Column::QuarterDt, vec![0.4 * p; 200], 25.0),
                run(Column::Int8, (0..200).map(|f| if f < 50 { net } else { late }).collect(), 12.0),
            ],
            ..Rollout::default()
        };
        crate::learn::eval::report(vec![r], 200, [16, 16])
    }

    fn write(dir: &Path, name: &str, rep: &Report) -> PathBuf {
        let p = dir.join(format!("{name}.json"));
        std::fs::write(&p, serde_json::to_string(rep).unwrap()).unwrap();
        p
    }

    #[test]
    fn the_arm_with_the_lowest_guarded_score_ships_and_a_failed_guard_falls_back_to_plain() {
        let dir = tempfile::tempdir().unwrap();
        // Envelope at cost 12: 0.9 + (0.4 − 0.9)·3/16 = 0.80625 (× p).
        let base = write(dir.path(), "base", &report(1.0, 0.8, 0.8));
        let good = [write(dir.path(), "g1", &report(1.0, 0.4, 0.6)), write(dir.path(), "g2", &report(1.0, 0.5, 0.7))];
        let better_but_unguarded =
            [write(dir.path(), "u1", &report(1.0, 0.1, 2.0)), write(dir.path(), "u2", &report(1.0, 0.1, 2.0))];
        let arms = [
            Arm { name: "good".into(), runs: good.to_vec() },
            Arm { name: "wild".into(), runs: better_but_unguarded.to_vec() },
            Arm { name: "one".into(), runs: vec![good[0].clone()] },
        ];
        let (text, d) = select(&base, &arms).unwrap();
        assert_eq!(d, Decision::Arm("good".into(), good[0].clone()), "{text}");
        // A baseline that fails the guard, and no arm that passes: plain.
        let bad = write(dir.path(), "bad", &report(1.0, 2.0, 2.0));
        let (text, d) = select(&bad, &arms[1..2]).unwrap();
        assert_eq!(d, Decision::Plain(Column::Bdf2), "{text}");
        // Nothing beats a guarded baseline: it stays.
        let (_, d) = select(&good[0], &arms[1..2]).unwrap();
        assert_eq!(d, Decision::Baseline);
    }
}
