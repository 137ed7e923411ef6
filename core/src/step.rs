//! One corrected step, the pipeline of the method, in the stages a caller
//! may run apart (as MuJoCo's `mj_step1` / `mj_step2`):
//!
//! 1. [`step1`]: the FEM step ([`physics::step`]) gives the *initial*
//!    positions and velocities;
//! 2. [`step2`]: the dynamic edges of that result (node pairs closer than
//!    the network's radius with no static edge, [`dynamic_edges`]), the
//!    network on the state, its static and dynamic edges ([`infer`]), and
//!    its corrections added ([`apply`]): the final state, which the next
//!    step starts from.
//!
//! [`step_with`] is the one corrected step every caller runs — the
//! desktop's rollout loop, the board's firmware, the benchmarks — with a
//! [`Correction`]: the baked int8 network ([`Int8`]), none ([`Plain`]) or
//! a caller's own (the desktop's float network), marking its stages to a
//! [`Probe`]. [`step`] is it with the int8 network and no probe. Between
//! the stages the state holds the physics result, so a caller can read or
//! record it, or stop there (the plain coarse cloth).

use crate::contact::Proximity;
use crate::gnn::graph::GraphRef;
use crate::gnn::int8::{forward::forward_guarded, Checked, GnnError, Scratch, PAIRS_PER_NODE};
use crate::math::Vec3;
use crate::model::Model;
use crate::physics::state::State;
use crate::physics::{self, StepError, StepReport};
use crate::probe::{NoProbe, Probe, Stage};

/// Why a corrected step stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CorrectedStepError<E = GnnError> {
    /// The physics step failed (state as [`physics::step`] leaves it).
    Physics(StepError),
    /// The correction could not run; the state holds the physics step's
    /// uncorrected result.
    Network(E),
}

impl<E: core::fmt::Display> core::fmt::Display for CorrectedStepError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CorrectedStepError::Physics(e) => write!(f, "physics: {e}"),
            CorrectedStepError::Network(e) => write!(f, "network: {e}"),
        }
    }
}

impl<E: core::fmt::Debug + core::fmt::Display> core::error::Error for CorrectedStepError<E> {}

/// What corrects a physics step's result.
pub trait Correction {
    type Error;
    /// Corrects `state`, which holds the physics step's result, marking
    /// its stages to `probe`. On error the state keeps that result.
    fn correct<P: Probe>(
        &mut self,
        model: &Model,
        state: &mut State,
        probe: &mut P,
    ) -> Result<CorrectionReport, Self::Error>;
}

/// No correction: the plain coarse cloth.
pub struct Plain;

impl Correction for Plain {
    type Error = core::convert::Infallible;
    fn correct<P: Probe>(&mut self, _: &Model, _: &mut State, _: &mut P) -> Result<CorrectionReport, Self::Error> {
        Ok(CorrectionReport::default())
    }
}

/// A correction or none: `None` is [`Plain`] (the board runs a scene
/// outside the network's training envelope so, on its plain fallback
/// step).
impl<C: Correction> Correction for Option<C> {
    type Error = C::Error;
    fn correct<P: Probe>(
        &mut self,
        model: &Model,
        state: &mut State,
        probe: &mut P,
    ) -> Result<CorrectionReport, C::Error> {
        match self {
            Some(c) => c.correct(model, state, probe),
            None => Ok(CorrectionReport::default()),
        }
    }
}

/// The int8 network and its latents: [`step2`].
pub struct Int8<'n, 'a, 's> {
    pub net: Checked<'n, 'a>,
    pub scratch: Scratch<'s>,
}

impl Correction for Int8<'_, '_, '_> {
    type Error = GnnError;
    fn correct<P: Probe>(
        &mut self,
        model: &Model,
        state: &mut State,
        probe: &mut P,
    ) -> Result<CorrectionReport, GnnError> {
        probe.enter(Stage::DynamicEdges);
        let found = dynamic_edges(model, state, self.net)?;
        infer_probed(model, state, self.net, &mut self.scratch, probe)?;
        probe.enter(Stage::Correction);
        apply(state)?;
        Ok(CorrectionReport { dynamic_edges: found.pairs, dropped_pairs: found.dropped })
    }
}

/// The one corrected step: the physics step, then `correction`, their
/// stages marked to `probe`.
pub fn step_with<C: Correction>(
    model: &Model,
    state: &mut State,
    correction: &mut C,
    probe: &mut impl Probe,
) -> Result<(StepReport, CorrectionReport), CorrectedStepError<C::Error>> {
    let physics = physics::step_probed(model, state, probe).map_err(CorrectedStepError::Physics)?;
    let correction = correction.correct(model, state, probe).map_err(CorrectedStepError::Network)?;
    Ok((physics, correction))
}

/// Stage 1: the FEM step.
pub fn step1(model: &Model, state: &mut State) -> Result<StepReport, StepError> {
    physics::step(model, state)
}

/// Stage 2: dynamic edges, network, correction. On error the state keeps
/// the physics step's result.
pub fn step2(
    model: &Model,
    state: &mut State,
    net: Checked,
    scratch: &mut Scratch,
) -> Result<CorrectionReport, GnnError> {
    Int8 { net, scratch: Scratch { latents: &mut *scratch.latents } }.correct(model, state, &mut NoProbe)
}

/// One corrected step with the int8 network: [`step_with`] without a probe.
pub fn step(
    model: &Model,
    state: &mut State,
    net: Checked,
    scratch: &mut Scratch,
) -> Result<(StepReport, CorrectionReport), CorrectedStepError> {
    let mut int8 = Int8 { net, scratch: Scratch { latents: &mut *scratch.latents } };
    step_with(model, state, &mut int8, &mut NoProbe)
}

/// What a correction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CorrectionReport {
    /// Dynamic (undirected) edges the network saw.
    pub dynamic_edges: usize,
    /// Pairs within the radius that did not fit the state's pair storage.
    pub dropped_pairs: usize,
}

/// Finds the dynamic edges of the current positions: node pairs closer
/// than the network's radius with no static edge, into the state's pair
/// storage, at most [`PAIRS_PER_NODE`] per node (pairs beyond that or the
/// storage's capacity are dropped and counted).
pub fn dynamic_edges(model: &Model, state: &mut State, net: Checked) -> Result<Proximity, GnnError> {
    let n = model.mesh.node_count();
    if state.x.len() != n {
        return Err(GnnError::MeshMismatch);
    }
    state.find_pairs(&model.mesh, net.radius, PAIRS_PER_NODE * n).map_err(|_| GnnError::Proximity)
}

/// Runs the network on the state and its dynamic edges, in the memory the
/// state lends it ([`State::lend_to_network`]); the corrections wait there
/// for [`apply`].
pub fn infer(model: &Model, state: &mut State, net: Checked, scratch: &mut Scratch) -> Result<(), GnnError> {
    infer_probed(model, state, net, scratch, &mut NoProbe)
}

/// [`infer`], marking the network's stages to `probe` ([`crate::probe`]).
pub fn infer_probed(
    model: &Model,
    state: &mut State,
    net: Checked,
    scratch: &mut Scratch,
    probe: &mut impl Probe,
) -> Result<(), GnnError> {
    let time = state.time() as f32;
    let loan = state.lend_to_network();
    if loan.x.len() != model.mesh.node_count() {
        return Err(GnnError::MeshMismatch);
    }
    loan.dx.fill(Vec3::ZERO);
    loan.dv.fill(Vec3::ZERO);
    let g = GraphRef::in_model(model, [loan.x, loan.v, loan.v_start, loan.v_start_prev], loan.pinned, loan.pairs, time);
    forward_guarded(net, g, scratch.latents, loan.sums, [loan.dx, loan.dv], net.network().guard, probe)
}

/// Adds the corrections of [`infer`] to the free nodes; a non-finite
/// correction leaves the state as it was.
pub fn apply(state: &mut State) -> Result<(), GnnError> {
    state.apply_lent_correction().map_err(|_| GnnError::NonFinite)
}
