#!/usr/bin/env bash
# tandem's own training logs through the same path as Megatron's: two short `tandem train` runs on 2 ranks
# (the tiny model, --overlap-grad-reduce off and on) read back by `tandem ab --baseline-run/--candidate-run`:
# the arguments blocks give exactly the one flag, the DDP config lines confirm it, every iteration line is
# read, and learning rate, consumed samples and loss are identical at the printed precision (overlap does
# not change tandem's arithmetic).
# Env: TANDEM (build/tandem), MPIRUN (mpirun.openmpi or mpirun.mpich).
. "$(dirname "$0")/../train/lib.sh"
tiny_setup 16 0
COMMON=(--model "$W/model" --tokenizer "$W/tok.json" --data "$W/data/train.json" --micro-batch-size 1
        --global-batch-size 4 --lr 1e-3 --lr-warmup-iters 1 --seq-length 256 --seed 7 --freeze-vision
        --use-distributed-optimizer --train-iters 6 --log-interval 1)
for side in off on; do
  extra=(); [ $side = on ] && extra=(--overlap-grad-reduce)
  "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train "${COMMON[@]}" "${extra[@]}" >"$W/$side.log" 2>&1 \
    && ok "train, overlap $side" || bad "train, overlap $side: $(tail -n 3 "$W/$side.log")"
done
"$TANDEM" ab --baseline-run "$W/off.log" --candidate-run "$W/on.log" --window 2:6 --out "$W/ab" >"$W/ab.out" 2>&1 \
  && ok "ab on the two logs" || bad "ab: $(tail -n 3 "$W/ab.out")"
grep -q "only overlap_grad_reduce: False -> True differ" "$W/ab.out" && ok "the one flag" \
  || bad "config: $(grep configuration "$W/ab.out")"
grep -q "DDP config lines show each side's value of the differing flags: yes" "$W/ab.out" && ok "DDP lines confirm" \
  || bad "DDP lines: $(grep DDP "$W/ab.out")"
for row in "learning rate equal" "consumed samples identical" "loss equal"; do
  grep -q "$row.* yes.*[ (]6 iteration" "$W/ab.out" && ok "$row" || bad "$row: $(grep "$row" "$W/ab.out")"
done
"$PY" - "$W/ab/summary.json" "$W/off.log" <<'PYEOF' && ok "summary.json and every iteration line" || bad "summary.json"
import json, re, sys
s = json.load(open(sys.argv[1]))
assert s["config_diff"] == ["overlap_grad_reduce: False -> True"], s["config_diff"]
assert s["ddp_config_confirms_diff"] is True
assert s["window"] == [2, 6] and s["baseline"]["window_lines"] == 5, (s["window"], s["baseline"]["window_lines"])
assert s["common_steps"] == 6
# the log's own lines: 6 iteration lines, their elapsed times in steps_baseline.csv
ms = [float(m) for m in re.findall(r"iteration +\d+/ +6 \|.*?elapsed time per iteration \(ms\): ([0-9.]+)",
                                    open(sys.argv[2]).read())]
rows = [l.split(",") for l in open(sys.argv[1].replace("summary.json", "steps_baseline.csv")).read().splitlines()[1:]]
assert len(ms) == 6 and [float(r[9]) for r in rows] == ms, (ms, rows)
PYEOF
finish
