//! The whole step's energy audit.

use super::assembly::wind_power;
use super::candidate::NOISE_FACTOR;
use super::energy::{energy_with, Energy};
use super::state::State;
use super::workspace::hinge_cache;
use crate::math::Vec3;
use crate::model::Model;

/// The energy of the state's placement, its elastic part through the
/// step's memo.
pub(super) fn state_energy(model: &Model, state: &mut State) -> (Energy, f32) {
    let ws = &mut state.ws;
    let cache = hinge_cache(ws.blocks);
    let stencil = ws.stencil.as_ref();
    energy_with(model, state.x, state.v, |x| ws.memo.elastic(model, x, stencil, cache))
}

/// The whole step's energy balance, contacts, friction, self-contact and
/// strain limiting included (the energy check guards only the solve): the
/// total energy (kinetic, elastic, gravity) may rise by the wind's work
/// over the step (trapezoidal in the start and end powers) and a
/// twentieth of the energies at stake. Checked only with the energy check
/// on and where the work done on the cloth is known: no moving pin or
/// collider.
pub struct EnergyAudit {
    energy: f32,
    /// Kinetic and elastic energy at the start.
    stake: f32,
    /// The wind's power at the start.
    power: f32,
}

/// Share of the energies at stake a step may gain before it counts.
pub(super) const ENERGY_RISE: f32 = 0.05;

impl EnergyAudit {
    pub(super) fn start(model: &Model, state: &mut State) -> Option<EnergyAudit> {
        let scene = &model.scene;
        let moving = scene.pins.iter().any(|p| p.motion != crate::model::PinMotion::Fixed)
            || scene.colliders.iter().any(|c| c.velocity != Vec3::ZERO);
        if !model.params.energy_check || moving {
            return None;
        }
        let (e, _) = state_energy(model, state);
        let power = wind_power(model, state.time(), state.x, state.v, state.ws.f_ext);
        Some(EnergyAudit { energy: e.total(), stake: e.kinetic + e.membrane + e.bending, power })
    }

    /// Whether the step ended with more energy than it may have (beyond
    /// the energies' rounding bounds too).
    pub(super) fn rose(&self, model: &Model, state: &mut State) -> bool {
        let (e, noise) = state_energy(model, state);
        let power = wind_power(model, state.time(), state.x, state.v, state.ws.f_ext);
        let work = 0.5 * model.params.dt * (self.power + power);
        let stake = self.stake + e.kinetic + e.membrane + e.bending + work.abs();
        let rounding =
            NOISE_FACTOR * noise + 8.0 * f32::EPSILON * (libm::fabsf(e.gravity) + libm::fabsf(self.energy) + stake);
        e.total() > self.energy + work + ENERGY_RISE * stake + rounding
    }
}
