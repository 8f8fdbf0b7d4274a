#!/usr/bin/env bash
# tandem plan on the emulated link (root; bench/link): bench/link/run_link_bench.sh ab runs baseline and
# candidate at each rate and progress mode, with a profiled run of each side; plan predicts the candidate
# from the baseline's trace, and the table sets the predicted change and step beside tandem ab's measured ones;
# "calibrated" predicts again calibrated (--baseline-step-ms) to the A/B's measured baseline mean; the last two
# columns predict with what tandem doctor measured on the same link for that MPI and progress mode (the compute a
# collective beside it costs, and its speed there: tandem plan --doctor with its report for the cell's progress
# mode; run first, into $OUT/doctor_<mpi>_<rate>.json), calibrated as the column before.
#   bench/plan/link_plan.sh             env as run_link_bench.sh: RATES ("0.5 1 2"), MODES ("thread inline"),
#                                       CANDS ("overlap_grad"), AB_MPI (openmpi), STEPS, WINDOW, OUT (build/plan-link);
#                                       PLAN_ONLY=1 predicts again from the runs already in OUT;
#                                       then link_phases.py: the phases of each overlap_grad change, measured and modelled
set -u
cd "$(dirname "$0")/../.."
export RATES=${RATES:-0.5 1 2} MODES=${MODES:-thread inline} CANDS=${CANDS:-overlap_grad} OUT=${OUT:-build/plan-link}
export AB_MPI=${AB_MPI:-openmpi}
# PLAN_ONLY=1: predict again from the A/B runs already in $OUT (another tandem plan, same measurements)
if [ "${PLAN_ONLY:-0}" != 1 ]; then
  PROBE_MPIS=$AB_MPI bash bench/link/run_link_bench.sh doctor >"$OUT.doctor.log" 2>&1 || { tail -n 20 "$OUT.doctor.log"; exit 1; }
  bash bench/link/run_link_bench.sh ab >"$OUT.log" 2>&1 || { tail -n 20 "$OUT.log"; exit 1; }
fi
TANDEM=${TANDEM:-build/tandem}
echo "load after:$(uptime | sed 's/.*load average://'); $AB_MPI, $(git describe --always --dirty)"
echo "| rate Gbit/s | progress | candidate | measured baseline ms | replay ms | measured change | predicted change | error (points) | predicted candidate ms vs measured | calibrated | with doctor's figures | error (points) | last rank's collectives, ms a step: baseline, candidate |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
predict() { # NAME FLAGS...: tandem plan of the run's baseline trace for candidate $c into $run/NAME
  local name=$1; shift
  "$TANDEM" plan "$run/traces/baseline" --model configs/tiny --freeze-vision --freeze-projector --candidate "$c" \
    --comm-progress "$mode" "$@" --out "$run/$name" >"$run/$name.txt" 2>&1
}
for rate in $RATES; do for mode in $MODES; do for cand in $CANDS; do
  run="$OUT/ab/${rate}gbit_${mode}_${cand}"
  [ -f "$run/summary.json" ] || { echo "| $rate | $mode | $cand | failed |"; continue; }
  case $cand in overlap_grad) c="--overlap-grad-reduce" ;; overlap_both) c="--overlap-grad-reduce --overlap-param-gather" ;; *) c=${CAND_FLAGS:-} ;; esac
  predict plan || { echo "| $rate | $mode | $cand | plan failed: $(head -n 1 "$run/plan.txt") |"; continue; }
  ma=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["baseline"]["mean_step_ms"])' "$run/summary.json")
  predict plan-calibrated --baseline-step-ms "$ma" \
    || { echo "| $rate | $mode | $cand | calibrated plan failed: $(head -n 1 "$run/plan-calibrated.txt") |"; continue; }
  rm -rf "$run/plan-doctor"
  doc=""
  if [ -f "$OUT/doctor_${AB_MPI}_$rate.json" ]; then
    predict plan-doctor --doctor "$OUT/doctor_${AB_MPI}_$rate.json" --baseline-step-ms "$ma" \
      && doc=$(sed -n 's/.*the '"$mode"' line ([^)]*): //p' "$run/plan-doctor.txt" | sed 's/ (not used: given)//g') \
      || rm -rf "$run/plan-doctor"
  fi
  # the candidate's own trace read as a baseline: how much later its last rank completed (model.agree_us)
  rm -rf "$run/plan-candidate-trace"
  "$TANDEM" plan "$run/traces/candidate" --model configs/tiny --freeze-vision --freeze-projector \
    --comm-progress "$mode" --out "$run/plan-candidate-trace" >/dev/null 2>&1 || rm -rf "$run/plan-candidate-trace"
  # the doctor's figures but the speed beside compute the candidate's own profile gives (link_phases.py's last column)
  rm -rf "$run/plan-own-speed"
  v=$(python3 -c 'import json, sys; v = json.load(open(sys.argv[1]))["model"]["speed_beside"]; print(v if 0 < v <= 1 else "")' \
    "$run/plan-candidate-trace/plan.json" 2>/dev/null)
  if [ -d "$run/plan-doctor" ] && [ -n "$v" ]; then
    predict plan-own-speed --doctor "$OUT/doctor_${AB_MPI}_$rate.json" --comm-speed-beside "$v" --baseline-step-ms "$ma" \
      || rm -rf "$run/plan-own-speed"
  fi
  python3 - "$run" "$rate" "$mode" "$cand" "$doc" <<'PY'
import json, sys, os
run, rate, mode, cand, doc = sys.argv[1:]
s = json.load(open(os.path.join(run, "summary.json")))
p = json.load(open(os.path.join(run, "plan", "plan.json")))["predictions"]
q = json.load(open(os.path.join(run, "plan-calibrated", "plan.json")))["predictions"]
ma, mb = s["baseline"]["mean_step_ms"], s["candidate"]["mean_step_ms"]
pa, pb = p[0]["step_us"] / 1e3, p[1]["step_us"] / 1e3
mc, pc = (mb / ma - 1) * 100, (pb / pa - 1) * 100
def iv(pred):  # the prediction's 95% interval over resamples of the traced steps, when plan gave one
    r = pred.get("change_interval_pct")
    return " (%+.2f .. %+.2f)" % tuple(r) if r else ""
def miv(s):  # the measured change's interval between whole runs
    r = s.get("runs_ci95_pct")
    return " (%+.2f .. %+.2f)" % tuple(r) if r else ""
qb = q[1]["step_us"] / 1e3
dp = os.path.join(run, "plan-doctor", "plan.json")
if os.path.exists(dp):
    d = json.load(open(dp))["predictions"]
    dc = (d[1]["step_us"] / d[0]["step_us"] - 1) * 100
    db = d[1]["step_us"] / 1e3
    dcell = "%+.2f%%%s (%s; calibrated %.1f, %+.1f%%) | %.2f" % (dc, iv(d[1]), doc, db, (db / mb - 1) * 100,
                                                                   abs(dc - mc))
else:
    dcell = "no doctor figures | -"
def agree(name):  # mean over the traced steps of the longest agreement wait, ms
    f = os.path.join(run, name, "plan.json")
    return "%.1f" % (json.load(open(f))["model"]["agree_us"] / 1e3) if os.path.exists(f) else "-"
dcell += " | %s, %s" % (agree("plan"), agree("plan-candidate-trace"))
print("| %s | %s | %s | %.1f | %.1f | %+.2f%%%s | %+.2f%%%s | %.2f | %.1f vs %.1f (%+.1f%%) | %.1f (%+.1f%%) | %s |" %
      (rate, mode, cand, ma, pa, mc, miv(s), pc, iv(p[1]), abs(pc - mc), pb, mb, (pb / mb - 1) * 100, qb,
       (qb / mb - 1) * 100, dcell))
PY
done; done; done
echo
echo "where each change came from, the timing runs' phases against the model's (bench/plan/link_phases.py):"
python3 bench/plan/link_phases.py "$OUT"
