#!/usr/bin/env bash
# Builds and runs every libFuzzer target in fuzz/ for FUZZ_SECONDS each (default 60).
# A target names the src/ modules it needs on a "fuzz-modules:" line. Inputs that
# once crashed live in fuzz/regressions/<target>/ and are replayed first, every run.
# Prints one "N passed, N failed" line (one per target).
#   FUZZ_SECONDS=10 scripts/fuzz.sh [name...]     (names: targets to run, e.g. image config)
set -uo pipefail
cd "$(dirname "$0")/.."
SECS=${FUZZ_SECONDS:-60}
OUT=build-fuzz
mkdir -p "$OUT"
MPI_CFLAGS=$(mpicc.openmpi -showme:compile 2>/dev/null)
MPI_LIBS=$(mpicc.openmpi -showme:link 2>/dev/null)
PKG_CFLAGS=$(pkg-config --cflags openblas libpng libjpeg libpcre2-8 libxxhash libutf8proc zlib)
PKG_LIBS=$(pkg-config --libs openblas libpng libjpeg libpcre2-8 libxxhash libutf8proc zlib)
# -march=native as in the Makefile: the kernels use 8-wide vectors
CFLAGS=(-std=c11 -D_GNU_SOURCE -O1 -g -march=native -ffp-contract=off -fsanitize=address,undefined -fno-sanitize-recover=undefined
        -Isrc $MPI_CFLAGS $PKG_CFLAGS)
passed=0 failed=0
for src in fuzz/fuzz_*.c; do
  name=$(basename "$src" .c); target=${name#fuzz_}
  if [ $# -gt 0 ] && [[ " $* " != *" $target "* ]]; then continue; fi
  mods=$(sed -n "s/.*fuzz-modules:\s*\([a-z ]*\).*/\1/p" "$src" | head -n1)
  echo "== fuzz $target (modules: $mods)"
  objs=() built=1
  for m in $mods; do
    for c in src/"$m"/*.c; do
      o="$OUT/obj/${c%.c}.o"; objs+=("$o")
      # module objects are shared by the targets; rebuilt when the source or any header is newer
      if [ ! -f "$o" ] || [ "$c" -nt "$o" ] || [ -n "$(find src -name '*.h' -newer "$o" -print -quit)" ]; then
        mkdir -p "$(dirname "$o")"
        clang "${CFLAGS[@]}" -fsanitize=fuzzer-no-link -c "$c" -o "$o" || built=0
      fi
    done
  done
  if [ $built = 0 ] || ! clang "${CFLAGS[@]}" -fsanitize=fuzzer -o "$OUT/$name" "$src" "${objs[@]}" \
       $MPI_LIBS $PKG_LIBS -lm -pthread; then
    echo "fuzz $target: build failed"; failed=$((failed + 1)); continue
  fi
  corpus="$OUT/corpus-$target"; mkdir -p "$corpus"
  [ -d "fuzz/corpus/$target" ] && cp -n fuzz/corpus/"$target"/* "$corpus"/ 2>/dev/null
  ok=1
  if [ -d "fuzz/regressions/$target" ] && ls fuzz/regressions/"$target"/* >/dev/null 2>&1; then
    "$OUT/$name" fuzz/regressions/"$target"/* >"$OUT/$target-regress.log" 2>&1 || { ok=0; tail -n 30 "$OUT/$target-regress.log"; }
  fi
  if [ $ok = 1 ]; then
    (cd "$OUT" && ASAN_OPTIONS=detect_leaks=1 ./"$name" -max_total_time="$SECS" -max_len=65536 -rss_limit_mb=4096 \
        -artifact_prefix="crash-$target-" "corpus-$target" >"$target.log" 2>&1) || {
      ok=0; tail -n 40 "$OUT/$target.log"
      mkdir -p "fuzz/regressions/$target"; cp "$OUT"/crash-"$target"-* "fuzz/regressions/$target/" 2>/dev/null
      echo "crash input kept in fuzz/regressions/$target/ (commit it with the fix)"
    }
  fi
  if [ $ok = 1 ]; then passed=$((passed + 1)); echo "fuzz $target: ok ($(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$OUT/$target.log" | tail -1 || true))";
  else failed=$((failed + 1)); fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
