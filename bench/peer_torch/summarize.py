#!/usr/bin/python3
"""summarize.py - tables of the peer benchmark from the metrics of its runs.

    summarize.py OUT_DIR

Reads OUT_DIR/runs.tsv (one line per run: size, kind, repeat, metrics file), the FLOPs per
step OUT_DIR/<size>/flops.jsonl (tdm_model_flops via peer_flops) and OUT_DIR/params.json
(global batch, measured window), and writes OUT_DIR/summary.md (also printed) and
OUT_DIR/summary.json.

Per run, over the measured window of iterations (the same steps, so the same batches, on
every side): samples/s = samples in the window / sum of step_ms; GFLOP/s = model FLOPs of
those steps / the same time. Each figure is then the median over the repeats; a ratio is
the median of the per-repeat ratios (the two sides of a repeat ran back to back). The
throughput ratio also gets a 95% interval: the pooled ratio (all repeats' window time of
PyTorch / of tandem) under a paired moving-block bootstrap, the method of `tandem ab`
(src/ab/stats.h): each repeat rebuilt from blocks of ceil(n^(1/3)) consecutive iterations,
the same iterations drawn for both sides, since repeat r of both ran the same batches.
Exit status 1 when a size's first-step losses disagree beyond --loss-tol (relative).
"""
import json
import math
import os
import random
import statistics as st
import sys

KINDS = {
    "tandem": "tandem, dp=2 x 1 thread (distributed optimizer, overlapped reduce-scatter)",
    "torch": "PyTorch DDP (gloo), 2 processes x 1 thread (overlapped all-reduce)",
    "dp1_t2": "tandem, dp=1 x 2 BLAS threads",
    "dp1_t1": "tandem, dp=1 x 1 BLAS thread",
    "dp2_dist": "tandem, dp=2 x 1 thread, distributed optimizer (no overlap)",
    "dp2_plain": "tandem, dp=2 x 1 thread, plain optimizer: all-reduce (no overlap)",
}


def load(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def med(xs):
    return st.median(xs) if xs else float("nan")


def paired_block_ci(runs_a, runs_b, resamples=2000, seed=20261130):
    """95% percentile interval of sum(b) / sum(a) over paired runs (lists of equal-length lists)."""
    rng = random.Random(seed)
    est, draws = sum(map(sum, runs_b)) / sum(map(sum, runs_a)), []
    for _ in range(resamples):
        sa = sb = 0.0
        for a, b in zip(runs_a, runs_b):
            n = len(a)
            L = max(1, min(math.ceil(round(n ** (1 / 3), 9)), n // 2))  # tdm_stats_auto_block
            filled = 0
            while filled < n:
                s0 = rng.randrange(n - L + 1)
                for j in range(s0, s0 + min(L, n - filled)):
                    sa += a[j]
                    sb += b[j]
                filled += min(L, n - filled)
        draws.append(sb / sa)
    draws.sort()
    q = lambda p: draws[min(len(draws) - 1, max(0, int(round(p * (len(draws) - 1)))))]
    return est, q(0.025), q(0.975)


def main():
    out = sys.argv[1]
    tol = float(sys.argv[sys.argv.index("--loss-tol") + 1]) if "--loss-tol" in sys.argv else 1e-5
    P = json.load(open(os.path.join(out, "params.json")))
    if not P.get("dist_opt", 1):  # DIST_OPT=0: DDP's own scheme, all-reduce and the full update on every rank
        KINDS["tandem"] = "tandem, dp=2 x 1 thread (plain optimizer, overlapped all-reduce)"
    if P.get("tandem_extra"):
        KINDS["tandem"] += " " + P["tandem_extra"]
    lo, hi, gb = P["window"][0], P["window"][1], P["global_batch_size"]
    runs = {}
    for line in open(os.path.join(out, "runs.tsv")):
        size, kind, rep, path = line.rstrip("\n").split("\t")
        if os.path.exists(path):
            runs.setdefault(size, {}).setdefault(kind, []).append((int(rep), load(path)))
    md, js, bad = [], {}, 0
    for size in P["sizes"]:
        if size not in runs:
            continue
        fl = load(os.path.join(out, size, "flops.jsonl"))
        flops = {r["step"] + 1: r["flops"] for r in fl}
        flops0 = {r["step"] + 1: r.get("flops_rank0", r["flops"] / 2) for r in fl}
        S = {}
        for kind, reps in runs[size].items():
            per = []
            for rep, rows in sorted(reps):
                w = [r for r in rows if lo <= r["iteration"] <= hi]
                if len(w) != hi - lo + 1:
                    continue
                t = sum(r["step_ms"] for r in w) / 1e3
                f = sum(flops[r["iteration"]] for r in w)
                per.append({"rep": rep, "samples_s": gb * len(w) / t, "gflop_s": f / t / 1e9,
                            "step_ms": med([r["step_ms"] for r in w]),
                            "grad_sync_ms": med([r.get("grad_sync_ms", float("nan")) for r in w]),
                            "optimizer_ms": med([r.get("optimizer_ms", float("nan")) for r in w]),
                            "param_gather_ms": med([r.get("param_gather_ms", float("nan")) for r in w]),
                            "losses": [r["loss"] for r in rows[:5]],
                            "window_ms": [r["step_ms"] for r in sorted(w, key=lambda r: r["iteration"])],
                            "compute_cpu_s": sum(r.get("compute_cpu_ms", float("nan")) for r in w) / 1e3,
                            "cpu_s": sum(r.get("cpu_ms", float("nan")) for r in w) / 1e3})
            S[kind] = per
        js[size] = S
        md.append("### %s (window: iterations %d-%d of %d, global batch %d; medians of %d repeats)\n" %
                  (size, lo, hi, P["steps"], gb, len(S.get("tandem", []))))
        md.append("| run | samples/s | GFLOP/s | median step ms | all repeats, samples/s |")
        md.append("|---|---:|---:|---:|---|")
        for kind in KINDS:
            if kind in S and S[kind]:
                p = S[kind]
                md.append("| %s | %.2f | %.2f | %.1f | %s |" % (
                    KINDS[kind], med([x["samples_s"] for x in p]), med([x["gflop_s"] for x in p]),
                    med([x["step_ms"] for x in p]), ", ".join("%.2f" % x["samples_s"] for x in p)))
        if S.get("tandem") and S.get("torch"):
            pairs = [(a["samples_s"], b["samples_s"]) for a in S["tandem"] for b in S["torch"] if a["rep"] == b["rep"]]
            ratios = [a / b for a, b in pairs]
            md.append("\n**tandem / PyTorch throughput: %.2fx** (median of per-repeat ratios %s; target >= 1.5x)\n" %
                      (med(ratios), ", ".join("%.2f" % r for r in ratios)))
            js[size]["ratio"] = med(ratios)
            reps = sorted(set(a["rep"] for a in S["tandem"]) & set(b["rep"] for b in S["torch"]))
            ta = [next(a for a in S["tandem"] if a["rep"] == r)["window_ms"] for r in reps]
            tb = [next(b for b in S["torch"] if b["rep"] == r)["window_ms"] for r in reps]
            est, clo, chi = paired_block_ci(ta, tb)
            md.append("pooled over the %d repeats: **%.2fx**, 95%% interval [%.2fx, %.2fx] (paired block bootstrap "
                      "over iterations)\n" % (len(reps), est, clo, chi))
            js[size]["ratio_pooled"], js[size]["ratio_ci95"] = est, [clo, chi]
            lt, lp = S["tandem"][0]["losses"], S["torch"][0]["losses"]
            md.append("| iteration | tandem loss | PyTorch loss | relative difference |")
            md.append("|---:|---:|---:|---:|")
            for i, (a, b) in enumerate(zip(lt, lp)):
                md.append("| %d | %.9f | %.9f | %.1e |" % (i + 1, a, b, abs(a - b) / abs(b)))
            e = abs(lt[0] - lp[0]) / abs(lp[0])
            ok = e <= tol
            bad += not ok
            md.append("\nfirst-step loss agreement: %s (relative %.1e, tolerance %.0e)\n" % (
                "PASS" if ok else "FAIL", e, tol))
            js[size]["first_loss_rel_diff"] = e
        prof = os.path.join(out, size, "tandem_prof.1", "profiling", "analysis.json")
        nw = hi - lo + 1
        f0 = sum(flops0[i] for i in range(lo, hi + 1))
        tc = ta = None
        if S.get("tandem") and all(x["compute_cpu_s"] == x["compute_cpu_s"] for x in S["tandem"]):
            # the same runs as the throughput: clock_gettime around each step (metrics.jsonl), as the peer's
            tc, ta, n = med([x["compute_cpu_s"] for x in S["tandem"]]), med([x["cpu_s"] for x in S["tandem"]]), nw
            src = ("tandem: the compute thread's and the process's CPU time around each step (metrics.jsonl "
                   "compute_cpu_ms, cpu_ms); PyTorch: time.thread_time / process_time; both from the timed runs, "
                   "medians of the repeats")
        elif os.path.exists(prof):  # older tandem: one extra profiled run's per-thread statistics
            A = json.load(open(prof))
            n = len([x for x in A["steps"] if x["rank"] == 0])
            th = [x for x in A["threads"] if x["rank"] == 0]
            tc = sum(x["run_ms"] for x in th if x["name"] == "compute") / 1e3
            ta = sum(x["run_ms"] for x in th) / 1e3
            src = ("tandem: the profiler's per-thread run time, one profiled run, %d steps recorded; PyTorch: "
                   "time.thread_time / process_time, median of the repeats" % n)
        if S.get("torch") and tc:
            pc = med([x["compute_cpu_s"] for x in S["torch"]])
            pa = med([x["cpu_s"] for x in S["torch"]])
            md.append("CPU time of rank 0 over the same %d steps (%s); FLOPs of rank 0's micro-batches "
                      "(tdm_model_flops):\n" % (nw, src))
            md.append("| side | compute thread CPU ms/step | all threads CPU ms/step | GFLOP per compute-thread CPU second |")
            md.append("|---|---:|---:|---:|")
            md.append("| tandem | %.1f | %.1f | %.1f |" % (tc * 1e3 / n, ta * 1e3 / n, f0 / 1e9 / (tc * nw / n)))
            md.append("| PyTorch | %.1f | %.1f | %.1f |" % (pc * 1e3 / nw, pa * 1e3 / nw, f0 / 1e9 / pc))
            md.append("\n**compute CPU time PyTorch / tandem: %.2fx**\n" % ((pc / nw) / (tc / n)))
            js[size]["cpu_ratio"] = (pc / nw) / (tc / n)
        if S.get("dp1_t2") and S.get("dp2_dist"):
            sp = {k: med([x["samples_s"] for x in S[k]]) for k in ("dp1_t2", "dp1_t1", "dp2_dist") if S.get(k)}
            md.append("scaling efficiency (samples/s at dp=2 / (2 x samples/s at dp=1)): "
                      "%.2f against dp=1 x 2 threads" % (sp["dp2_dist"] / (2 * sp["dp1_t2"])) +
                      ("; %.2f against dp=1 x 1 thread" % (sp["dp2_dist"] / (2 * sp["dp1_t1"])) if "dp1_t1" in sp else "")
                      + "\n")
        if S.get("dp2_dist") and S.get("dp2_plain"):
            md.append("| optimizer (dp=2, no overlap) | step ms | grad sync ms | optimizer ms (incl. gather) | "
                      "param all-gather ms |")
            md.append("|---|---:|---:|---:|---:|")
            for k, name in (("dp2_dist", "distributed: reduce-scatter + shard update + all-gather"),
                            ("dp2_plain", "plain: all-reduce + full update")):
                p = S[k]
                md.append("| %s | %.1f | %.1f | %.1f | %.1f |" % (
                    name, med([x["step_ms"] for x in p]), med([x["grad_sync_ms"] for x in p]),
                    med([x["optimizer_ms"] for x in p]), med([x["param_gather_ms"] for x in p])))
            md.append("")
    text = "\n".join(md)
    print(text)
    open(os.path.join(out, "summary.md"), "w").write(text + "\n")
    json.dump(js, open(os.path.join(out, "summary.json"), "w"), indent=1)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
