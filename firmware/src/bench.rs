//! The cost counters: SysTick as a clock, a probe that charges its ticks
//! to the corrected step's stages ([`weft_core::probe`]), the per-scene
//! report, and two measurements apart from the step (the int8 kernel alone
//! and the network's input features alone).
//!
//! Cost is read from SysTick (core clock, 24-bit): on the board these are
//! cycles; under QEMU with `-icount shift=0` one instruction is 1 ns of
//! virtual time and the mps2-an386 SysTick runs at 25 MHz, so one tick is
//! 40 instructions and the counts are deterministic instruction counts.

use weft_core::gnn::int8;
use weft_core::model::Model;
use weft_core::physics::state::State;
use weft_core::probe::{self, Probe, Stage};

/// What one SysTick tick is worth, and its unit.
#[cfg(feature = "qemu")]
pub const PER_TICK: u64 = 40;
#[cfg(feature = "qemu")]
pub const UNIT: &str = "instructions";
#[cfg(not(feature = "qemu"))]
pub const PER_TICK: u64 = 1;
#[cfg(not(feature = "qemu"))]
pub const UNIT: &str = "cycles";

pub const RELOAD: u32 = 0x00ff_ffff;

/// SysTick as a free-running 24-bit down-counter.
pub struct Clock {
    /// Owned, so that nothing else reconfigures the counter.
    _syst: cortex_m::peripheral::SYST,
}

impl Clock {
    /// Starts SysTick on the core clock, free-running from [`RELOAD`].
    pub fn start(mut syst: cortex_m::peripheral::SYST) -> Self {
        syst.set_clock_source(cortex_m::peripheral::syst::SystClkSource::Core);
        syst.set_reload(RELOAD);
        syst.clear_current();
        syst.enable_counter();
        Clock { _syst: syst }
    }
    pub fn now(&self) -> u32 {
        cortex_m::peripheral::SYST::get_current()
    }
    /// Ticks since `start` (spans shorter than 2^24 ticks).
    pub fn since(&self, start: u32) -> u64 {
        (start.wrapping_sub(self.now()) & RELOAD) as u64
    }
}

/// Charges the clock's ticks between stage marks to the stage that ran,
/// and keeps the whole step's and the physics' worst.
pub struct Stages<'c> {
    clock: &'c Clock,
    current: Option<Stage>,
    since: u32,
    pub ticks: [u64; Stage::COUNT],
    /// Ticks of the step under way, all stages and the physics ones.
    step: u64,
    step_physics: u64,
    pub worst_step: u64,
    pub worst_physics: u64,
    /// Ticks of each stage in the step under way, and in the worst step.
    step_stages: [u64; Stage::COUNT],
    pub worst_stages: [u64; Stage::COUNT],
    /// Every step's ticks, in order (the first [`MAX_STEPS`]).
    pub costs: [u64; MAX_STEPS],
    pub steps: usize,
}

/// Steps whose cost [`Stages`] keeps one by one.
pub const MAX_STEPS: usize = 64;

impl<'c> Stages<'c> {
    pub fn new(clock: &'c Clock) -> Self {
        Stages {
            clock,
            current: None,
            since: 0,
            ticks: [0; Stage::COUNT],
            step: 0,
            step_physics: 0,
            worst_step: 0,
            worst_physics: 0,
            step_stages: [0; Stage::COUNT],
            worst_stages: [0; Stage::COUNT],
            costs: [0; MAX_STEPS],
            steps: 0,
        }
    }
    /// Ends the running stage and the step.
    pub fn end_step(&mut self) {
        self.stop();
        if self.step > self.worst_step {
            self.worst_stages = self.step_stages;
        }
        self.step_stages = [0; Stage::COUNT];
        self.worst_step = self.worst_step.max(self.step);
        self.worst_physics = self.worst_physics.max(self.step_physics);
        if let Some(c) = self.costs.get_mut(self.steps) {
            *c = self.step;
            self.steps += 1;
        }
        (self.step, self.step_physics) = (0, 0);
    }
    fn stop(&mut self) {
        if let Some(s) = self.current.take() {
            let t = self.clock.since(self.since);
            self.ticks[s.index()] += t;
            self.step_stages[s.index()] += t;
            self.step += t;
            if probe::PHYSICS.contains(&s) {
                self.step_physics += t;
            }
        }
    }
    /// Ticks of the stages `keep` selects, over all steps.
    pub fn sum(&self, keep: impl Fn(Stage) -> bool) -> u64 {
        (0..Stage::COUNT).filter_map(Stage::at).filter(|&s| keep(s)).map(|s| self.ticks[s.index()]).sum()
    }
}

impl Probe for Stages<'_> {
    fn enter(&mut self, stage: Stage) {
        self.stop();
        self.current = Some(stage);
        self.since = self.clock.now();
    }
}

/// The mean, the 95th percentile (nearest rank) and the largest of
/// `costs` (all 0 when empty).
pub fn distribution(costs: &[u64]) -> (u64, u64, u64) {
    let mut sorted = [0u64; MAX_STEPS];
    let n = costs.len().min(MAX_STEPS);
    sorted[..n].copy_from_slice(&costs[..n]);
    let sorted = &mut sorted[..n];
    sorted.sort_unstable();
    let mean = sorted.iter().sum::<u64>().checked_div(n as u64).unwrap_or(0);
    // Nearest rank: the smallest cost with at least 95 % of the steps at or below it.
    let rank = (95 * n).div_ceil(100);
    let p95 = rank.checked_sub(1).and_then(|r| sorted.get(r)).copied().unwrap_or(0);
    (mean, p95, sorted.last().copied().unwrap_or(0))
}

/// Logs a scene's cost per step: physics, dynamic edges, network,
/// correction, total and the worst steps; the network's
/// multiply-accumulates (`macs` over all steps) and its instructions per
/// multiply-accumulate; then every stage that ran.
pub fn report(name: &str, stages: &Stages, steps: u32, macs: u64) {
    let per = |ticks: u64| ticks * PER_TICK / steps as u64;
    let physics = stages.sum(|s| probe::PHYSICS.contains(&s));
    let edges = stages.ticks[Stage::DynamicEdges.index()];
    let gnn = stages.sum(probe::is_network);
    let correction = stages.ticks[Stage::Correction.index()];
    defmt::info!(
        "{}: per step ({}): physics {}, dynamic edges {}, gnn {}, correction {}, total {}, worst step {} (physics {})",
        name,
        UNIT,
        per(physics),
        per(edges),
        per(gnn),
        per(correction),
        per(physics + edges + gnn + correction),
        stages.worst_step * PER_TICK,
        stages.worst_physics * PER_TICK
    );
    let (mean, p95, worst) = distribution(&stages.costs[..stages.steps]);
    defmt::info!(
        "{}: step cost ({}): mean {}, 95th percentile {}, worst {}; worst / mean {}.{=u64:02}",
        name,
        UNIT,
        mean * PER_TICK,
        p95 * PER_TICK,
        worst * PER_TICK,
        (worst * 100).checked_div(mean).unwrap_or(0) / 100,
        (worst * 100).checked_div(mean).unwrap_or(0) % 100
    );
    let costs = &stages.costs[..stages.steps];
    let at = costs.iter().enumerate().max_by_key(|&(k, &c)| (c, core::cmp::Reverse(k))).map_or(0, |(k, _)| k);
    let second = costs.iter().enumerate().filter(|&(k, _)| k != at).map(|(_, &c)| c).max().unwrap_or(0);
    defmt::info!(
        "{}: the worst step is step {} (from 0) of the first {}; the next worst {}",
        name,
        at,
        costs.len(),
        second * PER_TICK
    );
    let milli = (gnn * PER_TICK * 1000).checked_div(macs).unwrap_or(0);
    defmt::info!(
        "{}: network {} multiply-accumulates a step, {}.{=u64:03} {} each",
        name,
        macs / steps as u64,
        milli / 1000,
        milli % 1000,
        UNIT
    );
    for (i, &ticks) in stages.ticks.iter().enumerate() {
        match Stage::at(i) {
            Some(stage) if ticks > 0 => {
                let round = match stage {
                    Stage::EdgeUpdate(r) | Stage::NodeUpdate(r) => r as i32,
                    _ => -1,
                };
                defmt::info!(
                    "{}: stage {} (round {}): {} per step, {} in the worst step",
                    name,
                    stage.name(),
                    round,
                    per(ticks),
                    stages.worst_stages[i] * PER_TICK
                );
            }
            _ => {}
        }
    }
}

/// Cost of the int8 MLP kernel alone: the processor's second layers
/// (L×L, as every edge update runs them) over many rows.
pub fn kernel_cost(clock: &Clock) {
    let net = &weft_weights::NETWORK;
    let layer = net.mlps.edge_mlp[0].l2;
    let x = [37i8; int8::MAX_LATENT];
    let mut acc = [0i32; int8::MAX_LATENT];
    const CALLS: u32 = 200;
    let t = clock.now();
    for k in 0..CALLS {
        if layer.matvec(&x[..layer.inputs], &mut acc).is_err() {
            defmt::error!("kernel benchmark: the baked layer does not fit its own shape");
            crate::exit(1)
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

/// The network's quantised inputs alone (`int8::Inputs`, what the
/// encoders read) on the final state and its last dynamic edges: the
/// features' part of the "features and encoders" stage of one step. Not
/// inlined: in `run` it would change what the optimiser inlines there and
/// add 0.2 M instructions a step to the stages it measures.
#[inline(never)]
pub fn features_cost(model: &Model, state: &State, net: int8::Checked, clock: &Clock) -> Result<u64, int8::GnnError> {
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
