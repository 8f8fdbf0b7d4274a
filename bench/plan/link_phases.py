#!/usr/bin/env python3
"""Where the change of --overlap-grad-reduce came from, per link_plan.sh cell: the timing runs' phases.

  bench/plan/link_phases.py OUT [OUT ...]     OUT: a link_plan.sh output folder (OUT/ab/<rate>gbit_<mode>_overlap_grad)

For each cell, the change in ms of the mean step and of its phases over the A/B's window and timing runs (the
per-step CSVs tandem ab writes, rank 0): compute (train's fwd_bwd_ms less its grad sync: forward, backward and
the CPU that driving the collectives took there), grad sync (the wait for the gradient collectives after the
backward and the ranks' agreement) and the optimizer (with the parameter all-gathers), set beside the model's
(tandem plan with the doctor's figures, calibrated): compute by the CPU it charges the compute, grad sync by the
rest of its change (it keeps the optimizer). The last column is how much later the last rank completed its
gradient collectives in each side's profiled steps (plan.json's agree_us), which the model takes from the
baseline for the candidate; the very last, how far the predicted change is from the measured one with the doctor's
figures and with the doctor's but the speed beside compute that the candidate's own profile gives (plan-own-speed).
"""
import csv
import json
import os
import sys


def mean_phases(path, lo, hi):
    rows = [r for r in csv.DictReader(open(path)) if lo <= int(r["iteration"]) <= hi]
    if not rows:
        return None
    m = lambda c: sum(float(r[c]) for r in rows) / len(rows)
    return {"step": m("step_ms"), "compute": m("fwd_bwd_ms") - m("grad_sync_ms"), "grad sync": m("grad_sync_ms"),
            "optimizer": m("optimizer_ms")}


def agree_ms(run, name):
    p = os.path.join(run, name, "plan.json")
    return json.load(open(p))["model"]["agree_us"] / 1e3 if os.path.exists(p) else float("nan")


def change_error(run, name, measured):
    p = os.path.join(run, name, "plan.json")
    if not os.path.exists(p):
        return "-"
    q = json.load(open(p))["predictions"]
    return "%.2f" % abs((q[1]["step_us"] / q[0]["step_us"] - 1) * 100 - measured)


def main(outs):
    for out in outs:
        if not os.path.isdir(os.path.join(out, "ab")):
            sys.exit("%s: no ab/ folder (expected a link_plan.sh output folder)" % out)
    print("| MPI | rate Gbit/s | progress | step: measured, model (ms) | compute: measured, model | grad sync: "
          "measured, model | optimizer: measured | last rank's collectives, profiled: baseline, candidate (ms) | "
          "change's error (points): doctor, its own speed beside compute |")
    print("|---|---|---|---|---|---|---|---|---|")
    for out in outs:
        ab = os.path.join(out, "ab")
        names = [n for n in os.listdir(ab) if n.endswith("_overlap_grad") and
                 os.path.exists(os.path.join(ab, n, "summary.json"))]
        for name in sorted(names, key=lambda n: (n.split("_")[1], float(n.split("gbit")[0]))):
            run = os.path.join(ab, name)
            rate, mode = name.split("gbit")[0], name.split("_")[1]
            s = json.load(open(os.path.join(run, "summary.json")))
            w = s.get("window") or [11, s.get("steps", 30)]
            a = mean_phases(os.path.join(run, "steps_baseline.csv"), w[0], w[1])
            b = mean_phases(os.path.join(run, "steps_candidate.csv"), w[0], w[1])
            dp = os.path.join(run, "plan-doctor", "plan.json")
            if not (a and b and os.path.exists(dp)):
                print("| %s | %s | %s | no timing runs or no prediction with the doctor's figures |" % (out, rate, mode))
                continue
            p = json.load(open(dp))["predictions"]
            d_step = (p[1]["step_us"] - p[0]["step_us"]) / 1e3
            d_cpu = (p[1].get("cpu_taken_us", 0) - p[0].get("cpu_taken_us", 0)) / 1e3
            mpi = "MPICH" if os.path.exists(os.path.join(out, "doctor_mpich_%s.json" % rate)) else \
                "Open MPI" if os.path.exists(os.path.join(out, "doctor_openmpi_%s.json" % rate)) else "?"
            dm = {k: b[k] - a[k] for k in a}
            mc = (s["candidate"]["mean_step_ms"] / s["baseline"]["mean_step_ms"] - 1) * 100
            print("| %s | %s | %s | %+.1f, %+.1f | %+.1f, %+.1f | %+.1f, %+.1f | %+.1f | %.1f, %.1f | %s, %s |" %
                  (mpi, rate, mode, dm["step"], d_step, dm["compute"], d_cpu, dm["grad sync"], d_step - d_cpu,
                   dm["optimizer"], agree_ms(run, "plan"), agree_ms(run, "plan-candidate-trace"),
                   change_error(run, "plan-doctor", mc), change_error(run, "plan-own-speed", mc)))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
