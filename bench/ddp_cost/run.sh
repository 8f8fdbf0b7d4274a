#!/usr/bin/env bash
# run.sh - what data parallelism costs on this machine: tandem train on the same global batch as
#   1 rank x 2 BLAS threads (dp1_t2), and 2 ranks x 1 thread under Open MPI (ompi: its default single-copy
#   mechanism; ompi_none: btl_vader_single_copy_mechanism none; ompi_mpiop: TANDEM_REDUCE_SCATTER=mpi;
#   ompi_nice0: --comm-thread-nice 0) and under MPICH (mpich, mpich_mpiop; build-mpich/tandem, when built),
# for the tiny config and width 512 (bench/peer_torch/configs/small), interleaved REPEATS times. Prints one row
# per run: the median over iterations 5..ITERS of the step, the compute thread's waits on the collectives
# (grad sync + parameter all-gather), the communication thread's CPU and the process CPU, in ms, with the load
# average at the run's end. Compare within one invocation (ratios), the machine may be shared.
#   bench/ddp_cost/run.sh                   (env: ITERS=20 REPEATS=2 SIZES="tiny small" CASES="..." BIN=build/tandem
#                                            BEFORE=path/to/another/tandem: its 2-rank Open MPI rows as well;
#                                            EXTRA="--ddp-bucket-size 500000": more train flags)
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here" || exit 2
BIN=${BIN:-build/tandem}
BIN_MPICH=${BIN_MPICH:-build-mpich/tandem}
ITERS=${ITERS:-20}
REPEATS=${REPEATS:-2}
SIZES=${SIZES:-tiny small}
CASES=${CASES:-dp1_t2 ompi ompi_none mpich}
BEFORE=${BEFORE:-}
[ -x "$BIN" ] || { echo "run.sh: $BIN: not built (make)" >&2; exit 2; }
W=${W:-/tmp/tdm_ddp_cost}
mkdir -p "$W"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OMPI=(mpirun.openmpi --bind-to none --oversubscribe -np 2)
[ -f "$W/data/train.json" ] || "$BIN" gen-data --out "$W/data" --samples 48 --heldout 4 >/dev/null
[ -f "$W/tok.json" ] || "$BIN" train-tokenizer --data "$W/data/train.json" --vocab-size 1024 --out "$W/tok.json" \
  >/dev/null 2>&1 || "$BIN" train-tokenizer --data "$W/data/train.json" --vocab-size 500 --out "$W/tok.json" >/dev/null
model_dir() { case $1 in tiny) echo configs/tiny ;; small) echo bench/peer_torch/configs/small ;; *) echo "$1" ;; esac; }

one() { # size case
  local size=$1 kind=$2 dir=$W/run_$1_$2
  local A=(--model "$(model_dir "$size")" --tokenizer "$W/tok.json" --data "$W/data/train.json" --micro-batch-size 2
           --global-batch-size 8 --lr 1e-4 --seq-length 512 --train-iters "$ITERS" --log-interval 1000
           --freeze-vision --freeze-projector --use-distributed-optimizer --run-dir "$dir" ${EXTRA:-})
  rm -rf "$dir"
  case $kind in
    dp1_t2) OPENBLAS_NUM_THREADS=2 "$BIN" train "${A[@]}" ;;
    ompi) OPENBLAS_NUM_THREADS=1 "${OMPI[@]}" "$BIN" train "${A[@]}" ;;
    ompi_none) OPENBLAS_NUM_THREADS=1 OMPI_MCA_btl_vader_single_copy_mechanism=none "${OMPI[@]}" "$BIN" train "${A[@]}" ;;
    ompi_mpiop) OPENBLAS_NUM_THREADS=1 TANDEM_REDUCE_SCATTER=mpi "${OMPI[@]}" "$BIN" train "${A[@]}" ;;
    ompi_nice0) OPENBLAS_NUM_THREADS=1 "${OMPI[@]}" "$BIN" train "${A[@]}" --comm-thread-nice 0 ;;
    before) OPENBLAS_NUM_THREADS=1 "${OMPI[@]}" "$BEFORE" train "${A[@]}" ;;
    mpich) [ -x "$BIN_MPICH" ] || return 0
           OPENBLAS_NUM_THREADS=1 mpirun.mpich -np 2 "$BIN_MPICH" train "${A[@]}" ;;
    mpich_mpiop) [ -x "$BIN_MPICH" ] || return 0
           OPENBLAS_NUM_THREADS=1 TANDEM_REDUCE_SCATTER=mpi mpirun.mpich -np 2 "$BIN_MPICH" train "${A[@]}" ;;
  esac >"$dir.log" 2>&1 || { echo "$size $kind: failed, see $dir.log"; return 0; }
  python3 - "$dir/metrics.jsonl" "$size" "$kind" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, statistics as st, sys
rs = [json.loads(l) for l in open(sys.argv[1]) if '"iteration"' in l][4:]
m = lambda f: st.median([f(r) for r in rs])
print("%-6s %-10s step %8.1f  waits %7.1f  comm-thread CPU %7.1f  process CPU %8.1f  load %s" % (
    sys.argv[2], sys.argv[3], m(lambda r: r["step_ms"]), m(lambda r: r.get("grad_sync_ms", 0) + r.get("param_gather_ms", 0)),
    m(lambda r: r.get("comm_thread_cpu_ms", 0)), m(lambda r: r.get("cpu_ms", 0)), sys.argv[4]))
PY
}

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; $(mpirun.openmpi --version 2>&1 | head -1);" \
     "tandem $(git describe --always --dirty 2>/dev/null); iterations 5-$ITERS; ms"
[ -n "$BEFORE" ] && CASES="$CASES before"
for rep in $(seq 1 "$REPEATS"); do
  for size in $SIZES; do
    for kind in $CASES; do one "$size" "$kind"; done
  done
done
