#!/usr/bin/env bash
# peer_generate.sh - tandem generate against greedy decoding in the float64 PyTorch reference
# (tests/model/ref_qwen3vl.py), which recomputes the whole forward from scratch at every step,
# with the 3-axis positions of the prompt and the tokens so far from its own get_rope_index:
# so the KV cache, the positions given to new tokens after a picture and the stop rule are
# all checked against code that shares none of them. Tiny model, a few training steps (its
# answers are short but not empty); prompts with one picture, two pictures, and none.
# The prompt's tokens and pixels come from `tandem dump-grads --save-inputs` on a one-sample
# data file whose answer is a placeholder: the prompt is every token before the first
# labelled one (the same chat template as generate's prompt).
# Env: TANDEM (build/tandem).
. "$(dirname "$0")/lib.sh"
$PY -c 'import torch' 2>/dev/null || { echo "$PY cannot import torch"; echo "0 passed, 1 failed"; exit 1; }
tiny_setup 32 4
"$MPIRUN" "${MPIFLAGS[@]}" -np 1 "$TANDEM" train --model "$W/model" --tokenizer "$W/tok.json" \
  --data "$W/data/train.json" --micro-batch-size 4 --global-batch-size 4 --lr 3e-3 --lr-warmup-iters 1 \
  --train-iters 24 --seq-length 512 --seed 7 --save "$W/ck" > "$W/train.log" 2>&1 \
  || { bad "train"; tail -n 5 "$W/train.log"; }
M=(--model "$W/model" --tokenizer "$W/tok.json" --load "$W/ck")
IM_END=$(echo '<|im_end|>' | "$TANDEM" tokenize --tokenizer "$W/tok.json")
EOT=$(echo '<|endoftext|>' | "$TANDEM" tokenize --tokenizer "$W/tok.json")

# check NAME PROMPT IMAGE...: generate's answer against the reference's greedy tokens, decoded by tandem
# (IMAGE: a file name under $W/data/images)
check() {
  local name=$1 prompt=$2; shift 2
  local d="$W/${name// /_}" tags="" imgs=() json_imgs=""
  mkdir -p "$d"
  for im in "$@"; do
    tags="$tags<image>"
    imgs+=(--image "$W/data/images/$im")
    json_imgs="$json_imgs${json_imgs:+, }\"images/$im\""
  done
  sample() { # ANSWER: the one-sample data file
    printf '[{"messages": [{"role": "user", "content": "%s%s"}, {"role": "assistant", "content": "%s"}], ' \
      "$tags" "$prompt" "$1"
    printf '"images": [%s]}]\n' "$json_imgs"
  }
  sample x > "$d/sample.json"
  "$TANDEM" dump-grads "${M[@]:0:4}" --load "$W/ck/iter_0000024/model.safetensors" --data "$d/sample.json" \
    --image-root "$W/data" --out "$d/g.safetensors" --save-inputs "$d/in" > "$d/dump.log" 2>&1 \
    || { bad "$name: dump-grads"; tail -n 3 "$d/dump.log"; return; }
  # generate takes one --image, put before the prompt: two pictures go through evaluate instead
  local got
  if [ $# -le 1 ]; then
    got=$("$TANDEM" generate "${M[@]}" "${imgs[@]}" --prompt "$prompt" --max-new-tokens 12 2>&1) \
      || { bad "$name: generate: $got"; return; }
  else
    sample "?" > "$d/eval.json"
    got=$("$TANDEM" evaluate "${M[@]}" --data "$d/eval.json" --image-root "$W/data" --show 1 --max-new-tokens 12 \
      2>&1 | head -n 1 | sed -E 's/^(ok  |MISS) [a-z]+ +got (.*) want \?  loglik .*$/\2/; s/ +$//') \
      || { bad "$name: evaluate"; return; }
  fi
  local ref
  ref=$("$PY" - "$d/in" 12 "$IM_END" "$EOT" 2> "$d/ref.log" <<'PYEOF'
import json, sys
import numpy as np
import torch
sys.path.insert(0, "tests/model")
import ref_qwen3vl as R
d, n_new, stops = sys.argv[1], int(sys.argv[2]), {int(sys.argv[3]), int(sys.argv[4])}
cfg = json.load(open(d + "/config.json"))
W = {k: torch.tensor(a).double() for k, a in R.read_safetensors(d + "/weights.safetensors").items()}
b = R.read_safetensors(d + "/batch.safetensors")
ids = b["input_ids"].astype(np.int64)
first = int(np.nonzero(b["labels"].astype(np.int64) != -100)[0][0])  # the answer's first token
ids = list(ids[:first])
banned = {cfg["image_token_id"], cfg["video_token_id"]}
batch = dict(b)
batch.setdefault("image_grid_thw", np.zeros((0, 3), dtype=np.float32))  # text only: no pictures saved
out = []
with torch.no_grad():
    for _ in range(n_new):
        batch["input_ids"] = np.array(ids, dtype=np.float32)
        batch["cu_seqlens"] = np.array([0, len(ids)], dtype=np.float32)
        logits, _ = R.forward(W, cfg, batch)
        row = logits[-1].clone()
        for v in banned:
            row[v] = -float("inf")
        t = int(torch.argmax(row))
        top2 = torch.topk(row, 2).values
        print("# step %d: token %d, margin %.3g" % (len(out), t, float(top2[0] - top2[1])), file=sys.stderr)
        if t in stops:
            break
        out.append(t)
        ids.append(t)
print(" ".join(map(str, out)))
PYEOF
  ) || { bad "$name: reference"; tail -n 5 "$d/ref.log"; return; }
  local want=""
  [ -n "$ref" ] && want=$(echo "$ref" | "$TANDEM" tokenize --tokenizer "$W/tok.json" --decode)
  [ "$got" = "$want" ] && ok "$name: '$got' = the reference's greedy answer (tokens: ${ref:-none})" \
    || { bad "$name: generate '$got', reference '$want' (tokens: $ref)"; cat "$d/ref.log"; }
}

check "one picture" "Where is the triangle?" test_000000.png
check "another picture" "Describe the image." test_000001.png
check "two pictures" "Which shapes are drawn here?" test_000002.png test_000003.png
check "text only" "What colour is a ripe banana?"

finish
