#![allow(dead_code)]
use weft_core::prelude::*;

// The desktop's heap storage, shared with the host crate (tests may allocate).
#[path = "../../../host/src/sim/storage.rs"]
mod storage;
pub use storage::{VecMeshStorage, VecStateStorage};

/// Tiny deterministic generator (xorshift) for test inputs.
pub struct Rng(pub u64);
impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }
    pub fn vec3(&mut self, s: f32) -> Vec3 {
        Vec3::new(self.uniform(-s, s), self.uniform(-s, s), self.uniform(-s, s))
    }
}

/// Builds a grid cloth and runs `f` on its model and a fresh state.
pub fn with_cloth<R>(
    grid: &Grid,
    material: Material,
    scene: Scene,
    params: StepParams,
    pairs: usize,
    f: impl FnOnce(&Model, &mut State) -> R,
) -> R {
    let mut ms = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(grid, ms.storage()).expect("grid");
    let model = Model::new(mesh, material, scene, params).expect("model");
    let mut ss = VecStateStorage::new(&model, pairs);
    let mut state = State::new(&model, ss.storage()).expect("state");
    f(&model, &mut state)
}

pub fn no_gravity() -> Scene<'static> {
    Scene { gravity: Vec3::ZERO, ..Scene::default() }
}

pub fn momentum(model: &Model, state: &State) -> Vec3 {
    state.velocities().iter().enumerate().fold(Vec3::ZERO, |acc, (i, v)| acc + *v * model.mass(i))
}

/// Builds a grid cloth with `pinned` nodes held at their rest positions
/// (default gravity) and runs `f` on its model and a fresh state (with
/// history storage when the integrator needs it).
pub fn with_pinned<R>(
    grid: &Grid,
    material: Material,
    pinned: &[usize],
    params: StepParams,
    f: impl FnOnce(&Model, &mut State) -> R,
) -> R {
    let mut ms = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(grid, ms.storage()).expect("grid");
    let pins: Vec<Pin> = pinned.iter().map(|&n| Pin::fixed(n as u16, mesh.rest()[n])).collect();
    let scene = Scene { pins: &pins, ..Scene::default() };
    let model = Model::new(mesh, material, scene, params).expect("model");
    let mut ss = VecStateStorage::new(&model, 0);
    let mut state = State::new(&model, ss.storage()).expect("state");
    f(&model, &mut state)
}
