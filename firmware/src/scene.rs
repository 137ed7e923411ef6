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

/// The local–global step ([`weft_core::physics::local_global`]) on the
/// grid scenes: the QEMU run measures it beside the linearised step, the
/// desktop checks it bit for bit; the board does not run it.
#[allow(dead_code)]
pub mod local_global {
    use super::{checksum, N, STEPS};
    use weft_core::math::Vec3;
    use weft_core::physics::local_global::Iterations;

    /// The local–global steps the QEMU run measures: iterations, and
    /// Chebyshev's `ρ` in hundredths (0: plain).
    pub const RUNS: [(u32, u32); 5] = [(5, 0), (10, 0), (20, 0), (5, 95), (10, 95)];

    /// A run of [`RUNS`] as the step takes it.
    pub fn iterations((count, rho): (u32, u32)) -> Iterations {
        Iterations { count, chebyshev: (rho > 0).then(|| rho as f32 / 100.0) }
    }

    const NODES: usize = N * N;
    /// The grid's band in its node order: a row and a diagonal.
    pub const BAND: usize = N + 1;
    /// The factor's floats.
    pub const FACTOR: usize = weft_core::physics::local_global::factor_floats(NODES, BAND);
    const STENCIL: usize = weft_core::physics::stencil::floats(Some([N, N]));

    /// The local–global step's memory on the grid: its factor, pins, bending
    /// stencil, state and scratch (about 41 KB: QEMU's, not the board's).
    pub struct Memory {
        factor: [f32; FACTOR],
        pinned: [u8; NODES],
        stencil: [f32; STENCIL],
        x: [Vec3; NODES],
        v: [Vec3; NODES],
        work: [[Vec3; NODES]; 4],
    }

    impl Memory {
        pub const fn new() -> Self {
            Memory {
                factor: [0.0; FACTOR],
                pinned: [0; NODES],
                stencil: [0.0; STENCIL],
                x: [Vec3::ZERO; NODES],
                v: [Vec3::ZERO; NODES],
                work: [[Vec3::ZERO; NODES]; 4],
            }
        }
    }

    impl Default for Memory {
        fn default() -> Self {
            Self::new()
        }
    }

    /// Runs [`STEPS`](super::STEPS) steps of a grid scene's plain `model` ([`MATERIAL`](super::MATERIAL))
    /// with the local–global step ([`weft_core::physics::local_global`]) at
    /// `iterations` from rest, calling `each(None, x)` once its factor is made
    /// and `each(Some(step), x)` after every step (`x` the positions); returns
    /// the final state's [`checksum`](super::checksum).
    pub fn run(
        model: &weft_core::model::Model,
        iterations: Iterations,
        memory: &mut Memory,
        mut each: impl FnMut(Option<u32>, &[Vec3]),
    ) -> Result<u32, weft_core::physics::local_global::LocalGlobalError> {
        use weft_core::physics::local_global::{LocalGlobal, LocalGlobalError};
        use weft_core::physics::stencil::{Bending, BendingStencil};
        let Memory { factor, pinned, stencil, x, v, work } = memory;
        let step = LocalGlobal::new(model, factor, pinned)?;
        let plate = model.material.plate();
        let stencil = BendingStencil::new(&model.mesh, plate, stencil);
        let bending = stencil.as_ref().map_or(Bending::MatrixFree(plate), Bending::Stencil);
        let rest = model.mesh.rest();
        let (x, v) = (
            x.get_mut(..rest.len()).ok_or(LocalGlobalError::Length)?,
            v.get_mut(..rest.len()).ok_or(LocalGlobalError::Length)?,
        );
        x.copy_from_slice(rest);
        v.fill(Vec3::ZERO);
        each(None, x);
        let [a, b, c, d] = work;
        for s in 0..STEPS {
            let t = f64::from(s) * f64::from(model.params.dt);
            step.step(model, bending, iterations, t, x, v, [a, b, c, d])?;
            each(Some(s), x);
        }
        Ok(checksum(x, v))
    }
}
