//! The linear system of one linearised backward-Euler step, stored as
//! node-diagonal and static-edge 3×3 blocks (the membrane's sparsity), plus
//! the constant bending Hessian (an assembled stencil on grids, matrix-free
//! elsewhere: [`Bending`]); and the filtered conjugate-gradient solver,
//! preconditioned by the multigrid V-cycle on grids
//! ([`crate::physics::multigrid`]) and by block Jacobi elsewhere.

use crate::contact;
use crate::flags;
use crate::math::{Mat3, Vec3};
use crate::mesh::{Edge, Mesh};
use crate::model::Model;
use crate::physics::blocks::{diagonal_term, edge_terms, smooth_term};
use crate::physics::gather;
use crate::physics::gather::Product;
use crate::physics::multigrid::{self, Coarse, FineLevel, FineOperator};
use crate::physics::stencil::{self, Bending};
use crate::physics::workspace::{blocks_of, split_blocks, Workspace};
use crate::probe::{Probe, Stage};

/// `out = K p`: `diag` and `off` hold the membrane's diagonal and symmetric
/// static-edge blocks (`off[e]` is the block of row `a`, column `b` of edge
/// `e`); the bending Hessian is applied as [`Bending`] holds it.
pub fn matvec(mesh: &Mesh, diag: &[Mat3], off: &[Mat3], bending: Bending, p: &[Vec3], out: &mut [Vec3]) {
    block_product(mesh, diag, off, p, out);
    bending.apply(mesh, 1.0, p, out);
}

/// `out = B p` for the node-diagonal and static-edge blocks `B`. On the
/// grid widths with a fixed kernel ([`crate::physics::stencil::FIXED_WIDTHS`])
/// every node takes its edges with each neighbour at a fixed place; the
/// same sums in the same order, so the same bits.
///
/// Every block product is in fused multiply-adds
/// ([`crate::math::fused`]; the Cortex-M4F's `VFMA.F32` kernels with the
/// `dsp` feature), so that each block costs half the floating-point
/// operations, with the same bits on every target.
fn block_product(mesh: &Mesh, diag: &[Mat3], off: &[Mat3], p: &[Vec3], out: &mut [Vec3]) {
    for ((o, d), pi) in out.iter_mut().zip(diag).zip(p) {
        diagonal_term(d, pi, o);
    }
    let edges = mesh.edges();
    match mesh.counts().grid {
        Some([16, ny]) => grid_edges::<16>(ny, off, p, out),
        #[cfg(not(target_os = "none"))]
        Some([31, ny]) => grid_edges::<31>(ny, off, p, out),
        #[cfg(not(target_os = "none"))]
        Some([61, ny]) => grid_edges::<61>(ny, off, p, out),
        _ => {
            for (e, b) in edges.iter().zip(off) {
                edge_product(e, b, p, out);
            }
        }
    }
}

/// Edge `e`'s two terms of a block product (none for an edge whose ends
/// are one node or out of range, which a checked mesh does not have).
#[inline(always)]
fn edge_product(e: &Edge, b: &Mat3, p: &[Vec3], out: &mut [Vec3]) {
    let (i, j) = (e.a as usize, e.b as usize);
    let (Some(pi), Some(pj)) = (p.get(i), p.get(j)) else { return };
    let (lo, hi) = out.split_at_mut(i.max(j));
    let (Some(low), Some(high)) = (lo.get_mut(i.min(j)), hi.first_mut()) else { return };
    let (oi, oj) = if i < j { (low, high) } else { (high, low) };
    edge_terms(b, pi, pj, oi, oj);
}

/// The edge terms of a block product on a grid `NX` nodes wide (whose
/// edges a mesh checks are the grid's, [`crate::mesh::grid_forward`]), node by
/// node in the edges' order, every neighbour at a fixed place: the first
/// and last node of a row and the last row have fewer edges than the
/// inner nodes (to the right, then down; both diagonals where `x + y` is
/// even).
fn grid_edges<const NX: usize>(ny: usize, off: &[Mat3], p: &[Vec3], out: &mut [Vec3]) {
    let mut e = 0;
    // Node `a`'s `k` edges (from edge `e` on) to `a + steps`, node `a − l`
    // at the start of windows `s` long.
    macro_rules! node {
        ($a:expr, $l:literal, $s:expr, $k:literal, $steps:expr) => {{
            if let Some(b) = off.get(e..e + $k).and_then(|b| <&[Mat3; $k]>::try_from(b).ok()) {
                node_edges::<$l, $k>($a, $s, $steps, b, p, out);
            }
            e += $k;
        }};
    }
    for y in 0..ny.saturating_sub(1) {
        let a = y * NX;
        if y.is_multiple_of(2) {
            node!(a, 0, NX + 2, 3, [1, NX, NX + 1]);
        } else {
            node!(a, 0, NX + 2, 2, [1, NX]);
        }
        for x in 1..NX - 1 {
            if (x + y).is_multiple_of(2) {
                node!(a + x, 1, NX + 3, 4, [1, NX - 1, NX, NX + 1]);
            } else {
                node!(a + x, 1, NX + 3, 2, [1, NX]);
            }
        }
        if (NX - 1 + y).is_multiple_of(2) {
            node!(a + NX - 1, 1, NX + 2, 2, [NX - 1, NX]);
        } else {
            node!(a + NX - 1, 1, NX + 2, 1, [NX]);
        }
    }
    if ny >= 1 {
        for x in 0..NX - 1 {
            node!((ny - 1) * NX + x, 0, 2, 1, [1]);
        }
    }
}

/// Node `a`'s forward edges to `a + step[k]` with their blocks, node
/// `a − L` at the start of windows of `p` and `out` `span` long (every
/// neighbour at a fixed place in them where `span` is a constant).
#[inline(always)]
fn node_edges<const L: usize, const K: usize>(
    a: usize,
    span: usize,
    step: [usize; K],
    blocks: &[Mat3; K],
    p: &[Vec3],
    out: &mut [Vec3],
) {
    let Some(base) = a.checked_sub(L) else { return };
    let (Some(pw), Some(ow)) = (p.get(base..base + span), out.get_mut(base..base + span)) else { return };
    let (Some(pa), Some((mine, rest))) = (pw.get(L), ow.get_mut(L..).and_then(|o| o.split_first_mut())) else {
        return;
    };
    for (b, s) in blocks.iter().zip(step) {
        if let (Some(pb), Some(ob)) = (pw.get(L + s), rest.get_mut(s.wrapping_sub(1))) {
            edge_terms(b, pa, pb, mine, ob);
        }
    }
}

#[inline]
pub fn dot(a: &[Vec3], b: &[Vec3]) -> f32 {
    // Pairwise by node, accumulated in node order: identical on every target.
    a.iter().zip(b).map(|(x, y)| x.dot(*y)).sum()
}

/// Removes the constrained components of `v`: all of a pinned node's, the
/// normal component of a node held by a collider (`normal[i]`).
/// Most nodes are free: four nodes' flags are tested as one word, and a
/// word with none held is skipped.
#[inline]
fn filter(flags: &[u8], normal: &[Vec3], v: &mut [Vec3]) {
    const HELD: u32 = u32::from_ne_bytes([flags::PINNED | flags::CONTACT; 4]);
    let n = flags.len().min(normal.len()).min(v.len());
    let (words, _) = flags[..n].as_chunks::<4>();
    let tail = 4 * words.len();
    for (k, w) in words.iter().enumerate() {
        if u32::from_ne_bytes(*w) & HELD != 0 {
            filter_nodes(w, &normal[4 * k..4 * k + 4], &mut v[4 * k..4 * k + 4]);
        }
    }
    filter_nodes(&flags[tail..n], &normal[tail..n], &mut v[tail..n]);
}

#[inline(always)]
fn filter_nodes(flags: &[u8], normal: &[Vec3], v: &mut [Vec3]) {
    for ((vi, &f), n) in v.iter_mut().zip(flags).zip(normal) {
        if flags::pinned(f) {
            *vi = Vec3::ZERO;
        } else if flags::in_contact(f) {
            *vi -= *n * n.dot(*vi);
        }
    }
}

/// The multigrid's fine level works on the smoother's operator
/// `Ã = M + c (K_m + diag K_b)`: the membrane, the masses and the bending's
/// diagonal, without the bending's couplings, a small part of the step's
/// matrix at the grid's scale (the iteration count is unchanged: 31.0 CG
/// iterations per step on the firmware's plain scene against 31.2 with
/// them) at two thirds of a product's cost. The cycle stays symmetric
/// positive definite, so it preconditions the exact operator CG runs.
impl FineLevel for System<'_, '_> {
    fn apply(&self, p: &[Vec3], out: &mut [Vec3]) {
        self.block_product(p, out);
        let m = self.density * self.m_scale;
        let bending = |i: usize| match self.bending {
            Bending::Stencil(s) => s.diagonal(i),
            Bending::MatrixFree(..) => 0.0,
        };
        for (i, ((o, pi), a)) in out.iter_mut().zip(p).zip(self.mesh.node_area()).enumerate() {
            *o = *o * self.c + *pi * (m * a + self.c * bending(i));
        }
        filter(self.flags, self.normal, out);
    }
    fn smooth(&self, omega: f32, r: &[Vec3], z: &mut [Vec3]) {
        for ((zi, ri), di) in z.iter_mut().zip(r).zip(self.precond) {
            smooth_term(di, ri, omega, zi);
        }
        filter(self.flags, self.normal, z);
    }
    fn filter(&self, z: &mut [Vec3]) {
        filter(self.flags, self.normal, z);
    }
}

/// Iteration limit and tolerance of a solve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stop {
    pub max_iterations: u32,
    /// Relative residual at which CG stops.
    pub tolerance: f32,
    /// The residual is measured against the larger of the right-hand
    /// side's norm and this (a restarted solve's first right-hand side).
    pub reference: f32,
}

/// For the inverse `pc` of a diagonal block `A_ii` and a contact normal
/// `n`: the inverse of `S A_ii S + (nᵀA_ii n) n nᵀ`, `S = I − n nᵀ`, which
/// inverts `A_ii` exactly on the tangent plane. `pc` itself if singular.
pub fn plane_inverse(pc: Mat3, n: Vec3) -> Mat3 {
    let Some(a) = pc.inverse() else { return pc };
    let an = a.mul_vec(n);
    let s = n.dot(an);
    // S A S = A − n (Aᵀn)ᵀ − (A n) nᵀ + (nᵀ A n) n nᵀ, and A is symmetric.
    let sas = a - n.outer(an) - an.outer(n) + n.outer(n) * s;
    (sas + n.outer(n) * s).inverse().unwrap_or(pc)
}

/// Iterations without a tenth's progress after which a solve stops as
/// stagnated (the `f32` floor). Fewer stop solves that are still
/// converging: CG on a tube folding on a plane has plateaus of 25–50
/// iterations (at 25, 41 of the 288-node drop's 60 steps stopped short;
/// at 50, none).
pub const STAGNATION: u32 = 50;

/// Result of a solve.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Solve {
    pub iterations: u32,
    /// Final ‖r‖ / ‖b‖ (0 for a zero right-hand side).
    pub residual: f32,
    pub converged: bool,
    /// Stopped early: the residual stopped falling before the tolerance.
    pub stagnated: bool,
    /// The norm the residual was measured against.
    pub reference: f32,
    /// `½ rᵀ B r` of the final residual `r` (`B` the preconditioner): an
    /// estimate of the energy `½ rᵀ A⁻¹ r` by which the solve misses the
    /// minimum of the step's quadratic model.
    pub error_energy: f32,
}

impl Solve {
    /// Adds a solve that went on from this one (after a contact release):
    /// the iterations add up, the last residual counts.
    pub fn then(&mut self, s: Solve) {
        self.iterations += s.iterations;
        self.residual = s.residual;
        self.converged = s.converged;
        self.stagnated |= s.stagnated;
        self.reference = self.reference.max(s.reference);
        self.error_energy = s.error_energy;
    }
}

/// The operator `A = m_scale·M + c·K` of one solve, with `K` stored as
/// blocks ([`matvec`]) and `M` the lumped masses `density · node_area`.
pub struct System<'s, 'm> {
    pub mesh: &'s Mesh<'m>,
    pub diag: &'s [Mat3],
    pub off: &'s [Mat3],
    /// Plate bending.
    pub bending: Bending<'s>,
    pub density: f32,
    pub m_scale: f32,
    pub c: f32,
    /// Inverse diagonal blocks of `A` (block-Jacobi preconditioner).
    pub precond: &'s [Mat3],
    /// Node flags ([`crate::flags`]).
    pub flags: &'s [u8],
    /// Contact normals of the nodes flagged [`crate::flags::CONTACT`].
    pub normal: &'s [Vec3],
    /// The block product as a gather ([`crate::physics::gather`]), where
    /// the state has one: the same bits as the scatter product. With a
    /// [`Bending::Stencil`], the gather's bending must be built from that
    /// stencil.
    pub gather: Option<&'s dyn Product>,
}

impl System<'_, '_> {
    /// `out = B p` for the node and edge blocks: the gather where there is
    /// one, else the scatter.
    fn block_product(&self, p: &[Vec3], out: &mut [Vec3]) {
        if !self.gather.is_some_and(|g| g.product(p, out)) {
            block_product(self.mesh, self.diag, self.off, p, out);
        }
    }

    /// `out = A p`.
    pub fn apply(&self, p: &[Vec3], out: &mut [Vec3]) {
        let stencil = matches!(self.bending, Bending::Stencil(_));
        if !(stencil && self.gather.is_some_and(|g| g.product_bending(p, out))) {
            self.block_product(p, out);
            self.bending.apply(self.mesh, 1.0, p, out);
        }
        let m = self.density * self.m_scale;
        for ((o, pi), a) in out.iter_mut().zip(p).zip(self.mesh.node_area()) {
            *o = *o * self.c + *pi * (m * a);
        }
    }

    /// `z = B r` for a filtered `r`: one multigrid V-cycle, or block Jacobi
    /// where the mesh has no hierarchy; `t` is scratch.
    pub fn preconditioned(&self, mg: &mut impl Coarse, r: &[Vec3], z: &mut [Vec3], t: &mut [Vec3]) {
        if mg.levels() == 0 {
            z.fill(Vec3::ZERO);
            self.smooth(1.0, r, z);
            return;
        }
        mg.cycle(self, r, z, t);
    }

    /// `‖S b‖` with the normal loads of held nodes: the norm a solve of
    /// `A y = b` measures its residual against.
    /// (The tangential and normal parts of a held node's load make up its
    /// whole load.)
    pub fn rhs_norm(&self, b: &[Vec3]) -> f32 {
        let sum: f32 = b.iter().zip(self.flags).filter(|(_, &f)| !flags::pinned(f)).map(|(bi, _)| bi.norm2()).sum();
        crate::math::sqrt(sum)
    }

    /// The fine smoother's damping: [`multigrid::OMEGA`] where the bending's
    /// diagonal, summed over the nodes, is at most
    /// [`multigrid::BENDING_SHARE`] of the diagonal blocks' summed mean
    /// entry, else [`multigrid::OMEGA_BENDING`].
    fn smoother_damping(&self, mass: &dyn Fn(usize) -> f32) -> f32 {
        let Bending::Stencil(s) = self.bending else { return multigrid::OMEGA_BENDING };
        let (mut bend, mut all) = (0.0f32, 0.0f32);
        for (i, d) in self.diag.iter().enumerate() {
            let b = s.diagonal(i);
            bend += b;
            all += (d.c[0].x + d.c[1].y + d.c[2].z) * (1.0 / 3.0) + b + mass(i) / self.c;
        }
        if bend <= multigrid::BENDING_SHARE * all {
            multigrid::OMEGA
        } else {
            multigrid::OMEGA_BENDING
        }
    }

    /// Assembles the multigrid's coarse operators for this system and its
    /// current constraints.
    pub fn prepare(&self, mg: &mut impl Coarse) {
        let m = self.density * self.m_scale;
        let area = self.mesh.node_area();
        let mass = |i: usize| m * area[i];
        let op = FineOperator {
            diag: self.diag,
            off: self.off,
            c: self.c,
            mass: &mass,
            flags: self.flags,
            normal: self.normal,
            omega: self.smoother_damping(&mass),
        };
        mg.assemble(self.mesh, &op);
    }

    /// Filters the right-hand side `r` in place and returns the norm its
    /// residual is measured against: with the normal loads of held nodes
    /// (at rest on a collider the free part alone is only rounding noise).
    fn filter_rhs(&self, r: &mut [Vec3]) -> f32 {
        let held: f32 = r
            .iter()
            .zip(self.flags)
            .zip(self.normal)
            .filter(|((_, &f), _)| flags::on_plane(f))
            .map(|((ri, _), n)| {
                let rn = ri.dot(*n);
                rn * rn
            })
            .sum();
        filter(self.flags, self.normal, r);
        crate::math::sqrt(dot(r, r) + held)
    }

    /// Solves `A y = r` in the unconstrained directions (pinned nodes held,
    /// contact nodes free only in their tangent plane) and adds `y` to `x`.
    /// On entry `r` holds the right-hand side; `p`, `q` and `t` are scratch.
    pub fn pcg(
        &self,
        x: &mut [Vec3],
        r: &mut [Vec3],
        [p, q, t]: [&mut [Vec3]; 3],
        mg: &mut impl Coarse,
        stop: Stop,
    ) -> Solve {
        let (max_iter, tol) = (stop.max_iterations, stop.tolerance);
        let mut stagnated = false;
        let b_norm = self.filter_rhs(r).max(stop.reference);
        if !(b_norm > 0.0) {
            let converged = b_norm == 0.0;
            return Solve {
                iterations: 0,
                residual: if converged { 0.0 } else { f32::NAN },
                converged,
                stagnated: false,
                reference: b_norm,
                error_energy: 0.0,
            };
        }
        self.preconditioned(mg, r, p, t);
        let mut rz = dot(r, p);
        let mut res = 1.0;
        let mut it = 0;
        // Stagnation: the best residual has not dropped by a tenth over the
        // last `STAGNATION` iterations (f32 round-off floor).
        let (mut best, mut best_at) = (f32::INFINITY, 0);
        while it < max_iter {
            res = crate::math::sqrt(dot(r, r)) / b_norm;
            if !(res > tol) {
                break;
            }
            if res < 0.9 * best {
                (best, best_at) = (res, it);
            } else if it - best_at >= STAGNATION {
                stagnated = true;
                break;
            }
            System::apply(self, p, q);
            filter(self.flags, self.normal, q);
            let pq = dot(p, q);
            if !(pq > 0.0) {
                break;
            }
            let alpha = rz / pq;
            for ((xi, ri), (pi, qi)) in x.iter_mut().zip(r.iter_mut()).zip(p.iter().zip(q.iter())) {
                *xi += *pi * alpha;
                *ri -= *qi * alpha;
            }
            // z = M⁻¹ r, kept in q (no longer needed this iteration).
            self.preconditioned(mg, r, q, t);
            let rz_new = dot(r, q);
            let beta = rz_new / rz;
            rz = rz_new;
            for (pi, zi) in p.iter_mut().zip(q.iter()) {
                *pi = *zi + *pi * beta;
            }
            it += 1;
        }
        if it == max_iter {
            res = crate::math::sqrt(dot(r, r)) / b_norm;
        }
        Solve {
            iterations: it,
            residual: res,
            converged: res <= tol,
            stagnated,
            reference: b_norm,
            error_energy: 0.5 * rz.max(0.0),
        }
    }
}

/// Solves a step may add to release nodes its contact constraints would
/// otherwise hold against the collider.
pub(super) const MAX_RELEASES: u32 = 1;

/// The first solve of a step with contacts stops at this relative
/// residual (or at the solve's tolerance, if looser), where the release
/// check runs: the release decision then rests on the same quality of
/// solve at every tolerance (the device's 1e-4 had it at 1000 times its
/// tolerance; at the desktop's 1e-5 that multiple took 31.4 CG iterations
/// a step on the 61×61 fold against 28.9 at this residual).
pub(super) const RELEASE_CHECK: f32 = 0.1;

/// The constants of one linearised solve.
#[derive(Clone, Copy)]
pub(super) struct Coefficients {
    /// The (sub)step's length and its start and end times.
    pub(super) h_step: f32,
    pub(super) t0: f64,
    pub(super) t1: f64,
    /// BDF2 solves a backward-Euler-like system over `h = 2h_step/3` from
    /// the base `x + (x − x_prev)/3` with the velocity predictor
    /// `(4v − v_prev)/3`; backward Euler over `h = h_step`.
    pub(super) bdf2: bool,
    pub(super) h: f32,
    /// `A = m_scale·M + c·K`: `M(1 + hα) + (hβ + h²) K`.
    pub(super) m_scale: f32,
    pub(super) c: f32,
}

impl Coefficients {
    pub(super) fn new(model: &Model, t0: f64, h_step: f32, bdf2: bool) -> Coefficients {
        let h = if bdf2 { h_step * (2.0 / 3.0) } else { h_step };
        let mat = &model.material;
        Coefficients {
            h_step,
            t0,
            t1: t0 + h_step as f64,
            bdf2,
            h,
            m_scale: 1.0 + h * mat.damping_mass,
            c: h * mat.damping_stiffness + h * h,
        }
    }
}

/// The bending Hessian as this state applies it (`scratch`: the
/// workspace's room for the matrix-free operator on other meshes than
/// grids).
pub(super) fn bending_of<'w>(
    model: &Model,
    stencil: &'w Option<stencil::BendingStencil<'_>>,
    scratch: stencil::Scratch<'w>,
) -> Bending<'w> {
    match stencil {
        Some(s) => Bending::Stencil(s),
        None => Bending::MatrixFree(model.material.plate(), scratch),
    }
}

/// The block-Jacobi preconditioner (the multigrid's fine smoother): the
/// inverse 3×3 diagonal blocks of A; a held node's block inverts its
/// diagonal block on the tangent plane exactly (and keeps its normal
/// stiffness apart). Made for the flags as they are: after the
/// constraints, and again after a release.
pub(super) fn preconditioner(model: &Model, ws: &mut Workspace, k: &Coefficients) {
    let mesh = &model.mesh;
    let bend = bending_of(model, &ws.stencil, ws.bend);
    let (diag, precond, _) = split_blocks(ws.blocks, mesh.node_count(), mesh.edges().len());
    for (i, (d, pc)) in diag.iter().zip(precond.iter_mut()).enumerate() {
        *pc = *d * k.c + Mat3::scale(model.mass(i) * k.m_scale);
    }
    bend.add_diagonal(mesh, k.c, precond);
    for (i, pc) in precond.iter_mut().enumerate() {
        let d = pc.diagonal();
        *pc = pc.inverse().unwrap_or(Mat3 {
            c: [Vec3::new(1.0 / d.x, 0.0, 0.0), Vec3::new(0.0, 1.0 / d.y, 0.0), Vec3::new(0.0, 0.0, 1.0 / d.z)],
        });
        if flags::on_plane(ws.flags[i]) {
            *pc = plane_inverse(*pc, ws.normal[i]);
        }
    }
}

/// Starts the solve from the last one's `Δv` where that solved a step of
/// the same length ([`crate::model::StepParams::warm_start`]): the nodes a
/// collider holds take its tangential part beside their constrained normal
/// part; pinned and free nodes keep theirs. Returns whether it did.
pub(super) fn warm_start(ws: &mut Workspace) -> bool {
    if ws.warm.len() != ws.dv.len() {
        return false;
    }
    for (((d, &w), &f), &n) in ws.dv.iter_mut().zip(ws.warm.iter()).zip(ws.flags.iter()).zip(ws.normal.iter()) {
        if flags::on_plane(f) {
            *d += w - n * w.dot(n);
        }
    }
    true
}

/// Keeps a finished solve's `Δv` as the next one's starting guess (a
/// solve that failed leaves none).
pub(super) fn keep_warm(ws: &mut Workspace, h: f32, ok: bool) {
    ws.warm_h = 0.0;
    if ok && ws.warm.len() == ws.dv.len() && ws.dv.iter().all(|d| d.is_finite()) {
        ws.warm.copy_from_slice(ws.dv);
        ws.warm_h = h;
    }
}

/// How a [`solve`] starts and when it stops.
#[derive(Clone, Copy, Debug)]
pub(super) struct SolveFrom {
    /// Nodes held by a collider (whose release the solve checks).
    pub held: usize,
    /// `ws.dv` holds a starting guess (beyond its constrained part).
    pub warm: bool,
    /// The residual, relative to the right-hand side, at which it stops.
    pub tolerance: f32,
    /// Residuals are measured against the right-hand side's norm, or this
    /// where it is larger.
    pub reference: f32,
}

/// The filtered CG solve for `ws.dv`, and with `held` contact nodes the
/// release of those a collider would pull (the first solve stops early for
/// that check; the one after it goes on to the tolerance). Returns the
/// solve and the work the constraints may do (pushing a node out of a
/// collider); leaves `A Δv` in `ws.q` and `b` in `ws.force` where nodes
/// stay held.
pub(super) fn solve(
    model: &Model,
    v: &[Vec3],
    ws: &mut Workspace,
    k: &Coefficients,
    how: SolveFrom,
    probe: &mut impl Probe,
) -> (Solve, f32) {
    let SolveFrom { held, warm, tolerance, reference } = how;
    // The operator of the flags (and preconditioner) as they are then.
    macro_rules! system {
        () => {
            operator(
                model,
                k,
                ws.blocks,
                bending_of(model, &ws.stencil, ws.bend),
                ws.gather.as_ref(),
                ws.flags,
                ws.normal,
            )
        };
    }
    // Residuals are measured against the right-hand side, not against the
    // residual of the starting guess.
    let mut solve = Solve { reference: system!().rhs_norm(ws.force).max(reference), ..Solve::default() };
    let mut released = 0;
    // The multigrid's coarse operators follow the constraints: assembled
    // for the first solve and again only after a release changed them.
    let mut constraints_changed = true;
    for pass in 0..=MAX_RELEASES {
        probe.enter(Stage::Solve);
        let system = system!();
        // r = b − A Δv: the constrained part of Δv (with the last solve's
        // where it starts warm), and after a release the previous solution
        // as the starting guess.
        if pass > 0 || held > 0 || warm || !model.scene.pins.is_empty() {
            system.apply(ws.dv, ws.q);
            for ((r, b), q) in ws.r.iter_mut().zip(ws.force.iter()).zip(ws.q.iter()) {
                *r = *b - *q;
            }
        }
        if constraints_changed {
            probe.enter(Stage::Multigrid);
            system.prepare(&mut ws.mg);
            probe.enter(Stage::Solve);
        }
        let early = pass == 0 && held > 0 && MAX_RELEASES > 0;
        let tolerance = if early { RELEASE_CHECK.max(tolerance) } else { tolerance };
        let stop = Stop { max_iterations: model.params.cg_max_iterations, tolerance, reference: solve.reference };
        solve.then(system.pcg(ws.dv, ws.r, [ws.p, ws.q, ws.x_new], &mut ws.mg, stop));
        if held == 0 || pass == MAX_RELEASES {
            break;
        }
        // Constraint impulses λ = (A Δv − b)·n; a collider cannot pull.
        system.apply(ws.dv, ws.q);
        let newly = release(ws.flags, ws.normal, ws.q, ws.force);
        released += newly;
        constraints_changed = newly > 0;
        if constraints_changed {
            // A released node's block inverted its diagonal block on the
            // contact plane.
            probe.enter(Stage::Multigrid);
            preconditioner(model, ws, k);
        }
        if newly == 0 && !early {
            break;
        }
    }

    // The held nodes' normal impulses λ = (A Δv − b)·n (from `q` = A Δv and
    // `force` = b, kept until the candidate is made).
    let mut work = 0.0;
    if held > released {
        system!().apply(ws.dv, ws.q);
        work = constraint_work(model, v, ws);
    }
    (solve, work)
}

/// The step's operator `A` on the blocks of `blocks` ([`split_blocks`]),
/// for these node flags.
pub(super) fn operator<'s, 'm>(
    model: &'s Model<'m>,
    k: &Coefficients,
    blocks: &'s [Mat3],
    bending: Bending<'s>,
    gather: Option<&'s gather::Gather<'_>>,
    flags: &'s [u8],
    normal: &'s [Vec3],
) -> System<'s, 'm> {
    let (diag, precond, off) = blocks_of(blocks, model.mesh.node_count(), model.mesh.edges().len());
    System {
        mesh: &model.mesh,
        diag,
        off,
        bending,
        density: model.material.density,
        m_scale: k.m_scale,
        c: k.c,
        precond,
        flags,
        normal,
        gather: gather.map(|g| g as &dyn gather::Product),
    }
}

/// Releases the held nodes whose constraint impulse `(A Δv − b)·n` (`a_dv`,
/// `b`) pulls them onto the collider; returns how many.
pub(super) fn release(node_flags: &mut [u8], normal: &[Vec3], a_dv: &[Vec3], b: &[Vec3]) -> usize {
    let mut newly = 0;
    for (i, f) in node_flags.iter_mut().enumerate() {
        if flags::in_contact(*f) && (a_dv[i] - b[i]).dot(normal[i]) < 0.0 {
            *f = flags::without_contact(*f);
            newly += 1;
        }
    }
    newly
}

/// The work the held nodes' normal impulses (from `ws.q` = A Δv and
/// `ws.force` = b) may do over the step: pushing a node out of a collider.
pub(super) fn constraint_work(model: &Model, v: &[Vec3], ws: &Workspace) -> f32 {
    let mut work = 0.0;
    for (i, &f) in ws.flags.iter().enumerate() {
        let Some(col) = contact::holder(model.scene.colliders, f) else { continue };
        let n = ws.normal[i];
        let lambda = (ws.q[i] - ws.force[i]).dot(n).max(0.0);
        work += lambda * (v[i] + ws.dv[i] - col.velocity).dot(n).max(0.0);
    }
    work
}
