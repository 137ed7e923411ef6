//! Force Jacobians against central finite differences.
mod common;
use common::{Rng, VecMeshStorage};
use weft_core::math::{Mat3, Vec3};
use weft_core::mesh::{Mesh, Triangle};
use weft_core::physics::bending;
use weft_core::physics::membrane::{self, Membrane};
use weft_core::prelude::*;

fn rest_triangle(rng: &mut Rng) -> (Triangle, [Vec3; 3]) {
    let pos = [
        Vec3::ZERO,
        Vec3::new(rng.uniform(0.5, 1.0), 0.0, 0.0),
        Vec3::new(rng.uniform(-0.2, 0.4), rng.uniform(0.5, 1.0), 0.0),
    ];
    let mut st = VecMeshStorage::for_triangles(3, 1);
    let mesh = Mesh::from_triangles(&pos, &[[0, 1, 2]], st.storage()).unwrap();
    (mesh.triangles()[0], pos)
}

/// The softened membrane law has a kink at zero principal strain, and
/// the one that stiffens once taut another at its taut strain: finite
/// differences are kept away from them.
fn near_kink(mem: &Membrane, tri: &Triangle, x: [Vec3; 3]) -> bool {
    let (e1, e2, _) = membrane::green_strain(membrane::deformation(tri, x)).eigen();
    let near = |k: f32| (e1 - k).abs() < 0.02 || (e2 - k).abs() < 0.02;
    (mem.compression < 1.0 && near(0.0)) || near(mem.taut)
}

/// Of every three trials: St. Venant–Kirchhoff, softened in compression by
/// `c`, and softened and stiffening past a strain of 0.05.
fn law(trial: usize, mu: f32, lambda: f32, c: f32) -> Membrane {
    match trial % 3 {
        0 => Membrane::softened(mu, lambda, 1.0),
        1 => Membrane::softened(mu, lambda, c),
        _ => Membrane { taut: 0.05, taut_slope: 2.0, ..Membrane::softened(mu, lambda, c) },
    }
}

fn max_abs(m: &Mat3) -> f32 {
    (0..3).flat_map(|r| (0..3).map(move |c| (r, c))).map(|(r, c)| m.at(r, c).abs()).fold(0.0, f32::max)
}

#[test]
fn membrane_jacobian_matches_finite_differences() {
    let mut rng = Rng(0x5eed_1234_abcd);
    let (mu, lambda) = Material::COTTON.lame();
    let mut checked = 0;
    for trial in 0..200 {
        let mem = law(trial, mu, lambda, 0.05);
        let (tri, rest) = rest_triangle(&mut rng);
        // Random rotation-free deformation: stretch, shear, out-of-plane, compression.
        let x: [Vec3; 3] = rest.map(|p| p * rng.uniform(0.7, 1.3) + rng.vec3(0.15));
        if near_kink(&mem, &tri, x) {
            continue;
        }
        checked += 1;
        // Every other trial measures the strain against the rest placement.
        let about = (trial % 2 == 1).then_some(rest);
        let exact = mem.element(&tri, x, about, false);
        let eps = 1e-3f32;
        let mut worst = 0.0f32;
        let mut scale = 0.0f32;
        for j in 0..3 {
            for d in 0..3 {
                let mut xp = x;
                let mut xm = x;
                let mut e = [0.0; 3];
                e[d] = eps;
                xp[j] += Vec3::from_array(e);
                xm[j] -= Vec3::from_array(e);
                let fp = mem.element(&tri, xp, about, false).force;
                let fm = mem.element(&tri, xm, about, false).force;
                for i in 0..3 {
                    // ∂f_i/∂x_j[d] column = −K_ij[:, d]
                    let fd = (fp[i] - fm[i]) * (1.0 / (2.0 * eps));
                    let kij = if i <= j {
                        exact.stiffness[membrane::block(i, j)]
                    } else {
                        exact.stiffness[membrane::block(j, i)].transpose()
                    };
                    let col = kij.c[d];
                    worst = worst.max((fd + col).norm());
                    scale = scale.max(max_abs(&kij));
                }
            }
        }
        assert!(worst <= 2e-3 * scale, "trial {trial} ({mem:?}): FD mismatch {worst} vs scale {scale}");
    }
    assert!(checked > 90, "{checked} checked");
}

#[test]
fn membrane_force_is_minus_energy_gradient() {
    let mut rng = Rng(77);
    for trial in 0..40 {
        let mem = law(trial, 300.0, 150.0, 0.1);
        let (tri, rest) = rest_triangle(&mut rng);
        let x: [Vec3; 3] = rest.map(|p| p * rng.uniform(0.8, 1.2) + rng.vec3(0.1));
        if near_kink(&mem, &tri, x) {
            continue;
        }
        let about = (trial % 2 == 1).then_some(rest);
        let f = mem.element(&tri, x, about, false).force;
        let eps = 1e-3;
        for j in 0..3 {
            for d in 0..3 {
                let mut e = [0.0; 3];
                e[d] = eps;
                let (mut xp, mut xm) = (x, x);
                xp[j] += Vec3::from_array(e);
                xm[j] -= Vec3::from_array(e);
                let g = (mem.energy(&tri, xp, about) - mem.energy(&tri, xm, about)) / (2.0 * eps);
                let fmax = f.iter().map(|v| v.norm()).fold(0.0, f32::max);
                assert!((f[j].get(d) + g).abs() <= 2e-3 * fmax.max(1e-3), "force {} vs -grad {}", f[j].get(d), -g);
            }
        }
    }
}

#[test]
fn definite_stiffness_is_psd_and_exact_in_tension() {
    let mut rng = Rng(99);
    let (mu, lambda) = Material::COTTON.lame();
    for trial in 0..100 {
        let mem = law(trial, mu, lambda, 0.05);
        let (tri, rest) = rest_triangle(&mut rng);
        let compress = rng.uniform(0.5, 1.0);
        let x: [Vec3; 3] = rest.map(|p| Vec3::new(p.x * compress, p.y, 0.0) + rng.vec3(0.05));
        let el = mem.element(&tri, x, (trial % 2 == 1).then_some(rest), true);
        let k = |i: usize, j: usize| {
            if i <= j {
                el.stiffness[membrane::block(i, j)]
            } else {
                el.stiffness[membrane::block(j, i)].transpose()
            }
        };
        for _ in 0..20 {
            let u = [rng.vec3(1.0), rng.vec3(1.0), rng.vec3(1.0)];
            let mut quad = 0.0;
            let mut mag = 0.0;
            for i in 0..3 {
                for j in 0..3 {
                    quad += u[i].dot(k(i, j).mul_vec(u[j]));
                    mag += max_abs(&k(i, j)) * u[i].norm() * u[j].norm();
                }
            }
            assert!(quad >= -1e-5 * mag, "negative curvature {quad} (scale {mag})");
        }
    }
    // Pure stretch in both directions: S is positive definite, both agree.
    let (tri, rest) = rest_triangle(&mut rng);
    let x = rest.map(|p| p * 1.1);
    let mem = Membrane::softened(mu, lambda, 0.05);
    let a = mem.element(&tri, x, None, true);
    let b = mem.element(&tri, x, None, false);
    assert_eq!(a.stiffness, b.stiffness);
}

/// A triangle placed at rest anywhere in space: measured against its rest
/// placement, its strain, forces and energy there are exactly zero (against
/// its rest frame they are rounding noise), and away from it the two
/// strains agree to the rest frame's rounding.
#[test]
fn the_strain_about_the_rest_placement_is_zero_there() {
    let mut rng = Rng(4242);
    let (mu, lambda) = Material::COTTON.lame();
    let mem = Membrane::softened(mu, lambda, 0.05);
    let mut noisy = 0;
    for _ in 0..100 {
        // A random triangle, tilted and moved away from the origin.
        let placed =
            [rng.vec3(1.0) + Vec3::new(3.0, -2.0, 1.0), rng.vec3(1.0), rng.vec3(1.0) - Vec3::new(0.5, 4.0, 0.0)];
        let mut st = VecMeshStorage::for_triangles(3, 1);
        let Ok(mesh) = Mesh::from_triangles(&placed, &[[0, 1, 2]], st.storage()) else { continue };
        let tri = mesh.triangles()[0];
        let el = mem.element(&tri, placed, Some(placed), false);
        assert_eq!(membrane::green_strain_about(&tri, placed, placed), Default::default());
        assert!(el.force.iter().all(|f| *f == Vec3::ZERO) && el.energy == 0.0, "{:?}", el.force);
        noisy += mem.element(&tri, placed, None, false).force.iter().any(|f| *f != Vec3::ZERO) as usize;
        let x = placed.map(|p| p * 1.05 + rng.vec3(0.05));
        let (a, b) =
            (membrane::green_strain_about(&tri, x, placed), membrane::green_strain(membrane::deformation(&tri, x)));
        let scale = a.a.abs() + a.b.abs() + a.d.abs();
        assert!((a.a - b.a).abs() + (a.b - b.b).abs() + (a.d - b.d).abs() <= 1e-4 * scale.max(1.0), "{a:?} {b:?}");
    }
    assert!(noisy > 10, "the rest frame's strain is exactly zero at {} of 100 placements", 100 - noisy);
}

#[test]
fn bending_jacobian_and_gradient_match_finite_differences() {
    let grid = Grid::horizontal(4, 4, 0.6, 0.5, 0.0);
    let mut st = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(&grid, st.storage()).unwrap();
    let mut rng = Rng(4242);
    let x: Vec<Vec3> = mesh.rest().iter().map(|p| *p + rng.vec3(0.05)).collect();
    let kb = bending::Plate { stiffness: 0.01, poisson: 0.3 };
    let n = x.len();
    let energy = |x: &[Vec3]| bending::energy(&mesh, kb, x);
    let mut f = vec![Vec3::ZERO; n];
    bending::apply(&mesh, kb, -1.0, &x, &mut f);
    let eps = 1e-3;
    let fmax = f.iter().map(|v| v.norm()).fold(0.0, f32::max);
    for j in 0..n {
        for d in 0..3 {
            let mut e = [0.0; 3];
            e[d] = eps;
            let (mut xp, mut xm) = (x.clone(), x.clone());
            xp[j] += Vec3::from_array(e);
            xm[j] -= Vec3::from_array(e);
            // Gradient of the energy.
            let g = (energy(&xp) - energy(&xm)) / (2.0 * eps);
            assert!((f[j].get(d) + g).abs() <= 1e-2 * fmax, "node {j}.{d}: f {} vs -dE {}", f[j].get(d), -g);
            // Jacobian column: K_b e_jd (apply with scale +1) = −∂f/∂x_jd.
            let (mut fp, mut fm) = (vec![Vec3::ZERO; n], vec![Vec3::ZERO; n]);
            bending::apply(&mesh, kb, -1.0, &xp, &mut fp);
            bending::apply(&mesh, kb, -1.0, &xm, &mut fm);
            let mut unit = vec![Vec3::ZERO; n];
            unit[j] = Vec3::from_array({
                let mut a = [0.0; 3];
                a[d] = 1.0;
                a
            });
            let mut col = vec![Vec3::ZERO; n];
            bending::apply(&mesh, kb, 1.0, &unit, &mut col);
            for i in 0..n {
                let fd = (fp[i] - fm[i]) * (1.0 / (2.0 * eps));
                assert!((fd + col[i]).norm() <= 1e-3 * fmax.max(1e-4), "K_b column mismatch at {i}");
            }
        }
    }
}

#[test]
fn hinge_weights_vanish_on_flat_placements() {
    // Σk = 0 and Σ k_i X_i = 0 for the rest (flat) positions: an affine map
    // of the plane costs no bending energy.
    let grid = Grid::vertical(5, 6, 0.8, 1.1, 0.0);
    let mut st = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(&grid, st.storage()).unwrap();
    for h in mesh.hinges() {
        let s: f32 = h.k.iter().sum();
        assert!(s.abs() < 1e-4, "Σk = {s}");
        assert!(bending::curvature(h, mesh.rest()).norm() < 1e-5);
        let sheared: Vec<Vec3> = mesh.rest().iter().map(|p| Vec3::new(p.x + 0.3 * p.y, 2.0 * p.y, p.x - p.y)).collect();
        assert!(bending::curvature(h, &sheared).norm() < 1e-4);
    }
}

/// Bending energy of the rest grid (in the x–z plane) displaced by `w(x, z)`
/// along y.
fn bent_energy(grid: &Grid, plate: bending::Plate, w: impl Fn(f32, f32) -> f32) -> f32 {
    let mut st = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(grid, st.storage()).unwrap();
    let x: Vec<Vec3> = mesh.rest().iter().map(|p| Vec3::new(p.x, w(p.x, p.z), p.z)).collect();
    bending::energy(&mesh, plate, &x)
}

#[test]
fn plate_energy_of_bending_and_twisting_matches_kirchhoff_theory() {
    // Small quadratic deflections w of a free rectangular plate against the
    // Kirchhoff energy ½ D ∫ (w_xx + w_zz)² − 2(1 − ν)(w_xx w_zz − w_xz²):
    // a cylinder ½ D κ² A, a dome ½ D (2 + 2ν) κ² A (w = ½ κ (x² + z²)), a
    // saddle D (1 − ν) c² A (w = c x z).
    let (w, d) = (0.6f32, 0.4f32);
    for (nx, ny) in [(13, 9), (25, 17)] {
        let grid = Grid::horizontal(nx, ny, w, d, 0.0);
        // Free edges hold no moment: the bending of the cylinders and the dome
        // relaxes in the cells along the border, a deficit of at most their
        // share of the plate.
        let border = 1.0 / (nx - 1) as f32 + 1.0 / (ny - 1) as f32;
        for nu in [0.0f32, 0.3, 0.45] {
            let plate = bending::Plate { stiffness: 2e-3, poisson: nu };
            let (k, c, area) = (0.05f32, 0.05f32, w * d);
            // The pure twist is the exact solution of a plate loaded at its
            // corners: nothing relaxes.
            let e = bent_energy(&grid, plate, |x, z| c * x * z);
            let exact = plate.stiffness * (1.0 - nu) * c * c * area;
            println!("{nx}×{ny} ν {nu} saddle: {e:.4e} vs {exact:.4e}");
            assert!((e - exact).abs() < 1e-3 * exact, "{nx}×{ny} ν {nu} saddle: discrete {e}, Kirchhoff {exact}");
            for (name, e, exact) in [
                ("cylinder x", bent_energy(&grid, plate, |x, _| 0.5 * k * x * x), 0.5 * k * k * area),
                ("cylinder z", bent_energy(&grid, plate, |_, z| 0.5 * k * z * z), 0.5 * k * k * area),
                ("dome", bent_energy(&grid, plate, |x, z| 0.5 * k * (x * x + z * z)), (1.0 + nu) * k * k * area),
            ] {
                let exact = exact * plate.stiffness;
                let deficit = 1.0 - e / exact;
                println!("{nx}×{ny} ν {nu} {name}: {e:.4e} vs {exact:.4e} (deficit {deficit:.3}, border {border:.3})");
                assert!(
                    deficit > -1e-3 && deficit < border,
                    "{nx}×{ny} ν {nu} {name}: discrete {e}, Kirchhoff {exact}"
                );
            }
        }
    }
}

#[test]
fn assembled_stiffness_matches_finite_differences_of_all_forces() {
    // A uniformly stretched, randomly perturbed cloth (membrane in tension,
    // where the solver's PSD stiffness is exact) plus bending: the assembled
    // blocks and the matrix-free wing terms together are −∂f/∂x.
    let grid = Grid::horizontal(5, 4, 0.8, 0.6, 0.0);
    let mut ms = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
    // Membrane-dominated, then bending-dominated.
    for mat in
        [Material { bending: 0.02, ..Material::COTTON }, Material { stretch: 1.0, bending: 0.05, ..Material::COTTON }]
    {
        check_assembly(mesh, mat);
    }
}

fn check_assembly(mesh: Mesh, mat: Material) {
    use weft_core::math::Mat3;
    use weft_core::physics::stencil::{Bending, Scratch};
    use weft_core::physics::{assemble, solver::matvec};
    let model = Model::new(mesh, mat, Scene::default(), StepParams::default()).unwrap();
    let mut rng = Rng(31337);
    let x: Vec<Vec3> = mesh.rest().iter().map(|p| *p * 1.08 + rng.vec3(0.004)).collect();
    let n = x.len();
    let forces = |x: &[Vec3]| {
        let mut f = vec![Vec3::ZERO; n];
        let (mut d, mut o) = (vec![Mat3::ZERO; n], vec![Mat3::ZERO; mesh.edges().len()]);
        assemble(&model, Bending::MatrixFree(mat.plate(), Scratch::NONE), x, &mut f, &mut d, &mut o);
        (f, d, o)
    };
    let (_, diag, off) = forces(&x);
    let eps = 1e-3;
    for _ in 0..6 {
        let p: Vec<Vec3> = (0..n).map(|_| rng.vec3(1.0)).collect();
        let mut kp = vec![Vec3::ZERO; n];
        matvec(&mesh, &diag, &off, Bending::MatrixFree(mat.plate(), Scratch::NONE), &p, &mut kp);
        let xp: Vec<Vec3> = x.iter().zip(&p).map(|(a, b)| *a + *b * eps).collect();
        let xm: Vec<Vec3> = x.iter().zip(&p).map(|(a, b)| *a - *b * eps).collect();
        let (fp, fm) = (forces(&xp).0, forces(&xm).0);
        let scale = kp.iter().map(|v| v.norm()).fold(0.0, f32::max);
        for i in 0..n {
            let fd = (fp[i] - fm[i]) * (-1.0 / (2.0 * eps));
            assert!((fd - kp[i]).norm() <= 5e-3 * scale, "node {i}: K p {:?} vs FD {:?}", kp[i], fd);
        }
    }
}
