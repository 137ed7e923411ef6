//! `weft quantize`: post-training int8 quantisation of the float network.
//!
//! [`FloatNet`] is the trained network in plain `f32` (the same arithmetic
//! as the candle model, without the tensor library), which records the
//! largest magnitude of every activation tensor on calibration graphs
//! ([`Ranges`]). [`quantize`] turns weights and ranges into the int8
//! network of `weft_core::gnn::int8` (see there for the arithmetic) as a
//! [`NetworkData`] for the `weights/` file.

use anyhow::{bail, Context, Result};
use weft_core::gnn::features::{EDGE_FEATURES, NODE_FEATURES};
use weft_core::gnn::int8::{Input, Output, Requant};
use weft_weights::format::{LinearData, MlpData, NetworkData};

use crate::gnn::{Graph, Normalizer, Trained};

/// A dense layer `y = W x + b`, `W` row-major `[outputs][inputs]`.
#[derive(Clone, Debug)]
pub struct Dense {
    pub inputs: usize,
    pub outputs: usize,
    pub w: Vec<f32>,
    pub b: Vec<f32>,
}

impl Dense {
    fn apply(&self, x: &[f32], out: &mut [f32]) {
        for (o, y) in out.iter_mut().enumerate().take(self.outputs) {
            let row = &self.w[o * self.inputs..][..self.inputs];
            *y = self.b[o] + row.iter().zip(x).map(|(a, b)| a * b).sum::<f32>();
        }
    }
}

/// `Dense → ReLU → Dense`.
#[derive(Clone, Debug)]
pub struct FMlp {
    pub l1: Dense,
    pub l2: Dense,
}

impl FMlp {
    /// Output into `out`, returning the hidden layer's largest value.
    fn apply(&self, x: &[f32], out: &mut [f32]) -> f32 {
        let mut hidden = vec![0f32; self.l1.outputs];
        self.l1.apply(x, &mut hidden);
        let mut m = 0f32;
        for h in &mut hidden {
            *h = h.max(0.0);
            m = m.max(*h);
        }
        self.l2.apply(&hidden, out);
        m
    }
}

/// Largest magnitudes of the activations (normalised units).
#[derive(Clone, Debug, Default)]
pub struct Ranges {
    pub node_in: [f32; NODE_FEATURES],
    pub edge_in: [f32; EDGE_FEATURES],
    pub node_enc_hidden: f32,
    pub edge_enc_hidden: f32,
    /// Node latents after the encoder and after each round.
    pub h: Vec<f32>,
    /// Edge latents after the encoder and after each round.
    pub e: Vec<f32>,
    pub edge_hidden: Vec<f32>,
    pub node_hidden: Vec<f32>,
    pub head_x_hidden: f32,
    pub head_v_hidden: f32,
}

fn max_abs(xs: &[f32]) -> f32 {
    xs.iter().fold(0f32, |m, x| m.max(x.abs()))
}

/// The trained network in plain `f32`.
#[derive(Clone, Debug)]
pub struct FloatNet {
    pub latent: usize,
    pub radius: f32,
    pub norm: Normalizer,
    pub node_enc: FMlp,
    pub edge_enc: FMlp,
    pub edge_mlp: Vec<FMlp>,
    pub node_mlp: Vec<FMlp>,
    pub head_x: FMlp,
    pub head_v: FMlp,
}

impl FloatNet {
    pub fn from_trained(t: &Trained) -> Result<FloatNet> {
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
        let mlp = |name: &str| -> Result<FMlp> {
            Ok(FMlp { l1: dense(&format!("{name}.l1"))?, l2: dense(&format!("{name}.l2"))? })
        };
        let cfg = t.meta.config;
        Ok(FloatNet {
            latent: cfg.latent,
            radius: cfg.radius,
            norm: t.meta.normalizer.clone(),
            node_enc: mlp("node_enc")?,
            edge_enc: mlp("edge_enc")?,
            edge_mlp: (0..cfg.rounds).map(|r| mlp(&format!("edge_mlp{r}"))).collect::<Result<_>>()?,
            node_mlp: (0..cfg.rounds).map(|r| mlp(&format!("node_mlp{r}"))).collect::<Result<_>>()?,
            head_x: mlp("head_x")?,
            head_v: mlp("head_v")?,
        })
    }

    /// Corrections `[Δx, Δv]` per node in physical units; records the
    /// activation ranges into `rec` when given.
    pub fn forward(&self, g: &Graph, rec: Option<&mut Ranges>) -> Vec<[f32; 6]> {
        let l = self.latent;
        let (n, ne) = (g.nodes.len(), g.edges.len());
        let mut ranges = Ranges::default();
        let mut h = vec![0f32; n * l];
        for (i, f) in g.nodes.iter().enumerate() {
            let x: Vec<f32> =
                f.iter().enumerate().map(|(k, &v)| (v - self.norm.node.mean[k]) / self.norm.node.std[k]).collect();
            for (k, v) in x.iter().enumerate() {
                ranges.node_in[k] = ranges.node_in[k].max(v.abs());
            }
            let m = self.node_enc.apply(&x, &mut h[i * l..][..l]);
            ranges.node_enc_hidden = ranges.node_enc_hidden.max(m);
        }
        let mut e = vec![0f32; ne * l];
        let mut degree = vec![0f32; n];
        for (k, f) in g.edges.iter().enumerate() {
            let x: Vec<f32> =
                f.iter().enumerate().map(|(j, &v)| (v - self.norm.edge.mean[j]) / self.norm.edge.std[j]).collect();
            for (j, v) in x.iter().enumerate() {
                ranges.edge_in[j] = ranges.edge_in[j].max(v.abs());
            }
            let m = self.edge_enc.apply(&x, &mut e[k * l..][..l]);
            ranges.edge_enc_hidden = ranges.edge_enc_hidden.max(m);
            degree[g.endpoints[k][1] as usize] += 1.0;
        }
        ranges.h.push(max_abs(&h));
        ranges.e.push(max_abs(&e));
        let mut input = vec![0f32; 3 * l];
        let mut delta = vec![0f32; l];
        for (em, nm) in self.edge_mlp.iter().zip(&self.node_mlp) {
            let mut hid = 0f32;
            for (k, &[s, r]) in g.endpoints.iter().enumerate() {
                input[..l].copy_from_slice(&e[k * l..][..l]);
                input[l..2 * l].copy_from_slice(&h[s as usize * l..][..l]);
                input[2 * l..].copy_from_slice(&h[r as usize * l..][..l]);
                hid = hid.max(em.apply(&input, &mut delta));
                for (a, d) in e[k * l..][..l].iter_mut().zip(&delta) {
                    *a += d;
                }
            }
            ranges.edge_hidden.push(hid);
            ranges.e.push(max_abs(&e));
            let mut agg = vec![0f32; n * l];
            for (k, &[_, r]) in g.endpoints.iter().enumerate() {
                for (a, x) in agg[r as usize * l..][..l].iter_mut().zip(&e[k * l..][..l]) {
                    *a += x;
                }
            }
            let mut hid = 0f32;
            for i in 0..n {
                input[..l].copy_from_slice(&h[i * l..][..l]);
                let inv = 1.0 / degree[i].max(1.0);
                for (q, a) in input[l..2 * l].iter_mut().zip(&agg[i * l..][..l]) {
                    *q = a * inv;
                }
                hid = hid.max(nm.apply(&input[..2 * l], &mut delta));
                for (a, d) in h[i * l..][..l].iter_mut().zip(&delta) {
                    *a += d;
                }
            }
            ranges.node_hidden.push(hid);
            ranges.h.push(max_abs(&h));
        }
        let t = &self.norm.target;
        let mut out = vec![[0f32; 6]; n];
        for (i, o) in out.iter_mut().enumerate() {
            let hi = &h[i * l..][..l];
            let mut y = [0f32; 3];
            ranges.head_x_hidden = ranges.head_x_hidden.max(self.head_x.apply(hi, &mut y));
            o[..3].copy_from_slice(&y);
            ranges.head_v_hidden = ranges.head_v_hidden.max(self.head_v.apply(hi, &mut y));
            o[3..].copy_from_slice(&y);
            for (k, v) in o.iter_mut().enumerate() {
                *v = *v * t.std[k] + t.mean[k];
            }
        }
        if let Some(r) = rec {
            r.merge(&ranges);
        }
        out
    }
}

impl Ranges {
    fn merge(&mut self, o: &Ranges) {
        let mx = |a: &mut f32, b: f32| *a = a.max(b);
        for (a, b) in self.node_in.iter_mut().zip(&o.node_in) {
            mx(a, *b);
        }
        for (a, b) in self.edge_in.iter_mut().zip(&o.edge_in) {
            mx(a, *b);
        }
        mx(&mut self.node_enc_hidden, o.node_enc_hidden);
        mx(&mut self.edge_enc_hidden, o.edge_enc_hidden);
        mx(&mut self.head_x_hidden, o.head_x_hidden);
        mx(&mut self.head_v_hidden, o.head_v_hidden);
        for (mine, theirs) in [
            (&mut self.h, &o.h),
            (&mut self.e, &o.e),
            (&mut self.edge_hidden, &o.edge_hidden),
            (&mut self.node_hidden, &o.node_hidden),
        ] {
            mine.resize(mine.len().max(theirs.len()), 0.0);
            for (a, b) in mine.iter_mut().zip(theirs) {
                mx(a, *b);
            }
        }
    }
}

/// `real` as a Q31 multiplier and shift (`real = m · 2^(shift − 31)`).
pub fn requant(real: f64) -> Result<Requant> {
    if real == 0.0 {
        return Ok(Requant::ZERO);
    }
    if !(real.is_finite() && real > 0.0) {
        bail!("requantisation factor {real} is not a positive number");
    }
    let mut shift = real.log2().floor() as i32 + 1; // real / 2^shift in [0.5, 1)
    let mut m = (real / 2f64.powi(shift) * 2f64.powi(31)).round() as i64;
    if m >= 1 << 31 {
        m /= 2;
        shift += 1;
    }
    if m < 1 << 30 {
        m *= 2;
        shift -= 1;
    }
    if !(-31..=30).contains(&shift) {
        bail!("requantisation factor {real} is out of range");
    }
    Ok(Requant { multiplier: m as i32, shift: shift as i8 })
}

/// The scale of an int8 tensor whose largest magnitude is `max`.
fn scale_of(max: f32) -> f32 {
    if max > 0.0 && max.is_finite() {
        max / 127.0
    } else {
        1.0
    }
}

/// One layer: input column scales folded into the weights, one weight scale
/// per output channel; returns the layer and its accumulator scales.
fn linear(d: &Dense, cols: &[f32], out_scale: Option<f32>) -> Result<(LinearData, Vec<f64>)> {
    if cols.len() != d.inputs {
        bail!("{} column scales for {} inputs", cols.len(), d.inputs);
    }
    let mut weights = Vec::with_capacity(d.w.len());
    let mut bias = Vec::with_capacity(d.outputs);
    let mut acc_scale = Vec::with_capacity(d.outputs);
    let mut rq = Vec::new();
    for o in 0..d.outputs {
        let row: Vec<f64> = (0..d.inputs).map(|k| d.w[o * d.inputs + k] as f64 * cols[k] as f64).collect();
        let m = row.iter().fold(0f64, |m, x| m.max(x.abs()));
        let s = if m > 0.0 { m / 127.0 } else { 1.0 };
        weights.extend(row.iter().map(|w| (w / s).round().clamp(-127.0, 127.0) as i8));
        bias.push((d.b[o] as f64 / s).round().clamp(i32::MIN as f64 / 4.0, i32::MAX as f64 / 4.0) as i32);
        acc_scale.push(s);
        if let Some(out) = out_scale {
            rq.push(requant(s / out as f64)?);
        }
    }
    Ok((LinearData { inputs: d.inputs, outputs: d.outputs, weights, bias, requant: rq }, acc_scale))
}

/// `Linear → ReLU → Linear` with column scales `cols` and output scale `out`
/// (`None` for a head); `residual` is the old tensor's scale.
fn mlp(m: &FMlp, cols: &[f32], hidden: f32, out: Option<f32>, residual: Option<f32>) -> Result<(MlpData, Vec<f64>)> {
    let s_hidden = scale_of(hidden);
    let (l1, _) = linear(&m.l1, cols, Some(s_hidden))?;
    let (l2, acc) = linear(&m.l2, &vec![s_hidden; m.l2.inputs], out)?;
    let residual = match (residual, out) {
        (Some(old), Some(new)) => Some(requant(old as f64 / new as f64)?),
        _ => None,
    };
    Ok((MlpData { l1, l2, residual }, acc))
}

/// Quantises `net` with activation ranges from calibration.
pub fn quantize(net: &FloatNet, r: &Ranges) -> Result<NetworkData> {
    let l = net.latent;
    let rounds = net.edge_mlp.len();
    if r.h.len() != rounds + 1 || r.e.len() != rounds + 1 {
        bail!("calibration ranges do not match the network (run calibration first)");
    }
    let s_node_in: Vec<f32> = r.node_in.iter().map(|&m| scale_of(m)).collect();
    let s_edge_in: Vec<f32> = r.edge_in.iter().map(|&m| scale_of(m)).collect();
    let s_h: Vec<f32> = r.h.iter().map(|&m| scale_of(m)).collect();
    let s_e: Vec<f32> = r.e.iter().map(|&m| scale_of(m)).collect();
    let input = |stats: &crate::gnn::Stats, s: &[f32], k: usize| Input {
        offset: stats.mean[k],
        gain: 1.0 / (stats.std[k] * s[k]),
    };
    let mut node_in = [Input { offset: 0.0, gain: 0.0 }; NODE_FEATURES];
    for (k, i) in node_in.iter_mut().enumerate() {
        *i = input(&net.norm.node, &s_node_in, k);
    }
    let mut edge_in = [Input { offset: 0.0, gain: 0.0 }; EDGE_FEATURES];
    for (k, i) in edge_in.iter_mut().enumerate() {
        *i = input(&net.norm.edge, &s_edge_in, k);
    }
    let (node_enc, _) = mlp(&net.node_enc, &s_node_in, r.node_enc_hidden, Some(s_h[0]), None)?;
    let (edge_enc, _) = mlp(&net.edge_enc, &s_edge_in, r.edge_enc_hidden, Some(s_e[0]), None)?;
    let mut edge_mlp = Vec::new();
    let mut node_mlp = Vec::new();
    for k in 0..rounds {
        let cols: Vec<f32> = [vec![s_e[k]; l], vec![s_h[k]; 2 * l]].concat();
        edge_mlp.push(mlp(&net.edge_mlp[k], &cols, r.edge_hidden[k], Some(s_e[k + 1]), Some(s_e[k]))?.0);
        let cols: Vec<f32> = [vec![s_h[k]; l], vec![s_e[k + 1]; l]].concat();
        node_mlp.push(mlp(&net.node_mlp[k], &cols, r.node_hidden[k], Some(s_h[k + 1]), Some(s_h[k]))?.0);
    }
    let cols = vec![s_h[rounds]; l];
    let (head_x, ax) = mlp(&net.head_x, &cols, r.head_x_hidden, None, None)?;
    let (head_v, av) = mlp(&net.head_v, &cols, r.head_v_hidden, None, None)?;
    let t = &net.norm.target;
    let mut out = [Output { scale: 0.0, offset: 0.0 }; 6];
    for (k, o) in out.iter_mut().enumerate() {
        let acc = if k < 3 { ax[k] } else { av[k - 3] };
        *o = Output { scale: (acc * t.std[k] as f64) as f32, offset: t.mean[k] };
    }
    Ok(NetworkData {
        latent: l,
        radius: net.radius,
        node_in,
        edge_in,
        out,
        node_enc,
        edge_enc,
        edge_mlp,
        node_mlp,
        head_x,
        head_v,
    })
}

/// Activation ranges over calibration graphs.
pub fn calibrate(net: &FloatNet, graphs: &[Graph]) -> Ranges {
    let mut r = Ranges::default();
    for g in graphs {
        net.forward(g, Some(&mut r));
    }
    r
}

/// Reads and validates a model file (`weights/weft-gnn.q8`).
pub fn load(path: &std::path::Path) -> Result<NetworkData> {
    let bytes =
        std::fs::read(path).with_context(|| format!("reading {} (run `weft quantize` to make it)", path.display()))?;
    NetworkData::from_bytes(&bytes).with_context(|| format!("model file {}", path.display()))
}

/// The int8 network with heap scratch for one mesh size.
pub struct Int8Corrector<'n> {
    pub net: &'n NetworkData,
    latents: Vec<i8>,
    sums: Vec<i32>,
}

impl<'n> Int8Corrector<'n> {
    /// Scratch for `model`'s mesh and `pairs` dynamic pairs.
    pub fn new(net: &'n NetworkData, counts: weft_core::mesh::MeshCounts, pairs: usize) -> Int8Corrector<'n> {
        let s = weft_core::gnn::int8::ScratchSizes::new(counts, pairs, net.latent);
        Int8Corrector { net, latents: vec![0; s.latents], sums: vec![0; s.sums] }
    }

    /// [`weft_core::gnn::int8::correct`] after a physics step.
    pub fn correct(
        &mut self,
        model: &weft_core::model::Model,
        state: &mut weft_core::state::State,
    ) -> Result<weft_core::gnn::int8::CorrectionReport> {
        let mut scratch = weft_core::gnn::int8::Scratch { latents: &mut self.latents, sums: &mut self.sums };
        self.net
            .with_network(|net| weft_core::gnn::int8::correct(model, state, net, &mut scratch))
            .map_err(|e| anyhow::anyhow!("int8 correction: {e}"))
    }
}
