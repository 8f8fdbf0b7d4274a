#!/usr/bin/env bash
# cli_prune.sh - the last decoder layer on the loss's rows only (the default) against every row
# (--no-prune-last-layer), 2 ranks, tiny model, distributed optimizer with overlap:
#   - the same training run: every iteration's loss within 1e-6 and grad norm within 1e-5 relative
#     (float rounding: the weight-gradient products sum over fewer rows; tests/model/test_parity_dump.c
#     checks one step's gradients, and peer_parity.sh the pruned path against PyTorch in float64),
#     the same tokens counted and the same model FLOPs credited; with the towers frozen (the demo) and trained;
#   - the arguments block says which (prune_last_layer True / False).
# Env: TANDEM (build/tandem), MPIRUN (mpirun.openmpi or mpirun.mpich).
. "$(dirname "$0")/lib.sh"
tiny_setup 64 0
COMMON=(--model "$W/model" --tokenizer "$W/tok.json" --data "$W/data/train.json" --micro-batch-size 2
        --global-batch-size 8 --lr 1e-3 --lr-warmup-iters 1 --seq-length 512 --seed 7 --train-iters 5
        --use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 400000)
train() { "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train "${COMMON[@]}" "$@"; }

compare() { # name dir-pruned dir-full
  "$PY" - "$2/metrics.jsonl" "$3/metrics.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
b = [json.loads(l) for l in open(sys.argv[2]) if '"loss"' in l]
assert len(a) == len(b) == 5, (len(a), len(b))
for x, y in zip(a, b):
    assert x["iteration"] == y["iteration"]
    for k, tol in (("loss", 1e-6), ("grad_norm", 1e-5)):
        d = abs(x[k] - y[k]) / max(abs(y[k]), 1e-30)
        assert d <= tol, "iteration %d: %s %.9g vs %.9g (relative %.2g)" % (x["iteration"], k, x[k], y[k], d)
    for k in ("tokens", "model_flops"):
        if k in x: assert x[k] == y[k], (k, x[k], y[k])
print("max relative loss difference %.2g" % max(abs(x["loss"] - y["loss"]) / abs(y["loss"]) for x, y in zip(a, b)))
PY
}

for setting in frozen trained; do
  F=(); [ $setting = frozen ] && F=(--freeze-vision --freeze-projector)
  train "${F[@]}" --run-dir "$W/p_$setting" >"$W/p_$setting.log" 2>&1 \
    || bad "$setting towers, pruned: exited non-zero: $(tail -3 "$W/p_$setting.log")"
  train "${F[@]}" --no-prune-last-layer --run-dir "$W/f_$setting" >"$W/f_$setting.log" 2>&1 \
    || bad "$setting towers, every row: exited non-zero: $(tail -3 "$W/f_$setting.log")"
  if r=$(compare $setting "$W/p_$setting" "$W/f_$setting" 2>&1); then
    ok "$setting towers: the loss's rows only and every row give the same run ($r)"
  else
    bad "$setting towers: the runs differ: $r"
  fi
done
grep -qE "prune_last_layer \.+ True" "$W/p_frozen.log" && grep -qE "prune_last_layer \.+ False" "$W/f_frozen.log" \
  && ok "the arguments block says prune_last_layer True / False" \
  || bad "arguments block: $(grep prune_last "$W/p_frozen.log" "$W/f_frozen.log")"
finish
