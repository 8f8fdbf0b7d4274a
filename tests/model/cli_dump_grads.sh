#!/usr/bin/env bash
# `tandem dump-grads` end to end: the real data pipeline (dataset, tokenizer, images,
# chat template, packing, get_rope_index) feeds the C model, and the independent PyTorch
# reference (tests/model/ref_qwen3vl.py, float64) redoes the step from what
# --save-inputs wrote: loss and every gradient within max|c-ref|/max|ref| <= 1e-4, the
# data pipeline's shifted targets and 3-axis positions recomputed from the spec.
# Also: the output line, the freeze flags, and errors for bad input.
set -u
cd "$(dirname "$0")/../.."
TANDEM=${TANDEM:-build/tandem}
PY=/usr/bin/python3
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# a small dataset, a tokenizer trained on it, and the tiny model resized to that vocabulary
"$TANDEM" gen-data --out "$tmp/d" --samples 200 --heldout 1 >/dev/null || bad "gen-data"
"$TANDEM" train-tokenizer --data "$tmp/d/train.json" --vocab-size 300 --out "$tmp/tok.json" >/dev/null || bad "train-tokenizer"
mkdir -p "$tmp/model"
$PY - "$tmp" <<'PYEOF'
import json, sys
t = sys.argv[1]
c = json.load(open("configs/tiny/config.json"))
N = 300  # train-tokenizer puts Qwen's 26 added tokens at N-26..N-1
c["text_config"]["vocab_size"] = N
c["text_config"]["bos_token_id"] = c["pad_token_id"] = N - 26
c["text_config"]["eos_token_id"] = N - 26 + 2
c["vision_start_token_id"], c["vision_end_token_id"] = N - 26 + 9, N - 26 + 10
c["image_token_id"], c["video_token_id"] = N - 26 + 12, N - 26 + 13
json.dump(c, open(t + "/model/config.json", "w"), indent=1)
json.dump(json.load(open(t + "/d/train.json"))[:4], open(t + "/d/four.json", "w"))
PYEOF
cp configs/tiny/preprocessor_config.json "$tmp/model/"
base=(--model "$tmp/model" --tokenizer "$tmp/tok.json" --data "$tmp/d/four.json")

for mode in none vision_projector llm; do
  case $mode in
    none) flags=() ;;
    vision_projector) flags=(--freeze-vision --freeze-projector) ;;
    llm) flags=(--freeze-llm --freeze-lm-head) ;;
  esac
  line=$("$TANDEM" dump-grads "${base[@]}" "${flags[@]}" --out "$tmp/g_$mode.safetensors" --save-inputs "$tmp/s_$mode")
  rc=$?
  if [ $rc -ne 0 ]; then bad "dump-grads ($mode) exit $rc"; continue; fi
  if [[ "$line" =~ ^loss\ [0-9.e+-]+\ tokens\ [0-9]+$ ]]; then ok; else bad "output line '$line'"; fi
  out=$($PY tests/model/ref_qwen3vl.py "$tmp/s_$mode" --tol 1e-4 2>&1); rc=$?
  printf '%s\n' "$out" | grep -v ' passed, .* failed$' | sed "s/^dump-grads/dump-grads freeze=$mode/"
  if [ $rc -eq 0 ]; then ok; else bad "reference parity ($mode)"; fi
  # the --out file holds exactly the gradients the reference checked
  if cmp -s <($PY -c "import json,struct,sys;f=open(sys.argv[1],'rb');n=struct.unpack('<Q',f.read(8))[0];print(sorted(k for k in json.loads(f.read(n)) if k!='__metadata__'))" "$tmp/g_$mode.safetensors") \
            <($PY -c "import json,struct,sys;f=open(sys.argv[1],'rb');n=struct.unpack('<Q',f.read(8))[0];print(sorted(k[5:] for k in json.loads(f.read(n)) if k.startswith('grad.')))" "$tmp/s_$mode/out.safetensors"); then ok
  else bad "--out tensors ($mode)"; fi
done

# text_config.pad_token_id = <|im_start|> (in every sample): HF's embedding padding_idx, whose row
# gets no gradient from its lookups; the reference checks that through F.embedding(padding_idx)
mkdir -p "$tmp/mpad" && cp "$tmp/model/preprocessor_config.json" "$tmp/mpad/"
$PY -c 'import json,sys; c=json.load(open(sys.argv[1])); c["text_config"]["pad_token_id"]=300-26+1
json.dump(c,open(sys.argv[2],"w"))' "$tmp/model/config.json" "$tmp/mpad/config.json"
if "$TANDEM" dump-grads --model "$tmp/mpad" "${base[@]:2}" --out "$tmp/g_pad.safetensors" --save-inputs "$tmp/s_pad" \
  >/dev/null; then
  out=$($PY tests/model/ref_qwen3vl.py "$tmp/s_pad" --tol 1e-4 2>&1); rc=$?
  printf '%s\n' "$out" | grep -v ' passed, .* failed$' | sed "s/^dump-grads/dump-grads text pad_token_id/"
  if [ $rc -eq 0 ]; then ok; else bad "reference parity with text_config.pad_token_id"; fi
else
  bad "dump-grads with text_config.pad_token_id"
fi

# errors: one sentence naming the input, non-zero exit, no core dump
err=$("$TANDEM" dump-grads "${base[@]}" 2>&1 >/dev/null); rc=$?
if [ $rc -ne 0 ] && [[ "$err" == *"--out"* ]]; then ok; else bad "missing --out: rc $rc '$err'"; fi
err=$("$TANDEM" dump-grads --model "$tmp/model" --tokenizer "$tmp/tok.json" --data "$tmp/nope.json" --out "$tmp/x.safetensors" 2>&1 >/dev/null); rc=$?
if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [[ "$err" == *"nope.json"* ]]; then ok; else bad "missing data: rc $rc '$err'"; fi
err=$("$TANDEM" dump-grads --model configs/tiny --tokenizer "$tmp/tok.json" --data "$tmp/d/four.json" --out "$tmp/x.safetensors" 2>&1 >/dev/null); rc=$?
if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [[ "$err" == *"image_token_id"* ]]; then ok; else bad "vocabulary mismatch: rc $rc '$err'"; fi
# a preprocessor that cuts other patches than the vision config expects (Qwen2.5-VL's 14) is refused at start
mkdir -p "$tmp/m14" && cp "$tmp/model/config.json" "$tmp/m14/"
sed 's/"patch_size": 16/"patch_size": 14/' "$tmp/model/preprocessor_config.json" >"$tmp/m14/preprocessor_config.json"
err=$("$TANDEM" dump-grads --model "$tmp/m14" "${base[@]:2}" --out "$tmp/x.safetensors" 2>&1 >/dev/null); rc=$?
if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [[ "$err" == *"m14/preprocessor_config.json: patch_size 14"* && \
  "$err" == *"vision_config.patch_size 16"* ]]; then ok; else bad "preprocessor mismatch: rc $rc '$err'"; fi
# a batch whose activations cannot fit in memory is refused before allocating, naming the file
$PY -c 'import json,sys; json.dump([{"messages":[{"role":"user","content":"a b "*1500000},{"role":"assistant","content":"c"}]}], open(sys.argv[1],"w"))' "$tmp/huge.json"
err=$("$TANDEM" dump-grads "${base[@]:0:4}" --data "$tmp/huge.json" --out "$tmp/x.safetensors" 2>&1 >/dev/null); rc=$?
if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [[ "$err" == *"huge.json"* && "$err" == *"GiB"* ]]; then ok; else bad "huge batch: rc $rc '$err'"; fi
# --load of a checkpoint: the --save folder and its model.safetensors give the same gradients; a damaged
# file is refused by its checksum, as train --load refuses it
OMPI_MCA_btl_vader_single_copy_mechanism=none "$TANDEM" train "${base[@]}" --lr 0 --train-iters 1 \
  --global-batch-size 2 --save "$tmp/ck" >"$tmp/ck.log" 2>&1 || bad "making a checkpoint: $(tail -2 "$tmp/ck.log")"
l1=$("$TANDEM" dump-grads "${base[@]}" --load "$tmp/ck" --out "$tmp/l1.safetensors" 2>&1)
l2=$("$TANDEM" dump-grads "${base[@]}" --load "$tmp/ck/iter_0000001/model.safetensors" --out "$tmp/l2.safetensors" 2>&1)
if [[ "$l1" =~ ^loss ]] && [ "$l1" = "$l2" ] && cmp -s "$tmp/l1.safetensors" "$tmp/l2.safetensors"; then ok
else bad "--load of the save folder: '$l1' vs the file: '$l2'"; fi
printf 'X' | dd of="$tmp/ck/iter_0000001/model.safetensors" bs=1 seek=4000 conv=notrunc 2>/dev/null
err=$("$TANDEM" dump-grads "${base[@]}" --load "$tmp/ck" --out "$tmp/l3.safetensors" 2>&1 >/dev/null); rc=$?
if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [[ "$err" == *"model.safetensors"* ]]; then ok
else bad "damaged checkpoint: rc $rc '$err'"; fi
"$TANDEM" dump-grads --help | grep -q -- "--freeze-llm" && ok || bad "--help"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
