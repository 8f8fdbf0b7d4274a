#!/usr/bin/env bash
# cli_bf16_memory.sh - --bf16 stores the weights in 2 bytes each, as Megatron's --bf16 does: `tandem inspect
# --bf16` plans the 8B model's weights at half their fp32 bytes, with the fp32 main copy and one layer's
# fp32 scratch beside them; the trainer's weights per rank are what inspect plans; and a run whose weights
# are mostly frozen reaches a lower maximum resident memory with --bf16 than in fp32.
# Env: TANDEM (build/tandem).
. "$(dirname "$0")/lib.sh"

# --- the 8B plan: 2 bytes per weight ---------------------------------------------------------------
"$TANDEM" inspect --model configs/qwen3-vl-8b --dp 8 > "$W/f32.txt" 2>&1 || bad "inspect: $(tail -1 "$W/f32.txt")"
"$TANDEM" inspect --model configs/qwen3-vl-8b --dp 8 --bf16 > "$W/bf16.txt" 2>&1 || bad "inspect --bf16: $(tail -1 "$W/bf16.txt")"
row() { awk -F'  +' -v l="$2" 'index($2, l) == 1 { print $3 "|" $4; exit }' "$W/$1.txt"; }
gib() { echo "$1" | cut -d'|' -f"$2" | sed -E 's/ GiB$//'; }
wf=$(row f32 "weights fp32"); wb=$(row bf16 "weights bf16 (--bf16, 2 bytes each)")
params=$(sed -nE 's/^  model total +([0-9,]+).*/\1/p' "$W/f32.txt" | tr -d ,)
if [ -n "$wb" ] && awk -v f="$(gib "$wf" 1)" -v b="$(gib "$wb" 1)" -v fd="$(gib "$wf" 2)" -v bd="$(gib "$wb" 2)" -v n="$params" \
     'BEGIN { g = 2 * n / 2^30; d = b - g; exit !(d < 0.01 && d > -0.01 && f - 2 * b < 0.02 && f - 2 * b > -0.02 && bd - b < 0.01 && b - bd < 0.01) }'; then
  ok "inspect --bf16, 8B: weights $(gib "$wb" 1) GiB, 2 bytes for each of $params parameters (fp32: $(gib "$wf" 1) GiB)"
else
  bad "inspect --bf16, 8B: weights row '$wb', fp32 '$wf', $params parameters"
fi
grep -q "16-bit all-gather buffer" "$W/bf16.txt" && bad "inspect --bf16 still plans a separate all-gather buffer" \
  || ok "no separate 16-bit all-gather buffer: the all-gathers land in the weights"
sc=$(row bf16 "fp32 scratch, largest layer widened (--bf16)")
[ -n "$sc" ] && grep -q "fp32 main parameters (--bf16)" "$W/bf16.txt" && ok "the plan adds the fp32 main copy and a one-layer scratch ($(gib "$sc" 1) GiB)" \
  || bad "inspect --bf16: no main copy or scratch row"
tot_f=$(gib "$(row f32 "total (without activations)")" 2); tot_b=$(gib "$(row bf16 "total (without activations)")" 2)
awk -v f="$tot_f" -v b="$tot_b" 'BEGIN { exit !(b < f) }' \
  && ok "distributed optimizer, 8B, dp 8: $tot_b GiB per rank with --bf16, $tot_f GiB in fp32" \
  || bad "distributed optimizer, 8B: --bf16 plans $tot_b GiB, fp32 $tot_f GiB"

# --- the trainer holds what inspect plans; frozen weights cost half ----------------------------------
tiny_setup 24 4
mkdir -p "$W/big"
cp "$W/model/"*.json "$W/big/"
# a decoder whose weights outweigh everything else a step holds: wide MLPs, a larger vocabulary
sed -i -E 's/"intermediate_size": 768/"intermediate_size": 6144/; s/"vocab_size": 1024/"vocab_size": 16384/;
           s/"num_hidden_layers": 4/"num_hidden_layers": 8/' "$W/big/config.json"
COMMON=(--model "$W/big" --tokenizer "$W/tok.json" --data "$W/data/train.json" --micro-batch-size 1
        --global-batch-size 1 --lr 1e-3 --seq-length 512 --seed 7 --train-iters 2 --freeze-llm --freeze-lm-head)
"$TANDEM" train "${COMMON[@]}" > "$W/f32.log" 2>&1 || { bad "fp32 run"; tail -3 "$W/f32.log"; }
"$TANDEM" train "${COMMON[@]}" --bf16 > "$W/b16.log" 2>&1 || { bad "--bf16 run"; tail -3 "$W/b16.log"; }
logged=$(sed -nE 's/.*weights \(bfloat16, frozen ones included\) per rank: ([0-9.]+) MiB.*/\1/p' "$W/b16.log" | head -1)
"$TANDEM" inspect --model "$W/big" --dp 1 --bf16 --freeze-llm --freeze-lm-head > "$W/big.txt" 2>&1
planned=$(awk -F'  +' 'index($2, "weights bf16") == 1 { v = $3; sub(/ MiB$/, "", v); print v; exit }' "$W/big.txt")
awk -v a="$planned" -v b="$logged" 'BEGIN { d = a - b; exit !(b > 0 && d <= 0.015 && d >= -0.015) }' \
  && ok "the trainer's bfloat16 weights are what inspect --bf16 plans ($logged MiB)" \
  || bad "inspect --bf16 plans '$planned' MiB of weights, the trainer logged '$logged'"
maxrss() { sed -nE 's/.*max resident: ([0-9.]+).*/\1/p' "$1" | tail -1; }
mf=$(maxrss "$W/f32.log"); mb=$(maxrss "$W/b16.log")
frozen_mib=$(awk -v b="$logged" 'BEGIN { printf "%.1f", b }')
# the weights take 2 x $logged MiB in fp32, $logged with --bf16, which adds the trainable part's main copy and
# one layer's fp32 scratch: most of $logged MiB is saved
awk -v f="$mf" -v b="$mb" -v w="$logged" 'BEGIN { exit !(f > 0 && b > 0 && f - b > w / 2) }' \
  && ok "max resident memory: $mb MB with --bf16, $mf MB in fp32 (bfloat16 weights: $frozen_mib MiB)" \
  || bad "max resident memory: $mb MB with --bf16, $mf MB in fp32; expected a saving above half of $logged MiB"
finish
