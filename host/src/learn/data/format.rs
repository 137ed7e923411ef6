//! The data set on disk: one safetensors file per trajectory and the
//! index that lists them.
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use weft_core::prelude::Vec3;

use crate::learn::data::families::Family;
use crate::sim::scenario::Scenario;

/// The trajectory file format; it also names the fine solver's generation,
/// so that `weft generate` does not keep references an older one made.
pub const FORMAT: &str = "weft-trajectory-3";

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct IndexEntry {
    pub file: String,
    pub family: Family,
    pub seed: u64,
    pub split: String,
    pub fine_seconds: f32,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Index {
    pub spec: DatasetSpec,
    pub trajectories: Vec<IndexEntry>,
    /// Trajectories whose fine simulation failed, with the reason.
    pub failed: Vec<String>,
    /// The time-convergence check of the first seed of every family.
    #[serde(default)]
    pub convergence: Vec<Convergence>,
    /// Wall time of the `weft generate` run that wrote this index (s), and
    /// how many of its trajectories it found already made and kept.
    #[serde(default)]
    pub wall_seconds: f32,
    #[serde(default)]
    pub reused: usize,
}

impl Index {
    /// What `weft generate` prints: counts and times, failures, and the
    /// convergence check.
    pub fn summary(&self, out: &Path) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let fine: f32 = self.trajectories.iter().map(|t| t.fine_seconds).sum();
        let _ = writeln!(
                s,
                "{} trajectories ({} failed, {} kept from an earlier run) in {:.1} s wall on {} threads, {:.1} s of fine simulation ({:.1} s each); wrote {}",
                self.trajectories.len(),
                self.failed.len(),
                self.reused,
                self.wall_seconds,
                rayon::current_num_threads(),
                fine,
                fine / self.trajectories.len().max(1) as f32,
                out.display()
            );
        for f in &self.failed {
            let _ = writeln!(s, "failed: {f}");
        }
        if !self.convergence.is_empty() {
            let _ = writeln!(s, "fine reference at half its step (first seed of each family; converged below {:.0} % of the plain error):", 100.0 * CONVERGENCE_LIMIT);
            let _ = writeln!(
                s,
                "  family   seed  change (m)  plain error (m)  change / plain  start moved {:.0e} m / plain",
                PERTURBATION
            );
            for c in &self.convergence {
                let mark = if c.ratio() < CONVERGENCE_LIMIT { "" } else { "  NOT CONVERGED" };
                let _ = writeln!(
                    s,
                    "  {:<8} {:>4}  {:>10.4}  {:>15.4}  {:>14.3}  {:>25.3}{mark}",
                    c.family.name(),
                    c.seed,
                    c.half_step_change,
                    c.plain_error,
                    c.ratio(),
                    c.floor()
                );
            }
        }

        s
    }
}

/// A loaded trajectory.
#[derive(Clone, Debug)]
pub struct Trajectory {
    pub scenario: Scenario,
    pub family: Family,
    pub seed: u64,
    pub split: String,
    /// `[frame][node]`.
    pub x: Vec<Vec<Vec3>>,
    pub v: Vec<Vec<Vec3>>,
    pub fine_seconds: f32,
}

/// Per-frame positions or velocities, `[frame][node]`.
pub type Frames = Vec<Vec<Vec3>>;

fn flatten(frames: &[Vec<Vec3>]) -> Vec<u8> {
    frames.iter().flatten().flat_map(|p| p.to_array()).flat_map(f32::to_le_bytes).collect()
}

/// Writes one trajectory file.
pub fn write_trajectory(path: &Path, t: &Trajectory, spec: &DatasetSpec) -> Result<()> {
    use safetensors::tensor::{Dtype, TensorView};
    let (frames, nodes) = (t.x.len(), t.x.first().map_or(0, |f| f.len()));
    let (xb, vb) = (flatten(&t.x), flatten(&t.v));
    let shape = vec![frames, nodes, 3];
    let tensors = vec![
        ("x".to_string(), TensorView::new(Dtype::F32, shape.clone(), &xb)?),
        ("v".to_string(), TensorView::new(Dtype::F32, shape, &vb)?),
    ];
    let meta: HashMap<String, String> = [
        ("format", FORMAT.to_string()),
        ("family", t.family.name().to_string()),
        ("seed", t.seed.to_string()),
        ("split", t.split.clone()),
        ("k", spec.k.to_string()),
        ("time_substeps", spec.time_substeps.to_string()),
        ("fine_seconds", t.fine_seconds.to_string()),
        ("scenario", toml::to_string(&t.scenario)?),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    crate::sim::files::write_atomic(path, &safetensors::serialize(tensors, Some(meta))?)
}

/// Reads one trajectory file.
pub fn read_trajectory(path: &Path) -> Result<Trajectory> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let (_, header) = safetensors::SafeTensors::read_metadata(&bytes)?;
    let meta = header.metadata().clone().unwrap_or_default();
    let get = |k: &str| meta.get(k).cloned().with_context(|| format!("{}: metadata lacks `{k}`", path.display()));
    if get("format")? != FORMAT {
        bail!("{}: not a {FORMAT} file", path.display());
    }
    let st = safetensors::SafeTensors::deserialize(&bytes)?;
    let frames = |name: &str| -> Result<Vec<Vec<Vec3>>> {
        let t = st.tensor(name)?;
        let shape = t.shape().to_vec();
        if shape.len() != 3 || shape[2] != 3 {
            bail!("{}: tensor {name} has shape {shape:?}", path.display());
        }
        let vals: Vec<f32> = t.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        Ok(vals
            .chunks_exact(shape[1] * 3)
            .map(|f| f.chunks_exact(3).map(|p| Vec3::new(p[0], p[1], p[2])).collect())
            .collect())
    };
    let name = get("family")?;
    let Some(family) = Family::ALL.into_iter().find(|f| f.name() == name) else {
        bail!("{}: unknown family {name}", path.display())
    };
    Ok(Trajectory {
        scenario: Scenario::parse(&get("scenario")?)?,
        family,
        seed: get("seed")?.parse()?,
        split: get("split")?,
        x: frames("x")?,
        v: frames("v")?,
        fine_seconds: get("fine_seconds")?.parse().unwrap_or(0.0),
    })
}

/// Writes `index.json` in `dir` whole or not at all (through a temporary
/// file renamed over it).
pub(crate) fn write_index(dir: &Path, index: &Index) -> Result<()> {
    crate::sim::files::write_json(&dir.join("index.json"), index)
}

/// Loads the index of a dataset folder.
pub fn load_index(dir: &Path) -> Result<Index> {
    let p = dir.join("index.json");
    let text =
        std::fs::read_to_string(&p).with_context(|| format!("reading {} (run `weft generate` first)", p.display()))?;
    Ok(serde_json::from_str(&text)?)
}

/// Loads every trajectory of `split` (all when `None`).
pub fn load_split(dir: &Path, split: Option<&str>) -> Result<Vec<Trajectory>> {
    let index = load_index(dir)?;
    let files: Vec<PathBuf> =
        index.trajectories.iter().filter(|e| split.is_none_or(|s| e.split == s)).map(|e| dir.join(&e.file)).collect();
    files.par_iter().map(|f| read_trajectory(f)).collect()
}

/// What `weft generate` builds (its command-line options, whose defaults
/// are [`DatasetSpec::default`]'s).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, clap::Args)]
pub struct DatasetSpec {
    /// Coarse grid nodes per side.
    #[arg(long, default_value_t = 16)]
    pub coarse: usize,
    /// Refinement factor of the fine grid.
    #[arg(long, default_value_t = 4)]
    pub k: usize,
    /// Fine physics steps (BDF2) per coarse frame.
    #[arg(long, default_value_t = 8)]
    pub time_substeps: u32,
    /// Frames per trajectory.
    #[arg(long, default_value_t = 200)]
    pub steps: u32,
    /// Coarse frame time (s).
    #[arg(skip = 1.0 / 60.0)]
    pub dt: f32,
    /// Trajectories per family (seeds from `seed`; below seed 70 every
    /// seventh validates and every seventh tests, all others train).
    #[arg(long, default_value_t = 14)]
    pub per_family: u64,
    /// Family kept out of training.
    #[arg(long, value_enum, default_value = "flag")]
    pub heldout: Option<Family>,
    /// Trajectories of the held-out family (0: `per_family`).
    #[serde(default)]
    #[arg(long, default_value_t = 0)]
    pub heldout_count: u64,
    /// Offset added to every seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Integrator of the fine reference.
    #[serde(default)]
    #[arg(skip = crate::sim::scenario::IntegratorSpec::Bdf2)]
    pub fine_integrator: crate::sim::scenario::IntegratorSpec,
    /// Check the fine reference's time convergence on the first seed of
    /// every family ([`Convergence`]); `--no-convergence-check`: skip it.
    #[serde(default)]
    #[arg(long = "no-convergence-check", action = clap::ArgAction::SetFalse)]
    pub check_convergence: bool,
}

impl Default for DatasetSpec {
    /// The command line's defaults.
    fn default() -> Self {
        crate::defaults()
    }
}

/// How far a fine reference is from its own time-converged value: the
/// change when its step is halved, against the error it is there to
/// measure (the plain coarse run's). Both are 200-frame means of the
/// position RMSE at the coarse nodes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Convergence {
    pub family: Family,
    pub seed: u64,
    /// Fine reference against the same fine run with twice the steps (m).
    pub half_step_change: f32,
    /// Plain coarse run against the fine reference (m).
    pub plain_error: f32,
    /// Fine reference against the same fine run started [`PERTURBATION`]
    /// away (m): how far its own sensitivity to its start carries a
    /// difference that small, the floor under `half_step_change` where
    /// the motion is chaotic or passes a bifurcation.
    #[serde(default)]
    pub perturbed_change: f32,
}

/// How far the perturbed run of the convergence check starts from the
/// reference (m): the cloth moved along x.
pub const PERTURBATION: f32 = 1e-6;

impl Convergence {
    /// `half_step_change / plain_error`; a converged reference keeps it
    /// under [`CONVERGENCE_LIMIT`].
    pub fn ratio(&self) -> f32 {
        self.half_step_change / self.plain_error.max(f32::MIN_POSITIVE)
    }

    /// `perturbed_change / plain_error`: the least [`Self::ratio`] a step
    /// size can reach when the motion magnifies differences this small.
    pub fn floor(&self) -> f32 {
        self.perturbed_change / self.plain_error.max(f32::MIN_POSITIVE)
    }
}

/// Largest [`Convergence::ratio`] of a reference that counts as converged.
pub const CONVERGENCE_LIMIT: f32 = 0.1;
