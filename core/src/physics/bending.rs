//! Quadratic bending on edge hinges (the isometric bending model): for a
//! hinge with cotangent weights `k` and area weight `w`, the energy is
//! `½ κ_b w |Σ k_i x_i|²`, which approximates `½ κ_b ∫ (2H)² dA` for a cloth
//! that is flat at rest and bends without stretching. Its Hessian
//! `κ_b w k kᵀ ⊗ I₃` is constant and positive semi-definite, so the
//! solver applies it matrix-free.

use crate::math::Vec3;
use crate::mesh::Hinge;

/// Discrete curvature vector `Σ k_i x_i` of a hinge.
#[inline]
pub fn curvature(h: &Hinge, x: &[Vec3]) -> Vec3 {
    let mut t = Vec3::ZERO;
    for q in 0..4 {
        t += x[h.nodes[q] as usize] * h.k[q];
    }
    t
}

/// Hinge energy.
#[inline]
pub fn energy(h: &Hinge, x: &[Vec3], stiffness: f32) -> f32 {
    energy_of(h, curvature(h, x), stiffness)
}

/// Hinge energy from its curvature vector `k`.
#[inline]
pub fn energy_of(h: &Hinge, k: Vec3, stiffness: f32) -> f32 {
    0.5 * stiffness * h.weight * k.norm2()
}

/// Adds `scale · K_b · p` to `out` for every hinge (with `p = x` and
/// `scale = −1` this adds the bending forces).
pub fn apply(hinges: &[Hinge], stiffness: f32, scale: f32, p: &[Vec3], out: &mut [Vec3]) {
    for h in hinges {
        let t = curvature(h, p) * (scale * stiffness * h.weight);
        for q in 0..4 {
            out[h.nodes[q] as usize] += t * h.k[q];
        }
    }
}
