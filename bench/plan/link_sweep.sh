#!/usr/bin/env bash
# A bucket-count sweep on the emulated link (root; bench/link) against tandem plan --suggest's pick.
#
# Every count is measured by `tandem ab` against one reference count (REF), interleaved, so that
# the sweep's points are changes against the same setting with their 95% intervals. The
# reference's profiled trace (from the first A/B) is what `tandem plan` reads: it predicts each
# count and --suggest proposes one, which is added to the sweep when it is not in COUNTS.
#   bench/plan/link_sweep.sh     env: RATE (1, Gbit/s), MODE (thread), FLAGS ("--overlap-grad-reduce
#                                --overlap-param-gather", on at every point), REF (8), COUNTS ("1 2 4 16"),
#                                REPEATS (8), AB_MPI (openmpi), TANDEM (build/tandem), OUT (build/plan-link-sweep),
#                                PLAN_FLAGS (extra tandem plan flags: tandem doctor's, DOCTOR=1 measures them first);
#                                PLAN_ONLY=1 predicts again from the runs already in OUT; RESUME=1 measures only
#                                the counts OUT does not hold yet; CONFIRM=0 skips the closing A/B
#
# A/Bs against the reference drift from one another by about 2% (two counts that cut the same buckets
# were measured 2.1 points apart), as much as the target, so the sweep closes with one more A/B: the
# best measured count against the suggested one, interleaved, whose change with its 95% interval is
# the suggestion's distance from the best.
set -u
cd "$(dirname "$0")/../.."
RATE=${RATE:-1} MODE=${MODE:-thread} REF=${REF:-8} COUNTS=${COUNTS:-1 2 4 16}
FLAGS=${FLAGS:---overlap-grad-reduce --overlap-param-gather}
OUT=${OUT:-build/plan-link-sweep} TANDEM=${TANDEM:-build/tandem}
export REPEATS=${REPEATS:-8} AB_MPI=${AB_MPI:-openmpi} TANDEM
run_dir() { echo "$OUT/n$1/ab/${RATE}gbit_${MODE}_custom"; }
measure() { # ab: FLAGS at REF buckets against FLAGS at $1 buckets
  [ "${PLAN_ONLY:-0}" = 1 ] && return 0
  RATES=$RATE MODES=$MODE CANDS=custom BUCKETS=$REF BASE_FLAGS="$FLAGS" CAND_FLAGS="$FLAGS --ddp-num-buckets $1" \
    OUT="$OUT/n$1" bash bench/link/run_link_bench.sh ab >"$OUT/n$1.log" 2>&1 # its plot knows no custom runs
  [ -f "$(run_dir "$1")/summary.json" ] || { tail -n 20 "$OUT/n$1.log"; echo "the A/B of $1 buckets failed"; exit 1; }
}
plan() { # plan ARGS...: tandem plan on the reference's trace, with PLAN_FLAGS
  "$TANDEM" plan "$(run_dir "$first")/traces/baseline" --model configs/tiny --freeze-vision --freeze-projector \
    ${PLAN_FLAGS:-} "$@"
}
mkdir -p "$OUT"
if [ "${DOCTOR:-0}" = 1 ]; then # what a collective of about a bucket costs beside compute on this link
  [ "${PLAN_ONLY:-0}" = 1 ] || RATES=$RATE PROBE_MPIS=$AB_MPI OUT=$OUT bash bench/link/run_link_bench.sh doctor >"$OUT/doctor.log" 2>&1
  PLAN_FLAGS="${PLAN_FLAGS:-} --doctor $OUT/doctor_${AB_MPI}_$RATE.json --comm-progress $MODE"
  echo "tandem doctor: $PLAN_FLAGS"
fi
set -- $COUNTS
first=$1
[ -f "$(run_dir "$first")/summary.json" ] && [ "${RESUME:-0}" = 1 ] || measure "$first"
plan --suggest --min-gain 0 --out "$OUT/suggest" >"$OUT/suggest.txt" 2>&1 || { cat "$OUT/suggest.txt"; exit 1; }
pick=$(sed -n 's/.*--ddp-num-buckets \([0-9]*\).*/\1/p' "$OUT/suggest.txt" | head -n 1)
counts=$COUNTS
case " $COUNTS $REF " in *" $pick "*) ;; *) [ -n "$pick" ] && counts="$COUNTS $pick" ;; esac
for n in $counts; do
  [ "$n" = "$first" ] || [ "$n" = "$REF" ] || { [ -f "$(run_dir "$n")/summary.json" ] && [ "${RESUME:-0}" = 1 ]; } || measure "$n"
done
echo "load after:$(uptime | sed 's/.*load average://'); $AB_MPI, $RATE Gbit/s, $MODE, $(git describe --always --dirty)"
grep -E "^suggestion" "$OUT/suggest.txt"
for n in $REF $counts; do
  plan --candidate "$FLAGS --ddp-num-buckets $n" --out "$OUT/plan$n" >"$OUT/plan$n.txt" 2>&1 || { cat "$OUT/plan$n.txt"; exit 1; }
done
python3 - "$OUT" "$REF" "$pick" "${RATE}gbit_${MODE}_custom" $counts <<'PY'
import json, os, sys
out, ref, pick, run = sys.argv[1:5]
counts = sorted(set(int(n) for n in sys.argv[5:]) | {int(ref)})
plans = {n: json.load(open(os.path.join(out, "plan%d" % n, "plan.json")))["predictions"][1] for n in counts}
def plan(n):
    return plans[n]
def pred(n):
    return plan(n)["step_us"] / 1e3
def cut(n): # the gradient buckets' bytes in bucket order: what a count makes of this model
    cs = sorted((c["bucket"], c["bytes"]) for c in plan(n)["collectives"] if c["kind"] != "all_gather")
    return [b for _, b in cs]
def same(a, b): # alignment may move a boundary by a few elements: one setting all the same
    return len(a) == len(b) and all(abs(x - y) <= 0.01 * max(x, y) for x, y in zip(a, b))
rows, ref_ms = {}, []
for n in counts:
    if n == int(ref):
        continue
    s = json.load(open(os.path.join(out, "n%d" % n, "ab", run, "summary.json")))
    ref_ms.append(s["baseline"]["mean_step_ms"])
    lo, hi = s["ci95_pct"]
    rows[n] = (s["candidate"]["mean_step_ms"], s["step_time_change_pct"], lo, hi)
ref_mean = sum(ref_ms) / len(ref_ms)
rows[int(ref)] = (ref_mean, 0.0, 0.0, 0.0)
# counts that cut the same buckets are one setting: their A/Bs are pooled (the mean of their changes)
group = {}
for n in counts:
    group[n] = next((g for g in counts if g <= n and same(cut(g), cut(n))), n)
pooled = {}
for g in set(group.values()):
    ch = [rows[n][1] for n in counts if group[n] == g]
    pooled[g] = sum(ch) / len(ch)
pr = pred(int(ref))
print("| buckets | cut into | predicted ms | predicted change vs %s | measured ms | measured change vs %s (95%% interval) |"
      % (ref, ref))
print("|---|---|---|---|---|---|")
for n in counts:
    ms, ch, lo, hi = rows[n]
    mark = " (suggested)" if str(n) == pick else (" (reference)" if n == int(ref) else "")
    inter = "" if n == int(ref) else " (%+.2f .. %+.2f)" % (lo, hi)
    into = "%d" % len(cut(n)) + ("" if group[n] == n else ", as %d" % group[n])
    print("| %d%s | %s | %.1f | %+.2f%% | %.1f | %+.2f%%%s |"
          % (n, mark, into, pred(n), (pred(n) / pr - 1) * 100, ms, ch, inter))
for g in sorted(pooled):
    ns = [n for n in counts if group[n] == g]
    if len(ns) > 1:
        print("counts %s cut the same buckets: their A/Bs measured %s, pooled %+.2f%%"
              % (", ".join(map(str, ns)), ", ".join("%+.2f%%" % rows[n][1] for n in ns), pooled[g]))
best = min(pooled, key=lambda g: pooled[g])
if pick:
    gap = ((1 + pooled[group[int(pick)]] / 100) / (1 + pooled[best] / 100) - 1) * 100
    print("measured best: %d buckets; the suggested %s buckets' step is %+.2f%% from it (target within 2%%)"
          % (best, pick, gap))
    if group[int(pick)] != best:
        open(os.path.join(out, "best"), "w").write("%d\n" % best)
PY
best=$(cat "$OUT/best" 2>/dev/null)
rm -f "$OUT/best"
if [ -n "$best" ] && [ -n "$pick" ] && [ "${CONFIRM:-1}" = 1 ]; then # the suggestion against the best, one A/B
  c="$OUT/confirm/ab/${RATE}gbit_${MODE}_custom"
  if [ "${PLAN_ONLY:-0}" != 1 ] && ! { [ -f "$c/summary.json" ] && [ "${RESUME:-0}" = 1 ]; }; then
    RATES=$RATE MODES=$MODE CANDS=custom BUCKETS=$best BASE_FLAGS="$FLAGS" CAND_FLAGS="$FLAGS --ddp-num-buckets $pick" \
      OUT="$OUT/confirm" bash bench/link/run_link_bench.sh ab >"$OUT/confirm.log" 2>&1
  fi
  [ -f "$c/summary.json" ] || { tail -n 20 "$OUT/confirm.log" 2>/dev/null; echo "the A/B of $best against $pick buckets failed"; exit 1; }
  python3 - "$c/summary.json" "$best" "$pick" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
lo, hi = s["ci95_pct"]
print("one A/B, %s buckets (best measured) against %s (suggested): %+.2f%% (95%% interval %+.2f .. %+.2f; target "
      "within 2%%)" % (sys.argv[2], sys.argv[3], s["step_time_change_pct"], lo, hi))
PY
fi
