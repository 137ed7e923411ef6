//! A network's parts as the weights carry them, their check, and the
//! sizes of its working memory.

use super::super::features::{EDGE_FEATURES, NODE_FEATURES};
use super::layer::*;
use super::*;
use crate::mesh::MeshCounts;

/// Quantisation of one input feature: `q = round((x − offset) · gain)`,
/// saturated (the normalisation and the per-feature scale in one).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Input {
    pub offset: f32,
    pub gain: f32,
}

impl Input {
    /// `round((x − offset) · gain)`, half away from zero, saturated to
    /// `[-127, 127]`; NaN gives 0.
    #[inline]
    pub fn quantize(self, x: f32) -> i8 {
        let y = (x - self.offset) * self.gain;
        // `2y` truncated towards zero is exact (doubling is, and the cast
        // saturates, NaN to 0): `t = ±⌊2|y|⌋`, and `⌊|y| + ½⌋ =
        // ⌊(⌊2|y|⌋ + 1) / 2⌋` (an arithmetic shift floors the negative
        // side towards −∞, which is away from zero there). From `±254` on
        // the result is ±127. No branch: one `VCVT` and a few integer
        // instructions per feature on the board.
        let t = ((y + y) as i32).clamp(-254, 254);
        ((t + i32::from(t > 0)) >> 1) as i8
    }
}

impl Input {
    /// How far `x` lies out, in quantised units: `|x − offset| · gain`
    /// (127 at the largest magnitude the calibration saw, which quantises
    /// to ±127; NaN for NaN).
    #[inline]
    pub fn reach(self, x: f32) -> f32 {
        libm::fabsf((x - self.offset) * self.gain)
    }
}

/// The do-no-harm guard: a node whose largest input reach `m`
/// ([`Input::reach`], over the node inputs its encoder reads) exceeds
/// [`GUARD_START`] (127, the calibrated range) gets its correction times
/// `(GUARD_END − m) / (GUARD_END − GUARD_START)`, none from [`GUARD_END`]
/// (twice the range) and none for a non-finite input. The calibrated
/// range is that of the training samples the network was quantised on,
/// so a node inside it is corrected as trained; where an impact, a kick,
/// a wind or a collider takes it where training never went, the step the
/// network corrects is left alone. (A scene whose material, wind or pins
/// lie outside the families' is the host's to catch before it starts:
/// `weft_host::sim::envelope::Envelope::outside_envelope`.)
pub const GUARD_START: f32 = 127.0;
/// See [`GUARD_START`].
pub const GUARD_END: f32 = 254.0;

/// The guard's factor on a correction at input reach `m`.
#[inline]
pub fn guard_factor(m: f32) -> f32 {
    if !(m > GUARD_START) {
        return if m.is_nan() { 0.0 } else { 1.0 };
    }
    ((GUARD_END - m) / (GUARD_END - GUARD_START)).clamp(0.0, 1.0)
}

/// One decoder output in physical units: `Δ = acc · scale + offset`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Output {
    pub scale: f32,
    pub offset: f32,
}

/// The quantised network (usually a `static` made by the `weft-weights`
/// build script).
#[derive(Clone, Copy, Debug)]
pub struct Network<'a> {
    pub latent: usize,
    /// Dynamic-edge radius `r` (m) the network was trained with.
    pub radius: f32,
    /// The coarse step's membrane the network was trained to correct: the
    /// model it corrects is built with
    /// `material.coarse_grained(network.coarse)`
    /// ([`crate::model::Material::coarse_grained`]).
    pub coarse: crate::model::CoarseGrain,
    pub node_in: [Input; NODE_FEATURES],
    pub edge_in: [Input; EDGE_FEATURES],
    pub mlps: Parts<Mlp<'a>, &'a [Mlp<'a>]>,
    /// Δx (3) then Δv (3).
    pub out: [Output; 6],
    /// The do-no-harm guard ([`GUARD_START`]) on the corrections
    /// [`infer`] leaves: on in every network a file or the build script
    /// makes; off only to measure what it does.
    pub guard: bool,
}

/// One MLP of the network. [`Part::all`] is the one list of the network's
/// MLPs — their order, names and widths — that every view of it follows:
/// this int8 [`Network`], the weight file (`weft_weights::format`), and the
/// host's training network and float reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    NodeEncoder,
    EdgeEncoder,
    /// Round `r`'s edge update: input `[e, h_sender, h_receiver]`, residual.
    EdgeUpdate(usize),
    /// Round `r`'s node update: input `[h, mean incoming e]`, residual.
    NodeUpdate(usize),
    PositionHead,
    VelocityHead,
}

impl Part {
    /// Every MLP of a network with `rounds` rounds, in file order.
    pub fn all(rounds: usize) -> impl Iterator<Item = Part> {
        [Part::NodeEncoder, Part::EdgeEncoder]
            .into_iter()
            .chain((0..rounds).map(Part::EdgeUpdate))
            .chain((0..rounds).map(Part::NodeUpdate))
            .chain([Part::PositionHead, Part::VelocityHead])
    }

    /// `(inputs, outputs)` for latent size `l` (the hidden layer is `l`
    /// wide).
    pub const fn widths(self, l: usize) -> (usize, usize) {
        match self {
            Part::NodeEncoder => (NODE_FEATURES, l),
            Part::EdgeEncoder => (EDGE_FEATURES, l),
            Part::EdgeUpdate(_) => (3 * l, l),
            Part::NodeUpdate(_) => (2 * l, l),
            Part::PositionHead | Part::VelocityHead => (l, 3),
        }
    }

    /// Multiply-accumulates of one run of its two layers (hidden width
    /// `l`).
    pub const fn macs(self, l: usize) -> usize {
        let (i, o) = self.widths(l);
        i * l + l * o
    }

    /// Whether its output is added to its input latent.
    pub fn residual(self) -> bool {
        matches!(self, Part::EdgeUpdate(_) | Part::NodeUpdate(_))
    }

    /// Whether it is a head (its output is requantised per output).
    pub fn head(self) -> bool {
        matches!(self, Part::PositionHead | Part::VelocityHead)
    }
}

/// Its name in the weight files: `node_enc`, `edge_enc`, `edge_mlp{r}`,
/// `node_mlp{r}`, `head_x`, `head_v`.
impl core::fmt::Display for Part {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Part::NodeEncoder => write!(f, "node_enc"),
            Part::EdgeEncoder => write!(f, "edge_enc"),
            Part::EdgeUpdate(r) => write!(f, "edge_mlp{r}"),
            Part::NodeUpdate(r) => write!(f, "node_mlp{r}"),
            Part::PositionHead => write!(f, "head_x"),
            Part::VelocityHead => write!(f, "head_v"),
        }
    }
}

/// The network's MLPs, one per [`Part`]: the one container every view of
/// the network holds them in — this int8 [`Network`], the weight file
/// (`weft_weights::format`), the host's float reference and its training
/// network — so that their order, names and widths ([`Part::all`],
/// [`Part::widths`]) are written once. `R` holds the per-round MLPs (a
/// slice or a vector).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Parts<T, R> {
    pub node_enc: T,
    pub edge_enc: T,
    /// One per round: input `[e, h_sender, h_receiver]` (3L), residual.
    pub edge_mlp: R,
    /// One per round: input `[h, mean incoming e]` (2L), residual.
    pub node_mlp: R,
    pub head_x: T,
    pub head_v: T,
}

impl<T, R: AsRef<[T]>> Parts<T, R> {
    /// Processor rounds (edge updates; [`Parts::is_complete`] checks the
    /// node updates match).
    pub fn rounds(&self) -> usize {
        self.edge_mlp.as_ref().len()
    }

    /// As many node updates as edge updates.
    pub fn is_complete(&self) -> bool {
        self.edge_mlp.as_ref().len() == self.node_mlp.as_ref().len()
    }

    /// The MLP of `part`, if there is one.
    pub fn get(&self, part: Part) -> Option<&T> {
        match part {
            Part::NodeEncoder => Some(&self.node_enc),
            Part::EdgeEncoder => Some(&self.edge_enc),
            Part::EdgeUpdate(r) => self.edge_mlp.as_ref().get(r),
            Part::NodeUpdate(r) => self.node_mlp.as_ref().get(r),
            Part::PositionHead => Some(&self.head_x),
            Part::VelocityHead => Some(&self.head_v),
        }
    }

    /// Every part and its MLP, in [`Part::all`]'s order.
    pub fn iter(&self) -> impl Iterator<Item = (Part, &T)> {
        Part::all(self.rounds()).filter_map(move |p| self.get(p).map(|m| (p, m)))
    }

    /// Each round's edge and node update.
    pub fn rounds_iter(&self) -> impl Iterator<Item = (&T, &T)> {
        self.edge_mlp.as_ref().iter().zip(self.node_mlp.as_ref())
    }
}

impl<T, R: AsMut<[T]>> Parts<T, R> {
    /// The MLP of `part`, if there is one, to change.
    pub fn get_mut(&mut self, part: Part) -> Option<&mut T> {
        match part {
            Part::NodeEncoder => Some(&mut self.node_enc),
            Part::EdgeEncoder => Some(&mut self.edge_enc),
            Part::EdgeUpdate(r) => self.edge_mlp.as_mut().get_mut(r),
            Part::NodeUpdate(r) => self.node_mlp.as_mut().get_mut(r),
            Part::PositionHead => Some(&mut self.head_x),
            Part::VelocityHead => Some(&mut self.head_v),
        }
    }
}

/// A network whose layers are known to fit together ([`Network::check`]):
/// what [`forward`], [`infer`] and [`correct`] take, so a network is checked
/// once, not at every step.
#[derive(Clone, Copy, Debug)]
pub struct Checked<'n, 'a>(&'n Network<'a>);

impl<'n, 'a> Checked<'n, 'a> {
    pub fn network(self) -> &'n Network<'a> {
        self.0
    }
}

impl<'a> core::ops::Deref for Checked<'_, 'a> {
    type Target = Network<'a>;
    fn deref(&self) -> &Network<'a> {
        self.0
    }
}

impl<'a> Network<'a> {
    /// The network as [`Checked`], if all its layers fit together.
    pub fn check(&self) -> Result<Checked<'_, 'a>, GnnError> {
        self.validate()?;
        Ok(Checked(self))
    }

    /// The MLP of `part`, if the network has it.
    pub fn mlp(&self, part: Part) -> Option<&Mlp<'a>> {
        self.mlps.get(part)
    }

    /// Checks that all layers fit together ([`Network::check`]).
    pub fn validate(&self) -> Result<(), GnnError> {
        let l = self.latent;
        let rounds = self.mlps.rounds();
        let bad = |what| Err(GnnError::BadNetwork { what });
        if !(1..=MAX_LATENT).contains(&l) {
            return bad("latent width");
        }
        if !self.mlps.is_complete() || rounds > MAX_ROUNDS {
            return bad("rounds");
        }
        if !(self.radius.is_finite() && self.radius > 0.0) {
            return bad("radius");
        }
        if self.coarse.validate().is_err() {
            return bad("coarse grain");
        }
        let fits = |p: Part| {
            let (i, o) = p.widths(l);
            self.mlp(p).is_some_and(|m| m.is_valid(i, o, p.head()) && m.residual == p.residual())
        };
        if !Part::all(rounds).all(fits) {
            return bad("layer shapes");
        }
        if !self.node_in.iter().chain(&self.edge_in).all(|i| i.offset.is_finite() && i.gain.is_finite()) {
            return bad("input scales");
        }
        if !self.out.iter().all(|o| o.scale.is_finite() && o.offset.is_finite()) {
            return bad("output scales");
        }
        Ok(())
    }

    /// Multiply-accumulates of one forward pass on `nodes` nodes and
    /// `edges` directed edges ([`forward_macs`]), less those of a head
    /// that is not run ([`Network::head_runs`]).
    pub fn macs(&self, nodes: usize, edges: usize) -> usize {
        let silent = [Part::PositionHead, Part::VelocityHead]
            .into_iter()
            .enumerate()
            .filter(|&(k, _)| !self.head_runs(k))
            .map(|(_, part)| part.macs(self.latent))
            .sum::<usize>();
        forward_macs(self.latent, self.rounds(), nodes, edges) - nodes * silent
    }

    /// Whether head `k` (0: position, 1: velocity) is run: not where every
    /// output has scale and offset 0 (the position head of a
    /// velocity-only network), which gives +0 whatever its accumulators
    /// hold (`acc · 0 + 0`).
    pub fn head_runs(&self, k: usize) -> bool {
        self.out[3 * k.min(1)..][..3].iter().any(|q| q.scale != 0.0 || q.offset != 0.0)
    }

    pub fn rounds(&self) -> usize {
        self.mlps.rounds()
    }
}

/// Multiply-accumulates of one forward pass of a network of latent width
/// `l` (its hidden layers too) and `rounds` rounds on `nodes` nodes and
/// `edges` directed edges, from [`Part::widths`]; the edge update's first
/// layer is factorised (`W[e, h_s, h_r] = W_e e + W_s h_s + W_r h_r`), its
/// node terms computed once per node.
pub const fn forward_macs(l: usize, rounds: usize, nodes: usize, edges: usize) -> usize {
    let per_node = Part::NodeEncoder.macs(l)
        + rounds * Part::NodeUpdate(0).macs(l)
        + Part::PositionHead.macs(l)
        + Part::VelocityHead.macs(l)
        + rounds * 2 * l * l;
    let per_edge = Part::EdgeEncoder.macs(l) + rounds * (Part::EdgeUpdate(0).macs(l) - 2 * l * l);
    nodes * per_node + edges * per_edge
}

/// Sizes of the network's working memory for a mesh, a dynamic pair
/// capacity and a latent width (const, for static buffers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScratchSizes {
    /// int8 latents ([`Scratch`]): one row of `latent` per node and per
    /// directed edge.
    pub latents: usize,
    /// int32 sums: two rows of `latent` per node and the in-degrees. In a
    /// corrected step ([`infer`]) they live in the state's solver blocks,
    /// which are free between steps; [`forward`] takes them explicitly.
    pub sums: usize,
}

impl ScratchSizes {
    pub const fn new(counts: MeshCounts, pairs: usize, latent: usize) -> ScratchSizes {
        ScratchSizes {
            latents: (counts.nodes + 2 * (counts.edges + pairs)) * latent,
            sums: (2 * latent + 1) * counts.nodes,
        }
    }
    /// Whether the sums fit in the solver blocks of a state for `counts`
    /// (nine words per block; true up to latent
    /// [`crate::physics::state::MAX_LENT_LATENT`]).
    pub const fn sums_fit_in_state(&self, counts: MeshCounts) -> bool {
        self.sums <= 9 * crate::physics::state::mat3_blocks(counts)
    }
}

/// Caller-owned int8 latents of the network.
pub struct Scratch<'a> {
    pub latents: &'a mut [i8],
}

/// Const-generic latent buffer (size from [`ScratchSizes::latents`]).
pub struct ScratchBuffers<const I8: usize> {
    latents: [i8; I8],
}

impl<const I8: usize> ScratchBuffers<I8> {
    pub const fn new() -> Self {
        ScratchBuffers { latents: [0; I8] }
    }
    pub fn scratch(&mut self) -> Scratch<'_> {
        Scratch { latents: &mut self.latents }
    }
}

impl<const I8: usize> Default for ScratchBuffers<I8> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::Input;

    /// `round(y)` half away from zero, saturated to ±127, NaN to 0, by way
    /// of `f64` (every `f32` is exact there).
    fn reference(y: f32) -> i8 {
        if y.is_nan() {
            0
        } else {
            f64::from(y).round().clamp(-127.0, 127.0) as i8
        }
    }

    /// The branch-free quantisation rounds every value as the reference
    /// does: a sweep over the bit patterns of `f32` (every 509th, both
    /// signs, infinities and NaNs included) and every value within four
    /// ulps of each half-integer and integer up to ±130.
    #[test]
    fn quantize_rounds_half_away_from_zero_and_saturates() {
        let unit = Input { offset: 0.0, gain: 1.0 };
        let mut checked = 0u32;
        for bits in (0..=u32::MAX).step_by(509).chain([0x7f80_0000, 0xff80_0000, 0x7fc0_0000, 0x8000_0000]) {
            let y = f32::from_bits(bits);
            assert_eq!(unit.quantize(y), reference(y), "{y:e} ({bits:#010x})");
            checked += 1;
        }
        for k in -260..=260 {
            let mut y = k as f32 * 0.5;
            for _ in 0..4 {
                y = y.next_down();
            }
            for _ in 0..9 {
                assert_eq!(unit.quantize(y), reference(y), "{y:e}");
                y = y.next_up();
                checked += 1;
            }
        }
        assert!(checked > 8_000_000);
        // An offset and gain move the value first.
        let q = Input { offset: 0.25, gain: 4.0 };
        assert_eq!(q.quantize(0.375), 1);
        assert_eq!(q.quantize(0.125), -1);
        assert_eq!(q.quantize(1e9), 127);
    }
}
