#!/usr/bin/env bash
# The README's first command: set up, build, generate the built-in data and tokenizer,
# then run the A/B protocol (baseline vs --overlap-grad-reduce) on 2 ranks with the tiny
# Qwen3-VL configuration and print the result table. Takes a few minutes on 2 cores.
#   STEPS=200 WINDOW=21:200 REPEATS=3 scripts/demo.sh     # the practice's full protocol
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
make -j"$(nproc)" build/tandem
T=build/tandem
D=${DEMO_DIR:-demo}
STEPS=${STEPS:-40}
WINDOW=${WINDOW:-11:40}
REPEATS=${REPEATS:-2}

mkdir -p "$D"
[ -f "$D/data/train.json" ] || $T gen-data --out "$D/data" --samples 2000 --heldout 200 --seed 1
[ -f "$D/tokenizer.json" ] || $T train-tokenizer --data "$D/data/train.json" --vocab-size 1024 --out "$D/tokenizer.json"

export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none -np 2)
"${MPIRUN[@]}" $T ab \
  --baseline "" \
  --candidate "--overlap-grad-reduce" \
  --model configs/tiny --tokenizer "$D/tokenizer.json" --data "$D/data/train.json" \
  --freeze-vision --freeze-projector --use-distributed-optimizer --ddp-bucket-size 500000 \
  --micro-batch-size 2 --global-batch-size 8 --seq-length 512 --lr 1e-3 --lr-warmup-iters 5 \
  --lr-decay-style cosine --seed 1234 \
  --steps "$STEPS" --window "$WINDOW" --repeats "$REPEATS" --out "$D/ab"
echo
echo "Report: $D/ab/report.md (plots, per-step CSV, traces and summary.json beside it)"
