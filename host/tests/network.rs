//! The network's shape and cost.
use candle_core::Device;
use weft_host::gnn::{GnnConfig, Trained};

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
