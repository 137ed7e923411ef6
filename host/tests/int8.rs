//! The int8 network: the core's integer forward against the float model,
//! the model file format, and a rollout with the baked weights.

use std::path::Path;
use weft_core::math::Vec3;
use weft_host::sim::build::{self, ModelParts};

use candle_core::Device;
use weft_core::gnn::int8::{self, GraphRef, Scratch, ScratchSizes};
use weft_core::physics::step;
use weft_core::prelude::*;
use weft_host::learn::data::families::{self, Family};
use weft_host::learn::data::{self, DatasetSpec};
use weft_host::learn::network::{graph_of, Graph, Trained};
use weft_host::learn::quantise::{self, FloatNet};
use weft_host::sim::storage::VecStateStorage;
use weft_weights::format::{FormatError, NetworkData};

fn trained() -> Trained {
    let stem = Path::new(env!("CARGO_MANIFEST_DIR")).join("../weights/weft-gnn");
    Trained::load(&stem, &Device::Cpu).expect("weights/weft-gnn.{json,safetensors}")
}

fn committed_file() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../weights/weft-gnn.q8")).expect("weights/weft-gnn.q8")
}

/// One recorded input: the graph (host) and the int8 forward's output on
/// the same state.
struct Recorded {
    graph: Graph,
    int8: Vec<[f32; 6]>,
}

/// States of one scenario after plain coarse steps, with their graphs.
struct Trace {
    family: Family,
    seed: u64,
    graphs: Vec<Graph>,
    x: Vec<Vec<Vec3>>,
    v: Vec<Vec<Vec3>>,
    /// The velocities each state's step and the step before started from.
    v_start: Vec<[Vec<Vec3>; 2]>,
}

/// Records `states` graphs (every tenth step) of three test-split
/// scenarios.
fn record(states: usize) -> Vec<Trace> {
    let spec = DatasetSpec::default();
    let cfg = trained().meta.config;
    [(Family::Drape, 6), (Family::Hang, 6), (Family::Fold, 6)]
        .into_iter()
        .map(|(family, seed)| {
            let scn = families::scenario(family, seed, spec.coarse, spec.steps, spec.dt);
            let mut parts = ModelParts::default();
            let model = &build::model(&scn, CoarseGrain::NONE, &mut parts).unwrap();
            {
                let n = model.mesh.node_count();
                let mut ss = VecStateStorage::new(model, cfg.pairs_per_node * n);
                let mut state = State::new(model, ss.storage()).unwrap();
                let (mut graphs, mut xs, mut vs, mut starts) = (vec![], vec![], vec![], vec![]);
                for t in 0..states * 10 {
                    step(model, &mut state).unwrap();
                    if t % 10 == 9 {
                        graphs.push(graph_of(model, &mut state, &cfg).unwrap());
                        xs.push(state.positions().to_vec());
                        vs.push(state.velocities().to_vec());
                        starts.push([state.start_velocities(), state.previous_start_velocities()].map(<[_]>::to_vec));
                    }
                }
                Trace { family, seed, graphs, x: xs, v: vs, v_start: starts }
            }
        })
        .collect()
}

fn run_int8(net: &NetworkData, traces: &[Trace]) -> Vec<Recorded> {
    let spec = DatasetSpec::default();
    let mut out = vec![];
    for Trace { family, seed, graphs, x: xs, v: vs, v_start } in traces {
        let scn = families::scenario(*family, *seed, spec.coarse, spec.steps, spec.dt);
        let mut parts = ModelParts::default();
        let model = &build::model(&scn, CoarseGrain::NONE, &mut parts).unwrap();
        {
            let n = model.mesh.node_count();
            let mut ss = VecStateStorage::new(model, 8 * n);
            let mut state = State::new(model, ss.storage()).unwrap();
            for (((g, x), v), [v0, v_prev]) in graphs.iter().zip(xs).zip(vs).zip(v_start) {
                state.set_positions(x).unwrap();
                state.set_velocities(v).unwrap();
                state.set_start_velocities(v0).unwrap();
                state.set_previous_start_velocities(v_prev).unwrap();
                state.find_pairs(&model.mesh, net.radius, 8 * n).unwrap();
                let sizes = ScratchSizes::new(model.mesh.counts(), state.pairs().len(), net.latent);
                let (mut latents, mut sums) = (vec![0i8; sizes.latents], vec![0i32; sizes.sums]);
                let (mut dx, mut dv) = (vec![Vec3::ZERO; n], vec![Vec3::ZERO; n]);
                let gr = GraphRef::of(model, &state);
                assert_eq!(2 * (model.mesh.edges().len() + state.pairs().len()), g.edges.len());
                net.with_network(|net| int8::forward(net.check()?, gr, &mut latents, &mut sums, &mut dx, &mut dv))
                    .unwrap();
                let int8 = dx.iter().zip(&dv).map(|(a, b)| [a.x, a.y, a.z, b.x, b.y, b.z]).collect();
                out.push(Recorded { graph: g.clone(), int8 });
            }
        }
    }
    out
}

#[test]
fn plain_float_forward_matches_candle() {
    let t = trained();
    let float = FloatNet::from_trained(&t).unwrap();
    let rec = record(2);
    let g = &rec[0].graphs[1];
    let ours = float.forward(g, None);
    let (dx, dv) = t.correct(g, &Device::Cpu).unwrap();
    let mut worst = 0f32;
    for (i, o) in ours.iter().enumerate() {
        if g.free[i] == 0.0 {
            continue;
        }
        let c = [dx[i].x, dx[i].y, dx[i].z, dv[i].x, dv[i].y, dv[i].z];
        for k in 0..6 {
            let scale = t.meta.normalizer.target.std[k];
            worst = worst.max((o[k] - c[k]).abs() / scale);
        }
    }
    assert!(worst < 1e-4, "plain f32 forward differs from candle by {worst} target std");
}

/// The committed float network, `states` recorded states of each scenario
/// of [`record`], and the network's activation ranges calibrated on them.
fn calibrated(states: usize) -> (FloatNet, Vec<Trace>, quantise::Ranges) {
    let float = FloatNet::from_trained(&trained()).unwrap();
    let rec = record(states);
    let graphs: Vec<Graph> = rec.iter().flat_map(|r| r.graphs.iter().cloned()).collect();
    let ranges = quantise::calibrate(&float, &graphs);
    (float, rec, ranges)
}

#[test]
fn int8_forward_error_matches_the_noise_predicted_from_its_scales() {
    // Calibrated on the same inputs, so none saturates (the bound's premise).
    let (float, rec, ranges) = calibrated(4);
    let q = quantise::quantize(&float, &ranges).unwrap();
    let sigma = quantise::noise_estimate(&float, &ranges).unwrap();
    let results = run_int8(&q, &rec);
    let (mut worst, mut err2, mut count) = ([0f32; 6], [0f64; 6], 0usize);
    // Errors and float outputs where the float correction stands above
    // twice the predicted noise.
    let (mut big_err2, mut big_ref2) = ([0f64; 6], [0f64; 6]);
    for r in &results {
        let f = float.forward(&r.graph, None);
        for (a, b) in r.int8.iter().zip(&f) {
            for k in 0..6 {
                let d = (a[k] - b[k]).abs();
                worst[k] = worst[k].max(d);
                err2[k] += (d as f64).powi(2);
                if b[k].abs() > 2.0 * sigma[k] {
                    big_err2[k] += (d as f64).powi(2);
                    big_ref2[k] += (b[k] as f64).powi(2);
                }
            }
            count += 1;
        }
    }
    assert!(big_ref2.iter().any(|&r| r > 0.0), "no float output above its noise: nothing to compare");
    for k in 0..6 {
        let rms = (err2[k] / count as f64).sqrt() as f32;
        let rel = (big_err2[k] / big_ref2[k].max(f64::MIN_POSITIVE)).sqrt();
        println!(
            "output {k}: rms error {rms:.3e} (predicted σ {:.3e}), worst {:.3e}, relative to the float outputs above 2σ {rel:.4}",
            sigma[k], worst[k]
        );
        assert!(rms <= sigma[k], "output {k}: rms error {rms} above the predicted {}", sigma[k]);
        // The scales bound the absolute error (above). Where the float
        // correction stands out of that noise, the int8 one must be nearer
        // to it than no correction is.
        assert!(rel < 1.0, "output {k}: int8 differs from float by {rel} (rms, relative, outputs above 2σ)");
    }
}

/// `weft quantize --clip K`: the hidden and latent scales clipped at `K`
/// times their calibrated RMS. A clip above every channel's largest
/// magnitude changes nothing; a clip of 2 RMS changes the scales of the
/// channels with heavier tails, and the network still checks.
#[test]
fn clipped_scales_engage_only_below_the_largest_magnitude() {
    let (float, _, ranges) = calibrated(2);
    let plain = quantise::quantize(&float, &ranges).unwrap();
    assert_eq!(quantise::quantize_clipped(&float, &ranges, 1e9).unwrap().to_bytes(), plain.to_bytes());
    let clipped = quantise::quantize_clipped(&float, &ranges, 2.0).unwrap();
    assert_ne!(clipped.to_bytes(), plain.to_bytes());
    assert_eq!(clipped.with_network(|n| n.validate()), Ok(()));
    // The inputs keep their scales.
    assert_eq!(clipped.node_in, plain.node_in);
    assert_eq!(clipped.edge_in, plain.edge_in);
}

/// Mean of `int8 − float` per output over every node of `rec`.
fn mean_error(q: &NetworkData, float: &FloatNet, rec: &[Trace]) -> [f64; 6] {
    let (mut sum, mut count) = ([0f64; 6], 0usize);
    for r in run_int8(q, rec) {
        for (a, b) in r.int8.iter().zip(&float.forward(&r.graph, None)) {
            for k in 0..6 {
                sum[k] += (a[k] - b[k]) as f64;
            }
            count += 1;
        }
    }
    sum.map(|s| s / count.max(1) as f64)
}

/// `weft quantize` (without `--no-bias-correction`): each layer's bias
/// takes back the mean that its rounded weights add on the calibration
/// inputs, so the int8 outputs' mean error on those graphs shrinks.
#[test]
fn bias_correction_takes_the_rounded_weights_mean_error_back() {
    let (float, rec, ranges) = calibrated(4);
    let plain = quantise::quantize_clipped(&float, &ranges, 12.0).unwrap();
    let opts = quantise::Options { clip: 12.0, bias_correction: true };
    let corrected = quantise::quantize_with(&float, &ranges, opts).unwrap();
    assert_eq!(corrected.with_network(|n| n.validate()), Ok(()));
    // Only the biases move.
    for ((_, a), (_, b)) in plain.mlps.iter().zip(corrected.mlps.iter()) {
        assert_eq!((&a.l1.weights, &a.l2.weights), (&b.l1.weights, &b.l2.weights));
    }
    let (before, after) = (mean_error(&plain, &float, &rec), mean_error(&corrected, &float, &rec));
    let norm = |m: &[f64; 6]| m.iter().map(|v| v * v).sum::<f64>().sqrt();
    println!("mean int8 − float error per output: {before:?} without, {after:?} with the correction");
    assert!(norm(&before) > 0.0, "no mean error to take back");
    assert!(norm(&after) < 0.7 * norm(&before), "the correction left {after:?} of {before:?}");
}

#[test]
fn model_file_round_trips_and_rejects_damage() {
    let bytes = committed_file();
    let net = NetworkData::from_bytes(&bytes).unwrap();
    let written = net.to_bytes();
    assert_eq!(NetworkData::from_bytes(&written).as_ref(), Ok(&net));
    // A file of the current version and node features is written back byte
    // for byte.
    let current = weft_core::gnn::int8::FORMAT_VERSION.to_le_bytes();
    if bytes[8..12] == current && bytes[12..16] == (weft_core::gnn::features::NODE_FEATURES as u32).to_le_bytes() {
        assert_eq!(written, bytes);
    }
    assert_eq!(net.with_network(|n| n.validate()), Ok(()));

    let mut bad = bytes.clone();
    bad[bytes.len() / 2] ^= 0x40;
    assert!(matches!(NetworkData::from_bytes(&bad), Err(FormatError::Checksum { .. })));
    let mut bad = bytes.clone();
    bad[0] = b'X';
    assert_eq!(NetworkData::from_bytes(&bad), Err(FormatError::BadMagic));
    let mut bad = bytes.clone();
    bad[8] = 99;
    assert!(matches!(NetworkData::from_bytes(&bad), Err(FormatError::Version { found: 99, .. })));
    assert!(NetworkData::from_bytes(&bytes[..bytes.len() / 3]).is_err());

    // A consistent file (valid checksum) whose shapes do not fit the core.
    let mut wrong = net.clone();
    wrong.mlps.head_v.l2.outputs = 2;
    wrong.mlps.head_v.l2.weights.truncate(2 * wrong.mlps.head_v.l2.inputs);
    wrong.mlps.head_v.l2.bias.truncate(2);
    let err = NetworkData::from_bytes(&wrong.to_bytes()).unwrap_err();
    assert!(matches!(err, FormatError::Shape(_)), "{err}");
    assert!(err.to_string().contains("velocity head"), "{err}");
    // A consistent file whose radius is not a number names the radius.
    let mut wrong = net.clone();
    wrong.radius = f32::NAN;
    let err = NetworkData::from_bytes(&wrong.to_bytes()).unwrap_err();
    assert!(err.to_string().contains("radius"), "{err}");
}

/// Files of the earlier layouts (Q31 requantisation) are refused by
/// version, checksum or not, rather than read as something else.
#[test]
fn earlier_versions_are_refused() {
    use weft_core::gnn::int8::FORMAT_VERSION;
    use weft_weights::format::FormatError;
    let file = committed_file();
    for version in [1u32, 2] {
        let mut old = file.clone();
        old[8..12].copy_from_slice(&version.to_le_bytes());
        let n = old.len();
        let crc = crc32fast::hash(&old[..n - 4]);
        old[n - 4..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            NetworkData::from_bytes(&old),
            Err(FormatError::Version { found: version, expected: FORMAT_VERSION })
        );
    }
    assert!(NetworkData::from_bytes(&file).is_ok());
}

/// The coarse grain travels in the file; a file of the version before it
/// (no grain after the radius) reads as the material as it is.
#[test]
fn the_coarse_grain_round_trips_and_older_files_read_without_it() {
    use weft_core::model::CoarseGrain;
    use weft_weights::format::{GRAINLESS_VERSION, TAUTLESS_VERSION};
    let mut net = NetworkData::from_bytes(&committed_file()).unwrap();
    net.coarse = CoarseGrain { stretch: 0.4, compression: 0.25, taut: Some(0.01) };
    assert_eq!(NetworkData::from_bytes(&net.to_bytes()).as_ref(), Ok(&net));
    // An older version: its layout before the history, without the last
    // `drop` of the three f32 after the radius (magic, version, four
    // counts, radius: byte 32 on).
    let body = historyless_body(&net);
    let older = |version: u32, drop: usize| {
        let mut old = body.clone();
        old.drain(32 + 4 * (3 - drop)..44);
        old[8..12].copy_from_slice(&version.to_le_bytes());
        NetworkData::from_bytes(&with_checksum(old)).unwrap()
    };
    let net = without_history(&net);
    let read = older(GRAINLESS_VERSION, 3);
    assert_eq!(read, NetworkData { coarse: CoarseGrain::NONE, ..net.clone() });
    let read = older(TAUTLESS_VERSION, 1);
    assert_eq!(read, NetworkData { coarse: CoarseGrain { taut: None, ..net.coarse }, ..net.clone() });
    let mut net = net;
    // Factors out of bounds are refused by name.
    net.coarse.stretch = 0.0;
    let err = NetworkData::from_bytes(&net.to_bytes()).unwrap_err();
    assert!(err.to_string().contains("coarse grain"), "{err}");
}

/// `net`'s file in the layout of version 5, before the history: 21 node
/// features, the history's inputs and weight columns cut out; without its
/// checksum. Byte 44 on: the node inputs (8 bytes each), edge inputs,
/// outputs, then the node encoder's first layer (inputs, outputs, flag,
/// weights row by row).
fn historyless_body(net: &NetworkData) -> Vec<u8> {
    use weft_core::gnn::features::{EDGE_FEATURES, HISTORY, NODE_FEATURES};
    use weft_weights::format::HISTORYLESS_VERSION;
    let bytes = net.to_bytes();
    let kept = |k: &usize| !(HISTORY..HISTORY + 3).contains(k);
    let mut old = bytes[..44].to_vec();
    old[8..12].copy_from_slice(&HISTORYLESS_VERSION.to_le_bytes());
    old[12..16].copy_from_slice(&(NODE_FEATURES as u32 - 3).to_le_bytes());
    for k in (0..NODE_FEATURES).filter(kept) {
        old.extend_from_slice(&bytes[44 + 8 * k..52 + 8 * k]);
    }
    let l1_at = 44 + 8 * (NODE_FEATURES + EDGE_FEATURES + 6);
    old.extend_from_slice(&bytes[44 + 8 * NODE_FEATURES..l1_at]);
    old.extend_from_slice(&(NODE_FEATURES as u32 - 3).to_le_bytes());
    old.extend_from_slice(&bytes[l1_at + 4..l1_at + 9]);
    let outputs = net.mlps.node_enc.l1.outputs;
    for row in bytes[l1_at + 9..].chunks(NODE_FEATURES).take(outputs) {
        old.extend(row.iter().enumerate().filter(|(k, _)| kept(k)).map(|(_, w)| w));
    }
    old.extend_from_slice(&bytes[l1_at + 9 + NODE_FEATURES * outputs..bytes.len() - 4]);
    old
}

/// `net` with nothing on the history: what its file of the layout before
/// the history reads as.
fn without_history(net: &NetworkData) -> NetworkData {
    use weft_core::gnn::features::{HISTORY, NODE_FEATURES};
    use weft_core::gnn::int8::Input;
    use weft_weights::format::LinearData;
    let mut want = net.clone();
    for k in HISTORY..HISTORY + 3 {
        want.node_in[k] = Input { offset: 0.0, gain: 0.0 };
    }
    let l1 = &want.mlps.node_enc.l1;
    let mut w = l1.weights.clone();
    for row in w.chunks_mut(NODE_FEATURES) {
        row[HISTORY..HISTORY + 3].fill(0);
    }
    want.mlps.node_enc.l1 = LinearData::new(l1.inputs, l1.outputs, w, l1.bias.clone(), l1.shift.clone());
    want
}

fn with_checksum(mut body: Vec<u8>) -> Vec<u8> {
    let crc = crc32fast::hash(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

/// A file of the version before the history (its node features the first
/// 21 of that layout, the air's last) reads with the air's columns where
/// the air is now and zero weights on the history.
#[test]
fn files_before_the_history_read_their_air_where_it_is_now() {
    use weft_core::gnn::int8::Input;
    use weft_weights::format::LinearData;
    let mut net = NetworkData::from_bytes(&committed_file()).unwrap();
    // Every node column its own input scale and non-zero weights.
    net.node_in = core::array::from_fn(|k| Input { offset: 0.01 * k as f32, gain: 1.0 + k as f32 });
    let l1 = &net.mlps.node_enc.l1;
    let w: Vec<i8> = (0..l1.weights.len()).map(|i| ((i % 200) as i32 - 100) as i8 | 1).collect();
    net.mlps.node_enc.l1 = LinearData::new(l1.inputs, l1.outputs, w, l1.bias.clone(), l1.shift.clone());
    let read = NetworkData::from_bytes(&with_checksum(historyless_body(&net))).unwrap();
    assert_eq!(read, without_history(&net));
    assert_ne!(read, net, "the test wants weights on the history to lose");
}

#[test]
fn baked_network_is_the_committed_file() {
    let net = NetworkData::from_bytes(&committed_file()).unwrap();
    let baked = &weft_weights::NETWORK;
    net.with_network(|n| {
        assert_eq!(n.latent, baked.latent);
        assert_eq!(n.radius, baked.radius);
        assert_eq!(n.coarse, baked.coarse);
        assert_eq!(n.mlps.node_enc.l1.weights, baked.mlps.node_enc.l1.weights);
        assert_eq!(n.mlps.head_v.l2.bias, baked.mlps.head_v.l2.bias);
        assert_eq!(n.rounds(), baked.rounds());
        for (a, b) in n.mlps.edge_mlp.iter().zip(baked.mlps.edge_mlp.iter()) {
            assert_eq!((a.residual, a.l2.bias), (b.residual, b.l2.bias));
        }
        assert_eq!(n.out, baked.out);
    });
}

/// Positions of 200 frames of a test-split drape (drape-13), plain or
/// corrected by the baked int8 network; every state must stay finite.
fn drape_rollout(corrected: bool) -> Vec<Vec<Vec3>> {
    let spec = DatasetSpec::default();
    assert_eq!(data::split_of(&spec, Family::Drape, 13), "test");
    let scn = families::scenario(Family::Drape, 13, spec.coarse, spec.steps, spec.dt);
    let net = &weft_weights::NETWORK;
    let mut parts = ModelParts::default();
    let model = &build::model(&scn, CoarseGrain::NONE, &mut parts).unwrap();
    {
        let n = model.mesh.node_count();
        let mut ss = VecStateStorage::new(model, 8 * n);
        let mut state = build::start(&scn, model, &mut ss).unwrap();
        let sizes = ScratchSizes::new(model.mesh.counts(), 8 * n, net.latent);
        let mut latents = vec![0i8; sizes.latents];
        let mut frames = Vec::new();
        for _ in 0..spec.steps {
            if corrected {
                let mut scratch = Scratch { latents: &mut latents };
                weft_core::step::step(model, &mut state, net.check().unwrap(), &mut scratch).unwrap();
            } else {
                step(model, &mut state).unwrap();
            }
            assert!(state.positions().iter().all(|p| p.is_finite()));
            frames.push(state.positions().to_vec());
        }
        frames
    }
}

/// 200 corrected steps of a test-split drape (drape-13): the float network
/// (`weft_host::learn::eval`) and the baked int8 network (`weft_core::step::step`,
/// as on the device) stay finite and within 25 % of the plain coarse
/// cloth's error, so a correction that diverges or an int8 path that
/// strays from the float one fails here. Measured with the committed
/// weights (velocity-only, latent 16 × 1, gain 0.5): plain 0.0210 m, float
/// 0.0179 m, int8 0.0178 m. Whether the correction beats
/// the plain cloth is measured over whole splits and horizons by
/// `weft eval`, not by one scenario.
#[test]
fn corrected_rollouts_on_a_test_scenario() {
    let spec = DatasetSpec::default();
    let scn = families::scenario(Family::Drape, 13, spec.coarse, spec.steps, spec.dt);
    let (fine, v, secs) = data::fine_reference(&scn, spec.k, spec.time_substeps, spec.fine_integrator).unwrap();
    let mean_rmse = |frames: Vec<Vec<Vec3>>| -> f32 {
        let per_frame: Vec<f32> =
            frames.iter().zip(&fine[1..]).map(|(a, b)| weft_host::learn::data::metrics::rmse(a, b)).collect();
        weft_host::learn::data::metrics::mean(&per_frame)
    };
    let (plain, int8) = (mean_rmse(drape_rollout(false)), mean_rmse(drape_rollout(true)));
    let trained = trained();
    let traj = data::Trajectory {
        scenario: scn,
        family: Family::Drape,
        seed: 13,
        split: "test".into(),
        x: fine.clone(),
        v,
        fine_seconds: secs,
    };
    let float = weft_host::learn::network::corrected_error(&traj, &trained, spec.steps as usize).unwrap();
    println!(
        "drape-13: mean position RMSE plain {plain:.4} m, float corrected {float:.4} m, int8 corrected {int8:.4} m"
    );
    assert!(float < 1.25 * plain, "float corrected {float} m drifts from the plain cloth's {plain} m");
    assert!(int8 < 1.25 * plain, "int8 {int8} m drifts from the plain cloth's {plain} m");
}

/// A layer's weight scale under requantisation by shifts
/// (`quantise::shift_scale`): its activation's scale over a power of two,
/// never below the best scale (no weight saturates) and under twice it
/// (the weights keep at least half the int8 range), except where the
/// shift is at its bounds.
#[test]
fn shift_scales_keep_the_weights_within_one_bit() {
    let mut rng = families::Rng::new(0x2545_f491);
    let mut next = || rng.range(0.0, 1.0) as f64;
    let mut interior = 0;
    for _ in 0..10_000 {
        let best = 10f64.powf(-8.0 + 8.0 * next());
        let out = best * 2f64.powf(-2.0 + 36.0 * next());
        let (s, k) = quantise::shift_scale(best, out);
        assert!(k <= weft_core::gnn::int8::MAX_SHIFT);
        assert_eq!(s, out / 2f64.powi(k as i32), "{best} {out}");
        if k == 0 && out < best {
            continue; // the output's range is below a single term's: saturates
        }
        assert!(s >= best, "scale {s} below the best {best} (shift {k})");
        if k < weft_core::gnn::int8::MAX_SHIFT {
            assert!(s < 2.0 * best, "scale {s} at or over twice the best {best} (shift {k})");
            interior += 1;
        }
    }
    assert!(interior > 5_000, "{interior} draws inside the shift's range");
}

/// The committed network corrects velocities only: its position head's
/// outputs have scale and offset 0, so the forward does not run it, its
/// multiply-accumulates are not counted, and every position correction is
/// +0 exactly (what `acc · 0 + 0` gives for any accumulator).
#[test]
fn a_velocity_only_network_skips_its_position_head() {
    use weft_core::gnn::int8::{forward_macs, Part};
    let net = &weft_weights::NETWORK;
    assert!(trained().meta.config.velocity_only);
    assert!(!net.head_runs(0) && net.head_runs(1));
    let (n, e) = (256, 2820);
    let skipped = n * Part::PositionHead.macs(net.latent);
    assert_eq!(net.macs(n, e) + skipped, forward_macs(net.latent, net.rounds(), n, e));
    let data = NetworkData::from_bytes(&committed_file()).unwrap();
    let recorded = run_int8(&data, &record(1));
    assert!(!recorded.is_empty());
    for r in &recorded {
        assert!(r.int8.iter().all(|c| c[..3].iter().all(|d| d.to_bits() == 0)));
        assert!(r.int8.iter().any(|c| c[3..].iter().any(|d| *d != 0.0)));
    }
}
