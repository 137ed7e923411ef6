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

    /// Adds `scale · K_b · p` to `out`, on differences `p_j − p_i` (the
    /// rows sum to zero), so that positions far from the origin lose no
    /// accuracy to cancellation.
    pub fn apply(&self, scale: f32, p: &[Vec3], out: &mut [Vec3]) {
        let (nx, ny) = (self.nx, self.ny);
        let active = &self.active[..self.count];
        // Linear index offsets of the active slots.
        let mut step = [0usize; 12];
        for (st, &k) in step.iter_mut().zip(active) {
            let (dx, dy) = OFFSETS[k as usize - 1];
            *st = (dy * nx as isize + dx) as usize;
        }
        let step = &step[..self.count];
        for y in 0..ny {
            for x in 0..nx {
                let i = y * nx + x;
                let w = &self.weights[PER_NODE * i..PER_NODE * (i + 1)];
                let pi = p[i];
                let mut acc = Vec3::ZERO;
                if x >= 2 && x + 2 < nx && y + 2 < ny {
                    for (&k, &d) in active.iter().zip(step) {
                        let j = i.wrapping_add(d);
                        let f = (p[j] - pi) * (w[k as usize] * scale);
                        acc += f;
                        out[j] -= f;
                    }
                } else {
                    for &k in active {
                        let (dx, dy) = OFFSETS[k as usize - 1];
                        let (jx, jy) = (x as isize + dx, y + dy as usize);
                        if jx < 0 || jx as usize >= nx || jy >= ny {
                            continue;
                        }
                        let j = jy * nx + jx as usize;
                        let f = (p[j] - pi) * (w[k as usize] * scale);
                        acc += f;
                        out[j] -= f;
                    }
                }
                out[i] += acc;
            }
        }
    }
}

/// The bending Hessian as a step applies it: assembled on grids,
/// matrix-free on other meshes.
#[derive(Clone, Copy)]
pub enum Bending<'s> {
    MatrixFree(Plate),
    Stencil(&'s BendingStencil<'s>),
}

impl Bending<'_> {
    /// Adds `scale · K_b · p` to `out` (with `p = x`, `scale = −1`: the
    /// bending forces).
    pub fn apply(&self, mesh: &Mesh, scale: f32, p: &[Vec3], out: &mut [Vec3]) {
        match self {
            Bending::MatrixFree(plate) => {
                if plate.stiffness != 0.0 {
                    bending::apply(mesh, *plate, scale, p, out)
                }
            }
            Bending::Stencil(s) => s.apply(scale, p, out),
        }
    }

    /// Adds `scale` times the diagonal blocks of `K_b` to `out`.
    pub fn add_diagonal(&self, mesh: &Mesh, scale: f32, out: &mut [crate::math::Mat3]) {
        match self {
            Bending::MatrixFree(plate) => bending::add_diagonal(mesh, *plate, scale, out),
            Bending::Stencil(s) => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o += crate::math::Mat3::scale(scale * s.diagonal(i));
                }
            }
        }
    }
}
