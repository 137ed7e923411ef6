//! The firmware's scenes: every scene file in `firmware/scenes/` (the
//! format `weft simulate` reads), baked into flash by `build.rs`, each
//! step corrected by the baked int8 network. The state's capacities are
//! the largest scene's; `build.rs` refuses a scene that does not fit.

use weft_core::gnn::int8::ScratchSizes;
use weft_core::math::Vec3;
use weft_core::mesh::{BendTriangle, Edge, Hinge, MeshCounts, MeshParts, Triangle};
// What the baked scenes' values are written in (`build.rs` writes them
// as the core's types print them); a folder of scenes may use only some.
#[allow(unused_imports)]
use weft_core::model::{
    CoarseSpace::{Auto, Rigid, Translations},
    Integrator::{BackwardEuler, Bdf2},
    PinMotion::{Fixed, Linear, Oscillate},
    SelfContact,
    Shape::{Capsule, Plane, Sphere},
    Taut,
};
use weft_core::model::{Collider, Material, Pin, Scene, StepParams, Wind};
use weft_core::physics::state::StateSizes;
use weft_core::storage::StateBuffers;

/// A scene as `build.rs` baked it from its file.
pub struct Baked {
    pub name: &'static str,
    /// The scene file, from the repository's root.
    pub file: &'static str,
    pub mesh: MeshParts<'static>,
    /// The file's material; the corrected step runs it on the network's
    /// coarse grain ([`Baked::stepped_material`]).
    pub material: Material,
    pub gravity: Vec3,
    pub pins: &'static [Pin],
    pub colliders: &'static [Collider],
    pub wind: Option<Wind>,
    pub params: StepParams,
    /// Start velocities of every node, where the file gives any
    /// (`cloth.velocity`, `cloth.spin`, `[[kick]]`).
    pub velocities: Option<&'static [Vec3]>,
    /// Frames (`time.steps`) and physics steps a frame.
    pub frames: u32,
    pub substeps: u32,
    /// Whether the network corrects it: a scene outside the training
    /// envelope (`weft_scene::envelope`) runs its plain fallback step,
    /// BDF2 on the file's material, which `params` then holds.
    pub corrected: bool,
}

impl Baked {
    pub fn scene(&self) -> Scene<'static> {
        Scene { gravity: self.gravity, pins: self.pins, colliders: self.colliders, wind: self.wind }
    }

    /// The material of the step the firmware runs, as `weft simulate
    /// --corrected` runs it: the file's on the network's coarse grain
    /// (`weft calibrate`) where the network corrects, else the file's.
    pub fn stepped_material(
        &self,
        net: &weft_core::gnn::int8::Network,
    ) -> Result<Material, weft_core::model::ParamError> {
        match self.corrected {
            true => self.material.coarse_grained(net.coarse),
            false => Ok(self.material),
        }
    }

    /// Frames the firmware runs: the file's, or at most the number in
    /// `WEFT_FIRMWARE_STEPS` when the firmware is built (the instruction
    /// profile, `cargo run -p weft-tests --example qemu_profile`, runs 4).
    pub fn frames(&self) -> u32 {
        match FRAMES_AT_MOST {
            Some(n) if n < self.frames => n,
            _ => self.frames,
        }
    }

    /// Nodes whose positions the firmware logs: the first, the middle and
    /// the last.
    pub fn probes(&self) -> [usize; 3] {
        let n = self.mesh.rest.len();
        [0, n / 2, n - 1]
    }
}

include!(concat!(env!("OUT_DIR"), "/scenes.rs"));

/// `WEFT_FIRMWARE_STEPS` at build time, if given.
const FRAMES_AT_MOST: Option<u32> = match option_env!("WEFT_FIRMWARE_STEPS") {
    Some(s) => Some(parse_steps(s)),
    None => None,
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

pub const SCRATCH: ScratchSizes = ScratchSizes::new(COUNTS, PAIRS, weft_weights::LATENT);
// The network's int32 sums live in the state's solver blocks.
const _: () = assert!(SCRATCH.sums_fit_in_state(COUNTS));

/// The scenes' state memory.
pub type StateMemory =
    StateBuffers<{ STATE.vec3 }, { STATE.mat3 }, { STATE.flags }, { STATE.cells }, { STATE.pairs }, { STATE.solver }>;
/// The network's scratch memory.
pub type GnnMemory = weft_core::gnn::int8::ScratchBuffers<{ SCRATCH.latents }>;

/// What lives in the core-coupled RAM: the network's latents, and the
/// BDF2 history of a scene that runs the fallback step (a scene runs one
/// or the other).
pub struct CoupledMemory {
    pub gnn: GnnMemory,
    pub history: [Vec3; HISTORY],
}
