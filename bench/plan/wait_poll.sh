#!/usr/bin/env bash
# How a wait that blocks the compute thread polls, both ways with one binary: TANDEM_WAIT_POLL=backoff (sleeps
# of 20-50 us between polls once 32 in a row found nothing, as beside compute) against spin (back to back,
# yielding the core at each round: the default where the host has no more ranks than cores). Plain `tandem
# train` runs of each setting, the two ways interleaved; per run, the medians over iterations 11..STEPS of the
# step, of the communication thread's CPU beside compute and of the process's CPU (metrics.jsonl).
#   bench/plan/wait_poll.sh [STEPS] [REPEATS]     (defaults 30 and 3; env CASES ("default buckets3 overlap
#                                                  inline"), NPS ("2"), MODEL (the tiny configuration), TANDEM)
set -u
cd "$(dirname "$0")/../.."
STEPS=${1:-30}
REPS=${2:-3}
CASES=${CASES:-default buckets3 overlap inline}
NPS=${NPS:-2}
. bench/plan/lib.sh
MODEL=${MODEL:-$W/model}
flags() {
  case $1 in
    default) ;;
    buckets3) echo --ddp-num-buckets 3 ;;
    overlap) echo --overlap-grad-reduce --overlap-param-gather ;;
    inline) echo --comm-progress inline ;;
    *) echo "unknown case $1" >&2; exit 2 ;;
  esac
}
machine_line
echo "tandem $(git describe --always --dirty), $STEPS steps, medians of iterations 11..$STEPS, $REPS round(s), model $MODEL"
echo "| ranks | case | TANDEM_WAIT_POLL | step ms | comm thread CPU ms | process CPU ms |"
echo "|---|---|---|---|---|---|"
for r in $(seq "$REPS"); do for np in $NPS; do for c in $CASES; do for way in backoff spin; do
  rm -rf "$W/run"
  # shellcheck disable=SC2046
  TANDEM_WAIT_POLL=$way "$MPIRUN" "${MPIFLAGS[@]}" -np "$np" "$TANDEM" train "${BASE[@]}" --model "$MODEL" \
    --global-batch-size $((2 * np)) $(flags "$c") --train-iters "$STEPS" --run-dir "$W/run" >"$W/train.log" 2>&1 \
    || { echo "train failed: $(tail -n 3 "$W/train.log")" >&2; exit 1; }
  python3 - "$W/run/metrics.jsonl" "$np" "$c" "$way" <<'PY'
import json, statistics, sys
path, np, case, way = sys.argv[1:]
v = [json.loads(l) for l in open(path)]
v = [x for x in v if x.get("iteration", 0) > 10]
med = lambda k: statistics.median(x[k] for x in v)
print("| %s | %s | %s | %.2f | %.2f | %.2f |" % (np, case, way, med("step_ms"), med("comm_thread_cpu_ms"), med("cpu_ms")))
PY
done; done; done; done
echo "load after:$(uptime | sed 's/.*load average://')"
