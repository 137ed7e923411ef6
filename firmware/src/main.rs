//! weft on a Cortex-M4F: every scene file of `firmware/scenes/` ([`scene`],
//! baked at build time) with the int8 correction, its cost per stage
//! ([`bench`]) and a checksum of its final state over defmt, after the
//! kernels' self-test ([`selftest`]).
#![no_std]
#![no_main]

mod bench;
mod scene;
mod selftest;
mod stack;

use core::mem::MaybeUninit;

use cortex_m_rt::{entry, exception, ExceptionFrame};
#[cfg(feature = "board")]
use defmt_rtt as _;
#[cfg(feature = "qemu")]
use defmt_semihosting as _;
use panic_probe as _;
use weft_core::gnn::int8;
use weft_core::math::Vec3;
use weft_core::mesh::Mesh;
use weft_core::model::Model;
use weft_core::physics::state::State;
use weft_core::step::{step_with, Int8};

use bench::{Clock, Stages, UNIT};
use scene::{Baked, CoupledMemory, StateMemory, SCENES};

fn exit(code: i32) -> ! {
    #[cfg(feature = "qemu")]
    semihosting::process::exit(code);
    #[cfg(not(feature = "qemu"))]
    {
        let _ = code;
        loop {
            cortex_m::asm::bkpt();
        }
    }
}

/// The network's latents: on the board in the 64 KiB core-coupled RAM
/// (the state fills the 128 KiB SRAM), not initialised at boot.
#[cfg_attr(feature = "board", link_section = ".ccmram")]
static mut COUPLED: MaybeUninit<CoupledMemory> = MaybeUninit::uninit();

#[entry]
fn main() -> ! {
    static mut STATE_BUF: StateMemory = StateMemory::new();

    stack::paint();
    let cp = match cortex_m::Peripherals::take() {
        Some(cp) => cp,
        None => exit(3),
    };
    let clock = Clock::start(cp.SYST);

    match selftest::dsp_matches_portable() {
        Ok(n) => defmt::info!("dsp kernel: {} dot and matrix products identical to the portable kernel", n),
        Err(len) => {
            defmt::error!("dsp kernel differs from the portable kernel at length (or row step) {}", len);
            exit(1)
        }
    }

    bench::kernel_cost(&clock);

    // SAFETY: `main` runs once and is the only code that names `COUPLED`;
    // the buffers hold integers and `f32`s only, so all-zero bytes are a
    // valid value (the one `ScratchBuffers::new()` and `Vec3::ZERO` build),
    // written in place rather than through a 41 KB temporary on the stack.
    let coupled: &'static mut CoupledMemory = unsafe {
        let m = &mut *core::ptr::addr_of_mut!(COUPLED);
        m.as_mut_ptr().write_bytes(0, 1);
        m.assume_init_mut()
    };
    let net = ok_or_exit(weft_weights::NETWORK.check(), "network");
    let CoupledMemory { gnn, history } = coupled;
    let mut scratch = gnn.scratch();
    defmt::info!(
        "weft: {} scenes baked from firmware/scenes ({} bytes of flash), capacity {} nodes and {} pairs, int8 network latent {} × {} rounds; cost unit: {}",
        SCENES.len(),
        scene::SCENE_FLASH,
        scene::COUNTS.nodes,
        scene::PAIRS,
        net.latent,
        net.rounds(),
        UNIT
    );
    for baked in &SCENES {
        run(baked, net, (STATE_BUF, history), &mut scratch, &clock);
    }
    defmt::info!("stack high-water mark {} bytes", stack::used());
    exit(0)
}

/// Runs one scene from its start with the corrected step
/// ([`weft_core::step::step_with`], `substeps` a frame) and logs its cost
/// per stage ([`bench::report`]), its probe positions and the checksum of
/// its final state, each line led by the scene's name.
/// `memory` is the state's, and the room for the BDF2 history of a scene
/// that runs its fallback step.
fn run(
    baked: &Baked,
    net: int8::Checked,
    memory: (&mut StateMemory, &mut [Vec3]),
    scratch: &mut int8::Scratch,
    clock: &Clock,
) {
    let name = baked.name;
    let mesh = ok_or_exit(Mesh::from_parts(baked.mesh), "mesh");
    let model = ok_or_exit(
        baked.stepped_material(&net).and_then(|m| Model::new(mesh, m, baked.scene(), baked.params)),
        "model",
    );
    let (memory, history) = memory;
    let mut storage = memory.storage();
    if !baked.corrected {
        // The fallback's BDF2 history, in the network's stead.
        storage.history = history;
    }
    let mut state = ok_or_exit(State::new(&model, storage), "state");
    if let Some(v) = baked.velocities {
        ok_or_exit(state.set_velocities(v), "start velocities");
    }
    let (frames, substeps) = (baked.frames(), baked.substeps);
    defmt::info!(
        "{}: {} ({} nodes), {} frames of {} step(s)",
        name,
        baked.file,
        model.mesh.node_count(),
        frames,
        substeps
    );
    if !baked.corrected {
        defmt::info!("{}: outside the network's training envelope: its plain BDF2 fallback, uncorrected", name);
    }
    let mut stages = Stages::new(clock);
    let mut network =
        baked.corrected.then_some(Int8 { net, scratch: int8::Scratch { latents: &mut *scratch.latents } });
    let (mut pairs, mut dropped, mut cg, mut macs) = (0usize, 0usize, 0u32, 0u64);
    for step in 0..frames * substeps {
        let result = step_with(&model, &mut state, &mut network, &mut stages);
        stages.end_step();
        match result {
            Ok((physics, correction)) => {
                pairs += correction.dynamic_edges;
                if baked.corrected {
                    let edges = weft_core::gnn::features::edge_count(&model.mesh, correction.dynamic_edges);
                    macs += net.macs(model.mesh.node_count(), edges) as u64;
                }
                dropped += correction.dropped_pairs;
                cg += physics.cg_iterations;
            }
            Err(e) => {
                defmt::error!("{}: step {}: {}", name, step, defmt::Debug2Format(&e));
                exit(1)
            }
        }
    }
    let steps = frames * substeps;
    bench::report(name, &stages, steps, macs);
    defmt::info!(
        "{}: mean dynamic edges {}, pairs dropped {}, mean CG iterations {}",
        name,
        pairs as u32 / steps,
        dropped,
        cg / steps
    );
    if baked.corrected {
        let cost = ok_or_exit(bench::features_cost(&model, &state, net, clock), "features");
        defmt::info!(
            "{}: features (node and edge inputs, quantised; part of the encoders' stage): {} per step",
            name,
            cost
        );
    }
    final_state(baked, &state, steps);
}

/// Logs the probe positions (bits) and the checksum of `state`, the final
/// state of `baked` after `steps` steps.
fn final_state(baked: &Baked, state: &State, steps: u32) {
    let x = state.positions();
    for i in baked.probes() {
        defmt::info!(
            "{}: node {} = {:08x} {:08x} {:08x}",
            baked.name,
            i,
            x[i].x.to_bits(),
            x[i].y.to_bits(),
            x[i].z.to_bits()
        );
    }
    defmt::info!("{}: checksum {:08x} after {} steps", baked.name, state.checksum(), steps);
}

/// The value, or the error logged under `what` and exit code 1.
fn ok_or_exit<T, E: core::fmt::Debug>(r: Result<T, E>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => {
            defmt::error!("{}: {}", what, defmt::Debug2Format(&e));
            exit(1)
        }
    }
}

#[exception]
unsafe fn HardFault(_frame: &ExceptionFrame) -> ! {
    exit(2)
}
