//! What the page's test mode prints, on the desktop: every scene's
//! checksums after `FRAMES` frames from rest (default 60), plain and
//! corrected, and corrected 16×16 steps a second (the swing, 200 steps
//! after 20 of warm-up, as the page measures them).
//! `cargo run --release -p weft-web --example checksums -- [FRAMES]`
use weft_web::{with_sim, Cloth};

fn main() -> Result<(), String> {
    let frames: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(60);
    let fail = |e: weft_web::WebError| e.message().to_string();
    for (i, (name, _)) in weft_web::SCENES.iter().enumerate() {
        let [plain, corrected] = weft_web::checksums(i, frames).map_err(fail)?;
        println!("scene {name} plain {plain:08x} corrected {corrected:08x}");
    }
    weft_web::load(0).map_err(fail)?;
    let corrected_step = |sim: &mut weft_web::Sim| sim.physics(Cloth::Corrected).and_then(|()| sim.correct());
    with_sim(|sim| (0..20).try_for_each(|_| corrected_step(sim))).map_err(fail)?;
    let (n, start) = (200, std::time::Instant::now());
    with_sim(|sim| (0..n).try_for_each(|_| corrected_step(sim))).map_err(fail)?;
    let rate = n as f64 / start.elapsed().as_secs_f64();
    println!("speed corrected-steps-per-second {rate:.1} over {n}");
    Ok(())
}
