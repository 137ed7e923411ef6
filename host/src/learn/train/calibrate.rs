//! The coarse step's membrane fitted to the fine reference (`weft
//! calibrate`): a coarse triangle stands for a patch of cloth that
//! wrinkles and concentrates strain below the mesh's resolution, so the
//! coarse cloth follows the reference better with a softer membrane
//! ([`CoarseGrain`]), which may stiffen back to the material's own once
//! pulled taut (the wrinkles pulled out). Every candidate is rolled out
//! plain at horizons ([`grained_horizon_errors`]) on a split; the one with
//! the lowest error at the chosen horizon wins among those no worse than
//! the material as it is at the guard horizon.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Result};
use rayon::prelude::*;
use weft_core::model::CoarseGrain;

use crate::learn::data::{self, Trajectory};
use crate::learn::eval::horizons::{grained_horizon_errors, HORIZONS};

/// What `weft calibrate` chose and its table.
pub struct Calibration {
    pub grain: CoarseGrain,
    /// Per candidate, its mean errors at [`HORIZONS`] (m).
    pub table: Vec<(CoarseGrain, [f32; 3])>,
}

/// The mean plain errors at [`HORIZONS`] over `trajs` with the coarse
/// step's membrane grained by `grain`.
pub fn grained_errors(trajs: &[Trajectory], grain: CoarseGrain) -> Result<[f32; 3]> {
    let per: Vec<[f32; 3]> = trajs.par_iter().map(|t| grained_horizon_errors(t, grain)).collect::<Result<_>>()?;
    let n = per.len().max(1) as f32;
    Ok([0, 1, 2].map(|k| per.iter().map(|e| e[k]).sum::<f32>() / n))
}

/// The candidates of a calibration: every triple of a factor on the
/// stretch stiffness, one on the compression factor and a taut strain (0:
/// none).
pub struct Candidates<'a> {
    pub stretch: &'a [f32],
    pub compression: &'a [f32],
    pub taut: &'a [f32],
}

/// Fits the grain on `split` of the data in `data` among the
/// `candidates`, at `horizon` frames, guarded at `guard` frames (0: no
/// guard).
pub fn calibrate(
    data: &Path,
    split: &str,
    candidates: &Candidates,
    horizon: usize,
    guard: usize,
) -> Result<Calibration> {
    let Candidates { stretch, compression, taut } = *candidates;
    let at = |h: usize| HORIZONS.iter().position(|&x| x == h);
    let Some(k) = at(horizon) else { bail!("horizon {horizon}: one of {HORIZONS:?}") };
    let g = if guard == 0 {
        None
    } else {
        Some(at(guard).ok_or_else(|| anyhow::anyhow!("guard {guard}: 0 or one of {HORIZONS:?}"))?)
    };
    let trajs = data::load_split(data, Some(split))?;
    if trajs.is_empty() || stretch.is_empty() || compression.is_empty() || taut.is_empty() {
        bail!(
            "nothing to fit: split {split:?} of {} and {}×{}×{} candidates",
            data.display(),
            stretch.len(),
            compression.len(),
            taut.len()
        );
    }
    let plain = grained_errors(&trajs, CoarseGrain::NONE)?;
    let mut table = vec![(CoarseGrain::NONE, plain)];
    let mut best = (plain[k], CoarseGrain::NONE);
    let grains = stretch.iter().flat_map(|&s| {
        compression.iter().flat_map(move |&c| {
            taut.iter().map(move |&t| CoarseGrain { stretch: s, compression: c, taut: CoarseGrain::taut_from(t) })
        })
    });
    for grain in grains {
        // A taut strain changes nothing at the material's own stiffness.
        if grain.stretch == 1.0 && (grain.compression == 1.0 || grain.taut.is_some()) {
            continue;
        }
        let e = grained_errors(&trajs, grain)?;
        table.push((grain, e));
        if g.is_none_or(|g| e[g] <= plain[g]) && e[k] < best.0 {
            best = (e[k], grain);
        }
    }
    Ok(Calibration { grain: best.1, table })
}

impl Calibration {
    /// The table (× the material as it is) and the flags that train on the
    /// chosen factors (the last line).
    pub fn report(&self) -> String {
        let mut out = String::new();
        let plain = self.table[0].1;
        let _ = writeln!(out, "stretch × | compression × | taut strain | × as is at {:?} frames", HORIZONS);
        let taut = |g: &CoarseGrain| g.taut.map_or("none".to_string(), |t| t.to_string());
        for (g, e) in &self.table {
            let r = [0, 1, 2].map(|k| e[k] / plain[k]);
            let (s, c, t) = (g.stretch, g.compression, taut(g));
            let _ = writeln!(out, "{s:9} | {c:13} | {t:>11} | {:.3} / {:.3} / {:.3}", r[0], r[1], r[2]);
        }
        let _ = writeln!(out, "as is: {:.3e} / {:.3e} / {:.3e} m", plain[0], plain[1], plain[2]);
        let g = &self.grain;
        let _ = write!(out, "--coarse-stretch {} --coarse-compression {}", g.stretch, g.compression);
        let _ = writeln!(out, "{}", g.taut.map_or(String::new(), |t| format!(" --coarse-taut {t}")));
        out
    }
}
