//! The trained network in plain `f32` (the candle model's arithmetic
//! without the tensor library), which records every activation channel's
//! range on calibration graphs.
use anyhow::{Context, Result};
use weft_core::gnn::int8::{Part, Parts};

use crate::learn::network::{build_parts, Graph, Normalizer, Trained};

/// A dense layer `y = W x + b`, `W` row-major `[outputs][inputs]`.
#[derive(Clone, Debug)]
pub struct Dense {
    pub inputs: usize,
    pub outputs: usize,
    pub w: Vec<f32>,
    pub b: Vec<f32>,
}

impl Dense {
    pub(crate) fn apply(&self, x: &[f32], out: &mut [f32]) {
        for (o, y) in out.iter_mut().enumerate().take(self.outputs) {
            let row = &self.w[o * self.inputs..][..self.inputs];
            *y = self.b[o] + row.iter().zip(x).map(|(a, b)| a * b).sum::<f32>();
        }
    }
    pub(crate) fn row(&self, o: usize) -> &[f32] {
        &self.w[o * self.inputs..][..self.inputs]
    }
}

/// Per-channel statistics of one activation tensor.
#[derive(Clone, Debug, Default)]
pub struct Channels {
    pub max: Vec<f32>,
    pub sum: Vec<f64>,
    pub sum_sq: Vec<f64>,
    pub count: u64,
}

impl Channels {
    fn add(&mut self, x: &[f32]) {
        if self.max.len() < x.len() {
            self.max.resize(x.len(), 0.0);
            self.sum.resize(x.len(), 0.0);
            self.sum_sq.resize(x.len(), 0.0);
        }
        for (k, v) in x.iter().enumerate() {
            self.max[k] = self.max[k].max(v.abs());
            self.sum[k] += *v as f64;
            self.sum_sq[k] += (*v as f64).powi(2);
        }
        self.count += 1;
    }
    pub(crate) fn merge(&mut self, o: &Channels) {
        if self.max.len() < o.max.len() {
            self.max.resize(o.max.len(), 0.0);
            self.sum.resize(o.max.len(), 0.0);
            self.sum_sq.resize(o.max.len(), 0.0);
        }
        for k in 0..o.max.len() {
            self.max[k] = self.max[k].max(o.max[k]);
            self.sum[k] += o.sum.get(k).copied().unwrap_or(0.0);
            self.sum_sq[k] += o.sum_sq[k];
        }
        self.count += o.count;
    }
    /// Scale per channel: the largest magnitude ↦ 127.
    pub(crate) fn scales(&self) -> Vec<f32> {
        self.clipped(0.0)
    }
    /// Scale per channel: the largest magnitude, or (`clip > 0`) at most
    /// `clip` times the channel's RMS, ↦ 127 (larger values saturate).
    pub(crate) fn clipped(&self, clip: f32) -> Vec<f32> {
        let rms = self.mean_sq();
        self.max
            .iter()
            .zip(rms)
            .map(|(&m, ms)| if clip > 0.0 { scale_of(m.min(clip * ms.sqrt() as f32)) } else { scale_of(m) })
            .collect()
    }
    pub(crate) fn mean_sq(&self) -> Vec<f64> {
        self.sum_sq.iter().map(|s| s / self.count.max(1) as f64).collect()
    }
    /// Mean per channel.
    pub(crate) fn mean(&self) -> Vec<f64> {
        self.sum.iter().map(|s| s / self.count.max(1) as f64).collect()
    }
}

/// `Dense → ReLU → Dense`.
#[derive(Clone, Debug)]
pub struct FMlp {
    pub l1: Dense,
    pub l2: Dense,
}

impl FMlp {
    pub(crate) fn apply(&self, x: &[f32], out: &mut [f32], hidden_rec: &mut Channels) {
        let mut hidden = vec![0f32; self.l1.outputs];
        self.l1.apply(x, &mut hidden);
        for h in &mut hidden {
            *h = h.max(0.0);
        }
        hidden_rec.add(&hidden);
        self.l2.apply(&hidden, out);
    }
}

/// Activation statistics (normalised units) of calibration graphs.
#[derive(Clone, Debug, Default)]
pub struct Ranges {
    pub node_in: Channels,
    pub edge_in: Channels,
    /// Each MLP's hidden layer.
    pub hidden: Parts<Channels, Vec<Channels>>,
    /// Node latents after the encoder and after each round.
    pub h: Vec<Channels>,
    /// Edge latents after the encoder and after each round.
    pub e: Vec<Channels>,
    /// The mean of incoming edges, per round.
    pub agg: Vec<Channels>,
}

impl Ranges {
    fn for_rounds(rounds: usize) -> Ranges {
        Ranges {
            h: vec![Channels::default(); rounds + 1],
            e: vec![Channels::default(); rounds + 1],
            agg: vec![Channels::default(); rounds],
            hidden: Parts {
                edge_mlp: vec![Channels::default(); rounds],
                node_mlp: vec![Channels::default(); rounds],
                ..Parts::default()
            },
            ..Ranges::default()
        }
    }
    pub(crate) fn merge(&mut self, o: &Ranges) {
        self.node_in.merge(&o.node_in);
        self.edge_in.merge(&o.edge_in);
        for (part, theirs) in o.hidden.iter() {
            if let Some(mine) = self.hidden.get_mut(part) {
                mine.merge(theirs);
            }
        }
        for (mine, theirs) in [(&mut self.h, &o.h), (&mut self.e, &o.e), (&mut self.agg, &o.agg)] {
            mine.resize(mine.len().max(theirs.len()), Channels::default());
            for (a, b) in mine.iter_mut().zip(theirs) {
                a.merge(b);
            }
        }
    }
}

/// The trained network in plain `f32`.
#[derive(Clone, Debug)]
pub struct FloatNet {
    pub latent: usize,
    pub radius: f32,
    /// The coarse step's membrane it corrects.
    pub coarse: weft_core::model::CoarseGrain,
    pub norm: Normalizer,
    /// Factor on the corrections ([`crate::learn::network::ModelMeta::gain`]).
    pub gain: f32,
    pub mlps: Parts<FMlp, Vec<FMlp>>,
}

impl FloatNet {
    pub fn from_trained(t: &Trained) -> Result<FloatNet> {
        if t.gnn.field.is_some() {
            anyhow::bail!("a network with the field head (--field-head) is measured in float only, not quantised");
        }
        if t.meta.config.residual_inputs || t.meta.config.newton_inputs > 0 {
            anyhow::bail!(
                "a network that reads the step's residual (--residual-inputs) is measured in float only, not quantised"
            );
        }
        let vars = t.varmap.data().lock().map_err(|_| anyhow::anyhow!("weights lock poisoned"))?;
        let tensor = |name: &str| -> Result<Vec<f32>> {
            let v = vars.get(name).with_context(|| format!("no tensor {name}"))?;
            Ok(v.as_tensor().flatten_all()?.to_vec1::<f32>()?)
        };
        let dense = |name: &str| -> Result<Dense> {
            let v = vars.get(&format!("{name}.weight")).with_context(|| format!("no tensor {name}.weight"))?;
            let (outputs, inputs) = v.as_tensor().dims2()?;
            Ok(Dense { inputs, outputs, w: tensor(&format!("{name}.weight"))?, b: tensor(&format!("{name}.bias"))? })
        };
        let mlp = |part: Part| -> Result<FMlp> {
            Ok(FMlp { l1: dense(&format!("{part}.l1"))?, l2: dense(&format!("{part}.l2"))? })
        };
        let cfg = t.meta.config;
        let mut mlps = build_parts(cfg.rounds, mlp)?;
        // Trained on zeros past the inputs it reads: the same network on
        // the graphs it saw, and one that ignores those inputs on every
        // other.
        let l1 = &mut mlps.node_enc.l1;
        for row in l1.w.chunks_mut(l1.inputs) {
            for (k, w) in row.iter_mut().enumerate() {
                if !cfg.reads_node_input(k) {
                    *w = 0.0;
                }
            }
        }
        let mut norm = t.meta.normalizer.clone();
        if cfg.velocity_only {
            // The position output is not used: zero in every unit.
            norm.target.mean[..3].fill(0.0);
            norm.target.std[..3].fill(0.0);
        }
        if cfg.position_only {
            // Nor a position-only network's velocity output.
            norm.target.mean[3..].fill(0.0);
            norm.target.std[3..].fill(0.0);
        }
        Ok(FloatNet {
            latent: cfg.latent,
            radius: cfg.radius,
            coarse: cfg.coarse_grain(),
            norm,
            gain: t.meta.gain,
            mlps,
        })
    }

    /// Corrections `[Δx, Δv]` per node in physical units; adds the
    /// activation statistics to `rec` when given.
    pub fn forward(&self, g: &Graph, rec: Option<&mut Ranges>) -> Vec<[f32; 6]> {
        let l = self.latent;
        let (n, ne) = (g.nodes.len(), g.edges.len());
        let m = &self.mlps;
        let mut r = Ranges::for_rounds(m.rounds());
        let mut h = vec![0f32; n * l];
        for (i, f) in g.nodes.iter().enumerate() {
            let x: Vec<f32> =
                f.iter().enumerate().map(|(k, &v)| (v - self.norm.node.mean[k]) / self.norm.node.std[k]).collect();
            r.node_in.add(&x);
            m.node_enc.apply(&x, &mut h[i * l..][..l], &mut r.hidden.node_enc);
            r.h[0].add(&h[i * l..][..l]);
        }
        let mut e = vec![0f32; ne * l];
        let mut degree = vec![0f32; n];
        for (k, f) in g.edges.iter().enumerate() {
            let x: Vec<f32> =
                f.iter().enumerate().map(|(j, &v)| (v - self.norm.edge.mean[j]) / self.norm.edge.std[j]).collect();
            r.edge_in.add(&x);
            m.edge_enc.apply(&x, &mut e[k * l..][..l], &mut r.hidden.edge_enc);
            r.e[0].add(&e[k * l..][..l]);
            degree[g.endpoints[k][1] as usize] += 1.0;
        }
        let mut input = vec![0f32; 3 * l];
        let mut delta = vec![0f32; l];
        for (round, (em, nm)) in m.rounds_iter().enumerate() {
            for (k, &[s, rcv]) in g.endpoints.iter().enumerate() {
                input[..l].copy_from_slice(&e[k * l..][..l]);
                input[l..2 * l].copy_from_slice(&h[s as usize * l..][..l]);
                input[2 * l..].copy_from_slice(&h[rcv as usize * l..][..l]);
                em.apply(&input, &mut delta, &mut r.hidden.edge_mlp[round]);
                for (a, d) in e[k * l..][..l].iter_mut().zip(&delta) {
                    *a += d;
                }
                r.e[round + 1].add(&e[k * l..][..l]);
            }
            let mut agg = vec![0f32; n * l];
            for (k, &[_, rcv]) in g.endpoints.iter().enumerate() {
                for (a, x) in agg[rcv as usize * l..][..l].iter_mut().zip(&e[k * l..][..l]) {
                    *a += x;
                }
            }
            for i in 0..n {
                input[..l].copy_from_slice(&h[i * l..][..l]);
                let inv = 1.0 / degree[i].max(1.0);
                for (q, a) in input[l..2 * l].iter_mut().zip(&agg[i * l..][..l]) {
                    *q = a * inv;
                }
                r.agg[round].add(&input[l..2 * l]);
                nm.apply(&input[..2 * l], &mut delta, &mut r.hidden.node_mlp[round]);
                for (a, d) in h[i * l..][..l].iter_mut().zip(&delta) {
                    *a += d;
                }
                r.h[round + 1].add(&h[i * l..][..l]);
            }
        }
        let t = &self.norm.target;
        let mut out = vec![[0f32; 6]; n];
        for (i, o) in out.iter_mut().enumerate() {
            let hi = &h[i * l..][..l];
            let mut y = [0f32; 3];
            m.head_x.apply(hi, &mut y, &mut r.hidden.head_x);
            o[..3].copy_from_slice(&y);
            m.head_v.apply(hi, &mut y, &mut r.hidden.head_v);
            o[3..].copy_from_slice(&y);
            for (k, v) in o.iter_mut().enumerate() {
                *v = (*v * t.std[k] + t.mean[k]) * self.gain;
            }
        }
        if let Some(rec) = rec {
            rec.merge(&r);
        }
        out
    }
}

/// Calibration graphs drawn from the training split by default
/// (`weft quantize --samples`, and every gain `weft gain --int8` judges).
pub const CALIBRATION_SAMPLES: usize = 256;

/// Activation statistics over calibration graphs.
pub fn calibrate(net: &FloatNet, graphs: &[Graph]) -> Ranges {
    let mut r = Ranges::for_rounds(net.mlps.rounds());
    for g in graphs {
        net.forward(g, Some(&mut r));
    }
    r
}

/// `trained` in plain `f32` and its activation statistics on `samples`
/// graphs of the training split of `data` (drawn with a fixed seed, without
/// noise); returns the number of graphs too.
pub fn calibration(trained: &Trained, data: &std::path::Path, samples: usize) -> Result<(FloatNet, Ranges, usize)> {
    let float = FloatNet::from_trained(trained)?;
    let train_set = crate::learn::data::load_split(data, Some("train"))?;
    if train_set.is_empty() {
        // A network trained on its own rollouts (`--teacher coarse`) is
        // calibrated on them: the training scenes' samples.
        let graphs = on_policy_samples(trained, data, samples);
        if graphs.is_empty() {
            anyhow::bail!("no training trajectories in {} (run `weft generate`)", data.display());
        }
        let ranges = calibrate(&float, &graphs);
        return Ok((float, ranges, graphs.len()));
    }
    let mut rng = crate::learn::data::families::Rng::new(0x9a7e);
    let picks = crate::learn::network::samples::picks(&train_set, samples, &mut rng, 0);
    let none = crate::learn::network::Noise { position: 0.0, velocity: 0.0 };
    let graphs = crate::learn::network::samples::samples(&train_set, &picks, &trained.meta.config, none, None, 0)?;
    let ranges = calibrate(&float, &graphs);
    Ok((float, ranges, graphs.len()))
}

/// About `samples` graphs of `trained`'s own rollouts from the starts of
/// the training scenes of `data`'s spec, every tenth frame.
fn on_policy_samples(trained: &Trained, data: &std::path::Path, samples: usize) -> Vec<Graph> {
    use crate::learn::network::teacher::{collect, training_scenes};
    use rayon::prelude::*;
    let spec = crate::learn::data::load_index(data).map(|i| i.spec).unwrap_or_default();
    let scenes = training_scenes(&spec, 4);
    let frames = spec.steps;
    let per = (samples / scenes.len().max(1)).max(1);
    let every = (frames as usize / per).max(1);
    scenes.par_iter().flat_map(|s| collect(s, &trained.meta.config, Some(trained), frames, every)).collect()
}

/// The scale of an int8 channel whose largest magnitude is `max`.
pub(crate) fn scale_of(max: f32) -> f32 {
    if max > 0.0 && max.is_finite() {
        max / 127.0
    } else {
        1.0
    }
}
