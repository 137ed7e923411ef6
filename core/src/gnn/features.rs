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
//! **Nodes**, [`NODE_FEATURES`] values, translation-invariant:
//! - velocity (3), position relative to the cloth's centroid (3), 1 for a
//!   pinned node;
//! - the nearest collider ([`Surroundings`]): its outward normal times the
//!   nearness `w` (3), and `w` itself, where `w = 1 − gap / r` clamped to
//!   `[0, 2]` (`gap` = the node's distance to the surface less the
//!   collider's thickness, `r` the network's radius): 0 for a collider
//!   farther than `r` (and for a scene without colliders), 1 for a node on
//!   its surface; the colliders enter the graph as the cloth's own nodes
//!   do, within the same radius;
//! - the material, the same at every node: `log10` of the areal density
//!   (kg/m²), of the stretch stiffness (N/m) and of the bending stiffness
//!   (N·m), and the Poisson ratio;
//! - the step's velocity change (3): the velocity after the physics step
//!   less the one it started from plus the wind's push over the step
//!   ([`crate::physics::state::State::start_velocities`]), the step's acceleration
//!   times its length, which tells the forces that acted on the node
//!   (contact, stretch, bending, gravity) apart from its motion;
//! - the history (3): the velocity the step started from less the one the
//!   step before started from ([`crate::physics::state::State::previous_start_velocities`]),
//!   the last frame's velocity change after its correction (0 on a state's
//!   first step and after its velocities are set without one);
//! - the air's velocity relative to the node (3), `air(t) − v`, zero in a
//!   scene without wind (whose step models no air).
//!
//! The wind's push over the step stays out of the velocity change: that
//! feature tells the forces the network cannot see apart from each other
//! (contact, stretch, bending, gravity), and the wind is seen by itself.
//!
//! Edge order: the static edges `a → b` then `b → a` for each mesh edge in
//! mesh order, then the dynamic pairs likewise in pair order.

use crate::math::Vec3;
use crate::mesh::{Mesh, NodeId};
use crate::model::{Collider, Material, Wind};

pub const NODE_FEATURES: usize = 24;
pub const EDGE_FEATURES: usize = 10;
/// The edge features that turn over with the edge's direction (the rest
/// and current directions); the others (lengths, the dynamic flag, the
/// strain) are the same both ways. Exactly: `x_s − x_r` is `−(x_r − x_s)`
/// in floating point, a vector's norm is its opposite's, and so the unit
/// vector of the one is the other's negated.
pub const TURNS_OVER: [bool; EDGE_FEATURES] = [true, true, true, false, true, true, true, false, false, false];
/// Node features of the first format (velocity, position, pinned): a
/// network that knows only these reads the others with zero weights.
pub const BASE_NODE_FEATURES: usize = 7;

/// Node features of the second format (the base ones, the nearest
/// collider, the material): a network that knows only these reads the
/// step's velocity change with zero weights.
pub const MATERIAL_NODE_FEATURES: usize = 15;

/// Node features of the third format (the second's and the step's
/// velocity change): a network that knows only these reads the history
/// and the air with zero weights.
pub const STEP_NODE_FEATURES: usize = 18;

/// Node features of a network without the air's velocity (all but the
/// last three).
pub const WINDLESS_NODE_FEATURES: usize = 21;

/// The history's first feature. The layouts before it (int8 format 5 and
/// float format 4 and earlier) had the air right after the step's velocity
/// change: [`historyless_column`] places their features.
pub const HISTORY: usize = STEP_NODE_FEATURES;

/// All node features of the layouts before the history (the air's last).
pub const HISTORYLESS_NODE_FEATURES: usize = NODE_FEATURES - 3;

/// Where node feature `k` of a layout without the history sits in this
/// one (the air moves three places on).
pub const fn historyless_column(k: usize) -> usize {
    if k < HISTORY {
        k
    } else {
        k + 3
    }
}

/// First index of every 3-vector among the node features (velocity,
/// position, collider normal, velocity change, history, air velocity); the
/// other features are scalars. A rotation of the scene rotates exactly
/// these.
pub const NODE_VECTORS: [usize; 6] = [0, 3, 7, 15, 18, 21];
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

/// The ends `[a, b]` of every mesh edge, then of every dynamic pair: edge
/// `m` of these is directed edges `2m` (`a → b`) and `2m + 1` (`b → a`).
#[inline]
pub fn undirected<'a>(mesh: &'a Mesh, pairs: &'a [[NodeId; 2]]) -> impl Iterator<Item = [NodeId; 2]> + 'a {
    mesh.edges().iter().map(|e| [e.a, e.b]).chain(pairs.iter().copied())
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

/// What the network sees of the world beside the cloth: the colliders and
/// the air at the state's time, and the material.
#[derive(Clone, Copy, Debug)]
pub struct Surroundings<'a> {
    pub colliders: &'a [Collider],
    /// Time of the state (s), where the colliders are.
    pub time: f32,
    /// The network's radius `r` (m): colliders farther than this are not
    /// seen.
    pub radius: f32,
    /// `log10` density, stretch and bending stiffness, and Poisson ratio.
    pub material: [f32; 4],
    /// The wind's air velocity at the state's time (`None`: no wind).
    pub air: Option<Vec3>,
}

impl<'a> Surroundings<'a> {
    pub fn new(
        colliders: &'a [Collider],
        wind: Option<&Wind>,
        time: f32,
        radius: f32,
        material: &Material,
    ) -> Surroundings<'a> {
        let log = |v: f32| crate::math::log10(v.max(f32::MIN_POSITIVE));
        Surroundings {
            colliders,
            time,
            radius,
            material: [log(material.density), log(material.stretch), log(material.bending), material.poisson],
            air: wind.map(|w| w.at(f64::from(time))),
        }
    }

    /// The nearest collider's outward normal and nearness `w` at `x`
    /// (zero without a collider within the radius).
    #[inline]
    pub fn nearest(&self, x: Vec3) -> (Vec3, f32) {
        let mut best = (Vec3::ZERO, f32::INFINITY);
        for c in self.colliders {
            let (d, n) = c.distance(x, self.time);
            let gap = d - c.thickness;
            if gap < best.1 {
                best = (n, gap);
            }
        }
        let w =
            if self.radius > 0.0 && best.1.is_finite() { (1.0 - best.1 / self.radius).clamp(0.0, 2.0) } else { 0.0 };
        (if w > 0.0 { best.0 * w } else { Vec3::ZERO }, w)
    }
}

/// A node's position `x`, velocity `v`, the velocity its step started
/// from, `v_start`, and the one the step before started from,
/// `v_start_prev`.
#[derive(Clone, Copy, Debug)]
pub struct NodeState {
    pub x: Vec3,
    pub v: Vec3,
    pub v_start: Vec3,
    pub v_start_prev: Vec3,
    pub pinned: bool,
}

/// Features of one node given the cloth's [`centroid`].
#[inline]
pub fn node_feature(node: NodeState, centroid: Vec3, s: &Surroundings) -> [f32; NODE_FEATURES] {
    let NodeState { x, v, v_start, v_start_prev, pinned } = node;
    let d = x - centroid;
    let (n, w) = s.nearest(x);
    let m = s.material;
    let a = v - v_start;
    let b = v_start - v_start_prev;
    let u = s.air.map_or(Vec3::ZERO, |air| air - v);
    [
        v.x,
        v.y,
        v.z,
        d.x,
        d.y,
        d.z,
        pinned as u8 as f32,
        n.x,
        n.y,
        n.z,
        w,
        m[0],
        m[1],
        m[2],
        m[3],
        a.x,
        a.y,
        a.z,
        b.x,
        b.y,
        b.z,
        u.x,
        u.y,
        u.z,
    ]
}

/// Node features. `pinned[i] != 0` marks pinned nodes; `v_start` holds
/// the velocities the step started from, `v_start_prev` those the step
/// before started from.
pub fn node_features(
    [x, v, v_start, v_start_prev]: [&[Vec3]; 4],
    pinned: &[u8],
    surroundings: &Surroundings,
    out: &mut [[f32; NODE_FEATURES]],
) {
    let c = centroid(x);
    let nodes = x.iter().zip(v).zip(v_start.iter().zip(v_start_prev)).zip(pinned);
    for (o, (((&x, &v), (&v_start, &v_start_prev)), &p)) in out.iter_mut().zip(nodes) {
        *o = node_feature(NodeState { x, v, v_start, v_start_prev, pinned: p != 0 }, c, surroundings);
    }
}
