//! What the fine reference's warm start (`solver.warm_start`,
//! `weft_core::model::StepParams::warm_start`) changes: one family's
//! reference with and without it, beside the reference's own floor (its
//! change from a start moved 1 µm) and the plain coarse error, each as the
//! mean position RMSE over the frames, and the wall time of each run
//! (`cargo run --release -p weft-host --example warm_start -- fold 0 200`:
//! family, seed, frames).
use weft_core::math::Vec3;
use weft_host::learn::data::{fine_scenario, DatasetSpec, PERTURBATION};
mod common;
use weft_host::learn::data::families::Family;
use weft_host::learn::data::metrics::{mean, rmse};
use weft_host::sim::{self, corrector::Plain, scenario::Scenario};

type Frames = Vec<Vec<Vec3>>;

/// The fine run of `coarse` restricted to its nodes, and its seconds.
fn reference(coarse: &Scenario, spec: &DatasetSpec, warm: bool) -> anyhow::Result<(Frames, f64)> {
    let (mut fine, map) = fine_scenario(coarse, spec.k, spec.time_substeps, spec.fine_integrator)?;
    fine.solver.warm_start = warm;
    let mut xs = Vec::new();
    let t0 = std::time::Instant::now();
    sim::run(&fine, false, &mut Plain, |_, _, state| {
        xs.push(map.iter().map(|&i| state.positions()[i]).collect());
        Ok(())
    })?;
    Ok((xs, t0.elapsed().as_secs_f64()))
}

fn change(a: &Frames, b: &Frames) -> f32 {
    mean(&a.iter().zip(b).skip(1).map(|(p, q)| rmse(p, q)).collect::<Vec<_>>())
}

fn main() -> anyhow::Result<()> {
    let (spec, coarse, family, seed, frames) = common::coarse_from_args(Family::Fold, 200);
    let (warm, t_warm) = reference(&coarse, &spec, true)?;
    let (cold, t_cold) = reference(&coarse, &spec, false)?;
    let mut moved = coarse.clone();
    moved.cloth.center[0] += PERTURBATION;
    let (floor, _) = reference(&moved, &spec, true)?;
    let mut plain = Vec::new();
    sim::run(&coarse, false, &mut Plain, |_, _, state| {
        plain.push(state.positions().to_vec());
        Ok(())
    })?;
    let p = change(&plain, &warm);
    println!(
        "{family:?} seed {seed}, {frames} frames: warm start against none {:.2e} m ({:.4} of plain), \
         floor (start moved 1 µm) {:.2e} m ({:.4}), plain error {p:.2e} m; {t_warm:.1} s warm, {t_cold:.1} s cold ({:.2}×)",
        change(&warm, &cold),
        change(&warm, &cold) / p,
        change(&warm, &floor),
        change(&warm, &floor) / p,
        t_warm / t_cold
    );
    Ok(())
}
