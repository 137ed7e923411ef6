//! The solver loss's gradients against central differences of the rollout
//! loss itself: for corrected rollouts of `K` frames from random training
//! frames, each correction `cₜ` moved along a direction `d` (the
//! other corrections replayed as the network made them, its inputs
//! detached as in training) gives `(L(+ε) − L(−ε)) / 2ε`, which `⟨λₜ, d⟩`
//! should match. `d` is `λₜ` itself, scaled to move no node by more than
//! 1 mm (or 1 cm/s). Prints, per rollout and correction, both and their
//! relative error, for the product through the step and without it.
//!
//! `cargo run --release -p weft-host --example solver_gradient -- DATA MODEL [K] [ROLLOUTS]`
use anyhow::{Context, Result};
use weft_core::prelude::*;
use weft_host::learn::data::families::Rng;
use weft_host::learn::data::{self, Trajectory};
use weft_host::learn::network::Trained;
use weft_host::learn::train::solver_loss::{rollout_loss_value, rollout_states, solver_sample, Scales, Through};
use weft_host::sim::corrector::Corrector;

/// Replays recorded corrections, one moved by `eps · d` at frame `at`.
struct Replay<'a> {
    corrections: &'a [(Vec<Vec3>, Vec<Vec3>)],
    grain: CoarseGrain,
    pairs: usize,
    at: usize,
    d: &'a [[f32; 6]],
    eps: f32,
    frame: usize,
}

impl Corrector for Replay<'_> {
    fn pairs(&self, nodes: usize) -> usize {
        self.pairs * nodes
    }
    fn coarse_grain(&self) -> CoarseGrain {
        self.grain
    }
    fn correct(&mut self, _: &Model, state: &mut State) -> Result<usize> {
        let (mut dx, mut dv) = self.corrections[self.frame].clone();
        if self.frame == self.at {
            for (i, d) in self.d.iter().enumerate() {
                dx[i] += Vec3::new(d[0], d[1], d[2]) * self.eps;
                dv[i] += Vec3::new(d[3], d[4], d[5]) * self.eps;
            }
        }
        state.apply_correction(&dx, &dv).context("correction")?;
        self.frame += 1;
        Ok(0)
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let data = std::path::PathBuf::from(args.get(1).context("DATA")?);
    let model = Trained::load(std::path::Path::new(args.get(2).context("MODEL")?), &candle_core::Device::Cpu)?;
    let k: usize = args.get(3).map_or(Ok(8), |s| s.parse())?;
    let rollouts: usize = args.get(4).map_or(Ok(4), |s| s.parse())?;
    let train: Vec<Trajectory> = data::load_split(&data, Some("train"))?;
    let scales = Scales::of(&model.meta.normalizer, 0.1);
    let mut rng = Rng::new(7);
    for r in 0..rollouts {
        let i = (rng.next_u64() as usize) % train.len();
        let traj = &train[i];
        let t0 = (rng.next_u64() as usize) % (traj.x.len() - k - 1);
        let mut samples = Vec::new();
        for through in [Through::Frames, Through::Step, Through::Exact] {
            let Some(s) = solver_sample(traj, t0, k, &model, through, scales)? else { continue };
            let norms: Vec<String> = s
                .lambda
                .iter()
                .map(|l| format!("{:.2e}", l.iter().flatten().map(|x| x * x).sum::<f32>().sqrt()))
                .collect();
            println!(
                "rollout {r} ({:?} t0 {t0}) {through:?}: L {:.4e}, |λ| per frame {}",
                traj.family,
                s.loss,
                norms.join(" ")
            );
            samples.push((through, s));
        }
        let Some((_, base)) = samples.first() else { continue };
        let free = base.graphs[0].free.clone();
        for at in [0, k / 2, k - 1] {
            // Along the frame-by-frame gradient (smooth, the error's own
            // shape; a random direction's projection is below the
            // rollout's noise), scaled to move no node by more than 1 mm
            // or 1 cm/s.
            let l = &base.lambda[at];
            let mx = l.iter().map(|r| r[0].abs().max(r[1].abs()).max(r[2].abs())).fold(0.0f32, f32::max);
            let mv = l.iter().map(|r| r[3].abs().max(r[4].abs()).max(r[5].abs())).fold(0.0f32, f32::max);
            let scale = (1e-3 / mx.max(1e-30)).min(1e-2 / mv.max(1e-30));
            let d: Vec<[f32; 6]> = l.iter().map(|r| r.map(|x| x * scale)).collect();
            let at_eps = |eps: f32| -> Result<f64> {
                let mut rep = Replay {
                    corrections: &base.corrections,
                    grain: model.meta.config.coarse_grain(),
                    pairs: model.meta.config.pairs_per_node,
                    at,
                    d: &d,
                    eps,
                    frame: 0,
                };
                let states = rollout_states(traj, t0, k, &mut rep)?.context("replayed rollout failed")?;
                Ok(rollout_loss_value(traj, t0, &states, &free, scales))
            };
            let fds: Vec<f64> = [1.0f32, 0.3, 0.1]
                .iter()
                .map(|&e| Ok((at_eps(e)? - at_eps(-e)?) / (2.0 * e as f64)))
                .collect::<Result<_>>()?;
            let mut line =
                format!("  correction {at}: fd (ε 1, 0.3, 0.1) {:.3e} {:.3e} {:.3e};", fds[0], fds[1], fds[2]);
            for (through, s) in &samples {
                let ad: f64 =
                    s.lambda[at].iter().zip(&d).map(|(l, d)| (0..6).map(|c| (l[c] * d[c]) as f64).sum::<f64>()).sum();
                line += &format!(" {through:?} {ad:.3e} ({:.2});", ad / fds[0]);
            }
            println!("{line}");
        }
    }
    Ok(())
}
