//! Cloths from mesh files: the shapes `weft mesh` makes, OBJ files that
//! are not cloths (each a typed error naming the element), and pins and
//! kicks chosen by node list, box, ball and vertex group.

use weft_core::math::Vec3;
use weft_host::sim::build::{self, ModelParts};
use weft_host::sim::obj::{self, ObjError};
use weft_host::sim::scenario::Scenario;
use weft_host::sim::shapes::Shape;
use weft_host::sim::storage::VecStateStorage;

/// A scenario on the mesh file `obj` (written into a temporary folder)
/// with `rest` more TOML.
fn scenario(obj: &str, rest: &str) -> anyhow::Result<Scenario> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("m.obj"), obj)?;
    Scenario::parse_in(&format!("[cloth]\nmesh = \"m.obj\"\n{rest}"), dir.path()).map_err(Into::into)
}

/// Two triangles of a unit square, in group `edge` the first.
const SQUARE: &str = "v 0 0 0\nv 1 0 0\nv 1 0 1\nv 0 0 1\ng edge\nf 1 3 2\ng rest\nf 1 4 3\n";

#[test]
fn every_shape_is_a_cloth_mesh() {
    for shape in [Shape::Disc, Shape::Holed, Shape::Irregular, Shape::Panel] {
        let (x, t) = shape.mesh();
        let back = obj::parse(&obj::write(&x, &t)).unwrap_or_else(|e| panic!("{shape:?}: {e}"));
        assert_eq!((back.positions.len(), back.triangles.len()), (x.len(), t.len()));
        // Front side up everywhere, and a mesh the core builds.
        for tri in &t {
            let [a, b, c] = tri.map(|n| x[n as usize]);
            assert!((b - a).cross(c - a).y > 0.0, "{shape:?}");
        }
        let scn = scenario(&obj::write(&x, &t), "").unwrap();
        let mut parts = ModelParts::default();
        let model = build::model(&scn, Default::default(), &mut parts).unwrap();
        assert_eq!(model.mesh.node_count(), x.len());
        assert!(model.mesh.counts().grid.is_none());
    }
}

#[test]
fn files_that_are_not_cloths_are_named_errors() {
    let err = |text: &str| obj::parse(text).unwrap_err();
    assert_eq!(err("v 0 0 0\nv 1 0 0\nv 0 0 0\nf 1 2 3\n"), ObjError::Duplicate { a: 0, b: 2 });
    assert_eq!(
        err("v 0 0 0\nv 1 0 0\nv 1 0 1\nv 0 0 1\nf 1 3 2\nf 1 3 4\n"),
        ObjError::Inverted { triangle: 1, other: 0, a: 0, b: 2 }
    );
    assert_eq!(err("v 0 0 0\nv 1 0 0\nv 1 0 1\nv 5 5 5\nf 1 3 2\n"), ObjError::Unused { vertex: 3 });
    assert_eq!(err("v 0 0 0\n"), ObjError::NoFaces);
    assert!(matches!(err("v 0 0\nf 1 1 1\n"), ObjError::Parse { line: 1, .. }));
    assert!(matches!(err("v 0 0 0\nf 1 2 3\n"), ObjError::Parse { line: 2, .. }));
    let many: String = (0..65_537).map(|i| format!("v {i} 0 0\n")).collect::<String>() + "f 1 2 3\n";
    assert_eq!(err(&many), ObjError::TooManyNodes { count: 65_537 });
    // A degenerate triangle (the core's check, named through the
    // scenario) and an edge of three triangles.
    let flat = scenario("v 0 0 0\nv 1 0 0\nv 2 0 0\nf 1 2 3\n", "").unwrap_err();
    assert!(format!("{flat:#}").contains("triangle 0 is degenerate"), "{flat:#}");
    let fan = "v 0 0 0\nv 1 0 0\nv 0 0 1\nv 0 1 0\nv 0 -1 0\nf 1 2 3\nf 2 1 4\nf 1 2 5\n";
    let three = scenario(fan, "").unwrap_err();
    assert!(
        format!("{three:#}").contains("edge 0-1 belongs to more than two triangles (triangle 2 is the third)"),
        "{three:#}"
    );
}

#[test]
fn pins_and_kicks_choose_nodes_by_list_box_ball_and_group() {
    let nodes = |toml: &str| {
        let scn = scenario(SQUARE, toml).unwrap();
        let mut parts = ModelParts::default();
        let model = build::model(&scn, Default::default(), &mut parts).unwrap();
        let mut pinned: Vec<usize> = model.scene.pins.iter().map(|p| p.node as usize).collect();
        pinned.sort_unstable();
        pinned
    };
    assert_eq!(nodes("[[pin]]\nnodes = [3]\n"), [3]);
    assert_eq!(nodes("[[pin]]\nbox = { min = [0.5, -1, -1], max = [2, 1, 2] }\n"), [1, 2]);
    assert_eq!(nodes("[[pin]]\nsphere = { center = [0, 0, 0], radius = 0.1 }\n"), [0]);
    assert_eq!(nodes("[[pin]]\ngroup = \"edge\"\n"), [0, 1, 2]);
    // Placement moves the rest coordinates the boxes are in.
    assert_eq!(nodes("center = [10, 0, 0]\n[[pin]]\nsphere = { center = [10, 0, 0], radius = 0.1 }\n"), [0]);
    for (toml, what) in [
        ("[[pin]]\nregion = \"corners\"\n", "named regions are the rectangle's"),
        ("[[pin]]\ngroup = \"sleeve\"\n", "no group \"sleeve\""),
        ("[[pin]]\nsphere = { center = [5, 5, 5], radius = 0.1 }\n", "holds no node"),
        ("[[pin]]\nnodes = [9]\n", "node 9 does not exist"),
        ("resolution = [4, 4]\n", "give the mesh or the rectangle"),
    ] {
        let e = format!("{:#}", scenario(SQUARE, toml).unwrap_err());
        assert!(e.contains(what), "{toml}: {e}");
    }
    // A kick starts the chosen free nodes with its velocity.
    let scn = scenario(SQUARE, "[[pin]]\nnodes = [0]\n[[kick]]\ngroup = \"edge\"\nvelocity = [0, 2, 0]\n").unwrap();
    let mut parts = ModelParts::default();
    let model = build::model(&scn, Default::default(), &mut parts).unwrap();
    let mut storage = VecStateStorage::new(&model, 0);
    let state = build::start(&scn, &model, &mut storage).unwrap();
    let up = Vec3::new(0.0, 2.0, 0.0);
    let v = state.velocities();
    assert_eq!([v[0], v[1], v[2], v[3]], [Vec3::ZERO, up, up, Vec3::ZERO]);
}

/// The solve on a mesh that is not a grid, as it refines: the disc at 6,
/// 12 and 24 rings (127, 469 and 1 801 nodes), a stretched placement, one
/// solve of the step's system to 1e-6 from a fixed right-hand side. With
/// the aggregation hierarchy it takes tens of iterations at every size
/// (26, 36 and 49), growing far slower than the nodes; block Jacobi alone
/// needs more at the smallest and stops short of the tolerance at the
/// others.
#[test]
fn the_disc_solves_in_tens_of_iterations_at_every_size() {
    use weft_core::math::Mat3;
    use weft_core::mesh::Mesh;
    use weft_core::model::{Material, Model, Scene, StepParams};
    use weft_core::physics::aggregate::{self, Aggregates};
    use weft_core::physics::assemble;
    use weft_core::physics::hierarchy::Hierarchy;
    use weft_core::physics::solver::{Stop, System};
    use weft_core::physics::stencil::{Bending, Scratch};
    use weft_host::sim::storage::VecMeshStorage;
    let mut iterations = Vec::new();
    for rings in [6, 12, 24] {
        let (rest, tris) = weft_host::sim::shapes::disc(0.4, rings);
        let mut ms = VecMeshStorage::for_triangles(rest.len(), tris.len());
        let mesh = Mesh::from_triangles(&rest, &tris, ms.storage()).unwrap();
        let model = Model::new(mesh, Material::COTTON, Scene::default(), StepParams::default()).unwrap();
        let n = mesh.node_count();
        // A deterministic stretch and ripple, and right-hand side.
        let x: Vec<Vec3> = rest
            .iter()
            .map(|p| *p * 1.05 + Vec3::new(0.0, 0.01 * (7.0 * p.x).sin() * (5.0 * p.z).cos(), 0.0))
            .collect();
        let rhs: Vec<Vec3> = (0..n)
            .map(|i| Vec3::new((i as f32 * 0.37).sin(), (i as f32 * 0.11).cos(), (i as f32 * 0.73).sin()))
            .collect();
        let c = 1.0 / 3600.0;
        let (mut force, mut diag, mut off) =
            (vec![Vec3::ZERO; n], vec![Mat3::ZERO; n], vec![Mat3::ZERO; mesh.edges().len()]);
        let bending = Bending::MatrixFree(model.material.plate(), Scratch::NONE);
        assemble(&model, bending, &x, &mut force, &mut diag, &mut off);
        let mut precond: Vec<Mat3> =
            diag.iter().enumerate().map(|(i, d)| *d * c + Mat3::scale(model.mass(i))).collect();
        bending.add_diagonal(&mesh, c, &mut precond);
        precond.iter_mut().for_each(|p| *p = p.inverse().unwrap());
        let (flags, normal) = (vec![0u8; n], vec![Vec3::ZERO; n]);
        let density = model.material.density;
        let system = System {
            mesh: &mesh,
            diag: &diag,
            off: &off,
            bending,
            density,
            m_scale: 1.0,
            c,
            precond: &precond,
            flags: &flags,
            normal: &normal,
            gather: None,
        };
        let run = |h: &mut Hierarchy| {
            system.prepare(h);
            let (mut dv, mut r) = (vec![Vec3::ZERO; n], rhs.clone());
            let (mut p, mut q, mut t) = (vec![Vec3::ZERO; n], vec![Vec3::ZERO; n], vec![Vec3::ZERO; n]);
            let stop = Stop { max_iterations: 2000, tolerance: 1e-6, reference: 0.0 };
            system.pcg(&mut dv, &mut r, [&mut p, &mut q, &mut t], h, stop)
        };
        let mut pool = vec![0.0; aggregate::floats(mesh.counts())];
        let multigrid = run(&mut Hierarchy::Graph(Aggregates::new(&mesh, false, &mut pool).unwrap()));
        let jacobi = run(&mut Hierarchy::None);
        println!(
            "disc, {rings} rings, {n} nodes: aggregation {} iterations (converged {}), block Jacobi {} (converged {})",
            multigrid.iterations, multigrid.converged, jacobi.iterations, jacobi.converged
        );
        assert!(multigrid.converged && multigrid.iterations <= 60, "{rings} rings: {multigrid:?}");
        assert!(jacobi.iterations > multigrid.iterations || !jacobi.converged, "{rings} rings: {jacobi:?}");
        iterations.push(multigrid.iterations);
    }
    assert!(iterations[2] <= 3 * iterations[0], "{iterations:?}: 14× the nodes");
}

/// The aggregation hierarchy on discs of 1 to 40 rings and on every shape
/// `weft mesh` makes, twice subdivided (as their fine references are), of
/// translations and rigid: built wherever its storage allows (the rigid
/// one wherever [`aggregate::rigid_floats`] of storage is given),
/// assembled and cycled without a panic, its preconditioned vector finite.
#[test]
fn the_hierarchy_holds_on_every_size() {
    use weft_core::mesh::Mesh;
    use weft_core::physics::aggregate::{self, Aggregates};
    use weft_core::physics::multigrid::{Coarse, FineLevel, FineOperator};
    use weft_host::sim::storage::VecMeshStorage;
    /// The identity as the fine level (the hierarchy's own operators are
    /// what is checked).
    struct Unit;
    impl FineLevel for Unit {
        fn apply(&self, p: &[Vec3], out: &mut [Vec3]) {
            out.copy_from_slice(p);
        }
        fn smooth(&self, omega: f32, r: &[Vec3], z: &mut [Vec3]) {
            z.iter_mut().zip(r).for_each(|(z, r)| *z += *r * omega);
        }
        fn filter(&self, _: &mut [Vec3]) {}
    }
    let mut meshes: Vec<(Vec<Vec3>, Vec<[u16; 3]>)> = (1..=40).map(|r| weft_host::sim::shapes::disc(0.4, r)).collect();
    for shape in [Shape::Disc, Shape::Holed, Shape::Irregular, Shape::Panel] {
        let (x, t) = shape.mesh();
        let fine = obj::subdivide(&obj::ObjMesh { positions: x, triangles: t, ..Default::default() }, 2);
        meshes.push((fine.positions, fine.triangles));
    }
    for ((x, t), rigid) in meshes.iter().flat_map(|m| [(m, false), (m, true)]) {
        let mut ms = VecMeshStorage::for_triangles(x.len(), t.len());
        let mesh = Mesh::from_triangles(x, t, ms.storage()).unwrap();
        let n = mesh.node_count();
        let mut pool = vec![0.0; aggregate::rigid_floats(mesh.counts())];
        let Some(mut agg) = Aggregates::new(&mesh, rigid, &mut pool) else {
            assert!(n <= 2 * aggregate::COARSEST, "{n} nodes without a hierarchy");
            continue;
        };
        assert_eq!(agg.rigid(), rigid, "{n} nodes");
        let (diag, off) =
            (vec![weft_core::math::Mat3::scale(1.0); n], vec![weft_core::math::Mat3::ZERO; mesh.edges().len()]);
        let (flags, normal) = (vec![0u8; n], vec![Vec3::ZERO; n]);
        let mass = |_: usize| 1.0;
        let op =
            FineOperator { diag: &diag, off: &off, c: 1.0, mass: &mass, flags: &flags, normal: &normal, omega: 0.5 };
        Coarse::assemble(&mut agg, &mesh, &op);
        let r: Vec<Vec3> = (0..n).map(|i| Vec3::new(1.0, (i % 7) as f32, -1.0)).collect();
        let (mut z, mut tmp) = (vec![Vec3::ZERO; n], vec![Vec3::ZERO; n]);
        Coarse::cycle(&mut agg, &Unit, &r, &mut z, &mut tmp);
        assert!(z.iter().all(|v| v.is_finite()), "{n} nodes");
    }
}

/// The four mesh scenes shipped, each over its first 60 frames with the
/// aggregation hierarchy: every solve converged, nothing stagnated.
#[test]
fn the_mesh_scenes_solve_every_step() {
    for name in ["tablecloth_disc", "holed_flag", "irregular_drape", "panel_hang"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/{name}.toml"));
        let mut scn = Scenario::load(&path).unwrap();
        scn.time.steps = 60;
        let s = weft_host::sim::run(&scn, false, &mut weft_host::sim::corrector::Plain, |_, _, _| Ok(())).unwrap();
        assert_eq!(
            (s.cg_not_converged, s.cg_stagnated),
            (0, 0),
            "{name}: {} CG iterations a step",
            s.cg_iterations_mean
        );
        assert!(s.cg_iterations_mean < 80.0, "{name}: {} CG iterations a step", s.cg_iterations_mean);
    }
}

/// The tube (`weft mesh tube`, 288 nodes) dropped onto a plane folds as it
/// lands. Its solve converges on every step in tens of iterations: the
/// aggregates' coarse operator keeps a held node's normal stiffness
/// (before, 123.8 iterations a step and 3 steps at the cap), and CG's
/// plateaus are not taken for stagnation (with a window of 25 iterations,
/// 41 of the 60 steps stopped short).
#[test]
fn a_tube_folding_on_a_plane_solves_every_step() {
    let (x, t) = Shape::Tube.mesh();
    let plane = "[time]\ndt = 0.016666668\nsteps = 60\n[[collider]]\nkind = \"plane\"\nnormal = [0.0, 1.0, 0.0]\noffset = 0.0\nfriction = 0.5\n";
    let toml = format!("[cloth]\nmesh = \"m.obj\"\ncenter = [0.0, 0.3, 0.0]\n{plane}");
    let (_, _, _, s) = run_mesh_scene(&toml, &obj::write(&x, &t));
    assert_eq!(s.nodes, 288);
    let what = format!("{} CG iterations a step", s.cg_iterations_mean);
    assert_eq!((s.cg_not_converged, s.cg_stagnated), (0, 0), "{what}");
    assert!(s.cg_iterations_mean <= 60.0, "{what}");
}

/// A curved rest mesh's aggregates move rigidly (`solver.coarse`, `auto`
/// by default: rigid on a curved mesh or a mesh of several pieces): the
/// tube dropped onto a plane takes about half the iterations a step of the
/// aggregates' translations alone (28.6 against 52.8), every step
/// converged. A flat mesh of one piece keeps the translations by default,
/// bit for bit, and takes fewer iterations with the rigid space when its
/// scene asks for it; two flat pieces are rigid by default.
#[test]
fn a_curved_meshs_aggregates_turn_as_well_as_move() {
    let run_obj = |obj: &str, coarse: &str| {
        let toml = format!(
            "[cloth]\nmesh = \"m.obj\"\ncenter = [0.0, 0.3, 0.0]\n[time]\nsteps = 40\n[[collider]]\nkind = \"plane\"\nnormal = [0.0, 1.0, 0.0]\noffset = 0.0\nfriction = 0.5\n[solver]\ncoarse = \"{coarse}\"\n"
        );
        let (_, _, last, s) = run_mesh_scene(&toml, obj);
        assert_eq!((s.cg_not_converged, s.cg_stagnated), (0, 0), "{coarse}: {} a step", s.cg_iterations_mean);
        (last, s.cg_iterations_mean)
    };
    let run = |shape: Shape, coarse: &str| {
        let (x, t) = shape.mesh();
        run_obj(&obj::write(&x, &t), coarse)
    };
    let (tube, moves) = (run(Shape::Tube, "auto"), run(Shape::Tube, "translations"));
    assert!(tube.1 <= 0.7 * moves.1, "tube: {} iterations a step, translations alone {}", tube.1, moves.1);
    assert_eq!(tube.0, run(Shape::Tube, "rigid").0);
    let (flat, flat_moves, flat_rigid) =
        (run(Shape::Irregular, "auto"), run(Shape::Irregular, "translations"), run(Shape::Irregular, "rigid"));
    assert_eq!(flat.0, flat_moves.0);
    assert!(flat_rigid.1 < flat.1, "flat: rigid {} iterations a step, translations {}", flat_rigid.1, flat.1);
    let (x, t) = Shape::Irregular.mesh();
    let apart: Vec<Vec3> = x.iter().map(|p| *p + Vec3::new(1.0, 0.0, 0.0)).collect();
    let both = [x.clone(), apart].concat();
    let tris = [t.clone(), t.iter().map(|tr| tr.map(|i| i + x.len() as u16)).collect()].concat();
    let pieces = obj::write(&both, &tris);
    assert_eq!(run_obj(&pieces, "auto").0, run_obj(&pieces, "rigid").0);
}

/// `[cloth] shape = "…"` is the shape `weft mesh` writes, at any size the
/// shape has; a size it has not is an error that names the shape.
#[test]
fn a_built_in_shape_is_its_mesh_file() {
    for (shape, key) in [(Shape::Disc, "disc"), (Shape::Holed, "holed"), (Shape::Panel, "panel")] {
        let (x, t) = shape.mesh();
        let from_file = scenario(&obj::write(&x, &t), "scale = 1.5\ncenter = [0, 1, 0]").unwrap();
        let named = Scenario::parse(&format!("[cloth]\nshape = \"{key}\"\nscale = 1.5\ncenter = [0, 1, 0]")).unwrap();
        let (a, b) = (from_file.rest_positions(), named.rest_positions());
        assert_eq!(a.len(), b.len(), "{key}");
        assert!(a.iter().zip(&b).all(|(p, q)| (*p - *q).norm() < 1e-6), "{key}");
    }
    let disc = Scenario::parse("[cloth]\nshape = \"disc\"\nresolution = [6, 6]").unwrap();
    assert_eq!(disc.node_count(), 1 + 6 + 12 + 18);
    let err = Scenario::parse("[cloth]\nshape = \"panel\"\nresolution = [8, 8]").unwrap_err();
    assert!(format!("{err:#}").contains("Panel at 8 cells"), "{err:#}");
    let both = scenario(SQUARE, "shape = \"disc\"").unwrap_err();
    assert!(format!("{both:#}").contains("cloth.mesh and cloth.shape"), "{both:#}");
}

/// The mesh families: the tablecloth is the disc, clear of its colliders;
/// the holed sheet hangs by its whole top edge or its two top corners,
/// and its fine reference (the mesh split twice) holds every fine node of
/// that edge, starting with its pins' motion.
#[test]
fn the_mesh_families_hold_their_cloths_as_the_grid_families_do() {
    use weft_host::learn::data::families::{scenario, Family};
    use weft_host::learn::data::generate::fine_scenario;
    let (mut edges, mut corners) = (0, 0);
    for seed in 0..30 {
        let table = scenario(Family::Tablecloth, seed, 16, 10, 1.0 / 60.0);
        assert_eq!(table.node_count(), 217);
        let colliders: Vec<_> = table.colliders.iter().map(|c| c.collider().unwrap()).collect();
        for p in table.rest_positions() {
            assert!(colliders.iter().all(|c| c.distance(p, 0.0).0 >= 0.03), "tablecloth {seed}");
        }
        let holed = scenario(Family::Holed, seed, 16, 10, 1.0 / 60.0);
        let rest = holed.rest_positions();
        let top = rest.iter().map(|p| p.y).fold(f32::MIN, f32::max);
        let pinned = holed.pin_nodes(&holed.pins[0]).unwrap();
        let on_top = rest.iter().filter(|p| p.y > top - 1e-4).count();
        assert!(pinned.iter().all(|&n| rest[n].y > top - 1e-4), "holed {seed}: a pin below the top");
        match pinned.len() {
            2 => corners += 1,
            n => {
                assert_eq!(n, on_top, "holed {seed}");
                edges += 1;
                let (fine, map) = fine_scenario(&holed, 4, 1, Default::default()).unwrap();
                let fine_pinned = fine.pin_nodes(&fine.pins[0]).unwrap();
                assert_eq!(fine_pinned.len(), 4 * (n - 1) + 1, "holed {seed}: the fine top edge");
                let fine_rest = fine.rest_positions();
                assert!(map.iter().zip(&rest).all(|(&f, p)| (fine_rest[f] - *p).norm() < 1e-6));
            }
        }
        // The pinned nodes start at their pins' velocity.
        let mut parts = ModelParts::default();
        let model = build::model(&holed, Default::default(), &mut parts).unwrap();
        let mut storage = VecStateStorage::new(&model, 8 * holed.node_count());
        let state = build::start(&holed, &model, &mut storage).unwrap();
        let v_pin = weft_core::model::PinMotion::from(holed.pins[0].motion).start_velocity();
        for &n in &pinned {
            assert!((state.velocities()[n] - v_pin).norm() < 1e-4, "holed {seed} node {n}");
        }
    }
    assert!(edges > 5 && corners > 5, "{edges} held by the edge, {corners} by the corners");
}

/// The matrix-free bending product with each hinge measured once
/// (`bending::apply_cached`, what a state gives it on other meshes than
/// grids) is the plain product bit for bit, on the disc and on the holed
/// sheet, and without room for every hinge it is the plain product too.
#[test]
fn the_cached_bending_product_is_the_plain_one_bit_for_bit() {
    use std::cell::Cell;
    use weft_core::model::Material;
    use weft_core::physics::bending;
    use weft_core::prelude::Mesh;
    use weft_host::sim::storage::VecMeshStorage;
    for shape in [Shape::Disc, Shape::Holed] {
        let (rest, tris) = shape.mesh();
        let mut ms = VecMeshStorage::for_triangles(rest.len(), tris.len());
        let mesh = Mesh::from_triangles(&rest, &tris, ms.storage()).unwrap();
        let plate = Material::COTTON.plate();
        let p: Vec<Vec3> = rest.iter().map(|q| *q * 1.03 + Vec3::new(0.0, 0.02 * (9.0 * q.x).sin(), 0.0)).collect();
        let bits = |out: &[Vec3]| out.iter().flat_map(|v| [v.x, v.y, v.z].map(f32::to_bits)).collect::<Vec<_>>();
        let mut plain = vec![Vec3::new(0.1, -0.2, 0.3); p.len()];
        bending::apply(&mesh, plate, -0.7, &p, &mut plain);
        for room in [mesh.hinges().len(), mesh.hinges().len() - 1] {
            let cache = vec![Cell::new(Vec3::ZERO); room];
            let mut cached = vec![Vec3::new(0.1, -0.2, 0.3); p.len()];
            bending::apply_cached(&mesh, plate, -0.7, &p, &mut cached, &cache);
            assert_eq!(bits(&cached), bits(&plain), "{shape:?}, room for {room} hinges");
        }
        assert!(
            plain.iter().any(|v| (*v - Vec3::new(0.1, -0.2, 0.3)).norm() > 1e-6),
            "{shape:?}: the product is not zero"
        );
    }
}

/// The bending Hessian's diagonal summed once per plate into a state's
/// room (`bending::add_diagonal_cached`) is the term-by-term diagonal to
/// rounding, is summed again for another plate (and after the room is
/// marked stale, as a new state marks it), and without room is the
/// term-by-term diagonal itself.
#[test]
fn the_cached_bending_diagonal_follows_the_plate() {
    use std::cell::Cell;
    use weft_core::math::Mat3;
    use weft_core::model::Material;
    use weft_core::physics::bending::{self, Plate};
    use weft_core::prelude::Mesh;
    use weft_host::sim::storage::VecMeshStorage;
    let (rest, tris) = Shape::Disc.mesh();
    let mut ms = VecMeshStorage::for_triangles(rest.len(), tris.len());
    let mesh = Mesh::from_triangles(&rest, &tris, ms.storage()).unwrap();
    let n = mesh.node_count();
    let start: Vec<Mat3> = (0..n).map(|i| Mat3::scale(1.0 + i as f32 * 1e-3)).collect();
    let plain = |plate: Plate, scale: f32| {
        let mut out = start.clone();
        bending::add_diagonal(&mesh, plate, scale, &mut out);
        out
    };
    let cached = |plate: Plate, scale: f32, cache: &[Cell<f32>]| {
        let mut out = start.clone();
        bending::add_diagonal_cached(&mesh, plate, scale, &mut out, cache);
        out
    };
    let close = |a: &[Mat3], b: &[Mat3], what: &str| {
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            for (p, q) in
                [x.c[0].x, x.c[1].y, x.c[2].z, x.c[0].y].into_iter().zip([y.c[0].x, y.c[1].y, y.c[2].z, y.c[0].y])
            {
                assert!((p - q).abs() <= 1e-5 * q.abs().max(1.0), "{what}: node {i}: {p} against {q}");
            }
        }
    };
    let cotton = Material::COTTON.plate();
    let stiff = Plate { stiffness: cotton.stiffness * 40.0, poisson: 0.1 };
    let cache = vec![Cell::new(0.0f32); bending::diagonal_floats(n)];
    bending::forget_diagonal(&cache);
    let scale = 3.0e-4;
    let first = cached(cotton, scale, &cache);
    close(&first, &plain(cotton, scale), "cotton");
    // The bending part is not rounding: it moves the diagonal.
    assert!(first.iter().zip(&start).any(|(a, b)| (a.c[0].x - b.c[0].x).abs() > 1e-6 * b.c[0].x));
    // Another scale reuses the sums; another plate sums again.
    close(&cached(cotton, 2.0 * scale, &cache), &plain(cotton, 2.0 * scale), "cotton, twice the scale");
    close(&cached(stiff, scale, &cache), &plain(stiff, scale), "a stiffer plate");
    // Sums left by another mesh's state are not read once marked stale.
    cache.iter().skip(2).for_each(|c| c.set(1.0e3));
    bending::forget_diagonal(&cache);
    close(&cached(stiff, scale, &cache), &plain(stiff, scale), "stale room");
    // Without room for every node: the term-by-term sums.
    let short = vec![Cell::new(0.0f32); bending::diagonal_floats(n) - 1];
    let bits = |m: &[Mat3]| {
        m.iter().flat_map(|b| b.c.iter().flat_map(|v| [v.x, v.y, v.z].map(f32::to_bits))).collect::<Vec<_>>()
    };
    assert_eq!(bits(&cached(cotton, scale, &short)), bits(&plain(cotton, scale)));
}

/// A file with coincident vertices along a seam (two squares that share an
/// edge, each with its own copy of the edge's vertices, as a modelling
/// tool's UV split leaves them): refused without `cloth.weld`, naming the
/// option; with it, the copies merged within the tolerance, groups and
/// faces renumbered, and a face that loses a corner dropped.
#[test]
fn a_seam_of_coincident_vertices_is_welded_when_the_scene_asks() {
    // Two quads side by side; vertices 5 and 6 repeat 2 and 3 (the second
    // within 1e-7), and vertex 7 is 1e-3 away from 4.
    let text = "v 0 0 0\nv 1 0 0\nv 1 0 1\nv 0 0 1\nv 2 0 0\nv 1 0 0\nv 1 0 1.0000001\nv 2.001 0 1\n\
                g left\nf 1 2 3 4\ng right\nf 6 5 8 7\n";
    let err = obj::parse(text).unwrap_err();
    assert_eq!(err, ObjError::Duplicate { a: 1, b: 5 });
    assert!(err.to_string().contains("[cloth] weld"), "{err}");
    let m = obj::parse_with(text, obj::ObjOptions { weld: Some(1e-6), ..Default::default() }).unwrap();
    assert_eq!((m.positions.len(), m.welded, m.collapsed), (6, 2, 0));
    assert_eq!(m.triangles.len(), 4);
    // The right quad now shares the left one's edge 1–2.
    assert_eq!(m.groups["right"], vec![1, 2, 4, 5]);
    // A tolerance wider than the edges (1 m) chains every vertex into one:
    // every triangle loses corners, and no face is left.
    assert_eq!(
        obj::parse_with(text, obj::ObjOptions { weld: Some(1.01), ..Default::default() }),
        Err(ObjError::NoFaces)
    );
    // Through a scene file: the option read, the mesh welded.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("seam.obj"), text).unwrap();
    let scene = |weld: &str| {
        let toml = format!("[cloth]\nmesh = \"seam.obj\"\nscale = 0.1\n{weld}\n[time]\nsteps = 2\n");
        Scenario::parse_in(&toml, dir.path())
    };
    let e = scene("").unwrap_err().to_string();
    assert!(e.contains("same place") && e.contains("weld"), "{e}");
    let s = scene("weld = 1e-6").unwrap();
    assert_eq!(s.node_count(), 6);
    assert_eq!(s.mesh.as_ref().unwrap().welded, 2);
    // Welded, the two quads are one piece; kept apart (a tolerance below
    // the copies' 1e-7) they are two.
    assert_eq!(m.pieces(), 1);
    let apart = obj::parse_with(
        &text.replace("v 1 0 0\nv 1 0 1.0000001", "v 1.5 0 0\nv 1.5 0 1"),
        obj::ObjOptions { weld: Some(1e-6), ..Default::default() },
    )
    .unwrap();
    assert_eq!((apart.welded, apart.pieces()), (0, 2));
}

/// A pattern written with six decimals whose seam copies differ by one in
/// the last place (1e-6, as a modelling tool leaves them) merges with
/// `weld = 1e-6` wherever it lies, though read as `f32` the copies at 3 m
/// are 1.19e-6 apart and at 0.58 m 1.01e-6; copies 2e-6 apart do not.
#[test]
fn seam_copies_one_unit_in_the_files_last_place_apart_weld_at_that_unit() {
    for (a, b, merged) in [(3.126994, "3.126995", 1), (0.579332, "0.579333", 1), (3.126994, "3.126996", 0)] {
        let text = format!("v {a} 0 0\nv {a} 0 1\nv 4 0 0\nv {b} 0 0\nv {b} 0 1\nv 2 0 0\nf 1 2 3\nf 4 6 5\n");
        let m = obj::parse_with(&text, obj::ObjOptions { weld: Some(1e-6), ..Default::default() }).unwrap();
        assert_eq!(m.welded, 2 * merged, "{a} and {b}");
    }
}

/// OBJ text of a tube about the y axis: `rings` rings of `segments`
/// vertices, `radius` and `length` (m), quads split in two; with `seam`,
/// built from two half-cylinder panels, each with its own copy of the
/// seam's vertices (as a garment's front and back), for `cloth.weld`.
fn tube_obj(rings: usize, segments: usize, radius: f32, length: f32, seam: bool) -> String {
    let mut s = String::new();
    let half = segments / 2;
    // Columns of vertices: one per segment, or two panels of half + 1.
    let columns: Vec<usize> = if seam { (0..=half).chain(half..=segments).collect() } else { (0..segments).collect() };
    for j in 0..rings {
        for &c in &columns {
            let a = std::f32::consts::TAU * (c % segments) as f32 / segments as f32;
            let y = length * j as f32 / (rings - 1) as f32;
            s += &format!("v {} {} {}\n", radius * a.cos(), y, radius * a.sin());
        }
    }
    let n = columns.len();
    let at = |j: usize, c: usize| j * n + c + 1;
    for j in 0..rings - 1 {
        for c in 0..n {
            // Around a closed tube the last column joins the first; a
            // panel's last column joins nothing.
            let next = if seam {
                if c == half || c + 1 == n {
                    continue;
                }
                c + 1
            } else {
                (c + 1) % n
            };
            s += &format!("f {} {} {}\n", at(j, c), at(j + 1, c), at(j + 1, next));
            s += &format!("f {} {} {}\n", at(j, c), at(j + 1, next), at(j, next));
        }
    }
    s
}

/// OBJ text of an open half-cylinder panel about the y axis (a sleeve's
/// half, as a garment panel is modelled), `rings` × `segments + 1` vertices.
fn half_tube_obj(rings: usize, segments: usize, radius: f32, length: f32) -> String {
    let mut s = String::new();
    for j in 0..rings {
        for c in 0..=segments {
            let a = std::f32::consts::PI * c as f32 / segments as f32;
            let y = length * j as f32 / (rings - 1) as f32;
            s += &format!("v {} {} {}\n", radius * a.cos(), y, radius * a.sin());
        }
    }
    let at = |j: usize, c: usize| j * (segments + 1) + c + 1;
    for j in 0..rings - 1 {
        for c in 0..segments {
            s += &format!("f {} {} {}\n", at(j, c), at(j + 1, c), at(j + 1, c + 1));
            s += &format!("f {} {} {}\n", at(j, c), at(j + 1, c + 1), at(j, c + 1));
        }
    }
    s
}

/// A curved rest mesh is at rest where it was made: a tube, a tube sewn
/// from two panels (welded seams), an open half-cylinder panel and the
/// skirt (a cone's band), with gravity off, do not move at all over 60
/// frames and the solve stops at its first residual check. Before the
/// rest curvature the panel opened out by 4.3 cm and every one took about
/// a hundred CG iterations a step on the bending's push; before the
/// membrane's strain was measured against the rest placement
/// ([`weft_core::physics::membrane::green_strain_about`]) they moved up to
/// 0.18 µm and took 3–8 iterations a step on the membrane's rounding noise.
#[test]
fn a_curved_rest_mesh_holds_its_shape() {
    let (x, t) = Shape::Skirt.mesh();
    for (name, text, weld) in [
        ("tube", tube_obj(12, 20, 0.045, 0.15, false), ""),
        ("sewn", tube_obj(12, 20, 0.045, 0.15, true), "weld = 1e-6\n"),
        ("panel", half_tube_obj(12, 10, 0.045, 0.15), ""),
        ("skirt", obj::write(&x, &t), ""),
    ] {
        let toml = format!(
            "gravity = [0.0, 0.0, 0.0]\n[cloth]\nmesh = \"m.obj\"\n{weld}[time]\ndt = 0.016666668\nsteps = 60\n"
        );
        let (_, start, last, summary) = run_mesh_scene(&toml, &text);
        let moved = start.iter().zip(&last).map(|(a, b)| (*a - *b).norm()).fold(0.0f32, f32::max);
        let most_cg = summary.frames.iter().map(|f| f.cg_iterations_max).max().unwrap();
        assert!(moved <= 1e-6, "{name}: moved {moved} m");
        assert!(most_cg <= 1, "{name}: {most_cg} CG iterations in a step");
    }
}

/// The tube and the skirt (`weft mesh tube|skirt`) are cloth meshes
/// wound outwards and curved at rest; the flat shapes are not curved, so
/// their step is the flat plate's.
#[test]
fn the_tube_and_skirt_are_curved_cloths_and_the_flat_shapes_are_flat() {
    for shape in [Shape::Disc, Shape::Holed, Shape::Irregular, Shape::Panel, Shape::Tube, Shape::Skirt] {
        let (x, t) = shape.mesh();
        let scn = scenario(&obj::write(&x, &t), "").unwrap();
        let mut parts = ModelParts::default();
        let model = build::model(&scn, Default::default(), &mut parts).unwrap();
        let curved = matches!(shape, Shape::Tube | Shape::Skirt);
        assert_eq!(model.mesh.curved(), curved, "{shape:?}");
    }
    for (shape, axis) in [(Shape::Tube, Vec3::new(1.0, 0.0, 0.0)), (Shape::Skirt, Vec3::new(0.0, 1.0, 0.0))] {
        let (x, t) = shape.mesh();
        for tri in &t {
            let [a, b, c] = tri.map(|n| x[n as usize]);
            let centre = (a + b + c) * (1.0 / 3.0);
            let out = centre - axis * centre.dot(axis);
            assert!((b - a).cross(c - a).dot(out) > 0.0, "{shape:?}");
        }
    }
}

/// A mesh file's unit (`cloth.units`): its coordinates read in it, then
/// scaled; an unknown unit is refused naming the key.
#[test]
fn a_mesh_file_is_read_in_its_units() {
    let rest = |more: &str| scenario(SQUARE, more).map(|s| s.rest_positions());
    let metres = rest("").unwrap();
    for (units, m) in [("m", 1.0f32), ("cm", 0.01), ("mm", 0.001), ("in", 0.0254)] {
        let x = rest(&format!("units = \"{units}\"\nscale = 2.0\n")).unwrap();
        for (a, b) in x.iter().zip(&metres) {
            assert!((*a - *b * (2.0 * m)).norm() < 1e-7, "{units}");
        }
    }
    let e = rest("units = \"furlong\"\n").unwrap_err().to_string();
    assert!(e.contains("cloth.units"), "{e}");
}

/// OBJ text of a flat `n × n`-cell square of side `side` (m) in the x–z
/// plane, cut down the middle into two panels (the seam's vertices shared
/// in `v`), each with its own texture-coordinate island: the left panel's
/// coordinates are its positions over `side` times `uv`, the right
/// panel's are mirrored and moved away (u → 5 − u), as modelling tools
/// lay islands out.
fn panels_obj(n: usize, side: f32, uv: f32) -> String {
    let mut s = String::new();
    let at = |i: usize, j: usize| j * (n + 1) + i + 1;
    for j in 0..=n {
        for i in 0..=n {
            s += &format!("v {} 0 {}\n", side * i as f32 / n as f32, side * j as f32 / n as f32);
        }
    }
    // Left island: (i, j) → (i, j)/n · uv; right island: (5 − i/n · uv, j/n · uv).
    for j in 0..=n {
        for i in 0..=n {
            s += &format!("vt {} {}\n", uv * i as f32 / n as f32, uv * j as f32 / n as f32);
        }
    }
    for j in 0..=n {
        for i in 0..=n {
            s += &format!("vt {} {}\n", 5.0 - uv * i as f32 / n as f32, uv * j as f32 / n as f32);
        }
    }
    let island = (n + 1) * (n + 1);
    for j in 0..n {
        for i in 0..n {
            let t = if i < n / 2 { 0 } else { island };
            let c = [at(i, j), at(i + 1, j), at(i + 1, j + 1), at(i, j + 1)];
            s += &format!("f {}\n", c.map(|v| format!("{v}/{}", v + t)).join(" "));
        }
    }
    s
}

/// Runs the scene `toml` (mesh file `m.obj` holding `obj`) with the plain
/// step: its start, its last positions, and its summary.
fn run_mesh_scene(toml: &str, obj: &str) -> (Scenario, Vec<Vec3>, Vec<Vec3>, weft_host::sim::Summary) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.obj"), obj).unwrap();
    let scn = Scenario::parse_in(toml, dir.path()).unwrap();
    let start = scn.rest_positions();
    let mut last = Vec::new();
    let summary = weft_host::sim::run(&scn, false, &mut weft_host::sim::corrector::Plain, |_, _, st| {
        last = st.positions().to_vec();
        Ok(())
    })
    .unwrap();
    (scn, start, last, summary)
}

/// `rest = "uv"`: the cloth is at rest in its pattern. Two panels whose
/// texture islands lie apart, one mirrored, sewn along a seam and laid
/// out flat as their pattern: with gravity off nothing moves (each hinge
/// is built from its own wing's panel); hung by an edge, its solve takes
/// the iterations of the same cloth at rest as placed. The same file with
/// a pattern 0.8 times the size it is laid out at: the cloth draws itself
/// together to its pattern's size.
#[test]
fn a_cloth_cut_from_texture_coordinates_rests_in_its_pattern() {
    let scene = |extra: &str, steps: u32| {
        format!("gravity = [0.0, 0.0, 0.0]\n[cloth]\nmesh = \"m.obj\"\nrest = \"uv\"\n{extra}[time]\nsteps = {steps}\n")
    };
    let (_, start, last, summary) = run_mesh_scene(&scene("uv_scale = 0.3\n", 60), &panels_obj(8, 0.3, 1.0));
    let moved = start.iter().zip(&last).map(|(a, b)| (*a - *b).norm()).fold(0.0f32, f32::max);
    assert!(moved <= 1e-6, "laid out as cut: moved {moved} m");
    assert_eq!(summary.cg_not_converged, 0);
    let hung = |s: String| {
        s.replace("gravity = [0.0, 0.0, 0.0]\n", "") + "[[pin]]\nbox = { min = [-1, -1, -1], max = [0.01, 1, 1] }\n"
    };
    let (_, _, _, cut) = run_mesh_scene(&hung(scene("uv_scale = 0.3\n", 60)), &panels_obj(8, 0.3, 1.0));
    let (_, _, _, placed) =
        run_mesh_scene(&hung(scene("", 60).replace("rest = \"uv\"\n", "")), &panels_obj(8, 0.3, 1.0));
    let ratio = cut.cg_iterations_mean / placed.cg_iterations_mean;
    assert!(
        (0.95..=1.05).contains(&ratio),
        "hung: {} against {} CG iterations a step",
        cut.cg_iterations_mean,
        placed.cg_iterations_mean
    );

    let (scn, start, last, _) = run_mesh_scene(&scene("uv_scale = 0.24\n", 240), &panels_obj(8, 0.3, 1.0));
    let mut parts = ModelParts::default();
    let model = build::model(&scn, weft_core::model::CoarseGrain::NONE, &mut parts).unwrap();
    let mean = |x: &[Vec3]| {
        let e = model.mesh.edges();
        e.iter().map(|e| (x[e.b as usize] - x[e.a as usize]).norm() / e.rest).sum::<f32>() / e.len() as f32
    };
    let (before, after) = (mean(&start), mean(&last));
    assert!((before - 1.25).abs() < 1e-3, "laid out at 1.25× its pattern: {before}");
    assert!((after - 1.0).abs() < 0.02, "drawn together to its pattern: l/l₀ {after}");
}

/// The pattern is named in its errors: a face without texture
/// coordinates (its line), `uv_scale` without `rest = "uv"`, a pattern
/// on a grid; a fine reference's subdivision keeps the pattern's area.
#[test]
fn a_pattern_names_what_it_lacks_and_subdivides_with_its_mesh() {
    let dir = tempfile::tempdir().unwrap();
    let good = panels_obj(4, 0.3, 1.0);
    let bare = good.replacen("/1 ", " ", 1);
    std::fs::write(dir.path().join("bare.obj"), &bare).unwrap();
    std::fs::write(dir.path().join("good.obj"), &good).unwrap();
    let parse = |text: &str| Scenario::parse_in(text, dir.path()).unwrap_err();
    let e = parse("[cloth]\nmesh = \"bare.obj\"\nrest = \"uv\"\n");
    let line = bare.lines().position(|l| l.starts_with("f ")).unwrap() + 1;
    assert_eq!(e.key, "cloth.mesh");
    assert!(e.to_string().contains(&format!("line {line}")) && e.to_string().contains("rest = \"uv\""), "{e}");
    let e = parse("[cloth]\nmesh = \"good.obj\"\nuv_scale = 0.5\n");
    assert_eq!(e.key, "cloth.uv_scale", "{e}");
    let e = parse("[cloth]\nmesh = \"good.obj\"\nrest = \"uv\"\nuv_scale = -1\n");
    assert_eq!(e.key, "cloth.uv_scale", "{e}");
    let e = parse("[cloth]\nwidth = 1\nheight = 1\nresolution = [4, 4]\nrest = \"uv\"\n");
    assert_eq!(e.key, "cloth.rest", "{e}");
    let m = obj::parse_with(&good, obj::ObjOptions { uv: true, ..Default::default() }).unwrap();
    let area = |m: &obj::ObjMesh| {
        let p = m.pattern(1.0).unwrap();
        p.iter()
            .map(|[a, b, c]| 0.5 * ((b[0] - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (b[1] - a[1])).abs())
            .sum::<f32>()
    };
    let fine = obj::subdivide(&m, 2);
    assert_eq!(fine.triangles.len(), 16 * m.triangles.len());
    assert!((area(&fine) - area(&m)).abs() < 1e-5 && (area(&m) - 1.0).abs() < 1e-5, "{} {}", area(&fine), area(&m));
}
