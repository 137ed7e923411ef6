//! What the aggregates' coarse space holds back on curved meshes: CG
//! iterations for one step's system, at chosen frames of a scene, with
//! six preconditioners:
//!
//! - block Jacobi alone;
//! - the solver's own (the grid's multigrid or the mesh's aggregates);
//! - a two-level method over aggregates (a node and its free neighbours),
//!   damped block Jacobi before and after an exact coarse solve, with the
//!   coarse space of the aggregates' translations (piecewise constant, as
//!   the solver's);
//! - the same with each aggregate's three rotations about its centroid
//!   added (`u_i = t_a + θ_a × (x_i − c_a)`);
//! - both again with the coarse space smoothed once by damped Jacobi,
//!   `P ← (I − ω D⁻¹A) P`, as smoothed aggregation does.
//!
//! The system is backward Euler's at the frame's state,
//! `(M(1 + hα) + h(h + β)K) Δv = h f(x) + h M g − hα M v − h² K v`
//! (pins held, nodes on a collider held along its normal), solved to a
//! relative residual of 1e-5.
//!
//! `WEFT_AGG_DEPTH=D` grows each aggregate to the free nodes within `D`
//! edges of its first node (1); `WEFT_PLUS=1` also prints the solver's own
//! preconditioner with the two-level coarse solve over translations and
//! rotations added to it (additively, which keeps it symmetric positive
//! definite).
//!
//! `cargo run --release -p weft-host --example coarse_space -- SCENE.toml [FRAME …]`
use weft_core::math::{Mat3, Vec3};
use weft_core::model::Model;
use weft_core::physics::hierarchy::Hierarchy;
use weft_core::physics::multigrid::FineLevel;
use weft_core::physics::solver::System;
use weft_core::prelude::State;
use weft_host::learn::network::with_step_system;
use weft_host::sim::{self, corrector::Plain, scenario::Scenario};

/// The constraints' projection: pinned nodes zero, held nodes in their
/// contact plane.
fn project(flags: &[u8], normal: &[Vec3], v: &mut [Vec3]) {
    for ((vi, &f), n) in v.iter_mut().zip(flags).zip(normal) {
        if weft_core::flags::pinned(f) {
            *vi = Vec3::ZERO;
        } else if weft_core::flags::in_contact(f) {
            *vi -= *n * vi.dot(*n);
        }
    }
}

fn dot(a: &[Vec3], b: &[Vec3]) -> f64 {
    a.iter().zip(b).map(|(x, y)| f64::from(x.dot(*y))).sum()
}

/// Aggregates: each node not yet taken starts one with its free
/// neighbours not yet taken. Returns each node's aggregate and the count.
fn aggregates(model: &Model, flags: &[u8]) -> (Vec<usize>, usize) {
    let n = model.mesh.node_count();
    let mut near = vec![Vec::new(); n];
    for e in model.mesh.edges() {
        near[e.a as usize].push(e.b as usize);
        near[e.b as usize].push(e.a as usize);
    }
    let mut of = vec![usize::MAX; n];
    let mut count = 0;
    for i in 0..n {
        if of[i] != usize::MAX || weft_core::flags::pinned(flags[i]) {
            continue;
        }
        of[i] = count;
        let depth: usize = std::env::var("WEFT_AGG_DEPTH").ok().and_then(|d| d.parse().ok()).unwrap_or(1);
        let mut front = vec![i];
        for _ in 0..depth {
            let mut next = Vec::new();
            for &k in &front {
                for &j in &near[k] {
                    if of[j] == usize::MAX && !weft_core::flags::pinned(flags[j]) {
                        of[j] = count;
                        next.push(j);
                    }
                }
            }
            front = next;
        }
        count += 1;
    }
    (of, count)
}

/// `uᵀ B v` in `f64`.
fn form(b: &Mat3, u: Vec3, v: Vec3) -> f64 {
    let (u, v) = ([u.x, u.y, u.z].map(f64::from), [v.x, v.y, v.z].map(f64::from));
    let mut s = 0.0;
    for (col, vc) in b.c.iter().zip(v) {
        let bc = [col.x, col.y, col.z].map(f64::from);
        s += vc * (0..3).map(|r| u[r] * bc[r]).sum::<f64>();
    }
    s
}

/// `Pᵀ A P` from the system's blocks in `f64` (a rigid motion of an
/// aggregate cancels in its membrane product, which `f32` products of `A`
/// leave as noise larger than the mass), the bending by `f32` products.
fn galerkin(system: &System, p: &[Vec<Vec3>], model: &Model, flags: &[u8], normal: &[Vec3]) -> Vec<f64> {
    let (m, n) = (p.len(), model.mesh.node_count());
    // Each node's columns with an entry there.
    let mut at: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (j, col) in p.iter().enumerate() {
        for (node, v) in col.iter().enumerate() {
            if *v != Vec3::ZERO {
                at[node].push(j);
            }
        }
    }
    let mut a = vec![0.0f64; m * m];
    let (c, ms) = (system.c, system.m_scale);
    for (node, d) in system.diag.iter().enumerate() {
        let block = *d * c + Mat3::scale(model.mass(node) * ms);
        for &i in &at[node] {
            for &j in &at[node] {
                a[i * m + j] += form(&block, p[i][node], p[j][node]);
            }
        }
    }
    for (e, b) in model.mesh.edges().iter().zip(system.off) {
        let (u, v) = (e.a as usize, e.b as usize);
        let block = *b * c;
        for &i in &at[u] {
            for &j in &at[v] {
                let x = form(&block, p[i][u], p[j][v]);
                a[i * m + j] += x;
                a[j * m + i] += x;
            }
        }
    }
    let mut kb = vec![Vec3::ZERO; n];
    for j in 0..m {
        kb.fill(Vec3::ZERO);
        system.bending.apply(&model.mesh, c, &p[j], &mut kb);
        project(flags, normal, &mut kb);
        for i in 0..m {
            a[i * m + j] += dot(&p[i], &kb);
        }
    }
    a
}

/// The two-level preconditioner: the coarse columns `p` (fine vectors,
/// projected), the Cholesky factor of `pᵀ A p`.
struct TwoLevel {
    p: Vec<Vec<Vec3>>,
    factor: Vec<f64>,
}

impl TwoLevel {
    fn new(
        system: &System,
        x: &[Vec3],
        (flags, normal): (&[u8], &[Vec3]),
        (rotations, smoothed): (bool, bool),
        model: &Model,
    ) -> TwoLevel {
        let (of, count) = aggregates(model, flags);
        let n = x.len();
        let mut centre = vec![(Vec3::ZERO, 0.0f32); count];
        for (i, &a) in of.iter().enumerate().filter(|(_, a)| **a != usize::MAX) {
            centre[a] = (centre[a].0 + x[i], centre[a].1 + 1.0);
        }
        let modes = if rotations { 6 } else { 3 };
        let mut p = vec![vec![Vec3::ZERO; n]; modes * count];
        let axes = [Vec3::new(1.0, 0.0, 0.0), Vec3::new(0.0, 1.0, 0.0), Vec3::new(0.0, 0.0, 1.0)];
        for (i, &a) in of.iter().enumerate().filter(|(_, a)| **a != usize::MAX) {
            let d = x[i] - centre[a].0 * (1.0 / centre[a].1);
            for (k, axis) in axes.iter().enumerate() {
                p[modes * a + k][i] = *axis;
                if rotations {
                    p[modes * a + 3 + k][i] = axis.cross(d);
                }
            }
        }
        for col in &mut p {
            project(flags, normal, col);
        }
        // Each aggregate's modes made orthonormal (Gram–Schmidt), those
        // that depend on the others dropped: a pair's three rotations span
        // only two directions.
        for a in 0..count {
            for k in 0..modes {
                let j = modes * a + k;
                let before = dot(&p[j], &p[j]).sqrt();
                for l in modes * a..j {
                    let d = dot(&p[l], &p[j]) as f32;
                    let (lo, hi) = p.split_at_mut(j);
                    for (x, y) in hi[0].iter_mut().zip(&lo[l]) {
                        *x -= *y * d;
                    }
                }
                let after = dot(&p[j], &p[j]).sqrt();
                let s = if after > 1e-4 * before.max(1e-30) { (1.0 / after) as f32 } else { 0.0 };
                p[j].iter_mut().for_each(|x| *x = *x * s);
            }
        }
        if smoothed {
            // P ← (I − ω D⁻¹ A) P: each column smoothed once, as smoothed
            // aggregation does (ω 2/3 of the damped Jacobi's stability limit).
            let mut ap = vec![Vec3::ZERO; n];
            for col in &mut p {
                system.apply(col, &mut ap);
                project(flags, normal, &mut ap);
                let mut z = vec![Vec3::ZERO; n];
                FineLevel::smooth(system, 0.5, &ap, &mut z);
                for (x, zi) in col.iter_mut().zip(&z) {
                    *x -= *zi;
                }
            }
        }
        let a = galerkin(system, &p, model, flags, normal);
        let m = p.len();
        let mut a = a;
        // Modes with next to no energy (a pair's rotation about its own
        // axis, whose column is rounding) are left out; Cholesky in place
        // (lower).
        let scale = (0..m).map(|i| a[i * m + i]).fold(0.0f64, f64::max).max(1e-300);
        for j in 0..m {
            if a[j * m + j] < 1e-9 * scale {
                for i in 0..m {
                    (a[i * m + j], a[j * m + i]) = (0.0, 0.0);
                }
                a[j * m + j] = scale;
                p[j].fill(Vec3::ZERO);
            }
        }
        for j in 0..m {
            let mut d = a[j * m + j] + 1e-12 * scale - (0..j).map(|k| a[j * m + k] * a[j * m + k]).sum::<f64>();
            if d < 1e-9 * scale && std::env::var_os("WEFT_DEBUG").is_some() {
                eprintln!(
                    "pivot {j} (aggregate {}, mode {}): {d:.3e}, diagonal {:.3e}",
                    j / modes,
                    j % modes,
                    a[j * m + j]
                );
            }
            d = d.max(1e-30 * scale).sqrt();
            a[j * m + j] = d;
            for i in j + 1..m {
                let s = a[i * m + j] - (0..j).map(|k| a[i * m + k] * a[j * m + k]).sum::<f64>();
                a[i * m + j] = s / d;
            }
        }
        let piv: Vec<f64> = (0..m).map(|i| a[i * m + i] * a[i * m + i]).collect();
        let (lo, hi) = piv.iter().fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
        if std::env::var_os("WEFT_DEBUG").is_some() {
            eprintln!("coarse {m}: pivots {lo:.3e} to {hi:.3e}, scale {scale:.3e}");
        }
        TwoLevel { p, factor: a }
    }

    /// `z += P (PᵀAP)⁻¹ Pᵀ r`.
    fn coarse(&self, r: &[Vec3], z: &mut [Vec3]) {
        let m = self.p.len();
        let l = &self.factor;
        let mut y: Vec<f64> = self.p.iter().map(|c| dot(c, r)).collect();
        for i in 0..m {
            y[i] = (y[i] - (0..i).map(|k| l[i * m + k] * y[k]).sum::<f64>()) / l[i * m + i];
        }
        for i in (0..m).rev() {
            y[i] = (y[i] - (i + 1..m).map(|k| l[k * m + i] * y[k]).sum::<f64>()) / l[i * m + i];
        }
        for (c, yi) in self.p.iter().zip(&y) {
            for (zi, ci) in z.iter_mut().zip(c) {
                *zi += *ci * (*yi as f32);
            }
        }
    }
}

/// Which preconditioner a solve uses.
enum Pre<'a, 'b> {
    Jacobi,
    Solver(&'a mut Hierarchy<'b>),
    Two(&'a TwoLevel),
    Plus(&'a mut Hierarchy<'b>, &'a TwoLevel),
}

/// PCG iterations to a relative residual of 1e-5 (at most 2 000).
fn iterations(system: &System, b: &[Vec3], flags: &[u8], normal: &[Vec3], pre: &mut Pre) -> usize {
    let n = b.len();
    let mut r = b.to_vec();
    project(flags, normal, &mut r);
    let b_norm = dot(&r, &r).sqrt();
    let (mut z, mut q, mut t) = (vec![Vec3::ZERO; n], vec![Vec3::ZERO; n], vec![Vec3::ZERO; n]);
    let mut precondition = |r: &[Vec3], z: &mut [Vec3], t: &mut [Vec3]| match pre {
        Pre::Jacobi => {
            z.fill(Vec3::ZERO);
            FineLevel::smooth(system, 1.0, r, z);
        }
        Pre::Solver(h) => system.preconditioned(&mut **h, r, z, t),
        Pre::Plus(h, two) => {
            system.preconditioned(&mut **h, r, z, t);
            two.coarse(r, z);
        }
        Pre::Two(two) => {
            z.fill(Vec3::ZERO);
            FineLevel::smooth(system, 0.5, r, z);
            let mut res = vec![Vec3::ZERO; r.len()];
            for pass in 0..2 {
                system.apply(z, t);
                project(flags, normal, t);
                for ((ri, bi), ti) in res.iter_mut().zip(r).zip(t.iter()) {
                    *ri = *bi - *ti;
                }
                if pass == 0 {
                    two.coarse(&res, z);
                } else {
                    FineLevel::smooth(system, 0.5, &res, z);
                }
            }
        }
    };
    precondition(&r, &mut z, &mut t);
    let mut p = z.clone();
    let mut rz = dot(&r, &z);
    for it in 0..2000 {
        if dot(&r, &r).sqrt() <= 1e-5 * b_norm {
            return it;
        }
        system.apply(&p, &mut q);
        project(flags, normal, &mut q);
        let alpha = (rz / dot(&p, &q)) as f32;
        for i in 0..n {
            r[i] -= q[i] * alpha;
        }
        precondition(&r, &mut z, &mut t);
        let rz_new = dot(&r, &z);
        let beta = (rz_new / rz) as f32;
        rz = rz_new;
        for i in 0..n {
            p[i] = z[i] + p[i] * beta;
        }
    }
    2000
}

/// The six solves of the step's system at `state`.
fn measure(model: &Model, state: &State) -> [usize; 6] {
    let (x, v) = (state.positions(), state.velocities());
    let n = x.len();
    with_step_system(model, state, 0.03, |s| {
        let (system, force) = (s.system, s.force);
        let (flags, normal) = (system.flags, system.normal);
        let (h, alpha) = (model.params.dt, model.material.damping_mass);
        // K v from A v = M(1 + hα) v + c K v.
        let mut av = vec![Vec3::ZERO; n];
        system.apply(v, &mut av);
        let b: Vec<Vec3> = (0..n)
            .map(|i| {
                let m = model.mass(i);
                let kv = (av[i] - v[i] * (m * system.m_scale)) * (1.0 / system.c);
                force[i] * h + model.scene.gravity * (h * m) - v[i] * (h * alpha * m) - kv * (h * h)
            })
            .collect();
        let jacobi = iterations(system, &b, flags, normal, &mut Pre::Jacobi);
        let own = iterations(system, &b, flags, normal, &mut Pre::Solver(&mut *s.hierarchy));
        if std::env::var_os("WEFT_PLUS").is_some() {
            let level = TwoLevel::new(system, x, (flags, normal), (true, false), model);
            let plus = iterations(system, &b, flags, normal, &mut Pre::Plus(&mut *s.hierarchy, &level));
            println!("the solver's own and a coarse solve over {} columns added: {plus} iterations", level.p.len());
        }
        let mut two = [0; 4];
        for (k, modes) in [(false, false), (true, false), (false, true), (true, true)].into_iter().enumerate() {
            let level = TwoLevel::new(system, x, (flags, normal), modes, model);
            two[k] = iterations(system, &b, flags, normal, &mut Pre::Two(&level));
        }
        [jacobi, own, two[0], two[1], two[2], two[3]]
    })
}

fn main() -> anyhow::Result<()> {
    let path = std::env::args().nth(1).ok_or_else(|| anyhow::anyhow!("usage: coarse_space SCENE.toml [FRAME …]"))?;
    let mut frames: Vec<u32> = std::env::args().skip(2).filter_map(|a| a.parse().ok()).collect();
    if frames.is_empty() {
        frames = vec![1, 10, 40];
    }
    let dir = std::path::Path::new(&path).parent().unwrap_or(std::path::Path::new("."));
    let scn = Scenario::parse_in(&std::fs::read_to_string(&path)?, dir)?;
    println!("frame   block Jacobi   the solver's own   two-level: translations   and rotations   smoothed: translations   and rotations");
    sim::run(&scn, false, &mut Plain, |f, model, state| {
        if frames.contains(&f) {
            let [j, own, t, r, st, sr] = measure(model, state);
            println!("{f:5}   {j:12}   {own:16}   {t:23}   {r:13}   {st:22}   {sr:13}");
        }
        Ok(())
    })?;
    Ok(())
}
