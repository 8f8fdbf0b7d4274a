#!/usr/bin/env bash
# cli_log_stats.sh - Megatron's optional iteration-line fields and --exit-duration-in-mins, 2 ranks, tiny model:
#   - --log-params-norm: the logged "params norm" of the last step equals the L2 norm (float64, numpy) of the
#     trained tensors of the checkpoint saved after it, relative 1e-9 (plain and distributed optimizer);
#   - --log-num-zeros-in-grad: at iteration 1 (the whole data set as one global batch) "num zeros" equals the
#     count of exact zeros in the gradient `tandem dump-grads` writes for the same samples as one packed batch
#     (another code path: one rank, one micro-batch, no buckets);
#   - --log-throughput: "throughput per GPU (TFLOP/s/GPU)" = model FLOPs / (seconds x 1e12 x ranks) of
#     metrics.jsonl, and the step's model FLOPs do not depend on how the global batch is split over ranks;
#   - --check-weight-hash-across-dp-replicas-interval 1 reports matching weights after every iteration (also
#     with --overlap-param-gather, whose all-gathers it waits for); the mismatch path is mpitest_trainer's;
#   - none of them changes the training: loss, grad norm and the final checksum bitwise those of a plain run;
#   - --timing-log-option max and all print Megatron's other two layouts of the timers block;
#   - Megatron's "[Rank 0] (after 1 iterations) memory (MB)" line, once, with the process's resident memory;
#   - --exit-duration-in-mins: the run stops after its first step past the limit, saves, exits 0, and resuming
#     that checkpoint ends bitwise where an uninterrupted run ends.
# Env: TANDEM (build/tandem), MPIRUN (mpirun.openmpi or mpirun.mpich).
. "$(dirname "$0")/lib.sh"
tiny_setup 8 0
COMMON=(--model "$W/model" --tokenizer "$W/tok.json" --data "$W/data/train.json" --micro-batch-size 2
        --global-batch-size 8 --lr 1e-3 --lr-warmup-iters 1 --seq-length 512 --seed 7 --freeze-vision)
STATS=(--log-params-norm --log-num-zeros-in-grad --log-throughput --check-weight-hash-across-dp-replicas-interval 1)
train() { "$MPIRUN" "${MPIFLAGS[@]}" -np "$NP" "$TANDEM" train "${COMMON[@]}" "$@"; }
field() { grep -o "iteration *$2/.*" "$1" | grep -o "$3: [0-9.eE+-]*" | head -1 | sed 's/.*: //'; }
curve() { sed -E 's/.*"loss":([^,]+),"grad_norm":([^,]+),.*/\1 \2/' "$1"; }
checksum() { grep -o "parameters checksum [0-9a-f]*" "$1"; }

NP=2
for opt in plain dist; do
  extra=(); [ $opt = dist ] && extra=(--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather)
  train --train-iters 3 "${extra[@]}" "${STATS[@]}" --save "$W/ck_$opt" --run-dir "$W/m_$opt" >"$W/$opt.log" 2>&1 \
    || bad "$opt: run with the three flags exited non-zero: $(tail -3 "$W/$opt.log")"
  train --train-iters 3 "${extra[@]}" --run-dir "$W/p_$opt" >"$W/p_$opt.log" 2>&1 \
    || bad "$opt: plain run exited non-zero: $(tail -3 "$W/p_$opt.log")"
  [ -n "$(curve "$W/p_$opt/metrics.jsonl")" ] && [ "$(curve "$W/m_$opt/metrics.jsonl")" = "$(curve "$W/p_$opt/metrics.jsonl")" ] \
    && [ "$(checksum "$W/$opt.log")" = "$(checksum "$W/p_$opt.log")" ] \
    && ok "$opt: the four flags change nothing (loss, grad norm, final checksum bitwise)" \
    || bad "$opt: the flags changed the training"
  [ "$(grep -c ">>> Weight hashes match after [123] iterations" "$W/$opt.log")" = 3 ] \
    && ok "$opt: weight hashes checked and matching after iterations 1, 2, 3" \
    || bad "$opt: weight-hash lines: $(grep -c "Weight hashes" "$W/$opt.log")"
  pn=$(field "$W/$opt.log" 3 "params norm")
  if "$PY" - "$W/ck_$opt/iter_0000003/model.safetensors" "$pn" "$W/m_$opt/metrics.jsonl" <<'PYEOF'
import json, struct, sys
import numpy as np
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
hdr = json.loads(raw[8:8 + n])
ss = 0.0
for name, info in hdr.items():
    # --freeze-vision: the tower is frozen, its merger (the projector) trains
    if name == "__metadata__" or (name.startswith("model.visual.") and ".merger" not in name
                                  and "deepstack_merger" not in name):
        continue
    b, e = info["data_offsets"]
    a = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=np.float32).astype(np.float64)
    ss += float(np.dot(a, a))
ref = ss ** 0.5
rows = [json.loads(l) for l in open(sys.argv[3])]
exact = rows[-1]["params_norm"]
assert abs(exact - ref) <= 1e-9 * ref, (exact, ref)
assert abs(float(sys.argv[2]) - ref) <= 0.0005 + 1e-6 * ref, (sys.argv[2], ref)   # printed with 3 decimals
PYEOF
  then ok "$opt: params norm $pn = the L2 norm of the saved trained tensors (rel. 1e-9)"
  else bad "$opt: params norm $pn differs from the checkpoint's"; fi
  if "$PY" - "$W/m_$opt/metrics.jsonl" "$W/$opt.log" <<'PYEOF'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
lines = [l for l in open(sys.argv[2]) if re.search(r"iteration +\d+/", l)]
assert len(lines) == len(rows) == 3
for r, l in zip(rows, lines):
    tp = float(re.search(r"throughput per GPU \(TFLOP/s/GPU\): ([0-9.]+)", l).group(1))
    ms = float(re.search(r"elapsed time per iteration \(ms\): ([0-9.]+)", l).group(1))
    ref = r["model_flops"] / (ms / 1e3 * 1e12 * 2)
    assert r["model_flops"] > 1e6 and abs(tp - ref) <= 0.00005 + 0.01 * ref, (tp, ref)
PYEOF
  then ok "$opt: throughput = model FLOPs / (s x 1e12 x 2 ranks) at every line"
  else bad "$opt: throughput field"; fi
done

# --- --timing-log-option: Megatron's three layouts of the timers block -------------------------------------------
for o in max all; do
  train --train-iters 2 --use-distributed-optimizer --timing-log-level 1 --timing-log-option $o >"$W/t_$o.log" 2>&1 \
    || bad "--timing-log-option $o: $(tail -3 "$W/t_$o.log")"
done
[ "$(grep -c "^max time across ranks (ms):" "$W/t_max.log")" = 2 ] \
  && grep -qE "^    forward-backward \.+: [0-9]+\.[0-9]{2}$" "$W/t_max.log" \
  && ok "--timing-log-option max: 'max time across ranks (ms):' and one value per timer" \
  || bad "--timing-log-option max: $(grep -A2 "time across" "$W/t_max.log" | head -3)"
if "$PY" - "$W/t_all.log" <<'PYEOF'
import re, sys
text = open(sys.argv[1]).read()
blocks = text.split("times across ranks (ms):\n")[1:]
assert len(blocks) == 2, len(blocks)                     # one per logged iteration
for b in blocks:
    lines = b.split("\n")
    i = lines.index("  forward-backward:")
    r0 = re.fullmatch(r"     rank  0: ([0-9.]+)", lines[i + 1]); r1 = re.fullmatch(r"     rank  1: ([0-9.]+)", lines[i + 2])
    assert r0 and r1 and float(r0.group(1)) > 0 and float(r1.group(1)) > 0, lines[i:i + 3]
    assert "  optimizer:" in lines and "  params-all-gather:" in lines, lines
PYEOF
then ok "--timing-log-option all: 'times across ranks (ms):', each timer with one line per rank"
else bad "--timing-log-option all: $(grep -A4 "times across" "$W/t_all.log" | head -5)"; fi

# --- Megatron's memory line after the first iteration line: host memory, /proc/self/status of rank 0 ----------
if "$PY" - "$W/dist.log" <<'PYEOF'
import re, sys
lines = [l for l in open(sys.argv[1]) if "memory (MB)" in l]
assert len(lines) == 1, lines   # once, after the first iteration line
m = re.search(r"\[Rank 0\] \(after 1 iterations\) memory \(MB\) \| resident: ([0-9.]+) \| max resident: ([0-9.]+)", lines[0])
now, peak = float(m.group(1)), float(m.group(2))
assert 20 < now <= peak < 4096, (now, peak)
PYEOF
then ok "the memory line follows the first iteration line once: $(grep -o "resident: .*" "$W/dist.log")"
else bad "memory line: $(grep "memory (MB)" "$W/dist.log")"; fi

# --- num zeros against dump-grads: iteration 1 trains on all 8 samples, at the initial weights -----------------
"$TANDEM" dump-grads --model "$W/model" --tokenizer "$W/tok.json" --data "$W/data/train.json" --seed 7 \
  --freeze-vision --out "$W/g.safetensors" >"$W/dg.log" 2>&1 || bad "dump-grads: $(tail -2 "$W/dg.log")"
for opt in plain dist; do
  nz=$(field "$W/$opt.log" 1 "num zeros")
  if "$PY" - "$W/g.safetensors" "$nz" <<'PYEOF'
import json, struct, sys
import numpy as np
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
hdr = json.loads(raw[8:8 + n])
zeros = sum(int(np.count_nonzero(np.frombuffer(raw[8 + n + i["data_offsets"][0]:8 + n + i["data_offsets"][1]],
                                               dtype=np.float32) == 0))
            for k, i in hdr.items() if k != "__metadata__")
assert zeros > 0 and float(sys.argv[2]) == zeros, (sys.argv[2], zeros)
PYEOF
  then ok "$opt: num zeros $nz at iteration 1 = exact zeros of dump-grads' gradient of the same 8 samples"
  else bad "$opt: num zeros $nz differs from dump-grads'"; fi
done

# --- the model FLOPs of a step do not depend on the split over ranks -----------------------------------------
NP=1
train --train-iters 3 --log-throughput --run-dir "$W/m_one" >"$W/one.log" 2>&1 || bad "1 rank: $(tail -3 "$W/one.log")"
flops() { grep -o '"model_flops":[0-9.e+]*' "$1"; }
[ -n "$(flops "$W/m_one/metrics.jsonl")" ] && [ "$(flops "$W/m_one/metrics.jsonl")" = "$(flops "$W/m_plain/metrics.jsonl")" ] \
  && ok "model FLOPs per step: 1 rank x 4 micro-batches = 2 ranks x 2" || bad "model FLOPs differ between 1 and 2 ranks"
NP=2

# --- --exit-duration-in-mins ----------------------------------------------------------------------------------
t0=$(date +%s.%N)
train --train-iters 4 --use-distributed-optimizer --exit-duration-in-mins 0.00001 --save "$W/ck_x" >"$W/x.log" 2>&1 \
  && grep -qE "exiting \(--exit-duration-in-mins\) after [0-9.]+ minutes at iteration 1 after saving a checkpoint" \
       "$W/x.log" \
  && [ "$(cat "$W/ck_x/latest_checkpointed_iteration.txt" 2>/dev/null)" = 1 ] \
  && ok "--exit-duration-in-mins: stopped after iteration 1, saved it, exit 0" \
  || bad "--exit-duration-in-mins: $(grep -E "exiting|FAIL|rror" "$W/x.log" | head -3)"
# the minutes count from the processes' start (Megatron's _TRAIN_START_TIME), read from /proc: past the limit,
# and within the wall time of the whole launch
m=$(grep -oE "after [0-9.]+ minutes" "$W/x.log" | grep -oE "[0-9.]+")
wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
if [ -n "$m" ] && awk -v m="$m" -v w="$wall" 'BEGIN { exit !(m > 0.00001 && m * 60 <= w) }'; then
  ok "--exit-duration-in-mins counted $m min from the processes' start (the launch took $wall s)"
else bad "--exit-duration-in-mins: '$m' minutes against a launch of $wall s"; fi
train --train-iters 4 --use-distributed-optimizer --load "$W/ck_x" --save "$W/ck_x" >"$W/xr.log" 2>&1 \
  || bad "resume after --exit-duration-in-mins: $(tail -3 "$W/xr.log")"
train --train-iters 4 --use-distributed-optimizer >"$W/xu.log" 2>&1 || bad "uninterrupted: $(tail -3 "$W/xu.log")"
[ -n "$(checksum "$W/xu.log")" ] && [ "$(checksum "$W/xr.log")" = "$(checksum "$W/xu.log")" ] \
  && ok "resumed after the duration exit: final checksum bitwise the uninterrupted run's" \
  || bad "resumed run: $(checksum "$W/xr.log") vs $(checksum "$W/xu.log")"
finish
