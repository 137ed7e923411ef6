//! The fine reference `weft generate` runs, step by step: CG iterations,
//! substeps, self-contact pairs and unconverged (stagnated) solves per frame of one family's trajectory
//! (`cargo run --release -p weft-host --example fine_steps -- drape 0 40`:
//! family, seed, frames).
use weft_core::model::CoarseGrain;
use weft_core::prelude::*;
use weft_host::learn::data::fine_scenario;
use weft_host::sim::build::{self, ModelParts};
mod common;
use weft_host::learn::data::families::Family;
use weft_host::sim::storage::VecStateStorage;

fn main() -> anyhow::Result<()> {
    let (spec, coarse, _, _, frames) = common::coarse_from_args(Family::Drape, 40);
    let (fine, _) = fine_scenario(&coarse, spec.k, spec.time_substeps, spec.fine_integrator)?;
    let mut parts = ModelParts::default();
    let model = &build::model(&fine, CoarseGrain::NONE, &mut parts)?;
    let mut ss = VecStateStorage::new(model, fine.max_pairs());
    let mut state = State::new(model, ss.storage())?;
    let start = std::time::Instant::now();
    let (mut cg, mut subs, mut steps, mut pairs, mut unconverged, mut stagnated) = (0u64, 0u64, 0u64, 0u64, 0, 0);
    for frame in 0..frames {
        let (mut fcg, mut fsub, mut fun) = (0, 0, 0);
        for _ in 0..fine.time.substeps {
            let r = physics::step(model, &mut state)?;
            fcg += r.cg_iterations;
            fsub += r.substeps;
            pairs += r.pairs as u64;
            fun += u32::from(!r.converged);
            stagnated += u32::from(r.stagnated);
            steps += 1;
        }
        cg += fcg as u64;
        unconverged += fun;
        subs += fsub as u64;
        println!("frame {frame:3}: cg {fcg:5} substeps {fsub:3} unconverged {fun}");
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{} steps: {:.1} CG per step, {:.2} substeps per step, {:.0} pairs per step, unconverged {} ({} stagnated), {:.1} ms per frame",
        steps,
        cg as f64 / steps as f64,
        subs as f64 / steps as f64,
        pairs as f64 / steps as f64,
        unconverged,
        stagnated,
        1e3 * secs / frames as f64
    );
    Ok(())
}
