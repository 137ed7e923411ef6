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

/// First index of every 3-vector among the node features (velocity,
/// position); the other features are scalars. A rotation of the scene
/// rotates exactly these.
pub const NODE_VECTORS: [usize; 2] = [0, 3];
/// First index of every 3-vector among the edge features (rest and current
/// direction).
pub const EDGE_VECTORS: [usize; 2] = [0, 4];

/// Number of directed edges for `pairs` dynamic pairs.
pub fn edge_count(mesh: &Mesh, pairs: usize) -> usize {
    2 * (mesh.edges().len() + pairs)
}

/// Sender and receiver of directed edge `k` (feature order); `None` past
/// the last edge.
#[inline]
pub fn endpoints_of(mesh: &Mesh, pairs: &[[NodeId; 2]], k: usize) -> Option<[NodeId; 2]> {
    let edges = mesh.edges();
    let [a, b] = match edges.get(k / 2) {
        Some(e) => [e.a, e.b],
        None => *pairs.get(k / 2 - edges.len())?,
    };
    Some(if k.is_multiple_of(2) { [a, b] } else { [b, a] })
}

/// Sender and receiver of every directed edge, in feature order.
pub fn edge_endpoints(mesh: &Mesh, pairs: &[[NodeId; 2]], out: &mut [[NodeId; 2]]) {
    for (k, o) in out.iter_mut().enumerate().take(edge_count(mesh, pairs.len())) {
        if let Some(e) = endpoints_of(mesh, pairs, k) {
            *o = e;
        }
    }
}

#[inline]
fn unit_and_length(d: Vec3) -> (Vec3, f32) {
    let len = d.norm();
    (if len > 1e-12 { d * (1.0 / len) } else { Vec3::ZERO }, len)
}

/// Features of the directed edge `s → r`; `rest` is the static edge's
/// rest mesh, `None` for a dynamic edge (rest length `radius`, rest
/// direction = current direction).
#[inline]
pub fn edge_feature(rest: Option<&[Vec3]>, x: &[Vec3], [s, r]: [NodeId; 2], radius: f32) -> [f32; EDGE_FEATURES] {
    let (s, r) = (s as usize, r as usize);
    let now = unit_and_length(x[r] - x[s]);
    let (rest, dynamic) = match rest {
        Some(rest) => (unit_and_length(rest[r] - rest[s]), false),
        None => ((now.0, radius), true),
    };
    let strain = if rest.1 > 0.0 { now.1 / rest.1 - 1.0 } else { 0.0 };
    [rest.0.x, rest.0.y, rest.0.z, rest.1, now.0.x, now.0.y, now.0.z, now.1, dynamic as u8 as f32, strain]
}

/// Features of directed edge `k` in feature order (`None` past the end).
#[inline]
pub fn edge_feature_at(
    mesh: &Mesh,
    x: &[Vec3],
    pairs: &[[NodeId; 2]],
    radius: f32,
    k: usize,
) -> Option<[f32; EDGE_FEATURES]> {
    let ends = endpoints_of(mesh, pairs, k)?;
    let rest = (k / 2 < mesh.edges().len()).then(|| mesh.rest());
    Some(edge_feature(rest, x, ends, radius))
}

/// Edge features for the static edges and the dynamic `pairs`, in the
/// order of [`edge_endpoints`]. `out` needs [`edge_count`] rows.
pub fn edge_features(mesh: &Mesh, x: &[Vec3], pairs: &[[NodeId; 2]], radius: f32, out: &mut [[f32; EDGE_FEATURES]]) {
    for (k, o) in out.iter_mut().enumerate() {
        match edge_feature_at(mesh, x, pairs, radius, k) {
            Some(f) => *o = f,
            None => break,
        }
    }
}

/// Mean position of the nodes (the origin of the node features).
pub fn centroid(x: &[Vec3]) -> Vec3 {
    let n = x.len().max(1) as f32;
    x.iter().fold(Vec3::ZERO, |acc, p| acc + *p) * (1.0 / n)
}

/// Features of one node given the cloth's [`centroid`].
#[inline]
pub fn node_feature(x: Vec3, v: Vec3, pinned: bool, centroid: Vec3) -> [f32; NODE_FEATURES] {
    let d = x - centroid;
    [v.x, v.y, v.z, d.x, d.y, d.z, pinned as u8 as f32]
}

/// Node features. `pinned[i] != 0` marks pinned nodes.
pub fn node_features(x: &[Vec3], v: &[Vec3], pinned: &[u8], out: &mut [[f32; NODE_FEATURES]]) {
    let c = centroid(x);
    for (((o, xi), vi), &p) in out.iter_mut().zip(x).zip(v).zip(pinned) {
        *o = node_feature(*xi, *vi, p != 0, c);
    }
}
