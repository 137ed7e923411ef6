//! Validates the quantised model file and turns it into `static` data
//! (`$OUT_DIR/network.rs`, included by `src/lib.rs`).

use std::path::PathBuf;

#[allow(dead_code)]
#[path = "src/format.rs"]
mod format;

const REGENERATE: &str = "regenerate it with `cargo run --release -p weft-host -- quantize` \
                          (see weights/README.md), or point WEFT_WEIGHTS at a valid file";

fn fail(msg: String) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1);
}

fn main() {
    println!("cargo:rerun-if-env-changed=WEFT_WEIGHTS");
    println!("cargo:rerun-if-changed=src/format.rs");
    if std::env::var_os("CARGO_FEATURE_BAKE").is_none() {
        return;
    }
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let path = std::env::var_os("WEFT_WEIGHTS").map(PathBuf::from).unwrap_or_else(|| dir.join("weft-gnn.q8"));
    println!("cargo:rerun-if-changed={}", path.display());
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|e| fail(format!("cannot read the model file {}: {e}; {REGENERATE}", path.display())));
    let net = format::NetworkData::from_bytes(&bytes)
        .unwrap_or_else(|e| fail(format!("model file {}: {e}; {REGENERATE}", path.display())));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let out = out_dir.join("network.rs");
    std::fs::write(&out, net.to_rust()).unwrap_or_else(|e| fail(format!("writing {}: {e}", out.display())));
    // The validated file itself, for programs that read the format (the
    // desktop's default network).
    let file = out_dir.join("weft-gnn.q8");
    std::fs::write(&file, &bytes).unwrap_or_else(|e| fail(format!("writing {}: {e}", file.display())));
}
