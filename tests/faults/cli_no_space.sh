#!/usr/bin/env bash
# cli_no_space.sh - the disk fills during a checkpoint save. --save points into a small
# tmpfs (mounted here, unmounted on exit) with room for one checkpoint but not two: the
# first save succeeds, the second must fail with a clear error naming the path, on every
# rank, and leave the first checkpoint complete, loadable and named by the tracker. Then the
# same mount read-only: a --save there is refused before the first step, not at the first save.
source "$(dirname "$0")/lib.sh"
have train || skip_all "tandem train is not built"
[ "$(id -u)" = 0 ] || skip_all "mounting a tmpfs needs root"
make_data

# the size of one checkpoint of this configuration, measured
start_job "$W/size.log" "${TRAIN[@]}" --train-iters 1 --save "$W/ck_size"
wait_job 120
[ "$RC" -eq 0 ] || { bad "the sizing run failed (exit $RC)"; tail -n 5 "$W/size.log"; finish; exit 1; }
kb=$(du -sk "$W/ck_size" | cut -f1)
MNT="$W/mnt"
mkdir -p "$MNT"
if ! mount -t tmpfs -o size=$((kb * 3 / 2))k tmpfs "$MNT" 2>"$W/mount.err"; then
  skip_all "cannot mount a tmpfs here: $(cat "$W/mount.err")"
fi
ck="$MNT/ck" log="$W/train.log"
start_job "$log" "${TRAIN[@]}" --train-iters 4 --save "$ck" --save-interval 2
wait_job 180; rc=$RC
echo "checkpoint ${kb} KiB, tmpfs $((kb * 3 / 2)) KiB: exit $rc; $(grep -iE 'space|ENOSPC' "$log" | head -n1)"
if [ "$rc" = 124 ]; then bad "the job hung on a full disk"; elif [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ]; then ok
else bad "exit $rc (expected an error exit)"; fi
grep -qi "no space left" "$log" && ok || { bad "no 'No space left' message"; tail -n 8 "$log"; }
grep -i "no space left" "$log" | grep -qF "$ck" && ok || bad "the message does not name the checkpoint path"
[ "$(ranks_left)" = 0 ] && ok || bad "a rank outlived mpirun"
[ "$(tracker "$ck")" = 2 ] && ok || bad "tracker is '$(tracker "$ck")', expected 2"
ls "$ck" | grep -q '\.tmp\.' && bad "the partial checkpoint was left on the full disk: $(ls "$ck")" || ok
log2="$W/resume.log"
start_job "$log2" "${TRAIN[@]}" --load "$ck" --train-iters 3
wait_job 120
if [ "$RC" -eq 0 ] && grep -qE "iteration +3/" "$log2"; then ok
else bad "the previous checkpoint does not resume (exit $RC)"; tail -n 8 "$log2"; fi

# the same with the distributed optimizer on 2 ranks: rank 0 writes the Adam state as rank 1
# streams its shard to it, parameter by parameter; a write that fails halfway must not leave
# rank 1 blocked in a send
umount "$MNT" && mount -t tmpfs -o size=$((kb * 3 / 2))k tmpfs "$MNT" || { bad "cannot remount $MNT"; finish; exit 1; }
logd="$W/train_dist.log"
start_job "$logd" "${TRAIN[@]}" --train-iters 4 --save "$ck" --save-interval 2 --use-distributed-optimizer
wait_job 180; rc=$RC
echo "distributed optimizer: exit $rc; $(grep -iE 'space|ENOSPC' "$logd" | head -n1)"
if [ "$rc" = 124 ]; then bad "distributed optimizer: the job hung on a full disk"
elif [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ]; then ok
else bad "distributed optimizer: exit $rc (expected an error exit)"; fi
grep -i "no space left" "$logd" | grep -qF "$ck/iter_0000004" && grep -qF "optimizer.safetensors" "$logd" && ok \
  || { bad "distributed optimizer: no 'No space left' message naming the optimizer file"; tail -n 8 "$logd"; }
[ "$(tracker "$ck")" = 2 ] && ok || bad "distributed optimizer: tracker is '$(tracker "$ck")', expected 2"
[ "$(ranks_left)" = 0 ] && ok || bad "distributed optimizer: a rank outlived mpirun"

umount "$MNT" && mount -t tmpfs -o ro,size=1m tmpfs "$MNT" || { bad "cannot remount $MNT read-only"; finish; exit 1; }
log3="$W/readonly.log"
start_job "$log3" "${TRAIN[@]}" --train-iters 2 --save "$MNT" --save-interval 2
wait_job 120
echo "read-only --save: exit $RC: $(grep -o -m1 'tandem train: .*' "$log3")"
if [ "$RC" -ne 0 ] && [ "$RC" -lt 124 ] && grep -qE "tandem train: (rank 0: )?--save $MNT: cannot write a checkpoint there: Read-only" "$log3"
then ok; else bad "read-only --save (exit $RC)"; tail -n 5 "$log3"; fi
grep -qE "iteration +1/" "$log3" && bad "read-only --save: training started before the folder was refused" || ok
finish
