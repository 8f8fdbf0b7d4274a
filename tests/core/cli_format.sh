#!/usr/bin/env bash
# cli_format.sh - every C file under src/, tests/, bench/ and fuzz/ is as clang-format (.clang-format)
# writes it. A file that is not prints its name and the first lines clang-format would change; fix with
#   clang-format -i FILE
set -u
cd "$(dirname "$0")/../.."
# The style is what Debian 12's clang-format 14 writes; another version formats some lines otherwise.
if ! command -v clang-format >/dev/null; then
  echo "skipped: clang-format is not installed (scripts/setup.sh installs it)"; echo "0 passed, 0 failed"; exit 0
fi
if ! clang-format --version | grep -q 'version 14\.'; then
  echo "skipped: $(clang-format --version | head -n 1) is not clang-format 14, which defines the style"
  echo "0 passed, 0 failed"; exit 0
fi
passed=0 failed=0
while IFS= read -r f; do
  if d=$(clang-format --style=file "$f" | diff -u "$f" - 2>&1); then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $f is not formatted (clang-format -i $f):"
    printf '%s\n' "$d" | sed -n '3,14p'
  fi
done < <(git ls-files 'src/*.[ch]' 'tests/*.[ch]' 'bench/*.[ch]' 'fuzz/*.[ch]' 2>/dev/null || find src tests bench fuzz -name '*.[ch]')
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
