#!/usr/bin/env bash
# Runs every test of one build: C unit tests, multi-rank tests under mpirun -np 2, and
# the script tests (peers: PyTorch, the JavaScript tokenizer; the command-line tools).
# Each runner prints its own "N passed, N failed" line; this script prints the total
# and exits non-zero when anything failed.
#   BUILD=build scripts/test.sh [filter]     (filter: an extended regex matched against the test path)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
FILTER=${1:-}
MPIRUN=${MPIRUN:-mpirun.openmpi}
case "$MPIRUN" in
  *openmpi*) MPIFLAGS=(--allow-run-as-root --oversubscribe --bind-to none -np 2) ;;
  *) MPIFLAGS=(-np 2) ;;
esac
export OMPI_MCA_btl_vader_single_copy_mechanism=none # containers forbid CMA
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
export TANDEM=${TANDEM:-$BUILD/tandem} BUILD MPIRUN
TIMEOUT=${TEST_TIMEOUT:-900}

total_p=0 total_f=0 failed_runners=()
# Each test runs in the background under timeout(1) and is waited for: timeout puts it in a process group
# of its own, which a terminal's Ctrl-C does not reach, and bash runs a trap only after a foreground
# command ends. `wait` returns at once on a trapped signal; the trap stops the test and its children.
OUTF=$(mktemp /tmp/tdm_test_out.XXXXXX)
JOB=
on_signal() {
  if [ -n "$JOB" ]; then kill -TERM "$JOB" 2>/dev/null; wait "$JOB" 2>/dev/null; fi
  echo "interrupted; so far: $total_p passed, $total_f failed"
  exit 130
}
trap on_signal INT TERM
trap 'rm -f "$OUTF"' EXIT
run_one() { # name, command...
  local name=$1; shift
  local out rc line p f
  echo "== $name"
  timeout --kill-after=10 "$TIMEOUT" "$@" >"$OUTF" 2>&1 </dev/null &
  JOB=$!
  wait "$JOB"; rc=$?
  JOB=
  out=$(cat "$OUTF")
  line=$(printf '%s\n' "$out" | grep -E '^([A-Za-z_-]+: )?[0-9]+ passed, [0-9]+ failed' | tail -n 1)
  if [ -n "$line" ]; then
    p=$(echo "$line" | sed -E 's/^([A-Za-z_-]+: )?([0-9]+) passed, ([0-9]+) failed.*/\2/')
    f=$(echo "$line" | sed -E 's/^([A-Za-z_-]+: )?([0-9]+) passed, ([0-9]+) failed.*/\3/')
  else
    p=0 f=1
  fi
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  if [ "$f" -ne 0 ] || [ "$rc" -ne 0 ]; then
    printf '%s\n' "$out" | tail -n 60
    [ "$rc" -eq 124 ] && echo "(timed out after ${TIMEOUT}s)"
    failed_runners+=("$name")
  fi
  echo "$name: $p passed, $f failed"
  total_p=$((total_p + p)); total_f=$((total_f + f))
}

for t in "$BUILD"/tests/*/test_*; do
  [ -x "$t" ] || continue
  [[ -n "$FILTER" && ! "$t" =~ $FILTER ]] && continue
  run_one "${t#"$BUILD"/tests/}" "$t"
done
for t in "$BUILD"/tests/*/mpitest_*; do
  [ -x "$t" ] || continue
  [[ -n "$FILTER" && ! "$t" =~ $FILTER ]] && continue
  run_one "${t#"$BUILD"/tests/} (2 ranks)" "$MPIRUN" "${MPIFLAGS[@]}" "$t"
done
if [ "${TANDEM_UNIT_ONLY:-0}" != 1 ]; then
  for t in tests/*/peer_*.sh tests/*/cli_*.sh; do
    [ -f "$t" ] || continue
    [[ -n "$FILTER" && ! "$t" =~ $FILTER ]] && continue
    run_one "${t#tests/}" bash "$t"
  done
fi

if [ ${#failed_runners[@]} -gt 0 ]; then echo "failed: ${failed_runners[*]}"; fi
echo "all ($BUILD): $total_p passed, $total_f failed"
[ "$total_f" -eq 0 ]
