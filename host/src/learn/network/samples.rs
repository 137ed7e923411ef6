//! Training samples: graphs drawn from the trajectories, each starting
//! from the fine state or from a short corrected or plain rollout
//! ([`network::sample`]).

use anyhow::Result;
use rayon::prelude::*;

use crate::learn::data::families::Rng;
use crate::learn::data::Trajectory;
use crate::learn::network::{self, GnnConfig, Graph, Noise, Unroll};

/// A random trajectory and one of its frames (not the last).
pub fn draw(trajs: &[Trajectory], rng: &mut Rng) -> (usize, usize) {
    let k = (rng.next_u64() % trajs.len() as u64) as usize;
    let t = (rng.next_u64() % (trajs[k].x.len() as u64 - 1)) as usize;
    (k, t)
}

/// `n` random samples `(trajectory, frame, seed)` with seeds
/// `first_seed..first_seed + n`.
pub fn picks(trajs: &[Trajectory], n: usize, rng: &mut Rng, first_seed: u64) -> Vec<(usize, usize, u64)> {
    (0..n as u64)
        .map(|i| {
            let (k, t) = draw(trajs, rng);
            (k, t, first_seed + i)
        })
        .collect()
}

/// The training graph of every pick ([`network::sample`]); with `unroll`,
/// some start from a corrected (and, with `plain_unroll`, a plain) rollout.
pub fn samples(
    trajs: &[Trajectory],
    picks: &[(usize, usize, u64)],
    cfg: &GnnConfig,
    noise: Noise,
    unroll: Option<&Unroll>,
    plain_unroll: usize,
) -> Result<Vec<Graph>> {
    picks
        .par_iter()
        .map(|&(k, t, s)| {
            let mut rng = Rng::new(s);
            // Half of the samples start from the fine state, half from a
            // rollout of 1..=steps corrected steps; with `plain_unroll`,
            // thirds: fine state, corrected rollout, plain rollout.
            let u = match (unroll, plain_unroll) {
                (None, _) => None,
                (Some(u), 0) => (s % 2 == 1).then(|| Unroll { steps: 1 + (s as usize / 2) % u.steps, ..*u }),
                (Some(u), p) => match s % 3 {
                    0 => None,
                    1 => Some(Unroll { steps: 1 + (s as usize / 3) % u.steps, ..*u }),
                    _ => Some(Unroll { steps: 1 + (s as usize / 3) % p, gnn: None, ..*u }),
                },
            };
            network::sample(&trajs[k], t, cfg, noise, &mut rng, u.as_ref())
        })
        .collect()
}
