#!/bin/bash
# peer_bf16.sh - tandem's --bf16 against an independent PyTorch implementation of Megatron's bf16 storage
# (bench/peer_torch/torch_ddp_train.py --bf16: the weights rounded by torch's .to(torch.bfloat16), AdamW of
# torch.optim on fp32 main copies, the weights rounded again after each step), on the same initial fp32
# weights and the same exported micro-batches, 2 ranks each (tandem: distributed optimizer, 16-bit all-gather;
# PyTorch: DDP over gloo). Both round the fp32 weights on load.
# Tolerance: every step's loss within TOL = 1e-4 relative of the peer's (the two sides' fp32 sums differ in the
# last bits, which can move a main parameter across a bfloat16 rounding boundary). The same comparison in
# float32 bounds what the peer pairing itself contributes, and --bf16 must move the losses by more than 10 x TOL
# from float32 (so a --bf16 that changed nothing would fail).
# Env: TANDEM (build/tandem), MPIRUN (mpirun.openmpi or mpirun.mpich).
. "$(dirname "$0")/lib.sh"
tiny_setup 64 4
if ! "$PY" -c 'import torch' 2>/dev/null; then bad "$PY cannot import torch"; finish; exit 1; fi
STEPS=6 TOL=1e-4
DATA=(--tokenizer "$W/tok.json" --data "$W/data/train.json" --micro-batch-size 2 --global-batch-size 8 --seq-length 512
      --seed 1234)
OPT=(--lr 3e-3 --lr-decay-style constant --weight-decay 0.01 --clip-grad 1.0)
"$TANDEM" export-batches --out "$W/batches" --steps "$STEPS" --dp 2 --model "$W/model" "${DATA[@]}" >/dev/null \
  || { bad "export-batches"; finish; exit 1; }
"$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train --model "$W/model" "${DATA[@]}" --lr 0 --train-iters 1 \
  --save "$W/init" > "$W/init.log" 2>&1 || { bad "initial weights"; tail -3 "$W/init.log"; finish; exit 1; }
INIT=$W/init/iter_0000001/model.safetensors
for prec in bf16 fp32; do
  flag=(); [ $prec = bf16 ] && flag=(--bf16)
  "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train --model "$W/model" "${DATA[@]}" "${OPT[@]}" "${flag[@]}" \
    --hf-weights "$INIT" --use-distributed-optimizer --ddp-bucket-size 400000 --train-iters "$STEPS" \
    --run-dir "$W/t_$prec" > "$W/t_$prec.log" 2>&1 || { bad "tandem $prec run"; tail -3 "$W/t_$prec.log"; }
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$PY" bench/peer_torch/torch_ddp_train.py --config "$W/model/config.json" \
    --weights "$INIT" --batches "$W/batches" --steps "$STEPS" --out "$W/p_$prec.jsonl" --nproc 2 --threads 1 \
    --lr 3e-3 --lr-decay-style constant --weight-decay 0.01 --clip-grad 1.0 --bucket-elems 400000 "${flag[@]}" \
    > "$W/p_$prec.log" 2>&1 || { bad "PyTorch $prec run"; tail -3 "$W/p_$prec.log"; }
done
out=$("$PY" - "$W" "$STEPS" "$TOL" <<'PY'
import json, sys
w, steps, tol = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
def losses(path):
    return [json.loads(l)["loss"] for l in open(path)]
t16, t32 = losses(w + "/t_bf16/metrics.jsonl"), losses(w + "/t_fp32/metrics.jsonl")
p16, p32 = losses(w + "/p_bf16.jsonl"), losses(w + "/p_fp32.jsonl")
assert len(t16) == len(t32) == len(p16) == len(p32) == steps, (len(t16), len(t32), len(p16), len(p32))
rel = lambda a, b: max(abs(x - y) / abs(y) for x, y in zip(a, b))
d16, d32, moved = rel(t16, p16), rel(t32, p32), rel(t16, t32)
print("bf16 %.2e fp32 %.2e moved %.2e" % (d16, d32, moved))
sys.exit(0 if d16 <= tol and d32 <= tol and moved > 10 * tol else 1)
PY
) && ok "--bf16 losses match PyTorch's bf16 storage to $TOL over $STEPS steps (max rel diff: $out)" \
  || bad "--bf16 against PyTorch (max rel diffs: $out; tolerance $TOL, --bf16 must move the loss by > 10 x)"
finish
