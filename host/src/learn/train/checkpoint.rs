//! A training run's checkpoint: one file, `STEM.ckpt`, holding everything
//! the run needs to go on as if it had not stopped — the weights, the
//! model's meta-data (configuration, normaliser, step), Adam's moments
//! and step count, the sample draws' random stream, the best model so far
//! by validation, the log and the loss sums since its last entry, and for
//! on-policy training the buffer's slots. It is a safetensors file (the
//! weights and moments as tensors, the rest as JSON in its header) with a
//! CRC-32 over all of it, written to a temporary name and renamed
//! (`crate::sim::files::write_durable`): a reader finds the previous
//! checkpoint or the new one, and a file that is cut short or does not
//! match its checksum or its network is refused with a
//! [`CheckpointError`] naming it.
//!
//! The on-policy buffer's samples are large and change by a refill at a
//! time, so they live beside it, one file a refill
//! (`STEM.buffer/STEP.safetensors`, written once, atomically, before any
//! checkpoint names it); the checkpoint names the refill and index of
//! every slot, and files no checkpoint names any more are removed after
//! the next one is written.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use candle_core::{Device, Tensor};
use safetensors::tensor::{Dtype, TensorView};
use serde::{Deserialize, Serialize};

use crate::learn::data::families::Family;
use crate::learn::network::{FrameClass, Graph, ModelMeta, Trained};
use crate::learn::train::adam::Adam;
use crate::learn::train::TrainLog;
use crate::sim::files;
use weft_core::gnn::features::{EDGE_FEATURES, NODE_FEATURES};
use weft_core::mesh::NodeId;

/// The checkpoint format this build writes and reads.
pub const CHECKPOINT_FORMAT: &str = "weft-checkpoint-1";

/// The buffer samples' file format.
pub const BUFFER_FORMAT: &str = "weft-buffer-1";

/// Why a checkpoint was refused.
#[derive(Debug)]
pub struct CheckpointError {
    pub path: PathBuf,
    pub fault: String,
}

impl std::fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "checkpoint {}: {}", self.path.display(), self.fault)
    }
}

impl std::error::Error for CheckpointError {}

fn refuse(path: &Path, fault: impl Into<String>) -> anyhow::Error {
    CheckpointError { path: path.to_path_buf(), fault: fault.into() }.into()
}

/// Where a run stands, beside its weights and optimizer.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Progress {
    /// Training steps taken.
    pub step: usize,
    /// The state of the sample draws' random stream.
    pub rng: u64,
    /// The best model so far by validation: its step and error (bits of
    /// the `f32`, infinity for none).
    pub best_step: usize,
    pub best_error_bits: u32,
    /// The log so far (without the time).
    pub log: TrainLog,
    /// Sums since the log's last entry: one-step loss, rollout loss, and
    /// their count.
    pub acc: (f32, f32, usize),
    /// The on-policy buffer's slots.
    pub buffer: Option<Slots>,
}

impl Progress {
    pub fn best(&self) -> (usize, f32) {
        (self.best_step, f32::from_bits(self.best_error_bits))
    }
    pub fn set_best(&mut self, (step, error): (usize, f32)) {
        (self.best_step, self.best_error_bits) = (step, error.to_bits());
    }
}

/// The on-policy buffer: its capacity, the slot replaced next, and every
/// slot's sample as `(refill, index in that refill's file)`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Slots {
    pub capacity: usize,
    pub next: usize,
    pub slots: Vec<(u64, u32)>,
}

/// The checkpoint of `stem`.
pub fn path(stem: &Path) -> PathBuf {
    stem.with_extension("ckpt")
}

/// The folder of `stem`'s buffer files.
pub fn buffer_dir(stem: &Path) -> PathBuf {
    stem.with_extension("buffer")
}

/// `f32` data as a safetensors view's bytes.
fn le_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A safetensors file of named `f32` tensors `(name, shape, data)` and
/// `meta`, with a `crc32` entry over the tensors' bytes and the meta-data.
fn serialize(tensors: &[(String, Vec<usize>, Vec<f32>)], mut meta: HashMap<String, String>) -> Result<Vec<u8>> {
    let bytes: Vec<Vec<u8>> = tensors.iter().map(|(_, _, d)| le_bytes(d)).collect();
    meta.insert(
        "crc32".into(),
        checksum(tensors.iter().map(|t| t.0.as_str()).zip(bytes.iter().map(|b| &b[..])), &meta).to_string(),
    );
    let views = tensors
        .iter()
        .zip(&bytes)
        .map(|((n, s, _), b)| Ok((n.clone(), TensorView::new(Dtype::F32, s.clone(), b)?)))
        .collect::<Result<Vec<_>>>()?;
    Ok(safetensors::serialize(views, Some(meta))?)
}

/// CRC-32 over the tensors (name and bytes, in name order) and every
/// meta-data entry but the checksum's own (in key order).
fn checksum<'a>(tensors: impl Iterator<Item = (&'a str, &'a [u8])>, meta: &HashMap<String, String>) -> u32 {
    let mut h = crc32fast::Hasher::new();
    let mut t: Vec<_> = tensors.collect();
    t.sort_by_key(|x| x.0);
    for (name, b) in t {
        h.update(name.as_bytes());
        h.update(b);
    }
    let mut keys: Vec<_> = meta.keys().filter(|k| *k != "crc32").collect();
    keys.sort();
    for k in keys {
        h.update(k.as_bytes());
        h.update(meta[k].as_bytes());
    }
    h.finalize()
}

/// A safetensors file read whole and checked: its format entry and its
/// checksum; the tensors by name and the meta-data.
struct Parsed {
    tensors: HashMap<String, (Vec<usize>, Vec<f32>)>,
    meta: HashMap<String, String>,
}

fn parse(path: &Path, format: &str) -> Result<Parsed> {
    let bytes = std::fs::read(path).map_err(|e| refuse(path, format!("cannot be read: {e}")))?;
    let st = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|e| refuse(path, format!("is not a whole safetensors file ({e})")))?;
    let (_, header) = safetensors::SafeTensors::read_metadata(&bytes)
        .map_err(|e| refuse(path, format!("is not a whole safetensors file ({e})")))?;
    let meta = header.metadata().clone().unwrap_or_default();
    match meta.get("format") {
        Some(f) if f == format => {}
        Some(f) => return Err(refuse(path, format!("format {f} is not {format}"))),
        None => return Err(refuse(path, format!("has no format entry ({format} expected)"))),
    }
    let views = st.tensors();
    let computed = checksum(views.iter().map(|(n, v)| (n.as_str(), v.data())), &meta);
    let stored = meta.get("crc32").and_then(|c| c.parse::<u32>().ok());
    if stored != Some(computed) {
        return Err(refuse(
            path,
            format!("checksum {stored:?} does not match its contents ({computed}): a damaged file"),
        ));
    }
    let mut tensors = HashMap::new();
    for (name, view) in views {
        if view.dtype() != Dtype::F32 {
            return Err(refuse(path, format!("tensor {name} is not f32")));
        }
        let data = view.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        tensors.insert(name, (view.shape().to_vec(), data));
    }
    Ok(Parsed { tensors, meta })
}

/// Writes the checkpoint of `model`, `adam` and `progress` for `stem`.
pub fn save(stem: &Path, model: &Trained, adam: &Adam, progress: &Progress) -> Result<()> {
    let weights = model.varmap.data().lock().map_err(|_| anyhow::anyhow!("the weights' lock is poisoned"))?;
    let mut tensors = Vec::new();
    for (k, name) in adam.names().enumerate() {
        let var = weights.get(name).with_context(|| format!("no weight {name}"))?;
        let shape = var.shape().dims().to_vec();
        tensors.push((format!("weights/{name}"), shape.clone(), var.as_tensor().flatten_all()?.to_vec1::<f32>()?));
        tensors.push((format!("adam.m/{name}"), shape.clone(), adam.m[k].clone()));
        tensors.push((format!("adam.v/{name}"), shape, adam.v[k].clone()));
    }
    let meta: HashMap<String, String> = [
        ("format".to_string(), CHECKPOINT_FORMAT.to_string()),
        ("meta".into(), serde_json::to_string(&model.meta)?),
        ("progress".into(), serde_json::to_string(progress)?),
        ("adam_t".into(), adam.t.to_string()),
    ]
    .into();
    files::write_durable(&path(stem), &serialize(&tensors, meta)?)
}

/// A resumed run: the model, its optimizer (at `lr`) and where it stood.
pub struct Resumed {
    pub model: Trained,
    pub adam: Adam,
    pub progress: Progress,
}

/// Reads `stem`'s checkpoint, if there is one; a file that is there but
/// damaged, of another format or of another network is refused.
pub fn load(stem: &Path, lr: f64, dev: &Device) -> Result<Option<Resumed>> {
    let p = path(stem);
    if !p.exists() {
        return Ok(None);
    }
    let Parsed { mut tensors, meta } = parse(&p, CHECKPOINT_FORMAT)?;
    let entry = |k: &str| meta.get(k).ok_or_else(|| refuse(&p, format!("has no {k} entry")));
    let model_meta: ModelMeta =
        serde_json::from_str(entry("meta")?).map_err(|e| refuse(&p, format!("its model meta-data: {e}")))?;
    let progress: Progress =
        serde_json::from_str(entry("progress")?).map_err(|e| refuse(&p, format!("its progress: {e}")))?;
    let t: u64 = entry("adam_t")?.parse().map_err(|_| refuse(&p, "its adam_t is not a count"))?;
    let model = Trained::new(model_meta, dev)?;
    let mut adam = Adam::new(&model.varmap, lr)?;
    let (mut m, mut v) = (Vec::new(), Vec::new());
    {
        let weights = model.varmap.data().lock().map_err(|_| anyhow::anyhow!("the weights' lock is poisoned"))?;
        for name in adam.names() {
            let var = &weights[name];
            let mut take = |what: &str| {
                let (shape, data) = tensors
                    .remove(&format!("{what}/{name}"))
                    .ok_or_else(|| refuse(&p, format!("has no {what}/{name}: not this network's checkpoint")))?;
                if shape != var.shape().dims() {
                    return Err(refuse(&p, format!("{what}/{name} has shape {shape:?}, the network {:?}", var.dims())));
                }
                Ok(data)
            };
            let w = take("weights")?;
            var.set(&Tensor::from_vec(w, var.shape(), dev)?)?;
            m.push(take("adam.m")?);
            v.push(take("adam.v")?);
        }
    }
    if let Some(extra) = tensors.keys().next() {
        return Err(refuse(&p, format!("holds {extra}, which the network has not")));
    }
    adam.restore(m, v, t)?;
    Ok(Some(Resumed { model, adam, progress }))
}

/// The file of refill `id`'s samples.
pub fn refill_path(stem: &Path, id: u64) -> PathBuf {
    buffer_dir(stem).join(format!("{id:010}.safetensors"))
}

/// Writes refill `id`'s samples (a buffer file, see the module).
pub fn save_refill(stem: &Path, id: u64, graphs: &[Graph]) -> Result<()> {
    let (n, e) = (graphs.iter().map(|g| g.nodes.len()).sum::<usize>(), graphs.iter().map(|g| g.edges.len()).sum());
    // Per graph: nodes, edges, dropped pairs, class, family (−1: none).
    let family = |g: &Graph| g.family.and_then(|f| Family::ALL.iter().position(|&a| a == f)).map_or(-1.0, |k| k as f32);
    let counts: Vec<f32> = graphs
        .iter()
        .flat_map(|g| {
            let class = FrameClass::ALL.iter().position(|&c| c == g.class).unwrap_or(0) as f32;
            [g.nodes.len() as f32, g.edges.len() as f32, g.dropped_pairs as f32, class, family(g)]
        })
        .collect();
    let flat = |f: &dyn Fn(&Graph) -> Vec<f32>| graphs.iter().flat_map(f).collect::<Vec<f32>>();
    let tensors = vec![
        ("counts".to_string(), vec![graphs.len(), 5], counts),
        ("nodes".into(), vec![n, NODE_FEATURES], flat(&|g| g.nodes.concat())),
        ("edges".into(), vec![e, EDGE_FEATURES], flat(&|g| g.edges.concat())),
        // Node numbers are exact in f32 (below 2^24).
        ("endpoints".into(), vec![e, 2], flat(&|g| g.endpoints.iter().flatten().map(|&i| f32::from(i)).collect())),
        ("free".into(), vec![n], flat(&|g| g.free.clone())),
        ("targets".into(), vec![n, 6], flat(&|g| g.targets.concat())),
    ];
    let meta: HashMap<String, String> = [("format".to_string(), BUFFER_FORMAT.to_string())].into();
    files::write_atomic(&refill_path(stem, id), &serialize(&tensors, meta)?)
}

/// Reads refill `id`'s samples.
pub fn load_refill(stem: &Path, id: u64) -> Result<Vec<Graph>> {
    let p = refill_path(stem, id);
    let Parsed { tensors, .. } = parse(&p, BUFFER_FORMAT)?;
    let get = |k: &str, width: usize| match tensors.get(k) {
        Some((shape, data)) if shape.get(1).copied().unwrap_or(1) == width => Ok(&data[..]),
        Some((shape, _)) => Err(refuse(&p, format!("{k} has shape {shape:?}, {width} columns expected"))),
        None => Err(refuse(&p, format!("has no {k}"))),
    };
    let (counts, nodes, edges) = (get("counts", 5)?, get("nodes", NODE_FEATURES)?, get("edges", EDGE_FEATURES)?);
    let (ends, free, targets) = (get("endpoints", 2)?, get("free", 1)?, get("targets", 6)?);
    let (mut n0, mut e0) = (0usize, 0usize);
    let mut out = Vec::new();
    for c in counts.chunks_exact(5) {
        let (n, e) = (c[0] as usize, c[1] as usize);
        let (Some(ns), Some(es), Some(ps), Some(fs), Some(ts)) = (
            nodes.get(n0 * NODE_FEATURES..(n0 + n) * NODE_FEATURES),
            edges.get(e0 * EDGE_FEATURES..(e0 + e) * EDGE_FEATURES),
            ends.get(e0 * 2..(e0 + e) * 2),
            free.get(n0..n0 + n),
            targets.get(n0 * 6..(n0 + n) * 6),
        ) else {
            return Err(refuse(&p, "its counts run past its samples"));
        };
        out.push(Graph {
            nodes: ns.chunks_exact(NODE_FEATURES).map(rows).collect(),
            edges: es.chunks_exact(EDGE_FEATURES).map(rows).collect(),
            endpoints: ps.chunks_exact(2).map(|r| [r[0] as NodeId, r[1] as NodeId]).collect(),
            free: fs.to_vec(),
            targets: ts.chunks_exact(6).map(rows).collect(),
            dropped_pairs: c[2] as usize,
            class: FrameClass::ALL.get(c[3] as usize).copied().unwrap_or_default(),
            family: (c[4] >= 0.0).then(|| Family::ALL.get(c[4] as usize).copied()).flatten(),
        });
        (n0, e0) = (n0 + n, e0 + e);
    }
    Ok(out)
}

/// A row of a fixed width from a slice of that length.
fn rows<const K: usize>(r: &[f32]) -> [f32; K] {
    let mut a = [0.0; K];
    a.copy_from_slice(r);
    a
}

/// Removes the buffer files of `stem` that no slot of `slots` names.
pub fn remove_unnamed_refills(stem: &Path, slots: &Slots) {
    let named: std::collections::BTreeSet<PathBuf> = slots.slots.iter().map(|s| refill_path(stem, s.0)).collect();
    let Ok(dir) = std::fs::read_dir(buffer_dir(stem)) else { return };
    for e in dir.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "safetensors") && !named.contains(&p) {
            let _ = std::fs::remove_file(p);
        }
    }
}
