#!/usr/bin/env bash
# One correction network from scratch on the data set, the way the
# committed one was made: fit the coarse step's membrane, train, choose the gain on the validation split,
# quantise, and evaluate at horizons on the validation and test splits and
# the held-out family (float and int8).
#
#   weights/train.sh RUN [LATENT ROUNDS [TRAIN OPTIONS…]]  # a run folder; latent 16, 2 rounds by default
#   weights/train.sh RUN install            # copies RUN's network and reports into weights/
#
# TRAIN OPTIONS are added to `weft train`'s (for example `--rollout-loss 10`).
# The gain is chosen at horizon 10 among the gains no worse than plain at
# horizon 50 and over whole 200-frame rollouts, judged on the int8 network
# the device runs, quantised at each gain as below (`weft gain --guard 50
# --guard-rollout 200 --int8 --clip 12`; gain.txt keeps every gain's
# errors).
#
# RUN is a folder (for example ~/.cache/weft/runs/L16-R2); a run that
# stopped continues from its checkpoint when started again. The data come
# from $WEFT_DATA, else ~/.cache/weft/data (`weft generate`). The run keeps
# beside its network: the binary it ran and its commit, the data's index,
# the command lines and the training log. One core (RAYON_NUM_THREADS=1),
# so that two runs share a two-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${1:?usage: weights/train.sh RUN [LATENT ROUNDS | install]}
DATA=${WEFT_DATA:-$HOME/.cache/weft/data}
# The training seed: $WEFT_SEED, else 1 (the committed network's).
SEED=${WEFT_SEED:-1}
# Hidden and latent int8 scales clipped at this many RMS (`weft quantize --clip`).
CLIP=12

if [ "${2:-}" = install ]; then
    for f in weft-gnn.json weft-gnn.safetensors weft-gnn.log.json weft-gnn.q8 commit data-index.json commands; do
        cp "$RUN/$f" "weights/$f"
    done
    for f in gain.txt calibrate.txt; do
        if [ -f "$RUN/$f" ]; then cp "$RUN/$f" "weights/$f"; fi
    done
    # The run's output: beside its folder where weights/sweep.sh ran it.
    if [ -f "$RUN/train.log" ]; then cp "$RUN/train.log" weights/train.log; else cp "${RUN%/}.log" weights/train.log; fi
    for split in test heldout; do
        rm -rf "weights/eval-$split"
        mkdir -p "weights/eval-$split"
        cp "$RUN/eval-$split"/{horizons.json,report.json,rmse.png} "weights/eval-$split/" 2>/dev/null || true
    done
    exit 0
fi

LATENT=${2:-16}
ROUNDS=${3:-2}
EXTRA=("${@:4}")
# The run folder, its binary and the helpers.
# shellcheck source=weights/run.sh
. weights/run.sh

# The coarse step's membrane, fitted on the validation split first
# (`weft calibrate`; its last line holds the flags that train on it).
if [ ! -f "$RUN/calibrate.txt" ]; then
    log calibrate
    run "$W" calibrate -d "$DATA" >"$RUN/calibrate.part"
    mv "$RUN/calibrate.part" "$RUN/calibrate.txt"
fi
read -r -a GRAIN < <(tail -n 1 "$RUN/calibrate.txt")
train_once --latent "$LATENT" --rounds "$ROUNDS" --steps 30000 --unroll 10 --unroll-after 5000 \
    "${GRAIN[@]}" "${EXTRA[@]}"
if [ ! -f "$RUN/gained" ]; then
    log gain
    run "$W" gain -m "$M" -d "$DATA" --guard 50 --guard-rollout 200 --int8 --clip "$CLIP" | tee "$RUN/gain.txt"
    touch "$RUN/gained"
fi
log quantize
run "$W" quantize -m "$M" -d "$DATA" --clip "$CLIP" -o "$M.q8"
for split in val test heldout; do
    if [ ! -f "$RUN/eval-$split/horizons.json" ]; then
        log "eval $split"
        run "$W" eval --horizons --split "$split" -d "$DATA" -m "$M" --int8 "$M.q8" -o "$RUN/eval-$split"
    fi
done
# Whole 200-frame rollouts (report.json, rmse.png) beside the horizons.
for split in test heldout; do
    if [ ! -f "$RUN/eval-$split/report.json" ]; then
        log "eval $split, whole rollouts"
        run "$W" eval --split "$split" -d "$DATA" -m "$M" --int8 "$M.q8" -o "$RUN/eval-$split"
    fi
done
log done
