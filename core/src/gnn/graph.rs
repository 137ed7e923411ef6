//! The graph the network runs on, shared by the float network (on the
//! desktop) and the int8 one: a borrowed view of the rest mesh, the state
//! after the physics step, the dynamic pairs and the cloth's surroundings.

use super::features;
use crate::math::Vec3;
use crate::mesh::{Mesh, NodeId};
use crate::model::{Collider, Material, Model, Wind};
use crate::physics::state::State;

/// The graph the network runs on: the rest mesh, the current state and
/// the dynamic pairs, and what it sees around the cloth (the colliders and
/// the wind at the state's time and the material, [`features::Surroundings`]).
#[derive(Clone, Copy)]
pub struct GraphRef<'g> {
    pub mesh: &'g Mesh<'g>,
    pub x: &'g [Vec3],
    pub v: &'g [Vec3],
    /// The velocities the step started from ([`State::start_velocities`]).
    pub v_start: &'g [Vec3],
    /// The velocities the step before started from
    /// ([`State::previous_start_velocities`]).
    pub v_start_prev: &'g [Vec3],
    pub pinned: &'g [u8],
    pub pairs: &'g [[NodeId; 2]],
    pub colliders: &'g [Collider],
    pub wind: Option<Wind>,
    pub time: f32,
    pub material: &'g Material,
}

impl<'g> GraphRef<'g> {
    /// The graph of `state` (positions, velocities and those the step and
    /// the step before started from, pinned flags, time and the pairs of its
    /// last proximity search) in `model`.
    pub fn of(model: &'g Model<'g>, state: &'g State) -> GraphRef<'g> {
        let time = state.time() as f32;
        let (x, v) = (state.positions(), state.velocities());
        let starts = [state.start_velocities(), state.previous_start_velocities()];
        GraphRef::in_model(model, [x, v, starts[0], starts[1]], state.pinned(), state.pairs(), time)
    }

    /// The graph of these positions, velocities, start velocities and
    /// previous start velocities, pinned flags and pairs at `time` (s) in
    /// `model`.
    pub(crate) fn in_model(
        model: &'g Model<'g>,
        [x, v, v_start, v_start_prev]: [&'g [Vec3]; 4],
        pinned: &'g [u8],
        pairs: &'g [[NodeId; 2]],
        time: f32,
    ) -> GraphRef<'g> {
        GraphRef {
            mesh: &model.mesh,
            x,
            v,
            v_start,
            v_start_prev,
            pinned,
            pairs,
            colliders: model.scene.colliders,
            wind: model.scene.wind,
            time,
            material: &model.material,
        }
    }

    /// What the network of radius `radius` sees around the cloth.
    pub fn surroundings(&self, radius: f32) -> features::Surroundings<'g> {
        features::Surroundings::new(self.colliders, self.wind.as_ref(), self.time, radius, self.material)
    }
}
