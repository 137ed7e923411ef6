//! The FEM cloth step: StVK membrane + quadratic bending forces and their
//! Jacobians, one linearised backward-Euler solve (Baraff–Witkin)
//!
//! `(M − h ∂f/∂v − h² ∂f/∂x) Δv = h (f + h ∂f/∂x v)`
//!
//! with Rayleigh damping `f_d = −αMv − βKv` (so `∂f/∂v = −αM − βK`) and the
//! positive semi-definite stiffness `K ≈ −∂f/∂x`, solved by filtered PCG
//! with pinned nodes as velocity constraints. Colliders and (optionally)
//! node–node self-contact then act on the end-of-step state. A step either
//! commits a finite state or leaves the state as it was.

pub mod bending;
pub mod membrane;
pub mod solver;

use crate::contact;
use crate::math::{Mat3, Vec3};
use crate::model::Model;
use crate::state::State;

/// What one step did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepReport {
    pub cg_iterations: u32,
    /// Relative CG residual ‖r‖/‖b‖ at exit.
    pub residual: f32,
    pub converged: bool,
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
    let (mu, lambda) = model.material.lame();
    let mesh = &model.mesh;
    let mut e = Energy::default();
    for (i, (xi, vi)) in x.iter().zip(v).enumerate() {
        let m = model.mass(i);
        e.kinetic += 0.5 * m * vi.norm2();
        e.gravity -= m * model.scene.gravity.dot(*xi);
    }
    for t in mesh.triangles() {
        e.membrane += membrane::energy(t, t.nodes.map(|i| x[i as usize]), mu, lambda);
    }
    for h in mesh.hinges() {
        e.bending += bending::energy(h, x, model.material.bending);
    }
    e
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
/// diagonal and edge blocks (membrane only; bending stays matrix-free).
fn assemble(model: &Model, x: &[Vec3], force: &mut [Vec3], diag: &mut [Mat3], off: &mut [Mat3]) {
    let (mu, lambda) = model.material.lame();
    let mesh = &model.mesh;
    diag.fill(Mat3::ZERO);
    off.fill(Mat3::ZERO);
    for t in mesh.triangles() {
        let el = membrane::element(t, t.nodes.map(|i| x[i as usize]), mu, lambda, true);
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
    bending::apply(mesh.hinges(), model.material.bending, -1.0, x, force);
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

/// Advances the state by one time step `model.params.dt`.
pub fn step(model: &Model, state: &mut State) -> Result<StepReport, StepError> {
    let mesh = &model.mesh;
    let n = mesh.node_count();
    if state.x.len() != n || state.ws.off.len() != mesh.edges().len() {
        return Err(StepError::MeshMismatch);
    }
    let h = model.params.dt;
    let t1 = state.time + h;
    let mat = &model.material;
    let (alpha, beta) = (mat.damping_mass, mat.damping_stiffness);
    let ws = &mut state.ws;
    let (x, v) = (&*state.x, &*state.v);

    ws.pinned.fill(0);
    for pin in model.scene.pins {
        ws.pinned[pin.node as usize] = 1;
    }

    // Forces: gravity, wind, elasticity; stiffness K.
    for (i, f) in ws.force.iter_mut().enumerate() {
        *f = model.scene.gravity * model.mass(i);
    }
    wind(model, state.time, x, v, ws.force);
    assemble(model, x, ws.force, ws.diag, ws.off);

    // rhs b = h (f − αMv − (β + h) K v).
    solver::matvec(mesh, ws.diag, ws.off, mat.bending, v, ws.q);
    for i in 0..n {
        ws.r[i] = (ws.force[i] - v[i] * (alpha * model.mass(i)) - ws.q[i] * (beta + h)) * h;
    }

    // A = M(1 + hα) + (hβ + h²) K, and its inverse diagonal.
    let c = h * beta + h * h;
    for b in ws.off.iter_mut() {
        *b = *b * c;
    }
    for (i, d) in ws.diag.iter_mut().enumerate() {
        *d = Mat3::scale(model.mass(i) * (1.0 + h * alpha)) + *d * c;
        ws.inv_diag[i] = d.diagonal();
    }
    for hg in mesh.hinges() {
        for q in 0..4 {
            let s = c * mat.bending * hg.weight * hg.k[q] * hg.k[q];
            ws.inv_diag[hg.nodes[q] as usize] += Vec3::new(s, s, s);
        }
    }
    for d in ws.inv_diag.iter_mut() {
        *d = Vec3::new(1.0 / d.x, 1.0 / d.y, 1.0 / d.z);
    }

    // Pinned nodes: Δv = z, moving them onto their targets at t + h;
    // b ← b − A z.
    ws.dv.fill(Vec3::ZERO);
    for pin in model.scene.pins {
        let i = pin.node as usize;
        ws.dv[i] = (pin.target(t1) - x[i]) * (1.0 / h) - v[i];
    }
    if !model.scene.pins.is_empty() {
        solver::matvec(mesh, ws.diag, ws.off, c * mat.bending, ws.dv, ws.q);
        for (r, q) in ws.r.iter_mut().zip(ws.q.iter()) {
            *r -= *q;
        }
    }
    let system = solver::System {
        mesh,
        diag: ws.diag,
        off: ws.off,
        bend: c * mat.bending,
        inv_diag: ws.inv_diag,
        pinned: ws.pinned,
    };
    let solve = system.pcg(ws.dv, ws.r, ws.p, ws.q, model.params.cg_max_iterations, model.params.cg_tolerance);

    // Integrate: v⁺ = v + Δv (kept in dv), x⁺ = x + h v⁺.
    for i in 0..n {
        ws.dv[i] += v[i];
        ws.x_new[i] = x[i] + ws.dv[i] * h;
    }
    let contacts = contact::collide(model.scene.colliders, t1, ws.pinned, ws.x_new, ws.dv);

    let mut report = StepReport {
        cg_iterations: solve.iterations,
        residual: solve.residual,
        converged: solve.converged,
        contacts,
        ..StepReport::default()
    };
    ws.n_pairs = 0;
    if let Some(sc) = model.params.self_contact {
        if let Ok(found) = contact::proximity(mesh, ws.x_new, sc.radius, ws.cells, ws.order, ws.pairs) {
            ws.n_pairs = found.pairs;
            report.pairs = found.pairs;
            report.dropped_pairs = found.dropped;
            state.warnings.dropped_pairs += found.dropped as u64;
            let pinned = &*ws.pinned;
            let inv_mass = |i: usize| if pinned[i] != 0 { 0.0 } else { 1.0 / model.mass(i) };
            report.self_contacts = contact::repel(&ws.pairs[..found.pairs], sc.radius, h, inv_mass, ws.x_new, ws.dv);
        }
    }

    if !solve.converged {
        state.warnings.cg_not_converged += 1;
    }
    if !solve.residual.is_finite() || !(ws.x_new.iter().all(|p| p.is_finite()) && ws.dv.iter().all(|p| p.is_finite())) {
        state.warnings.rejected_steps += 1;
        ws.n_pairs = 0;
        return Err(StepError::NonFinite);
    }
    state.x.copy_from_slice(ws.x_new);
    state.v.copy_from_slice(ws.dv);
    state.time = t1;
    state.steps += 1;
    Ok(report)
}
