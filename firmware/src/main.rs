//! weft on a Cortex-M4F: the built-in scenario ([`scene`]) with the int8
//! correction, per-stage cost and a checksum of the final state over defmt.
//!
//! Cost is read from SysTick (core clock, 24-bit): on the board these are
//! cycles; under QEMU with `-icount shift=0` one instruction is 1 ns of
//! virtual time and the mps2-an386 SysTick runs at 25 MHz, so one tick is
//! 40 instructions and the counts are deterministic instruction counts.
#![no_std]
#![no_main]

mod scene;

use core::mem::MaybeUninit;

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::{entry, exception, ExceptionFrame};
#[cfg(feature = "board")]
use defmt_rtt as _;
#[cfg(feature = "qemu")]
use defmt_semihosting as _;
use panic_probe as _;
use weft_core::gnn::int8;
use weft_core::mesh::{Mesh, MeshParts};
use weft_core::model::Model;
use weft_core::probe::{Probe, Stage};
use weft_core::state::State;

use scene::{GnnMemory, Scenario, StateMemory, COUNTS};

/// What one SysTick tick is worth, and its unit.
#[cfg(feature = "qemu")]
const PER_TICK: u64 = 40;
#[cfg(feature = "qemu")]
const UNIT: &str = "instructions";
#[cfg(not(feature = "qemu"))]
const PER_TICK: u64 = 1;
#[cfg(not(feature = "qemu"))]
const UNIT: &str = "cycles";

const RELOAD: u32 = 0x00ff_ffff;

/// SysTick as a free-running 24-bit down-counter.
struct Clock {
    _syst: cortex_m::peripheral::SYST,
}

impl Clock {
    fn now(&self) -> u32 {
        cortex_m::peripheral::SYST::get_current()
    }
    /// Ticks since `start` (spans shorter than 2^24 ticks).
    fn since(&self, start: u32) -> u64 {
        (start.wrapping_sub(self.now()) & RELOAD) as u64
    }
}

/// Charges the clock's ticks between stage marks to the stage that ran
/// ([`weft_core::probe`]).
struct Stages<'c> {
    clock: &'c Clock,
    current: Option<Stage>,
    since: u32,
    ticks: [u64; Stage::COUNT],
}

impl Stages<'_> {
    /// Ends the running stage.
    fn stop(&mut self) {
        if let Some(s) = self.current.take() {
            self.ticks[s.index()] += self.clock.since(self.since);
        }
    }
}

impl Probe for Stages<'_> {
    fn enter(&mut self, stage: Stage) {
        self.stop();
        self.current = Some(stage);
        self.since = self.clock.now();
    }
}

/// Per-stage totals over all steps.
#[derive(Default)]
struct Cost {
    physics: u64,
    dynamic_edges: u64,
    gnn: u64,
    correction: u64,
    worst_step: u64,
    physics_worst: u64,
}

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

/// The scene's rest mesh, built by `build.rs` into flash.
mod mesh_data {
    use weft_core::math::Vec3;
    use weft_core::mesh::{BendTriangle, Edge, Hinge, Triangle};
    include!(concat!(env!("OUT_DIR"), "/mesh_data.rs"));
}

/// The network's latents: on the board in the 64 KiB core-coupled RAM
/// (the state fills the 128 KiB SRAM), not initialised at boot.
#[cfg_attr(feature = "board", link_section = ".ccmram")]
static mut GNN: MaybeUninit<GnnMemory> = MaybeUninit::uninit();

#[entry]
fn main() -> ! {
    static mut STATE_BUF: StateMemory = StateMemory::new();

    stack::paint();
    let mut cp = match cortex_m::Peripherals::take() {
        Some(cp) => cp,
        None => exit(3),
    };
    cp.SYST.set_clock_source(SystClkSource::Core);
    cp.SYST.set_reload(RELOAD);
    cp.SYST.clear_current();
    cp.SYST.enable_counter();
    let clock = Clock { _syst: cp.SYST };

    match dsp_matches_portable() {
        Ok(n) => defmt::info!("dsp kernel: {} dot and matrix products identical to the portable kernel", n),
        Err(len) => {
            defmt::error!("dsp kernel differs from the portable kernel at length (or row step) {}", len);
            exit(1)
        }
    }

    kernel_cost(&clock);

    // SAFETY: `main` runs once and is the only code that names `GNN`; the
    // buffers hold integers only, so all-zero bytes are a valid value (the
    // one `ScratchBuffers::new()` builds), written in place rather than
    // through a 35 KB temporary on the stack.
    let gnn_memory: &'static mut GnnMemory = unsafe {
        let m = &mut *core::ptr::addr_of_mut!(GNN);
        m.as_mut_ptr().write_bytes(0, 1);
        m.assume_init_mut()
    };
    let parts = MeshParts {
        rest: &mesh_data::REST,
        node_area: &mesh_data::NODE_AREA,
        triangles: &mesh_data::TRIANGLES,
        edges: &mesh_data::EDGES,
        edge_start: &mesh_data::EDGE_START,
        hinges: &mesh_data::HINGES,
        bending: &mesh_data::BENDING,
        grid: COUNTS.grid,
    };
    let mesh = ok_or_exit(Mesh::from_parts(parts), "mesh");
    let net = ok_or_exit(weft_weights::NETWORK.check(), "network");
    let mut scratch = gnn_memory.scratch();
    defmt::info!(
        "weft: {}×{} cloth, {} steps per scenario, int8 network latent {} × {} rounds; cost unit: {}",
        scene::N,
        scene::N,
        scene::STEPS,
        net.latent,
        net.rounds(),
        UNIT
    );
    for scenario in Scenario::ALL {
        run(scenario, mesh, net, STATE_BUF, &mut scratch, &clock);
    }
    defmt::info!("stack high-water mark {} bytes", stack::used());
    exit(0)
}

/// Runs one scenario from rest and logs its cost per stage, its probe
/// positions and the checksum of its final state, each line led by the
/// scenario's name.
fn run(
    scenario: Scenario,
    mesh: Mesh,
    net: int8::Checked,
    memory: &mut StateMemory,
    scratch: &mut int8::Scratch,
    clock: &Clock,
) {
    let name = scenario.name();
    let (pins, colliders) = (scenario.pins(), scenario.colliders());
    let model = ok_or_exit(
        scene::corrected_material(&net)
            .and_then(|m| Model::new(mesh, m, scene::scene(pins.as_slice(), &colliders), scene::params())),
        "model",
    );
    let mut state = ok_or_exit(State::new(&model, memory.storage()), "state");
    let mut cost = Cost::default();
    let mut stages = Stages { clock, current: None, since: 0, ticks: [0; Stage::COUNT] };
    let (mut pairs, mut dropped, mut cg) = (0usize, 0usize, 0u32);
    for step in 0..scene::STEPS {
        let t = clock.now();
        let report = weft_core::physics::step_probed(&model, &mut state, &mut stages);
        stages.stop();
        let (a, t) = (clock.since(t), clock.now());
        let found = int8::dynamic_edges(&model, &mut state, net);
        let (b, t) = (clock.since(t), clock.now());
        let inferred = int8::infer_probed(&model, &mut state, net, scratch, &mut stages);
        stages.stop();
        let (c, t) = (clock.since(t), clock.now());
        let applied = int8::apply(&mut state);
        let d = clock.since(t);
        cost.physics += a;
        cost.physics_worst = cost.physics_worst.max(a);
        cost.dynamic_edges += b;
        cost.gnn += c;
        cost.correction += d;
        cost.worst_step = cost.worst_step.max(a + b + c + d);
        match (report, found, inferred, applied) {
            (Ok(r), Ok(f), Ok(()), Ok(())) => {
                pairs += f.pairs;
                dropped += f.dropped;
                cg += r.cg_iterations;
            }
            (r, f, i, a) => {
                defmt::error!(
                    "{}: step {}: physics {}, edges {}, network {}, correction {}",
                    name,
                    step,
                    defmt::Debug2Format(&r.err()),
                    defmt::Debug2Format(&f.err()),
                    defmt::Debug2Format(&i.err()),
                    defmt::Debug2Format(&a.err())
                );
                exit(1)
            }
        }
    }

    let steps = scene::STEPS as u64;
    let per = |ticks: u64| ticks * PER_TICK / steps;
    defmt::info!(
        "{}: per step ({}): physics {}, dynamic edges {}, gnn {}, correction {}, total {}, worst step {} (physics {})",
        name,
        UNIT,
        per(cost.physics),
        per(cost.dynamic_edges),
        per(cost.gnn),
        per(cost.correction),
        per(cost.physics + cost.dynamic_edges + cost.gnn + cost.correction),
        cost.worst_step * PER_TICK,
        cost.physics_worst * PER_TICK
    );
    defmt::info!(
        "{}: mean dynamic edges {}, pairs dropped {}, mean CG iterations {}",
        name,
        pairs as u32 / scene::STEPS,
        dropped,
        cg / scene::STEPS
    );
    for (i, &ticks) in stages.ticks.iter().enumerate() {
        match Stage::at(i) {
            Some(stage) if ticks > 0 => {
                let round = match stage {
                    Stage::EdgeUpdate(r) | Stage::NodeUpdate(r) => r as i32,
                    _ => -1,
                };
                defmt::info!("{}: stage {} (round {}): {} per step", name, stage.name(), round, per(ticks));
            }
            _ => {}
        }
    }
    match features_cost(&model, &state, net, clock) {
        Ok(cost) => defmt::info!(
            "{}: features (node and edge inputs, quantised; part of the encoders' stage): {} per step",
            name,
            cost
        ),
        Err(e) => {
            defmt::error!("{}: features: {}", name, defmt::Debug2Format(&e));
            exit(1)
        }
    }
    let x = state.positions();
    for &i in &scene::PROBES {
        defmt::info!(
            "{}: node {} = {:08x} {:08x} {:08x}",
            name,
            i,
            x[i].x.to_bits(),
            x[i].y.to_bits(),
            x[i].z.to_bits()
        );
    }
    let sum = scene::checksum(state.positions(), state.velocities());
    defmt::info!("{}: checksum {:08x} after {} steps", name, sum, scene::STEPS);
}

/// The network's quantised inputs alone (`int8::Inputs`, what the
/// encoders read) on the final state and its last dynamic edges: the
/// features' part of the "features and encoders" stage of one step. Not
/// inlined: in `run` it would change what the optimiser inlines there and
/// add 0.2 M instructions a step to the stages it measures.
#[inline(never)]
fn features_cost(model: &Model, state: &State, net: int8::Checked, clock: &Clock) -> Result<u64, int8::GnnError> {
    let g = int8::GraphRef::of(model, state);
    let edges = weft_core::gnn::features::edge_count(&model.mesh, g.pairs.len());
    let t = clock.now();
    let inputs = int8::Inputs::new(&net, &g);
    let mut sum = 0i32;
    for i in 0..state.node_count() {
        sum = inputs.node(i)?.iter().fold(sum, |s, &q| s.wrapping_add(q as i32));
    }
    let mut last = None;
    for k in 0..edges {
        let edge = inputs.edge_after(k, last)?;
        last = Some(edge);
        sum = edge.1.iter().fold(sum, |s, &q| s.wrapping_add(q as i32));
    }
    let ticks = clock.since(t);
    core::hint::black_box(sum);
    Ok(ticks * PER_TICK)
}

/// Stack use, measured by painting the free RAM below the stack at boot
/// and finding the deepest overwritten word at the end. With flip-link the
/// stack sits between the start of RAM and the statics; without it, between
/// the statics and the end of RAM.
mod stack {
    const PAINT: u32 = 0xdead_beef;
    /// Start of RAM on both layouts (`memory-*.x`).
    const RAM_ORIGIN: usize = 0x2000_0000;
    extern "C" {
        static _stack_start: u32;
        static _stack_end: u32;
    }

    /// The lowest address the stack may reach, and its top.
    fn bounds() -> (usize, usize) {
        // Addresses of linker symbols (no access).
        let top = core::ptr::addr_of!(_stack_start) as usize;
        let end = core::ptr::addr_of!(_stack_end) as usize;
        (if end < top { end } else { RAM_ORIGIN }, top)
    }

    /// Paints the stack region up to 256 bytes below the current stack
    /// pointer.
    pub fn paint() {
        let (bottom, _) = bounds();
        let sp = cortex_m::register::msp::read() as usize - 256;
        let mut p = bottom as *mut u32;
        while (p as usize) < sp {
            // SAFETY: [bottom, sp − 256) is RAM of the stack region that the
            // live stack has not reached.
            unsafe {
                p.write_volatile(PAINT);
                p = p.add(1);
            }
        }
    }

    /// Bytes between the top of the stack and the deepest painted word that
    /// was overwritten.
    pub fn used() -> usize {
        let (bottom, top) = bounds();
        let mut p = bottom as *const u32;
        // SAFETY: reads within the stack region [bottom, top), which is RAM.
        while (p as usize) < top && unsafe { p.read_volatile() } == PAINT {
            p = unsafe { p.add(1) };
        }
        top - p as usize
    }
}

/// Cost of the int8 MLP kernel alone: the processor's second layers
/// (L×L, as every edge update runs them) over many rows.
fn kernel_cost(clock: &Clock) {
    let net = &weft_weights::NETWORK;
    let layer = net.mlps.edge_mlp[0].l2;
    let x = [37i8; int8::MAX_LATENT];
    let mut acc = [0i32; int8::MAX_LATENT];
    const CALLS: u32 = 200;
    let t = clock.now();
    for k in 0..CALLS {
        if layer.matvec(&x[..layer.inputs], &mut acc).is_err() {
            defmt::error!("kernel benchmark: the baked layer does not fit its own shape");
            exit(1)
        }
        acc[0] = acc[0].wrapping_add(k as i32);
    }
    let ticks = clock.since(t);
    let macs = (layer.inputs * layer.outputs) as u64 * CALLS as u64;
    let milli = ticks * PER_TICK * 1000 / macs;
    defmt::info!(
        "int8 kernel ({}×{} layer, {} calls): {}.{=u64:03} {} per multiply-accumulate (result {})",
        layer.outputs,
        layer.inputs,
        CALLS,
        milli / 1000,
        milli % 1000,
        UNIT,
        acc[0]
    );
}

/// The SMLAD kernel against the portable one on pseudo-random vectors of
/// every length up to 2·MAX_LATENT, extreme values included, and its
/// matrix products on every row step it specialises and on widened
/// weights.
fn dsp_matches_portable() -> Result<u32, usize> {
    use weft_core::gnn::{dsp, int8::MAX_LATENT};
    let mut seed = 0x2545_f491u32;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        match seed % 16 {
            0 => -128i8,
            1 => 127,
            _ => (seed >> 8) as i8,
        }
    };
    let mut count = 0;
    for len in 1..=2 * MAX_LATENT {
        for _ in 0..8 {
            let (mut w, mut x) = ([0i8; 2 * MAX_LATENT], [0i8; 2 * MAX_LATENT]);
            for k in 0..len {
                w[k] = next();
                x[k] = next().max(-127);
            }
            let mut packed = [0u32; MAX_LATENT];
            let n = dsp::pack(&x[..len], &mut packed);
            if dsp::dot(&w[..len], &packed[..n], &x[2 * n..len]) != int8::dot(&w[..len], &x[..len]) {
                return Err(len);
            }
            count += 1;
        }
    }
    // The matrix kernel on every row step it specialises (and one it does
    // not), at every column block, on odd and even row counts, from the
    // biases and in place.
    const ROWS: usize = 5;
    let bias: [i32; ROWS] = core::array::from_fn(|o| 1000 * o as i32 - 2000);
    for stride in [16, 32, 48, 64, 96, 24] {
        let mut w = [0i8; 96 * ROWS];
        for v in &mut w[..stride * ROWS] {
            *v = next();
        }
        for (len, rows, start) in [(8, 5, false), (16, 4, true), (4, 1, false), (16, 5, true), (8, 1, true)] {
            for col in (0..=stride - len).step_by(8) {
                let mut x = [0i8; 16];
                for v in &mut x[..len] {
                    *v = next().max(-127);
                }
                let (mut acc, mut scratch) = ([7i32; ROWS], [0u32; MAX_LATENT]);
                let from = start.then_some(&bias[..]);
                dsp::accumulate(&w[..stride * ROWS], stride, col, &x[..len], from, &mut scratch, &mut acc[..rows]);
                for (o, a) in acc.iter().enumerate() {
                    let base = if o >= rows {
                        7
                    } else if start {
                        bias[o]
                    } else {
                        7
                    };
                    let sum = if o < rows { int8::dot(&w[o * stride + col..][..len], &x[..len]) } else { 0 };
                    if *a != base + sum {
                        return Err(stride);
                    }
                }
                count += 1;
            }
        }
    }
    // The widened-weight kernel on every shape the network has (a last
    // block of fewer than eight inputs padded), from the biases and in
    // place, against the portable dot products.
    for (inputs, rows, start) in
        [(16, 4, true), (48, 3, false), (32, 5, true), (8, 1, false), (96, 2, true), (10, 16, true), (15, 3, false)]
    {
        let mut w = [0i8; 192];
        for v in &mut w[..inputs * rows] {
            *v = next();
        }
        let mut wide = [0u32; 128];
        let n = int8::widen(&w[..inputs * rows], inputs, rows, &mut wide);
        let mut x = [0i8; 96];
        for v in &mut x[..inputs] {
            *v = next().max(-127);
        }
        let bias: [i32; 16] = core::array::from_fn(|o| 977 * o as i32 - 5000);
        let mut acc = [7i32; 16];
        dsp::accumulate_wide(&wide[..n], &x[..inputs], start.then_some(&bias[..]), &mut acc[..rows]);
        for (o, a) in acc.iter().enumerate() {
            let base = if o < rows && start { bias[o] } else { 7 };
            let sum = if o < rows { int8::dot(&w[o * inputs..][..inputs], &x[..inputs]) } else { 0 };
            if *a != base + sum {
                return Err(inputs);
            }
        }
        count += 1;
    }
    // The sixteen-row kernel with each start and each end it folds in, on
    // the network's input widths, against the portable dot products and
    // the requantisation written out.
    let mut shifts = [0u8; 16];
    for (k, s) in shifts.iter_mut().enumerate() {
        *s = [0, 1, 7, 12, 31][k % 5] + (k as u8 / 5);
    }
    let shifts = shifts.map(|s| s.min(31));
    for inputs in [10, 15, 16, 32, 48] {
        let mut w = [0i8; 16 * 48];
        for v in &mut w[..inputs * 16] {
            *v = next();
        }
        let mut wide = [0u32; 4 * 6 * 16];
        let n = int8::widen(&w[..inputs * 16], inputs, 16, &mut wide);
        let mut x = [0i8; 48];
        for v in &mut x[..inputs] {
            *v = next().max(-127);
        }
        let from: [i32; 16] = core::array::from_fn(|o| (next() as i32) << (o % 20));
        let other: [i32; 16] = core::array::from_fn(|o| (next() as i32) << (o % 14));
        let y0: [i8; 16] = core::array::from_fn(|_| next());
        for (start, end) in (0..3).flat_map(|s| (0..4).map(move |e| (s, e))) {
            let mut acc = [7i32; 16];
            let mut y = y0;
            let begin = match start {
                0 => dsp::Start::From(&from),
                1 => dsp::Start::Sum(&from, &other),
                _ => dsp::Start::Acc,
            };
            let finish = match end {
                0 => dsp::End::Acc,
                1 => dsp::End::Relu(&shifts, &mut y),
                2 => dsp::End::Sat(&shifts, &mut y),
                _ => dsp::End::Residual(&shifts, &mut y),
            };
            if !dsp::rows16(&wide[..n], &x[..inputs], begin, &mut acc, finish) {
                return Err(1000 + inputs);
            }
            for o in 0..16 {
                let base = match start {
                    0 => from[o],
                    1 => from[o] + other[o],
                    _ => 7,
                };
                let a = base + int8::dot(&w[o * inputs..][..inputs], &x[..inputs]);
                let q = a >> shifts[o];
                let want = match end {
                    0 => y0[o],
                    1 => q.clamp(0, 127) as i8,
                    2 => q.clamp(-128, 127) as i8,
                    _ => q.saturating_add(y0[o] as i32).clamp(-128, 127) as i8,
                };
                if (end == 0 && acc[o] != a) || y[o] != want {
                    return Err(2000 + inputs);
                }
            }
            count += 1;
        }
    }
    Ok(count)
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
