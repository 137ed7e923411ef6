//! Training graphs drawn from a trajectory: the fine state jittered,
//! optionally unrolled a few corrected frames, then one physics step.
use crate::learn::network::config::Normalizer;
use crate::learn::network::config::{GnnConfig, Noise};
use crate::learn::network::corrector::add_network_correction;
use crate::learn::network::graph::graph_of;
use crate::learn::network::graph::{Branches, FrameClass, Graph};
use crate::learn::network::model::Gnn;
use crate::sim::build::{self, ModelParts};
use weft_core::model::CoarseGrain;

use anyhow::{bail, Context, Result};
use candle_core::Device;
use weft_core::prelude::*;

use crate::sim::corrector::Corrector;

use crate::learn::data::families::Rng;
use crate::learn::data::Trajectory;

/// Velocity of frame `t` of a trajectory as the coarse integrator sees it:
/// the mean velocity over the frame before, `(x_t − x_{t−1}) / dt` (the
/// fine cloth's instantaneous velocities also carry vibrations of the fine
/// grid the coarse one cannot represent); frame 0 keeps its own.
pub fn frame_velocity(traj: &Trajectory, t: usize) -> Vec<Vec3> {
    if t == 0 {
        return traj.v[0].clone();
    }
    let inv = 1.0 / traj.scenario.time.dt;
    traj.x[t].iter().zip(&traj.x[t - 1]).map(|(a, b)| (*a - *b) * inv).collect()
}

/// Rollout before a training sample (the "pushforward" of unrolled
/// training): the input state is reached by `steps` corrected coarse steps
/// of the current network from the fine state, so the network learns to
/// correct its own errors (`gnn: None`: plain coarse steps, so it also
/// sees states near the coarse cloth's own equilibrium, where the right
/// correction is small). No gradient flows through these steps.
#[derive(Clone, Copy)]
pub struct Unroll<'a> {
    pub gnn: Option<&'a Gnn>,
    pub norm: &'a Normalizer,
    pub steps: usize,
}

/// A training sample: from the restricted fine state at frame `t` (plus
/// noise; or, with `unroll`, from frame `t − steps` advanced by the
/// corrected coarse model), one coarse step and its graph; the targets take
/// the step's result to the restricted fine state at `t + 1` (velocities
/// by [`frame_velocity`]).
pub fn sample(
    traj: &Trajectory,
    t: usize,
    cfg: &GnnConfig,
    noise: Noise,
    rng: &mut Rng,
    unroll: Option<&Unroll>,
) -> Result<Graph> {
    let scn = &traj.scenario;
    // A sample is one physics step and its correction per frame: the step
    // the network corrects.
    if scn.time.substeps != 1 {
        bail!("{}: training samples need one physics step per frame, time.substeps is {}", scn.name, scn.time.substeps);
    }
    let ahead = unroll.map_or(0, |u| u.steps.min(t));
    let t0 = t - ahead;
    // The start: the fine state at frame t0, jittered at the free nodes.
    let mut parts = ModelParts::default();
    let model = &build::model(scn, CoarseGrain::NONE, &mut parts)?;
    let mut pinned = vec![0u8; model.mesh.node_count()];
    model.scene.mark_pinned(&mut pinned);
    let jitter = |p: &Vec3, &pin: &u8, s: f32, rng: &mut Rng| {
        if pin != 0 {
            *p
        } else {
            *p + Vec3::new(rng.normal(), rng.normal(), rng.normal()) * s
        }
    };
    let x: Vec<Vec3> = traj.x[t0].iter().zip(&pinned).map(|(p, pin)| jitter(p, pin, noise.position, rng)).collect();
    let v0 = frame_velocity(traj, t0);
    let v: Vec<Vec3> = v0.iter().zip(&pinned).map(|(p, pin)| jitter(p, pin, noise.velocity, rng)).collect();
    // `ahead` corrected steps, then the step whose correction is learned,
    // through the one rollout loop.
    let mut rollout = scn.clone();
    rollout.time.steps = ahead as u32 + 1;
    let mut sampler =
        Sampler { unroll, cfg, ahead, step: 0, failed: false, sample: None, branches: Branches::default() };
    let v_before = (t0 > 0).then(|| frame_velocity(traj, t0 - 1));
    let restart = crate::sim::Restart { x: &x, v: &v, v_before: v_before.as_deref(), frame: t0 as u32 };
    crate::sim::run_from(&rollout, Some(restart), false, &mut sampler, |_, _, _| Ok(()))?;
    let (mut g, xs, vs) = sampler.sample.context("the rollout ended before the sampled step")?;
    g.family = Some(traj.family);
    let v_next = frame_velocity(traj, t + 1);
    let (fx, fv) = cfg.heads();
    g.targets = (0..xs.len())
        .map(|i| {
            let dx = (traj.x[t + 1][i] - xs[i]) * fx;
            let dv = (v_next[i] - vs[i]) * fv;
            [dx.x, dx.y, dx.z, dv.x, dv.y, dv.z]
        })
        .collect();
    Ok(g)
}

/// The corrector of a training sample's rollout: the current network on
/// the first `ahead` steps (none after a correction that failed: the sample
/// is taken from where it went wrong), then, after the sampled step, its
/// graph and state instead of a correction.
struct Sampler<'u> {
    unroll: Option<&'u Unroll<'u>>,
    cfg: &'u GnnConfig,
    ahead: usize,
    step: usize,
    failed: bool,
    sample: Option<(Graph, Vec<Vec3>, Vec<Vec3>)>,
    branches: Branches,
}

impl Corrector for Sampler<'_> {
    fn pairs(&self, nodes: usize) -> usize {
        self.cfg.pairs_per_node * nodes
    }
    fn coarse_grain(&self) -> CoarseGrain {
        self.cfg.coarse_grain()
    }
    fn correct(&mut self, model: &Model, state: &mut State) -> Result<usize> {
        self.step += 1;
        let branched = self.branches.since_last(state);
        if self.step > self.ahead {
            let mut g = graph_of(model, state, self.cfg)?;
            if branched {
                g.class = FrameClass::Branch;
            }
            self.sample = Some((g, state.positions().to_vec(), state.velocities().to_vec()));
            return Ok(0);
        }
        match self.unroll {
            Some(u) if !self.failed => {
                let mut net = UnrollCorrector { unroll: u, cfg: self.cfg };
                let r = net.correct(model, state);
                self.failed = r.is_err();
                Ok(r.unwrap_or(0))
            }
            _ => Ok(0),
        }
    }
}

/// The network being trained, as a [`Corrector`] for unrolled samples
/// (no correction when the unroll is plain).
struct UnrollCorrector<'u> {
    unroll: &'u Unroll<'u>,
    cfg: &'u GnnConfig,
}

impl Corrector for UnrollCorrector<'_> {
    fn pairs(&self, nodes: usize) -> usize {
        self.cfg.pairs_per_node * nodes
    }
    fn correct(&mut self, model: &Model, state: &mut State) -> Result<usize> {
        let Some(gnn) = self.unroll.gnn else { return Ok(0) };
        add_network_correction(model, state, self.cfg, |g| gnn.correct(g, self.unroll.norm, &Device::Cpu))?;
        Ok(state.pairs().len())
    }
}
