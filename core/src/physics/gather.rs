//! The grid's block product `out = B p` as a gather, eight nodes at a
//! time: every node sums its own block and its neighbours' edge blocks,
//! which [`Gather::build`] lays out after each assembly group by group of
//! eight nodes, slot by slot (the node's block, then its neighbours'
//! edges), entry by entry, lane by lane, so that eight consecutive nodes
//! take each entry with one vector multiply-add from one stream of
//! memory; an edge's block is stored at both its nodes, as `B` at the
//! lower one and `Bᵀ` at the upper one.
//!
//! The sums are [`super::solver`]'s scatter product's, term for term and
//! in the same order: the diagonal block first ([`Mat3::mul_vec_fused`]),
//! then the edges from the lower-numbered neighbours (`Bᵀ p`, in the
//! neighbours' order), then the node's own edges (`B p`, in the order of
//! its steps), each as fused multiply-adds over x, y, z. A node without
//! one of the nine neighbours adds a zero block there, which leaves every
//! sum as it was except that a sum of −0 may become +0. The product is the
//! scatter's bit for bit on every target: with AVX and FMA in the build
//! (x86-64) in packed fused multiply-adds, elsewhere lane by lane through
//! [`crate::math::fused`].
//!
//! On a grid whose bending stencil has the grid's couplings
//! ([`super::stencil::GRID_SLOTS`]), the gather also holds the stencil's
//! weights lane by lane, and [`Product::product_bending`] adds the
//! bending to each lane group's sums before they are stored:
//! [`super::stencil::BendingStencil::apply`]'s terms in its order (a
//! node's couplings from the nodes before it, the nearest last, then its
//! own forward couplings' sum), where a coupling outside the grid adds a
//! zero term.
//!
//! Its storage is optional ([`crate::physics::state::StateSizes::with_gather`]):
//! a state without it takes the scatter product.

use crate::math::{Mat3, Vec3};
use crate::mesh::Mesh;
use crate::physics::stencil::{BendingStencil, GRID_SLOTS, OFFSETS};
use core::cell::RefCell;

/// Nodes per lane group.
pub const LANES: usize = 8;
/// The node itself, then its neighbours at `−nx−1, −nx, −nx+1, −1` (their
/// edges' blocks transposed) and `+1, +nx−1, +nx, +nx+1`: the order in
/// which the scatter product adds them.
pub const SLOTS: usize = 9;
/// `f32`s of one group's table.
const GROUP: usize = SLOTS * 9 * LANES;

fn offsets(nx: usize) -> [isize; SLOTS] {
    let w = nx as isize;
    [0, -w - 1, -w, -w + 1, -1, 1, w - 1, w, w + 1]
}

/// The bending stencil's couplings on a grid ([`GRID_SLOTS`]), in
/// [`OFFSETS`]' order: their slots (from 1) and grid steps.
const BEND: [(usize, isize, isize); BEND_SLOTS] = {
    let mut b = [(0, 0, 0); BEND_SLOTS];
    let (mut k, mut n) = (0, 0);
    while k < OFFSETS.len() {
        if GRID_SLOTS & (1 << k) != 0 {
            b[n] = (k + 1, OFFSETS[k].0, OFFSETS[k].1);
            n += 1;
        }
        k += 1;
    }
    b
};
/// Couplings of a grid's bending stencil.
const BEND_SLOTS: usize = GRID_SLOTS.count_ones() as usize;

/// The flat offsets of [`BEND`] on a grid `nx` wide: ascending for
/// `nx ≥ 4`.
fn bend_offsets(nx: usize) -> [usize; BEND_SLOTS] {
    BEND.map(|(_, dx, dy)| (dy * nx as isize + dx) as usize)
}

const fn groups(nodes: usize) -> usize {
    nodes.div_ceil(LANES)
}

/// Zeros before and after the nodes in each of `p`'s component arrays
/// and the bending weights' arrays: every coupling of every node is then
/// in range.
const fn pad(nx: usize) -> usize {
    2 * (nx + 1)
}

/// Length of each of `p`'s component arrays and of the bending weights'
/// arrays: whole lane groups with [`pad`] zeros before and after.
const fn span(nx: usize, nodes: usize) -> usize {
    groups(nodes) * LANES + 2 * pad(nx)
}

/// `f32`s of a grid's gather table and its scratch (0 for other meshes).
pub const fn floats(grid: Option<[usize; 2]>) -> usize {
    match grid {
        Some([nx, ny]) => GROUP * groups(nx * ny) + (3 + BEND_SLOTS) * span(nx, nx * ny),
        None => 0,
    }
}

/// The blocks of the last assembly in gather order, and scratch for the
/// factor's components.
pub struct Gather<'a> {
    nx: usize,
    nodes: usize,
    /// Entry `(k, j)` (row `k`, column `j`) of slot `s`'s block of node
    /// `8 g + l` at `((9 g + s) · 9 + 3 k + j) · 8 + l`.
    coef: &'a mut [f32],
    /// `p`'s x, y and z components, each [`span`] long.
    comps: RefCell<&'a mut [f32]>,
    /// The bending stencil's weights: coupling `c` of [`BEND`] of node `i`
    /// at `c · span + pad + i`.
    bend: &'a mut [f32],
    /// Whether `coef` holds the current blocks.
    ready: bool,
    /// Whether `bend` holds the state's stencil.
    bending: bool,
}

impl<'a> Gather<'a> {
    /// A table for the grid `mesh` out of `pool` ([`floats`] long), or
    /// `None` (not a grid at least 3 nodes wide, or too little storage).
    /// With `stencil` (constant for a state; the grid's couplings, a grid
    /// at least 4 nodes wide), also its weights for
    /// [`Product::product_bending`].
    pub fn new(mesh: &Mesh, pool: &'a mut [f32], stencil: Option<&BendingStencil>) -> Option<Gather<'a>> {
        let grid = mesh.counts().grid?;
        let [nx, ny] = grid;
        if nx < 3 || ny < 2 || nx * ny != mesh.node_count() || pool.len() < floats(Some(grid)) {
            return None;
        }
        let (coef, rest) = pool.split_at_mut(GROUP * groups(nx * ny));
        let (comps, rest) = rest.split_at_mut(3 * span(nx, nx * ny));
        let bend = &mut rest[..BEND_SLOTS * span(nx, nx * ny)];
        comps.fill(0.0);
        bend.fill(0.0);
        let (len, pad, nodes) = (span(nx, nx * ny), pad(nx), nx * ny);
        let st = stencil.filter(|st| st.slot_bits() == GRID_SLOTS && nx >= 4);
        if let Some(st) = st {
            for (c, &(slot, _, _)) in BEND.iter().enumerate() {
                for (i, w) in bend.iter_mut().skip(c * len + pad).take(nodes).enumerate() {
                    *w = st.coupling(i, slot);
                }
            }
        }
        let bending = st.is_some();
        Some(Gather { nx, nodes, coef, comps: RefCell::new(comps), bend, ready: false, bending })
    }

    /// Lays out the node blocks `diag` and the edge blocks `off` of
    /// `mesh`'s edges. Not ready (the scatter product serves) unless every
    /// edge joins grid neighbours, from its lower node, in the scatter's
    /// order (by lower node, then by step).
    pub fn build(&mut self, mesh: &Mesh, diag: &[Mat3], off: &[Mat3]) {
        self.ready = false;
        self.coef.fill(0.0);
        let coef = &mut *self.coef;
        let mut put = |slot: usize, i: usize, b: &Mat3, transpose: bool| {
            let (g, l) = (i / LANES, i % LANES);
            for k in 0..3 {
                for j in 0..3 {
                    // Mat3 holds columns: entry (k, j) is column j's k-th.
                    let v = if transpose { b.c[k].to_array()[j] } else { b.c[j].to_array()[k] };
                    if let Some(c) = coef.get_mut(((9 * g + slot) * 9 + 3 * k + j) * LANES + l) {
                        *c = v;
                    }
                }
            }
        };
        for (i, d) in diag.iter().enumerate().take(self.nodes) {
            put(0, i, d, false);
        }
        let edges = mesh.edges();
        if edges.len() != off.len() {
            return;
        }
        let offs = offsets(self.nx);
        let mut last = (0usize, 0usize);
        for (n, (e, b)) in edges.iter().zip(off).enumerate() {
            let (a, bn) = (e.a as usize, e.b as usize);
            if a >= bn || bn >= self.nodes {
                return;
            }
            let step = (bn - a) as isize;
            let (Some(fwd), Some(back)) = (offs.iter().position(|&o| o == step), offs.iter().position(|&o| o == -step))
            else {
                return;
            };
            if n > 0 && (a, fwd) <= last {
                return;
            }
            last = (a, fwd);
            put(fwd, a, b, false);
            put(back, bn, b, true);
        }
        self.ready = true;
    }
}

/// A block product that may decline ([`Gather`]'s, seen by the solver's
/// operators).
pub trait Product {
    /// `out = B p`; `false` (and `out` untouched) when it cannot.
    fn product(&self, p: &[Vec3], out: &mut [Vec3]) -> bool;
    /// `out = B p + K_b p` with the bending stencil `K_b` the table was
    /// made with (the same bits as [`Product::product`] followed by
    /// [`BendingStencil::apply`] with scale 1); `false` (and `out`
    /// untouched) when it cannot.
    fn product_bending(&self, p: &[Vec3], out: &mut [Vec3]) -> bool;
}

impl Product for Gather<'_> {
    /// `out = B p` with the blocks of the last [`Gather::build`]; `false`
    /// (and `out` untouched) when the table is not ready, is in use or does
    /// not fit `p` and `out`.
    fn product(&self, p: &[Vec3], out: &mut [Vec3]) -> bool {
        self.run(p, out, None)
    }

    /// [`Product::product`] and the stencil the table was made with, if
    /// any.
    fn product_bending(&self, p: &[Vec3], out: &mut [Vec3]) -> bool {
        self.bending && self.run(p, out, Some(&*self.bend))
    }
}

impl Gather<'_> {
    /// The product, with the bending weights `bend` when given.
    fn run(&self, p: &[Vec3], out: &mut [Vec3], bend: Option<&[f32]>) -> bool {
        if !self.ready || p.len() != self.nodes || out.len() != self.nodes {
            return false;
        }
        let Ok(mut comps) = self.comps.try_borrow_mut() else { return false };
        let (len, pad) = (span(self.nx, self.nodes), pad(self.nx));
        let comps: &mut [f32] = &mut comps;
        let (cx, rest) = comps.split_at_mut(len);
        let (cy, cz) = rest.split_at_mut(len);
        for (i, pi) in p.iter().enumerate() {
            cx[pad + i] = pi.x;
            cy[pad + i] = pi.y;
            cz[pad + i] = pi.z;
        }
        products(self.coef, [&*cx, &*cy, &*cz], bend, self.nx, out);
        true
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx", target_feature = "fma"))]
#[allow(unsafe_code)]
fn products(coef: &[f32], comps: [&[f32]; 3], bend: Option<&[f32]>, nx: usize, out: &mut [Vec3]) {
    // SAFETY: `products_avx` only needs AVX and FMA, which this build
    // enables for every function (the `cfg` above); it touches memory only
    // through slices.
    unsafe { products_avx(coef, comps, bend, nx, out) }
}

/// Eight nodes at a time in packed AVX fused multiply-adds (the same
/// roundings as [`crate::math::fused`] lane by lane), then the bending's
/// terms in packed multiplies, subtractions and additions. The grid widths
/// with a fixed kernel take every neighbour at a constant place.
#[cfg(all(target_arch = "x86_64", target_feature = "avx", target_feature = "fma"))]
#[target_feature(enable = "avx,fma")]
fn products_avx(coef: &[f32], comps: [&[f32]; 3], bend: Option<&[f32]>, nx: usize, out: &mut [Vec3]) {
    use core::arch::x86_64::{__m256, _mm256_add_ps, _mm256_fmadd_ps, _mm256_mul_ps, _mm256_setzero_ps, _mm256_sub_ps};
    #[inline(always)]
    fn load(s: &[f32], at: usize) -> __m256 {
        let w: [f32; 8] = s.get(at..at + 8).and_then(|w| w.try_into().ok()).unwrap_or([0.0; 8]);
        bytemuck::cast(w)
    }
    #[inline(always)]
    fn part(s: &[f32], lo: usize, len: usize) -> &[f32] {
        s.get(lo..lo + len).unwrap_or(&[])
    }
    let len = comps[0].len();
    macro_rules! groups {
        ($nx:expr) => {{
            let nx: usize = $nx;
            let pad = pad(nx);
            let (offs, boffs) = (offsets(nx), bend_offsets(nx));
            for (chunk, (g, blk)) in out.chunks_mut(LANES).zip(coef.chunks_exact(GROUP).enumerate()) {
                let Ok(blk) = <&[f32; GROUP]>::try_from(blk) else { return };
                let lo = g * LANES;
                let p = [
                    part(comps[0], lo, 2 * pad + LANES),
                    part(comps[1], lo, 2 * pad + LANES),
                    part(comps[2], lo, 2 * pad + LANES),
                ];
                let e = |slot: usize, k: usize, j: usize| load(blk, ((slot * 9) + 3 * k + j) * LANES);
                let pc = [load(p[0], pad), load(p[1], pad), load(p[2], pad)];
                let mut acc = [pc[0]; 3];
                for (k, a) in acc.iter_mut().enumerate() {
                    let s = _mm256_mul_ps(e(0, k, 0), pc[0]);
                    let s = _mm256_fmadd_ps(e(0, k, 1), pc[1], s);
                    *a = _mm256_fmadd_ps(e(0, k, 2), pc[2], s);
                }
                for slot in 1..SLOTS {
                    let nb = pad.wrapping_add_signed(offs[slot]);
                    let pn = [load(p[0], nb), load(p[1], nb), load(p[2], nb)];
                    for (k, a) in acc.iter_mut().enumerate() {
                        let s = _mm256_fmadd_ps(e(slot, k, 0), pn[0], *a);
                        let s = _mm256_fmadd_ps(e(slot, k, 1), pn[1], s);
                        *a = _mm256_fmadd_ps(e(slot, k, 2), pn[2], s);
                    }
                }
                if let Some(bend) = bend {
                    // The couplings from the nodes before, the nearest last.
                    for c in (0..BEND_SLOTS).rev() {
                        let at = pad - boffs[c];
                        let w = load(bend, c * len + lo + at);
                        for (k, a) in acc.iter_mut().enumerate() {
                            *a = _mm256_sub_ps(*a, _mm256_mul_ps(_mm256_sub_ps(pc[k], load(p[k], at)), w));
                        }
                    }
                    let mut own = [_mm256_setzero_ps(); 3];
                    for (c, &o) in boffs.iter().enumerate() {
                        let w = load(bend, c * len + lo + pad);
                        for (k, b) in own.iter_mut().enumerate() {
                            *b = _mm256_add_ps(*b, _mm256_mul_ps(_mm256_sub_ps(load(p[k], pad + o), pc[k]), w));
                        }
                    }
                    for (a, b) in acc.iter_mut().zip(own) {
                        *a = _mm256_add_ps(*a, b);
                    }
                }
                let s: [[f32; 8]; 3] = acc.map(bytemuck::cast);
                for (l, o) in chunk.iter_mut().enumerate() {
                    *o = Vec3::new(s[0][l], s[1][l], s[2][l]);
                }
            }
        }};
    }
    match nx {
        16 => groups!(16),
        31 => groups!(31),
        61 => groups!(61),
        nx => groups!(nx),
    }
}

/// Node by node in the same fused multiply-adds, then the bending's terms
/// in the same order.
#[cfg(not(all(target_arch = "x86_64", target_feature = "avx", target_feature = "fma")))]
fn products(coef: &[f32], comps: [&[f32]; 3], bend: Option<&[f32]>, nx: usize, out: &mut [Vec3]) {
    use crate::math::fused;
    let get = |s: &[f32], at: usize| s.get(at).copied().unwrap_or(0.0);
    let (pad, offs, boffs, len) = (pad(nx), offsets(nx), bend_offsets(nx), comps[0].len());
    for (i, o) in out.iter_mut().enumerate() {
        let (g, l) = (i / LANES, i % LANES);
        let e = |slot: usize, k: usize, j: usize| get(coef, ((9 * g + slot) * 9 + 3 * k + j) * LANES + l);
        let at = |slot: usize| (pad + i).wrapping_add_signed(offs[slot]);
        let mut s = [0.0f32; 3];
        for (k, sk) in s.iter_mut().enumerate() {
            let mut a = e(0, k, 0) * get(comps[0], at(0));
            a = fused(e(0, k, 1), get(comps[1], at(0)), a);
            a = fused(e(0, k, 2), get(comps[2], at(0)), a);
            for slot in 1..SLOTS {
                for (j, c) in comps.iter().enumerate() {
                    a = fused(e(slot, k, j), get(c, at(slot)), a);
                }
            }
            if let Some(bend) = bend {
                let (c, pi) = (comps[k], get(comps[k], pad + i));
                for (m, &d) in boffs.iter().enumerate().rev() {
                    a -= (pi - get(c, pad + i - d)) * get(bend, m * len + pad + i - d);
                }
                let mut own = 0.0;
                for (m, &d) in boffs.iter().enumerate() {
                    own += (get(c, pad + i + d) - pi) * get(bend, m * len + pad + i);
                }
                a += own;
            }
            *sk = a;
        }
        *o = Vec3::new(s[0], s[1], s[2]);
    }
}
