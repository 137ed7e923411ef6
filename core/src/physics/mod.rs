//! The FEM cloth step: StVK membrane + quadratic bending forces and their
//! Jacobians, one linearised backward-Euler solve (Baraff–Witkin)
//!
//! `(M − h ∂f/∂v − h² ∂f/∂x) Δv = h (f + h ∂f/∂x v)`
//!
//! with Rayleigh damping `f_d = −αMv − βKv` (so `∂f/∂v = −αM − βK`) and the
//! positive semi-definite stiffness `K ≈ −∂f/∂x`, solved by filtered PCG
//! with pinned nodes as velocity constraints. An energy check guards the
//! linearisation: a step that would add energy (a stiff cloth rotating or
//! deforming fast within one step) is split into halves (see [`step`]).
//! Colliders and (optionally)
//! node–node self-contact then act on the end-of-step state. A step either
//! commits a finite state or leaves the state as it was.

pub mod bending;
pub mod membrane;
pub mod solver;

use crate::contact;
use crate::math::{Mat3, Vec3};
use crate::mesh::HINGE_EDGE_PAIRS;
use crate::model::Model;
use crate::state::{split_blocks, State};

/// What one step did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepReport {
    /// CG iterations, summed over substeps.
    pub cg_iterations: u32,
    /// Largest relative CG residual ‖r‖/‖b‖ at exit.
    pub residual: f32,
    pub converged: bool,
    /// Smallest fraction of a solved velocity change taken (1 unless the
    /// energy check had to shorten a step at the finest split).
    pub step_scale: f32,
    /// Solves the step took: 1, or more when it was split to pass the
    /// energy check.
    pub substeps: u32,
    /// Node contacts with colliders.
    pub contacts: usize,
    /// Proximity pairs found (self-contact) and kept.
    pub pairs: usize,
    /// Proximity pairs that did not fit the pair storage.
    pub dropped_pairs: usize,
    /// Pairs that received a self-contact impulse.
    pub self_contacts: usize,
}

/// Why a step was refused. The state is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepError {
    /// The state was made for a mesh of another size.
    MeshMismatch,
    /// The step produced NaN or infinity (too large a time step or forces).
    NonFinite,
}

impl core::fmt::Display for StepError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            StepError::MeshMismatch => write!(f, "state and model meshes differ in size"),
            StepError::NonFinite => write!(f, "step produced a non-finite state; state kept at the last good step"),
        }
    }
}

/// Energy split by source (J).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Energy {
    pub kinetic: f32,
    pub membrane: f32,
    pub bending: f32,
    /// Gravitational potential `−Σ m g·x`.
    pub gravity: f32,
}

impl Energy {
    pub fn total(&self) -> f32 {
        self.kinetic + self.membrane + self.bending + self.gravity
    }
}

/// Energy of positions `x` and velocities `v`.
pub fn energy(model: &Model, x: &[Vec3], v: &[Vec3]) -> Energy {
    let mut e = Energy::default();
    for (i, (xi, vi)) in x.iter().zip(v).enumerate() {
        let m = model.mass(i);
        e.kinetic += 0.5 * m * vi.norm2();
        e.gravity -= m * model.scene.gravity.dot(*xi);
    }
    (e.membrane, e.bending) = elastic_energy(model, x);
    e
}

/// Membrane and bending energy of positions `x`.
fn elastic_energy(model: &Model, x: &[Vec3]) -> (f32, f32) {
    let mem = model.material.membrane();
    let mut membrane = 0.0;
    for t in model.mesh.triangles() {
        membrane += mem.energy(t, t.nodes.map(|i| x[i as usize]));
    }
    let mut bend = 0.0;
    for h in model.mesh.hinges() {
        bend += bending::energy(h, x, model.material.bending);
    }
    (membrane, bend)
}

/// Largest relative change of a static edge's length, `max |l/l₀ − 1|`.
pub fn max_strain(model: &Model, x: &[Vec3]) -> f32 {
    let rest = model.mesh.rest();
    model
        .mesh
        .edges()
        .iter()
        .map(|e| {
            let (a, b) = (e.a as usize, e.b as usize);
            let l0 = (rest[b] - rest[a]).norm();
            ((x[b] - x[a]).norm() / l0 - 1.0).abs()
        })
        .fold(0.0, f32::max)
}

/// Adds the elastic forces to `force` and the PSD stiffness `K` to the
/// diagonal and edge blocks (membrane and bending; the bending wing–wing
/// terms are applied matrix-free by [`solver::matvec`]).
pub fn assemble(model: &Model, x: &[Vec3], force: &mut [Vec3], diag: &mut [Mat3], off: &mut [Mat3]) {
    let mem = model.material.membrane();
    let mesh = &model.mesh;
    diag.fill(Mat3::ZERO);
    off.fill(Mat3::ZERO);
    for t in mesh.triangles() {
        let el = mem.element(t, t.nodes.map(|i| x[i as usize]), true);
        for i in 0..3 {
            let ni = t.nodes[i] as usize;
            force[ni] += el.force[i];
            diag[ni] += el.stiffness[membrane::block(i, i)];
        }
        for (k, (i, j)) in [(0usize, 1usize), (1, 2), (0, 2)].into_iter().enumerate() {
            // Edge slots of the triangle are (0,1), (1,2), (2,0).
            let e = t.edges[k] as usize;
            let kij = el.stiffness[membrane::block(i, j)];
            off[e] += if t.nodes[i] < t.nodes[j] { kij } else { kij.transpose() };
        }
    }
    // Bending: forces, and its constant Hessian κ_b w k kᵀ ⊗ I on the
    // diagonal and edge blocks (the wing–wing term stays matrix-free).
    let kb = model.material.bending;
    bending::apply(mesh.hinges(), kb, -1.0, x, force);
    if kb != 0.0 {
        for hg in mesh.hinges() {
            let s = kb * hg.weight;
            for q in 0..4 {
                diag[hg.nodes[q] as usize] += Mat3::scale(s * hg.k[q] * hg.k[q]);
            }
            for (e, (a, b)) in hg.pair_edges.iter().zip(HINGE_EDGE_PAIRS) {
                off[*e as usize] += Mat3::scale(s * hg.k[a] * hg.k[b]);
            }
        }
    }
}

/// Aerodynamic drag and lift per triangle, a third to each node.
fn wind(model: &Model, t: f32, x: &[Vec3], v: &[Vec3], force: &mut [Vec3]) {
    let Some(w) = model.scene.wind else { return };
    let air = w.at(t);
    for tri in model.mesh.triangles() {
        let [a, b, c] = tri.nodes.map(|i| i as usize);
        let n2 = (x[b] - x[a]).cross(x[c] - x[a]);
        let area = 0.5 * n2.norm();
        let n = n2.normalized();
        let rel = air - (v[a] + v[b] + v[c]) * (1.0 / 3.0);
        let vn = rel.dot(n);
        let q = 0.5 * w.air_density * area * vn.abs();
        let f = (n * (w.drag * vn) + (rel - n * vn) * w.lift) * (q / 3.0);
        force[a] += f;
        force[b] += f;
        force[c] += f;
    }
}

/// The energy check of a (sub)step. For end-of-step velocities `u`,
///
/// `Ψ(u) = ½‖u‖²_M + E(x + h u) − h f_extᵀu`   (free nodes in the sums)
///
/// is the cloth's mechanical energy after the step less the work of the
/// external forces. A step passes when `Ψ(u)` does not exceed
/// `½‖v‖²_M + E(x̃)`, the energy before it with the pinned nodes already on
/// their new targets (`x̃`): it adds no energy beyond what external forces
/// and moving pins put in. Backward Euler passes with its full step; the
/// linearised step can overshoot when a stiff cloth rotates or deforms fast
/// within one step.
struct EnergyCheck<'s, 'm> {
    model: &'s Model<'m>,
    h: f32,
    x: &'s [Vec3],
    f_ext: &'s [Vec3],
    pinned: &'s [u8],
}

impl EnergyCheck<'_, '_> {
    fn elastic(&self, x: &[Vec3]) -> f32 {
        let (membrane, bend) = elastic_energy(self.model, x);
        membrane + bend
    }

    /// `Ψ(u)`, with `xt` as scratch for `x + h u`.
    fn after(&self, u: &[Vec3], xt: &mut [Vec3]) -> f32 {
        let mut psi = 0.0;
        for (i, (ui, (xi, fi))) in u.iter().zip(self.x.iter().zip(self.f_ext)).enumerate() {
            xt[i] = *xi + *ui * self.h;
            if self.pinned[i] == 0 {
                psi += 0.5 * self.model.mass(i) * ui.norm2() - self.h * fi.dot(*ui);
            }
        }
        psi + self.elastic(xt)
    }

    /// `½‖v‖²_M + E(x̃)`; `xt` holds `x + h u` for pinned nodes on entry.
    fn before(&self, v: &[Vec3], xt: &mut [Vec3]) -> f32 {
        let mut kin = 0.0;
        for (i, (vi, xi)) in v.iter().zip(self.x).enumerate() {
            if self.pinned[i] == 0 {
                kin += 0.5 * self.model.mass(i) * vi.norm2();
                xt[i] = *xi;
            }
        }
        kin + self.elastic(xt)
    }
}

/// `u = v + z + s·y`: pinned entries of `dv` hold `z`, free ones `y`.
fn trial(s: f32, v: &[Vec3], dv: &[Vec3], pinned: &[u8], u: &mut [Vec3]) {
    for (((ui, vi), di), &p) in u.iter_mut().zip(v).zip(dv).zip(pinned) {
        *ui = *vi + if p != 0 { *di } else { *di * s };
    }
}

/// A step that fails the energy check is split in halves, down to
/// `dt / 2^MAX_SPLIT`.
pub const MAX_SPLIT: u32 = 4;
/// At the finest split, the solved velocity change is halved up to this
/// many times to pass the energy check.
const MAX_HALVINGS: u32 = 8;

/// Outcome of one linearised solve.
struct Substep {
    solve: solver::Solve,
    /// Passed the energy check (or the check is off).
    passed: bool,
    scale: f32,
    finite: bool,
}

/// One linearised backward-Euler solve over `h` from the committed state;
/// the candidate end state is left in `ws.x_new` / `ws.dv`.
fn substep(model: &Model, state: &mut State, h: f32, last_resort: bool) -> Substep {
    let mesh = &model.mesh;
    let t1 = state.time + h;
    let mat = &model.material;
    let (alpha, beta) = (mat.damping_mass, mat.damping_stiffness);
    let ws = &mut state.ws;
    let (x, v) = (&*state.x, &*state.v);
    let (diag, precond, off) = split_blocks(ws.blocks, mesh.node_count());

    // External forces (gravity, wind), then elastic forces and stiffness K.
    for (i, f) in ws.f_ext.iter_mut().enumerate() {
        *f = model.scene.gravity * model.mass(i);
    }
    wind(model, state.time, x, v, ws.f_ext);
    ws.force.copy_from_slice(ws.f_ext);
    assemble(model, x, ws.force, diag, off);

    // rhs b = h (f − αMv − (β + h) K v).
    solver::matvec(mesh, diag, off, mat.bending, v, ws.q);
    for (i, (r, (f, kv))) in ws.r.iter_mut().zip(ws.force.iter().zip(ws.q.iter())).enumerate() {
        *r = (*f - v[i] * (alpha * model.mass(i)) - *kv * (beta + h)) * h;
    }

    // A = M(1 + hα) + (hβ + h²) K and its inverse diagonal.
    let m_scale = 1.0 + h * alpha;
    let c = h * beta + h * h;
    // Block-Jacobi preconditioner: the inverse 3×3 diagonal blocks of A.
    for (i, (d, pc)) in diag.iter().zip(precond.iter_mut()).enumerate() {
        *pc = *d * c + Mat3::scale(model.mass(i) * m_scale);
    }
    for pc in precond.iter_mut() {
        let d = pc.diagonal();
        *pc = pc.inverse().unwrap_or(Mat3 {
            c: [Vec3::new(1.0 / d.x, 0.0, 0.0), Vec3::new(0.0, 1.0 / d.y, 0.0), Vec3::new(0.0, 0.0, 1.0 / d.z)],
        });
    }
    let system = solver::System {
        mesh,
        diag,
        off,
        bend: mat.bending,
        density: mat.density,
        m_scale,
        c,
        precond,
        pinned: ws.pinned,
    };

    // Pinned nodes: Δv = z moves them onto their targets at t + h; b ← b − A z.
    ws.dv.fill(Vec3::ZERO);
    for pin in model.scene.pins {
        let i = pin.node as usize;
        ws.dv[i] = (pin.target(t1) - x[i]) * (1.0 / h) - v[i];
    }
    if !model.scene.pins.is_empty() {
        system.apply(ws.dv, ws.q);
        for (r, q) in ws.r.iter_mut().zip(ws.q.iter()) {
            *r -= *q;
        }
    }
    let solve = system.pcg(ws.dv, ws.r, ws.p, ws.q, model.params.cg_max_iterations, model.params.cg_tolerance);

    let mut scale = 1.0;
    let mut passed = true;
    if model.params.energy_check && solve.residual.is_finite() {
        let check = EnergyCheck { model, h, x, f_ext: ws.f_ext, pinned: ws.pinned };
        trial(scale, v, ws.dv, ws.pinned, ws.p);
        let mut psi = check.after(ws.p, ws.x_new);
        let psi0 = check.before(v, ws.x_new);
        let tol = 1e-5 * (psi0.abs() + psi.abs()) + f32::MIN_POSITIVE;
        passed = psi <= psi0 + tol || !psi0.is_finite();
        let mut halvings = 0;
        while last_resort && !passed && halvings < MAX_HALVINGS {
            halvings += 1;
            scale *= 0.5;
            trial(scale, v, ws.dv, ws.pinned, ws.p);
            psi = check.after(ws.p, ws.x_new);
            passed = psi <= psi0 + tol;
        }
    }

    // Candidate: v⁺ = v + Δv (kept in dv), x⁺ = x + h v⁺.
    for ((dv, xn), ((xi, vi), &p)) in
        ws.dv.iter_mut().zip(ws.x_new.iter_mut()).zip(x.iter().zip(v).zip(ws.pinned.iter()))
    {
        *dv = *vi + if p != 0 { *dv } else { *dv * scale };
        *xn = *xi + *dv * h;
    }
    let finite =
        solve.residual.is_finite() && ws.x_new.iter().all(|p| p.is_finite()) && ws.dv.iter().all(|p| p.is_finite());
    Substep { solve, passed, scale, finite }
}

/// Colliders and self-contact on the candidate, then commit it.
fn finish(model: &Model, state: &mut State, h: f32, report: &mut StepReport) -> bool {
    let mesh = &model.mesh;
    let ws = &mut state.ws;
    let t1 = state.time + h;
    report.contacts += contact::collide(model.scene.colliders, t1, ws.pinned, ws.x_new, ws.dv);
    ws.n_pairs = 0;
    if let Some(sc) = model.params.self_contact {
        if let Ok(found) = contact::proximity(mesh, ws.x_new, sc.radius, ws.cells, ws.order, ws.pairs) {
            ws.n_pairs = found.pairs;
            report.pairs = found.pairs;
            report.dropped_pairs += found.dropped;
            state.warnings.dropped_pairs += found.dropped as u64;
            let pinned = &*ws.pinned;
            let inv_mass = |i: usize| if pinned[i] != 0 { 0.0 } else { 1.0 / model.mass(i) };
            report.self_contacts += contact::repel(&ws.pairs[..found.pairs], sc.radius, h, inv_mass, ws.x_new, ws.dv);
        }
    }
    if !(ws.x_new.iter().all(|p| p.is_finite()) && ws.dv.iter().all(|p| p.is_finite())) {
        ws.n_pairs = 0;
        return false;
    }
    state.x.copy_from_slice(ws.x_new);
    state.v.copy_from_slice(ws.dv);
    state.time = t1;
    true
}

/// Advances the state by one time step `model.params.dt`.
///
/// The step is one linearised backward-Euler solve. If its result fails the
/// energy check (or is not finite) it is split into halves, each solved the
/// same way, down to `dt / 2^MAX_SPLIT`; there the solved velocity change is
/// shortened until the check passes. If a split step still produces a
/// non-finite state, `StepError::NonFinite` is returned and the state is
/// left at the last good (sub)step.
pub fn step(model: &Model, state: &mut State) -> Result<StepReport, StepError> {
    let n = model.mesh.node_count();
    if state.x.len() != n || state.ws.blocks.len() != 2 * n + model.mesh.edges().len() {
        return Err(StepError::MeshMismatch);
    }
    model.scene.mark_pinned(state.ws.pinned);
    let h = model.params.dt;
    let t0 = state.time;
    let total = 1u32 << MAX_SPLIT;
    let mut report = StepReport { step_scale: 1.0, converged: true, ..StepReport::default() };
    let (mut pos, mut level) = (0u32, 0u32);
    while pos < total {
        let size = 1u32 << (MAX_SPLIT - level);
        let hs = h * size as f32 / total as f32;
        let last_resort = level == MAX_SPLIT;
        let sub = substep(model, state, hs, last_resort);
        report.cg_iterations += sub.solve.iterations;
        report.residual = report.residual.max(sub.solve.residual);
        report.converged &= sub.solve.converged;
        let good = sub.finite && sub.passed;
        if !good && !last_resort {
            level += 1;
            continue;
        }
        if !sub.finite || !finish(model, state, hs, &mut report) {
            state.warnings.rejected_steps += 1;
            return Err(StepError::NonFinite);
        }
        if !sub.passed {
            state.warnings.energy_check_failed += 1;
        }
        report.step_scale = report.step_scale.min(sub.scale);
        report.substeps += 1;
        pos += size;
        // Land exactly on the step boundary.
        state.time = if pos == total { t0 + h } else { t0 + h * pos as f32 / total as f32 };
    }
    if !report.converged {
        state.warnings.cg_not_converged += 1;
    }
    state.steps += 1;
    Ok(report)
}
