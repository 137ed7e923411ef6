//! A corrected 16×16 step (coarse physics, dynamic edges, network,
//! correction) with the float network (candle) and the int8 network of
//! weft-core, against the plain step and one frame of the fine reference
//! `weft generate` runs (`dataset::fine_scenario`: 61×61, 8 BDF2 steps,
//! self-contact, its CG limit), for the same cloth; and the network's
//! forward pass alone, int8 in weft-core vs float in candle, on the same
//! graph.
use candle_core::Device;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use weft_core::gnn::int8::{self, GraphRef, Scratch, ScratchSizes};
use weft_core::model::CoarseGrain;
use weft_core::physics::step;
use weft_core::prelude::*;
use weft_host::learn::data::families::{self, Family};
use weft_host::learn::network::{graph_of, Batch, GnnConfig, Trained};
use weft_host::sim::build::{self, ModelParts};
use weft_host::sim::storage::VecStateStorage;

/// A state's positions, velocities and time, to restart every iteration
/// from the same point.
struct Snapshot {
    x: Vec<Vec3>,
    v: Vec<Vec3>,
    t: f64,
}

impl Snapshot {
    fn of(state: &State) -> Snapshot {
        Snapshot { x: state.positions().to_vec(), v: state.velocities().to_vec(), t: state.time() }
    }
    fn restore(&self, state: &mut State) {
        state.set_positions(&self.x).unwrap();
        state.set_velocities(&self.v).unwrap();
        state.set_time(self.t).unwrap();
    }
}

/// Runs `f` on `scn`'s model, its membrane grained by `grain`, and a state
/// 30 steps in, with a snapshot of that state to restore.
fn warm(
    scn: &weft_host::sim::scenario::Scenario,
    grain: CoarseGrain,
    pairs: usize,
    f: impl FnOnce(&Model, &mut State, &Snapshot),
) {
    let mut parts = ModelParts::default();
    let model = &build::model(scn, grain, &mut parts).unwrap();
    let mut ss = VecStateStorage::new(model, pairs);
    let mut state = State::new(model, ss.storage()).unwrap();
    for _ in 0..30 {
        step(model, &mut state).unwrap();
    }
    let start = Snapshot::of(&state);
    f(model, &mut state, &start);
}

fn bench(c: &mut Criterion) {
    let scn = families::scenario(Family::Drape, 6, 16, 40, 1.0 / 60.0);
    let cfg = GnnConfig { radius: 0.03, ..GnnConfig::default() };
    // Cost does not depend on the weights' values.
    let model_f = Trained::untrained(cfg, &Device::Cpu).unwrap();
    let net = &weft_weights::NETWORK;
    let pairs = cfg.pairs_per_node * 256;
    let mut g = c.benchmark_group("host_step");
    warm(&scn, CoarseGrain::NONE, pairs, |model, state, start| {
        g.bench_function("plain_16x16", |b| {
            b.iter(|| {
                start.restore(state);
                black_box(step(model, state).unwrap())
            })
        });
    });
    // The corrected steps on the membrane the baked network corrects.
    warm(&scn, net.coarse, pairs, |model, state, start| {
        g.bench_function("grained_16x16", |b| {
            b.iter(|| {
                start.restore(state);
                black_box(step(model, state).unwrap())
            })
        });
        let sizes = ScratchSizes::new(model.mesh.counts(), pairs, net.latent);
        let mut latents = vec![0i8; sizes.latents];
        g.bench_function("corrected_int8_16x16", |b| {
            b.iter(|| {
                start.restore(state);
                let mut scratch = Scratch { latents: &mut latents };
                black_box(weft_core::step::step(model, state, net.check().unwrap(), &mut scratch).unwrap())
            })
        });
        // The float network's corrected step as the rollout loop runs it
        // (`sim::corrected_step`: the core's step with the corrector).
        let mut float = weft_host::learn::network::Float(&model_f);
        g.bench_function("corrected_16x16", |b| {
            b.iter(|| {
                start.restore(state);
                black_box(weft_host::sim::corrected_step(model, state, &mut float).unwrap())
            })
        });
    });
    let spec = weft_host::learn::data::DatasetSpec::default();
    let (fine, _) =
        weft_host::learn::data::fine_scenario(&scn, spec.k, spec.time_substeps, spec.fine_integrator).unwrap();
    let mut parts = ModelParts::default();
    let model = &build::model(&fine, CoarseGrain::NONE, &mut parts).unwrap();
    let mut ss = VecStateStorage::new(model, fine.max_pairs());
    let mut state = State::new(model, ss.storage()).unwrap();
    let per_frame = fine.time.substeps;
    for _ in 0..15 * per_frame {
        step(model, &mut state).unwrap();
    }
    let start = Snapshot::of(&state);
    // A restored state has no step history: the frame's first step is
    // backward Euler, the other seven BDF2.
    g.bench_function("fine_reference_61x61_frame", |b| {
        b.iter(|| {
            start.restore(&mut state);
            for _ in 0..per_frame {
                black_box(step(model, &mut state).unwrap());
            }
        })
    });
    g.finish();
    forward(c, &scn, cfg);
}

/// The network alone on one graph (after a physics step, with its dynamic
/// edges): int8 in weft-core vs float in candle (batch tensors included,
/// as a caller pays them every step).
fn forward(c: &mut Criterion, scn: &weft_host::sim::scenario::Scenario, cfg: GnnConfig) {
    let dev = Device::Cpu;
    let trained =
        Trained::load(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../weights/weft-gnn")), &dev)
            .expect("weights/weft-gnn.{json,safetensors}");
    let net = weft_weights::NETWORK.check().expect("the baked network");
    let mut g = c.benchmark_group("gnn_forward_16x16");
    let mut parts = ModelParts::default();
    let model = &build::model(scn, CoarseGrain::NONE, &mut parts).unwrap();
    let mut ss = VecStateStorage::new(model, cfg.pairs_per_node * 256);
    let mut state = State::new(model, ss.storage()).unwrap();
    for _ in 0..31 {
        step(model, &mut state).unwrap();
    }
    let graph = graph_of(model, &mut state, &cfg).unwrap();
    let n = state.node_count();
    let sizes = ScratchSizes::new(model.mesh.counts(), state.pairs().len(), net.latent);
    let (mut latents, mut sums) = (vec![0i8; sizes.latents], vec![0i32; sizes.sums]);
    let (mut dx, mut dv) = (vec![Vec3::ZERO; n], vec![Vec3::ZERO; n]);
    let gr = GraphRef::of(model, &state);
    println!("graph: {n} nodes, {} directed edges ({} dynamic pairs)", graph.edges.len(), state.pairs().len());
    g.bench_function("int8_core", |b| {
        b.iter(|| {
            int8::forward(net, gr, &mut latents, &mut sums, &mut dx, &mut dv).unwrap();
            black_box(&dx);
        })
    });
    g.bench_function("float_candle", |b| {
        b.iter(|| black_box(trained.gnn.correct(&graph, &trained.meta.normalizer, &dev).unwrap()))
    });
    let batch = Batch::new(std::slice::from_ref(&graph), &trained.meta.normalizer, &dev).unwrap();
    g.bench_function("float_candle_forward_only", |b| b.iter(|| black_box(trained.gnn.forward(&batch).unwrap())));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
