//! St. Venant–Kirchhoff membrane element on a linear triangle.
//!
//! `F = Σ x_i b_iᵀ` (3×2), Green strain `E = ½(FᵀF − I)`, energy density
//! `ψ = μ E:E + ½λ (tr E)²`, first Piola stress `P = F S` with
//! `S = 2μE + λ tr(E) I`. Node forces are `f_i = −A P b_i`.
//!
//! The stiffness block `K_ij = ∂²W/∂x_i∂x_j = A Σ_kl b_i[k] b_j[l] C_kl` with
//! `C_kl = S_lk I + μ F_l F_kᵀ + μ δ_kl F Fᵀ + λ F_k F_lᵀ`. Only the first
//! (geometric) term can be indefinite: the others sum to
//! `2μ|sym(FᵀU)|² + λ tr(FᵀU)² ≥ 0`. Replacing `S` there by its positive
//! part gives the positive semi-definite stiffness the solver uses; it is
//! exact whenever the element is in tension.

use crate::math::{Mat3, Sym2, Vec3};
use crate::mesh::Triangle;

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

/// Energy only.
pub fn energy(tri: &Triangle, x: [Vec3; 3], mu: f32, lambda: f32) -> f32 {
    let e = green_strain(deformation(tri, x));
    let tr = e.trace();
    tri.area * (mu * (e.a * e.a + 2.0 * e.b * e.b + e.d * e.d) + 0.5 * lambda * tr * tr)
}

/// Forces, energy and stiffness. With `definite`, the stiffness is the
/// positive semi-definite one; otherwise the exact Hessian.
pub fn element(tri: &Triangle, x: [Vec3; 3], mu: f32, lambda: f32, definite: bool) -> Element {
    let f = deformation(tri, x);
    let e = green_strain(f);
    let tr = e.trace();
    let s = Sym2 { a: 2.0 * mu * e.a + lambda * tr, b: 2.0 * mu * e.b, d: 2.0 * mu * e.d + lambda * tr };
    let energy = tri.area * (mu * (e.a * e.a + 2.0 * e.b * e.b + e.d * e.d) + 0.5 * lambda * tr * tr);
    let p = [f[0] * s.a + f[1] * s.b, f[0] * s.b + f[1] * s.d];
    let g = &tri.grad;
    let a = tri.area;
    let mut force = [Vec3::ZERO; 3];
    for (i, fi) in force.iter_mut().enumerate() {
        *fi = -(p[0] * g[i][0] + p[1] * g[i][1]) * a;
    }

    let sg = if definite { s.positive_part() } else { s };
    let fft = f[0].outer(f[0]) + f[1].outer(f[1]);
    // C_kl for (k, l) in (0,0), (0,1), (1,1); C_10 = C_01ᵀ.
    let c = |k: usize, l: usize| -> Mat3 {
        let mut m = Mat3::scale(sg.at(l, k)) + f[l].outer(f[k]) * mu + f[k].outer(f[l]) * lambda;
        if k == l {
            m += fft * mu;
        }
        m
    };
    let c00 = c(0, 0);
    let c01 = c(0, 1);
    let c10 = c01.transpose();
    let c11 = c(1, 1);
    let mut stiffness = [Mat3::ZERO; 6];
    for i in 0..3 {
        for j in i..3 {
            let (bi, bj) = (g[i], g[j]);
            stiffness[block(i, j)] =
                (c00 * (bi[0] * bj[0]) + c01 * (bi[0] * bj[1]) + c10 * (bi[1] * bj[0]) + c11 * (bi[1] * bj[1])) * a;
        }
    }
    Element { force, energy, stiffness }
}
