//! The build script refuses a missing, corrupt or mismatched model file
//! with a message that says what is wrong and how to regenerate it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Builds weft-weights with `WEFT_WEIGHTS=model`; returns success and
/// stderr. A target directory of its own keeps the workspace's build of
/// the real weights untouched.
fn build_with(model: &Path) -> (bool, String) {
    let target = manifest_dir().join("../target/build-script-test");
    let out = Command::new(env!("CARGO"))
        .args(["build", "--offline", "--quiet", "-p", "weft-weights", "--manifest-path"])
        .arg(manifest_dir().join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target)
        .env("WEFT_WEIGHTS", model)
        .output()
        .expect("cargo runs");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn committed() -> Vec<u8> {
    std::fs::read(manifest_dir().join("weft-gnn.q8")).expect("weights/weft-gnn.q8")
}

#[test]
fn bad_model_files_fail_the_build_with_a_useful_message() {
    let dir = tempfile::tempdir().unwrap();

    let good = dir.path().join("good.q8");
    std::fs::write(&good, committed()).unwrap();
    let (ok, err) = build_with(&good);
    assert!(ok, "the committed model must build: {err}");

    let mut bytes = committed();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    let corrupt = dir.path().join("corrupt.q8");
    std::fs::write(&corrupt, &bytes).unwrap();
    let (ok, err) = build_with(&corrupt);
    assert!(!ok, "a corrupt model built");
    assert!(err.contains("checksum mismatch"), "{err}");
    assert!(err.contains("weft-host -- quantize"), "no regeneration hint: {err}");

    let mut bytes = committed();
    bytes[8] = 7; // format version 7
    let newer = dir.path().join("newer.q8");
    std::fs::write(&newer, &bytes).unwrap();
    let (ok, err) = build_with(&newer);
    assert!(!ok && err.contains("format version 7"), "{err}");

    let (ok, err) = build_with(&dir.path().join("missing.q8"));
    assert!(!ok && err.contains("cannot read the model file"), "{err}");
}
