//! The correction network on the host (float, candle): graph samples, the
//! model, training and inference.
//!
//! Architecture (all MLPs are `Linear → ReLU → Linear`):
//! - node encoder: node features ([`NODE_FEATURES`]) → latent `L`
//! - edge encoder: edge features ([`EDGE_FEATURES`]) → `L`
//! - `rounds` × processor: edge update `e ← e + MLP([e, h_sender, h_receiver])`,
//!   then node update `h ← h + MLP([h, mean_incoming e])` (the last one is
//!   a node update; the mean keeps the message size independent of how
//!   many dynamic edges a node has)
//! - decoder: a position head and a velocity head, `L → L → 3` each,
//!   giving Δx and Δv in normalised units.
//!
//! Inputs and targets are normalised by statistics of the training data,
//! which travel with the weights ([`Normalizer`]).

use crate::sim::build::{self, ModelParts};
use std::path::Path;
use weft_core::model::CoarseGrain;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::{linear, Linear, Module, VarBuilder, VarMap};
use serde::{Deserialize, Serialize};
use weft_core::gnn::features::{
    self, historyless_column, BASE_NODE_FEATURES, EDGE_FEATURES, EDGE_VECTORS, HISTORY, HISTORYLESS_NODE_FEATURES,
    MATERIAL_NODE_FEATURES, NODE_FEATURES, NODE_VECTORS, STEP_NODE_FEATURES, WINDLESS_NODE_FEATURES,
};
use weft_core::gnn::graph::GraphRef;
use weft_core::gnn::int8::{Part, Parts};
use weft_core::prelude::*;

use crate::sim::corrector::Corrector;

use crate::learn::dataset::Trajectory;
use crate::learn::families::Rng;
use crate::learn::metrics::{frame_errors, rollout_mean};
use crate::sim::scenario::Scenario;

/// Shape of the network and of its graph (`weft train`'s options).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, clap::Args)]
pub struct GnnConfig {
    /// Latent width `L`.
    #[arg(long, default_value_t = 16)]
    pub latent: usize,
    /// Processor rounds (edge update + node update each).
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// Dynamic-edge radius `r` (m).
    #[arg(long, default_value_t = 0.03)]
    pub radius: f32,
    /// Dynamic pairs stored per node (more are dropped and counted).
    #[arg(skip = GnnConfig::DEFAULT_PAIRS_PER_NODE)]
    pub pairs_per_node: usize,
    /// `--base-inputs`: the network sees the first node features only
    /// (velocity, position, pinned); the collider and material features
    /// read as 0 in training and get zero weights when quantised (for
    /// measuring what they buy).
    #[arg(long)]
    #[serde(default)]
    pub base_inputs: bool,
    /// `--windless-inputs`: the network does not see the air's velocity;
    /// it reads as 0 in training and gets zero weights when quantised (for
    /// measuring what it buys).
    #[arg(long)]
    #[serde(default)]
    pub windless_inputs: bool,
    /// `--history-inputs`: the network sees the history, the last frame's
    /// velocity change (`weft_core::gnn::features`); without it the history
    /// reads as 0 in training and gets zero weights when quantised.
    #[arg(long)]
    #[serde(default)]
    pub history_inputs: bool,
    /// `--velocity-only`: the network corrects velocities only: its
    /// position target and output are zero wherever it is used (float,
    /// rollouts, int8), and the step carries a velocity correction into the
    /// positions from the next frame on. A corrected state is then one the
    /// step itself could have reached, and the next step's solve costs what
    /// a plain one does (a position correction moves nodes against the
    /// stiff membrane, and the next linearised step then fails its energy
    /// check and is split: `examples/corrected_cost.rs`).
    #[arg(long)]
    #[serde(default)]
    pub velocity_only: bool,
    /// `--coarse-stretch`: factor on the material's stretch stiffness in
    /// the coarse step the network corrects (`weft calibrate` fits it;
    /// `weft_core::model::CoarseGrain`).
    #[arg(long, default_value_t = 1.0)]
    #[serde(default = "unit_factor")]
    pub coarse_stretch: f32,
    /// `--coarse-compression`: factor on the material's compression factor
    /// in the coarse step the network corrects.
    #[arg(long, default_value_t = 1.0)]
    #[serde(default = "unit_factor")]
    pub coarse_compression: f32,
    /// `--coarse-taut`: the principal strain from which the coarse step's
    /// tension counts at the material's own stiffness (0: none).
    #[arg(long, default_value_t = 0.0)]
    #[serde(default)]
    pub coarse_taut: f32,
}

fn unit_factor() -> f32 {
    1.0
}

impl Default for GnnConfig {
    /// The command line's defaults.
    fn default() -> Self {
        crate::defaults()
    }
}

impl GnnConfig {
    pub const DEFAULT_PAIRS_PER_NODE: usize = crate::sim::corrector::PAIRS_PER_NODE;

    /// The coarse step's membrane factors this network corrects.
    pub fn coarse_grain(&self) -> CoarseGrain {
        let taut = CoarseGrain::taut_from(self.coarse_taut);
        CoarseGrain { stretch: self.coarse_stretch, compression: self.coarse_compression, taut }
    }

    /// Whether this network reads node feature `k`
    /// ([`GnnConfig::base_inputs`], [`GnnConfig::windless_inputs`],
    /// [`GnnConfig::history_inputs`]); the others read as 0.
    pub fn reads_node_input(&self, k: usize) -> bool {
        let first = match (self.base_inputs, self.windless_inputs) {
            (true, _) => BASE_NODE_FEATURES,
            (false, true) => WINDLESS_NODE_FEATURES,
            (false, false) => NODE_FEATURES,
        };
        k < first && (self.history_inputs || !(HISTORY..HISTORY + 3).contains(&k))
    }

    /// Multiply-accumulates of one forward pass on `nodes` nodes and
    /// `edges` directed edges, with the processor's first edge layer
    /// factorised (`W[e, h_s, h_r] = W_e e + W_s h_s + W_r h_r`, the node
    /// terms computed once per node).
    pub fn macs(&self, nodes: usize, edges: usize) -> usize {
        weft_core::gnn::int8::forward_macs(self.latent, self.rounds, nodes, edges)
    }
}

/// Mean and standard deviation per feature.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Stats {
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
}

impl Stats {
    fn from_rows<const K: usize>(rows: &[[f32; K]]) -> Stats {
        let n = rows.len().max(1) as f64;
        let mut mean = [0f64; K];
        for r in rows {
            for k in 0..K {
                mean[k] += r[k] as f64 / n;
            }
        }
        let mut var = [0f64; K];
        for r in rows {
            for k in 0..K {
                var[k] += (r[k] as f64 - mean[k]).powi(2) / n;
            }
        }
        Stats {
            mean: mean.iter().map(|&m| m as f32).collect(),
            // Constant features (e.g. no pins in the data) keep unit scale.
            std: var.iter().map(|&v| if v > 1e-12 { v.sqrt() as f32 } else { 1.0 }).collect(),
        }
    }
    fn apply(&self, x: f32, k: usize) -> f32 {
        (x - self.mean[k]) / self.std[k]
    }
}

/// Normalisation of inputs and targets.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Normalizer {
    pub node: Stats,
    pub edge: Stats,
    /// Δx (3) then Δv (3).
    pub target: Stats,
}

/// One graph: inputs in physical units, and (for training) targets.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub nodes: Vec<[f32; NODE_FEATURES]>,
    pub edges: Vec<[f32; EDGE_FEATURES]>,
    pub endpoints: Vec<[NodeId; 2]>,
    /// 1 for free nodes, 0 for pinned ones (not corrected).
    pub free: Vec<f32>,
    /// Δx then Δv per node.
    pub targets: Vec<[f32; 6]>,
    pub dropped_pairs: usize,
}

fn rotate_rows<const K: usize>(rows: &mut [[f32; K]], slots: &[usize], (c, s): (f32, f32)) {
    for r in rows {
        for &k in slots {
            let (x, z) = (r[k], r[k + 2]);
            r[k] = c * x + s * z;
            r[k + 2] = c * z - s * x;
        }
    }
}

impl Graph {
    /// The same graph with the scene turned by `angle` (rad) about the
    /// vertical (y) axis: every vector input and target rotated, scalars
    /// kept. Gravity is vertical, so this is an exact symmetry of the
    /// cloth's physics (colliders, pins and wind turn with it); training on
    /// turned copies keeps the network from learning a preferred horizontal
    /// direction from a few dozen scenes.
    pub fn rotate_about_vertical(&mut self, angle: f32) {
        let cs = (angle.cos(), angle.sin());
        rotate_rows(&mut self.nodes, &NODE_VECTORS, cs);
        rotate_rows(&mut self.edges, &EDGE_VECTORS, cs);
        rotate_rows(&mut self.targets, &[0, 3], cs);
    }
}

/// The graph of the current state of `state` (after a physics step): finds
/// the dynamic edges and computes features.
pub fn graph_of(model: &Model, state: &mut State, cfg: &GnnConfig) -> Result<Graph> {
    let found = state
        .find_pairs(&model.mesh, cfg.radius, cfg.pairs_per_node * model.mesh.node_count())
        .context("dynamic edges")?;
    let pairs = state.pairs();
    let ne = features::edge_count(&model.mesh, pairs.len());
    let mut g = Graph {
        nodes: vec![[0.0; NODE_FEATURES]; state.node_count()],
        edges: vec![[0.0; EDGE_FEATURES]; ne],
        endpoints: vec![[0; 2]; ne],
        free: state.pinned().iter().map(|&p| if p != 0 { 0.0 } else { 1.0 }).collect(),
        targets: Vec::new(),
        dropped_pairs: found.dropped,
    };
    features::edge_endpoints(&model.mesh, pairs, &mut g.endpoints);
    features::edge_features(&model.mesh, state.positions(), pairs, cfg.radius, &mut g.edges);
    let r = GraphRef::of(model, state);
    features::node_features([r.x, r.v, r.v_start, r.v_start_prev], r.pinned, &r.surroundings(cfg.radius), &mut g.nodes);
    for f in &mut g.nodes {
        for (k, f) in f.iter_mut().enumerate() {
            if !cfg.reads_node_input(k) {
                *f = 0.0;
            }
        }
    }
    Ok(g)
}

/// Input noise of training samples (m and m/s), as in MeshGraphNets.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, clap::Args)]
pub struct Noise {
    /// Input noise on positions (m).
    #[arg(long = "noise-position", default_value_t = 1e-3)]
    pub position: f32,
    /// Input noise on velocities (m/s).
    #[arg(long = "noise-velocity", default_value_t = 0.03)]
    pub velocity: f32,
}

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
    let mut sampler = Sampler { unroll, cfg, ahead, step: 0, failed: false, sample: None };
    let v_before = (t0 > 0).then(|| frame_velocity(traj, t0 - 1));
    let restart = crate::sim::Restart { x: &x, v: &v, v_before: v_before.as_deref(), frame: t0 as u32 };
    crate::sim::run_from(&rollout, Some(restart), false, &mut sampler, |_, _, _| Ok(()))?;
    let (mut g, xs, vs) = sampler.sample.context("the rollout ended before the sampled step")?;
    let v_next = frame_velocity(traj, t + 1);
    let fx = if cfg.velocity_only { 0.0 } else { 1.0 };
    g.targets = (0..xs.len())
        .map(|i| {
            let dx = (traj.x[t + 1][i] - xs[i]) * fx;
            let dv = v_next[i] - vs[i];
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
        if self.step > self.ahead {
            let g = graph_of(model, state, self.cfg)?;
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

/// Normalisation statistics from a set of samples.
pub fn normalizer(samples: &[Graph]) -> Normalizer {
    let nodes: Vec<_> = samples.iter().flat_map(|g| g.nodes.iter().copied()).collect();
    let edges: Vec<_> = samples.iter().flat_map(|g| g.edges.iter().copied()).collect();
    let targets: Vec<_> =
        samples.iter().flat_map(|g| g.targets.iter().zip(&g.free).filter(|(_, &f)| f > 0.0).map(|(t, _)| *t)).collect();
    Normalizer { node: Stats::from_rows(&nodes), edge: Stats::from_rows(&edges), target: Stats::from_rows(&targets) }
}

/// Tensors of a batch of graphs (node indices offset per graph).
pub struct Batch {
    pub nodes: Tensor,
    pub edges: Tensor,
    pub senders: Tensor,
    pub receivers: Tensor,
    pub free: Tensor,
    /// Weight of each node in the loss, `[nodes, 1]`: 0 on pinned nodes;
    /// 1 on the others, or per graph with [`Batch::weighted`].
    pub weight: Tensor,
    /// `1 / max(1, incoming edges)` per node, `[nodes, 1]`.
    pub inv_degree: Tensor,
    pub targets: Option<Tensor>,
    pub n_nodes: usize,
}

impl Batch {
    pub fn new(graphs: &[Graph], norm: &Normalizer, dev: &Device) -> Result<Batch> {
        Batch::weighted(graphs, norm, dev, 0.0)
    }

    /// With `floor > 0`, the loss weighs each graph's free nodes by
    /// `1 / (m + floor)`, where `m` is the graph's mean squared target in
    /// units of the target's standard deviation (weights scaled to a mean
    /// of 1): every state counts by its *relative* error. Quiet states — a
    /// cloth at rest, a slow swing — have targets hundreds of times smaller
    /// than an impact's, so a plain mean squared error lets the network err
    /// there by more than the whole correction, and a rollout spends most
    /// of its steps in such states.
    pub fn weighted(graphs: &[Graph], norm: &Normalizer, dev: &Device, floor: f32) -> Result<Batch> {
        let (mut nodes, mut edges, mut snd, mut rcv, mut free, mut tgt) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        let mut offset = 0u32;
        for g in graphs {
            for r in &g.nodes {
                nodes.extend(r.iter().enumerate().map(|(k, &x)| norm.node.apply(x, k)));
            }
            for r in &g.edges {
                edges.extend(r.iter().enumerate().map(|(k, &x)| norm.edge.apply(x, k)));
            }
            for &[s, r] in &g.endpoints {
                snd.push(s as u32 + offset);
                rcv.push(r as u32 + offset);
            }
            free.extend_from_slice(&g.free);
            for r in &g.targets {
                tgt.extend(r.iter().enumerate().map(|(k, &x)| norm.target.apply(x, k)));
            }
            offset += g.nodes.len() as u32;
        }
        let (n, e) = (offset as usize, snd.len());
        let mut weight = free.clone();
        if floor > 0.0 {
            let (mut start, mut total, mut count) = (0, 0.0f64, 0.0f64);
            for g in graphs {
                let nodes = start..start + g.nodes.len();
                let free_here: f32 = g.free.iter().sum();
                let ms = g
                    .targets
                    .iter()
                    .zip(&g.free)
                    .map(|(t, f)| f * t.iter().zip(&norm.target.std).map(|(x, s)| (x / s).powi(2)).sum::<f32>())
                    .sum::<f32>()
                    / (6.0 * free_here.max(1.0));
                let w = 1.0 / (ms + floor);
                for k in nodes {
                    weight[k] *= w;
                }
                total += (w * free_here) as f64;
                count += free_here as f64;
                start += g.nodes.len();
            }
            let scale = if total > 0.0 { (count / total) as f32 } else { 1.0 };
            weight.iter_mut().for_each(|w| *w *= scale);
        }

        let mut deg = vec![0f32; n];
        for &r in &rcv {
            deg[r as usize] += 1.0;
        }
        let inv_degree: Vec<f32> = deg.iter().map(|&d| 1.0 / d.max(1.0)).collect();
        Ok(Batch {
            inv_degree: Tensor::from_vec(inv_degree, (n, 1), dev)?,
            nodes: Tensor::from_vec(nodes, (n, NODE_FEATURES), dev)?,
            edges: Tensor::from_vec(edges, (e, EDGE_FEATURES), dev)?,
            senders: Tensor::from_vec(snd, e, dev)?,
            receivers: Tensor::from_vec(rcv, e, dev)?,
            free: Tensor::from_vec(free, (n, 1), dev)?,
            weight: Tensor::from_vec(weight, (n, 1), dev)?,
            targets: if tgt.len() == n * 6 { Some(Tensor::from_vec(tgt, (n, 6), dev)?) } else { None },
            n_nodes: n,
        })
    }
}

/// `Linear → ReLU → Linear`.
pub struct Mlp {
    pub l1: Linear,
    pub l2: Linear,
}

impl Mlp {
    fn new(vb: VarBuilder, input: usize, hidden: usize, output: usize) -> Result<Mlp> {
        Ok(Mlp { l1: linear(input, hidden, vb.pp("l1"))?, l2: linear(hidden, output, vb.pp("l2"))? })
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.l2.forward(&self.l1.forward(x)?.relu()?)?)
    }
}

/// Builds a network's MLPs part by part ([`Part::all`]).
pub fn build_parts<T>(rounds: usize, mut f: impl FnMut(Part) -> Result<T>) -> Result<Parts<T, Vec<T>>> {
    Ok(Parts {
        node_enc: f(Part::NodeEncoder)?,
        edge_enc: f(Part::EdgeEncoder)?,
        edge_mlp: (0..rounds).map(|r| f(Part::EdgeUpdate(r))).collect::<Result<_>>()?,
        node_mlp: (0..rounds).map(|r| f(Part::NodeUpdate(r))).collect::<Result<_>>()?,
        head_x: f(Part::PositionHead)?,
        head_v: f(Part::VelocityHead)?,
    })
}

/// `f` of every MLP of `parts`, in the same layout (an error for a layout
/// with fewer node updates than edge updates).
pub fn map_parts<T, R: AsRef<[T]>, U>(
    parts: &Parts<T, R>,
    mut f: impl FnMut(Part, &T) -> Result<U>,
) -> Result<Parts<U, Vec<U>>> {
    build_parts(parts.rounds(), |p| f(p, parts.get(p).with_context(|| format!("no {p} MLP"))?))
}

/// The network.
pub struct Gnn {
    pub cfg: GnnConfig,
    pub mlps: Parts<Mlp, Vec<Mlp>>,
}

impl Gnn {
    pub fn new(vb: VarBuilder, cfg: GnnConfig) -> Result<Gnn> {
        let l = cfg.latent;
        // Names and widths from the network's one list of parts.
        let mlp = |p: Part| {
            let (i, o) = p.widths(l);
            Mlp::new(vb.pp(p.to_string()), i, l, o)
        };
        Ok(Gnn { cfg, mlps: build_parts(cfg.rounds, mlp)? })
    }

    /// Normalised `[Δx, Δv]`, shape `[nodes, 6]`.
    pub fn forward(&self, b: &Batch) -> Result<Tensor> {
        let m = &self.mlps;
        let mut h = m.node_enc.forward(&b.nodes)?;
        let mut e = m.edge_enc.forward(&b.edges)?;
        for (em, nm) in m.rounds_iter() {
            let hs = h.index_select(&b.senders, 0)?;
            let hr = h.index_select(&b.receivers, 0)?;
            e = (&e + em.forward(&Tensor::cat(&[&e, &hs, &hr], 1)?)?)?;
            let agg = Tensor::zeros((b.n_nodes, self.cfg.latent), DType::F32, h.device())?
                .index_add(&b.receivers, &e, 0)?
                .broadcast_mul(&b.inv_degree)?;
            h = (&h + nm.forward(&Tensor::cat(&[&h, &agg], 1)?)?)?;
        }
        Ok(Tensor::cat(&[&m.head_x.forward(&h)?, &m.head_v.forward(&h)?], 1)?)
    }

    /// Mean squared error of the normalised targets, weighted by
    /// [`Batch::weight`] (free nodes only).
    pub fn loss(&self, b: &Batch) -> Result<Tensor> {
        let Some(t) = &b.targets else { bail!("batch has no targets") };
        let d = (self.forward(b)? - t)?.sqr()?.broadcast_mul(&b.weight)?;
        let count = b.weight.sum_all()?.to_scalar::<f32>()?.max(1e-12) * 6.0;
        Ok((d.sum_all()? / count as f64)?)
    }

    /// Corrections `(Δx, Δv)` in physical units (zero on pinned nodes).
    pub fn correct(&self, g: &Graph, norm: &Normalizer, dev: &Device) -> Result<(Vec<Vec3>, Vec<Vec3>)> {
        let b = Batch::new(std::slice::from_ref(g), norm, dev)?;
        let out = self.forward(&b)?.to_vec2::<f32>()?;
        let t = &norm.target;
        let un = |row: &[f32], k: usize| row[k] * t.std[k] + t.mean[k];
        let mut dx = Vec::with_capacity(out.len());
        let mut dv = Vec::with_capacity(out.len());
        // A velocity-only network's position output is not used.
        let fx = if self.cfg.velocity_only { 0.0 } else { 1.0 };
        for (row, &f) in out.iter().zip(&g.free) {
            dx.push(Vec3::new(un(row, 0), un(row, 1), un(row, 2)) * (f * fx));
            dv.push(Vec3::new(un(row, 3), un(row, 4), un(row, 5)) * f);
        }
        Ok((dx, dv))
    }
}

/// A trained network with everything needed to use it.
pub struct Trained {
    pub varmap: VarMap,
    pub gnn: Gnn,
    pub meta: ModelMeta,
}

/// What travels with the weights (`*.json` beside `*.safetensors`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ModelMeta {
    pub format: String,
    pub config: GnnConfig,
    pub normalizer: Normalizer,
    pub noise: Noise,
    /// Adam steps taken.
    pub steps: usize,
    pub train_loss: f32,
    pub val_loss: f32,
    pub parameters: usize,
    /// Factor on the network's corrections when it is used (chosen on
    /// validation rollouts by `weft gain`; 1 = as trained). Training does
    /// not use it.
    #[serde(default = "unit_gain")]
    pub gain: f32,
    /// Mean corrected position RMSE (m) of rollouts on the validation
    /// trajectories when this model was saved (training keeps the model
    /// with the lowest).
    #[serde(default)]
    pub val_rollout: Option<f32>,
}

fn unit_gain() -> f32 {
    1.0
}

pub const MODEL_FORMAT: &str = "weft-gnn-f32-5";
/// The earlier formats, still read, with the node features their networks
/// know, in the layout before the history ([`historyless_column`]): the
/// first [`BASE_NODE_FEATURES`], then the material's
/// [`MATERIAL_NODE_FEATURES`], then the step's velocity change
/// [`STEP_NODE_FEATURES`], then the air's [`HISTORYLESS_NODE_FEATURES`]; loaded with zero weights
/// (and unit statistics) on the others, which computes what they computed.
pub const EARLIER_MODEL_FORMATS: [(&str, usize); 4] = [
    ("weft-gnn-f32-1", BASE_NODE_FEATURES),
    ("weft-gnn-f32-2", MATERIAL_NODE_FEATURES),
    ("weft-gnn-f32-3", STEP_NODE_FEATURES),
    ("weft-gnn-f32-4", HISTORYLESS_NODE_FEATURES),
];

impl Trained {
    pub fn new(meta: ModelMeta, dev: &Device) -> Result<Trained> {
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, dev);
        let gnn = Gnn::new(vb, meta.config)?;
        Ok(Trained { varmap, gnn, meta })
    }

    /// Loads `stem.safetensors` and `stem.json`.
    pub fn load(stem: &Path, dev: &Device) -> Result<Trained> {
        let json = stem.with_extension("json");
        let meta: ModelMeta = serde_json::from_str(
            &std::fs::read_to_string(&json)
                .with_context(|| format!("reading {} (train a model first)", json.display()))?,
        )?;
        let known = match EARLIER_MODEL_FORMATS.iter().find(|(f, _)| *f == meta.format) {
            Some(&(_, k)) => Some(k),
            None if meta.format == MODEL_FORMAT => None,
            None => bail!("{}: format {} is not {MODEL_FORMAT}", json.display(), meta.format),
        };
        let mut meta = meta;
        if let Some(known) = known {
            let node = &mut meta.normalizer.node;
            if node.mean.len() != known || node.std.len() != known {
                bail!("{}: {} node statistics, format {} has {known}", json.display(), node.mean.len(), meta.format);
            }
            let (mut mean, mut std) = (vec![0.0; NODE_FEATURES], vec![1.0; NODE_FEATURES]);
            for k in 0..known {
                (mean[historyless_column(k)], std[historyless_column(k)]) = (node.mean[k], node.std[k]);
            }
            (node.mean, node.std) = (mean, std);
            meta.format = MODEL_FORMAT.into();
        }
        let mut t = Trained::new(meta, dev)?;
        let weights = stem.with_extension("safetensors");
        match known {
            Some(known) => {
                for (name, w) in candle_core::safetensors::load(&weights, dev)? {
                    let w = if name == "node_enc.l1.weight" {
                        let rows = w.dim(0)?;
                        let old = w.to_dtype(DType::F32)?.to_vec2::<f32>()?;
                        let mut new = vec![0f32; rows * NODE_FEATURES];
                        for (row, out) in old.iter().zip(new.chunks_exact_mut(NODE_FEATURES)) {
                            for (k, &v) in row.iter().enumerate().take(known) {
                                out[historyless_column(k)] = v;
                            }
                        }
                        Tensor::from_vec(new, (rows, NODE_FEATURES), dev)?
                    } else {
                        w
                    };
                    t.varmap.set_one(&name, w).with_context(|| format!("{}: {name}", weights.display()))?;
                }
            }
            None => t.varmap.load(weights)?,
        }
        Ok(t)
    }

    pub fn save(&self, stem: &Path) -> Result<()> {
        if let Some(dir) = stem.parent() {
            std::fs::create_dir_all(dir)?;
        }
        self.varmap.save(stem.with_extension("safetensors"))?;
        std::fs::write(stem.with_extension("json"), serde_json::to_string_pretty(&self.meta)?)?;
        Ok(())
    }

    /// A freshly initialised network with identity normalisation (for
    /// measuring cost and shape; its outputs mean nothing).
    pub fn untrained(config: GnnConfig, dev: &Device) -> Result<Trained> {
        let unit = |k: usize| Stats { mean: vec![0.0; k], std: vec![1.0; k] };
        let meta = ModelMeta {
            format: MODEL_FORMAT.into(),
            config,
            normalizer: Normalizer { node: unit(NODE_FEATURES), edge: unit(EDGE_FEATURES), target: unit(6) },
            noise: Noise { position: 0.0, velocity: 0.0 },
            steps: 0,
            train_loss: 0.0,
            val_loss: 0.0,
            parameters: 0,
            gain: 1.0,
            val_rollout: None,
        };
        Trained::new(meta, dev)
    }

    /// The corrections `(Δx, Δv)` as used: the network's, times
    /// [`ModelMeta::gain`].
    pub fn correct(&self, g: &Graph, dev: &Device) -> Result<(Vec<Vec3>, Vec<Vec3>)> {
        let (mut dx, mut dv) = self.gnn.correct(g, &self.meta.normalizer, dev)?;
        for d in dx.iter_mut().chain(dv.iter_mut()) {
            *d = *d * self.meta.gain;
        }
        Ok((dx, dv))
    }

    pub fn parameters(&self) -> usize {
        self.varmap.all_vars().iter().map(|v| v.elem_count()).sum()
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

/// The graph of the state after a physics step, `net`'s corrections of it
/// added; returns the graph the network saw (its dynamic edges are the
/// state's pairs).
pub(crate) fn add_network_correction(
    model: &Model,
    state: &mut State,
    cfg: &GnnConfig,
    net: impl FnOnce(&Graph) -> Result<(Vec<Vec3>, Vec<Vec3>)>,
) -> Result<Graph> {
    let g = graph_of(model, state, cfg)?;
    let (dx, dv) = net(&g)?;
    state.apply_correction(&dx, &dv).context("correction")?;
    Ok(g)
}

/// The float network as a [`Corrector`]: the graph of the state after the
/// physics step, the network's corrections (times its gain) added.
pub struct Float<'m>(pub &'m Trained);

impl Corrector for Float<'_> {
    fn pairs(&self, nodes: usize) -> usize {
        self.0.meta.config.pairs_per_node * nodes
    }
    fn coarse_grain(&self) -> CoarseGrain {
        self.0.meta.config.coarse_grain()
    }
    fn correct(&mut self, model: &Model, state: &mut State) -> Result<usize> {
        add_network_correction(model, state, &self.0.meta.config, |g| self.0.correct(g, &Device::Cpu))?;
        Ok(state.pairs().len())
    }
}

/// The float network's corrected rollout of `scn` at every node
/// ([`crate::sim::rollout`]).
pub fn corrected_rollout(scn: &Scenario, steps: usize, m: &Trained) -> Result<(Vec<Vec<Vec3>>, f64, Option<String>)> {
    let n = scn.cloth.resolution[0] * scn.cloth.resolution[1];
    let all: Vec<usize> = (0..n).collect();
    crate::sim::rollout(scn, steps, &all, &mut Float(m))
}

/// Mean position RMSE (m) of the float network's corrected rollout of
/// `traj` over `steps` frames; a rollout that fails counts its last error
/// for the remaining frames.
pub fn corrected_error(traj: &Trajectory, m: &Trained, steps: usize) -> Result<f32> {
    let steps = steps.min(traj.x.len() - 1);
    let (xs, _, _) = corrected_rollout(&traj.scenario, steps, m)?;
    Ok(rollout_mean(frame_errors(&xs, &traj.x), steps))
}
