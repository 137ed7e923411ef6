//! `weft select`: which network ships. Every arm of an A/B is trained
//! with two seeds or more; `weft gain` (int8, validation, horizon 10 under
//! the 50-frame and whole-rollout guards) leaves each run's `gain.txt`.
//! An arm's score is the mean over its seeds of the chosen gain's error
//! × plain; a network ships only if its arm's score beats the shipped
//! network's, and then the arm's best seed is the one.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// One run's choice: the gain `weft gain` wrote and its error × plain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    pub gain: f32,
    pub ratio: f32,
}

/// The choice recorded in a `weft gain` report: the ratio on the line of
/// the gain it wrote.
pub fn parse_gain_report(text: &str) -> Result<Choice> {
    let chosen: f32 = text
        .lines()
        .find_map(|l| l.strip_prefix("gain ").and_then(|r| r.split_once(" written to ")).map(|(g, _)| g.to_string()))
        .context("no 'gain … written to' line")?
        .parse()?;
    for line in text.lines() {
        let Some((g, rest)) = line.strip_prefix("gain ").and_then(|r| r.split_once(": corrected ")) else { continue };
        if g.parse::<f32>().ok() != Some(chosen) {
            continue;
        }
        let ratio = rest
            .split_once(" (")
            .and_then(|(_, r)| r.split_once("× plain)"))
            .map(|(r, _)| r.trim().to_string())
            .context("no ratio on the chosen gain's line")?;
        return Ok(Choice { gain: chosen, ratio: ratio.parse()? });
    }
    bail!("the chosen gain {chosen} has no line of its own")
}

/// An arm: its name and its runs (folders holding `gain.txt`).
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

fn read_choice(run: &Path) -> Result<Choice> {
    let path = if run.is_dir() { run.join("gain.txt") } else { run.to_path_buf() };
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse_gain_report(&text).with_context(|| path.display().to_string())
}

/// The report and the arm that ships (none: the baseline stays).
pub fn select(baseline: &Path, arms: &[Arm]) -> Result<(String, Option<String>)> {
    use std::fmt::Write;
    let base = read_choice(baseline)?;
    let mut out = format!("baseline {}: {:.3}× plain (gain {})\n", baseline.display(), base.ratio, base.gain);
    let mut best: Option<(f32, String)> = None;
    for arm in arms {
        let choices = arm.runs.iter().map(|r| read_choice(r)).collect::<Result<Vec<_>>>()?;
        let mean = choices.iter().map(|c| c.ratio).sum::<f32>() / choices.len().max(1) as f32;
        let each: Vec<String> = choices.iter().map(|c| format!("{:.3} (gain {})", c.ratio, c.gain)).collect();
        let _ = writeln!(out, "{}: mean {mean:.3}× plain over {} seeds: {}", arm.name, choices.len(), each.join(", "));
        if choices.len() >= 2 && mean < base.ratio && best.as_ref().is_none_or(|b| mean < b.0) {
            best = Some((mean, arm.name.clone()));
        }
    }
    match &best {
        Some((m, name)) => {
            let _ = writeln!(out, "ships: {name} ({m:.3} against {:.3})", base.ratio);
        }
        None => {
            let _ = writeln!(out, "ships: none; the baseline stays");
        }
    }
    Ok((out, best.map(|b| b.1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chosen_gain_and_its_ratio_are_read() {
        let text = "mean error at horizon 10 (rollouts of 10 frames every 20), int8\n\
            gain 0: corrected 1.1945e-2 m, plain 1.6872e-2 m (0.708× plain); guard 0.834× plain\n\
            gain 0.5: corrected 1.1343e-2 m, plain 1.6872e-2 m (0.672× plain); guard 0.836× plain\n\
            gain 1: corrected 1.1307e-2 m, plain 1.6872e-2 m (0.670× plain); guard 1.214× plain\n\
            gain 0.5 written to /tmp/w.json\n";
        assert_eq!(parse_gain_report(text).unwrap(), Choice { gain: 0.5, ratio: 0.672 });
        assert!(parse_gain_report("gain 0.5: corrected 1 m, plain 1 m (1.0× plain)\n").is_err());
    }
}
