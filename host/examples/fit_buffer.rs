//! The fit on a training run's own buffer (`STEM.buffer/`, the on-policy
//! samples its last checkpoint held): new networks trained on the earlier
//! refills' samples for a number of Adam steps at a constant learning
//! rate, the share of the teacher's correction predicted on them and on
//! the last refills' (held out), by class — iterations on fixed teacher
//! samples in minutes, before a run of tens.
//!
//! `cargo run --release -p weft-host --example fit_buffer STEM STEPS LR [LATENTxROUNDS [RELATIVE_FLOOR]]`
use weft_host::learn::network::{self, GnnConfig, Graph, ModelMeta, Noise, Trained};
use weft_host::learn::train::checkpoint;
use weft_host::learn::train::fit::{self, train_on_samples, Fit, SampleTraining};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let stem = std::path::PathBuf::from(args.get(1).map_or("run/weft-gnn", |s| s.as_str()));
    let steps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(4000);
    let lr: f64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1e-3);
    let (latent, rounds) = args
        .get(4)
        .and_then(|a| a.split_once('x'))
        .and_then(|(l, r)| Some((l.parse().ok()?, r.parse().ok()?)))
        .unwrap_or((16, 1));
    let floor: f32 = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(0.0);
    let base = Trained::load(&stem, &candle_core::Device::Cpu)?.meta.config;
    let mut ids: Vec<u64> = std::fs::read_dir(checkpoint::buffer_dir(&stem))?
        .flatten()
        .filter_map(|e| e.path().file_stem()?.to_str()?.parse().ok())
        .collect();
    ids.sort();
    let held_from = ids.len() - (ids.len() / 10).max(1);
    let (mut train, mut held) = (Vec::<Graph>::new(), Vec::<Graph>::new());
    for (k, &id) in ids.iter().enumerate() {
        let graphs = checkpoint::load_refill(&stem, id)?;
        if k < held_from {
            train.extend(graphs)
        } else {
            held.extend(graphs)
        }
    }
    let cfg = GnnConfig { latent, rounds, ..base };
    let meta = ModelMeta::new(cfg, network::normalizer(&train), Noise { position: 0.0, velocity: 0.0 });
    let m = Trained::seeded(meta, 1, &candle_core::Device::Cpu)?;
    m.zero_heads()?;
    let t0 = std::time::Instant::now();
    train_on_samples(&m, &train, SampleTraining { relative_floor: floor, ..SampleTraining::constant(steps, 8, lr) })?;
    let secs = t0.elapsed().as_secs_f32();
    // The fit on every sample would take long: every 20th.
    let every = |g: &[Graph]| g.iter().step_by(20).cloned().collect::<Vec<_>>();
    let (a, b) = (fit::measure(&m, &every(&train))?, fit::measure(&m, &every(&held))?);
    println!(
        "{} training samples ({} refills), {} held out; latent {latent} × {rounds}, {steps} steps at {lr}, relative floor {floor}: {secs:.0} s",
        train.len(),
        held_from,
        held.len()
    );
    print!("{}", Fit::table(&a, &b));
    Ok(())
}
