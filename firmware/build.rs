//! Picks the memory layout: the STM32F405 board or QEMU's mps2-an386.

use std::path::PathBuf;

fn main() {
    let board = std::env::var_os("CARGO_FEATURE_BOARD").is_some();
    let qemu = std::env::var_os("CARGO_FEATURE_QEMU").is_some();
    let memory = match (board, qemu) {
        (true, false) => "memory-stm32f405.x",
        (false, true) => "memory-mps2-an386.x",
        _ => {
            eprintln!("error: enable exactly one of the features `board` (default) and `qemu`");
            std::process::exit(1);
        }
    };
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::copy(memory, out.join("memory.x")).expect("copy memory layout");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed={memory}");
    println!("cargo:rerun-if-changed=build.rs");
}
