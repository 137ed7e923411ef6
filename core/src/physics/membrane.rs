//! Membrane element on a linear triangle: St. Venant–Kirchhoff with
//! softened compression.
//!
//! `F = Σ x_i b_iᵀ` (3×2), Green strain `E = ½(FᵀF − I)` with principal
//! strains `e₁, e₂` (directions `n₁, n₂`). Cloth buckles rather than
//! compresses, so compressive principal strains count with a factor
//! `c ∈ (0, 1]`, and a membrane that stiffens once taut counts strains
//! beyond `t` with a slope `s ≥ 1`: `g(e) = c·e` for `e < 0`, `e` for
//! `0 ≤ e ≤ t`, `t + s·(e − t)` beyond, and
//!
//! `ψ = μ (g(e₁)² + g(e₂)²) + ½λ (g(e₁) + g(e₂))²`,
//!
//! which is exactly StVK (`μ E:E + ½λ (tr E)²`) for `c = 1` or in tension
//! below `t`. `g` is piecewise linear (`g'' = 0` but at its kinks).
//! Second Piola stress `S = Σ_k f_k n_k n_kᵀ` with
//! `f_k = ∂ψ/∂e_k = g'(e_k)(2μ g(e_k) + λ(g₁ + g₂))`; node forces
//! `f_i = −A F S b_i`.
//!
//! Tangent: `dS = Σ_kl f_kl (n_lᵀ dE n_l) n_k n_kᵀ + ρ (n₁ᵀ dE n₂)(n₁n₂ᵀ + n₂n₁ᵀ)`
//! with `f_kl = g'_k (2μ g'_k δ_kl + λ g'_l)` and `ρ = (f₁ − f₂)/(e₁ − e₂)`.
//! The stiffness block `K_ij = A Σ_kl b_i[k] b_j[l] C_kl` with
//! `C_kl = S_lk I + Σ_mp (D[sym(e_l e_pᵀ)])_mk F_m F_pᵀ`. The material part
//! is positive semi-definite when `ρ ≥ 0` (`[f_kl]` always is), the
//! geometric part `S_lk I` when `S` is; the solver's stiffness clamps `ρ` at
//! zero and uses the positive part of `S`, exact whenever the element is
//! in tension.

use crate::math::{Mat3, Sym2, Vec3};
use crate::mesh::Triangle;

impl crate::model::Material {
    /// The membrane law of this material.
    pub fn membrane(&self) -> Membrane {
        let (mu, lambda) = self.lame();
        let (taut, taut_slope) = match self.taut {
            Some(t) => (t.strain, libm::sqrtf(t.stiffening)),
            None => (f32::INFINITY, 1.0),
        };
        Membrane { mu, lambda, compression: self.compression, taut, taut_slope }
    }
}

/// Membrane parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Membrane {
    pub mu: f32,
    pub lambda: f32,
    /// Compression factor `c` of compressive principal strains.
    pub compression: f32,
    /// Strain `t` from which tension stiffens (∞: never).
    pub taut: f32,
    /// Slope `s` of `g` beyond `t` (the stiffness rises by `s²`).
    pub taut_slope: f32,
}

impl Membrane {
    /// St. Venant–Kirchhoff with compression factor `c` and no stiffening.
    pub fn softened(mu: f32, lambda: f32, compression: f32) -> Membrane {
        Membrane { mu, lambda, compression, taut: f32::INFINITY, taut_slope: 1.0 }
    }
}

/// Forces, energy and the stiffness blocks `K_ij` (i ≤ j, row-major upper
/// triangle: 00, 01, 02, 11, 12, 22) of one element.
pub struct Element {
    pub force: [Vec3; 3],
    pub energy: f32,
    pub stiffness: [Mat3; 6],
}

/// Upper-triangle block index of `(i, j)`, `i ≤ j`.
pub const fn block(i: usize, j: usize) -> usize {
    match (i, j) {
        (0, 0) => 0,
        (0, 1) => 1,
        (0, 2) => 2,
        (1, 1) => 3,
        (1, 2) => 4,
        _ => 5,
    }
}

/// Deformation gradient columns `F₀, F₁`.
#[inline]
pub fn deformation(tri: &Triangle, x: [Vec3; 3]) -> [Vec3; 2] {
    let g = &tri.grad;
    [x[0] * g[0][0] + x[1] * g[1][0] + x[2] * g[2][0], x[0] * g[0][1] + x[1] * g[1][1] + x[2] * g[2][1]]
}

/// Green strain of a triangle.
#[inline]
pub fn green_strain(f: [Vec3; 2]) -> Sym2 {
    Sym2 { a: 0.5 * (f[0].dot(f[0]) - 1.0), b: 0.5 * f[0].dot(f[1]), d: 0.5 * (f[1].dot(f[1]) - 1.0) }
}

/// Green strain of a triangle at `x` measured against its rest placement
/// `rest` rather than against the rest frame's identity: with the edges
/// `e₁ = x₁ − x₀`, `e₂ = x₂ − x₀` (and `ē₁, ē₂` at rest),
/// `E = ½ Σ_ij (e_i·e_j − ē_i·ē_j) b_i b_jᵀ`, which is `½(FᵀF − I)` up to
/// the rounding of the rest frame. Both sides take the same arithmetic, so
/// the strain is exactly zero where `x` is `rest`: a curved rest mesh,
/// whose rest frame is a rotation of its placement, starts without the
/// rounding noise `½(FᵀF − I)` carries there.
#[inline]
pub fn green_strain_about(tri: &Triangle, x: [Vec3; 3], rest: [Vec3; 3]) -> Sym2 {
    let (e1, e2) = (x[1] - x[0], x[2] - x[0]);
    let (r1, r2) = (rest[1] - rest[0], rest[2] - rest[0]);
    let g11 = e1.dot(e1) - r1.dot(r1);
    let g12 = e1.dot(e2) - r1.dot(r2);
    let g22 = e2.dot(e2) - r2.dot(r2);
    let [b1, b2] = [tri.grad[1], tri.grad[2]];
    let at =
        |k: usize, l: usize| 0.5 * (g11 * b1[k] * b1[l] + g12 * (b1[k] * b2[l] + b2[k] * b1[l]) + g22 * b2[k] * b2[l]);
    Sym2 { a: at(0, 0), b: at(0, 1), d: at(1, 1) }
}

/// A triangle's Green strain at `x`: against its rest placement when the
/// mesh is curved at rest ([`green_strain_about`]), else against the rest
/// frame ([`green_strain`]) with deformation gradient `f`.
#[inline]
fn strain(tri: &Triangle, x: [Vec3; 3], f: [Vec3; 2], rest: Option<[Vec3; 3]>) -> Sym2 {
    match rest {
        Some(r) => green_strain_about(tri, x, r),
        None => green_strain(f),
    }
}

/// The scalar parts of the constitutive law at principal strains `e`.
struct Spectral {
    /// `g'(e_k)`.
    dg: [f32; 2],
    /// `f_k = ∂ψ/∂e_k`.
    f: [f32; 2],
    energy: f32,
}

impl Membrane {
    fn spectral(&self, e: [f32; 2]) -> Spectral {
        let (c, t, s) = (self.compression, self.taut, self.taut_slope);
        // `g(e)` and `g'(e)` on the branch `e` is on.
        let branch = |x: f32| {
            if x < 0.0 {
                (c * x, c)
            } else if x <= t {
                (x, 1.0)
            } else {
                (t + s * (x - t), s)
            }
        };
        let [(g0, d0), (g1, d1)] = e.map(branch);
        let (g, dg) = ([g0, g1], [d0, d1]);
        let tr = g[0] + g[1];
        let f = [dg[0] * (2.0 * self.mu * g[0] + self.lambda * tr), dg[1] * (2.0 * self.mu * g[1] + self.lambda * tr)];
        Spectral { dg, f, energy: self.mu * (g[0] * g[0] + g[1] * g[1]) + 0.5 * self.lambda * tr * tr }
    }

    /// Energy only.
    pub fn energy(&self, tri: &Triangle, x: [Vec3; 3], rest: Option<[Vec3; 3]>) -> f32 {
        self.energy_and_stress(tri, x, rest).0
    }

    /// Energy and `A (|σ₁| + |σ₂|)`: the element's area times the sum of
    /// its principal stresses' magnitudes (the energy's sensitivity to a
    /// strain error).
    pub fn energy_and_stress(&self, tri: &Triangle, x: [Vec3; 3], rest: Option<[Vec3; 3]>) -> (f32, f32) {
        let (e1, e2, _) = strain(tri, x, deformation(tri, x), rest).eigen();
        let sp = self.spectral([e1, e2]);
        (tri.area * sp.energy, tri.area * (libm::fabsf(sp.f[0]) + libm::fabsf(sp.f[1])))
    }

    /// Forces, energy and stiffness, the strain measured against `rest`
    /// when given ([`Mesh::membrane_rest`](crate::mesh::Mesh::membrane_rest)).
    /// With `definite`, the stiffness is the positive semi-definite one;
    /// otherwise the exact Hessian.
    pub fn element(&self, tri: &Triangle, x: [Vec3; 3], rest: Option<[Vec3; 3]>, definite: bool) -> Element {
        let f = deformation(tri, x);
        let (e1, e2, n1) = strain(tri, x, f, rest).eigen();
        let n2 = [-n1[1], n1[0]];
        let sp = self.spectral([e1, e2]);
        let outer =
            |u: [f32; 2], v: [f32; 2]| Sym2 { a: u[0] * v[0], b: 0.5 * (u[0] * v[1] + u[1] * v[0]), d: u[1] * v[1] };
        let add = |p: Sym2, q: Sym2, s: f32| Sym2 { a: p.a + s * q.a, b: p.b + s * q.b, d: p.d + s * q.d };
        let zero = Sym2::default();
        let (p11, p22, p12) = (outer(n1, n1), outer(n2, n2), outer(n1, n2));
        let s = add(add(zero, p11, sp.f[0]), p22, sp.f[1]);

        let energy = tri.area * sp.energy;
        let p = [f[0] * s.a + f[1] * s.b, f[0] * s.b + f[1] * s.d];
        let gr = &tri.grad;
        let a = tri.area;
        let mut force = [Vec3::ZERO; 3];
        for (i, fi) in force.iter_mut().enumerate() {
            *fi = -(p[0] * gr[i][0] + p[1] * gr[i][1]) * a;
        }

        // Tangent D applied to the symmetric basis B00, B11, B01.
        let (mu, lambda) = (self.mu, self.lambda);
        let fkl = |k: usize, l: usize| sp.dg[k] * (2.0 * mu * sp.dg[k] * (k == l) as u8 as f32 + lambda * sp.dg[l]);
        let mut rho = if (e1 - e2).abs() > 1e-6 * (e1.abs() + e2.abs()) + 1e-12 {
            (sp.f[0] - sp.f[1]) / (e1 - e2)
        } else {
            fkl(0, 0) - fkl(0, 1)
        };
        if definite {
            rho = rho.max(0.0);
        }
        let tangent = |de: Sym2| -> Sym2 {
            let q = |u: [f32; 2], v: [f32; 2]| u[0] * (de.a * v[0] + de.b * v[1]) + u[1] * (de.b * v[0] + de.d * v[1]);
            let (a1, a2, b) = (q(n1, n1), q(n2, n2), q(n1, n2));
            let mut r = add(zero, p11, fkl(0, 0) * a1 + fkl(0, 1) * a2);
            r = add(r, p22, fkl(1, 0) * a1 + fkl(1, 1) * a2);
            add(r, p12, 2.0 * rho * b)
        };
        let basis = [Sym2 { a: 1.0, b: 0.0, d: 0.0 }, Sym2 { a: 0.0, b: 0.0, d: 1.0 }, Sym2 { a: 0.0, b: 0.5, d: 0.0 }];
        let q = basis.map(tangent);
        let q_lp = |l: usize, p: usize| if l == p { q[l] } else { q[2] };

        let sg = if definite { s.positive_part() } else { s };
        // C_kl = S_lk I + Σ_mp Q_lp[m][k] F_m F_pᵀ
        let c = |k: usize, l: usize| -> Mat3 {
            let mut m = Mat3::scale(sg.at(l, k));
            for mm in 0..2 {
                for pp in 0..2 {
                    let coef = q_lp(l, pp).at(mm, k);
                    if coef != 0.0 {
                        m += f[mm].outer(f[pp]) * coef;
                    }
                }
            }
            m
        };
        let (c00, c01, c10, c11) = (c(0, 0), c(0, 1), c(1, 0), c(1, 1));
        let mut stiffness = [Mat3::ZERO; 6];
        for i in 0..3 {
            for j in i..3 {
                let (bi, bj) = (gr[i], gr[j]);
                stiffness[block(i, j)] =
                    (c00 * (bi[0] * bj[0]) + c01 * (bi[0] * bj[1]) + c10 * (bi[1] * bj[0]) + c11 * (bi[1] * bj[1])) * a;
            }
        }
        Element { force, energy, stiffness }
    }
}
