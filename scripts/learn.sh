#!/usr/bin/env bash
# learn.sh - does the tiny model learn? The built-in data (64 x 64 pictures), its own
# 1024-id tokenizer, `tandem train` on 2 ranks from scratch, `tandem evaluate` on the
# held-out split at every checkpoint, then OUT/report.md (loss, unigram baseline, accuracy
# per kind and checkpoint) and OUT/learning.svg (the curve). About 7 minutes on 2 cores.
#
#   scripts/learn.sh                         # after `make`; writes ./tandem-learn
#   OUT=/tmp/l ITERS=400 scripts/learn.sh    # a shorter run
#
# Environment: OUT (tandem-learn), ITERS (1200), SAVE_INTERVAL (100), NP (2), SEED (1234, the
# training seed; the data always uses gen-data's default), TANDEM (build/tandem), MPIRUN.
# The recipe and why each setting is what it is: docs/learning.md.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-tandem-learn}
ITERS=${ITERS:-1200}
SAVE_INTERVAL=${SAVE_INTERVAL:-100}
NP=${NP:-2}
SEED=${SEED:-1234}
TANDEM=${TANDEM:-build/tandem}
MODEL=configs/tiny
if [ -z "${MPIRUN:-}" ]; then
    MPIRUN="mpirun.openmpi --oversubscribe --bind-to none"
    [ "$(id -u)" = 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
fi
[ -x "$TANDEM" ] || { echo "learn.sh: $TANDEM is missing (run make first)" >&2; exit 1; }

rm -rf "$OUT"
mkdir -p "$OUT"
"$TANDEM" gen-data --out "$OUT/data" --min-size 64 --max-size 64
"$TANDEM" train-tokenizer --data "$OUT/data/train.json" --vocab-size 1024 --out "$OUT/tokenizer.json"

start=$(date +%s)
# shellcheck disable=SC2086 # MPIRUN is a command line
$MPIRUN -np "$NP" "$TANDEM" train --model "$MODEL" --tokenizer "$OUT/tokenizer.json" \
    --data "$OUT/data/train.json" --seed "$SEED" \
    --micro-batch-size 4 --global-batch-size 16 --seq-length 512 --train-iters "$ITERS" \
    --lr 2e-3 --min-lr 1e-5 --lr-warmup-iters 20 --lr-decay-style cosine \
    --weight-decay 0 --adam-beta2 0.95 --vision-lr-mult 0.05 \
    --save "$OUT/ckpt" --save-interval "$SAVE_INTERVAL" --run-dir "$OUT/run" --log-interval 10 \
    | tee "$OUT/train.log"
end=$(date +%s)
echo "$((end - start))" > "$OUT/train_seconds.txt"

for dir in "$OUT"/ckpt/iter_*; do
    "$TANDEM" evaluate --model "$MODEL" --tokenizer "$OUT/tokenizer.json" --load "$dir" \
        --data "$OUT/data/test.json" > "$OUT/eval_$(basename "$dir").txt"
done
/usr/bin/python3 scripts/learning_report.py "$OUT" "$TANDEM"
cat "$OUT/report.md"
