//! The local–global step ([`weft_core::physics::local_global`]) on the
//! grid scenes, plain, for its cost beside the linearised step's: QEMU
//! only, its factor and vectors (about 41 KB) do not fit beside the state
//! in the board's RAM.
use weft_core::mesh::Mesh;
use weft_core::model::Model;

use crate::bench::{Clock, PER_TICK, UNIT};
use crate::scene::local_global::{self as lg, Memory};
use crate::scene::{self, Scenario};

/// Logs, for each of [`lg::RUNS`], the factor's cost, the mean and worst
/// step's and the final checksum, each line led by `"<scene> local-global
/// <iterations> chebyshev <ρ in hundredths>: "`.
pub fn measure(scenario: Scenario, mesh: Mesh, memory: &mut Memory, clock: &Clock) {
    let name = scenario.name();
    let (pins, colliders) = (scenario.pins(), scenario.colliders());
    let model = crate::ok_or_exit(
        Model::new(mesh, scene::MATERIAL, scene::scene(pins.as_slice(), &colliders), scene::params()),
        "local-global model",
    );
    for run in lg::RUNS {
        let (mut factor, mut total, mut worst) = (0u64, 0u64, 0u64);
        let mut last = clock.now();
        let sum = lg::run(&model, lg::iterations(run), memory, |step, _| {
            let ticks = clock.since(last) * PER_TICK;
            match step {
                None => factor = ticks,
                Some(_) => {
                    total += ticks;
                    worst = worst.max(ticks);
                }
            }
            last = clock.now();
        });
        let sum = crate::ok_or_exit(sum, "local-global step");
        defmt::info!(
            "{} local-global {} chebyshev {}: factor {} {}, {} a step (worst {}), checksum {:08x} after {} steps",
            name,
            run.0,
            run.1,
            factor,
            UNIT,
            total / u64::from(scene::STEPS),
            worst,
            sum,
            scene::STEPS
        );
    }
}
