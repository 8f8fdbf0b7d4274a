#!/usr/bin/env bash
# cli_stuck_rank.sh - one rank stops making progress without dying (SIGSTOP: as a rank spinning
# forever in a library that retries a failed allocation, or a node that froze): its launcher sees
# nothing wrong, so only the other ranks can end the job. With --distributed-timeout-minutes the
# first data-parallel collective (bucket or control) that waits longer must end every rank
# non-zero with a message naming the timeout, for both progress modes and either victim; and so must the
# trainer's own agreements (a rank stopped during validation) and a checkpoint save's collectives (rank 0
# stopped while it writes).
source "$(dirname "$0")/lib.sh"
have train || skip_all "tandem train is not built"
make_data

TIMEOUT_MIN=0.1 # 6 s: well above a step of this job under load, well below the waits below

# stop_and_expect WHAT LOG VICTIM WHEN WAITER SECONDS TRAIN-ARGS...: starts the job, SIGSTOPs rank VICTIM once
# the log matches WHEN, and expects every rank gone, non-zero, within SECONDS, with the timeout's message for the
# collective WAITER.
stop_and_expect() {
  local what=$1 log=$2 victim=$3 when=$4 waiter=$5 limit=$6 pid t0 dt rc
  shift 6
  start_job "$log" "${TRAIN[@]}" --distributed-timeout-minutes "$TIMEOUT_MIN" "$@"
  if ! wait_log "$log" "$when" 120; then
    bad "$what: training did not reach '$when'"; tail -n 5 "$log"; wait_job 5; return
  fi
  pid=$(rank_pid "$victim") || { bad "$what: cannot find rank $victim"; wait_job 1; return; }
  kill -STOP "$pid"
  t0=$SECONDS
  wait_job "$limit"; rc=$RC
  dt=$((SECONDS - t0))
  if [ "$rc" = 124 ]; then bad "$what: the job still ran $limit s after the rank stopped"; tail -n 5 "$log"; return; fi
  [ "$rc" -ne 0 ] && ok || bad "$what: mpirun exited 0"
  [ "$(ranks_left)" = 0 ] && ok || bad "$what: a rank outlived mpirun"
  grep -q "$waiter.* has not completed after .*(--distributed-timeout-minutes $TIMEOUT_MIN): another rank is stuck" \
    "$log" && ok || { bad "$what: no message names the timeout"; tail -n 8 "$log"; }
  echo "$what: job ended ${dt}s after the stop, exit $rc"
}

for mode in thread inline; do
  for victim in 1 0; do
    stop_and_expect "SIGSTOP rank $victim ($mode progress)" "$W/stop_${mode}_$victim.log" "$victim" "iteration +3/" \
      "data-parallel" 60 --train-iters 100000 --comm-progress "$mode" --use-distributed-optimizer --overlap-grad-reduce
  done
done

# The trainer's own collectives are bounded too: a rank stopped in the middle of a validation pass leaves the
# other waiting in the validation's agreement on a stop (every batch) or in its loss sum, which must end the
# job the same way. Before they were bounded this hung until mpirun was killed.
for victim in 1 0; do
  stop_and_expect "SIGSTOP rank $victim during validation" "$W/stop_valid_$victim.log" "$victim" "iteration +2/" \
    "\(agreement of the ranks\|data-parallel sum across ranks\)" 90 --train-iters 100 \
    --valid-data-path "$W/data/train.json" --eval-interval 2 --eval-iters 400
done

# A checkpoint save's collectives are bounded too: rank 0 stopped while it writes a checkpoint (its
# iter_*.tmp.* folder exists) leaves the other rank waiting in the save's gather or its result, which must end
# the job the same way. Before they were bounded this hung until mpirun was killed.
for opt in "" --use-distributed-optimizer; do
  what="SIGSTOP rank 0 during a save${opt:+ ($opt)}" log="$W/stop_save${opt}.log" ck="$W/ck_stop${opt}"
  start_job "$log" "${TRAIN[@]}" --distributed-timeout-minutes "$TIMEOUT_MIN" --train-iters 100000 --save "$ck" \
    --save-interval 1 $opt
  if ! wait_log "$log" "iteration +1/" 120; then bad "$what: training did not start"; tail -n 5 "$log"; wait_job 5; continue; fi
  pid=$(rank_pid 0) || { bad "$what: cannot find rank 0"; wait_job 1; continue; }
  caught=0
  end=$((SECONDS + 120))
  while [ $SECONDS -lt $end ] && kill -0 "$JOB" 2>/dev/null; do
    tmp=$(ls -d "$ck"/iter_*.tmp.* 2>/dev/null | head -n1)
    if [ -n "$tmp" ]; then
      kill -STOP "$pid"
      [ -d "$tmp" ] && { caught=1; break; } # still writing: stopped mid-save
      kill -CONT "$pid"
    fi
    sleep 0.005
  done
  if [ $caught = 0 ]; then bad "$what: never caught a save in progress"; wait_job 5; continue; fi
  t0=$SECONDS
  wait_job 60
  if [ "$RC" = 124 ]; then bad "$what: the job still ran 60 s after rank 0 stopped"; tail -n 5 "$log"; continue; fi
  [ "$RC" -ne 0 ] && ok || bad "$what: mpirun exited 0"
  [ "$(ranks_left)" = 0 ] && ok || bad "$what: a rank outlived mpirun"
  grep -q "checkpoint save.* has not completed after .*(--distributed-timeout-minutes $TIMEOUT_MIN): another rank is stuck" \
    "$log" && ok || { bad "$what: no message names the timeout"; tail -n 8 "$log"; }
  echo "$what: job ended $((SECONDS - t0))s after the stop, exit $RC"
done
finish
