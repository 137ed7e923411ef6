//! The contacts-and-commit stage: self-contact and colliders on the
//! candidate, then the state committed.

use super::limit;
use super::state::State;
use super::StepReport;
use crate::contact;
use crate::flags;
use crate::model::Model;
use crate::probe::{Probe, Stage};

/// Gap (m) under which a swept node or edge counts as touching a collider.
pub(super) const SWEEP_TOLERANCE: f32 = 1e-5;

/// Self-contact and colliders on the candidate, then commit it: nodes that
/// would cross a collider within the step are stopped where they touch it,
/// edges are kept out of spheres and capsules that fit between their nodes,
/// nodes inside a collider are pushed out.
pub(super) fn finish(
    model: &Model,
    state: &mut State,
    h: f32,
    ticks: u64,
    report: &mut StepReport,
    probe: &mut impl Probe,
) -> bool {
    probe.enter(Stage::Contacts);
    let mesh = &model.mesh;
    let t0 = state.time();
    let (t0, t1) = (t0 as f32, (t0 + h as f64) as f32);
    let ws = &mut state.ws;
    // Self-contact first, so that the colliders have the last word.
    ws.n_pairs = 0;
    if let Some(sc) = model.params.self_contact {
        if let Ok(found) = contact::proximity(mesh, ws.x_new, sc.radius, ws.cells, ws.order, ws.pairs) {
            ws.n_pairs = found.pairs;
            report.pairs = found.pairs;
            report.dropped_pairs += found.dropped;
            state.warnings.dropped_pairs += found.dropped as u64;
            let pinned = &*ws.flags;
            let inv_mass = |i: usize| if flags::pinned(pinned[i]) { 0.0 } else { 1.0 / model.mass(i) };
            let repelled = contact::repel(&ws.pairs[..found.pairs], sc.radius, h, inv_mass, ws.x_new, ws.dv);
            report.self_contacts += repelled;
            // Pushing close pairs apart can over-stretch the edges between
            // them: limit again from the base the repelled state implies.
            if let (Some(limit), true) = (model.params.strain_limit, repelled > 0) {
                for ((b, x), v) in ws.r.iter_mut().zip(ws.x_new.iter()).zip(ws.dv.iter()) {
                    *b = *x - *v * h;
                }
                let limited = limit::limit_stretch(model, limit, h, ws.flags, ws.normal, ws.r, ws.dv, ws.x_new);
                report.strain_unfinished |= limited.unfinished;
            }
        }
    }
    let colliders = model.scene.colliders;
    if !colliders.is_empty() {
        let motion = contact::StepMotion { colliders, t: t0, h, tol: SWEEP_TOLERANCE, flags: ws.flags, x0: state.x };
        report.contacts += contact::sweep_nodes(&motion, ws.x_new, ws.dv);
        report.contacts += contact::collide_edges(mesh, &motion, ws.x_new, ws.dv);
    }
    report.contacts += contact::collide(colliders, t1, ws.flags, ws.x_new, ws.dv);
    for f in ws.flags.iter_mut() {
        *f = flags::without_contact(*f);
    }
    if !(ws.x_new.iter().all(|p| p.is_finite()) && ws.dv.iter().all(|p| p.is_finite())) {
        ws.n_pairs = 0;
        return false;
    }
    if ws.x_prev.len() == state.x.len() && ws.v_prev.len() == state.v.len() {
        ws.x_prev.copy_from_slice(state.x);
        ws.v_prev.copy_from_slice(state.v);
    }
    state.x.copy_from_slice(ws.x_new);
    state.v.copy_from_slice(ws.dv);
    state.ticks += ticks;
    true
}
