#!/usr/bin/env bash
# cli_inspect.sh - `tandem inspect` against the parameter table of qwen3vl.md §1 (every
# component of the shipped 2B and 8B configs), the freeze flags, the memory plan's
# arithmetic, and the error paths. Run from the repository root with $TANDEM set
# (scripts/test.sh does); prints "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
TANDEM=${TANDEM:-build/tandem}
TMP=$(mktemp -d /tmp/tdm_cli_inspect_XXXXXX)
trap 'rm -rf "$TMP"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

# column FILE LABEL N: the Nth column (1 = parameters, 2 = trainable) of the row whose
# label starts with LABEL; columns are separated by two or more spaces.
column() {
  awk -F'  +' -v label="$2" -v n="$3" 'index($2, label) == 1 { print $(2 + n); exit }' "$1"
}

expect_row() { # file label parameters [trainable]
  local got
  got=$(column "$1" "$2" 1)
  if [ "$got" = "$3" ]; then ok; else bad "$1: '$2' has '$got' parameters, expected $3"; fi
  if [ $# -ge 4 ]; then
    got=$(column "$1" "$2" 2)
    if [ "$got" = "$4" ]; then ok; else bad "$1: '$2' has '$got' trainable, expected $4"; fi
  fi
}

# ---- the spec's table, component by component -------------------------------------------
if "$TANDEM" inspect --model configs/qwen3-vl-2b > "$TMP/2b.txt" 2> "$TMP/2b.err"; then ok; else bad "2B: $(cat "$TMP/2b.err")"; fi
expect_row "$TMP/2b.txt" "vision: patch_embed" 1,573,888
expect_row "$TMP/2b.txt" "vision: pos_embed" 2,359,296
expect_row "$TMP/2b.txt" "vision: ViT blocks (24 x 12,596,224)" 302,309,376
expect_row "$TMP/2b.txt" "vision: final merger" 25,174,016
expect_row "$TMP/2b.txt" "vision: DeepStack mergers (3)" 75,540,480
expect_row "$TMP/2b.txt" "vision total" 406,957,056
expect_row "$TMP/2b.txt" "LLM: embed_tokens" 311,164,928
expect_row "$TMP/2b.txt" "LLM: decoder layers (28 x 50,336,000)" 1,409,408,000
expect_row "$TMP/2b.txt" "LLM: final norm" 2,048
expect_row "$TMP/2b.txt" "LLM: lm_head (tied" 0
expect_row "$TMP/2b.txt" "LLM total" 1,720,574,976
expect_row "$TMP/2b.txt" "model total" 2,127,532,032 2,127,532,032
grep -q "625 tensors" "$TMP/2b.txt" && ok || bad "2B: expected 625 tensors (315 vision + 310 text)"

if "$TANDEM" inspect --model configs/qwen3-vl-8b/config.json > "$TMP/8b.txt" 2> "$TMP/8b.err"; then ok; else bad "8B: $(cat "$TMP/8b.err")"; fi
expect_row "$TMP/8b.txt" "vision: patch_embed" 1,770,624
expect_row "$TMP/8b.txt" "vision: pos_embed" 2,654,208
expect_row "$TMP/8b.txt" "vision: ViT blocks (27 x 15,239,504)" 411,466,608
expect_row "$TMP/8b.txt" "vision: final merger" 40,119,040
expect_row "$TMP/8b.txt" "vision: DeepStack mergers (3)" 120,377,856
expect_row "$TMP/8b.txt" "vision total" 576,388,336
expect_row "$TMP/8b.txt" "LLM: embed_tokens" 622,329,856
expect_row "$TMP/8b.txt" "LLM: decoder layers (36 x 192,946,432)" 6,946,071,552
expect_row "$TMP/8b.txt" "LLM: final norm" 4,096
expect_row "$TMP/8b.txt" "LLM: lm_head" 622,329,856
expect_row "$TMP/8b.txt" "LLM total" 8,190,735,360
expect_row "$TMP/8b.txt" "model total" 8,767,123,696 8,767,123,696
grep -q "750 tensors" "$TMP/8b.txt" && ok || bad "8B: expected 750 tensors (351 vision + 399 text)"

# ---- freeze flags ---------------------------------------------------------------------------
"$TANDEM" inspect --model configs/qwen3-vl-8b --freeze-vision --freeze-projector > "$TMP/8b_fz.txt" 2>&1 || bad "freeze run failed"
expect_row "$TMP/8b_fz.txt" "vision total" 576,388,336 0
expect_row "$TMP/8b_fz.txt" "LLM total" 8,190,735,360 8,190,735,360
expect_row "$TMP/8b_fz.txt" "model total" 8,767,123,696 8,190,735,360
grep -q "frozen 576,388,336" "$TMP/8b_fz.txt" && ok || bad "8B frozen vision: frozen count"
"$TANDEM" inspect --model configs/qwen3-vl-8b --freeze-llm --freeze-lm-head > "$TMP/8b_fl.txt" 2>&1 || bad "freeze-llm run failed"
expect_row "$TMP/8b_fl.txt" "model total" 8,767,123,696 576,388,336
# Tied 2B: --freeze-lm-head alone freezes nothing (the head is the embedding, which follows --freeze-llm).
"$TANDEM" inspect --model configs/qwen3-vl-2b --freeze-lm-head > "$TMP/2b_fh.txt" 2>&1 || bad "2B freeze-lm-head run failed"
expect_row "$TMP/2b_fh.txt" "model total" 2,127,532,032 2,127,532,032
"$TANDEM" inspect --model configs/qwen3-vl-2b --freeze-llm > "$TMP/2b_fl.txt" 2>&1 || bad "2B freeze-llm run failed"
expect_row "$TMP/2b_fl.txt" "model total" 2,127,532,032 406,957,056

# ---- memory plan arithmetic ------------------------------------------------------------------
# GiB value of a memory row: column 1 = DDP, 2 = distributed optimizer.
gib() { column "$1" "$2" "$3" | awk '{ v = $1; if ($2 == "MiB") v /= 1024; if ($2 == "KiB") v /= 1048576; print v }'; }
near() { awk -v a="$1" -v b="$2" -v tol="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= tol) }'; }
"$TANDEM" inspect --model configs/qwen3-vl-8b --dp 4 > "$TMP/8b_dp4.txt" 2>&1 || bad "8B dp 4 failed"
# 8,767,123,696 trainable x 8 bytes (m and v) = 65.32 GiB; the distributed optimizer keeps 1/4 (+ padding).
adam=$(gib "$TMP/8b_dp4.txt" "Adam m + v" 1); adam_d=$(gib "$TMP/8b_dp4.txt" "Adam m + v" 2)
near "$adam" 65.32 0.005 && ok || bad "8B Adam DDP $adam GiB, expected 65.32"
near "$adam_d" 16.33 0.005 && ok || bad "8B Adam distributed dp 4: $adam_d GiB, expected 16.33"
w=$(gib "$TMP/8b_dp4.txt" "weights fp32" 1); g=$(gib "$TMP/8b_dp4.txt" "gradients fp32" 1)
near "$w" 32.66 0.005 && ok || bad "8B weights $w GiB, expected 32.66"
near "$g" 32.66 0.005 && ok || bad "8B grads $g GiB, expected 32.66"
wb=$(gib "$TMP/8b_dp4.txt" "(weights bf16" 1)
near "$wb" 16.33 0.005 && ok || bad "8B bf16 weights $wb GiB, expected 16.33"
grep -q "bucket size 40,000,000 elements" "$TMP/8b_dp4.txt" && ok || bad "8B default bucket size (Megatron's max(40M, 1M x dp))"
# --bf16 (train's storage, src/distributed/ddp.c): the weights in 2 bytes each (the all-gathers land in them),
# an fp32 main copy of what the optimizer owns (the whole buffer without the distributed optimizer, 1/4 of the
# padded one with it) and the fp32 scratch one layer is widened into (the largest: lm_head, 151,936 x 4,096);
# gradients and Adam do not change.
"$TANDEM" inspect --model configs/qwen3-vl-8b --dp 4 --bf16 > "$TMP/8b_bf16.txt" 2>&1 || bad "8B dp 4 --bf16 failed"
main=$(gib "$TMP/8b_bf16.txt" "fp32 main parameters" 1); main_d=$(gib "$TMP/8b_bf16.txt" "fp32 main parameters" 2)
scr=$(gib "$TMP/8b_bf16.txt" "fp32 scratch" 1); scr_d=$(gib "$TMP/8b_bf16.txt" "fp32 scratch" 2)
w16=$(gib "$TMP/8b_bf16.txt" "weights bf16" 1); w16_d=$(gib "$TMP/8b_bf16.txt" "weights bf16" 2)
near "$main" 32.66 0.005 && ok || bad "8B --bf16 main parameters DDP $main GiB, expected 32.66"
near "$main_d" 8.165 0.006 && ok || bad "8B --bf16 main parameters distributed dp 4: $main_d GiB, expected 8.17"
near "$w16" 16.33 0.005 && near "$w16_d" 16.33 0.005 && ok || bad "8B --bf16 weights $w16 / $w16_d GiB, expected 16.33"
near "$scr" 2.32 0.005 && near "$scr_d" 2.32 0.005 && ok || bad "8B --bf16 scratch $scr / $scr_d GiB, expected 2.32"
for k in 1 2; do
  t0=$(gib "$TMP/8b_dp4.txt" "total" $k) t1=$(gib "$TMP/8b_bf16.txt" "total" $k)
  extra=$(awk -v m="$([ $k = 1 ] && echo "$main" || echo "$main_d")" -v s="$scr" 'BEGIN { print m + s - 16.33 }')
  near "$(awk -v a="$t1" -v b="$t0" 'BEGIN { print a - b }')" "$extra" 0.015 && ok \
    || bad "8B --bf16 total (column $k) $t1 GiB against $t0 without it: the difference is not $extra"
done
grep -q "16-bit all-gather" "$TMP/8b_bf16.txt" && bad "8B --bf16: a separate all-gather buffer" || ok
if grep -q "fp32 main parameters\|fp32 scratch\|weights bf16 (--bf16" "$TMP/8b_dp4.txt"; then bad "rows of --bf16 without it"; else ok; fi
# Frozen parts get no gradient and no optimizer state.
g=$(gib "$TMP/8b_fz.txt" "gradients fp32" 1)
near "$g" "$(awk 'BEGIN { print 8190735360 * 4 / 1073741824 }')" 0.005 && ok || bad "8B frozen vision: grads $g GiB"
# Activations: present with a micro-batch, and the row is explained when absent.
"$TANDEM" inspect --model configs/tiny --micro-batch-tokens 512 --micro-batch-patches 256 > "$TMP/tiny.txt" 2>&1 || bad "tiny failed: $(cat "$TMP/tiny.txt")"
grep -q "^  activations (512 tokens, 256 patches)" "$TMP/tiny.txt" && ok || bad "tiny: no activation row"
grep -q "activations: not computed (give --micro-batch-tokens, and" "$TMP/8b.txt" && ok || bad "8B without micro-batch: missing note"
"$TANDEM" inspect --model configs/tiny --ddp-bucket-size 500000 --dp 2 > "$TMP/tiny_b.txt" 2>&1 || bad "tiny buckets failed"
grep -Eq "bucket size 500,000 elements: [0-9]+ buckets" "$TMP/tiny_b.txt" && ok || bad "tiny: bucket line"
n=$(sed -nE 's/.*elements: ([0-9]+) buckets.*/\1/p' "$TMP/tiny_b.txt")
[ "${n:-0}" -ge 8 ] && ok || bad "tiny with 500k-element buckets: $n buckets, expected >= 8 (6.27M elements)"
# Activation memory: a frozen tower keeps no block activations, recomputation keeps group inputs only
# (the bytes themselves are checked against the reservation in tests/model/test_recompute.c).
act() { sed -nE 's/^  activations \([^)]*\) +([0-9.]+) GiB.*/\1/p' "$1"; }
MB=(--model configs/qwen3-vl-8b --micro-batch-tokens 4096 --micro-batch-patches 8192)
"$TANDEM" inspect "${MB[@]}" > "$TMP/a_all.txt" 2>&1 || bad "8B activations failed"
"$TANDEM" inspect "${MB[@]}" --freeze-vision > "$TMP/a_fz.txt" 2>&1 || bad "8B frozen activations failed"
"$TANDEM" inspect "${MB[@]}" --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 \
  > "$TMP/a_rc.txt" 2>&1 || bad "8B recompute activations failed"
a=$(act "$TMP/a_all.txt") f=$(act "$TMP/a_fz.txt") r=$(act "$TMP/a_rc.txt")
awk -v a="$a" -v f="$f" -v r="$r" 'BEGIN { exit !(a > 0 && f > 0 && r > 0 && f < a && r < a / 4) }' && ok \
  || bad "8B activations: all '$a', frozen vision '$f', uniform 1 '$r' GiB"

# ---- errors: one sentence naming the input, non-zero exit --------------------------------------
expect_error() { # message-substring, args...
  local want=$1; shift
  if "$TANDEM" inspect "$@" > "$TMP/out" 2> "$TMP/err"; then
    bad "inspect $* succeeded"
  elif grep -qF -- "$want" "$TMP/err"; then ok; else bad "inspect $*: '$want' not in: $(cat "$TMP/err")"; fi
}
expect_error "--model" --dp 2
expect_error "$TMP/nope" --model "$TMP/nope"
mkdir -p "$TMP/broken"
sed 's/"num_key_value_heads": 8/"num_key_value_heads": 7/' configs/qwen3-vl-8b/config.json > "$TMP/broken/config.json"
expect_error "text_config.num_key_value_heads" --model "$TMP/broken"
expect_error "$TMP/broken/config.json" --model "$TMP/broken"
expect_error "--dp" --model configs/tiny --dp 0
expect_error "--micro-batch-patches" --model configs/tiny --micro-batch-tokens 64 --micro-batch-patches 6
expect_error "--bogus" --model configs/tiny --bogus
expect_error "--recompute-method uniform or block" --model configs/tiny --recompute-granularity full
expect_error "only with --recompute-granularity full" --model configs/tiny --recompute-num-layers 2
expect_error "--recompute-granularity: expected one of full|selective, got 'half'" --model configs/tiny \
  --recompute-granularity half
"$TANDEM" inspect --model configs/tiny --recompute-activations >/dev/null 2>&1 && ok || bad "--recompute-activations refused"
expect_error "the 4 decoder layers" --model configs/tiny --recompute-granularity full --recompute-method block \
  --recompute-num-layers 9
"$TANDEM" inspect --help > "$TMP/help" 2>&1 && grep -q -- "--freeze-vision" "$TMP/help" && ok || bad "--help"
# the training flags that change the plan, spelled as train spells them; other train flags are refused, saying why
expect_error "did you mean '--micro-batch-tokens'" --model configs/tiny --micro-batch-tokns 64
expect_error "--lr is a \`tandem train\` flag that does not change the memory plan" --model configs/tiny --lr 1e-3
"$TANDEM" inspect --model configs/tiny --use-distributed-optimizer --recompute_granularity=full \
  --recompute-method uniform --recompute-num-layers 1 --bf16 > "$TMP/train_flags.txt" 2>&1 \
  && grep -q "this run (--use-distributed-optimizer): the distributed optimizer's column" "$TMP/train_flags.txt" \
  && ok || bad "train's flags: $(tail -n 2 "$TMP/train_flags.txt")"
"$TANDEM" inspect --model configs/tiny > "$TMP/plain.txt" 2>&1
grep -q "this run" "$TMP/plain.txt" && bad "the column of this run named without --use-distributed-optimizer" || ok

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
