#!/usr/bin/env bash
# Gradient parity of the C model against an independent PyTorch reference (float64,
# written from the spec): for every case of test_parity_dump, dump weights, batch, loss,
# logits and gradients, then compare with tests/model/ref_qwen3vl.py.
# Tolerance: max|c - ref| / max|ref| per tensor <= 1e-4 (fp32 against float64; the
# observed worst case is printed per case).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
DUMP=$BUILD/tests/model/test_parity_dump
PY=/usr/bin/python3
TOL=${PARITY_TOL:-1e-4}
passed=0 failed=0
if [ ! -x "$DUMP" ]; then echo "missing $DUMP (make $DUMP)"; echo "0 passed, 1 failed"; exit 1; fi
if ! $PY -c 'import torch' 2>/dev/null; then echo "$PY cannot import torch"; echo "0 passed, 1 failed"; exit 1; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for c in $("$DUMP" --list); do
  mkdir -p "$tmp/$c"
  if ! "$DUMP" --dump "$tmp/$c" "$c"; then
    echo "FAIL $c: dump failed"; failed=$((failed + 1)); continue
  fi
  out=$($PY tests/model/ref_qwen3vl.py "$tmp/$c" --tol "$TOL" 2>&1); rc=$?
  printf '%s\n' "$out" | grep -v ' passed, .* failed$'
  if [ $rc -eq 0 ]; then passed=$((passed + 1)); else echo "FAIL $c"; failed=$((failed + 1)); fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
