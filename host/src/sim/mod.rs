//! The simulation layer: scenario files ([`scenario`]) and the training
//! envelope they are checked against ([`envelope`]), the state's
//! memory on the desktop ([`storage`]), what corrects a step
//! ([`corrector`]), and the one rollout loop ([`run`]) with what it
//! writes (OBJ frames, a JSON summary). It builds on `weft-core` only;
//! `learn` and `view` build on it.

pub mod corrector;
pub mod files;
pub use weft_scene::{build, envelope, obj, scenario, shapes, storage};

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;
use weft_core::mesh::Triangle;
use weft_core::physics::{self, Energy};
use weft_core::prelude::*;

use build::ModelParts;
use corrector::Corrector;
use envelope::Envelope;
use scenario::Scenario;
use storage::VecStateStorage;
use weft_core::probe::{NoProbe, Probe};
use weft_core::step::{self, CorrectedStepError, CorrectionReport};

#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct EnergyOut {
    pub kinetic: f32,
    pub membrane: f32,
    pub bending: f32,
    pub gravity: f32,
    pub total: f32,
}

impl From<Energy> for EnergyOut {
    fn from(e: Energy) -> Self {
        EnergyOut { kinetic: e.kinetic, membrane: e.membrane, bending: e.bending, gravity: e.gravity, total: e.total() }
    }
}

/// One frame of the summary (sums and maxima over its substeps).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct FrameSummary {
    pub frame: u32,
    pub time: f64,
    pub energy: EnergyOut,
    pub cg_iterations: u32,
    pub cg_iterations_max: u32,
    /// Linear solves (more than `substeps` when the energy check split steps).
    pub solves: u32,
    pub cg_residual_max: f32,
    pub max_strain: f32,
    pub contacts: usize,
    pub self_contacts: usize,
    pub pairs: usize,
    pub dropped_pairs: usize,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Summary {
    pub name: String,
    pub nodes: usize,
    pub triangles: usize,
    pub dt: f32,
    pub substeps: u32,
    pub frames: Vec<FrameSummary>,
    pub cg_iterations_mean: f32,
    pub cg_not_converged: u64,
    pub cg_stagnated: u64,
    pub dropped_pairs: u64,
    pub rejected_steps: u64,
    pub energy_check_failed: u64,
    /// Steps whose strain limiter left an edge over the limit.
    pub strain_limit_unfinished: u64,
    /// Steps whose total energy rose beyond the work done on the cloth
    /// (contacts, friction, self-contact and strain limiting included).
    pub energy_rose: u64,
    /// Dynamic edges the network saw, summed over steps (0 uncorrected).
    pub dynamic_edges: u64,
    /// The final state's checksum, 8 hex digits
    /// ([`weft_core::physics::state::checksum`]): what the board and the
    /// page print for the same scene file.
    pub checksum: String,
    /// Why the scene lies outside the training envelope, where a guarded
    /// corrector then ran the scene's fallback, the plain BDF2 step
    /// ([`Envelope::outside_envelope`], [`Envelope::fallback`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub outside_envelope: Vec<String>,
    /// Why the run stopped before its last frame (`frames` holds every
    /// frame before it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
}

/// Where and why a run stopped.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Failure {
    pub frame: u32,
    pub substep: u32,
    pub cause: String,
}

/// A run that stopped early: its summary up to the failure and the last
/// good state's positions (the core leaves the state as it was before the
/// failing step).
#[derive(Debug)]
pub struct RunFailed {
    pub summary: Box<Summary>,
    pub last_good: Vec<Vec3>,
}

impl std::fmt::Display for RunFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.summary.failure {
            Some(x) => write!(f, "frame {}, substep {}: {}", x.frame, x.substep, x.cause),
            None => write!(f, "the run stopped early"),
        }
    }
}

impl std::error::Error for RunFailed {}

/// The one rollout loop: runs `scn` from its start ([`Scenario::start`]),
/// `time.steps` frames of `time.substeps` physics steps, every physics step
/// followed by `corrector` (the network corrects each step it is run
/// after, the step the method defines; a scenario with substeps runs it on
/// shorter steps than the 1/60 s frame it was trained on, and `weft eval`
/// says so). Calls `on_frame(frame, model, state)` after every frame
/// (frame 0 is the initial state).
pub fn run(
    scn: &Scenario,
    progress: bool,
    corrector: &mut dyn Corrector,
    on_frame: impl FnMut(u32, &Model, &State) -> Result<()>,
) -> Result<Summary> {
    run_from(scn, None, progress, corrector, on_frame)
}

/// A state to start a rollout from instead of the scenario's start: the
/// positions and velocities of every node at frame `frame` (the clock is
/// set to it; a BDF2 step starts without history), and the velocities of
/// the frame before, which the network's history feature reads
/// (`weft_core::physics::set_velocities_before`; `None`: the same as `v`,
/// no history).
#[derive(Clone, Copy)]
pub struct Restart<'a> {
    pub x: &'a [Vec3],
    pub v: &'a [Vec3],
    pub v_before: Option<&'a [Vec3]>,
    pub frame: u32,
}

/// [`run`] from `restart` when given; frames are counted from it.
pub fn run_from(
    scn: &Scenario,
    restart: Option<Restart>,
    progress: bool,
    corrector: &mut dyn Corrector,
    mut on_frame: impl FnMut(u32, &Model, &State) -> Result<()>,
) -> Result<Summary> {
    // A guarded corrector outside the training envelope: the scene's
    // fallback, the best plain step at the corrected step's cost.
    let outside = if corrector.guarded() { scn.outside_envelope() } else { Vec::new() };
    let grain = if outside.is_empty() { corrector.coarse_grain() } else { CoarseGrain::NONE };
    // The step the corrector was trained on, where it is not the scene's.
    let based;
    let scn = match corrector.base_step() {
        _ if !outside.is_empty() => {
            based = scn.fallback();
            &based
        }
        Some(i) if i != scn.solver.integrator => {
            based = Scenario { solver: scenario::SolverSpec { integrator: i, ..scn.solver }, ..scn.clone() };
            &based
        }
        _ => scn,
    };
    let mut parts = ModelParts::default();
    let model = &build::model(scn, grain, &mut parts)?;
    let net_pairs = corrector.pairs(model.mesh.node_count());
    let mut storage = VecStateStorage::new(model, scn.max_pairs().max(net_pairs));
    let mut state = build::start(scn, model, &mut storage)?;
    if let Some(r) = restart {
        restart_at(scn, model, &mut state, r)?;
    }
    let mut summary = Summary::of(scn, model, outside.clone());
    let bar = crate::progress_bar(scn.time.steps as u64, "frames", progress && scn.time.steps >= 50);
    summary.frames.push(frame_summary(0, model, &state, &[]));
    on_frame(0, model, &state)?;
    let mut correction = Correct { corrector, on: outside.is_empty() };
    let mut reports = Vec::with_capacity(scn.time.substeps as usize);
    let mut at = (0, 0);
    let outcome = (|| -> Result<()> {
        for frame in 1..=scn.time.steps {
            reports.clear();
            for sub in 0..scn.time.substeps {
                at = (frame, sub);
                let (r, c) =
                    step::step_with(model, &mut state, &mut correction, &mut NoProbe).map_err(|e| match e {
                        CorrectedStepError::Physics(e) => anyhow::Error::from(e),
                        CorrectedStepError::Network(e) => e,
                    })?;
                reports.push(r);
                summary.dynamic_edges += c.dynamic_edges as u64;
            }
            summary.frames.push(frame_summary(frame, model, &state, &reports));
            on_frame(frame, model, &state)?;
            bar.inc(1);
        }
        Ok(())
    })();
    bar.finish_and_clear();
    summary.close(scn, &state);
    match outcome {
        Ok(()) => Ok(summary),
        Err(e) => {
            let (frame, substep) = at;
            summary.failure = Some(Failure { frame, substep, cause: format!("{e:#}") });
            Err(RunFailed { summary: Box::new(summary), last_good: state.positions().to_vec() }.into())
        }
    }
}

/// Sets `state` to `r`: positions, velocities, the clock, and the
/// velocities of the frame before when given.
fn restart_at(scn: &Scenario, model: &Model, state: &mut State, r: Restart) -> Result<()> {
    state.set_positions(r.x).context("restart positions")?;
    state.set_velocities(r.v).context("restart velocities")?;
    state.set_steps(r.frame as u64 * scn.time.substeps as u64).context("restart frame")?;
    if let Some(v) = r.v_before {
        physics::set_velocities_before(model, state, v).context("restart's velocities of the frame before")?;
    }
    Ok(())
}

/// A [`Corrector`] as the core's corrected step takes it; `on` is false
/// outside the training envelope (the plain step).
struct Correct<'c> {
    corrector: &'c mut dyn Corrector,
    on: bool,
}

impl Correct<'_> {
    /// The core's corrected step ([`step::step_with`]) with this corrector.
    fn step(&mut self, model: &Model, state: &mut State) -> Result<(StepReport, CorrectionReport)> {
        step::step_with(model, state, self, &mut NoProbe).map_err(|e| match e {
            CorrectedStepError::Physics(e) => anyhow::Error::from(e),
            CorrectedStepError::Network(e) => e,
        })
    }
}

/// One corrected step on the desktop: the core's
/// ([`weft_core::step::step_with`]), `corrector` after the physics step.
pub fn corrected_step(
    model: &Model,
    state: &mut State,
    corrector: &mut dyn Corrector,
) -> Result<(StepReport, CorrectionReport)> {
    Correct { corrector, on: true }.step(model, state)
}

impl step::Correction for Correct<'_> {
    type Error = anyhow::Error;
    fn correct<P: Probe>(&mut self, model: &Model, state: &mut State, _: &mut P) -> Result<CorrectionReport> {
        if !self.on {
            return Ok(CorrectionReport::default());
        }
        let dynamic_edges = self.corrector.correct(model, state)?;
        Ok(CorrectionReport { dynamic_edges, dropped_pairs: 0 })
    }
}

impl Summary {
    /// A run's summary before its first frame.
    fn of(scn: &Scenario, model: &Model, outside_envelope: Vec<String>) -> Summary {
        Summary {
            name: scn.name.clone(),
            nodes: model.mesh.node_count(),
            triangles: model.mesh.triangles().len(),
            dt: scn.time.dt,
            substeps: scn.time.substeps,
            outside_envelope,
            ..Summary::default()
        }
    }

    /// The means and counts over the whole run.
    fn close(&mut self, scn: &Scenario, state: &State) {
        let w = &state.warnings;
        self.checksum = format!("{:08x}", state.checksum());
        let steps = (scn.time.steps as f64 * scn.time.substeps as f64).max(1.0) as f32;
        self.cg_iterations_mean = self.frames.iter().map(|f| f.cg_iterations as f32).sum::<f32>() / steps;
        self.cg_not_converged = w.cg_not_converged;
        self.cg_stagnated = w.cg_stagnated;
        self.dropped_pairs = w.dropped_pairs;
        self.rejected_steps = w.rejected_steps;
        self.energy_check_failed = w.energy_check_failed;
        self.strain_limit_unfinished = w.strain_limit_unfinished;
        self.energy_rose = w.energy_rose;
    }
}

fn frame_summary(frame: u32, model: &Model, state: &State, reports: &[StepReport]) -> FrameSummary {
    FrameSummary {
        frame,
        time: state.time(),
        energy: physics::energy(model, state.positions(), state.velocities()).into(),
        cg_iterations: reports.iter().map(|r| r.cg_iterations).sum(),
        cg_iterations_max: reports.iter().map(|r| r.cg_iterations).max().unwrap_or(0),
        solves: reports.iter().map(|r| r.substeps).sum(),
        cg_residual_max: reports.iter().map(|r| r.residual).fold(0.0, f32::max),
        max_strain: physics::max_strain(model, state.positions()),
        contacts: reports.iter().map(|r| r.contacts).sum(),
        self_contacts: reports.iter().map(|r| r.self_contacts).sum(),
        pairs: reports.last().map_or(0, |r| r.pairs),
        dropped_pairs: reports.iter().map(|r| r.dropped_pairs).sum(),
    }
}

/// Writes a Wavefront OBJ of the cloth.
pub fn write_obj(path: &Path, mesh: &Mesh, x: &[Vec3]) -> Result<()> {
    write_obj_parts(path, mesh.triangles(), x)
}

/// Writes a Wavefront OBJ of nodes `x` and `triangles`.
fn write_obj_parts(path: &Path, triangles: &[Triangle], x: &[Vec3]) -> Result<()> {
    let mut w = Vec::new();
    writeln!(w, "# weft cloth, {} nodes", x.len())?;
    for p in x {
        writeln!(w, "v {} {} {}", p.x, p.y, p.z)?;
    }
    for t in triangles {
        writeln!(w, "f {} {} {}", t.nodes[0] + 1, t.nodes[1] + 1, t.nodes[2] + 1)?;
    }
    files::write_atomic(path, &w)
}

/// `weft simulate`: OBJ frames and `summary.json` into `out`, each step
/// corrected by `corrector`; every frame's positions pushed onto `keep`
/// when given (frame 0 the start).
pub fn simulate(
    scn: &Scenario,
    out: &Path,
    progress: bool,
    corrector: &mut dyn Corrector,
    mut keep: Option<&mut Vec<Vec<Vec3>>>,
) -> Result<Summary> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let every = scn.output.every;
    let mut mesh_triangles = Vec::new();
    let outcome = run(scn, progress, corrector, |frame, model, state| {
        if frame == 0 {
            mesh_triangles = model.mesh.triangles().to_vec();
        }
        if every > 0 && frame % every == 0 {
            write_obj(&out.join(format!("frame_{frame:05}.obj")), &model.mesh, state.positions())?;
        }
        if let Some(k) = keep.as_deref_mut() {
            k.push(state.positions().to_vec());
        }
        Ok(())
    });
    let summary = match outcome {
        Ok(summary) => summary,
        Err(e) => {
            // A failed run still leaves its summary and its last good state.
            if let Some(failed) = e.downcast_ref::<RunFailed>() {
                files::write_json(&out.join("summary.json"), &failed.summary)?;
                write_obj_parts(&out.join("last_good.obj"), &mesh_triangles, &failed.last_good)?;
            }
            return Err(e);
        }
    };
    files::write_json(&out.join("summary.json"), &summary)?;
    Ok(summary)
}

/// A rollout's positions at the nodes asked for, per frame (frame 0 the
/// start), with its cost and why it stopped early if it did.
#[derive(Clone, Debug, Default)]
pub struct Rolled {
    pub x: Vec<Vec<Vec3>>,
    /// Wall seconds per frame on this host.
    pub seconds_per_frame: f64,
    /// CG iterations per frame stepped (every physics step's, summed).
    pub cg_per_frame: f64,
    /// A guarded corrector ran the plain step: the scene lies outside the
    /// training envelope.
    pub plain_outside: bool,
    pub failure: Option<String>,
}

/// Runs `scn` for `steps` frames through [`run`], each physics step
/// followed by `corrector`; the positions at `nodes` per frame.
pub fn rollout(scn: &Scenario, steps: usize, nodes: &[usize], corrector: &mut dyn Corrector) -> Result<Rolled> {
    let mut scn = scn.clone();
    scn.time.steps = steps as u32;
    let mut x = Vec::new();
    let t0 = std::time::Instant::now();
    let r = run(&scn, false, corrector, |_, _, state| {
        x.push(nodes.iter().map(|&i| state.positions()[i]).collect());
        Ok(())
    });
    let seconds_per_frame = t0.elapsed().as_secs_f64() / steps.max(1) as f64;
    let cg = |s: &Summary| {
        let stepped = s.frames.len().saturating_sub(1).max(1);
        s.frames.iter().map(|f| f.cg_iterations as f64).sum::<f64>() / stepped as f64
    };
    match r {
        Ok(s) => {
            let plain_outside = !s.outside_envelope.is_empty();
            Ok(Rolled { x, seconds_per_frame, cg_per_frame: cg(&s), plain_outside, failure: None })
        }
        Err(e) if !x.is_empty() => {
            let summary = e.downcast_ref::<RunFailed>().map(|f| &f.summary);
            let cg_per_frame = summary.map_or(0.0, |s| cg(s));
            let plain_outside = summary.is_some_and(|s| !s.outside_envelope.is_empty());
            Ok(Rolled { x, seconds_per_frame, cg_per_frame, plain_outside, failure: Some(format!("{e:#}")) })
        }
        Err(e) => Err(e),
    }
}
