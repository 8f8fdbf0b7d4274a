#!/usr/bin/env bash
# cli_train.sh - tandem train end to end on the tiny model and generated data, 2 ranks:
#   resume (6 steps in one run == 3 + --load + 3, every loss and grad norm to the last digit,
#   and the final parameters), dp=1 vs dp=2 at the same global batch, loading a dp=2
#   distributed-optimizer checkpoint into dp=1, SIGTERM (saves and exits 0), bad flags and
#   bad checkpoints (one sentence, non-zero exit on every rank), NaN injection.
# Env: TANDEM (build/tandem), MPIRUN (mpirun.openmpi or mpirun.mpich).
. "$(dirname "$0")/lib.sh"
tiny_setup 96 8

COMMON=(--model "$W/model" --tokenizer "$W/tok.json" --data "$W/data/train.json" --micro-batch-size 2
        --global-batch-size 8 --lr 1e-3 --lr-warmup-iters 1 --lr-decay-style cosine --seq-length 512 --seed 7)
train() { # ranks, args...
  local n=$1; shift
  "$MPIRUN" "${MPIFLAGS[@]}" -np "$n" "$TANDEM" train "${COMMON[@]}" "$@"
}
# loss and grad norm of every step, all digits, from metrics.jsonl
curve() { sed -E 's/.*"iteration":([0-9]+).*"loss":([^,]+),"grad_norm":([^,]+),.*/\1 \2 \3/' "$1"; }
checksum() { sed -nE 's/.*parameters checksum ([0-9a-f]+).*/\1/p' "$1"; }

# --- 1. resume is bitwise -------------------------------------------------------------
D=(--use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 400000 --train-iters 6)
train 2 "${D[@]}" --run-dir "$W/full" > "$W/full.log" 2>&1 || bad "uninterrupted run (see below)"
train 2 "${D[@]}" --run-dir "$W/res" --save "$W/ck" --exit-interval 3 > "$W/a.log" 2>&1 || bad "first half"
train 2 "${D[@]}" --run-dir "$W/res" --load "$W/ck" > "$W/b.log" 2>&1 || bad "second half"
if [ "$(curve "$W/full/metrics.jsonl")" = "$(curve "$W/res/metrics.jsonl")" ] && [ "$(wc -l < "$W/full/metrics.jsonl")" -eq 6 ]; then
  ok "resume: 6 steps == 3 + --load + 3, every loss and grad norm identical to the last digit"
else
  bad "resume differs"; diff <(curve "$W/full/metrics.jsonl") <(curve "$W/res/metrics.jsonl") | head
fi
[ -n "$(checksum "$W/full.log")" ] && [ "$(checksum "$W/full.log")" = "$(checksum "$W/b.log")" ] && ok "resume: final parameters bitwise equal" || bad "resume: parameter checksums differ"
grep -q "^\[.*\] iteration        3/       6 | consumed samples:           24 | elapsed time per iteration (ms): [0-9.]* | learning rate: [0-9].[0-9]\{6\}E-0[0-9] | global batch size:     8 | lm loss: [0-9].[0-9]\{6\}E+00 | loss scale: 1.0 | grad norm: [0-9.]* | number of skipped iterations:   0 | number of nan iterations:   0 |$" "$W/full.log" \
  && ok "the iteration line has Megatron's format" || bad "iteration line format"
grep -q "^------------------------ arguments ------------------------$" "$W/full.log" && grep -q "^  overlap_grad_reduce \.* True$" "$W/full.log" \
  && ok "arguments block printed" || bad "arguments block"
grep -q "overlap_grad_reduce=True" "$W/full.log" && ok "DDP config line printed" || bad "DDP config line"
# rank 0 writes the Adam state as the ranks stream their shards to it, parameter by parameter
# (buckets of 400,000 elements cut parameters between the ranks); the plain optimizer's rank 0
# writes its own whole copy: the two files must be the same bytes
train 2 --ddp-bucket-size 400000 --train-iters 6 --save "$W/ck_plain" --exit-interval 3 > "$W/plain.log" 2>&1 \
  && cmp -s "$W/ck/iter_0000003/optimizer.safetensors" "$W/ck_plain/iter_0000003/optimizer.safetensors" \
  && cmp -s "$W/ck/iter_0000003/model.safetensors" "$W/ck_plain/iter_0000003/model.safetensors" \
  && ok "optimizer state streamed from 2 shards == the plain optimizer's copy, byte for byte" \
  || { bad "the distributed optimizer's checkpoint differs from the plain one's"; tail -n 3 "$W/plain.log"; }
[ -f "$W/ck/iter_0000003/model.safetensors" ] && [ "$(cat "$W/ck/latest_checkpointed_iteration.txt")" = 3 ] && ok "checkpoint layout iter_0000003 + tracker" || bad "checkpoint layout"

# each rank read its shard of the Adam state and its share of the blocks nobody's shard held
# (the blocks were all checked: a damaged block fails the load, faults/cli_ckpt_corrupt.sh)
read_mib=$(sed -nE 's/.*optimizer state: rank 0 read ([0-9.]+) of ([0-9.]+) MiB.*/\1 \2/p' "$W/b.log")
if [ -n "$read_mib" ] && awk -v r="$read_mib" 'BEGIN { split(r, x, " "); exit !(x[1] > 0 && x[1] < 0.75 * x[2]) }'; then
  ok "resume at dp=2: rank 0 read $read_mib MiB of optimizer.safetensors (its shard)"
else
  bad "resume at dp=2: rank 0's read of optimizer.safetensors: '${read_mib:-no log line}'"
fi
! grep -q "^note: resuming" "$W/b.log" && ok "resume with the same flags and config: no note" \
  || bad "resume noted a change: $(grep -m1 '^note: resuming' "$W/b.log")"
# the same shapes under another rope_theta, and a longer schedule: both change the numbers, both are noted
mkdir -p "$W/model_rope"; cp "$W/model/"*.json "$W/model_rope/"
sed -i -E 's/"rope_theta": [0-9.e+]+/"rope_theta": 10000/' "$W/model_rope/config.json"
/usr/bin/python3 - "$W/model_rope/preprocessor_config.json" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1])); p["image_mean"] = [0.4, 0.4, 0.4]; json.dump(p, open(sys.argv[1], "w"))
PYEOF
"$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train "${COMMON[@]}" --model "$W/model_rope" --use-distributed-optimizer \
  --ddp-bucket-size 400000 --train-iters 8 --load "$W/ck" > "$W/rope.log" 2>&1 \
  && grep -q 'model config that differs from its config.json (first at "text_config.rope_theta"' "$W/rope.log" \
  && grep -q 'preprocessor config that differs from its preprocessor_config.json (first at "image_mean\[0\]"' "$W/rope.log" \
  && grep -qE "with flags that change the numerics \(the learning-rate decay span \(--lr-decay-iters, else --train-iters\) 6 -> 8\)" "$W/rope.log" \
  && ok "config and schedule changes on resume noted, naming the flag and both values" \
  || { bad "resume with another rope_theta and --train-iters"; grep -m3 "note\|error" "$W/rope.log"; }

# --- 2. dp=1 vs dp=2 with the same global batch ---------------------------------------
train 1 --train-iters 3 --run-dir "$W/dp1" > "$W/dp1.log" 2>&1 || bad "dp=1 run"
train 2 --train-iters 3 --run-dir "$W/dp2" > "$W/dp2.log" 2>&1 || bad "dp=2 run"
if paste <(curve "$W/dp1/metrics.jsonl") <(curve "$W/dp2/metrics.jsonl") | awk '
    { d = ($2 - $5) / $5; if (d < 0) d = -d; if (d > m) m = d; n++ }
    END { printf "max relative loss difference dp1/dp2: %.3g over %d steps\n", m, n; exit !(n == 3 && m < 1e-4) }'; then
  ok "dp=1 vs dp=2: losses equal within 1e-4 relative"
else
  bad "dp=1 vs dp=2 losses differ"
fi

# --- 3. a dp=2 distributed-optimizer checkpoint loads into dp=1 ------------------------
train 1 "${D[@]}" --run-dir "$W/res1" --load "$W/ck" > "$W/c.log" 2>&1 && grep -q "loaded checkpoint" "$W/c.log" \
  && ok "dp=2 distributed-optimizer checkpoint resumes at dp=1" || { bad "dp change on load"; tail -3 "$W/c.log"; }
if paste <(curve "$W/res/metrics.jsonl" | tail -3) <(curve "$W/res1/metrics.jsonl") | awk '
    { d = ($2 - $5) / $5; if (d < 0) d = -d; if (d > m) m = d; n++ } END { exit !(n == 3 && m < 1e-4) }'; then
  ok "dp=1 continuation matches dp=2 within 1e-4"
else
  bad "dp=1 continuation differs"
fi

# --- 4. SIGTERM: finish the step, save, exit 0 ----------------------------------------
# mpirun itself is started here (not through the function) so $! is its pid
"$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train "${COMMON[@]}" --train-iters 100000 --save "$W/ckt" > "$W/t.log" 2>&1 &
mp=$!
for _ in $(seq 1 240); do grep -q "iteration        2/" "$W/t.log" && break; sleep 0.25; done
# the ranks, not mpirun: Open MPI starts them as its children, MPICH's hydra under a proxy
# (by argv[0]: tandem may have re-executed itself through /proc/self/exe, which renames its comm)
ranks=$(for p in $(pgrep -f -- "--save $W/ckt"); do
          [ "$(ps -o args= -p "$p" | cut -d' ' -f1)" = "$TANDEM" ] && echo "$p"; done)
if [ -n "$ranks" ]; then kill -TERM $ranks; else kill -KILL "$mp"; fi
wait "$mp"; rc=$?
if [ "$rc" -eq 0 ] && grep -q "stopping on a signal" "$W/t.log" && [ -f "$W/ckt/latest_checkpointed_iteration.txt" ]; then
  ok "SIGTERM: saved iteration $(cat "$W/ckt/latest_checkpointed_iteration.txt") and exited 0"
else
  bad "SIGTERM (rc $rc)"; tail -3 "$W/t.log"
fi

mkdir -p "$W/model2"; cp "$W/model/"*.json "$W/model2/"
sed -i 's/"intermediate_size": 768/"intermediate_size": 512/' "$W/model2/config.json"

# --- 5. generate and evaluate from a checkpoint ------------------------------------------
out=$("$TANDEM" evaluate --model "$W/model" --tokenizer "$W/tok.json" --load "$W/ck" --data "$W/data/test.json" --limit 4 --show 4 2>&1)
if printf '%s\n' "$out" | grep -qE '^accuracy: [0-9.]+% \([0-9] of 4\)$'; then ok "evaluate: $(printf '%s\n' "$out" | grep '^accuracy')"; else bad "evaluate"; printf '%s\n' "$out" | tail -3; fi
img=$(ls "$W/data/images/" | head -1)
out=$("$TANDEM" generate --model "$W/model" --tokenizer "$W/tok.json" --load "$W/ck/iter_0000003" --image "$W/data/images/$img" --prompt "How many shapes are there?" --max-new-tokens 4 2>&1); rc=$?
[ "$rc" -eq 0 ] && ok "generate answers '$out'" || { bad "generate (rc $rc)"; printf '%s\n' "$out" | tail -2; }
a=$("$TANDEM" generate --model "$W/model" --tokenizer "$W/tok.json" --load "$W/ck/iter_0000003" --image "$W/data/images/$img" --prompt "How many shapes are there?" --max-new-tokens 16 2>&1)
b=$("$TANDEM" generate --model "$W/model" --tokenizer "$W/tok.json" --load "$W/ck/iter_0000003" --image "$W/data/images/$img" --prompt "How many shapes are there?" --max-new-tokens 16 --no-kv-cache 2>&1)
[ "$a" = "$b" ] && ok "generate with an image: KV cache = full forward ('$a')" || bad "generate with an image: cache '$a' vs no cache '$b'"
out=$("$TANDEM" generate --model "$W/model2" --tokenizer "$W/tok.json" --load "$W/ck" --prompt "hi" 2>&1); rc=$?
[ "$rc" -ne 0 ] && printf '%s\n' "$out" | grep -q "another model shape" && ok "generate refuses a checkpoint of another shape" || bad "generate with another shape (rc $rc)"

# An untrained model may pick <|image_pad|>; fed back, it would be a vision row without an image (the
# next forward failed: "1 image-pad tokens but the images hold 0 merged patches"). Weights made so that
# image_pad is always the top logit: every layer adds zero, every embedding row is e_0, the final norm
# keeps it, lm_head scores e_0 with +1 for image_pad, +0.5 for "a" and -1 for every other token. Greedy
# decoding must skip the placeholder and answer with the next best token, "a", again and again.
pad_id=$(sed -nE 's/.*"image_token_id": *([0-9]+).*/\1/p' "$W/model/config.json")
a_id=$(echo a | "$TANDEM" tokenize --tokenizer "$W/tok.json")
if /usr/bin/python3 - "$W/ck/iter_0000003/model.safetensors" "$W/pad.safetensors" "$pad_id" "$a_id" <<'PYEOF'
import array, json, struct, sys
src, dst, pad, a_id = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
f = open(src, "rb")
n = struct.unpack("<Q", f.read(8))[0]
head = json.loads(f.read(n))
meta = head.pop("__metadata__", None)
out_head, blobs, off = {}, [], 0
for name in sorted(head, key=lambda k: head[k]["data_offsets"][0]):
    t = head[name]
    assert t["dtype"] == "F32", t["dtype"]
    shape = t["shape"]
    count = 1
    for d in shape:
        count *= d
    a = array.array("f", bytes(4 * count))
    if name == "model.language_model.embed_tokens.weight":
        for r in range(shape[0]):
            a[r * shape[1]] = 1.0
    elif name == "model.language_model.norm.weight":
        a = array.array("f", [1.0] * count)
    elif name == "lm_head.weight":
        for r in range(shape[0]):
            a[r * shape[1]] = 1.0 if r == pad else 0.5 if r == a_id else -1.0
    b = a.tobytes()
    out_head[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
if meta:
    out_head["__metadata__"] = meta
hj = json.dumps(out_head).encode()
hj += b" " * (-len(hj) % 8)
with open(dst, "wb") as o:
    o.write(struct.pack("<Q", len(hj)) + hj)
    for b in blobs:
        o.write(b)
PYEOF
then
  out=$("$TANDEM" generate --model "$W/model" --tokenizer "$W/tok.json" --hf-weights "$W/pad.safetensors" --prompt "hi" --max-new-tokens 3 2>&1); rc=$?
  [ "$rc" -eq 0 ] && [ "$out" = aaa ] && ok "generate skips <|image_pad|> when it is the top logit" || { bad "generate with image_pad on top (rc $rc, '$out')"; printf '%s\n' "$out" | tail -2; }
  # the KV cache path and the full forward at every step give the same tokens (these weights never stop: 24 of
  # them); the cache's numerics against the full forward are tests/model/test_decode.c's
  a=$("$TANDEM" generate --model "$W/model" --tokenizer "$W/tok.json" --hf-weights "$W/pad.safetensors" --prompt "hi" --max-new-tokens 24 2>&1)
  b=$("$TANDEM" generate --model "$W/model" --tokenizer "$W/tok.json" --hf-weights "$W/pad.safetensors" --prompt "hi" --max-new-tokens 24 --no-kv-cache 2>&1)
  [ "$a" = aaaaaaaaaaaaaaaaaaaaaaaa ] && [ "$a" = "$b" ] && ok "generate: KV cache = full forward over 24 tokens" || bad "generate: cache '$a' vs no cache '$b'"
else
  bad "could not write the image_pad weights"
fi

# --- 6. errors: one sentence, non-zero exit on every rank -----------------------------
expect_error() { # name, pattern, command...
  local name=$1 pat=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne 0 ] && printf '%s\n' "$out" | grep -q -- "$pat"; then
    ok "$name: exit $rc, '$(printf '%s\n' "$out" | grep -m1 -- "$pat" | cut -c1-110)'"
  else
    bad "$name (rc $rc)"; printf '%s\n' "$out" | tail -4
  fi
}
expect_error "misspelt flag" "did you mean '--micro-batch-size'" train 2 --micro-batch-sise 2
expect_error "indivisible global batch" "divisible by --micro-batch-size x data-parallel size = 2 x 2 = 4" train 2 --global-batch-size 6
expect_error "overlap-param-gather alone" "requires --use-distributed-optimizer" train 2 --overlap-param-gather
expect_error "missing tokenizer file" "tandem train: .*nonexistent.json" "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train --model "$W/model" --tokenizer "$W/nonexistent.json" --data "$W/data/train.json" --global-batch-size 8 --micro-batch-size 2
expect_error "load without tracker" "no latest_checkpointed_iteration.txt" train 2 --train-iters 2 --load "$W/data"
# Megatron's auto-restart idiom: --save ck --load ck starts from scratch on the first launch, resumes after
train 2 --train-iters 2 --save "$W/auto" --load "$W/auto/" > "$W/auto1.log" 2>&1 \
  && grep -q "no checkpoint there yet (it is also --save): starting from iteration 0" "$W/auto1.log" \
  && train 2 --train-iters 3 --save "$W/auto" --load "$W/auto" > "$W/auto2.log" 2>&1 \
  && grep -q "loaded checkpoint .*iter_0000002 at iteration 2" "$W/auto2.log" && ok "--save ck --load ck: first launch, then resume" \
  || { bad "--save ck --load ck"; tail -n 3 "$W/auto1.log" "$W/auto2.log"; }
expect_error "checkpoint of another shape" "another model shape" "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train "${COMMON[@]}" --model "$W/model2" --train-iters 6 --load "$W/ck"
expect_error "injected NaN" "tandem train: .*iteration 2" train 2 --train-iters 4 --inject-nan-at 2:1
# --freeze-lm-head on a tied model would do nothing without a word: the run says so
mkdir -p "$W/tied" && cp "$W/model/preprocessor_config.json" "$W/tied/" \
  && sed -E 's/"tie_word_embeddings": *false/"tie_word_embeddings": true/' "$W/model/config.json" > "$W/tied/config.json"
train 2 --model "$W/tied" --train-iters 2 --freeze-lm-head > "$W/tied.log" 2>&1 \
  && grep -q "freeze-lm-head: .* ties lm_head to embed_tokens" "$W/tied.log" && ok "--freeze-lm-head on a tied model: warned" \
  || { bad "--freeze-lm-head on a tied model"; grep -m3 "tandem\|warning" "$W/tied.log"; }

finish
