#!/usr/bin/env python3
"""grad_only_bound.py - how much of issue 8's overlap efficiency --overlap-grad-reduce alone can reach.

    bench/link/grad_only_bound.py DIR [DIR ...]

DIR is a run_link_bench.sh output folder. For each ab/<rate>gbit_<mode>_overlap_grad run it reads
the candidate's Chrome trace (traces/candidate/trace.json, the profiled steps of every rank)
and prints, per rank-step averages in ms:

  compute    the compute thread's busy time (layers, kernels, phases, minus waits)
  backward   the part of it in backward layers (layer events with arg 1)
  grad comm  union of the gradient reduce-scatters;  param comm: the parameter all-gathers
  last       the last-starting gradient collective (cannot overlap)
  hidden     communication during compute
  issue eff  hidden / min(comm - last, compute): the efficiency the A/B report prints
  max        min(grad comm - last, backward) / min(comm - last, compute): the most that
             efficiency can be with the gradient flag alone. Gradients exist only during the
             backward, and without --overlap-param-gather the all-gather runs after the
             optimizer step with nothing to overlap, yet both count in the denominator.
"""
import json
import os
import sys


def union(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        elif b > a:
            out.append([a, b])
    return out


def minus(A, B):
    out = []
    for a, b in A:
        cur = a
        for c, d in B:
            if d <= cur or c >= b:
                continue
            if c > cur:
                out.append([cur, c])
            cur = max(cur, d)
        if cur < b:
            out.append([cur, b])
    return out


def length(U):
    return sum(b - a for a, b in U) / 1e3


def step_stats(events, st):
    lo, hi, pid, tid = st["ts"], st["ts"] + st["dur"], st["pid"], st["tid"]
    X = [e for e in events if e.get("ph") == "X" and e["pid"] == pid and e["ts"] < hi and e["ts"] + e["dur"] > lo]
    clip = lambda U: [[max(a, lo), min(b, hi)] for a, b in U if min(b, hi) > max(a, lo)]
    span = lambda e: [e["ts"], e["ts"] + e["dur"]]
    on_compute = [e for e in X if e["tid"] == tid]
    waits = union([span(e) for e in on_compute if e["cat"] in ("wait", "data")])
    compute = minus(union([span(e) for e in on_compute if e["cat"] in ("layer", "kernel")
                           or (e["cat"] == "phase" and e["name"] != "step")]), waits)
    backward = minus(union([span(e) for e in on_compute if e["cat"] == "layer" and e["args"].get("arg") == 1]), waits)
    grads = [e for e in X if e["cat"] == "comm" and e["name"].startswith("grad")]
    grad = clip(union([span(e) for e in grads]))
    param = clip(union([span(e) for e in X if e["cat"] == "comm" and e["name"].startswith("param")]))
    comm = union(grad + param)
    last = max(grads, key=lambda e: e["ts"]) if grads else None
    last_ms = (min(last["ts"] + last["dur"], hi) - max(last["ts"], lo)) / 1e3 if last else 0.0
    hidden = length(comm) - length(minus(comm, compute))
    hideable = max(min(length(comm) - last_ms, length(compute)), hidden)
    best = min(length(grad) - last_ms, length(backward))
    return [length(compute), length(backward), length(grad), length(param), last_ms, hidden, hideable, best]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("| folder | link (Gbit/s) | progress | compute | backward | grad comm | param comm | last | hidden "
          "| issue eff. | max for the gradient flag alone |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for folder in sys.argv[1:]:
        ab = os.path.join(folder, "ab")
        runs = sorted(n for n in os.listdir(ab) if n.endswith("_overlap_grad")) if os.path.isdir(ab) else []
        if not runs:
            sys.exit(f"grad_only_bound.py: {folder}: no ab/*_overlap_grad runs")
        for name in sorted(runs, key=lambda n: (n.split("_")[1], float(n.split("gbit")[0]))):
            path = os.path.join(ab, name, "traces", "candidate", "trace.json")
            if not os.path.exists(path):
                continue
            with open(path) as f:
                events = json.load(f)["traceEvents"]
            rows = [step_stats(events, e) for e in events if e.get("name") == "step" and e.get("cat") == "phase"]
            if not rows:
                continue
            m = [sum(r[i] for r in rows) / len(rows) for i in range(len(rows[0]))]
            rate, mode = name.split("gbit_")[0], name.split("_")[1]
            print(f"| {os.path.basename(os.path.normpath(folder))} | {rate} | {mode} | {m[0]:.1f} | {m[1]:.1f} | {m[2]:.1f} "
                  f"| {m[3]:.1f} | {m[4]:.1f} | {m[5]:.1f} | {m[5] / m[6]:.2f} | {m[7] / m[6]:.2f} |")


if __name__ == "__main__":
    main()
