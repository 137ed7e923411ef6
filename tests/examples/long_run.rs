//! A board scene (`firmware/scenes/`) (the swing, or `drape`) run for a long time on the
//! desktop (corrected as on the board, or `plain`): every tenth of the run, the energy, the largest
//! strain and the state's warnings; at the end, whether every step stayed
//! finite, the energy's range over the second half and the warnings the
//! second half added.
//!
//! `cargo run --release -p weft-tests --example long_run -- [frames] [plain] [drape]`
//! (100 000 frames by default).

use weft_core::physics::state::Warnings;
use weft_core::physics::{energy, max_strain};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let frames: u32 = args.iter().find_map(|a| a.parse().ok()).unwrap_or(100_000);
    let corrected = !args.iter().any(|a| a == "plain");
    let scenario = weft_tests::board_scene(weft_tests::scene_named(&args).unwrap_or("swing"));
    let every = (frames / 10).max(1);
    let (mut finite, mut half, mut last) = (true, Warnings::default(), Warnings::default());
    let (mut low, mut high) = (f32::INFINITY, f32::NEG_INFINITY);
    let t = std::time::Instant::now();
    let (checksum, _) = weft_tests::run(&scenario, None, corrected, frames, |s, _, model, state| {
        let (x, v) = (state.positions(), state.velocities());
        finite &= x.iter().chain(v).all(|p| p.is_finite());
        let frame = s + 1;
        if frame == frames / 2 {
            half = state.warnings;
        }
        last = state.warnings;
        if frame > frames / 2 || frame % every == 0 {
            let e = energy(model, x, v);
            if frame > frames / 2 {
                (low, high) = (low.min(e.total()), high.max(e.total()));
            }
            if frame % every == 0 {
                let w = state.warnings;
                println!(
                    "frame {frame:7}: time {:9.2} s, energy {:.6} J (kinetic {:.2e}), max strain {:.4}; \
                     unconverged {}, stagnated {}, energy rose {}, strain unfinished {}, dropped pairs {}",
                    state.time(),
                    e.total(),
                    e.kinetic,
                    max_strain(model, x),
                    w.cg_not_converged,
                    w.cg_stagnated,
                    w.energy_rose,
                    w.strain_limit_unfinished,
                    w.dropped_pairs
                );
            }
        }
    });
    println!(
        "{frames} frames ({}) in {:.0} s: finite {finite}, energy over the second half {low:.6} to {high:.6} J, \
         warnings added in the second half: {}, checksum {checksum:08x}",
        if corrected { "corrected" } else { "plain" },
        t.elapsed().as_secs_f64(),
        added(&half, &last),
    );
}

/// The warnings counted between `from` and `to`.
fn added(from: &Warnings, to: &Warnings) -> String {
    let field = |name: &str, a: u64, b: u64| format!("{name} {}", b - a);
    [
        field("unconverged", from.cg_not_converged, to.cg_not_converged),
        field("stagnated", from.cg_stagnated, to.cg_stagnated),
        field("rejected", from.rejected_steps, to.rejected_steps),
        field("energy check failed", from.energy_check_failed, to.energy_check_failed),
        field("energy rose", from.energy_rose, to.energy_rose),
        field("strain unfinished", from.strain_limit_unfinished, to.strain_limit_unfinished),
        field("dropped pairs", from.dropped_pairs, to.dropped_pairs),
    ]
    .join(", ")
}
