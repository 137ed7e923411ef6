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
//! which travel with the weights ([`Normalizer`]).//!
//! The rooms: [`config`] (configuration, normaliser), [`graph`] (a state
//! as the network's graph, batches), [`sample`] and [`samples`] (training
//! graphs from a trajectory), [`teacher`] (training graphs from the
//! network's own rollouts, the coarse teacher's targets), [`model`] (the
//! candle network), [`file`] (save and load) and [`corrector`] (the
//! network in the rollout loop).

pub mod config;
pub mod corrector;
pub mod file;
pub mod graph;
pub mod model;
pub mod sample;
pub mod samples;
pub mod teacher;

pub use config::*;
pub use corrector::*;
pub use file::*;
pub use graph::*;
pub use model::*;
pub use sample::*;
