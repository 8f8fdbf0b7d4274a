#!/usr/bin/env bash
# tandem ab --baseline-run/--candidate-run from the command line: the golden pairs of
# ../shared/fixtures (table, report files, summary.json), synthetic hostile logs (ANSI colours,
# carriage returns, appended runs, a cut last line), and bad input: one sentence on stderr and a
# non-zero exit each, never a crash.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
TANDEM=${TANDEM:-$BUILD/tandem}
FIX=${TANDEM_FIXTURES:-../shared/fixtures}
PY=/usr/bin/python3
W=$(mktemp -d /tmp/tdm_cli_ab_runs.XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# expect_error WHAT PATTERN COMMAND...: non-zero exit, one line on stderr matching PATTERN, no core dump
expect_error() {
  local what=$1 pattern=$2; shift 2
  "$@" >"$W/out" 2>"$W/err"
  local rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 128 ]; then bad "$what: exit $rc"; return; fi
  if [ "$(wc -l <"$W/err")" -ne 1 ] || ! grep -q -- "$pattern" "$W/err"; then
    bad "$what: stderr: $(cat "$W/err")"; return
  fi
  ok
}

# ---- synthetic logs: these need no fixtures ----
line() { # iteration of ms loss
  printf ' iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %s | learning rate: 1.000000E-04 | global batch size:     8 | lm loss: %s | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' \
    "$1" "$2" $(($1 * 8)) "$3" "$4"
}
{
  printf '\033[32m------------------------ arguments ------------------------\033[0m\n'
  printf '  overlap_grad_reduce ............................. False\n'
  printf -- '-------------------- end of arguments ---------------------\n'
  for i in $(seq 1 30); do line "$i" 40 "100.$((i % 7))" "5.000000E+00"; done
  printf 'progress 10%%\rprogress 90%%\r'; line 31 40 100.5 5.000000E+00
  printf -- '------------------------ arguments ------------------------\n  overlap_grad_reduce ..... False\n'
  printf -- '-------------------- end of arguments ---------------------\n'
  for i in $(seq 25 40); do line "$i" 40 "101.$((i % 5))" "5.000000E+00"; done
} >"$W/a.log"
{
  printf -- '------------------------ arguments ------------------------\n'
  printf '  overlap_grad_reduce ............................. True\n'
  printf -- '-------------------- end of arguments ---------------------\n'
  for i in $(seq 1 40); do line "$i" 40 "90.$((i % 3))" "5.000000E+00" | sed 's/$/\r/'; done
  printf ' iteration       41/      40 | consumed samples:          328 | elapsed time per iter'
} >"$W/b.log"
if "$TANDEM" ab --baseline-run "$W/a.log" --candidate-run "$W/b.log" --out "$W/syn" >"$W/syn.out" 2>"$W/syn.err"; then
  ok
else
  bad "synthetic logs: $(cat "$W/syn.err")"
fi
grep -q "only overlap_grad_reduce: False -> True differ" "$W/syn.out" && ok || bad "config diff: $(grep configuration "$W/syn.out")"
grep -q "holds 2 runs appended" "$W/syn.out" && ok || bad "the appended run is not said"
grep -q "its last line is an iteration line cut short" "$W/syn.out" && ok || bad "the cut line is not said"
grep -q "loss equal at the printed precision .*yes: identical at the printed precision" "$W/syn.out" && ok \
  || bad "loss row: $(grep 'loss equal' "$W/syn.out")"
grep -q "clipped to 21:40" "$W/syn.out" && ok || bad "window: $(grep window "$W/syn.out")"
for f in report.md summary.json steps_baseline.csv steps_candidate.csv loss.svg step_time.svg step_time_hist.svg; do
  [ -s "$W/syn/$f" ] && ok || bad "$f missing"
done
$PY - "$W/syn/summary.json" <<'EOF' && ok || bad "summary.json"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["config_diff"] == ["overlap_grad_reduce: False -> True"], s["config_diff"]
assert s["window"] == [21, 40], s["window"]
assert s["loss_bitwise_equal"] is None and s["loss_equal_at_printed_precision"] is True
assert s["baseline"]["runs"][0]["passes"] == 2
assert s["step_time_change_pct"] < -9
EOF

# ---- bad input ----
printf 'hello\nno iterations here\n' >"$W/none.log"
expect_error "no iteration line" "none.log: no iteration line" "$TANDEM" ab --baseline-run "$W/none.log" --candidate-run "$W/a.log"
expect_error "missing run" "missing.log: No such file" "$TANDEM" ab --baseline-run "$W/a.log" --candidate-run "$W/missing.log"
expect_error "no candidate" "--candidate-run: expected one or more runs" "$TANDEM" ab --baseline-run "$W/a.log"
expect_error "a training flag" "--steps is not a flag of ab on finished runs" "$TANDEM" ab --baseline-run "$W/a.log" \
  --candidate-run "$W/b.log" --steps 10
expect_error "bad window" "--window '5': expected FIRST:LAST" "$TANDEM" ab --baseline-run "$W/a.log" --candidate-run "$W/b.log" --window 5
expect_error "window past the runs" "holds no iteration both sides logged" "$TANDEM" ab --baseline-run "$W/a.log" \
  --candidate-run "$W/b.log" --window 100:200 --out "$W/x"
printf '{"a": 1}' >"$W/other.json"
expect_error "other JSON" "neither Megatron-LM golden values" "$TANDEM" ab --baseline-run "$W/other.json" --candidate-run "$W/a.log"
printf '\037\213\010\000' >"$W/z.log.gz"
expect_error "a truncated .gz log" "z.log.gz: the compressed data ends early.*a truncated .gz file" "$TANDEM" ab \
  --baseline-run "$W/z.log.gz" --candidate-run "$W/a.log"
for i in 1 2 3 4 5 6 7 8; do cat "$W/a.log"; done | gzip -c >"$W/big.log.gz"
head -c 1500 "$W/big.log.gz" >"$W/cut.log.gz"
expect_error "a .gz log cut short" "cut.log.gz: the compressed data ends early" "$TANDEM" ab --baseline-run "$W/cut.log.gz" \
  --candidate-run "$W/a.log"
gzip -c "$W/a.log" >"$W/a.log.gz"
"$TANDEM" ab --baseline-run "$W/a.log.gz" --candidate-run "$W/b.log" --out "$W/gz" >"$W/gz.out" 2>&1 \
  && cmp -s <(grep -A6 "^  Performance" "$W/gz.out") <(grep -A6 "^  Performance" "$W/syn.out") && ok \
  || bad "a .gz log reads as the plain one: $(head -n 5 "$W/gz.out")"
: >"$W/out-file"
expect_error "--out is a file" "out-file" "$TANDEM" ab --baseline-run "$W/a.log" --candidate-run "$W/b.log" --out "$W/out-file"
"$TANDEM" ab --baseline-run "$W/a.log" --help >"$W/help" 2>&1 && grep -q "baseline-run RUN" "$W/help" && ok || bad "--help"
expect_error "a misspelt flag" "did you mean '--candidate-run'" "$TANDEM" ab --baseline-run "$W/a.log" --candiate-run "$W/b.log"
expect_error "a flag's value missing" "--window: expected a value" "$TANDEM" ab --baseline-run "$W/a.log" --candidate-run "$W/b.log" --window
"$TANDEM" ab --baseline-run "$W/a.log" --version | grep -q "^tandem " && ok || bad "--version"

# runs of different world sizes and global batches: warnings, the analysis goes on
for ws in 8 16; do
  {
    printf -- '------------------------ arguments ------------------------\n'
    printf '  overlap_grad_reduce ............................. False\n  world_size ...................................... %s\n' "$ws"
    printf -- '-------------------- end of arguments ---------------------\n'
    for i in $(seq 1 40); do line "$i" 40 "100.$((i % 7))" "5.000000E+00" | sed "s/global batch size:     8/global batch size:    $((ws / 4))/"; done
  } >"$W/ws$ws.log"
done
"$TANDEM" ab --baseline-run "$W/ws8.log" --candidate-run "$W/ws16.log" --out "$W/ws" >"$W/ws.out" 2>&1 && ok \
  || bad "world sizes: $(tail -n 3 "$W/ws.out")"
grep -q "different world sizes or parallel layouts (world_size: 8 -> 16)" "$W/ws.out" && ok || bad "world sizes not said"
grep -q "different global batches (2 and 4 samples)" "$W/ws.out" && ok || bad "global batches not said"

# ---- profiler traces given with the runs: LOG,TRACES or a folder holding both ----
$PY - "$W" <<'EOF'
import gzip, json, sys
w = sys.argv[1]
ev = [{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 100 * i, "dur": 60,
       "args": {"stream": 7, "correlation": i}} for i in range(40)]
ev.append({"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "pid": 0, "tid": 9, "ts": 30,
           "dur": 400, "args": {"stream": 9, "correlation": 999}})
open(w + "/nosteps.json", "w").write(json.dumps({"traceEvents": ev}))
gz = gzip.compress(json.dumps({"traceEvents": ev * 200}).encode())
open(w + "/cut.json.gz", "wb").write(gz[: len(gz) // 2])
EOF
"$TANDEM" ab --baseline-run "$W/a.log,$W/nosteps.json" --candidate-run "$W/b.log" --out "$W/ns" >"$W/ns.out" 2>&1 \
  && ok || bad "a trace without steps: $(tail -n 3 "$W/ns.out")"
grep -q "baseline traces: .*nosteps.json has no ProfilerStep#N annotation: the whole trace is analysed as one step" "$W/ns.out" && ok \
  || bad "a trace without steps is not said: $(grep -i profilerstep "$W/ns.out")"
grep -q "Only the baseline's runs come with profiler traces" "$W/ns.out" && ok || bad "one side traced is not said"
grep -q "communication busy *0.400 *n/a" "$W/ns.out" && ok || bad "the comm row: $(grep 'communication busy' "$W/ns.out")"
expect_error "missing traces" "missing-dir: no such file or directory (the traces of" "$TANDEM" ab \
  --baseline-run "$W/a.log,$W/missing-dir" --candidate-run "$W/b.log"
expect_error "a truncated .gz trace" "cut.json.gz.*a truncated .gz file" "$TANDEM" ab --baseline-run "$W/a.log,$W/cut.json.gz" \
  --candidate-run "$W/b.log" --out "$W/x"
mkdir -p "$W/two" && cp "$W/a.log" "$W/two/x.log" && cp "$W/b.log" "$W/two/y.log"
mkdir -p "$W/tracesonly" && cp "$W/nosteps.json" "$W/tracesonly/rank0.json"
expect_error "a folder with two logs" "the folder holds 2 logs" "$TANDEM" ab --baseline-run "$W/two" --candidate-run "$W/b.log"

HTA=$FIX/hta/trace_diff
if [ -f "$HTA/control/control.json.gz" ]; then
  mkdir -p "$W/runB" && cp "$W/b.log" "$W/runB/train.log" && ln -s "$(cd "$HTA/test" && pwd)/test.json.gz" "$W/runB/rank1.json.gz"
  "$TANDEM" ab --baseline-run "$W/a.log,$HTA/control/control.json.gz" --candidate-run "$W/runB" --out "$W/tr" \
    >"$W/tr.out" 2>&1 && ok || bad "HTA traces: $(tail -n 3 "$W/tr.out")"
  "$TANDEM" analyze --json --out "$W/tr-an" "$HTA/control/control.json.gz" "$HTA/test/test.json.gz" >"$W/tr-an.json" \
    2>"$W/tr-an.err" && ok || bad "analyze: $(cat "$W/tr-an.err")"
  grep -q "Communication (profiler traces, ms/step)" "$W/tr.out" && grep -q "overlap (hidden / communication)" "$W/tr.out" \
    && ok || bad "no communication rows: $(cat "$W/tr.out")"
  grep -q "The traces state different world sizes (8 and 2 ranks)" "$W/tr.out" && ok || bad "world sizes not said"
  $PY - "$W/tr/summary.json" "$W/tr-an.json" <<'EOF' && ok || bad "summary.json's communication keys"
import json, sys
s, an = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for side, run in (("baseline", 0), ("candidate", 1)):
    got, want = s[side], an["runs"][run]["ranks"][0]["mean"]
    for k in ("comm_ms", "hidden_comm_ms", "exposed_comm_ms", "compute_ms"):
        assert abs(got[k] - want[k]) < 1e-6, (side, k, got[k], want[k])
    assert abs(got["overlap_pct"] - want["overlap_pct"]) < 1e-6, (side, got["overlap_pct"], want["overlap_pct"])
    assert got["trace_ranks"] == 1 and len(got["traces"]) == 1, got
assert s["baseline"]["trace_world_size"] == 8 and s["candidate"]["trace_world_size"] == 2
EOF
else
  echo "skipped: ab with HTA's traces ($FIX/hta not found; set TANDEM_FIXTURES)"
fi

# a real A/B of traces: gradients reduced after the backward (baseline) against DDP's overlap
# (candidate), the candidate with a second run that has no traces
if $PY -c "import torch" 2>/dev/null; then
  timeout 300 $PY tests/runs/ddp_gloo_profile.py "$W/gl-a" --mode after-backward >"$W/gl-a.log" 2>&1 \
    && timeout 300 $PY tests/runs/ddp_gloo_profile.py "$W/gl-b" >"$W/gl-b.log" 2>&1 && ok \
    || bad "ddp_gloo_profile.py: $(tail -n 3 "$W/gl-a.log" "$W/gl-b.log")"
  rm -f "$W/gl-a/expected.json" "$W/gl-b/expected.json"
  "$TANDEM" ab --baseline-run "$W/a.log,$W/gl-a" --candidate-run "$W/b.log,$W/gl-b" "$W/b.log" --out "$W/gl" \
    >"$W/gl.out" 2>&1 && ok || bad "gloo traces: $(tail -n 3 "$W/gl.out")"
  grep -q "1 of the candidate's 2 runs come with traces" "$W/gl.out" && ok || bad "the untraced repeat is not said"
  $PY - "$W/gl/summary.json" <<'EOF' && ok || bad "gloo A/B: see above"
import json, sys
s = json.load(open(sys.argv[1]))
a, b = s["baseline"], s["candidate"]
assert a["hidden_comm_ms"] == 0 and a["overlap_pct"] == 0, a   # nothing hides after the backward
assert b["hidden_comm_ms"] > 0 and b["overlap_pct"] > 0, b
for x in (a, b):
    assert abs(x["hidden_comm_ms"] + x["exposed_comm_ms"] - x["comm_ms"]) < 1e-6, x
    assert x["trace_ranks"] == 2 and x["trace_rank_steps"] > 0, x
assert s["runs_per_side"] == [1, 2]
EOF
  # the same traces alone, no log: each step's time the slowest rank's ProfilerStep span
  "$TANDEM" ab --baseline-run "$W/gl-a" --candidate-run "$W/gl-b" --window 2:100 --out "$W/glt" >"$W/glt.out" 2>&1 \
    && ok || bad "traces alone: $(tail -n 3 "$W/glt.out")"
  grep -q "profiler traces alone has the profiled steps only" "$W/glt/report.md" && ok \
    || bad "traces alone: the limit is not said"
  $PY - "$W/gl-a" "$W/glt/summary.json" <<'EOF' && ok || bad "traces alone: step times"
import glob, gzip, json, sys
def spans(f):
    d = json.load(gzip.open(f) if f.endswith(".gz") else open(f))
    ev = d["traceEvents"] if isinstance(d, dict) else d
    return {e["name"]: e["dur"] for e in ev if e.get("name", "").startswith("ProfilerStep#") and e.get("ph") == "X"}
files = sorted(glob.glob(sys.argv[1] + "/*.json*"))
per_rank = [spans(f) for f in files]
s = json.load(open(sys.argv[2]))
a = s["baseline"]
assert a["trace_ranks"] == len(files) and a["hidden_comm_ms"] == 0, a
steps = sorted(set.intersection(*(set(p) for p in per_rank)))
slowest = [max(p[k] for p in per_rank) / 1e3 for k in steps]
print("mean", a.get("mean_step_ms"), "slowest per step", slowest)
assert min(slowest) - 1e-6 <= a["mean_step_ms"] <= max(slowest) + 1e-6, (a["mean_step_ms"], slowest)
EOF
else
  echo "skipped: ab with gloo DDP traces (python3 without torch; scripts/setup.sh installs python3-torch)"
fi

# ---- the golden pairs ----
if [ ! -f "$FIX/README.md" ]; then
  echo "skipped: the golden-value pairs ($FIX not found; set TANDEM_FIXTURES)"
else
  G=$FIX/megatron/test_cases/gpt
  "$TANDEM" ab --baseline-run "$G/gpt3_mr_tp1_pp4_vp1_dgx_a100_1N8G" \
    --candidate-run "$G/gpt3_345m_nightly_dgx_a100_1N8G_tp1_pp4_vp1_overlap_grad_reduce" --out "$W/p1" >"$W/p1.out" 2>&1 \
    && ok || bad "pair 1: $(tail -n 3 "$W/p1.out")"
  grep -q "only --overlap-grad-reduce: (absent) -> true differ" "$W/p1.out" && ok || bad "pair 1 diff"
  grep -q "identical at the printed precision (5 decimals) at all 11 iterations" "$W/p1.out" && ok || bad "pair 1 loss"
  "$TANDEM" ab --baseline-run "$G/gpt3_345m_nightly_dgx_a100_1N8G_tp4_pp1" \
    --candidate-run "$G/gpt3_345m_nightly_dgx_a100_1N8G_tp4_pp1_overlap_grad_reduce" --window 5:50 --out "$W/p2" \
    >"$W/p2.out" 2>&1 && ok || bad "pair 2: $(tail -n 3 "$W/p2.out")"
  grep -q "NO at 11 of 11 iterations (5 decimals): largest relative deviation 0.00028 at iteration 40" "$W/p2.out" \
    && ok || bad "pair 2 loss: $(grep 'loss equal' "$W/p2.out")"
  grep -q "median step time (ms) *289.075 *308.180" "$W/p2.out" && ok || bad "pair 2 medians"
  P3=$G/gpt3_mcore_te_tp4_pp1_dist_optimizer_overlap_grad_reduce
  "$TANDEM" ab --baseline-run "$P3/golden_values_dev_dgx_a100.json" \
    --candidate-run "${P3}_param_gather/golden_values_dev_dgx_a100.json" --out "$W/p3" >"$W/p3.out" 2>&1 \
    && ok || bad "pair 3: $(tail -n 3 "$W/p3.out")"
  grep -q "only --overlap-param-gather: (absent) -> true differ" "$W/p3.out" && ok || bad "pair 3 diff"
  grep -q "NO at 9 of 11 iterations (5 decimals): largest relative deviation 2.6e-05 at iteration 40" "$W/p3.out" \
    && ok || bad "pair 3 loss: $(grep 'loss equal' "$W/p3.out")"
  "$TANDEM" ab --baseline-run "$P3/golden_values_lts_dgx_a100.json" \
    --candidate-run "${P3}_param_gather/golden_values_lts_dgx_a100.json" --out "$W/p3l" >"$W/p3l.out" 2>&1 \
    && ok || bad "pair 3 lts: $(tail -n 3 "$W/p3l.out")"
  grep -q "The sides log different iterations" "$W/p3l.out" && grep -q "losses differ by up to 4.7% (iteration 45)" "$W/p3l.out" \
    && ok || bad "pair 3 lts: not flagged"
  expect_error "a test case with two golden files" "holds 2 golden values files" "$TANDEM" ab --baseline-run "$P3" \
    --candidate-run "${P3}_param_gather"
  M=$FIX/mindspeed-mm/baseline_results
  "$TANDEM" ab --baseline-run "$M/finetune_qwen3vl_30B.json" --candidate-run "$M/finetune_qwen3vl_30B_v1.json" \
    --out "$W/ms" >"$W/ms.out" 2>&1 && grep -q "window 3:4, after the 2 warm-up steps" "$W/ms.out" && ok \
    || bad "MindSpeed baselines: $(head -n 3 "$W/ms.out")"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
