//! `weft train`: Adam on the correction network, with checkpoints and resume.

use std::path::PathBuf;

use anyhow::{bail, Result};
use candle_core::Device;
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::dataset::{self, Trajectory};
use crate::families::Rng;
use crate::gnn::{self, Batch, GnnConfig, Graph, ModelMeta, Noise, Trained, Unroll, MODEL_FORMAT};

/// Turns every graph by a random angle about the vertical when `on`.
fn augment(graphs: &mut [Graph], on: bool, rng: &mut Rng) {
    if on {
        for g in graphs {
            g.rotate_about_vertical(rng.range(0.0, std::f32::consts::TAU));
        }
    }
}

#[derive(Clone, Debug)]
pub struct TrainOptions {
    pub data: PathBuf,
    /// Checkpoint path stem (`.safetensors` + `.json` are written).
    pub out: PathBuf,
    pub steps: usize,
    pub batch: usize,
    pub lr: f32,
    pub lr_final: f32,
    pub config: GnnConfig,
    pub noise: Noise,
    pub resume: bool,
    pub seed: u64,
    /// Validate and checkpoint every this many steps.
    pub every: usize,
    /// Unrolled training: after `unroll_after` steps, half of the samples
    /// start from a rollout of up to `unroll_steps` corrected steps.
    pub unroll_steps: usize,
    pub unroll_after: usize,
    /// With unrolling on, a third of the samples start from up to this
    /// many plain coarse steps instead (0: off).
    pub plain_unroll_steps: usize,
    /// Relative loss ([`Batch::weighted`]) with this floor (0: plain mean
    /// squared error).
    pub relative_floor: f32,
    /// Train on copies turned by a random angle about the vertical
    /// ([`Graph::rotate_about_vertical`]).
    pub augment: bool,
    /// Every this many steps (0: never), roll the network out over
    /// `rollout_frames` frames of every validation trajectory; the model
    /// with the lowest mean error is kept as `<out>-best` and, at the end,
    /// is the one written to `out`.
    pub rollout_every: usize,
    pub rollout_frames: usize,
    pub progress: bool,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            data: "data".into(),
            out: "checkpoints/weft-gnn".into(),
            steps: 20_000,
            batch: 4,
            lr: 1e-3,
            lr_final: 2e-5,
            config: GnnConfig::default(),
            noise: Noise { position: 1e-3, velocity: 0.03 },
            resume: false,
            seed: 1,
            every: 500,
            unroll_steps: 0,
            unroll_after: 0,
            plain_unroll_steps: 0,
            relative_floor: 0.0,
            augment: true,
            rollout_every: 2000,
            rollout_frames: 200,
            progress: true,
        }
    }
}

/// Loss history.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TrainLog {
    /// `(step, mean training loss since the last entry, validation loss)`;
    /// the first entry is the untrained (or resumed) model, both losses on
    /// the validation samples.
    pub history: Vec<(usize, f32, f32)>,
    /// `(step, mean corrected position RMSE of the validation rollouts)`.
    #[serde(default)]
    pub rollouts: Vec<(usize, f32)>,
    pub seconds: f32,
}

/// The stem the best model by validation rollouts is kept under.
pub fn best_stem(out: &std::path::Path) -> PathBuf {
    let mut s = out.as_os_str().to_owned();
    s.push("-best");
    PathBuf::from(s)
}

fn draw(trajs: &[Trajectory], rng: &mut Rng) -> (usize, usize) {
    let k = (rng.next_u64() % trajs.len() as u64) as usize;
    let t = (rng.next_u64() % (trajs[k].x.len() as u64 - 1)) as usize;
    (k, t)
}

/// `n` random samples `(trajectory, frame, seed)` with seeds
/// `first_seed..first_seed + n`.
pub fn picks(trajs: &[Trajectory], n: usize, rng: &mut Rng, first_seed: u64) -> Vec<(usize, usize, u64)> {
    (0..n as u64)
        .map(|i| {
            let (k, t) = draw(trajs, rng);
            (k, t, first_seed + i)
        })
        .collect()
}

pub fn samples(
    trajs: &[Trajectory],
    picks: &[(usize, usize, u64)],
    cfg: &GnnConfig,
    noise: Noise,
    unroll: Option<&Unroll>,
    plain_unroll: usize,
) -> Result<Vec<Graph>> {
    picks
        .par_iter()
        .map(|&(k, t, s)| {
            let mut rng = Rng::new(s);
            // Half of the samples start from the fine state, half from a
            // rollout of 1..=steps corrected steps; with `plain_unroll`,
            // thirds: fine state, corrected rollout, plain rollout.
            let u = match (unroll, plain_unroll) {
                (None, _) => None,
                (Some(u), 0) => (s % 2 == 1).then(|| Unroll { steps: 1 + (s as usize / 2) % u.steps, ..*u }),
                (Some(u), p) => match s % 3 {
                    0 => None,
                    1 => Some(Unroll { steps: 1 + (s as usize / 3) % u.steps, ..*u }),
                    _ => Some(Unroll { steps: 1 + (s as usize / 3) % p, gnn: None, ..*u }),
                },
            };
            gnn::sample(&trajs[k], t, cfg, noise, &mut rng, u.as_ref())
        })
        .collect()
}

/// Trains (or resumes) and returns the model and its loss history.
pub fn train(opts: &TrainOptions) -> Result<(Trained, TrainLog)> {
    let dev = Device::Cpu;
    let train = dataset::load_split(&opts.data, Some("train"))?;
    let val = dataset::load_split(&opts.data, Some("val"))?;
    if train.is_empty() {
        bail!("no training trajectories in {}", opts.data.display());
    }
    let mut rng = Rng::new(opts.seed);
    let val_set = if val.is_empty() { &train } else { &val };
    let val_picks = picks(val_set, 32, &mut rng, 0);
    let no_noise = Noise { position: 0.0, velocity: 0.0 };
    let val_graphs = samples(val_set, &val_picks, &opts.config, no_noise, None, 0)?;

    let (mut model, start) = if opts.resume && opts.out.with_extension("json").exists() {
        let m = Trained::load(&opts.out, &dev)?;
        let s = m.meta.steps;
        (m, s)
    } else {
        // Normalisation from noisy training samples.
        let picks = picks(&train, 256, &mut rng, 1_000_000);
        let mut graphs = samples(&train, &picks, &opts.config, opts.noise, None, 0)?;
        augment(&mut graphs, opts.augment, &mut rng);
        let stats = gnn::normalizer(&graphs);
        let meta = ModelMeta {
            format: MODEL_FORMAT.into(),
            config: opts.config,
            normalizer: stats,
            noise: opts.noise,
            steps: 0,
            train_loss: f32::NAN,
            val_loss: f32::NAN,
            parameters: 0,
            gain: 1.0,
            val_rollout: None,
        };
        (Trained::new(meta, &dev)?, 0)
    };
    model.meta.parameters = model.parameters();
    model.meta.noise = opts.noise;
    let val_batch = Batch::new(&val_graphs, &model.meta.normalizer, &dev)?;
    let mut opt = AdamW::new(
        model.varmap.all_vars(),
        ParamsAdamW { lr: opts.lr as f64, weight_decay: 0.0, ..Default::default() },
    )?;

    let best_path = best_stem(&opts.out);
    // (step, error) of the best model so far, this run's or a resumed one's.
    let mut best = (0usize, f32::INFINITY);
    if opts.resume {
        if let Ok(b) = Trained::load(&best_path, &dev) {
            best = (b.meta.steps, b.meta.val_rollout.unwrap_or(f32::INFINITY));
        }
    }
    let bar = crate::progress_bar(opts.steps as u64, "steps", opts.progress);
    bar.set_position(start as u64);
    let mut log = TrainLog::default();
    let v0 = model.gnn.loss(&val_batch)?.to_scalar::<f32>()?;
    log.history.push((start, v0, v0));
    let t0 = std::time::Instant::now();
    let (mut acc, mut acc_n) = (0.0f32, 0usize);
    let mut step_rng = Rng::new(opts.seed.wrapping_add(start as u64 * 7919));
    for step in start..opts.steps {
        // Cosine decay from lr to lr_final.
        let f = step as f32 / opts.steps.max(1) as f32;
        let lr = opts.lr_final + 0.5 * (opts.lr - opts.lr_final) * (1.0 + (std::f32::consts::PI * f).cos());
        opt.set_learning_rate(lr as f64);
        let picks: Vec<_> = (0..opts.batch)
            .map(|_| {
                let (k, t) = draw(&train, &mut step_rng);
                (k, t, step_rng.next_u64())
            })
            .collect();
        let unroll = (opts.unroll_steps > 0 && step >= opts.unroll_after).then_some(Unroll {
            gnn: Some(&model.gnn),
            norm: &model.meta.normalizer,
            steps: opts.unroll_steps,
        });
        let mut graphs = samples(&train, &picks, &opts.config, opts.noise, unroll.as_ref(), opts.plain_unroll_steps)?;
        augment(&mut graphs, opts.augment, &mut step_rng);
        let batch = Batch::weighted(&graphs, &model.meta.normalizer, &dev, opts.relative_floor)?;
        let loss = model.gnn.loss(&batch)?;
        opt.backward_step(&loss)?;
        acc += loss.to_scalar::<f32>()?;
        acc_n += 1;
        bar.inc(1);
        let last = step + 1 == opts.steps;
        if (step + 1) % opts.every == 0 || last {
            let v = model.gnn.loss(&val_batch)?.to_scalar::<f32>()?;
            let tr = acc / acc_n.max(1) as f32;
            log.history.push((step + 1, tr, v));
            bar.set_message(format!("loss {tr:.4} val {v:.4}"));
            (acc, acc_n) = (0.0, 0);
            model.meta.steps = step + 1;
            model.meta.train_loss = tr;
            model.meta.val_loss = v;
            if opts.rollout_every > 0 && ((step + 1) % opts.rollout_every == 0 || last) {
                let errs = val_set
                    .iter()
                    .map(|t| crate::eval::corrected_error(t, &model, opts.rollout_frames))
                    .collect::<Result<Vec<_>>>()?;
                let e = crate::eval::mean(&errs);
                log.rollouts.push((step + 1, e));
                model.meta.val_rollout = Some(e);
                if e < best.1 {
                    best = (step + 1, e);
                    model.save(&best_path)?;
                }
            }
            model.save(&opts.out)?;
        }
    }
    bar.finish_and_clear();
    // Validation chooses by rollout error: the best model becomes `out`.
    if best.0 != opts.steps && best.1.is_finite() && best_path.with_extension("json").exists() {
        let chosen = Trained::load(&best_path, &dev)?;
        chosen.save(&opts.out)?;
        model = chosen;
    }
    log.seconds = t0.elapsed().as_secs_f32();
    let log_path = opts.out.with_extension("log.json");
    let mut all: TrainLog = std::fs::read_to_string(&log_path)
        .ok()
        .filter(|_| opts.resume)
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    all.history.extend(log.history.iter().copied());
    all.rollouts.extend(log.rollouts.iter().copied());
    all.seconds += log.seconds;
    std::fs::write(&log_path, serde_json::to_string_pretty(&all)?)?;
    Ok((model, log))
}

/// What `weft train` prints: steps, speed, losses, and the validation
/// rollouts with the step kept.
pub fn summary(model: &Trained, log: &TrainLog, opts: &TrainOptions) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let first = log.history.first().copied().unwrap_or_default();
    let last = log.history.last().copied().unwrap_or_default();
    let _ = writeln!(
        s,
        "{} parameters, {} steps in {:.1} s ({:.1} steps/s); loss {:.4} → {:.4}, validation {:.4} → {:.4}; checkpoint {}",
        model.meta.parameters,
        opts.steps,
        log.seconds,
        (last.0 - first.0 + opts.every.min(opts.steps)) as f32 / log.seconds.max(1e-3),
        first.1,
        last.1,
        first.2,
        last.2,
        opts.out.display()
    );
    if let Some(e) = model.meta.val_rollout {
        let errs: Vec<String> = log.rollouts.iter().map(|(s, e)| format!("{s}: {e:.4}")).collect();
        let _ = writeln!(
            s,
            "validation rollouts (step: mean corrected RMSE, m): {}; kept step {} ({e:.4} m)",
            errs.join(", "),
            model.meta.steps
        );
    }
    s
}
