#![allow(dead_code)]
use weft_core::prelude::*;

/// Owns mesh storage and builds meshes/states for tests.
pub struct Cloth {
    pub mesh_storage: VecMeshStorage,
}

pub fn grid_storage(grid: &Grid) -> VecMeshStorage {
    VecMeshStorage::for_counts(grid.counts())
}

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
