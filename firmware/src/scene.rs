//! The firmware's built-in scenarios, every step corrected by the baked
//! int8 network: a 16×16 cloth held at two corners swinging down onto a
//! sphere ([`Scenario::Swing`]), the same cloth dropped onto a sphere,
//! where it folds against itself and the network gets dynamic edges
//! ([`Scenario::Drape`]), and a round tablecloth whose mesh is not a grid
//! (`host/scenarios/meshes/disc.obj`, [`disc`]) dropped onto a sphere
//! ([`Scenario::Tablecloth`]). Shared with the host's bit-exactness test
//! (`tests/`), which runs the same code through `weft-core` on the desktop,
//! and with the browser page (`web/`).

use weft_core::gnn::int8::ScratchSizes;
use weft_core::math::Vec3;
use weft_core::mesh::{Grid, MeshCounts, NodeId};
use weft_core::model::{Collider, Material, Pin, Scene, Shape, StepParams};
use weft_core::physics::state::StateSizes;
use weft_core::storage::StateBuffers;

/// Nodes per side.
pub const N: usize = 16;
/// Steps the firmware runs per scenario (1/60 s each): 60, or the number
/// in `WEFT_FIRMWARE_STEPS` when the firmware is built (the instruction
/// profile, `cargo run -p weft-tests --example qemu_profile`, runs 4).
pub const STEPS: u32 = match option_env!("WEFT_FIRMWARE_STEPS") {
    Some(s) => parse_steps(s),
    None => 60,
};

/// A positive decimal number of steps (a build error otherwise).
const fn parse_steps(s: &str) -> u32 {
    let b = s.as_bytes();
    assert!(!b.is_empty(), "WEFT_FIRMWARE_STEPS is empty");
    let (mut n, mut i) = (0u32, 0);
    while i < b.len() {
        assert!(b[i].is_ascii_digit() && n < 100_000, "WEFT_FIRMWARE_STEPS is not a step count");
        n = 10 * n + (b[i] - b'0') as u32;
        i += 1;
    }
    assert!(n > 0, "WEFT_FIRMWARE_STEPS is 0");
    n
}
/// Dynamic (and contact) pair capacity: two pairs a node (four pair ends),
/// half the desktop's [`weft_core::gnn::int8::PAIRS_PER_NODE`]. Pairs
/// beyond it are dropped and counted (`pairs dropped` in the log); the
/// built-in scenes find at most 14 (`tests/firmware.rs` checks that none
/// is dropped). The network's latents, sized by it, leave the core-coupled
/// RAM 22 KB free, and the smaller pair storage leaves the stack 10 KB.
pub const PAIRS: usize = weft_core::gnn::int8::PAIRS_PER_NODE / 2 * N * N;

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

/// A scenario the firmware runs (both start from the same rest mesh).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Held at the two corners of its back edge, the cloth swings down and
    /// hits a sphere in front of that edge.
    Swing,
    /// Dropped flat onto a sphere 0.12 m below it, the cloth drapes over it
    /// and folds against itself around it (no pins).
    Drape,
    /// The disc dropped onto a sphere resting on the ground (no pins).
    Tablecloth,
}

impl Scenario {
    /// The scenarios, in the order the firmware runs them.
    pub const ALL: [Scenario; 3] = [Scenario::Swing, Scenario::Drape, Scenario::Tablecloth];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::Swing => "swing",
            Scenario::Drape => "drape",
            Scenario::Tablecloth => "tablecloth",
        }
    }

    /// The held nodes: the two corners of the back edge (the grid's last
    /// row) in the swing, none in the drape.
    pub fn pins(self) -> Pins {
        let g = grid();
        let (a, b) = (g.node(0, N - 1), g.node(N - 1, N - 1));
        let pins = [Pin::fixed(a as NodeId, g.position(0, N - 1)), Pin::fixed(b as NodeId, g.position(N - 1, N - 1))];
        Pins { pins, count: if self == Scenario::Swing { 2 } else { 0 } }
    }

    /// A sphere and the ground.
    pub fn colliders(self) -> [Collider; 2] {
        let sphere = match self {
            Scenario::Swing => Shape::Sphere { center: Vec3::new(0.05, 0.45, -0.1), radius: 0.2 },
            Scenario::Drape => Shape::Sphere { center: Vec3::new(0.05, 0.63, -0.05), radius: 0.25 },
            Scenario::Tablecloth => Shape::Sphere { center: Vec3::new(0.0, 0.3, 0.0), radius: 0.3 },
        };
        let ground = Shape::Plane { normal: Vec3::new(0.0, 1.0, 0.0), offset: 0.0 };
        [Collider { friction: 0.4, ..Collider::new(sphere) }, Collider { friction: 0.5, ..Collider::new(ground) }]
    }
}

/// A scenario's pins (at most two).
#[derive(Clone, Copy, Debug)]
pub struct Pins {
    pins: [Pin; 2],
    count: usize,
}

impl Pins {
    pub fn as_slice(&self) -> &[Pin] {
        &self.pins[..self.count]
    }
}

/// Nodes and triangles of the tablecloth's disc (the firmware itself takes
/// the disc `build.rs` baked; `build.rs`, the tests and the page read it).
#[allow(dead_code)]
pub const DISC_NODES: usize = 217;
#[allow(dead_code)]
pub const DISC_TRIANGLES: usize = 384;

/// The tablecloth's rest positions (the disc, 0.4 m in radius, horizontal
/// at 0.9 m) and triangles, read from `host/scenarios/meshes/disc.obj`
/// (`weft mesh disc`) without allocating; `None` if the file does not
/// hold exactly that many well-formed vertices and triangles.
#[allow(clippy::type_complexity, dead_code)]
pub fn disc() -> Option<([Vec3; DISC_NODES], [[NodeId; 3]; DISC_TRIANGLES])> {
    let (mut x, mut t) = ([Vec3::ZERO; DISC_NODES], [[0; 3]; DISC_TRIANGLES]);
    let (mut nx, mut nt) = (0, 0);
    for line in include_str!("../../host/scenarios/meshes/disc.obj").lines() {
        let mut w = line.split_whitespace();
        let kind = w.next();
        let mut num = [0f32; 3];
        let mut count = 0;
        for (slot, word) in num.iter_mut().zip(w) {
            *slot = word.parse().ok()?;
            count += 1;
        }
        match (kind, count) {
            (Some("v"), 3) => {
                *x.get_mut(nx)? = Vec3::new(num[0], num[1] + 0.9, num[2]);
                nx += 1;
            }
            (Some("f"), 3) => {
                *t.get_mut(nt)? = num.map(|i| (i as NodeId).wrapping_sub(1));
                nt += 1;
            }
            _ => {}
        }
    }
    (nx == DISC_NODES && nt == DISC_TRIANGLES).then_some((x, t))
}

/// A horizontal 0.8 m square at 1 m.
pub fn grid() -> Grid {
    Grid::horizontal(N, N, 0.8, 0.8, 1.0)
}

/// The learning families' cloth (cotton with softened compression).
pub const MATERIAL: Material = Material { compression: 0.05, ..Material::COTTON };

/// The material of the coarse step `net` corrects: [`MATERIAL`] on the
/// network's coarse grain (`weft calibrate`).
pub fn corrected_material(net: &weft_core::gnn::int8::Network) -> Result<Material, weft_core::model::ParamError> {
    MATERIAL.coarse_grained(net.coarse)
}

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
