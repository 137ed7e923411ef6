//! The rollout loss: how far the network's own corrected rollout of `K`
//! frames ends from the reference, back-propagated to every correction of
//! the rollout through a free-particle surrogate of the step.
//!
//! The one-step loss ([`Gnn::loss`]) teaches each correction on its own,
//! from states the network rarely leaves; what a rollout accumulates — a
//! small bias that every step repeats, a phase that drifts — is a small
//! part of each step's target and is learnt last, if at all. Here a
//! rollout of the current network from the fine state at frame `t0` ends
//! `K` frames later with errors `e_x = x_K − x_ref`, `e_v = v_K − v_ref`;
//! a change `δ` of correction `k` (positions `δx_k`, velocities `δv_k`)
//! would have moved that end, were the cloth free particles, by
//!
//! `Δx_K = Σ_k δx_k + (K − 1 − k) h δv_k`,   `Δv_K = Σ_k δv_k`
//!
//! (a velocity correction moves the cloth for the rest of the rollout).
//! The loss is `‖(e_x + Δx_K) / s_x‖² + ‖(e_v + Δv_K) / s_v‖²` over the
//! free nodes at `δ = 0` (each correction against itself, detached), so
//! its gradient pushes every correction of the rollout against the error
//! the rollout ended with. The elastic forces that the surrogate leaves
//! out undo a short-wavelength change within a few steps; what it gets
//! right is the long-wavelength drift that dominates long horizons. The
//! scales `s` are `K` times the one-step targets' standard deviations.

use anyhow::Result;
use candle_core::{Device, Tensor};

use crate::learn::data::Trajectory;
use crate::learn::network::{frame_velocity, Batch, Gnn, Graph, Normalizer, Trained};
use crate::learn::train::solver_loss::{rollout_states, Recorder};

/// One rollout of the current network: the graph each of its corrections
/// saw, and where it ended against the reference.
pub struct RolloutSample {
    pub graphs: Vec<Graph>,
    /// `x_K − x_ref` then `v_K − v_ref` per node.
    pub end_error: Vec<[f32; 6]>,
    /// The step (s).
    pub dt: f32,
}

/// The corrected rollout of `frames` frames from the fine state at frame
/// `t0` of `traj`; `None` when the rollout fails (a physics step refused)
/// or runs past the trajectory.
pub fn rollout_sample(traj: &Trajectory, t0: usize, frames: usize, model: &Trained) -> Result<Option<RolloutSample>> {
    if frames == 0 || t0 + frames >= traj.x.len() {
        return Ok(None);
    }
    let mut rec = Recorder::new(model, frames);
    let Some(mut states) = rollout_states(traj, t0, frames, &mut rec)? else { return Ok(None) };
    if rec.graphs.len() != frames {
        return Ok(None);
    }
    let Some((x, v)) = states.pop() else { return Ok(None) };
    let v_ref = frame_velocity(traj, t0 + frames);
    let end_error = x
        .iter()
        .zip(&traj.x[t0 + frames])
        .zip(v.iter().zip(&v_ref))
        .map(|((a, b), (c, d))| {
            let (ex, ev) = (*a - *b, *c - *d);
            [ex.x, ex.y, ex.z, ev.x, ev.y, ev.z]
        })
        .collect();
    Ok(Some(RolloutSample { graphs: rec.graphs, end_error, dt: traj.scenario.time.dt }))
}

/// The rollout loss of `samples` (their mean), differentiable in `gnn`'s
/// weights; 0 for none.
pub fn rollout_loss(gnn: &Gnn, norm: &Normalizer, samples: &[RolloutSample], dev: &Device) -> Result<Tensor> {
    let mut total = Tensor::zeros((), candle_core::DType::F32, dev)?;
    if samples.is_empty() {
        return Ok(total);
    }
    let rms = |s: &[f32]| (s.iter().map(|x| x * x).sum::<f32>() / s.len().max(1) as f32).sqrt().max(1e-12);
    let (rms_x, rms_v) = (rms(&norm.target.std[..3]), rms(&norm.target.std[3..]));
    let std = Tensor::from_slice(&norm.target.std, (1, 6), dev)?;
    let mean = Tensor::from_slice(&norm.target.mean, (1, 6), dev)?;
    for s in samples {
        let k = s.graphs.len();
        let n = s.end_error.len();
        let b = Batch::new(&s.graphs, norm, dev)?;
        // The corrections in physical units, zero on pinned nodes.
        let phys = gnn.forward(&b)?.broadcast_mul(&std)?.broadcast_add(&mean)?.broadcast_mul(&b.free)?;
        let delta = (&phys - phys.detach())?.reshape((k, n, 6))?;
        let lever: Vec<f32> = (0..k).map(|i| (k - 1 - i) as f32 * s.dt).collect();
        let lever = Tensor::from_vec(lever, (k, 1, 1), dev)?;
        let (dx, dv) = (delta.narrow(2, 0, 3)?, delta.narrow(2, 3, 3)?);
        // A velocity-only network's position output is not applied.
        let moved_x =
            if gnn.cfg.velocity_only { dv.broadcast_mul(&lever)? } else { (&dx + dv.broadcast_mul(&lever)?)? };
        let moved_x = moved_x.sum(0)?;
        let moved_v = dv.sum(0)?;
        let e: Vec<f32> = s.end_error.iter().flatten().copied().collect();
        let e = Tensor::from_vec(e, (n, 6), dev)?;
        let (sx, sv) = (k as f32 * rms_x, k as f32 * rms_v);
        let rx = ((e.narrow(1, 0, 3)? + moved_x)? / sx as f64)?;
        let rv = ((e.narrow(1, 3, 3)? + moved_v)? / sv as f64)?;
        let free = s.graphs.first().map(|g| g.free.clone()).unwrap_or_default();
        let count = free.iter().sum::<f32>().max(1.0) * 6.0;
        let free = Tensor::from_vec(free, (n, 1), dev)?;
        let sq = (rx.sqr()?.broadcast_mul(&free)?.sum_all()? + rv.sqr()?.broadcast_mul(&free)?.sum_all()?)?;
        total = (total + (sq / count as f64)?)?;
    }
    Ok((total / samples.len() as f64)?)
}
