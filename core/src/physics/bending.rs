//! Kirchhoff plate bending without rotational unknowns (a Morley-type
//! triangle on the mesh's bending triangulation, [`Mesh::bending`]). Each
//! hinge measures `m_e = Σ k_i x_i`, half the jump of the normal derivative
//! of the piecewise-linear placement across its edge ([`Hinge::k`]), which
//! is the midside normal derivative minus the triangle's own. A triangle's
//! curvature (the placement's second derivative, a 3-vector per pair of
//! rest directions) is then
//!
//! `H_T = (1/A) ∮ ∇x ⊗ n ds = Σ_e (|e| / A) m_e ⊗ n_e ⊗ n_e`
//!
//! over its edges (`n_e` the in-plane outward normal), exact for every
//! quadratic placement where the two triangles at each of its edges form a
//! parallelogram (the grid's bending triangulation; elsewhere the twist
//! carries an error). The energy is the plate's, with Poisson ratio ν,
//!
//! `½ D ∫ ν |tr H|² + (1 − ν) |H|²_F  =  ½ D Σ_T Σ_ef G_ef m_e·m_f`,
//!
//! `G_ef = A c_e c_f (ν + (1 − ν)(n_e·n_f)²)`, `c_e = |e| / A` ([`form`]). A border
//! edge has no wing to measure its jump: its `m_e` is a free unknown of its
//! triangle alone (the free edge's natural condition, as in Morley's
//! triangle), eliminated by minimising the triangle's energy over it (a
//! Schur complement of `G`). The energy is quadratic in the positions,
//! invariant under rigid motions, zero for every affine map of the flat
//! rest mesh; its Hessian `D Σ_T Σ_ef G_ef k_e k_fᵀ ⊗ I₃` is constant and
//! positive semi-definite, so the solver applies it matrix-free.

use crate::math::{Mat3, Vec3};
use crate::mesh::{hinge_frame, BendTriangle, Hinge, Mesh, NO_HINGE};
use core::cell::Cell;

impl crate::model::Material {
    /// The bending law of this material.
    pub fn plate(&self) -> Plate {
        Plate { stiffness: self.bending, poisson: self.poisson }
    }
}

/// Plate bending parameters: stiffness `D` (N·m) and Poisson ratio ν.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plate {
    pub stiffness: f32,
    pub poisson: f32,
}

/// Half the normal-derivative jump `Σ k_i x_i` across a hinge (1/m).
#[inline]
pub fn curvature(h: &Hinge, x: &[Vec3]) -> Vec3 {
    let mut t = Vec3::ZERO;
    for (&i, &k) in h.nodes.iter().zip(&h.k) {
        if let Some(&xi) = x.get(i as usize) {
            t += xi * k;
        }
    }
    t
}

/// The measure hinge `h` holds at rest, turned with its frame at `x`
/// ([`Hinge::rest`], [`hinge_frame`]): zero on a hinge flat at rest (and
/// where the frame is not defined). The energy is that of `m − r`, so the
/// rest placement of a curved mesh, and every rigid motion of it, holds
/// no bending force; the frame's turning is taken at the step's start, so
/// the step's Hessian stays the flat plate's (constant, positive
/// semi-definite) and the rest curvature enters as a force
/// ([`add_rest_forces`]).
#[inline]
pub fn rest_curvature(h: &Hinge, x: &[Vec3]) -> Vec3 {
    if h.rest == [0.0; 2] {
        return Vec3::ZERO;
    }
    match hinge_frame(h, x) {
        Some((u, v)) => u * h.rest[0] + v * h.rest[1],
        None => Vec3::ZERO,
    }
}

/// The triangle's energy form `G_ef = s_e s_f (ν + (1 − ν)(n_e·n_f)²)`
/// (per unit stiffness, symmetric 3×3 over its edges (0,1), (1,2), (2,0))
/// with its border edges eliminated: their rows and columns are zero.
pub fn form(t: &BendTriangle, poisson: f32) -> [[f32; 3]; 3] {
    let mut g: [[f32; 3]; 3] = core::array::from_fn(|e| {
        core::array::from_fn(|f| {
            let d2 = if e == f { 1.0 } else { t.cos2[pair(e, f)] };
            t.s[e] * t.s[f] * (poisson + (1.0 - poisson) * d2)
        })
    });
    for b in 0..3 {
        if t.hinges[b] != NO_HINGE {
            continue;
        }
        let pivot = g[b][b];
        if pivot > 0.0 {
            for e in 0..3 {
                for f in 0..3 {
                    if e != b && f != b {
                        g[e][f] -= g[e][b] * g[b][f] / pivot;
                    }
                }
            }
        }
        for row in g.iter_mut() {
            row[b] = 0.0;
        }
        g[b] = [0.0; 3];
    }
    g
}

/// Index into [`BendTriangle::cos2`] of the edge pair `{e, f}`, `e ≠ f`.
#[inline(always)]
fn pair(e: usize, f: usize) -> usize {
    // (0,1) → 0, (1,2) → 1, (2,0) → 2.
    if (e + 1) % 3 == f {
        e
    } else {
        f
    }
}

/// The moments `D Σ_f G_ef m_f` of a triangle's measures `m`; an interior
/// triangle's in the factored form `D s_e (ν Σ_f u_f + (1 − ν) Σ_f (n_e·n_f)² u_f)`,
/// `u_f = s_f m_f` (no 3×3 form built).
#[inline]
fn moments(t: &BendTriangle, plate: Plate, m: &[Vec3; 3]) -> [Vec3; 3] {
    let (nu, d) = (plate.poisson, plate.stiffness);
    if t.hinges.contains(&NO_HINGE) {
        let g = form(t, nu);
        return g.map(|row| (m[0] * row[0] + m[1] * row[1] + m[2] * row[2]) * d);
    }
    let u = [m[0] * t.s[0], m[1] * t.s[1], m[2] * t.s[2]];
    let sum = (u[0] + u[1] + u[2]) * nu;
    let w = 1.0 - nu;
    let c = &t.cos2;
    [
        (sum + (u[0] + u[1] * c[0] + u[2] * c[2]) * w) * (t.s[0] * d),
        (sum + (u[1] + u[0] * c[0] + u[2] * c[1]) * w) * (t.s[1] * d),
        (sum + (u[2] + u[1] * c[1] + u[0] * c[2]) * w) * (t.s[2] * d),
    ]
}

/// Calls `f(hinges, m, moments)` for every bending triangle with at least
/// one hinge: `m[e]` the hinge measures of `x` (zero on border edges) and
/// `moments[e] = D Σ_f G_ef m[f]`, so the triangle's energy is
/// `½ Σ_e m[e]·moments[e]`.
fn each_triangle(mesh: &Mesh, plate: Plate, x: &[Vec3], f: impl FnMut([Option<&Hinge>; 3], [Vec3; 3], [Vec3; 3])) {
    each_triangle_from(mesh, plate, x, false, f)
}

/// [`each_triangle`], with each measure less its rest curvature
/// ([`rest_curvature`]) when `rested`.
fn each_triangle_from(
    mesh: &Mesh,
    plate: Plate,
    x: &[Vec3],
    rested: bool,
    mut f: impl FnMut([Option<&Hinge>; 3], [Vec3; 3], [Vec3; 3]),
) {
    let hinges = mesh.hinges();
    for t in mesh.bending() {
        let hs = [hinges.get(t.hinges[0] as usize), hinges.get(t.hinges[1] as usize), hinges.get(t.hinges[2] as usize)];
        if hs.iter().all(Option::is_none) {
            continue;
        }
        let mut m = [Vec3::ZERO; 3];
        for (me, h) in m.iter_mut().zip(hs) {
            if let Some(h) = h {
                *me = curvature(h, x);
                if rested {
                    *me -= rest_curvature(h, x);
                }
            }
        }
        let mo = moments(t, plate, &m);
        f(hs, m, mo);
    }
}

/// Bending energy of positions `x`, and the bound on its f32 rounding
/// noise: the moments times the rounding error of each hinge measure
/// (`ε Σ |k_i| |x_i|₁`), over ε.
pub fn energy_and_noise(mesh: &Mesh, plate: Plate, x: &[Vec3]) -> (f32, f32) {
    let (mut energy, mut noise) = (0.0, 0.0);
    each_triangle_from(mesh, plate, x, mesh.curved(), |hs, m, moments| {
        for e in 0..3 {
            energy += 0.5 * m[e].dot(moments[e]);
            if let Some(h) = hs[e] {
                let dm: f32 = (0..4).map(|q| x[h.nodes[q] as usize].norm_l1() * libm::fabsf(h.k[q])).sum();
                noise += moments[e].norm() * dm;
            }
        }
    });
    (energy, noise)
}

/// [`energy_and_noise`] with every hinge's measure and rounding factor
/// worked out once into `cache` (a hinge is shared by two triangles): the
/// same sums in the same order, so the same bits. Without room for one
/// entry per hinge, [`energy_and_noise`].
pub fn energy_and_noise_cached(mesh: &Mesh, plate: Plate, x: &[Vec3], cache: &mut [[f32; 4]]) -> (f32, f32) {
    let hinges = mesh.hinges();
    let Some(cache) = cache.get_mut(..hinges.len()) else { return energy_and_noise(mesh, plate, x) };
    let curved = mesh.curved();
    for (c, h) in cache.iter_mut().zip(hinges) {
        let mut m = curvature(h, x);
        if curved {
            m -= rest_curvature(h, x);
        }
        let dm: f32 = (0..4).map(|q| x[h.nodes[q] as usize].norm_l1() * libm::fabsf(h.k[q])).sum();
        *c = [m.x, m.y, m.z, dm];
    }
    let (mut energy, mut noise) = (0.0, 0.0);
    for t in mesh.bending() {
        let hs = t.hinges.map(|h| cache.get(h as usize));
        if hs.iter().all(Option::is_none) {
            continue;
        }
        let m = hs.map(|c| c.map_or(Vec3::ZERO, |c| Vec3::new(c[0], c[1], c[2])));
        let moments = moments(t, plate, &m);
        for e in 0..3 {
            energy += 0.5 * m[e].dot(moments[e]);
            if let Some(c) = hs[e] {
                noise += moments[e].norm() * c[3];
            }
        }
    }
    (energy, noise)
}

/// Bending energy of positions `x`.
pub fn energy(mesh: &Mesh, plate: Plate, x: &[Vec3]) -> f32 {
    energy_and_noise(mesh, plate, x).0
}

/// [`apply`] with every hinge's measure of `p` worked out once into
/// `cache` (a hinge is shared by two triangles, and [`apply`] measures it
/// for each): the same moments added in the same order, so the same bits,
/// at about half the measures. Without room for one entry per hinge,
/// [`apply`].
pub fn apply_cached(mesh: &Mesh, plate: Plate, scale: f32, p: &[Vec3], out: &mut [Vec3], cache: &[Cell<Vec3>]) {
    let hinges = mesh.hinges();
    let Some(cache) = cache.get(..hinges.len()) else { return apply(mesh, plate, scale, p, out) };
    for (c, h) in cache.iter().zip(hinges) {
        c.set(curvature(h, p));
    }
    for t in mesh.bending() {
        let hs = [hinges.get(t.hinges[0] as usize), hinges.get(t.hinges[1] as usize), hinges.get(t.hinges[2] as usize)];
        if hs.iter().all(Option::is_none) {
            continue;
        }
        let m = core::array::from_fn(|e| cache.get(t.hinges[e] as usize).map_or(Vec3::ZERO, Cell::get));
        scatter(hs, moments(t, plate, &m), scale, out);
    }
}

/// Adds `scale` times each hinge's moment, spread by its weights `k`, to
/// its nodes' entries of `out` (always inlined: called once a triangle in
/// the solve's products, where a call cost 0.18 M instructions a step on
/// the board's tablecloth).
#[inline(always)]
fn scatter(hs: [Option<&Hinge>; 3], moments: [Vec3; 3], scale: f32, out: &mut [Vec3]) {
    for (h, mo) in hs.into_iter().zip(moments) {
        if let Some(h) = h {
            let mo = mo * scale;
            for (&i, &k) in h.nodes.iter().zip(&h.k) {
                if let Some(o) = out.get_mut(i as usize) {
                    *o += mo * k;
                }
            }
        }
    }
}

/// Adds the forces of the rest curvature at positions `x` to `out`:
/// `Σ k_i D Σ_f G_ef r_f` with `r` each hinge's [`rest_curvature`], which
/// with the plate's own `−K_b x` is the force of the energy of `m − r`
/// (the frame held). Nothing on a flat mesh. Returns a bound on the
/// forces' norm, `Σ |moment| Σ |k|`: the size of the loads that the
/// plate's own force balances at rest, against which a solve measures
/// its residual (their difference is rounding noise there).
pub fn add_rest_forces(mesh: &Mesh, plate: Plate, x: &[Vec3], out: &mut [Vec3]) -> f32 {
    if !mesh.curved() {
        return 0.0;
    }
    let hinges = mesh.hinges();
    let mut load = 0.0;
    for t in mesh.bending() {
        let hs = t.hinges.map(|h| hinges.get(h as usize));
        if hs.iter().all(Option::is_none) {
            continue;
        }
        let r = hs.map(|h| h.map_or(Vec3::ZERO, |h| rest_curvature(h, x)));
        let mo = moments(t, plate, &r);
        for (h, m) in hs.iter().zip(&mo) {
            if let Some(h) = h {
                load += m.norm() * h.k.iter().map(|k| libm::fabsf(*k)).sum::<f32>();
            }
        }
        scatter(hs, mo, 1.0, out);
    }
    load
}

/// Adds `scale · K_b · p` to `out` (with `p = x` and `scale = −1` this adds
/// the bending forces).
pub fn apply(mesh: &Mesh, plate: Plate, scale: f32, p: &[Vec3], out: &mut [Vec3]) {
    each_triangle(mesh, plate, p, |hs, _, moments| scatter(hs, moments, scale, out));
}

/// `f32`s of [`add_diagonal_cached`]'s room for a mesh of `nodes` nodes:
/// the plate it was summed for (stiffness, Poisson ratio), then each
/// node's diagonal entry of `K_b`.
pub const fn diagonal_floats(nodes: usize) -> usize {
    nodes + 2
}

/// Marks the room of [`add_diagonal_cached`] as holding no plate's sums
/// (a state's memory may hold another mesh's).
pub fn forget_diagonal(cache: &[Cell<f32>]) {
    if let Some(key) = cache.first() {
        key.set(f32::NAN);
    }
}

/// Adds `scale` times the diagonal blocks of `K_b` to `out`, as
/// `scale · d_i` with `d_i` each node's diagonal entry, summed once per
/// plate into `cache` ([`diagonal_floats`] long; a plate differing in
/// either bit pattern sums it again) — where the grid's stencil keeps its
/// own. Without the room, [`add_diagonal`] (its terms scaled one by one:
/// the same sums but for rounding).
pub fn add_diagonal_cached(mesh: &Mesh, plate: Plate, scale: f32, out: &mut [Mat3], cache: &[Cell<f32>]) {
    let n = mesh.node_count();
    let Some((key, values)) = cache.split_first_chunk::<2>().filter(|(_, v)| v.len() >= n) else {
        return add_diagonal(mesh, plate, scale, out);
    };
    let values = &values[..n];
    if key[0].get().to_bits() != plate.stiffness.to_bits() || key[1].get().to_bits() != plate.poisson.to_bits() {
        values.iter().for_each(|v| v.set(0.0));
        each_diagonal_term(mesh, plate, |i, d| {
            if let Some(v) = values.get(i) {
                v.set(v.get() + d);
            }
        });
        key[0].set(plate.stiffness);
        key[1].set(plate.poisson);
    }
    for (o, v) in out.iter_mut().zip(values) {
        *o += Mat3::scale(scale * v.get());
    }
}

/// Each term `D G_ef k_e,q k_f,r` of `K_b`'s diagonal with its node, in
/// the order of the bending triangles, their hinge pairs and hinge nodes.
fn each_diagonal_term(mesh: &Mesh, plate: Plate, mut add: impl FnMut(usize, f32)) {
    let hinges = mesh.hinges();
    for t in mesh.bending() {
        let g = form(t, plate.poisson);
        let hs = t.hinges.map(|h| hinges.get(h as usize));
        for (e, he) in hs.iter().enumerate() {
            let Some(he) = he else { continue };
            for (f, hf) in hs.iter().enumerate() {
                let Some(hf) = hf else { continue };
                let s = plate.stiffness * g[e][f];
                for q in 0..4 {
                    for r in 0..4 {
                        if he.nodes[q] == hf.nodes[r] {
                            add(he.nodes[q] as usize, s * he.k[q] * hf.k[r]);
                        }
                    }
                }
            }
        }
    }
}

/// Adds `scale` times the diagonal blocks of `K_b` (multiples of the
/// identity) to `out`, term by term.
pub fn add_diagonal(mesh: &Mesh, plate: Plate, scale: f32, out: &mut [Mat3]) {
    each_diagonal_term(mesh, plate, |i, d| {
        if let Some(o) = out.get_mut(i) {
            *o += Mat3::scale(scale * d);
        }
    });
}
