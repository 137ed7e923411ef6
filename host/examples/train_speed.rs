//! Where a training step's time goes, on fixed teacher samples of the
//! coarse 16×16 cloth (the coarse teacher, plain rollouts of a hanging and
//! a draped scene): drawing and batching the samples, the forward pass and
//! loss, the backward pass, and Adam's update (the project's, and candle's
//! `AdamW` for comparison), for batches of 8 graphs; samples a second.
//!
//! `cargo run --release -p weft-host --example train_speed [LATENT] [ROUNDS] [BATCH] [STEPS]`
use std::time::Instant;

use candle_nn::Optimizer;
use weft_host::learn::data::families::{self, Family, Rng};
use weft_host::learn::data::DatasetSpec;
use weft_host::learn::network::teacher::collect;
use weft_host::learn::network::{self, Batch, GnnConfig, Graph, ModelMeta, Noise, Trained};
use weft_host::learn::train::adam::Adam;

fn main() -> anyhow::Result<()> {
    let arg = |k: usize, d: usize| std::env::args().nth(k).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (latent, rounds, batch, steps) = (arg(1, 16), arg(2, 1), arg(3, 8), arg(4, 200));
    let spec = DatasetSpec::default();
    let cfg = GnnConfig { latent, rounds, ..GnnConfig::default() };
    let graphs: Vec<Graph> = [Family::Hang, Family::Drape]
        .iter()
        .flat_map(|&f| collect(&families::scenario(f, 0, spec.coarse, 40, spec.dt), &cfg, None, 40, 1))
        .collect();
    // A refill's rollout as `--teacher coarse` makes it: 200 frames, a
    // sample (and a teacher frame) every second frame.
    let c = Instant::now();
    let refill = collect(&families::scenario(Family::Drape, 1, spec.coarse, 200, spec.dt), &cfg, None, 200, 2);
    let per = c.elapsed().as_secs_f64();
    println!(
        "one rollout of 200 frames: {} samples in {per:.2} s ({:.1} ms a sample)",
        refill.len(),
        1e3 * per / refill.len().max(1) as f64
    );
    let meta = ModelMeta::new(cfg, network::normalizer(&graphs), Noise { position: 0.0, velocity: 0.0 });
    let dev = candle_core::Device::Cpu;
    println!(
        "{} samples of {} nodes; latent {latent} × {rounds}, batch {batch}, {steps} steps",
        graphs.len(),
        graphs[0].nodes.len()
    );
    for candle_adam in [false, true] {
        let m = Trained::seeded(meta.clone(), 1, &dev)?;
        let mut ours = Adam::new(&m.varmap, 1e-3)?;
        let mut theirs = candle_nn::AdamW::new(
            m.varmap.all_vars(),
            candle_nn::ParamsAdamW { lr: 1e-3, weight_decay: 0.0, ..Default::default() },
        )?;
        let mut rng = Rng::new(3);
        let mut t = [0.0f64; 4];
        let total = Instant::now();
        for _ in 0..steps {
            let c = Instant::now();
            let picked: Vec<Graph> =
                (0..batch).map(|_| graphs[(rng.next_u64() % graphs.len() as u64) as usize].clone()).collect();
            let b = Batch::weighted(&picked, &m.meta.normalizer, &dev, 0.0)?;
            t[0] += c.elapsed().as_secs_f64();
            let c = Instant::now();
            let loss = m.gnn.loss(&b)?;
            let _ = loss.to_scalar::<f32>()?;
            t[1] += c.elapsed().as_secs_f64();
            let c = Instant::now();
            let grads = loss.backward()?;
            t[2] += c.elapsed().as_secs_f64();
            let c = Instant::now();
            if candle_adam {
                theirs.step(&grads)?;
            } else {
                ours.step(&grads)?;
            }
            t[3] += c.elapsed().as_secs_f64();
        }
        let secs = total.elapsed().as_secs_f64();
        let ms = |x: f64| 1e3 * x / steps as f64;
        println!(
            "{:<14} {:.1} steps/s, {:.0} samples/s; ms a step: batch {:.2}, forward {:.2}, backward {:.2}, update {:.2}",
            if candle_adam { "candle AdamW" } else { "weft Adam" },
            steps as f64 / secs,
            (steps * batch) as f64 / secs,
            ms(t[0]),
            ms(t[1]),
            ms(t[2]),
            ms(t[3])
        );
    }
    Ok(())
}
