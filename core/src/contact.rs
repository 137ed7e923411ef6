//! Proximity and contact.
//!
//! [`proximity`] is the one bounded spatial-hash search of the crate: node
//! pairs closer than a radius that share no static edge. It serves the
//! physics step's self-contact and, later, the network's dynamic edges.
//! The collider and self-contact responses act on the end-of-step state.

use crate::flags::{self, MAX_COLLIDERS};
use crate::math::Vec3;
use crate::mesh::{Mesh, NodeId};
use crate::model::{Collider, Shape};

/// Outcome of a proximity search.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Proximity {
    /// Pairs written to the output.
    pub pairs: usize,
    /// Pairs found that did not fit.
    pub dropped: usize,
}

/// Why a search could not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProximityError {
    /// Radius not finite and positive.
    BadRadius,
    /// Fewer than two hash cells, or `order` shorter than the positions.
    Storage,
    /// Positions and mesh disagree in length.
    Length,
}

impl core::fmt::Display for ProximityError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ProximityError::BadRadius => "the search radius is not finite and positive",
            ProximityError::Storage => "the search storage is too small",
            ProximityError::Length => "positions and mesh differ in length",
        })
    }
}

impl core::error::Error for ProximityError {}

#[inline]
fn cell_of(p: Vec3, inv: f32) -> [i32; 3] {
    [floor_i32(p.x * inv), floor_i32(p.y * inv), floor_i32(p.z * inv)]
}

/// `libm::floorf(x) as i32` for every `x` (saturating, NaN to 0) without
/// the library's floor: truncate (`as` saturates and maps NaN to 0), then
/// step down where that rounded a negative value up. Exact: below 2^24
/// the truncation converts back exactly, and from there every `f32` is
/// an integer. On the Cortex-M4F it takes a third of the instructions
/// the cell hash spent in `floorf`.
#[inline]
pub fn floor_i32(x: f32) -> i32 {
    let t = x as i32;
    if (t as f32) > x {
        t.saturating_sub(1)
    } else {
        t
    }
}

/// Bucket of a cell; `mask` is a power of two minus one.
#[inline]
fn bucket(c: [i32; 3], mask: u32) -> u32 {
    let h = (c[0] as u32).wrapping_mul(73_856_093)
        ^ (c[1] as u32).wrapping_mul(19_349_663)
        ^ (c[2] as u32).wrapping_mul(83_492_791);
    // Fold the high bits in: the multipliers leave the low bits weak.
    (h ^ (h >> 16)) & mask
}

/// Finds every node pair `(a, b)`, `a < b`, closer than `radius` with no
/// static edge between them. Pairs are written to `out` in ascending
/// `(a, b)` order; pairs past `out.len()` are counted as dropped. `cells`
/// (hash buckets + 1, any length ≥ 2; the largest power of two of buckets
/// that fits is used) and `order` (≥ nodes) are scratch.
/// Deterministic: the same input gives the same output on every target.
pub fn proximity(
    mesh: &Mesh,
    x: &[Vec3],
    radius: f32,
    cells: &mut [u32],
    order: &mut [NodeId],
    out: &mut [[NodeId; 2]],
) -> Result<Proximity, ProximityError> {
    if !(radius.is_finite() && radius > 0.0) {
        return Err(ProximityError::BadRadius);
    }
    let n = x.len();
    if n != mesh.node_count() {
        return Err(ProximityError::Length);
    }
    if cells.len() < 2 || order.len() < n {
        return Err(ProximityError::Storage);
    }
    // The largest power of two of buckets that fits.
    let avail = (cells.len() - 1).min(1 << 31) as u32;
    let mask = (1u32 << (31 - avail.leading_zeros())) - 1;
    // Cells twice the radius wide: a node's neighbours lie in the two
    // cells (per axis) its reach overlaps, 8 cells to look up instead of
    // 27. The reach is widened by a hundred-thousandth, more than any
    // rounding of the products, so no pair within the radius is missed.
    let inv = 0.5 / radius;
    let reach = radius * (1.0 + 1e-5);
    let span = Vec3::new(reach, reach, reach);
    let r2 = radius * radius;

    sort_by_bucket(x, inv, mask, cells, order);
    let mut found = Proximity::default();
    for (i, &pi) in x.iter().enumerate() {
        let (lo, hi) = (cell_of(pi - span, inv), cell_of(pi + span, inv));
        // At most three cells an axis, whatever the input (a radius so
        // small that its inverse overflows makes every product infinite).
        let hi = [0, 1, 2].map(|k| hi[k].clamp(lo[k], lo[k].saturating_add(2)));
        let first = found.pairs;
        for cx in lo[0]..=hi[0] {
            for cy in lo[1]..=hi[1] {
                for cz in lo[2]..=hi[2] {
                    let nc = [cx, cy, cz];
                    let b = bucket(nc, mask) as usize;
                    let start = if b == 0 { 0 } else { cells[b - 1] as usize };
                    for &j in &order[start..cells[b] as usize] {
                        let j = j as usize;
                        // A bucket may hold other cells' nodes (hash
                        // collisions, or two neighbour cells sharing it):
                        // take each node only from its own cell.
                        if j <= i || (x[j] - pi).norm2() >= r2 || cell_of(x[j], inv) != nc {
                            continue;
                        }
                        if mesh.has_edge(i as NodeId, j as NodeId) {
                            continue;
                        }
                        if found.pairs < out.len() {
                            out[found.pairs] = [i as NodeId, j as NodeId];
                            found.pairs += 1;
                        } else {
                            found.dropped += 1;
                        }
                    }
                }
            }
        }
        sort_few(&mut out[first..found.pairs]);
    }
    Ok(found)
}

/// Counting sort of the nodes by bucket: afterwards bucket `b` holds
/// `order[start(b)..cells[b]]` with `start(b) = cells[b − 1]` (0 for
/// `b = 0`).
fn sort_by_bucket(x: &[Vec3], inv: f32, mask: u32, cells: &mut [u32], order: &mut [NodeId]) {
    cells.fill(0);
    for p in x {
        cells[bucket(cell_of(*p, inv), mask) as usize + 1] += 1;
    }
    for b in 1..cells.len() {
        cells[b] += cells[b - 1];
    }
    for (i, p) in x.iter().enumerate() {
        let b = bucket(cell_of(*p, inv), mask) as usize;
        order[cells[b] as usize] = i as NodeId;
        cells[b] += 1;
    }
}

/// Sorts one node's pairs (a few dozen at most): an insertion sort, about
/// 7 KB less flash than `sort_unstable`'s sorting networks, same order.
fn sort_few(pairs: &mut [[NodeId; 2]]) {
    for k in 1..pairs.len() {
        let mut m = k;
        while m > 0 && pairs[m - 1] > pairs[m] {
            pairs.swap(m - 1, m);
            m -= 1;
        }
    }
}

/// Pushes nodes out of the colliders at time `t` and applies inelastic
/// normal response with Coulomb friction to their velocities (nodes the
/// step held by a contact constraint got theirs in the solve). Returns the
/// number of node contacts.
pub fn collide(colliders: &[Collider], t: f32, flags: &[u8], x: &mut [Vec3], v: &mut [Vec3]) -> usize {
    let mut contacts = 0;
    for c in colliders {
        for i in 0..x.len() {
            if flags::pinned(flags[i]) {
                continue;
            }
            let (d, n) = c.distance(x[i], t);
            if d >= c.thickness {
                continue;
            }
            contacts += 1;
            x[i] += n * (c.thickness - d);
            let rel = v[i] - c.velocity;
            let vn = rel.dot(n);
            if vn < 0.0 {
                v[i] = c.velocity + coulomb(rel - n * vn, c.friction * -vn);
            }
        }
    }
    contacts
}

/// Coulomb friction: the tangential velocity `vt` slowed by `slow` (the
/// friction coefficient times the normal velocity change of the contact),
/// stopped where it is smaller.
#[inline]
pub fn coulomb(vt: Vec3, slow: f32) -> Vec3 {
    let vt_len = vt.norm();
    if vt_len > slow {
        vt * (1.0 - slow / vt_len)
    } else {
        Vec3::ZERO
    }
}

/// Node–node self-contact on proximity pairs: pairs closer than `radius`
/// get equal and opposite impulses (mass-weighted, pinned nodes immovable)
/// so they stop approaching and separate at up to `½·(radius − d)/h`;
/// positions move with the velocity change (`Δx = h·Δv`). Momentum is
/// conserved between free nodes.
pub fn repel(
    pairs: &[[NodeId; 2]],
    radius: f32,
    h: f32,
    inv_mass: impl Fn(usize) -> f32,
    x: &mut [Vec3],
    v: &mut [Vec3],
) -> usize {
    let mut active = 0;
    for &[a, b] in pairs {
        let (a, b) = (a as usize, b as usize);
        let d = x[b] - x[a];
        let len = d.norm();
        if len >= radius || len <= 1e-12 {
            continue;
        }
        let (wa, wb) = (inv_mass(a), inv_mass(b));
        if wa + wb <= 0.0 {
            continue;
        }
        let n = d * (1.0 / len);
        let vn = (v[b] - v[a]).dot(n);
        let target = 0.5 * (radius - len) / h;
        if vn >= target {
            continue;
        }
        active += 1;
        let j = (target - vn) / (wa + wb);
        let (dva, dvb) = (n * (-j * wa), n * (j * wb));
        v[a] += dva;
        v[b] += dvb;
        x[a] += dva * h;
        x[b] += dvb * h;
    }
    active
}

/// Contact constraints for the implicit solve. A free node whose gap to a
/// collider at time `t`, less its approach over the step `h`
/// (`d + h·min(0, (v − v_c)·n) − thickness`), falls under `margin` is held
/// by its most constraining collider: flagged [`flags::CONTACT`] with the
/// collider's index, its normal in `normal`, and in `dv` the normal velocity
/// change that brings it onto the collider's surface (at the thickness) at
/// the end of the step. The solve then leaves that component fixed; nodes
/// the solution pulls away from the surface are released by the step.
///
/// A sphere or capsule that fits between nodes touches the inside of mesh
/// edges: an edge whose closest point (`β` inside the edge) has such a gap
/// holds both its free end nodes along the normal there, each brought to
/// the gap that puts the edge's contact point on the surface, unless the
/// node's own contact is closer. Returns the nodes held.
#[allow(clippy::too_many_arguments)]
pub fn constrain(
    mesh: &Mesh,
    colliders: &[Collider],
    t: f32,
    h: f32,
    margin: f32,
    x: &[Vec3],
    v: &[Vec3],
    flags: &mut [u8],
    normal: &mut [Vec3],
    dv: &mut [Vec3],
) -> usize {
    let colliders = &colliders[..colliders.len().min(MAX_COLLIDERS)];
    let mut held = 0;
    // `gap` of the constraint holding node `i`, if it is held.
    let held_gap = |f: u8, xi: Vec3, vi: Vec3, n: Vec3| {
        holder(colliders, f).map(|c| c.distance(xi, t).0 + h * (vi - c.velocity).dot(n).min(0.0) - c.thickness)
    };
    let hold = |i: usize, k: usize, n: Vec3, d: f32, flags: &mut [u8], normal: &mut [Vec3], dv: &mut [Vec3]| {
        let c = &colliders[k];
        flags[i] = flags::held_by(k);
        normal[i] = n;
        dv[i] = n * ((c.thickness - d) / h - (v[i] - c.velocity).dot(n));
    };
    for i in 0..x.len().min(flags.len()) {
        if flags::pinned(flags[i]) {
            continue;
        }
        let mut best: Option<(usize, f32, Vec3, f32)> = None;
        for (k, c) in colliders.iter().enumerate() {
            let (d, n) = c.distance(x[i], t);
            let gap = d + h * (v[i] - c.velocity).dot(n).min(0.0) - c.thickness;
            if gap < margin && best.is_none_or(|b| gap < b.1) {
                best = Some((k, gap, n, d));
            }
        }
        if let Some((k, _, n, d)) = best {
            hold(i, k, n, d, flags, normal, dv);
            held += 1;
        }
    }
    for (k, c) in colliders.iter().enumerate() {
        if matches!(c.shape, Shape::Plane { .. }) {
            continue;
        }
        for e in mesh.edges() {
            let (a, b) = (e.a as usize, e.b as usize);
            let Some((d, n, beta)) = c.segment_distance_inside(x[a], x[b], t, EDGE_END) else { continue };
            if d - c.thickness >= margin + (v[a] - v[b]).norm() * h {
                continue;
            }
            let vp = v[a] + (v[b] - v[a]) * beta - c.velocity;
            let gap = d + h * vp.dot(n).min(0.0) - c.thickness;
            if gap >= margin {
                continue;
            }
            // The contact point's normal distance is shared by both ends.
            for i in [a, b] {
                if flags::pinned(flags[i]) {
                    continue;
                }
                let own = held_gap(flags[i], x[i], v[i], normal[i]);
                if own.is_some_and(|g| g <= gap) {
                    continue;
                }
                if own.is_none() {
                    held += 1;
                }
                hold(i, k, n, d, flags, normal, dv);
            }
        }
    }
    held
}

/// Edge contacts closer to an end than this fraction of the edge are the
/// end node's.
const EDGE_END: f32 = 1e-3;

/// The collider holding node flags `f`, if any.
#[inline]
pub fn holder(colliders: &[Collider], f: u8) -> Option<&Collider> {
    colliders.get(flags::collider(f)?)
}

/// Conservative advancement of a motion from `s = 0` to `s = 1` towards a
/// collider: `gap(s)` is the distance less the thickness at `s`, `lip` a
/// bound on how fast it can fall per unit `s`. Returns the first `s` at
/// which the gap closes (within `tol`), or `None` when the motion stays
/// clear. Bounded: after `SWEEP_ITERATIONS` advances the last `s` is
/// taken as the hit.
fn advance(lip: f32, tol: f32, gap: impl FnMut(f32) -> f32) -> Option<f32> {
    advance_from(None, lip, tol, gap)
}

/// [`advance`] with `gap(0)` already known as `first` (when given).
fn advance_from(first: Option<f32>, lip: f32, tol: f32, mut gap: impl FnMut(f32) -> f32) -> Option<f32> {
    if !(lip > 0.0) {
        return None;
    }
    let mut s = 0.0;
    let mut first = first;
    for _ in 0..SWEEP_ITERATIONS {
        let g = first.take().unwrap_or_else(|| gap(s));
        if !(g > tol) {
            return Some(s);
        }
        s += g / lip;
        if s >= 1.0 {
            return if gap(1.0) > tol { None } else { Some(1.0) };
        }
    }
    Some(s)
}

/// Advances of the swept test before it stops at the last safe point.
pub const SWEEP_ITERATIONS: u32 = 24;

/// One step's motion, for the swept contact tests: the colliders from time
/// `t` over the step `h`, the gap `tol` under which a motion counts as
/// touching, the node flags and the positions `x0` at the start.
#[derive(Clone, Copy)]
pub struct StepMotion<'s> {
    pub colliders: &'s [Collider],
    pub t: f32,
    pub h: f32,
    pub tol: f32,
    pub flags: &'s [u8],
    pub x0: &'s [Vec3],
}

/// Swept node test: a free node that starts clear of a collider (gap above
/// `tol`) and whose straight path from `x0` to `x1` over the step `h`
/// (collider moving with it, from time `t`) touches the collider is stopped
/// at the first touch; the rest of its motion relative to the collider
/// continues in the tangent plane there, and its approaching normal
/// velocity is removed. Catches nodes that would tunnel through a thin
/// collider within one step. Returns the nodes stopped.
pub fn sweep_nodes(m: &StepMotion, x1: &mut [Vec3], v: &mut [Vec3]) -> usize {
    let StepMotion { colliders, t, h, tol, flags, x0 } = *m;
    let mut hits = 0;
    for c in colliders {
        let carry = c.velocity * h;
        for i in 0..x1.len().min(x0.len()) {
            if flags::pinned(flags[i]) {
                continue;
            }
            let (a, b) = (x0[i], x1[i]);
            let lip = (b - a - carry).norm();
            let at = |s: f32| a + (b - a) * s;
            let Some(s) = advance(lip, tol, |s| c.distance(at(s), t + s * h).0 - c.thickness) else { continue };
            if s <= 0.0 && c.distance(a, t).0 - c.thickness <= tol {
                // Started in contact: left to the constraint and projection.
                continue;
            }
            let (_, n) = c.distance(at(s), t + s * h);
            let rest = (b - a - carry) * (1.0 - s);
            x1[i] = at(s) + carry * (1.0 - s) + rest - n * rest.dot(n).min(0.0);
            let vn = (v[i] - c.velocity).dot(n);
            if vn < 0.0 {
                v[i] -= n * vn;
            }
            hits += 1;
        }
    }
    hits
}

/// Contact of a collider with the inside of a mesh edge (where a sphere or
/// capsule fits between nodes): the edge's closest point is kept outside
/// the collider, swept over the step and at its end, by moving both end
/// nodes (weights `1 − β`, `β` at the contact point `β`); the point's
/// approaching normal velocity is removed, its tangential velocity reduced
/// by Coulomb friction with that impulse. `x0` are the positions at the
/// start of the step (time `t`), `x1` and `v` the end state. Edges whose
/// contact point is an end node are left to the node contacts. Returns
/// the edge contacts.
pub fn collide_edges(mesh: &Mesh, m: &StepMotion, x1: &mut [Vec3], v: &mut [Vec3]) -> usize {
    let StepMotion { colliders, t, h, tol, flags, x0 } = *m;
    let mut contacts = 0;
    for c in colliders {
        if matches!(c.shape, Shape::Plane { .. }) {
            continue;
        }
        let carry = c.velocity * h;
        let t1 = t + h;
        for e in mesh.edges() {
            let (a, b) = (e.a as usize, e.b as usize);
            let (free_a, free_b) = (!flags::pinned(flags[a]), !flags::pinned(flags[b]));
            if !(free_a || free_b) {
                continue;
            }
            let (a0, b0, a1, b1) = (x0[a], x0[b], x1[a], x1[b]);
            let half = 0.5 * (b1 - a1).norm().max((b0 - a0).norm());
            let lip = (a1 - a0 - carry).norm().max((b1 - b0 - carry).norm());
            // Far from the collider all step long: no edge point can touch.
            if c.distance(a0, t).0.min(c.distance(b0, t).0) - half - lip > c.thickness + tol {
                continue;
            }
            let lerp = |p: Vec3, q: Vec3, s: f32| p + (q - p) * s;
            let at = |s: f32| (lerp(a0, a1, s), lerp(b0, b1, s));
            let gap0 = c.segment_distance(a0, b0, t).0 - c.thickness;
            // `gap0` is the sweep's gap at 0 where the ends' motion is
            // finite (there `at(0)` is the start, to the bit).
            let first = (lip.is_finite() && h.is_finite()).then_some(gap0);
            // The contact: swept (first touch) for an edge that starts
            // clear, else the end state's closest point.
            let (n, beta, push) = match advance_from(first, lip, tol, |s| {
                let (p, q) = at(s);
                c.segment_distance(p, q, t + s * h).0 - c.thickness
            }) {
                Some(s) if gap0 > tol && s > 0.0 => {
                    let (p, q) = at(s);
                    let (_, n, beta) = c.segment_distance(p, q, t + s * h);
                    let hit = lerp(p, q, beta) + carry * (1.0 - s);
                    (n, beta, n.dot(hit - lerp(a1, b1, beta)).max(0.0))
                }
                _ => {
                    let (d, n, beta) = c.segment_distance(a1, b1, t1);
                    (n, beta, (c.thickness - d).max(0.0))
                }
            };
            if !(beta > EDGE_END && beta < 1.0 - EDGE_END) || !(push > 0.0 || gap0 <= tol) {
                continue;
            }
            let wa = if free_a { 1.0 - beta } else { 0.0 };
            let wb = if free_b { beta } else { 0.0 };
            let w2 = wa * wa + wb * wb;
            let point_v = lerp(v[a], v[b], beta) - c.velocity;
            let vn = point_v.dot(n);
            if push <= 0.0 && vn >= 0.0 {
                continue;
            }
            contacts += 1;
            // Position: the contact point moves `push` along n.
            x1[a] += n * (push * wa / w2);
            x1[b] += n * (push * wb / w2);
            if vn < 0.0 {
                let vt = point_v - n * vn;
                let dv = coulomb(vt, c.friction * -vn) - point_v;
                v[a] += dv * (wa / w2);
                v[b] += dv * (wb / w2);
            }
        }
    }
    contacts
}
