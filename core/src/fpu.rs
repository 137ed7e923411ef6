//! The Cortex-M4F's FPU instructions that stable Rust does not emit:
//! `VSQRT.F32` for `f32` square roots ([`vsqrt`]: `core` has no `f32`
//! square root, `libm`'s takes about 45 instructions on the M4, the FPU's
//! one, with the same correctly rounded result) and `VFMA.F32`/`VFMS.F32`,
//! the fused multiply-add and -subtract ([`vfma`], and the solver's 3×3
//! block kernels [`block_vec`], [`smooth_term`], [`edge_pair`],
//! [`block_sub`], [`tblock_sub`]), which Rust has only as `f32::mul_add`
//! in `std`. Built on hard-float Arm targets with the `dsp`
//! feature (the firmware's); [`crate::math::fused`] and the solver pick
//! them, and compute the same bits elsewhere.
//!
//! `unsafe` is confined to the `asm!` blocks below. The `s` registers
//! cannot be named as operands on this target in stable Rust (they need
//! the `vfp2` target feature, which would also allow double-precision
//! instructions the M4F lacks), so a scalar passes through core registers
//! (`VMOV`), and the block kernels load and store their blocks and vectors
//! themselves (`VLDM`/`VSTM`) through pointers made from references.
//! Measured in QEMU, the block kernels take the firmware's physics from
//! 12.31 M to 10.82 M instructions a step (docs/results/2026-12-06-device.md).
#![allow(unsafe_code)]

use core::arch::asm;

/// A 3×3 block by columns (`math::Mat3`'s layout) and a 3-vector.
type Block = [f32; 9];
type Vector = [f32; 3];

/// `s12–s14 += c1·s10 + c2·s11` for the block's columns 1 and 2 in
/// s3–s5 and s6–s8 and the vector in s9–s11, in fused multiply-adds, column
/// by column (the order of `Mat3::mul_vec_add`).
macro_rules! columns_1_2 {
    () => {
        concat!(
            "vfma.f32 s12, s3, s10\n",
            "vfma.f32 s13, s4, s10\n",
            "vfma.f32 s14, s5, s10\n",
            "vfma.f32 s12, s6, s11\n",
            "vfma.f32 s13, s7, s11\n",
            "vfma.f32 s14, s8, s11\n",
        )
    };
}

/// `s12–s14 = D v` for the block in s0–s8 (by columns) and the vector in
/// s9–s11 (the order of `Mat3::mul_vec_fused`).
macro_rules! block_times_vector {
    () => {
        concat!("vmul.f32 s12, s0, s9\n", "vmul.f32 s13, s1, s9\n", "vmul.f32 s14, s2, s9\n", columns_1_2!())
    };
}

/// `VSQRT.F32`: the FPU's correctly rounded square root
/// ([`crate::math::sqrt`] picks it).
#[inline(always)]
pub fn vsqrt(x: f32) -> f32 {
    let r: u32;
    // SAFETY: register-only FPU instructions (through s0, declared
    // clobbered), no memory or stack access.
    unsafe {
        asm!("vmov s0, {x}", "vsqrt.f32 s0, s0", "vmov {r}, s0", x = in(reg) x.to_bits(), r = lateout(reg) r,
             out("s0") _, options(pure, nomem, nostack))
    };
    f32::from_bits(r)
}

/// `VFMA.F32`: `a·b + c` rounded once, for [`crate::math::fused`] outside
/// the block kernels (through core registers: the `s` registers cannot be
/// named as operands on this target with stable Rust).
#[inline(always)]
pub fn vfma(a: f32, b: f32, c: f32) -> f32 {
    let r: u32;
    // SAFETY: register-only FPU instructions (through s0–s2, declared
    // clobbered), no memory or stack access.
    unsafe {
        asm!("vmov s0, {c}", "vmov s1, {a}", "vmov s2, {b}", "vfma.f32 s0, s1, s2", "vmov {r}, s0",
             a = in(reg) a.to_bits(), b = in(reg) b.to_bits(), c = in(reg) c.to_bits(), r = lateout(reg) r,
             out("s0") _, out("s1") _, out("s2") _, options(pure, nomem, nostack))
    };
    f32::from_bits(r)
}

/// `o = D p` for a 3×3 block `D` (by columns), as
/// `Mat3::mul_vec_fused`: one `VMUL.F32` and two `VFMA.F32` per row,
/// the block and vectors loaded and stored with `VLDM`/`VSTM`.
#[inline(always)]
pub fn block_vec(d: &Block, p: &Vector, o: &mut Vector) {
    // SAFETY: reads the 9 and 3 `f32` of `d` and `p` and writes the 3 of
    // `o` (references, so valid, aligned and not aliasing `o`); FPU
    // registers s0–s14 are declared clobbered; no stack access.
    unsafe {
        asm!(
            "vldmia {d}, {{s0-s8}}",
            "vldmia {p}, {{s9-s11}}",
            block_times_vector!(),
            "vstmia {o}, {{s12-s14}}",
            d = in(reg) d as *const Block, p = in(reg) p as *const Vector, o = in(reg) o as *mut Vector,
            out("s0") _, out("s1") _, out("s2") _, out("s3") _, out("s4") _, out("s5") _, out("s6") _, out("s7") _,
            out("s8") _, out("s9") _, out("s10") _, out("s11") _, out("s12") _, out("s13") _, out("s14") _,
            options(nostack),
        )
    };
}

/// `z += ω (D r)` as [`crate::physics`]'s smoother defines it: `D r` as
/// in [`block_vec`], then each component `fused(t, ω, z)`.
#[inline(always)]
pub fn smooth_term(d: &Block, r: &Vector, omega: f32, z: &mut Vector) {
    // SAFETY: reads the 9 and 3 `f32` of `d` and `r` and reads and writes
    // the 3 of `z` (references, so valid, aligned and not aliasing `z`);
    // FPU registers s0–s15 are declared clobbered; no stack access.
    unsafe {
        asm!(
            "vmov s15, {w}",
            "vldmia {d}, {{s0-s8}}",
            "vldmia {r}, {{s9-s11}}",
            block_times_vector!(),
            "vldmia {z}, {{s9-s11}}",
            "vfma.f32 s9, s12, s15",
            "vfma.f32 s10, s13, s15",
            "vfma.f32 s11, s14, s15",
            "vstmia {z}, {{s9-s11}}",
            w = in(reg) omega.to_bits(), d = in(reg) d as *const Block, r = in(reg) r as *const Vector,
            z = in(reg) z as *mut Vector,
            out("s0") _, out("s1") _, out("s2") _, out("s3") _, out("s4") _, out("s5") _, out("s6") _, out("s7") _,
            out("s8") _, out("s9") _, out("s10") _, out("s11") _, out("s12") _, out("s13") _, out("s14") _,
            out("s15") _, options(nostack),
        )
    };
}

/// An edge's two terms of a block product, `oa += B pb` and
/// `ob += Bᵀ pa`, as `Mat3::mul_vec_add` and `Mat3::tmul_vec_add`:
/// eighteen `VFMA.F32`, the block loaded once. About half the
/// instructions of the compiled separate multiplies and adds (the
/// firmware's physics: 12.3 → 11.4 M instructions a step in QEMU).
#[inline(always)]
pub fn edge_pair(b: &Block, pa: &Vector, pb: &Vector, oa: &mut Vector, ob: &mut Vector) {
    // SAFETY: reads the 9 `f32` of `b` and 3 each of `pa`, `pb`, and
    // reads and writes the 3 of each of `oa`, `ob` (references, so valid,
    // aligned and distinct); `oa` is stored before `ob` is loaded. FPU
    // registers s0–s14 are declared clobbered; no stack access.
    unsafe {
        asm!(
            "vldmia {b}, {{s0-s8}}",
            "vldmia {pb}, {{s9-s11}}",
            "vldmia {oa}, {{s12-s14}}",
            "vfma.f32 s12, s0, s9",
            "vfma.f32 s13, s1, s9",
            "vfma.f32 s14, s2, s9",
            columns_1_2!(),
            "vstmia {oa}, {{s12-s14}}",
            "vldmia {pa}, {{s9-s11}}",
            "vldmia {ob}, {{s12-s14}}",
            "vfma.f32 s12, s0, s9",
            "vfma.f32 s12, s1, s10",
            "vfma.f32 s12, s2, s11",
            "vfma.f32 s13, s3, s9",
            "vfma.f32 s13, s4, s10",
            "vfma.f32 s13, s5, s11",
            "vfma.f32 s14, s6, s9",
            "vfma.f32 s14, s7, s10",
            "vfma.f32 s14, s8, s11",
            "vstmia {ob}, {{s12-s14}}",
            b = in(reg) b as *const Block, pa = in(reg) pa as *const Vector, pb = in(reg) pb as *const Vector,
            oa = in(reg) oa as *mut Vector, ob = in(reg) ob as *mut Vector,
            out("s0") _, out("s1") _, out("s2") _, out("s3") _, out("s4") _, out("s5") _, out("s6") _, out("s7") _,
            out("s8") _, out("s9") _, out("s10") _, out("s11") _, out("s12") _, out("s13") _, out("s14") _,
            options(nostack),
        )
    };
}

/// `acc −= …` for a block and a vector: loads the block into s0–s8, the
/// vector into s9–s11 and `acc` into s12–s14, runs `$body` (nine
/// `VFMS.F32`) and stores s12–s14 back.
macro_rules! subtract_block {
    ($b:expr, $v:expr, $acc:expr, $($body:tt)*) => {
        // SAFETY: reads the 9 and 3 `f32` of the block and the vector,
        // reads and writes the 3 of `acc` (references, so valid, aligned
        // and apart); FPU registers s0–s14 are declared clobbered; no
        // stack access.
        unsafe {
            asm!(
                "vldmia {b}, {{s0-s8}}",
                "vldmia {v}, {{s9-s11}}",
                "vldmia {acc}, {{s12-s14}}",
                $($body)*,
                "vstmia {acc}, {{s12-s14}}",
                b = in(reg) $b as *const Block, v = in(reg) $v as *const Vector, acc = in(reg) $acc as *mut Vector,
                out("s0") _, out("s1") _, out("s2") _, out("s3") _, out("s4") _, out("s5") _, out("s6") _,
                out("s7") _, out("s8") _, out("s9") _, out("s10") _, out("s11") _, out("s12") _, out("s13") _,
                out("s14") _, options(nostack),
            )
        }
    };
}

/// `acc −= B v` as `Mat3::mul_vec_sub`: nine `VFMS.F32`, column by column.
#[inline(always)]
pub fn block_sub(b: &Block, v: &Vector, acc: &mut Vector) {
    subtract_block!(
        b,
        v,
        acc,
        concat!(
            "vfms.f32 s12, s0, s9\n",
            "vfms.f32 s13, s1, s9\n",
            "vfms.f32 s14, s2, s9\n",
            "vfms.f32 s12, s3, s10\n",
            "vfms.f32 s13, s4, s10\n",
            "vfms.f32 s14, s5, s10\n",
            "vfms.f32 s12, s6, s11\n",
            "vfms.f32 s13, s7, s11\n",
            "vfms.f32 s14, s8, s11\n",
        )
    );
}

/// `acc −= Bᵀ v` as `Mat3::tmul_vec_sub`: nine `VFMS.F32`, row by row.
#[inline(always)]
pub fn tblock_sub(b: &Block, v: &Vector, acc: &mut Vector) {
    subtract_block!(
        b,
        v,
        acc,
        concat!(
            "vfms.f32 s12, s0, s9\n",
            "vfms.f32 s12, s1, s10\n",
            "vfms.f32 s12, s2, s11\n",
            "vfms.f32 s13, s3, s9\n",
            "vfms.f32 s13, s4, s10\n",
            "vfms.f32 s13, s5, s11\n",
            "vfms.f32 s14, s6, s9\n",
            "vfms.f32 s14, s7, s10\n",
            "vfms.f32 s14, s8, s11\n",
        )
    );
}
