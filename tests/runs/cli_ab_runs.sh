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
