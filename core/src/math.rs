//! Small fixed-size linear algebra in `f32`, using `libm` so that every target
//! computes the same bits.

use core::ops::{Add, AddAssign, Mul, Neg, Sub, SubAssign};

/// `√x`, correctly rounded as IEEE 754 asks: on a Cortex-M4F with the
/// `dsp` feature the FPU's `VSQRT.F32` (one instruction where `libm`'s
/// routine takes about 45), on x86-64 `SQRTSS` through its intrinsic
/// ([`sqrt_x86`]), elsewhere `libm::sqrtf`. All round exactly, so every
/// target gets the same bits (the firmware's checksum against the
/// desktop's checks it).
#[inline]
pub fn sqrt(x: f32) -> f32 {
    #[cfg(all(feature = "dsp", target_arch = "arm", target_abi = "eabihf"))]
    {
        crate::fpu::vsqrt(x)
    }
    #[cfg(target_arch = "x86_64")]
    {
        sqrt_x86(x)
    }
    #[cfg(not(any(target_arch = "x86_64", all(feature = "dsp", target_arch = "arm", target_abi = "eabihf"))))]
    {
        libm::sqrtf(x)
    }
}

/// `SQRTSS` through its intrinsic, which the compiler encodes as the
/// build's other vector instructions are (`VSQRTSS` in a build with AVX,
/// `.cargo/config.toml`). `libm::sqrtf` is an `asm!` block holding the
/// legacy SSE encoding, and a legacy SSE instruction amid AVX code waits
/// on the registers' upper halves: on the desktop every instruction after
/// such a root stalled, 95 % of the strain limiter's time and 80 % of the
/// membrane assembly's (`perf annotate` on the fine reference).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
#[inline(always)]
fn sqrt_x86(x: f32) -> f32 {
    use core::arch::x86_64::{_mm_cvtss_f32, _mm_set_ss, _mm_sqrt_ss};
    // SAFETY: SSE is part of every x86-64 processor (the target's
    // baseline); register-only.
    unsafe { _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(x))) }
}

/// `a·b + c` rounded once (a fused multiply-add, IEEE 754's
/// `fusedMultiplyAdd`), so the same bits on every target: the FPU's
/// `VFMA.F32` on a Cortex-M4F with the `dsp` feature (there the solver's
/// block products run the `fpu` module's kernels, [`crate::physics::blocks`]), `VFMADD` on x86-64 built with FMA (the
/// workspace builds for the host's own processor, `.cargo/config.toml`),
/// elsewhere `libm::fmaf` (exact in software, or the instruction where
/// the processor has one). The solver's block products use it: half the
/// floating-point operations of a separate multiply and add.
#[inline(always)]
pub fn fused(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "fma"))]
    {
        fused_x86(a, b, c)
    }
    #[cfg(all(feature = "dsp", target_arch = "arm", target_abi = "eabihf"))]
    {
        crate::fpu::vfma(a, b, c)
    }
    #[cfg(not(any(
        all(target_arch = "x86_64", target_feature = "fma"),
        all(feature = "dsp", target_arch = "arm", target_abi = "eabihf")
    )))]
    {
        libm::fmaf(a, b, c)
    }
}

/// `VFMADD` through its intrinsic: `libm::fmaf` picks the instruction at
/// run time behind a function pointer, about eight times the cost of the
/// inlined instruction in the desktop's block products.
#[cfg(all(target_arch = "x86_64", target_feature = "fma"))]
#[allow(unsafe_code)]
#[inline(always)]
fn fused_x86(a: f32, b: f32, c: f32) -> f32 {
    use core::arch::x86_64::{_mm_cvtss_f32, _mm_fmadd_ss, _mm_set_ss};
    // SAFETY: this function is compiled only where the `fma` target feature
    // is enabled for the whole build (the `cfg` above), so the instruction
    // exists on every processor the build runs on; register-only.
    unsafe { _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c))) }
}

/// Base-10 logarithm (`libm`; the network's material features).
#[inline]
pub fn log10(x: f32) -> f32 {
    libm::log10f(x)
}

/// A 3-vector in metres (or m/s, N, ... depending on context).
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Vec3 {
    pub x: f32,
    pub y: f32,
    pub z: f32,
}

impl Vec3 {
    pub const ZERO: Vec3 = Vec3::new(0.0, 0.0, 0.0);

    #[inline]
    pub const fn new(x: f32, y: f32, z: f32) -> Self {
        Vec3 { x, y, z }
    }
    #[inline]
    pub fn dot(self, o: Vec3) -> f32 {
        self.x * o.x + self.y * o.y + self.z * o.z
    }
    #[inline]
    pub fn cross(self, o: Vec3) -> Vec3 {
        Vec3::new(self.y * o.z - self.z * o.y, self.z * o.x - self.x * o.z, self.x * o.y - self.y * o.x)
    }
    #[inline]
    pub fn norm2(self) -> f32 {
        self.dot(self)
    }
    /// `|x| + |y| + |z|`.
    #[inline]
    pub fn norm_l1(self) -> f32 {
        libm::fabsf(self.x) + libm::fabsf(self.y) + libm::fabsf(self.z)
    }
    #[inline]
    pub fn norm(self) -> f32 {
        sqrt(self.norm2())
    }
    /// Unit vector, or zero for a (near) zero vector.
    #[inline]
    pub fn normalized(self) -> Vec3 {
        let n = self.norm();
        if n > 1e-20 {
            self * (1.0 / n)
        } else {
            Vec3::ZERO
        }
    }
    #[inline]
    pub fn is_finite(self) -> bool {
        self.x.is_finite() && self.y.is_finite() && self.z.is_finite()
    }
    #[inline]
    pub fn to_array(self) -> [f32; 3] {
        [self.x, self.y, self.z]
    }
    #[inline]
    pub fn from_array(a: [f32; 3]) -> Self {
        Vec3::new(a[0], a[1], a[2])
    }
    /// Outer product `self * o^T`.
    #[inline]
    pub fn outer(self, o: Vec3) -> Mat3 {
        Mat3 { c: [o.x * self, o.y * self, o.z * self] }
    }
    #[inline]
    pub fn get(self, i: usize) -> f32 {
        match i {
            0 => self.x,
            1 => self.y,
            _ => self.z,
        }
    }
}

impl Add for Vec3 {
    type Output = Vec3;
    #[inline]
    fn add(self, o: Vec3) -> Vec3 {
        Vec3::new(self.x + o.x, self.y + o.y, self.z + o.z)
    }
}
impl Sub for Vec3 {
    type Output = Vec3;
    #[inline]
    fn sub(self, o: Vec3) -> Vec3 {
        Vec3::new(self.x - o.x, self.y - o.y, self.z - o.z)
    }
}
impl Neg for Vec3 {
    type Output = Vec3;
    #[inline]
    fn neg(self) -> Vec3 {
        Vec3::new(-self.x, -self.y, -self.z)
    }
}
impl Mul<f32> for Vec3 {
    type Output = Vec3;
    #[inline]
    fn mul(self, s: f32) -> Vec3 {
        Vec3::new(self.x * s, self.y * s, self.z * s)
    }
}
impl Mul<Vec3> for f32 {
    type Output = Vec3;
    #[inline]
    fn mul(self, v: Vec3) -> Vec3 {
        v * self
    }
}
impl AddAssign for Vec3 {
    #[inline]
    fn add_assign(&mut self, o: Vec3) {
        *self = *self + o;
    }
}
impl SubAssign for Vec3 {
    #[inline]
    fn sub_assign(&mut self, o: Vec3) {
        *self = *self - o;
    }
}

/// A 3×3 matrix stored by columns.
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Mat3 {
    /// Columns.
    pub c: [Vec3; 3],
}

impl Mat3 {
    pub const ZERO: Mat3 = Mat3 { c: [Vec3::ZERO; 3] };
    pub const IDENTITY: Mat3 =
        Mat3 { c: [Vec3::new(1.0, 0.0, 0.0), Vec3::new(0.0, 1.0, 0.0), Vec3::new(0.0, 0.0, 1.0)] };
    #[inline]
    pub fn scale(s: f32) -> Mat3 {
        Mat3::IDENTITY * s
    }
    /// The cross-product matrix: `Mat3::skew(a).mul_vec(v) == a.cross(v)`.
    #[inline]
    pub fn skew(a: Vec3) -> Mat3 {
        Mat3 { c: [Vec3::new(0.0, a.z, -a.y), Vec3::new(-a.z, 0.0, a.x), Vec3::new(a.y, -a.x, 0.0)] }
    }
    #[inline]
    pub fn transpose(&self) -> Mat3 {
        let [a, b, c] = self.c;
        Mat3 { c: [Vec3::new(a.x, b.x, c.x), Vec3::new(a.y, b.y, c.y), Vec3::new(a.z, b.z, c.z)] }
    }
    #[inline]
    pub fn mul_vec(&self, v: Vec3) -> Vec3 {
        self.c[0] * v.x + self.c[1] * v.y + self.c[2] * v.z
    }
    /// `self^T * v`.
    #[inline]
    pub fn tmul_vec(&self, v: Vec3) -> Vec3 {
        Vec3::new(self.c[0].dot(v), self.c[1].dot(v), self.c[2].dot(v))
    }
    /// `self * v` in fused multiply-adds ([`fused`]), column by column:
    /// `c0·v.x`, then `c1·v.y` and `c2·v.z` added each rounded once.
    #[inline]
    pub fn mul_vec_fused(&self, v: Vec3) -> Vec3 {
        Mat3::fma_column(self.c[2], v.z, Mat3::fma_column(self.c[1], v.y, self.c[0] * v.x))
    }
    /// `acc + self * v` in fused multiply-adds, column by column from `acc`.
    #[inline]
    pub fn mul_vec_add(&self, v: Vec3, acc: Vec3) -> Vec3 {
        let acc = Mat3::fma_column(self.c[0], v.x, acc);
        Mat3::fma_column(self.c[2], v.z, Mat3::fma_column(self.c[1], v.y, acc))
    }
    /// `acc + self^T * v` in fused multiply-adds: component `k` adds
    /// `c_k.x·v.x`, `c_k.y·v.y`, `c_k.z·v.z` to `acc_k` in that order.
    #[inline]
    pub fn tmul_vec_add(&self, v: Vec3, acc: Vec3) -> Vec3 {
        let row = |c: Vec3, a: f32| fused(c.z, v.z, fused(c.y, v.y, fused(c.x, v.x, a)));
        Vec3::new(row(self.c[0], acc.x), row(self.c[1], acc.y), row(self.c[2], acc.z))
    }
    /// `acc − self * v` in fused multiply-adds, column by column from
    /// `acc` (each term `fused(−c, s, acc)`, the Cortex-M4F's `VFMS.F32`).
    #[inline]
    pub fn mul_vec_sub(&self, v: Vec3, acc: Vec3) -> Vec3 {
        Mat3 { c: self.c.map(|c| -c) }.mul_vec_add(v, acc)
    }
    /// `acc − self^T * v` in fused multiply-adds, as
    /// [`Mat3::tmul_vec_add`] of `−self`.
    #[inline]
    pub fn tmul_vec_sub(&self, v: Vec3, acc: Vec3) -> Vec3 {
        Mat3 { c: self.c.map(|c| -c) }.tmul_vec_add(v, acc)
    }
    #[inline(always)]
    fn fma_column(c: Vec3, s: f32, acc: Vec3) -> Vec3 {
        Vec3::new(fused(c.x, s, acc.x), fused(c.y, s, acc.y), fused(c.z, s, acc.z))
    }
    /// Entry at row `r`, column `c`.
    #[inline]
    pub fn at(&self, r: usize, c: usize) -> f32 {
        self.c[c].get(r)
    }
    #[inline]
    pub fn diagonal(&self) -> Vec3 {
        Vec3::new(self.c[0].x, self.c[1].y, self.c[2].z)
    }
    pub fn is_finite(&self) -> bool {
        self.c.iter().all(|c| c.is_finite())
    }
    /// Inverse by the adjugate; `None` when singular or not finite.
    pub fn inverse(&self) -> Option<Mat3> {
        let [a, b, c] = self.c;
        // Rows of the inverse are the cross products of column pairs / det.
        let r0 = b.cross(c);
        let r1 = c.cross(a);
        let r2 = a.cross(b);
        let det = a.dot(r0);
        if !(det.abs() > f32::MIN_POSITIVE) || !det.is_finite() {
            return None;
        }
        let inv = 1.0 / det;
        Some(Mat3 { c: [r0 * inv, r1 * inv, r2 * inv] }.transpose())
    }
}

impl Add for Mat3 {
    type Output = Mat3;
    #[inline]
    fn add(self, o: Mat3) -> Mat3 {
        Mat3 { c: [self.c[0] + o.c[0], self.c[1] + o.c[1], self.c[2] + o.c[2]] }
    }
}
impl AddAssign for Mat3 {
    #[inline]
    fn add_assign(&mut self, o: Mat3) {
        *self = *self + o;
    }
}
impl Sub for Mat3 {
    type Output = Mat3;
    #[inline]
    fn sub(self, o: Mat3) -> Mat3 {
        Mat3 { c: [self.c[0] - o.c[0], self.c[1] - o.c[1], self.c[2] - o.c[2]] }
    }
}
impl Mul<Mat3> for Mat3 {
    type Output = Mat3;
    #[inline]
    fn mul(self, o: Mat3) -> Mat3 {
        Mat3 { c: [self.mul_vec(o.c[0]), self.mul_vec(o.c[1]), self.mul_vec(o.c[2])] }
    }
}
impl Mul<f32> for Mat3 {
    type Output = Mat3;
    #[inline]
    fn mul(self, s: f32) -> Mat3 {
        Mat3 { c: [self.c[0] * s, self.c[1] * s, self.c[2] * s] }
    }
}

/// Symmetric 2×2 matrix `[[a, b], [b, d]]`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sym2 {
    pub a: f32,
    pub b: f32,
    pub d: f32,
}

impl Sym2 {
    #[inline]
    pub fn at(&self, r: usize, c: usize) -> f32 {
        match (r, c) {
            (0, 0) => self.a,
            (1, 1) => self.d,
            _ => self.b,
        }
    }
    #[inline]
    pub fn trace(&self) -> f32 {
        self.a + self.d
    }
    /// Eigen-decomposition `(λ₁, λ₂, n₁)` with `λ₁ ≥ λ₂`, `n₁` the unit
    /// eigenvector of `λ₁` and `n₂ = (−n₁.y, n₁.x)`.
    pub fn eigen(&self) -> (f32, f32, [f32; 2]) {
        let half_tr = 0.5 * (self.a + self.d);
        let diff = 0.5 * (self.a - self.d);
        let rad = sqrt(diff * diff + self.b * self.b);
        let n1 = if rad > 1e-30 {
            // A column of (A − λ₂ I), the larger one: parallel to n₁.
            let (x, y) = if diff >= 0.0 { (diff + rad, self.b) } else { (self.b, rad - diff) };
            let n = sqrt(x * x + y * y);
            [x / n, y / n]
        } else {
            [1.0, 0.0]
        };
        (half_tr + rad, half_tr - rad, n1)
    }

    /// The positive semi-definite part: negative eigenvalues clamped to zero.
    pub fn positive_part(&self) -> Sym2 {
        let (l1, l2, [ux, uy]) = self.eigen();
        if l2 >= 0.0 {
            return *self;
        }
        if l1 <= 0.0 {
            return Sym2::default();
        }
        // Only λ₁ > 0 survives: S⁺ = λ₁ n₁ n₁ᵀ.
        Sym2 { a: l1 * ux * ux, b: l1 * ux * uy, d: l1 * uy * uy }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_times_matrix_is_identity() {
        let m = Mat3 { c: [Vec3::new(4.0, 1.0, 0.5), Vec3::new(1.0, 3.0, -0.2), Vec3::new(0.5, -0.2, 2.0)] };
        // A missing inverse leaves the zero matrix, which fails the check.
        let inv = m.inverse().unwrap_or(Mat3::ZERO);
        for k in 0..3 {
            let e = Mat3::IDENTITY.c[k];
            let back = m.mul_vec(inv.mul_vec(e));
            assert!((back - e).norm() < 1e-6, "{back:?}");
        }
        assert!(Mat3::ZERO.inverse().is_none());
    }

    #[test]
    fn positive_part_clamps_negative_eigenvalues() {
        let s = Sym2 { a: 1.0, b: 2.0, d: 1.0 }; // eigenvalues 3 and −1
        let p = s.positive_part();
        // 3 · u uᵀ with u = (1, 1)/√2.
        assert!((p.a - 1.5).abs() < 1e-6 && (p.b - 1.5).abs() < 1e-6 && (p.d - 1.5).abs() < 1e-6);
        let pd = Sym2 { a: 2.0, b: 0.5, d: 1.0 };
        assert_eq!(pd.positive_part(), pd);
        assert_eq!(Sym2 { a: -1.0, b: 0.0, d: -2.0 }.positive_part(), Sym2::default());
    }

    /// `fused` rounds once, as `libm`'s exact software `fmaf` does, on
    /// whichever path this build takes; and on enough of these triples the
    /// separate multiply and add round differently (so a path that did
    /// not fuse would fail).
    #[test]
    fn fused_rounds_once_on_every_path() {
        let mut seed = 0x2545_f491_u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            // Magnitudes from about 1e-6 to 1e6, both signs.
            let m = (seed >> 8) as f32 / (1u32 << 24) as f32 + 0.5;
            let e = ((seed & 0x3f) as i32 - 20) as f32;
            let s = if seed & 0x40 != 0 { -1.0 } else { 1.0 };
            s * m * libm::exp2f(e)
        };
        let mut differs = 0;
        for _ in 0..100_000 {
            let (a, b, c) = (next(), next(), next());
            let f = fused(a, b, c);
            assert_eq!(f.to_bits(), libm::fmaf(a, b, c).to_bits(), "{a:e} · {b:e} + {c:e}");
            differs += usize::from(f.to_bits() != (a * b + c).to_bits());
        }
        assert!(differs > 1_000, "only {differs} of 100 000 differ from a separate multiply and add");
        // The block forms are their fused definitions.
        let m = Mat3 { c: [Vec3::new(0.3, -1.1, 2.7), Vec3::new(1.3, 0.7, -0.4), Vec3::new(-2.2, 0.9, 1.6)] };
        let (v, acc) = (Vec3::new(0.1, -0.7, 1.9), Vec3::new(3.0, -2.0, 0.5));
        let col = |c: Vec3, s: f32, a: Vec3| Vec3::new(fused(c.x, s, a.x), fused(c.y, s, a.y), fused(c.z, s, a.z));
        assert_eq!(m.mul_vec_add(v, acc), col(m.c[2], v.z, col(m.c[1], v.y, col(m.c[0], v.x, acc))));
        assert_eq!(m.mul_vec_fused(v), col(m.c[2], v.z, col(m.c[1], v.y, m.c[0] * v.x)));
        let t = m.transpose();
        assert_eq!(m.tmul_vec_add(v, acc), t.mul_vec_add(v, acc));
    }
}
