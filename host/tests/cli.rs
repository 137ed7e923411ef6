//! The `weft` binary as an installed user runs it: from a folder that is
//! not the checkout, with no `weights/` beside it.

use std::path::Path;
use std::process::Command;

fn weft(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_weft")).args(args).current_dir(dir).output().expect("weft runs")
}

#[test]
fn a_corrected_run_from_any_folder_uses_the_baked_network() {
    let dir = tempfile::tempdir().unwrap();
    let scene = dir.path().join("hang.toml");
    std::fs::write(
        &scene,
        "[cloth]\nwidth = 1.0\nheight = 1.0\nresolution = [16, 16]\norientation = \"vertical\"\n\
         center = [0.0, 1.0, 0.0]\n[material]\ncompression = 0.05\n[time]\nsteps = 6\n\
         [[pin]]\nregion = \"corners:top\"\n[output]\nevery = 1\n",
    )
    .unwrap();
    let out = weft(dir.path(), &["simulate", "hang.toml", "--corrected", "-q"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run = dir.path().join("out").join("hang");
    for f in ["summary.json", "preview.gif", "preview.png", "frame_00000.obj"] {
        assert!(run.join(f).is_file(), "{f} missing");
    }
    // The scene is inside the training envelope, so the network ran: the
    // corrected run differs from the plain one.
    let summary = std::fs::read_to_string(run.join("summary.json")).unwrap();
    assert!(!summary.contains("outside_envelope"), "{summary}");
    let plain = weft(dir.path(), &["simulate", "hang.toml", "-q", "--no-picture", "-o", "plain"]);
    assert!(plain.status.success(), "{}", String::from_utf8_lossy(&plain.stderr));
    assert!(!dir.path().join("plain").join("preview.gif").exists());
    let last = |d: &Path| std::fs::read_to_string(d.join("frame_00006.obj")).unwrap_or_default();
    assert_ne!(last(&run), last(&dir.path().join("plain")), "{summary}");
    // The same cloth heavier than any trained lies outside the envelope:
    // the run says so and is the plain BDF2 step's, frame for frame.
    let heavy =
        std::fs::read_to_string(&scene).unwrap().replace("compression = 0.05\n", "compression = 0.05\ndensity = 0.8\n");
    std::fs::write(dir.path().join("heavy.toml"), &heavy).unwrap();
    std::fs::write(dir.path().join("heavy_bdf2.toml"), heavy + "[solver]\nintegrator = \"bdf2\"\n").unwrap();
    let out = weft(dir.path(), &["simulate", "heavy.toml", "--corrected", "-q", "--no-picture", "-o", "heavy"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("ran the plain BDF2 fallback"), "{:?}", out);
    weft(dir.path(), &["simulate", "heavy_bdf2.toml", "-q", "--no-picture", "-o", "bdf2"]);
    assert_eq!(last(&dir.path().join("heavy")), last(&dir.path().join("bdf2")));
    assert_ne!(last(&dir.path().join("heavy")), "");
    // A named file that is not there is an error naming it.
    let missing = weft(dir.path(), &["simulate", "hang.toml", "--corrected", "--int8", "none.q8", "-q"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("none.q8"));
}

#[test]
fn every_subcommand_has_its_own_help_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = weft(dir.path(), &["--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
            .to_string()
    };
    assert!(line("demo").contains("GIF"), "{text}");
    assert!(line("mesh").to_lowercase().contains("shape"), "{text}");
    assert!(!line("mesh").contains("drape"), "{text}");
}
