//! A local–global (projective-dynamics) step on the device's scenes, plain,
//! side by side with the linearised backward-Euler step of `weft-core`: a
//! constant matrix factored once (banded Cholesky, the grid's natural order)
//! and a fixed number of local projections and global solves a step.
//!
//! ```sh
//! cargo run --release -p weft-tests --example local_global -- [drape] 200 5 10 20   # accuracy
//! cargo run --release -p weft-tests --example local_global -- bench [drape] 5 10 20 # time
//! ```
//!
//! Accuracy: the positions' RMS distance after 1, 5, 15, 30 and 60 steps
//! from `weft-core`'s step at a quarter of the time step solved to 1e-6,
//! for `weft-core`'s step at the device's settings and for the local–global
//! step at each iteration count; and each count's distance from the first
//! (the most iterations). Time: 60 steps, the median of 15 runs in turn.
//!
//! The local–global step's model: the inertia target `y = x + h v + h² g`;
//! a membrane `μ A ‖F − P(F)‖²` per triangle, where `P` takes principal
//! stretches above 1 to 1 (the nearest rotation) and moves those below 1
//! towards 1 by the compression factor `c` (`σ + c (1 − σ)`: a compressed
//! stretch costs `c²` as much), which at small strains is the membrane's
//! `μ E:E` without its Poisson term `λ`; the plate's constant bending
//! Hessian, lagged by an iteration; pins held; colliders by projection
//! after every global solve, with position-based Coulomb friction on the
//! step's tangential displacement; the mass damping. Neither the stiffness
//! damping, self-contact nor wind is modelled.
#[path = "../host.rs"]
mod host;
use weft_core::math::Vec3;
use weft_core::mesh::Mesh;
use weft_core::model::{Collider, Model, StepParams};
use weft_core::storage::MeshBuffers;
use weft_tests::scene::{self, Scenario, COUNTS};

/// Steps after which positions are compared.
const AT: [u32; 5] = [1, 5, 15, 30, 60];

/// A banded Cholesky factor `L` (lower band of width `b`): row `i` holds
/// `L[i][i − b ..= i]`.
struct Band {
    n: usize,
    b: usize,
    l: Vec<f32>,
}

impl Band {
    fn factor(a: impl Fn(usize, usize) -> f32, n: usize, b: usize) -> Band {
        let w = b + 1;
        let mut l = vec![0f32; n * w];
        for i in 0..n {
            for j in i.saturating_sub(b)..=i {
                let mut s = a(i, j);
                for k in i.saturating_sub(b)..j {
                    s -= l[i * w + k + b - i] * l[j * w + k + b - j];
                }
                l[i * w + j + b - i] = if i == j { s.sqrt() } else { s / l[j * w + b] };
            }
        }
        Band { n, b, l }
    }

    /// `x ← (L Lᵀ)⁻¹ x`, the three coordinates at once.
    fn solve(&self, x: &mut [Vec3]) {
        let (n, b, w) = (self.n, self.b, self.b + 1);
        for i in 0..n {
            let lo = i.saturating_sub(b);
            let row = &self.l[i * w + lo + b - i..i * w + b];
            let s = x[lo..i].iter().zip(row).fold(x[i], |s, (xk, lik)| s - *xk * *lik);
            x[i] = s * (1.0 / self.l[i * w + b]);
        }
        for i in (0..n).rev() {
            let hi = (i + b + 1).min(n);
            let s =
                x[i + 1..hi].iter().enumerate().fold(x[i], |s, (d, xk)| s - *xk * self.l[(i + 1 + d) * w + b - 1 - d]);
            x[i] = s * (1.0 / self.l[i * w + b]);
        }
    }
}

/// `P(F)` of the membrane for a 3×2 deformation gradient (its columns).
fn project_stretch(f: [Vec3; 2], compression: f32) -> [Vec3; 2] {
    // FᵀF = V diag(σ²) Vᵀ; P(F) = F V diag(σ'/σ) Vᵀ.
    let (a, b, d) = (f[0].dot(f[0]), f[0].dot(f[1]), f[1].dot(f[1]));
    let mean = 0.5 * (a + d);
    let half = (0.25 * (a - d) * (a - d) + b * b).sqrt();
    let (l1, l2) = (mean + half, (mean - half).max(1e-12));
    let (vx, vy) = if b.abs() > 1e-12 {
        (l1 - d, b)
    } else if a >= d {
        (1.0, 0.0)
    } else {
        (0.0, 1.0)
    };
    let norm = (vx * vx + vy * vy).sqrt();
    let (c, s) = (vx / norm, vy / norm);
    let target = |sigma: f32| if sigma >= 1.0 { 1.0 } else { sigma + compression * (1.0 - sigma) };
    let (s1, s2) = (l1.sqrt(), l2.sqrt());
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

struct LocalGlobal<'m> {
    model: &'m Model<'m>,
    factor: Band,
    /// `2 μ A` per triangle.
    weight: Vec<f32>,
    pinned: Vec<bool>,
    /// Rows of the bending Hessian (a multiple of the identity per pair).
    bending: Vec<Vec<(usize, f32)>>,
    /// The couplings of free nodes `i` to pinned `j`: `(i, j, Q_ij)`.
    to_pins: Vec<(usize, usize, f32)>,
    iterations: usize,
}

impl<'m> LocalGlobal<'m> {
    fn new(model: &'m Model<'m>, iterations: usize) -> LocalGlobal<'m> {
        let mesh = &model.mesh;
        let n = mesh.node_count();
        let h = model.params.dt;
        let (mu, _) = model.material.lame();
        let mut pinned = vec![false; n];
        for p in model.scene.pins {
            pinned[p.node as usize] = true;
        }
        let weight: Vec<f32> = mesh.triangles().iter().map(|t| 2.0 * mu * t.area).collect();
        let mut q = std::collections::HashMap::<(usize, usize), f32>::new();
        for i in 0..n {
            *q.entry((i, i)).or_default() += model.mass(i) / (h * h);
        }
        let mut to_pins = Vec::new();
        for (t, w) in mesh.triangles().iter().zip(&weight) {
            for (a, ga) in t.nodes.iter().zip(&t.grad) {
                for (c, gc) in t.nodes.iter().zip(&t.grad) {
                    let (i, j) = (*a as usize, *c as usize);
                    let qij = w * (ga[0] * gc[0] + ga[1] * gc[1]);
                    *q.entry((i, j)).or_default() += qij;
                    if !pinned[i] && pinned[j] {
                        to_pins.push((i, j, qij));
                    }
                }
            }
        }
        let plate = model.material.plate();
        let mut bending = vec![Vec::new(); n];
        let (mut p, mut out) = (vec![Vec3::ZERO; n], vec![Vec3::ZERO; n]);
        for j in 0..n {
            p.fill(Vec3::ZERO);
            p[j].x = 1.0;
            out.fill(Vec3::ZERO);
            weft_core::physics::bending::apply(mesh, plate, 1.0, &p, &mut out);
            for (i, o) in out.iter().enumerate() {
                if o.x != 0.0 {
                    bending[i].push((j, o.x));
                }
            }
        }
        let free = |i: usize, j: usize| !pinned[i] && !pinned[j];
        let band = q.keys().filter(|&&(i, j)| free(i, j)).map(|&(i, j)| i.abs_diff(j)).max().unwrap_or(0);
        let entry = |i: usize, j: usize| match (free(i, j), i == j) {
            (true, _) => q.get(&(i, j)).copied().unwrap_or(0.0),
            (false, true) => 1.0,
            (false, false) => 0.0,
        };
        let factor = Band::factor(entry, n, band);
        LocalGlobal { model, factor, weight, pinned, bending, to_pins, iterations }
    }

    fn step(&self, t: f64, x: &mut [Vec3], v: &mut [Vec3]) {
        let model = self.model;
        let n = model.mesh.node_count();
        let h = model.params.dt;
        let t1 = t + f64::from(h);
        let g = model.scene.gravity;
        let y: Vec<Vec3> = x.iter().zip(v.iter()).map(|(xi, vi)| *xi + *vi * h + g * (h * h)).collect();
        let mut next = y.clone();
        for p in model.scene.pins {
            next[p.node as usize] = p.target(t1);
        }
        collide(model.scene.colliders, &mut next, x, t1 as f32);
        let compression = model.material.compression;
        let mut rhs = vec![Vec3::ZERO; n];
        for _ in 0..self.iterations {
            for (i, r) in rhs.iter_mut().enumerate() {
                *r = y[i] * (model.mass(i) / (h * h));
                for &(j, hij) in &self.bending[i] {
                    *r -= next[j] * hij;
                }
            }
            for (tri, w) in model.mesh.triangles().iter().zip(&self.weight) {
                let [a, b, c] = tri.nodes.map(usize::from);
                let g = tri.grad;
                let f0 = next[a] * g[0][0] + next[b] * g[1][0] + next[c] * g[2][0];
                let f1 = next[a] * g[0][1] + next[b] * g[1][1] + next[c] * g[2][1];
                let p = project_stretch([f0, f1], compression);
                for (node, gk) in [a, b, c].into_iter().zip(&g) {
                    rhs[node] += (p[0] * gk[0] + p[1] * gk[1]) * *w;
                }
            }
            for (i, r) in rhs.iter_mut().enumerate() {
                if self.pinned[i] {
                    *r = next[i];
                }
            }
            for &(i, j, qij) in &self.to_pins {
                rhs[i] -= next[j] * qij;
            }
            self.factor.solve(&mut rhs);
            next.copy_from_slice(&rhs);
            collide(model.scene.colliders, &mut next, x, t1 as f32);
        }
        let damping = 1.0 - h * model.material.damping_mass;
        for ((vi, xi), ni) in v.iter_mut().zip(x.iter()).zip(&next) {
            let mut u = (*ni - *xi) * (damping / h);
            for c in model.scene.colliders {
                let (d, normal) = c.distance(*ni, t1 as f32);
                let un = u.dot(normal);
                if d <= c.thickness + 1e-6 && un < 0.0 {
                    let tangential = u - normal * un;
                    let speed = tangential.norm();
                    let keep = if speed > 0.0 { (1.0 - c.friction * -un / speed).max(0.0) } else { 0.0 };
                    u = tangential * keep;
                }
            }
            *vi = u;
        }
        x.copy_from_slice(&next);
    }

    /// Positions after each of [`AT`]'s steps, and the run's time.
    fn run(&self) -> (Vec<Vec<Vec3>>, f64) {
        let mut x = self.model.mesh.rest().to_vec();
        let mut v = vec![Vec3::ZERO; x.len()];
        let mut out = Vec::new();
        let clock = std::time::Instant::now();
        for s in 0..scene::STEPS {
            self.step(f64::from(s) * f64::from(self.model.params.dt), &mut x, &mut v);
            if AT.contains(&(s + 1)) {
                out.push(x.clone());
            }
        }
        (out, clock.elapsed().as_secs_f64())
    }
}

/// `weft-core`'s plain step: positions after each of [`AT`]'s steps
/// (`per` steps a frame), and the run's time.
fn linearised(scenario: Scenario, params: StepParams, per: u32) -> (Vec<Vec<Vec3>>, f64) {
    let mut out = Vec::new();
    let clock = std::time::Instant::now();
    host::run(scenario, params, false, per * scene::STEPS, |s, _, _, state| {
        if (s + 1) % per == 0 && AT.contains(&((s + 1) / per)) {
            out.push(state.positions().to_vec());
        }
    });
    (out, clock.elapsed().as_secs_f64())
}

fn rms(a: &[Vec3], b: &[Vec3]) -> f32 {
    (a.iter().zip(b).map(|(p, q)| (*p - *q).norm2()).sum::<f32>() / a.len() as f32).sqrt()
}

fn distances(a: &[Vec<Vec3>], b: &[Vec<Vec3>]) -> String {
    AT.iter().zip(a.iter().zip(b)).map(|(s, (a, b))| format!("{s}: {:.2e}", rms(a, b))).collect::<Vec<_>>().join("  ")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scenario = if args.iter().any(|a| a == "drape") { Scenario::Drape } else { Scenario::Swing };
    let mut counts: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if counts.is_empty() {
        counts = vec![200, 5, 10, 20];
    }
    let params = scene::params();
    let mut mb =
        Box::new(MeshBuffers::<{ COUNTS.nodes }, { COUNTS.triangles }, { COUNTS.edges }, { COUNTS.hinges }>::new());
    let mesh = Mesh::grid(&scene::grid(), mb.storage()).expect("the device's grid");
    let (pins, colliders) = (scenario.pins(), scenario.colliders());
    let model = Model::new(mesh, scene::MATERIAL, scene::scene(pins.as_slice(), &colliders), params)
        .expect("the device's scene");
    let steppers: Vec<LocalGlobal> = counts.iter().map(|&k| LocalGlobal::new(&model, k)).collect();
    let factor = &steppers[0].factor;
    println!(
        "{}: the factor's band {} ({} floats, {} bytes in f32)",
        scenario.name(),
        factor.b,
        factor.l.len(),
        4 * factor.l.len()
    );
    if args.iter().any(|a| a == "bench") {
        const RUNS: usize = 15;
        let mut times = vec![Vec::with_capacity(RUNS); counts.len() + 1];
        for _ in 0..RUNS {
            times[0].push(linearised(scenario, params, 1).1);
            for (k, s) in steppers.iter().enumerate() {
                times[k + 1].push(s.run().1);
            }
        }
        let median = |t: &mut Vec<f64>| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        };
        let today = median(&mut times[0]);
        println!("linearised step, {} steps: {:.2} ms (median of {RUNS})", scene::STEPS, today * 1e3);
        for (k, t) in counts.iter().zip(&mut times[1..]) {
            let m = median(t);
            println!("local-global, {k} iterations: {:.2} ms, {:.2} of the linearised step's time", m * 1e3, m / today);
        }
        return;
    }
    let (today, _) = linearised(scenario, params, 1);
    let tight = StepParams { dt: params.dt * 0.25, cg_tolerance: 1e-6, cg_max_iterations: 20_000, ..params };
    let (reference, _) = linearised(scenario, tight, 4);
    println!("RMS distance (m) after steps from the linearised step at dt/4 solved to 1e-6:");
    println!("  linearised step (the device's settings): {}", distances(&today, &reference));
    let runs: Vec<_> = steppers.iter().map(|s| s.run().0).collect();
    for (k, x) in counts.iter().zip(&runs) {
        println!("  local-global, {k} iterations: {}", distances(x, &reference));
    }
    println!("from local-global at {} iterations:", counts[0]);
    for (k, x) in counts.iter().zip(&runs).skip(1) {
        println!("  local-global, {k} iterations: {}", distances(x, &runs[0]));
    }
}
