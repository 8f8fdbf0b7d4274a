#!/usr/bin/env bash
# cli_sigterm.sh - SIGTERM during training, as a scheduler sends it at the end of a job's
# time (to every rank, as Slurm does; and to one rank only): the step in flight finishes,
# the ranks agree to stop, a checkpoint of that iteration is saved with --save, every rank
# exits 0, and the checkpoint resumes. Also one Ctrl-C delivered twice within milliseconds (by the
# terminal and by a launcher forwarding it, or GNU timeout): the same single stop, saved.
source "$(dirname "$0")/lib.sh"
have train || skip_all "tandem train is not built"
make_data

for target in all rank1 twice; do
  what="SIGTERM to $target"
  [ $target = twice ] && what="SIGINT twice, 20 ms apart, to all"
  log="$W/term_$target.log" ck="$W/ck_$target"
  start_job "$log" "${TRAIN[@]}" --train-iters 100000 --save "$ck"
  if ! wait_log "$log" "iteration +3/" 120; then
    bad "$what: training did not reach iteration 3"; tail -n 5 "$log"; wait_job 5; continue
  fi
  if [ $target = rank1 ]; then
    pids=$(rank_pid 1)
  else
    pids="$(rank_pid 0) $(rank_pid 1)"
  fi
  last=$(grep -oE "iteration +[0-9]+/" "$log" | tail -n1 | grep -oE "[0-9]+")
  if [ $target = twice ]; then
    kill -INT $pids; sleep 0.02; kill -INT $pids
  else
    kill -TERM $pids
  fi
  wait_job 60; rc=$RC
  if [ "$rc" = 124 ]; then bad "$what: the job still ran 60 s after SIGTERM"; tail -n 5 "$log"; continue; fi
  [ "$rc" -eq 0 ] && ok || { bad "$what: exit $rc"; tail -n 8 "$log"; }
  grep -q "stopping on a signal" "$log" && ok || bad "$what: no 'stopping on a signal' line"
  it=$(tracker "$ck")
  if [ -n "$it" ] && [ "$it" -ge "$last" ] && [ -f "$ck/$(printf 'iter_%07d' "$it")/model.safetensors" ]; then ok
  else bad "$what: tracker '$it' (last logged iteration before the signal: $last) or its checkpoint missing"; fi
  grep -qE "iteration +$it/" "$log" && ok || bad "$what: iteration $it (saved) was not completed in the log"
  ls "$ck" | grep -q '\.tmp\.' && bad "$what: a temporary checkpoint directory was left" || ok
  # the checkpoint resumes: one more step from it
  log2="$W/resume_$target.log"
  start_job "$log2" "${TRAIN[@]}" --load "$ck" --train-iters $((it + 1))
  wait_job 120
  if [ "$RC" -eq 0 ] && grep -qE "iteration +$((it + 1))/" "$log2"; then ok
  else bad "$what: resuming from iteration $it failed (exit $RC)"; tail -n 5 "$log2"; fi
  echo "$what: stopped after iteration $it (last logged before the signal: $last), exit $rc"
done
finish
