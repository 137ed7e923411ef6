//! One Newton correction of a backward-Euler step that failed the energy
//! check: the step's nonlinear equation linearised again at the failed
//! solve's end, its correction solved with the same constraints.
//!
//! The linearised step solves `M(u − v) = h f(x) − h² K(x)(u − v)…` with
//! `K` at the step's start `x`. Where the cloth turns or deforms fast
//! within the step that linearisation overshoots and the energy check
//! fails. With `u₁ = v + Δv₁` the failed solve's end velocities and `x₁ =
//! x + h u₁` its end positions, the correction `δ` solves
//!
//! `(M(1 + hα) + h(h + β) K₁) δ = h f(x₁) − M(u₁ − v) − hαM u₁ − hβ K₁ u₁`
//!
//! (`K₁ = K(x₁)`, `f` all forces: gravity and wind as the step took them,
//! membrane and bending at `x₁`), the residual of backward Euler's
//! equation `M(u − v) = h f(x + h u) − hαMu − hβK u` at `u₁`, with `δ`'s
//! constrained part zero (pinned nodes keep their motion, held nodes their
//! normal velocity). `u₁ + δ` is backward Euler's second Newton iterate.

use super::assembly::{assemble, external_forces};
use super::candidate::{base_positions, check_energy};
use super::solver::{
    self, bending_of, constraint_work, keep_warm, matvec, preconditioner, Coefficients, Solve, SolveFrom,
};
use super::workspace::{split_blocks, Workspace};
use crate::flags;
use crate::math::Vec3;
use crate::model::Model;
use crate::probe::{Probe, Stage};

/// The correction's solve stops at this many times the step's CG
/// tolerance (an inexact Newton step's forcing term; at most 0.1), relative
/// to the larger of its own right-hand side and the failed solve's: the
/// energy check that follows decides whether the step stands. Measured
/// (the contact tests' thin bar, the board's scenes in QEMU): at 1 the
/// bar's largest stretch is 8.7 %, at 10 9.0 %, at 30 9.2 %, at 100 9.3 %
/// (the test allows 10 %); at 30 the drape's and the tablecloth's worst
/// steps take 6 and 8 correction iterations (17 and 19 at 1).
pub const LOOSER: f32 = 30.0;

/// The correction's system from the failed solve's `Δv₁` in `ws.dv`:
/// forces and stiffness at `x₁` into `ws.force` and the blocks, the
/// right-hand side into `ws.r` (and `ws.force`, kept for the constraint
/// impulses), the preconditioner; `Δv₁` into `ws.f_ext` and `ws.dv`
/// zeroed (the correction's constrained part). [`restore`] undoes the
/// loan of `ws.f_ext` once the correction is solved.
pub(super) fn relinearise(model: &Model, x: &[Vec3], v: &[Vec3], ws: &mut Workspace, k: &Coefficients) {
    let mesh = &model.mesh;
    let (alpha, beta, h) = (model.material.damping_mass, model.material.damping_stiffness, k.h);
    // x₁ into `p`, u₁ into `x_new` (both free until the solve).
    for (i, (xp, un)) in ws.p.iter_mut().zip(ws.x_new.iter_mut()).enumerate() {
        *un = v[i] + ws.dv[i];
        *xp = x[i] + *un * h;
    }
    let bend = bending_of(model, &ws.stencil, ws.bend);
    let (diag, _, off) = split_blocks(ws.blocks, mesh.node_count(), mesh.edges().len());
    ws.force.copy_from_slice(ws.f_ext);
    assemble(model, bend, ws.p, ws.force, diag, off);
    if let Some(g) = &mut ws.gather {
        g.build(mesh, diag, off);
    }
    matvec(mesh, diag, off, bend, ws.x_new, ws.q);
    for (i, r) in ws.r.iter_mut().enumerate() {
        let (m, u) = (model.mass(i), ws.x_new[i]);
        *r = (ws.force[i] - u * (alpha * m) - ws.q[i] * beta) * h - (u - v[i]) * m;
    }
    ws.f_ext.copy_from_slice(ws.dv);
    ws.dv.fill(Vec3::ZERO);
    preconditioner(model, ws, k);
    ws.force.copy_from_slice(ws.r);
}

/// After the correction's solve: `ws.dv = Δv₁ + δ`, and `ws.f_ext` the
/// external forces again (gravity, and the wind at the step's start as
/// the step took it).
pub(super) fn restore(model: &Model, x: &[Vec3], v: &[Vec3], ws: &mut Workspace, k: &Coefficients) {
    for (d, d1) in ws.dv.iter_mut().zip(ws.f_ext.iter()) {
        *d += *d1;
    }
    let _ = external_forces(model, k.t0, x, v, ws.f_ext);
}

/// The Newton correction of a failed solve (`Δv₁` in `ws.dv`, its solve
/// `solve`): relinearised at its end ([`relinearise`]), solved with the
/// constraints the first solve left (a node the correction's impulse would
/// pull off its collider is released), `ws.dv = Δv₁ + δ` and the energy
/// check again, its line search `allowed` halvings of the whole solved
/// part. `solve` gains the correction's iterations; returns whether the
/// check passed and its scale.
#[allow(clippy::too_many_arguments)]
pub(super) fn correct(
    model: &Model,
    x: &[Vec3],
    v: &[Vec3],
    ws: &mut Workspace,
    k: &Coefficients,
    solve: &mut Solve,
    allowed: u32,
    probe: &mut impl Probe,
) -> (bool, f32) {
    probe.enter(Stage::Assembly);
    relinearise(model, x, v, ws, k);
    let held = ws.flags.iter().filter(|&&f| flags::in_contact(f)).count();
    // A looser tolerance than the step's ([`LOOSER`]), measured against
    // the larger of the correction's right-hand side and the step's.
    let tolerance = (model.params.cg_tolerance * LOOSER).min(0.1);
    let how = SolveFrom { held, warm: false, tolerance, reference: solve.reference };
    // The work `solve` returns is measured from `v + δ`: measured below
    // from `v + Δv₁ + δ` instead.
    let (second, _) = solver::solve(model, v, ws, k, how, probe);
    let still_held = ws.flags.iter().any(|&f| flags::in_contact(f));
    probe.enter(Stage::Candidate);
    restore(model, x, v, ws, k);
    if model.params.warm_start {
        keep_warm(ws, k.h, second.residual.is_finite());
    }
    // `ws.q = A δ` and `ws.force = b` where nodes stay held.
    let work = if still_held { constraint_work(model, v, ws) } else { 0.0 };
    let error_energy = second.error_energy;
    solve.then(second);
    if !solve.residual.is_finite() {
        return (false, 1.0);
    }
    base_positions(false, x, ws.x_prev, ws.r);
    check_energy(model, x, v, ws, k, error_energy, work, allowed)
}
