//! The page in a real browser against the desktop: `weft web` builds the
//! WebAssembly module and page, a server on 127.0.0.1 serves it, and
//! headless Chromium runs it in test mode (`?test=60`: every scene 60
//! frames from rest, plain and corrected; then a scene index out of range
//! and a NaN drag target; then the speed). Every checksum must be the
//! desktop's, bit for bit (the same `weft-web` code run here), the board's
//! two scenes also the firmware path's; each bad input must come back as
//! its typed error on the page, with the simulation still stepping. Saves
//! a screenshot (`target/browser/web.png`) and prints the speed.
//!
//! Needs Chromium (`/usr/bin/chromium`, or `WEFT_CHROMIUM`) and the
//! `wasm32-unknown-unknown` target (`.ci/setup` installs both). Without
//! them the test says what is missing and passes, unless
//! `WEFT_REQUIRE_BROWSER` is set (as in `.ci/run`): then it fails.

use std::path::Path;
use std::process::Command;

use weft_host::view::web;

const FRAMES: u32 = 60;

/// What the browser test needs and this machine lacks.
fn missing() -> Vec<String> {
    let mut missing = Vec::new();
    if web::chromium().is_none() {
        missing.push("Chromium (/usr/bin/chromium)".to_string());
    }
    let sysroot = Command::new("rustc").args(["--print", "sysroot"]).output();
    let wasm = sysroot
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .is_some_and(|root| Path::new(&root).join("lib/rustlib/wasm32-unknown-unknown").is_dir());
    if !wasm {
        missing.push("the wasm32-unknown-unknown target".to_string());
    }
    missing
}

/// The value after `key` on the results line that starts with `lead`.
fn field<'a>(results: &'a str, lead: &str, key: &str) -> &'a str {
    let line =
        results.lines().find(|l| l.starts_with(lead)).unwrap_or_else(|| panic!("no `{lead}` line in:\n{results}"));
    let mut words = line.split_whitespace().skip_while(|w| *w != key);
    words.nth(1).unwrap_or_else(|| panic!("no {key} in `{line}`"))
}

#[test]
fn the_page_in_chromium_matches_the_desktop_bit_for_bit() {
    let missing = missing();
    if !missing.is_empty() {
        let why = format!("browser test needs {}: run .ci/setup", missing.join(", "));
        assert!(std::env::var_os("WEFT_REQUIRE_BROWSER").is_none(), "{why}");
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
        return;
    }
    let chromium = web::chromium().unwrap();
    let site = tempfile::tempdir().unwrap();
    let bytes = web::build_site(site.path()).unwrap();
    let port = web::serve_in_background(site.path()).unwrap();
    let dom = web::headless(&chromium, &format!("http://127.0.0.1:{port}/index.html?test={FRAMES}"), &["--dump-dom"])
        .unwrap();
    let start = dom.find("<pre id=\"results\">").expect("the results element") + "<pre id=\"results\">".len();
    let results = &dom[start..start + dom[start..].find("</pre>").expect("its end")];
    println!("{results}\n(module: {bytes} bytes)");
    assert!(!results.trim().is_empty(), "the page wrote no results:\n{dom}");

    for (i, (name, _)) in weft_web::SCENES.iter().enumerate() {
        let [plain, corrected] = weft_web::checksums(i, FRAMES).unwrap();
        let lead = format!("scene {name} ");
        assert_eq!(field(results, &lead, "plain"), format!("{plain:08x}"), "{name}: plain");
        assert_eq!(field(results, &lead, "corrected"), format!("{corrected:08x}"), "{name}: corrected");
    }
    // The swing's file edited in the page's editor (a larger sphere), run
    // there and here.
    let edited = weft_web::SCENES[0].1.replace("radius = 0.2\n", "radius = 0.3\n");
    assert_ne!(edited, weft_web::SCENES[0].1, "the edit applies");
    weft_web::load_text("edited", &edited).unwrap();
    let [plain, corrected] = weft_web::run_frames(FRAMES).unwrap();
    let swing = weft_web::checksums(0, FRAMES).unwrap();
    assert_ne!([plain, corrected], swing, "the edit changes the run");
    assert_eq!(field(results, "edited ", "plain"), format!("{plain:08x}"), "edited: plain");
    assert_eq!(field(results, "edited ", "corrected"), format!("{corrected:08x}"), "edited: corrected");
    // Outside the training envelope (the swing at 0.8 kg/m²): the page's
    // right cloth is the desktop's guarded run, the plain BDF2 fallback.
    let heavy = weft_web::SCENES[0].1.replace("compression = 0.05\n", "compression = 0.05\ndensity = 0.8\n");
    let scn = weft_scene::Scenario::parse(&heavy).unwrap();
    let outside = weft_scene::envelope::Envelope::outside_envelope(&scn);
    assert!(outside.iter().any(|r| r.starts_with("material.density")), "{outside:?}");
    weft_web::load_text("edited", &heavy).unwrap();
    let [plain, corrected] = weft_web::run_frames(FRAMES).unwrap();
    let fallback = weft_scene::envelope::Envelope::fallback(&scn);
    let (bdf2, _) = weft_tests::run(&fallback, None, false, FRAMES, |_, _, _, _| {});
    assert_eq!(corrected, bdf2, "outside: the page's fallback is plain BDF2");
    assert_eq!(field(results, "outside ", "plain"), format!("{plain:08x}"), "outside: plain");
    assert_eq!(field(results, "outside ", "corrected"), format!("{corrected:08x}"), "outside: fallback");
    assert!(results.lines().any(|l| l.starts_with("outside-caption plain BDF2, the fallback")), "{results}");
    // A bad file: the desktop's typed error, on the page, and the last good
    // scene still stepping.
    let bad = weft_web::SCENES[0].1.replace("resolution = [16, 16]", "resolution = [1, 16]");
    let desktop = weft_scene::Scenario::parse(&bad).unwrap_err().to_string();
    assert!(desktop.starts_with("cloth.resolution: "), "{desktop}");
    assert_eq!(field(results, "error bad-scene", "bad-scene"), "7");
    assert!(results.contains(&format!("shown edit: error 7: {desktop}")), "{results}");
    assert_eq!(field(results, "after-bad-scene", "kept"), "true");
    assert_eq!(field(results, "after-bad-scene", "stepped"), "true");
    // The board's scenes: the page's corrected cloth is the firmware's.
    for (name, _, scn) in weft_tests::board_scenes() {
        if !weft_web::SCENES.iter().any(|(page, _)| *page == name) {
            continue;
        }
        let (sum, _) = weft_tests::run(&scn, None, true, FRAMES, |_, _, _, _| {});
        let lead = format!("scene {name} ");
        assert_eq!(field(results, &lead, "corrected"), format!("{sum:08x}"), "{name}: the board's");
    }
    assert_eq!(field(results, "error load(99)", "load(99)"), "1");
    assert_eq!(field(results, "error drag(NaN)", "drag(NaN)"), "2");
    assert!(results.contains("shown drag: error 2: the drag target is not a finite position"), "{results}");
    assert_eq!(field(results, "after-errors", "kept"), "true");
    assert_eq!(field(results, "after-errors", "stepped"), "true");

    let png = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/browser/web.png");
    std::fs::create_dir_all(png.parent().unwrap()).unwrap();
    web::screenshot(&chromium, port, 0, 90, &png).unwrap();
    let head = std::fs::read(&png).unwrap();
    assert!(head.starts_with(b"\x89PNG") && head.len() > 10_000, "{}: not a picture", png.display());
    println!("screenshot: {}", png.display());
}
