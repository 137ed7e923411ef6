#!/usr/bin/env bash
# A correction network trained on its own rollouts from the scenes' starts
# (`weft train --teacher coarse`: the coarse mesh at the reference's step is
# the teacher), quantised, and evaluated from each scene's start on the
# validation and test splits, float and int8, with the frontier ratio.
#
#   weights/onpolicy.sh RUN [TRAIN OPTIONS…]      # RUN a folder
#
# For example, the two base steps:
#   WEFT_SEED=1 weights/onpolicy.sh ~/.cache/weft/runs/P-be  --latent 16 --rounds 1
#   WEFT_SEED=1 weights/onpolicy.sh ~/.cache/weft/runs/P-bdf --latent 16 --rounds 1 --base-step bdf2
# A run that stopped continues from its checkpoint when started again. The
# data (validation and test trajectories; no training trajectories are
# needed) come from $WEFT_DATA, else ~/.cache/weft/data; the seed from
# $WEFT_SEED, else 1. One core, as weights/run.sh sets.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${1:?usage: weights/onpolicy.sh RUN [TRAIN OPTIONS…]}
EXTRA=("${@:2}")
DATA=${WEFT_DATA:-$HOME/.cache/weft/data}
SEED=${WEFT_SEED:-1}
CLIP=12
# shellcheck source=weights/run.sh
. weights/run.sh
train_once --teacher coarse "${EXTRA[@]}"
[ -f "$M.q8" ] || { log quantize; run "$W" quantize -m "$M" -d "$DATA" --clip "$CLIP" -o "$M.q8"; }
for split in val test; do
    if [ ! -f "$RUN/eval-$split/report.json" ]; then
        log "eval $split from the start"
        run "$W" eval --split "$split" -d "$DATA" -m "$M" --int8 "$M.q8" -o "$RUN/eval-$split"
    fi
done
log done
