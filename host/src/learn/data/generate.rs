//! `weft generate`: fine-reference trajectories of the scenario families,
//! by split and shard, resumable.
use crate::learn::data::format::load_index;
use crate::learn::data::format::read_trajectory;
use crate::learn::data::format::write_index;
use crate::learn::data::format::write_trajectory;
use crate::learn::data::format::Frames;
use crate::learn::data::format::Index;
use crate::learn::data::format::IndexEntry;
use crate::learn::data::format::Trajectory;
use crate::learn::data::format::{Convergence, DatasetSpec, PERTURBATION};
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use rayon::prelude::*;

use crate::learn::data::families::{self, Family};
use crate::sim;
use crate::sim::corrector::Plain;
use crate::sim::envelope::Envelope;
use crate::sim::scenario::Scenario;

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

/// Where `scn` leaves what a network trained on `spec`'s data has seen:
/// resolution, frame time, physics steps per frame, material ranges. Empty
/// when it stays inside.
pub fn outside_training(scn: &Scenario, spec: &DatasetSpec) -> Vec<String> {
    let mut out = Vec::new();
    let [nx, ny] = scn.cloth.resolution;
    use crate::sim::shapes::Shape;
    let family_shape = matches!(scn.cloth.shape, Some(Shape::Disc | Shape::Holed));
    if scn.mesh.is_some() && !family_shape {
        out.push(
            "the cloth is a mesh the families have not; they have rectangles, the disc and the holed sheet".into(),
        );
    } else if [nx, ny] != [spec.coarse, spec.coarse] {
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
    let per_frame: Vec<f32> = a.iter().zip(b).skip(1).map(|(p, q)| crate::learn::data::metrics::rmse(p, q)).collect();
    crate::learn::data::metrics::mean(&per_frame)
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
    if let Some(mesh) = &coarse.mesh {
        return fine_mesh_scenario(coarse, mesh, k, time_substeps, integrator);
    }
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

/// [`fine_scenario`] of a cloth from a mesh file: its mesh split at the
/// edges' midpoints until `k` (a power of two) times finer, which keeps
/// every coarse node at its index.
fn fine_mesh_scenario(
    coarse: &Scenario,
    mesh: &crate::sim::obj::ObjMesh,
    k: usize,
    time_substeps: u32,
    integrator: crate::sim::scenario::IntegratorSpec,
) -> Result<(Scenario, Vec<usize>)> {
    if !k.is_power_of_two() {
        bail!("a mesh cloth's fine reference splits its triangles: k must be a power of two, got {k}");
    }
    let fine_mesh = crate::sim::obj::subdivide(mesh, k.trailing_zeros());
    if fine_mesh.positions.len() > u16::MAX as usize {
        bail!("the fine reference of this mesh has {} nodes; a mesh holds at most 65535", fine_mesh.positions.len());
    }
    let mut fine = coarse.clone();
    fine.mesh = Some(std::sync::Arc::new(fine_mesh));
    fine.time.substeps = coarse.time.substeps.saturating_mul(time_substeps);
    fine.self_contact.enabled = true;
    fine.self_contact.max_pairs = 0;
    fine.solver.integrator = integrator;
    fine.solver.cg_max_iterations = fine.solver.cg_max_iterations.max(FINE_CG_ITERATIONS);
    fine.solver.warm_start = true;
    Ok((fine, (0..mesh.positions.len()).collect()))
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

/// Whether two specs make the same trajectory of a (family, seed): all
/// but how many seeds a family has and whether the first is checked.
fn same_settings(a: &DatasetSpec, b: &DatasetSpec) -> bool {
    let key = |s: &DatasetSpec| DatasetSpec { per_family: 0, heldout_count: 0, check_convergence: false, ..s.clone() };
    key(a) == key(b)
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
    if !same_settings(&prev.spec, spec) {
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
    generate_only(spec, shard, &Only::default(), out, progress)
}

/// Which of a spec's trajectories a run generates: those of the named
/// splits and families (every one when a list is empty).
#[derive(Clone, Debug, Default)]
pub struct Only {
    pub splits: Vec<String>,
    pub families: Vec<Family>,
}

impl Only {
    fn keeps(&self, spec: &DatasetSpec, family: Family, seed: u64) -> bool {
        let split = split_of(spec, family, seed);
        (self.splits.is_empty() || self.splits.iter().any(|s| s == split))
            && (self.families.is_empty() || self.families.contains(&family))
    }
}

/// [`generate`] of only some trajectories: `weft generate --split val
/// --split test` gives what evaluation needs without the training set,
/// `--family tablecloth` one family. The folder stays the full spec's: the
/// index keeps the trajectories an earlier run with the same settings
/// made there, and a later run without the filter adds the rest.
pub fn generate_only(spec: &DatasetSpec, shard: Shard, only: &Only, out: &Path, progress: bool) -> Result<Index> {
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
    jobs.retain(|&(f, seed)| only.keeps(spec, f, seed));
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
    // What an earlier run made here with the same settings and this run
    // did not touch stays in the index.
    if let Some(prev) = previous.as_ref().filter(|p| same_settings(&p.spec, spec)) {
        let touched = |f: Family, s: u64| jobs.contains(&(f, s));
        let kept = |e: &&IndexEntry| !touched(e.family, e.seed) && out.join(&e.file).is_file();
        index.trajectories.extend(prev.trajectories.iter().filter(kept).cloned());
        index.convergence.extend(prev.convergence.iter().filter(|c| !touched(c.family, c.seed)).cloned());
    }
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
