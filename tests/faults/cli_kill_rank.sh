#!/usr/bin/env bash
# cli_kill_rank.sh - one rank killed with SIGKILL in the middle of training: every other
# rank must exit non-zero within 30 s with a message saying what happened, and nothing
# may hang. Done once for each rank and for both progress modes (communication thread,
# inline polling), whose blocking points differ.
source "$(dirname "$0")/lib.sh"
have train || skip_all "tandem train is not built"
make_data

for mode in thread inline; do
  for victim in 1 0; do
    what="SIGKILL rank $victim ($mode progress)"
    log="$W/kill_${mode}_$victim.log"
    start_job "$log" "${TRAIN[@]}" --train-iters 100000 --comm-progress "$mode"
    if ! wait_log "$log" "iteration +3/" 120; then
      bad "$what: training did not reach iteration 3"; tail -n 5 "$log"; wait_job 5; continue
    fi
    pid=$(rank_pid "$victim") || { bad "$what: cannot find rank $victim"; wait_job 1; continue; }
    kill -KILL "$pid"
    t0=$SECONDS
    wait_job 30; rc=$RC
    dt=$((SECONDS - t0))
    if [ "$rc" = 124 ]; then bad "$what: the job still ran 30 s after the kill"; tail -n 5 "$log"; continue; fi
    [ "$rc" -ne 0 ] && ok || bad "$what: mpirun exited 0"
    [ "$(ranks_left)" = 0 ] && ok || bad "$what: a rank outlived mpirun"
    # Open MPI: "... process rank 1 ... exited on signal 9 (Killed)"; MPICH: "... KILLED BY SIGNAL: 9 (Killed)"
    grep -qiE "signal 9|killed" "$log" && ok || { bad "$what: no message names the killed rank"; tail -n 8 "$log"; }
    echo "$what: job ended ${dt}s after the kill, exit $rc"
  done
done
finish
