#!/usr/bin/env bash
# tandem analyze end to end: real PyTorch 1.13 traces made here by a 2-process gloo DDP run
# (every step and collective found; the diagnostics for gradients reduced after the backward and
# for a late rank), HTA's own trace (the figure HTA computes, the report files), tandem's own
# trace format (the same hidden/exposed as trace-summary), and bad input (one sentence each).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
TANDEM=${TANDEM:-$BUILD/tandem}
PY=/usr/bin/python3
FIX=${TANDEM_FIXTURES:-../shared/fixtures}
W=$(mktemp -d /tmp/tdm_cli_analyze.XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# --- PyTorch 1.13 (legacy profiler) traces from a real gloo DDP run ------------------------------
if $PY -c "import torch" 2>/dev/null; then
  for mode in overlap after-backward late; do
    args=(); [ $mode = after-backward ] && args=(--mode after-backward)
    [ $mode = late ] && args=(--late-rank 1 --late-ms 50)
    if timeout 300 $PY tests/runs/ddp_gloo_profile.py "$W/ddp-$mode" "${args[@]}" >"$W/ddp-$mode.log" 2>&1; then ok
    else bad "ddp_gloo_profile.py --mode $mode failed: $(tail -n 5 "$W/ddp-$mode.log")"; continue; fi
    mv "$W/ddp-$mode/expected.json" "$W/expected-$mode.json"
    if "$TANDEM" analyze --json --out "$W/out-$mode" "$W/ddp-$mode" >"$W/an-$mode.json" 2>"$W/an-$mode.err"; then ok
    else bad "analyze $mode: $(cat "$W/an-$mode.err")"; continue; fi
    $PY - "$W/an-$mode.json" "$W/expected-$mode.json" "$W/ddp-$mode" "$mode" <<'PYEOF' && ok || bad "analyze $mode: see above"
import json, sys, os
an, ex, d, mode = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3], sys.argv[4]
run = an["runs"][0]
errs = []
if len(run["ranks"]) != 2: errs.append("ranks: %d" % len(run["ranks"]))
for r in run["ranks"]:
    raw = json.load(open(os.path.join(d, "rank%d.json" % r["rank"])))
    steps = sorted((e for e in raw if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    got = [s["step"] for s in r["steps"]]
    if got != ex["steps"]: errs.append("rank %d: steps %s, the loop ran %s" % (r["rank"], got, ex["steps"]))
    if not any("one lower than the loop index" in n for n in r["notes"]): errs.append("no legacy-format note")
    total = empty = 0
    for s, st in zip(r["steps"], steps):  # gloo's transfers that start inside the step, counted here
        n = sum(1 for e in raw if e["name"].startswith("gloo:") and st["ts"] <= e["ts"] <= st["ts"] + st["dur"])
        total += n
        empty += n == 0  # gloo's thread may start a step's transfers after the step's record (seen once in CI)
        if s["collectives"] != n:
            errs.append("rank %d step %d: %d collectives, the trace has %d" % (r["rank"], s["step"], s["collectives"], n))
        if mode == "after-backward" and n != 12: errs.append("after-backward: %d collectives, 12 parameters" % n)
        if not (s["hidden_comm_ms"] <= s["comm_ms"] + 1e-9 and s["step_ms"] > 0): errs.append("step %s figures" % s)
    if 2 * empty > len(steps): errs.append("rank %d: %d of %d steps hold no collective" % (r["rank"], empty, len(steps)))
    ar = [c for c in r["collectives"] if c["kind"] == "all_reduce"]
    if not ar or ar[0]["count"] != total: errs.append("rank %d: all_reduce count %s, %d in steps" % (r["rank"], ar, total))
    if r["world_size"] is not None: errs.append("the legacy format has no world size")
diag = {x["id"] for x in run["diagnostics"]}
if mode == "after-backward":
    for want in ("grads_after_backward", "nothing_hidden"):
        if want not in diag: errs.append("diagnostic %s did not fire: %s" % (want, diag))
if mode == "overlap" and "grads_after_backward" in diag: errs.append("DDP's buckets overlap the backward: %s" % diag)
if mode == "late":
    late = [x["text"] for x in run["diagnostics"] if x["id"] == "rank_late"]
    if not late or not late[0].startswith("rank 1 "): errs.append("rank 1 sleeps 50 ms a step: %s" % late)
for e in errs: print(e)
sys.exit(1 if errs else 0)
PYEOF
  done
else
  echo "skipped: the gloo DDP traces (python3 without torch; scripts/setup.sh installs python3-torch)"
fi

# --- Holistic Trace Analysis' trace: HTA's own figure, every output file --------------------------
if [ -f "$FIX/expected.json" ]; then
  if "$TANDEM" analyze --out "$W/hta" "$FIX/hta/nccl_parser_config/nccl_data.json.gz" >"$W/hta.txt" 2>&1; then ok
  else bad "analyze nccl_data: $(cat "$W/hta.txt")"; fi
  grep -q "rank 0 .* 14.31 .* 15.14" "$W/hta.txt" && ok || bad "the table lacks HTA's 14.31 / 15.14: $(cat "$W/hta.txt")"
  grep -q "displayTimeUnit \"ms\" only sets how a viewer displays times" "$W/hta.txt" && ok || bad "no displayTimeUnit note"
  $PY - "$W/hta" "$FIX/expected.json" <<'PYEOF' && ok || bad "report files"
import json, sys, os, xml.dom.minidom
d, ex = sys.argv[1], json.load(open(sys.argv[2]))
an = json.load(open(os.path.join(d, "analysis.json")))
h = an["runs"][0]["ranks"][0]["hta"]
e = ex["traces"]["hta/nccl_parser_config/nccl_data.json.gz"]
assert abs(h["default"]["comp_comm_overlap_pctg"] - e["hta_default"]["comp_comm_overlap_pctg"]) <= 0.01, h["default"]
assert abs(h["last_step_kept"]["comp_comm_overlap_pctg"] - e["hta_include_last_profiler_step"]["comp_comm_overlap_pctg"]) <= 0.01
for f in ("timeline_run1.svg", "steps_run1.svg"):
    xml.dom.minidom.parse(os.path.join(d, f))
md = open(os.path.join(d, "report.md")).read()
assert "HTA default (last profiled step dropped, float timestamps rounded)" in md
assert "| rank 0 | 3 |" in md, md[:500]
PYEOF
else
  echo "skipped: the HTA fixture checks ($FIX/expected.json not found; the fixtures are read in place)"
fi

# --- tandem's own trace format: the figures of trace-summary ------------------------------------
mkdir -p "$W/tandem"
$PY - "$W/tandem/trace.json" <<'PYEOF'
import json, sys
ev = []
for r in (0, 1):
    ev += [{"ph": "M", "name": "process_name", "pid": r, "tid": 0, "args": {"name": "rank %d" % r}},
           {"ph": "M", "name": "thread_name", "pid": r, "tid": 0, "args": {"name": "compute"}},
           {"ph": "M", "name": "thread_name", "pid": r, "tid": 1, "args": {"name": "comm"}}]
    for s in range(3):
        t0 = 1000.0 * s * 10 + r * 3
        ev.append({"ph": "X", "name": "step", "cat": "phase", "ts": t0, "dur": 9000, "pid": r, "tid": 0, "args": {"arg": s + 1, "level": 0}})
        ev.append({"ph": "X", "name": "forward", "cat": "phase", "ts": t0, "dur": 3000, "pid": r, "tid": 0, "args": {"arg": -1, "level": 0}})
        ev.append({"ph": "X", "name": "backward", "cat": "phase", "ts": t0 + 3000, "dur": 4000, "pid": r, "tid": 0, "args": {"arg": -1, "level": 0}})
        ev.append({"ph": "X", "name": "grad reduce-scatter", "cat": "comm", "ts": t0 + 5000, "dur": 1500 + 100 * r, "pid": r, "tid": 1, "args": {"arg": 1, "level": 1}})
        ev.append({"ph": "X", "name": "grad reduce-scatter", "cat": "comm", "ts": t0 + 7000, "dur": 1000, "pid": r, "tid": 1, "args": {"arg": 0, "level": 1}})
        ev.append({"ph": "X", "name": "param all-gather", "cat": "comm", "ts": t0 + 8100, "dur": 800, "pid": r, "tid": 1, "args": {"arg": 0, "level": 1}})
json.dump({"displayTimeUnit": "ms", "traceEvents": ev}, open(sys.argv[1], "w"))
PYEOF
if "$TANDEM" analyze --json --out "$W/tandem-out" "$W/tandem" >"$W/tandem.json" 2>"$W/tandem.err" &&
   "$TANDEM" trace-summary --json "$W/tandem" >"$W/tandem-ts.json" 2>>"$W/tandem.err"; then ok
else bad "tandem trace: $(cat "$W/tandem.err")"; fi
$PY - "$W/tandem.json" "$W/tandem-ts.json" <<'PYEOF' && ok || bad "tandem's trace: analyze and trace-summary differ"
import json, sys
an, ts = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
rows = {(s["rank"], s["step"]): s for s in ts["steps"]}
n = 0
for r in an["runs"][0]["ranks"]:
    for s in r["steps"]:
        t = rows[(r["rank"], s["step"])]
        for k in ("step_ms", "compute_ms", "comm_ms", "hidden_comm_ms", "exposed_comm_ms"):
            assert abs(s[k] - t[k]) < 1e-6, (k, s, t)
        n += 1
assert n == 6 and len(rows) == 6, n
assert an["runs"][0]["ranks"][0]["format"] == "tandem"
# its collectives by kind, from the records' names (the trace holds no sizes), 3 a step
for r in an["runs"][0]["ranks"]:
    k = {c["kind"]: c for c in r["collectives"]}
    rs, ag = k["reduce_scatter"], k["all_gather"]
    assert set(k) == {"reduce_scatter", "all_gather"} and rs["count"] == 6 and ag["count"] == 3, k
    assert abs(rs["total_ms"] - 3 * (2.5 + 0.1 * r["rank"])) < 1e-6 and abs(ag["total_ms"] - 2.4) < 1e-6, k
    assert rs["group_size"] == 2 and rs["total_bytes"] is None and rs["count_sized"] == 0, rs
    assert [s["collectives"] for s in r["steps"]] == [3, 3, 3], r["steps"]
    assert r["mean"]["last_collective_exposed_ms"] is None, r["mean"]  # not known: not 0
PYEOF

# an analysis.json beside it cut short: the summary is printed, the thread table left out with a sentence, exit 1
mkdir -p "$W/tandem-cut" && cp "$W/tandem/trace.json" "$W/tandem-cut/" && printf '{"threads": [' >"$W/tandem-cut/analysis.json"
"$TANDEM" trace-summary "$W/tandem-cut" >"$W/tandem-cut.out" 2>"$W/tandem-cut.err"; rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$W/tandem-cut.err")" -eq 1 ] && grep -q "analysis.json:1:.*the thread table is left out" \
    "$W/tandem-cut.err" && [ -s "$W/tandem-cut.out" ]; then ok
else bad "trace-summary with a cut analysis.json: rc $rc, $(cat "$W/tandem-cut.err")"; fi

# --- bad input: one sentence, non-zero exit ---------------------------------------------------------
expect_fail() { # name, expected text, command...
  local name=$1 want=$2; shift 2
  if "$@" >"$W/bad.out" 2>"$W/bad.err"; then bad "$name: exit 0"; return; fi
  local lines; lines=$(wc -l <"$W/bad.err")
  if grep -q -- "$want" "$W/bad.err" && [ "$lines" -eq 1 ]; then ok
  else bad "$name: expected one line with '$want', got: $(cat "$W/bad.err")"; fi
}
$PY - "$W" <<'PYEOF'
import gzip, json, sys
w = sys.argv[1]
ev = [{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10 * i, "dur": 5,
       "args": {"stream": 7, "correlation": i}} for i in range(20000)]
raw = json.dumps({"traceEvents": ev}).encode()
gz = gzip.compress(raw)
open(w + "/cut.json.gz", "wb").write(gz[: len(gz) // 2])
open(w + "/cut.json", "wb").write(raw[: len(raw) // 2])
open(w + "/nosteps.json", "w").write(json.dumps({"traceEvents": ev[:50] + [
    {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "pid": 0, "tid": 9, "ts": 3, "dur": 40,
     "args": {"stream": 9, "correlation": 999}}]}))
open(w + "/notrace.json", "w").write('{"a": 1}')
PYEOF
expect_fail "truncated .gz" "a truncated .gz file" "$TANDEM" analyze --out "$W/o1" "$W/cut.json.gz"
expect_fail "truncated .json" "unexpected end of file" "$TANDEM" analyze --out "$W/o2" "$W/cut.json"
expect_fail "missing path" "no such file or directory" "$TANDEM" analyze --out "$W/o3" "$W/none.json"
expect_fail "not a trace" "expected a profiler trace" "$TANDEM" analyze --out "$W/o4" "$W/notrace.json"
mkdir -p "$W/empty"
expect_fail "empty folder" "no trace found in the folder" "$TANDEM" analyze --out "$W/o5" "$W/empty"
expect_fail "unknown flag" "unknown flag '--bogus'" "$TANDEM" analyze --bogus "$W/nosteps.json"
if "$TANDEM" analyze --out "$W/o6" "$W/nosteps.json" >"$W/nosteps.out" 2>&1; then ok; else bad "no steps: $(cat "$W/nosteps.out")"; fi
grep -q "has no ProfilerStep#N annotation: the whole trace is analysed as one step" "$W/nosteps.out" && ok \
  || bad "no steps: not said: $(cat "$W/nosteps.out")"
"$TANDEM" analyze --help | grep -q "usage: tandem analyze" && ok || bad "--help"
"$TANDEM" --help | grep -q "analyze" && ok || bad "tandem --help does not list analyze"

echo "cli_analyze: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
