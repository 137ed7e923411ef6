//! A corrected 16×16 step (coarse physics, dynamic edges, float network,
//! correction) against one fine reference step (61×61, four substeps,
//! self-contact), for the same cloth.
use candle_core::Device;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use weft_core::physics::step;
use weft_core::prelude::*;
use weft_host::families::{self, Family};
use weft_host::gnn::{graph_of, GnnConfig, Trained};
use weft_host::storage::VecStateStorage;

fn bench(c: &mut Criterion) {
    let scn = families::scenario(Family::Drape, 6, 16, 40, 1.0 / 60.0);
    let cfg = GnnConfig { radius: 0.03, ..GnnConfig::default() };
    // Cost does not depend on the weights' values.
    let model_f = Trained::untrained(cfg, &Device::Cpu).unwrap();
    let dev = Device::Cpu;
    let mut g = c.benchmark_group("host_step");
    scn.with_model(|model| {
        let mut ss = VecStateStorage::new(model, cfg.pairs_per_node * 256);
        let mut state = State::new(model, ss.storage()).unwrap();
        for _ in 0..30 {
            step(model, &mut state).unwrap();
        }
        let (x0, v0, t0) = (state.positions().to_vec(), state.velocities().to_vec(), state.time());
        g.bench_function("plain_16x16", |b| {
            b.iter(|| {
                state.set_positions(&x0).unwrap();
                state.set_velocities(&v0).unwrap();
                state.set_time(t0).unwrap();
                black_box(step(model, &mut state).unwrap())
            })
        });
        g.bench_function("corrected_16x16", |b| {
            b.iter(|| {
                state.set_positions(&x0).unwrap();
                state.set_velocities(&v0).unwrap();
                state.set_time(t0).unwrap();
                step(model, &mut state).unwrap();
                let graph = graph_of(model, &mut state, &cfg).unwrap();
                let (dx, dv) = model_f.gnn.correct(&graph, &model_f.meta.normalizer, &dev).unwrap();
                state.apply_correction(&dx, &dv).unwrap();
            })
        });
        Ok(())
    })
    .unwrap();
    let mut fine = scn.refined(4, 4);
    fine.self_contact.enabled = true;
    fine.with_model(|model| {
        let mut ss = VecStateStorage::new(model, fine.max_pairs());
        let mut state = State::new(model, ss.storage()).unwrap();
        for _ in 0..120 {
            step(model, &mut state).unwrap();
        }
        let (x0, v0, t0) = (state.positions().to_vec(), state.velocities().to_vec(), state.time());
        g.bench_function("fine_reference_61x61_x4", |b| {
            b.iter(|| {
                state.set_positions(&x0).unwrap();
                state.set_velocities(&v0).unwrap();
                state.set_time(t0).unwrap();
                for _ in 0..4 {
                    black_box(step(model, &mut state).unwrap());
                }
            })
        });
        Ok(())
    })
    .unwrap();
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
