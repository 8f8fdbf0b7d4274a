# lib.sh - shared set-up of the fault tests (sourced by tests/faults/cli_*.sh).
# Provides: $W (a private temp folder, removed on exit with any rank still running in it),
# MPI (the mpirun command line), TRAIN (a `tandem train` command line on the tiny model and
# a small generated dataset), ok/bad/finish (the "N passed, N failed" line), and helpers to
# start a job in the background, wait for its log, find a rank's pid and bound every wait.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUILD=${BUILD:-build}
TANDEM=${TANDEM:-$BUILD/tandem}
MPIRUN=${MPIRUN:-mpirun.openmpi}
case "$MPIRUN" in
  *openmpi*) MPI=("$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -np 2) ;;
  *) MPI=("$MPIRUN" -np 2) ;;
esac
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
W=$(mktemp -d /tmp/tdm_fault.XXXXXX)
passed=0 failed=0
JOB=

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; }

# Every process whose command line holds $W (our mpirun and its ranks), by pid.
our_pids() { pgrep -f -- "$W/" | grep -vx "$$" || true; }

fault_cleanup() {
  local p
  for p in $(our_pids); do kill -KILL "$p" 2>/dev/null; done
  [ -n "${MNT:-}" ] && mountpoint -q "$MNT" && umount "$MNT"
  rm -rf "$W"
}
trap fault_cleanup EXIT
trap 'exit 130' INT TERM

# The tandem subcommands this build has.
have() { "$TANDEM" --help 2>/dev/null | grep -qE "^  $1 "; }
skip_all() { echo "skipped: $*"; echo "0 passed, 0 failed"; exit 0; }

# A small dataset (every sample with an image) and a tokenizer that fits configs/tiny.
make_data() {
  "$TANDEM" gen-data --out "$W/data" --samples 24 --heldout 2 --seed 5 >/dev/null 2>"$W/gen.err" \
    || { bad "gen-data: $(cat "$W/gen.err")"; finish; exit 1; }
  "$TANDEM" train-tokenizer --data tests/tokenizer/train_sample.json --vocab-size 1024 --out "$W/tok.json" \
    >/dev/null 2>"$W/tok.err" || { bad "train-tokenizer: $(cat "$W/tok.err")"; finish; exit 1; }
  TRAIN=(train --model configs/tiny --tokenizer "$W/tok.json" --data "$W/data/train.json"
         --freeze-vision --freeze-projector --global-batch-size 2 --seq-length 512 --lr 1e-4 --seed 7)
}

# make_checkpoint: a 1-iteration checkpoint of the tiny job in $W/good ($IT: its iteration directory's name);
# the test ends when it cannot be made.
make_checkpoint() {
  start_job "$W/good.log" "${TRAIN[@]}" --train-iters 1 --save "$W/good"
  wait_job 120
  [ "$RC" -eq 0 ] || { bad "making a checkpoint failed (exit $RC)"; tail -n 5 "$W/good.log"; finish; exit 1; }
  IT=iter_0000001
}

# start_job LOG ARGS...: `tandem train ARGS` on 2 ranks in the background; $JOB is mpirun's pid.
start_job() {
  local log=$1; shift
  "${MPI[@]}" "$TANDEM" "$@" >"$log" 2>&1 </dev/null &
  JOB=$!
}

# wait_log LOG REGEX SECONDS: 0 once LOG matches, 1 on timeout or when the job ended first.
wait_log() {
  local end=$((SECONDS + $3))
  while [ $SECONDS -lt $end ]; do
    grep -qE -- "$2" "$1" 2>/dev/null && return 0
    kill -0 "$JOB" 2>/dev/null || { grep -qE -- "$2" "$1" 2>/dev/null; return; }
    sleep 0.05
  done
  return 1
}

# wait_job SECONDS: waits for $JOB and sets RC to its exit status, or to 124 when it
# outlived SECONDS (then it and its ranks are killed). Not in $(...): only this shell can
# collect its child's status.
wait_job() {
  local end=$((SECONDS + $1)) p
  while kill -0 "$JOB" 2>/dev/null && [ $SECONDS -lt "$end" ]; do sleep 0.1; done
  if kill -0 "$JOB" 2>/dev/null; then
    for p in $(our_pids); do kill -KILL "$p" 2>/dev/null; done
    wait "$JOB" 2>/dev/null
    RC=124
    return
  fi
  wait "$JOB"; RC=$?
}

# rank_pid R: the pid of rank R of the running job (Open MPI or MPICH environment).
rank_pid() {
  local p
  for p in $(our_pids); do
    [ "$p" = "$JOB" ] && continue
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxE "(OMPI_COMM_WORLD_RANK|PMI_RANK)=$1"; then
      # the rank is the tandem process itself, not a wrapper shell
      grep -q tandem "/proc/$p/cmdline" 2>/dev/null && { echo "$p"; return 0; }
    fi
  done
  return 1
}

# ranks_left: how many of our tandem ranks still run.
ranks_left() {
  local p n=0
  for p in $(our_pids); do [ "$p" = "$JOB" ] || n=$((n + 1)); done
  echo $n
}

# The iteration in a checkpoint tracker ("" when absent).
tracker() { cat "$1/latest_checkpointed_iteration.txt" 2>/dev/null | tr -d '[:space:]'; }
