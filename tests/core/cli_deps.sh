#!/usr/bin/env bash
# cli_deps.sh - scripts/check-deps.sh: the tree follows the module order, and an include against it
# is caught with its file and line.
set -u
cd "$(dirname "$0")/../.."
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if out=$(scripts/check-deps.sh 2>&1); then ok; else bad "the tree breaks the module order: $out"; fi

# a copy of the Makefile and the sources, then core made to use the model and kernels the trainer
cp Makefile "$tmp/" && mkdir -p "$tmp/src" && cp -r src/core src/kernels src/model src/train "$tmp/src/"
printf '#include "model/config.h"\n' >> "$tmp/src/core/rng.c"
sed -i '1i #include "train/args.h"' "$tmp/src/kernels/vec.h"
out=$(scripts/check-deps.sh "$tmp" 2>&1); rc=$?
if [ $rc -eq 1 ]; then ok; else bad "an include against the order exited $rc, expected 1"; fi
n=$(grep -c 'rng.c' <<<"$out")
if grep -qE '^src/core/rng\.c:[0-9]+: module core includes model/' <<<"$out"; then ok; else bad "core -> model not named: $out"; fi
if grep -qE '^src/kernels/vec\.h:1: module kernels includes train/' <<<"$out"; then ok; else bad "kernels -> train not named: $out"; fi
if [ "$n" -eq 1 ]; then ok; else bad "expected one line for rng.c, got $n"; fi

# a module folder the Makefile does not know
mkdir -p "$tmp/src/extra" && echo 'int x;' > "$tmp/src/extra/x.c"
if scripts/check-deps.sh "$tmp" | grep -q 'src/extra/: a module without a DEPS_extra line'; then ok
else bad "an unknown module folder is not reported"; fi

# no Makefile
if scripts/check-deps.sh "$tmp/src" 2>&1 | grep -q 'Makefile: not found'; then ok; else bad "a missing Makefile is not named"; fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
