//! The firmware's scene on the desktop, step by step: CG iterations,
//! substeps and convergence of the physics, corrected as on the board
//! (`cargo run --release -p weft-tests --example scene_solve`) or plain
//! (`… -- plain`); `WEFT_CG_TOLERANCE` overrides the tolerance.
#[path = "../host.rs"]
mod host;

fn main() {
    let mut params = weft_tests::scene::params();
    if let Some(t) = std::env::var("WEFT_CG_TOLERANCE").ok().and_then(|t| t.parse().ok()) {
        params.cg_tolerance = t;
    }
    let corrected = std::env::args().nth(1).as_deref() != Some("plain");
    let (mut its, mut worst, mut unconv) = (0u32, 0u32, 0u32);
    let t = std::time::Instant::now();
    let (checksum, _) = host::run(params, corrected, weft_tests::scene::STEPS, |s, r, _, _| {
        its += r.cg_iterations;
        worst = worst.max(r.cg_iterations);
        unconv += u32::from(!r.converged);
        println!(
            "step {s:2}: cg {:4} substeps {:2} converged {} residual {:.2e} contacts {}",
            r.cg_iterations, r.substeps, r.converged, r.residual, r.contacts
        );
    });
    let steps = weft_tests::scene::STEPS;
    println!(
        "mean cg {:.1}, worst {worst}, unconverged {unconv}/{steps}, checksum {checksum:08x}, {:.1} ms",
        its as f32 / steps as f32,
        t.elapsed().as_secs_f64() * 1e3
    );
}
