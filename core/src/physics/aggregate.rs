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

/// Nodes of coarse level `l` at most (level 0: the mesh).
const fn bound(nodes: usize, l: usize) -> usize {
    nodes >> l
}

/// Stored couplings (both directions, before duplicates are merged) of any
/// coarse level at most: every level has at most the mesh's edges.
const fn entries(counts: MeshCounts) -> usize {
    2 * counts.edges
}

/// Coarse levels of a mesh of these counts at most.
const fn levels(counts: MeshCounts) -> usize {
    let mut l = 0;
    while l < MAX_LEVELS && bound(counts.nodes, l) > COARSEST && bound(counts.nodes, l + 1) > 0 {
        l += 1;
    }
    l
}

/// The `f32`s of storage the hierarchy of a non-grid mesh takes (none for
/// a grid, whose multigrid is [`super::multigrid`]).
pub const fn floats(counts: MeshCounts) -> usize {
    if counts.grid.is_some() || counts.nodes == 0 {
        return 0;
    }
    let levels = levels(counts);
    if levels == 0 {
        return 0;
    }
    // The coarsest level: the last one bounded, or an earlier one of at
    // most COARSEST nodes where coarsening stopped.
    let last = bound(counts.nodes, levels);
    let m = 3 * if last > COARSEST { last } else { COARSEST };
    offset(counts, levels + 1) + m * (m + 1) / 2
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
}

/// The `f32`s of a level of `n` nodes and `entries` couplings over a
/// level of `below` nodes.
const fn region(below: usize, n: usize, entries: usize) -> usize {
    // parents of the level below, row starts, columns, diagonal and
    // coupling blocks, x and r.
    below + (n + 1) + entries + 9 * n + 9 * entries + 6 * n
}

/// The worst case of the pool before coarse level `l` (the bounds on each
/// level's nodes and couplings).
const fn offset(counts: MeshCounts, l: usize) -> usize {
    let mut o = 0;
    let mut k = 1;
    while k < l {
        o += region(bound(counts.nodes, k - 1), bound(counts.nodes, k), entries(counts));
        k += 1;
    }
    o
}

/// A level's views of its storage `pool` (at least [`region`] long).
fn carve(pool: &mut [f32], below: usize, n: usize, entries: usize) -> Level<'_> {
    let (parent, rest) = pool.split_at_mut(below);
    let (start, rest) = rest.split_at_mut(n + 1);
    let (cols, rest) = rest.split_at_mut(entries);
    let (diag, rest) = rest.split_at_mut(9 * n);
    let (off, rest) = rest.split_at_mut(9 * entries);
    let (x, rest) = rest.split_at_mut(3 * n);
    Level {
        parent: bytemuck::cast_slice_mut(parent),
        start: bytemuck::cast_slice_mut(start),
        cols: bytemuck::cast_slice_mut(cols),
        diag: bytemuck::cast_slice_mut(diag),
        off: bytemuck::cast_slice_mut(off),
        x: bytemuck::cast_slice_mut(x),
        r: bytemuck::cast_slice_mut(&mut rest[..3 * n]),
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
}

impl<'a> Aggregates<'a> {
    /// The hierarchy of `mesh` in `pool`: `None` for a grid, a mesh too
    /// small to coarsen, or a pool too small for the hierarchy this mesh
    /// makes ([`floats`] is enough for any mesh of its counts; a smaller
    /// pool holds many).
    pub fn new(mesh: &Mesh, pool: &'a mut [f32]) -> Option<Aggregates<'a>> {
        let counts = mesh.counts();
        if counts.grid.is_some() || levels(counts) == 0 {
            return None;
        }
        let mut agg = Aggregates {
            pool,
            levels: 0,
            shapes: [[0; 2]; MAX_LEVELS + 1],
            at: [0; MAX_LEVELS + 2],
            omega: super::multigrid::OMEGA_BENDING,
        };
        agg.shapes[0] = [counts.nodes as u32, 2 * counts.edges as u32];
        for l in 1..=levels(counts) {
            // A level that does not shrink (a mesh of several pieces, each
            // one aggregate) or does not fit ends the coarsening: the level
            // below is the coarsest.
            let Some((shape, end)) = agg.coarsen(mesh, l) else { break };
            if shape[0] >= agg.shapes[l - 1][0] {
                break;
            }
            (agg.shapes[l], agg.at[l + 1], agg.levels) = (shape, end as u32, l);
            if shape[0] as usize <= COARSEST {
                break;
            }
        }
        let m = 3 * agg.nodes(agg.levels);
        let room = agg.pool.len().saturating_sub(agg.at[agg.levels + 1] as usize);
        (agg.levels > 0 && room >= m * (m + 1) / 2).then_some(agg)
    }

    pub fn levels(&self) -> usize {
        self.levels
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
        let dense_at = self.at[self.levels + 1] as usize;
        let (start, end, [b, n, e]) = self.level_of(l);
        let below = (l > 1).then(|| self.level_of(l - 1));
        let (lower, upper) = self.pool.split_at_mut(start);
        let (mine, rest) = upper.split_at_mut(end - start);
        let dense = &mut rest[dense_at - end..];
        let below = below.map(|(s, _, [bb, bn, be])| carve(&mut lower[s..], bb, bn, be));
        (below, carve(mine, b, n, e), dense)
    }

    /// Level `l` and level `l + 1`.
    fn pair_of_levels(&mut self, l: usize) -> (Level<'_>, Level<'_>) {
        let ((s, e, [b, n, c]), (_, e2, [b2, n2, c2])) = (self.level_of(l), self.level_of(l + 1));
        let (first, second) = self.pool[s..e2].split_at_mut(e - s);
        (carve(first, b, n, c), carve(second, b2, n2, c2))
    }

    /// Aggregates level `l − 1` into level `l`, lays out its rows at the
    /// end of the storage so far, and returns its shape and where its
    /// storage ends.
    fn coarsen(&mut self, mesh: &Mesh, l: usize) -> Option<([u32; 2], usize)> {
        let below_n = self.nodes(l - 1);
        let at = self.at[l] as usize;
        let below = (l > 1).then(|| self.level_of(l - 1));
        let (lower, upper) = self.pool.split_at_mut(at);
        let below = below.map(|(s, _, [bb, bn, be])| carve(&mut lower[s..], bb, bn, be));
        let (parent, rest) = upper.split_at_mut_checked(below_n)?;
        let parent: &mut [u32] = bytemuck::cast_slice_mut(parent);
        let n = aggregate(mesh, below.as_ref(), below_n, parent, bytemuck::cast_slice_mut(&mut *rest))?;
        // The rows: counted, filled and merged in the storage after the
        // parents, then the blocks and vectors after the merged columns.
        let (start, rest) = rest.split_at_mut_checked(n + 1)?;
        let entries = rows(mesh, below.as_ref(), below_n, n, parent, bytemuck::cast_slice_mut(start), rest)?;
        let end = at + region(below_n, n, entries);
        (end <= self.pool.len()).then_some(([n as u32, entries as u32], end))
    }

    /// Assembles every coarse operator of the fine operator `op` (its
    /// bending left to the fine smoother), factorises the coarsest and
    /// inverts the other levels' diagonal blocks (their smoother's).
    pub fn assemble(&mut self, mesh: &Mesh, op: &FineOperator) {
        self.omega = op.omega;
        for l in 1..=self.levels {
            self.assemble_level(mesh, op, l);
        }
        for l in 1..self.levels {
            let n = self.nodes(l);
            let (_, lv, _) = self.parts(l);
            for d in lv.diag[..n].iter_mut() {
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
        let (below, lv, dense) = self.parts(l);
        let Level { parent, start, cols, diag, off, .. } = lv;
        let mut sink = Sink { n, last, start, cols, diag, off, dense };
        sink.clear(n, entries);
        match below {
            None => {
                for (i, &p) in parent.iter().enumerate().take(mesh.node_count()) {
                    let fi = node_filter(op.flags, op.normal, i);
                    sink.diag(p as usize, prefiltered(op.diag[i] * op.c + Mat3::scale((op.mass)(i)), fi));
                }
                for (e, b) in mesh.edges().iter().zip(op.off) {
                    let (a, bn) = (e.a as usize, e.b as usize);
                    let fb =
                        filtered(*b * op.c, node_filter(op.flags, op.normal, a), node_filter(op.flags, op.normal, bn));
                    sink.pair(parent[a] as usize, parent[bn] as usize, fb);
                }
            }
            Some(b) => {
                for p in 0..below_n {
                    sink.diag(parent[p] as usize, b.diag[p]);
                    for k in b.start[p] as usize..b.start[p + 1] as usize {
                        let q = b.cols[k] as usize;
                        if p < q {
                            sink.pair(parent[p] as usize, parent[q] as usize, b.off[k]);
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
        let n1 = self.nodes(1);
        {
            let (_, first, _) = self.parts(1);
            first.r[..n1].fill(Vec3::ZERO);
            for (i, (ri, ti)) in r.iter().zip(t.iter()).enumerate() {
                first.r[first.parent[i] as usize] += *ri - *ti;
            }
        }
        self.coarse(1);
        {
            let (_, first, _) = self.parts(1);
            for (i, zi) in z.iter_mut().enumerate() {
                *zi += first.x[first.parent[i] as usize];
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
        let n = self.nodes(l);
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
                next.r[next.parent[p] as usize] += res;
            }
        }
        self.coarse(l + 1);
        let (lv, next) = self.pair_of_levels(l);
        let Level { start, cols, diag, off, x, r, .. } = lv;
        for (xp, &q) in x[..n].iter_mut().zip(next.parent.iter()) {
            *xp += next.x[q as usize];
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

/// `f(i, j)` for the edges `(i, j)`, `i < j`, of the level whose
/// storage is `below` (the mesh's when `None`; `n` its nodes).
fn each_edge(mesh: &Mesh, below: Option<&Level>, n: usize, mut f: impl FnMut(usize, usize)) {
    match below {
        None => {
            for e in mesh.edges() {
                f(e.a as usize, e.b as usize);
            }
        }
        Some(lv) => {
            for p in 0..n {
                for &q in &lv.cols[lv.start[p] as usize..lv.start[p + 1] as usize] {
                    if p < q as usize {
                        f(p, q as usize);
                    }
                }
            }
        }
    }
}

/// Aggregates the level `below` (`below_n` nodes; the mesh when `None`)
/// into `parent`: pairs along its edges (a node left unpaired joins the
/// pair of a neighbour), then those pairs paired the same way (aggregates
/// of about four nodes, as the grid's 2 × 2 boxes), with `scratch` for the
/// second map. Returns the aggregates' count.
fn aggregate(
    mesh: &Mesh,
    below: Option<&Level>,
    below_n: usize,
    parent: &mut [u32],
    scratch: &mut [u32],
) -> Option<usize> {
    let parent = parent.get_mut(..below_n)?;
    parent.fill(NONE);
    let mut n = 0u32;
    each_edge(mesh, below, below_n, |i, j| {
        if parent[i] == NONE && parent[j] == NONE {
            (parent[i], parent[j]) = (n, n);
            n += 1;
        }
    });
    each_edge(mesh, below, below_n, |i, j| {
        if parent[i] == NONE && parent[j] != NONE {
            parent[i] = parent[j];
        } else if parent[j] == NONE && parent[i] != NONE {
            parent[j] = parent[i];
        }
    });
    // A node with no edge at this level (a piece of the mesh that is
    // already one aggregate, or a vertex on no triangle) is an aggregate of
    // its own.
    for p in parent.iter_mut().filter(|p| **p == NONE) {
        *p = n;
        n += 1;
    }
    if n == 0 {
        return None;
    }
    let map = scratch.get_mut(..n as usize)?;
    map.fill(NONE);
    let mut m = 0u32;
    each_edge(mesh, below, below_n, |i, j| {
        let (p, q) = (parent[i] as usize, parent[j] as usize);
        if p != q && map[p] == NONE && map[q] == NONE {
            (map[p], map[q]) = (m, m);
            m += 1;
        }
    });
    each_edge(mesh, below, below_n, |i, j| {
        let (p, q) = (parent[i] as usize, parent[j] as usize);
        if map[p] == NONE && map[q] != NONE {
            map[p] = map[q];
        } else if map[q] == NONE && map[p] != NONE {
            map[q] = map[p];
        }
    });
    for a in map.iter_mut().filter(|a| **a == NONE) {
        *a = m;
        m += 1;
    }
    for p in parent.iter_mut() {
        *p = map[*p as usize];
    }
    Some(m as usize)
}

/// The compressed rows of a level of `n` nodes aggregating the level
/// `below` (`below_n` nodes; the mesh when `None`) by `parent`: the
/// distinct aggregate pairs its edges join, both directions, each row's
/// columns sorted, in `start` and at the front of `cols`. Returns the
/// couplings stored.
fn rows(
    mesh: &Mesh,
    below: Option<&Level>,
    below_n: usize,
    n: usize,
    parent: &[u32],
    start: &mut [u32],
    cols: &mut [f32],
) -> Option<usize> {
    let cols: &mut [u32] = bytemuck::cast_slice_mut(cols);
    start.fill(0);
    let pairs = |f: &mut dyn FnMut(usize, usize)| {
        each_edge(mesh, below, below_n, |i, j| {
            let (p, q) = (parent[i] as usize, parent[j] as usize);
            if p != q {
                f(p, q);
                f(q, p);
            }
        })
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
