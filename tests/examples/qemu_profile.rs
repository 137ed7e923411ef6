//! Where the firmware's instructions go, by function: builds the QEMU
//! firmware for 4 steps per scenario (`WEFT_FIRMWARE_STEPS`, without LTO so
//! that functions keep their names), runs it under QEMU with its
//! translation-block log (`-d in_asm,exec,nochain`) streamed through a
//! pipe, and counts each executed block's instructions to its function.
//! Counts are per step (boot and set-up included, spread over the steps).
//!
//! `cargo run --release -p weft-tests --example qemu_profile -- [top]
//! [blocks]` (`blocks`: by translated block, with its address, instead of
//! by function, to read beside `llvm-objdump -d` of the same build; needs `qemu-system-arm` and the firmware's toolchain, as `cargo qemu`;
//! about 2 min).
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const STEPS: u64 = 4;

fn main() {
    let top: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(40);
    let by_block = std::env::args().nth(2).is_some_and(|a| a == "blocks");
    let firmware = Path::new(env!("CARGO_MANIFEST_DIR")).join("../firmware");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "--no-default-features", "--features", "qemu"])
        .current_dir(&firmware)
        .env_remove("CARGO_TARGET_DIR")
        .env("WEFT_FIRMWARE_STEPS", STEPS.to_string())
        .env("CARGO_PROFILE_RELEASE_LTO", "false")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the firmware failed");
    let elf = firmware.join("target/thumbv7em-none-eabihf/release/weft-firmware");
    let fifo = std::env::temp_dir().join(format!("weft-qemu-profile-{}", std::process::id()));
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success(), "mkfifo failed");
    let mut qemu = Command::new("qemu-system-arm")
        .args(["-machine", "mps2-an386", "-cpu", "cortex-m4", "-nographic", "-icount", "shift=0"])
        .args(["-semihosting-config", "enable=on,target=native", "-d", "in_asm,exec,nochain", "-D"])
        .arg(&fifo)
        .arg("-kernel")
        .arg(&elf)
        .stdout(Stdio::null())
        .spawn()
        .expect("qemu-system-arm runs");
    let log = BufReader::with_capacity(1 << 20, std::fs::File::open(&fifo).expect("the log pipe opens"));
    let (counts, total) = count(log, by_block);
    let _ = qemu.wait();
    let _ = std::fs::remove_file(&fifo);
    // Both scenarios ran STEPS steps each.
    let steps = 2 * STEPS;
    let mut rows: Vec<(String, u64)> = counts.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    println!("{} instructions in {steps} steps ({} per step)", total, total / steps);
    for (name, n) in rows.iter().take(top) {
        println!("{:>11} {:5.1} %  {}", n / steps, 100.0 * *n as f64 / total as f64, demangle(name));
    }
}

/// Instructions per function (or per block): each translated block's size
/// (from its `IN:` listing) counted at every `Trace` of its start address.
fn count(log: impl BufRead, by_block: bool) -> (HashMap<String, u64>, u64) {
    let (mut size, mut counts) = (HashMap::<u32, u64>::new(), HashMap::<String, u64>::new());
    let (mut block, mut start, mut n, mut total) = (false, None, 0u64, 0u64);
    for line in log.lines().map_while(Result::ok) {
        if line.starts_with("IN:") {
            (block, start, n) = (true, None, 0);
            continue;
        }
        if block {
            if let Some(pc) = line.strip_prefix("0x").and_then(|l| u32::from_str_radix(&l[..8.min(l.len())], 16).ok()) {
                start.get_or_insert(pc);
                n += 1;
                continue;
            }
            if let Some(pc) = start {
                size.insert(pc, n);
            }
            block = false;
        }
        if let Some(rest) = line.strip_prefix("Trace") {
            let pc = rest.split('/').nth(1).and_then(|p| u32::from_str_radix(p, 16).ok());
            let name = rest.rsplit(']').next().unwrap_or("").trim();
            let n = pc.and_then(|pc| size.get(&pc)).copied().unwrap_or(0);
            let key = match (by_block, pc) {
                (true, Some(pc)) => format!("{pc:#010x} ({n} instructions) {}", demangle(name)),
                _ => name.to_string(),
            };
            *counts.entry(key).or_default() += n;
            total += n;
        }
    }
    (counts, total)
}

/// The legacy mangling's escapes.
const ESCAPES: [(&str, &str); 11] = [
    ("$LT$", "<"),
    ("$GT$", ">"),
    ("$u20$", " "),
    ("$u27$", "'"),
    ("$u7b$", "{"),
    ("$u7d$", "}"),
    ("$RF$", "&"),
    ("$BP$", "*"),
    ("$LP$", "("),
    ("$RP$", ")"),
    ("$C$", ","),
];

/// `_ZN4weft4core3foo17h…E` → `weft::core::foo` (legacy Rust mangling;
/// other names as they are).
fn demangle(name: &str) -> String {
    let Some(mut rest) = name.strip_prefix("_ZN") else { return name.to_string() };
    let mut parts = Vec::new();
    while let Some(len_end) = rest.find(|c: char| !c.is_ascii_digit()) {
        let Ok(len) = rest[..len_end].parse::<usize>() else { break };
        let part = &rest[len_end..(len_end + len).min(rest.len())];
        rest = &rest[(len_end + len).min(rest.len())..];
        if !(part.len() == 17 && part.starts_with('h')) {
            let mut p = part.strip_prefix('_').filter(|p| p.starts_with('$')).unwrap_or(part).to_string();
            for (code, c) in ESCAPES {
                p = p.replace(code, c);
            }
            parts.push(p.replace("..", "::"));
        }
    }
    parts.join("::")
}
