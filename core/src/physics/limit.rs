//! Strain limiting: a linearised step cannot see the stretch of an edge
//! that rotates out of a flat, unstressed cloth (the membrane has no
//! out-of-plane stiffness there), so a cloth stopped by a collider while
//! its neighbours keep falling would stretch its edges far beyond what a
//! stiff cloth allows. After the solve, edges longer than `(1 + limit)`
//! times their rest length are shortened by moving their end nodes along
//! the edge, shared by inverse mass (pinned nodes do not move, a node held
//! by a collider moves only in its tangent plane), Gauss–Seidel over the
//! edges for a bounded number of passes; the velocities follow the
//! positions as far as that adds no kinetic energy ([`limit_stretch`]).
//! Only stretch is limited: compression is the material's (buckling below
//! the mesh's resolution).

use crate::flags;
use crate::math::Vec3;
use crate::mesh::Edge;
use crate::model::Model;

/// Passes over the edges at most.
pub const MAX_PASSES: u32 = 8;

/// Shortens over-stretched edges of the end-of-step state: on return `xe`
/// holds the limited end positions and `u` the end velocities. The
/// velocities take the position change over the step as far as that does
/// not add kinetic energy (the change `Δu = Δx/h` is scaled by the largest
/// `s ≤ 1` with `‖u + sΔu‖_M ≤ ‖u‖_M`): stopping a stretching motion is
/// inelastic, pulling back an edge that was already too long moves only
/// its positions. Returns the passes that moved a node (0 when no edge was
/// over the limit) and whether an edge is still over it after the last.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
pub fn limit_stretch(
    model: &Model,
    limit: f32,
    h: f32,
    flags: &[u8],
    normal: &[Vec3],
    base: &[Vec3],
    u: &mut [Vec3],
    xe: &mut [Vec3],
) -> Limited {
    for (i, p) in xe.iter_mut().enumerate() {
        *p = base[i] + u[i] * h;
    }
    let inv_mass = |i: usize| if flags::pinned(flags[i]) { 0.0 } else { 1.0 / model.mass(i) };
    let tangent = |i: usize, d: Vec3| if flags::in_contact(flags[i]) { d - normal[i] * normal[i].dot(d) } else { d };
    let over = |xe: &[Vec3], e: &Edge| {
        let d = xe[e.b as usize] - xe[e.a as usize];
        let l = d.norm();
        (d, l, e.rest * (1.0 + limit))
    };
    let mut moved = 0;
    for _ in 0..MAX_PASSES {
        let mut any = false;
        for e in model.mesh.edges() {
            let (a, b) = (e.a as usize, e.b as usize);
            let (d, l, l_max) = over(xe, e);
            if !(l > l_max) {
                continue;
            }
            let (wa, wb) = (inv_mass(a), inv_mass(b));
            if wa + wb <= 0.0 {
                continue;
            }
            any = true;
            let c = d * ((l - l_max) / (l * (wa + wb)));
            xe[a] += tangent(a, c * wa);
            xe[b] -= tangent(b, c * wb);
        }
        if !any {
            break;
        }
        moved += 1;
    }
    // Every pass moved a node: is an edge still over the limit (with a
    // little slack for the rounding of the last correction)?
    let unfinished = moved == MAX_PASSES
        && model.mesh.edges().iter().any(|e| {
            let (a, b) = (e.a as usize, e.b as usize);
            let (wa, wb) = (inv_mass(a), inv_mass(b));
            let (_, l, l_max) = over(xe, e);
            wa + wb > 0.0 && l > l_max * (1.0 + 1e-4)
        });
    if moved > 0 {
        // Δu = (xe − base)/h − u; scale s from u·MΔu and Δu·MΔu.
        let inv_h = 1.0 / h;
        let (mut um, mut mm) = (0.0f32, 0.0f32);
        for (i, ui) in u.iter().enumerate() {
            let du = (xe[i] - base[i]) * inv_h - *ui;
            let m = model.mass(i);
            um += m * ui.dot(du);
            mm += m * du.norm2();
        }
        let s = if mm > 0.0 { (-2.0 * um / mm).clamp(0.0, 1.0) } else { 0.0 };
        for (i, ui) in u.iter_mut().enumerate() {
            let du = (xe[i] - base[i]) * inv_h - *ui;
            *ui += du * s;
        }
    }
    Limited { passes: moved, unfinished }
}

/// What [`limit_stretch`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limited {
    /// Passes that moved a node.
    pub passes: u32,
    /// An edge was still over the limit after [`MAX_PASSES`].
    pub unfinished: bool,
}
