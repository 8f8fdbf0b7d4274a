#!/usr/bin/env bash
# cli_validation.sh - validation loss during training (--valid-data-path, --eval-interval,
# --eval-iters), 2 ranks, tiny model, generated data:
#   - Megatron's validation block at every --eval-interval and at the end, valid.jsonl;
#   - the value against an independent path: with --lr 0 the weights never change, so the
#     validation loss over the first two global batches equals the token-weighted training
#     loss of a run that trains on the validation set (forward+backward, not forward only);
#   - validating changes nothing in training (bitwise: every loss, the final parameters);
#   - a resumed run validates on the same batches as an uninterrupted one (bitwise);
#   - bad input: a missing validation file, one smaller than the global batch.
# Env: TANDEM (build/tandem), MPIRUN (mpirun.openmpi or mpirun.mpich).
. "$(dirname "$0")/lib.sh"
tiny_setup 96 24
V=$W/data/test.json
COMMON=(--model "$W/model" --tokenizer "$W/tok.json" --micro-batch-size 2 --global-batch-size 8 --lr 1e-3
        --lr-warmup-iters 1 --seq-length 512 --seed 7 --use-distributed-optimizer --overlap-grad-reduce
        --overlap-param-gather --ddp-bucket-size 400000)
train() { "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train "${COMMON[@]}" "$@"; }
checksum() { sed -nE 's/.*parameters checksum ([0-9a-f]+).*/\1/p' "$1"; }
curve() { sed -E 's/.*"iteration":([0-9]+).*"loss":([^,]+),"grad_norm":([^,]+),.*/\1 \2 \3/' "$1"; }
vals() { sed -E 's/.*"iteration":([0-9]+).*"loss":([^,]+),.*"tokens":([0-9]+).*/\1 \2 \3/' "$1"; }

# --- 1. blocks, valid.jsonl, and no effect on training -------------------------------------
VAL=(--valid-data-path "$V" --eval-interval 3 --eval-iters 2)
train --data "$W/data/train.json" --train-iters 7 "${VAL[@]}" --run-dir "$W/a" >"$W/a.log" 2>&1 || bad "run with validation exited non-zero: $(tail -3 "$W/a.log")"
train --data "$W/data/train.json" --train-iters 7 --run-dir "$W/b" >"$W/b.log" 2>&1 || bad "run without validation exited non-zero"
[ "$(vals "$W/a/valid.jsonl" | cut -d' ' -f1 | tr '\n' ' ')" = "3 6 7 " ] && ok "evaluated at iterations 3, 6 and at the end (7)" \
  || bad "valid.jsonl iterations: $(cat "$W/a/valid.jsonl" 2>&1)"
if $PY - "$W/a.log" <<'PYEOF'; then ok "Megatron's validation block (rules one longer than the line)"; else bad "validation block format"; fi
import re, sys
lines = open(sys.argv[1]).read().split("\n")
found = 0
for i, l in enumerate(lines):
    m = re.fullmatch(r" validation loss at (iteration 3|iteration 6|iteration 7 on validation set) \| "
                     r"lm loss value: \d\.\d{6}E[+-]\d\d \| lm loss PPL: \d\.\d{6}E[+-]\d\d \| ", l)
    if m:
        assert lines[i - 1] == lines[i + 1] == "-" * (len(l) + 1), (lines[i - 1], l)
        found += 1
assert found == 3, found
PYEOF
[ "$(curve "$W/a/metrics.jsonl")" = "$(curve "$W/b/metrics.jsonl")" ] && [ -n "$(checksum "$W/a.log")" ] \
  && [ "$(checksum "$W/a.log")" = "$(checksum "$W/b.log")" ] \
  && ok "validating changes nothing in training: every loss and grad norm, the final parameters bitwise" \
  || bad "validation changed the training run"

# --- 2. the value: lr 0 keeps the weights; forward-only validation == the training loss ------
train --data "$W/data/train.json" --train-iters 2 --lr 0 --valid-data-path "$V" --eval-interval 2 --eval-iters 2 \
  --run-dir "$W/v0" >"$W/v0.log" 2>&1 || bad "lr 0 run with validation exited non-zero"
train --data "$V" --train-iters 2 --lr 0 --run-dir "$W/t0" >"$W/t0.log" 2>&1 || bad "lr 0 run on the validation set exited non-zero"
if $PY - "$W/v0/valid.jsonl" "$W/t0/metrics.jsonl" <<'PYEOF'; then ok "validation loss == training loss on the same batches (lr 0), rel. 1e-12"; else bad "validation loss differs from the reference"; fi
import json, sys
v = [json.loads(l) for l in open(sys.argv[1])]
t = [json.loads(l) for l in open(sys.argv[2])]
assert len(v) == 1 and v[0]["iteration"] == 2 and len(t) == 2, (v, t)
tokens = sum(r["tokens"] for r in t)
ref = sum(r["loss"] * r["tokens"] for r in t) / tokens
assert v[0]["tokens"] == tokens, (v[0]["tokens"], tokens)
assert abs(v[0]["loss"] - ref) <= 1e-12 * abs(ref), (v[0]["loss"], ref)
print(f"validation {v[0]['loss']!r} reference {ref!r} over {tokens} tokens")
PYEOF

# --- 3. resume: the validation loader starts where evaluations before would have left it -----
train --data "$W/data/train.json" --train-iters 7 "${VAL[@]}" --run-dir "$W/r" --save "$W/ck" --exit-interval 4 \
  >"$W/r1.log" 2>&1 || bad "first half exited non-zero"
train --data "$W/data/train.json" --train-iters 7 "${VAL[@]}" --run-dir "$W/r" --load "$W/ck" >"$W/r2.log" 2>&1 \
  || bad "second half exited non-zero"
[ "$(vals "$W/r/valid.jsonl")" = "$(vals "$W/a/valid.jsonl")" ] && ok "resume: validation at 3, 6, 7 bitwise as uninterrupted" \
  || { bad "resumed validation differs"; diff <(vals "$W/a/valid.jsonl") <(vals "$W/r/valid.jsonl"); }

# an --exit-interval that falls on the last iteration is the end of training, not an early stop:
# the final validation runs and the run does not say "stopped early"
train --data "$W/data/train.json" --train-iters 3 --exit-interval 3 --valid-data-path "$V" --eval-interval 2 \
  --eval-iters 1 >"$W/x.log" 2>&1 || bad "exit at the last iteration exited non-zero"
grep -q "validation loss at iteration 3 on validation set" "$W/x.log" && grep -q "training done: iteration 3" "$W/x.log" \
  && ! grep -q "stopped early" "$W/x.log" && ok "exit-interval at the last iteration: final validation, not 'stopped early'" \
  || bad "exit at the last iteration: $(grep -E "training done|validation loss" "$W/x.log")"

# --- 4. bad input: one sentence, non-zero exit ------------------------------------------------
train --data "$W/data/train.json" --train-iters 2 --valid-data-path "$W/nope.json" >"$W/e1.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "nope.json" "$W/e1.log" && ok "missing validation file: named, exit $rc" || bad "missing validation file: rc $rc $(tail -2 "$W/e1.log")"
$PY - "$V" "$W/small.json" <<'PYEOF'
import json, sys
json.dump(json.load(open(sys.argv[1]))[:3], open(sys.argv[2], "w"))
PYEOF
cp -r "$W/data/images" "$W/" 2>/dev/null
train --data "$W/data/train.json" --train-iters 2 --valid-data-path "$W/small.json" >"$W/e2.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q -- "--valid-data-path: 3 usable samples, fewer than --global-batch-size 8" "$W/e2.log" \
  && ok "validation set smaller than the global batch: one sentence, exit $rc" || bad "small validation set: rc $rc $(grep -m2 -i error "$W/e2.log")"

finish
