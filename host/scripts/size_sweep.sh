#!/bin/bash
# The network size sweep of docs/learning.md: for every latent × rounds,
# `weft train` from scratch (30 000 steps, the defaults, seed 1) on a data
# folder and `weft gain` at horizon 10 on its validation split.
# Resumable: a finished size is skipped, one stopped part-way resumes from
# its checkpoint. One core: RAYON_NUM_THREADS=1.
#
#   host/scripts/size_sweep.sh [DATA] [OUT]     (defaults: ~/.cache/weft/data, ~/.cache/weft/sweep)
set -euo pipefail
data=${1:-${WEFT_DATA:-$HOME/.cache/weft/data}}
out=${2:-$HOME/.cache/weft/sweep}
weft=${WEFT:-weft}
export RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-1}
mkdir -p "$out"
for size in "16 2" "32 2" "16 3" "8 2" "16 1" "32 1" "8 3" "8 1" "32 3"; do
  set -- $size
  name=L$1R$2
  [ -f "$out/$name.done" ] && continue
  resume=()
  [ -f "$out/$name/weft-gnn.json" ] && resume=(--resume)
  date
  "$weft" train -d "$data" -o "$out/$name/weft-gnn" --latent "$1" --rounds "$2" \
    --steps 30000 --seed 1 -q "${resume[@]}" >> "$out/$name.log" 2>&1
  tail -2 "$out/$name.log"
  "$weft" gain -m "$out/$name/weft-gnn" -d "$data" > "$out/$name.gain.log" 2>&1
  tail -3 "$out/$name.gain.log"
  touch "$out/$name.done"
done
