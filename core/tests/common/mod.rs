#![allow(dead_code)]
use weft_core::prelude::*;

// The desktop's heap storage, shared with the host crate (tests may allocate).
#[path = "../../../scene/src/storage.rs"]
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

/// A strip 0.04 m wide hanging 1 m from its top edge (3 × 41 nodes, ν = 0,
/// heavily damped): the grid, its material, its top nodes, and the bar's
/// elongation under its own weight, `ρ g L² / (2 E t)`.
pub struct HangingStrip {
    pub grid: Grid,
    pub material: Material,
    pub top: Vec<usize>,
    pub elongation: f32,
}

impl HangingStrip {
    pub fn new() -> Self {
        let l = 1.0f32;
        let grid = Grid::vertical(3, 41, 0.04, l, 0.0);
        let material = Material { stretch: 200.0, poisson: 0.0, bending: 1e-7, damping_mass: 2.0, ..Material::COTTON };
        let top = (0..grid.nx).map(|i| grid.node(i, grid.ny - 1)).collect();
        let elongation = material.density * 9.81 * l * l / (2.0 * material.stretch);
        HangingStrip { grid, material, top, elongation }
    }

    /// Asserts that positions `x` and velocities `v` are at rest within 5 %
    /// of the bar's elongation (its bottom edge from `y = 0`).
    pub fn assert_elongation(&self, x: &[Vec3], v: &[Vec3]) {
        let g = &self.grid;
        let bottom: f32 = (0..g.nx).map(|i| x[g.node(i, 0)].y).sum::<f32>() / g.nx as f32;
        let (elongation, analytic) = (0.0 - bottom, self.elongation);
        let err = (elongation - analytic).abs() / analytic;
        println!("strip elongation {elongation:.6} m, analytic {analytic:.6} m, error {:.2} %", err * 100.0);
        assert!(err < 0.05, "elongation {elongation} vs analytic {analytic} ({:.1} %)", err * 100.0);
        let v_max = v.iter().map(|v| v.norm()).fold(0.0, f32::max);
        assert!(v_max < 1e-3, "not settled: |v| = {v_max}");
    }
}
