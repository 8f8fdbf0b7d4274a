#!/usr/bin/env bash
# cli_evaluate.sh - tandem evaluate on the tiny model (24 training steps, saved):
#   - the accuracy against an independent computation: each sample's greedy answer from
#     `tandem generate` (the same prompt: the image, then the question), compared in Python
#     with the reference after stripping whitespace, overall and per question kind;
#   - --show prints one line per sample, the texts as compared (trimmed, a newline inside
#     written as \n): a reference that ended in a newline used to break its line in two;
#   - the question kind is read from the whole question, however long (it was told from
#     the first 511 characters only);
#   - each reference's log-likelihood (--show, --out) against the training loss of the same
#     sample (`tandem dump-grads` on it alone: the mean over labelled tokens of -log p);
#   - generate --do-sample: a seed reproduces the text, other seeds give other texts,
#     the KV cache does not change it, --top-k 1 gives the greedy answer, sampling flags without
#     --do-sample are refused.
# Env: TANDEM (build/tandem).
. "$(dirname "$0")/lib.sh"
tiny_setup 32 12
"$MPIRUN" "${MPIFLAGS[@]}" -np 1 "$TANDEM" train --model "$W/model" --tokenizer "$W/tok.json" \
  --data "$W/data/train.json" --micro-batch-size 4 --global-batch-size 4 --lr 3e-3 --lr-warmup-iters 1 \
  --train-iters 24 \
  --seq-length 512 --seed 7 --save "$W/ck" > "$W/train.log" 2>&1 || { bad "train"; tail -n 5 "$W/train.log"; }
M=(--model "$W/model" --tokenizer "$W/tok.json" --load "$W/ck")

# --- 1. accuracy: evaluate against generate + Python -------------------------------------
# The held-out set with a long question (the kind word past character 511); every sample:
# one image, then the question. (24 steps: the model answers something, not nothing.)
"$PY" - "$W/data/test.json" "$W/data/eval.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
d[0]["messages"][0]["content"] = "<image>" + "Look at the picture closely. " * 20 + "What colour is the circle?"
for s in d:
    assert s["messages"][0]["content"].startswith("<image>") and len(s["images"]) == 1
json.dump(d, open(sys.argv[2], "w"))
PYEOF
n=$("$PY" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$W/data/eval.json")
: > "$W/answers.txt"
for ((i = 0; i < n; i++)); do
  sample() { "$PY" -c 'import json, sys; s = json.load(open(sys.argv[1]))[int(sys.argv[2])]; print(eval(sys.argv[3]))' \
    "$W/data/eval.json" "$i" "$1"; }
  q=$(sample 's["messages"][0]["content"][7:]')
  img=$(sample 's["images"][0]')
  a=$("$TANDEM" generate "${M[@]}" --image "$W/data/$img" --prompt "$q" --max-new-tokens 16) \
    || bad "generate sample $i"
  printf '%s\n' "$a" | "$PY" -c 'import json, sys; print(json.dumps(sys.stdin.read()[:-1]))' >> "$W/answers.txt"
done
# references: two right up to surrounding whitespace (one ends in a newline), one wrong (a newline inside)
"$PY" - "$W/data/eval.json" "$W/answers.txt" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
answers = [json.loads(l) for l in open(sys.argv[2])]
d[1]["messages"][-1]["content"] = " " + answers[1] + " \n"
d[2]["messages"][-1]["content"] = "\t" + answers[2] + "\n\n"
d[3]["messages"][-1]["content"] = answers[3] + "\nx"
json.dump(d, open(sys.argv[1], "w"))
PYEOF
"$TANDEM" evaluate "${M[@]}" --data "$W/data/eval.json" --show "$n" > "$W/eval.out" 2> "$W/eval.err" \
  || { bad "evaluate"; cat "$W/eval.err"; }
# the expected report: kinds as the documentation states them, in order of first appearance
want=$("$PY" - "$W/data/eval.json" "$W/answers.txt" <<'PYEOF'
import json, re, sys
d = json.load(open(sys.argv[1]))
answers = [json.loads(l) for l in open(sys.argv[2])]
def kind(q, ref):
    q = q.lower()
    if "colour" in q or "color" in q: return "colour"
    if re.fullmatch(r"[0-9][0-9\s]*", ref.lstrip()) or any(w in q for w in ("how many", "count", "number of")):
        return "count"
    if any(w in q for w in ("where", "located", "position", "which part", "in which")): return "position"
    if "shape" in q: return "shape"
    return "other"
kinds, total, right = {}, 0, 0
for s, a in zip(d, answers):
    q, ref = s["messages"][0]["content"], s["messages"][1]["content"]
    k = kind(q, ref)
    good = int(a.strip(" \t\n\v\f\r") == ref.strip(" \t\n\v\f\r"))
    kinds.setdefault(k, [0, 0])
    kinds[k][0] += 1
    kinds[k][1] += good
    total, right = total + 1, right + good
print("accuracy: %.2f%% (%d of %d)" % (100.0 * right / total, right, total))
for k, (n, c) in kinds.items():
    print("  %-16s %6.2f%% (%d of %d)" % (k, 100.0 * c / n, c, n))
PYEOF
)
got=$(grep -E '^(accuracy: |  )' "$W/eval.out")
[ -n "$want" ] && [ "$got" = "$want" ] && ok "evaluate = generate + Python: $(echo "$got" | head -n 1)" \
  || { bad "evaluate's report differs from the independent computation"; diff <(echo "$want") <(echo "$got"); }

# --- 2. --show: one line per sample -------------------------------------------------------
[ "$(grep -cE '^(ok  |MISS) ' "$W/eval.out")" -eq "$n" ] \
  && [ "$(wc -l < "$W/eval.out")" -eq $((n + $(echo "$want" | wc -l) + 1)) ] \
  && ok "--show $n: $n sample lines, then the report" || { bad "--show lines"; cat -A "$W/eval.out" | head -n 20; }
head -n 1 "$W/eval.out" | grep -qE '^(ok  |MISS) colour ' \
  && ok "a question of 600 characters is told by its whole wording (colour)" \
  || { bad "the long question's kind"; head -n 1 "$W/eval.out"; }

# --- 3. log-likelihood = minus the training loss on the same sample -----------------------
"$TANDEM" evaluate "${M[@]}" --data "$W/data/eval.json" --out "$W/eval.jsonl" > "$W/eval2.out" 2>&1 \
  || { bad "evaluate --out"; cat "$W/eval2.out"; }
[ "$(wc -l < "$W/eval.jsonl")" -eq "$n" ] && ok "--out: $n JSON lines" || bad "--out lines"
grep -q '^log-likelihood of the references: ' "$W/eval2.out" && ok "the report gives the mean log-likelihood" \
  || bad "no log-likelihood line in the report"
for i in 0 1 3; do
  "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); json.dump([d[int(sys.argv[2])]], open(sys.argv[3], "w"))' \
    "$W/data/eval.json" "$i" "$W/one$i.json"
  loss=$("$TANDEM" dump-grads "${M[@]:0:4}" --load "$W/ck/iter_0000024/model.safetensors" --data "$W/one$i.json" \
    --image-root "$W/data" --out "$W/g$i.safetensors" 2>&1 | grep -E '^loss ')
  "$PY" - "$W/eval.jsonl" "$i" "$loss" <<'PYEOF' && ok "sample $i: log-likelihood = -(training loss) x tokens ($loss)" \
    || bad "sample $i: log-likelihood against the training loss ($loss)"
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[int(sys.argv[2])])
w = sys.argv[3].split()
loss, tokens = float(w[1]), int(w[3])
print("loglik %r over %d, loss %r over %d" % (r["loglik_sum"], r["loglik_tokens"], loss, tokens))
assert r["loglik_tokens"] == tokens, "token counts differ"
assert abs(r["loglik_mean"] + loss) <= 1e-5 * max(1.0, loss), "means differ"
assert abs(r["loglik_sum"] - r["loglik_mean"] * tokens) <= 1e-6 * max(1.0, abs(r["loglik_sum"]))
PYEOF
done

# --- 4. generate --do-sample --------------------------------------------------------------
img=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))[0]["images"][0])' "$W/data/eval.json")
G=("$TANDEM" generate "${M[@]}" --image "$W/data/$img" --prompt "Describe the image." --max-new-tokens 12)
greedy=$("${G[@]}") || bad "generate (greedy)"
a=$("${G[@]}" --do-sample --temperature 1.5 --seed 5) && b=$("${G[@]}" --do-sample --temperature 1.5 --seed 5) \
  && [ "$a" = "$b" ] && ok "--seed 5 twice: the same text ('$a')" || bad "--seed 5 twice: '$a' then '$b'"
c=$("${G[@]}" --do-sample --temperature 1.5 --seed 5 --no-kv-cache) && [ "$c" = "$a" ] \
  && ok "--seed 5 with and without the KV cache: the same text" || bad "--seed 5: cache '$a', no cache '$c'"
texts=$(for s in 1 2 3 4 5 6; do "${G[@]}" --do-sample --temperature 1.5 --seed $s; echo "|"; done | sort -u | wc -l)
[ "$texts" -ge 2 ] && ok "6 seeds at temperature 1.5: $texts different texts" || bad "6 seeds gave one text"
k1=$("${G[@]}" --do-sample --top-k 1 --seed 9) && [ "$k1" = "$greedy" ] \
  && ok "--do-sample --top-k 1 = greedy ('$greedy')" || bad "--top-k 1 '$k1', greedy '$greedy'"
t0=$("${G[@]}" --do-sample --temperature 0 --seed 9) && [ "$t0" = "$greedy" ] \
  && ok "--do-sample --temperature 0 = greedy" || bad "--temperature 0 '$t0', greedy '$greedy'"
e=$("${G[@]}" --temperature 0.7 2>&1); rc=$?
[ "$rc" -eq 2 ] && [ "$(echo "$e" | wc -l)" -eq 1 ] && echo "$e" | grep -q -- '--temperature: applies only with --do-sample' \
  && ok "--temperature without --do-sample: refused in one sentence" || bad "--temperature alone: rc $rc: $e"

finish
