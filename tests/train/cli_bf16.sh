#!/bin/bash
# cli_bf16.sh - --bf16 (bfloat16 parameters with fp32 main parameters, Megatron's --bf16 storage) end to end
# on 2 ranks: the weights every step computes with are bfloat16 values; the overlap flags, the progress modes
# and the optimizer kind change nothing in the numbers; a resume is bitwise; the checkpoint holds BF16
# weights and the fp32 main parameters; a checkpoint of the other precision is refused with the optimizer
# state and accepted without it; --bf16 trains differently from float32 (it is not a no-op).
# Env: TANDEM (build/tandem), MPIRUN (mpirun.openmpi or mpirun.mpich).
. "$(dirname "$0")/lib.sh"
tiny_setup 96 8

COMMON=(--model "$W/model" --tokenizer "$W/tok.json" --data "$W/data/train.json" --micro-batch-size 2
        --global-batch-size 8 --lr 1e-3 --lr-warmup-iters 1 --lr-decay-style cosine --seq-length 512 --seed 7
        --ddp-bucket-size 400000 --log-params-norm)
train() { # run-dir, args...
  local d=$1; shift
  "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train "${COMMON[@]}" --run-dir "$W/$d" "$@" > "$W/$d.log" 2>&1
}
curve() { sed -E 's/.*"iteration":([0-9]+).*"loss":([^,]+),"grad_norm":([^,]+),.*/\1 \2 \3/' "$W/$1/metrics.jsonl"; }
checksum() { sed -nE 's/.*parameters checksum ([0-9a-f]+).*/\1/p' "$W/$1.log"; }
same() { # name a b: the two runs' curves and final parameters are bitwise equal
  if [ "$(curve "$2")" = "$(curve "$3")" ] && [ "$(wc -l < "$W/$2/metrics.jsonl")" -eq 4 ] &&
     [ -n "$(checksum "$2")" ] && [ "$(checksum "$2")" = "$(checksum "$3")" ]; then
    ok "$1"
  else
    bad "$1"; diff <(curve "$2") <(curve "$3") | head -4; tail -3 "$W/$3.log"
  fi
}

DO=(--use-distributed-optimizer --train-iters 4)
train base --bf16 "${DO[@]}" --save "$W/ck" --save-interval 2 || { bad "--bf16 run (see below)"; tail "$W/base.log"; }
bf_line="parameters: bfloat16 values, all-gathered as 16 bits; gradients accumulated and reduced in fp32"
grep -q "$bf_line" "$W/base.log" \
  && ok "start-up log names bfloat16 parameters" || bad "no bfloat16 line in the start-up log"
grep -q "optimizer state (Adam m, v and fp32 main parameters) per rank" "$W/base.log" \
  && ok "memory line counts the main parameters" || bad "memory line"
# the trainer's per-rank optimizer state is what `tandem inspect --bf16` plans for the same buckets: Adam m + v
# and the fp32 main parameters, distributed optimizer column (MiB, printed with two decimals on both sides)
"$TANDEM" inspect --model "$W/model" --dp 2 --ddp-bucket-size 400000 --bf16 > "$W/inspect.txt" 2>&1 \
  || bad "tandem inspect --bf16: $(tail -2 "$W/inspect.txt")"
mib_of() { awk -F'  +' -v l="$1" 'index($2, l) == 1 { v = $4; sub(/ MiB$/, "", v); print v; exit }' "$W/inspect.txt"; }
planned=$(awk -v a="$(mib_of "Adam m + v")" -v b="$(mib_of "fp32 main parameters")" 'BEGIN { print a + b }')
logged=$(sed -nE 's/.*optimizer state \(Adam m, v and fp32 main parameters\) per rank: ([0-9.]+) MiB.*/\1/p' \
  "$W/base.log" | head -1)
awk -v a="$planned" -v b="$logged" 'BEGIN { d = a - b; exit !(b > 0 && d <= 0.015 && d >= -0.015) }' \
  && ok "tandem inspect --bf16 plans the optimizer state the trainer allocates ($logged MiB per rank)" \
  || bad "tandem inspect --bf16 plans $planned MiB of optimizer state, the trainer logged '$logged'"
train og --bf16 "${DO[@]}" --overlap-grad-reduce || bad "--overlap-grad-reduce run"
same "--bf16: --overlap-grad-reduce gives bitwise the same losses, grad norms and parameters" base og
train both --bf16 "${DO[@]}" --overlap-grad-reduce --overlap-param-gather || bad "both overlap flags"
same "--bf16: both overlap flags give bitwise the same numbers" base both
train inl --bf16 "${DO[@]}" --overlap-grad-reduce --overlap-param-gather --comm-progress inline || bad "inline progress"
same "--bf16: both overlap flags with inline progress give the same numbers" base inl
# the plain optimizer sums the gradient norm's squares in another order (the whole buffer, not two shards),
# so its norm may differ in the last digits; the clipped update, the losses and the weights may not
losses() { sed -E 's/.*"iteration":([0-9]+).*"loss":([^,]+),.*/\1 \2/' "$W/$1/metrics.jsonl"; }
train plain --bf16 --train-iters 4 || bad "--bf16 with the plain optimizer"
[ "$(losses base)" = "$(losses plain)" ] && [ "$(checksum base)" = "$(checksum plain)" ] \
  && ok "--bf16: the plain optimizer (all-reduce, whole main copy on every rank) gives the same losses and weights" \
  || { bad "--bf16: the plain optimizer differs"; diff <(losses base) <(losses plain); }
train f32 "${DO[@]}" || bad "float32 run"
[ "$(curve f32)" != "$(curve base)" ] && ok "--bf16 trains differently from float32" || bad "--bf16 changed nothing"

# the checkpoint: BF16 weights of bfloat16 values, fp32 main parameters beside the Adam state
"$PY" - "$W/ck/iter_0000004" <<'EOF' && ok "checkpoint: BF16 weights, fp32_param per exp_avg, weights == bf16(main)" \
  || bad "checkpoint contents"
import json, struct, sys
import numpy as np
d = sys.argv[1]
def load(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n]); h.pop('__metadata__', None)
    out = {}
    for k, v in h.items():
        s, e = v['data_offsets']
        raw = b[8 + n + s:8 + n + e]
        if v['dtype'] == 'BF16':
            a = (np.frombuffer(raw, '<u2').astype(np.uint32) << 16).view(np.float32)
        else:
            assert v['dtype'] == 'F32', v['dtype']
            a = np.frombuffer(raw, '<f4')
        out[k] = (v['dtype'], a)
    return out
st = json.load(open(d + '/trainer_state.json'))
assert st['params_dtype'] == 'bfloat16', st.get('params_dtype')
w, o = load(d + '/model.safetensors'), load(d + '/optimizer.safetensors')
assert all(dt == 'BF16' for dt, _ in w.values()), 'weights not BF16'
avg = [k[len('exp_avg.'):] for k in o if k.startswith('exp_avg.')]
assert avg and all('fp32_param.' + k in o for k in avg), 'a trained tensor without fp32_param'
# round to nearest even, done here in integers: the weights must be the main parameters' bfloat16
for k in avg:
    u = o['fp32_param.' + k][1].view(np.uint32).astype(np.uint64)
    r = (((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    assert np.array_equal(r, w[k][1]), k
    assert not np.array_equal(o['fp32_param.' + k][1], w[k][1]), k + ': main copy no finer than bf16'
EOF

# resume is bitwise: 2 steps + --load + 2 steps == 4 steps, also at another optimizer kind
train res --bf16 "${DO[@]}" --load "$W/ck/iter_0000002" || bad "resume (see below)"
if [ "$(curve base | tail -2)" = "$(curve res)" ] && [ "$(checksum base)" = "$(checksum res)" ]; then
  ok "--bf16 resume: steps 3-4 and the final parameters are bitwise those of the uninterrupted run"
else
  bad "--bf16 resume differs"; diff <(curve base | tail -2) <(curve res); tail -3 "$W/res.log"
fi
train resp --bf16 --train-iters 4 --load "$W/ck/iter_0000002" || bad "resume with the plain optimizer"
[ "$(losses base | tail -2)" = "$(losses resp)" ] && [ "$(checksum base)" = "$(checksum resp)" ] \
  && ok "--bf16 resume into the plain optimizer: the same losses and final weights" \
  || bad "--bf16 resume into the plain optimizer differs"

# the other precision: refused with the optimizer state, accepted without it
train x1 "${DO[@]}" --load "$W/ck/iter_0000002"
want="the checkpoint was trained with bfloat16 parameters and this run has float32 ones: resume it with --bf16"
grep -q "$want" "$W/x1.log" && ok "float32 resume of a --bf16 checkpoint refused with one sentence" \
  || { bad "float32 resume of bf16"; tail -3 "$W/x1.log"; }
train x2 "${DO[@]}" --load "$W/ck/iter_0000002" --no-load-optim && ok "float32 run loads the bfloat16 weights alone" \
  || bad "--no-load-optim of a bf16 checkpoint"
train f32ck "${DO[@]}" --train-iters 2 --save "$W/ck32" || bad "float32 checkpoint"
train x3 --bf16 "${DO[@]}" --load "$W/ck32"
grep -q "trained with float32 parameters and this run has bfloat16 ones: resume it without --bf16" "$W/x3.log" \
  && ok "--bf16 resume of a float32 checkpoint refused" || { bad "bf16 resume of float32"; tail -3 "$W/x3.log"; }
train x4 --bf16 "${DO[@]}" --load "$W/ck32" --finetune \
  && ok "--bf16 --finetune starts from a float32 checkpoint's weights" \
  || bad "--bf16 --finetune of a float32 checkpoint"
finish
