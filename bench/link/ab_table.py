#!/usr/bin/env python3
"""ab_table.py - the Markdown table of a link-bench run's `tandem ab` directories.

    bench/link/ab_table.py OUT/ab "RATES" "MODES" "CANDS" [--reanalyze TANDEM]

One row per rate, progress mode and candidate (the directories OUT/ab/<rate>gbit_<mode>_<cand>).
Step times and the interval come from each run's summary.json (the timing runs); the communication
columns from its profiled run; the communication thread's CPU per step from the timing runs ("-" with inline
progress, or in a summary.json older than that figure); the change between whole runs with its t interval from
REPEATS=3 on ("-" below that). With --reanalyze, those columns are recomputed from the saved traces
(traces/<side>/trace.json) by TANDEM's `trace-summary --json`, i.e. by that build's analysis: a way to
re-read older runs after the analysis changed, without rerunning them.
"""
import json
import os
import subprocess
import sys

LABELS = (("overlap_grad", "--overlap-grad-reduce"), ("overlap_both", "both overlap flags"),
          ("custom", "custom (BASE_FLAGS vs CAND_FLAGS)"))
# summary.json side keys filled from the profiled run's analysis (trace-summary --json "mean")
PROFILED = {"comm_ms": "comm_ms", "exposed_comm_ms": "exposed_comm_ms", "last_bucket_comm_ms": "last_bucket_comm_ms",
            "ideal_step_ms": "ideal_step_ms", "overlap_efficiency": "overlap_efficiency",
            "sched_ideal_step_ms": "sched_ideal_step_ms", "sched_overlap_efficiency": "sched_overlap_efficiency"}


def reanalyze(tandem, run_dir, side, s):
    trace = os.path.join(run_dir, "traces", side)
    out = subprocess.run([tandem, "trace-summary", "--json", trace], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"ab_table.py: {tandem} trace-summary --json {trace} failed: {out.stderr.strip()}")
    mean = json.loads(out.stdout)["mean"]
    for k, src in PROFILED.items():
        s[k] = mean.get(src)


def main(argv):
    tandem = None
    if "--reanalyze" in argv:
        i = argv.index("--reanalyze")
        if i + 1 >= len(argv):
            sys.exit("ab_table.py: --reanalyze needs the tandem binary")
        tandem = argv[i + 1]
        del argv[i:i + 2]
    if len(argv) != 5:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    d, rates, modes, cands = argv[1], argv[2].split(), argv[3].split(), argv[4].split()
    print("| link (Gbit/s) | progress | candidate | micro-batch / global batch | baseline ms | candidate ms "
          "| change (95% CI) | comm share of baseline | exposed comm ms (base / cand) | last bucket ms (cand) "
          "| ideal ms (cand) | overlap eff. (cand) | ideal ms, schedule (cand) | eff., schedule (cand) "
          "| comm-thread CPU ms (base / cand) | between whole runs (95% t) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def f(v, p=1):
        return "-" if v is None else f"{v:.{p}f}"

    for rate in rates:
        for mode in modes:
            for cand, label in LABELS:
                if cand not in cands:
                    continue
                run = os.path.join(d, f"{rate}gbit_{mode}_{cand}")
                p = os.path.join(run, "summary.json")
                if not os.path.exists(p):
                    print(f"| {rate} | {mode} | {label} | | failed | | | | | | | | | | | |")
                    continue
                s = json.load(open(p))
                a, b = s["baseline"], s["candidate"]
                if tandem:
                    reanalyze(tandem, run, "baseline", a)
                    reanalyze(tandem, run, "candidate", b)
                share = a["comm_ms"] / a["mean_step_ms"] if a.get("comm_ms") is not None and a.get("mean_step_ms") else None
                ci = s.get("ci95_pct") or [None, None]
                rc = s.get("runs_ci95_pct")  # REPEATS >= 3 only
                runs = f"{f(s['runs_change_pct'])}% ({f(rc[0])} .. {f(rc[1])})" if rc else "-"
                bp = run + ".batch"
                batch = " / ".join(open(bp).read().split()) if os.path.exists(bp) else "-"
                print(f"| {rate} | {mode} | {label} | {batch} | {f(a['mean_step_ms'])} | {f(b['mean_step_ms'])} "
                      f"| {f(s['step_time_change_pct'])}% ({f(ci[0])} .. {f(ci[1])}) | {f(share and 100 * share, 0)}% "
                      f"| {f(a['exposed_comm_ms'])} / {f(b['exposed_comm_ms'])} | {f(b.get('last_bucket_comm_ms'))} "
                      f"| {f(b['ideal_step_ms'])} | {f(b['overlap_efficiency'], 2)} | {f(b.get('sched_ideal_step_ms'))} "
                      f"| {f(b.get('sched_overlap_efficiency'), 2)} "
                      f"| {f(a.get('comm_cpu_ms'))} / {f(b.get('comm_cpu_ms'))} | {runs} |")


if __name__ == "__main__":
    main(list(sys.argv))
