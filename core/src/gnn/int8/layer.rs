//! Dense int8 layers and the `Linear → ReLU → Linear` MLPs built from them.

use super::kernel::*;
use super::{GnnError, MAX_LATENT, MAX_SHIFT};

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

impl<'a> Linear<'a> {
    /// Weights, biases and widened weights (if any) match the stated
    /// shape, within the kernels' bounds.
    pub(super) fn is_shaped(&self) -> bool {
        self.outputs <= MAX_LATENT
            && self.weights.len() == self.inputs * self.outputs
            && self.bias.len() == self.outputs
            && (self.wide.is_empty() || self.wide.len() == wide_len(self.inputs, self.outputs))
    }

    /// Its widened weights are absent or [`widen`] of its weights.
    pub(super) fn wide_matches(&self) -> bool {
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

    pub(super) fn is_valid(&self, shifted: bool) -> bool {
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
    pub(super) fn accumulate(&self, col: usize, x: &[i8], acc: &mut [i32], packed: &mut [u32]) {
        self.product(col, x, false, acc, packed);
    }

    /// `acc[o] = bias[o] + Σ_k W[o, col + k] · x[k]`.
    #[inline]
    pub(super) fn start_with(&self, col: usize, x: &[i8], acc: &mut [i32], packed: &mut [u32]) {
        self.product(col, x, true, acc, packed);
    }

    /// The column block's product, added to the biases (`start`) or to
    /// `acc`.
    #[inline(always)]
    pub(super) fn product(&self, col: usize, x: &[i8], start: bool, acc: &mut [i32], packed: &mut [u32]) {
        #[cfg(all(feature = "dsp", target_arch = "arm"))]
        {
            let from = start.then_some(self.bias);
            let Some(acc) = acc.get_mut(..self.outputs) else { return };
            // Widened weights serve whole blocks of eight inputs and a
            // layer's last, shorter block (padded with zero weights).
            if let (Some(s), Ok(a)) = (self.rows16(col, x.len()), <&mut [i32; 16]>::try_from(&mut *acc)) {
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
            if let (Some(s), Some(a)) = (self.rows16(col, x.len()), acc.first_chunk_mut::<16>()) {
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
    pub(super) fn product_int8(&self, col: usize, x: &[i8], from: Option<&[i32]>, packed: &mut [u32], acc: &mut [i32]) {
        super::dsp::accumulate(self.weights, self.inputs, col, x, from, packed, acc);
    }

    /// A layer of sixteen outputs with widened weights, for `inputs`
    /// inputs from column `col` on (whole blocks of eight, or the layer's
    /// last columns): the pieces [`super::dsp::rows16`] takes.
    #[inline(always)]
    pub(super) fn rows16(&self, col: usize, inputs: usize) -> Option<Rows16<'a>> {
        let whole = inputs.is_multiple_of(8) || col + inputs == self.inputs;
        if self.outputs != 16 || self.wide.is_empty() || !col.is_multiple_of(8) || !whole {
            return None;
        }
        Some(Rows16 {
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
    pub(super) fn start(&self, acc: &mut [i32]) {
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
/// and shifts ([`Linear::rows16`]).
#[derive(Clone, Copy)]
pub(super) struct Rows16<'a> {
    wide: &'a [u32],
    bias: &'a [i32; 16],
    shift: Option<&'a [u8; 16]>,
}

/// An MLP of sixteen hidden and output channels with widened weights
/// ([`Mlp::as_mlp16`]), checked once per stage, not per node or edge: on the
/// device the DSP kernel's sixteen-row blocks with the requantisations
/// folded in, elsewhere the portable sixteen-row kernel with every
/// intermediate in local arrays.
#[derive(Clone, Copy)]
pub(super) struct Mlp16<'a> {
    l1: Rows16<'a>,
    s1: &'a [u8; 16],
    l2: Rows16<'a>,
    s2: &'a [u8; 16],
    residual: bool,
    /// The first layer's widened weights where it takes sixteen inputs
    /// (the edge update's own latent), and the second layer's, as arrays:
    /// [`Mlp16::run16`] runs them without a length check.
    #[cfg(all(feature = "dsp", target_arch = "arm"))]
    wide16: Option<(&'a [u32; 128], &'a [u32; 128])>,
    /// The desktop kernel's copy of the weights ([`Columns`]), made once
    /// per stage.
    #[cfg(not(all(feature = "dsp", target_arch = "arm")))]
    cols: Columns,
}

#[cfg(all(feature = "dsp", target_arch = "arm"))]
impl Mlp16<'_> {
    /// The MLP on `x` into `out` (the residual added to it), its first
    /// layer started from the sum of `sum`'s two rows (the biases if `None`); `false`, with
    /// nothing written, where the kernel does not take the shapes.
    #[inline(always)]
    pub(super) fn run(&self, x: &[i8], sum: Option<(&[i32; 16], &[i32; 16])>, w: &mut Rows, out: &mut [i8]) -> bool {
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

    /// The node update's MLP on `[y, mean]` into `y` (the residual added
    /// to it): the first layer's two column blocks of sixteen inputs in
    /// turn, with no input row to copy them into; `false`, with nothing
    /// written, unless the first layer takes exactly those 32 inputs.
    #[inline(always)]
    pub(super) fn run_with_mean(&self, y: &mut [i8; 16], mean: &[i8; 16], w: &mut Rows) -> bool {
        use super::dsp::{layer16, End, Start};
        let (Some(w1), Some(w2), Some(acc), Some(hidden)) = (
            self.l1.wide.first_chunk::<256>().filter(|_| self.l1.wide.len() == 256),
            self.l2.wide.first_chunk::<128>(),
            w.acc.first_chunk_mut::<16>(),
            w.hidden.first_chunk_mut::<16>(),
        ) else {
            return false;
        };
        let (halves, _) = w1.as_chunks::<128>();
        let (Some(own_cols), Some(mean_cols)) = (halves.first(), halves.get(1)) else { return false };
        let x = *y;
        layer16(own_cols, &x, Start::From(self.l1.bias), acc, End::Acc);
        layer16(mean_cols, mean, Start::Acc, acc, End::Relu(self.s1, hidden));
        let end = if self.residual { End::Residual(self.s2, y) } else { End::Sat(self.s2, y) };
        layer16(w2, hidden, Start::From(self.l2.bias), acc, end);
        true
    }

    /// [`Mlp16::run`] on nine to twelve inputs (the edge encoder's, padded
    /// with zeros to twelve) into `out`: the first layer's full block and
    /// its short one, the second layer's two, nothing to check per edge;
    /// `false`, with nothing written, unless the first layer has exactly
    /// two blocks of eight inputs.
    #[inline(always)]
    pub(super) fn run12(&self, x: &[i8; 12], w: &mut Rows, out: &mut [i8; 16]) -> bool {
        use super::dsp::{layer12, layer16, End, Start};
        let (Some(w1), Some(w2), Some(acc), Some(hidden)) = (
            self.l1.wide.first_chunk::<128>().filter(|_| self.l1.wide.len() == 128),
            self.l2.wide.first_chunk::<128>(),
            w.acc.first_chunk_mut::<16>(),
            w.hidden.first_chunk_mut::<16>(),
        ) else {
            return false;
        };
        layer12(w1, x, self.l1.bias, acc, End::Relu(self.s1, hidden));
        let end = if self.residual { End::Residual(self.s2, out) } else { End::Sat(self.s2, out) };
        layer16(w2, hidden, Start::From(self.l2.bias), acc, end);
        true
    }

    /// [`Mlp16::run`] on sixteen inputs that are also the output (the edge
    /// update's own latent, the residual added to it), the first layer
    /// started from the sum of `sum`'s two rows: the four blocks of eight
    /// in turn, with no shape left to check per edge.
    #[inline(always)]
    pub(super) fn run16(&self, y: &mut [i8; 16], sum: (&[i32; 16], &[i32; 16]), w: &mut Rows) -> bool {
        use super::dsp::{layer16, End, Start};
        let (Some((w1, w2)), Some(acc), Some(hidden)) =
            (self.wide16, w.acc.first_chunk_mut::<16>(), w.hidden.first_chunk_mut::<16>())
        else {
            return false;
        };
        let x = *y;
        layer16(w1, &x, Start::Sum(sum.0, sum.1), acc, End::Relu(self.s1, hidden));
        let end = if self.residual { End::Residual(self.s2, y) } else { End::Sat(self.s2, y) };
        layer16(w2, hidden, Start::From(self.l2.bias), acc, end);
        true
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
pub(super) struct Columns {
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
    pub(super) fn of(l1: &Rows16, inputs: usize, l2: &Rows16) -> Option<Columns> {
        let blocks = inputs.div_ceil(8);
        let mut c = Columns { first: [[[0; 32]; 4]; Columns::MAX_BLOCKS], blocks, second: [[[0; 32]; 4]; 2] };
        Columns::regroup(l1.wide, c.first.get_mut(..blocks)?)?;
        Columns::regroup(l2.wide, &mut c.second)?;
        Some(c)
    }

    pub(super) fn regroup(wide: &[u32], out: &mut [[[i16; 32]; 4]]) -> Option<()> {
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
    pub(super) fn product(cols: &[[[i16; 32]; 4]], x: &[i8], acc: &mut [i32; 16]) {
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
impl Mlp16<'_> {
    /// The MLP on `x` into `out` (the residual added to it), its first
    /// layer started from the sum of `sum`'s two rows (the biases if
    /// `None`); `false`, with nothing written, where the kernel does not
    /// take the shapes.
    #[inline(always)]
    pub(super) fn run(&self, x: &[i8], sum: Option<(&[i32; 16], &[i32; 16])>, _: &mut Rows, out: &mut [i8]) -> bool {
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
        self.end(acc, y);
        true
    }

    /// [`Mlp16::run`] on sixteen inputs that are also the output, the
    /// first layer started from the sum of `sum`'s two rows.
    #[inline(always)]
    pub(super) fn run16(&self, y: &mut [i8; 16], sum: (&[i32; 16], &[i32; 16]), w: &mut Rows) -> bool {
        let x = *y;
        self.run(&x, Some(sum), w, y)
    }

    /// [`Mlp16::run`] on nine to twelve inputs, padded with zeros to
    /// twelve.
    #[inline(always)]
    pub(super) fn run12(&self, x: &[i8; 12], w: &mut Rows, out: &mut [i8; 16]) -> bool {
        self.run(x, None, w, out)
    }

    /// The node update's MLP on `[y, mean]` into `y`.
    #[inline(always)]
    pub(super) fn run_with_mean(&self, y: &mut [i8; 16], mean: &[i8; 16], w: &mut Rows) -> bool {
        let mut x = [0i8; 32];
        x[..16].copy_from_slice(y);
        x[16..].copy_from_slice(mean);
        self.run(&x, None, w, y)
    }

    #[inline(always)]
    fn end(&self, acc: [i32; 16], y: &mut [i8; 16]) {
        if self.residual {
            per_channel(16, |o| y[o] = sat((acc[o] >> (self.s2[o] & 31)).saturating_add(y[o] as i32)));
        } else {
            per_channel(16, |o| y[o] = sat(acc[o] >> (self.s2[o] & 31)));
        }
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
    pub(super) fn is_valid(&self, inputs: usize, outputs: usize, head: bool) -> bool {
        self.l1.inputs == inputs
            && self.l2.inputs == self.l1.outputs
            && self.l2.outputs == outputs
            && self.l1.is_valid(true)
            && self.l2.is_valid(!head)
            && !(head && self.residual)
    }

    /// Its shifts in the form its loops run them ([`MlpShifts`]): made once
    /// per stage, not per node or edge.
    #[inline]
    pub(super) fn shifts(&self) -> MlpShifts {
        MlpShifts { hidden: Shifts::of(self.l1.shift), out: Shifts::of(self.l2.shift) }
    }

    /// The sixteen-channel kernel's view of this MLP on `inputs` inputs,
    /// if it takes it.
    #[inline]
    pub(super) fn as_mlp16(&self, inputs: usize) -> Option<Mlp16<'a>> {
        let (l1, l2) = (self.l1.rows16(0, inputs)?, self.l2.rows16(0, 16)?);
        (self.l2.inputs == 16 && inputs > 8).then_some(())?;
        Some(Mlp16 {
            l1,
            s1: l1.shift?,
            l2,
            s2: l2.shift?,
            residual: self.residual,
            #[cfg(all(feature = "dsp", target_arch = "arm"))]
            wide16: (inputs == 16).then(|| l1.wide.first_chunk().zip(l2.wide.first_chunk())).flatten(),
            #[cfg(not(all(feature = "dsp", target_arch = "arm")))]
            cols: Columns::of(&l1, inputs, &l2)?,
        })
    }

    /// First layer and ReLU on `x` into `w.hidden`.
    #[inline]
    pub(super) fn first(&self, ready: &Shifts, x: &[i8], w: &mut Rows) {
        let h = self.l1.outputs;
        // Rows16 hidden channels on the device: the requantisation in the
        // kernel's last block.
        #[cfg(all(feature = "dsp", target_arch = "arm"))]
        if let (Some(s), Some(acc), Some(hidden)) =
            (self.l1.rows16(0, x.len()), w.acc.first_chunk_mut::<16>(), w.hidden.first_chunk_mut::<16>())
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
    /// shifts, [`Mlp::shifts`]): `relu_sat(acc >> shift)`.
    #[inline(always)]
    pub(super) fn hidden(&self, ready: &Shifts, acc: &[i32], hidden: &mut [i8]) {
        let n = hidden.len().min(acc.len()).min(MAX_LATENT);
        let (h, a, s) = (&mut hidden[..n], &acc[..n], &ready.0[..n]);
        per_channel(n, |k| h[k] = relu_sat(a[k] >> s[k].get()));
    }

    /// Second layer from `w.hidden` into `out` (int8): `sat(acc >> shift)`,
    /// added to the old `out` for a residual update.
    #[inline(always)]
    pub(super) fn finish(&self, ready: &MlpShifts, w: &mut Rows, out: &mut [i8]) {
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
    pub(super) fn run(&self, ready: &MlpShifts, x: &[i8], w: &mut Rows, out: &mut [i8]) {
        self.first(&ready.hidden, x, w);
        self.finish(ready, w, out);
    }

    /// A head: the second layer's int32 accumulators in `w.acc`.
    #[inline]
    pub(super) fn head(&self, ready: &Shifts, x: &[i8], w: &mut Rows) {
        self.first(ready, x, w);
        self.l2.start_with(0, &w.hidden[..self.l1.outputs], &mut w.acc, &mut w.packed);
    }
}

/// An MLP's shifts as its loops run them ([`Mlp::shifts`]).
pub(super) struct MlpShifts {
    pub(super) hidden: Shifts,
    pub(super) out: Shifts,
}

/// Per-forward working rows (on the stack, made once per pass).
pub(super) struct Rows {
    pub(super) acc: [i32; MAX_LATENT],
    pub(super) hidden: [i8; MAX_LATENT],
    pub(super) packed: [u32; MAX_LATENT],
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
        use super::{wide_len, widen, GnnError, Linear, Mlp, Rows, MAX_LATENT};
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
                    .as_mlp16(inputs)
                    .ok_or(GnnError::BadNetwork { what: "a sixteen-channel MLP that does not fuse" })?;
                let ready = mlp.shifts();
                for _ in 0..30 {
                    let x: [i8; 32] = core::array::from_fn(|_| byte().max(-127));
                    let y0: [i8; 16] = core::array::from_fn(|_| byte());
                    let mut w = Rows { acc: [0; MAX_LATENT], hidden: [0; MAX_LATENT], packed: [0; MAX_LATENT] };
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
