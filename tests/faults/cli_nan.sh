#!/usr/bin/env bash
# cli_nan.sh - a NaN injected into one rank's gradients at a chosen iteration
# (--inject-nan-at ITER:RANK, the trainer's testing flag): the job stops with one message
# naming the rank, the iteration, the bucket and the parameter, every rank exits non-zero,
# and nothing is saved for the poisoned step. Also on all ranks at once, with several
# buckets and the overlapped reduce (where the check runs as each bucket becomes ready).
source "$(dirname "$0")/lib.sh"
have train || skip_all "tandem train is not built"
make_data

run() { # name, expected rank, iteration, extra flags...
  local name=$1 rank=$2 iter=$3; shift 3
  local log="$W/nan_$name.log" ck="$W/ck_$name"
  start_job "$log" "${TRAIN[@]}" --train-iters $((iter + 3)) --save "$ck" --save-interval 1 "$@"
  wait_job 120
  local line
  line=$(grep -E "NaN|Inf" "$log" | grep -v "number of nan" | head -n1)
  echo "$name: exit $RC: $line"
  if [ "$RC" != 124 ] && [ "$RC" -ne 0 ] && [ "$RC" -lt 128 ]; then ok; else bad "$name: exit $RC"; fi
  [ "$(ranks_left)" = 0 ] && ok || bad "$name: a rank outlived mpirun"
  if echo "$line" | grep -q "rank $rank" && echo "$line" | grep -q "iteration $iter" &&
     echo "$line" | grep -qE "bucket [0-9]+" && echo "$line" | grep -qE "parameter [a-z_]+\.[a-z_.0-9]+"; then ok
  else bad "$name: the message does not name rank $rank, iteration $iter, a bucket and a parameter"; tail -n 8 "$log"; fi
  [ "$(tracker "$ck")" = $((iter - 1)) ] && ok || bad "$name: tracker '$(tracker "$ck")', expected $((iter - 1))"
}
run one_rank 1 3 --inject-nan-at 3:1
run rank0_overlap 0 2 --inject-nan-at 2:0 --overlap-grad-reduce --ddp-num-buckets 4
run all_ranks_distopt 0 4 --inject-nan-at 4 --use-distributed-optimizer --overlap-grad-reduce --ddp-num-buckets 3
finish
