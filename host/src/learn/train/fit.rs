//! The fit: how much of its teacher's correction a network predicts. On a
//! set of samples, the share of the targets' Δx (and Δv) explained,
//! `1 − Σ(p − t)² / Σ t²` over the free nodes (1: every target met; 0: no
//! better than predicting nothing, the plain step; below 0: worse), pooled
//! over the samples and as the median of the samples' own shares; for all
//! samples, by [`FrameClass`] and by family. `weft train` measures it on
//! training and validation samples at every validation check and keeps it
//! in its log ([`crate::learn::train::TrainLog::fits`]).

use anyhow::Result;
use candle_core::Device;
use serde::{Deserialize, Serialize};

use crate::learn::data::families::Family;
use crate::learn::network::{FrameClass, Graph, Trained};

/// The share explained on one group of samples; `None` where its targets
/// are all zero (a head the network does not train).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Share {
    pub group: String,
    pub samples: usize,
    pub dx: Option<f32>,
    pub dx_median: Option<f32>,
    pub dv: Option<f32>,
    pub dv_median: Option<f32>,
}

/// The fit on one set of samples: all, then by class, then by family
/// (groups without samples left out).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    pub groups: Vec<Share>,
}

/// Squared error and squared target of one sample, `[Δx, Δv]`.
type Sums = [(f64, f64); 2];

fn sums(pred: &(Vec<weft_core::math::Vec3>, Vec<weft_core::math::Vec3>), g: &Graph) -> Sums {
    let mut s = [(0.0, 0.0); 2];
    for (i, t) in g.targets.iter().enumerate() {
        if g.free.get(i).copied().unwrap_or(0.0) == 0.0 {
            continue;
        }
        for (h, p) in [pred.0[i], pred.1[i]].iter().enumerate() {
            for (k, pk) in p.to_array().iter().enumerate() {
                let tk = t[3 * h + k] as f64;
                s[h].0 += (*pk as f64 - tk).powi(2);
                s[h].1 += tk * tk;
            }
        }
    }
    s
}

/// `1 − err / tgt`; `None` without a target, or where the predictions are
/// not finite.
fn share((err, tgt): (f64, f64)) -> Option<f32> {
    let s = (1.0 - err / tgt) as f32;
    (tgt > 0.0 && s.is_finite()).then_some(s)
}

fn median(mut v: Vec<f32>) -> Option<f32> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f32::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) })
}

/// [`Share`] of the samples `of` picks from `per` (each sample's sums).
fn group(name: &str, per: &[(&Graph, Sums)], of: impl Fn(&Graph) -> bool) -> Option<Share> {
    let picked: Vec<&Sums> = per.iter().filter(|(g, _)| of(g)).map(|(_, s)| s).collect();
    if picked.is_empty() {
        return None;
    }
    let pooled = |h: usize| share(picked.iter().fold((0.0, 0.0), |a, s| (a.0 + s[h].0, a.1 + s[h].1)));
    let med = |h: usize| median(picked.iter().filter_map(|s| share(s[h])).collect());
    Some(Share {
        group: name.to_string(),
        samples: picked.len(),
        dx: pooled(0),
        dx_median: med(0),
        dv: pooled(1),
        dv_median: med(1),
    })
}

/// The fit of `model`'s predictions (without its gain) to `graphs`'
/// targets.
pub fn measure(model: &Trained, graphs: &[Graph]) -> Result<Fit> {
    let dev = Device::Cpu;
    let mut per = Vec::with_capacity(graphs.len());
    for g in graphs {
        let pred = model.gnn.correct(g, &model.meta.normalizer, &dev)?;
        per.push((g, sums(&pred, g)));
    }
    let mut groups: Vec<Share> = group("all", &per, |_| true).into_iter().collect();
    groups.extend(FrameClass::ALL.iter().filter_map(|&c| group(c.name(), &per, |g| g.class == c)));
    groups.extend(Family::ALL.iter().filter_map(|&f| group(f.name(), &per, |g| g.family == Some(f))));
    Ok(Fit { groups })
}

impl Fit {
    /// The group named `name`.
    pub fn get(&self, name: &str) -> Option<&Share> {
        self.groups.iter().find(|s| s.group == name)
    }

    /// One line: the pooled Δx and Δv shares of all samples and of each
    /// class.
    pub fn line(&self) -> String {
        let f = |x: Option<f32>| x.map_or("–".into(), |x| format!("{x:.3}"));
        let part = |s: &Share| format!("{} {}/{} (n {})", s.group, f(s.dx), f(s.dv), s.samples);
        let classes = FrameClass::ALL.iter().filter_map(|c| self.get(c.name()));
        self.get("all").into_iter().chain(classes).map(part).collect::<Vec<_>>().join(", ")
    }

    /// The table of training and validation fits, a row a group.
    pub fn table(train: &Fit, val: &Fit) -> String {
        let f = |x: Option<f32>| x.map_or("–".into(), |x| format!("{x:.3}"));
        let mut out = String::from(
            "group       training: n   Δx   (median)   Δv   (median)   validation: n   Δx   (median)   Δv   (median)\n",
        );
        let mut names: Vec<&str> = train.groups.iter().map(|s| s.group.as_str()).collect();
        names.extend(val.groups.iter().map(|s| s.group.as_str()).filter(|n| train.get(n).is_none()));
        for name in names {
            let cell = |fit: &Fit| match fit.get(name) {
                Some(s) => format!(
                    "{:>5} {:>6} ({:>6}) {:>6} ({:>6})",
                    s.samples,
                    f(s.dx),
                    f(s.dx_median),
                    f(s.dv),
                    f(s.dv_median)
                ),
                None => format!("{:>5} {:>6}  {:>6}  {:>6}  {:>6} ", 0, "", "", "", ""),
            };
            out += &format!("{name:<10} {}        {}\n", cell(train), cell(val));
        }
        out
    }
}

/// How [`train_on_samples`] trains: Adam steps, samples a step, the
/// learning rate at the start and the fraction of it left at the end
/// (cosine decay; 1: constant), the loss's relative floor
/// ([`crate::learn::network::Batch::weighted`]) and the seed of the
/// samples' draw.
#[derive(Clone, Copy, Debug)]
pub struct SampleTraining {
    pub steps: usize,
    pub batch: usize,
    pub lr: f64,
    pub lr_end: f64,
    pub relative_floor: f32,
    pub seed: u64,
}

impl SampleTraining {
    /// `steps` steps of `batch` samples at a constant `lr`, plain mean
    /// squared error, seed 7.
    pub fn constant(steps: usize, batch: usize, lr: f64) -> SampleTraining {
        SampleTraining { steps, batch, lr, lr_end: 1.0, relative_floor: 0.0, seed: 7 }
    }
}

/// Trains `model` on the fixed samples `graphs` as `how` says, each step's
/// samples drawn from its seed's stream: the fit on teacher samples
/// alone, in seconds, before any rollout. Returns the last step's loss.
pub fn train_on_samples(model: &Trained, graphs: &[Graph], how: SampleTraining) -> Result<f32> {
    let SampleTraining { steps, batch, lr, lr_end, relative_floor, seed } = how;
    let dev = Device::Cpu;
    let mut adam = crate::learn::train::adam::Adam::new(&model.varmap, lr)?;
    let mut rng = crate::learn::data::families::Rng::new(seed);
    let mut last = f32::NAN;
    for step in 0..steps {
        if lr_end != 1.0 {
            let cos = 0.5 * (1.0 + (std::f64::consts::PI * step as f64 / steps.max(1) as f64).cos());
            adam.set_learning_rate(lr * (lr_end + (1.0 - lr_end) * cos));
        }
        let picked: Vec<Graph> =
            (0..batch).map(|_| graphs[(rng.next_u64() % graphs.len() as u64) as usize].clone()).collect();
        let b = crate::learn::network::Batch::weighted(&picked, &model.meta.normalizer, &dev, relative_floor)?;
        let loss = model.gnn.loss(&b)?;
        last = loss.to_scalar::<f32>()?;
        adam.backward_step(&loss)?;
    }
    Ok(last)
}
