//! A trained network on disk: its meta-data, weights and format versions.
use crate::learn::network::config::GnnConfig;
use crate::learn::network::config::Noise;
use crate::learn::network::config::Normalizer;
use crate::learn::network::config::Stats;
use crate::learn::network::graph::Graph;
use crate::learn::network::model::Gnn;
use std::path::Path;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use serde::{Deserialize, Serialize};
use weft_core::gnn::features::{
    historyless_column, BASE_NODE_FEATURES, EDGE_FEATURES, HISTORYLESS_NODE_FEATURES, MATERIAL_NODE_FEATURES,
    NODE_FEATURES, STEP_NODE_FEATURES,
};
use weft_core::prelude::*;

/// A trained network with everything needed to use it.
pub struct Trained {
    pub varmap: VarMap,
    pub gnn: Gnn,
    pub meta: ModelMeta,
}

/// What travels with the weights (`*.json` beside `*.safetensors`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ModelMeta {
    pub format: String,
    pub config: GnnConfig,
    pub normalizer: Normalizer,
    pub noise: Noise,
    /// Adam steps taken.
    pub steps: usize,
    pub train_loss: f32,
    pub val_loss: f32,
    pub parameters: usize,
    /// Factor on the network's corrections when it is used (chosen on
    /// validation rollouts by `weft gain`; 1 = as trained). Training does
    /// not use it.
    #[serde(default = "unit_gain")]
    pub gain: f32,
    /// Mean corrected position RMSE (m) of rollouts on the validation
    /// trajectories when this model was saved (training keeps the model
    /// with the lowest).
    #[serde(default)]
    pub val_rollout: Option<f32>,
}

impl ModelMeta {
    /// The metadata of a new, untrained network.
    pub fn new(config: GnnConfig, normalizer: Normalizer, noise: Noise) -> ModelMeta {
        ModelMeta {
            format: MODEL_FORMAT.into(),
            config,
            normalizer,
            noise,
            steps: 0,
            train_loss: 0.0,
            val_loss: 0.0,
            parameters: 0,
            gain: 1.0,
            val_rollout: None,
        }
    }
}

fn unit_gain() -> f32 {
    1.0
}

pub const MODEL_FORMAT: &str = "weft-gnn-f32-5";

/// The earlier formats, still read, with the node features their networks
/// know, in the layout before the history ([`historyless_column`]): the
/// first [`BASE_NODE_FEATURES`], then the material's
/// [`MATERIAL_NODE_FEATURES`], then the step's velocity change
/// [`STEP_NODE_FEATURES`], then the air's [`HISTORYLESS_NODE_FEATURES`]; loaded with zero weights
/// (and unit statistics) on the others, which computes what they computed.
pub const EARLIER_MODEL_FORMATS: [(&str, usize); 4] = [
    ("weft-gnn-f32-1", BASE_NODE_FEATURES),
    ("weft-gnn-f32-2", MATERIAL_NODE_FEATURES),
    ("weft-gnn-f32-3", STEP_NODE_FEATURES),
    ("weft-gnn-f32-4", HISTORYLESS_NODE_FEATURES),
];

impl Trained {
    pub fn new(meta: ModelMeta, dev: &Device) -> Result<Trained> {
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, dev);
        let gnn = Gnn::new(vb, meta.config)?;
        Ok(Trained { varmap, gnn, meta })
    }

    /// A new network whose initial weights come from `seed` (candle's own
    /// initialisation draws from an unseeded stream): each layer's weights
    /// normal with variance 2 / fan-in (Kaiming, for ReLU) and its biases
    /// uniform within ±1/√fan-in, as `candle_nn::linear` draws them, in the
    /// order of the weights' names. The same seed gives the same network.
    pub fn seeded(meta: ModelMeta, seed: u64, dev: &Device) -> Result<Trained> {
        let t = Trained::new(meta, dev)?;
        let vars = t.varmap.data().lock().map_err(|_| anyhow::anyhow!("the weights' lock is poisoned"))?;
        let mut names: Vec<&String> = vars.keys().collect();
        names.sort();
        let mut rng = crate::learn::data::families::Rng::new(seed ^ 0x5EED_0F14);
        let fan_in = |name: &str| -> Result<usize> {
            let w = name.strip_suffix(".bias").map(|l| format!("{l}.weight")).unwrap_or_else(|| name.to_string());
            Ok(vars.get(&w).with_context(|| format!("no {w}"))?.dims().last().copied().unwrap_or(1).max(1))
        };
        for name in names {
            let var = &vars[name];
            let k = fan_in(name)? as f32;
            let vals: Vec<f32> = (0..var.elem_count())
                .map(|_| match name.ends_with(".bias") {
                    true => rng.range(-1.0, 1.0) / k.sqrt(),
                    false => rng.normal() * (2.0 / k).sqrt(),
                })
                .collect();
            var.set(&Tensor::from_vec(vals, var.shape(), dev)?)?;
        }
        drop(vars);
        Ok(t)
    }

    /// Sets the last layer of both heads to zero: a new network that
    /// corrects nothing (its output is the targets' mean) instead of one
    /// whose random corrections are several times the targets' size.
    pub fn zero_heads(&self) -> Result<()> {
        let vars = self.varmap.data().lock().map_err(|_| anyhow::anyhow!("the weights' lock is poisoned"))?;
        for head in [weft_core::gnn::int8::Part::PositionHead, weft_core::gnn::int8::Part::VelocityHead] {
            for what in ["weight", "bias"] {
                let name = format!("{head}.l2.{what}");
                let var = vars.get(&name).with_context(|| format!("no {name}"))?;
                var.set(&var.as_tensor().zeros_like()?)?;
            }
        }
        // The field head's output layer too, so a fresh network predicts zero.
        for what in ["weight", "bias"] {
            if let Some(var) = vars.get(&format!("field.l2.{what}")) {
                var.set(&var.as_tensor().zeros_like()?)?;
            }
        }
        Ok(())
    }

    /// Loads `stem.safetensors` and `stem.json`.
    pub fn load(stem: &Path, dev: &Device) -> Result<Trained> {
        let json = stem.with_extension("json");
        let value: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&json)
                .with_context(|| format!("reading {} (train a model first)", json.display()))?,
        )
        .with_context(|| format!("{} is not JSON", json.display()))?;
        let crc = value.get("weights_crc32").and_then(|c| c.as_u64());
        let meta: ModelMeta = serde_json::from_value(value).with_context(|| format!("reading {}", json.display()))?;
        let known = match EARLIER_MODEL_FORMATS.iter().find(|(f, _)| *f == meta.format) {
            Some(&(_, k)) => Some(k),
            None if meta.format == MODEL_FORMAT => None,
            None => bail!("{}: format {} is not {MODEL_FORMAT}", json.display(), meta.format),
        };
        let mut meta = meta;
        if let Some(known) = known {
            let node = &mut meta.normalizer.node;
            if node.mean.len() != known || node.std.len() != known {
                bail!("{}: {} node statistics, format {} has {known}", json.display(), node.mean.len(), meta.format);
            }
            let (mut mean, mut std) = (vec![0.0; NODE_FEATURES], vec![1.0; NODE_FEATURES]);
            for k in 0..known {
                (mean[historyless_column(k)], std[historyless_column(k)]) = (node.mean[k], node.std[k]);
            }
            (node.mean, node.std) = (mean, std);
            meta.format = MODEL_FORMAT.into();
        }
        let mut t = Trained::new(meta, dev)?;
        let weights = stem.with_extension("safetensors");
        if let Some(stored) = crc {
            let bytes = std::fs::read(&weights).with_context(|| format!("reading {}", weights.display()))?;
            let computed = crc32fast::hash(&bytes);
            if computed as u64 != stored {
                bail!(
                    "{}: its weights' CRC-32 is {computed}, {} was written with {stored}: the pair is not one model (a write that was cut short?)",
                    weights.display(),
                    json.display()
                );
            }
        }
        match known {
            Some(known) => {
                for (name, w) in candle_core::safetensors::load(&weights, dev)? {
                    let w = if name == "node_enc.l1.weight" {
                        let rows = w.dim(0)?;
                        let old = w.to_dtype(DType::F32)?.to_vec2::<f32>()?;
                        let mut new = vec![0f32; rows * NODE_FEATURES];
                        for (row, out) in old.iter().zip(new.chunks_exact_mut(NODE_FEATURES)) {
                            for (k, &v) in row.iter().enumerate().take(known) {
                                out[historyless_column(k)] = v;
                            }
                        }
                        Tensor::from_vec(new, (rows, NODE_FEATURES), dev)?
                    } else {
                        w
                    };
                    t.varmap.set_one(&name, w).with_context(|| format!("{}: {name}", weights.display()))?;
                }
            }
            None => t.varmap.load(weights)?,
        }
        Ok(t)
    }

    /// Writes `stem.safetensors`, then `stem.json` with the weights'
    /// CRC-32, each whole or not at all (`crate::sim::files`): a reader
    /// finds the pair as it was or as it is, and [`Trained::load`] refuses
    /// a pair whose weights are not the ones the meta-data was written with.
    pub fn save(&self, stem: &Path) -> Result<()> {
        let weights = {
            let data = self.varmap.data().lock().map_err(|_| anyhow::anyhow!("the weights' lock is poisoned"))?;
            let mut named: Vec<(&String, &Tensor)> = data.iter().map(|(k, v)| (k, v.as_tensor())).collect();
            named.sort_by_key(|x| x.0);
            safetensors::serialize(named, None)?
        };
        crate::sim::files::write_atomic(&stem.with_extension("safetensors"), &weights)?;
        let mut json = serde_json::to_value(&self.meta)?;
        json["weights_crc32"] = crc32fast::hash(&weights).into();
        crate::sim::files::write_json(&stem.with_extension("json"), &json)
    }

    /// A freshly initialised network with identity normalisation (for
    /// measuring cost and shape; its outputs mean nothing).
    pub fn untrained(config: GnnConfig, dev: &Device) -> Result<Trained> {
        let unit = |k: usize| Stats { mean: vec![0.0; k], std: vec![1.0; k] };
        let normalizer = Normalizer { node: unit(NODE_FEATURES), edge: unit(EDGE_FEATURES), target: unit(6) };
        Trained::new(ModelMeta::new(config, normalizer, Noise { position: 0.0, velocity: 0.0 }), dev)
    }

    /// The corrections `(Δx, Δv)` as used: the network's, times
    /// [`ModelMeta::gain`].
    pub fn correct(&self, g: &Graph, dev: &Device) -> Result<(Vec<Vec3>, Vec<Vec3>)> {
        let (mut dx, mut dv) = self.gnn.correct(g, &self.meta.normalizer, dev)?;
        for d in dx.iter_mut().chain(dv.iter_mut()) {
            *d = *d * self.meta.gain;
        }
        Ok((dx, dv))
    }

    pub fn parameters(&self) -> usize {
        self.varmap.all_vars().iter().map(|v| v.elem_count()).sum()
    }
}
