//! The step driver: one linearised solve per (sub)step through the stages
//! ([`crate::probe::Stage`]), the split of a step that fails the energy
//! check, and the warnings it counts.

use super::assembly::{assemble_system, wind_push};
use super::audit::EnergyAudit;
use super::candidate::{base_positions, check_energy, make_candidate};
use super::commit::finish;
use super::constraints::constrain;
use super::newton;
use super::solver::{self, keep_warm, solve, warm_start, Coefficients, SolveFrom};
use super::state::{State, StateError};
use super::workspace::mat3_blocks;
use super::{StepError, StepReport};
use crate::math::Vec3;
use crate::model::Model;
use crate::probe::{NoProbe, Probe, Stage};

/// A step that fails the energy check is split in halves, down to
/// `dt / 2^MAX_SPLIT`.
pub const MAX_SPLIT: u32 = 4;
pub use super::state::TICKS_PER_STEP;
// A split step's substeps end on ticks.
const _: () = assert!(TICKS_PER_STEP == 1 << MAX_SPLIT);
/// A solve that fails the energy check is first shortened: its velocity
/// change is halved up to this many times (a backtracking line search on
/// the step's energy) before the step is split.
pub(super) const LINE_SEARCH: u32 = 2;
/// At the finest split, the solved velocity change is halved up to this
/// many times to pass the energy check.
pub(super) const MAX_HALVINGS: u32 = 8;

/// Outcome of one linearised solve.
pub(super) struct Substep {
    solve: solver::Solve,
    /// Passed the energy check (or the check is off).
    passed: bool,
    /// The strain limiter left an edge over the limit.
    strain_unfinished: bool,
    scale: f32,
    finite: bool,
    /// It took a Newton correction.
    corrected: bool,
}

/// One linearised solve over `h_step` from the committed state, backward
/// Euler or (with `bdf2`) BDF2, in the stages [`Stage`] names: the system
/// ([`assemble_system`]), its constraints ([`constrain`]), the solve with
/// the contact release ([`solve`]), the energy check ([`check_energy`]) and
/// the candidate ([`make_candidate`]), which is left in `ws.x_new` /
/// `ws.dv`.
pub(super) fn substep(
    model: &Model,
    state: &mut State,
    h_step: f32,
    last_resort: bool,
    bdf2: bool,
    probe: &mut impl Probe,
) -> Substep {
    let k = Coefficients::new(model, state.time(), h_step, bdf2);
    let (x, v, ws) = (&*state.x, &*state.v, &mut state.ws);
    probe.enter(Stage::Assembly);
    let reference = assemble_system(model, x, v, ws, &k);
    probe.enter(Stage::Constraints);
    let held = constrain(model, v, ws, &k);
    let warm = model.params.warm_start && held > 0 && ws.warm_h == k.h && warm_start(ws);
    let tolerance = model.params.cg_tolerance;
    let (solve, constraint_work) = solve(model, v, ws, &k, SolveFrom { held, warm, tolerance, reference }, probe);
    if model.params.warm_start {
        keep_warm(ws, k.h, solve.residual.is_finite());
    }
    probe.enter(Stage::Candidate);
    // The base positions, into `r` (free after the solve).
    base_positions(bdf2, x, ws.x_prev, ws.r);
    let allowed = if last_resort { MAX_HALVINGS } else { LINE_SEARCH };
    // A backward-Euler solve that fails is corrected by a Newton iteration
    // before its line search (which then halves the corrected step) and
    // before the step is split.
    let newton = !bdf2 && !last_resort;
    let (mut passed, mut scale) = if model.params.energy_check && solve.residual.is_finite() {
        let first = if newton { 0 } else { allowed };
        check_energy(model, x, v, ws, &k, solve.error_energy, constraint_work, first)
    } else {
        (true, 1.0)
    };
    let mut solve = solve;
    let corrected = !passed && newton && solve.residual.is_finite();
    if corrected {
        (passed, scale) = newton::correct(model, x, v, ws, &k, &mut solve, allowed, probe);
    }
    let strain_unfinished = make_candidate(model, v, ws, &k, scale);
    let finite =
        solve.residual.is_finite() && ws.x_new.iter().all(|p| p.is_finite()) && ws.dv.iter().all(|p| p.is_finite());
    Substep { solve, passed, strain_unfinished, scale, finite, corrected }
}

/// Gives a state restarted from a recorded frame (its positions and
/// velocities set) the velocities of the frame before, `v_before`, as the
/// step from that frame would have left them
/// ([`crate::physics::state::State::start_velocities`], the next step's
/// [`crate::physics::state::State::previous_start_velocities`]): with the wind's
/// push over that step, at the frame before's velocities and time and the
/// restart's positions (the frame before's are not known; a frame moves
/// the triangles the wind meets little), so that the network's history
/// reads at a restart what it reads in a run. A mesh that is not the
/// state's, or velocities of the wrong length or not finite, are an error
/// and leave the state as it was.
pub fn set_velocities_before(model: &Model, state: &mut State, v_before: &[Vec3]) -> Result<(), StateError> {
    if state.x.len() != model.mesh.node_count() {
        return Err(StateError::Length { expected: model.mesh.node_count(), got: state.x.len() });
    }
    state.set_start_velocities(v_before)?;
    let h = model.params.dt;
    let t = (state.time() - f64::from(h)).max(0.0);
    wind_push(model, t, state.x, v_before, h, state.ws.f_ext, state.ws.v_start);
    Ok(())
}

/// BDF2's history at a run's start (the clock at zero, no history yet)
/// in a scene without wind: the motion before the start taken as the
/// start's velocities under gravity alone, `x(−h) = x − h v + ½h²g`,
/// `v(−h) = v − h g` (a pinned node: its start velocity, without
/// gravity). BDF2 is exact on a quadratic path, so a cloth released from
/// rest falls exactly from its first step, where a backward-Euler first
/// step leaves it `½h²g` low for the rest of its fall (1.36 mm at 1/60 s).
/// Elastic forces are left out of that past: a cloth starts in its rest
/// shape, where they are zero. A wind's drag on a cloth at rest is an
/// impulsive start that no smooth past matches (with the drag in the past,
/// BDF2 at dt/2 drifted further from the reference over the first ten
/// frames than from a backward-Euler first step), so in wind the first
/// step stays backward Euler.
fn start_history(model: &Model, state: &mut State, h: f32) {
    let ws = &mut state.ws;
    if model.scene.wind.is_some() || ws.history || ws.x_prev.len() != state.x.len() || ws.v_prev.len() != state.v.len()
    {
        return;
    }
    let g = model.scene.gravity;
    let it = ws.x_prev.iter_mut().zip(ws.v_prev.iter_mut()).zip(state.x.iter().zip(state.v.iter()));
    for (((xp, vp), (&x, &v)), &f) in it.zip(ws.flags.iter()) {
        let a = if crate::flags::pinned(f) { Vec3::ZERO } else { g };
        *xp = x - v * h + a * (0.5 * h * h);
        *vp = v - a * h;
    }
    ws.history = true;
}

/// Advances the state by one time step `model.params.dt`.
///
/// The step is one linearised solve, backward Euler or BDF2
/// ([`crate::model::Integrator`]). If its result fails the energy check,
/// a backward-Euler solve gets one Newton correction, linearised again at
/// its end ([`super::newton`]: at the cost of about one more solve, where
/// a split costs two); then (a BDF2 solve at once) its solved velocity
/// change is halved up to `LINE_SEARCH` (2) times; if it still fails (or
/// the solve is not finite) the step is split into halves, each solved
/// with backward Euler (and corrected likewise), down to
/// `dt / 2^MAX_SPLIT`; there the solved
/// velocity change is shortened until the check passes. If a split step still produces a
/// non-finite state, `StepError::NonFinite` is returned and the state is
/// left at the last good (sub)step.
pub fn step(model: &Model, state: &mut State) -> Result<StepReport, StepError> {
    step_probed(model, state, &mut NoProbe)
}

/// [`step`], marking its stages to `probe` ([`crate::probe`]).
pub fn step_probed(model: &Model, state: &mut State, probe: &mut impl Probe) -> Result<StepReport, StepError> {
    let n = model.mesh.node_count();
    if state.x.len() != n || state.ws.blocks.len() != mat3_blocks(model.mesh.counts()) {
        return Err(StepError::MeshMismatch);
    }
    model.scene.mark_pinned(state.ws.flags);
    state.ws.memo.forget();
    let h = model.params.dt;
    if model.params.integrator == crate::model::Integrator::Bdf2 && state.ticks() == 0 {
        start_history(model, state, h);
    }
    state.ws.v_start_prev.copy_from_slice(state.ws.v_start);
    state.ws.v_start.copy_from_slice(state.v);
    wind_push(model, state.time(), state.x, state.v, h, state.ws.f_ext, state.ws.v_start);
    let total = 1u32 << MAX_SPLIT;
    let mut report = StepReport { step_scale: 1.0, converged: true, ..StepReport::default() };
    probe.enter(Stage::Audit);
    let audit = EnergyAudit::start(model, state);
    let (mut pos, mut level) = (0u32, 0u32);
    while pos < total {
        let size = 1u32 << (MAX_SPLIT - level);
        let hs = h * size as f32 / total as f32;
        let last_resort = level == MAX_SPLIT;
        // `history` is only ever set with history storage present.
        let bdf2 = level == 0 && state.ws.history && model.params.integrator == crate::model::Integrator::Bdf2;
        let sub = substep(model, state, hs, last_resort, bdf2, probe);
        report.cg_iterations += sub.solve.iterations;
        report.residual = report.residual.max(sub.solve.residual);
        report.converged &= sub.solve.converged;
        report.stagnated |= sub.solve.stagnated;
        let good = sub.finite && sub.passed;
        if !good && !last_resort {
            level += 1;
            continue;
        }
        if !sub.finite || !finish(model, state, hs, size as u64, &mut report, probe) {
            state.warnings.rejected_steps += 1;
            state.ws.history = false;
            return Err(StepError::NonFinite);
        }
        if !sub.passed {
            state.warnings.energy_check_failed += 1;
        }
        report.strain_unfinished |= sub.strain_unfinished;
        report.step_scale = report.step_scale.min(sub.scale);
        report.substeps += 1;
        report.newton += u32::from(sub.corrected);
        pos += size;
    }
    if !report.converged {
        state.warnings.cg_not_converged += 1;
    }
    if report.stagnated {
        state.warnings.cg_stagnated += 1;
    }
    if report.strain_unfinished {
        state.warnings.strain_limit_unfinished += 1;
    }
    if let Some(audit) = audit {
        probe.enter(Stage::Audit);
        report.energy_rose = audit.rose(model, state);
        state.warnings.energy_rose += u64::from(report.energy_rose);
    }
    state.warnings.branched_steps += u64::from(report.branched());
    // The history holds a step of this length only if it was not split.
    state.ws.history = report.substeps == 1 && state.ws.x_prev.len() == n;
    state.steps += 1;
    Ok(report)
}
