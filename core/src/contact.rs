//! Proximity and contact.
//!
//! [`proximity`] is the one bounded spatial-hash search of the crate: node
//! pairs closer than a radius that share no static edge. It serves the
//! physics step's self-contact and, later, the network's dynamic edges.
//! The collider and self-contact responses act on the end-of-step state.

use crate::math::Vec3;
use crate::mesh::{Mesh, NodeId};
use crate::model::Collider;

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

#[inline]
fn cell_of(p: Vec3, inv: f32) -> [i32; 3] {
    // `as` saturates and maps NaN to 0: any input gives a valid cell.
    [libm::floorf(p.x * inv) as i32, libm::floorf(p.y * inv) as i32, libm::floorf(p.z * inv) as i32]
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
    let inv = 1.0 / radius;
    let r2 = radius * radius;

    // Counting sort of nodes by bucket: afterwards bucket b holds
    // order[start(b)..cells[b]] with start(b) = cells[b - 1] (0 for b = 0).
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

    let mut found = Proximity::default();
    for (i, &pi) in x.iter().enumerate() {
        let c = cell_of(pi, inv);
        let first = found.pairs;
        for dx in -1..=1 {
            for dy in -1..=1 {
                for dz in -1..=1 {
                    let nc = [c[0].wrapping_add(dx), c[1].wrapping_add(dy), c[2].wrapping_add(dz)];
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
        out[first..found.pairs].sort_unstable();
    }
    Ok(found)
}

/// Pushes nodes out of the colliders at time `t` and applies inelastic
/// normal response with Coulomb friction to their velocities. Returns the
/// number of node contacts.
pub fn collide(colliders: &[Collider], t: f32, pinned: &[u8], x: &mut [Vec3], v: &mut [Vec3]) -> usize {
    let mut contacts = 0;
    for c in colliders {
        for i in 0..x.len() {
            if pinned[i] != 0 {
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
                let vt = rel - n * vn;
                let vt_len = vt.norm();
                let keep = if vt_len > 0.0 { (1.0 - c.friction * (-vn) / vt_len).max(0.0) } else { 0.0 };
                v[i] = c.velocity + vt * keep;
            }
        }
    }
    contacts
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
