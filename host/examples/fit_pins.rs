//! Whether the hang family's moving pins hold its fit down: a network of
//! latent 16 × 1 trained on the coarse teacher's samples of sixteen hang
//! scenes as the family makes them (70 % of them with pins swinging at up
//! to 1.5 Hz, the rest dragged), and another on the same scenes with
//! their pins held still (the cloth's start velocity zero, its swing
//! kept); each measured on its own samples and on four other scenes
//! made the same way.
//!
//! `cargo run --release -p weft-host --example fit_pins [STEPS]`
use weft_host::learn::data::families::{self, Family};
use weft_host::learn::data::DatasetSpec;
use weft_host::learn::network::teacher::collect;
use weft_host::learn::network::{self, GnnConfig, Graph, ModelMeta, Noise, Trained};
use weft_host::learn::train::fit::{self, train_on_samples, SampleTraining};
use weft_host::sim::scenario::{MotionSpec, Scenario};

fn hang(seed: u64, still: bool) -> Scenario {
    let spec = DatasetSpec::default();
    let mut scn = families::scenario(Family::Hang, seed, spec.coarse, 60, spec.dt);
    if still {
        for p in &mut scn.pins {
            p.motion = MotionSpec::Fixed;
        }
        scn.cloth.velocity = [0.0; 3];
    }
    scn
}

fn samples(seeds: std::ops::Range<u64>, still: bool) -> Vec<Graph> {
    let cfg = GnnConfig::default();
    seeds.flat_map(|s| collect(&hang(s, still), &cfg, None, 60, 2)).collect()
}

fn main() -> anyhow::Result<()> {
    let steps: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(4000);
    println!("pins       training Δx / Δv   held-out Δx / Δv   (16 scenes, 4 held out, {steps} steps of 8 at 3e-3)");
    for still in [false, true] {
        let (train, held) = (samples(0..16, still), samples(100..104, still));
        let meta =
            ModelMeta::new(GnnConfig::default(), network::normalizer(&train), Noise { position: 0.0, velocity: 0.0 });
        let m = Trained::seeded(meta, 1, &candle_core::Device::Cpu)?;
        m.zero_heads()?;
        train_on_samples(&m, &train, SampleTraining::constant(steps, 8, 3e-3))?;
        let (a, b) = (fit::measure(&m, &train)?, fit::measure(&m, &held)?);
        let f = |s: &fit::Fit| {
            let all = s.get("all").cloned().unwrap_or_default();
            format!("{:.3} / {:.3}", all.dx.unwrap_or(f32::NAN), all.dv.unwrap_or(f32::NAN))
        };
        println!("{:<10} {}      {}", if still { "held" } else { "moving" }, f(&a), f(&b));
        println!("{}", fit::Fit::table(&a, &b));
    }
    Ok(())
}
