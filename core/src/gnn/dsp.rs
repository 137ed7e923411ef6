//! The int8 dot product on the Cortex-M4's DSP extension (ARMv7E-M),
//! enabled by the `dsp` feature on `arm` targets.
//!
//! `SXTB16` sign-extends bytes 0 and 2 of a word into its two 16-bit
//! halves (with `ROR #8`: bytes 1 and 3), and `SMLAD` multiplies two pairs
//! of 16-bit halves and adds both products to an accumulator. Four weights
//! loaded as one word therefore take two `SXTB16` and two `SMLAD`; the
//! activations are packed once per input vector ([`pack`]) into the
//! matching halves, `(x0, x2)` and `(x1, x3)`. The sums are the same
//! integers as [`super::int8::dot`] computes (the firmware checks this on
//! every boot, and its final state matches the desktop's bit for bit).
//!
//! `unsafe` is confined to the three one-instruction `asm!` blocks below:
//! stable Rust has no DSP intrinsics, and the portable kernel takes about
//! 12 instructions per multiply-accumulate on the M4 (measured in QEMU)
//! against the goal of 2. The instructions touch registers only (`SMLAD`
//! may set the sticky Q flag, which nothing reads).
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

#[inline(always)]
fn halves(lo: i8, hi: i8) -> u32 {
    (lo as i16 as u16 as u32) | ((hi as i16 as u16 as u32) << 16)
}

/// Packs `x` for [`dot`]: two words per full group of four values; returns
/// the number of words written (`out` needs `x.len() / 2` rounded down to
/// even).
#[inline]
pub fn pack(x: &[i8], out: &mut [u32]) -> usize {
    let mut n = 0;
    for (g, o) in x.chunks_exact(4).zip(out.chunks_exact_mut(2)) {
        o[0] = halves(g[0], g[2]);
        o[1] = halves(g[1], g[3]);
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
        let word = u32::from_le_bytes([g[0] as u8, g[1] as u8, g[2] as u8, g[3] as u8]);
        acc = smlad(sxtb16(word), p[0], acc);
        acc = smlad(sxtb16_ror8(word), p[1], acc);
    }
    rest.iter().zip(tail).fold(acc, |a, (&w, &x)| a + w as i32 * x as i32)
}
