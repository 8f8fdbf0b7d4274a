#!/usr/bin/env bash
# cli_ckpt_node_local.sh - the ranks of a job see different checkpoint folders under one --load
# path, as on node-local disks (rank 0 alone writes --save, so only its node has the
# checkpoints). Two ranks with their own working directory and `--save ck --load ck`: rank 0
# finds a checkpoint, rank 1 none (it took the launch for Megatron's first one and trained from
# iteration 0: other weights, more steps, a hang) or an older one. Every rank must refuse with
# one message naming both, exit non-zero, and save nothing. Likewise initial weights from --hf-weights files
# that differ between the nodes (and identical copies train).
source "$(dirname "$0")/lib.sh"
have train || skip_all "tandem train is not built"
make_data
TRAIN=("${TRAIN[@]/#configs\/tiny/$PWD/configs/tiny}") # the ranks run in other directories
TANDEM=$(realpath "$TANDEM")
LAUNCH=("${MPI[@]:0:${#MPI[@]}-2}")                     # mpirun and its flags, without -np 2

mkdir -p "$W/n0" "$W/n1"
start_job "$W/first.log" "${TRAIN[@]}" --train-iters 1 --save "$W/n0/ck"
wait_job 120
[ "$RC" -eq 0 ] || { bad "making a checkpoint failed (exit $RC)"; tail -n 5 "$W/first.log"; finish; exit 1; }

# split NAME NEEDLE: rank 0 in $W/n0, rank 1 in $W/n1, both with --save ck --load ck
split() {
  local name=$1 needle=$2 log="$W/$1.log" before
  before=$(tracker "$W/n0/ck")
  "${LAUNCH[@]}" -np 1 env -C "$W/n0" "$TANDEM" "${TRAIN[@]}" --train-iters 3 --save ck --load ck : \
    -np 1 env -C "$W/n1" "$TANDEM" "${TRAIN[@]}" --train-iters 3 --save ck --load ck >"$log" 2>&1 </dev/null &
  JOB=$!
  wait_job 90
  local msg
  msg=$(grep -o "tandem train: .*" "$log" | head -n1)
  echo "$name: exit $RC: $msg"
  if [ "$RC" = 124 ]; then bad "$name: hung"; tail -n 5 "$log"
  elif [ "$RC" -eq 0 ] || [ "$RC" -ge 128 ]; then bad "$name: exit $RC"; tail -n 5 "$log"
  elif ! echo "$msg" | grep -qF -- "$needle"; then bad "$name: the message does not name '$needle'"; tail -n 5 "$log"
  else ok; fi
  [ "$(ranks_left)" = 0 ] && ok || bad "$name: a rank outlived mpirun"
  [ "$(tracker "$W/n0/ck")" = "$before" ] && ok || bad "$name: rank 0 saved iteration $(tracker "$W/n0/ck")"
}

split no_copy "--load ck: rank 1 read no checkpoint there, rank 0 iteration 1"
[ -e "$W/n1/ck/latest_checkpointed_iteration.txt" ] && bad "no_copy: rank 0 saved into rank 1's folder" || ok

# a stale copy: rank 1's folder stops at iteration 1, rank 0's went on to 2
rm -rf "$W/n1/ck" && cp -r "$W/n0/ck" "$W/n1/ck"
start_job "$W/second.log" "${TRAIN[@]}" --train-iters 2 --save "$W/n0/ck" --load "$W/n0/ck"
wait_job 120
[ "$RC" -eq 0 ] && [ "$(tracker "$W/n0/ck")" = 2 ] && ok || { bad "resuming to iteration 2 (exit $RC)"; tail -n 5 "$W/second.log"; }
split stale_copy "--load ck: rank 1 read iteration 1 there, rank 0 iteration 2"

# initial weights from files that differ between the nodes (--hf-weights, a relative path)
cp "$W/n0/ck/iter_0000002/model.safetensors" "$W/n0/w.safetensors"
cp "$W/n0/ck/iter_0000001/model.safetensors" "$W/n1/w.safetensors"
log="$W/weights.log"
"${LAUNCH[@]}" -np 1 env -C "$W/n0" "$TANDEM" "${TRAIN[@]}" --train-iters 2 --hf-weights w.safetensors : \
  -np 1 env -C "$W/n1" "$TANDEM" "${TRAIN[@]}" --train-iters 2 --hf-weights w.safetensors >"$log" 2>&1 </dev/null &
JOB=$!
wait_job 90
msg=$(grep -o "tandem train: .*" "$log" | head -n1)
echo "weights: exit $RC: $msg"
if [ "$RC" = 124 ]; then bad "weights: hung"
elif [ "$RC" -eq 0 ] || [ "$RC" -ge 128 ]; then bad "weights: exit $RC"; tail -n 5 "$log"
elif ! echo "$msg" | grep -qF "the initial weights differ between ranks: rank 1's are not rank 0's"; then
  bad "weights: the message does not name the ranks"; tail -n 5 "$log"
elif ! echo "$msg" | grep -qF -- "--hf-weights"; then bad "weights: the message does not name --hf-weights"
else ok; fi
[ "$(ranks_left)" = 0 ] && ok || bad "weights: a rank outlived mpirun"
# the same file on both nodes trains
cp "$W/n0/w.safetensors" "$W/n1/w.safetensors"
"${LAUNCH[@]}" -np 1 env -C "$W/n0" "$TANDEM" "${TRAIN[@]}" --train-iters 2 --hf-weights w.safetensors : \
  -np 1 env -C "$W/n1" "$TANDEM" "${TRAIN[@]}" --train-iters 2 --hf-weights w.safetensors >"$log" 2>&1 </dev/null &
JOB=$!
wait_job 90
[ "$RC" -eq 0 ] && ok || { bad "weights: identical copies refused (exit $RC)"; tail -n 5 "$log"; }
finish
