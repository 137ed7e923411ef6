//! Coarse/fine training data.
//!
//! A trajectory is a fine simulation (self-contact on, `k` times finer grid,
//! `time_substeps` physics steps per frame) of a family scenario, restricted
//! to the coarse grid's nodes (every fine node `(i·k, j·k)`), saved per
//! frame. One file per trajectory, in safetensors:
//!
//! | tensor | shape | meaning |
//! | --- | --- | --- |
//! | `x` | `[frames + 1, n·n, 3]` f32 | restricted fine positions (m) |
//! | `v` | `[frames + 1, n·n, 3]` f32 | restricted fine velocities (m/s) |
//!
//! and metadata (strings): `format` = [`FORMAT`], `family`,
//! `seed`, `split` (`train`, `val`, `test`, or `heldout` for the family kept
//! out of training), `k`, `time_substeps`, `fine_seconds` (wall time of the
//! fine simulation) and `scenario` — the coarse scenario as TOML, from which
//! the coarse model is rebuilt. `index.json` lists the files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use weft_core::prelude::Vec3;

use crate::learn::families::{self, Family};
use crate::sim;
use crate::sim::corrector::Plain;
use crate::sim::scenario::Scenario;

/// The trajectory file format; it also names the fine solver's generation,
/// so that `weft generate` does not keep references an older one made.
pub const FORMAT: &str = "weft-trajectory-3";

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

/// Seeds below this split 5 : 1 : 1 into train, validation and test (10
/// of each of the last two per family); every seed from it on trains.
pub const SPLIT_SEEDS: u64 = 70;

/// Split of a seed: of every 7 seeds below [`SPLIT_SEEDS`], 5 train, 1
/// validation, 1 test; the seeds above all train.
pub fn split_of(spec: &DatasetSpec, family: Family, seed: u64) -> &'static str {
    if Some(family) == spec.heldout {
        return "heldout";
    }
    match seed % 7 {
        _ if seed >= SPLIT_SEEDS => "train",
        0..=4 => "train",
        5 => "val",
        _ => "test",
    }
}

/// One shard `index` of `count` of a generation, so that separate
/// machines can each run one (`--shard 2/8`) and the folders be merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    pub const ALL: Shard = Shard { index: 0, count: 1 };
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Shard, String> {
        let (i, n) = s.split_once('/').ok_or_else(|| format!("expected i/n, got {s:?}"))?;
        let (index, count) = (i.trim().parse::<u64>(), n.trim().parse::<u64>());
        match (index, count) {
            (Ok(index), Ok(count)) if count >= 1 && index < count => Ok(Shard { index, count }),
            _ => Err(format!("expected i/n with 0 ≤ i < n, got {s:?}")),
        }
    }
}

/// The folder data goes to and comes from by default: `$WEFT_DATA`, else
/// `weft/data` in the user's cache folder (`$XDG_CACHE_HOME`, else
/// `~/.cache`), so that generated data outlives a checkout.
pub fn default_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("WEFT_DATA").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("."));
    cache.join("weft").join("data")
}

/// The (family, seed) jobs of `spec` in `shard`, seed by seed across the
/// families, so that a run stopped part-way leaves every family alike.
pub fn jobs(spec: &DatasetSpec, shard: Shard) -> Vec<(Family, u64)> {
    let count = |f: Family| {
        if Some(f) == spec.heldout && spec.heldout_count > 0 {
            spec.heldout_count.min(spec.per_family)
        } else {
            spec.per_family
        }
    };
    (0..spec.per_family)
        .flat_map(|s| Family::ALL.iter().filter(move |&&f| s < count(f)).map(move |&f| (f, s + spec.seed)))
        .enumerate()
        .filter(|(k, _)| *k as u64 % shard.count == shard.index)
        .map(|(_, j)| j)
        .collect()
}

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

/// Largest [`Convergence::ratio`] of a reference that counts as converged.
pub const CONVERGENCE_LIMIT: f32 = 0.1;

/// Where `scn` leaves what a network trained on `spec`'s data has seen:
/// resolution, frame time, physics steps per frame, material ranges. Empty
/// when it stays inside.
pub fn outside_training(scn: &Scenario, spec: &DatasetSpec) -> Vec<String> {
    let mut out = Vec::new();
    let [nx, ny] = scn.cloth.resolution;
    if [nx, ny] != [spec.coarse, spec.coarse] {
        out.push(format!("cloth.resolution is [{nx}, {ny}]; the network was trained on [{0}, {0}]", spec.coarse));
    }
    if (scn.time.dt - spec.dt).abs() > 1e-6 * spec.dt {
        out.push(format!("time.dt is {} s; the network was trained on {} s", scn.time.dt, spec.dt));
    }
    if scn.time.substeps != 1 {
        out.push(format!(
            "time.substeps is {}; the network was trained to correct one physics step per frame",
            scn.time.substeps
        ));
    }
    out.extend(scn.material_outside());
    out
}

/// Mean over frames of the position RMSE between two frame sequences.
fn mean_rmse(a: &Frames, b: &Frames) -> f32 {
    let per_frame: Vec<f32> = a.iter().zip(b).skip(1).map(|(p, q)| crate::learn::metrics::rmse(p, q)).collect();
    crate::learn::metrics::mean(&per_frame)
}

/// The time-convergence check of one scenario's fine reference `fine_x`
/// (made with `spec`): the same fine run at half the step, and the plain
/// coarse run.
pub fn convergence(
    scn: &Scenario,
    spec: &DatasetSpec,
    family: Family,
    seed: u64,
    fine_x: &Frames,
) -> Result<Convergence> {
    let (half, _, _) = fine_reference(scn, spec.k, 2 * spec.time_substeps, spec.fine_integrator)?;
    let mut moved = scn.clone();
    moved.cloth.center[0] += PERTURBATION;
    let (perturbed, _, _) = fine_reference(&moved, spec.k, spec.time_substeps, spec.fine_integrator)?;
    let mut plain = Vec::new();
    sim::run(scn, false, &mut Plain, |_, _, state| {
        plain.push(state.positions().to_vec());
        Ok(())
    })?;
    Ok(Convergence {
        family,
        seed,
        half_step_change: mean_rmse(fine_x, &half),
        plain_error: mean_rmse(&plain, fine_x),
        perturbed_change: mean_rmse(fine_x, &perturbed),
    })
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

/// CG iteration limit of the fine reference: the 61×61 drape needs more
/// than the default 200 on most steps, at no extra cost per converged solve.
const FINE_CG_ITERATIONS: u32 = 2000;

/// The fine scenario of `coarse` (`k` times finer, `time_substeps` times
/// more steps, self-contact on, solved to the CG tolerance) and the fine
/// node of every coarse node.
pub fn fine_scenario(
    coarse: &Scenario,
    k: usize,
    time_substeps: u32,
    integrator: crate::sim::scenario::IntegratorSpec,
) -> Result<(Scenario, Vec<usize>)> {
    let [nx, ny] = coarse.cloth.resolution;
    let (fx, fy) = ((nx - 1).saturating_mul(k) + 1, (ny - 1).saturating_mul(k) + 1);
    let edges = weft_core::mesh::MeshCounts::grid(fx, fy).edges;
    if fx.saturating_mul(fy) > u16::MAX as usize || edges > u16::MAX as usize {
        bail!(
            "the fine reference of this {nx} × {ny} cloth is {k}× finer, {fx} × {fy} nodes with {edges} mesh edges; \
             a mesh holds at most 65535 (coarse cloths up to {} nodes a side at k = {k})",
            148 / k.max(1)
        );
    }
    let mut fine = coarse.refined(k, time_substeps);
    fine.self_contact.enabled = true;
    fine.solver.integrator = integrator;
    // A reference solves every step to the CG tolerance.
    fine.solver.cg_max_iterations = fine.solver.cg_max_iterations.max(FINE_CG_ITERATIONS);
    // ... starting where a collider holds the cloth from the last solve:
    // at rest on the ground a step is then a few iterations, not 40.
    fine.solver.warm_start = true;
    let map: Vec<usize> = (0..nx * ny).map(|i| coarse.refine_node(i, k)).collect();
    Ok((fine, map))
}

/// Runs the fine simulation of `coarse` and restricts it to the coarse
/// nodes: positions, velocities and the wall time of the simulation.
pub fn fine_reference(
    coarse: &Scenario,
    k: usize,
    time_substeps: u32,
    integrator: crate::sim::scenario::IntegratorSpec,
) -> Result<(Frames, Frames, f32)> {
    let (fine, map) = fine_scenario(coarse, k, time_substeps, integrator)?;
    let (mut xs, mut vs) = (Vec::new(), Vec::new());
    let t0 = std::time::Instant::now();
    sim::run(&fine, false, &mut Plain, |_, _, state| {
        xs.push(map.iter().map(|&i| state.positions()[i]).collect());
        vs.push(map.iter().map(|&i| state.velocities()[i]).collect());
        Ok(())
    })?;
    Ok((xs, vs, t0.elapsed().as_secs_f32()))
}

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
    safetensors::serialize_to_file(tensors, Some(meta), path)?;
    Ok(())
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

/// A trajectory file already in `out` for this scenario, made with the same
/// fine settings (an interrupted or smaller earlier run): kept, not re-run.
fn reusable(
    previous: Option<&Index>,
    spec: &DatasetSpec,
    out: &Path,
    file: &str,
    scn: &Scenario,
) -> Option<Trajectory> {
    let prev = previous?;
    let same = |a: &DatasetSpec| DatasetSpec { per_family: 0, heldout_count: 0, check_convergence: false, ..a.clone() };
    if same(&prev.spec) != same(spec) {
        return None;
    }
    let t = read_trajectory(&out.join(file)).ok()?;
    (toml::to_string(&t.scenario).ok()? == toml::to_string(scn).ok()?).then_some(t)
}

/// `weft generate`: every family × seed, in parallel, into `out`. Resumable:
/// trajectories an earlier run with the same settings left in `out` are
/// kept (files are written as they finish; the index records the spec
/// first and the trajectories at the end).
pub fn generate(spec: &DatasetSpec, shard: Shard, out: &Path, progress: bool) -> Result<Index> {
    generate_splits(spec, shard, &[], out, progress)
}

/// [`generate`] of only the trajectories whose split is in `splits` (all
/// when empty): `weft generate --split val --split test` gives what
/// evaluation needs without the training set. The folder stays the full
/// spec's, so a later run without `--split` keeps these and adds the rest.
pub fn generate_splits(
    spec: &DatasetSpec,
    shard: Shard,
    splits: &[String],
    out: &Path,
    progress: bool,
) -> Result<Index> {
    std::fs::create_dir_all(out)?;
    let t0 = std::time::Instant::now();
    let previous = load_index(out).ok();
    // The spec goes down first, so that an interrupted run can be resumed.
    let start = Index {
        spec: spec.clone(),
        trajectories: Vec::new(),
        failed: Vec::new(),
        convergence: previous.as_ref().map(|p| p.convergence.clone()).unwrap_or_default(),
        wall_seconds: 0.0,
        reused: 0,
    };
    write_index(out, &start)?;
    let mut jobs = jobs(spec, shard);
    jobs.retain(|&(f, seed)| splits.is_empty() || splits.iter().any(|s| s == split_of(spec, f, seed)));
    let bar = crate::progress_bar(jobs.len() as u64, "trajectories", progress);
    // The index grows as trajectories finish, so that a run stopped
    // part-way leaves a data set that loads.
    let partial = std::sync::Mutex::new(start);
    let record = |job: &Job| -> Result<()> {
        let mut index = partial.lock().map_err(|_| anyhow::anyhow!("index lock poisoned"))?;
        index.trajectories.push(job.0.clone());
        if let Some(c) = &job.1 {
            index.convergence.retain(|x| !(x.family == c.family && x.seed == c.seed));
            index.convergence.push(c.clone());
        }
        write_index(out, &index)
    };
    let results: Vec<Result<Job, String>> = jobs
        .par_iter()
        .map(|&(family, seed)| {
            let r = one_job(spec, previous.as_ref(), out, family, seed).and_then(|job| record(&job).map(|()| job));
            bar.inc(1);
            r.map_err(|e| format!("{}-{seed}: {e:#}", family.name()))
        })
        .collect();
    bar.finish_and_clear();
    let mut index = Index {
        spec: spec.clone(),
        trajectories: Vec::new(),
        failed: Vec::new(),
        convergence: Vec::new(),
        wall_seconds: 0.0,
        reused: 0,
    };
    for r in results {
        match r {
            Ok((e, check, kept)) => {
                index.trajectories.push(e);
                index.convergence.extend(check);
                index.reused += kept as usize;
            }
            Err(e) => index.failed.push(e),
        }
    }
    index.wall_seconds = t0.elapsed().as_secs_f32();
    write_index(out, &index)?;
    Ok(index)
}

/// A generated trajectory: its entry, its convergence check, whether it
/// was kept from before.
type Job = (IndexEntry, Option<Convergence>, bool);

/// One trajectory of `generate`: kept from an earlier run in `out` when it
/// matches, else simulated and written; with its convergence check when
/// its seed is the spec's first.
fn one_job(spec: &DatasetSpec, previous: Option<&Index>, out: &Path, family: Family, seed: u64) -> Result<Job> {
    let scn = families::scenario(family, seed, spec.coarse, spec.steps, spec.dt);
    let split = split_of(spec, family, seed).to_string();
    let file = format!("{}_{seed:04}.safetensors", family.name());
    let checked = previous.and_then(|p| p.convergence.iter().find(|c| c.family == family && c.seed == seed));
    let wants_check = spec.check_convergence && seed == spec.seed;
    if let Some(t) = reusable(previous, spec, out, &file, &scn) {
        let check = match (wants_check, checked) {
            (true, None) => Some(convergence(&scn, spec, family, seed, &t.x)?),
            (true, Some(c)) => Some(c.clone()),
            (false, _) => None,
        };
        let entry = IndexEntry { file, family, seed, split, fine_seconds: t.fine_seconds };
        return Ok((entry, check, true));
    }
    let (x, v, secs) = fine_reference(&scn, spec.k, spec.time_substeps, spec.fine_integrator)?;
    let check = if wants_check { Some(convergence(&scn, spec, family, seed, &x)?) } else { None };
    let t = Trajectory { scenario: scn.clone(), family, seed, split: split.clone(), x, v, fine_seconds: secs };
    write_trajectory(&out.join(&file), &t, spec)?;
    Ok((IndexEntry { file, family, seed, split, fine_seconds: secs }, check, false))
}

/// Writes `index.json` in `dir` whole or not at all (through a temporary
/// file renamed over it).
fn write_index(dir: &Path, index: &Index) -> Result<()> {
    let tmp = dir.join("index.json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(index)?)?;
    std::fs::rename(&tmp, dir.join("index.json"))?;
    Ok(())
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
