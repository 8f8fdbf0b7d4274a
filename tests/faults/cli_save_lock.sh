#!/usr/bin/env bash
# cli_save_lock.sh - one job per --save folder: a second job with the same --save is refused on
# every rank, naming the holder, without hanging; the lock goes with its holder (SIGKILL too);
# a save removes leftovers of dead processes only; a run that would replace checkpoints it did
# not load is refused unless --overwrite-save is given.
source "$(dirname "$0")/lib.sh"
have train || skip_all "tandem train is not built"
make_data

ck="$W/ck"
# 1. job A holds $ck (a checkpoint every 2 iterations, until killed)
start_job "$W/a.log" "${TRAIN[@]}" --train-iters 100000 --save "$ck" --save-interval 2
A=$JOB
end=$((SECONDS + 180))
while [ $SECONDS -lt $end ] && [ -z "$(tracker "$ck")" ] && kill -0 "$A" 2>/dev/null; do sleep 0.1; done
if [ -z "$(tracker "$ck")" ]; then bad "job A saved no checkpoint"; tail -n 5 "$W/a.log"; finish; exit 1; fi

# 2. job B, same --save (resuming it, the right way for a restart): refused, names A, once
start_job "$W/b.log" "${TRAIN[@]}" --train-iters 100000 --load "$ck" --save "$ck"
wait_job 120
[ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] && ok || bad "a second job on the same --save exited $RC"
n=$(grep -cE -- "--save $ck is in use by another job \(host [^,]+, pid [0-9]+, since [0-9-]+ [0-9:]+ UTC, command: .*tandem train" "$W/b.log")
[ "$n" = 1 ] && ok || { bad "the refusal naming the holder was printed $n times"; tail -n 5 "$W/b.log"; }
grep -q "Traceback\|MPI_ABORT\|Segmentation" "$W/b.log" && bad "launcher noise: $(tail -n 3 "$W/b.log")" || ok
kill -0 "$A" 2>/dev/null && ok || bad "job A ended when B was refused"

# 3. A killed (SIGKILL: the kernel drops its lock): a restart takes the folder over; leftovers
# of its save named after a live process stay, those of a dead one go
JOB=$A
for p in $(our_pids); do [ "$p" = "$A" ] || kill -KILL "$p" 2>/dev/null; done
wait_job 30
prev=$(tracker "$ck")
next=$(printf 'iter_%07d' $((prev + 1)))
sleep 600 &
live=$!
(exit 0) &
dead=$!
wait "$dead"
mkdir -p "$ck/$next.tmp.$live" "$ck/$next.tmp.$dead" "$ck/$next.old.$dead"
start_job "$W/c.log" "${TRAIN[@]}" --train-iters $((prev + 1)) --load "$ck" --save "$ck"
wait_job 120
[ "$RC" -eq 0 ] && ok || { bad "restart after SIGKILL exited $RC"; tail -n 5 "$W/c.log"; }
[ "$(tracker "$ck")" = $((prev + 1)) ] && ok || bad "the restart did not save iteration $((prev + 1))"
[ -d "$ck/$next.tmp.$live" ] && ok || bad "a save removed $next.tmp.$live of a live process"
[ ! -e "$ck/$next.tmp.$dead" ] && [ ! -e "$ck/$next.old.$dead" ] && ok || bad "leftovers of a dead process stayed"
kill "$live" 2>/dev/null

# 4. a fresh run into a folder of checkpoints: refused (tracker untouched), allowed with --overwrite-save
before=$(tracker "$ck")
start_job "$W/d.log" "${TRAIN[@]}" --train-iters 1 --save "$ck"
wait_job 120
[ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] && ok || bad "a fresh run into a folder of checkpoints exited $RC"
grep -qE -- "--save $ck already holds checkpoints and this run starts afresh: resume them with --load $ck.*--overwrite-save" "$W/d.log" \
  && ok || { bad "no refusal offering --load / --overwrite-save"; tail -n 3 "$W/d.log"; }
[ "$(tracker "$ck")" = "$before" ] && ok || bad "the refused run moved the tracker"
start_job "$W/e.log" "${TRAIN[@]}" --train-iters 1 --save "$ck" --overwrite-save
wait_job 120
[ "$RC" -eq 0 ] && [ "$(tracker "$ck")" = 1 ] && ok || { bad "--overwrite-save: exit $RC, tracker $(tracker "$ck")"; tail -n 3 "$W/e.log"; }

# 5. --load of one folder, --save into another that holds checkpoints: refused unless --overwrite-save
start_job "$W/f.log" "${TRAIN[@]}" --train-iters 1 --save "$W/other"
wait_job 120
[ "$RC" -eq 0 ] && ok || bad "a first run into $W/other exited $RC"
start_job "$W/g.log" "${TRAIN[@]}" --train-iters 2 --load "$ck" --save "$W/other"
wait_job 120
[ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] && grep -q -- "already holds checkpoints and this run loads --load $ck" "$W/g.log" \
  && ok || { bad "--load elsewhere into a folder of checkpoints: exit $RC"; tail -n 3 "$W/g.log"; }
start_job "$W/h.log" "${TRAIN[@]}" --train-iters 2 --load "$ck" --save "$W/other" --overwrite-save
wait_job 120
[ "$RC" -eq 0 ] && [ "$(tracker "$W/other")" = 2 ] && ok || { bad "--load elsewhere with --overwrite-save: exit $RC"; tail -n 3 "$W/h.log"; }
finish
