//! A board scene (`firmware/scenes/`) on the desktop, step by step: CG iterations,
//! substeps and convergence of the physics, corrected as on the board
//! (`cargo run --release -p weft-tests --example scene_solve`) or plain
//! (`… -- plain`), the swing or (`… -- drape`, `… -- tablecloth`) another board scene; `WEFT_CG_TOLERANCE` overrides the tolerance. With
//! `accuracy` (`… -- [plain] accuracy`), also what the tolerance costs in
//! accuracy: the final positions' RMS change from a
//! solve 100× tighter, next to their change from half the time step (the
//! step's own error scale).
use weft_core::math::Vec3;
use weft_core::model::StepParams;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scenario = weft_tests::board_scene(weft_tests::scene_named(&args).unwrap_or("swing"));
    let mut params = scenario.params(0.0);
    if let Some(t) = std::env::var("WEFT_CG_TOLERANCE").ok().and_then(|t| t.parse().ok()) {
        params.cg_tolerance = t;
    }
    let corrected = !args.iter().any(|a| a == "plain");
    let (mut its, mut worst, mut unconv) = (0u32, 0u32, 0u32);
    let t = std::time::Instant::now();
    let (checksum, _) = weft_tests::run(&scenario, Some(params), corrected, scenario.time.steps, |s, r, _, _| {
        its += r.cg_iterations;
        worst = worst.max(r.cg_iterations);
        unconv += u32::from(!r.converged);
        println!(
            "step {s:2}: cg {:4} substeps {:2} newton {} converged {} residual {:.2e} contacts {}",
            r.cg_iterations, r.substeps, r.newton, r.converged, r.residual, r.contacts
        );
    });
    let steps = scenario.time.steps;
    println!(
        "mean cg {:.1}, worst {worst}, unconverged {unconv}/{steps}, checksum {checksum:08x}, {:.1} ms",
        its as f32 / steps as f32,
        t.elapsed().as_secs_f64() * 1e3
    );
    if !args.iter().any(|a| a == "accuracy") {
        return;
    }
    // Positions after 1, 5 and 15 steps (before the contact), 30 and 60.
    let at = [1u32, 5, 15, 30, 60];
    let record = |params: StepParams, per: u32| {
        let mut out = Vec::new();
        weft_tests::run(&scenario, Some(params), corrected, per * steps, |s, _, _, state| {
            if at.contains(&((s + 1) / per)) && (s + 1) % per == 0 {
                out.push(state.positions().to_vec());
            }
        });
        out
    };
    let x = record(params, 1);
    let tight = StepParams { cg_tolerance: params.cg_tolerance * 0.01, cg_max_iterations: 20_000, ..params };
    let x_tight = record(tight, 1);
    let x_half = record(StepParams { dt: params.dt * 0.5, ..tight }, 2);
    let rms =
        |a: &[Vec3], b: &[Vec3]| (a.iter().zip(b).map(|(p, q)| (*p - *q).norm2()).sum::<f32>() / a.len() as f32).sqrt();
    for (k, s) in at.iter().enumerate() {
        println!(
            "positions after {s} steps: {:.2e} m RMS from a 100× tighter solve; {:.2e} m from half the time step",
            rms(&x[k], &x_tight[k]),
            rms(&x_tight[k], &x_half[k])
        );
    }
}
