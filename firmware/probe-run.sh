#!/usr/bin/env bash
# The board runner: flashes and runs a weft-firmware ELF on an STM32F405 on
# a debug probe with probe-rs (defmt over RTT). Set WEFT_CHIP for another
# part (default STM32F405RGTx).
set -euo pipefail
elf="$1"
if ! command -v probe-rs >/dev/null; then
  cat >&2 <<'MSG'
probe-rs is not installed: `cargo run --release` flashes the board with it.
  install:  cargo install probe-rs-tools --locked   (about 15 min to build)
  then connect the board's SWD probe (ST-LINK or any CMSIS-DAP) and run again.
No board? `cargo qemu` runs the same firmware in QEMU.
MSG
  exit 127
fi
exec probe-rs run --chip "${WEFT_CHIP:-STM32F405RGTx}" "$elf"
