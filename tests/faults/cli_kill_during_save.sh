#!/usr/bin/env bash
# cli_kill_during_save.sh - every rank SIGKILLed while a checkpoint is being written (its
# iter_*.tmp.* directory exists): the tracker must still name the previous checkpoint,
# that checkpoint must load and training must resume from it.
source "$(dirname "$0")/lib.sh"
have train || skip_all "tandem train is not built"
make_data

ck="$W/ck" log="$W/train.log"
start_job "$log" "${TRAIN[@]}" --train-iters 100000 --save "$ck" --save-interval 2
caught=0
end=$((SECONDS + 240))
while [ $SECONDS -lt $end ] && kill -0 "$JOB" 2>/dev/null; do
  prev=$(tracker "$ck")
  tmp=$(ls -d "$ck"/iter_*.tmp.* 2>/dev/null | head -n1)
  # a save in progress after at least one complete checkpoint
  if [ -n "$prev" ] && [ -n "$tmp" ]; then
    ranks=$(our_pids | grep -vx "$JOB")
    kill -STOP $ranks 2>/dev/null
    # frozen: is the save still unfinished? (it may have completed between the two looks)
    if [ -d "$tmp" ] && [ "$(tracker "$ck")" = "$prev" ]; then
      kill -KILL $ranks 2>/dev/null
      caught=1
      break
    fi
    kill -CONT $ranks 2>/dev/null
  fi
  sleep 0.01
done
wait_job 30
if [ $caught = 0 ]; then bad "never caught a save in progress (exit $RC)"; tail -n 5 "$log"; finish; exit 1; fi
[ "$RC" -ne 0 ] && ok || bad "mpirun exited 0 after its ranks were killed"
[ "$(ranks_left)" = 0 ] && ok || bad "a rank outlived mpirun"
after=$(tracker "$ck")
saving=$(basename "$tmp"); saving=${saving%%.tmp.*}
echo "killed while writing $saving; tracker before: $prev, after: $after"
[ "$after" = "$prev" ] && ok || bad "the tracker moved from $prev to $after"
[ -f "$ck/$(printf 'iter_%07d' "$prev")/trainer_state.json" ] && ok || bad "checkpoint $prev is incomplete"

log2="$W/resume.log"
start_job "$log2" "${TRAIN[@]}" --load "$ck" --save "$ck" --train-iters $((prev + 1))
wait_job 120
if [ "$RC" -eq 0 ] && grep -qE "iteration +$((prev + 1))/" "$log2"; then ok
else bad "resuming from iteration $prev failed (exit $RC)"; tail -n 8 "$log2"; fi
[ "$(tracker "$ck")" = $((prev + 1)) ] && ok || bad "after resuming, the tracker is $(tracker "$ck"), expected $((prev + 1))"
finish
