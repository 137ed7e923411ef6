//! The solver in the loop: the network's corrections at every frame of a
//! `K`-frame corrected rollout, trained against the error at every frame
//! of it, with the gradient carried back through the real coarse step
//! ([`weft_core::physics::step_vjp`]).
//!
//! A rollout from the fine state at frame `t₀` runs the coarse step and
//! the current network (gain 1): `s̃ₜ₊₁ = step(sₜ)`, `sₜ₊₁ = s̃ₜ₊₁ + cₜ`.
//! Its loss is `L = Σₜ ℓₜ(sₜ)`, `t = 1…K`, with
//! `ℓₜ = ‖(xₜ − x_ref)/σₓ‖² + w_v ‖(vₜ − v_ref)/σ_v‖²` over the free nodes
//! (mean per value, divided by `K`; `σ` the one-step targets' RMS
//! standard deviations). Backwards, `Gₜ = ∂ℓₜ/∂sₜ + VJPₜ(Gₜ₊₁)` is the
//! gradient with respect to the corrected state at frame `t`, and the
//! correction `cₜ₋₁` that made it gets `λₜ₋₁ = Gₜ`. The network is trained
//! on the scalar `Σₜ ⟨cₜ, λₜ⟩` with `λ` detached, whose gradient in the
//! weights is that of `L` through the corrections. The network's inputs
//! are detached: a correction's effect on the later corrections' inputs is
//! not followed.
//!
//! Without the step's gradient ([`Through::Frames`]), `Gₜ = ∂ℓₜ/∂sₜ`:
//! each correction is trained on the error of the frame it makes, in the
//! rollout of the real step (the A/B's arm b).

use crate::sim::build::{self, ModelParts};
use anyhow::{bail, Result};
use candle_core::{Device, Tensor};
use weft_core::model::CoarseGrain;
use weft_core::physics::{step_vjp, Linearisation};
use weft_core::prelude::*;

use crate::learn::data::Trajectory;
use crate::learn::network::{add_network_correction, frame_velocity, Batch, Gnn, Graph, Normalizer, Trained};
use crate::sim::corrector::Corrector;
use crate::sim::storage::VecStateStorage;

/// How far a frame's error reaches back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
pub enum Through {
    /// Through the step's vector–Jacobian product to every earlier
    /// correction of the rollout (solver in the loop), the product of the
    /// linearised step ([`Linearisation::Stable`]).
    Step,
    /// As `Step`, with the product of the step's exact derivative
    /// ([`Linearisation::Exact`]).
    Exact,
    /// To the correction that made the frame only (the real step unrolled
    /// without its gradient).
    Frames,
}

/// One rollout: the graph each correction saw and the gradient `λ` (per
/// node, `∂L/∂x` then `∂L/∂v`) its correction gets.
pub struct SolverSample {
    pub graphs: Vec<Graph>,
    pub lambda: Vec<Vec<[f32; 6]>>,
    /// The corrections `(Δx, Δv)` the network made, frame by frame.
    pub corrections: Vec<FrameState>,
    /// `L` of the rollout.
    pub loss: f32,
    /// Products whose step the energy check split.
    pub split: usize,
    /// CG iterations of the adjoint solves.
    pub adjoint_iterations: u32,
}

/// The network as it is being trained (gain 1), recording every graph it
/// saw and every correction it made (the rollout losses' corrector).
pub(crate) struct Recorder<'m> {
    model: &'m Trained,
    pub(crate) graphs: Vec<Graph>,
    pub(crate) corrections: Vec<FrameState>,
}

impl<'m> Recorder<'m> {
    /// A recorder for a rollout of `frames` frames.
    pub(crate) fn new(model: &'m Trained, frames: usize) -> Self {
        Recorder { model, graphs: Vec::with_capacity(frames), corrections: Vec::with_capacity(frames) }
    }
}

impl Corrector for Recorder<'_> {
    fn coarse_grain(&self) -> CoarseGrain {
        self.model.meta.config.coarse_grain()
    }
    fn pairs(&self, nodes: usize) -> usize {
        self.model.meta.config.pairs_per_node * nodes
    }
    fn correct(&mut self, model: &Model, state: &mut State) -> Result<usize> {
        let (gnn, norm) = (&self.model.gnn, &self.model.meta.normalizer);
        let mut made = None;
        let g = add_network_correction(model, state, &self.model.meta.config, |g| {
            let c = gnn.correct(g, norm, &Device::Cpu)?;
            made = Some(c.clone());
            Ok(c)
        })?;
        self.graphs.push(g);
        self.corrections.extend(made);
        Ok(state.pairs().len())
    }
}

/// The loss's scales: `σₓ`, `σ_v` and the velocities' weight `w_v`.
#[derive(Clone, Copy, Debug)]
pub struct Scales {
    pub x: f32,
    pub v: f32,
    pub v_weight: f32,
}

impl Scales {
    /// The factors of `‖eₓ‖²` and `‖e_v‖²` in a rollout's loss.
    fn weights(&self, free: &[f32], frames: usize) -> (f32, f32) {
        let count = free.iter().sum::<f32>().max(1.0) * 6.0 * frames as f32;
        (1.0 / (self.x * self.x * count), self.v_weight / (self.v * self.v * count))
    }

    pub fn of(norm: &Normalizer, v_weight: f32) -> Scales {
        let rms = |s: &[f32]| (s.iter().map(|x| x * x).sum::<f32>() / s.len().max(1) as f32).sqrt().max(1e-12);
        Scales { x: rms(&norm.target.std[..3]), v: rms(&norm.target.std[3..]), v_weight }
    }
}

/// The corrected rollout of `frames` frames from the fine state at frame
/// `t0` of `traj` and its per-correction gradients; `None` when the
/// rollout fails (a physics step refused), runs past the trajectory, or
/// the scenario takes more than one step a frame.
pub fn solver_sample(
    traj: &Trajectory,
    t0: usize,
    frames: usize,
    model: &Trained,
    through: Through,
    scales: Scales,
) -> Result<Option<SolverSample>> {
    if frames == 0 || t0 + frames >= traj.x.len() || traj.scenario.time.substeps != 1 {
        return Ok(None);
    }
    let mut rec = Recorder::new(model, frames);
    let Some(states) = rollout_states(traj, t0, frames, &mut rec)? else { return Ok(None) };
    if rec.graphs.len() != frames {
        return Ok(None);
    }
    let mut scn = traj.scenario.clone();
    scn.time.steps = frames as u32;
    let n = traj.x[t0].len();
    let free = rec.graphs[0].free.clone();
    let (cx, cv) = scales.weights(&free, frames);
    let dt = traj.scenario.time.dt as f64;
    let mut loss = 0.0f64;
    let mut lambda = vec![Vec::new(); frames];
    let (mut split, mut adjoint_iterations) = (0, 0);
    let mut parts = ModelParts::default();
    let m = &build::model(&scn, model.meta.config.coarse_grain(), &mut parts)?;
    let mut storage = VecStateStorage::new(m, scn.max_pairs().max(model.meta.config.pairs_per_node * n));
    let mut state = build::start(&scn, m, &mut storage)?;
    let (mut gx, mut gv) = (vec![Vec3::ZERO; n], vec![Vec3::ZERO; n]);
    for f in (1..=frames).rev() {
        if through != Through::Frames && f < frames {
            let (x, v) = &states[f];
            state.set_positions(x)?;
            state.set_velocities(v)?;
            state.set_time((t0 + f) as f64 * dt)?;
            let lin = if through == Through::Exact { Linearisation::Exact } else { Linearisation::Stable };
            let r = step_vjp(m, &mut state, lin, &mut gx, &mut gv)?;
            split += usize::from(r.split);
            adjoint_iterations += r.adjoint_iterations;
        } else {
            gx.fill(Vec3::ZERO);
            gv.fill(Vec3::ZERO);
        }
        let (x, v) = &states[f];
        let v_ref = frame_velocity(traj, t0 + f);
        for i in 0..n {
            let (ex, ev) = (x[i] - traj.x[t0 + f][i], v[i] - v_ref[i]);
            loss += (free[i] * (ex.norm2() * cx + ev.norm2() * cv)) as f64;
            gx[i] += ex * (2.0 * cx * free[i]);
            gv[i] += ev * (2.0 * cv * free[i]);
        }
        lambda[f - 1] = gx.iter().zip(&gv).map(|(a, b)| [a.x, a.y, a.z, b.x, b.y, b.z]).collect();
    }
    if lambda.iter().flatten().flatten().any(|l| !l.is_finite()) {
        bail!("a rollout's gradient is not finite");
    }
    Ok(Some(SolverSample {
        graphs: rec.graphs,
        lambda,
        corrections: rec.corrections,
        loss: loss as f32,
        split,
        adjoint_iterations,
    }))
}

/// Positions and velocities of one frame.
pub type FrameState = (Vec<Vec3>, Vec<Vec3>);

/// The corrected state at every frame, 0 (the start) to `frames`, of the
/// rollout of `corrector` from the fine state at frame `t0` of `traj`;
/// `None` when it fails.
pub fn rollout_states(
    traj: &Trajectory,
    t0: usize,
    frames: usize,
    corrector: &mut dyn Corrector,
) -> Result<Option<Vec<FrameState>>> {
    let mut scn = traj.scenario.clone();
    scn.time.steps = frames as u32;
    let v0 = frame_velocity(traj, t0);
    let v_before = (t0 > 0).then(|| frame_velocity(traj, t0 - 1));
    let restart = crate::sim::Restart { x: &traj.x[t0], v: &v0, v_before: v_before.as_deref(), frame: t0 as u32 };
    let mut states: Vec<FrameState> = Vec::with_capacity(frames + 1);
    let run = crate::sim::run_from(&scn, Some(restart), false, corrector, |_, _, state| {
        states.push((state.positions().to_vec(), state.velocities().to_vec()));
        Ok(())
    });
    Ok((run.is_ok() && states.len() == frames + 1).then_some(states))
}

/// The loss `L` of a rollout's `states` (frame 0 to `K`) from frame `t0`
/// of `traj`, over the nodes `free` marks.
pub fn rollout_loss_value(
    traj: &Trajectory,
    t0: usize,
    states: &[(Vec<Vec3>, Vec<Vec3>)],
    free: &[f32],
    scales: Scales,
) -> f64 {
    let frames = states.len().saturating_sub(1);
    let (cx, cv) = scales.weights(free, frames);
    let mut loss = 0.0;
    for (f, (x, v)) in states.iter().enumerate().skip(1) {
        let v_ref = frame_velocity(traj, t0 + f);
        for (i, fr) in free.iter().enumerate() {
            let (ex, ev) = (x[i] - traj.x[t0 + f][i], v[i] - v_ref[i]);
            loss += (fr * (ex.norm2() * cx + ev.norm2() * cv)) as f64;
        }
    }
    loss
}

/// `Σ ⟨c, λ⟩` of `samples` (their mean), differentiable in `gnn`'s
/// weights; 0 for none. A velocity-only network's position output is not
/// applied, so it gets no gradient.
pub fn solver_loss(gnn: &Gnn, norm: &Normalizer, samples: &[SolverSample], dev: &Device) -> Result<Tensor> {
    let mut total = Tensor::zeros((), candle_core::DType::F32, dev)?;
    if samples.is_empty() {
        return Ok(total);
    }
    let std = Tensor::from_slice(&norm.target.std, (1, 6), dev)?;
    let mean = Tensor::from_slice(&norm.target.mean, (1, 6), dev)?;
    let fx = if gnn.cfg.velocity_only { 0.0 } else { 1.0 };
    for s in samples {
        let b = Batch::new(&s.graphs, norm, dev)?;
        let phys = gnn.forward(&b)?.broadcast_mul(&std)?.broadcast_add(&mean)?.broadcast_mul(&b.free)?;
        let rows = phys.dim(0)?;
        let lambda: Vec<f32> =
            s.lambda.iter().flatten().flat_map(|l| [l[0] * fx, l[1] * fx, l[2] * fx, l[3], l[4], l[5]]).collect();
        if lambda.len() != rows * 6 {
            bail!("{} gradient rows for {rows} corrections", lambda.len() / 6);
        }
        let lambda = Tensor::from_vec(lambda, (rows, 6), dev)?;
        total = (total + (phys * lambda)?.sum_all()?)?;
    }
    Ok((total / samples.len() as f64)?)
}
