//! Float weights and activation ranges to the int8 network: per-channel
//! scales, shifts and the noise they add.
use crate::learn::quantise::float::Channels;
use crate::learn::quantise::float::Dense;
use crate::learn::quantise::float::FMlp;
use crate::learn::quantise::float::FloatNet;
use crate::learn::quantise::float::Ranges;
use anyhow::{bail, Context, Result};
use weft_core::gnn::features::{EDGE_FEATURES, NODE_FEATURES};
use weft_core::gnn::int8::{Input, Output, Part, Parts, MAX_SHIFT};
use weft_weights::format::{LinearData, MlpData, NetworkData};

use crate::learn::network::map_parts;

/// The accumulator (weight) scale of an output whose weights would best
/// take scale `best` (largest magnitude ↦ 127) and whose int8 activation
/// has scale `out`: `out / 2^k` for the largest `k` up to [`MAX_SHIFT`]
/// with `out / 2^k ≥ best`, so the weights fit in int8 and keep at least
/// half its range, and requantising is `acc >> k`. Where even `k = 0` is
/// below `best` (an output whose single largest term exceeds its
/// activation's range) the weights saturate.
pub fn shift_scale(best: f64, out: f64) -> (f64, u8) {
    let k = if best > 0.0 && out > 0.0 && (out / best).is_finite() {
        (out / best).log2().floor().clamp(0.0, MAX_SHIFT as f64) as u8
    } else {
        0
    };
    (out / 2f64.powi(k as i32), k)
}

/// Weight scale of output `o`: input column scales folded in, largest
/// magnitude ↦ 127.
fn weight_scale(d: &Dense, o: usize, cols: &[f32]) -> f64 {
    let m = d.row(o).iter().zip(cols).fold(0f64, |m, (w, c)| m.max((*w as f64 * *c as f64).abs()));
    if m > 0.0 {
        m / 127.0
    } else {
        1.0
    }
}

/// Output `o`'s accumulator scale and shift: [`shift_scale`] to its
/// activation's scale in `out`, or (a head's output, read as int32) the
/// best weight scale.
fn acc_scale_of(d: &Dense, o: usize, cols: &[f32], out: Option<&[f32]>) -> (f64, u8) {
    let best = weight_scale(d, o, cols);
    match out {
        Some(out) => shift_scale(best, out[o] as f64),
        None => (best, 0),
    }
}

/// One layer with input column scales `cols` and output channel scales
/// `out` (`None`: read from the accumulator); returns the layer and its
/// accumulator scale per output.
fn linear(d: &Dense, cols: &[f32], out: Option<&[f32]>, mean: Option<&[f64]>) -> Result<(LinearData, Vec<f64>)> {
    if cols.len() != d.inputs {
        bail!("{} column scales for {} inputs", cols.len(), d.inputs);
    }
    let mut weights = Vec::with_capacity(d.w.len());
    let mut bias = Vec::with_capacity(d.outputs);
    let mut acc_scale = Vec::with_capacity(d.outputs);
    let mut shift = Vec::new();
    for o in 0..d.outputs {
        let (s, k) = acc_scale_of(d, o, cols, out);
        let start = weights.len();
        weights.extend(
            d.row(o).iter().zip(cols).map(|(w, c)| (*w as f64 * *c as f64 / s).round().clamp(-127.0, 127.0) as i8),
        );
        // The weights' rounding moves the output's mean by
        // `Σ (w_q − w) E[x]`: the bias takes it back.
        let shift_of_mean = mean.map_or(0.0, |mean| {
            let q = &weights[start..];
            d.row(o)
                .iter()
                .zip(cols)
                .zip(q)
                .zip(mean)
                .map(|(((w, c), q), m)| (*q as f64 * s / *c as f64 - *w as f64) * m)
                .sum()
        });
        // The shift's rounding: half a unit of the output, in the bias.
        let half = if out.is_some() && k > 0 { 2f64.powi(k as i32 - 1) } else { 0.0 };
        let b = d.b[o] as f64 - shift_of_mean;
        bias.push(((b / s).round() + half).clamp(i32::MIN as f64 / 4.0, i32::MAX as f64 / 4.0) as i32);
        acc_scale.push(s);
        if out.is_some() {
            shift.push(k);
        }
    }
    Ok((LinearData::new(d.inputs, d.outputs, weights, bias, shift), acc_scale))
}

/// `Linear → ReLU → Linear` with column scales `cols`, hidden channel
/// scales `hidden`, output channel scales `out` (`None` for a head) and,
/// for a residual MLP, the old tensor's channel scales.
fn mlp(
    m: &FMlp,
    cols: &[f32],
    hidden: &[f32],
    out: Option<&[f32]>,
    residual: Option<&[f32]>,
    means: Option<(&[f64], &[f64])>,
) -> Result<(MlpData, Vec<f64>)> {
    let (l1, _) = linear(&m.l1, cols, Some(hidden), means.map(|m| m.0))?;
    let (l2, acc) = linear(&m.l2, hidden, out, means.map(|m| m.1))?;
    if let (Some(old), Some(new)) = (residual, out) {
        if old != new {
            bail!("a residual update must keep its latent's scales");
        }
    }
    Ok((MlpData { l1, l2, residual: residual.is_some() }, acc))
}

/// Channel scales of every int8 tensor, from calibration.
struct Scales {
    node_in: Vec<f32>,
    edge_in: Vec<f32>,
    /// Each MLP's hidden layer.
    hidden: Parts<Vec<f32>, Vec<Vec<f32>>>,
    h: Vec<Vec<f32>>,
    e: Vec<Vec<f32>>,
}

impl Scales {
    fn new(net: &FloatNet, r: &Ranges, clip: f32) -> Result<Scales> {
        let rounds = net.mlps.rounds();
        let l = net.latent;
        let ok = r.h.len() == rounds + 1
            && r.e.len() == rounds + 1
            && r.h.iter().chain(&r.e).all(|c| c.max.len() == l)
            && r.node_in.max.len() == NODE_FEATURES
            && r.edge_in.max.len() == EDGE_FEATURES;
        if !ok {
            bail!("calibration statistics do not match the network (calibrate on at least one graph first)");
        }
        // One scale per latent channel for every round (a residual update
        // adds into it without requantising the old latent).
        let all = |v: &[Channels]| {
            let mut every = Channels::default();
            v.iter().for_each(|c| every.merge(c));
            vec![every.clipped(clip); v.len()]
        };
        Ok(Scales {
            node_in: r.node_in.scales(),
            edge_in: r.edge_in.scales(),
            hidden: map_parts(&r.hidden, |_, c| Ok(c.clipped(clip)))?,
            h: all(&r.h),
            e: all(&r.e),
        })
    }
    /// Input columns, output scales (none for a head's int32 output) and
    /// residual scales (the updates') of `part`.
    fn io(&self, part: Part) -> (Vec<f32>, Option<&[f32]>, Option<&[f32]>) {
        let rounds = self.h.len() - 1;
        match part {
            Part::NodeEncoder => (self.node_in.clone(), Some(&self.h[0]), None),
            Part::EdgeEncoder => (self.edge_in.clone(), Some(&self.e[0]), None),
            Part::EdgeUpdate(k) => (self.edge_cols(k), Some(&self.e[k + 1]), Some(&self.e[k])),
            Part::NodeUpdate(k) => (self.node_cols(k), Some(&self.h[k + 1]), Some(&self.h[k])),
            Part::PositionHead | Part::VelocityHead => (self.h[rounds].clone(), None, None),
        }
    }
    /// Input columns of edge update `k`: `[e, h_s, h_r]`.
    fn edge_cols(&self, k: usize) -> Vec<f32> {
        [&self.e[k][..], &self.h[k], &self.h[k]].concat()
    }
    /// Input columns of node update `k`: `[h, mean e]` (the mean keeps the
    /// edges' scales).
    fn node_cols(&self, k: usize) -> Vec<f32> {
        [&self.h[k][..], &self.e[k + 1]].concat()
    }
}

/// Quantises `net` with activation statistics from calibration.
pub fn quantize(net: &FloatNet, r: &Ranges) -> Result<NetworkData> {
    quantize_clipped(net, r, 0.0)
}

/// The calibration means of `part`'s first layer's inputs and of its
/// hidden layer (`None` where the statistics do not cover it).
fn input_means(r: &Ranges, part: Part) -> Option<(Vec<f64>, Vec<f64>)> {
    let rounds = r.agg.len();
    let first = match part {
        Part::NodeEncoder => r.node_in.mean(),
        Part::EdgeEncoder => r.edge_in.mean(),
        Part::EdgeUpdate(k) => {
            let h = r.h.get(k)?.mean();
            [r.e.get(k)?.mean(), h.clone(), h].concat()
        }
        Part::NodeUpdate(k) => [r.h.get(k)?.mean(), r.agg.get(k)?.mean()].concat(),
        Part::PositionHead | Part::VelocityHead => r.h.get(rounds)?.mean(),
    };
    Some((first, r.hidden.get(part)?.mean()))
}

/// [`quantize`] with every hidden and latent channel's scale clipped at
/// `clip` times its RMS over the calibration (0: at its largest
/// magnitude; the inputs keep theirs).
pub fn quantize_clipped(net: &FloatNet, r: &Ranges, clip: f32) -> Result<NetworkData> {
    quantize_with(net, r, Options { clip, bias_correction: false })
}

/// How [`quantize_with`] quantises.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Hidden and latent scales clipped at this many RMS (0: at the
    /// largest magnitude), as [`quantize_clipped`].
    pub clip: f32,
    /// Every layer's bias takes back the mean its rounded weights add on
    /// the calibration inputs, `Σ_j (w_q − w) E[x_j]`: a constant error
    /// of every output, which a velocity correction would integrate into
    /// a drift of the whole cloth.
    pub bias_correction: bool,
}

/// [`quantize`] with the [`Options`].
pub fn quantize_with(net: &FloatNet, r: &Ranges, opts: Options) -> Result<NetworkData> {
    let sc = Scales::new(net, r, opts.clip)?;
    let input = |stats: &crate::learn::network::Stats, s: &[f32], k: usize| Input {
        offset: stats.mean[k],
        gain: 1.0 / (stats.std[k] * s[k]),
    };
    let mut node_in = [Input { offset: 0.0, gain: 0.0 }; NODE_FEATURES];
    for (k, i) in node_in.iter_mut().enumerate() {
        *i = input(&net.norm.node, &sc.node_in, k);
    }
    let mut edge_in = [Input { offset: 0.0, gain: 0.0 }; EDGE_FEATURES];
    for (k, i) in edge_in.iter_mut().enumerate() {
        *i = input(&net.norm.edge, &sc.edge_in, k);
    }
    let quantized = map_parts(&net.mlps, |part, m| {
        let (cols, out, residual) = sc.io(part);
        let hidden = sc.hidden.get(part).context("hidden scales")?;
        let means = if opts.bias_correction { input_means(r, part) } else { None };
        mlp(m, &cols, hidden, out, residual, means.as_ref().map(|(a, b)| (&a[..], &b[..])))
    })?;
    // The heads' accumulator scales become the output scales.
    let (ax, av) = (&quantized.head_x.1, &quantized.head_v.1);
    let t = &net.norm.target;
    let mut out = [Output { scale: 0.0, offset: 0.0 }; 6];
    for (k, o) in out.iter_mut().enumerate() {
        let acc = if k < 3 { ax[k] } else { av[k - 3] };
        let gain = net.gain as f64;
        *o = Output { scale: (acc * t.std[k] as f64 * gain) as f32, offset: (t.mean[k] as f64 * gain) as f32 };
    }
    Ok(NetworkData {
        latent: net.latent,
        radius: net.radius,
        coarse: net.coarse,
        node_in,
        edge_in,
        out,
        mlps: map_parts(&quantized, |_, (m, _)| Ok(m.clone()))?,
    })
}

/// Rounding-noise variance per output of a quantised dense layer's
/// accumulator (real units), for input noise variances `var_in`: the input
/// noise through `W²`, the weight rounding (variance `s_w²/12` per weight,
/// times the inputs' mean square in steps) and the bias rounding.
fn layer_noise(d: &Dense, cols: &[f32], out: Option<&[f32]>, var_in: &[f64], mean_sq: &[f64]) -> Vec<f64> {
    (0..d.outputs)
        .map(|o| {
            let s_w = acc_scale_of(d, o, cols, out).0;
            let through: f64 = d.row(o).iter().zip(var_in).map(|(w, v)| (*w as f64).powi(2) * v).sum();
            let steps_sq: f64 = mean_sq.iter().zip(cols).map(|(m, c)| m / (*c as f64).powi(2)).sum();
            through + s_w * s_w / 12.0 * (steps_sq + 1.0)
        })
        .collect()
}

fn sq12(s: &[f32]) -> Vec<f64> {
    s.iter().map(|&x| (x as f64).powi(2) / 12.0).collect()
}

fn add(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

/// Noise variance of an MLP's output channels (before the output's own
/// rounding, to activation scales `out`, none for a head) for input noise
/// `var_in`.
#[allow(clippy::too_many_arguments)]
fn mlp_noise(
    m: &FMlp,
    cols: &[f32],
    var_in: &[f64],
    mean_sq: &[f64],
    hidden: &[f32],
    hidden_sq: &[f64],
    out: Option<&[f32]>,
) -> Vec<f64> {
    let v1 = add(&layer_noise(&m.l1, cols, Some(hidden), var_in, mean_sq), &sq12(hidden));
    layer_noise(&m.l2, hidden, out, &v1, hidden_sq)
}

/// The standard deviation of `int8 − float` per output (`[Δx, Δv]`,
/// physical units) predicted from the scales: every rounding (inputs,
/// weights, biases, activations, the residual updates, the mean's division)
/// as independent uniform noise of variance `step²/12`, propagated
/// through the float weights (ReLU and the mean do not grow it); inputs
/// within the calibration ranges (no saturation).
pub fn noise_estimate(net: &FloatNet, r: &Ranges) -> Result<[f32; 6]> {
    let sc = Scales::new(net, r, 0.0)?;
    let ms = |c: &Channels| c.mean_sq();
    // An encoder: its inputs' quantisation noise in, its output rounded.
    let encoder = |m: &FMlp, cols: &[f32], input: &Channels, hidden: &[f32], hidden_stats: &Channels, out: &[f32]| {
        add(&mlp_noise(m, cols, &sq12(cols), &ms(input), hidden, &ms(hidden_stats), Some(out)), &sq12(out))
    };
    let (m, hs, hr) = (&net.mlps, &sc.hidden, &r.hidden);
    let mut vh = encoder(&m.node_enc, &sc.node_in, &r.node_in, &hs.node_enc, &hr.node_enc, &sc.h[0]);
    let mut ve = encoder(&m.edge_enc, &sc.edge_in, &r.edge_in, &hs.edge_enc, &hr.edge_enc, &sc.e[0]);
    for k in 0..m.rounds() {
        let var_in = [&ve[..], &vh, &vh].concat();
        let ms_in = [ms(&r.e[k]), ms(&r.h[k]), ms(&r.h[k])].concat();
        let out = Some(&sc.e[k + 1][..]);
        let de =
            mlp_noise(&m.edge_mlp[k], &sc.edge_cols(k), &var_in, &ms_in, &hs.edge_mlp[k], &ms(&hr.edge_mlp[k]), out);
        // One rounding: the update's shift (the old latent keeps its scale).
        ve = add(&add(&ve, &de), &sq12(&sc.e[k + 1]));
        let var_in = [&vh[..], &add(&ve, &sq12(&sc.e[k + 1]))].concat();
        let ms_in = [ms(&r.h[k]), ms(&r.agg[k])].concat();
        let out = Some(&sc.h[k + 1][..]);
        let dh =
            mlp_noise(&m.node_mlp[k], &sc.node_cols(k), &var_in, &ms_in, &hs.node_mlp[k], &ms(&hr.node_mlp[k]), out);
        vh = add(&add(&vh, &dh), &sq12(&sc.h[k + 1]));
    }
    let rounds = m.rounds();
    let ms_h = ms(&r.h[rounds]);
    let vx = mlp_noise(&m.head_x, &sc.h[rounds], &vh, &ms_h, &hs.head_x, &ms(&hr.head_x), None);
    let vv = mlp_noise(&m.head_v, &sc.h[rounds], &vh, &ms_h, &hs.head_v, &ms(&hr.head_v), None);
    let t = &net.norm.target;
    let mut out = [0f32; 6];
    for k in 0..6 {
        out[k] = (if k < 3 { vx[k] } else { vv[k - 3] }).sqrt() as f32 * t.std[k] * net.gain.abs();
    }
    Ok(out)
}
