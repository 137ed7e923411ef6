//! The network's input features.
mod common;
use common::*;
use weft_core::gnn::features::{
    edge_count, edge_endpoints, edge_features, node_features, NodeState, Surroundings, EDGE_FEATURES, NODE_FEATURES,
};
use weft_core::prelude::*;

#[test]
fn edge_features_follow_the_method() {
    let grid = Grid::horizontal(4, 3, 0.6, 0.4, 0.0);
    let mut ms = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
    let mut rng = Rng(9);
    let x: Vec<Vec3> = mesh.rest().iter().map(|p| *p * 1.1 + rng.vec3(0.02)).collect();
    let pairs = [[0u16, 10u16]];
    let r = 0.07;
    let ne = edge_count(&mesh, pairs.len());
    assert_eq!(ne, 2 * (mesh.edges().len() + 1));
    let mut ends = vec![[0u16; 2]; ne];
    let mut f = vec![[0.0f32; EDGE_FEATURES]; ne];
    edge_endpoints(&mesh, &pairs, &mut ends);
    edge_features(&mesh, &x, &pairs, r, &mut f);
    for (k, (&[s, t], row)) in ends.iter().zip(&f).enumerate() {
        let (s, t) = (s as usize, t as usize);
        let now = x[t] - x[s];
        let cur = Vec3::new(row[4], row[5], row[6]);
        assert!((cur * row[7] - now).norm() < 1e-5, "edge {k}: current direction × length");
        assert!((row[9] - (row[7] / row[3] - 1.0)).abs() < 1e-6, "edge {k}: strain");
        if k < 2 * mesh.edges().len() {
            let rest = mesh.rest()[t] - mesh.rest()[s];
            assert!((Vec3::new(row[0], row[1], row[2]) * row[3] - rest).norm() < 1e-5, "edge {k}: rest");
            assert_eq!(row[8], 0.0);
        } else {
            // Dynamic: rest direction = current direction, rest length = r.
            assert_eq!(&row[0..3], &row[4..7]);
            assert_eq!(row[3], r);
            assert_eq!(row[8], 1.0);
        }
    }
    // Both directions of each edge.
    assert_eq!(ends[0], [ends[1][1], ends[1][0]]);
}

#[test]
fn node_features_are_translation_invariant() {
    let mut rng = Rng(4);
    let x: Vec<Vec3> = (0..20).map(|_| rng.vec3(1.0)).collect();
    let v: Vec<Vec3> = (0..20).map(|_| rng.vec3(1.0)).collect();
    let v_start: Vec<Vec3> = (0..20).map(|_| rng.vec3(1.0)).collect();
    let v_start_prev: Vec<Vec3> = (0..20).map(|_| rng.vec3(1.0)).collect();
    let pinned: Vec<u8> = (0..20).map(|i| (i % 7 == 0) as u8).collect();
    let shifted: Vec<Vec3> = x.iter().map(|p| *p + Vec3::new(3.0, -2.0, 0.5)).collect();
    // The colliders move with the cloth.
    let shift = Vec3::new(3.0, -2.0, 0.5);
    let plane = |d: Vec3| Collider::new(Shape::Plane { normal: Vec3::new(0.0, 2.0, 0.0), offset: 2.0 * (d.y - 0.9) });
    let sphere = |d: Vec3| Collider::new(Shape::Sphere { center: Vec3::new(0.2, 0.1, 0.0) + d, radius: 0.8 });
    let here = [plane(Vec3::ZERO), sphere(Vec3::ZERO)];
    let there = [plane(shift), sphere(shift)];
    // The wind is the same wherever the cloth is.
    let wind = Wind { gust: 0.5, gust_frequency: 1.0, ..Wind::new(Vec3::new(3.0, 0.2, -1.0)) };
    let (around, moved) = (
        Surroundings::new(&here, Some(&wind), 0.2, 0.3, &Material::COTTON),
        Surroundings::new(&there, Some(&wind), 0.2, 0.3, &Material::COTTON),
    );
    let (mut a, mut b) = (vec![[0.0; NODE_FEATURES]; 20], vec![[0.0; NODE_FEATURES]; 20]);
    node_features([&x, &v, &v_start, &v_start_prev], &pinned, &around, &mut a);
    node_features([&shifted, &v, &v_start, &v_start_prev], &pinned, &moved, &mut b);
    assert!(a.iter().filter(|f| f[10] > 0.0).count() > 3, "the test wants nodes that see a collider");
    for (ra, rb) in a.iter().zip(&b) {
        for k in 0..NODE_FEATURES {
            assert!((ra[k] - rb[k]).abs() < 1e-5);
        }
    }
    assert_eq!(a[7][6], 1.0);
    assert_eq!(a[8][6], 0.0);
    assert_eq!(&a[3][0..3], &v[3].to_array());
    assert_eq!(&a[3][15..18], &(v[3] - v_start[3]).to_array());
    assert_eq!(&a[3][18..21], &(v_start[3] - v_start_prev[3]).to_array());
}

/// The state keeps the velocities its last step and the step before
/// started from: the network's velocity change is the step's, and its
/// history the frame before's, both zero before the first step and after
/// velocities are set, unless the frame before's are given.
#[test]
fn the_state_keeps_the_velocities_its_step_started_from() {
    let grid = Grid::horizontal(4, 4, 0.3, 0.3, 0.0);
    let pins = [Pin::fixed(0, grid.origin)];
    let scene = Scene { pins: &pins, ..Scene::default() };
    with_cloth(&grid, Material::COTTON, scene, StepParams::default(), 8, |model, state| {
        keeps_start_velocities(model, state)
    });
}

fn keeps_start_velocities(model: &Model, state: &mut State) {
    assert_eq!(state.start_velocities(), state.velocities());
    assert_eq!(state.previous_start_velocities(), state.velocities());
    let set: Vec<Vec3> = (0..16).map(|i| Vec3::new(0.01 * i as f32, 0.0, -0.02)).collect();
    state.set_velocities(&set).unwrap();
    assert_eq!(state.start_velocities(), &set[..]);
    physics::step(model, state).unwrap();
    assert_eq!(state.start_velocities(), &set[..]);
    assert_eq!(state.previous_start_velocities(), &set[..], "no history after velocities are set");
    // Gravity pulled the free nodes down over the step.
    let fallen = state.velocities().iter().zip(&set).skip(1).filter(|(v, s)| v.y < s.y - 1e-3).count();
    assert_eq!(fallen, 15);
    let after = state.velocities().to_vec();
    let d = vec![Vec3::new(0.0, 0.1, 0.0); 16];
    state.apply_correction(&d, &d).unwrap();
    assert_eq!(state.start_velocities(), &set[..], "a correction is not a step");
    let corrected = state.velocities().to_vec();
    assert_ne!(corrected, after);
    physics::step(model, state).unwrap();
    assert_eq!(state.start_velocities(), &corrected[..]);
    assert_eq!(state.previous_start_velocities(), &set[..]);
    // A restart given the velocities of the frame before.
    state.set_velocities(&after).unwrap();
    physics::set_velocities_before(model, state, &corrected).unwrap();
    physics::step(model, state).unwrap();
    assert_eq!(state.start_velocities(), &after[..]);
    assert_eq!(state.previous_start_velocities(), &corrected[..]);
    // A recorded state's start velocities restored; bad ones refused,
    // the state's kept.
    state.set_start_velocities(&set).unwrap();
    assert_eq!(state.start_velocities(), &set[..]);
    let mut bad = set.clone();
    bad[3].y = f32::NAN;
    assert!(state.set_start_velocities(&bad).is_err());
    assert!(state.set_start_velocities(&set[..15]).is_err());
    assert_eq!(state.start_velocities(), &set[..]);
    state.set_previous_start_velocities(&after).unwrap();
    assert_eq!(state.previous_start_velocities(), &after[..]);
    assert!(state.set_previous_start_velocities(&bad).is_err());
    assert!(state.set_previous_start_velocities(&set[..15]).is_err());
    assert_eq!(state.previous_start_velocities(), &after[..]);
}

#[test]
fn corrections_skip_pinned_nodes_and_reject_non_finite() {
    let grid = Grid::horizontal(3, 3, 1.0, 1.0, 0.0);
    let mut ms = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
    let pins = [Pin::fixed(4, mesh.rest()[4])];
    let model =
        Model::new(mesh, Material::COTTON, Scene { pins: &pins, ..Scene::default() }, StepParams::default()).unwrap();
    let mut ss = VecStateStorage::new(&model, 8);
    let mut state = State::new(&model, ss.storage()).unwrap();
    let before = state.positions().to_vec();
    let d = vec![Vec3::new(0.0, 0.01, 0.0); 9];
    state.apply_correction(&d, &d).unwrap();
    for (i, (now, was)) in state.positions().iter().zip(&before).enumerate() {
        assert_eq!((*now - *was).norm() == 0.0, i == 4, "node {i}");
    }
    let mut bad = d.clone();
    bad[2].x = f32::NAN;
    let now = state.positions().to_vec();
    assert!(state.apply_correction(&bad, &d).is_err());
    assert_eq!(state.positions(), &now[..]);
}

#[test]
fn a_node_sees_its_nearest_collider_within_the_radius() {
    let r = 0.04;
    let mut ground = Collider::new(Shape::Plane { normal: Vec3::new(0.0, 1.0, 0.0), offset: 0.0 });
    ground.thickness = 0.01;
    let mut ball = Collider::new(Shape::Sphere { center: Vec3::new(1.0, 0.5, 0.0), radius: 0.5 });
    ball.thickness = 0.0;
    ball.velocity = Vec3::new(0.0, 0.0, 1.0);
    let colliders = [ground, ball];
    let material = Material { density: 0.1, stretch: 1000.0, bending: 1e-5, poisson: 0.3, ..Material::COTTON };
    let at = |t: f32| Surroundings::new(&colliders, None, t, r, &material);
    let feature = |s: &Surroundings, p: Vec3| {
        let node = NodeState { x: p, v: Vec3::ZERO, v_start: Vec3::ZERO, v_start_prev: Vec3::ZERO, pinned: false };
        let f = weft_core::gnn::features::node_feature(node, Vec3::ZERO, s);
        (Vec3::new(f[7], f[8], f[9]), f[10], [f[11], f[12], f[13], f[14]])
    };
    let close = |a: Vec3, b: Vec3| (a - b).norm() < 1e-5;
    // On the ground's surface (its thickness above the plane): nearness 1.
    let (n, w, m) = feature(&at(0.0), Vec3::new(-3.0, 0.01, 0.0));
    assert!((w - 1.0).abs() < 1e-5 && close(n, Vec3::new(0.0, 1.0, 0.0)), "{n:?} {w}");
    assert!((m[0] + 1.0).abs() < 1e-6 && (m[1] - 3.0).abs() < 1e-6 && (m[2] + 5.0).abs() < 1e-5 && m[3] == 0.3);
    // Half the radius above it: one half; beyond the radius: nothing.
    let (n, w, _) = feature(&at(0.0), Vec3::new(-3.0, 0.01 + 0.5 * r, 0.0));
    assert!((w - 0.5).abs() < 1e-4 && close(n, Vec3::new(0.0, 0.5, 0.0)), "{n:?} {w}");
    assert_eq!(feature(&at(0.0), Vec3::new(-3.0, 0.01 + 1.5 * r, 0.0)).1, 0.0);
    assert_eq!(feature(&at(0.0), Vec3::new(-3.0, 0.01 + 1.5 * r, 0.0)).0, Vec3::ZERO);
    // Above the ball's top, 0.2 m off the ground: the ball is the nearer,
    // where it is at the state's time (it moves along z).
    let top = Vec3::new(1.0, 1.0 + 0.25 * r, 2.0);
    let (n, w, _) = feature(&at(2.0), top);
    assert!((w - 0.75).abs() < 1e-4 && close(n, Vec3::new(0.0, 0.75, 0.0)), "{n:?} {w}");
    assert_eq!(feature(&at(0.0), top).1, 0.0, "at time 0 the ball is 2 m away");
    // Inside a collider the nearness grows past 1, up to 2.
    assert_eq!(feature(&at(0.0), Vec3::new(-3.0, -1.0, 0.0)).1, 2.0);
}

/// The velocity change the network reads (`v − start_velocities`) leaves
/// out the wind's push: a flat cloth without gravity in a wind square to
/// it is pushed as one body, its velocity change all the wind's, so what
/// the network reads is nothing; without wind the start velocities are
/// the ones the step started from.
#[test]
fn velocity_change_leaves_the_wind_out() {
    let grid = Grid::horizontal(5, 5, 0.4, 0.4, 1.0);
    let mut ms = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
    let wind = Wind::new(Vec3::new(0.0, 6.0, 0.0));
    for windy in [false, true] {
        let scene = Scene { gravity: Vec3::ZERO, wind: windy.then_some(wind), ..Scene::default() };
        let mat = Material { damping_mass: 0.0, damping_stiffness: 0.0, ..Material::COTTON };
        let model = Model::new(mesh, mat, scene, StepParams::default()).unwrap();
        let mut ss = VecStateStorage::new(&model, 0);
        let mut state = State::new(&model, ss.storage()).unwrap();
        let v0 = vec![Vec3::new(0.05, 0.0, -0.02); state.node_count()];
        state.set_velocities(&v0).unwrap();
        weft_core::physics::step(&model, &mut state).unwrap();
        let pushed = state.velocities().iter().zip(&v0).map(|(v, v0)| (*v - *v0).norm()).fold(0f32, f32::max);
        let read =
            state.velocities().iter().zip(state.start_velocities()).map(|(v, s)| (*v - *s).norm()).fold(0f32, f32::max);
        println!("wind {windy}: velocity change {pushed} m/s, read {read} m/s");
        if windy {
            assert!(pushed > 1e-3, "the wind moved the cloth by {pushed} m/s");
            assert!(read < 1e-3 * pushed, "the network reads {read} m/s of the wind's {pushed}");
        } else {
            assert_eq!(state.start_velocities(), &v0[..]);
            assert!(read < 1e-5, "a free cloth without forces changed its velocity by {read}");
        }
    }
}

/// The history a state restarted from a recorded frame reads is the one
/// the run read, in a wind too: the frame before's velocities are given
/// with the wind's push over the step from it
/// (`physics::set_velocities_before`), as the step leaves them. The flat
/// cloth of the test above, pushed as one body, its push halved in a frame
/// as it picks up speed: without that push the restart would read twice
/// what the run reads.
#[test]
fn a_restart_reads_the_history_a_run_reads() {
    let grid = Grid::horizontal(5, 5, 0.4, 0.4, 1.0);
    let mut ms = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
    let scene = Scene { gravity: Vec3::ZERO, wind: Some(Wind::new(Vec3::new(0.0, 6.0, 0.0))), ..Scene::default() };
    let mat = Material { damping_mass: 0.0, damping_stiffness: 0.0, ..Material::COTTON };
    let model = Model::new(mesh, mat, scene, StepParams::default()).unwrap();
    let history = |s: &State| -> Vec<Vec3> {
        s.start_velocities().iter().zip(s.previous_start_velocities()).map(|(a, b)| *a - *b).collect()
    };
    let v0 = vec![Vec3::new(0.05, 0.0, -0.02); 25];
    let mut ss = VecStateStorage::new(&model, 0);
    let mut run = State::new(&model, ss.storage()).unwrap();
    run.set_velocities(&v0).unwrap();
    physics::step(&model, &mut run).unwrap();
    let (x1, v1) = (run.positions().to_vec(), run.velocities().to_vec());
    physics::step(&model, &mut run).unwrap();
    let want = history(&run);

    let mut ss = VecStateStorage::new(&model, 0);
    let mut restarted = State::new(&model, ss.storage()).unwrap();
    restarted.set_positions(&x1).unwrap();
    restarted.set_velocities(&v1).unwrap();
    restarted.set_steps(1).unwrap();
    physics::set_velocities_before(&model, &mut restarted, &v0).unwrap();
    physics::step(&model, &mut restarted).unwrap();
    assert_eq!(restarted.velocities(), run.velocities(), "the same step");
    let got = history(&restarted);
    for (g, w) in got.iter().zip(&want) {
        assert!(w.norm() > 1e-2, "the test wants a push: {w:?}");
        assert!((*g - *w).norm() < 0.05 * w.norm(), "restart {g:?}, run {w:?}");
    }
    // Bad velocities are refused, the state kept.
    let mut bad = v0.clone();
    bad[2].x = f32::INFINITY;
    let kept = restarted.start_velocities().to_vec();
    assert!(physics::set_velocities_before(&model, &mut restarted, &bad).is_err());
    assert!(physics::set_velocities_before(&model, &mut restarted, &v0[..24]).is_err());
    assert_eq!(restarted.start_velocities(), &kept[..]);
}

/// The air's velocity relative to a node: the wind's at the state's time
/// (gusts included) less the node's, and zero without wind.
#[test]
fn a_node_sees_the_air_relative_to_itself() {
    let wind = Wind { gust: 0.5, gust_frequency: 1.0, ..Wind::new(Vec3::new(4.0, 0.0, -2.0)) };
    let v = Vec3::new(0.5, -1.0, 0.25);
    let node = NodeState { x: Vec3::new(0.3, 1.0, 0.0), v, v_start: v, v_start_prev: v, pinned: false };
    let air = |wind: Option<&Wind>, t: f32| {
        let f = weft_core::gnn::features::node_feature(
            node,
            Vec3::ZERO,
            &Surroundings::new(&[], wind, t, 0.1, &Material::COTTON),
        );
        let k = weft_core::gnn::features::WINDLESS_NODE_FEATURES;
        Vec3::new(f[k], f[k + 1], f[k + 2])
    };
    // A quarter of the gust's cycle: the wind at 1.5 times its speed.
    let want = Vec3::new(6.0, 0.0, -3.0) - v;
    assert!((air(Some(&wind), 0.25) - want).norm() < 1e-4, "{:?}", air(Some(&wind), 0.25));
    // At the cycle's start, the mean wind.
    assert!((air(Some(&wind), 0.0) - (Vec3::new(4.0, 0.0, -2.0) - v)).norm() < 1e-4);
    assert_eq!(air(None, 0.25), Vec3::ZERO);
}
