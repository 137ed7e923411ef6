//! The plate bending Hessian of a grid mesh, assembled once: it is
//! constant ([`crate::physics::bending`]) and a multiple of the identity
//! per node pair, so it is a scalar stencil over the grid. Each node keeps
//! its diagonal entry and its couplings to the forward half of the nodes
//! within two grid steps ([`OFFSETS`]); applying it gathers and scatters
//! 3-vectors with scalar weights, a fraction of the cost of re-deriving
//! the hinge measures and moments of every bending triangle at every
//! product. Meshes that are not grids keep the matrix-free product.

use crate::math::Vec3;
use crate::mesh::{Mesh, NO_HINGE};
use crate::physics::bending::{self, Plate};

/// Grid offsets `(dx, dy)` of the forward couplings, in slots 1..=12.
pub const OFFSETS: [(isize, isize); 12] =
    [(1, 0), (2, 0), (-2, 1), (-1, 1), (0, 1), (1, 1), (2, 1), (-2, 2), (-1, 2), (0, 2), (1, 2), (2, 2)];
/// Weights per node: the diagonal and the [`OFFSETS`].
pub const PER_NODE: usize = 1 + OFFSETS.len();

/// The `f32`s a grid's stencil takes (none for other meshes).
pub const fn floats(grid: Option<[usize; 2]>) -> usize {
    match grid {
        Some([nx, ny]) => PER_NODE * nx * ny,
        None => 0,
    }
}

/// The assembled bending Hessian of a grid, per unit of the identity.
pub struct BendingStencil<'a> {
    nx: usize,
    ny: usize,
    weights: &'a [f32],
    /// The slots with a coupling anywhere (9 of the 12 on a grid's
    /// bending triangulation), `active[..count]`.
    active: [u8; 12],
    count: usize,
}

/// Slot of the coupling from node (`x`, `y`) at offset (`dx`, `dy`), and
/// whether it is stored at the other node (a backward offset).
fn slot(dx: isize, dy: isize) -> Option<(usize, bool)> {
    OFFSETS
        .iter()
        .position(|&o| o == (dx, dy))
        .map(|k| (k + 1, false))
        .or_else(|| OFFSETS.iter().position(|&o| o == (-dx, -dy)).map(|k| (k + 1, true)))
}

impl<'a> BendingStencil<'a> {
    /// Assembles the stencil of a grid `mesh` into `pool` ([`floats`]
    /// long). `None` for other meshes, a short pool, or a coupling beyond
    /// two grid steps.
    pub fn new(mesh: &Mesh, plate: Plate, pool: &'a mut [f32]) -> Option<BendingStencil<'a>> {
        let [nx, ny] = mesh.counts().grid?;
        let weights = pool.get_mut(..PER_NODE * nx * ny)?;
        weights.fill(0.0);
        let hinges = mesh.hinges();
        for t in mesh.bending() {
            let g = bending::form(t, plate.poisson);
            for (e, &he) in t.hinges.iter().enumerate() {
                let Some(he) = (he != NO_HINGE).then(|| hinges.get(he as usize)).flatten() else { continue };
                for (f, &hf) in t.hinges.iter().enumerate() {
                    let Some(hf) = (hf != NO_HINGE).then(|| hinges.get(hf as usize)).flatten() else { continue };
                    let s = plate.stiffness * g[e][f];
                    for (&a, &ka) in he.nodes.iter().zip(&he.k) {
                        for (&b, &kb) in hf.nodes.iter().zip(&hf.k) {
                            let (a, b) = (a as usize, b as usize);
                            let v = s * ka * kb;
                            if a == b {
                                weights[PER_NODE * a] += v;
                                continue;
                            }
                            let dx = (b % nx) as isize - (a % nx) as isize;
                            let dy = (b / nx) as isize - (a / nx) as isize;
                            // A backward coupling is the mirror of a forward
                            // one, which the sum visits too.
                            if let (k, false) = slot(dx, dy)? {
                                weights[PER_NODE * a + k] += v;
                            }
                        }
                    }
                }
            }
        }
        // Constant fields are in the kernel (the rows sum to zero): the
        // diagonal is made of the couplings so that the product, taken on
        // differences, is exactly invariant under translations.
        for i in 0..nx * ny {
            weights[PER_NODE * i] = 0.0;
        }
        for y in 0..ny {
            for x in 0..nx {
                let i = y * nx + x;
                for (k, &(dx, dy)) in OFFSETS.iter().enumerate() {
                    let (jx, jy) = (x as isize + dx, y as isize + dy);
                    if jx >= 0 && (jx as usize) < nx && (jy as usize) < ny {
                        let j = jy as usize * nx + jx as usize;
                        let w = weights[PER_NODE * i + k + 1];
                        weights[PER_NODE * i] -= w;
                        weights[PER_NODE * j] -= w;
                    }
                }
            }
        }
        let (mut active, mut count) = ([0u8; 12], 0);
        for k in 0..OFFSETS.len() {
            if (0..nx * ny).any(|i| weights[PER_NODE * i + k + 1] != 0.0) {
                active[count] = k as u8 + 1;
                count += 1;
            }
        }
        Some(BendingStencil { nx, ny, weights, active, count })
    }

    /// The slots ([`OFFSETS`], from 1) with a coupling anywhere.
    pub fn active_slots(&self) -> &[u8] {
        &self.active[..self.count]
    }

    /// The active slots as bits `k` for slot `k + 1` ([`GRID_SLOTS`] on a
    /// grid's bending triangulation).
    pub fn slot_bits(&self) -> u16 {
        self.active_slots().iter().fold(0u16, |m, &k| m | 1 << (k - 1))
    }

    /// The weight of node `i`'s coupling in `slot` ([`OFFSETS`], from 1;
    /// 0 outside the grid or the stencil).
    #[inline]
    pub fn coupling(&self, i: usize, slot: usize) -> f32 {
        if slot == 0 || slot >= PER_NODE {
            return 0.0;
        }
        self.weights.get(PER_NODE * i + slot).copied().unwrap_or(0.0)
    }

    /// The diagonal weight of node `i`.
    #[inline]
    pub fn diagonal(&self, i: usize) -> f32 {
        self.weights[PER_NODE * i]
    }

    /// Calls `f(i, j, w)` for node `i`'s forward couplings `w` to nodes `j`.
    #[inline]
    pub fn each_forward(&self, mut f: impl FnMut(usize, usize, f32)) {
        for y in 0..self.ny {
            for x in 0..self.nx {
                let i = y * self.nx + x;
                for (k, &(dx, dy)) in OFFSETS.iter().enumerate() {
                    let (jx, jy) = (x as isize + dx, y as isize + dy);
                    if jx >= 0 && (jx as usize) < self.nx && (jy as usize) < self.ny {
                        f(i, jy as usize * self.nx + jx as usize, self.weights[PER_NODE * i + k + 1]);
                    }
                }
            }
        }
    }

    /// The bending energy `½ xᵀ K_b x` of positions `x` and the bound on
    /// its `f32` rounding over ε. The rows sum to zero, so the energy is
    /// `−½ Σ w_ij |x_j − x_i|²` over the forward couplings: each difference
    /// is rounded once, with no cancellation of positions far from the
    /// origin, and the bound is `Σ |w_ij| |x_j − x_i|²`. The same operator
    /// as [`BendingStencil::apply`], so the energy's gradient is the force
    /// the step takes. `(0, 0)` when `x` does not cover the grid.
    pub fn energy_and_noise(&self, x: &[Vec3]) -> (f32, f32) {
        let (nx, ny) = (self.nx, self.ny);
        let (Some(x), (rows, _)) = (x.get(..nx * ny), self.weights.as_chunks::<PER_NODE>()) else { return (0.0, 0.0) };
        let (mut twice, mut noise) = (0.0f32, 0.0f32);
        for (i, (xi, w)) in x.iter().zip(rows).enumerate() {
            let (cx, cy) = (i % nx, i / nx);
            for &k in self.active_slots() {
                let (dx, dy) = OFFSETS[k as usize - 1];
                let (jx, jy) = (cx as isize + dx, cy + dy as usize);
                if jx < 0 || jx as usize >= nx || jy >= ny {
                    continue;
                }
                let (Some(xj), Some(&wk)) = (x.get(jy * nx + jx as usize), w.get(k as usize)) else { continue };
                let t = wk * (*xj - *xi).norm2();
                twice -= t;
                noise += libm::fabsf(t);
            }
        }
        (0.5 * twice, noise)
    }

    /// Adds `scale · K_b · p` to `out`, on differences `p_j − p_i` (the
    /// rows sum to zero), so that positions far from the origin lose no
    /// accuracy to cancellation. On the grid widths the device, the 2×
    /// finer column and the fine reference use ([`FIXED_WIDTHS`]) with a
    /// grid's own couplings ([`GRID_SLOTS`]), the nodes away from the
    /// sides and last rows run a kernel in which every coupling is at a
    /// fixed place: no index computed or checked, the same sums in the same
    /// order.
    pub fn apply(&self, scale: f32, p: &[Vec3], out: &mut [Vec3]) {
        let n = self.nx * self.ny;
        let (Some(p), Some(out)) = (p.get(..n), out.get_mut(..n)) else { return };
        match (self.nx, self.slot_bits()) {
            (16, GRID_SLOTS) => self.apply_fixed::<16, GRID_SLOTS>(scale, p, out),
            #[cfg(not(target_os = "none"))]
            (31, GRID_SLOTS) => self.apply_fixed::<31, GRID_SLOTS>(scale, p, out),
            #[cfg(not(target_os = "none"))]
            (61, GRID_SLOTS) => self.apply_fixed::<61, GRID_SLOTS>(scale, p, out),
            _ => self.apply_fixed::<0, 0>(scale, p, out),
        }
    }

    /// [`BendingStencil::apply`] with the fixed kernel for grids `NX` nodes
    /// wide whose couplings are the slots `SLOTS` (bit `k` for slot
    /// `k + 1`); `NX = 0`: the general path only.
    #[inline(always)]
    fn apply_fixed<const NX: usize, const SLOTS: u16>(&self, scale: f32, p: &[Vec3], out: &mut [Vec3]) {
        let (nx, ny) = (self.nx, self.ny);
        let (rows, _) = self.weights.as_chunks::<PER_NODE>();
        let left = const { reach_left(SLOTS) };
        let span = const { span(NX, SLOTS) };
        let n = nx * ny;
        for y in 0..ny {
            for x in 0..nx {
                let i = y * nx + x;
                let Some(w) = rows.get(i) else { return };
                // A coupling past a side of the grid has a zero weight, so
                // a node near a side takes the fixed kernel too (its terms
                // there add zeros) wherever its window fits in the arrays.
                if NX != 0 && i >= left && i - left + span <= n {
                    node_fixed::<NX, SLOTS>(i - left, w, scale, p, out);
                } else {
                    self.node_general(x, y, w, scale, p, out);
                }
            }
        }
    }

    /// Node (`x`, `y`)'s share of [`BendingStencil::apply`]: its row and
    /// its forward couplings' transposes, each index checked.
    #[inline(always)]
    fn node_general(&self, x: usize, y: usize, w: &[f32; PER_NODE], scale: f32, p: &[Vec3], out: &mut [Vec3]) {
        let (nx, ny) = (self.nx, self.ny);
        let i = y * nx + x;
        let (Some(&pi), true) = (p.get(i), i < out.len()) else { return };
        let mut acc = Vec3::ZERO;
        for &k in self.active_slots() {
            let (dx, dy) = OFFSETS[k as usize - 1];
            let (jx, jy) = (x as isize + dx, y + dy as usize);
            if jx < 0 || jx as usize >= nx || jy >= ny {
                continue;
            }
            let j = jy * nx + jx as usize;
            let (Some(&pj), Some(wk)) = (p.get(j), w.get(k as usize)) else { continue };
            let f = (pj - pi) * (*wk * scale);
            acc += f;
            if let Some(o) = out.get_mut(j) {
                *o -= f;
            }
        }
        out[i] += acc;
    }
}

/// The grid widths with a fixed kernel ([`BendingStencil::apply`] and the
/// solver's block product): the device's 16, the 31 of the 2× finer
/// column, the fine reference's 61. On bare-metal targets
/// (`target_os = "none"`) only 16 is compiled in (the others would be
/// about 20 KB of flash a board's cloth does not use); other widths take
/// the general path, with the same results.
pub const FIXED_WIDTHS: [usize; 3] = [16, 31, 61];

/// The couplings of a grid's bending triangulation (all diagonals one
/// way), as bits `k` of the slots `k + 1`: (1, 0), (2, 0), (−1, 1) … (2, 1),
/// (0, 2) … (2, 2).
pub const GRID_SLOTS: u16 = 0b1110_0111_1011;

/// How far left of its node a coupling among `slots` reaches.
const fn reach_left(slots: u16) -> usize {
    let mut k = 0;
    let mut left = 0;
    while k < OFFSETS.len() {
        if slots & (1 << k) != 0 && OFFSETS[k].0 < 0 && (-OFFSETS[k].0) as usize > left {
            left = (-OFFSETS[k].0) as usize;
        }
        k += 1;
    }
    left
}

/// The nodes from [`reach_left`] before a node to its farthest coupling
/// among `slots` on a grid `nx` wide: the window [`node_fixed`] reads.
const fn span(nx: usize, slots: u16) -> usize {
    2 * nx + 3 + reach_left(slots)
}

/// One node's share of [`BendingStencil::apply`] on a grid `NX` wide
/// with the couplings `SLOTS`: `base` is the node's index less
/// [`reach_left`]; every neighbour is at a constant place in the windows
/// of `p` and `out` from `base` (the caller keeps them inside the grid).
#[inline(always)]
fn node_fixed<const NX: usize, const SLOTS: u16>(
    base: usize,
    w: &[f32; PER_NODE],
    scale: f32,
    p: &[Vec3],
    out: &mut [Vec3],
) {
    let left = const { reach_left(SLOTS) };
    let span = const { span(NX, SLOTS) };
    let (Some(pw), Some(ow)) = (p.get(base..base + span), out.get_mut(base..base + span)) else { return };
    let pi = pw[left];
    let mut acc = Vec3::ZERO;
    // Written out per slot (a loop over them is not unrolled), so that
    // every place is a constant.
    macro_rules! couple {
        ($($k:literal)*) => {$(
            if SLOTS & (1 << $k) != 0 {
                let at = const { (reach_left(SLOTS) as isize + OFFSETS[$k].1 * NX as isize + OFFSETS[$k].0) as usize };
                let f = (pw[at] - pi) * (w[$k + 1] * scale);
                acc += f;
                ow[at] -= f;
            }
        )*};
    }
    couple!(0 1 2 3 4 5 6 7 8 9 10 11);
    ow[left] += acc;
}

/// The bending Hessian as a step applies it: assembled on grids,
/// matrix-free on other meshes (with the room a state lends it, [`Scratch`]).
#[derive(Clone, Copy)]
pub enum Bending<'s> {
    MatrixFree(Plate, Scratch<'s>),
    Stencil(&'s BendingStencil<'s>),
}

/// The room a state lends the matrix-free bending Hessian, either part
/// empty where it has none: each hinge's measure within a product
/// ([`bending::apply_cached`]) and each node's diagonal entry with the
/// plate it was summed for ([`bending::add_diagonal_cached`]).
#[derive(Clone, Copy, Default)]
pub struct Scratch<'s> {
    pub curvature: &'s [core::cell::Cell<crate::math::Vec3>],
    pub diagonal: &'s [core::cell::Cell<f32>],
}

impl Scratch<'_> {
    /// No room: every product measures its hinges per triangle, every
    /// diagonal is summed term by term.
    pub const NONE: Scratch<'static> = Scratch { curvature: &[], diagonal: &[] };
}

impl Bending<'_> {
    /// Adds `scale · K_b · p` to `out` (with `p = x`, `scale = −1`: the
    /// bending forces).
    pub fn apply(&self, mesh: &Mesh, scale: f32, p: &[Vec3], out: &mut [Vec3]) {
        match self {
            Bending::MatrixFree(plate, cache) => {
                if plate.stiffness != 0.0 {
                    bending::apply_cached(mesh, *plate, scale, p, out, cache.curvature)
                }
            }
            Bending::Stencil(s) => s.apply(scale, p, out),
        }
    }

    /// Adds `scale` times the diagonal blocks of `K_b` to `out`.
    pub fn add_diagonal(&self, mesh: &Mesh, scale: f32, out: &mut [crate::math::Mat3]) {
        match self {
            Bending::MatrixFree(plate, cache) => bending::add_diagonal_cached(mesh, *plate, scale, out, cache.diagonal),
            Bending::Stencil(s) => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o += crate::math::Mat3::scale(scale * s.diagonal(i));
                }
            }
        }
    }
}
