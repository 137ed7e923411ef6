//! The network's configuration and its input/target normaliser.
use weft_core::model::CoarseGrain;

use serde::{Deserialize, Serialize};
use weft_core::gnn::features::{BASE_NODE_FEATURES, HISTORY, NODE_FEATURES, WINDLESS_NODE_FEATURES};

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
    /// `--position-only`: the network corrects positions only: its
    /// velocity target and output are zero wherever it is used (a
    /// correction of the time step's error is mostly in the positions: the
    /// coarse teacher's position correction alone keeps most of its
    /// accuracy, its velocity correction alone little).
    #[arg(long, conflicts_with = "velocity_only")]
    #[serde(default)]
    pub position_only: bool,
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
    /// `--base-step bdf2`: the physics step the network corrects is BDF2
    /// instead of backward Euler (a scene's own integrator is replaced
    /// wherever this network corrects it).
    #[arg(long, value_enum, default_value = "backward-euler")]
    #[serde(default)]
    pub base_step: crate::sim::scenario::IntegratorSpec,
    /// `--teacher-step`: the coarse teacher's step (`weft train --teacher
    /// coarse`): `bdf2-8`, BDF2 at dt/8 (the fine reference's step), or
    /// `be-4`, backward Euler at dt/4, which damps the membrane's fast
    /// vibrations that BDF2 keeps.
    #[arg(long, value_enum, default_value = "bdf2-8")]
    #[serde(default)]
    pub teacher_step: TeacherStep,
    /// `--field-head`: beside the node heads, a correction smooth over the
    /// whole cloth: each sample's latents, weighed by a quadratic in the
    /// node's position ([`crate::learn::network::model::FIELD_TERMS`]
    /// terms), are pooled over its free nodes, and an MLP maps the pool to
    /// the field's coefficients. The float network only (for measuring the
    /// fit): such a network is not quantised.
    #[arg(long)]
    #[serde(default)]
    pub field_head: bool,
    /// `--residual-inputs`: the history's three node columns carry the
    /// base step's residual instead, as a velocity: how far backward
    /// Euler's equation misses at the step's end (the forces there, where
    /// the linearised solve took them at its start;
    /// [`crate::learn::network::residual_velocity`]). The float
    /// network only (for measuring the fit): such a network is not
    /// quantised.
    #[arg(long)]
    #[serde(default)]
    pub residual_inputs: bool,
    /// `--newton-inputs K`: the history's three node columns carry the
    /// Newton correction the step's residual implies, a solve over the
    /// whole cloth, by `K` iterations of the step's own preconditioned CG
    /// ([`crate::learn::network::newton_velocity`]; 0: not read); float
    /// only, as `--residual-inputs`.
    #[arg(long, default_value_t = 0, conflicts_with = "residual_inputs")]
    #[serde(default)]
    pub newton_inputs: u32,
    /// `--newton-clip`: the Newton input's length is clipped at `g·dt`,
    /// a frame's velocity change in free fall (the unclipped input feeds
    /// back through the network's own corrections on its rollouts).
    #[arg(long, requires = "newton_inputs")]
    #[serde(default)]
    pub newton_clip: bool,
}

/// The coarse teacher's step ([`GnnConfig::teacher_step`]).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum TeacherStep {
    /// BDF2, 8 steps a frame.
    #[default]
    #[value(name = "bdf2-8")]
    Bdf2Eighth,
    /// Backward Euler, 4 steps a frame.
    #[value(name = "be-4")]
    BeQuarter,
}

impl TeacherStep {
    /// Steps a frame and the integrator.
    pub fn step(self) -> (u32, crate::sim::scenario::IntegratorSpec) {
        use crate::sim::scenario::IntegratorSpec;
        match self {
            TeacherStep::Bdf2Eighth => (8, IntegratorSpec::Bdf2),
            TeacherStep::BeQuarter => (4, IntegratorSpec::BackwardEuler),
        }
    }
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

    /// The factors on the position and the velocity outputs: 0 for the
    /// one a `--velocity-only` or `--position-only` network does not use.
    pub fn heads(&self) -> (f32, f32) {
        (if self.velocity_only { 0.0 } else { 1.0 }, if self.position_only { 0.0 } else { 1.0 })
    }

    /// The step this network was trained to correct where it replaces a
    /// scene's own integrator: BDF2 for `--base-step bdf2`; `None` for the
    /// default, backward Euler, which runs on the scene's integrator as
    /// every network before the option did.
    pub fn trained_base(&self) -> Option<crate::sim::scenario::IntegratorSpec> {
        (self.base_step != crate::sim::scenario::IntegratorSpec::BackwardEuler).then_some(self.base_step)
    }

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
        k < first
            && (self.history_inputs
                || self.residual_inputs
                || self.newton_inputs > 0
                || !(HISTORY..HISTORY + 3).contains(&k))
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
    pub(crate) fn from_rows<const K: usize>(rows: &[[f32; K]]) -> Stats {
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
    pub(crate) fn apply(&self, x: f32, k: usize) -> f32 {
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
