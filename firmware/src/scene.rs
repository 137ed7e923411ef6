//! The firmware's built-in scenario: a 16×16 cloth held at two corners,
//! swinging down onto a sphere, every step corrected by the baked int8
//! network. Shared with the host's bit-exactness test (`tests/`), which
//! runs the same code through `weft-core` on the desktop.

use weft_core::gnn::int8::ScratchSizes;
use weft_core::math::Vec3;
use weft_core::mesh::{Grid, MeshCounts, NodeId};
use weft_core::model::{Collider, Material, Pin, Scene, Shape, StepParams};
use weft_core::state::StateSizes;
use weft_core::storage::StateBuffers;

/// Nodes per side.
pub const N: usize = 16;
/// Steps the firmware runs (1/60 s each).
pub const STEPS: u32 = 60;
/// Dynamic (and contact) pair capacity.
pub const PAIRS: usize = 256;

pub const COUNTS: MeshCounts = MeshCounts::grid(N, N);
pub const STATE: StateSizes = StateSizes::new(COUNTS, PAIRS);
pub const SCRATCH: ScratchSizes = ScratchSizes::new(COUNTS, PAIRS, weft_weights::LATENT);
// The network's int32 sums live in the state's solver blocks.
const _: () = assert!(SCRATCH.sums_fit_in_state(COUNTS));

/// The scene's state memory.
pub type StateMemory =
    StateBuffers<{ STATE.vec3 }, { STATE.mat3 }, { STATE.flags }, { STATE.cells }, { STATE.pairs }, { STATE.solver }>;
/// The network's scratch memory.
pub type GnnMemory = weft_core::gnn::int8::ScratchBuffers<{ SCRATCH.latents }>;

/// A horizontal 0.8 m square at 1 m, held at the two corners of its back
/// edge: it swings down and hits the sphere in front of that edge.
pub fn grid() -> Grid {
    Grid::horizontal(N, N, 0.8, 0.8, 1.0)
}

/// The two held corners (the back edge is the grid's last row).
pub fn pins() -> [Pin; 2] {
    let g = grid();
    let (a, b) = (g.node(0, N - 1), g.node(N - 1, N - 1));
    [Pin::fixed(a as NodeId, g.position(0, N - 1)), Pin::fixed(b as NodeId, g.position(N - 1, N - 1))]
}

pub fn colliders() -> [Collider; 2] {
    let sphere = Shape::Sphere { center: Vec3::new(0.05, 0.45, -0.1), radius: 0.2 };
    let ground = Shape::Plane { normal: Vec3::new(0.0, 1.0, 0.0), offset: 0.0 };
    [Collider { friction: 0.4, ..Collider::new(sphere) }, Collider { friction: 0.5, ..Collider::new(ground) }]
}

/// The learning families' cloth (cotton with softened compression).
pub const MATERIAL: Material = Material { compression: 0.05, ..Material::COTTON };

pub fn scene<'a>(pins: &'a [Pin], colliders: &'a [Collider]) -> Scene<'a> {
    Scene { pins, colliders, ..Scene::default() }
}

/// The default step, its solves stopped at a relative residual of 1e-4:
/// on this scene the final positions move as far from a solve 100× tighter
/// at 1e-5 as at 1e-4 (the swing onto the sphere magnifies any difference;
/// `cargo run --release -p weft-tests --example scene_solve -- accuracy`),
/// both well below the step's own error, at two thirds of the iterations.
pub fn params() -> StepParams {
    StepParams { cg_tolerance: 1e-4, ..StepParams::default() }
}

/// FNV-1a (32 bit) over the bits of every position and velocity.
pub fn checksum(x: &[Vec3], v: &[Vec3]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for p in x.iter().chain(v) {
        for f in [p.x, p.y, p.z] {
            for b in f.to_bits().to_le_bytes() {
                h ^= b as u32;
                h = h.wrapping_mul(0x0100_0193);
            }
        }
    }
    h
}

/// Nodes whose positions the firmware logs (corners and centre).
pub const PROBES: [usize; 3] = [0, N - 1, N * N / 2 + N / 2];
