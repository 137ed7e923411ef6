#!/usr/bin/env bash
# Runs a weft-firmware ELF (built with --features qemu) in QEMU's mps2-an386
# with -icount shift=0 (SysTick then counts instructions) and decodes its
# defmt output. Exits with the firmware's exit code.
set -euo pipefail
elf="$1"
timeout "${WEFT_QEMU_TIMEOUT:-300}" qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nographic \
  -icount shift=0 -semihosting-config enable=on,target=native -kernel "$elf" \
  | defmt-print -e "$elf"
