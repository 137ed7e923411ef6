//! The integer kernels every layer runs on: saturation, requantising shifts,
//! int8 dot products and the widened weights' layout.

use super::MAX_LATENT;

/// Saturation to int8 (one `SSAT`).
#[inline]
pub(super) fn sat(v: i32) -> i8 {
    v.clamp(-128, 127) as i8
}

#[inline]
pub(super) fn relu_sat(v: i32) -> i8 {
    v.clamp(0, 127) as i8
}

/// `f(c)` for every channel `c < n`: at the latent width, 16, as a loop
/// of constant length (unrolled, constant offsets, no bounds checks on
/// slices of that length), else as the general loop.
#[inline(always)]
pub(super) fn per_channel(n: usize, mut f: impl FnMut(usize)) {
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
pub(super) fn rows16_portable(wide: &[u32], x: &[i8], acc: &mut [i32; 16]) -> bool {
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
pub(super) fn dot_n<const N: usize>(w: &[i8; N], x: &[i8; N]) -> i32 {
    let mut s = 0i32;
    for k in 0..N {
        s += (w[k] as i16 * x[k] as i16) as i32;
    }
    s
}

/// A shift amount, 0 to 31, as a type whose every value is one: the
/// compiler knows its range, so a shift by it needs no mask.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(u8)]
pub(super) enum Shift {
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
    pub(super) fn new(n: u32) -> Shift {
        Shift::ALL[(n & 31) as usize]
    }

    #[inline(always)]
    pub(super) fn get(self) -> u32 {
        self as u32
    }
}

/// A layer's shifts as [`Shift`]s (a checked network's are all at most
/// [`MAX_SHIFT`]).
pub(super) struct Shifts(pub(super) [Shift; MAX_LATENT]);

impl Shifts {
    pub(super) fn of(shift: &[u8]) -> Shifts {
        let mut row = [Shift::S0; MAX_LATENT];
        for (r, &s) in row.iter_mut().zip(shift) {
            *r = Shift::new(s as u32);
        }
        Shifts(row)
    }
}
