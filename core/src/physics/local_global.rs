//! A local–global step (projective dynamics) around a constant matrix
//! factored once: the step scheme measured beside the linearised step
//! ([`super::step`]) on the device's scenes, for instructions
//! (`cd firmware && cargo qemu`) and accuracy
//! (`cargo run --release -p weft-tests --example local_global`). `weft`
//! does not step with it; it changes the material model, below.
//!
//! Each step minimises over the end positions `x⁺`
//!
//! `1/(2h²) ‖x⁺ − y‖²_M + Σ_T μ A_T ‖F_T − P(F_T)‖² + ½ x⁺ᵀ K_b x⁺`,
//!
//! `y = x + h v + h² g` the inertia target, `F_T` a triangle's deformation
//! gradient (3×2), `P` the membrane's projection: principal stretches above
//! 1 go to 1 (the nearest rotation), those below 1 move towards 1 by the
//! material's compression factor `c` (`σ + c (1 − σ)`, so a compressed
//! stretch costs `c²` as much, as `g(e) = c e` does in the membrane law).
//! At small strains that is the membrane's `μ E:E` without the Poisson
//! term `λ`. `K_b` is the plate's constant bending Hessian. Iterations
//! alternate the local step (`P` per triangle, positions fixed) and the
//! global one (positions, projections fixed), whose matrix
//! `Q = M/h² + Σ_T 2 μ A_T G_Tᵀ G_T` (times the identity in each
//! coordinate, `G_T` the triangle's shape-function gradients) is constant:
//! its banded Cholesky factor in the mesh's node order is made once
//! ([`LocalGlobal::new`]), and a global step is two triangular sweeps of
//! the three coordinates. The bending is lagged by an iteration (added to
//! the right-hand side at the last positions), which keeps `Q`'s band at
//! the mesh's own (17 on a 16×16 grid rather than 34). The global step
//! solves for the change from the last iterate, with a right-hand side in
//! differences (`y − x⁺`, `P(F) − F`), so that positions far from the
//! origin lose nothing to cancellation. Pinned nodes are held at their
//! targets (rows of the identity in `Q`); colliders act by projection
//! after every global step, with position-based Coulomb friction on the
//! step's tangential displacement; velocities are `(x⁺ − x)/h` with the
//! mass damping, and a node on a collider keeps no velocity into it and
//! loses tangential speed to kinetic friction. The stiffness damping, self-contact and wind are
//! not modelled. Chebyshev's semi-iteration ([`Iterations::chebyshev`])
//! may extrapolate each change from the one before (Wang 2015, from the
//! third iteration on).

use super::stencil::Bending;
use crate::math::{sqrt, Vec3};
use crate::mesh::Mesh;
use crate::model::{Collider, Model, Shape};

/// Why a local–global step or its factor cannot be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalGlobalError {
    /// A buffer shorter than the mesh needs.
    Storage { needed: usize, got: usize },
    /// The constant matrix has a pivot that is not positive and finite.
    NotDefinite,
    /// Positions or velocities of another length than the mesh's nodes.
    Length,
    /// The step made a position or velocity that is not finite; the state
    /// is left as it was.
    NonFinite,
}

/// The band of `mesh`'s node order: the largest index distance across an
/// edge.
pub fn band(mesh: &Mesh) -> usize {
    mesh.edges().iter().map(|e| usize::from(e.a).abs_diff(usize::from(e.b))).max().unwrap_or(0)
}

/// The floats a factor of `nodes` nodes and band `band` takes.
pub const fn factor_floats(nodes: usize, band: usize) -> usize {
    nodes * (band + 1)
}

/// How many local and global steps a step takes, and whether Chebyshev's
/// semi-iteration accelerates them (an estimate `ρ` of the iteration's
/// spectral radius; `None` or 0: plain).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Iterations {
    pub count: u32,
    pub chebyshev: Option<f32>,
}

/// The constant factor of a model's local–global step.
pub struct LocalGlobal<'a> {
    band: usize,
    /// Row `i` holds `L[i][i − band ..= i]`.
    factor: &'a [f32],
    /// The model's pins ([`crate::flags::PINNED`]), one byte a node.
    pinned: &'a [u8],
}

impl<'a> LocalGlobal<'a> {
    /// Assembles and factors `model`'s constant matrix into `factor`
    /// ([`factor_floats`] of the mesh's [`band`]) and marks its pins in
    /// `pinned` (a byte a node).
    pub fn new(
        model: &Model,
        factor: &'a mut [f32],
        pinned: &'a mut [u8],
    ) -> Result<LocalGlobal<'a>, LocalGlobalError> {
        let mesh = &model.mesh;
        let n = mesh.node_count();
        let b = band(mesh);
        let w = b + 1;
        let needed = factor_floats(n, b);
        let got = factor.len();
        let factor = factor.get_mut(..needed).ok_or(LocalGlobalError::Storage { needed, got })?;
        let got = pinned.len();
        let pinned = pinned.get_mut(..n).ok_or(LocalGlobalError::Storage { needed: n, got })?;
        model.scene.mark_pinned(pinned);
        let held = |i: usize| pinned[i] != 0;
        let h = model.params.dt;
        factor.fill(0.0);
        let (mu, _) = model.material.lame();
        for t in mesh.triangles() {
            let weight = 2.0 * mu * t.area;
            for (&a, ga) in t.nodes.iter().zip(&t.grad) {
                for (&c, gc) in t.nodes.iter().zip(&t.grad) {
                    let (i, j) = (usize::from(a), usize::from(c));
                    if i >= j && !held(i) && !held(j) {
                        factor[i * w + j + b - i] += weight * (ga[0] * gc[0] + ga[1] * gc[1]);
                    }
                }
            }
        }
        for i in 0..n {
            factor[i * w + b] += if held(i) { 1.0 } else { model.mass(i) / (h * h) };
        }
        // In place: L[i][j] = (A[i][j] − Σ_k L[i][k] L[j][k]) / L[j][j].
        for i in 0..n {
            let lo = i.saturating_sub(b);
            for j in lo..=i {
                let sum: f32 = (lo..j).map(|k| factor[i * w + k + b - i] * factor[j * w + k + b - j]).sum();
                let s = factor[i * w + j + b - i] - sum;
                factor[i * w + j + b - i] = if i == j {
                    if !(s > 0.0 && s.is_finite()) {
                        return Err(LocalGlobalError::NotDefinite);
                    }
                    sqrt(s)
                } else {
                    s / factor[j * w + b]
                };
            }
        }
        Ok(LocalGlobal { band: b, factor, pinned })
    }

    /// The factor's band.
    pub fn band(&self) -> usize {
        self.band
    }

    /// `x ← Q⁻¹ x`, the three coordinates at once (pinned rows: the
    /// identity); `x` a node long.
    pub fn solve(&self, x: &mut [Vec3]) {
        let (b, w, l) = (self.band, self.band + 1, self.factor);
        let n = x.len().min(l.len() / w);
        let x = &mut x[..n];
        // L y = x, row by row.
        for i in 0..n {
            let lo = i.saturating_sub(b);
            let (done, rest) = x.split_at_mut(i);
            let row = &l[i * w + lo + b - i..i * w + b];
            let s = done[lo..].iter().zip(row).fold(rest[0], |s, (xk, lik)| s - *xk * *lik);
            rest[0] = s * (1.0 / l[i * w + b]);
        }
        // Lᵀ x = y, column by column: each x_i, once final, leaves the rows
        // above it (row i of L read in order, as the forward sweep reads it).
        for i in (0..n).rev() {
            let lo = i.saturating_sub(b);
            let (above, rest) = x.split_at_mut(i);
            let xi = rest[0] * (1.0 / l[i * w + b]);
            rest[0] = xi;
            let row = &l[i * w + lo + b - i..i * w + b];
            for (xk, lik) in above[lo..].iter_mut().zip(row) {
                *xk -= xi * *lik;
            }
        }
    }

    /// The local step and the global step's right-hand side at the
    /// iterate `next`, into `rhs`, in differences (`y − x⁺`, `P(F) − F`) so
    /// that the positions' magnitude does not round it away; zero at the
    /// pins, which are at their targets already.
    fn local(&self, model: &Model, bending: Bending, y: &[Vec3], next: &[Vec3], rhs: &mut [Vec3]) {
        let mesh = &model.mesh;
        let inv_h2 = 1.0 / (model.params.dt * model.params.dt);
        for (i, (r, (yi, ni))) in rhs.iter_mut().zip(y.iter().zip(next.iter())).enumerate() {
            *r = (*yi - *ni) * (model.mass(i) * inv_h2);
        }
        bending.apply(mesh, -1.0, next, rhs);
        let (mu, _) = model.material.lame();
        let compression = model.material.compression;
        for tri in mesh.triangles() {
            let [a, b, c] = tri.nodes.map(usize::from);
            let gr = &tri.grad;
            let f0 = next[a] * gr[0][0] + next[b] * gr[1][0] + next[c] * gr[2][0];
            let f1 = next[a] * gr[0][1] + next[b] * gr[1][1] + next[c] * gr[2][1];
            let [p0, p1] = project_stretch([f0, f1], compression);
            let weight = 2.0 * mu * tri.area;
            let (d0, d1) = ((p0 - f0) * weight, (p1 - f1) * weight);
            for (k, gk) in [a, b, c].into_iter().zip(gr) {
                rhs[k] += d0 * gk[0] + d1 * gk[1];
            }
        }
        for (r, pinned) in rhs.iter_mut().zip(self.pinned) {
            if *pinned != 0 {
                *r = Vec3::ZERO;
            }
        }
    }

    /// One step of `model` from time `t` with `iterations` local and global
    /// steps: `x` and `v` become the end positions and velocities; `work`
    /// is four vectors of scratch, each a node long. `bending` is the
    /// model's bending Hessian as the linearised step applies it.
    #[allow(clippy::too_many_arguments)]
    pub fn step(
        &self,
        model: &Model,
        bending: Bending,
        iterations: Iterations,
        t: f64,
        x: &mut [Vec3],
        v: &mut [Vec3],
        [y, next, rhs, last]: [&mut [Vec3]; 4],
    ) -> Result<(), LocalGlobalError> {
        let mesh = &model.mesh;
        let n = mesh.node_count();
        if x.len() != n || v.len() != n || self.pinned.len() != n {
            return Err(LocalGlobalError::Length);
        }
        let short = [y.len(), next.len(), rhs.len(), last.len()].into_iter().min().unwrap_or(0);
        let (Some(y), Some(next), Some(rhs), Some(last)) =
            (y.get_mut(..n), next.get_mut(..n), rhs.get_mut(..n), last.get_mut(..n))
        else {
            return Err(LocalGlobalError::Storage { needed: n, got: short });
        };
        let h = model.params.dt;
        let t1 = t + f64::from(h);
        let g = model.scene.gravity * (h * h);
        for ((yi, xi), vi) in y.iter_mut().zip(x.iter()).zip(v.iter()) {
            *yi = *xi + *vi * h + g;
        }
        next.copy_from_slice(y);
        for p in model.scene.pins {
            if let Some(ni) = next.get_mut(usize::from(p.node)) {
                *ni = p.target(t1);
            }
        }
        let colliders = model.scene.colliders;
        collide(colliders, next, x, t1 as f32);
        let rho = iterations.chebyshev.unwrap_or(0.0).clamp(0.0, 0.999);
        let rho2 = rho * rho;
        let mut omega = 1.0;
        for k in 0..iterations.count {
            self.local(model, bending, y, next, rhs);
            self.solve(rhs);
            // Chebyshev: x_{k+1} = x_k + ω d_k + (ω − 1)(x_k − x_{k−1}).
            omega = match k {
                0 | 1 => 1.0,
                2 => 2.0 / (2.0 - rho2),
                _ => 4.0 / (4.0 - rho2 * omega),
            };
            for ((ni, d), l) in next.iter_mut().zip(rhs.iter()).zip(last.iter_mut()) {
                let change = *d * omega + *l * (omega - 1.0);
                *ni += change;
                *l = change;
            }
            collide(colliders, next, x, t1 as f32);
        }
        // The velocities, into `y` (no longer needed), before anything is
        // committed.
        end_velocities(model, x, next, y, t1 as f32);
        if !(next.iter().chain(y.iter()).all(|p| p.is_finite())) {
            return Err(LocalGlobalError::NonFinite);
        }
        x.copy_from_slice(next);
        v.copy_from_slice(y);
        Ok(())
    }
}

/// The end velocities `(x⁺ − x)/h` with the mass damping into `u`; a node
/// on a collider keeps no velocity into it and loses tangential speed to
/// kinetic friction.
fn end_velocities(model: &Model, x: &[Vec3], next: &[Vec3], u: &mut [Vec3], t1: f32) {
    let h = model.params.dt;
    let keep = 1.0 - h * model.material.damping_mass;
    for ((u, xi), ni) in u.iter_mut().zip(x.iter()).zip(next.iter()) {
        *u = (*ni - *xi) * (keep / h);
        for c in model.scene.colliders.iter().filter(|c| near(c, *ni, t1)) {
            let (d, normal) = c.distance(*ni, t1);
            let un = (*u - c.velocity).dot(normal);
            if d <= c.thickness + 1e-6 && un < 0.0 {
                let tangential = *u - c.velocity - normal * un;
                let speed = tangential.norm();
                let slow = if speed > 0.0 { (1.0 - c.friction * -un / speed).max(0.0) } else { 0.0 };
                *u = c.velocity + tangential * slow;
            }
        }
    }
}

/// `P(F)` of the membrane for a 3×2 deformation gradient (its columns).
fn project_stretch(f: [Vec3; 2], compression: f32) -> [Vec3; 2] {
    // FᵀF = V diag(σ²) Vᵀ; P(F) = F V diag(σ'/σ) Vᵀ.
    let (a, b, d) = (f[0].dot(f[0]), f[0].dot(f[1]), f[1].dot(f[1]));
    let mean = 0.5 * (a + d);
    let half = sqrt(0.25 * (a - d) * (a - d) + b * b);
    let (l1, l2) = (mean + half, (mean - half).max(1e-12));
    let (vx, vy) = if b.abs() > 1e-12 {
        (l1 - d, b)
    } else if a >= d {
        (1.0, 0.0)
    } else {
        (0.0, 1.0)
    };
    let norm = sqrt(vx * vx + vy * vy);
    let (c, s) = (vx / norm, vy / norm);
    let target = |sigma: f32| if sigma >= 1.0 { 1.0 } else { sigma + compression * (1.0 - sigma) };
    let (s1, s2) = (sqrt(l1), sqrt(l2));
    let (r1, r2) = (target(s1) / s1, target(s2) / s2);
    let m00 = r1 * c * c + r2 * s * s;
    let m01 = (r1 - r2) * c * s;
    let m11 = r1 * s * s + r2 * c * c;
    [f[0] * m00 + f[1] * m01, f[0] * m01 + f[1] * m11]
}

/// Projects nodes inside a collider onto its surface (at its thickness),
/// with position-based Coulomb friction on their displacement from `x0`.
fn collide(colliders: &[Collider], x: &mut [Vec3], x0: &[Vec3], t: f32) {
    for (xi, x0i) in x.iter_mut().zip(x0) {
        for c in colliders {
            if !near(c, *xi, t) {
                continue;
            }
            let (d, n) = c.distance(*xi, t);
            if d < c.thickness {
                let depth = c.thickness - d;
                *xi += n * depth;
                let dx = *xi - *x0i;
                let tangential = dx - n * dx.dot(n);
                let len = tangential.norm();
                if len <= c.friction * depth {
                    *xi -= tangential;
                } else if len > 0.0 {
                    *xi -= tangential * (c.friction * depth / len);
                }
            }
        }
    }
}

/// Whether `p` may lie within `c`'s thickness (`c.distance(p, t).0 <
/// c.thickness + 1e-6`) at time `t`: a sphere's squared distance, with room
/// for the rounding of the root, without the root; other shapes always.
fn near(c: &Collider, p: Vec3, t: f32) -> bool {
    match c.shape {
        Shape::Sphere { center, radius } => {
            let reach = radius + c.thickness + 1e-5;
            (p - c.velocity * t - center).norm2() < reach * reach * (1.0 + 1e-4)
        }
        _ => true,
    }
}
