#!/usr/bin/env bash
# cli_recompute.sh - activation recomputation from the command line (Megatron's
# --recompute-granularity / --recompute-method / --recompute-num-layers), 2 ranks, tiny model:
#   - training with each method changes nothing: every loss and grad norm, the final
#     parameters bitwise equal to the run that keeps every activation (tests/model/test_recompute.c
#     checks the gradients of every method, group size and freeze pattern);
#   - the activation log line reports less memory;
#   - bad flag combinations are refused with one sentence, on every rank, as Megatron's config does.
# Env: TANDEM (build/tandem), MPIRUN (mpirun.openmpi or mpirun.mpich).
. "$(dirname "$0")/lib.sh"
tiny_setup 64 0
COMMON=(--model "$W/model" --tokenizer "$W/tok.json" --data "$W/data/train.json" --micro-batch-size 2
        --global-batch-size 8 --lr 1e-3 --lr-warmup-iters 1 --seq-length 512 --seed 7 --train-iters 4
        --use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 400000)
train() { "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train "${COMMON[@]}" "$@"; }
checksum() { sed -nE 's/.*parameters checksum ([0-9a-f]+).*/\1/p' "$1"; }
curve() { sed -E 's/.*"iteration":([0-9]+).*"loss":([^,]+),"grad_norm":([^,]+),.*/\1 \2 \3/' "$1"; }
mib() { sed -nE 's/.*activations: ([0-9.]+) MiB per rank.*/\1/p' "$1" | head -1; }

# --- 1. the same run, less memory (the demo's freezing; both towers trained below) -------------
FREEZE=(--freeze-vision --freeze-projector)
train "${FREEZE[@]}" --run-dir "$W/keep" >"$W/keep.log" 2>&1 || bad "run keeping every activation exited non-zero: $(tail -3 "$W/keep.log")"
for v in "uniform 1" "uniform 3" "block 2"; do
  set -- $v
  tag="$1$2"
  train "${FREEZE[@]}" --run-dir "$W/$tag" --recompute-granularity full --recompute-method "$1" --recompute-num-layers "$2" \
    >"$W/$tag.log" 2>&1 || { bad "--recompute-method $v exited non-zero: $(tail -3 "$W/$tag.log")"; continue; }
  [ -n "$(checksum "$W/$tag.log")" ] && [ "$(curve "$W/$tag/metrics.jsonl")" = "$(curve "$W/keep/metrics.jsonl")" ] \
    && [ "$(checksum "$W/$tag.log")" = "$(checksum "$W/keep.log")" ] \
    && ok "--recompute-method $v: every loss and grad norm, the final parameters bitwise as without" \
    || bad "--recompute-method $v changed the run"
  awk -v a="$(mib "$W/$tag.log")" -v b="$(mib "$W/keep.log")" 'BEGIN { exit !(a > 0 && a < b) }' \
    && ok "--recompute-method $v: activations $(mib "$W/$tag.log") MiB against $(mib "$W/keep.log") MiB" \
    || bad "--recompute-method $v: activation line '$(mib "$W/$tag.log")' vs '$(mib "$W/keep.log")'"
done
grep -q "recomputing every layer in groups of 1" "$W/uniform1.log" && ok "the log says what is recomputed" \
  || bad "no recomputation note in the log"
# both towers trained: the vision blocks recompute too
train --run-dir "$W/vt" >"$W/vt.log" 2>&1 --recompute-granularity full --recompute-method uniform \
  --recompute-num-layers 2 --train-iters 2 && train --run-dir "$W/vk" --train-iters 2 >"$W/vk.log" 2>&1 \
  && [ "$(curve "$W/vt/metrics.jsonl")" = "$(curve "$W/vk/metrics.jsonl")" ] \
  && [ "$(checksum "$W/vt.log")" = "$(checksum "$W/vk.log")" ] \
  && ok "vision tower trained, uniform 2: bitwise as without" || bad "vision tower trained: recomputation changed the run"
# selective: accepted (Megatron scripts pass it), nothing to recompute, said so
train --train-iters 2 --recompute-granularity selective >"$W/sel.log" 2>&1 \
  && grep -q "selective recomputation: the core attention keeps no" "$W/sel.log" \
  && ok "selective: accepted, the log says flash attention keeps no scores" || bad "selective: $(grep -v "^  " "$W/sel.log" | tail -5)"

# --- 2. bad flags ------------------------------------------------------------------------------
refused() { # expected-text flags...
  local want=$1
  shift
  if train "$@" >"$W/bad.log" 2>&1; then bad "$* accepted"; return; fi
  local n
  n=$(grep -c "$want" "$W/bad.log")
  [ "$n" -ge 1 ] && ! grep -q "Segmentation\|core dumped" "$W/bad.log" && ok "refused: $* ($want)" \
    || bad "$*: expected '$want', got: $(tail -3 "$W/bad.log")"
}
refused "requires --recompute-method uniform or block" --recompute-granularity full --recompute-num-layers 1
refused "requires --recompute-num-layers N" --recompute-granularity full --recompute-method block
refused "only with --recompute-granularity full" --recompute-method uniform --recompute-num-layers 1
refused "only with --recompute-granularity full" --recompute-granularity selective --recompute-num-layers 1
refused "expected one of uniform|block" --recompute-granularity full --recompute-method first --recompute-num-layers 1
refused "expected between 1 and the 4 decoder layers" --recompute-granularity full --recompute-method uniform \
  --recompute-num-layers 5
finish
