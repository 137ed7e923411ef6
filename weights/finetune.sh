#!/usr/bin/env bash
# A correction network fine-tuned from a trained one (`weft train --init`),
# then chosen, quantised and evaluated as weights/train.sh does: the gain on
# the validation split under the 50-frame and whole-rollout guards (int8),
# quantisation, and evaluation at horizons on the validation and test splits
# and the held-out family (where the data has it), float and int8.
#
#   weights/finetune.sh RUN INIT [TRAIN OPTIONS…]   # RUN a folder, INIT a model stem
#
# For example, the solver in the loop from the shipped network:
#   weights/finetune.sh ~/.cache/weft/runs/C1 weights/weft-gnn --steps 3000 \
#       --solver-loss 32 --solver-grow 500 --solver-through step
# A run that stopped continues from its checkpoint when started again. The
# data come from $WEFT_DATA, else ~/.cache/weft/data; the seed from
# $WEFT_SEED, else 1. One core (RAYON_NUM_THREADS=1), so that two runs share
# a two-core machine; the run keeps its binary, commit, data index and
# command lines.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${1:?usage: weights/finetune.sh RUN INIT [TRAIN OPTIONS…]}
INIT=${2:?usage: weights/finetune.sh RUN INIT [TRAIN OPTIONS…]}
EXTRA=("${@:3}")
DATA=${WEFT_DATA:-$HOME/.cache/weft/data}
SEED=${WEFT_SEED:-1}
CLIP=12
# The run folder, its binary and the helpers.
# shellcheck source=weights/run.sh
. weights/run.sh
train_once --init "$INIT" "${EXTRA[@]}"
if [ ! -f "$RUN/gained" ]; then
    log gain
    run "$W" gain -m "$M" -d "$DATA" --guard 50 --guard-rollout 200 --int8 --clip "$CLIP" | tee "$RUN/gain.txt"
    touch "$RUN/gained"
fi
[ -f "$M.q8" ] || { log quantize; run "$W" quantize -m "$M" -d "$DATA" --clip "$CLIP" -o "$M.q8"; }
splits=(val test)
grep -q '"heldout"' "$DATA/index.json" && grep -q '"split": "heldout"' "$DATA/index.json" && splits+=(heldout)
for split in "${splits[@]}"; do
    if [ ! -f "$RUN/eval-$split/horizons.json" ]; then
        log "eval $split"
        run "$W" eval --horizons --split "$split" -d "$DATA" -m "$M" --int8 "$M.q8" -o "$RUN/eval-$split"
    fi
done
for split in "${splits[@]:1}"; do
    if [ ! -f "$RUN/eval-$split/report.json" ]; then
        log "eval $split, whole rollouts"
        run "$W" eval --split "$split" -d "$DATA" -m "$M" --int8 "$M.q8" -o "$RUN/eval-$split"
    fi
done
log done
