//! The fit against the board's cost: new networks of latent 16 / 24 / 32
//! × 1 / 2 rounds trained on the same fixed teacher samples (the coarse
//! teacher, plain rollouts from the starts of one scene of every trained
//! family), the share of the teacher's Δx and Δv they predict on those
//! samples and on another scene of every family, beside the board's
//! instructions a network call (the device cost model).
//!
//! `cargo run --release -p weft-host --example fit_sizes [STEPS [LATENTxROUNDS …]]`
//!
//! `WEFT_FIT_DROP=3,4,5` leaves those node features out (their normaliser
//! maps every value to zero); `WEFT_FIT_SCENES=N` trains on N scenes of
//! every family (seeds 0…N−1; the held-out scenes are seed 100);
//! `WEFT_FIT_BATCH=B` draws B samples a step (8); `WEFT_FIT_LR_END=F`
//! decays the learning rate to F times its start (cosine; 1: constant);
//! `WEFT_FIT_TABLE=1` prints each size's fit by frame class and family;
//! `WEFT_FIT_FLOOR=F` weighs each sample by its relative error with
//! floor F (`weft train --relative-floor`; 0: plain squared error);
//! `WEFT_FIT_GLOBAL=1` puts the cloth's mean velocity change where the
//! position relative to the centroid was (a global input, for the fit
//! only: the network's format does not carry it).
use weft_host::learn::data::families::{self, Family};
use weft_host::learn::data::DatasetSpec;
use weft_host::learn::eval::device::device_per_network;
use weft_host::learn::network::teacher::collect;
use weft_host::learn::network::{self, GnnConfig, Graph, ModelMeta, Noise, Trained};
use weft_host::learn::train::fit::{self, train_on_samples, SampleTraining};

fn samples(seed: u64, frames: u32) -> Vec<Graph> {
    let spec = DatasetSpec::default();
    let cfg = GnnConfig::default();
    Family::ALL
        .iter()
        .filter(|&&f| Some(f) != spec.heldout)
        .flat_map(|&f| collect(&families::scenario(f, seed, spec.coarse, frames, spec.dt), &cfg, None, frames, 2))
        .collect()
}

/// Writes the mean over the free nodes of the step's velocity change
/// (node features 15–17) into every node's position columns (3–5): the
/// whole cloth's motion, which one round of message passing cannot see.
fn global_velocity_change(g: &mut Graph) {
    let free: f32 = g.free.iter().sum::<f32>().max(1.0);
    let mut mean = [0.0f32; 3];
    for (n, f) in g.nodes.iter().zip(&g.free) {
        for (m, dv) in mean.iter_mut().zip(&n[15..18]) {
            *m += f * dv / free;
        }
    }
    for n in &mut g.nodes {
        n[3..6].copy_from_slice(&mean);
    }
}

fn main() -> anyhow::Result<()> {
    let steps: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2000);
    let scenes: u64 = std::env::var("WEFT_FIT_SCENES").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let mut train: Vec<Graph> = (0..scenes).flat_map(|s| samples(s, 60)).collect();
    let mut held = samples(if scenes == 1 { 1 } else { 100 }, 60);
    if std::env::var_os("WEFT_FIT_GLOBAL").is_some() {
        println!("the position's columns hold the cloth's mean velocity change instead");
        train.iter_mut().chain(held.iter_mut()).for_each(global_velocity_change);
    }
    let drop: Vec<usize> =
        std::env::var("WEFT_FIT_DROP").unwrap_or_default().split(',').filter_map(|k| k.trim().parse().ok()).collect();
    println!("node features left out: {drop:?}");
    let env = |k: &str| std::env::var(k).ok().and_then(|s| s.parse::<f64>().ok());
    let (batch, lr_end) = (env("WEFT_FIT_BATCH").map_or(8, |b| b as usize), env("WEFT_FIT_LR_END").unwrap_or(1.0));
    let relative_floor = env("WEFT_FIT_FLOOR").unwrap_or(0.0) as f32;
    println!(
        "{} training samples, {} held-out samples, {steps} Adam steps of {batch} samples at 3e-3 (to {lr_end} of it)",
        train.len(),
        held.len()
    );
    println!("latent × rounds   board M instr.   training Δx / Δv   held-out Δx / Δv   seconds");
    let asked: Vec<(usize, usize)> = std::env::args()
        .skip(2)
        .filter_map(|a| a.split_once('x').and_then(|(l, r)| Some((l.parse().ok()?, r.parse().ok()?))))
        .collect();
    let sizes = if asked.is_empty() { vec![(16, 1), (16, 2), (24, 1), (24, 2), (32, 1), (32, 2)] } else { asked };
    for (latent, rounds) in sizes {
        let cfg = GnnConfig { latent, rounds, ..GnnConfig::default() };
        let mut norm = network::normalizer(&train);
        for &k in &drop {
            norm.node.std[k] = f32::MAX;
        }
        let meta = ModelMeta::new(cfg, norm, Noise { position: 0.0, velocity: 0.0 });
        let m = Trained::seeded(meta, 1, &candle_core::Device::Cpu)?;
        m.zero_heads()?;
        let t0 = std::time::Instant::now();
        train_on_samples(
            &m,
            &train,
            SampleTraining { lr_end, relative_floor, ..SampleTraining::constant(steps, batch, 3e-3) },
        )?;
        let secs = t0.elapsed().as_secs_f32();
        let (a, b) = (fit::measure(&m, &train)?, fit::measure(&m, &held)?);
        let f = |s: &fit::Fit| {
            let all = s.get("all").cloned().unwrap_or_default();
            format!("{:.3} / {:.3}", all.dx.unwrap_or(f32::NAN), all.dv.unwrap_or(f32::NAN))
        };
        println!(
            "{latent:>6} × {rounds}        {:>6.2}           {}      {}      {secs:.0}",
            device_per_network(latent, rounds) / 1e6,
            f(&a),
            f(&b)
        );
        if std::env::var_os("WEFT_FIT_TABLE").is_some() {
            println!("{}", fit::Fit::table(&a, &b));
        }
    }
    Ok(())
}
