//! Bad meshes, parameters and states give typed errors and leave the state usable.
mod common;
use common::*;
use weft_core::mesh::MeshStorage;
use weft_core::model::{ParamError, Problem};
use weft_core::physics::state::{StateError, StateStorage};
use weft_core::physics::{step, StepError};
use weft_core::prelude::*;

fn square() -> (Vec<Vec3>, Vec<[u16; 3]>) {
    (
        vec![Vec3::new(0.0, 0.0, 0.0), Vec3::new(1.0, 0.0, 0.0), Vec3::new(1.0, 1.0, 0.0), Vec3::new(0.0, 1.0, 0.0)],
        vec![[0, 1, 2], [0, 2, 3]],
    )
}

#[test]
fn valid_triangle_list_builds_edges_and_hinges() {
    let (p, t) = square();
    let mut st = VecMeshStorage::for_triangles(4, 2);
    let mesh = Mesh::from_triangles(&p, &t, st.storage()).unwrap();
    assert_eq!(mesh.counts(), MeshCounts { nodes: 4, triangles: 2, edges: 5, hinges: 1, grid: None });
    assert!(mesh.has_edge(2, 0) && !mesh.has_edge(1, 3));
    let area: f32 = mesh.node_area().iter().sum();
    assert!((area - 1.0).abs() < 1e-6);
}

#[test]
fn grid_counts_are_exact() {
    for (nx, ny) in [(2, 2), (3, 7), (16, 16), (5, 2)] {
        let grid = Grid::horizontal(nx, ny, 1.0, 1.0, 0.0);
        let mut st = VecMeshStorage::for_triangles(nx * ny, 2 * (nx - 1) * (ny - 1));
        let mesh = Mesh::grid(&grid, st.storage()).unwrap();
        assert_eq!(mesh.counts(), MeshCounts::grid(nx, ny));
    }
}

#[test]
fn bad_meshes_are_typed_errors() {
    let (p, _) = square();
    let mut st = VecMeshStorage::for_triangles(5, 4);
    assert_eq!(
        Mesh::from_triangles(&p, &[[0, 1, 7]], st.storage()).unwrap_err(),
        MeshError::IndexOutOfRange { triangle: 0, node: 7 }
    );
    assert_eq!(
        Mesh::from_triangles(&p, &[[0, 1, 1]], st.storage()).unwrap_err(),
        MeshError::DegenerateTriangle { triangle: 0 }
    );
    let collinear = [Vec3::ZERO, Vec3::new(1.0, 0.0, 0.0), Vec3::new(2.0, 0.0, 0.0)];
    assert_eq!(
        Mesh::from_triangles(&collinear, &[[0, 1, 2]], st.storage()).unwrap_err(),
        MeshError::DegenerateTriangle { triangle: 0 }
    );
    let mut nan = p.clone();
    nan[2].y = f32::NAN;
    assert_eq!(
        Mesh::from_triangles(&nan, &[[0, 1, 2]], st.storage()).unwrap_err(),
        MeshError::NonFinitePosition { node: 2 }
    );
    let fan = [
        Vec3::ZERO,
        Vec3::new(1.0, 0.0, 0.0),
        Vec3::new(0.0, 1.0, 0.0),
        Vec3::new(0.0, -1.0, 0.0),
        Vec3::new(0.0, 0.0, 1.0),
    ];
    assert_eq!(
        Mesh::from_triangles(&fan, &[[0, 1, 2], [0, 1, 3], [0, 1, 4]], st.storage()).unwrap_err(),
        MeshError::NonManifoldEdge { a: 0, b: 1 }
    );
    assert_eq!(Mesh::from_triangles(&p, &[], st.storage()).unwrap_err(), MeshError::Empty);
    let bad_grid = Grid { nx: 1, ..Grid::horizontal(2, 2, 1.0, 1.0, 0.0) };
    assert_eq!(Mesh::grid(&bad_grid, st.storage()).unwrap_err(), MeshError::BadGrid);
    let inf_grid = Grid::horizontal(3, 3, f32::INFINITY, 1.0, 0.0);
    assert_eq!(Mesh::grid(&inf_grid, st.storage()).unwrap_err(), MeshError::BadGrid);
}

/// A pattern that does not fit its triangles, holds a NaN, or makes a
/// triangle flat is a typed error; a good one builds, its edges at the
/// pattern's lengths (a seam's the mean of its two sides).
#[test]
fn bad_patterns_are_typed_errors() {
    let (p, t) = square();
    let mut st = VecMeshStorage::for_triangles(4, 2);
    let cut = |a: [f32; 2], b: [f32; 2], c: [f32; 2]| [a, b, c];
    let good = [cut([0.0, 0.0], [2.0, 0.0], [2.0, 2.0]), cut([0.0, 0.0], [2.0, 2.0], [0.0, 2.2])];
    let inconsistent = |index| MeshError::Inconsistent { part: "pattern", index };
    assert_eq!(Mesh::from_pattern(&p, &t, &good[..1], st.storage()).unwrap_err(), inconsistent(1));
    let mut nan = good;
    nan[1][2][0] = f32::NAN;
    assert_eq!(Mesh::from_pattern(&p, &t, &nan, st.storage()).unwrap_err(), inconsistent(1));
    let mut flat = good;
    flat[0][2] = [4.0, 0.0];
    assert_eq!(
        Mesh::from_pattern(&p, &t, &flat, st.storage()).unwrap_err(),
        MeshError::DegenerateTriangle { triangle: 0 }
    );
    let mesh = Mesh::from_pattern(&p, &t, &good, st.storage()).unwrap();
    let length = |a: u16, b: u16| mesh.edges().iter().find(|e| (e.a, e.b) == (a.min(b), a.max(b))).unwrap().rest;
    // Triangle 0's corners (0, 1, 2) are 2 m apart along its legs; the
    // shared diagonal 0–2 is √8 m in both triangles.
    assert_eq!(length(t[0][0], t[0][1]), 2.0);
    assert!((length(t[0][0], t[0][2]) - 8f32.sqrt()).abs() < 1e-6);
    assert!((mesh.node_area().iter().sum::<f32>() - (2.0 + 2.2)).abs() < 1e-5);
}

#[test]
fn capacity_overflow_is_a_typed_error() {
    let grid = Grid::horizontal(5, 5, 1.0, 1.0, 0.0);
    let c = grid.counts();
    // Each part one slot short.
    for short in 0..7 {
        let mut rest = vec![Vec3::ZERO; c.nodes - (short == 0) as usize];
        let mut area = vec![0.0; c.nodes - (short == 1) as usize];
        let mut tris = vec![Default::default(); c.triangles - (short == 2) as usize];
        let mut edges = vec![Default::default(); c.edges - (short == 3) as usize];
        let mut hinges = vec![Default::default(); c.hinges - (short == 4) as usize];
        let mut edge_start = vec![0; c.nodes - (short == 5) as usize];
        let mut bending = vec![Default::default(); c.triangles - (short == 6) as usize];
        let st = MeshStorage {
            rest: &mut rest,
            node_area: &mut area,
            triangles: &mut tris,
            edges: &mut edges,
            edge_start: &mut edge_start,
            hinges: &mut hinges,
            bending: &mut bending,
        };
        assert!(matches!(Mesh::grid(&grid, st), Err(MeshError::Capacity { .. })), "short part {short}");
    }
    // State storage too small.
    let mut ms = VecMeshStorage::for_counts(c);
    let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
    let model = Model::new(mesh, Material::COTTON, Scene::default(), StepParams::default()).unwrap();
    let sizes = StateSizes::new(c, 0);
    let mut vec3 = vec![Vec3::ZERO; sizes.vec3 - 1];
    let mut mat3 = vec![Default::default(); sizes.mat3];
    let (mut flags, mut cells, mut order) = (vec![0; sizes.flags], vec![0; sizes.cells], vec![0; sizes.order]);
    let mut solver = vec![0.0; sizes.solver];
    let st = StateStorage {
        vec3: &mut vec3,
        mat3: &mut mat3,
        flags: &mut flags,
        cells: &mut cells,
        order: &mut order,
        pairs: &mut [],
        solver: &mut solver,
        history: &mut [],
    };
    assert!(matches!(State::new(&model, st), Err(StateError::Capacity { what: "vec3", .. })));
}

#[test]
fn bad_parameters_name_the_parameter() {
    let grid = Grid::horizontal(3, 3, 1.0, 1.0, 0.0);
    let mut ms = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
    let err = |m: Material, s: Scene, p: StepParams| Model::new(mesh, m, s, p).unwrap_err();
    let d = StepParams::default();
    let e = err(Material { density: f32::NAN, ..Material::COTTON }, Scene::default(), d);
    assert_eq!((e.name, e.problem, e.index), ("material.density", Problem::NotFinite, None));
    assert!(e.value.is_nan());
    // A value out of range is named with its range.
    let e = err(Material { poisson: 0.7, ..Material::COTTON }, Scene::default(), d);
    assert_eq!(e.value as f32, 0.7);
    assert_eq!(e.to_string(), "material.poisson is out of range: 0.7 (allowed: 0 to 0.49)");
    let e = err(Material::COTTON, Scene::default(), StepParams { cg_max_iterations: 4_000_000_000, ..d });
    assert_eq!((e.name, e.value), ("cg_max_iterations", 4e9));
    assert_eq!(e.range(), Some((1.0, StepParams::MAX_CG_ITERATIONS as f32)));
    assert_eq!(err(Material { stretch: -1.0, ..Material::COTTON }, Scene::default(), d).name, "material.stretch");
    assert_eq!(err(Material { poisson: 0.5, ..Material::COTTON }, Scene::default(), d).name, "material.poisson");
    assert_eq!(err(Material::COTTON, Scene::default(), StepParams { dt: f32::INFINITY, ..d }).name, "dt");
    assert_eq!(err(Material::COTTON, Scene::default(), StepParams { dt: 0.0, ..d }).name, "dt");
    assert_eq!(
        err(Material::COTTON, Scene { gravity: Vec3::new(0.0, f32::NAN, 0.0), ..Scene::default() }, d).name,
        "gravity"
    );
    let pins = [Pin::fixed(0, Vec3::ZERO), Pin::fixed(9, Vec3::ZERO)];
    assert_eq!(
        err(Material::COTTON, Scene { pins: &pins, ..Scene::default() }, d),
        ParamError { name: "pin.node", problem: Problem::NoSuchNode, value: 9.0, index: Some(1) }
    );
    let pins = [Pin::fixed(1, Vec3::ZERO), Pin::fixed(1, Vec3::ZERO)];
    assert_eq!(err(Material::COTTON, Scene { pins: &pins, ..Scene::default() }, d).problem, Problem::Duplicate);
    let col = [Collider::new(Shape::Sphere { center: Vec3::ZERO, radius: -1.0 })];
    assert_eq!(err(Material::COTTON, Scene { colliders: &col, ..Scene::default() }, d).name, "collider.radius");
    let col = [Collider::new(Shape::Plane { normal: Vec3::ZERO, offset: 0.0 })];
    assert!(Model::new(mesh, Material::COTTON, Scene { colliders: &col, ..Scene::default() }, d).is_err());
    let sc = StepParams { self_contact: Some(SelfContact { radius: f32::NAN }), ..d };
    assert_eq!(err(Material::COTTON, Scene::default(), sc).name, "self_contact.radius");
}

/// A coarse grain scales the stretch stiffness and the compression factor
/// and nothing else, and with a taut strain gives back the material's own
/// stiffness beyond it; factors outside [0.001, 1] and taut strains outside
/// [1e-4, 1] are named errors.
#[test]
fn coarse_grain_scales_the_membrane_and_refuses_bad_factors() {
    use weft_core::model::CoarseGrain;
    let m = Material { compression: 0.05, ..Material::COTTON };
    assert_eq!(m.coarse_grained(CoarseGrain::NONE), Ok(m));
    let g = m.coarse_grained(CoarseGrain { stretch: 0.4, compression: 0.5, taut: None }).unwrap();
    assert_eq!(g, Material { stretch: 0.4 * m.stretch, compression: 0.5 * m.compression, ..m });
    let t = m.coarse_grained(CoarseGrain { stretch: 0.25, compression: 1.0, taut: Some(0.02) }).unwrap();
    assert_eq!(t, Material { stretch: 0.25 * m.stretch, taut: Some(Taut { strain: 0.02, stiffening: 4.0 }), ..m });
    for (stretch, compression, taut, name) in [
        (0.0, 1.0, None, "coarse_grain.stretch"),
        (f32::NAN, 1.0, None, "coarse_grain.stretch"),
        (1.0, 1.5, None, "coarse_grain.compression"),
        (1.0, -0.1, None, "coarse_grain.compression"),
        (0.5, 1.0, Some(0.0), "coarse_grain.taut"),
        (0.5, 1.0, Some(f32::INFINITY), "coarse_grain.taut"),
    ] {
        let e = m.coarse_grained(CoarseGrain { stretch, compression, taut }).unwrap_err();
        assert_eq!(e.name, name);
    }
    let bad = Material { taut: Some(Taut { strain: 0.01, stiffening: 0.5 }), ..m };
    assert_eq!(bad.validate().unwrap_err().name, "material.taut.stiffening");
}

#[test]
fn non_finite_state_input_is_rejected_and_state_kept() {
    let grid = Grid::horizontal(4, 4, 1.0, 1.0, 0.0);
    with_cloth(&grid, Material::COTTON, Scene::default(), StepParams::default(), 0, |model, state| {
        step(model, state).unwrap();
        let before: Vec<Vec3> = state.positions().to_vec();
        let mut bad = before.clone();
        bad[5].x = f32::NAN;
        assert_eq!(state.set_positions(&bad), Err(StateError::NonFinite { node: 5 }));
        let mut bad_v = vec![Vec3::ZERO; before.len()];
        bad_v[3].z = f32::INFINITY;
        assert_eq!(state.set_velocities(&bad_v), Err(StateError::NonFinite { node: 3 }));
        assert_eq!(state.set_positions(&before[1..]), Err(StateError::Length { expected: 16, got: 15 }));
        assert_eq!(state.positions(), &before[..]);
        assert!(step(model, state).is_ok());
    });
}

#[test]
fn overflowing_step_is_rejected_and_rolled_back() {
    // Finite but absurd positions overflow f32 in the forces: the step is
    // refused and the state stays at the last good step.
    let grid = Grid::horizontal(4, 4, 1.0, 1.0, 0.0);
    with_cloth(&grid, Material::COTTON, Scene::default(), StepParams::default(), 0, |model, state| {
        step(model, state).unwrap();
        let mut x = state.positions().to_vec();
        x[0] = Vec3::new(1e30, -1e30, 1e30);
        state.set_positions(&x).unwrap();
        let t = state.time();
        assert_eq!(step(model, state), Err(StepError::NonFinite));
        assert_eq!(state.positions(), &x[..]);
        assert_eq!(state.time(), t);
        assert_eq!(state.warnings.rejected_steps, 1);
    });
}

#[test]
fn state_for_another_mesh_is_a_typed_error() {
    let small = Grid::horizontal(3, 3, 1.0, 1.0, 0.0);
    let big = Grid::horizontal(4, 4, 1.0, 1.0, 0.0);
    let mut ms = VecMeshStorage::for_counts(big.counts());
    let mesh = Mesh::grid(&big, ms.storage()).unwrap();
    let big_model = Model::new(mesh, Material::COTTON, Scene::default(), StepParams::default()).unwrap();
    with_cloth(&small, Material::COTTON, Scene::default(), StepParams::default(), 0, |_, state| {
        assert_eq!(step(&big_model, state), Err(StepError::MeshMismatch));
    });
}

/// A mesh stored as parts (as the firmware keeps its mesh in flash) comes
/// back as the same mesh; each kind of corruption is a typed error.
#[test]
fn mesh_parts_round_trip_and_corrupt_parts_are_errors() {
    use weft_core::mesh::{MeshError, MeshParts, NO_HINGE};
    let grid = Grid::horizontal(6, 5, 1.0, 0.8, 0.5);
    let mut ms = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
    let p = mesh.parts();
    let back = Mesh::from_parts(p).unwrap();
    assert_eq!(back.counts(), mesh.counts());
    assert_eq!(back.edges(), mesh.edges());
    assert!(back.triangles() == mesh.triangles() && back.hinges() == mesh.hinges());

    let (mut tris, mut edges, mut starts) = (p.triangles.to_vec(), p.edges.to_vec(), p.edge_start.to_vec());
    let (mut hinges, mut bending, mut rest) = (p.hinges.to_vec(), p.bending.to_vec(), p.rest.to_vec());
    let check = |parts: MeshParts, what: &str| {
        let e = Mesh::from_parts(parts).err();
        assert!(e.is_some(), "{what} accepted");
        e.unwrap()
    };
    tris[3].nodes[1] = 99;
    assert!(matches!(check(MeshParts { triangles: &tris, ..p }, "node index"), MeshError::IndexOutOfRange { .. }));
    tris[3] = p.triangles[3];
    tris[4].edges[0] = 9999;
    check(MeshParts { triangles: &tris, ..p }, "edge index");
    edges.swap(0, 1);
    assert_eq!(
        check(MeshParts { edges: &edges, ..p }, "unsorted"),
        MeshError::Inconsistent { part: "edges", index: 1 }
    );
    starts[2] += 1;
    check(MeshParts { edge_start: &starts, ..p }, "edge start");
    hinges[0].nodes[3] = 30;
    check(MeshParts { hinges: &hinges, ..p }, "hinge node");
    bending[1].hinges[0] = NO_HINGE - 1;
    check(MeshParts { bending: &bending, ..p }, "bending hinge");
    rest[5].y = f32::NAN;
    assert_eq!(check(MeshParts { rest: &rest, ..p }, "NaN"), MeshError::NonFinitePosition { node: 5 });
    check(MeshParts { rest: &p.rest[1..], ..p }, "lengths");
    check(MeshParts { grid: Some([5, 6 + 1]), ..p }, "grid size");
    // A mesh of the same nodes with every cell's diagonal one way has other
    // edges than the grid's checkerboard: it cannot pass for the grid (the
    // solver takes a grid's edges in its pattern).
    let one_way: Vec<[u16; 3]> = (0..5 * 4)
        .flat_map(|c| {
            let (i, j) = ((c % 5) as u16, (c / 5) as u16);
            let n = |a: u16, b: u16| b * 6 + a;
            [[n(i, j), n(i + 1, j), n(i + 1, j + 1)], [n(i, j), n(i + 1, j + 1), n(i, j + 1)]]
        })
        .collect();
    let mut os = VecMeshStorage::for_counts(weft_core::mesh::MeshCounts::upper_bound(30, one_way.len()));
    let other = Mesh::from_triangles(p.rest, &one_way, os.storage()).unwrap();
    assert_eq!(other.edges().len(), mesh.edges().len());
    assert_eq!(Mesh::from_parts(MeshParts { grid: Some([6, 5]), ..other.parts() }).err(), Some(MeshError::BadGrid));
    assert!(Mesh::from_parts(MeshParts { grid: None, ..other.parts() }).is_ok());
}
