#!/usr/bin/env bash
# How long a step's gradient reduce-scatters and parameter all-gathers take, first post to last completion,
# when the same gradients are cut into more or fewer buckets (shared memory, the tiny configuration, 2 ranks,
# distributed optimizer, no overlap: every collective is posted after the backward and waited at once).
# The bytes are the same at every count; what changes is how many collectives are in flight together. A
# collective through shared memory moves only when polled: with TANDEM_WAIT_POLL=backoff the waits sleep between
# polls once 32 in a row have completed nothing (src/distributed/comm.c), and fewer, larger collectives take
# longer; polled back to back (the default on a host with no more ranks than cores), they do not.
#   bench/plan/poll_pace.sh [STEPS] [REPEATS]     (defaults 20 and 2; env BUCKETS ("1 2 3 6"), PROGRESS,
#                                                  TANDEM_WAIT_POLL, TANDEM, MPIRUN)
# Prints one row per bucket count: medians over the profiled steps (6..STEPS) of both ranks and all repeats.
set -u
cd "$(dirname "$0")/../.."
STEPS=${1:-20}
REPS=${2:-2}
BUCKETS=${BUCKETS:-1 2 3 6}
PROGRESS=${PROGRESS:-thread}
. bench/plan/lib.sh
machine_line
echo "tandem $(git describe --always --dirty), --comm-progress $PROGRESS, TANDEM_WAIT_POLL=${TANDEM_WAIT_POLL:-(default)}, $STEPS steps, profiled 6..$STEPS, $REPS run(s) a count, interleaved"
for r in $(seq "$REPS"); do
  for nb in $BUCKETS; do
    echo "{\"profile\": {\"enable\": true, \"start_step\": 6, \"end_step\": $STEPS, \"level\": 1, \"save_path\": \"$W/p$nb-$r\"}}" >"$W/tools.json"
    "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train "${BASE[@]}" --global-batch-size 4 --ddp-num-buckets "$nb" \
      --comm-progress "$PROGRESS" --train-iters "$STEPS" --profile-config "$W/tools.json" >"$W/train$nb-$r.log" 2>&1 \
      || { echo "train failed: $(tail -n 3 "$W/train$nb-$r.log")" >&2; exit 1; }
  done
done
python3 - "$W" $BUCKETS <<'PY'
import glob, json, os, statistics, sys
w, counts = sys.argv[1], sys.argv[2:]
print("| --ddp-num-buckets | reduce-scatters ms | all-gathers ms | step ms |")
print("|---|---|---|---|")
for nb in counts:
    span = {"grad reduce-scatter": [], "param all-gather": []}
    steps = []
    for f in glob.glob(os.path.join(w, "p%s-*" % nb, "trace_rank*.json")):
        t = json.load(open(f))
        ev = [e for e in (t["traceEvents"] if isinstance(t, dict) else t) if e.get("ph") == "X"]
        comm = {name: [e for e in ev if e.get("cat") == "comm" and e["name"] == name] for name in span}
        for s in (e for e in ev if e.get("cat") == "phase" and e.get("name") == "step"):
            t0, t1 = s["ts"], s["ts"] + s["dur"]
            steps.append(s["dur"] / 1e3)
            for name, v in span.items():
                cs = [e for e in comm[name] if t0 <= e["ts"] < t1]
                if cs: v.append((max(e["ts"] + e["dur"] for e in cs) - min(e["ts"] for e in cs)) / 1e3)
    med = lambda v: "%.2f" % statistics.median(v) if v else "-"
    print("| %s | %s | %s | %s |" % (nb, med(span["grad reduce-scatter"]), med(span["param all-gather"]), med(steps)))
PY
