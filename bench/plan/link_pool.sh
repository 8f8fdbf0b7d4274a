#!/usr/bin/env bash
# Pools link_plan.sh passes: for each MPI, rate and progress mode, the measured change of every pass that ran
# it and their mean, beside the mean of what tandem plan predicted from each pass's profile (with the doctor's
# figures, calibrated, as link_plan.sh's last columns; and from the trace alone). One pass's measured change
# moves between passes by about as much as the 2-point target: the mean over passes says how far the model
# is off, each pass's row how far one A/B is.
#   bench/plan/link_pool.sh OUT...      OUT: link_plan.sh's output folders (their ab/ and doctor_<mpi>_*.json)
set -u
[ $# -ge 1 ] || { echo "usage: bench/plan/link_pool.sh OUT..." >&2; exit 2; }
python3 - "$@" <<'PY'
import glob, json, os, statistics, sys

def change(p):  # a plan.json's predicted change of its second prediction, %
    r = json.load(open(p))["predictions"]
    return (r[1]["step_us"] / r[0]["step_us"] - 1) * 100

cells = {}  # (mpi, rate, mode) -> [(pass, measured, doctor, trace)]
for out in sys.argv[1:]:
    mpis = {os.path.basename(f).split("_")[1] for f in glob.glob(os.path.join(out, "doctor_*_*.json"))}
    if len(mpis) != 1:
        sys.exit("%s: expected the doctor's reports of one MPI (doctor_<mpi>_<rate>.json), found %s"
                 % (out, sorted(mpis) or "none"))
    mpi = mpis.pop()
    mpi = {"openmpi": "Open MPI", "mpich": "MPICH"}.get(mpi, mpi)
    runs = sorted(glob.glob(os.path.join(out, "ab", "*gbit_*_overlap_grad")))
    if not runs:
        sys.exit("%s: no link_plan.sh A/B (ab/<rate>gbit_<mode>_overlap_grad) in it" % out)
    for run in runs:
        need = [os.path.join(run, f) for f in ("summary.json", "plan/plan.json", "plan-doctor/plan.json")]
        if not all(os.path.exists(f) for f in need):
            print("%s: skipped (no summary, plan or plan with the doctor's figures)" % run)
            continue
        s = json.load(open(need[0]))
        measured = (s["candidate"]["mean_step_ms"] / s["baseline"]["mean_step_ms"] - 1) * 100
        rate, mode = os.path.basename(run).split("gbit_")[0], os.path.basename(run).split("_")[1]
        cells.setdefault((mpi, float(rate), mode), []).append((out, measured, change(need[2]), change(need[1])))

print("| MPI | rate Gbit/s | progress | passes | measured change, each pass | mean | predicted, doctor, each "
      "pass | mean | error of the means (points) | from the trace alone, mean | error (points) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
errs, terrs, spread, per_pass = [], [], [], []
for (mpi, rate, mode), v in sorted(cells.items()):
    m = statistics.mean(x[1] for x in v)
    d = statistics.mean(x[2] for x in v)
    t = statistics.mean(x[3] for x in v)
    errs.append(abs(d - m)); terrs.append(abs(t - m))
    per_pass += [abs(x[2] - x[1]) for x in v]
    if len(v) > 1:
        spread.append(max(x[1] for x in v) - min(x[1] for x in v))
    print("| %s | %g | %s | %d | %s | %+.2f%% | %s | %+.2f%% | %.2f | %+.2f%% | %.2f |"
          % (mpi, rate, mode, len(v), ", ".join("%+.2f%%" % x[1] for x in v), m,
             ", ".join("%+.2f%%" % x[2] for x in v), d, abs(d - m), t, abs(t - m)))
if errs:
    print("the means: with the doctor's figures %d of %d cells within 2 points (%.2f off on average), from the "
          "trace alone %d of %d (%.2f); each pass alone: %d of %d within 2 points"
          % (sum(e <= 2 for e in errs), len(errs), statistics.mean(errs), sum(e <= 2 for e in terrs), len(terrs),
             statistics.mean(terrs), sum(e <= 2 for e in per_pass), len(per_pass)))
if spread:
    print("the measured change of one cell moved by %.2f points between its passes on average (up to %.2f)"
          % (statistics.mean(spread), max(spread)))
PY
