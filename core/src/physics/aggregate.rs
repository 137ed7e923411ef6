//! The multigrid preconditioner on meshes that are not grids: aggregates
//! from the mesh's graph.
//!
//! - **Coarse spaces.** Level `l + 1` pairs the nodes of level `l` along
//!   its edges (greedy matching in edge order; a node left unpaired joins
//!   the pair of a neighbour), then pairs those pairs the same way:
//!   aggregates of about four nodes, as the grid's boxes, and every one of
//!   two nodes or more, so each level has at most half the nodes of the
//!   one below and the storage is bounded by the mesh's counts alone
//!   ([`floats`]); the levels are laid out at their actual sizes, so a
//!   smaller pool often holds them. Prolongation is piecewise constant, as
//!   on the grid.
//!   Coarsening stops at [`COARSEST`] nodes or fewer. A mesh of several
//!   pieces (a garment's panels not sewn, a stray vertex) coarsens each
//!   piece down to one aggregate, which then stays alone; coarsening ends
//!   at the first level that does not shrink (or does not fit the pool),
//!   the level below becoming the coarsest, solved densely if its factor
//!   fits.
//! - **Rigid aggregates** (a curved rest mesh by default,
//!   [`crate::model::CoarseSpace`]): each aggregate moves as a rigid body,
//!   `u_i = t_a + θ_a × (x_i − c_a) / ρ_a` (`c_a` its centre at rest, `ρ_a`
//!   its radius), a translation node and a rotation node on every coarse
//!   level, the nodes of each level below joining their aggregate's pair
//!   with their lever arms. A curved membrane's slow modes turn with the
//!   surface; translations alone correct them slowly (a tube 51 → 31 CG
//!   iterations a step, a T-shirt 82 → 60). Above the first level a
//!   rotation node's unknown is its aggregate's radius times the rate, so
//!   that the aggregates of an aggregate turn together as one body. The
//!   same 3 × 3 blocks, about twice the storage ([`rigid_floats`]).
//! - **Coarse operators.** Galerkin products `Pᵀ A P` of the fine blocks
//!   (diagonal, edge and mass, filtered by the pins and contact planes; a
//!   node held on a plane keeps its normal stiffness on the diagonal, as
//!   the fine smoother's block does: [`prefiltered`]),
//!   assembled at each solve into compressed rows (both directions of
//!   every coupling stored). The matrix-free bending of such meshes is
//!   left to the fine level's smoother.
//! - **Cycle.** As on the grid ([`super::multigrid`]): the fine level's
//!   damped block Jacobi before and after, symmetric block Gauss–Seidel on
//!   the coarse levels, a dense Cholesky factor on the coarsest; so the
//!   cycle is a symmetric positive definite preconditioner.

use super::blocks::{block_sub, diagonal_term};
use super::multigrid::{
    cholesky, cholesky_solve, dense_add, filtered, node_filter, Coarse, Filter, FineLevel, FineOperator,
};
use crate::math::{Mat3, Vec3};
use crate::mesh::{Mesh, MeshCounts};

/// Coarsening stops at a level of at most this many nodes.
pub const COARSEST: usize = 8;
/// Most coarse levels.
pub const MAX_LEVELS: usize = 16;
const NONE: u32 = u32::MAX;

/// Nodes of coarse level `l` at most (level 0: the mesh): on a rigid
/// hierarchy two an aggregate ([`Aggregates::rigid`]).
const fn bound(nodes: usize, l: usize, rigid: bool) -> usize {
    if rigid && l > 0 {
        2 * (nodes >> l)
    } else {
        nodes >> l
    }
}

/// Stored couplings (both directions, before duplicates are merged) of
/// coarse level `l` at most: every level of translations has at most the
/// mesh's edges; a rigid level couples the two nodes of each aggregate
/// and all four of each pair of neighbouring aggregates.
const fn entries(counts: MeshCounts, l: usize, rigid: bool) -> usize {
    if !rigid {
        return 2 * counts.edges;
    }
    let n = bound(counts.nodes, l, true);
    let e = 8 * counts.edges + n;
    if e < n * n {
        e
    } else {
        n * n
    }
}

/// Coarse levels of a mesh of these counts at most.
const fn levels(counts: MeshCounts, rigid: bool) -> usize {
    let mut l = 0;
    while l < MAX_LEVELS && bound(counts.nodes, l, rigid) > COARSEST && bound(counts.nodes, l + 1, false) > 0 {
        l += 1;
    }
    l
}

/// The `f32`s of storage the hierarchy of a non-grid mesh takes (none for
/// a grid, whose multigrid is [`super::multigrid`]).
pub const fn floats(counts: MeshCounts) -> usize {
    floats_of(counts, false)
}

/// The same for the rigid hierarchy a curved mesh builds where there is
/// room ([`Aggregates::rigid`]).
pub const fn rigid_floats(counts: MeshCounts) -> usize {
    floats_of(counts, true)
}

const fn floats_of(counts: MeshCounts, rigid: bool) -> usize {
    if counts.grid.is_some() || counts.nodes == 0 {
        return 0;
    }
    let levels = levels(counts, rigid);
    if levels == 0 {
        return 0;
    }
    // The coarsest level: the last one bounded, or an earlier one of at
    // most COARSEST nodes where coarsening stopped.
    let last = bound(counts.nodes, levels, rigid);
    let m = 3 * if last > COARSEST { last } else { COARSEST };
    offset(counts, levels + 1, rigid) + m * (m + 1) / 2
}

/// One coarse level's storage, carved out of the pool when used.
struct Level<'a> {
    /// Of each node of the level below, its aggregate here.
    parent: &'a mut [u32],
    /// Compressed rows: row `p`'s couplings are `start[p]..start[p + 1]`.
    start: &'a mut [u32],
    cols: &'a mut [u32],
    /// Diagonal blocks (inverted after assembly) and couplings `A_pq`.
    diag: &'a mut [Mat3],
    off: &'a mut [Mat3],
    x: &'a mut [Vec3],
    r: &'a mut [Vec3],
    /// A rigid level's ([`Aggregates::rigid`]): of each node of the level
    /// below, its lever arm about its aggregate's centre over the
    /// aggregate's radius (for a rotation node, `x` the ratio of its own
    /// aggregate's radius to that one's), and each aggregate's centre and
    /// radius (at rest). Empty on a level of translations alone.
    arm: &'a mut [Vec3],
    centre: &'a mut [Vec3],
    radius: &'a mut [f32],
}

/// The `f32`s of a level of `n` nodes and `entries` couplings over a
/// level of `below` nodes (`rigid`: with the lever arms and centres).
const fn region(below: usize, n: usize, entries: usize, rigid: bool) -> usize {
    // parents of the level below, row starts, columns, diagonal and
    // coupling blocks, x and r; lever arms and centres.
    below + (n + 1) + entries + 9 * n + 9 * entries + 6 * n + if rigid { 3 * below + 4 * (n / 2) } else { 0 }
}

/// The worst case of the pool before coarse level `l` (the bounds on each
/// level's nodes and couplings).
const fn offset(counts: MeshCounts, l: usize, rigid: bool) -> usize {
    let mut o = 0;
    let mut k = 1;
    while k < l {
        let (below, n) = (bound(counts.nodes, k - 1, rigid), bound(counts.nodes, k, rigid));
        o += region(below, n, entries(counts, k, rigid), rigid);
        k += 1;
    }
    o
}

/// A level's views of its storage `pool` (at least [`region`] long).
fn carve(pool: &mut [f32], below: usize, n: usize, entries: usize, rigid: bool) -> Level<'_> {
    let (parent, rest) = pool.split_at_mut(below);
    let (start, rest) = rest.split_at_mut(n + 1);
    let (cols, rest) = rest.split_at_mut(entries);
    let (diag, rest) = rest.split_at_mut(9 * n);
    let (off, rest) = rest.split_at_mut(9 * entries);
    let (x, rest) = rest.split_at_mut(3 * n);
    let (r, rest) = rest.split_at_mut(3 * n);
    let (arm, rest) = rest.split_at_mut(if rigid { 3 * below } else { 0 });
    let (centre, rest) = rest.split_at_mut(if rigid { 3 * (n / 2) } else { 0 });
    let radius = &mut rest[..if rigid { n / 2 } else { 0 }];
    Level {
        parent: bytemuck::cast_slice_mut(parent),
        start: bytemuck::cast_slice_mut(start),
        cols: bytemuck::cast_slice_mut(cols),
        diag: bytemuck::cast_slice_mut(diag),
        off: bytemuck::cast_slice_mut(off),
        x: bytemuck::cast_slice_mut(x),
        r: bytemuck::cast_slice_mut(r),
        arm: bytemuck::cast_slice_mut(arm),
        centre: bytemuck::cast_slice_mut(centre),
        radius,
    }
}

/// The aggregation hierarchy, its storage one caller-provided pool laid
/// out level after level at their actual sizes (the struct itself holds
/// only sizes and offsets, so a state carries it at little cost).
pub struct Aggregates<'a> {
    pool: &'a mut [f32],
    /// Coarse levels in use; each level's nodes and couplings (level 0:
    /// the mesh) and where its storage starts (the dense coarsest factor
    /// at `at[levels + 1]`).
    levels: usize,
    shapes: [[u32; 2]; MAX_LEVELS + 1],
    at: [u32; MAX_LEVELS + 2],
    omega: f32,
    /// Each aggregate moves rigidly: a translation node (even index) and
    /// a rotation node (odd) on every coarse level ([`Aggregates::rigid`]).
    rigid: bool,
}

/// The hierarchy of `mesh` in `pool`, of translations alone or `rigid`.
fn build<'p>(mesh: &Mesh, pool: &'p mut [f32], rigid: bool) -> Option<Aggregates<'p>> {
    let counts = mesh.counts();
    if counts.grid.is_some() || levels(counts, rigid) == 0 {
        return None;
    }
    let mut agg = Aggregates {
        pool,
        levels: 0,
        shapes: [[0; 2]; MAX_LEVELS + 1],
        at: [0; MAX_LEVELS + 2],
        omega: super::multigrid::OMEGA_BENDING,
        rigid,
    };
    agg.shapes[0] = [counts.nodes as u32, 2 * counts.edges as u32];
    for l in 1..=levels(counts, rigid) {
        // A level that does not shrink (a mesh of several pieces, each
        // one aggregate) or does not fit ends the coarsening: the level
        // below is the coarsest.
        let Some((shape, end)) = agg.coarsen(mesh, l) else { break };
        if shape[0] >= agg.shapes[l - 1][0] {
            break;
        }
        (agg.shapes[l], agg.at[l + 1], agg.levels) = (shape, end as u32, l);
        if rigid {
            agg.place(mesh, l);
        }
        if shape[0] as usize <= COARSEST {
            break;
        }
    }
    let m = 3 * agg.nodes(agg.levels);
    let room = agg.pool.len().saturating_sub(agg.at[agg.levels + 1] as usize);
    (agg.levels > 0 && room >= m * (m + 1) / 2).then_some(agg)
}

impl<'a> Aggregates<'a> {
    /// The hierarchy of `mesh` in `pool`: `None` for a grid, a mesh too
    /// small to coarsen, or a pool too small for the hierarchy this mesh
    /// makes ([`floats`] is enough for any mesh of its counts; a smaller
    /// pool holds many). `rigid`: the rigid hierarchy where the pool holds
    /// it ([`rigid_floats`]), else translations alone.
    pub fn new(mesh: &Mesh, rigid: bool, pool: &'a mut [f32]) -> Option<Aggregates<'a>> {
        let rigid = rigid && build(mesh, &mut *pool, true).is_some();
        build(mesh, pool, rigid)
    }

    pub fn levels(&self) -> usize {
        self.levels
    }

    /// Whether every aggregate moves rigidly, in translation and rotation
    /// about its centre at rest, `u_i = t_a + θ_a × (x_i − c_a)` (the
    /// rotations' unknowns scaled by the aggregate's radius): what a curved
    /// mesh's slow modes are made of, where translations alone leave a
    /// tube's or a garment's solve at 50–80 iterations. Else piecewise
    /// constant translations, as on the grid.
    pub fn rigid(&self) -> bool {
        self.rigid
    }

    /// The `f32`s of its pool this hierarchy fills: the levels and the
    /// coarsest level's dense factor. Any pool at least this long builds
    /// the same hierarchy, which is how a board sizes its state for a
    /// mesh below the bound [`floats`].
    pub fn floats_used(&self) -> usize {
        let m = 3 * self.nodes(self.levels);
        self.at[self.levels + 1] as usize + m * (m + 1) / 2
    }

    fn nodes(&self, l: usize) -> usize {
        self.shapes[l][0] as usize
    }

    /// Level `l`'s storage as a slice of `pool`, and its sizes.
    fn level_of(&self, l: usize) -> (usize, usize, [usize; 3]) {
        let sizes = [self.nodes(l - 1), self.nodes(l), self.shapes[l][1] as usize];
        (self.at[l] as usize, self.at[l + 1] as usize, sizes)
    }

    /// Level `l − 1` (none for the mesh), level `l`, and the dense
    /// coarsest factor's storage.
    fn parts(&mut self, l: usize) -> (Option<Level<'_>>, Level<'_>, &mut [f32]) {
        let (dense_at, rigid) = (self.at[self.levels + 1] as usize, self.rigid);
        let (start, end, [b, n, e]) = self.level_of(l);
        let below = (l > 1).then(|| self.level_of(l - 1));
        let (lower, upper) = self.pool.split_at_mut(start);
        let (mine, rest) = upper.split_at_mut(end - start);
        let dense = &mut rest[dense_at.saturating_sub(end)..];
        let below = below.map(|(s, _, [bb, bn, be])| carve(&mut lower[s..], bb, bn, be, rigid));
        (below, carve(mine, b, n, e, rigid), dense)
    }

    /// Level `l` and level `l + 1`.
    fn pair_of_levels(&mut self, l: usize) -> (Level<'_>, Level<'_>) {
        let ((s, e, [b, n, c]), (_, e2, [b2, n2, c2])) = (self.level_of(l), self.level_of(l + 1));
        let (first, second) = self.pool[s..e2].split_at_mut(e - s);
        (carve(first, b, n, c, self.rigid), carve(second, b2, n2, c2, self.rigid))
    }

    /// Aggregates level `l − 1` into level `l`, lays out its rows at the
    /// end of the storage so far, and returns its shape and where its
    /// storage ends.
    fn coarsen(&mut self, mesh: &Mesh, l: usize) -> Option<([u32; 2], usize)> {
        let (below_n, at, rigid) = (self.nodes(l - 1), self.at[l] as usize, self.rigid);
        let below = (l > 1).then(|| self.level_of(l - 1));
        let (lower, upper) = self.pool.split_at_mut(at);
        let below = below.map(|(s, _, [bb, bn, be])| carve(&mut lower[s..], bb, bn, be, rigid));
        let graph = Graph { mesh, below: below.as_ref(), n: below_n, pairs: rigid && l > 1 };
        let (parent, rest) = upper.split_at_mut_checked(below_n)?;
        let parent: &mut [u32] = bytemuck::cast_slice_mut(parent);
        let m = aggregate(&graph, parent, bytemuck::cast_slice_mut(&mut *rest))?;
        let n = if rigid { 2 * m } else { m };
        // The rows: counted, filled and merged in the storage after the
        // parents, then the blocks and vectors after the merged columns.
        let (start, rest) = rest.split_at_mut_checked(n + 1)?;
        let entries = rows(&graph, n, rigid, parent, bytemuck::cast_slice_mut(start), rest)?;
        let end = at + region(below_n, n, entries, rigid);
        (end <= self.pool.len()).then_some(([n as u32, entries as u32], end))
    }

    /// A rigid level `l`'s aggregate centres (the mean rest position of
    /// their translation nodes below) and the lever arms of the nodes
    /// below over their aggregate's radius (its nodes' root mean square
    /// distance from the centre).
    fn place(&mut self, mesh: &Mesh, l: usize) {
        let (below, lv, _) = self.parts(l);
        let Level { parent, centre, radius, arm, x: tally, .. } = lv;
        let at = |i: usize| match &below {
            None => mesh.rest().get(i).copied(),
            Some(b) => b.centre.get(i / 2).copied().filter(|_| i.is_multiple_of(2)),
        };
        centre.fill(Vec3::ZERO);
        tally.fill(Vec3::ZERO);
        for (i, &a) in parent.iter().enumerate() {
            if let (Some(x), Some(c), Some(t)) = (at(i), centre.get_mut(a as usize), tally.get_mut(a as usize)) {
                *c += x;
                t.x += 1.0;
            }
        }
        for (c, t) in centre.iter_mut().zip(tally.iter()) {
            *c = *c * (1.0 / t.x.max(1.0));
        }
        for (i, &a) in parent.iter().enumerate() {
            if let (Some(x), Some(c), Some(t)) = (at(i), centre.get(a as usize), tally.get_mut(a as usize)) {
                t.y += (x - *c).norm2();
            }
        }
        for (r, t) in radius.iter_mut().zip(tally.iter()) {
            *r = crate::math::sqrt(t.y / t.x.max(1.0));
        }
        for (i, (&a, m)) in parent.iter().zip(arm.iter_mut()).enumerate() {
            let (c, r) = (centre.get(a as usize).copied(), radius.get(a as usize).copied().unwrap_or(0.0));
            *m = match (at(i), c, &below) {
                (Some(x), Some(c), _) if r > 0.0 => (x - c) * (1.0 / r),
                // A rotation node turns its aggregate as the one above
                // turns: its unknown is its own radius times the rate.
                (None, _, Some(b)) if r > 0.0 => Vec3::new(b.radius.get(i / 2).map_or(0.0, |rb| rb / r), 0.0, 0.0),
                _ => Vec3::ZERO,
            };
        }
    }

    /// Assembles every coarse operator of the fine operator `op` (its
    /// bending left to the fine smoother), factorises the coarsest and
    /// inverts the other levels' diagonal blocks (their smoother's).
    pub fn assemble(&mut self, mesh: &Mesh, op: &FineOperator) {
        self.omega = op.omega;
        for l in 1..=self.levels {
            self.assemble_level(mesh, op, l);
        }
        let rigid = self.rigid;
        for l in 1..self.levels {
            let n = self.nodes(l);
            let (_, lv, _) = self.parts(l);
            for (p, d) in lv.diag[..n].iter_mut().enumerate() {
                if rigid && p % 2 == 1 {
                    // An aggregate of two nodes (or one) does not turn
                    // about their line: that rotation is held.
                    let t = d.c[0].x + d.c[1].y + d.c[2].z;
                    *d += Mat3::scale(TURN_HELD * t);
                }
                *d = d.inverse().unwrap_or(Mat3::ZERO);
            }
        }
        let m = 3 * self.nodes(self.levels);
        let (_, _, dense) = self.parts(self.levels);
        cholesky(dense, m);
    }

    /// `Pᵀ A_{l−1} P` into level `l` (the dense coarsest on the last).
    fn assemble_level(&mut self, mesh: &Mesh, op: &FineOperator, l: usize) {
        let (n, entries, last, below_n) =
            (self.nodes(l), self.shapes[l][1] as usize, l == self.levels, self.nodes(l - 1));
        let rigid = self.rigid;
        let (below, lv, dense) = self.parts(l);
        let Level { parent, start, cols, diag, off, arm, .. } = lv;
        let basis = |p: usize| Basis::of(rigid, below.is_some() && p % 2 == 1, arm.get(p).copied());
        let mut sink = Sink { n, last, start, cols, diag, off, dense };
        sink.clear(n, entries);
        match &below {
            None => {
                for (i, &p) in parent.iter().enumerate().take(mesh.node_count()) {
                    let fi = node_filter(op.flags, op.normal, i);
                    let d = prefiltered(op.diag[i] * op.c + Mat3::scale((op.mass)(i)), fi);
                    sink.add_diag(p as usize, basis(i), d);
                }
                for (e, b) in mesh.edges().iter().zip(op.off) {
                    let (a, bn) = (e.a as usize, e.b as usize);
                    let fb =
                        filtered(*b * op.c, node_filter(op.flags, op.normal, a), node_filter(op.flags, op.normal, bn));
                    sink.add_pair((parent[a] as usize, basis(a)), (parent[bn] as usize, basis(bn)), fb);
                }
            }
            Some(b) => {
                for p in 0..below_n {
                    sink.add_diag(parent[p] as usize, basis(p), b.diag[p]);
                    for k in b.start[p] as usize..b.start[p + 1] as usize {
                        let q = b.cols[k] as usize;
                        if p < q {
                            sink.add_pair((parent[p] as usize, basis(p)), (parent[q] as usize, basis(q)), b.off[k]);
                        }
                    }
                }
            }
        }
    }

    /// `z = B r`: one V-cycle for the fine residual `r` (filtered) on the
    /// fine operator `fine_op`, with `t` a fine scratch vector.
    pub fn cycle(&mut self, fine_op: &impl FineLevel, r: &[Vec3], z: &mut [Vec3], t: &mut [Vec3]) {
        z.fill(Vec3::ZERO);
        fine_op.smooth(self.omega, r, z);
        fine_op.apply(z, t);
        let (n1, rigid) = (self.nodes(1), self.rigid);
        {
            let (_, first, _) = self.parts(1);
            first.r[..n1].fill(Vec3::ZERO);
            for (i, (ri, ti)) in r.iter().zip(t.iter()).enumerate() {
                let a = first.parent[i] as usize;
                if rigid {
                    Basis::of(true, false, first.arm.get(i).copied()).restrict(first.r, a, *ri - *ti);
                } else {
                    first.r[a] += *ri - *ti;
                }
            }
        }
        self.coarse(1);
        {
            let (_, first, _) = self.parts(1);
            for (i, zi) in z.iter_mut().enumerate() {
                let a = first.parent[i] as usize;
                *zi += if rigid {
                    Basis::of(true, false, first.arm.get(i).copied()).prolong(first.x, a)
                } else {
                    first.x[a]
                };
            }
        }
        fine_op.filter(z);
        fine_op.apply(z, t);
        for (ti, ri) in t.iter_mut().zip(r) {
            *ti = *ri - *ti;
        }
        fine_op.smooth(self.omega, t, z);
    }

    /// `x_l = B_l r_l` on coarse level `l`: symmetric block Gauss–Seidel
    /// about the correction from level `l + 1`, or the dense solve on the
    /// coarsest.
    fn coarse(&mut self, l: usize) {
        let (n, rigid) = (self.nodes(l), self.rigid);
        if l == self.levels {
            let (_, lv, dense) = self.parts(l);
            lv.x[..n].copy_from_slice(&lv.r[..n]);
            cholesky_solve(dense, &mut lv.x[..n]);
            return;
        }
        let next_n = self.nodes(l + 1);
        {
            let (lv, next) = self.pair_of_levels(l);
            let Level { start, cols, diag, off, x, r, .. } = lv;
            x[..n].fill(Vec3::ZERO);
            // Forward sweep from zero.
            for p in 0..n {
                let mut acc = r[p];
                for k in start[p] as usize..start[p + 1] as usize {
                    block_sub(&off[k], &x[cols[k] as usize], &mut acc);
                }
                diagonal_term(&diag[p], &acc, &mut x[p]);
            }
            // After it, a row's residual is what its later neighbours
            // contribute.
            next.r[..next_n].fill(Vec3::ZERO);
            for p in 0..n {
                let mut res = Vec3::ZERO;
                for k in start[p] as usize..start[p + 1] as usize {
                    if cols[k] as usize > p {
                        block_sub(&off[k], &x[cols[k] as usize], &mut res);
                    }
                }
                let a = next.parent[p] as usize;
                if rigid {
                    Basis::of(true, p % 2 == 1, next.arm.get(p).copied()).restrict(next.r, a, res);
                } else {
                    next.r[a] += res;
                }
            }
        }
        self.coarse(l + 1);
        let (lv, next) = self.pair_of_levels(l);
        let Level { start, cols, diag, off, x, r, .. } = lv;
        for (p, (xp, &q)) in x[..n].iter_mut().zip(next.parent.iter()).enumerate() {
            *xp += if rigid {
                Basis::of(true, p % 2 == 1, next.arm.get(p).copied()).prolong(next.x, q as usize)
            } else {
                next.x[q as usize]
            };
        }
        // Backward sweep.
        for p in (0..n).rev() {
            let mut acc = r[p];
            for k in start[p] as usize..start[p + 1] as usize {
                block_sub(&off[k], &x[cols[k] as usize], &mut acc);
            }
            diagonal_term(&diag[p], &acc, &mut x[p]);
        }
    }
}

/// A rotation node's diagonal block is raised by this share of its trace
/// before it is inverted, so that the rotation about the line of a
/// two-node aggregate, which costs nothing, stays bounded.
const TURN_HELD: f32 = 1e-3;

/// How a node of the level below moves with its aggregate's nodes above:
/// as its translation (a hierarchy of translations), rigidly with the
/// aggregate (`u = t + B θ`, `B = −[arm]×`: a node of the mesh, or a
/// translation node of a rigid level), or as its rotation (a rotation
/// node).
#[derive(Clone, Copy)]
enum Basis {
    Plain,
    /// The lever arm.
    Moves(Vec3),
    /// The ratio of the node's aggregate's radius to its parent's.
    Turns(f32),
}

impl Basis {
    /// A node's basis: `turn` for a rotation node of a rigid level, `arm`
    /// its lever arm.
    fn of(rigid: bool, turn: bool, arm: Option<Vec3>) -> Basis {
        match (rigid, turn) {
            (false, _) => Basis::Plain,
            (true, true) => Basis::Turns(arm.map_or(0.0, |a| a.x)),
            (true, false) => Basis::Moves(arm.unwrap_or(Vec3::ZERO)),
        }
    }

    /// The node's rotation block `B` (the identity for a rotation node).
    fn turn(self) -> Mat3 {
        match self {
            Basis::Moves(arm) => Mat3::ZERO - Mat3::skew(arm),
            Basis::Turns(s) => Mat3::scale(s),
            Basis::Plain => Mat3::IDENTITY,
        }
    }

    /// `up += Pᵀ res` for a node of aggregate `a`.
    fn restrict(self, up: &mut [Vec3], a: usize, res: Vec3) {
        match self {
            Basis::Plain => up[a] += res,
            Basis::Moves(arm) => {
                up[2 * a] += res;
                up[2 * a + 1] += arm.cross(res);
            }
            Basis::Turns(s) => up[2 * a + 1] += res * s,
        }
    }

    /// `P x` at a node of aggregate `a`.
    fn prolong(self, x: &[Vec3], a: usize) -> Vec3 {
        match self {
            Basis::Plain => x[a],
            Basis::Moves(arm) => x[2 * a] + x[2 * a + 1].cross(arm),
            Basis::Turns(s) => x[2 * a + 1] * s,
        }
    }
}

/// A fine diagonal block `a` as the coarse levels take it: filtered by its
/// node's constraint, and a node held on a contact plane keeps its normal
/// stiffness `(nᵀ a n) n nᵀ` (the fine smoother's block for such a node,
/// [`super::solver::plane_inverse`], holds the same term). Without it an
/// aggregate across a contact line moves its held nodes along the normal
/// at no cost, and the coarse correction overshoots there: a 288-node
/// tube folding on a plane took 143 CG iterations a step, with it 54.
fn prefiltered(a: Mat3, filter: Filter) -> Mat3 {
    let b = filtered(a, filter, filter);
    match filter {
        Filter::Plane(n) => b + n.outer(n) * n.dot(a.mul_vec(n)),
        _ => b,
    }
}

/// The graph a level is aggregated from: the mesh's (`below` `None`) or
/// a coarse level's couplings, `n` nodes; of a rigid level (`pairs`), the
/// graph of its aggregates: its translation nodes' couplings, node `2k`
/// read as `k`.
struct Graph<'g, 'm> {
    mesh: &'g Mesh<'m>,
    below: Option<&'g Level<'g>>,
    n: usize,
    pairs: bool,
}

impl Graph<'_, '_> {
    /// Nodes of the graph.
    fn count(&self) -> usize {
        if self.pairs {
            self.n / 2
        } else {
            self.n
        }
    }

    /// `f(i, j)` for its edges `(i, j)`, `i < j`.
    fn each_edge(&self, mut f: impl FnMut(usize, usize)) {
        match self.below {
            None => {
                for e in self.mesh.edges() {
                    f(e.a as usize, e.b as usize);
                }
            }
            Some(lv) => {
                let step = if self.pairs { 2 } else { 1 };
                for p in (0..self.n).step_by(step) {
                    for &q in &lv.cols[lv.start[p] as usize..lv.start[p + 1] as usize] {
                        let q = q as usize;
                        if p < q && q.is_multiple_of(step) {
                            f(p / step, q / step);
                        }
                    }
                }
            }
        }
    }
}

/// Aggregates the level below (`graph`) into `parent`: twice, the
/// aggregates so far (at first, each node) paired along its edges (an
/// aggregate left unpaired joins the pair of a neighbour, one without a
/// neighbour stays alone), with `scratch` for each round's map: aggregates
/// of about four nodes, as the grid's 2 × 2 boxes. (Rigid aggregates of
/// about eight nodes, from three rounds, cost the cycle less but take a
/// T-shirt's solve from 62 to 79 iterations a step: its slow modes are
/// local.) On a rigid level below, both nodes of an aggregate join the
/// same aggregate above. Returns the aggregates' count.
fn aggregate(graph: &Graph, parent: &mut [u32], scratch: &mut [u32]) -> Option<usize> {
    let parent = parent.get_mut(..graph.n)?;
    let mut m = graph.count();
    let node = &mut parent[..m];
    for (i, p) in node.iter_mut().enumerate() {
        *p = i as u32;
    }
    for _ in 0..2 {
        let map = scratch.get_mut(..m)?;
        map.fill(NONE);
        let mut next = 0u32;
        graph.each_edge(|i, j| {
            let (p, q) = (node[i] as usize, node[j] as usize);
            if p != q && map[p] == NONE && map[q] == NONE {
                (map[p], map[q]) = (next, next);
                next += 1;
            }
        });
        graph.each_edge(|i, j| {
            let (p, q) = (node[i] as usize, node[j] as usize);
            if map[p] == NONE && map[q] != NONE {
                map[p] = map[q];
            } else if map[q] == NONE && map[p] != NONE {
                map[q] = map[p];
            }
        });
        // An aggregate with no edge at this level (a piece of the mesh that
        // is already one aggregate, or a vertex on no triangle) stays one.
        for a in map.iter_mut().filter(|a| **a == NONE) {
            *a = next;
            next += 1;
        }
        for p in node.iter_mut() {
            *p = map[*p as usize];
        }
        m = next as usize;
    }
    if m == 0 {
        return None;
    }
    if graph.pairs {
        // Node `p` of the rigid level below is in aggregate `p / 2`'s.
        for p in (0..graph.n).rev() {
            parent[p] = parent[p / 2];
        }
    }
    Some(m)
}

/// The compressed rows of a level of `n` nodes aggregating the level
/// below (`graph`) by `parent`: the distinct aggregate pairs its edges
/// join, both directions, each row's columns sorted, in `start` and at the
/// front of `cols`; on a `rigid` level, each aggregate's two nodes
/// coupled, and all four of two neighbouring aggregates'. Returns the
/// couplings stored.
fn rows(graph: &Graph, n: usize, rigid: bool, parent: &[u32], start: &mut [u32], cols: &mut [f32]) -> Option<usize> {
    let cols: &mut [u32] = bytemuck::cast_slice_mut(cols);
    start.fill(0);
    let step = if graph.pairs { 2 } else { 1 };
    let pairs = |f: &mut dyn FnMut(usize, usize)| {
        graph.each_edge(|i, j| {
            let (p, q) = (parent[step * i] as usize, parent[step * j] as usize);
            if p != q && rigid {
                for (a, b) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                    f(2 * p + a, 2 * q + b);
                    f(2 * q + b, 2 * p + a);
                }
            } else if p != q {
                f(p, q);
                f(q, p);
            }
        });
        if rigid {
            for a in 0..n / 2 {
                f(2 * a, 2 * a + 1);
                f(2 * a + 1, 2 * a);
            }
        }
    };
    pairs(&mut |p, _| start[p + 1] += 1);
    for p in 0..n {
        start[p + 1] += start[p];
    }
    if start[n] as usize > cols.len() {
        return None;
    }
    pairs(&mut |p, q| {
        cols[start[p] as usize] = q as u32;
        start[p] += 1;
    });
    for p in (1..=n).rev() {
        start[p] = start[p - 1];
    }
    start[0] = 0;
    // Each row sorted and its repeats merged, rows moved together.
    let (mut w, mut s) = (0usize, 0usize);
    for p in 0..n {
        let e = start[p + 1] as usize;
        cols[s..e].sort_unstable();
        start[p] = w as u32;
        let mut last = NONE;
        for k in s..e {
            let c = cols[k];
            if c != last {
                cols[w] = c;
                w += 1;
                last = c;
            }
        }
        s = e;
    }
    start[n] = w as u32;
    Some(w)
}

/// Where a coarse operator is assembled: compressed rows, or the dense
/// packed lower triangle on the coarsest level.
struct Sink<'s> {
    n: usize,
    last: bool,
    start: &'s [u32],
    cols: &'s [u32],
    diag: &'s mut [Mat3],
    off: &'s mut [Mat3],
    dense: &'s mut [f32],
}

impl Sink<'_> {
    fn clear(&mut self, n: usize, entries: usize) {
        let m = 3 * n;
        if self.last {
            self.dense.iter_mut().take(m * (m + 1) / 2).for_each(|d| *d = 0.0);
        } else {
            self.diag.iter_mut().take(n).for_each(|d| *d = Mat3::ZERO);
            self.off.iter_mut().take(entries).for_each(|d| *d = Mat3::ZERO);
        }
    }

    fn diag(&mut self, p: usize, b: Mat3) {
        if self.last {
            dense_add(self.dense, p, p, b);
        } else if let Some(d) = self.diag.get_mut(p) {
            *d += b;
        }
    }

    /// The entry of row `p`, column `q`.
    fn entry(&self, p: usize, q: usize) -> Option<usize> {
        let (s, e) = (*self.start.get(p)? as usize, *self.start.get(p + 1)? as usize);
        self.cols.get(s..e)?.binary_search(&(q as u32)).ok().map(|k| s + k)
    }

    /// Adds the diagonal block `d` of a node of aggregate `a` below.
    #[inline]
    fn add_diag(&mut self, a: usize, basis: Basis, d: Mat3) {
        match basis {
            Basis::Plain => self.diag(a, d),
            Basis::Moves(_) => {
                let b = basis.turn();
                self.diag(2 * a, d);
                self.pair(2 * a, 2 * a + 1, d * b);
                self.diag(2 * a + 1, b.transpose() * d * b);
            }
            Basis::Turns(s) => self.diag(2 * a + 1, d * (s * s)),
        }
    }

    /// Adds the coupling `b` of two nodes below (and `bᵀ` of its mirror),
    /// of aggregates `a` and `c`: `P_aᵀ b P_c`.
    #[inline]
    fn add_pair(&mut self, (a, ba): (usize, Basis), (c, bc): (usize, Basis), b: Mat3) {
        match (ba, bc) {
            (Basis::Plain, _) | (_, Basis::Plain) => return self.pair(a, c, b),
            (Basis::Moves(_), Basis::Moves(_)) => self.pair(2 * a, 2 * c, b),
            _ => {}
        }
        let (ra, rc) = (ba.turn(), bc.turn());
        if let Basis::Moves(_) = ba {
            self.pair(2 * a, 2 * c + 1, b * rc);
        }
        if let Basis::Moves(_) = bc {
            self.pair(2 * a + 1, 2 * c, ra.transpose() * b);
        }
        self.pair(2 * a + 1, 2 * c + 1, ra.transpose() * b * rc);
    }

    /// Adds `b` at (`p`, `q`) and `bᵀ` at (`q`, `p`).
    fn pair(&mut self, p: usize, q: usize, b: Mat3) {
        if p == q {
            self.diag(p, b + b.transpose());
        } else if self.last {
            if p > q {
                dense_add(self.dense, p, q, b)
            } else {
                dense_add(self.dense, q, p, b.transpose())
            }
        } else if p < self.n && q < self.n {
            if let Some(k) = self.entry(p, q) {
                self.off[k] += b;
            }
            if let Some(k) = self.entry(q, p) {
                self.off[k] += b.transpose();
            }
        }
    }
}

impl Coarse for Aggregates<'_> {
    fn levels(&self) -> usize {
        Aggregates::levels(self)
    }
    fn assemble(&mut self, mesh: &Mesh, op: &FineOperator) {
        Aggregates::assemble(self, mesh, op)
    }
    fn cycle(&mut self, fine_op: &impl FineLevel, r: &[Vec3], z: &mut [Vec3], t: &mut [Vec3]) {
        Aggregates::cycle(self, fine_op, r, z, t)
    }
}
