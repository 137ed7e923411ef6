//! `weft gain`: the factor on the network's corrections that gives the
//! lowest error on a split, at a horizon or over whole rollouts, among the
//! factors no worse than plain under the guards.

use std::path::Path;

use anyhow::{Context, Result};

use crate::learn::data::metrics::{frame_errors, mean, rollout_mean};
use crate::learn::data::Trajectory;
use crate::learn::eval::columns::Column;
use crate::learn::eval::horizons;
use crate::learn::network::{corrected_error, Trained};
use crate::sim::corrector::Plain;
use crate::sim::rollout;
use weft_weights::format::NetworkData;

/// What `weft gain` minimises on its split.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Selection {
    /// The mean error of rollouts of this many frames from each
    /// trajectory's start.
    Rollout(usize),
    /// The mean error over the windows of this horizon (`weft eval
    /// --horizons`' rollouts of 1, 10 or 50 frames started every 20).
    Horizon(usize),
}

impl std::fmt::Display for Selection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selection::Rollout(n) => write!(f, "mean error of {n}-frame rollouts from each start"),
            Selection::Horizon(h) => write!(f, "mean error at horizon {h} (rollouts of {h} frames every 20)"),
        }
    }
}

/// `weft gain`: rolls out the validation split (or `split`) with each
/// candidate factor on the network's corrections, writes the best into the
/// model's JSON; returns the report.
pub fn choose_gain(model: &Path, data: &Path, split: &str, gains: &[f32], by: Selection) -> Result<String> {
    choose_gain_guarded(model, data, split, gains, by, &[], None)
}

/// [`choose_gain`] with guards: with `guards`, further measures (say,
/// horizon 50 and whole rollouts beside a selection at horizon 10), only
/// gains whose error under each is at most plain's are chosen from (gain 0, plain itself, when
/// none is), so that a correction chosen for short horizons does not lose
/// to the plain step at long ones.
///
/// With `int8` (`weft gain --int8`), the network is judged as the device
/// runs it: quantised at each gain with these options (calibrated on
/// `samples` training graphs, as `weft quantize` does).
#[allow(clippy::too_many_arguments)]
pub fn choose_gain_guarded(
    model: &Path,
    data: &Path,
    split: &str,
    gains: &[f32],
    by: Selection,
    guards: &[Selection],
    int8: Option<(crate::learn::quantise::Options, usize)>,
) -> Result<String> {
    use std::fmt::Write;
    let mut out = String::new();
    let mut trained = Trained::load(model, &candle_core::Device::Cpu)?;
    let trajs = crate::learn::data::load_split(data, Some(split))?;
    if trajs.is_empty() || gains.is_empty() {
        anyhow::bail!("nothing to choose from: split {split:?} of {} and {} gains", data.display(), gains.len());
    }
    let calibrated = match int8 {
        Some((opts, samples)) => {
            let (float, ranges, _) = crate::learn::quantise::calibration(&trained, data, samples)?;
            Some((float, ranges, opts))
        }
        None => None,
    };
    // The int8 network at gain `g` (none: the float one is judged).
    let int8_at = |g: f32| -> Result<Option<NetworkData>> {
        let Some((float, ranges, opts)) = &calibrated else { return Ok(None) };
        let float = crate::learn::quantise::FloatNet { gain: g, ..float.clone() };
        crate::learn::quantise::quantize_with(&float, ranges, *opts).map(Some)
    };
    let mean_of = |by: Selection, m: Option<&Trained>, q: Option<&NetworkData>| -> Result<f32> {
        Ok(mean(&trajs.iter().map(|t| selection_error(by, t, m, q)).collect::<Result<Vec<_>>>()?))
    };
    let plain = mean_of(by, None, None)?;
    let guard_plain = guards.iter().map(|&g| mean_of(g, None, None)).collect::<Result<Vec<_>>>()?;
    let _ = writeln!(out, "{by}{}", if calibrated.is_some() { ", int8" } else { "" });
    for g in guards {
        let _ = writeln!(out, "guard: no worse than plain at the {g}");
    }
    // Without a passing gain, none: the plain step.
    let mut best = (f32::INFINITY, if guards.is_empty() { 1.0f32 } else { 0.0 });
    for &g in gains {
        trained.meta.gain = g;
        let q = int8_at(g)?;
        let corrected = mean_of(by, Some(&trained), q.as_ref())?;
        let _ =
            write!(out, "gain {g}: corrected {corrected:.4e} m, plain {plain:.4e} m ({:.3}× plain)", corrected / plain);
        let mut passes = true;
        for (&by_guard, &p) in guards.iter().zip(&guard_plain) {
            let c = mean_of(by_guard, Some(&trained), q.as_ref())?;
            let _ = write!(out, "; guard {:.3}× plain", c / p);
            passes &= c <= p;
        }
        let _ = writeln!(out);
        if passes && corrected < best.0 {
            best = (corrected, g);
        }
    }
    trained.meta.gain = best.1;
    // The whole model: one of the first format is written in the current.
    trained.save(model)?;
    let _ = writeln!(out, "gain {} written to {}", best.1, model.with_extension("json").display());

    Ok(out)
}

/// What `by` measures on `traj`: plain (no network), the float network,
/// or (with `q`) the int8 one.
fn selection_error(by: Selection, t: &Trajectory, float: Option<&Trained>, q: Option<&NetworkData>) -> Result<f32> {
    match (by, float) {
        (Selection::Rollout(steps), None) => plain_error(t, steps),
        (Selection::Rollout(steps), Some(m)) => match q {
            Some(q) => int8_error(t, q, steps),
            None => corrected_error(t, m, steps),
        },
        (Selection::Horizon(h), _) => {
            let col = match (float, q) {
                (None, _) => Column::Plain,
                (Some(_), None) => Column::Float,
                (Some(_), Some(_)) => Column::Int8,
            };
            horizons::horizon_error_with(t, col, float, q, h)?.context("a horizon of weft eval's (1, 10 or 50)")
        }
    }
}

/// The int8 network's mean error over `steps` frames from the start of
/// `traj` (as [`corrected_error`] is the float one's).
fn int8_error(traj: &Trajectory, q: &NetworkData, steps: usize) -> Result<f32> {
    let scn = &traj.scenario;
    let steps = steps.min(traj.x.len() - 1);
    let mut corrector = crate::sim::corrector::Int8::new(q);
    let r = rollout(scn, steps, &Column::Int8.nodes(scn), &mut corrector)?;
    Ok(rollout_mean(frame_errors(&r.x, &traj.x), steps))
}

/// The plain rollout's mean error over `steps` frames.
fn plain_error(traj: &Trajectory, steps: usize) -> Result<f32> {
    let scn = &traj.scenario;
    let r = rollout(scn, steps.min(traj.x.len() - 1), &Column::Plain.nodes(scn), &mut Plain)?;
    Ok(mean(&frame_errors(&r.x, &traj.x)))
}
