#!/usr/bin/env bash
# cli_docs.sh - the documentation against the binary: every flag of `tandem train --help` is in
# docs/user-guide.md's flag table and every flag of the table is one `--help` lists (or one of the
# other names the parser accepts); docs/ab-protocol.md names every train flag ab refuses; every
# command that `tandem --help` lists answers its own --help; README.md's first two commands are
# scripts/demo.sh and scripts/test-all.sh.
#   TANDEM=build/tandem bash tests/train/cli_docs.sh
set -u
cd "$(dirname "$0")/../.."
TANDEM=${TANDEM:-build/tandem}
passed=0 failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { # NAME CONDITION-COMMAND...
  local name=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $name" >&2; fi
}

# flags as --help prints them (--config is described above the table, not in it)
"$TANDEM" train --help | grep -oE '^  --[a-z0-9-]+' | sed 's/^ *//' | grep -vx -- '--config' | sort -u \
  > "$tmp/help"
# the table: from its header row to the first blank line; '_' is '-' in flag names
awk '/^\| group \|/,/^$/' docs/user-guide.md | grep -oE -- '--[a-z0-9_-]+' | grep -vx -- '---' | tr _ - \
  | sort -u > "$tmp/guide"
# other names the parser takes for a listed flag, which the table gives beside it
printf '%s\n' --no-check-for-nan-in-loss-and-grad > "$tmp/aliases"
comm -23 "$tmp/help" "$tmp/guide" > "$tmp/missing"
comm -13 "$tmp/help" "$tmp/guide" | grep -vxF -f "$tmp/aliases" > "$tmp/extra"
check "train --help lists $(wc -l < "$tmp/help") flags" test -s "$tmp/help"
check "flags of train --help missing from the user guide's table: $(tr '\n' ' ' < "$tmp/missing")" \
  test ! -s "$tmp/missing"
check "flags of the user guide's table that train --help does not list: $(tr '\n' ' ' < "$tmp/extra")" \
  test ! -s "$tmp/extra"
for a in $(cat "$tmp/aliases"); do
  check "alias $a is accepted" bash -c "! '$TANDEM' train $a --help 2>&1 | grep -q 'unknown flag'"
done

# every command answers --help with exit 0 and a usage line
cmds=$("$TANDEM" --help | awk '/^commands:/{on=1; next} on && /^  [a-z]/{print $1}')
check "tandem --help lists commands" test -n "$cmds"
for c in $cmds; do
  check "tandem $c --help" bash -c "'$TANDEM' $c --help 2>&1 | grep -q '^usage: '"
done

# the train flags ab refuses (its --help prints src/ab/ab.c's list) are the ones docs/ab-protocol.md names
refused=$("$TANDEM" ab --help | awk '/which are refused/{on=1; next} on && /^    --/{print; next} {on=0}' \
  | tr ' ' '\n' | grep -E '^--' | sort -u)
check "ab --help lists the flags ab refuses" test -n "$refused"
for f in $refused; do
  check "docs/ab-protocol.md names $f among the flags ab refuses" grep -qF -- "\`$f\`" docs/ab-protocol.md
done

# the project's rule: README.md opens with these two commands
first=$(awk '/^```/{n++; next} n == 1 {print $1}' README.md | head -n 2 | tr '\n' ' ')
check "README.md's first two commands are scripts/demo.sh and scripts/test-all.sh (got: $first)" \
  test "$first" = "scripts/demo.sh scripts/test-all.sh "

echo "cli_docs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
