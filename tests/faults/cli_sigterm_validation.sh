#!/usr/bin/env bash
# cli_sigterm_validation.sh - SIGTERM to every rank while a long validation pass runs: the ranks
# agree on the stop at the next validation batch, the pass ends early, a checkpoint of the
# iteration is saved with --save, every rank exits 0, and the checkpoint resumes.
source "$(dirname "$0")/lib.sh"
have train || skip_all "tandem train is not built"
make_data

what="SIGTERM during validation"
log="$W/term_valid.log" ck="$W/ck_valid"
# --eval-iters 100000: the validation pass after iteration 2 would run for hours
start_job "$log" "${TRAIN[@]}" --train-iters 100000 --save "$ck" \
  --valid-data-path "$W/data/train.json" --eval-interval 2 --eval-iters 100000
if ! wait_log "$log" "iteration +2/" 120; then
  bad "$what: training did not reach iteration 2"; tail -n 5 "$log"; finish; exit 1
fi
sleep 1 # inside the validation pass of iteration 2
kill -TERM $(rank_pid 0) $(rank_pid 1)
wait_job 60; rc=$RC
if [ "$rc" = 124 ]; then bad "$what: the job still ran 60 s after SIGTERM"; tail -n 5 "$log"
else
  [ "$rc" -eq 0 ] && ok || { bad "$what: exit $rc"; tail -n 8 "$log"; }
  grep -qE "validation at iteration 2 stopped by a signal after [0-9]+ of 100000 batches" "$log" && ok \
    || { bad "$what: no 'validation ... stopped by a signal' line"; tail -n 5 "$log"; }
  grep -q "stopping on a signal at iteration 2 after saving a checkpoint" "$log" && ok \
    || bad "$what: no 'stopping on a signal at iteration 2' line"
  [ "$(tracker "$ck")" = 2 ] && [ -f "$ck/iter_0000002/model.safetensors" ] && ok \
    || bad "$what: tracker '$(tracker "$ck")' or the checkpoint of iteration 2 missing"
  grep -qE "iteration +3/" "$log" && bad "$what: training went on after the signal" || ok
  log2="$W/resume_valid.log"
  start_job "$log2" "${TRAIN[@]}" --load "$ck" --train-iters 3
  wait_job 120
  if [ "$RC" -eq 0 ] && grep -qE "iteration +3/" "$log2"; then ok
  else bad "$what: resuming from iteration 2 failed (exit $RC)"; tail -n 5 "$log2"; fi
fi
finish
