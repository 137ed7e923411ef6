//! The correction network in int8: encoder, processor and decoder with
//! integer arithmetic only between the input features and the output
//! corrections, so every target computes the same bits.
//!
//! ## Arithmetic (symmetric int8, requantisation by shifts)
//! - Inputs are quantised per feature to `[-127, 127]`:
//!   `q = round((x − offset) · gain)` ([`Input`]; symmetric, so that a
//!   feature that turns over with an edge's direction quantises to the
//!   negated value). Latents saturate to `[-128, 127]` (one `SSAT`), hidden
//!   activations after their ReLU to `[0, 127]`.
//! - A [`Linear`] layer holds int8 weights with one scale per output
//!   channel. The scales of its input columns are folded into the weights
//!   before quantisation, so a layer whose input is a concatenation of
//!   tensors with different scales (`[e, h_s, h_r]`) still sums into one
//!   int32 accumulator per output; biases are int32 in the accumulator's
//!   scale.
//! - Between layers, an accumulator becomes int8 by a right shift per
//!   output channel ([`Linear::shift`]) and saturation: the quantiser makes
//!   each output's weight scale its activation's scale divided by a power
//!   of two (the weights keep at least half their int8 range), and puts
//!   the rounding's half unit into the bias. On the Cortex-M4 that is one
//!   `ASR` and one `SSAT` (or `USAT` with the ReLU) per value, with no
//!   multiplier, rounding term or second shift to load.
//! - Latent activations have one scale per channel that every round keeps,
//!   so a residual update `y ← y + MLP(…)` ([`Mlp::residual`]) shifts the
//!   MLP's term into `y`'s scale, adds and saturates: the old `y` needs no
//!   requantisation.
//! - Latent and hidden channels' scales are folded into the next layer's
//!   weight columns.
//! - The mean over a node's incoming edges is the int32 sum divided by the
//!   count, rounded half away from zero, in the edges' scale.
//! - The decoder's position and velocity heads are read from their int32
//!   accumulators: `Δ = acc · scale + offset` in `f32` ([`Output`]), which
//!   also undoes the target normalisation.
//!
//! ## Network (see [`Network`])
//! node encoder, edge encoder, `rounds` × (edge update from `[e, h_s, h_r]`,
//! node update from `[h, mean of incoming e]`), position head, velocity
//! head; every MLP is `Linear → ReLU → Linear`. The first layer of the edge
//! update is computed factorised: `W_e e + W_s h_s + W_r h_r`, the node
//! terms once per node (in the int32 sums, [`ScratchSizes::sums`]).
//!
//! The rooms: [`kernel`] (saturation, shifts, dot products and the
//! widened weights' layout), [`layer`] (dense layers and MLPs on those
//! kernels), [`format`] (a network's parts, its check and its working
//! memory's sizes) and [`forward`] (features → encoders → processor →
//! heads). The after-step pipeline that runs it is [`crate::step`].

#[cfg(all(feature = "dsp", target_arch = "arm"))]
pub mod dsp;
pub mod format;
pub mod forward;
pub mod kernel;
pub mod layer;

pub use super::graph::GraphRef;
pub use format::*;
pub use forward::{forward, forward_probed, Inputs};
pub use kernel::{dot, wide_len, widen};
pub use layer::{Linear, Mlp};

/// Version of the quantised model layout this code runs (the `weights/`
/// file format carries it).
pub const FORMAT_VERSION: u32 = 6;
/// The largest right shift of a requantisation ([`Linear::shift`]).
pub const MAX_SHIFT: u8 = 31;
/// Largest latent width the kernels hold on the stack.
pub const MAX_LATENT: usize = 32;
/// Largest number of processor rounds.
pub const MAX_ROUNDS: usize = 8;
/// Dynamic pairs per node the network takes ([`dynamic_edges`]; pairs
/// beyond them are dropped and counted): the same on the desktop, in
/// training and on the board, whose core-coupled RAM holds the latents of
/// `PAIRS_PER_NODE × nodes` pairs at 16×16.
pub const PAIRS_PER_NODE: usize = 4;
const _: () = assert!(MAX_ROUNDS <= crate::probe::MAX_ROUNDS);

/// Why the network cannot run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GnnError {
    /// The network's layers do not fit together (or exceed
    /// [`MAX_LATENT`] / [`MAX_ROUNDS`]).
    /// What of the network is out of its bounds or does not fit: `latent`
    /// (1 to [`MAX_LATENT`]), `rounds` (edge and node rounds alike, at most
    /// [`MAX_ROUNDS`]), `radius` (positive and finite), `coarse grain`
    /// (factors in [0.001, 1]), `layer shapes`,
    /// `input scales`, `output scales` (finite).
    BadNetwork { what: &'static str },
    /// The scratch is smaller than [`ScratchSizes`] asks for this graph.
    Scratch { what: &'static str, capacity: usize, needed: usize },
    /// The state belongs to a mesh of another size.
    MeshMismatch,
    /// The dynamic-edge search failed.
    Proximity,
    /// The correction was not finite (the state is unchanged).
    NonFinite,
    /// A dynamic pair names a node the mesh does not have.
    BadPair { pair: usize },
    /// A slice given to [`Linear::matvec`] is too short.
    Length { what: &'static str, needed: usize, got: usize },
}

impl core::fmt::Display for GnnError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            GnnError::BadNetwork { what } => write!(f, "invalid network: {what} out of bounds or not fitting"),
            GnnError::Scratch { what, capacity, needed } => {
                write!(f, "network scratch {what} holds {capacity}, needs {needed}")
            }
            GnnError::MeshMismatch => write!(f, "state and mesh differ in size"),
            GnnError::Proximity => write!(f, "dynamic-edge search failed"),
            GnnError::NonFinite => write!(f, "the correction is not finite"),
            GnnError::BadPair { pair } => write!(f, "dynamic pair {pair} names a node outside the mesh"),
            GnnError::Length { what, needed, got } => write!(f, "{what} has {got} values, needs {needed}"),
        }
    }
}

impl core::error::Error for GnnError {}
