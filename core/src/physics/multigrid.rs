//! The multigrid preconditioner of the step's solve on grid meshes.
//!
//! A Jacobi-preconditioned CG needs iterations in proportion to
//! `√(h² k / m) · n` (stiff stretching on a fine grid). Here the CG is
//! preconditioned by one V-cycle of an aggregation multigrid, whose cost
//! per iteration grows with the node count and whose iteration count does
//! not:
//!
//! - **Coarse spaces.** Level `l + 1` aggregates the nodes of level `l` in
//!   boxes of [`BOX`]×[`BOX`] grid nodes; its three unknowns per box move
//!   the box's nodes together (piecewise-constant prolongation `P`, the
//!   filter of the pins and contact planes applied on the finest level).
//!   Coarsening stops at [`COARSEST`] nodes or fewer.
//! - **Coarse operators.** Galerkin products `Pᵀ A P`, assembled at each
//!   solve from the fine 3×3 blocks (sums over the boxes, so a coarse node
//!   couples to its eight neighbours: [`STENCIL`] stored blocks per node);
//!   the bending Hessian is constant ([`crate::physics::stencil`]), so its
//!   level-1 product is computed once per state ([`Multigrid::new`]) and
//!   only scaled per step.
//! - **Cycle.** On the fine level a damped block-Jacobi smoother before
//!   and after the coarse correction, on the smoother's operator of
//!   [`FineLevel`];
//!   on the coarse levels symmetric block Gauss–Seidel (forward before,
//!   backward after); the coarsest level is solved by a dense Cholesky
//!   factor. Pre- and post-smoothing mirror each other, so the cycle is a
//!   symmetric positive definite preconditioner.
//!
//! All storage is one caller-provided `f32` pool whose size
//! [`Layout::floats`] gives in const context. Meshes that are not grids
//! keep the block-Jacobi preconditioner (a [`Layout`] of no levels).

use crate::flags;
use crate::math::{Mat3, Vec3};
use crate::mesh::Mesh;
use crate::physics::blocks::{block_sub, diagonal_term, tblock_sub};
use crate::physics::stencil::BendingStencil;

/// Grid nodes per side of a coarse box.
pub const BOX: usize = 2;
/// Coarsening stops at a level of at most this many nodes, which is solved
/// directly.
pub const COARSEST: usize = 4;
/// Most coarse levels (a grid of `u16` nodes needs at most 16).
pub const MAX_LEVELS: usize = 16;
/// Stored blocks per coarse node: its diagonal block and its couplings to
/// the forward half of its eight neighbours, the grid offsets (1, 0),
/// (−1, 1), (0, 1), (1, 1) in slots 1..5.
pub const STENCIL: usize = 5;
/// Damping of the fine level's block-Jacobi smoother where the bending is
/// a small part of the diagonal ([`BENDING_SHARE`]).
pub const OMEGA: f32 = 0.6;
/// Damping of the fine level's smoother elsewhere. The smoother's operator
/// leaves out the bending's couplings ([`FineLevel`]); where the bending
/// weighs in, a damping above this one lets the solve's error grow on the
/// bending modes (a clamped strip of 1:4 cells, bending 7 % of its
/// diagonal, creeps 0.13° a second at rest at 0.55, 0.33° at 0.6 and
/// 0.57° at 0.65, against 0.009° at 0.45), while on cloth (bending below
/// 0.1 % of the diagonal) 0.6 takes 4–8 % fewer iterations than 0.5.
pub const OMEGA_BENDING: f32 = 0.5;
/// The largest share of the diagonal taken by the bending (`c` times the
/// bending stencil's diagonal against the blocks' mean diagonal entry,
/// each summed over the nodes) at which the fine smoother is damped by
/// [`OMEGA`] rather than [`OMEGA_BENDING`].
pub const BENDING_SHARE: f32 = 0.01;

/// The levels of a grid's hierarchy: `dims[0]` is the mesh, `dims[levels]`
/// the coarsest level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub levels: usize,
    pub dims: [[usize; 2]; MAX_LEVELS + 1],
}

impl Layout {
    /// No multigrid (meshes that are not grids).
    pub const NONE: Layout = Layout { levels: 0, dims: [[0; 2]; MAX_LEVELS + 1] };

    /// The hierarchy of an `nx × ny` grid.
    pub const fn grid(nx: usize, ny: usize) -> Layout {
        let mut out = Layout::NONE;
        if nx == 0 || ny == 0 {
            return out;
        }
        out.dims[0] = [nx, ny];
        let mut l = 0;
        while l < MAX_LEVELS {
            let [x, y] = out.dims[l];
            if l > 0 && x * y <= COARSEST {
                break;
            }
            out.dims[l + 1] = [x.div_ceil(BOX), y.div_ceil(BOX)];
            l += 1;
        }
        out.levels = l;
        out
    }

    /// The hierarchy of a mesh with these counts.
    pub const fn of(grid: Option<[usize; 2]>) -> Layout {
        match grid {
            Some([nx, ny]) => Layout::grid(nx, ny),
            None => Layout::NONE,
        }
    }

    const fn nodes(&self, l: usize) -> usize {
        self.dims[l][0] * self.dims[l][1]
    }

    /// Blocks of the stencil levels `1..levels`.
    const fn blocks(&self) -> usize {
        let mut n = 0;
        let mut l = 1;
        while l < self.levels {
            n += STENCIL * self.nodes(l);
            l += 1;
        }
        n
    }

    /// Vectors: `x` and `r` per coarse level.
    const fn vectors(&self) -> usize {
        let mut n = 0;
        let mut l = 1;
        while l <= self.levels {
            n += 2 * self.nodes(l);
            l += 1;
        }
        n
    }

    /// Entries of the coarsest level's packed Cholesky factor.
    const fn dense(&self) -> usize {
        let m = 3 * self.nodes(self.levels);
        m * (m + 1) / 2
    }

    /// The `f32`s of storage the hierarchy takes.
    pub const fn floats(&self) -> usize {
        if self.levels == 0 {
            return 0;
        }
        9 * self.blocks() + 3 * self.vectors() + self.dense() + STENCIL * self.nodes(1)
    }
}

/// How a node's velocity change is constrained in the solve.
#[derive(Clone, Copy)]
pub(super) enum Filter {
    Free,
    Pinned,
    Plane(Vec3),
}

#[inline]
pub(super) fn node_filter(flags: &[u8], normal: &[Vec3], i: usize) -> Filter {
    let f = flags.get(i).copied().unwrap_or(0);
    if flags::pinned(f) {
        Filter::Pinned
    } else if flags::in_contact(f) {
        Filter::Plane(normal[i])
    } else {
        Filter::Free
    }
}

/// `S_a B S_b` for the filters of the row and column nodes.
#[inline]
pub(super) fn filtered(b: Mat3, row: Filter, col: Filter) -> Mat3 {
    let mut b = match col {
        Filter::Free => b,
        Filter::Pinned => return Mat3::ZERO,
        Filter::Plane(m) => {
            let bm = b.mul_vec(m);
            Mat3 { c: [b.c[0] - bm * m.x, b.c[1] - bm * m.y, b.c[2] - bm * m.z] }
        }
    };
    match row {
        Filter::Free => {}
        Filter::Pinned => return Mat3::ZERO,
        Filter::Plane(n) => {
            for c in b.c.iter_mut() {
                *c -= n * n.dot(*c);
            }
        }
    }
    b
}

/// A grid level.
#[derive(Clone, Copy)]
struct Level {
    nx: usize,
    ny: usize,
}

/// Stencil slot and orientation of the coupling from a node to the node at
/// offset `(dx, dy) ∈ {−1, 0, 1}²` (`None` for the node itself): the slot
/// is stored at the node when the offset is forward, at the neighbour
/// (transposed) when it is backward.
const SLOT: [[Option<(usize, bool)>; 3]; 3] = [
    // dx = −1: dy = −1, 0, 1
    [Some((4, true)), Some((1, true)), Some((2, false))],
    // dx = 0
    [Some((3, true)), None, Some((3, false))],
    // dx = 1
    [Some((2, true)), Some((1, false)), Some((4, false))],
];

impl Level {
    #[inline]
    fn nodes(self) -> usize {
        self.nx * self.ny
    }
    /// The forward neighbours of node (`x`, `y`), by slot.
    #[inline(always)]
    fn forward(self, x: usize, y: usize) -> [Option<usize>; 4] {
        let i = y * self.nx + x;
        let (left, right, down) = (x > 0, x + 1 < self.nx, y + 1 < self.ny);
        [
            right.then_some(i + 1),
            (left && down).then(|| i + self.nx - 1),
            down.then_some(i + self.nx),
            (right && down).then(|| i + self.nx + 1),
        ]
    }
    /// The backward neighbours of node (`x`, `y`): the nodes whose forward
    /// slot `s` (by position) points at it.
    #[inline(always)]
    fn backward(self, x: usize, y: usize) -> [Option<usize>; 4] {
        let i = y * self.nx + x;
        let (left, right, up) = (x > 0, x + 1 < self.nx, y > 0);
        [
            left.then(|| i - 1),
            (right && up).then(|| i + 1 - self.nx),
            up.then(|| i - self.nx),
            (left && up).then(|| i - 1 - self.nx),
        ]
    }
    /// The coarse node (on `coarse`) whose box holds node `i`.
    #[inline]
    fn parent_of(self, coarse: Level, i: usize) -> usize {
        Level::parent(coarse.nx, i % self.nx, i / self.nx)
    }
    /// The coarse node (on a level `cx` wide) whose box holds (`x`, `y`).
    #[inline(always)]
    fn parent(cx: usize, x: usize, y: usize) -> usize {
        (y / BOX) * cx + x / BOX
    }
    /// The stored slot of the coupling from node `i` to node `j ≠ i`: the
    /// row node that stores it, the slot, and whether it is stored
    /// transposed.
    #[inline]
    fn slot(self, i: usize, j: usize) -> Option<(usize, usize, bool)> {
        let dx = (j % self.nx) as isize - (i % self.nx) as isize;
        let dy = (j / self.nx) as isize - (i / self.nx) as isize;
        if !(-1..=1).contains(&dx) || !(-1..=1).contains(&dy) {
            return None;
        }
        let (s, t) = SLOT[(dx + 1) as usize][(dy + 1) as usize]?;
        Some((if t { j } else { i }, s, t))
    }
}

/// Where a coarse operator is assembled: stencil blocks or the dense
/// packed lower triangle.
enum Sink<'s> {
    Stencil(Level, &'s mut [Mat3]),
    Dense(&'s mut [f32]),
}

impl Sink<'_> {
    fn clear(&mut self) {
        match self {
            Sink::Stencil(_, b) => b.fill(Mat3::ZERO),
            Sink::Dense(d) => d.fill(0.0),
        }
    }
    /// Adds `b` to the diagonal block of node `i`.
    #[inline]
    fn diag(&mut self, i: usize, b: Mat3) {
        match self {
            Sink::Stencil(_, blocks) => blocks[STENCIL * i] += b,
            Sink::Dense(d) => dense_add(d, i, i, b),
        }
    }
    /// Adds the block `b` at (`i`, `j`) and `bᵀ` at (`j`, `i`).
    #[inline]
    fn pair(&mut self, i: usize, j: usize, b: Mat3) -> bool {
        if i == j {
            self.diag(i, b + b.transpose());
            return true;
        }
        match self {
            Sink::Stencil(level, blocks) => match level.slot(i, j) {
                Some((row, s, false)) => blocks[STENCIL * row + s] += b,
                Some((row, s, true)) => blocks[STENCIL * row + s] += b.transpose(),
                None => return false,
            },
            Sink::Dense(d) => {
                if i > j {
                    dense_add(d, i, j, b)
                } else {
                    dense_add(d, j, i, b.transpose())
                }
            }
        }
        true
    }
}

/// Index of entry (`r`, `c`), `r ≥ c`, of a packed lower triangle.
#[inline]
fn packed(r: usize, c: usize) -> usize {
    r * (r + 1) / 2 + c
}

/// Adds block `b` at block row `i`, column `j ≤ i` (its lower part only
/// on the diagonal).
pub(super) fn dense_add(d: &mut [f32], i: usize, j: usize, b: Mat3) {
    for p in 0..3 {
        for q in 0..3 {
            let (r, c) = (3 * i + p, 3 * j + q);
            if r >= c {
                if let Some(e) = d.get_mut(packed(r, c)) {
                    *e += b.at(p, q);
                }
            }
        }
    }
}

/// Factorises the packed symmetric matrix in place (`L Lᵀ`). A pivot that
/// is not positive (a box without stiffness or mass, e.g. all pinned) is
/// replaced by the largest diagonal entry, which decouples that unknown.
pub(super) fn cholesky(d: &mut [f32], m: usize) {
    let big = (0..m).map(|k| d[packed(k, k)]).fold(f32::MIN_POSITIVE, f32::max);
    for k in 0..m {
        let mut pivot = d[packed(k, k)];
        for q in 0..k {
            pivot -= d[packed(k, q)] * d[packed(k, q)];
        }
        let lkk = if pivot > 1e-6 * big { crate::math::sqrt(pivot) } else { crate::math::sqrt(big) };
        d[packed(k, k)] = lkk;
        for r in k + 1..m {
            let mut s = d[packed(r, k)];
            for q in 0..k {
                s -= d[packed(r, q)] * d[packed(k, q)];
            }
            d[packed(r, k)] = s / lkk;
        }
    }
}

/// Solves `L Lᵀ x = b` in place (`x` holds `b` on entry).
pub(super) fn cholesky_solve(d: &[f32], x: &mut [Vec3]) {
    let m = 3 * x.len();
    let get = |x: &[Vec3], k: usize| x[k / 3].get(k % 3);
    let set = |x: &mut [Vec3], k: usize, v: f32| match k % 3 {
        0 => x[k / 3].x = v,
        1 => x[k / 3].y = v,
        _ => x[k / 3].z = v,
    };
    for r in 0..m {
        let mut s = get(x, r);
        for c in 0..r {
            s -= d[packed(r, c)] * get(x, c);
        }
        set(x, r, s / d[packed(r, r)]);
    }
    for r in (0..m).rev() {
        let mut s = get(x, r);
        for c in r + 1..m {
            s -= d[packed(c, r)] * get(x, c);
        }
        set(x, r, s / d[packed(r, r)]);
    }
}

/// `fine[i] += coarse[parent(i)]` for every node of the level `lv`, the
/// coarse level `cx` wide, row by row.
#[inline(always)]
fn prolong(lv: Level, cx: usize, coarse: &[Vec3], fine: &mut [Vec3]) {
    for (y, row) in fine.chunks_exact_mut(lv.nx.max(1)).take(lv.ny).enumerate() {
        let Some(parents) = coarse.get((y / BOX) * cx..).and_then(|c| c.get(..cx)) else { break };
        for (nodes, c) in row.chunks_mut(BOX).zip(parents) {
            for f in nodes {
                *f += *c;
            }
        }
    }
}

/// One block Gauss–Seidel update of node (`x`, `y`) on a stencil level
/// whose diagonal blocks hold their inverses: `x_i = D_i⁻¹ (r_i − Σ_j A_ij
/// x_j)`, the forward neighbours left out when they are still zero.
#[inline(always)]
fn relax(lv: Level, blocks: &[Mat3], r: &[Vec3], v: &mut [Vec3], x: usize, y: usize, with_forward: bool) {
    let i = y * lv.nx + x;
    let mut acc = r[i];
    for (s, j) in lv.backward(x, y).into_iter().enumerate() {
        if let Some(j) = j {
            tblock_sub(&blocks[STENCIL * j + s + 1], &v[j], &mut acc);
        }
    }
    if with_forward {
        for (s, j) in lv.forward(x, y).into_iter().enumerate() {
            if let Some(j) = j {
                block_sub(&blocks[STENCIL * i + s + 1], &v[j], &mut acc);
            }
        }
    }
    diagonal_term(&blocks[STENCIL * i], &acc, &mut v[i]);
}

/// [`relax`] over row `y`, left to right (or right to left with
/// `reverse`). The row's inner nodes of an inner row have all eight
/// neighbours: they take them at fixed offsets, in [`relax`]'s order (the
/// same sums in the same order, so the same bits), without its checks.
#[inline(always)]
fn relax_row(lv: Level, blocks: &[Mat3], r: &[Vec3], v: &mut [Vec3], y: usize, with_forward: bool, reverse: bool) {
    let nx = lv.nx;
    let inner = y > 0 && (!with_forward || y + 1 < lv.ny) && nx > 2;
    if !inner {
        for k in 0..nx {
            let x = if reverse { nx - 1 - k } else { k };
            relax(lv, blocks, r, v, x, y, with_forward);
        }
        return;
    }
    let one = |v: &mut [Vec3], x: usize| {
        let i = y * nx + x;
        let mut acc = r[i];
        // Backward neighbours: the nodes whose forward slot s points here.
        tblock_sub(&blocks[STENCIL * (i - 1) + 1], &v[i - 1], &mut acc);
        tblock_sub(&blocks[STENCIL * (i + 1 - nx) + 2], &v[i + 1 - nx], &mut acc);
        tblock_sub(&blocks[STENCIL * (i - nx) + 3], &v[i - nx], &mut acc);
        tblock_sub(&blocks[STENCIL * (i - 1 - nx) + 4], &v[i - 1 - nx], &mut acc);
        if with_forward {
            let row = &blocks[STENCIL * i..STENCIL * i + STENCIL];
            block_sub(&row[1], &v[i + 1], &mut acc);
            block_sub(&row[2], &v[i + nx - 1], &mut acc);
            block_sub(&row[3], &v[i + nx], &mut acc);
            block_sub(&row[4], &v[i + nx + 1], &mut acc);
        }
        diagonal_term(&blocks[STENCIL * i], &acc, &mut v[i]);
    };
    if reverse {
        relax(lv, blocks, r, v, nx - 1, y, with_forward);
        for x in (1..nx - 1).rev() {
            one(v, x);
        }
        relax(lv, blocks, r, v, 0, y, with_forward);
    } else {
        relax(lv, blocks, r, v, 0, y, with_forward);
        for x in 1..nx - 1 {
            one(v, x);
        }
        relax(lv, blocks, r, v, nx - 1, y, with_forward);
    }
}

/// The fine level's operator, as the solver holds it.
pub struct FineOperator<'s> {
    /// Membrane diagonal and edge blocks of `K` (unscaled).
    pub diag: &'s [Mat3],
    pub off: &'s [Mat3],
    /// `A = mass_scale · M + c · K`.
    pub c: f32,
    /// Lumped mass of each node times the mass factor.
    pub mass: &'s dyn Fn(usize) -> f32,
    pub flags: &'s [u8],
    pub normal: &'s [Vec3],
    /// Damping of the fine level's smoother ([`OMEGA`], [`OMEGA_BENDING`]).
    pub omega: f32,
}

/// The hierarchy and its scratch, in caller storage.
pub struct Multigrid<'a> {
    layout: Layout,
    /// The stencil levels' blocks, level after level.
    blocks: &'a mut [Mat3],
    /// `x` and `r` of each coarse level.
    vectors: &'a mut [Vec3],
    /// The coarsest level's packed Cholesky factor.
    dense: &'a mut [f32],
    /// The level-1 Galerkin product of the bending Hessian per unit
    /// stiffness scale: [`STENCIL`] scalars per level-1 node (the blocks are
    /// multiples of the identity).
    bending: &'a mut [f32],
    /// Couplings that fell outside a coarse stencil (none on a grid).
    pub dropped: u32,
    /// The fine smoother's damping of the last assembly
    /// ([`FineOperator::omega`]).
    omega: f32,
}

impl<'a> Multigrid<'a> {
    /// Carves the hierarchy of `mesh` out of `pool` (at least
    /// [`Layout::floats`] long) and computes the level-1 product of the
    /// bending stencil. `None` when the pool is too small.
    pub fn new(mesh: &Mesh, bending: &BendingStencil, pool: &'a mut [f32]) -> Option<Multigrid<'a>> {
        let layout = Layout::of(mesh.counts().grid);
        if pool.len() < layout.floats() {
            return None;
        }
        let (blocks, rest) = pool.split_at_mut(9 * layout.blocks());
        let (vectors, rest) = rest.split_at_mut(3 * layout.vectors());
        let (dense, rest) = rest.split_at_mut(layout.dense());
        let bend = if layout.levels > 0 { &mut rest[..STENCIL * layout.nodes(1)] } else { &mut rest[..0] };
        let mut mg = Multigrid {
            layout,
            blocks: bytemuck::cast_slice_mut(blocks),
            vectors: bytemuck::cast_slice_mut(vectors),
            dense,
            bending: bend,
            dropped: 0,
            omega: OMEGA_BENDING,
        };
        mg.bending_product(bending);
        Some(mg)
    }

    /// A hierarchy of no levels (block-Jacobi only).
    pub fn none() -> Multigrid<'a> {
        Multigrid {
            layout: Layout::NONE,
            blocks: &mut [],
            vectors: &mut [],
            dense: &mut [],
            bending: &mut [],
            dropped: 0,
            omega: OMEGA_BENDING,
        }
    }

    pub fn levels(&self) -> usize {
        self.layout.levels
    }

    fn level(&self, l: usize) -> Level {
        let [nx, ny] = self.layout.dims[l];
        Level { nx, ny }
    }

    /// `Pᵀ K_b P` on level 1 (scalars: the blocks are multiples of the
    /// identity).
    fn bending_product(&mut self, stencil: &BendingStencil) {
        self.bending.fill(0.0);
        if self.layout.levels == 0 {
            return;
        }
        let (fine, coarse) = (self.level(0), self.level(1));
        for i in 0..fine.nodes() {
            self.bending[STENCIL * fine.parent_of(coarse, i)] += stencil.diagonal(i);
        }
        let (bending, mut dropped) = (&mut *self.bending, 0);
        stencil.each_forward(|i, j, w| {
            let (p, q) = (fine.parent_of(coarse, i), fine.parent_of(coarse, j));
            if p == q {
                // Both (i, j) and (j, i) fall on the diagonal.
                bending[STENCIL * p] += 2.0 * w;
            } else {
                match coarse.slot(p, q) {
                    Some((row, k, _)) => bending[STENCIL * row + k] += w,
                    None => dropped += 1,
                }
            }
        });
        self.dropped += dropped;
    }

    /// Assembles every coarse operator of the fine operator `op` (its
    /// bending part scaled by `op.c`), factorises the coarsest and inverts
    /// the other levels' diagonal blocks (which their smoother uses).
    pub fn assemble(&mut self, mesh: &Mesh, op: &FineOperator) {
        let levels = self.layout.levels;
        self.omega = op.omega;
        if levels == 0 {
            return;
        }
        let (fine, first) = (self.level(0), self.level(1));
        let layout = self.layout;
        let mut dropped = 0;
        {
            let mut sink = if levels == 1 {
                Sink::Dense(&mut *self.dense)
            } else {
                Sink::Stencil(first, &mut self.blocks[..STENCIL * first.nodes()])
            };
            sink.clear();
            for y in 0..fine.ny {
                for x in 0..fine.nx {
                    let i = y * fine.nx + x;
                    let fi = node_filter(op.flags, op.normal, i);
                    let b = filtered(op.diag[i] * op.c + Mat3::scale((op.mass)(i)), fi, fi);
                    sink.diag(Level::parent(first.nx, x, y), b);
                }
            }
            for (e, b) in mesh.edges().iter().zip(op.off) {
                let (a, bn) = (e.a as usize, e.b as usize);
                let fb = filtered(*b * op.c, node_filter(op.flags, op.normal, a), node_filter(op.flags, op.normal, bn));
                dropped += u32::from(!sink.pair(fine.parent_of(first, a), fine.parent_of(first, bn), fb));
            }
            for y in 0..first.ny {
                for x in 0..first.nx {
                    let i = y * first.nx + x;
                    let s = &self.bending[STENCIL * i..STENCIL * (i + 1)];
                    sink.diag(i, Mat3::scale(op.c * s[0]));
                    for (k, j) in first.forward(x, y).into_iter().enumerate() {
                        if let Some(j) = j {
                            dropped += u32::from(!sink.pair(i, j, Mat3::scale(op.c * s[k + 1])));
                        }
                    }
                }
            }
        }
        // Level l → l + 1 from the stencil blocks.
        let mut offset = 0;
        for l in 1..levels {
            let (lv, next) = (self.level(l), self.level(l + 1));
            let (mine, rest) = self.blocks[offset..].split_at_mut(STENCIL * lv.nodes());
            let mut sink = if l + 1 == levels {
                Sink::Dense(&mut *self.dense)
            } else {
                Sink::Stencil(next, &mut rest[..STENCIL * next.nodes()])
            };
            sink.clear();
            for y in 0..lv.ny {
                for x in 0..lv.nx {
                    let i = y * lv.nx + x;
                    let p = Level::parent(next.nx, x, y);
                    sink.diag(p, mine[STENCIL * i]);
                    let (left, right, down) = (x > 0, x + 1 < lv.nx, y + 1 < lv.ny);
                    let targets = [
                        right.then(|| Level::parent(next.nx, x + 1, y)),
                        (left && down).then(|| Level::parent(next.nx, x.wrapping_sub(1), y + 1)),
                        down.then(|| Level::parent(next.nx, x, y + 1)),
                        (right && down).then(|| Level::parent(next.nx, x + 1, y + 1)),
                    ];
                    for (k, q) in targets.into_iter().enumerate() {
                        if let Some(q) = q {
                            dropped += u32::from(!sink.pair(p, q, mine[STENCIL * i + k + 1]));
                        }
                    }
                }
            }
            for d in mine.iter_mut().step_by(STENCIL) {
                *d = d.inverse().unwrap_or(Mat3::ZERO);
            }
            offset += STENCIL * lv.nodes();
        }
        cholesky(self.dense, 3 * layout.nodes(levels));
        self.dropped += dropped;
    }

    /// `z = B r`: one V-cycle for the fine residual `r` (filtered) on the
    /// fine operator `fine`, with `t` a fine scratch vector.
    pub fn cycle(&mut self, fine_op: &impl FineLevel, r: &[Vec3], z: &mut [Vec3], t: &mut [Vec3]) {
        let (fine, first) = (self.level(0), self.level(1));
        // Pre-smoothing from zero.
        z.fill(Vec3::ZERO);
        fine_op.smooth(self.omega, r, z);
        fine_op.apply(z, t);
        let (x1, rest) = self.vectors.split_at_mut(first.nodes());
        let (r1, rest) = rest.split_at_mut(first.nodes());
        r1.fill(Vec3::ZERO);
        // Row by row, each coarse node's box in node order (the same sums
        // in the same order as node by node).
        let n = fine.nx.max(1);
        for (y, (rr, tr)) in r.chunks_exact(n).zip(t.chunks_exact(n)).take(fine.ny).enumerate() {
            let Some(row) = r1.get_mut((y / BOX) * first.nx..).and_then(|c| c.get_mut(..first.nx)) else { break };
            for ((c, rb), tb) in row.iter_mut().zip(rr.chunks(BOX)).zip(tr.chunks(BOX)) {
                for (ri, ti) in rb.iter().zip(tb) {
                    *c += *ri - *ti;
                }
            }
        }
        coarse_cycle(&self.layout, 1, self.blocks, x1, r1, rest, self.dense);
        prolong(fine, first.nx, x1, z);
        fine_op.filter(z);
        // Post-smoothing.
        fine_op.apply(z, t);
        for (ti, ri) in t.iter_mut().zip(r) {
            *ti = *ri - *ti;
        }
        fine_op.smooth(self.omega, t, z);
    }
}

/// A coarse-grid correction the solver's preconditioner runs: the grid's
/// [`Multigrid`], the aggregates of other meshes
/// ([`super::aggregate::Aggregates`]), or either
/// ([`super::hierarchy::Hierarchy`]).
pub trait Coarse {
    /// Coarse levels (0: none, block Jacobi alone).
    fn levels(&self) -> usize;
    /// Assembles the coarse operators of `op`.
    fn assemble(&mut self, mesh: &Mesh, op: &FineOperator);
    /// `z = B r`: one V-cycle for the fine residual `r` (filtered).
    fn cycle(&mut self, fine_op: &impl FineLevel, r: &[Vec3], z: &mut [Vec3], t: &mut [Vec3]);
}

impl Coarse for Multigrid<'_> {
    fn levels(&self) -> usize {
        Multigrid::levels(self)
    }
    fn assemble(&mut self, mesh: &Mesh, op: &FineOperator) {
        Multigrid::assemble(self, mesh, op)
    }
    fn cycle(&mut self, fine_op: &impl FineLevel, r: &[Vec3], z: &mut [Vec3], t: &mut [Vec3]) {
        Multigrid::cycle(self, fine_op, r, z, t)
    }
}

/// The finest level as the cycle uses it (the solver's operator with its
/// constraints).
pub trait FineLevel {
    /// `out = S Ã S p`, `Ã` the operator the fine level smooths (the
    /// solver's, or an approximation of it that keeps the cycle symmetric
    /// positive definite).
    fn apply(&self, p: &[Vec3], out: &mut [Vec3]);
    /// `z += ω S D⁻¹ S r` (block Jacobi).
    fn smooth(&self, omega: f32, r: &[Vec3], z: &mut [Vec3]);
    /// `z = S z`, the constraints' projection.
    fn filter(&self, z: &mut [Vec3]);
}

/// The V-cycle on coarse level `l`: `x = B_l r`. `rest` holds the coarser
/// levels' vectors, `blocks` the stencil blocks from level `l` on (their
/// diagonal blocks inverted).
fn coarse_cycle(
    layout: &Layout,
    l: usize,
    blocks: &[Mat3],
    v: &mut [Vec3],
    r: &[Vec3],
    rest: &mut [Vec3],
    dense: &[f32],
) {
    if l == layout.levels {
        v.copy_from_slice(r);
        cholesky_solve(dense, v);
        return;
    }
    let [nx, ny] = layout.dims[l];
    let lv = Level { nx, ny };
    let cx = layout.dims[l + 1][0];
    let (mine, deeper) = blocks.split_at(STENCIL * lv.nodes());
    // Forward Gauss–Seidel from zero.
    v.fill(Vec3::ZERO);
    for y in 0..ny {
        relax_row(lv, mine, r, v, y, false, false);
    }
    let next = layout.dims[l + 1][0] * layout.dims[l + 1][1];
    let (v2, rest) = rest.split_at_mut(next);
    let (r2, rest) = rest.split_at_mut(next);
    r2.fill(Vec3::ZERO);
    // After a forward sweep from zero the residual of a row is what its
    // forward neighbours contribute.
    for y in 0..ny {
        for x in 0..nx {
            let i = y * nx + x;
            let mut res = Vec3::ZERO;
            for (s, j) in lv.forward(x, y).into_iter().enumerate() {
                if let Some(j) = j {
                    block_sub(&mine[STENCIL * i + s + 1], &v[j], &mut res);
                }
            }
            r2[Level::parent(cx, x, y)] += res;
        }
    }
    coarse_cycle(layout, l + 1, deeper, v2, r2, rest, dense);
    prolong(lv, cx, v2, v);
    // Backward Gauss–Seidel.
    for y in (0..ny).rev() {
        relax_row(lv, mine, r, v, y, true, true);
    }
}
