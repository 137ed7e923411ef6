//! One physics step and one proximity search at 16×16, 32×32 and 61×61.
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;
use weft_core::contact::proximity;
use weft_core::physics::step;
use weft_core::prelude::*;
use weft_host::sim::storage::{VecMeshStorage, VecStateStorage};

/// A cloth pinned at two corners, 20 steps into its swing.
fn with_hanging<R>(n: usize, f: impl FnOnce(&Model, &mut State) -> R) -> R {
    let grid = Grid::vertical(n, n, 1.0, 1.0, 0.0);
    let mut ms = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
    let top = grid.ny - 1;
    let pins = [grid.node(0, top), grid.node(n - 1, top)].map(|i| Pin::fixed(i as u16, mesh.rest()[i]));
    let scene = Scene { pins: &pins, ..Scene::default() };
    let model = Model::new(mesh, Material::COTTON, scene, StepParams::default()).unwrap();
    let mut ss = VecStateStorage::new(&model, 8 * n * n);
    let mut state = State::new(&model, ss.storage()).unwrap();
    for _ in 0..20 {
        step(&model, &mut state).unwrap();
    }
    f(&model, &mut state)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("step");
    for n in [16usize, 32, 61] {
        with_hanging(n, |model, state| {
            let (x0, v0) = (state.positions().to_vec(), state.velocities().to_vec());
            g.bench_with_input(BenchmarkId::from_parameter(format!("{n}x{n}")), &n, |b, _| {
                b.iter(|| {
                    state.set_positions(&x0).unwrap();
                    state.set_velocities(&v0).unwrap();
                    black_box(step(model, state).unwrap())
                })
            });
        });
    }
    g.finish();
    let mut g = c.benchmark_group("proximity");
    for n in [16usize, 32, 61] {
        with_hanging(n, |model, state| {
            let x = state.positions().to_vec();
            let r = 1.5 / (n - 1) as f32;
            let mut cells = vec![0u32; 2 * x.len() + 1];
            let mut order = vec![0u16; x.len()];
            let mut out = vec![[0u16; 2]; 16 * x.len()];
            g.bench_with_input(BenchmarkId::from_parameter(format!("{n}x{n}")), &n, |b, _| {
                b.iter(|| black_box(proximity(&model.mesh, &x, r, &mut cells, &mut order, &mut out).unwrap()))
            });
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
