#!/usr/bin/env python3
"""learning_report.py OUT TANDEM: the report of scripts/learn.sh (standard library only).

Reads OUT/run/metrics.jsonl (the trainer's per-iteration metrics), OUT/eval_iter_*.txt
(`tandem evaluate` at each checkpoint), OUT/data/{train,test}.json and OUT/tokenizer.json,
and writes OUT/report.md and OUT/learning.svg.

Two reference points for the numbers:
- the unigram baseline: the entropy (nats) of the training answers' loss tokens (answer,
  <|im_end|>, newline) under their own frequencies, i.e. the loss of a model that ignores
  both the picture and the question;
- the answer prior per held-out kind: the accuracy of always giving the training set's most
  frequent answer of that kind.
"""
import collections
import json
import math
import os
import re
import subprocess
import sys

CELLS = ("top left", "top right", "bottom left", "bottom right")
COLOURS = ("red", "green", "blue", "yellow", "purple")
SHAPES = ("circle", "square", "triangle", "cross")


def kind_of(answer):
    if answer in CELLS:
        return "position"
    if answer in COLOURS:
        return "colour"
    if answer in SHAPES:
        return "shape"
    if re.fullmatch(r"[0-9]", answer):
        return "count"
    return None


def unigram_baseline(out, tandem):
    answers = [m["content"] for s in json.load(open(os.path.join(out, "data", "train.json")))
               for m in s["messages"] if m["role"] == "assistant"]
    text = "".join(a.replace("\n", " ") + "<|im_end|>\n" for a in answers)
    ids = subprocess.run([tandem, "tokenize", "--tokenizer", os.path.join(out, "tokenizer.json")], input=text,
                         capture_output=True, text=True, check=True).stdout.split("\n")
    counts = collections.Counter()
    for line in ids[:len(answers)]:
        counts.update(line.split())
        counts["newline"] += 1
    n = sum(counts.values())
    return -sum(v / n * math.log(v / n) for v in counts.values()), n, len(answers)


def priors(out):
    """Per held-out kind: (most frequent training answer, its accuracy on the held-out split)."""
    train = collections.defaultdict(collections.Counter)
    for s in json.load(open(os.path.join(out, "data", "train.json"))):
        for m in s["messages"]:
            k = kind_of(m["content"]) if m["role"] == "assistant" else None
            if k:
                train[k][m["content"]] += 1
    test = collections.defaultdict(list)
    for s in json.load(open(os.path.join(out, "data", "test.json"))):
        a = s["messages"][1]["content"]
        test[kind_of(a)].append(a)
    res = {}
    for k, answers in test.items():
        top = train[k].most_common(1)[0][0]
        res[k] = (top, sum(a == top for a in answers) / len(answers))
    allq = sum(len(v) for v in test.values())
    res["all"] = (None, sum(res[k][1] * len(test[k]) for k in test) / allq)
    return res


def read_evals(out):
    """{iteration: {kind: (percent, right, total)}} from `tandem evaluate`'s output."""
    evals = {}
    for f in sorted(os.listdir(out)):
        m = re.fullmatch(r"eval_iter_(\d+)\.txt", f)
        if not m:
            continue
        kinds = {}
        for line in open(os.path.join(out, f)):
            g = re.match(r"\s*(accuracy:|\w+)\s+([\d.]+)% \((\d+) of (\d+)\)", line)
            if g:
                kinds["all" if g.group(1) == "accuracy:" else g.group(1)] = (float(g.group(2)), int(g.group(3)),
                                                                             int(g.group(4)))
        evals[int(m.group(1))] = kinds
    return evals


def svg(metrics, evals, baseline, title):
    W, H, L, R, T, B = 640, 360, 60, 580, 30, 320
    its = [m["iteration"] for m in metrics]
    n = max(its)
    x = lambda i: L + (R - L) * i / n
    lo, hi = -2, 1  # log10 of the loss axis: 0.01 .. 10
    y = lambda v: B - (B - T) * (math.log10(max(v, 10 ** lo)) - lo) / (hi - lo)
    ya = lambda p: B - (B - T) * p / 100
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         '<rect width="100%" height="100%" fill="white"/>', f'<text x="{L}" y="18" font-size="14">{title}</text>']
    for e in range(lo, hi + 1):
        v = 10 ** e
        o.append(f'<line x1="{L}" x2="{R}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>'
                 f'<text x="{L - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for p in (0, 50, 90, 100):
        o.append(f'<text x="{R + 6}" y="{ya(p) + 4:.1f}" fill="#c60">{p}%</text>')
    step = max(1, round(n / 5 / 100) * 100)
    for i in range(0, n + 1, step):
        o.append(f'<text x="{x(i):.1f}" y="{B + 16}" text-anchor="middle">{i}</text>')
    o.append(f'<text x="{(L + R) / 2}" y="{H - 6}" text-anchor="middle">iteration (16 samples each)</text>')
    o.append(f'<text x="14" y="{(T + B) / 2}" transform="rotate(-90 14 {(T + B) / 2})" text-anchor="middle">'
             'lm loss (nats per answer token)</text>')
    pts = " ".join(f"{x(m['iteration']):.1f},{y(m['loss']):.1f}" for m in metrics)
    o.append(f'<polyline fill="none" stroke="#9bd" stroke-width="1" points="{pts}"/>')
    smooth, pts = [], []
    for m in metrics:  # mean of the last 10 iterations
        smooth.append(m["loss"])
        pts.append(f"{x(m['iteration']):.1f},{y(sum(smooth[-10:]) / len(smooth[-10:])):.1f}")
    o.append(f'<polyline fill="none" stroke="#157" stroke-width="2" points="{" ".join(pts)}"/>')
    o.append(f'<line x1="{L}" x2="{R}" y1="{y(baseline):.1f}" y2="{y(baseline):.1f}" stroke="#a33" '
             'stroke-dasharray="5,4"/>')
    o.append(f'<text x="{R - 4}" y="{y(baseline) - 5:.1f}" text-anchor="end" fill="#a33">unigram baseline '
             f'{baseline:.2f}</text>')
    acc = [(i, evals[i]["all"][0]) for i in sorted(evals) if "all" in evals[i]]
    if acc:
        o.append('<polyline fill="none" stroke="#c60" stroke-width="2" points="' +
                 " ".join(f"{x(i):.1f},{ya(p):.1f}" for i, p in acc) + '"/>')
        for i, p in acc:
            o.append(f'<circle cx="{x(i):.1f}" cy="{ya(p):.1f}" r="3" fill="#c60"/>')
    o.append(f'<text x="{L + 8}" y="{T + 16}" fill="#157">loss (mean of 10 iterations; light: each)</text>')
    o.append(f'<text x="{L + 8}" y="{T + 32}" fill="#c60">held-out accuracy (right axis)</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


def main():
    out, tandem = sys.argv[1], sys.argv[2]
    metrics = [json.loads(line) for line in open(os.path.join(out, "run", "metrics.jsonl"))]
    evals = read_evals(out)
    baseline, n_tok, n_ans = unigram_baseline(out, tandem)
    pri = priors(out)
    secs = open(os.path.join(out, "train_seconds.txt")).read().strip()
    step_ms = sorted(m["step_ms"] for m in metrics)[len(metrics) // 2]
    last = metrics[-1]
    tail = [m["loss"] for m in metrics[-50:]]
    kinds = [k for k in ("count", "colour", "position", "shape") if k in pri]
    md = [f"# Does the tiny model learn? ({out})", "",
          f"{last['iteration']} iterations, {last['consumed_samples']} samples, {secs} s of training on "
          f"the ranks (median step {step_ms:.0f} ms).", "",
          f"- lm loss: {metrics[0]['loss']:.3f} at iteration 1, {sum(tail) / len(tail):.4f} "
          f"(mean of the last {len(tail)} iterations)",
          f"- unigram baseline: {baseline:.3f} nats per loss token ({n_tok} loss tokens of {n_ans} answers)", "",
          "| held-out kind | questions | prior | " + " | ".join(f"it {i}" for i in sorted(evals)) + " |",
          "|---|---:|---:|" + "---:|" * len(evals)]
    for k in kinds + ["all"]:
        total = next((evals[i][k][2] for i in evals if k in evals[i]), 0)
        prior = f"{100 * pri[k][1]:.1f}%" + (f" (`{pri[k][0]}`)" if pri[k][0] else "")
        cells = [f"{evals[i][k][0]:.1f}%" if k in evals[i] else "" for i in sorted(evals)]
        if cells:
            cells[-1] = f"**{cells[-1]}**"
        md.append(f"| {k} | {total} | {prior} | " + " | ".join(cells) + " |")
    open(os.path.join(out, "report.md"), "w").write("\n".join(md) + "\n")
    title = f"tandem train, tiny Qwen3-VL, built-in data (64 px), {last['iteration']} iterations"
    open(os.path.join(out, "learning.svg"), "w").write(svg(metrics, evals, baseline, title))


if __name__ == "__main__":
    main()
