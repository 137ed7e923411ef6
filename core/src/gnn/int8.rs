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
//! [`correct`] is the pipeline after a physics step: dynamic edges →
//! network → correction of the state.

use super::features::{self, EDGE_FEATURES, NODE_FEATURES};
use crate::contact::Proximity;
use crate::math::Vec3;
use crate::mesh::{MeshCounts, NodeId};
use crate::model::Model;
use crate::probe::{NoProbe, Probe, Stage};
use crate::state::State;

/// The graph view the network reads ([`super::graph`]), here too for the
/// callers that name it from this module.
pub use super::graph::GraphRef;

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

/// Saturation to int8 (one `SSAT`).
#[inline]
fn sat(v: i32) -> i8 {
    v.clamp(-128, 127) as i8
}

#[inline]
fn relu_sat(v: i32) -> i8 {
    v.clamp(0, 127) as i8
}

/// `f(c)` for every channel `c < n`: at the latent width, 16, as a loop
/// of constant length (unrolled, constant offsets, no bounds checks on
/// slices of that length), else as the general loop.
#[inline(always)]
fn per_channel(n: usize, mut f: impl FnMut(usize)) {
    if n == 16 {
        for c in 0..16 {
            f(c);
        }
    } else {
        for c in 0..n {
            f(c);
        }
    }
}

/// A dense layer `acc = bias + W · x` with `W` row-major
/// `[outputs][inputs]`.
#[derive(Clone, Copy, Debug)]
pub struct Linear<'a> {
    pub inputs: usize,
    pub outputs: usize,
    pub weights: &'a [i8],
    pub bias: &'a [i32],
    /// Per output channel, the right shift to the next activation's scale
    /// (at most [`MAX_SHIFT`]; the bias carries the rounding's half unit);
    /// empty for the heads' output layers, which are read by [`Output`].
    pub shift: &'a [u8],
    /// The same weights widened to 16-bit pairs in the DSP kernel's order
    /// ([`widen`]), or empty. Baked networks carry them (flash is cheap,
    /// and the kernel then needs no sign extension per weight); a network
    /// whose widened weights differ from `weights` fails its check.
    pub wide: &'a [u32],
}

/// Words of a layer's widened weights ([`widen`]): four per output row
/// and block of eight inputs, the last block padded with zero weights.
pub const fn wide_len(inputs: usize, outputs: usize) -> usize {
    inputs.div_ceil(8) * 4 * outputs
}

/// The weights of an `outputs × inputs` row-major layer as 16-bit pairs:
/// by block of eight inputs, then by output row, four words each —
/// `(w0, w2)`, `(w1, w3)`, `(w4, w6)`, `(w5, w7)` of the block, low half
/// first, the order in which the DSP kernel packs the activations (so one
/// `SMLAD` multiplies a word of weights by a word of activations); a last
/// block of fewer than eight inputs has zero weights for the rest. `out`
/// needs [`wide_len`] words; returns how many were written.
pub fn widen(weights: &[i8], inputs: usize, outputs: usize, out: &mut [u32]) -> usize {
    let n = wide_len(inputs, outputs);
    if n == 0 || weights.len() != inputs * outputs || out.len() < n {
        return 0;
    }
    let pair = |a: i8, b: i8| (a as i16 as u16 as u32) | ((b as i16 as u16 as u32) << 16);
    let mut k = 0;
    for block in 0..inputs.div_ceil(8) {
        for row in weights.chunks_exact(inputs) {
            let mut w = [0i8; 8];
            let part = &row[8 * block..];
            let m = part.len().min(8);
            w[..m].copy_from_slice(&part[..m]);
            for (a, b) in [(0, 2), (1, 3), (4, 6), (5, 7)] {
                out[k] = pair(w[a], w[b]);
                k += 1;
            }
        }
    }
    k
}

/// `Σ w·x` over int8 vectors (the shorter length), in int32.
///
/// Blocks of 16 and 8 fixed-size products first (a shape compilers turn
/// into SIMD multiply-accumulates), then the rest; integer addition is
/// associative, so the blocking does not change the result.
#[inline]
pub fn dot(w: &[i8], x: &[i8]) -> i32 {
    let n = w.len().min(x.len());
    let (w16, w_rest) = w[..n].as_chunks::<16>();
    let (x16, x_rest) = x[..n].as_chunks::<16>();
    let mut acc: i32 = w16.iter().zip(x16).map(|(a, b)| dot_n(a, b)).sum();
    let (w8, w_rest) = w_rest.as_chunks::<8>();
    let (x8, x_rest) = x_rest.as_chunks::<8>();
    acc += w8.iter().zip(x8).map(|(a, b)| dot_n(a, b)).sum::<i32>();
    acc + w_rest.iter().zip(x_rest).map(|(&a, &b)| a as i32 * b as i32).sum::<i32>()
}

/// `acc[o] += Σ_k W[o][k] · x[k]` for sixteen rows on widened weights
/// (`wide` from the block of `x`'s first input on, [`widen`]'s order; a
/// last block of fewer than eight inputs padded with zeros), portable:
/// pairwise 16-bit multiply-adds over each row's four weight pairs, all
/// sixteen rows at once, a shape vectorisers turn into `PMADDWD` (or
/// `VPDPWSSD`) with the accumulators in one register. `false`, with
/// nothing done, if `wide` is too short.
#[cfg(not(all(feature = "dsp", target_arch = "arm")))]
#[inline(always)]
fn rows16_portable(wide: &[u32], x: &[i8], acc: &mut [i32; 16]) -> bool {
    let (chunks, tail) = x.as_chunks::<8>();
    let blocks = chunks.len() + usize::from(!tail.is_empty());
    let Some(wide) = wide.get(..64 * blocks) else { return false };
    let mut padded = [0i8; 8];
    padded[..tail.len()].copy_from_slice(tail);
    let mut a = *acc;
    for (b, w) in wide.as_chunks::<64>().0.iter().enumerate() {
        let x8 = chunks.get(b).unwrap_or(&padded);
        // The activations in the weights' pair order.
        let xs: [i32; 8] = [x8[0], x8[2], x8[1], x8[3], x8[4], x8[6], x8[5], x8[7]].map(i32::from);
        for (a, w) in a.iter_mut().zip(w.as_chunks::<4>().0) {
            let mut s = 0;
            for q in 0..4 {
                let (lo, hi) = (w[q] as u16 as i16, (w[q] >> 16) as u16 as i16);
                s += lo as i32 * xs[2 * q] + hi as i32 * xs[2 * q + 1];
            }
            *a += s;
        }
    }
    *acc = a;
    true
}

/// A fixed-length dot product (an int8 × int8 product fits in int16).
#[inline(always)]
fn dot_n<const N: usize>(w: &[i8; N], x: &[i8; N]) -> i32 {
    let mut s = 0i32;
    for k in 0..N {
        s += (w[k] as i16 * x[k] as i16) as i32;
    }
    s
}

impl<'a> Linear<'a> {
    /// Weights, biases and widened weights (if any) match the stated
    /// shape, within the kernels' bounds.
    fn is_shaped(&self) -> bool {
        self.outputs <= MAX_LATENT
            && self.weights.len() == self.inputs * self.outputs
            && self.bias.len() == self.outputs
            && (self.wide.is_empty() || self.wide.len() == wide_len(self.inputs, self.outputs))
    }

    /// Its widened weights are absent or [`widen`] of its weights.
    fn wide_matches(&self) -> bool {
        if self.wide.is_empty() {
            return true;
        }
        if self.wide.len() != wide_len(self.inputs, self.outputs) {
            return false;
        }
        let mut block = [0u32; 4 * MAX_LATENT];
        let rows = self.weights.chunks_exact(self.inputs);
        (0..self.inputs.div_ceil(8)).all(|b| {
            // One block of eight inputs at a time: its rows' four words.
            let mut k = 0;
            for row in rows.clone() {
                let part = &row[8 * b..];
                let m = part.len().min(8);
                let mut four = [0u32; 4];
                widen(&part[..m], m, 1, &mut four);
                block[k..k + 4].copy_from_slice(&four);
                k += 4;
            }
            self.wide[4 * self.outputs * b..][..k] == block[..k]
        })
    }

    fn is_valid(&self, shifted: bool) -> bool {
        self.inputs > 0
            && self.outputs > 0
            && self.is_shaped()
            && self.wide_matches()
            && if shifted {
                self.shift.len() == self.outputs && self.shift.iter().all(|&s| s <= MAX_SHIFT)
            } else {
                self.shift.is_empty()
            }
    }

    /// `acc[o] += Σ_k W[o, col + k] · x[k]` over the column block starting
    /// at `col` (`packed`: room for the DSP kernel's packed `x`).
    #[inline]
    fn accumulate(&self, col: usize, x: &[i8], acc: &mut [i32], packed: &mut [u32]) {
        self.product(col, x, false, acc, packed);
    }

    /// `acc[o] = bias[o] + Σ_k W[o, col + k] · x[k]`.
    #[inline]
    fn start_with(&self, col: usize, x: &[i8], acc: &mut [i32], packed: &mut [u32]) {
        self.product(col, x, true, acc, packed);
    }

    /// The column block's product, added to the biases (`start`) or to
    /// `acc`.
    #[inline(always)]
    fn product(&self, col: usize, x: &[i8], start: bool, acc: &mut [i32], packed: &mut [u32]) {
        #[cfg(all(feature = "dsp", target_arch = "arm"))]
        {
            let from = start.then_some(self.bias);
            let Some(acc) = acc.get_mut(..self.outputs) else { return };
            // Widened weights serve whole blocks of eight inputs and a
            // layer's last, shorter block (padded with zero weights).
            if let (Some(s), Ok(a)) = (self.sixteen(col, x.len()), <&mut [i32; 16]>::try_from(&mut *acc)) {
                let start = if start { super::dsp::Start::From(s.bias) } else { super::dsp::Start::Acc };
                if super::dsp::rows16(s.wide, x, start, a, super::dsp::End::Acc) {
                    return;
                }
            }
            let blocks = x.len().is_multiple_of(8) || col + x.len() == self.inputs;
            if !self.wide.is_empty() && col.is_multiple_of(8) && blocks {
                let wide = self.wide.get(col / 2 * self.outputs..).unwrap_or(&[]);
                match <&[i8; 16]>::try_from(x) {
                    Ok(x16) => super::dsp::accumulate_wide16(wide, x16, from, acc),
                    Err(_) => super::dsp::accumulate_wide(wide, x, from, acc),
                }
            } else {
                self.product_int8(col, x, from, packed, acc);
            }
        }
        #[cfg(not(all(feature = "dsp", target_arch = "arm")))]
        {
            let _ = packed;
            if start {
                self.start(acc);
            }
            if let (Some(s), Some(a)) = (self.sixteen(col, x.len()), acc.first_chunk_mut::<16>()) {
                if rows16_portable(s.wide, x, a) {
                    return;
                }
            }
            let rows = self.weights.get(col..).unwrap_or(&[]).chunks(self.inputs);
            if let Ok(x16) = <&[i8; 16]>::try_from(x) {
                // The latent width: a fixed-size dot product per row.
                for (a, row) in acc.iter_mut().take(self.outputs).zip(rows) {
                    if let Some(w) = row.first_chunk::<16>() {
                        *a += dot_n(w, x16);
                    }
                }
            } else {
                for (a, row) in acc.iter_mut().take(self.outputs).zip(rows) {
                    *a += dot(row, x);
                }
            }
        }
    }

    /// [`Linear::product`] on the int8 weights (layers without widened
    /// weights): out of line, so that the widened path, which every
    /// latent-wide layer takes, stays small where it is inlined.
    #[cfg(all(feature = "dsp", target_arch = "arm"))]
    #[inline(never)]
    fn product_int8(&self, col: usize, x: &[i8], from: Option<&[i32]>, packed: &mut [u32], acc: &mut [i32]) {
        super::dsp::accumulate(self.weights, self.inputs, col, x, from, packed, acc);
    }

    /// A layer of sixteen outputs with widened weights, for `inputs`
    /// inputs from column `col` on (whole blocks of eight, or the layer's
    /// last columns): the pieces [`super::dsp::rows16`] takes.
    #[inline(always)]
    fn sixteen(&self, col: usize, inputs: usize) -> Option<Sixteen<'a>> {
        let whole = inputs.is_multiple_of(8) || col + inputs == self.inputs;
        if self.outputs != 16 || self.wide.is_empty() || !col.is_multiple_of(8) || !whole {
            return None;
        }
        Some(Sixteen {
            wide: self.wide.get(col * 8..)?,
            bias: self.bias.first_chunk()?,
            shift: self.shift.first_chunk(),
        })
    }

    /// `acc = bias + W x` (the layer's accumulators, before
    /// requantisation); `acc` needs `outputs` entries, `x` `inputs`.
    pub fn matvec(&self, x: &[i8], acc: &mut [i32]) -> Result<(), GnnError> {
        if !self.is_shaped() || self.inputs > 2 * MAX_LATENT {
            return Err(GnnError::BadNetwork { what: "layer shape" });
        }
        if x.len() < self.inputs {
            return Err(GnnError::Length { what: "input", needed: self.inputs, got: x.len() });
        }
        if acc.len() < self.outputs {
            return Err(GnnError::Length { what: "accumulator", needed: self.outputs, got: acc.len() });
        }
        let mut packed = [0u32; MAX_LATENT];
        self.start_with(0, &x[..self.inputs], acc, &mut packed);
        Ok(())
    }

    #[cfg_attr(all(feature = "dsp", target_arch = "arm"), allow(dead_code))]
    #[inline]
    fn start(&self, acc: &mut [i32]) {
        let acc = &mut acc[..self.outputs];
        // The latent width as a fixed-size copy (inline loads and stores
        // rather than a call to `memcpy` per layer and edge).
        match (<&mut [i32; 16]>::try_from(&mut *acc), <&[i32; 16]>::try_from(self.bias)) {
            (Ok(a), Ok(b)) => *a = *b,
            _ => acc.copy_from_slice(self.bias),
        }
    }
}

/// A sixteen-output layer's widened weights (from a column on), biases
/// and shifts ([`Linear::sixteen`]).
#[derive(Clone, Copy)]
struct Sixteen<'a> {
    wide: &'a [u32],
    bias: &'a [i32; 16],
    shift: Option<&'a [u8; 16]>,
}

/// An MLP of sixteen hidden and output channels with widened weights
/// ([`Mlp::fused`]), checked once per stage, not per node or edge: on the
/// device the DSP kernel's sixteen-row blocks with the requantisations
/// folded in, elsewhere the portable sixteen-row kernel with every
/// intermediate in local arrays.
#[derive(Clone, Copy)]
struct Fused<'a> {
    l1: Sixteen<'a>,
    s1: &'a [u8; 16],
    l2: Sixteen<'a>,
    s2: &'a [u8; 16],
    residual: bool,
    /// The desktop kernel's copy of the weights ([`Columns`]), made once
    /// per stage.
    #[cfg(not(all(feature = "dsp", target_arch = "arm")))]
    cols: Columns,
}

#[cfg(all(feature = "dsp", target_arch = "arm"))]
impl Fused<'_> {
    /// The MLP on `x` into `out` (the residual added to it), its first
    /// layer started from the sum of `sum`'s two rows (the biases if `None`); `false`, with
    /// nothing written, where the kernel does not take the shapes.
    #[inline(always)]
    fn run(&self, x: &[i8], sum: Option<(&[i32; 16], &[i32; 16])>, w: &mut Work, out: &mut [i8]) -> bool {
        use super::dsp::{rows16, End, Start};
        let start = sum.map(|(a, b)| Start::Sum(a, b));
        let (Some(acc), Some(hidden), Some(y)) =
            (w.acc.first_chunk_mut::<16>(), w.hidden.first_chunk_mut::<16>(), out.first_chunk_mut::<16>())
        else {
            return false;
        };
        // `rows16` refuses a single block itself; stated here too, the
        // length bound lets the compiler drop that case from the inlined
        // block loop (6 600 instructions a step less in QEMU).
        if x.len() <= 8
            || !rows16(self.l1.wide, x, start.unwrap_or(Start::From(self.l1.bias)), acc, End::Relu(self.s1, hidden))
        {
            return false;
        }
        let end = if self.residual { End::Residual(self.s2, y) } else { End::Sat(self.s2, y) };
        rows16(self.l2.wide, &hidden[..], Start::From(self.l2.bias), acc, end)
    }
}

/// A fused MLP's widened weights regrouped for 16-bit multiply-add lanes:
/// per block of eight inputs and weight pair `q` (the pairs of [`widen`]'s
/// order), the sixteen rows' pairs side by side, so that one pairwise
/// multiply-add of 32 lanes against the pair's two activations adds to all
/// sixteen accumulators at once. The desktop's kernel, made once per
/// stage: a first layer of up to [`Columns::MAX_BLOCKS`] blocks, a second
/// of two.
#[cfg(not(all(feature = "dsp", target_arch = "arm")))]
#[derive(Clone, Copy)]
struct Columns {
    first: [[[i16; 32]; 4]; Columns::MAX_BLOCKS],
    blocks: usize,
    second: [[[i16; 32]; 4]; 2],
}

#[cfg(not(all(feature = "dsp", target_arch = "arm")))]
impl Columns {
    /// Blocks of a first layer (the node update's 32 inputs at latent 16).
    const MAX_BLOCKS: usize = 4;
    /// The inputs, within a block, of each weight pair.
    const PAIRS: [[usize; 2]; 4] = [[0, 2], [1, 3], [4, 6], [5, 7]];

    /// From the widened weights of `inputs` first-layer inputs and of the
    /// second layer, if they hold them.
    fn of(l1: &Sixteen, inputs: usize, l2: &Sixteen) -> Option<Columns> {
        let blocks = inputs.div_ceil(8);
        let mut c = Columns { first: [[[0; 32]; 4]; Columns::MAX_BLOCKS], blocks, second: [[[0; 32]; 4]; 2] };
        Columns::regroup(l1.wide, c.first.get_mut(..blocks)?)?;
        Columns::regroup(l2.wide, &mut c.second)?;
        Some(c)
    }

    fn regroup(wide: &[u32], out: &mut [[[i16; 32]; 4]]) -> Option<()> {
        for (b, block) in out.iter_mut().enumerate() {
            let words = wide.get(64 * b..)?.first_chunk::<64>()?;
            for (o, row) in words.as_chunks::<4>().0.iter().enumerate() {
                for (q, &w) in row.iter().enumerate() {
                    block[q][2 * o] = w as u16 as i16;
                    block[q][2 * o + 1] = (w >> 16) as u16 as i16;
                }
            }
        }
        Some(())
    }

    /// `acc[o] += Σ_k W[o][k] · x[k]` over the blocks of `cols` (`x` of
    /// the blocks' inputs, a last one shorter than eight padded).
    #[inline(always)]
    fn product(cols: &[[[i16; 32]; 4]], x: &[i8], acc: &mut [i32; 16]) {
        use wide::{i16x32, i32x16};
        let (chunks, tail) = x.as_chunks::<8>();
        let mut padded = [0i8; 8];
        padded[..tail.len()].copy_from_slice(tail);
        let mut a = i32x16::new(*acc);
        for (b, block) in cols.iter().enumerate() {
            let x8 = chunks.get(b).unwrap_or(&padded);
            for (w, [i, j]) in block.iter().zip(Columns::PAIRS) {
                // The pair's two activations in every 32-bit lane.
                let pair = (x8[i] as i16 as u16 as u32) | ((x8[j] as i16 as u16 as u32) << 16);
                let xs: i16x32 = bytemuck::cast(wide::u32x16::splat(pair));
                a += i16x32::new(*w).dot(xs);
            }
        }
        *acc = a.to_array();
    }
}

#[cfg(not(all(feature = "dsp", target_arch = "arm")))]
impl Fused<'_> {
    /// The MLP on `x` into `out` (the residual added to it), its first
    /// layer started from the sum of `sum`'s two rows (the biases if
    /// `None`); `false`, with nothing written, where the kernel does not
    /// take the shapes.
    #[inline(always)]
    fn run(&self, x: &[i8], sum: Option<(&[i32; 16], &[i32; 16])>, _: &mut Work, out: &mut [i8]) -> bool {
        let Some(y) = out.first_chunk_mut::<16>() else { return false };
        let mut acc = match sum {
            Some((a, b)) => core::array::from_fn(|o| a[o] + b[o]),
            None => *self.l1.bias,
        };
        let cols = &self.cols;
        if x.len().div_ceil(8) != cols.blocks {
            return false;
        }
        Columns::product(&cols.first[..cols.blocks], x, &mut acc);
        // Shifts are at most MAX_SHIFT = 31: the mask changes none.
        let hidden: [i8; 16] = core::array::from_fn(|o| relu_sat(acc[o] >> (self.s1[o] & 31)));
        let mut acc = *self.l2.bias;
        Columns::product(&cols.second, &hidden, &mut acc);
        if self.residual {
            per_channel(16, |o| y[o] = sat((acc[o] >> (self.s2[o] & 31)).saturating_add(y[o] as i32)));
        } else {
            per_channel(16, |o| y[o] = sat(acc[o] >> (self.s2[o] & 31)));
        }
        true
    }
}

/// `Linear → ReLU → Linear`, residual or not.
#[derive(Clone, Copy, Debug)]
pub struct Mlp<'a> {
    pub l1: Linear<'a>,
    pub l2: Linear<'a>,
    /// A residual update `y ← y + MLP(…)`: the MLP's term, shifted into
    /// `y`'s scale (which every round keeps), is added to the old `y`.
    pub residual: bool,
}

impl<'a> Mlp<'a> {
    fn is_valid(&self, inputs: usize, outputs: usize, head: bool) -> bool {
        self.l1.inputs == inputs
            && self.l2.inputs == self.l1.outputs
            && self.l2.outputs == outputs
            && self.l1.is_valid(true)
            && self.l2.is_valid(!head)
            && !(head && self.residual)
    }

    /// Its shifts in the form its loops run them ([`Ready`]): made once
    /// per stage, not per node or edge.
    #[inline]
    fn ready(&self) -> Ready {
        Ready { hidden: Shifts::of(self.l1.shift), out: Shifts::of(self.l2.shift) }
    }

    /// The sixteen-channel kernel's view of this MLP on `inputs` inputs,
    /// if it takes it.
    #[inline]
    fn fused(&self, inputs: usize) -> Option<Fused<'a>> {
        let (l1, l2) = (self.l1.sixteen(0, inputs)?, self.l2.sixteen(0, 16)?);
        (self.l2.inputs == 16 && inputs > 8).then_some(())?;
        Some(Fused {
            l1,
            s1: l1.shift?,
            l2,
            s2: l2.shift?,
            residual: self.residual,
            #[cfg(not(all(feature = "dsp", target_arch = "arm")))]
            cols: Columns::of(&l1, inputs, &l2)?,
        })
    }

    /// First layer and ReLU on `x` into `w.hidden`.
    #[inline]
    fn first(&self, ready: &Shifts, x: &[i8], w: &mut Work) {
        let h = self.l1.outputs;
        // Sixteen hidden channels on the device: the requantisation in the
        // kernel's last block.
        #[cfg(all(feature = "dsp", target_arch = "arm"))]
        if let (Some(s), Some(acc), Some(hidden)) =
            (self.l1.sixteen(0, x.len()), w.acc.first_chunk_mut::<16>(), w.hidden.first_chunk_mut::<16>())
        {
            if let Some(sh) = s.shift {
                use super::dsp::{rows16, End, Start};
                if rows16(s.wide, x, Start::From(s.bias), acc, End::Relu(sh, hidden)) {
                    return;
                }
            }
        }
        self.l1.start_with(0, x, &mut w.acc, &mut w.packed);
        self.hidden(ready, &w.acc[..h], &mut w.hidden[..h]);
    }

    /// Hidden layer from a finished first-layer accumulator (`ready`: its
    /// shifts, [`Mlp::ready`]): `relu_sat(acc >> shift)`.
    #[inline(always)]
    fn hidden(&self, ready: &Shifts, acc: &[i32], hidden: &mut [i8]) {
        let n = hidden.len().min(acc.len()).min(MAX_LATENT);
        let (h, a, s) = (&mut hidden[..n], &acc[..n], &ready.0[..n]);
        per_channel(n, |k| h[k] = relu_sat(a[k] >> s[k].get()));
    }

    /// Second layer from `w.hidden` into `out` (int8): `sat(acc >> shift)`,
    /// added to the old `out` for a residual update.
    #[inline(always)]
    fn finish(&self, ready: &Ready, w: &mut Work, out: &mut [i8]) {
        let h = self.l1.outputs;
        self.l2.start_with(0, &w.hidden[..h], &mut w.acc, &mut w.packed);
        let n = out.len().min(MAX_LATENT);
        let (y, a, s) = (&mut out[..n], &w.acc[..n], &ready.out.0[..n]);
        if self.residual {
            per_channel(n, |k| y[k] = sat((a[k] >> s[k].get()).saturating_add(y[k] as i32)));
        } else {
            per_channel(n, |k| y[k] = sat(a[k] >> s[k].get()));
        }
    }

    /// The whole MLP on one int8 input vector.
    #[inline]
    fn run(&self, ready: &Ready, x: &[i8], w: &mut Work, out: &mut [i8]) {
        self.first(&ready.hidden, x, w);
        self.finish(ready, w, out);
    }

    /// A head: the second layer's int32 accumulators in `w.acc`.
    #[inline]
    fn head(&self, ready: &Shifts, x: &[i8], w: &mut Work) {
        self.first(ready, x, w);
        self.l2.start_with(0, &w.hidden[..self.l1.outputs], &mut w.acc, &mut w.packed);
    }
}

/// A shift amount, 0 to 31, as a type whose every value is one: the
/// compiler knows its range, so a shift by it needs no mask.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(u8)]
enum Shift {
    S0,
    S1,
    S2,
    S3,
    S4,
    S5,
    S6,
    S7,
    S8,
    S9,
    S10,
    S11,
    S12,
    S13,
    S14,
    S15,
    S16,
    S17,
    S18,
    S19,
    S20,
    S21,
    S22,
    S23,
    S24,
    S25,
    S26,
    S27,
    S28,
    S29,
    S30,
    S31,
}

impl Shift {
    const ALL: [Shift; 32] = [
        Shift::S0,
        Shift::S1,
        Shift::S2,
        Shift::S3,
        Shift::S4,
        Shift::S5,
        Shift::S6,
        Shift::S7,
        Shift::S8,
        Shift::S9,
        Shift::S10,
        Shift::S11,
        Shift::S12,
        Shift::S13,
        Shift::S14,
        Shift::S15,
        Shift::S16,
        Shift::S17,
        Shift::S18,
        Shift::S19,
        Shift::S20,
        Shift::S21,
        Shift::S22,
        Shift::S23,
        Shift::S24,
        Shift::S25,
        Shift::S26,
        Shift::S27,
        Shift::S28,
        Shift::S29,
        Shift::S30,
        Shift::S31,
    ];

    /// `n mod 32`.
    fn new(n: u32) -> Shift {
        Shift::ALL[(n & 31) as usize]
    }

    #[inline(always)]
    fn get(self) -> u32 {
        self as u32
    }
}

/// A layer's shifts as [`Shift`]s (a checked network's are all at most
/// [`MAX_SHIFT`]).
struct Shifts([Shift; MAX_LATENT]);

impl Shifts {
    fn of(shift: &[u8]) -> Shifts {
        let mut row = [Shift::S0; MAX_LATENT];
        for (r, &s) in row.iter_mut().zip(shift) {
            *r = Shift::new(s as u32);
        }
        Shifts(row)
    }
}

/// An MLP's shifts as its loops run them ([`Mlp::ready`]).
struct Ready {
    hidden: Shifts,
    out: Shifts,
}

/// Per-forward working rows (on the stack, made once per pass).
struct Work {
    acc: [i32; MAX_LATENT],
    hidden: [i8; MAX_LATENT],
    packed: [u32; MAX_LATENT],
}

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
        let a = libm::fabsf(y);
        if !(a < 128.0) {
            // Saturated (NaN: 0).
            return if y > 0.0 {
                127
            } else if y < 0.0 {
                -127
            } else {
                0
            };
        }
        // Below 128 the integer part and the fraction split exactly.
        let whole = a as i32;
        let q = (whole + i32::from(a - whole as f32 >= 0.5)).min(127);
        (if y < 0.0 { -q } else { q }) as i8
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
/// `weft_host::sim::scenario::Scenario::outside_envelope`.)
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
    /// `edges` directed edges ([`forward_macs`]).
    pub fn macs(&self, nodes: usize, edges: usize) -> usize {
        forward_macs(self.latent, self.rounds(), nodes, edges)
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
    /// [`crate::state::MAX_LENT_LATENT`]).
    pub const fn sums_fit_in_state(&self, counts: MeshCounts) -> bool {
        self.sums <= 9 * crate::state::mat3_blocks(counts)
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

/// Runs the network: `dx[i], dv[i]` receive the corrections of node `i`
/// (pinned nodes included; [`State::apply_correction`] skips them).
pub fn forward(
    net: Checked,
    g: GraphRef,
    latents: &mut [i8],
    sums: &mut [i32],
    dx: &mut [Vec3],
    dv: &mut [Vec3],
) -> Result<(), GnnError> {
    forward_probed(net, g, latents, sums, dx, dv, &mut NoProbe)
}

/// [`forward`], marking its stages to `probe` ([`crate::probe`]).
pub fn forward_probed(
    net: Checked,
    g: GraphRef,
    latents: &mut [i8],
    sums: &mut [i32],
    dx: &mut [Vec3],
    dv: &mut [Vec3],
    probe: &mut impl Probe,
) -> Result<(), GnnError> {
    forward_guarded(net, g, latents, sums, [dx, dv], false, probe)
}

/// [`forward_probed`], with the do-no-harm guard ([`GUARD_START`]) where
/// `guarded`: each node's factor is taken from the inputs its encoder
/// reads (kept in `dx` until the heads overwrite it) and applied to its
/// corrections.
fn forward_guarded(
    net: Checked,
    g: GraphRef,
    latents: &mut [i8],
    sums: &mut [i32],
    [dx, dv]: [&mut [Vec3]; 2],
    guarded: bool,
    probe: &mut impl Probe,
) -> Result<(), GnnError> {
    let net = net.network();
    let n = g.mesh.node_count();
    if g.x.len() != n || g.v.len() != n || g.pinned.len() != n || dx.len() != n || dv.len() != n {
        return Err(GnnError::MeshMismatch);
    }
    if let Some(pair) = g.pairs.iter().position(|p| p.iter().any(|&i| i as usize >= n)) {
        return Err(GnnError::BadPair { pair });
    }
    let l = net.latent;
    let ne = features::edge_count(g.mesh, g.pairs.len());
    let need_i8 = (n + ne) * l;
    let need_i32 = (2 * l + 1) * n;
    if latents.len() < need_i8 {
        return Err(GnnError::Scratch { what: "latents", capacity: latents.len(), needed: need_i8 });
    }
    if sums.len() < need_i32 {
        return Err(GnnError::Scratch { what: "sums", capacity: sums.len(), needed: need_i32 });
    }
    let (h, rest) = latents.split_at_mut(n * l);
    let e = &mut rest[..ne * l];
    let (ps, rest) = sums.split_at_mut(n * l);
    let (pr, rest) = rest.split_at_mut(n * l);
    let degree = &mut rest[..n];

    let mut w = Work { acc: [0; MAX_LATENT], hidden: [0; MAX_LATENT], packed: [0; MAX_LATENT] };
    probe.enter(Stage::Encoders);
    encode(net, &g, h, e, degree, guarded.then_some(&mut *dx), &mut w)?;
    for (round, (em, nm)) in net.mlps.rounds_iter().enumerate() {
        probe.enter(Stage::EdgeUpdate(round as u8));
        edge_update(em, &g, l, h, e, [&mut *ps, &mut *pr], &mut w)?;
        probe.enter(Stage::NodeUpdate(round as u8));
        node_update(nm, &g, l, h, e, ps, degree, &mut w)?;
    }
    probe.enter(Stage::Heads);
    decode(net, h, dx, dv, guarded, &mut w);
    Ok(())
}

/// The input columns a first layer reads (a nonzero weight in some row),
/// as bits.
fn read_columns(l1: &Linear) -> u32 {
    let mut read = 0u32;
    for row in l1.weights.chunks_exact(l1.inputs.max(1)) {
        for (k, &w) in row.iter().enumerate().take(32) {
            if w != 0 {
                read |= 1 << k;
            }
        }
    }
    read
}

/// Node and edge features, quantised, through the encoders into the node
/// latents `h` and edge latents `e`; counts each node's incoming edges.
fn encode(
    net: &Network,
    g: &GraphRef,
    h: &mut [i8],
    e: &mut [i8],
    degree: &mut [i32],
    mut guard: Option<&mut [Vec3]>,
    w: &mut Work,
) -> Result<(), GnnError> {
    let l = net.latent;
    let inputs = Inputs::new(net, g);
    let ready = net.mlps.node_enc.ready();
    let fused = net.mlps.node_enc.fused(NODE_FEATURES);
    // The inputs the guard watches (none without the guard: no reach to take).
    let read = if guard.is_some() { read_columns(&net.mlps.node_enc.l1) } else { 0 };
    for (i, hi) in h.chunks_exact_mut(l).enumerate() {
        let (x, reach) = inputs.node_and_reach(i, read)?;
        if let Some(factor) = guard.as_deref_mut().and_then(|f| f.get_mut(i)) {
            *factor = Vec3::new(guard_factor(reach), 0.0, 0.0);
        }
        if !fused.as_ref().is_some_and(|f| f.run(&x, None, w, hi)) {
            net.mlps.node_enc.run(&ready, &x, w, hi);
        }
    }
    degree.fill(0);
    let ready = net.mlps.edge_enc.ready();
    let fused = net.mlps.edge_enc.fused(EDGE_FEATURES);
    let mut last = None;
    for (k, ek) in e.chunks_exact_mut(l).enumerate() {
        let (ends, q) = inputs.edge_after(k, last)?;
        last = Some((ends, q));
        if !fused.as_ref().is_some_and(|f| f.run(&q, None, w, ek)) {
            net.mlps.edge_enc.run(&ready, &q, w, ek);
        }
        degree[ends[1] as usize] += 1;
    }
    Ok(())
}

/// The network's quantised inputs on a graph: what its encoders read
/// (the firmware also runs them alone, to report the features' share of
/// the encoders' stage).
pub struct Inputs<'n, 'g> {
    net: &'n Network<'n>,
    g: &'n GraphRef<'g>,
    centroid: Vec3,
    around: features::Surroundings<'g>,
    /// The quantisation of every feature that turns over with an edge's
    /// direction is odd (no offset): [`Inputs::reversed`].
    odd: bool,
}

impl<'n, 'g> Inputs<'n, 'g> {
    pub fn new(net: &'n Network<'n>, g: &'n GraphRef<'g>) -> Self {
        let odd = features::TURNS_OVER.iter().zip(&net.edge_in).all(|(&turns, q)| !turns || q.offset == 0.0);
        Inputs { net, g, centroid: features::centroid(g.x), around: g.surroundings(net.radius), odd }
    }

    /// The other direction's ends and quantised features from one
    /// direction's ([`Inputs::edge`] of directed edge `2m` gives `2m + 1`'s):
    /// the features that turn over ([`features::TURNS_OVER`]) negated, the
    /// same values [`Inputs::edge`] computes, when their quantisation has
    /// no offset (`round(−y) = −round(y)`, half away from zero, and the
    /// saturation is symmetric); `None` for a network whose quantisation
    /// has an offset there.
    #[inline(always)]
    pub fn reversed(
        &self,
        (ends, q): ([NodeId; 2], [i8; EDGE_FEATURES]),
    ) -> Option<([NodeId; 2], [i8; EDGE_FEATURES])> {
        let turn = |k: usize| if features::TURNS_OVER[k] { -q[k] } else { q[k] };
        self.odd.then(|| ([ends[1], ends[0]], core::array::from_fn(turn)))
    }

    /// Directed edge `k`'s ends and quantised features, from the edge
    /// before it (`last`) where that is its other direction
    /// ([`Inputs::reversed`]): every edge's features in order at half the
    /// work.
    #[inline(always)]
    pub fn edge_after(
        &self,
        k: usize,
        last: Option<([NodeId; 2], [i8; EDGE_FEATURES])>,
    ) -> Result<([NodeId; 2], [i8; EDGE_FEATURES]), GnnError> {
        match last.filter(|_| k % 2 == 1).and_then(|l| self.reversed(l)) {
            Some(other) => Ok(other),
            None => self.edge(k),
        }
    }

    /// Node `i`'s features, quantised.
    #[inline(always)]
    pub fn node(&self, i: usize) -> Result<[i8; NODE_FEATURES], GnnError> {
        Ok(self.node_and_reach(i, 0)?.0)
    }

    /// Node `i`'s features, quantised, and their largest reach
    /// ([`Input::reach`]) over the columns whose bits `read` sets (NaN
    /// for a non-finite input).
    #[inline(always)]
    pub fn node_and_reach(&self, i: usize, read: u32) -> Result<([i8; NODE_FEATURES], f32), GnnError> {
        let g = self.g;
        let (Some(&x), Some(&v), Some(&v_start), Some(&v_start_prev), Some(&pinned)) =
            (g.x.get(i), g.v.get(i), g.v_start.get(i), g.v_start_prev.get(i), g.pinned.get(i))
        else {
            return Err(GnnError::MeshMismatch);
        };
        let node = features::NodeState { x, v, v_start, v_start_prev, pinned: pinned != 0 };
        let f = features::node_feature(node, self.centroid, &self.around);
        let mut q = [0i8; NODE_FEATURES];
        let mut reach = 0.0f32;
        for (k, ((q, &x), inp)) in q.iter_mut().zip(&f).zip(&self.net.node_in).enumerate() {
            *q = inp.quantize(x);
            if read & (1 << k) != 0 {
                let r = inp.reach(x);
                // NaN stays: the guard's factor for it is 0.
                reach = if r.is_nan() || reach.is_nan() { f32::NAN } else { reach.max(r) };
            }
        }
        Ok((q, reach))
    }

    /// Directed edge `k`'s ends and features, quantised (static edges
    /// first, both directions of each, then the dynamic pairs').
    #[inline(always)]
    pub fn edge(&self, k: usize) -> Result<([NodeId; 2], [i8; EDGE_FEATURES]), GnnError> {
        let g = self.g;
        let ends = features::endpoints_of(g.mesh, g.pairs, k).ok_or(GnnError::MeshMismatch)?;
        if ends.iter().any(|&i| i as usize >= g.x.len()) {
            return Err(GnnError::MeshMismatch);
        }
        let rest = (k / 2 < g.mesh.edges().len()).then(|| g.mesh.rest());
        let f = features::edge_feature(rest, g.x, ends, self.net.radius);
        let mut q = [0i8; EDGE_FEATURES];
        for ((q, &x), inp) in q.iter_mut().zip(&f).zip(&self.net.edge_in) {
            *q = inp.quantize(x);
        }
        Ok((ends, q))
    }
}

/// A processor round's edge update `e ← e + MLP([e, h_s, h_r])`, its first
/// layer factorised: the node terms `W_s h` and `W_r h` once per node into
/// `[ps, pr]`.
fn edge_update(
    em: &Mlp,
    g: &GraphRef,
    l: usize,
    h: &[i8],
    e: &mut [i8],
    [ps, pr]: [&mut [i32]; 2],
    w: &mut Work,
) -> Result<(), GnnError> {
    // The sender terms carry the layer's bias (integer sums: the same
    // result in any order).
    for (i, hi) in h.chunks_exact(l).enumerate() {
        let (s, r) = (&mut ps[i * l..][..l], &mut pr[i * l..][..l]);
        match <&mut [i32; 16]>::try_from(&mut *r) {
            Ok(r) => *r = [0; 16],
            Err(_) => r.fill(0),
        }
        em.l1.start_with(l, hi, s, &mut w.packed);
        em.l1.accumulate(2 * l, hi, r, &mut w.packed);
    }
    let ready = em.ready();
    let fused = em.fused(l);
    for (k, ek) in e.chunks_exact_mut(l).enumerate() {
        let [s, r] = features::endpoints_of(g.mesh, g.pairs, k).ok_or(GnnError::MeshMismatch)?;
        let (xs, ys) = (&ps[s as usize * l..][..l], &pr[r as usize * l..][..l]);
        if let (Some(f), Some(x), Some(a), Some(b)) =
            (&fused, ek.first_chunk::<16>(), xs.first_chunk(), ys.first_chunk())
        {
            // The edge's own latent is the first layer's input and the
            // residual's output.
            let x = *x;
            if f.run(&x, Some((a, b)), w, ek) {
                continue;
            }
        }
        let acc = &mut w.acc[..l];
        per_channel(l, |c| acc[c] = xs[c] + ys[c]);
        em.l1.accumulate(0, ek, &mut w.acc, &mut w.packed);
        em.hidden(&ready.hidden, &w.acc[..l], &mut w.hidden[..l]);
        em.finish(&ready, w, ek);
    }
    Ok(())
}

/// A processor round's node update `h ← h + MLP([h, mean of incoming e])`
/// (the int32 sums in `agg`, the in-degrees in `degree`).
#[allow(clippy::too_many_arguments)]
fn node_update(
    nm: &Mlp,
    g: &GraphRef,
    l: usize,
    h: &mut [i8],
    e: &[i8],
    agg: &mut [i32],
    degree: &[i32],
    w: &mut Work,
) -> Result<(), GnnError> {
    agg.fill(0);
    for (k, ek) in e.chunks_exact(l).enumerate() {
        let [_, r] = features::endpoints_of(g.mesh, g.pairs, k).ok_or(GnnError::MeshMismatch)?;
        let a = &mut agg[r as usize * l..][..l];
        per_channel(l, |c| a[c] += ek[c] as i32);
    }
    let mut input = [0i8; 2 * MAX_LATENT];
    let ready = nm.ready();
    let fused = nm.fused(2 * l);
    for (i, hi) in h.chunks_exact_mut(l).enumerate() {
        let d = degree[i].max(1);
        let (sums, (own, mean)) = (&agg[i * l..][..l], input[..2 * l].split_at_mut(l));
        per_channel(l, |c| {
            own[c] = hi[c];
            mean[c] = sat(div_round(sums[c], d));
        });
        if !fused.as_ref().is_some_and(|f| f.run(&input[..2 * l], None, w, hi)) {
            nm.run(&ready, &input[..2 * l], w, hi);
        }
    }
    Ok(())
}

/// The position and velocity heads: `dx[i]`, `dv[i]` from the int32
/// accumulators of each node's latent.
fn decode(net: &Network, h: &[i8], dx: &mut [Vec3], dv: &mut [Vec3], guarded: bool, w: &mut Work) {
    let ready = [Shifts::of(net.mlps.head_x.l1.shift), Shifts::of(net.mlps.head_v.l1.shift)];
    for (i, hi) in h.chunks_exact(net.latent).enumerate() {
        let mut out = [0f32; 6];
        for ((head, part), ready) in [(&net.mlps.head_x, 0), (&net.mlps.head_v, 3)].into_iter().zip(&ready) {
            head.head(ready, hi, w);
            for k in 0..3 {
                let q = net.out[part + k];
                out[part + k] = w.acc[k] as f32 * q.scale + q.offset;
            }
        }
        let (mut x, mut v) = (Vec3::new(out[0], out[1], out[2]), Vec3::new(out[3], out[4], out[5]));
        // The guard's factor, which the encoders left in `dx`.
        let f = if guarded { dx[i].x } else { 1.0 };
        if f < 1.0 {
            x = x * f;
            v = v * f;
        }
        dx[i] = x;
        dv[i] = v;
    }
}

/// `a / b` rounded half away from zero (`b > 0`).
#[inline]
fn div_round(a: i32, b: i32) -> i32 {
    let half = b / 2;
    if a >= 0 {
        (a + half) / b
    } else {
        (a - half) / b
    }
}

/// What a [`correct`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CorrectionReport {
    /// Dynamic (undirected) edges the network saw.
    pub dynamic_edges: usize,
    /// Pairs within the radius that did not fit the state's pair storage.
    pub dropped_pairs: usize,
}

/// The learned half of a corrected step, after [`crate::physics::step`]:
/// [`dynamic_edges`], [`infer`] and [`apply`]. On error the state keeps the
/// physics step's result.
pub fn correct(
    model: &Model,
    state: &mut State,
    net: Checked,
    scratch: &mut Scratch,
) -> Result<CorrectionReport, GnnError> {
    let found = dynamic_edges(model, state, net)?;
    infer(model, state, net, scratch)?;
    apply(state)?;
    Ok(CorrectionReport { dynamic_edges: found.pairs, dropped_pairs: found.dropped })
}

/// Finds the dynamic edges of the current positions: node pairs closer
/// than the network's radius with no static edge, into the state's pair
/// storage, at most [`PAIRS_PER_NODE`] per node (pairs beyond that or the
/// storage's capacity are dropped and counted).
pub fn dynamic_edges(model: &Model, state: &mut State, net: Checked) -> Result<Proximity, GnnError> {
    let n = model.mesh.node_count();
    if state.x.len() != n {
        return Err(GnnError::MeshMismatch);
    }
    state.find_pairs(&model.mesh, net.radius, PAIRS_PER_NODE * n).map_err(|_| GnnError::Proximity)
}

/// Runs the network on the state and its dynamic edges, in the memory the
/// state lends it ([`State::lend_to_network`]); the corrections wait there
/// for [`apply`].
pub fn infer(model: &Model, state: &mut State, net: Checked, scratch: &mut Scratch) -> Result<(), GnnError> {
    infer_probed(model, state, net, scratch, &mut NoProbe)
}

/// [`infer`], marking the network's stages to `probe` ([`crate::probe`]).
pub fn infer_probed(
    model: &Model,
    state: &mut State,
    net: Checked,
    scratch: &mut Scratch,
    probe: &mut impl Probe,
) -> Result<(), GnnError> {
    let time = state.time() as f32;
    let loan = state.lend_to_network();
    if loan.x.len() != model.mesh.node_count() {
        return Err(GnnError::MeshMismatch);
    }
    loan.dx.fill(Vec3::ZERO);
    loan.dv.fill(Vec3::ZERO);
    let g = GraphRef::in_model(model, [loan.x, loan.v, loan.v_start, loan.v_start_prev], loan.pinned, loan.pairs, time);
    forward_guarded(net, g, scratch.latents, loan.sums, [loan.dx, loan.dv], net.network().guard, probe)
}

/// Adds the corrections of [`infer`] to the free nodes; a non-finite
/// correction leaves the state as it was.
pub fn apply(state: &mut State) -> Result<(), GnnError> {
    state.apply_lent_correction().map_err(|_| GnnError::NonFinite)
}

#[cfg(test)]
mod tests {
    /// Every shift amount is its own [`super::Shift`].
    #[test]
    fn shifts_are_their_amounts() {
        for n in 0..=super::MAX_SHIFT as u32 {
            assert_eq!(super::Shift::new(n).get(), n);
        }
    }

    /// Pseudo-random int8 values (xorshift), the extremes −128 and 127
    /// about one draw in nine each.
    fn int8_draws(mut seed: u32) -> impl FnMut() -> i8 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            match seed % 9 {
                0 => -128,
                1 => 127,
                _ => (seed >> 9) as i8,
            }
        }
    }

    /// The fused sixteen-channel MLP (the desktop's and the device's
    /// kernel for every latent-wide MLP) writes the bits of the layer-by-
    /// layer MLP, residual or not, from the biases or from a sum of two
    /// rows, on every input width the network has, with extreme weights
    /// and accumulators that saturate.
    #[test]
    fn fused_mlp_matches_layer_by_layer() -> Result<(), super::GnnError> {
        use super::{wide_len, widen, GnnError, Linear, Mlp, Work, MAX_LATENT};
        let mut byte = int8_draws(0x1234_5678);
        for inputs in [10, 15, 16, 32] {
            for residual in [false, true] {
                let (w1, w2): ([i8; 16 * 32], [i8; 256]) =
                    (core::array::from_fn(|_| byte()), core::array::from_fn(|_| byte()));
                let (w1, w2) = (&w1[..16 * inputs], &w2[..]);
                let b1: [i32; 16] = core::array::from_fn(|o| (byte() as i32) << (o % 12));
                let b2: [i32; 16] = core::array::from_fn(|o| (byte() as i32) << (o % 15));
                let s1: [u8; 16] = core::array::from_fn(|o| [0, 3, 7, 9, 12, 31][o % 6]);
                let s2: [u8; 16] = core::array::from_fn(|o| [1, 5, 8, 10, 14, 0][o % 6]);
                let (mut v1, mut v2) = ([0u32; 4 * 4 * 16], [0u32; 2 * 4 * 16]);
                widen(w1, inputs, 16, &mut v1);
                widen(w2, 16, 16, &mut v2);
                let l1 = Linear {
                    inputs,
                    outputs: 16,
                    weights: w1,
                    bias: &b1,
                    shift: &s1,
                    wide: &v1[..wide_len(inputs, 16)],
                };
                let l2 = Linear { inputs: 16, outputs: 16, weights: w2, bias: &b2, shift: &s2, wide: &v2 };
                let mlp = Mlp { l1, l2, residual };
                let fused = mlp
                    .fused(inputs)
                    .ok_or(GnnError::BadNetwork { what: "a sixteen-channel MLP that does not fuse" })?;
                let ready = mlp.ready();
                for _ in 0..30 {
                    let x: [i8; 32] = core::array::from_fn(|_| byte().max(-127));
                    let y0: [i8; 16] = core::array::from_fn(|_| byte());
                    let mut w = Work { acc: [0; MAX_LATENT], hidden: [0; MAX_LATENT], packed: [0; MAX_LATENT] };
                    let (mut want, mut got) = (y0, y0);
                    mlp.run(&ready, &x[..inputs], &mut w, &mut want);
                    assert!(fused.run(&x[..inputs], None, &mut w, &mut got));
                    assert_eq!(got, want, "{inputs} inputs, residual {residual}");
                    // From two rows' sum instead of the biases: the same as
                    // biases that are that sum.
                    let (p, q): ([i32; 16], [i32; 16]) =
                        (core::array::from_fn(|_| (byte() as i32) << 9), core::array::from_fn(|_| byte() as i32 * 300));
                    let sum: [i32; 16] = core::array::from_fn(|o| p[o] + q[o]);
                    let l1 = Linear { bias: &sum, ..l1 };
                    let (mut want, mut got) = (y0, y0);
                    Mlp { l1, ..mlp }.run(&ready, &x[..inputs], &mut w, &mut want);
                    assert!(fused.run(&x[..inputs], Some((&p, &q)), &mut w, &mut got));
                    assert_eq!(got, want, "{inputs} inputs from a sum, residual {residual}");
                }
            }
        }
        Ok(())
    }

    /// A sixteen-output layer with widened weights (the kernel every
    /// baked latent-wide layer takes) gives the same accumulators as the
    /// row-by-row dot products of its int8 weights, on every input width
    /// the network has, extremes included.
    #[test]
    fn widened_layer_matches_dot_products() -> Result<(), super::GnnError> {
        use super::{dot, wide_len, widen, Linear};
        let mut next = int8_draws(0x9e37_79b9);
        for inputs in [10, 15, 16, 32, 48] {
            let weights: [i8; 16 * 48] = core::array::from_fn(|_| next());
            let weights = &weights[..16 * inputs];
            let bias: [i32; 16] = core::array::from_fn(|o| (next() as i32) << (o % 17));
            let mut wide = [0u32; 4 * 6 * 16];
            assert_eq!(widen(weights, inputs, 16, &mut wide), wide_len(inputs, 16));
            let layer =
                Linear { inputs, outputs: 16, weights, bias: &bias, shift: &[], wide: &wide[..wide_len(inputs, 16)] };
            for _ in 0..20 {
                let x: [i8; 48] = core::array::from_fn(|_| next().max(-127));
                let mut acc = [0i32; 16];
                layer.matvec(&x[..inputs], &mut acc)?;
                for (o, a) in acc.iter().enumerate() {
                    assert_eq!(*a, bias[o] + dot(&weights[o * inputs..][..inputs], &x[..inputs]), "{inputs} inputs");
                }
            }
        }
        Ok(())
    }
}
