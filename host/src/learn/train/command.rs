//! `weft train`: Adam on the correction network, with checkpoints and resume.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use candle_core::Device;
use serde::{Deserialize, Serialize};

use crate::learn::data::families::Rng;
use crate::learn::data::{self, Trajectory};
use crate::learn::network::samples::{draw, picks, samples};
use crate::learn::network::{self, Batch, GnnConfig, Graph, ModelMeta, Noise, Trained, Unroll};
use crate::learn::train::adam::Adam;
use crate::learn::train::checkpoint::{self, Progress};
use crate::learn::train::fit::{self, Fit};
use crate::learn::train::{rollout_loss, solver_loss};

/// Turns every graph by a random angle about the vertical when `on`.
pub(crate) fn augment(graphs: &mut [Graph], on: bool, rng: &mut Rng) {
    if on {
        for g in graphs {
            g.rotate_about_vertical(rng.range(0.0, std::f32::consts::TAU));
        }
    }
}

/// What `weft train` does; the command line's options (`clap`), whose
/// defaults are [`TrainOptions::default`]'s.
#[derive(Clone, Debug, clap::Args)]
pub struct TrainOptions {
    /// Data folder [default: $WEFT_DATA, else ~/.cache/weft/data].
    #[arg(short, long, default_value_os_t = data::default_dir(), hide_default_value = true)]
    pub data: PathBuf,
    /// Output stem: the model STEM.safetensors and STEM.json, the
    /// checkpoint STEM.ckpt, the log STEM.log.json.
    #[arg(short, long, default_value = "checkpoints/weft-gnn")]
    pub out: PathBuf,
    /// Training steps.
    #[arg(long, default_value_t = 30_000, value_parser = crate::at_least_one)]
    pub steps: usize,
    /// Graphs per batch.
    #[arg(long, default_value_t = 4)]
    pub batch: usize,
    /// Learning rate at the start (cosine decay to `lr_final`).
    #[arg(long, default_value_t = 1e-3)]
    pub lr: f32,
    #[arg(long, default_value_t = 2e-5)]
    pub lr_final: f32,
    #[command(flatten)]
    pub config: GnnConfig,
    #[command(flatten)]
    pub noise: Noise,
    /// Continue from the checkpoint at --out (`STEM.ckpt`: weights,
    /// optimizer, random stream, buffer), as if the run had not stopped.
    #[arg(long)]
    pub resume: bool,
    /// Stop after this training step (a checkpoint there; `--resume` goes
    /// on): a run in parts of a time limit each, on `--steps`' schedule.
    #[arg(long)]
    pub until: Option<usize>,
    /// Seed of the sample draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Validate and checkpoint every this many steps.
    #[arg(long, default_value_t = 500)]
    pub every: usize,
    /// Unrolled training: after `unroll_after` steps, half of the samples
    /// start from a rollout of up to this many corrected coarse steps of
    /// the current network (0: off).
    #[arg(long = "unroll", default_value_t = 3)]
    pub unroll_steps: usize,
    /// Training steps before unrolling starts.
    #[arg(long, default_value_t = 15_000)]
    pub unroll_after: usize,
    /// With unrolling on, a third of the samples start from up to this
    /// many plain coarse steps instead (0: off).
    #[arg(long = "plain-unroll", default_value_t = 0)]
    pub plain_unroll_steps: usize,
    /// Weigh every sample by its relative error (`Batch::weighted`), with
    /// this floor on its mean squared target (in target standard
    /// deviations; 0: plain mean squared error).
    #[arg(long, default_value_t = 0.0)]
    pub relative_floor: f32,
    /// `--no-augment`: train on the samples as simulated only, not also on
    /// copies turned by a random angle about the vertical
    /// (`Graph::rotate_about_vertical`).
    #[arg(long = "no-augment", action = clap::ArgAction::SetFalse)]
    pub augment: bool,
    /// Every this many steps (0: never), roll the network out on every
    /// validation trajectory; the model with the lowest mean error is kept
    /// as `<out>-best` and, at the end, is the one written to `out`.
    #[arg(long, default_value_t = 2000)]
    pub rollout_every: usize,
    /// The validation rollouts' error: at this horizon (1, 10 or 50 frames,
    /// rollouts started every 20 frames as `weft eval --horizons` measures
    /// them); 0 for one rollout of `rollout_frames` from each start.
    #[arg(long, default_value_t = 10)]
    pub select_horizon: usize,
    /// Frames per validation rollout with `--select-horizon 0`.
    #[arg(long, default_value_t = 200)]
    pub rollout_frames: usize,
    /// The rollout loss ([`crate::learn::train::rollout_loss`]): rollouts of
    /// this many corrected frames from the fine state, whose end error
    /// every correction of the rollout is trained against (0: off).
    #[arg(long, default_value_t = 0)]
    pub rollout_loss: usize,
    /// The rollout loss's weight beside the one-step loss.
    #[arg(long, default_value_t = 1.0)]
    pub rollout_weight: f32,
    /// Rollouts per training step for the rollout loss.
    #[arg(long, default_value_t = 1)]
    pub rollout_samples: usize,
    /// Training steps before the rollout loss starts.
    #[arg(long, default_value_t = 0)]
    pub rollout_after: usize,
    /// The solver in the loop ([`crate::learn::train::solver_loss`]): corrected
    /// rollouts of up to this many frames of the real coarse step, the
    /// error at every frame trained against (0: off). Starts after
    /// `--rollout-after`, with `--rollout-samples` rollouts a step.
    #[arg(long, default_value_t = 0)]
    pub solver_loss: usize,
    /// The solver loss's frames start at 2 and double every this many
    /// training steps up to `--solver-loss` (0: `--solver-loss` from the
    /// start).
    #[arg(long, default_value_t = 0)]
    pub solver_grow: usize,
    /// Whether a frame's error reaches every earlier correction through
    /// the step's vector–Jacobian product (`step`) or only the correction
    /// that made it (`frames`).
    #[arg(long, value_enum, default_value_t = solver_loss::Through::Step)]
    pub solver_through: solver_loss::Through,
    /// The solver loss's weight beside the one-step loss.
    #[arg(long, default_value_t = 1.0)]
    pub solver_weight: f32,
    /// The velocities' weight in the solver loss's per-frame error.
    #[arg(long, default_value_t = 0.1)]
    pub solver_v_weight: f32,
    /// Start from this trained network (its configuration, normaliser and
    /// weights; the step count starts at 0) instead of a new one.
    #[arg(long)]
    pub init: Option<PathBuf>,
    /// With `--init`: apply the network's position output too (a
    /// velocity-only network becomes a two-head one).
    #[arg(long)]
    pub both_heads: bool,
    /// What the one-step targets come from: `fine`, the restricted fine
    /// reference of the data set's training trajectories; `coarse`, the
    /// coarse mesh at the reference's own step asked from the network's own
    /// from-start rollouts ([`crate::learn::train::on_policy`]).
    #[arg(long, value_enum, default_value_t = Teacher::Fine)]
    pub teacher: Teacher,
    /// With `--teacher coarse`: training scenes per family (the families'
    /// training seeds, simulated here).
    #[arg(long, default_value_t = 60)]
    pub scenes: usize,
    /// With `--teacher coarse`: samples the buffer holds.
    #[arg(long, default_value_t = 6000)]
    pub buffer: usize,
    /// With `--teacher coarse`: training steps between the buffer's refills.
    #[arg(long, default_value_t = 200)]
    pub refresh: usize,
    /// With `--teacher coarse`: rollouts from scene starts per refill.
    #[arg(long, default_value_t = 2)]
    pub refresh_scenes: usize,
    /// With `--teacher coarse`: a sample every this many frames of a rollout.
    #[arg(long, default_value_t = 2)]
    pub sample_every: usize,
    /// With `--teacher coarse`: leave out of the buffer the samples whose
    /// base step branched (a Newton correction, a shortened step or a
    /// split; the fit's `branch` class).
    #[arg(long)]
    pub drop_branched: bool,
    /// With `--teacher coarse`: the validation error is the mean from-start
    /// error over this many frames.
    #[arg(long, default_value_t = 50)]
    pub select_frames: usize,
    /// `--quiet`: no progress bars.
    #[arg(short = 'q', long = "quiet", action = clap::ArgAction::SetFalse)]
    pub progress: bool,
}

/// Where the one-step targets come from ([`TrainOptions::teacher`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Teacher {
    Fine,
    Coarse,
}

impl Default for TrainOptions {
    /// The command line's defaults.
    fn default() -> Self {
        crate::defaults()
    }
}

/// Loss history.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TrainLog {
    /// `(step, mean training loss since the last entry, validation loss)`;
    /// the first entry is the untrained (or resumed) model, both losses on
    /// the validation samples.
    pub history: Vec<(usize, f32, f32)>,
    /// `(step, mean corrected position RMSE of the validation rollouts)`.
    #[serde(default)]
    pub rollouts: Vec<(usize, f32)>,
    /// `(step, mean rollout loss since the last entry)` with the rollout
    /// loss on ([`crate::learn::train::rollout_loss`]).
    #[serde(default)]
    pub rollout_losses: Vec<(usize, f32)>,
    /// `(step, on training samples, on validation samples)`: the share of
    /// the teacher's correction the network predicts ([`fit`]).
    #[serde(default)]
    pub fits: Vec<(usize, Fit, Fit)>,
    pub seconds: f32,
}

/// A loss or error as the log keeps it: a value that is not finite (a
/// network whose rollouts blew up) as `f32::MAX`, which JSON can hold and
/// which is never the best.
fn finite(x: f32) -> f32 {
    if x.is_finite() {
        x
    } else {
        f32::MAX
    }
}

/// Whether the validation rollouts follow training step `step`: every
/// `--rollout-every` steps (0: never) and at the last step.
pub(crate) fn rollouts_due(opts: &TrainOptions, step: usize) -> bool {
    opts.rollout_every > 0 && (step.is_multiple_of(opts.rollout_every) || step == opts.steps)
}

/// Samples the fit is measured on, each of training and validation.
pub const FIT_SAMPLES: usize = 32;

/// The seed offset of the fit's training samples' stream.
const FIT_STREAM: u64 = 0xF17;

/// The stem the best model by validation rollouts is kept under.
pub fn best_stem(out: &std::path::Path) -> PathBuf {
    let mut s = out.as_os_str().to_owned();
    s.push("-best");
    PathBuf::from(s)
}

/// Trains (or resumes) and returns the model and its loss history.
pub fn train(opts: &TrainOptions) -> Result<(Trained, TrainLog)> {
    match opts.teacher {
        Teacher::Coarse => crate::learn::train::on_policy::train(opts),
        Teacher::Fine => train_on_data(opts),
    }
}

/// The learning rate of training step `step`: cosine decay from `--lr` to
/// `--lr-final`.
pub fn learning_rate(opts: &TrainOptions, step: usize) -> f32 {
    let f = step as f32 / opts.steps.max(1) as f32;
    opts.lr_final + 0.5 * (opts.lr - opts.lr_final) * (1.0 + (std::f32::consts::PI * f).cos())
}

/// [`train`] on the fine reference's training trajectories.
fn train_on_data(opts: &TrainOptions) -> Result<(Trained, TrainLog)> {
    let (train, val) = splits(opts)?;
    let dev = Device::Cpu;
    let mut rng = Rng::new(opts.seed);
    let val_set = if val.is_empty() { &train } else { &val };
    let val_picks = picks(val_set, 32, &mut rng, 0);
    let no_noise = Noise { position: 0.0, velocity: 0.0 };
    let val_graphs = samples(val_set, &val_picks, &opts.config, no_noise, None, 0)?;
    // The fit's training samples: a stream of their own, so that they do
    // not move the draws of a run.
    let fit_picks = picks(&train, FIT_SAMPLES, &mut Rng::new(opts.seed ^ FIT_STREAM), 0);
    let fit_train = samples(&train, &fit_picks, &opts.config, no_noise, None, 0)?;
    let mut run = Run::start(opts, &dev, || {
        let mut model = initial_model(opts, &train, &mut rng, &dev)?;
        model.meta.noise = opts.noise;
        Ok(model)
    })?;
    let val_batch = Batch::new(&val_graphs, &run.model.meta.normalizer, &dev)?;
    if run.progress.log.history.is_empty() {
        let v0 = run.model.gnn.loss(&val_batch)?.to_scalar::<f32>()?;
        run.progress.log.history.push((run.progress.step, v0, v0));
    }
    let bar = crate::progress_bar(opts.steps as u64, "steps", opts.progress);
    bar.set_position(run.progress.step as u64);
    let mut step_rng = Rng::resume(run.progress.rng);
    for step in run.progress.step..run.stop(opts) {
        run.adam.set_learning_rate(learning_rate(opts, step) as f64);
        let (loss, one_step, rollout) = step_loss(opts, &train, &run.model, step, &mut step_rng, &dev)?;
        run.adam.backward_step(&loss)?;
        run.tally(one_step, rollout);
        bar.inc(1);
        let done = step + 1;
        if done.is_multiple_of(opts.every.max(1)) || done == opts.steps {
            let v = run.model.gnn.loss(&val_batch)?.to_scalar::<f32>()?;
            let tr = run.log_entry(opts, done, v);
            bar.set_message(format!("loss {tr:.4} val {v:.4}"));
            bar.println(run.measure_fit(done, &fit_train, &val_graphs)?);
            if rollouts_due(opts, done) {
                let e = rollout_error(opts, val_set, &run.model)?;
                run.validated(opts, done, e)?;
            }
        }
        if run.due(opts, done) {
            run.checkpoint(opts, done, &step_rng)?;
        }
    }
    bar.finish_and_clear();
    run.finish(opts, &dev)
}

/// A training run under way: the model, its optimizer and where it stands
/// ([`checkpoint`]: everything a resumed run needs to go on as this one).
pub(crate) struct Run {
    pub model: Trained,
    pub adam: Adam,
    pub progress: Progress,
    /// When this process started or last checkpointed (the log's seconds).
    pub clock: std::time::Instant,
}

impl Run {
    /// The run at `--out`'s checkpoint when resuming from one; else a new
    /// one from `fresh` (with `--resume` and a model but no checkpoint, that
    /// model with a new optimizer, as a fine-tune would start).
    pub fn start(opts: &TrainOptions, dev: &Device, fresh: impl FnOnce() -> Result<Trained>) -> Result<Run> {
        let clock = std::time::Instant::now();
        if opts.resume {
            if let Some(r) = checkpoint::load(&opts.out, opts.lr as f64, dev)? {
                return Ok(Run { model: r.model, adam: r.adam, progress: r.progress, clock });
            }
        }
        let mut model = match opts.resume && opts.out.with_extension("json").exists() {
            true => {
                eprintln!("no checkpoint at {}: from the model there, with a new optimizer", opts.out.display());
                Trained::load(&opts.out, dev)?
            }
            false => fresh()?,
        };
        model.meta.parameters = model.parameters();
        let adam = Adam::new(&model.varmap, opts.lr as f64)?;
        let mut progress = Progress { step: model.meta.steps, rng: Rng::new(opts.seed).state(), ..Progress::default() };
        progress.set_best(resumed_best(opts, dev));
        Ok(Run { model, adam, progress, clock })
    }

    /// The step this process stops after: `--steps`, or `--until` before it.
    pub fn stop(&self, opts: &TrainOptions) -> usize {
        opts.until.map_or(opts.steps, |u| u.min(opts.steps))
    }

    /// Adds a training step's losses to the sums of the log's next entry.
    pub fn tally(&mut self, one_step: f32, rollout: f32) {
        let a = &mut self.progress.acc;
        (a.0, a.1, a.2) = (a.0 + one_step, a.1 + rollout, a.2 + 1);
    }

    /// The log's entry after training step `step` with validation loss
    /// `val`: the mean training loss since the last, which it returns.
    pub fn log_entry(&mut self, opts: &TrainOptions, step: usize, val: f32) -> f32 {
        let (sum, rollout, n) = std::mem::take(&mut self.progress.acc);
        let (tr, val) = (finite(sum / n.max(1) as f32), finite(val));
        let log = &mut self.progress.log;
        log.history.push((step, tr, val));
        if (opts.rollout_loss > 0 || opts.solver_loss > 0) && step > opts.rollout_after {
            log.rollout_losses.push((step, finite(rollout / n.max(1) as f32)));
        }
        let meta = &mut self.model.meta;
        (meta.steps, meta.train_loss, meta.val_loss) = (step, tr, val);
        tr
    }

    /// The fit after step `step` on training and validation samples, into
    /// the log; the line to print.
    pub fn measure_fit(&mut self, step: usize, train: &[Graph], val: &[Graph]) -> Result<String> {
        let (t, v) = (fit::measure(&self.model, train)?, fit::measure(&self.model, val)?);
        let line = format!("step {step} fit Δx/Δv: training {}; validation {}", t.line(), v.line());
        self.progress.log.fits.push((step, t, v));
        Ok(line)
    }

    /// Records the validation error `e` after step `step`, keeping the model
    /// as `<out>-best` when it is the lowest so far.
    pub fn validated(&mut self, opts: &TrainOptions, step: usize, e: f32) -> Result<bool> {
        let e = finite(e);
        self.progress.log.rollouts.push((step, e));
        (self.model.meta.steps, self.model.meta.val_rollout) = (step, Some(e));
        let better = e < self.progress.best().1;
        if better {
            self.progress.set_best((step, e));
            self.model.save(&best_stem(&opts.out))?;
        }
        Ok(better)
    }

    /// Whether a checkpoint follows training step `step`: every `--every`
    /// steps, at the last step and where this process stops.
    pub fn due(&self, opts: &TrainOptions, step: usize) -> bool {
        step.is_multiple_of(opts.every.max(1)) || step == opts.steps || step == self.stop(opts)
    }

    /// The checkpoint after training step `step` (`rng`: the sample draws'
    /// stream), then the log and the model beside it (which a resumed run
    /// writes again: the checkpoint is the run's record).
    pub fn checkpoint(&mut self, opts: &TrainOptions, step: usize, rng: &Rng) -> Result<()> {
        self.progress.step = step;
        self.progress.rng = rng.state();
        self.progress.log.seconds += self.clock.elapsed().as_secs_f32();
        self.clock = std::time::Instant::now();
        self.model.meta.steps = step;
        checkpoint::save(&opts.out, &self.model, &self.adam, &self.progress)?;
        crate::sim::files::write_json(&opts.out.with_extension("log.json"), &self.progress.log)?;
        self.model.save(&opts.out)
    }

    /// The end of this process's part: at `--steps`, validation's choice
    /// becomes `--out` ([`keep_best`]); the model and the whole log.
    pub fn finish(self, opts: &TrainOptions, dev: &Device) -> Result<(Trained, TrainLog)> {
        let log = self.progress.log.clone();
        if self.progress.step < opts.steps {
            return Ok((self.model, log));
        }
        // A run killed after its last checkpoint and before the model
        // beside it finishes here with nothing left to train.
        self.model.save(&opts.out)?;
        Ok((keep_best(opts, self.progress.best(), self.model, dev)?, log))
    }
}

/// `(step, error)` of the best model so far: a resumed run's kept one, else
/// none yet.
pub(crate) fn resumed_best(opts: &TrainOptions, dev: &Device) -> (usize, f32) {
    match opts.resume.then(|| Trained::load(&best_stem(&opts.out), dev).ok()).flatten() {
        Some(b) => (b.meta.steps, b.meta.val_rollout.unwrap_or(f32::INFINITY)),
        None => (0, f32::INFINITY),
    }
}

/// Validation chooses: the best model kept (`best`: its step and error)
/// becomes `out` unless it is the last one, `model`.
pub(crate) fn keep_best(opts: &TrainOptions, best: (usize, f32), model: Trained, dev: &Device) -> Result<Trained> {
    let path = best_stem(&opts.out);
    if best.0 == opts.steps || !best.1.is_finite() || !path.with_extension("json").exists() {
        return Ok(model);
    }
    let chosen = Trained::load(&path, dev)?;
    chosen.save(&opts.out)?;
    Ok(chosen)
}

/// A new run's model: `--init`'s network, else a new one normalised on
/// noisy training samples.
fn initial_model(opts: &TrainOptions, train: &[Trajectory], rng: &mut Rng, dev: &Device) -> Result<Trained> {
    if let Some(init) = &opts.init {
        let mut m = Trained::load(init, dev).with_context(|| format!("--init {}", init.display()))?;
        m.meta.steps = 0;
        m.meta.gain = 1.0;
        m.meta.val_rollout = None;
        if opts.both_heads {
            m.meta.config.velocity_only = false;
            m.gnn.cfg.velocity_only = false;
        }
        return Ok(m);
    }
    let picks = picks(train, 256, rng, 1_000_000);
    let mut graphs = samples(train, &picks, &opts.config, opts.noise, None, 0)?;
    augment(&mut graphs, opts.augment, rng);
    let meta = ModelMeta::new(opts.config, network::normalizer(&graphs), opts.noise);
    Trained::seeded(meta, opts.seed, dev)
}

/// The loss of training step `step`: the one-step loss of a training
/// batch, plus the rollout loss's once it is on; with the one-step and
/// rollout parts' values.
fn step_loss(
    opts: &TrainOptions,
    train: &[Trajectory],
    model: &Trained,
    step: usize,
    rng: &mut Rng,
    dev: &Device,
) -> Result<(candle_core::Tensor, f32, f32)> {
    let batch = training_batch(opts, train, model, step, rng, dev)?;
    let one_step = model.gnn.loss(&batch)?;
    let one = one_step.to_scalar::<f32>()?;
    if opts.solver_loss > 0 && step >= opts.rollout_after {
        let rollouts = solver_batch(opts, train, model, step, rng)?;
        let extra = solver_loss::solver_loss(&model.gnn, &model.meta.normalizer, &rollouts, dev)?;
        let r = rollouts.iter().map(|s| s.loss).sum::<f32>() / rollouts.len().max(1) as f32;
        return Ok(((one_step + (extra * opts.solver_weight as f64)?)?, one, r));
    }
    if opts.rollout_loss == 0 || step < opts.rollout_after {
        return Ok((one_step, one, 0.0));
    }
    let rollouts = rollout_batch(opts, train, model, rng)?;
    let extra = rollout_loss::rollout_loss(&model.gnn, &model.meta.normalizer, &rollouts, dev)?;
    let r = extra.to_scalar::<f32>()?;
    Ok(((one_step + (extra * opts.rollout_weight as f64)?)?, one, r))
}

/// The batch of training step `step`: random frames, from step
/// `unroll_after` on partly started from rollouts of the current model.
fn training_batch(
    opts: &TrainOptions,
    train: &[Trajectory],
    model: &Trained,
    step: usize,
    rng: &mut Rng,
    dev: &Device,
) -> Result<Batch> {
    let picks: Vec<_> = (0..opts.batch)
        .map(|_| {
            let (k, t) = draw(train, rng);
            (k, t, rng.next_u64())
        })
        .collect();
    let unroll = (opts.unroll_steps > 0 && step >= opts.unroll_after).then_some(Unroll {
        gnn: Some(&model.gnn),
        norm: &model.meta.normalizer,
        steps: opts.unroll_steps,
    });
    let mut graphs = samples(train, &picks, &opts.config, opts.noise, unroll.as_ref(), opts.plain_unroll_steps)?;
    augment(&mut graphs, opts.augment, rng);
    Batch::weighted(&graphs, &model.meta.normalizer, dev, opts.relative_floor)
}

/// The rollouts of a training step's rollout loss: from random frames of
/// random training trajectories, those that did not fail.
fn rollout_batch(
    opts: &TrainOptions,
    train: &[Trajectory],
    model: &Trained,
    rng: &mut Rng,
) -> Result<Vec<rollout_loss::RolloutSample>> {
    use rayon::prelude::*;
    let k = opts.rollout_loss;
    let picks = rollout_starts(opts.rollout_samples, train, k, rng);
    let out: Vec<_> = picks
        .par_iter()
        .map(|&(i, t)| rollout_loss::rollout_sample(&train[i], t, k, model))
        .collect::<Result<Vec<_>>>()?;
    Ok(out.into_iter().flatten().collect())
}

/// `count` rollout starts of `k` frames: random frames of random training
/// trajectories, `(trajectory, frame)`, each with `k` frames after it.
fn rollout_starts(count: usize, train: &[Trajectory], k: usize, rng: &mut Rng) -> Vec<(usize, usize)> {
    (0..count)
        .map(|_| {
            let (i, t) = draw(train, rng);
            let last = train[i].x.len().saturating_sub(k + 1).max(1);
            (i, t % last)
        })
        .collect()
}

/// The frames of the solver loss's rollouts at training step `step`: 2,
/// doubling every `--solver-grow` steps after `--rollout-after`, up to
/// `--solver-loss`.
pub fn solver_frames(opts: &TrainOptions, step: usize) -> usize {
    if opts.solver_grow == 0 {
        return opts.solver_loss;
    }
    let doublings = (step.saturating_sub(opts.rollout_after) / opts.solver_grow).min(16) as u32;
    (2usize << doublings).min(opts.solver_loss)
}

/// The rollouts of a training step's solver loss: from random frames of
/// random training trajectories, those that did not fail.
fn solver_batch(
    opts: &TrainOptions,
    train: &[Trajectory],
    model: &Trained,
    step: usize,
    rng: &mut Rng,
) -> Result<Vec<solver_loss::SolverSample>> {
    use rayon::prelude::*;
    let k = solver_frames(opts, step);
    let scales = solver_loss::Scales::of(&model.meta.normalizer, opts.solver_v_weight);
    let picks = rollout_starts(opts.rollout_samples, train, k, rng);
    let out: Vec<_> = picks
        .par_iter()
        .map(|&(i, t)| solver_loss::solver_sample(&train[i], t, k, model, opts.solver_through, scales))
        .collect::<Result<Vec<_>>>()?;
    Ok(out.into_iter().flatten().collect())
}

/// The training and validation splits; refuses an empty training split,
/// and a selection horizon `weft eval` does not measure before hours of
/// training rather than at the first validation.
fn splits(opts: &TrainOptions) -> Result<(Vec<Trajectory>, Vec<Trajectory>)> {
    let h = opts.select_horizon;
    if h != 0 && !crate::learn::eval::horizons::HORIZONS.contains(&h) {
        bail!("--select-horizon {h} is not one of weft eval's horizons (1, 10, 50), nor 0");
    }
    let train = data::load_split(&opts.data, Some("train"))?;
    if train.is_empty() {
        bail!("no training trajectories in {}", opts.data.display());
    }
    Ok((train, data::load_split(&opts.data, Some("val"))?))
}

/// Mean corrected rollout error over the validation trajectories.
fn rollout_error(opts: &TrainOptions, val: &[Trajectory], model: &Trained) -> Result<f32> {
    use crate::learn::eval::{columns::Column, horizons};
    let h = opts.select_horizon;
    let one = |t: &Trajectory| match h {
        0 => network::corrected_error(t, model, opts.rollout_frames),
        _ => horizons::horizon_error(t, Column::Float, Some(model), h)?
            .context("a horizon of weft eval's (checked before training)"),
    };
    let errs = val.iter().map(one).collect::<Result<Vec<_>>>()?;
    Ok(crate::learn::data::metrics::mean(&errs))
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
    if let Some((step, t, v)) = log.fits.last() {
        let _ = writeln!(
            s,
            "the fit at step {step}: the share of the teacher's correction predicted\n{}",
            Fit::table(t, v)
        );
    }
    if let Some(e) = model.meta.val_rollout {
        let errs: Vec<String> = log.rollouts.iter().map(|(s, e)| format!("{s}: {e:.4}")).collect();
        let what = match (opts.teacher, opts.select_horizon) {
            (Teacher::Coarse, _) => format!("the first {} frames from each start", opts.select_frames),
            (Teacher::Fine, 0) => format!("{}-frame rollouts", opts.rollout_frames),
            (Teacher::Fine, h) => format!("horizon {h}"),
        };
        let _ = writeln!(
            s,
            "validation error at {what} (step: mean corrected RMSE, m): {}; kept step {} ({e:.4} m)",
            errs.join(", "),
            model.meta.steps
        );
    }
    s
}
