//! The step's solve at scale: the multigrid-preconditioned CG needs about
//! as many iterations on a 61×61 grid as on a 16×16 one, and at ten times
//! the stretch stiffness. Also: the assembled bending stencil equals the
//! matrix-free product, and the preconditioner is symmetric and positive
//! (which CG needs).
mod common;
use common::*;
use weft_core::math::{Mat3, Vec3};
use weft_core::physics::gather::{self, Gather, Product};
use weft_core::physics::multigrid::{Layout, Multigrid};
use weft_core::physics::solver::System;
use weft_core::physics::stencil::{Bending, BendingStencil, Scratch, PER_NODE};
use weft_core::physics::{assemble, step};
use weft_core::prelude::*;

/// A cloth hanging from two corners after `settle` steps of 1/60 s: mean
/// CG iterations per step over the next 20 steps, and whether all
/// converged.
fn hanging_iterations(n: usize, stretch: f32) -> (f32, bool) {
    let grid = Grid::vertical(n, n, 1.0, 1.0, 0.2);
    let mat = Material { stretch, ..Material::COTTON };
    let pins = [grid.node(0, n - 1), grid.node(n - 1, n - 1)];
    with_pinned(&grid, mat, &pins, StepParams { cg_max_iterations: 1000, ..StepParams::default() }, |model, state| {
        for _ in 0..10 {
            step(model, state).unwrap();
        }
        let (mut total, mut ok) = (0, true);
        for _ in 0..20 {
            let r = step(model, state).unwrap();
            total += r.cg_iterations / r.substeps.max(1);
            ok &= r.converged;
        }
        (total as f32 / 20.0, ok)
    })
}

#[test]
fn iterations_stay_bounded_as_the_grid_refines_and_stiffens() {
    let mut counts = Vec::new();
    for n in [16usize, 31, 61] {
        for stretch in [500.0f32, 5000.0] {
            let (it, ok) = hanging_iterations(n, stretch);
            println!("{n}×{n}, stretch {stretch} N/m: {it:.1} CG iterations per solve");
            assert!(ok, "{n}×{n}, stretch {stretch}: a solve did not converge");
            counts.push(it);
        }
    }
    let (lo, hi) = counts.iter().fold((f32::MAX, 0.0f32), |(a, b), &c| (a.min(c), b.max(c)));
    // 16 → 61 nodes a side is 14.5× the unknowns and 3.8× the condition
    // number's square root; a tenfold stretch stiffness is another 3.2×.
    assert!(hi <= 2.5 * lo, "iterations range over {lo:.1}..{hi:.1}: {counts:?}");
}

#[test]
fn the_bending_stencil_is_the_matrix_free_hessian() {
    // 16, 31 and 61 wide: the fixed product kernels (`stencil::FIXED_WIDTHS`).
    for (nx, ny) in [(5usize, 4usize), (16, 16), (9, 23), (31, 5), (61, 12)] {
        let grid = Grid::horizontal(nx, ny, 0.7, 0.9, 0.3);
        let mut ms = VecMeshStorage::for_counts(grid.counts());
        let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
        let plate = Material::COTTON.plate();
        let mut pool = vec![0.0; PER_NODE * nx * ny];
        let stencil = BendingStencil::new(&mesh, plate, &mut pool).unwrap();
        let mut rng = Rng(nx as u64);
        let p: Vec<Vec3> = (0..nx * ny).map(|_| rng.vec3(1.0)).collect();
        let (mut a, mut b) = (vec![Vec3::ZERO; nx * ny], vec![Vec3::ZERO; nx * ny]);
        Bending::MatrixFree(plate, Scratch::NONE).apply(&mesh, 1.0, &p, &mut a);
        stencil.apply(1.0, &p, &mut b);
        let scale = a.iter().map(|v| v.norm()).fold(0.0, f32::max);
        for (i, (u, w)) in a.iter().zip(&b).enumerate() {
            assert!((*u - *w).norm() <= 1e-5 * scale, "{nx}×{ny} node {i}: {u:?} vs {w:?}");
        }
    }
}

/// The step's operator at the placement `x` (membrane assembled there,
/// the bending stencil, masses unscaled, `c` the stiffness factor) with its
/// block-Jacobi blocks and the constraints `flags`, `normal`, handed to `f`.
fn with_system<R>(
    model: &Model,
    stencil: &BendingStencil,
    x: &[Vec3],
    c: f32,
    flags: &[u8],
    normal: &[Vec3],
    f: impl FnOnce(&System) -> R,
) -> R {
    let (mesh, n) = (&model.mesh, model.mesh.node_count());
    let (mut force, mut diag, mut off) =
        (vec![Vec3::ZERO; n], vec![Mat3::ZERO; n], vec![Mat3::ZERO; mesh.edges().len()]);
    assemble(model, Bending::Stencil(stencil), x, &mut force, &mut diag, &mut off);
    let mut precond: Vec<Mat3> = diag.iter().enumerate().map(|(i, d)| *d * c + Mat3::scale(model.mass(i))).collect();
    Bending::Stencil(stencil).add_diagonal(mesh, c, &mut precond);
    precond.iter_mut().for_each(|p| *p = p.inverse().unwrap());
    let system = System {
        mesh,
        diag: &diag,
        off: &off,
        bending: Bending::Stencil(stencil),
        density: model.material.density,
        m_scale: 1.0,
        c,
        precond: &precond,
        flags,
        normal,
        gather: None,
    };
    f(&system)
}

#[test]
fn the_multigrid_preconditioner_is_symmetric_and_positive() {
    let grid = Grid::horizontal(13, 10, 1.0, 0.8, 0.5);
    let mut ms = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
    let model = Model::new(mesh, Material::COTTON, Scene::default(), StepParams::default()).unwrap();
    let n = mesh.node_count();
    let mut rng = Rng(3);
    let x: Vec<Vec3> = mesh.rest().iter().map(|p| *p * 1.05 + rng.vec3(0.01)).collect();
    let mut pool = vec![0.0; PER_NODE * n + Layout::of(mesh.counts().grid).floats()];
    let (sp, mp) = pool.split_at_mut(PER_NODE * n);
    let stencil = BendingStencil::new(&mesh, model.material.plate(), sp).unwrap();
    // Some nodes pinned, some held on a plane.
    let mut flags = vec![0u8; n];
    let mut normal = vec![Vec3::ZERO; n];
    flags[0] = weft_core::flags::PINNED;
    for i in [20, 21, 40] {
        flags[i] = weft_core::flags::CONTACT;
        normal[i] = Vec3::new(0.3, 0.9, 0.1).normalized();
    }
    with_system(&model, &stencil, &x, 1.0 / 3600.0, &flags, &normal, |system| {
        let mut mg = Multigrid::new(&mesh, &stencil, mp).unwrap();
        system.prepare(&mut mg);
        symmetric_and_positive(system, &mut mg, &flags, &normal, &mut rng);
    });
}

/// On the grid widths with fixed kernels, the block product and the
/// bending stencil take every neighbour at a fixed place: the same sums in
/// the same order as the general path (the same mesh without its grid),
/// so the same bits; so does the gather product, on those widths and
/// another.
#[test]
fn fixed_grid_kernels_give_the_general_paths_bits() {
    use weft_core::mesh::MeshParts;
    use weft_core::physics::solver::matvec;
    for (nx, ny) in [(16usize, 5usize), (31, 4), (61, 3), (7, 6)] {
        let grid = Grid::horizontal(nx, ny, 0.7, 0.9, 0.3);
        let mut ms = VecMeshStorage::for_counts(grid.counts());
        let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
        let general = Mesh::from_parts(MeshParts { grid: None, ..mesh.parts() }).unwrap();
        let mut rng = Rng(7 * nx as u64);
        let mut block = || Mat3 { c: [rng.vec3(1.0), rng.vec3(1.0), rng.vec3(1.0)] };
        let diag: Vec<Mat3> = (0..nx * ny).map(|_| block()).collect();
        let off: Vec<Mat3> = (0..mesh.edges().len()).map(|_| block()).collect();
        let mut pool = vec![0.0; PER_NODE * nx * ny];
        let stencil = BendingStencil::new(&mesh, Material::COTTON.plate(), &mut pool).unwrap();
        let p: Vec<Vec3> = (0..nx * ny).map(|_| rng.vec3(1.0)).collect();
        let (mut a, mut b) = (vec![Vec3::ZERO; nx * ny], vec![Vec3::ZERO; nx * ny]);
        let plate =
            Bending::MatrixFree(weft_core::physics::bending::Plate { stiffness: 0.0, poisson: 0.3 }, Scratch::NONE);
        matvec(&mesh, &diag, &off, plate, &p, &mut a);
        matvec(&general, &diag, &off, plate, &p, &mut b);
        assert_eq!(a, b, "{nx}×{ny} block product");
        // The gather: the same sums in the same order (a missing neighbour
        // adds a zero block, which may turn a −0 into +0: `==` on floats).
        let mut gpool = vec![0.0; gather::floats(Some([nx, ny]))];
        let mut g = Gather::new(&mesh, &mut gpool, None).expect("gather table");
        let mut c = vec![Vec3::ZERO; nx * ny];
        assert!(!g.product(&p, &mut c), "{nx}×{ny}: no product before a build");
        g.build(&mesh, &diag, &off);
        assert!(g.product(&p, &mut c), "{nx}×{ny}: gather product");
        assert_eq!(c, a, "{nx}×{ny} gather product");
        assert!(!g.product_bending(&p, &mut c), "{nx}×{ny}: no bending without a stencil");
        // With the bending stencil: its terms after the blocks', in the
        // stencil's order.
        let mut g = Gather::new(&mesh, &mut gpool, Some(&stencil)).expect("gather table");
        g.build(&mesh, &diag, &off);
        let mut with_bending = a.clone();
        stencil.apply(1.0, &p, &mut with_bending);
        assert_ne!(with_bending, a, "{nx}×{ny}: the bending adds something");
        assert!(g.product_bending(&p, &mut c), "{nx}×{ny}: gather product with bending");
        assert_eq!(c, with_bending, "{nx}×{ny} gather product with bending");
        // The stencil against its definition in the same order: node by
        // node, each forward coupling's term on the difference (a zero
        // weight adds a zero), the node's own sum after its couplings.
        let mut reference = vec![Vec3::ZERO; nx * ny];
        let (mut node, mut acc) = (0, Vec3::ZERO);
        stencil.each_forward(|i, j, w| {
            if i != node {
                reference[node] += acc;
                (node, acc) = (i, Vec3::ZERO);
            }
            let f = (p[j] - p[i]) * -w;
            acc += f;
            reference[j] -= f;
        });
        reference[node] += acc;
        let mut s = vec![Vec3::ZERO; nx * ny];
        stencil.apply(-1.0, &p, &mut s);
        assert_eq!(s, reference, "{nx}×{ny} bending stencil");
    }
}

/// The bending energy with each hinge's measure worked out once (the
/// energy check's and audit's form) is the per-triangle one, bit for bit;
/// too small a cache falls back to it.
#[test]
fn cached_bending_energy_gives_the_same_bits() {
    use weft_core::physics::bending;
    let grid = Grid::horizontal(16, 11, 0.9, 0.6, 0.4);
    let mut ms = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
    let plate = Material::COTTON.plate();
    let mut rng = Rng(0xbe4d);
    let x: Vec<Vec3> = mesh.rest().iter().map(|p| *p + rng.vec3(0.05)).collect();
    let plain = bending::energy_and_noise(&mesh, plate, &x);
    assert!(plain.0 > 0.0 && plain.1 > 0.0);
    let mut cache = vec![[0.0f32; 4]; mesh.hinges().len()];
    let cached = bending::energy_and_noise_cached(&mesh, plate, &x, &mut cache);
    assert_eq!((cached.0.to_bits(), cached.1.to_bits()), (plain.0.to_bits(), plain.1.to_bits()));
    let short = bending::energy_and_noise_cached(&mesh, plate, &x, &mut cache[1..]);
    assert_eq!((short.0.to_bits(), short.1.to_bits()), (plain.0.to_bits(), plain.1.to_bits()));
}

/// The stencil's bending energy (the energy check's and audit's form on
/// grids) is the hinges' quadratic form, whose gradient is the stencil's
/// product; it does not change when the cloth is moved far from the
/// origin, and its rounding bound stays at the scale of the energy there
/// (the hinges' grows with the distance).
#[test]
fn the_stencil_bending_energy_is_the_hinge_energy() {
    use weft_core::physics::bending;
    for (nx, ny) in [(16usize, 16usize), (9, 23), (61, 7)] {
        let grid = Grid::horizontal(nx, ny, 0.9, 0.6, 0.4);
        let mut ms = VecMeshStorage::for_counts(grid.counts());
        let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
        let plate = Material::COTTON.plate();
        let mut pool = vec![0.0; PER_NODE * nx * ny];
        let stencil = BendingStencil::new(&mesh, plate, &mut pool).unwrap();
        let mut rng = Rng(0x5e1 + nx as u64);
        let x: Vec<Vec3> = mesh.rest().iter().map(|p| *p + rng.vec3(0.05)).collect();
        let (hinge, hinge_noise) = bending::energy_and_noise(&mesh, plate, &x);
        let (energy, noise) = stencil.energy_and_noise(&x);
        assert!(hinge > 0.0, "{nx}×{ny}: bending energy {hinge}");
        assert!((energy - hinge).abs() <= 1e-4 * hinge, "{nx}×{ny}: stencil {energy} vs hinges {hinge}");
        assert!(noise > 0.0 && noise < hinge_noise, "{nx}×{ny}: bounds {noise} vs {hinge_noise}");
        // Along a direction d: E(x + s d) − E(x − s d) = 2 s dᵀ K x exactly
        // for a quadratic form; K x from the product.
        let d: Vec<Vec3> = (0..nx * ny).map(|_| rng.vec3(1.0)).collect();
        let mut kx = vec![Vec3::ZERO; nx * ny];
        stencil.apply(1.0, &x, &mut kx);
        let slope: f32 = d.iter().zip(&kx).map(|(a, b)| a.dot(*b)).sum();
        let s = 1e-3;
        let at = |sign: f32| -> Vec<Vec3> { x.iter().zip(&d).map(|(p, q)| *p + *q * (sign * s)).collect() };
        let diff = stencil.energy_and_noise(&at(1.0)).0 - stencil.energy_and_noise(&at(-1.0)).0;
        assert!(
            (diff - 2.0 * s * slope).abs() <= 1e-2 * (2.0 * s * slope).abs(),
            "{nx}×{ny}: {diff} vs {}",
            2.0 * s * slope
        );
        // Far from the origin.
        let far: Vec<Vec3> = x.iter().map(|p| *p + Vec3::new(100.0, -50.0, 20.0)).collect();
        let (e_far, noise_far) = stencil.energy_and_noise(&far);
        assert!((e_far - energy).abs() <= 1e-3 * energy, "{nx}×{ny}: moved {e_far} vs {energy}");
        assert!(noise_far <= 2.0 * noise, "{nx}×{ny}: moved bound {noise_far} vs {noise}");
        assert!(bending::energy_and_noise(&mesh, plate, &far).1 > 10.0 * noise_far);
    }
}

/// A state with the gather table steps to the same positions and
/// velocities as one without (the drape onto a sphere, pinned at two
/// corners, with contacts and releases).
#[test]
fn the_gather_product_leaves_a_step_unchanged() {
    let grid = Grid::horizontal(16, 16, 0.8, 0.8, 0.5);
    let mut ms = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
    let pins = [Pin::fixed(0, mesh.rest()[0]), Pin::fixed(15, mesh.rest()[15])];
    let colliders = [Collider::new(Shape::Sphere { center: Vec3::new(0.4, 0.2, 0.4), radius: 0.2 })];
    let scene = Scene { pins: &pins, colliders: &colliders, ..Scene::default() };
    let model = Model::new(mesh, Material::COTTON, scene, StepParams::default()).unwrap();
    let c = model.mesh.counts();
    let run = |sizes: StateSizes| {
        let mut ss = VecStateStorage::with_sizes(sizes);
        let mut state = State::new(&model, ss.storage()).unwrap();
        let mut contacts = 0;
        for _ in 0..40 {
            contacts += step(&model, &mut state).unwrap().contacts;
        }
        (state.positions().to_vec(), state.velocities().to_vec(), contacts)
    };
    let (x, v, contacts) = run(StateSizes::new(c, 64));
    let (xg, vg, contacts_g) = run(StateSizes::new(c, 64).with_gather(c));
    assert!(contacts > 0, "the cloth reaches the sphere");
    assert_eq!((x, v, contacts), (xg, vg, contacts_g));
}

/// The fine level's damped block-Jacobi smoother converges on every mode,
/// with room to spare, even where stiffness outweighs the masses without
/// limit (any time step, any stretch stiffness): the largest eigenvalue of
/// `D⁻¹Ã` (power iteration) times the damping stays below 2, so the
/// V-cycle stays a convergent, symmetric positive definite preconditioner.
#[test]
fn the_fine_smoother_is_damped_below_its_stability_limit() {
    use weft_core::physics::multigrid::{FineLevel, OMEGA};
    for (grid, stretch, scale, c) in [
        (Grid::horizontal(13, 10, 1.0, 0.8, 0.5), 500.0f32, 1.05f32, 1.0 / 3600.0f32),
        (Grid::horizontal(13, 10, 1.0, 0.8, 0.5), 5000.0, 1.05, 1e4),
        (Grid::horizontal(13, 10, 1.0, 0.8, 0.5), 5000.0, 0.97, 1e4),
        (Grid::horizontal(18, 5, 1.0, 1.0 / 17.0, 0.0), 500.0, 1.0, 1e4),
        (Grid::horizontal(18, 5, 1.0, 1.0 / 17.0, 0.0), 500.0, 1.0, 1.0 / 10000.0),
        (Grid::horizontal(6, 9, 1.0, 8.0, 0.0), 500.0, 1.0, 1e4),
    ] {
        let mut ms = VecMeshStorage::for_counts(grid.counts());
        let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
        let mat = Material { stretch, ..Material::COTTON };
        let model = Model::new(mesh, mat, Scene::default(), StepParams::default()).unwrap();
        let n = mesh.node_count();
        let mut rng = Rng(11);
        let x: Vec<Vec3> = mesh.rest().iter().map(|p| *p * scale + rng.vec3(0.01)).collect();
        let mut pool = vec![0.0; PER_NODE * n];
        let stencil = BendingStencil::new(&mesh, model.material.plate(), &mut pool).unwrap();
        let (flags, normal) = (vec![0u8; n], vec![Vec3::ZERO; n]);
        with_system(&model, &stencil, &x, c, &flags, &normal, |system| {
            let norm = |a: &[Vec3]| a.iter().map(|v| v.norm2() as f64).sum::<f64>().sqrt();
            let mut z: Vec<Vec3> = (0..n).map(|_| rng.vec3(1.0)).collect();
            let (mut t, mut y) = (vec![Vec3::ZERO; n], vec![Vec3::ZERO; n]);
            let mut lambda = 0.0;
            for _ in 0..300 {
                FineLevel::apply(system, &z, &mut t);
                y.fill(Vec3::ZERO);
                FineLevel::smooth(system, 1.0, &t, &mut y);
                lambda = norm(&y) / norm(&z);
                let s = (1.0 / norm(&y)) as f32;
                z.iter_mut().zip(&y).for_each(|(zi, yi)| *zi = *yi * s);
            }
            println!(
                "stretch {stretch}, scale {scale}, c {c}: λmax(D⁻¹Ã) {lambda:.3}, ω λmax {:.3}",
                OMEGA as f64 * lambda
            );
            assert!(OMEGA as f64 * lambda < 1.9, "ω λmax = {:.3}", OMEGA as f64 * lambda);
        });
    }
}

/// The aggregation hierarchy of a mesh that is not a grid (a grid's
/// triangles given as a plain triangle list, nodes jittered): its V-cycle
/// is a symmetric positive definite preconditioner, with pins and contact
/// planes, as the CG needs.
#[test]
fn the_aggregation_preconditioner_is_symmetric_and_positive() {
    let mut rng = Rng(5);
    let (rest, tris) = jittered_pieces(1, &mut rng);
    let levels = check_aggregation(&rest, &tris, false, &mut rng);
    assert!(levels >= 2, "{levels} levels");
}

/// A mesh of several pieces (a garment's panels before they are sewn)
/// coarsens every piece down to one aggregate and stops there: it keeps its
/// hierarchy, symmetric and positive, where a piece without edges at a
/// level used to leave the whole mesh without one.
#[test]
fn a_mesh_of_several_pieces_keeps_its_aggregation_hierarchy() {
    let mut rng = Rng(8);
    let (rest, tris) = jittered_pieces(12, &mut rng);
    let levels = check_aggregation(&rest, &tris, false, &mut rng);
    assert!(levels >= 2, "{levels} levels");
}

/// A tube's rigid aggregation hierarchy (each aggregate's translation and
/// rotation, `Aggregates::rigid`) is a symmetric, positive V-cycle too,
/// with pins and contact planes; so is a mesh of several pieces'.
#[test]
fn a_rigid_aggregation_hierarchy_is_symmetric_and_positive() {
    let mut rng = Rng(9);
    let (rest, tris) = tube(24, 18, 0.05, 0.3);
    assert!(check_aggregation(&rest, &tris, true, &mut rng) >= 2);
    let (rest, tris) = jittered_pieces(5, &mut rng);
    assert!(check_aggregation(&rest, &tris, true, &mut rng) >= 2);
}

/// A closed tube of `around` nodes a ring and `rings` rings, `radius` and
/// `length` (m), along z.
fn tube(around: usize, rings: usize, radius: f32, length: f32) -> (Vec<Vec3>, Vec<[u16; 3]>) {
    let mut rest = Vec::new();
    for r in 0..rings {
        for k in 0..around {
            let a = core::f32::consts::TAU * k as f32 / around as f32;
            rest.push(Vec3::new(radius * a.cos(), radius * a.sin(), length * r as f32 / (rings - 1) as f32));
        }
    }
    let at = |r: usize, k: usize| (r * around + k % around) as u16;
    let mut tris = Vec::new();
    for r in 0..rings - 1 {
        for k in 0..around {
            tris.push([at(r, k), at(r, k + 1), at(r + 1, k + 1)]);
            tris.push([at(r, k), at(r + 1, k + 1), at(r + 1, k)]);
        }
    }
    (rest, tris)
}

/// `pieces` copies of a 13 × 10 grid's triangles as a plain triangle list,
/// side by side 1.2 m apart, nodes jittered by 1 cm.
fn jittered_pieces(pieces: usize, rng: &mut Rng) -> (Vec<Vec3>, Vec<[u16; 3]>) {
    let grid = Grid::horizontal(13, 10, 1.0, 0.8, 0.5);
    let mut gs = VecMeshStorage::for_counts(grid.counts());
    let g = Mesh::grid(&grid, gs.storage()).unwrap();
    let (mut rest, mut tris) = (Vec::new(), Vec::new());
    for k in 0..pieces {
        let first = rest.len() as u16;
        let shift = Vec3::new(1.2 * k as f32, 0.0, 0.0);
        rest.extend(g.rest().iter().map(|p| *p + shift + rng.vec3(0.01)));
        tris.extend(g.triangles().iter().map(|t| t.nodes.map(|i| i + first)));
    }
    (rest, tris)
}

/// Builds the aggregation hierarchy of the mesh `rest`, `tris` (pinned,
/// contact and free nodes, stretched 5 %; `rigid` or of translations),
/// checks its V-cycle is symmetric and positive, and returns its coarse
/// levels.
fn check_aggregation(rest: &[Vec3], tris: &[[u16; 3]], rigid: bool, rng: &mut Rng) -> usize {
    use weft_core::physics::aggregate::{self, Aggregates};
    let mut ms = VecMeshStorage::for_triangles(rest.len(), tris.len());
    let mesh = Mesh::from_triangles(rest, tris, ms.storage()).unwrap();
    assert!(mesh.counts().grid.is_none());
    let model = Model::new(mesh, Material::COTTON, Scene::default(), StepParams::default()).unwrap();
    let n = mesh.node_count();
    let x: Vec<Vec3> = mesh.rest().iter().map(|p| *p * 1.05 + rng.vec3(0.01)).collect();
    let mut pool = vec![0.0; aggregate::rigid_floats(mesh.counts())];
    let mut agg = Aggregates::new(&mesh, rigid, &mut pool).expect("a hierarchy");
    assert_eq!(agg.rigid(), rigid);
    let (mut flags, mut normal) = (vec![0u8; n], vec![Vec3::ZERO; n]);
    flags[0] = weft_core::flags::PINNED;
    for i in [20, 21, 40] {
        flags[i] = weft_core::flags::CONTACT;
        normal[i] = Vec3::new(0.3, 0.9, 0.1).normalized();
    }
    let c = 1.0 / 3600.0;
    let (mut force, mut diag, mut off) =
        (vec![Vec3::ZERO; n], vec![Mat3::ZERO; n], vec![Mat3::ZERO; mesh.edges().len()]);
    let bending = Bending::MatrixFree(model.material.plate(), Scratch::NONE);
    assemble(&model, bending, &x, &mut force, &mut diag, &mut off);
    let precond: Vec<Mat3> =
        diag.iter().enumerate().map(|(i, d)| (*d * c + Mat3::scale(model.mass(i))).inverse().unwrap()).collect();
    let system = System {
        mesh: &mesh,
        diag: &diag,
        off: &off,
        bending,
        density: model.material.density,
        m_scale: 1.0,
        c,
        precond: &precond,
        flags: &flags,
        normal: &normal,
        gather: None,
    };
    system.prepare(&mut agg);
    symmetric_and_positive(&system, &mut agg, &flags, &normal, rng);
    agg.levels()
}

/// `wᵀBu = uᵀBw` and `uᵀBu > 0` for the preconditioner `B` of `system`
/// with `coarse` on random vectors filtered by the pins and contact
/// planes of `flags` and `normal`.
fn symmetric_and_positive(
    system: &System,
    coarse: &mut impl weft_core::physics::multigrid::Coarse,
    flags: &[u8],
    normal: &[Vec3],
    rng: &mut Rng,
) {
    let n = flags.len();
    let filtered = |rng: &mut Rng| -> Vec<Vec3> {
        (0..n)
            .map(|i| {
                let v = rng.vec3(1.0);
                if flags[i] & weft_core::flags::PINNED != 0 {
                    Vec3::ZERO
                } else if flags[i] != 0 {
                    v - normal[i] * normal[i].dot(v)
                } else {
                    v
                }
            })
            .collect()
    };
    let dot = |a: &[Vec3], b: &[Vec3]| a.iter().zip(b).map(|(x, y)| x.dot(*y) as f64).sum::<f64>();
    for _ in 0..5 {
        let (u, w) = (filtered(rng), filtered(rng));
        let (mut bu, mut bw, mut t) = (vec![Vec3::ZERO; n], vec![Vec3::ZERO; n], vec![Vec3::ZERO; n]);
        system.preconditioned(coarse, &u, &mut bu, &mut t);
        system.preconditioned(coarse, &w, &mut bw, &mut t);
        let (a, b) = (dot(&w, &bu), dot(&u, &bw));
        assert!((a - b).abs() <= 1e-4 * (a.abs() + b.abs()), "wᵀBu {a} vs uᵀBw {b}");
        assert!(dot(&u, &bu) > 0.0);
    }
}
