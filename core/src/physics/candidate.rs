//! The candidate stage: the energy check of a solved `Δv` (with its line
//! search), then the candidate end state with friction and strain
//! limiting.

use super::energy::ElasticMemo;
use super::limit;
use super::solver::Coefficients;
use super::stencil;
use super::workspace::{hinge_cache, Workspace};
use crate::contact;
use crate::flags;
use crate::math::Vec3;
use crate::model::Model;

/// The energy check's tolerance counts this many times the solve's error
/// energy estimate (`½ rᵀBr` with the preconditioner `B ≈ A⁻¹`).
pub(super) const ERROR_ENERGY_FACTOR: f32 = 2.0;

/// The energy check's tolerance counts this many rounding bounds.
pub(super) const NOISE_FACTOR: f32 = 4.0;

/// The energy check of a (sub)step. For end-of-step velocities `u`,
///
/// `Ψ(u) = ½‖u‖²_M + E(x + h u) − h f_extᵀu`   (free directions in the sums)
///
/// is the cloth's mechanical energy after the step less the work of the
/// external forces. A step passes when `Ψ(u)` does not exceed
/// `½‖v‖²_M + E(x̃)`, the energy before it with the constrained motion
/// already done (`x̃`: pinned nodes on their new targets, held nodes moved
/// along their contact normals): it adds no energy beyond what external
/// forces, moving pins and contact constraints put in. A held node's normal
/// direction is constrained like a pin's, so only its tangential velocity
/// counts. Backward Euler passes with its full step; the linearised step can
/// overshoot when a stiff cloth rotates or deforms fast within one step.
///
/// Both energies come with a bound on their `f32` rounding noise
/// ([`elastic`]), which the tolerance includes: a cloth at rest
/// under small strains must not fail the check on rounding alone.
pub(super) struct EnergyCheck<'s, 'm> {
    model: &'s Model<'m>,
    h: f32,
    x: &'s [Vec3],
    /// Where the step's motion starts: `x` (backward Euler) or
    /// `x + (x − x_prev)/3` (BDF2); the end positions are `base + h u`.
    base: &'s [Vec3],
    f_ext: &'s [Vec3],
    flags: &'s [u8],
    normal: &'s [Vec3],
    /// The grid's bending stencil, which measures the bending energy.
    stencil: Option<&'s stencil::BendingStencil<'s>>,
}

impl EnergyCheck<'_, '_> {
    /// The part of `w` the check counts at node `i`: none of a pinned
    /// node's, the tangential part of a held node's, all of a free node's.
    #[inline]
    fn free_part(&self, i: usize, w: Vec3) -> Vec3 {
        let f = self.flags[i];
        if flags::pinned(f) {
            Vec3::ZERO
        } else if flags::in_contact(f) {
            w - self.normal[i] * self.normal[i].dot(w)
        } else {
            w
        }
    }

    /// The displacement of node `i` over the step for end velocity `u`.
    #[inline]
    fn displacement(&self, i: usize, u: Vec3) -> Vec3 {
        (self.base[i] - self.x[i]) + u * self.h
    }

    /// `Ψ(u)` and its rounding bound, with `xt` as scratch for the end
    /// positions `base + h u`.
    fn after(&self, u: &[Vec3], xt: &mut [Vec3], memo: &mut ElasticMemo, cache: &mut [[f32; 4]]) -> (f32, f32) {
        let mut psi = 0.0;
        for (i, (ui, fi)) in u.iter().zip(self.f_ext).enumerate() {
            xt[i] = self.base[i] + *ui * self.h;
            let w = self.free_part(i, *ui);
            psi += 0.5 * self.model.mass(i) * w.norm2() - fi.dot(self.free_part(i, self.displacement(i, *ui)));
        }
        let el = memo.elastic(self.model, xt, self.stencil, cache);
        (psi + el.total(), el.noise)
    }

    /// `½‖v‖²_M + E(x̃)` and its rounding bound, for the trial velocities
    /// `u` (which give the constrained motion).
    fn before(
        &self,
        v: &[Vec3],
        u: &[Vec3],
        xt: &mut [Vec3],
        memo: &mut ElasticMemo,
        cache: &mut [[f32; 4]],
    ) -> (f32, f32) {
        let mut kin = 0.0;
        for (i, (vi, (xi, ui))) in v.iter().zip(self.x.iter().zip(u)).enumerate() {
            let w = self.free_part(i, *vi);
            kin += 0.5 * self.model.mass(i) * w.norm2();
            let d = self.displacement(i, *ui);
            xt[i] = *xi + (d - self.free_part(i, d));
        }
        let el = memo.elastic(self.model, xt, self.stencil, cache);
        (kin + el.total(), el.noise)
    }
}

/// `u = v + z + s·y`: the constrained part `z` of `dv` (a pinned node's
/// whole change, a held node's normal part) in full, the solved part `y`
/// scaled by `s`.
pub(super) fn trial(s: f32, v: &[Vec3], dv: &[Vec3], flags: &[u8], normal: &[Vec3], u: &mut [Vec3]) {
    for (i, ((ui, vi), di)) in u.iter_mut().zip(v).zip(dv).enumerate() {
        let f = flags[i];
        *ui = *vi
            + if flags::pinned(f) {
                *di
            } else if flags::in_contact(f) {
                let z = normal[i] * normal[i].dot(*di);
                z + (*di - z) * s
            } else {
                *di * s
            };
    }
}

/// The energy check of the solved `ws.dv` (base positions in `ws.r`):
/// whether the step's incremental potential did not rise beyond its
/// tolerance (rounding, the constraints' `work`, the solve's
/// `error_energy`), halving the solved part of the velocity change up to
/// `allowed` times until it passes. Returns whether it passed and the
/// scale taken.
#[allow(clippy::too_many_arguments)]
pub(super) fn check_energy(
    model: &Model,
    x: &[Vec3],
    v: &[Vec3],
    ws: &mut Workspace,
    k: &Coefficients,
    error_energy: f32,
    work: f32,
    allowed: u32,
) -> (bool, f32) {
    let mut scale = 1.0;
    let check = EnergyCheck {
        model,
        h: k.h,
        x,
        base: ws.r,
        f_ext: ws.f_ext,
        flags: ws.flags,
        normal: ws.normal,
        stencil: ws.stencil.as_ref(),
    };
    trial(scale, v, ws.dv, ws.flags, ws.normal, ws.p);
    let cache = hinge_cache(ws.blocks);
    // Before, then after: the start is often the audit's placement, and
    // the last trial often the step's end.
    let (psi0, noise0) = check.before(v, ws.p, ws.x_new, &mut ws.memo, cache);
    let (mut psi, noise1) = check.after(ws.p, ws.x_new, &mut ws.memo, cache);
    // The solve's own inexactness may cost up to its error energy.
    let base_noise = if k.bdf2 { base_rounding(ws.f_ext, ws.r) } else { 0.0 };
    let tol = 1e-5 * (psi0.abs() + psi.abs())
        + NOISE_FACTOR * (noise0 + noise1 + base_noise)
        + work
        + ERROR_ENERGY_FACTOR * error_energy
        + f32::MIN_POSITIVE;
    let mut passed = psi <= psi0 + tol || !psi0.is_finite();
    let mut halvings = 0;
    while !passed && halvings < allowed {
        halvings += 1;
        scale *= 0.5;
        trial(scale, v, ws.dv, ws.flags, ws.normal, ws.p);
        psi = check.after(ws.p, ws.x_new, &mut ws.memo, cache).0;
        passed = psi <= psi0 + tol;
    }
    (passed, scale)
}

/// A bound on the rounding of the external forces' work `Σ f·(base − x)`
/// that BDF2's base positions `base = x + (x − x_prev)/3` carry: each is
/// rounded to `f32` (half an ulp of its coordinate), and the work's
/// displacement is a small difference of such positions. In a free fall
/// the kinetic energy and the work cancel exactly in `Ψ`, so without it
/// an exact BDF2 step fails the check on rounding.
fn base_rounding(f_ext: &[Vec3], base: &[Vec3]) -> f32 {
    let mut sum = 0.0;
    for (f, b) in f_ext.iter().zip(base) {
        sum += libm::fabsf(f.x * b.x) + libm::fabsf(f.y * b.y) + libm::fabsf(f.z * b.z);
    }
    0.5 * f32::EPSILON * sum
}

/// The candidate end state into `ws.x_new` and `ws.dv`: the solved
/// velocity change at `scale`, friction on the held nodes (Coulomb, from
/// the normal impulse over the step; it only slows their sliding), then
/// strain limiting; neither is part of the linearisation the energy check
/// guards. A held node ends on the collider's surface at rest along its
/// normal. Returns whether the strain limiter left an edge over its limit.
pub(super) fn make_candidate(model: &Model, v: &[Vec3], ws: &mut Workspace, k: &Coefficients, scale: f32) -> bool {
    let colliders = model.scene.colliders;
    trial(scale, v, ws.dv, ws.flags, ws.normal, ws.p);
    for (i, &f) in ws.flags.iter().enumerate() {
        if let Some(col) = contact::holder(colliders, f) {
            let n = ws.normal[i];
            let lambda = (ws.q[i] - ws.force[i]).dot(n).max(0.0);
            let rel = ws.p[i] - col.velocity;
            let vn = rel.dot(n);
            let slow = col.friction * lambda / (model.mass(i) * k.m_scale);
            ws.p[i] = col.velocity + n * vn + contact::coulomb(rel - n * vn, slow);
        }
    }
    let mut strain_unfinished = false;
    match model.params.strain_limit {
        Some(limit) => {
            strain_unfinished =
                limit::limit_stretch(model, limit, k.h, ws.flags, ws.normal, ws.r, ws.p, ws.x_new).unfinished;
        }
        None => {
            for ((xn, xi), u) in ws.x_new.iter_mut().zip(ws.r.iter()).zip(ws.p.iter()) {
                *xn = *xi + *u * k.h;
            }
        }
    }
    for (i, dv) in ws.dv.iter_mut().enumerate() {
        let u = ws.p[i];
        *dv = match contact::holder(colliders, ws.flags[i]) {
            Some(col) => u - ws.normal[i] * (u - col.velocity).dot(ws.normal[i]),
            None => u,
        };
    }
    strain_unfinished
}

/// The positions a (sub)step's motion starts from: `x` (backward Euler),
/// `x + (x − x_prev)/3` (BDF2), computed as the right-hand side does.
pub(super) fn base_positions(bdf2: bool, x: &[Vec3], x_prev: &[Vec3], out: &mut [Vec3]) {
    if bdf2 {
        for (o, (xi, xp)) in out.iter_mut().zip(x.iter().zip(x_prev)) {
            *o = (*xi - *xp) * (1.0 / 3.0) + *xi;
        }
    } else {
        out.copy_from_slice(x);
    }
}
