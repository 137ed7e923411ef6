//! Input features of the correction network.
//!
//! **Edges** (directed, sender `s` → receiver `r`), [`EDGE_FEATURES`] values:
//! rest direction (unit, 3), rest length (1), current direction (unit, 3),
//! current length (1), 1 for a dynamic edge (0 for static), and the current
//! length relative to the rest length, `l / l₀ − 1` (the strain that drives
//! the membrane forces, which the lengths alone show only as a tiny
//! difference of two similar numbers). A dynamic edge has no rest state: its
//! rest direction is its current direction and its rest length is the
//! contact radius `r`. Direction is `x_r − x_s`.
//!
//! **Nodes**, [`NODE_FEATURES`] values, translation-invariant: velocity (3),
//! position relative to the cloth's centroid (3), and 1 for a pinned node.
//!
//! Edge order: the static edges `a → b` then `b → a` for each mesh edge in
//! mesh order, then the dynamic pairs likewise in pair order.

use crate::math::Vec3;
use crate::mesh::{Mesh, NodeId};

pub const NODE_FEATURES: usize = 7;
pub const EDGE_FEATURES: usize = 10;

/// Number of directed edges for `pairs` dynamic pairs.
pub fn edge_count(mesh: &Mesh, pairs: usize) -> usize {
    2 * (mesh.edges().len() + pairs)
}

/// Sender and receiver of every directed edge, in feature order.
pub fn edge_endpoints(mesh: &Mesh, pairs: &[[NodeId; 2]], out: &mut [[NodeId; 2]]) {
    let statics = mesh.edges().iter().map(|e| [e.a, e.b]);
    for (k, [a, b]) in statics.chain(pairs.iter().copied()).enumerate() {
        out[2 * k] = [a, b];
        out[2 * k + 1] = [b, a];
    }
}

#[inline]
fn unit_and_length(d: Vec3) -> (Vec3, f32) {
    let len = d.norm();
    (if len > 1e-12 { d * (1.0 / len) } else { Vec3::ZERO }, len)
}

#[inline]
fn put(out: &mut [f32; EDGE_FEATURES], rest: (Vec3, f32), now: (Vec3, f32), dynamic: bool) {
    let strain = if rest.1 > 0.0 { now.1 / rest.1 - 1.0 } else { 0.0 };
    *out = [rest.0.x, rest.0.y, rest.0.z, rest.1, now.0.x, now.0.y, now.0.z, now.1, dynamic as u8 as f32, strain];
}

/// Edge features for the static edges and the dynamic `pairs`, in the
/// order of [`edge_endpoints`]. `out` needs [`edge_count`] rows.
pub fn edge_features(mesh: &Mesh, x: &[Vec3], pairs: &[[NodeId; 2]], radius: f32, out: &mut [[f32; EDGE_FEATURES]]) {
    let rest = mesh.rest();
    let mut k = 0;
    for e in mesh.edges() {
        let (a, b) = (e.a as usize, e.b as usize);
        let r = unit_and_length(rest[b] - rest[a]);
        let c = unit_and_length(x[b] - x[a]);
        put(&mut out[k], r, c, false);
        put(&mut out[k + 1], (-r.0, r.1), (-c.0, c.1), false);
        k += 2;
    }
    for &[a, b] in pairs {
        let c = unit_and_length(x[b as usize] - x[a as usize]);
        put(&mut out[k], (c.0, radius), c, true);
        put(&mut out[k + 1], (-c.0, radius), (-c.0, c.1), true);
        k += 2;
    }
}

/// Node features. `pinned[i] != 0` marks pinned nodes.
pub fn node_features(x: &[Vec3], v: &[Vec3], pinned: &[u8], out: &mut [[f32; NODE_FEATURES]]) {
    let n = x.len().max(1) as f32;
    let centroid = x.iter().fold(Vec3::ZERO, |acc, p| acc + *p) * (1.0 / n);
    for (((o, xi), vi), &p) in out.iter_mut().zip(x).zip(v).zip(pinned) {
        let d = *xi - centroid;
        *o = [vi.x, vi.y, vi.z, d.x, d.y, d.z, (p != 0) as u8 as f32];
    }
}
