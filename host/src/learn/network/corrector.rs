//! The float network as a corrector of the rollout loop, and corrected
//! rollouts with it.
use crate::learn::network::config::GnnConfig;
use crate::learn::network::file::Trained;
use crate::learn::network::graph::graph_of;
use crate::learn::network::graph::Graph;
use weft_core::model::CoarseGrain;

use anyhow::{Context, Result};
use candle_core::Device;
use weft_core::prelude::*;

use crate::sim::corrector::Corrector;

use crate::learn::data::metrics::{frame_errors, rollout_mean};
use crate::learn::data::Trajectory;
use crate::sim::scenario::Scenario;

/// The graph of the state after a physics step, `net`'s corrections of it
/// added; returns the graph the network saw (its dynamic edges are the
/// state's pairs).
pub(crate) fn add_network_correction(
    model: &Model,
    state: &mut State,
    cfg: &GnnConfig,
    net: impl FnOnce(&Graph) -> Result<(Vec<Vec3>, Vec<Vec3>)>,
) -> Result<Graph> {
    let g = graph_of(model, state, cfg)?;
    let (dx, dv) = net(&g)?;
    state.apply_correction(&dx, &dv).context("correction")?;
    Ok(g)
}

/// The float network as a [`Corrector`]: the graph of the state after the
/// physics step, the network's corrections (times its gain) added.
pub struct Float<'m>(pub &'m Trained);

impl Corrector for Float<'_> {
    fn pairs(&self, nodes: usize) -> usize {
        self.0.meta.config.pairs_per_node * nodes
    }
    fn coarse_grain(&self) -> CoarseGrain {
        self.0.meta.config.coarse_grain()
    }
    fn base_step(&self) -> Option<crate::sim::scenario::IntegratorSpec> {
        self.0.meta.config.trained_base()
    }
    fn correct(&mut self, model: &Model, state: &mut State) -> Result<usize> {
        add_network_correction(model, state, &self.0.meta.config, |g| self.0.correct(g, &Device::Cpu))?;
        Ok(state.pairs().len())
    }
}

/// The float network's corrected rollout of `scn` at every node
/// ([`crate::sim::rollout`]).
pub fn corrected_rollout(scn: &Scenario, steps: usize, m: &Trained) -> Result<crate::sim::Rolled> {
    let all: Vec<usize> = (0..scn.node_count()).collect();
    crate::sim::rollout(scn, steps, &all, &mut Float(m))
}

/// Mean position RMSE (m) of the float network's corrected rollout of
/// `traj` over `steps` frames; a rollout that fails counts its last error
/// for the remaining frames.
pub fn corrected_error(traj: &Trajectory, m: &Trained, steps: usize) -> Result<f32> {
    let steps = steps.min(traj.x.len() - 1);
    let r = corrected_rollout(&traj.scenario, steps, m)?;
    Ok(rollout_mean(frame_errors(&r.x, &traj.x), steps))
}
