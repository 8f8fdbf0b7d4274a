#!/usr/bin/env bash
# cli_stop_mpirun.sh - the ways a person stops a run started with mpirun, each of which must save a
# checkpoint, say so and exit: --exit-signal-file (works under every launcher), SIGUSR1 to mpirun
# (Open MPI and MPICH forward it to the ranks), and Ctrl-C, i.e. SIGINT to mpirun's process group
# (MPICH forwards it; Open MPI sends SIGTERM only after --mca odls_base_sigkill_timeout seconds and
# SIGKILL as long again after, and stops forwarding their output, see docs/user-guide.md "Stopping").
source "$(dirname "$0")/lib.sh"
have train || skip_all "tandem train is not built"
make_data

# start_group LOG ARGS...: as start_job, with mpirun (and the flags in $LAUNCH) leading its own
# process group, as in a terminal
start_group() {
  local log=$1; shift
  setsid "${MPI[@]}" "${LAUNCH[@]}" "$TANDEM" "${TRAIN[@]}" --train-iters 100000 "$@" >"$log" 2>&1 </dev/null &
  JOB=$!
}

# check WHAT LOG CK LAST MESSAGE: the checkpoint is saved at or after iteration LAST, MESSAGE is logged
check() {
  local what=$1 log=$2 ck=$3 last=$4 msg=$5 it
  grep -qE -- "$msg" "$log" && ok || { bad "$what: no '$msg' line"; tail -n 5 "$log"; }
  it=$(tracker "$ck")
  if [ -n "$it" ] && [ "$it" -ge "$last" ] && [ -f "$ck/$(printf 'iter_%07d' "$it")/model.safetensors" ]; then ok
  else bad "$what: tracker '$it' (last logged iteration before the stop: $last) or its checkpoint missing"; fi
}

last_iteration() { grep -oE "iteration +[0-9]+/" "$1" | tail -n1 | grep -oE "[0-9]+"; }

for how in file usr1 ctrl-c; do
  log="$W/$how.log" ck="$W/ck_$how" extra=()
  case "$how" in
    file) extra=(--exit-signal-file "$W/stop") ;;
  esac
  LAUNCH=()
  # Open MPI: Ctrl-C gives the ranks SIGTERM after this many seconds, and as many to save
  [ "$how" = ctrl-c ] && case "$MPIRUN" in *openmpi*) LAUNCH=(--mca odls_base_sigkill_timeout 5) ;; esac
  start_group "$log" --save "$ck" "${extra[@]}"
  if ! wait_log "$log" "iteration +3/" 120; then
    bad "$how: training did not reach iteration 3"; tail -n 5 "$log"; wait_job 5; continue
  fi
  last=$(last_iteration "$log")
  case "$how" in
    file) touch "$W/stop" ;;
    usr1) kill -USR1 "$JOB" ;;
    ctrl-c) kill -INT -- "-$JOB" ;; # what a terminal's Ctrl-C does: the whole foreground group
  esac
  wait_job 90; rc=$RC
  if [ "$rc" = 124 ]; then bad "$how: the job still ran 90 s after the stop"; tail -n 5 "$log"; continue; fi
  case "$how" in
    file)
      [ "$rc" -eq 0 ] && ok || { bad "$how: exit $rc"; tail -n 8 "$log"; }
      check "$how" "$log" "$ck" "$last" "stopping on --exit-signal-file $W/stop \(removed\) at iteration [0-9]+ after saving"
      [ -e "$W/stop" ] && bad "$how: the stop file was not removed" || ok ;;
    usr1)
      [ "$rc" -eq 0 ] && ok || { bad "$how: exit $rc"; tail -n 8 "$log"; }
      check "$how" "$log" "$ck" "$last" "stopping on a signal at iteration [0-9]+ after saving" ;;
    ctrl-c) # Open MPI's mpirun exits 1 after it was interrupted, whatever the ranks did, and stops forwarding
      # their output: the ranks' last lines are lost (and must not hold the save up), the checkpoint is the proof
      case "$MPIRUN" in
        *openmpi*) check "$how" "$log" "$ck" "$last" "iteration +$last/" ;;
        *) check "$how" "$log" "$ck" "$last" "stopping on a signal at iteration [0-9]+ after saving" ;;
      esac ;;
  esac
  echo "$how: stopped after iteration $(tracker "$ck") (last logged before the stop: $last), exit $rc"
done

# a stop file that exists before the start is refused, naming it
touch "$W/stop"
start_job "$W/pre.log" "${TRAIN[@]}" --train-iters 2 --exit-signal-file "$W/stop"
wait_job 60
[ "$RC" -ne 0 ] && grep -q -- "--exit-signal-file $W/stop already exists" "$W/pre.log" && ok \
  || { bad "an existing --exit-signal-file: exit $RC"; tail -n 3 "$W/pre.log"; }
finish
