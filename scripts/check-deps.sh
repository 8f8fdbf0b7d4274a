#!/usr/bin/env bash
# check-deps.sh - the module dependency direction, for headers as well as for the linker.
# Each folder of src/ is a module; the Makefile's DEPS_<module> lines say which modules it may use.
# Every `#include "m/..."` in src/<module>/ (and in tests/<module>/, which link the same libraries)
# must name the module itself or one of its DEPS. A violation prints FILE:LINE and the rule broken.
#   scripts/check-deps.sh [ROOT]      (ROOT: the repository, by default this script's)
set -u
ROOT=${1:-$(dirname "$0")/..}
cd "$ROOT" || exit 2
[ -f Makefile ] || { echo "check-deps: $PWD/Makefile: not found; expected the repository's Makefile" >&2; exit 2; }
declare -A deps
while IFS= read -r line; do
  m=${line%% *}; m=${m#DEPS_}
  deps[$m]=" $(echo "${line#*:=}" | xargs) "
done < <(grep -E '^DEPS_[a-z_]+ *:=' Makefile)
[ ${#deps[@]} -gt 0 ] || { echo "check-deps: Makefile has no DEPS_<module> := ... lines" >&2; exit 2; }
bad=0 checked=0
for dir in src/*/ tests/*/; do
  [ -d "$dir" ] || continue
  m=$(basename "$dir")
  if [ -z "${deps[$m]+x}" ]; then
    case $dir in src/*) echo "$dir: a module without a DEPS_$m line in the Makefile"; bad=$((bad + 1)) ;; esac
    continue
  fi
  while IFS=: read -r file lineno inc; do
    target=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"/]+)\/.*/\1/' <<<"$inc")
    [ "$target" = "$inc" ] && continue # no module folder named: a local header
    [ -d "src/$target" ] || continue   # tests' own folders (tests/<m>/x.h)
    checked=$((checked + 1))
    if [ "$target" != "$m" ] && [[ ${deps[$m]} != *" $target "* ]]; then
      echo "$file:$lineno: module $m includes $target/, which is not among DEPS_$m (${deps[$m]# })"
      bad=$((bad + 1))
    fi
  done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$dir" --include='*.c' --include='*.h')
done
if [ "$bad" -ne 0 ]; then
  echo "check-deps: $bad include(s) against the module order (Makefile DEPS_ lines)"
  exit 1
fi
echo "check-deps: $checked includes across modules follow the DEPS_ lines"
