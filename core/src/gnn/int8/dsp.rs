//! The int8 dot product on the Cortex-M4's DSP extension (ARMv7E-M),
//! enabled by the `dsp` feature on `arm` targets.
//!
//! `SXTB16` sign-extends bytes 0 and 2 of a word into its two 16-bit
//! halves (with `ROR #8`: bytes 1 and 3), and `SMLAD` multiplies two pairs
//! of 16-bit halves and adds both products to an accumulator. Four weights
//! loaded as one word therefore take two `SXTB16` and two `SMLAD`; the
//! activations are packed into the matching halves, `(x0, x2)` and
//! `(x1, x3)`, once per input vector ([`pack`]) or, for layers whose width
//! is a multiple of 16, inside the row loop itself ([`accumulate`]). A
//! network baked for the device also carries its weights widened to
//! 16-bit pairs in that order ([`super::int8::widen`]), so that a row of
//! eight multiply-accumulates is two `LDRD` and four `SMLAD`
//! ([`accumulate_wide`]). The sums are the same integers as
//! [`super::int8::dot`] computes (the firmware checks every kernel against
//! it on every boot, and its final state matches the desktop's bit for
//! bit).
//!
//! `unsafe` is confined to the `asm!` blocks below: stable Rust has no DSP
//! intrinsics, the portable kernel takes about 12 instructions per
//! multiply-accumulate on the M4 (measured in QEMU), and the same loop in
//! Rust with these instructions still about 4 (the compiler spills the
//! packed activations); these take 1 to 1.6 in their row loops. Three
//! blocks are single register-only instructions (`SMLAD` may set the
//! sticky Q flag, which nothing reads); the row loops also load weights
//! and activations and update accumulators, within bounds checked before
//! they run.
#![allow(unsafe_code)]

use core::arch::asm;

#[inline(always)]
fn sxtb16(w: u32) -> u32 {
    let r: u32;
    // SAFETY: register-only instruction, no memory or stack access.
    unsafe { asm!("sxtb16 {r}, {w}", r = lateout(reg) r, w = in(reg) w, options(pure, nomem, nostack)) };
    r
}

#[inline(always)]
fn sxtb16_ror8(w: u32) -> u32 {
    let r: u32;
    // SAFETY: register-only instruction, no memory or stack access.
    unsafe { asm!("sxtb16 {r}, {w}, ror #8", r = lateout(reg) r, w = in(reg) w, options(pure, nomem, nostack)) };
    r
}

#[inline(always)]
fn smlad(a: u32, b: u32, acc: i32) -> i32 {
    let r: i32;
    // SAFETY: register-only instruction, no memory or stack access.
    unsafe {
        asm!("smlad {r}, {a}, {b}, {acc}", r = lateout(reg) r, a = in(reg) a, b = in(reg) b, acc = in(reg) acc,
             options(pure, nomem, nostack))
    };
    r
}

/// Packs `x` for [`dot`]: two words per full group of four values; returns
/// the number of words written (`out` needs `x.len() / 2` rounded down to
/// even).
#[inline]
pub fn pack(x: &[i8], out: &mut [u32]) -> usize {
    let mut n = 0;
    for (g, o) in x.chunks_exact(4).zip(out.chunks_exact_mut(2)) {
        let w = word(g);
        o[0] = sxtb16(w);
        o[1] = sxtb16_ror8(w);
        n += 2;
    }
    n
}

/// `Σ w·x` for `packed = pack(x)`: the full groups of four by `SMLAD`, the
/// remaining `x.len() % 4` values (`tail`) one by one.
#[inline]
pub fn dot(w: &[i8], packed: &[u32], tail: &[i8]) -> i32 {
    let groups = packed.len() / 2;
    let (body, rest) = w.split_at(4 * groups);
    let mut acc = 0i32;
    for (g, p) in body.chunks_exact(4).zip(packed.chunks_exact(2)) {
        let w = word(g);
        acc = smlad(sxtb16(w), p[0], acc);
        acc = smlad(sxtb16_ror8(w), p[1], acc);
    }
    rest.iter().zip(tail).fold(acc, |a, (&w, &x)| a + w as i32 * x as i32)
}

#[inline(always)]
fn word(g: &[i8]) -> u32 {
    u32::from_le_bytes([g[0] as u8, g[1] as u8, g[2] as u8, g[3] as u8])
}

/// Eight inputs (four packed words, kept in registers) for every row:
/// `acc[o] += Σ_{k<8} W[o·stride + col + k] · x[k]`, one pass of a
/// 15-instruction loop per row.
#[inline]
fn rows8(weights: &[i8], stride: usize, col: usize, p: [u32; 4], acc: &mut [i32]) {
    let rows = acc.len();
    let fits = rows == 0
        || (rows - 1).checked_mul(stride).and_then(|e| e.checked_add(col + 8)).is_some_and(|end| end <= weights.len());
    if rows == 0 || !fits || stride > i32::MAX as usize {
        return;
    }
    let row = weights[col..].as_ptr();
    let out = acc.as_mut_ptr();
    // SAFETY: the loop reads 8 bytes at `row + o·stride` and reads/writes
    // `out + o` for o < rows: inside `weights` (checked by `fits`) and
    // `acc`. Single-word loads may be unaligned on ARMv7-M. No stack use;
    // the condition flags are clobbered (the default).
    unsafe {
        asm!(
            "2:",
            "ldr {w0}, [{row}]",
            "ldr {w1}, [{row}, #4]",
            "add {row}, {row}, {stride}",
            "ldr {a}, [{out}]",
            "sxtb16 {t}, {w0}",
            "smlad {a}, {t}, {p0}, {a}",
            "sxtb16 {t}, {w0}, ror #8",
            "smlad {a}, {t}, {p1}, {a}",
            "sxtb16 {t}, {w1}",
            "smlad {a}, {t}, {p2}, {a}",
            "sxtb16 {t}, {w1}, ror #8",
            "smlad {a}, {t}, {p3}, {a}",
            "str {a}, [{out}], #4",
            "subs {n}, {n}, #1",
            "bne 2b",
            row = inout(reg) row => _,
            out = inout(reg) out => _,
            n = inout(reg) rows => _,
            stride = in(reg) stride,
            p0 = in(reg) p[0],
            p1 = in(reg) p[1],
            p2 = in(reg) p[2],
            p3 = in(reg) p[3],
            w0 = out(reg) _,
            w1 = out(reg) _,
            t = out(reg) _,
            a = out(reg) _,
            options(nostack),
        );
    }
}

/// `asm!` text: the eight activations at `{x}` packed into `{p0}`–`{p3}`
/// (`(x0, x2)`, `(x1, x3)`, `(x4, x6)`, `(x5, x7)`); `{x}` and `{w1}` are
/// free after it.
macro_rules! pack8 {
    () => {
        concat!(
            "ldr {w1}, [{x}, #4]\n",
            "ldr {x}, [{x}]\n",
            "sxtb16 {p0}, {x}\n",
            "sxtb16 {p1}, {x}, ror #8\n",
            "sxtb16 {p2}, {w1}\n",
            "sxtb16 {p3}, {w1}, ror #8\n"
        )
    };
}

/// `asm!` text: `{n}` (≥ 1) passes of `$row`, one row each — an odd row
/// first, then two rows a pass.
macro_rules! rows {
    ($row:expr) => {
        concat!(
            "tst {n}, #1\n",
            "beq 3f\n",
            $row,
            "subs {n}, {n}, #1\n",
            "beq 4f\n",
            "3:\n",
            $row,
            $row,
            "subs {n}, {n}, #2\n",
            "bne 3b\n",
            "4:\n"
        )
    };
}

/// `asm!` text: one row of int8 weights (at `{row}`, `S` bytes apart)
/// times the packed activations, from `{src}` into `{out}`.
macro_rules! row8 {
    () => {
        concat!(
            "ldr {w1}, [{row}, #4]\n",
            "ldr {x}, [{row}], #{s}\n",
            "ldr {a}, [{src}], #4\n",
            "sxtb16 {t}, {x}\n",
            "smlad {a}, {t}, {p0}, {a}\n",
            "sxtb16 {t}, {x}, ror #8\n",
            "smlad {a}, {t}, {p1}, {a}\n",
            "sxtb16 {t}, {w1}\n",
            "smlad {a}, {t}, {p2}, {a}\n",
            "sxtb16 {t}, {w1}, ror #8\n",
            "smlad {a}, {t}, {p3}, {a}\n",
            "str {a}, [{out}], #4\n"
        )
    };
}

/// `asm!` text: one row of widened weights (four words at `{row}`) times
/// the packed activations, from `{src}` into `{out}`.
macro_rules! row8_wide {
    () => {
        concat!(
            "ldrd {w0}, {w1}, [{row}], #8\n",
            "ldr {a}, [{src}], #4\n",
            "smlad {a}, {w0}, {p0}, {a}\n",
            "smlad {a}, {w1}, {p1}, {a}\n",
            "ldrd {w0}, {w1}, [{row}], #8\n",
            "smlad {a}, {w0}, {p2}, {a}\n",
            "smlad {a}, {w1}, {p3}, {a}\n",
            "str {a}, [{out}], #4\n"
        )
    };
}

/// `acc[o] = from[o] + Σ_{k<8} W[o·S + col + k] · x[k]` for every row `o <
/// acc.len()` of a row-major weight matrix with `S` columns, `from` being
/// the layer's biases or the accumulators themselves (`None`): the eight
/// activations loaded and packed in registers by the same block, then
/// 13 instructions per row, two rows a pass (the weights' row step is the
/// load's post-increment). Does nothing if a row or `from` does not fit.
#[inline(always)]
fn block8<const S: usize>(weights: &[i8], col: usize, x: &[i8; 8], from: Option<&[i32]>, acc: &mut [i32]) {
    const { assert!(S >= 8 && S <= 255) };
    let rows = acc.len();
    let fits = rows == 0
        || (rows - 1).checked_mul(S).and_then(|e| e.checked_add(col + 8)).is_some_and(|end| end <= weights.len());
    if rows == 0 || !fits || from.is_some_and(|f| f.len() < rows) {
        return;
    }
    let row = weights[col..].as_ptr();
    let out = acc.as_mut_ptr();
    let src = from.map_or(out as *const i32, <[i32]>::as_ptr);
    // SAFETY: reads the 8 bytes of `x`, the 8 bytes at `row + o·S` for
    // o < rows (inside `weights`, checked by `fits`), `src + o` (`from`,
    // checked, or `acc`) and writes `out + o` (`acc`) for o < rows; each
    // row is read from `src` before it is written to `out`, so `src ==
    // out` accumulates in place. Single-word loads may be unaligned on
    // ARMv7-M. No stack use; the condition flags are clobbered (the
    // default).
    unsafe {
        asm!(
            pack8!(),
            rows!(row8!()),
            s = const S,
            x = inout(reg) x.as_ptr() => _,
            row = inout(reg) row => _,
            src = inout(reg) src => _,
            out = inout(reg) out => _,
            n = inout(reg) rows => _,
            p0 = out(reg) _,
            p1 = out(reg) _,
            p2 = out(reg) _,
            p3 = out(reg) _,
            w1 = out(reg) _,
            t = out(reg) _,
            a = out(reg) _,
            options(nostack),
        );
    }
}

/// [`block8`] over every block of eight of `x` (`x.len()` a multiple of
/// 8), the first from `from`.
#[inline(always)]
fn blocks<const S: usize>(weights: &[i8], col: usize, x: &[i8], from: Option<&[i32]>, acc: &mut [i32]) {
    let (chunks, _) = x.as_chunks::<8>();
    for (b, x8) in chunks.iter().enumerate() {
        block8::<S>(weights, col + 8 * b, x8, if b == 0 { from } else { None }, acc);
    }
}

/// `acc[o] = from[o] + Σ_k W[o, col + k] · x[k]` for every output `o` of a
/// row-major weight matrix with `stride` columns, `from` the biases or
/// the accumulators themselves (`None`; `from` needs `acc.len()` values).
/// Inputs in a multiple of 8 of a matrix whose width is a multiple of 16
/// up to 96 (every layer that takes latents) go through [`block8`], which
/// packs the activations itself; otherwise `x` is packed into `scratch`
/// (`x.len() / 2` words) once for [`accumulate_packed`].
#[inline]
pub fn accumulate(
    weights: &[i8],
    stride: usize,
    col: usize,
    x: &[i8],
    from: Option<&[i32]>,
    scratch: &mut [u32],
    acc: &mut [i32],
) {
    if x.len().is_multiple_of(8) && !x.is_empty() {
        match stride {
            16 => return blocks::<16>(weights, col, x, from, acc),
            32 => return blocks::<32>(weights, col, x, from, acc),
            48 => return blocks::<48>(weights, col, x, from, acc),
            64 => return blocks::<64>(weights, col, x, from, acc),
            96 => return blocks::<96>(weights, col, x, from, acc),
            _ => {}
        }
    }
    if let Some(f) = from {
        for (a, &b) in acc.iter_mut().zip(f) {
            *a = b;
        }
    }
    let n = pack(x, scratch);
    accumulate_packed(weights, stride, col, &scratch[..n], x, acc)
}

/// [`block8`] on widened weights ([`super::int8::widen`]: four words per
/// row, rows contiguous): `acc[o] = from[o] + Σ_{k<8} W[o][k] · x[k]`, 8
/// instructions per row, two rows a pass, no sign extension. Does nothing
/// if `wide` or `from` is too short.
#[inline(always)]
fn block8_wide(wide: &[u32], x: &[i8; 8], from: Option<&[i32]>, acc: &mut [i32]) {
    let rows = acc.len();
    if rows == 0 || wide.len() < 4 * rows || from.is_some_and(|f| f.len() < rows) {
        return;
    }
    let row = wide.as_ptr();
    let out = acc.as_mut_ptr();
    let src = from.map_or(out as *const i32, <[i32]>::as_ptr);
    // SAFETY: reads the 8 bytes of `x`, the 4·rows words of `wide`
    // (checked), `src + o` (`from`, checked, or `acc`) and writes `out + o`
    // (`acc`) for o < rows; each row is read from `src` before it is
    // written to `out`, so `src == out` accumulates in place. `wide` is
    // word-aligned (`LDRD` needs it); `x` may be unaligned (`LDR` allows
    // it on ARMv7-M). No stack use; the condition flags are clobbered (the
    // default).
    unsafe {
        asm!(
            pack8!(),
            rows!(row8_wide!()),
            x = inout(reg) x.as_ptr() => _,
            row = inout(reg) row => _,
            src = inout(reg) src => _,
            out = inout(reg) out => _,
            n = inout(reg) rows => _,
            p0 = out(reg) _,
            p1 = out(reg) _,
            p2 = out(reg) _,
            p3 = out(reg) _,
            w0 = out(reg) _,
            w1 = out(reg) _,
            a = out(reg) _,
            options(nostack),
        );
    }
}

/// `acc[o] = from[o] + Σ_k W[o][k] · x[k]` on widened weights (`wide`
/// from the column block of `x`'s first input on; a last block of fewer
/// than eight inputs is padded with zeros), `from` the biases or the
/// accumulators themselves (`None`).
#[inline]
pub fn accumulate_wide(wide: &[u32], x: &[i8], from: Option<&[i32]>, acc: &mut [i32]) {
    let rows = acc.len();
    let (chunks, tail) = x.as_chunks::<8>();
    for (b, x8) in chunks.iter().enumerate() {
        let block = wide.get(4 * rows * b..).unwrap_or(&[]);
        block8_wide(block, x8, if b == 0 { from } else { None }, acc);
    }
    if !tail.is_empty() {
        let b = chunks.len();
        let mut x8 = [0i8; 8];
        x8[..tail.len()].copy_from_slice(tail);
        let block = wide.get(4 * rows * b..).unwrap_or(&[]);
        block8_wide(block, &x8, if b == 0 { from } else { None }, acc);
    }
}

/// [`accumulate_wide`] for sixteen inputs (the latent width): its two
/// blocks without the general loop.
#[inline(always)]
pub fn accumulate_wide16(wide: &[u32], x: &[i8; 16], from: Option<&[i32]>, acc: &mut [i32]) {
    let rows = acc.len();
    let (lo, hi) = x.split_at(8);
    let (Ok(lo), Ok(hi)) = (<&[i8; 8]>::try_from(lo), <&[i8; 8]>::try_from(hi)) else { return };
    block8_wide(wide, lo, from, acc);
    block8_wide(wide.get(4 * rows..).unwrap_or(&[]), hi, None, acc);
}

/// [`accumulate`] for any shape, `packed = pack(x)`.
#[inline]
pub fn accumulate_packed(weights: &[i8], stride: usize, col: usize, packed: &[u32], x: &[i8], acc: &mut [i32]) {
    let len = x.len();
    if len.is_multiple_of(8) && len == 2 * packed.len() {
        for (block, p) in packed.chunks_exact(4).enumerate() {
            rows8(weights, stride, col + 8 * block, [p[0], p[1], p[2], p[3]], acc);
        }
        return;
    }
    let body = 2 * packed.len();
    let tail = &x[body..];
    let row = |o: usize| &weights[o * stride + col..][..len];
    let mut pairs = acc.chunks_exact_mut(2);
    let mut o = 0;
    for pair in &mut pairs {
        let (ra, rb) = (row(o), row(o + 1));
        let (mut a, mut b) = (pair[0], pair[1]);
        for ((ga, gb), p) in ra[..body].chunks_exact(4).zip(rb[..body].chunks_exact(4)).zip(packed.chunks_exact(2)) {
            let (wa, wb) = (word(ga), word(gb));
            a = smlad(sxtb16(wa), p[0], a);
            b = smlad(sxtb16(wb), p[0], b);
            a = smlad(sxtb16_ror8(wa), p[1], a);
            b = smlad(sxtb16_ror8(wb), p[1], b);
        }
        for ((&wa, &wb), &xv) in ra[body..].iter().zip(&rb[body..]).zip(tail) {
            a += wa as i32 * xv as i32;
            b += wb as i32 * xv as i32;
        }
        pair[0] = a;
        pair[1] = b;
        o += 2;
    }
    if let [last] = pairs.into_remainder() {
        *last += dot(row(o), packed, tail);
    }
}

/// Where a sixteen-row block ([`rows16`]) starts its accumulators from.
#[derive(Clone, Copy)]
pub enum Start<'a> {
    /// Given values (a layer's biases).
    From(&'a [i32; 16]),
    /// The sum of two rows of values (the edge update's factorised node
    /// terms, sender's and receiver's).
    Sum(&'a [i32; 16], &'a [i32; 16]),
    /// The accumulators as they are.
    Acc,
}

/// What a sixteen-row layer ([`rows16`]) leaves: its int32 accumulators,
/// or int8 activations at the layer's per-row right shifts.
pub enum End<'a> {
    /// The accumulators.
    Acc,
    /// `relu_sat(acc >> shift)`, a hidden layer.
    Relu(&'a [u8; 16], &'a mut [i8; 16]),
    /// `sat(acc >> shift)`.
    Sat(&'a [u8; 16], &'a mut [i8; 16]),
    /// `y ← sat((acc >> shift) + y)`, a residual update in place.
    Residual(&'a [u8; 16], &'a mut [i8; 16]),
}

/// The eight activations of `x` packed for `SMLAD`: `(x0, x2)`, `(x1, x3)`,
/// `(x4, x6)`, `(x5, x7)`.
#[inline(always)]
fn pack8(x: &[i8; 8]) -> [u32; 4] {
    let lo = u32::from_le_bytes([x[0] as u8, x[1] as u8, x[2] as u8, x[3] as u8]);
    let hi = u32::from_le_bytes([x[4] as u8, x[5] as u8, x[6] as u8, x[7] as u8]);
    [sxtb16(lo), sxtb16_ror8(lo), sxtb16(hi), sxtb16_ror8(hi)]
}

/// `asm!` text: one row's eight multiply-accumulates on widened weights
/// (four words at `{row}`) into `{a}`.
macro_rules! mac8 {
    () => {
        concat!(
            "ldrd {w0}, {w1}, [{row}], #8\n",
            "smlad {a}, {w0}, {p0}, {a}\n",
            "smlad {a}, {w1}, {p1}, {a}\n",
            "ldrd {w0}, {w1}, [{row}], #8\n",
            "smlad {a}, {w0}, {p2}, {a}\n",
            "smlad {a}, {w1}, {p3}, {a}\n"
        )
    };
}

/// `asm!` text: a row's multiply-accumulates for a last block of at
/// most four inputs (its first two words of widened weights, the other two
/// being zero weights) into `{a}`, the row's four words stepped over.
macro_rules! mac4 {
    () => {
        concat!("ldrd {w0}, {w1}, [{row}], #16\n", "smlad {a}, {w0}, {p0}, {a}\n", "smlad {a}, {w1}, {p1}, {a}\n")
    };
}

/// `asm!` text: `$row` sixteen times (no loop counter, no branch).
macro_rules! times16 {
    ($row:expr) => {
        concat!($row, $row, $row, $row, $row, $row, $row, $row, $row, $row, $row, $row, $row, $row, $row, $row)
    };
}

/// `asm!` text: `{a}` from the next value at `{src}`.
macro_rules! load_one {
    () => {
        "ldr {a}, [{src}], #4\n"
    };
}

/// `asm!` text: `{a}` from the sum of the next values at `{src}` and
/// `{src2}`.
macro_rules! load_sum {
    () => {
        concat!("ldr {a}, [{src}], #4\n", "ldr {w0}, [{src2}], #4\n", "add {a}, {a}, {w0}\n")
    };
}

/// `asm!` text: `{a}` stored as the next int32 at `{out}`.
macro_rules! store_acc {
    () => {
        "str {a}, [{out}], #4\n"
    };
}

/// `asm!` text: `{a}` shifted right by the next shift at `{sh}`, then
/// saturated by `$sat` and stored as the next byte at `{out}`.
macro_rules! store_shifted {
    ($sat:expr) => {
        concat!("ldrb {w0}, [{sh}], #1\n", "asr {a}, {a}, {w0}\n", $sat, "strb {a}, [{out}], #1\n")
    };
}

/// `asm!` text: `{a}` shifted right by the next shift at `{sh}`, added
/// (saturating) to the int8 at `{out}`, saturated to int8 and stored there.
macro_rules! store_residual {
    () => {
        concat!(
            "ldrb {w0}, [{sh}], #1\n",
            "ldrsb {w1}, [{out}]\n",
            "asr {a}, {a}, {w0}\n",
            "qadd {a}, {a}, {w1}\n",
            "ssat {a}, #8, {a}\n",
            "strb {a}, [{out}], #1\n"
        )
    };
}

/// One block of eight inputs for sixteen rows of widened weights (`wide`:
/// the block's 64 words), from values at `src` into int32 at `out`
/// (`src` may be `out`: each row is read before it is written).
///
/// # Safety
/// `src` and `out` point to sixteen readable and writable `i32`.
#[inline(always)]
unsafe fn block16_acc(wide: &[u32; 64], p: [u32; 4], src: *const i32, out: *mut i32) {
    // SAFETY: reads the 64 words of `wide` (word-aligned, as `LDRD`
    // needs) and the sixteen values at `src`, writes sixteen at `out`
    // (the caller's contract). No stack use; `SMLAD` may set the sticky Q
    // flag, which nothing reads.
    unsafe {
        asm!(
            times16!(concat!(load_one!(), mac8!(), store_acc!())),
            row = inout(reg) wide.as_ptr() => _,
            src = inout(reg) src => _,
            out = inout(reg) out => _,
            p0 = in(reg) p[0], p1 = in(reg) p[1], p2 = in(reg) p[2], p3 = in(reg) p[3],
            w0 = out(reg) _, w1 = out(reg) _, a = out(reg) _,
            options(nostack),
        );
    }
}

/// [`block16_acc`] from the sum of two rows of values.
#[inline(always)]
fn block16_sum(wide: &[u32; 64], p: [u32; 4], x: &[i32; 16], y: &[i32; 16], out: &mut [i32; 16]) {
    // SAFETY: reads the 64 words of `wide` (word-aligned) and the sixteen
    // values of `x` and `y`, writes the sixteen of `out`. No stack use;
    // `SMLAD` may set the sticky Q flag, which nothing reads.
    unsafe {
        asm!(
            times16!(concat!(load_sum!(), mac8!(), store_acc!())),
            row = inout(reg) wide.as_ptr() => _,
            src = inout(reg) x.as_ptr() => _,
            src2 = inout(reg) y.as_ptr() => _,
            out = inout(reg) out.as_mut_ptr() => _,
            p0 = in(reg) p[0], p1 = in(reg) p[1], p2 = in(reg) p[2], p3 = in(reg) p[3],
            w0 = out(reg) _, w1 = out(reg) _, a = out(reg) _,
            options(nostack),
        );
    }
}

/// A last block of at most four inputs (`x`, the rest zero) for sixteen
/// rows, in place on `acc` or ended as [`block16_end`] ends: only the
/// words of each row's widened weights that meet an input are read (the
/// others are zero), two multiply-accumulates a row instead of four.
#[inline(always)]
fn block16_short(wide: &[u32; 64], x: &[i8; 4], acc: &mut [i32; 16], end: End) {
    let w = u32::from_le_bytes([x[0] as u8, x[1] as u8, x[2] as u8, x[3] as u8]);
    let (p0, p1) = (sxtb16(w), sxtb16_ror8(w));
    macro_rules! run {
        ($store:expr, $out:expr, $sh:expr) => {
            // SAFETY: reads the 64 words of `wide` (word-aligned), the
            // sixteen values of `acc` and bytes of `sh`; writes sixteen
            // values at `out` (`acc` itself, or the sixteen bytes of the
            // end's output, which a residual also reads). No stack use;
            // `SMLAD`, `QADD` and `SSAT` may set the sticky Q flag, which
            // nothing reads.
            unsafe {
                asm!(
                    times16!(concat!(load_one!(), mac4!(), $store)),
                    row = inout(reg) wide.as_ptr() => _,
                    src = inout(reg) acc.as_ptr() => _,
                    sh = inout(reg) $sh => _,
                    out = inout(reg) $out => _,
                    p0 = in(reg) p0, p1 = in(reg) p1,
                    w0 = out(reg) _, w1 = out(reg) _, a = out(reg) _,
                    options(nostack),
                )
            }
        };
    }
    match end {
        End::Acc => {
            // `sh` is not read by this store.
            let out = acc.as_mut_ptr();
            run!(concat!(store_acc!(), "/* {sh} */\n"), out, core::ptr::null::<u8>())
        }
        End::Relu(sh, y) => run!(store_shifted!("usat {a}, #7, {a}\n"), y.as_mut_ptr(), sh.as_ptr()),
        End::Sat(sh, y) => run!(store_shifted!("ssat {a}, #8, {a}\n"), y.as_mut_ptr(), sh.as_ptr()),
        End::Residual(sh, y) => run!(store_residual!(), y.as_mut_ptr(), sh.as_ptr()),
    }
}

/// A layer's last block for sixteen rows: from the accumulators `acc` to
/// int8 at the per-row shifts `sh`, saturated by `relu` (`USAT #7`) or not
/// (`SSAT #8`), or added to `y` (`residual`).
#[inline(always)]
fn block16_end(wide: &[u32; 64], p: [u32; 4], acc: &[i32; 16], sh: &[u8; 16], y: &mut [i8; 16], how: Kind) {
    macro_rules! run {
        ($store:expr) => {
            // SAFETY: reads the 64 words of `wide` (word-aligned), the
            // sixteen values of `acc` and bytes of `sh`, reads and writes
            // the sixteen bytes of `y`. No stack use; `QADD` and `SSAT` may
            // set the sticky Q flag, which nothing reads.
            unsafe {
                asm!(
                    times16!(concat!(load_one!(), mac8!(), $store)),
                    row = inout(reg) wide.as_ptr() => _,
                    src = inout(reg) acc.as_ptr() => _,
                    sh = inout(reg) sh.as_ptr() => _,
                    out = inout(reg) y.as_mut_ptr() => _,
                    p0 = in(reg) p[0], p1 = in(reg) p[1], p2 = in(reg) p[2], p3 = in(reg) p[3],
                    w0 = out(reg) _, w1 = out(reg) _, a = out(reg) _,
                    options(nostack),
                )
            }
        };
    }
    match how {
        Kind::Relu => run!(store_shifted!("usat {a}, #7, {a}\n")),
        Kind::Sat => run!(store_shifted!("ssat {a}, #8, {a}\n")),
        Kind::Residual => run!(store_residual!()),
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Relu,
    Sat,
    Residual,
}

/// A layer of sixteen output rows on the widened weights of `x`'s columns
/// (`wide`, [`super::int8::widen`]'s order, from the block of `x`'s first
/// input on; a last block of fewer than eight inputs padded with zeros):
/// `acc = start + W x`, then `end`. Every block's sixteen rows unrolled
/// (eight instructions a row for eight multiply-accumulates, the end's
/// requantisation folded into the last block's rows). Returns `false`,
/// having done nothing, unless `x` spans at least two blocks whose weights
/// `wide` holds.
#[inline(always)]
pub fn rows16(wide: &[u32], x: &[i8], start: Start, acc: &mut [i32; 16], end: End) -> bool {
    if let (Ok(x16), Some(w16)) = (<&[i8; 16]>::try_from(x), wide.first_chunk::<128>()) {
        layer16(w16, x16, start, acc, end);
        return true;
    }
    let (chunks, tail) = x.as_chunks::<8>();
    let blocks = chunks.len() + usize::from(!tail.is_empty());
    if blocks < 2 || wide.len() < 64 * blocks {
        return false;
    }
    let mut padded = [0i8; 8];
    padded[..tail.len()].copy_from_slice(tail);
    let last = blocks - 1;
    let mut end = Some(end);
    for b in 0..blocks {
        let Some(w) = wide[64 * b..].first_chunk::<64>() else { return false };
        if b == last && b > 0 && !tail.is_empty() && tail.len() <= 4 {
            // `padded` holds the short block's inputs, then zeros.
            let Some(x4) = padded.first_chunk::<4>() else { return false };
            block16_short(w, x4, acc, end.take().unwrap_or(End::Acc));
            break;
        }
        let p = pack8(chunks.get(b).unwrap_or(&padded));
        match (b, start) {
            (0, Start::From(f)) => {
                // SAFETY: `f` and `acc` hold sixteen values each.
                unsafe { block16_acc(w, p, f.as_ptr(), acc.as_mut_ptr()) }
            }
            (0, Start::Sum(f, g)) => block16_sum(w, p, f, g, acc),
            _ if b < last => {
                let a = acc.as_mut_ptr();
                // SAFETY: in place on the sixteen values of `acc`.
                unsafe { block16_acc(w, p, a, a) }
            }
            _ => block16_last(w, p, acc, end.take().unwrap_or(End::Acc)),
        }
    }
    true
}

/// [`rows16`] for sixteen inputs (two blocks), its shapes fixed by its
/// types: the two blocks with nothing to check.
#[inline(always)]
pub fn layer16(wide: &[u32; 128], x: &[i8; 16], start: Start, acc: &mut [i32; 16], end: End) {
    let (halves, _) = wide.as_chunks::<64>();
    let (lo, hi) = x.split_at(8);
    let (Some(w0), Some(w1), Ok(lo), Ok(hi)) =
        (halves.first(), halves.get(1), <&[i8; 8]>::try_from(lo), <&[i8; 8]>::try_from(hi))
    else {
        return;
    };
    let a = acc.as_mut_ptr();
    match start {
        // SAFETY: `f` and `acc` hold sixteen values each.
        Start::From(f) => unsafe { block16_acc(w0, pack8(lo), f.as_ptr(), a) },
        Start::Sum(f, g) => block16_sum(w0, pack8(lo), f, g, acc),
        // SAFETY: in place on the sixteen values of `acc`.
        Start::Acc => unsafe { block16_acc(w0, pack8(lo), a, a) },
    }
    block16_last(w1, pack8(hi), acc, end);
}

/// A layer's last block of eight inputs for sixteen rows, ended as `end`
/// says: in place on `acc`, or requantised into int8 ([`block16_end`]).
#[inline(always)]
fn block16_last(wide: &[u32; 64], p: [u32; 4], acc: &mut [i32; 16], end: End) {
    match end {
        End::Acc => {
            let a = acc.as_mut_ptr();
            // SAFETY: in place on the sixteen values of `acc`.
            unsafe { block16_acc(wide, p, a, a) }
        }
        End::Relu(sh, y) => block16_end(wide, p, acc, sh, y, Kind::Relu),
        End::Sat(sh, y) => block16_end(wide, p, acc, sh, y, Kind::Sat),
        End::Residual(sh, y) => block16_end(wide, p, acc, sh, y, Kind::Residual),
    }
}

/// A layer of sixteen rows on nine to twelve inputs (`x`, padded with
/// zeros to twelve; `wide` its two blocks of widened weights): the first
/// block of eight from `start`, then the short block of four
/// ([`block16_short`]) ended as `end` says.
#[inline(always)]
pub fn layer12(wide: &[u32; 128], x: &[i8; 12], start: &[i32; 16], acc: &mut [i32; 16], end: End) {
    let (halves, _) = wide.as_chunks::<64>();
    let (lo, hi) = x.split_at(8);
    let (Some(w0), Some(w1), Ok(lo), Ok(hi)) =
        (halves.first(), halves.get(1), <&[i8; 8]>::try_from(lo), <&[i8; 4]>::try_from(hi))
    else {
        return;
    };
    // SAFETY: `start` and `acc` hold sixteen values each.
    unsafe { block16_acc(w0, pack8(lo), start.as_ptr(), acc.as_mut_ptr()) }
    block16_short(w1, hi, acc, end);
}
