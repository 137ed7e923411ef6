//! The constraints stage: pinned nodes onto their targets, nodes at or
//! heading into a collider held on its surface, as the solve's
//! constrained part of `Δv`.

use super::solver::{preconditioner, Coefficients};
use super::workspace::Workspace;
use crate::contact;
use crate::math::Vec3;
use crate::model::Model;

/// Nodes within this gap of a collider (after their approach over the
/// step) are held by a contact constraint: the collider's thickness plus
/// the distance gravity alone moves a node in one step, so a resting node
/// stays held.
pub(super) fn contact_margin(model: &Model, h: f32) -> f32 {
    let g = model.scene.gravity.norm();
    model.scene.colliders.iter().map(|c| c.thickness).fold(0.0, f32::max) + g * h * h
}

/// The solve's constraints, in `ws.dv` (its constrained part) and the
/// node flags: pinned nodes move onto their targets at `t1`; nodes at or
/// heading into a collider get the normal part of `Δv` that ends the step
/// on its surface (the solve fills in the rest). Returns the nodes held.
pub(super) fn constrain(model: &Model, v: &[Vec3], ws: &mut Workspace, k: &Coefficients) -> usize {
    let mesh = &model.mesh;
    ws.dv.fill(Vec3::ZERO);
    for pin in model.scene.pins {
        let i = pin.node as usize;
        ws.dv[i] = (pin.target(k.t1) - ws.x_new[i]) * (1.0 / k.h) - v[i];
    }
    let margin = contact_margin(model, k.h);
    let held = contact::constrain(
        mesh,
        model.scene.colliders,
        k.t0 as f32,
        k.h,
        margin,
        ws.x_new,
        v,
        ws.flags,
        ws.normal,
        ws.dv,
    );
    preconditioner(model, ws, k);
    // b (unfiltered) is kept in `force` to measure the constraint impulses.
    ws.force.copy_from_slice(ws.r);
    held
}
