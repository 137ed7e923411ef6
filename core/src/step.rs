//! One corrected step, the pipeline of the method, in the stages a caller
//! may run apart (as MuJoCo's `mj_step1` / `mj_step2`):
//!
//! 1. [`step1`]: the FEM step ([`physics::step`]) gives the *initial*
//!    positions and velocities;
//! 2. [`step2`]: the dynamic edges of that result (node pairs closer than
//!    the network's radius with no static edge), the network on the state,
//!    its static and dynamic edges, and its corrections added: the final
//!    state, which the next step starts from.
//!
//! [`step`] runs both. Between the stages the state holds the physics
//! result, so a caller can read or record it, or stop there (the plain
//! coarse cloth).

use crate::gnn::int8::{self, Checked, CorrectionReport, GnnError, Scratch};
use crate::model::Model;
use crate::physics::{self, StepError, StepReport};
use crate::state::State;

/// Why a corrected step stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CorrectedStepError {
    /// The physics step failed (state as [`physics::step`] leaves it).
    Physics(StepError),
    /// The network could not run; the state holds the physics step's
    /// uncorrected result.
    Network(GnnError),
}

impl core::fmt::Display for CorrectedStepError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CorrectedStepError::Physics(e) => write!(f, "physics: {e}"),
            CorrectedStepError::Network(e) => write!(f, "network: {e}"),
        }
    }
}

impl core::error::Error for CorrectedStepError {}

/// Stage 1: the FEM step.
pub fn step1(model: &Model, state: &mut State) -> Result<StepReport, StepError> {
    physics::step(model, state)
}

/// Stage 2: dynamic edges, network, correction ([`int8::correct`]). On
/// error the state keeps the physics step's result.
pub fn step2(
    model: &Model,
    state: &mut State,
    net: Checked,
    scratch: &mut Scratch,
) -> Result<CorrectionReport, GnnError> {
    int8::correct(model, state, net, scratch)
}

/// One corrected step: [`step1`] then [`step2`].
pub fn step(
    model: &Model,
    state: &mut State,
    net: Checked,
    scratch: &mut Scratch,
) -> Result<(StepReport, CorrectionReport), CorrectedStepError> {
    let physics = step1(model, state).map_err(CorrectedStepError::Physics)?;
    let correction = step2(model, state, net, scratch).map_err(CorrectedStepError::Network)?;
    Ok((physics, correction))
}
