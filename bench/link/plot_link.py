#!/usr/bin/env python3
"""plot_link.py - step time against link rate from run_link_bench.sh's A/B reports.

    bench/link/plot_link.py [--relative] [--reanalyze TANDEM] --out FILE.svg LABEL=DIR [LABEL=DIR ...]

Each DIR is a run_link_bench.sh output folder (its ab/<rate>gbit_<mode>_<cand>/summary.json);
LABEL names the MPI library it used. One panel per (label, progress mode) found, each with
the mean step time of the baseline (no overlap; the mean of the A/B runs' baselines at that
rate), of the two candidates (--overlap-grad-reduce; both overlap flags) and, dashed, each
candidate's ideal step time: the step less the hideable communication it did not hide (analysis.json's
ideal_step_ms, docs/profiling.md; for a step with no idle time, max(compute, communication - last
bucket) + last bucket), from its profiled steps. --relative divides every value by the baseline's mean step time at that rate
(for runs whose batch differs from rate to rate, MBS_BY_RATE). --reanalyze recomputes the ideal from
the saved traces with TANDEM's analysis (bench/link/ab_table.py). Plain SVG, no plotting library.
"""
import argparse
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ab_table  # noqa: E402  (reanalyze: the profiled columns recomputed from saved traces)

CANDS = (("overlap_grad", "--overlap-grad-reduce", "#c60"), ("overlap_both", "both overlap flags", "#157"))
BASE_COLOR = "#555"


def load(folder, tandem=None):
    """{(mode, rate): {cand: summary}} from one output folder."""
    runs = {}
    ab = os.path.join(folder, "ab")
    if not os.path.isdir(ab):
        sys.exit(f"plot_link.py: {folder}: no ab/ folder (run bench/link/run_link_bench.sh ab first)")
    for name in sorted(os.listdir(ab)):
        m = re.fullmatch(r"([0-9.]+)gbit_(thread|inline)_(overlap_grad|overlap_both)", name)
        p = os.path.join(ab, name, "summary.json")
        if not m or not os.path.exists(p):
            continue
        with open(p) as f:
            s = json.load(f)
        if tandem:
            ab_table.reanalyze(tandem, os.path.join(ab, name), "baseline", s["baseline"])
            ab_table.reanalyze(tandem, os.path.join(ab, name), "candidate", s["candidate"])
        runs.setdefault((m.group(2), float(m.group(1))), {})[m.group(3)] = s
    return runs


def panel(o, x0, y0, w, h, title, runs, mode, relative):
    rates = sorted(r for (md, r) in runs if md == mode)
    series = {"baseline": [], **{c: [] for c, _, _ in CANDS}, **{c + "_ideal": [] for c, _, _ in CANDS}}
    for r in rates:
        by = runs[(mode, r)]
        bases = [s["baseline"]["mean_step_ms"] for s in by.values()]
        base = sum(bases) / len(bases)
        unit = base if relative else 1.0
        series["baseline"].append((r, base / unit))
        for c, _, _ in CANDS:
            if c in by:
                series[c].append((r, by[c]["candidate"]["mean_step_ms"] / unit))
                if by[c]["candidate"].get("ideal_step_ms") is not None:
                    series[c + "_ideal"].append((r, by[c]["candidate"]["ideal_step_ms"] / unit))
    ys = [v for pts in series.values() for _, v in pts]
    if not rates or not ys:
        return
    ymax = max(ys) * 1.1
    lx0, lx1 = math.log2(min(rates)), math.log2(max(rates))
    if lx1 == lx0:
        lx0, lx1 = lx0 - 1, lx1 + 1
    L, R, T, B = 56, 12, 28, 40  # margins inside the panel
    X = lambda r: x0 + L + (math.log2(r) - lx0) / (lx1 - lx0) * (w - L - R)
    Y = lambda v: y0 + h - B - v / ymax * (h - T - B)
    o.append(f'<text x="{x0 + w / 2}" y="{y0 + 16}" text-anchor="middle" font-weight="bold">{title}</text>')
    o.append(f'<line x1="{x0 + L}" y1="{Y(0)}" x2="{x0 + w - R}" y2="{Y(0)}" stroke="#000"/>')
    o.append(f'<line x1="{x0 + L}" y1="{Y(0)}" x2="{x0 + L}" y2="{y0 + T}" stroke="#000"/>')
    step = 10 ** math.floor(math.log10(ymax / 4))
    step *= 5 if ymax / step > 20 else 2 if ymax / step > 8 else 1
    v = 0.0
    while v <= ymax:
        o.append(f'<line x1="{x0 + L}" y1="{Y(v):.1f}" x2="{x0 + w - R}" y2="{Y(v):.1f}" stroke="#eee"/>')
        o.append(f'<text x="{x0 + L - 4}" y="{Y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        v += step
    for r in rates:
        o.append(f'<text x="{X(r):.1f}" y="{Y(0) + 16:.1f}" text-anchor="middle">{r:g}</text>')
    o.append(f'<text x="{x0 + L + (w - L - R) / 2}" y="{y0 + h - 6}" text-anchor="middle">link rate (Gbit/s)</text>')
    o.append(f'<text x="{x0 + 14}" y="{y0 + h / 2}" text-anchor="middle" '
             f'transform="rotate(-90 {x0 + 14} {y0 + h / 2})">'
             f'{"mean step time / baseline" if relative else "mean step time (ms)"}</text>')

    def line(pts, color, dash=""):
        if not pts:
            return
        d = " ".join(f"{X(r):.1f},{Y(v):.1f}" for r, v in pts)
        o.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" {dash} points="{d}"/>')
        for r, v in pts:
            o.append(f'<circle cx="{X(r):.1f}" cy="{Y(v):.1f}" r="3" fill="{color}"/>')

    line(series["baseline"], BASE_COLOR)
    for c, _, color in CANDS:
        line(series[c], color)
        line(series[c + "_ideal"], color, 'stroke-dasharray="5,4" stroke-opacity="0.7"')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="the SVG file to write")
    ap.add_argument("--relative", action="store_true", help="step times as a fraction of the baseline's")
    ap.add_argument("--reanalyze", metavar="TANDEM", help="recompute the ideal from the traces with this binary")
    ap.add_argument("sources", nargs="+", metavar="LABEL=DIR")
    a = ap.parse_args()
    panels = []
    for src in a.sources:
        label, sep, folder = src.partition("=")
        if not sep:
            sys.exit(f"plot_link.py: '{src}': expected LABEL=DIR (e.g. openmpi=build/link-bench)")
        runs = load(folder, a.reanalyze)
        for mode in ("thread", "inline"):
            if any(md == mode for md, _ in runs):
                panels.append((f"{label}, {mode} progress", runs, mode))
    if not panels:
        sys.exit("plot_link.py: no A/B summaries found in " + ", ".join(a.sources))
    PW, PH, LEG = 380, 280, 44
    W, H = PW * len(panels), PH + LEG
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="#fff"/>']
    for i, (title, runs, mode) in enumerate(panels):
        panel(o, i * PW, 0, PW, PH, title, runs, mode, a.relative)
    x, y = 60, PH + 18
    items = [("baseline (no overlap)", BASE_COLOR, "")] + [(lab, col, "") for _, lab, col in CANDS] + \
            [("ideal: step - (hideable - hidden) comm.", "#888", 'stroke-dasharray="5,4"')]
    for lab, col, dash in items:
        o.append(f'<line x1="{x}" y1="{y}" x2="{x + 24}" y2="{y}" stroke="{col}" stroke-width="2" {dash}/>')
        o.append(f'<text x="{x + 30}" y="{y + 4}">{lab}</text>')
        x += 40 + 7 * len(lab)
        if x > W - 200:
            x, y = 60, y + 18
    o.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
