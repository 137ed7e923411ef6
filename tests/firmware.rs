//! The firmware in QEMU against the desktop: every scene file of
//! `firmware/scenes/` runs on a Cortex-M4F in QEMU's mps2-an386 (baked by
//! the firmware's `build.rs`, with the SMLAD int8 kernel) and here as
//! `weft simulate FILE --corrected` runs it (`weft_host::sim::simulate`
//! with the baked network, portable kernel); each final state's checksum
//! and probe positions must agree bit for bit. A scene too large for the
//! board must stop the firmware's build with a line naming the limit.
//! Also prints the firmware's per-step cost and its flash and RAM.
//!
//! Needs the `thumbv7em-none-eabihf` target and `qemu-system-arm`,
//! `defmt-print` and `flip-link` on the PATH (`.ci/setup` installs them).
//! Without them the test says what is missing and passes, unless
//! `WEFT_REQUIRE_FIRMWARE` is set (as in `.ci/run`): then it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use object::{Object, ObjectSection};
use weft_host::sim::{self, corrector};
use weft_scene::envelope::Envelope;
use weft_scene::Scenario;
use weft_tests::BOARD_PAIRS_PER_NODE;

fn firmware_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../firmware")
}

/// Builds the QEMU flavour and returns the ELF.
fn build() -> PathBuf {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "--no-default-features", "--features", "qemu"])
        .current_dir(firmware_dir())
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the firmware failed");
    firmware_dir().join("target/thumbv7em-none-eabihf/release/weft-firmware")
}

/// A scene as `weft simulate FILE --corrected` runs it (the baked
/// network, the guard on): its summary's checksum, the probe positions
/// (bits) of the firmware's nodes (first, middle, last), and why it lies
/// outside the training envelope (none: inside; outside, the desktop and
/// the board run its plain BDF2 fallback). Its pairs must fit the board's
/// pair storage ([`BOARD_PAIRS_PER_NODE`], half the desktop's), so that
/// the board's truncation never changes it.
fn on_desktop(name: &str, scn: &Scenario) -> (u32, Vec<[u32; 3]>, Vec<String>) {
    let net = weft_host::learn::quantise::load_or_baked(None).expect("the baked network");
    let out = tempfile::tempdir().unwrap();
    let mut frames = Vec::new();
    let mut int8 = corrector::Int8::new(&net);
    let summary = sim::simulate(scn, out.path(), false, &mut int8, Some(&mut frames)).expect("weft simulate");
    let inside = summary.outside_envelope.is_empty();
    let stepped = if inside { scn.clone() } else { scn.fallback() };
    let mut most = 0;
    weft_tests::run(&stepped, None, inside, scn.time.steps, |_, _, _, state| {
        most = most.max(state.pairs().len());
        assert_eq!(state.warnings.dropped_pairs, 0, "{name}: pairs dropped at the board's pair storage");
    });
    eprintln!("{name}: at most {most} dynamic pairs a step of the board's {BOARD_PAIRS_PER_NODE} a node");
    let x = frames.last().expect("frames");
    let n = x.len();
    let probes = [0, n / 2, n - 1].iter().map(|&i| [x[i].x.to_bits(), x[i].y.to_bits(), x[i].z.to_bits()]).collect();
    (hex(&summary.checksum), probes, summary.outside_envelope)
}

fn hex(s: &str) -> u32 {
    u32::from_str_radix(s, 16).unwrap_or_else(|_| panic!("not hex: {s}"))
}

/// Flash (`.vector_table`, `.text`, `.rodata`, `.data` image) and static
/// RAM (`.data`, `.bss`, `.uninit`) of the ELF.
fn sizes(elf: &Path) -> (u64, u64) {
    let data = std::fs::read(elf).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let size = |name: &str| file.section_by_name(name).map_or(0, |s| s.size());
    let flash = size(".vector_table") + size(".text") + size(".rodata") + size(".data");
    let ram = size(".data") + size(".bss") + size(".uninit");
    (flash, ram)
}

/// What the firmware test needs and this machine lacks.
fn missing_prerequisites() -> Vec<String> {
    let mut missing = Vec::new();
    for tool in ["qemu-system-arm", "defmt-print", "flip-link"] {
        let found = std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()));
        if !found {
            missing.push(tool.to_string());
        }
    }
    let sysroot = Command::new("rustc").arg("--print").arg("sysroot").current_dir(firmware_dir()).output();
    let target = sysroot
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .is_some_and(|root| Path::new(&root).join("lib/rustlib/thumbv7em-none-eabihf").is_dir());
    if !target {
        missing.push("the thumbv7em-none-eabihf target".into());
    }
    missing
}

#[test]
fn firmware_in_qemu_matches_the_host_bit_for_bit() {
    let missing = missing_prerequisites();
    if !missing.is_empty() {
        let why = format!("firmware test needs {}: run .ci/setup", missing.join(", "));
        assert!(std::env::var_os("WEFT_REQUIRE_FIRMWARE").is_none(), "{why}");
        // Straight to stderr: the test harness captures print macros.
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
        return;
    }
    let elf = build();
    let out = Command::new(firmware_dir().join("qemu-run.sh")).arg(&elf).output().expect("qemu-run.sh runs");
    let log = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{log}");
    assert!(out.status.success(), "firmware failed ({}):\n{log}\n{}", out.status, String::from_utf8_lossy(&out.stderr));

    // Each scenario's lines are led by its name.
    let lines = |name: &str| -> Vec<String> {
        let lead = format!("{name}: ");
        log.lines()
            .filter_map(|l| l.split_once("INFO").map(|(_, r)| r.trim_start()))
            .filter_map(|r| r.strip_prefix(lead.as_str()).map(str::to_string))
            .collect()
    };
    let scenes = weft_tests::board_scenes();
    for (name, _, scn) in &scenes {
        let lines = lines(name);
        let checksum = lines
            .iter()
            .find_map(|l| l.strip_prefix("checksum ").filter(|r| r.contains(" after ")))
            .map(|r| hex(r.split_whitespace().next().unwrap()))
            .unwrap_or_else(|| panic!("a checksum line for {name}"));
        let probes: Vec<[u32; 3]> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("node "))
            .map(|r| {
                let w: Vec<&str> = r.split_whitespace().collect();
                [hex(w[2]), hex(w[3]), hex(w[4])]
            })
            .collect();
        let (host_sum, host_probes, outside) = on_desktop(name, scn);
        assert_eq!(probes, host_probes, "{name}: probe positions differ");
        assert_eq!(checksum, host_sum, "{name}: final-state checksum differs");
        // Outside the training envelope the board says so and runs the
        // fallback (the desktop's checksum above is that of plain BDF2).
        let fallback = lines.iter().any(|l| l.starts_with("outside the network's training envelope"));
        assert_eq!(fallback, !outside.is_empty(), "{name}: the board's fallback against the desktop's {outside:?}");
        if !outside.is_empty() {
            let (bdf2, _) = weft_tests::run(&scn.fallback(), None, false, scn.time.steps, |_, _, _, _| {});
            assert_eq!(host_sum, bdf2, "{name}: the desktop's fallback is plain BDF2");
        }
        if name == "swing" {
            cost_model_holds(&lines);
        }
    }
    assert!(scenes.len() >= 5, "the board's scenes: swing, drape, tablecloth, the towel and the skirt at least");
    let outside = scenes.iter().filter(|(_, _, scn)| !scn.outside_envelope().is_empty()).count();
    assert!(outside >= 1, "a board scene outside the training envelope (the towel)");

    let (flash, ram) = sizes(&elf);
    println!("firmware: flash {flash} bytes (.vector_table+.text+.rodata+.data), static RAM {ram} bytes (.data+.bss)");
}

/// `weft eval`'s device-cost model (`learn::eval::horizons`) against the
/// firmware's own counts of the swing: the network's part (features and
/// forward, dynamic edges, correction) within 5 %, the physics from its CG
/// iterations within 10 %.
fn cost_model_holds(lines: &[String]) {
    use weft_host::learn::eval::device::{device_per_network, DEVICE_PER_CG_ITERATION, DEVICE_PER_STEP};
    // The network the firmware was built with (the same `weights/` file).
    let per_network = device_per_network(weft_weights::LATENT, weft_weights::ROUNDS);
    let field = |line: &str, name: &str| -> f64 {
        let at = line.find(name).unwrap_or_else(|| panic!("{name} in {line}"));
        let digits: String = line[at + name.len()..].trim_start().chars().take_while(char::is_ascii_digit).collect();
        digits.parse().unwrap_or_else(|_| panic!("a number after {name} in {line}"))
    };
    let per_step = lines.iter().find(|l| l.starts_with("per step")).expect("a per-step line");
    let cg_line = lines.iter().find(|l| l.contains("mean CG iterations")).expect("a CG line");
    let network = field(per_step, "dynamic edges") + field(per_step, "gnn") + field(per_step, "correction");
    let physics = field(per_step, "physics");
    let cg = field(cg_line, "mean CG iterations");
    let model = DEVICE_PER_STEP + cg * DEVICE_PER_CG_ITERATION;
    println!("cost model: network {per_network:.0} against {network:.0}, physics {model:.0} against {physics:.0}");
    assert!((per_network / network - 1.0).abs() < 0.05, "network: model {per_network}, firmware {network}");
    assert!((model / physics - 1.0).abs() < 0.10, "physics: model {model} at {cg} CG iterations, firmware {physics}");
}

/// A scene larger than the board (a 40 × 40 grid) stops the firmware's
/// build with one line naming the file, the limit and the scene's need.
#[test]
fn a_scene_too_large_for_the_board_fails_the_build_naming_the_limit() {
    if !missing_prerequisites().is_empty() {
        assert!(std::env::var_os("WEFT_REQUIRE_FIRMWARE").is_none(), "the firmware's toolchain is missing");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let swing = std::fs::read_to_string(weft_tests::scenes_dir().join("swing.toml")).unwrap();
    let big = swing.replace("resolution = [16, 16]", "resolution = [40, 40]");
    assert_ne!(big, swing);
    std::fs::write(dir.path().join("big.toml"), big).unwrap();
    let out = Command::new(env!("CARGO"))
        .args(["build", "--release", "--no-default-features", "--features", "qemu"])
        .current_dir(firmware_dir())
        .env_remove("CARGO_TARGET_DIR")
        .env("WEFT_SCENES", dir.path())
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a 1600-node scene built:\n{stderr}");
    let line =
        stderr.lines().find(|l| l.contains("big.toml")).unwrap_or_else(|| panic!("no line names the scene:\n{stderr}"));
    assert!(line.contains("1600 nodes") && line.contains("bytes of RAM; the board has"), "{line}");
}
