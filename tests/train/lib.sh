# lib.sh - shared set-up of the end-to-end train tests (sourced by tests/train/cli_*.sh and peer_*.sh).
# Provides: TANDEM, MPIRUN, MPIFLAGS (mpirun's flags for that MPI, without -np), PY (the Python with torch),
# $W (a private temp folder, removed on exit), ok/bad (counted and printed) and finish (the "N passed,
# N failed" line; non-zero when anything failed), and tiny_setup SAMPLES HELDOUT: generated data in
# $W/data, a tokenizer trained on it in $W/tok.json and the tiny config in $W/model. A small corpus may not
# support the tiny config's 1024 ids: then the tokenizer gets what it supports and the config's special-token
# ids point at it (the model's vocab_size stays, which is allowed).
# Env: TANDEM (build/tandem), MPIRUN (mpirun.openmpi or mpirun.mpich).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
TANDEM=${TANDEM:-build/tandem}
MPIRUN=${MPIRUN:-mpirun.openmpi}
case "$MPIRUN" in
  *openmpi*) MPIFLAGS=(--allow-run-as-root --oversubscribe --bind-to none) ;;
  *) MPIFLAGS=() ;;
esac
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
PY=/usr/bin/python3
W=$(mktemp -d "/tmp/tdm_$(basename "$0" .sh).XXXXXX")
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; }

tiny_setup() { # samples heldout
  "$TANDEM" gen-data --out "$W/data" --samples "$1" --heldout "$2" >/dev/null || { bad "gen-data"; finish; exit 1; }
  mkdir -p "$W/model"
  cp configs/tiny/config.json configs/tiny/preprocessor_config.json "$W/model/"
  "$TANDEM" train-tokenizer --data "$W/data/train.json" --out "$W/tok.json" >/dev/null 2>&1 && return 0
  local n ids
  n=$("$TANDEM" train-tokenizer --data "$W/data/train.json" --out /dev/null 2>&1 |
      sed -nE 's/.*supports only ([0-9]+) tokens.*/\1/p')
  "$TANDEM" train-tokenizer --data "$W/data/train.json" --vocab-size "${n:-456}" --out "$W/tok.json" >/dev/null \
    || bad "train-tokenizer"
  ids=($(echo '<|vision_start|><|vision_end|><|image_pad|><|video_pad|>' | "$TANDEM" tokenize --tokenizer "$W/tok.json"))
  sed -i -E "s/\"vision_start_token_id\": [0-9]+/\"vision_start_token_id\": ${ids[0]}/;
             s/\"vision_end_token_id\": [0-9]+/\"vision_end_token_id\": ${ids[1]}/;
             s/\"image_token_id\": [0-9]+/\"image_token_id\": ${ids[2]}/;
             s/\"video_token_id\": [0-9]+/\"video_token_id\": ${ids[3]}/" "$W/model/config.json"
}

# COMMON: one rank's training flags on tiny_setup's files; then a 2-iteration run of them that saves
# $W/ck/iter_0000002 (its output in $W/save.log), or the test ends there.
tiny_saved_run() {
  COMMON=(--model "$W/model" --tokenizer "$W/tok.json" --data "$W/data/train.json" --micro-batch-size 2
          --global-batch-size 2 --lr 1e-3 --seq-length 512 --seed 7)
  "$TANDEM" train "${COMMON[@]}" --train-iters 2 --save "$W/ck" --save-interval 2 > "$W/save.log" 2>&1 \
    || { bad "the run that saves (see below)"; tail -3 "$W/save.log"; finish; exit 1; }
}
