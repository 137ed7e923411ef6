//! The vector–Jacobian product of one coarse step: given `∂L/∂(x′, v′)`
//! after [`super::step`], the gradient `∂L/∂(x, v)` before it.
//!
//! The step (backward Euler, one solve, [`super`]) is
//!
//! `u = v + z + y`,  `y = S A⁻¹ S (b − A z)`,  `x′ = x + h u`,
//! `v′ = u` (a held node's normal part removed),
//!
//! with `A = M(1 + hα) + (hβ + h²) K(x)`, `b = h (f(x) − αMv − (β + h) K v)`,
//! `S` the filter of the constraints (zero on a pinned node, the tangent
//! plane on a held one), `z` the constrained part (a pinned node's move onto
//! its target, `(target − x)/h − v`; a held node's normal part,
//! `n ((thickness − d(x))/h − (v − v_c)·n)`). Its product, with `g_u = h ∂L/∂x′ + ∂L/∂v′` (a held node's normal
//! part of `∂L/∂v′` dropped):
//!
//! - one more solve with the step's own operator and preconditioner,
//!   `A λ = S g_u` (`A` is symmetric);
//! - `g_z = g_u − A λ` on the constrained directions `P` (`I` pinned,
//!   `n nᵀ` held, 0 free);
//! - `∂L/∂v = g_u − P g_z − h (αM + (β + h) K) λ`;
//! - `∂L/∂x = ∂L/∂x′ − P g_z / h − h K λ` ([`Linearisation::Stable`]);
//!   [`Linearisation::Exact`] takes `h (∂f/∂x)ᵀ λ` with the true Hessian
//!   instead of `−h K λ` (the definite `K` differs where a triangle is
//!   compressed) and adds the stiffness's change with the positions,
//!   `−∂/∂x λᵀ K(x) w` (`b`'s `K v` and `A`'s `K y`; bending is linear).
//!
//! What the product leaves out (measured by the gradient check,
//! `core/tests/step_vjp.rs`, and stated in `docs/results/2026-12-06-learning.md`):
//! - with [`Linearisation::Stable`], the position terms just named;
//! - the wind's velocity Jacobian (and, with `Stable`, its position one);
//! - what acts after the solve: friction, strain limiting, self-contact's
//!   impulses, the colliders' sweeps and push-out (identity here);
//! - changes of the active set (a node that starts or stops touching a
//!   collider), the contact normal's turn with the position, and a step
//!   that fails the energy check, which the product corrects by a Newton
//!   iteration or splits (the product linearises the single solve and
//!   says so: [`VjpReport::split`]);
//! - BDF2: a model that integrates with BDF2 is refused
//!   ([`VjpError::Bdf2`]); the device's step is backward Euler.
//!
//! No allocation: the product runs in the state's own workspace. The
//! state's positions, velocities, clock and history are left as they were.

use super::assembly::assemble_system;
use super::candidate::{base_positions, check_energy};
use super::constraints::constrain;
use super::membrane;
use super::solver::{self, bending_of, operator, preconditioner, solve, warm_start, Coefficients, SolveFrom};
use crate::flags;
use crate::math::Vec3;
use crate::model::{Integrator, Model};
use crate::physics::state::State;
use crate::physics::workspace::blocks_of;
use crate::probe::NoProbe;

/// How the product takes the positions' part of the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Linearisation {
    /// The forces' derivative `∂f/∂x` (the elastic energy's Hessian, by a
    /// directional difference) and the stiffness's change with the
    /// positions (`∂K/∂x`, element by element): the derivative of the
    /// step as it is, which the gradient check measures. Where the cloth is
    /// compressed the Hessian has directions the step's definite stiffness
    /// does not hold, and over many steps the product grows in them.
    Exact,
    /// The step's own definite stiffness for `∂f/∂x` (`−K`) and no `∂K/∂x`:
    /// the product of the linearised step itself (`A = M(1 + hα) + cK`
    /// with `K` definite), which stays bounded over rollouts where
    /// `Exact` grows (`docs/results/2026-12-06-learning.md`).
    Stable,
}

/// Why a product was refused. The state and the gradients are unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VjpError {
    /// The state was made for a mesh of another size, or a gradient has
    /// the wrong length.
    MeshMismatch,
    /// A gradient is not finite, or the step from this state is not.
    NonFinite,
    /// The model integrates with BDF2 (its product would need the step
    /// before's state too).
    Bdf2,
}

impl core::fmt::Display for VjpError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            VjpError::MeshMismatch => write!(f, "state, model and gradients differ in size"),
            VjpError::NonFinite => write!(f, "gradient or step not finite"),
            VjpError::Bdf2 => write!(f, "the step's product is for backward Euler only"),
        }
    }
}

impl core::error::Error for VjpError {}

/// What one product did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VjpReport {
    /// CG iterations of the forward solve the product repeats and of its
    /// own solve.
    pub forward_iterations: u32,
    pub adjoint_iterations: u32,
    /// Both solves reached the model's tolerance.
    pub converged: bool,
    /// The step's solve fails the energy check (the product corrects it by
    /// a Newton iteration or splits it): the product is that of the single
    /// linearised solve.
    pub split: bool,
    /// Nodes a collider held.
    pub held: usize,
}

/// `∂L/∂(x, v)` before a step from the state's positions, velocities and
/// time, given `∂L/∂(x′, v′)` after it in `gx`, `gv` (replaced in place).
/// The forward solve is repeated to find the step's active constraints,
/// its velocity change and whether it passes the energy check; then one adjoint solve
/// and one directional difference of the forces and stiffness (see the
/// module's notes for what the product leaves out).
pub fn step_vjp(
    model: &Model,
    state: &mut State,
    lin: Linearisation,
    gx: &mut [Vec3],
    gv: &mut [Vec3],
) -> Result<VjpReport, VjpError> {
    let n = model.mesh.node_count();
    if state.x.len() != n
        || gx.len() != n
        || gv.len() != n
        || state.ws.blocks.len() != crate::physics::state::mat3_blocks(model.mesh.counts())
    {
        return Err(VjpError::MeshMismatch);
    }
    if !(gx.iter().all(|g| g.is_finite()) && gv.iter().all(|g| g.is_finite())) {
        return Err(VjpError::NonFinite);
    }
    if model.params.integrator == Integrator::Bdf2 {
        return Err(VjpError::Bdf2);
    }
    model.scene.mark_pinned(state.ws.flags);
    state.ws.memo.forget();
    let k = Coefficients::new(model, state.time(), model.params.dt, false);
    let forward = forward(model, state, &k);
    let result = match forward {
        Some((solve, passed)) => {
            let mut r = adjoint(model, state, &k, lin, gx, gv);
            r.forward_iterations = solve.iterations;
            r.converged &= solve.converged;
            r.split = !passed;
            Ok(r)
        }
        None => Err(VjpError::NonFinite),
    };
    for f in state.ws.flags.iter_mut() {
        *f = flags::without_contact(*f);
    }
    result
}

/// The step's solve as [`super::substep`] makes it, up to its energy
/// check: the velocity change `Δv` in `ws.dv`, the constraints it ended
/// with in the flags and normals. Returns the solve and whether the check
/// passed (`None`: not finite).
fn forward(model: &Model, state: &mut State, k: &Coefficients) -> Option<(solver::Solve, bool)> {
    let (x, v, ws) = (&*state.x, &*state.v, &mut state.ws);
    assemble_system(model, x, v, ws, k);
    let held = constrain(model, v, ws, k);
    let warm = model.params.warm_start && held > 0 && ws.warm_h == k.h && warm_start(ws);
    let (solve, work) = solve(
        model,
        v,
        ws,
        k,
        SolveFrom { held, warm, tolerance: model.params.cg_tolerance, reference: 0.0 },
        &mut NoProbe,
    );
    if !(solve.residual.is_finite() && ws.dv.iter().all(|d| d.is_finite())) {
        return None;
    }
    base_positions(false, x, ws.x_prev, ws.r);
    // A backward-Euler solve that fails is corrected before any halving
    // (`super::newton`): no halving here either, so that a failed check
    // always says the product's step differs from this solve's.
    let passed = !model.params.energy_check || check_energy(model, x, v, ws, k, solve.error_energy, work, 0).0;
    Some((solve, passed))
}

/// The adjoint solve and the gradients, with the forward solve's `Δv` in
/// `ws.dv` and its flags and normals.
fn adjoint(
    model: &Model,
    state: &mut State,
    k: &Coefficients,
    lin: Linearisation,
    gx: &mut [Vec3],
    gv: &mut [Vec3],
) -> VjpReport {
    let h = k.h;
    let (x, v, ws) = (&*state.x, &*state.v, &mut state.ws);
    // The energy check used the blocks as scratch: assemble them again (for
    // backward Euler this leaves `dv` alone), for the constraints the
    // forward solve ended with.
    assemble_system(model, x, v, ws, k);
    preconditioner(model, ws, k);
    ws.f_ext.copy_from_slice(ws.dv);
    let held = ws.flags.iter().filter(|&&f| flags::in_contact(f)).count();
    // g_u into `force` and `r` (the solve's right-hand side).
    for (i, (fu, r)) in ws.force.iter_mut().zip(ws.r.iter_mut()).enumerate() {
        let mut gvi = gv[i];
        if flags::in_contact(ws.flags[i]) {
            gvi -= ws.normal[i] * ws.normal[i].dot(gvi);
        }
        *fu = gvi + gx[i] * h;
        *r = *fu;
    }
    ws.dv.fill(Vec3::ZERO);
    let system =
        operator(model, k, ws.blocks, bending_of(model, &ws.stencil, ws.bend), ws.gather.as_ref(), ws.flags, ws.normal);
    system.prepare(&mut ws.mg);
    let stop = solver::Stop {
        max_iterations: model.params.cg_max_iterations,
        tolerance: model.params.cg_tolerance,
        reference: 0.0,
    };
    let solve = system.pcg(ws.dv, ws.r, [ws.p, ws.q, ws.x_new], &mut ws.mg, stop);
    // λ in `dv`; A λ into `q`, K λ into `p`.
    system.apply(ws.dv, ws.q);
    let mesh = &model.mesh;
    let bend = bending_of(model, &ws.stencil, ws.bend);
    {
        let (diag, _, off) = blocks_of(ws.blocks, mesh.node_count(), mesh.edges().len());
        solver::matvec(mesh, diag, off, bend, ws.dv, ws.p);
    }
    let (alpha, beta) = (model.material.damping_mass, model.material.damping_stiffness);
    for i in 0..gx.len() {
        let (gu, lambda, k_lambda) = (ws.force[i], ws.dv[i], ws.p[i]);
        let gz = gu - ws.q[i];
        let f = ws.flags[i];
        let constrained = if flags::pinned(f) {
            gz
        } else if flags::in_contact(f) {
            ws.normal[i] * ws.normal[i].dot(gz)
        } else {
            Vec3::ZERO
        };
        gv[i] = gu - constrained - (lambda * (alpha * model.mass(i)) + k_lambda * (beta + h)) * h;
        gx[i] -= constrained * (1.0 / h);
    }
    positions_part(model, state, k, lin, gx);
    VjpReport {
        forward_iterations: 0,
        adjoint_iterations: solve.iterations,
        converged: solve.converged,
        split: false,
        held,
    }
}

/// The positions' part of the product, with `λ` in `ws.dv`, `K λ` in
/// `ws.p` and the solve's `Δv` in `ws.f_ext` (which it turns into `w`):
/// `h (∂f/∂x)ᵀ λ` (the step's `−h K λ` with [`Linearisation::Stable`];
/// with [`Linearisation::Exact`] the forces' derivative along `λ`, the
/// elastic energy's Hessian being symmetric, by a central difference) and,
/// exactly, `−∂/∂x λᵀ K(x) w` with `w = c Δv + h(β + h) v` (A's `K Δv`
/// and b's `K v`), element by element (bending's stiffness is constant).
fn positions_part(model: &Model, state: &mut State, k: &Coefficients, lin: Linearisation, gx: &mut [Vec3]) {
    let h = k.h;
    let (x, v, ws) = (&*state.x, &*state.v, &mut state.ws);
    let mesh = &model.mesh;
    let bend = bending_of(model, &ws.stencil, ws.bend);
    if lin == Linearisation::Stable {
        for (g, kl) in gx.iter_mut().zip(ws.p.iter()) {
            *g -= *kl * h;
        }
        return;
    }
    let lambda_max = ws.dv.iter().map(|l| l.norm()).fold(0.0f32, f32::max);
    if lambda_max > 0.0 && lambda_max.is_finite() {
        let eps = DIFFERENCE_STEP / lambda_max;
        let (force, p, r, x_new) = (&mut *ws.force, &mut *ws.p, &mut *ws.r, &mut *ws.x_new);
        for (sign, out) in [(1.0f32, p), (-1.0, r)] {
            for ((xn, xi), l) in x_new.iter_mut().zip(x).zip(ws.dv.iter()) {
                *xn = *xi + *l * (sign * eps);
            }
            force.fill(Vec3::ZERO);
            let (diag, _, off) =
                crate::physics::workspace::split_blocks(ws.blocks, mesh.node_count(), mesh.edges().len());
            super::assemble(model, bend, x_new, force, diag, off);
            out.copy_from_slice(force);
        }
        let scale = 0.5 * h / eps;
        for (g, (a, b)) in gx.iter_mut().zip(ws.p.iter().zip(ws.r.iter())) {
            *g += (*a - *b) * scale;
        }
    }
    let beta = model.material.damping_stiffness;
    for (w, vi) in ws.f_ext.iter_mut().zip(v) {
        *w = *w * k.c + *vi * (h * (beta + h));
    }
    stiffness_gradient(model, x, ws.dv, ws.f_ext, gx);
}

/// The largest node displacement (m) of the forces' directional
/// difference.
const DIFFERENCE_STEP: f32 = 1e-4;

/// An element's coordinate is moved by this share of its rest size for
/// the stiffness's central differences.
const ELEMENT_STEP: f32 = 1e-3;

/// Subtracts `∂/∂x Σ λᵀ K(x) w` (the membrane's definite stiffness as the
/// step assembles it) from `gx`: per triangle, central differences of
/// `λₑᵀ Kₑ(xₑ) wₑ` in its nine coordinates.
fn stiffness_gradient(model: &Model, x: &[Vec3], lambda: &[Vec3], w: &[Vec3], gx: &mut [Vec3]) {
    let mem = model.material.membrane();
    for t in model.mesh.triangles() {
        let idx = t.nodes.map(|i| i as usize);
        let (l, wv) = (idx.map(|i| lambda[i]), idx.map(|i| w[i]));
        if l.iter().all(|li| *li == Vec3::ZERO) {
            continue;
        }
        let phi = |xe: [Vec3; 3]| -> f32 {
            let el = mem.element(t, xe, model.mesh.membrane_rest(t), true);
            let mut sum = 0.0;
            for i in 0..3 {
                sum += l[i].dot(el.stiffness[membrane::block(i, i)].mul_vec(wv[i]));
                for j in i + 1..3 {
                    let kij = el.stiffness[membrane::block(i, j)];
                    sum += l[i].dot(kij.mul_vec(wv[j])) + l[j].dot(kij.transpose().mul_vec(wv[i]));
                }
            }
            sum
        };
        let d = ELEMENT_STEP * libm::sqrtf(2.0 * t.area);
        let xe = idx.map(|i| x[i]);
        for a in 0..3 {
            let mut g = [0.0f32; 3];
            for (c, gc) in g.iter_mut().enumerate() {
                let mut plus = xe;
                let mut minus = xe;
                let mut pa = plus[a].to_array();
                let mut ma = minus[a].to_array();
                pa[c] += d;
                ma[c] -= d;
                plus[a] = Vec3::new(pa[0], pa[1], pa[2]);
                minus[a] = Vec3::new(ma[0], ma[1], ma[2]);
                *gc = (phi(plus) - phi(minus)) / (2.0 * d);
            }
            gx[idx[a]] -= Vec3::new(g[0], g[1], g[2]);
        }
    }
}
