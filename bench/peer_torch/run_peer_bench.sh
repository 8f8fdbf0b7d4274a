#!/usr/bin/env bash
# run_peer_bench.sh - tandem against PyTorch DDP on the same Qwen3-VL, the same weights and the
# same pre-tokenized batches, on 2 ranks of this machine; plus tandem's dp=1 vs dp=2 scaling
# and the distributed optimizer's all-gather cost. From the repository root:
#
#   bench/peer_torch/run_peer_bench.sh                      # tiny and small, 3 repeats
#   SIZES=tiny STEPS=16 WINDOW=5:16 REPEATS=3 SCALING=1 OUT=/tmp/peer_bench bench/peer_torch/run_peer_bench.sh
#
# One run:
#   1. builds build/tandem and bench/peer_torch/peer_flops.c, and copies the binary into
#      $OUT/bin so that a colleague's rebuild cannot change it half-way;
#   2. generates the data and the tokenizer as scripts/demo.sh does (gen-data seed 1, 2000
#      samples; train-tokenizer --vocab-size 1024);
#   3. per size (tiny = configs/tiny, small = bench/peer_torch/configs/small): exports the
#      micro-batches tandem trains on (tandem export-batches --dp 2), saves tandem's initial
#      weights (a 1-step run at --lr 0: AdamW with lr 0 leaves the weights as initialised),
#      and counts each step's model FLOPs with tdm_model_flops (peer_flops);
#   4. REPEATS times, alternating the order: tandem train on 2 ranks (mpirun) and the PyTorch
#      peer (torch_ddp_train.py, 2 processes, gloo), both 1 BLAS/torch thread per rank;
#      with SCALING=1 also tandem at dp=1 (2 threads, 1 thread) and dp=2 with and without the
#      distributed optimizer (no overlap), --timing-log-level 1;
#   5. summarize.py: samples/s, GFLOP/s, ratios, first-step loss agreement ($OUT/summary.md).
# Exit status non-zero when a step fails or the first-step losses disagree.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-/tmp/peer_bench}
SIZES=${SIZES:-tiny small}
STEPS=${STEPS:-16}
WINDOW=${WINDOW:-5:16}
REPEATS=${REPEATS:-3}
SCALING=${SCALING:-1}
MAIN=${MAIN:-1}      # 0: skip the tandem-vs-PyTorch runs (scaling only)
MBS=${MBS:-2}        # micro-batch size (global batch 8 on 2 ranks: 2 micro-batches per rank per step at 2)
CPU=${CPU:-0}        # 1: one extra profiled tandem run per size (per-thread CPU; metrics.jsonl has the step CPU)
# tandem's data-parallel flags in the runs against the peer: the distributed optimizer (reduce-scatter + all-gather,
# the default) or DIST_OPT=0, the plain optimizer (one all-reduce per bucket and the full update on every rank:
# DDP's own scheme)
DIST_OPT=${DIST_OPT:-1}
# more tandem flags for the runs against the peer, e.g. TANDEM_EXTRA=--no-prune-last-layer (the last decoder layer
# on every token, as the peer computes it)
TANDEM_EXTRA=${TANDEM_EXTRA:-}
if [ "$DIST_OPT" = 1 ]; then TOPT=(--use-distributed-optimizer --overlap-grad-reduce); else TOPT=(--overlap-grad-reduce); fi
# shellcheck disable=SC2206
TOPT+=($TANDEM_EXTRA)
PY=/usr/bin/python3
if [ "$STEPS" -lt 6 ]; then
  echo "run_peer_bench.sh: STEPS=$STEPS: expected at least 6 (the schedule warms up over 5 iterations)" >&2
  exit 2
fi
# Open MPI's single-copy mechanism: tandem's own choice (it turns cross-memory attach off only where refused)
MPIRUN=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none)

mkdir -p "$OUT/bin"
OUT=$(cd "$OUT" && pwd)
make -j2 build/tandem >/dev/null
PKGS="openblas libpng libjpeg libpcre2-8 libxxhash libutf8proc zlib"
LIBS="build/libtrain.a build/libmodel.a build/libdata.a build/libdistributed.a build/libprof.a build/libtokenizer.a build/libkernels.a build/libcore.a"
mpicc.openmpi -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -pthread -Isrc $(pkg-config --cflags $PKGS) \
  -o "$OUT/bin/peer_flops" bench/peer_torch/peer_flops.c $LIBS -pthread $(pkg-config --libs $PKGS) -lm
cp build/tandem "$OUT/bin/tandem"
T=$OUT/bin/tandem
# Both sides call the same OpenBLAS (Debian's torch links it for its matrix products). Where
# OpenBLAS does not know the CPU and falls back to its generic kernels, pin the set the CPU
# runs, for both sides alike (scripts/blas-core.sh; a caller's OPENBLAS_CORETYPE is kept).
BLAS_PIN=$(scripts/blas-core.sh "$T")
[ -n "$BLAS_PIN" ] && export OPENBLAS_CORETYPE=$BLAS_PIN
BLAS_CORE=$(OPENBLAS_VERBOSE=2 "$T" --help 2>&1 >/dev/null | sed -n 's/^Core: //p' | head -1)

D=$OUT/data
[ -f "$D/train.json" ] || $T gen-data --out "$D" --samples 2000 --heldout 200 --seed 1 >/dev/null
[ -f "$OUT/tokenizer.json" ] || $T train-tokenizer --data "$D/train.json" --vocab-size 1024 --out "$OUT/tokenizer.json" >/dev/null

# the demo's training setup: vision tower and projector frozen, the LLM and lm_head trained
FREEZE=(--freeze-vision --freeze-projector)
DATA=(--tokenizer "$OUT/tokenizer.json" --data "$D/train.json" --micro-batch-size "$MBS" --global-batch-size 8
      --seq-length 512 --seed 1234)
OPT=(--lr 1e-3 --lr-warmup-iters 5 --lr-decay-style cosine --weight-decay 0.01 --clip-grad 1.0)
BUCKET=500000

model_dir() { if [ "$1" = tiny ]; then echo "$ROOT/configs/tiny"; else echo "$ROOT/bench/peer_torch/configs/$1"; fi; }

printf '{"sizes": [%s], "steps": %d, "window": [%s], "global_batch_size": 8, "repeats": %d, "dist_opt": %d, "tandem_extra": "%s"}\n' \
  "$(printf '"%s",' $SIZES | sed 's/,$//')" "$STEPS" "${WINDOW/:/, }" "$REPEATS" "$DIST_OPT" "$TANDEM_EXTRA" >"$OUT/params.json"
: >"$OUT/runs.tsv"
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), nproc $(nproc)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "torch: $(dpkg-query -W -f='${Version}' python3-torch 2>/dev/null) (torch.__version__ $($PY -c 'import torch; print(torch.__version__)')), python $($PY -c 'import sys; print(sys.version.split()[0])')"
  echo "Open MPI: $(mpirun.openmpi --version 2>&1 | head -1)"
  echo "OpenBLAS: $(dpkg-query -W -f='${Version}' libopenblas0-pthread 2>/dev/null || echo '?'), kernels: $BLAS_CORE ($(
    if [ -n "$BLAS_PIN" ]; then echo "pinned for both sides: OpenBLAS's own choice here is a generic set"
    elif [ -n "${OPENBLAS_CORETYPE:-}" ]; then echo "OPENBLAS_CORETYPE from the caller"
    else echo "OpenBLAS's own choice"; fi))"
  echo "tandem: $(git rev-parse --short HEAD)"
} >"$OUT/machine.txt"

tandem_run() { # size kind rep threads np extra-flags...
  local size=$1 kind=$2 rep=$3 th=$4 np=$5
  shift 5
  local dir="$OUT/$size/$kind.$rep"
  rm -rf "$dir"
  OPENBLAS_NUM_THREADS=$th "${MPIRUN[@]}" -np "$np" "$T" train --model "$(model_dir "$size")" "${DATA[@]}" \
    "${FREEZE[@]}" "${OPT[@]}" --ddp-bucket-size $BUCKET --train-iters "$STEPS" --run-dir "$dir" "$@" \
    >"$dir.log" 2>&1 || { echo "tandem $kind failed, see $dir.log" >&2; tail -5 "$dir.log" >&2; exit 1; }
  printf '%s\t%s\t%s\t%s\n' "$size" "$kind" "$rep" "$dir/metrics.jsonl" >>"$OUT/runs.tsv"
  echo "  $kind rep $rep: median step $(median_ms "$dir/metrics.jsonl") ms"
}

torch_run() { # size rep
  local size=$1 rep=$2 f="$OUT/$1/torch.$2.jsonl"
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $PY bench/peer_torch/torch_ddp_train.py \
    --config "$(model_dir "$size")/config.json" --weights "$OUT/$size/init/iter_0000001/model.safetensors" \
    --batches "$OUT/$size/batches" --steps "$STEPS" --out "$f" --nproc 2 --threads 1 "${FREEZE[@]}" \
    --lr 1e-3 --lr-warmup-iters 5 --lr-decay-style cosine --weight-decay 0.01 --clip-grad 1.0 \
    --bucket-elems $BUCKET >"$f.log" 2>&1 || { echo "torch peer failed, see $f.log" >&2; tail -5 "$f.log" >&2; exit 1; }
  printf '%s\t%s\t%s\t%s\n' "$size" torch "$rep" "$f" >>"$OUT/runs.tsv"
  echo "  torch rep $rep: median step $(median_ms "$f") ms"
}

median_ms() { $PY -c 'import json,sys,statistics as s; print("%.1f" % s.median(json.loads(l)["step_ms"] for l in open(sys.argv[1])))' "$1"; }

for size in $SIZES; do
  S=$OUT/$size
  mkdir -p "$S"
  M=$(model_dir "$size")
  echo "== $size: exporting batches, initial weights, FLOPs"
  $T export-batches --out "$S/batches" --steps "$STEPS" --dp 2 --model "$M" "${DATA[@]}" >/dev/null
  rm -rf "$S/init"
  OPENBLAS_NUM_THREADS=2 $T train --model "$M" "${DATA[@]}" "${FREEZE[@]}" --lr 0 --train-iters 1 --save "$S/init" \
    >"$S/init.log" 2>&1
  "$OUT/bin/peer_flops" "$M" "$S/batches" "${FREEZE[@]}" >"$S/flops.jsonl"
  for rep in $(seq 1 "$REPEATS"); do
    echo "== $size repeat $rep ($(cut -d' ' -f1 /proc/loadavg) load)"
    if [ "$MAIN" != 1 ]; then
      :
    elif [ $((rep % 2)) -eq 1 ]; then
      tandem_run "$size" tandem "$rep" 1 2 "${TOPT[@]}"
      torch_run "$size" "$rep"
    else
      torch_run "$size" "$rep"
      tandem_run "$size" tandem "$rep" 1 2 "${TOPT[@]}"
    fi
    if [ "$SCALING" = 1 ]; then
      tandem_run "$size" dp1_t2 "$rep" 2 1 --timing-log-level 1
      tandem_run "$size" dp2_dist "$rep" 1 2 --use-distributed-optimizer --timing-log-level 1
      tandem_run "$size" dp1_t1 "$rep" 1 1 --timing-log-level 1
      tandem_run "$size" dp2_plain "$rep" 1 2 --timing-log-level 1
    fi
  done
  if [ "$CPU" = 1 ] && [ "$MAIN" = 1 ]; then
    # CPU time of each thread over the measured window (the profiler's per-thread statistics,
    # level 0: phases only), to compare with the peer's per-step CPU time
    printf '{"profile": {"enable": true, "ranks": [-1], "start_step": %d, "end_step": %d, "level": 0, "save_path": "%s"}}\n' \
      "${WINDOW%%:*}" "${WINDOW##*:}" "$S/tandem_prof.1/profiling" >"$S/tools.json"
    tandem_run "$size" tandem_prof 1 1 2 "${TOPT[@]}" --profile-config "$S/tools.json"
  fi
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
echo
cat "$OUT/machine.txt"
echo
$PY bench/peer_torch/summarize.py "$OUT"
