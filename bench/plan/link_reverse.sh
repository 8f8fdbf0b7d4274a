#!/usr/bin/env bash
# The other way round: tandem plan from each A/B's overlapped run (the candidate's profile of link_plan.sh's
# overlap_grad cells, read as the baseline; its link and speed beside compute from its own trace) predicts the
# overlap turned off, calibrated to the candidate's measured mean, against the A/B's measured baseline.
#   bench/plan/link_reverse.sh OUT...     OUT: a link_plan.sh output folder; env TANDEM (build/tandem)
[ $# -gt 0 ] || { echo "link_reverse.sh: expected one or more link_plan.sh output folders" >&2; exit 2; }
set -u
cd "$(dirname "$0")/../.."
TANDEM=${TANDEM:-build/tandem}
tmp=$(mktemp -d /tmp/tdm_reverse.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
echo "| pass | rate Gbit/s | progress | measured change, overlap off | predicted from the overlapped run | error (points) | predicted step vs measured |"
echo "|---|---|---|---|---|---|---|"
for out in "$@"; do
  [ -d "$out/ab" ] || { echo "link_reverse.sh: $out has no ab/ folder (expected a link_plan.sh output folder)" >&2; exit 2; }
  for run in "$out"/ab/*_overlap_grad; do
    [ -f "$run/summary.json" ] && [ -d "$run/traces/candidate" ] || continue
    cell=$(basename "$run"); rate=${cell%%gbit_*}; mode=${cell#*gbit_}; mode=${mode%%_*}
    mb=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["candidate"]["mean_step_ms"])' "$run/summary.json")
    if ! "$TANDEM" plan "$run/traces/candidate" --model configs/tiny --freeze-vision --freeze-projector \
      --comm-progress "$mode" --candidate "--no-overlap-grad-reduce" --baseline-step-ms "$mb" --out "$tmp/plan" \
      >"$tmp/plan.txt" 2>&1; then
      echo "| $out | $rate | $mode | plan failed: $(head -n 1 "$tmp/plan.txt") |"
      continue
    fi
    python3 - "$out" "$rate" "$mode" "$run/summary.json" "$tmp/plan/plan.json" <<'PY'
import json, sys
out, rate, mode, sp, pp = sys.argv[1:]
s, p = json.load(open(sp)), json.load(open(pp))["predictions"]
ma, mb = s["baseline"]["mean_step_ms"], s["candidate"]["mean_step_ms"]
mc, pc, off = (ma / mb - 1) * 100, (p[1]["step_us"] / p[0]["step_us"] - 1) * 100, p[1]["step_us"] / 1e3
print("| %s | %s | %s | %+.2f%% | %+.2f%% | %.2f | %.1f vs %.1f (%+.1f%%) |" % (out, rate, mode, mc, pc, abs(pc - mc), off, ma,
                                                                        (off / ma - 1) * 100))
PY
  done
done
