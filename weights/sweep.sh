#!/usr/bin/env bash
# The size sweep: latent 8, 16, 32 × 1, 2, 3 processor rounds, each a
# weights/train.sh run in ~/.cache/weft/runs/L<latent>-R<rounds> (or
# $WEFT_RUNS), two at a time (one core each). Resumable: finished runs are
# skipped, stopped ones continue. Every run takes the binary built here at
# the start (the checkout may change while the sweep runs).
#
#   nohup weights/sweep.sh >~/.cache/weft/runs/sweep.log 2>&1 &
#   weights/sweep.sh report    # the table, with each network's cost on the board (QEMU)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${WEFT_RUNS:-$HOME/.cache/weft/runs}
mkdir -p "$RUNS"
if [ "${1:-}" = report ]; then
    runs=()
    for run in "$RUNS"/L*-R*/; do
        run=${run%/}
        [ -f "$run/weft-gnn.q8" ] || continue
        runs+=("$run")
        if [ ! -f "$run/device.txt" ]; then
            # The swing's network: dynamic edges + features and forward + correction.
            line=$(cd firmware && WEFT_WEIGHTS="$run/weft-gnn.q8" cargo qemu 2>&1 | grep "swing: per step" || true)
            if [ -n "$line" ]; then
                echo "$line" | sed -E 's/.*dynamic edges ([0-9]+), gnn ([0-9]+), correction ([0-9]+).*/\1 \2 \3/' |
                    awk '{print $1 + $2 + $3}' >"$run/device.txt"
            else
                echo "does not run on the board" >"$run/device.txt"
            fi
        fi
    done
    cargo run --release -q -p weft-host --example sweep_report -- "${runs[@]}"
    exit 0
fi
if [ ! -x "$RUNS/weft" ]; then
    cargo build --release -q -p weft-host
    cp target/release/weft "$RUNS/weft"
    git rev-parse HEAD >"$RUNS/weft.commit"
fi
export WEFT_BIN=$RUNS/weft
lane() {
    for size in "$@"; do
        local l=${size%x*} r=${size#*x}
        weights/train.sh "$RUNS/L$l-R$r" "$l" "$r" >>"$RUNS/L$l-R$r.log" 2>&1 || echo "L$l-R$r failed"
    done
}
# The shipped size first; the two lanes take about the same time.
lane 16x2 16x3 32x1 32x2 &
lane 8x1 8x2 8x3 16x1 32x3 &
wait
