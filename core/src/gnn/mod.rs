//! The correction network's view of the cloth, and the network itself.
//!
//! After the FEM step, the network sees the cloth as a graph: every static
//! (mesh) edge and every dynamic edge (node pairs closer than the contact
//! radius `r` with no static edge, from [`crate::contact::proximity`]) in
//! both directions, and every node. [`features`] turns positions,
//! velocities and the rest mesh into the network's input features, the same
//! code for training on a desktop and for inference on a microcontroller;
//! [`int8`] runs the quantised network.
//!
//! A corrected step is [`step`]: physics → dynamic edges → network →
//! correction.

#[cfg(all(feature = "dsp", target_arch = "arm"))]
pub mod dsp;
pub mod features;
pub mod int8;

use crate::model::Model;
use crate::physics::{self, StepError, StepReport};
use crate::state::State;
use int8::{CorrectionReport, GnnError, Network, Scratch};

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

/// One corrected step: the FEM step, then the dynamic edges of its result,
/// the network and its correction ([`int8::correct`]).
pub fn step(
    model: &Model,
    state: &mut State,
    net: &Network,
    scratch: &mut Scratch,
) -> Result<(StepReport, CorrectionReport), CorrectedStepError> {
    let physics = physics::step(model, state).map_err(CorrectedStepError::Physics)?;
    let correction = int8::correct(model, state, net, scratch).map_err(CorrectedStepError::Network)?;
    Ok((physics, correction))
}
