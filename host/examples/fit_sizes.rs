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
//! `WEFT_FIT_BATCH=B` draws B samples a step (8); `WEFT_FIT_LR=L` starts
//! the learning rate at L (3e-3); `WEFT_FIT_LR_END=F`
//! decays the learning rate to F times its start (cosine; 1: constant);
//! `WEFT_FIT_TABLE=1` prints each size's fit by frame class and family;
//! `WEFT_FIT_FLOOR=F` weighs each sample by its relative error with
//! floor F (`weft train --relative-floor`; 0: plain squared error);
//! `WEFT_FIT_FAMILY=NAME` trains and holds out that family's scenes only;
//! `WEFT_FIT_FIELD=1` gives the networks the field head
//! (`GnnConfig::field_head`: a correction smooth over the whole cloth);
//! `WEFT_FIT_SMOOTH=1` also prints how much of the teacher's correction,
//! and of what the network misses of it, a field smooth over the whole
//! cloth carries (per sample, least squares in the node's position
//! relative to the centroid: a constant, affine or quadratic field);
//! `WEFT_FIT_VELOCITY=1` trains velocity-only networks (`--velocity-only`);
//! `WEFT_FIT_FRAMES=F` collects the training samples over F frames of
//! each scene (60; the held-out ones stay at 60);
//! `WEFT_FIT_HELD=val` holds out the samples `weft train --teacher
//! coarse` validates its fit on (the validation split's scenes);
//! `WEFT_FIT_TEACHER=be-4` collects the samples with the coarse teacher's
//! backward Euler at dt/4 (`--teacher-step`) instead of BDF2 at dt/8;
//! `WEFT_FIT_RESIDUAL=1` gives the networks the base step's residual
//! (`GnnConfig::residual_inputs`), `WEFT_FIT_RESIDUAL=newtonK` the Newton
//! correction it implies by K preconditioned CG iterations
//! (`GnnConfig::newton_inputs`; `newton`: 1 000);
//! `WEFT_FIT_GLOBAL=1` puts the cloth's mean velocity change where the
//! position relative to the centroid was (a global input, for the fit
//! only: the network's format does not carry it).
use weft_host::learn::data::families::{self, Family};
use weft_host::learn::data::DatasetSpec;
use weft_host::learn::eval::device::device_per_network;
use weft_host::learn::network::teacher::collect;
use weft_host::learn::network::{self, GnnConfig, Graph, ModelMeta, Noise, TeacherStep, Trained};
use weft_host::learn::train::fit::{self, train_on_samples, SampleTraining};

fn samples(seed: u64, frames: u32) -> Vec<Graph> {
    let spec = DatasetSpec::default();
    let cfg = teacher_config();
    let only = std::env::var("WEFT_FIT_FAMILY").ok();
    Family::ALL
        .iter()
        .filter(|&&f| Some(f) != spec.heldout)
        .filter(|f| only.as_deref().is_none_or(|o| o == f.name()))
        .flat_map(|&f| collect(&families::scenario(f, seed, spec.coarse, frames, spec.dt), &cfg, None, frames, 2))
        .collect()
}

/// The configuration the samples are collected with: the default, with
/// `WEFT_FIT_TEACHER=be-4` the coarse teacher's backward Euler at dt/4.
fn teacher_config() -> GnnConfig {
    use clap::ValueEnum;
    let step = std::env::var("WEFT_FIT_TEACHER").ok().and_then(|s| TeacherStep::from_str(&s, true).ok());
    let velocity_only = std::env::var_os("WEFT_FIT_VELOCITY").is_some();
    let residual = std::env::var("WEFT_FIT_RESIDUAL").ok();
    let residual_inputs = residual.as_deref() == Some("1");
    let newton_inputs =
        residual.as_deref().and_then(|r| r.strip_prefix("newton")).map_or(0, |k| k.parse().unwrap_or(1000));
    GnnConfig {
        teacher_step: step.unwrap_or_default(),
        residual_inputs,
        newton_inputs,
        velocity_only,
        ..GnnConfig::default()
    }
}

/// The samples `weft train --teacher coarse` validates its fit on: plain
/// rollouts of the first two validation-split scenes of every family, 50
/// frames, a sample every second frame (all of them, where the trainer
/// keeps 32).
fn validation_split_samples() -> Vec<Graph> {
    let spec = DatasetSpec::default();
    let cfg = teacher_config();
    let mut scenes = Vec::new();
    for &f in Family::ALL.iter().filter(|&&f| Some(f) != spec.heldout) {
        let seeds = (spec.seed..).filter(|&s| weft_host::learn::data::split_of(&spec, f, s) == "val").take(2);
        scenes.extend(seeds.map(|s| families::scenario(f, s, spec.coarse, 50, spec.dt)));
    }
    scenes.iter().flat_map(|scn| collect(scn, &cfg, None, 50, 2)).collect()
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

/// Least squares of `values` (one component at the free nodes) on the
/// field `basis` spans; returns `(Σ v², Σ (v − fit)²)`.
fn field_fit(basis: &[Vec<f64>], values: &[f64]) -> (f64, f64) {
    let k = basis.first().map_or(0, Vec::len);
    let mut a = vec![vec![0.0f64; k + 1]; k];
    for (b, v) in basis.iter().zip(values) {
        for r in 0..k {
            for c in 0..k {
                a[r][c] += b[r] * b[c];
            }
            a[r][k] += b[r] * v;
        }
    }
    // Gauss–Jordan with partial pivoting, a small ridge for empty modes.
    for (r, row) in a.iter_mut().enumerate() {
        row[r] += 1e-12;
    }
    for c in 0..k {
        let piv = (c..k).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs())).unwrap_or(c);
        a.swap(c, piv);
        let d = a[c][c];
        if d.abs() < 1e-300 {
            continue;
        }
        let pivot = a[c].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != c {
                let f = row[c] / d;
                for (x, p) in row[c..].iter_mut().zip(&pivot[c..]) {
                    *x -= f * p;
                }
            }
        }
    }
    let coef: Vec<f64> = (0..k).map(|r| if a[r][r].abs() > 1e-300 { a[r][k] / a[r][r] } else { 0.0 }).collect();
    let (mut all, mut left) = (0.0, 0.0);
    for (b, v) in basis.iter().zip(values) {
        let f: f64 = b.iter().zip(&coef).map(|(x, c)| x * c).sum();
        all += v * v;
        left += (v - f) * (v - f);
    }
    (all, left)
}

/// Shares of the teacher's correction and of the network's miss that a
/// constant, an affine and a quadratic field over the cloth carry, pooled
/// over `graphs`, for Δx (columns 0–2) and Δv (3–5).
fn smooth_shares(m: &Trained, graphs: &[Graph]) -> anyhow::Result<()> {
    let dev = candle_core::Device::Cpu;
    // [target | miss][Δx | Δv][order]: (Σ v², Σ left).
    let mut sums = [[[(0.0f64, 0.0f64); 3]; 2]; 2];
    let orders: [&[usize]; 3] = [&[], &[1], &[1, 2]];
    for g in graphs {
        let (px, pv) = m.gnn.correct(g, &m.meta.normalizer, &dev)?;
        let free: Vec<usize> = (0..g.nodes.len()).filter(|&i| g.free[i] > 0.0).collect();
        let pos = |i: usize| [g.nodes[i][3] as f64, g.nodes[i][4] as f64, g.nodes[i][5] as f64];
        for (order, terms) in orders.iter().enumerate() {
            let basis: Vec<Vec<f64>> = free
                .iter()
                .map(|&i| {
                    let [x, y, z] = pos(i);
                    let mut b = vec![1.0];
                    for t in terms.iter() {
                        match t {
                            1 => b.extend([x, y, z]),
                            _ => b.extend([x * x, y * y, z * z, x * y, y * z, z * x]),
                        }
                    }
                    b
                })
                .collect();
            for c in 0..6 {
                let (head, comp) = (c / 3, c % 3);
                let pred = |i: usize| if head == 0 { px[i].get(comp) } else { pv[i].get(comp) } as f64;
                let t: Vec<f64> = free.iter().map(|&i| g.targets[i][c] as f64).collect();
                let miss: Vec<f64> = free.iter().zip(&t).map(|(&i, t)| t - pred(i)).collect();
                for (which, v) in [t, miss].iter().enumerate() {
                    let (all, left) = field_fit(&basis, v);
                    sums[which][head][order].0 += all;
                    sums[which][head][order].1 += left;
                }
            }
        }
    }
    for (which, name) in ["teacher's correction", "network's miss"].iter().enumerate() {
        let share = |h: usize, o: usize| 1.0 - sums[which][h][o].1 / sums[which][h][o].0.max(1e-300);
        println!(
            "  {name:21} carried by a constant / affine / quadratic field: Δx {:.3} / {:.3} / {:.3}, Δv {:.3} / {:.3} / {:.3}",
            share(0, 0),
            share(0, 1),
            share(0, 2),
            share(1, 0),
            share(1, 1),
            share(1, 2)
        );
    }
    Ok(())
}

/// How much of the teacher's Δx and Δv the Newton correction `δu` in the
/// history's columns carries by itself (Δx as `h δu`, Δv as `δu`), and
/// with the best single factor on each, pooled over the free nodes.
fn newton_shares(graphs: &[Graph], name: &str) {
    use weft_core::gnn::features::HISTORY;
    let h = DatasetSpec::default().dt as f64;
    // [Δx | Δv]: Σ t², Σ t·s, Σ s².
    let mut sums = [[0.0f64; 3]; 2];
    for g in graphs {
        for ((n, t), f) in g.nodes.iter().zip(&g.targets).zip(&g.free) {
            if *f == 0.0 {
                continue;
            }
            for k in 0..3 {
                let du = n[HISTORY + k] as f64;
                for (head, s) in [(0usize, h * du), (1, du)] {
                    let tk = t[3 * head + k] as f64;
                    sums[head][0] += tk * tk;
                    sums[head][1] += tk * s;
                    sums[head][2] += s * s;
                }
            }
        }
    }
    let share = |[tt, ts, ss]: [f64; 3], a: f64| 1.0 - (tt - 2.0 * a * ts + a * a * ss) / tt.max(1e-300);
    let best = |q: [f64; 3]| q[1] / q[2].max(1e-300);
    println!(
        "{name}: the Newton correction carries Δx {:.3} (best factor {:.3}: {:.3}), Δv {:.3} (best factor {:.3}: {:.3})",
        share(sums[0], 1.0),
        best(sums[0]),
        share(sums[0], best(sums[0])),
        share(sums[1], 1.0),
        best(sums[1]),
        share(sums[1], best(sums[1]))
    );
}

fn main() -> anyhow::Result<()> {
    let steps: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2000);
    let scenes: u64 = std::env::var("WEFT_FIT_SCENES").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let frames: u32 = std::env::var("WEFT_FIT_FRAMES").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    let mut train: Vec<Graph> = (0..scenes).flat_map(|s| samples(s, frames)).collect();
    let mut held = if std::env::var("WEFT_FIT_HELD").as_deref() == Ok("val") {
        validation_split_samples()
    } else {
        samples(if scenes == 1 { 1 } else { 100 }, 60)
    };
    if std::env::var_os("WEFT_FIT_GLOBAL").is_some() {
        println!("the position's columns hold the cloth's mean velocity change instead");
        train.iter_mut().chain(held.iter_mut()).for_each(global_velocity_change);
    }
    if teacher_config().newton_inputs > 0 {
        newton_shares(&train, "training");
        newton_shares(&held, "held-out");
    }
    let drop: Vec<usize> =
        std::env::var("WEFT_FIT_DROP").unwrap_or_default().split(',').filter_map(|k| k.trim().parse().ok()).collect();
    println!("node features left out: {drop:?}");
    let env = |k: &str| std::env::var(k).ok().and_then(|s| s.parse::<f64>().ok());
    let (batch, lr_end) = (env("WEFT_FIT_BATCH").map_or(8, |b| b as usize), env("WEFT_FIT_LR_END").unwrap_or(1.0));
    let relative_floor = env("WEFT_FIT_FLOOR").unwrap_or(0.0) as f32;
    let lr = env("WEFT_FIT_LR").unwrap_or(3e-3);
    println!(
        "{} training samples, {} held-out samples, {steps} Adam steps of {batch} samples at {lr} (to {lr_end} of it)",
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
        let field_head = std::env::var_os("WEFT_FIT_FIELD").is_some();
        let cfg = GnnConfig { latent, rounds, field_head, ..teacher_config() };
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
            SampleTraining { lr_end, relative_floor, ..SampleTraining::constant(steps, batch, lr) },
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
        if std::env::var_os("WEFT_FIT_SMOOTH").is_some() {
            println!(" training samples:");
            smooth_shares(&m, &train)?;
            println!(" held-out samples:");
            smooth_shares(&m, &held)?;
        }
    }
    Ok(())
}
