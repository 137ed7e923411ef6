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
//! are plain. The normaliser comes from plain rollouts of two scenes of
//! every family, which are also the buffer's first samples. Checkpoints, resume and the
//! choice of the best model by validation (the mean from-start error over
//! `--select-frames` frames of the validation trajectories, which need the
//! fine reference) work as `weft train`'s.

use std::path::Path;

use anyhow::{bail, Context, Result};
use candle_core::Device;
use rayon::prelude::*;

use crate::learn::data::families::Rng;
use crate::learn::data::{self, Trajectory};
use crate::learn::network::teacher::{collect, training_scenes, FIRST_SCENES};
use crate::learn::network::{self, Batch, FrameClass, GnnConfig, Graph, ModelMeta, Trained};
use crate::learn::train::checkpoint::{self, Slots};
use crate::learn::train::{augment, rollouts_due, Run, TrainLog, TrainOptions, FIT_SAMPLES};
use crate::sim::scenario::Scenario;

/// A buffer of samples, the oldest replaced first; every sample's origin
/// (its refill and index there) beside it, which the checkpoint keeps.
struct Buffer {
    graphs: Vec<Graph>,
    slots: Slots,
}

impl Buffer {
    fn new(capacity: usize) -> Buffer {
        Buffer { graphs: Vec::new(), slots: Slots { capacity, ..Slots::default() } }
    }

    /// Puts refill `id`'s samples in, after writing them beside the
    /// checkpoint of `stem` for a resumed run to read.
    fn refill(&mut self, stem: &Path, id: u64, graphs: Vec<Graph>) -> Result<()> {
        checkpoint::save_refill(stem, id, &graphs)?;
        let s = &mut self.slots;
        for (k, g) in graphs.into_iter().enumerate() {
            if self.graphs.len() < s.capacity {
                self.graphs.push(g);
                s.slots.push((id, k as u32));
            } else {
                self.graphs[s.next] = g;
                s.slots[s.next] = (id, k as u32);
                s.next = (s.next + 1) % s.capacity;
            }
        }
        Ok(())
    }

    /// The buffer a checkpoint's slots name, read from its refills' files.
    fn restore(stem: &Path, slots: Slots) -> Result<Buffer> {
        let mut refills: std::collections::BTreeMap<u64, Vec<Graph>> = Default::default();
        for &(id, _) in &slots.slots {
            if let std::collections::btree_map::Entry::Vacant(e) = refills.entry(id) {
                e.insert(checkpoint::load_refill(stem, id)?);
            }
        }
        let graphs = slots
            .slots
            .iter()
            .map(|&(id, k)| {
                refills[&id]
                    .get(k as usize)
                    .cloned()
                    .with_context(|| format!("{}: no sample {k}", checkpoint::refill_path(stem, id).display()))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Buffer { graphs, slots })
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
        .filter(|g| kept(opts, g))
        .collect()
}

/// The validation measure: the float network's mean from-start error over
/// the first `frames` frames of every validation trajectory.
pub fn from_start_error(val: &[Trajectory], model: &Trained, frames: usize) -> Result<f32> {
    let errs = val.par_iter().map(|t| network::corrected_error(t, model, frames)).collect::<Result<Vec<_>>>()?;
    Ok(crate::learn::data::metrics::mean(&errs))
}

/// Whether a collected sample goes into the buffer: all but, with
/// `--drop-branched`, those whose base step branched
/// ([`FrameClass::Branch`]: their targets depend on a decision no input
/// shows).
fn kept(opts: &TrainOptions, g: &Graph) -> bool {
    !(opts.drop_branched && g.class == FrameClass::Branch)
}

/// The samples a run starts from: plain rollouts from the starts of
/// [`FIRST_SCENES`] training scenes taken in turn from every family
/// (`scenes` holds `--scenes` of each, family after family), so that every
/// family's range is in the normaliser and in the buffer from the first
/// step.
fn broad(opts: &TrainOptions, scenes: &[Scenario], cfg: &GnnConfig) -> Vec<Graph> {
    let per = opts.scenes.clamp(1, scenes.len());
    let families = scenes.len() / per;
    let picks: Vec<usize> =
        (0..FIRST_SCENES.max(families)).map(|k| (k % families) * per + (k / families) % per).collect();
    picks
        .par_iter()
        .flat_map(|&k| collect(&scenes[k], cfg, None, opts.rollout_frames as u32, opts.sample_every))
        .filter(|g| kept(opts, g))
        .collect()
}

/// A new run's model: `--init`'s network, or a new one normalised on
/// `first` (turned about the vertical as training turns its samples).
fn start_model(opts: &TrainOptions, first: &[Graph], rng: &mut Rng, dev: &Device) -> Result<Trained> {
    match &opts.init {
        Some(init) => {
            let mut m = Trained::load(init, dev).with_context(|| format!("--init {}", init.display()))?;
            (m.meta.steps, m.meta.gain, m.meta.val_rollout) = (0, 1.0, None);
            m.meta.config.base_step = opts.config.base_step;
            m.gnn.cfg.base_step = opts.config.base_step;
            Ok(m)
        }
        None => {
            let mut turned = first.to_vec();
            augment(&mut turned, opts.augment, rng);
            let meta = ModelMeta::new(opts.config, network::normalizer(&turned), opts.noise);
            let m = Trained::seeded(meta, opts.seed, dev)?;
            // It starts as the plain step: its first rollouts are plain.
            m.zero_heads()?;
            Ok(m)
        }
    }
}

/// The fit's validation samples: plain rollouts' samples of the validation
/// scenes over `--select-frames` frames, [`FIT_SAMPLES`] spread over them.
fn validation_samples(opts: &TrainOptions, val: &[Trajectory]) -> Vec<Graph> {
    let all: Vec<Graph> = val
        .par_iter()
        .flat_map(|t| collect(&t.scenario, &opts.config, None, opts.select_frames as u32, opts.sample_every))
        .collect();
    let stride = (all.len() / FIT_SAMPLES).max(1);
    all.into_iter().step_by(stride).take(FIT_SAMPLES).collect()
}

/// The log's entry after training step `step`: the validation error every
/// `--rollout-every` steps and the best model kept by it; the log line.
fn validate(opts: &TrainOptions, val: &[Trajectory], run: &mut Run, step: usize) -> Result<String> {
    let mut val_loss = run.model.meta.val_loss;
    let mut tail = String::new();
    if rollouts_due(opts, step) {
        let e = from_start_error(val, &run.model, opts.select_frames)?;
        val_loss = e;
        tail = format!(" validation {e:.5} m{}", if run.validated(opts, step, e)? { " (best)" } else { "" });
    }
    let loss = run.log_entry(opts, step, val_loss);
    Ok(format!("step {step} loss {loss:.4}{tail}"))
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
    let mut first = None;
    let mut run = Run::start(opts, &dev, || {
        let f = first.insert(broad(opts, &scenes, &opts.config));
        start_model(opts, f, &mut rng, &dev)
    })?;
    let mut buffer = match run.progress.buffer.take() {
        Some(slots) => Buffer::restore(&opts.out, slots)?,
        None => {
            // Seeded broad: the normaliser's samples are the buffer's first.
            let mut b = Buffer::new(opts.buffer);
            let seed = first.take().unwrap_or_else(|| broad(opts, &scenes, &run.model.meta.config));
            b.refill(&opts.out, run.progress.step as u64, seed)?;
            b
        }
    };
    let fit_val = validation_samples(opts, &val);
    let t0 = std::time::Instant::now();
    let mut step_rng = Rng::resume(run.progress.rng);
    for step in run.progress.step..run.stop(opts) {
        run.adam.set_learning_rate(crate::learn::train::learning_rate(opts, step) as f64);
        if step > 0 && step.is_multiple_of(opts.refresh.max(1)) {
            let fresh = refresh(opts, &scenes, &run.model, step, &mut step_rng);
            buffer.refill(&opts.out, step as u64, fresh)?;
        }
        let mut graphs: Vec<Graph> = (0..opts.batch)
            .map(|_| buffer.graphs[(step_rng.next_u64() % buffer.graphs.len() as u64) as usize].clone())
            .collect();
        augment(&mut graphs, opts.augment, &mut step_rng);
        let batch = Batch::weighted(&graphs, &run.model.meta.normalizer, &dev, opts.relative_floor)?;
        let loss = run.model.gnn.loss(&batch)?;
        run.tally(loss.to_scalar::<f32>()?, 0.0);
        run.adam.backward_step(&loss)?;
        let done = step + 1;
        if done.is_multiple_of(opts.every.max(1)) || done == opts.steps {
            let line = validate(opts, &val, &mut run, done)?;
            let stride = (buffer.graphs.len() / FIT_SAMPLES).max(1);
            let fit_train: Vec<Graph> = buffer.graphs.iter().step_by(stride).take(FIT_SAMPLES).cloned().collect();
            eprintln!("{}", run.measure_fit(done, &fit_train, &fit_val)?);
            eprintln!("{line} buffer {} {:.0} s", buffer.graphs.len(), t0.elapsed().as_secs_f32());
        }
        if run.due(opts, done) {
            run.progress.buffer = Some(buffer.slots.clone());
            run.checkpoint(opts, done, &step_rng)?;
            checkpoint::remove_unnamed_refills(&opts.out, &buffer.slots);
        }
    }
    run.finish(opts, &dev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::data::families::Family;

    /// The normaliser's and the first buffer's samples come from every
    /// trained family, each scene once.
    #[test]
    fn a_run_starts_from_every_family() {
        let spec = data::DatasetSpec { coarse: 5, steps: 4, ..data::DatasetSpec::default() };
        let scenes = training_scenes(&spec, 3);
        let opts = TrainOptions { scenes: 3, rollout_frames: 2, sample_every: 1, ..TrainOptions::default() };
        let cfg = GnnConfig { rounds: 1, ..GnnConfig::default() };
        let first = broad(&opts, &scenes, &cfg);
        let trained: Vec<Family> = Family::ALL.into_iter().filter(|&f| Some(f) != spec.heldout).collect();
        for f in &trained {
            let n = first.iter().filter(|g| g.family == Some(*f)).count();
            // Two scenes a family, two frames each.
            assert_eq!(n, 2 * 2, "{f:?}");
        }
        assert_eq!(first.len(), 2 * 2 * trained.len());
    }
}
