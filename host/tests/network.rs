//! The network's shape and cost.
use candle_core::Device;
use weft_host::learn::network::{GnnConfig, Trained};

fn model(cfg: GnnConfig) -> Trained {
    Trained::untrained(cfg, &Device::Cpu).unwrap()
}

#[test]
fn mac_count_matches_the_weights() {
    for cfg in [GnnConfig::default(), GnnConfig { latent: 24, rounds: 3, ..GnnConfig::default() }] {
        let m = model(cfg);
        let data = m.varmap.data().lock().unwrap();
        let shape = |name: &str| data[name].as_tensor().dims2().unwrap();
        let mlp = |name: &str| {
            let (h, i) = shape(&format!("{name}.l1.weight"));
            let (o, h2) = shape(&format!("{name}.l2.weight"));
            assert_eq!(h, h2);
            (i, h, o)
        };
        let (nodes, edges) = (256usize, 1410usize);
        let mut macs = 0;
        for name in ["node_enc", "head_x", "head_v"] {
            let (i, h, o) = mlp(name);
            macs += nodes * (i * h + h * o);
        }
        let (i, h, o) = mlp("edge_enc");
        macs += edges * (i * h + h * o);
        for r in 0..cfg.rounds {
            // Edge update: the first layer's columns for [e | h_s | h_r];
            // the node parts once per node, the edge part once per edge.
            let (i, h, o) = mlp(&format!("edge_mlp{r}"));
            let l = i / 3;
            macs += edges * (l * h + h * o) + nodes * 2 * l * h;
            let (i, h, o) = mlp(&format!("node_mlp{r}"));
            macs += nodes * (i * h + h * o);
        }
        assert_eq!(cfg.macs(nodes, edges), macs, "{cfg:?}");
    }
}

#[test]
fn default_network_is_small_enough_for_a_microcontroller() {
    let m = model(GnnConfig::default());
    // int8 weights: under 8 KiB.
    assert!(m.parameters() < 8 * 1024, "{} parameters", m.parameters());
}

mod turning {
    use proptest::prelude::*;
    use weft_core::gnn::features::{self, EDGE_FEATURES, NODE_FEATURES};
    use weft_core::math::Vec3;
    use weft_host::learn::network::Graph;

    fn turned(p: Vec3, a: f32) -> Vec3 {
        let (c, s) = (a.cos(), a.sin());
        Vec3::new(c * p.x + s * p.z, p.y, c * p.z - s * p.x)
    }

    /// The graph of the state computed from turned positions, velocities
    /// and rest positions, beside a sphere at `ball` over the ground, in a
    /// wind of `air` (`dv` and `dx` also as the velocities the step and the
    /// step before started from).
    fn graph(x: &[Vec3], v: &[Vec3], rest: &[Vec3], dx: &[Vec3], dv: &[Vec3], [ball, air]: [Vec3; 2]) -> Graph {
        use weft_core::model::{Collider, Material, Shape, Wind};
        let n = x.len();
        let mut nodes = vec![[0.0; NODE_FEATURES]; n];
        let colliders = [
            Collider::new(Shape::Sphere { center: ball, radius: 1.0 }),
            Collider::new(Shape::Plane { normal: Vec3::new(0.0, 1.0, 0.0), offset: -2.0 }),
        ];
        let wind = Wind { gust: 0.3, gust_frequency: 0.7, ..Wind::new(air) };
        let around = features::Surroundings::new(&colliders, Some(&wind), 0.4, 0.5, &Material::COTTON);
        features::node_features([x, v, dv, dx], &vec![0; n], &around, &mut nodes);
        let ends: Vec<[u16; 2]> =
            (0..n as u16).flat_map(|i| [[i, (i + 1) % n as u16], [(i + 2) % n as u16, i]]).collect();
        let edges: Vec<[f32; EDGE_FEATURES]> = ends
            .iter()
            .enumerate()
            .map(|(k, &e)| features::edge_feature((k % 3 != 0).then_some(rest), x, e, 0.03))
            .collect();
        let targets = dx.iter().zip(dv).map(|(a, b)| [a.x, a.y, a.z, b.x, b.y, b.z]).collect();
        Graph { nodes, edges, endpoints: ends, free: vec![1.0; n], targets, ..Graph::default() }
    }

    fn vecs(n: usize) -> impl Strategy<Value = Vec<Vec3>> {
        prop::collection::vec((-2.0f32..2.0, -2.0f32..2.0, -2.0f32..2.0), n)
            .prop_map(|v| v.into_iter().map(|(a, b, c)| Vec3::new(a, b, c)).collect())
    }

    proptest! {
        #[test]
        fn turning_the_scene_turns_the_graph(
            x in vecs(6), v in vecs(6), rest in vecs(6), dx in vecs(6), dv in vecs(6), a in -7.0f32..7.0,
            around in vecs(2),
        ) {
            let t = |p: &[Vec3]| p.iter().map(|q| turned(*q, a)).collect::<Vec<_>>();
            let want = graph(&t(&x), &t(&v), &t(&rest), &t(&dx), &t(&dv), [0, 1].map(|k| turned(around[k], a)));
            let mut got = graph(&x, &v, &rest, &dx, &dv, [around[0], around[1]]);
            got.rotate_about_vertical(a);
            let close = |p: &[f32], q: &[f32]| p.iter().zip(q).all(|(a, b)| (a - b).abs() <= 1e-4 * (1.0 + b.abs()));
            for (g, w) in got.nodes.iter().zip(&want.nodes) {
                prop_assert!(close(g, w), "node {:?} vs {:?}", g, w);
            }
            for (g, w) in got.edges.iter().zip(&want.edges) {
                prop_assert!(close(g, w), "edge {:?} vs {:?}", g, w);
            }
            for (g, w) in got.targets.iter().zip(&want.targets) {
                prop_assert!(close(g, w), "target {:?} vs {:?}", g, w);
            }
        }
    }
}

#[test]
fn relative_weights_even_out_quiet_and_violent_states() {
    use weft_host::learn::network::{Batch, Graph, Normalizer, Stats};
    let unit = |k: usize| Stats { mean: vec![0.0; k], std: vec![1.0; k] };
    let norm = Normalizer {
        node: unit(weft_core::gnn::features::NODE_FEATURES),
        edge: unit(weft_core::gnn::features::EDGE_FEATURES),
        target: Stats { mean: vec![0.5; 6], std: vec![2.0; 6] },
    };
    let graph = |t: f32, free: Vec<f32>| Graph {
        nodes: vec![Default::default(); free.len()],
        targets: vec![[t; 6]; free.len()],
        free,
        ..Graph::default()
    };
    // Mean squared targets (in standard deviations) 0.01 and 1.
    let graphs = [graph(0.2, vec![1.0, 1.0, 0.0]), graph(2.0, vec![1.0, 1.0])];
    let w = |floor: f32| -> Vec<f32> {
        let b = Batch::weighted(&graphs, &norm, &Device::Cpu, floor).unwrap();
        b.weight.flatten_all().unwrap().to_vec1().unwrap()
    };
    assert_eq!(w(0.0), vec![1.0, 1.0, 0.0, 1.0, 1.0]);
    let r = w(0.01);
    assert_eq!(r[2], 0.0, "pinned nodes stay out");
    // 1 / (0.01 + 0.01) against 1 / (1 + 0.01), mean 1 over the free nodes.
    let (quiet, loud) = (1.0 / 0.02, 1.0 / 1.01);
    let scale = 2.0 / (quiet + loud);
    for (got, want) in r.iter().zip([quiet * scale, quiet * scale, 0.0, loud * scale, loud * scale]) {
        assert!((got - want).abs() < 1e-4 * want.max(1.0), "{r:?}");
    }
}

/// A network trained with `--base-inputs` ignores the collider and
/// material features once exported, one trained with `--windless-inputs`
/// the air's velocity, and one trained without `--history-inputs` the
/// history: its float reference (what is quantised) gives the same
/// corrections with or without them; a network that reads every input does
/// not.
#[test]
fn base_input_networks_ignore_the_added_features() {
    use weft_core::gnn::features::{EDGE_FEATURES, HISTORY, NODE_FEATURES, WINDLESS_NODE_FEATURES};
    use weft_host::learn::network::Graph;
    use weft_host::learn::quantise::FloatNet;
    let history = GnnConfig { history_inputs: true, ..GnnConfig::default() };
    let configs = [
        (GnnConfig { base_inputs: true, ..GnnConfig::default() }, 7),
        (GnnConfig { windless_inputs: true, ..GnnConfig::default() }, NODE_FEATURES - 6),
        (GnnConfig::default(), NODE_FEATURES - 3),
        (GnnConfig { windless_inputs: true, ..history }, NODE_FEATURES - 3),
        (history, NODE_FEATURES),
    ];
    for (cfg, reads) in configs {
        let read: Vec<usize> = (0..NODE_FEATURES).filter(|&k| cfg.reads_node_input(k)).collect();
        assert_eq!(read.len(), reads, "{cfg:?}");
        assert_eq!(read.contains(&HISTORY), cfg.history_inputs && !cfg.base_inputs);
        // The features it does not read; the air's for a network that
        // reads them all.
        let varied =
            |k: usize| if reads == NODE_FEATURES { k >= WINDLESS_NODE_FEATURES } else { !cfg.reads_node_input(k) };
        let graph = |extra: f32| Graph {
            nodes: (0..4)
                .map(|i| core::array::from_fn(|k| if varied(k) { extra * k as f32 } else { 0.1 * (i + k) as f32 }))
                .collect(),
            edges: vec![[0.2; EDGE_FEATURES]; 4],
            endpoints: vec![[0, 1], [1, 0], [2, 3], [3, 2]],
            free: vec![1.0; 4],
            ..Graph::default()
        };
        let net = FloatNet::from_trained(&model(cfg)).unwrap();
        let (zero, some) = (net.forward(&graph(0.0), None), net.forward(&graph(0.3), None));
        let ignores = reads < NODE_FEATURES;
        assert_eq!(zero == some, ignores, "{reads} of {NODE_FEATURES} inputs read: the others ignored or not");
    }
}

/// A float model of the format before the history (its node features the
/// first 21 of that layout, the air's last) loads with its air where the
/// air is now and nothing on the history: zero weights, unit statistics.
#[test]
fn models_before_the_history_load_their_air_where_it_is_now() {
    use candle_core::Tensor;
    use weft_core::gnn::features::{HISTORY, NODE_FEATURES};
    use weft_host::learn::network::Stats;
    let dir = tempfile::tempdir().unwrap();
    let mut m = model(GnnConfig { history_inputs: true, ..GnnConfig::default() });
    let k = NODE_FEATURES;
    m.meta.normalizer.node =
        Stats { mean: (0..k).map(|i| i as f32).collect(), std: (0..k).map(|i| 2.0 + i as f32).collect() };
    let new = dir.path().join("new");
    m.save(&new).unwrap();
    // The same model in the format before: its history cut out.
    let kept: Vec<usize> = (0..k).filter(|i| !(HISTORY..HISTORY + 3).contains(i)).collect();
    let mut meta = m.meta.clone();
    meta.format = "weft-gnn-f32-4".into();
    meta.config.history_inputs = false;
    let node = &mut meta.normalizer.node;
    (node.mean, node.std) = (kept.iter().map(|&i| node.mean[i]).collect(), kept.iter().map(|&i| node.std[i]).collect());
    let mut tensors = candle_core::safetensors::load(new.with_extension("safetensors"), &Device::Cpu).unwrap();
    let w = &tensors["node_enc.l1.weight"];
    let index = Tensor::new(kept.iter().map(|&i| i as u32).collect::<Vec<_>>(), &Device::Cpu).unwrap();
    let cut = w.index_select(&index, 1).unwrap();
    tensors.insert("node_enc.l1.weight".into(), cut);
    let old = dir.path().join("old");
    candle_core::safetensors::save(&tensors, old.with_extension("safetensors")).unwrap();
    std::fs::write(old.with_extension("json"), serde_json::to_string(&meta).unwrap()).unwrap();

    let read = Trained::load(&old, &Device::Cpu).unwrap();
    let want_w = m.varmap.data().lock().unwrap()["node_enc.l1.weight"].as_tensor().to_vec2::<f32>().unwrap();
    let got_w = read.varmap.data().lock().unwrap()["node_enc.l1.weight"].as_tensor().to_vec2::<f32>().unwrap();
    let node = &read.meta.normalizer.node;
    for i in 0..k {
        let history = (HISTORY..HISTORY + 3).contains(&i);
        let (mean, std) = if history { (0.0, 1.0) } else { (i as f32, 2.0 + i as f32) };
        assert_eq!((node.mean[i], node.std[i]), (mean, std), "feature {i}");
        for (g, w) in got_w.iter().zip(&want_w) {
            assert_eq!(g[i], if history { 0.0 } else { w[i] }, "feature {i}");
        }
    }
    assert!(want_w.iter().any(|w| w[HISTORY] != 0.0), "the test wants weights on the history to lose");
    assert!(!read.meta.config.history_inputs);
}

/// A network with its heads zeroed corrects nothing: with a target mean of
/// zero, every correction of a real graph is exactly zero, while the same
/// network before has corrections of its own.
#[test]
fn zeroed_heads_correct_nothing() {
    use weft_host::learn::network::teacher::collect;
    let scn =
        weft_host::learn::data::families::scenario(weft_host::learn::data::families::Family::Hang, 0, 6, 2, 1.0 / 60.0);
    let cfg = GnnConfig { rounds: 1, ..GnnConfig::default() };
    let graphs = collect(&scn, &cfg, None, 2, 1);
    let m = model(cfg);
    let any = |m: &Trained| {
        graphs.iter().any(|g| {
            let (dx, dv) = m.correct(g, &Device::Cpu).unwrap();
            dx.iter().chain(&dv).any(|d| d.norm() > 0.0)
        })
    };
    assert!(any(&m), "an untrained network corrects");
    m.zero_heads().unwrap();
    assert!(!any(&m), "a zeroed one does not");
}
