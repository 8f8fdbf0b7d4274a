#!/usr/bin/env bash
# cli_gen_data.sh - `tandem gen-data`: flags, errors, determinism, the files it writes.
#   TANDEM=build/tandem bash tests/data/cli_gen_data.sh
set -u
cd "$(dirname "$0")/../.."
TANDEM=${TANDEM:-build/tandem}
passed=0 failed=0
check() { # description, then a command that must succeed
  local what=$1; shift
  if "$@" >/dev/null 2>&1; then passed=$((passed + 1)); else echo "FAIL: $what" >&2; failed=$((failed + 1)); fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check "--help exits 0 and documents --out" bash -c "'$TANDEM' gen-data --help | grep -q -- --out"
check "missing --out is an error" bash -c "! '$TANDEM' gen-data --samples 3"
check "a bad number is an error naming the flag" bash -c "'$TANDEM' gen-data --out '$tmp/x' --samples abc 2>&1 | grep -q -- --samples"
check "an unknown flag is an error" bash -c "! '$TANDEM' gen-data --out '$tmp/x' --frobnicate 1"
check "min > max is an error" bash -c "! '$TANDEM' gen-data --out '$tmp/x' --min-size 100 --max-size 80"
check "an unwritable folder is an error" bash -c "! '$TANDEM' gen-data --out /proc/no/such/dir --samples 2"
check "default run" "$TANDEM" gen-data --out "$tmp/a"
check "2000 training samples" bash -c "[ \$(grep -c '\"messages\"' '$tmp/a/train.json') = 2000 ]"
check "200 held-out samples" bash -c "[ \$(grep -c '\"messages\"' '$tmp/a/test.json') = 200 ]"
check "same seed, same bytes" bash -c "'$TANDEM' gen-data --out '$tmp/b' >/dev/null && diff -r '$tmp/a' '$tmp/b'"
check "another seed, other data" bash -c "'$TANDEM' gen-data --out '$tmp/c' --seed 9 --samples 50 --heldout 5 && ! cmp -s '$tmp/a/train.json' '$tmp/c/train.json'"
check "the default data supports the demo's 1024-id tokenizer" "$TANDEM" train-tokenizer --data "$tmp/a/train.json" --vocab-size 1024 --out "$tmp/tok.json"
check "held-out answers are closed (no captions)" bash -c "! grep -q 'Describe' '$tmp/a/test.json'"
check "PNG sizes within --min-size/--max-size" /usr/bin/python3 - "$tmp/c" <<'PY'
import json, os, sys
from PIL import Image
d = sys.argv[1]
for s in json.load(open(os.path.join(d, "train.json"))):
    for p in s["images"]:
        w, h = Image.open(os.path.join(d, p)).size
        assert 64 <= w <= 128 and 64 <= h <= 128, (p, w, h)
PY
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
