//! The spatial-hash proximity search against brute force.
mod common;
use common::*;
use proptest::prelude::*;
use weft_core::contact::{proximity, Proximity, ProximityError};
use weft_core::prelude::*;

fn brute(mesh: &Mesh, x: &[Vec3], r: f32) -> Vec<[u16; 2]> {
    let mut out = Vec::new();
    for i in 0..x.len() {
        for j in i + 1..x.len() {
            if (x[j] - x[i]).norm2() < r * r && !mesh.has_edge(i as u16, j as u16) {
                out.push([i as u16, j as u16]);
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn matches_brute_force(nx in 2usize..20, ny in 2usize..20, seed in any::<u64>(), r in 0.01f32..0.5,
                           buckets in 1usize..600, cap in 0usize..400, crumple in 0.0f32..0.5) {
        let grid = Grid::horizontal(nx, ny, 1.0, 1.0, 0.0);
        let mut ms = VecMeshStorage::for_counts(grid.counts());
        let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
        let mut rng = Rng(seed | 1);
        let x: Vec<Vec3> = mesh.rest().iter().map(|p| *p * (1.0 - crumple) + rng.vec3(crumple)).collect();
        let mut cells = vec![0u32; buckets + 1];
        let mut order = vec![0u16; x.len()];
        let mut out = vec![[0u16; 2]; cap];
        let found = proximity(&mesh, &x, r, &mut cells, &mut order, &mut out).unwrap();
        let expected = brute(&mesh, &x, r);
        prop_assert_eq!(found.pairs + found.dropped, expected.len());
        prop_assert_eq!(found.pairs, expected.len().min(cap));
        if found.dropped == 0 {
            prop_assert_eq!(&out[..found.pairs], &expected[..]);
        } else {
            for p in &out[..found.pairs] {
                prop_assert!(expected.contains(p));
            }
        }
        // Deterministic: a second run gives the same bytes.
        let mut out2 = vec![[0u16; 2]; cap];
        let again = proximity(&mesh, &x, r, &mut cells, &mut order, &mut out2).unwrap();
        prop_assert_eq!(again, found);
        prop_assert_eq!(out, out2);
    }
}

#[test]
fn bad_arguments_are_typed_errors() {
    let grid = Grid::horizontal(3, 3, 1.0, 1.0, 0.0);
    let mut ms = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
    let x = mesh.rest().to_vec();
    let (mut cells, mut order, mut out) = (vec![0u32; 10], vec![0u16; 9], vec![[0u16; 2]; 4]);
    for r in [0.0, -1.0, f32::NAN, f32::INFINITY] {
        assert_eq!(proximity(&mesh, &x, r, &mut cells, &mut order, &mut out), Err(ProximityError::BadRadius));
    }
    assert_eq!(proximity(&mesh, &x, 0.1, &mut [0u32; 1], &mut order, &mut out), Err(ProximityError::Storage));
    assert_eq!(proximity(&mesh, &x, 0.1, &mut cells, &mut [0u16; 3], &mut out), Err(ProximityError::Storage));
    assert_eq!(proximity(&mesh, &x[..4], 0.1, &mut cells, &mut order, &mut out), Err(ProximityError::Length));
    // NaN positions do not panic; they are never within the radius.
    let mut nan = x.clone();
    nan[4] = Vec3::new(f32::NAN, 0.0, 0.0);
    let found = proximity(&mesh, &nan, 2.0, &mut cells, &mut order, &mut out).unwrap();
    assert!(out[..found.pairs].iter().all(|p| !p.contains(&4)));
    // A flat grid at rest: the other diagonal of each cell (√2 spacing) is the
    // nearest non-edge pair.
    let spacing = 0.5;
    let none = proximity(&mesh, &x, spacing * 1.41, &mut cells, &mut order, &mut out).unwrap();
    assert_eq!(none, Proximity { pairs: 0, dropped: 0 });
    let diag = proximity(&mesh, &x, spacing * 1.42, &mut cells, &mut order, &mut out).unwrap();
    assert_eq!(diag, Proximity { pairs: 4, dropped: 0 });
}

#[test]
fn self_contact_keeps_a_folding_cloth_apart() {
    // A cloth dropped onto the ground folds over itself; with self-contact on,
    // non-adjacent nodes end no closer than a fraction of the radius.
    use weft_core::model::{Collider, Shape};
    let grid = Grid::vertical(12, 12, 1.0, 1.0, 0.01);
    let radius = 0.03;
    let col = [Collider::new(Shape::Plane { normal: Vec3::new(0.0, 1.0, 0.0), offset: 0.0 })];
    let scene = Scene { colliders: &col, ..Scene::default() };
    let params = StepParams { dt: 1.0 / 240.0, self_contact: Some(SelfContact { radius }), ..StepParams::default() };
    with_cloth(&grid, Material::COTTON, scene, params, 4096, |model, state| {
        // Standing on its bottom edge, slightly bowed: it collapses onto itself.
        let x: Vec<Vec3> =
            state.positions().iter().map(|p| Vec3::new(p.x, p.y, 0.05 * (3.0 * p.y).sin() + 0.02 * p.x)).collect();
        state.set_positions(&x).unwrap();
        let mut pairs_seen = 0;
        for _ in 0..600 {
            let r = weft_core::physics::step(model, state).unwrap();
            pairs_seen += r.self_contacts;
        }
        assert!(pairs_seen > 0, "the cloth never self-touched");
        let x = state.positions();
        let mut min_d = f32::INFINITY;
        for i in 0..x.len() {
            for j in i + 1..x.len() {
                if !model.mesh.has_edge(i as u16, j as u16) && (x[j] - x[i]).norm() < min_d {
                    let (ri, rj) = (model.mesh.rest()[i], model.mesh.rest()[j]);
                    if (ri - rj).norm() > 2.0 * radius {
                        min_d = (x[j] - x[i]).norm();
                    }
                }
            }
        }
        assert!(min_d > 0.25 * radius, "nodes interpenetrate: min distance {min_d}");
        assert!(x.iter().all(|p| p.y >= -1e-4), "cloth went through the ground");
    });
}

/// The cell hash's floor is `libm::floorf(x) as i32` on every kind of
/// value: around each integer, at the ends of `i32` and of `f32`'s exact
/// integers, infinities and NaN, and on random bit patterns.
#[test]
fn the_cell_floor_is_floorf_everywhere() {
    use weft_core::contact::floor_i32;
    let reference = |x: f32| libm::floorf(x) as i32;
    let mut values = vec![0.0, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN, f32::MIN_POSITIVE];
    for k in -100..=100 {
        let k = k as f32;
        values.extend([k, k + 0.5, k - 0.5, k + 1e-3, k - 1e-3, k * 0.999_999, k * 1.000_001]);
    }
    for e in [16_777_216.0f32, 2_147_483_648.0, 3e9, 1e20] {
        for s in [1.0f32, -1.0] {
            let x = s * e;
            values.extend([x, f32::from_bits(x.to_bits() + 1), f32::from_bits(x.to_bits() - 1)]);
        }
    }
    let mut bits: u32 = 0x1234_5678;
    for _ in 0..200_000 {
        bits ^= bits << 13;
        bits ^= bits >> 17;
        bits ^= bits << 5;
        values.push(f32::from_bits(bits));
    }
    for x in values {
        assert_eq!(floor_i32(x), reference(x), "x = {x:e} ({:#010x})", x.to_bits());
    }
}
