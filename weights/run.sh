# Sourced by train.sh and finetune.sh with RUN and DATA set: the run
# folder with its own binary and commit ($WEFT_BIN, a binary built before
# with its commit in $WEFT_BIN.commit, else a fresh build) and the data's
# index; W the binary, M the model stem; `run` records a command line in
# RUN/commands before running it, `log` prints a time-stamped line. One
# core (RAYON_NUM_THREADS=1), so that two runs share a two-core machine.
mkdir -p "$RUN"
export RAYON_NUM_THREADS=1
if [ ! -x "$RUN/weft" ]; then
    if [ -n "${WEFT_BIN:-}" ]; then
        cp "$WEFT_BIN" "$RUN/weft"
        cp "$WEFT_BIN.commit" "$RUN/commit"
    else
        cargo build --release -q -p weft-host
        cp target/release/weft "$RUN/weft"
        git rev-parse HEAD >"$RUN/commit"
    fi
    cp "$DATA/index.json" "$RUN/data-index.json"
fi
W=$RUN/weft
M=$RUN/weft-gnn
run() {
    echo "$(date -u +%FT%TZ) $*" >>"$RUN/commands"
    "$@"
}
log() { echo "$(date -u +%FT%TZ) $*"; }
# `train_once ARGS…`: `weft train` into M with the run's data and seed and
# ARGS, once: resumed from M's checkpoint when one is there, then marked
# done (RUN/trained) so that a restarted script goes on past it.
train_once() {
    if [ ! -f "$RUN/trained" ]; then
        local resume=()
        [ -f "$M.ckpt" ] && resume=(--resume)
        log train
        run "$W" train -d "$DATA" -o "$M" --seed "$SEED" -q "${resume[@]}" "$@"
        touch "$RUN/trained"
    fi
}
