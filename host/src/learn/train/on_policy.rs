//! Training on what the device runs (`weft train --teacher coarse`): the
//! network's own corrected rollouts from each scene's start, with a
//! target at every frame from a teacher asked from the state the network
//! reached: the coarse mesh itself at the fine reference's own step,
//! exact from any coarse state, cheap, and the ceiling of a correction of
//! the time step alone (`crate::learn::network::teacher`).
//!
//! The loop keeps a buffer of such samples. Every `--refresh` training
//! steps it rolls the current network out from the starts of
//! `--refresh-scenes` training scenes (the families' training seeds,
//! simulated here: no fine reference is needed) and puts every
//! `--sample-every`-th frame's sample into the buffer, oldest out first;
//! batches are drawn from the buffer. Until `--unroll-after` the rollouts
//! are plain; the normaliser comes from the first of them. Checkpoints, resume and the
//! choice of the best model by validation (the mean from-start error over
//! `--select-frames` frames of the validation trajectories, which need the
//! fine reference) work as `weft train`'s.

use anyhow::{bail, Context, Result};
use candle_core::Device;
use candle_nn::Optimizer;
use rayon::prelude::*;

use crate::learn::data::families::Rng;
use crate::learn::data::{self, Trajectory};
use crate::learn::network::teacher::{collect, training_scenes, FIRST_SCENES};
use crate::learn::network::{self, Batch, GnnConfig, Graph, ModelMeta, Trained};
use crate::learn::train::{append_log, augment, best_stem, keep_best, optimizer, resumed_best, TrainLog, TrainOptions};
use crate::sim::scenario::Scenario;

/// A buffer of samples, the oldest replaced first.
struct Buffer {
    graphs: Vec<Graph>,
    capacity: usize,
    next: usize,
}

impl Buffer {
    fn push(&mut self, g: Graph) {
        if self.graphs.len() < self.capacity {
            self.graphs.push(g);
        } else {
            self.graphs[self.next] = g;
            self.next = (self.next + 1) % self.capacity;
        }
    }
}

/// The samples of `--refresh-scenes` rollouts from random scenes' starts
/// at training step `step`: plain until `--unroll-after`, `model`'s own
/// after, on the step `model` corrects.
fn refresh(opts: &TrainOptions, scenes: &[Scenario], model: &Trained, step: usize, rng: &mut Rng) -> Vec<Graph> {
    let net = (step >= opts.unroll_after).then_some(model);
    rollouts(opts, scenes, &model.meta.config, net, opts.refresh_scenes, rng)
}

/// The samples of `count` rollouts of `net` (plain when `None`) on the step
/// `cfg` corrects, from random scenes' starts.
fn rollouts(
    opts: &TrainOptions,
    scenes: &[Scenario],
    cfg: &GnnConfig,
    net: Option<&Trained>,
    count: usize,
    rng: &mut Rng,
) -> Vec<Graph> {
    let picks: Vec<usize> = (0..count).map(|_| (rng.next_u64() % scenes.len() as u64) as usize).collect();
    picks
        .par_iter()
        .flat_map(|&k| collect(&scenes[k], cfg, net, opts.rollout_frames as u32, opts.sample_every))
        .collect()
}

/// The validation measure: the float network's mean from-start error over
/// the first `frames` frames of every validation trajectory.
pub fn from_start_error(val: &[Trajectory], model: &Trained, frames: usize) -> Result<f32> {
    let errs = val.par_iter().map(|t| network::corrected_error(t, model, frames)).collect::<Result<Vec<_>>>()?;
    Ok(crate::learn::data::metrics::mean(&errs))
}

/// The model to start from: the checkpoint at `out` when resuming; else
/// `--init`'s network or a new one normalised on plain rollouts' samples.
fn start_model(opts: &TrainOptions, scenes: &[Scenario], rng: &mut Rng, dev: &Device) -> Result<(Trained, usize)> {
    if opts.resume && opts.out.with_extension("json").exists() {
        let m = Trained::load(&opts.out, dev)?;
        let s = m.meta.steps;
        return Ok((m, s));
    }
    let mut m = match &opts.init {
        Some(init) => {
            let mut m = Trained::load(init, dev).with_context(|| format!("--init {}", init.display()))?;
            (m.meta.steps, m.meta.gain, m.meta.val_rollout) = (0, 1.0, None);
            m.meta.config.base_step = opts.config.base_step;
            m.gnn.cfg.base_step = opts.config.base_step;
            m
        }
        None => {
            // The normaliser from a dozen scenes, so that every family's
            // range is in it.
            let mut first = rollouts(opts, scenes, &opts.config, None, FIRST_SCENES, rng);
            augment(&mut first, opts.augment, rng);
            let m = Trained::new(ModelMeta::new(opts.config, network::normalizer(&first), opts.noise), dev)?;
            // It starts as the plain step: its first rollouts are plain.
            m.zero_heads()?;
            m
        }
    };
    m.meta.parameters = m.parameters();
    Ok((m, 0))
}

/// Checkpoints after training step `step` (mean loss `loss` since the
/// last): the validation error every `--rollout-every` steps and the best
/// model kept by it (`best`: its step and error); returns the log line.
fn checkpoint(
    opts: &TrainOptions,
    val: &[Trajectory],
    model: &mut Trained,
    step: usize,
    loss: f32,
    best: &mut (usize, f32),
    log: &mut TrainLog,
) -> Result<String> {
    model.meta.steps = step;
    model.meta.train_loss = loss;
    let mut line = format!("step {step} loss {loss:.4}");
    if opts.rollout_every > 0 && (step.is_multiple_of(opts.rollout_every) || step == opts.steps) {
        let e = from_start_error(val, model, opts.select_frames)?;
        log.rollouts.push((step, e));
        model.meta.val_rollout = Some(e);
        model.meta.val_loss = e;
        line.push_str(&format!(" validation {e:.5} m"));
        if e < best.1 {
            *best = (step, e);
            model.save(&best_stem(&opts.out))?;
            line.push_str(" (best)");
        }
    }
    log.history.push((step, loss, model.meta.val_loss));
    model.save(&opts.out)?;
    Ok(line)
}

/// `weft train --teacher coarse`: see the module's documentation.
pub fn train(opts: &TrainOptions) -> Result<(Trained, TrainLog)> {
    let spec = data::load_index(&opts.data).map(|i| i.spec).unwrap_or_default();
    let scenes = training_scenes(&spec, opts.scenes);
    if scenes.is_empty() {
        bail!("no training scenes (--scenes {})", opts.scenes);
    }
    let val = data::load_split(&opts.data, Some("val")).unwrap_or_default();
    if val.is_empty() {
        bail!("no validation trajectories in {}: `weft generate --split val` makes them", opts.data.display());
    }
    let dev = Device::Cpu;
    let mut rng = Rng::new(opts.seed);
    let mut buffer = Buffer { graphs: Vec::new(), capacity: opts.buffer, next: 0 };
    let (mut model, start) = start_model(opts, &scenes, &mut rng, &dev)?;
    for g in refresh(opts, &scenes, &model, start, &mut rng) {
        buffer.push(g);
    }
    let mut opt = optimizer(opts, &model)?;
    let mut best = resumed_best(opts, &dev);
    let mut log = TrainLog::default();
    let t0 = std::time::Instant::now();
    let (mut acc, mut acc_n) = (0.0f32, 0usize);
    let mut step_rng = Rng::new(opts.seed.wrapping_add(start as u64 * 7919));
    for step in start..opts.steps {
        opt.set_learning_rate(crate::learn::train::learning_rate(opts, step) as f64);
        if step > start && step.is_multiple_of(opts.refresh.max(1)) {
            for g in refresh(opts, &scenes, &model, step, &mut step_rng) {
                buffer.push(g);
            }
        }
        let mut graphs: Vec<Graph> = (0..opts.batch)
            .map(|_| buffer.graphs[(step_rng.next_u64() % buffer.graphs.len() as u64) as usize].clone())
            .collect();
        augment(&mut graphs, opts.augment, &mut step_rng);
        let batch = Batch::weighted(&graphs, &model.meta.normalizer, &dev, opts.relative_floor)?;
        let loss = model.gnn.loss(&batch)?;
        acc += loss.to_scalar::<f32>()?;
        acc_n += 1;
        opt.backward_step(&loss)?;
        if (step + 1).is_multiple_of(opts.every.max(1)) || step + 1 == opts.steps {
            let tr = acc / acc_n.max(1) as f32;
            (acc, acc_n) = (0.0, 0);
            let line = checkpoint(opts, &val, &mut model, step + 1, tr, &mut best, &mut log)?;
            eprintln!("{line} buffer {} {:.0} s", buffer.graphs.len(), t0.elapsed().as_secs_f32());
        }
    }
    let model = keep_best(opts, best, model, &dev)?;
    log.seconds = t0.elapsed().as_secs_f32();
    append_log(opts, &log)?;
    Ok((model, log))
}
