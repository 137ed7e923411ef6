//! The assembly stage: external forces (gravity, wind), elastic forces and
//! the membrane's stiffness blocks, and the right-hand side of the
//! linearised step.

use super::membrane;
use super::solver::{self, bending_of, Coefficients};
use super::stencil::Bending;
use super::workspace::{split_blocks, Workspace};
use crate::math::{Mat3, Vec3};
use crate::model::Model;

/// Adds the elastic forces (membrane and bending) to `force` and the
/// membrane's PSD stiffness to the diagonal and edge blocks (the bending
/// Hessian is constant: [`solver::matvec`] applies it as `bending` holds
/// it).
pub fn assemble(model: &Model, bending: Bending, x: &[Vec3], force: &mut [Vec3], diag: &mut [Mat3], off: &mut [Mat3]) {
    let mem = model.material.membrane();
    let mesh = &model.mesh;
    diag.fill(Mat3::ZERO);
    off.fill(Mat3::ZERO);
    for t in mesh.triangles() {
        let el = mem.element(t, t.nodes.map(|i| x[i as usize]), mesh.membrane_rest(t), true);
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
    // Bending forces: the constant Hessian times the positions.
    bending.apply(mesh, -1.0, x, force);
}

/// Aerodynamic drag and lift per triangle, a third to each node.
pub(super) fn wind(model: &Model, t: f64, x: &[Vec3], v: &[Vec3], force: &mut [Vec3]) {
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

/// Adds to `v_start` the velocity change the wind at `(t, x, v)` gives each
/// node over `h` (`h f_wind / m`; nothing without wind), with `scratch`
/// for the forces. The step's velocity change less this is what the other
/// forces did, which the correction network reads
/// ([`crate::physics::state::State::start_velocities`]): no training scene has
/// wind, so a network that saw the wind's push would take it for contact
/// or elasticity.
pub(super) fn wind_push(
    model: &Model,
    t: f64,
    x: &[Vec3],
    v: &[Vec3],
    h: f32,
    scratch: &mut [Vec3],
    v_start: &mut [Vec3],
) {
    if model.scene.wind.is_none() {
        return;
    }
    scratch.fill(Vec3::ZERO);
    wind(model, t, x, v, scratch);
    for (i, (vs, f)) in v_start.iter_mut().zip(scratch.iter()).enumerate() {
        let m = model.mass(i);
        if m > 0.0 {
            *vs += *f * (h / m);
        }
    }
}

/// External forces (gravity, wind), elastic forces and the membrane's
/// stiffness blocks, the right-hand side into `ws.r` and the base
/// positions into `ws.x_new`; returns the right-hand side's share of a
/// curved rest mesh's rest loads (`h` times [`external_forces`]' size), the
/// least norm its residual is measured against.
pub(super) fn assemble_system(model: &Model, x: &[Vec3], v: &[Vec3], ws: &mut Workspace, k: &Coefficients) -> f32 {
    let mesh = &model.mesh;
    let (alpha, beta) = (model.material.damping_mass, model.material.damping_stiffness);
    let h = k.h;
    let bend = bending_of(model, &ws.stencil, ws.bend);
    let (diag, _, off) = split_blocks(ws.blocks, mesh.node_count(), mesh.edges().len());
    // BDF2 takes the forces at the end of the step: the wind is taken at
    // t + h on the extrapolated state (x + h v, 2v − v_prev), which keeps
    // the step second order.
    let (t_wind, x_wind, v_wind) = if k.bdf2 && model.scene.wind.is_some() {
        for (i, (xp, vp)) in ws.x_new.iter_mut().zip(ws.dv.iter_mut()).enumerate() {
            *xp = x[i] + v[i] * k.h_step;
            *vp = v[i] * 2.0 - ws.v_prev[i];
        }
        (k.t1, &*ws.x_new, &*ws.dv)
    } else {
        (k.t0, x, v)
    };
    let rest_load = external_forces(model, t_wind, x_wind, v_wind, ws.f_ext);
    ws.force.copy_from_slice(ws.f_ext);
    assemble(model, bend, x, ws.force, diag, off);
    if let Some(g) = &mut ws.gather {
        g.build(mesh, diag, off);
    }

    // rhs b = h (f − αMv − (β + h) K v); with BDF2 (h = 2h_step/3) also
    // − h K d + M (v̂ − v), d = (x − x_prev)/3, v̂ = (4v − v_prev)/3.
    solver::matvec(mesh, diag, off, bend, v, ws.q);
    for (i, (r, (f, kv))) in ws.r.iter_mut().zip(ws.force.iter().zip(ws.q.iter())).enumerate() {
        *r = (*f - v[i] * (alpha * model.mass(i)) - *kv * (beta + h)) * h;
    }
    // `x_new` holds the base positions x + d until the solve starts (the
    // solve takes it as scratch; [`base_positions`] makes them again).
    if k.bdf2 {
        for (dn, (xi, xp)) in ws.x_new.iter_mut().zip(x.iter().zip(ws.x_prev.iter())) {
            *dn = (*xi - *xp) * (1.0 / 3.0);
        }
        solver::matvec(mesh, diag, off, bend, ws.x_new, ws.p);
        for (i, r) in ws.r.iter_mut().enumerate() {
            let v_hat = v[i] * (4.0 / 3.0) - ws.v_prev[i] * (1.0 / 3.0);
            *r += (v_hat - v[i]) * model.mass(i) - ws.p[i] * h;
            ws.x_new[i] += x[i];
        }
    } else {
        ws.x_new.copy_from_slice(x);
    }
    rest_load * h
}

/// The forces the step takes at its start into `f_ext`: gravity, the wind
/// at `(t, x, v)`, and a curved rest mesh's rest curvature
/// ([`super::bending::add_rest_forces`]; nothing on a flat mesh), whose
/// size it returns (0 on a flat mesh).
pub(super) fn external_forces(model: &Model, t: f64, x: &[Vec3], v: &[Vec3], f_ext: &mut [Vec3]) -> f32 {
    for (i, f) in f_ext.iter_mut().enumerate() {
        *f = model.scene.gravity * model.mass(i);
    }
    wind(model, t, x, v, f_ext);
    super::bending::add_rest_forces(&model.mesh, model.material.plate(), x, f_ext)
}

/// `Σ f_wind · v` at time `t`, with `scratch` for the forces.
pub(super) fn wind_power(model: &Model, t: f64, x: &[Vec3], v: &[Vec3], scratch: &mut [Vec3]) -> f32 {
    if model.scene.wind.is_none() {
        return 0.0;
    }
    scratch.fill(Vec3::ZERO);
    wind(model, t, x, v, scratch);
    scratch.iter().zip(v).map(|(f, vi)| f.dot(*vi)).sum()
}
