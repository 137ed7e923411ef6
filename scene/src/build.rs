//! From a parsed scene to what the core steps: its model (mesh,
//! material, scene, step parameters) and its initial state. Plain
//! functions a rollout loop (the desktop's `weft_host::sim::run_from`, the
//! page's `Sim`) calls, in that order; the model borrows its mesh, pins and
//! colliders from a [`ModelParts`] the caller keeps.

use weft_core::model::{CoarseGrain, Collider, Material, Model, Pin, Scene, Wind};
use weft_core::prelude::{Mesh, State, Vec3};

use crate::scenario::{toml_key, Scenario};
use crate::storage::{VecMeshStorage, VecStateStorage};
use crate::{ErrorKind, SceneError};

type Result<T> = std::result::Result<T, SceneError>;

fn mesh_error(key: &str, e: impl std::fmt::Display) -> SceneError {
    SceneError::new(key, ErrorKind::Mesh, e.to_string())
}

/// What a [`Model`] borrows: the mesh's storage, the pins and the
/// colliders.
#[derive(Default)]
pub struct ModelParts {
    mesh: Option<VecMeshStorage>,
    pins: Vec<Pin>,
    colliders: Vec<Collider>,
}

/// The model of `scn`, its material's membrane coarse-grained by `grain`
/// (`weft_core::model::Material::coarse_grained`; a factor out of bounds
/// is an error), in `parts`.
pub fn model<'p>(scn: &Scenario, grain: CoarseGrain, parts: &'p mut ModelParts) -> Result<Model<'p>> {
    let mut material = Material::from(scn.material);
    if grain != CoarseGrain::NONE {
        material = material.coarse_grained(grain).map_err(toml_key)?;
    }
    let ModelParts { mesh, pins, colliders } = parts;
    let mesh = match &scn.mesh {
        None => {
            let grid = scn.cloth.grid();
            let storage = mesh.insert(VecMeshStorage::for_counts(grid.counts()));
            Mesh::grid(&grid, storage.storage()).map_err(|e| mesh_error("cloth", e))?
        }
        Some(m) => {
            let storage = mesh.insert(VecMeshStorage::for_triangles(m.positions.len(), m.triangles.len()));
            scn.core_mesh(storage.storage())?
        }
    };
    *pins = scn.core_pins(mesh.rest())?;
    *colliders = scn.core_colliders()?;
    let scene = Scene { gravity: Vec3::from_array(scn.gravity), pins, colliders, wind: scn.wind.map(Wind::from) };
    let params = scn.params(mesh.min_edge_length());
    Model::new(mesh, material, scene, params).map_err(toml_key)
}

/// The start velocities of `scn` on `model` where the file gives any
/// (`cloth.velocity`, `cloth.spin`, `[[kick]]`; `None`: the cloth starts
/// at rest): every free node moving with the cloth's velocity and spin and
/// then its kicks, pinned nodes with their pins.
pub fn start_velocities(scn: &Scenario, model: &Model) -> Result<Option<Vec<Vec3>>> {
    let (v, w) = (Vec3::from_array(scn.cloth.velocity), Vec3::from_array(scn.cloth.spin));
    if v == Vec3::ZERO && w == Vec3::ZERO && scn.kicks.is_empty() {
        return Ok(None);
    }
    let c = Vec3::from_array(scn.cloth.center);
    let mut velocities: Vec<Vec3> = model.mesh.rest().iter().map(|x| v + w.cross(*x - c)).collect();
    let mut pinned = vec![false; velocities.len()];
    for pin in model.scene.pins {
        if let Some(u) = velocities.get_mut(pin.node as usize) {
            *u = pin.start_velocity();
            pinned[pin.node as usize] = true;
        }
    }
    for k in &scn.kicks {
        for i in scn.select(k.selector())? {
            if !pinned[i] {
                velocities[i] = Vec3::from_array(k.velocity);
            }
        }
    }
    Ok(Some(velocities))
}

/// The initial state of `model` (built from `scn`) in `storage`: the rest
/// mesh at rest, or moving with [`start_velocities`].
pub fn start<'s>(scn: &Scenario, model: &Model, storage: &'s mut VecStateStorage) -> Result<State<'s>> {
    let mut state = State::new(model, storage.storage()).map_err(|e| SceneError::value("", format!("state: {e}")))?;
    if let Some(v) = start_velocities(scn, model)? {
        state.set_velocities(&v).map_err(|e| SceneError::value("cloth.velocity", format!("{e} (with the kicks)")))?;
    }
    Ok(state)
}
