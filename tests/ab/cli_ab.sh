#!/usr/bin/env bash
# tandem ab end to end on 2 ranks with the tiny model, a few steps: every report file is
# written, summary.json parses and its precision fields are true (overlap on/off must be
# bitwise identical), the traces are valid JSON with balanced events, trace-summary reads
# them back; and bad flags fail with one sentence on every rank.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
TANDEM=${TANDEM:-$BUILD/tandem}
MPIRUN=${MPIRUN:-mpirun.openmpi}
case "$MPIRUN" in
  *openmpi*) MPI=("$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -np 2) ;;
  *) MPI=("$MPIRUN" -np 2) ;;
esac
export OMPI_MCA_btl_vader_single_copy_mechanism=none
PY=/usr/bin/python3
W=$(mktemp -d /tmp/tdm_cli_ab.XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

"$TANDEM" gen-data --out "$W/data" --samples 200 --heldout 10 --seed 1 >/dev/null 2>"$W/gen.err" || bad "gen-data: $(cat "$W/gen.err")"
"$TANDEM" train-tokenizer --data "$W/data/train.json" --vocab-size 400 --out "$W/tok.json" >/dev/null 2>"$W/tok.err" \
  || bad "train-tokenizer: $(cat "$W/tok.err")"

# The tiny config's special-token ids and vocabulary follow a 1024-id tokenizer; this
# small corpus trains a smaller one, so the test uses the tiny config with the ids of the
# tokenizer it just trained (same architecture, fewer embedding rows).
mkdir -p "$W/tiny"
cp configs/tiny/preprocessor_config.json "$W/tiny/"
$PY - configs/tiny/config.json "$W/tok.json" "$W/tiny/config.json" <<'PYEOF' || bad "could not adapt the tiny config"
import json, sys
cfg, tok = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ids = {a["content"]: a["id"] for a in tok["added_tokens"]}
n = max(max(tok["model"]["vocab"].values()), max(ids.values())) + 1
want = {"image_token_id": "<|image_pad|>", "video_token_id": "<|video_pad|>",
        "vision_start_token_id": "<|vision_start|>", "vision_end_token_id": "<|vision_end|>",
        "pad_token_id": "<|endoftext|>", "bos_token_id": "<|endoftext|>", "eos_token_id": "<|im_end|>"}
def fix(d):
    for k, v in d.items():
        if isinstance(v, dict): fix(v)
        elif k in want: d[k] = ids[want[k]]
        elif k == "vocab_size": d[k] = n
fix(cfg)
json.dump(cfg, open(sys.argv[3], "w"), indent=2)
PYEOF

COMMON=(--model "$W/tiny" --tokenizer "$W/tok.json" --data "$W/data/train.json"
        --freeze-vision --freeze-projector --use-distributed-optimizer --ddp-num-buckets 3
        --micro-batch-size 1 --global-batch-size 4 --seq-length 256 --lr 1e-3 --lr-warmup-iters 1 --seed 7)
OUT="$W/ab"
if timeout 600 "${MPI[@]}" "$TANDEM" ab --baseline "" --candidate "--overlap-grad-reduce" "${COMMON[@]}" \
     --steps 4 --window 2:4 --repeats 2 --profile-steps 2 --out "$OUT" >"$W/ab.out" 2>&1; then
  ok
else
  bad "tandem ab exited non-zero:"; tail -n 20 "$W/ab.out"
fi
grep -q "mean step time" "$W/ab.out" && grep -q "overlap_grad_reduce: False -> True" "$W/ab.out" \
  && grep -q "overlap efficiency" "$W/ab.out" && ok || bad "the table lacks rows"
for f in report.md summary.json steps_baseline.csv steps_candidate.csv loss.svg step_time.svg \
         step_time_hist.svg timeline_baseline.svg timeline_candidate.svg \
         traces/baseline/trace.json traces/baseline/trace_rank0.json traces/baseline/trace_rank1.json \
         traces/baseline/analysis.json traces/candidate/trace.json traces/candidate/analysis.json; do
  [ -s "$OUT/$f" ] && ok || bad "missing $f"
done
if [ -s "$OUT/summary.json" ]; then
  if $PY - "$OUT/summary.json" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
errs = []
for k in ["loss_bitwise_equal", "lr_equal", "consumed_samples_equal", "global_batch_size_equal",
          "fingerprints_equal", "all_finite", "grad_norm_bitwise_equal", "ddp_config_confirms_diff"]:
    if s.get(k) is not True: errs.append(f"{k} = {s.get(k)!r}")
for k in ["nan_iterations", "skipped_iterations"]:
    if s.get(k) != 0: errs.append(f"{k} = {s.get(k)!r}")
for side in ["baseline", "candidate"]:
    for k in ["mean_step_ms", "samples_per_s", "exposed_comm_ms"]:
        v = s.get(side, {}).get(k)
        if not isinstance(v, (int, float)) or v < 0: errs.append(f"{side}.{k} = {v!r}")
for k in ["step_time_change_pct", "throughput_change_pct", "ci95_pct", "window", "repeats",
          "max_rel_loss_dev", "overlap_efficiency", "sched_overlap_efficiency"]:
    if k not in s: errs.append(f"missing {k}")
# the schedule's bound counts only compute a collective can run behind, a subset of the
# pooled one: never more hideable, so never a lower efficiency nor a lower ideal step
for side in ["baseline", "candidate"]:
    d = s.get(side, {})
    e, se, i, si = (d.get(k) for k in ["overlap_efficiency", "sched_overlap_efficiency", "ideal_step_ms",
                                        "sched_ideal_step_ms"])
    if not isinstance(si, (int, float)): errs.append(f"{side}.sched_ideal_step_ms = {si!r}")
    elif isinstance(i, (int, float)) and si < i - 1e-6: errs.append(f"{side}: sched ideal {si} < ideal {i}")
    if isinstance(e, (int, float)) and isinstance(se, (int, float)) and se < e - 1e-9:
        errs.append(f"{side}: sched efficiency {se} < efficiency {e}")
if not isinstance(s["candidate"].get("sched_overlap_efficiency"), (int, float)):
    errs.append("candidate (--overlap-grad-reduce) has no schedule efficiency")
if s.get("window") != [2, 4] or s.get("repeats") != 2: errs.append("window/repeats not as asked")
# the host around each timing run: both ranks share this kernel; other processes' CPU a share of it
if s.get("local_ranks") != 2: errs.append(f"local_ranks = {s.get('local_ranks')!r}")
ld = s.get("load") or []
if len(ld) != 4: errs.append(f"load has {len(ld)} entries, expected 4 timing runs")
for l in ld:
    o = l.get("others_pct")
    if not isinstance(o, (int, float)) or not 0 <= o <= 100: errs.append(f"others_pct = {o!r}")
# two repeats are too few pairs for an interval between whole runs: null, not a made-up one
if s.get("runs_ci_pairs") != 0 or s.get("runs_ci95_pct", 0) is not None:
    errs.append(f"runs interval with 2 repeats: {s.get('runs_ci_pairs')!r} {s.get('runs_ci95_pct')!r}")
# CPU per step (rank mean): the threads' parts within the process's, and busy cores within the machine's
for side in ["baseline", "candidate"]:
    d = s[side]
    cpu, comp, comm, busy = (d.get(k) for k in ["cpu_ms", "compute_cpu_ms", "comm_cpu_ms", "cores_busy"])
    if not all(isinstance(v, (int, float)) for v in (cpu, comp, comm, busy)):
        errs.append(f"{side}: CPU figures {cpu!r} {comp!r} {comm!r} {busy!r}")
    elif not (0 < comp <= cpu * 1.001 and 0 <= comm and comp + comm <= cpu * 1.02 + 0.5
              and 0 < busy and busy * s["world_size"] <= s["cores_online"] + 0.25):  # both ranks on this machine
        errs.append(f"{side}: CPU figures inconsistent: process {cpu}, compute {comp}, comm {comm}, busy {busy}")
# the same batches on both sides: model FLOPs / window time, so GFLOP/s x mean step is the same on both
g = [s[k].get("model_gflops_per_rank", 0) * s[k]["mean_step_ms"] for k in ["baseline", "candidate"]]
if not (g[0] > 0 and abs(g[0] - g[1]) <= 1e-9 * g[0]): errs.append(f"model GFLOP/s x step time differ: {g}")
# both sides ran the same window in every repeat: the interval pairs them, in blocks of 1 step (ceil(3^(1/3)) =
# 2, capped at half the window's 3 steps so that a block has two places to start)
if s.get("ci_paired") is not True or s.get("ci_block_steps") != 1:
    errs.append(f"ci_paired = {s.get('ci_paired')!r}, ci_block_steps = {s.get('ci_block_steps')!r}")
if "True" not in s["candidate"]["ddp_config"] or "overlap_grad_reduce=True" not in s["candidate"]["ddp_config"]:
    errs.append("candidate DDP config line lacks overlap_grad_reduce=True")
print("\n".join(errs)); sys.exit(1 if errs else 0)
PYEOF
  then ok; else bad "summary.json precision/keys"; fi
fi
for side in baseline candidate; do
  t="$OUT/traces/$side/trace.json"
  [ -s "$t" ] || continue
  if $PY - "$t" <<'PYEOF'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
pids = {e["pid"] for e in ev}
x = [e for e in ev if e["ph"] == "X"]
assert pids == {0, 1}, pids
assert all(e["dur"] >= 0 for e in x), "negative duration"
assert any(e["name"] == "step" for e in x), "no step envelopes"
assert all(e["ph"] in ("X", "i", "M") for e in ev), "unexpected phases"
names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
assert "compute" in names and "comm" in names, names
named = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
assert all((e["pid"], e["tid"]) in named for e in ev if e["ph"] != "M"), "an event on an unnamed thread"
# the format's rule (Perfetto drops what breaks it): the complete events of one thread nest
tracks = {}
for e in x: tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], -(e["ts"] + e["dur"])))
for k, iv in tracks.items():
    open_ends = []
    for t0, neg_t1 in sorted(iv):
        while open_ends and open_ends[-1] <= t0: open_ends.pop()
        assert not open_ends or -neg_t1 <= open_ends[-1] + 1e-3, f"{k}: an event at {t0} overlaps one without nesting"
        open_ends.append(-neg_t1)
PYEOF
  then ok; else bad "$side trace invalid"; fi
  "$TANDEM" trace-summary "$OUT/traces/$side" >"$W/ts.out" 2>&1 && grep -q "cannot be added up" "$W/ts.out" \
    && grep -q "Per-step analysis" "$W/ts.out" && ok || bad "trace-summary $side: $(head -3 "$W/ts.out")"
  cmp -s "$W/ts.out" "$OUT/traces/$side/summary.txt" && grep -q "Per-thread CPU" "$W/ts.out" && ok \
    || bad "summary.txt is not what trace-summary prints ($side)"
  # one rank's trace: that rank's threads only in the CPU table (analysis.json holds every rank's)
  "$TANDEM" trace-summary "$OUT/traces/$side/trace_rank1.json" >"$W/ts1.out" 2>&1 \
    && awk '/^Per-thread CPU/ { t = 1; next } t && $1 ~ /^[0-9]+$/ { n++; if ($1 != 1) bad = 1 }
            END { exit !(n > 0 && !bad) }' "$W/ts1.out" && ok \
    || bad "trace-summary trace_rank1.json ($side): CPU rows $(grep -A6 'Per-thread CPU' "$W/ts1.out" | tail -4)"
  # --json recomputes the analysis from trace.json: the same mean as the run's own analysis.json
  if "$TANDEM" trace-summary --json "$OUT/traces/$side" >"$W/ts.json" 2>"$W/ts.err" \
     && python3 - "$W/ts.json" "$OUT/traces/$side/analysis.json" <<'PYEOF'
import json, math, sys
a, b = json.load(open(sys.argv[1]))["mean"], json.load(open(sys.argv[2]))["mean"]
for k in ("step_ms", "compute_ms", "comm_ms", "hidden_comm_ms", "last_bucket_comm_ms", "ideal_step_ms"):
    assert math.isclose(a[k], b[k], rel_tol=1e-5, abs_tol=1e-3), (k, a[k], b[k])
PYEOF
  then ok; else bad "trace-summary --json $side: $(head -3 "$W/ts.err")"; fi
done
# trace-summary on the report folder itself finds traces/<side>/ (it said "trace.json: cannot open")
"$TANDEM" trace-summary "$OUT" >"$W/tsab.out" 2>&1 && grep -q "^== baseline ($OUT/traces/baseline)" "$W/tsab.out" \
  && grep -q "^== candidate ($OUT/traces/candidate)" "$W/tsab.out" && [ "$(grep -c "Per-step analysis" "$W/tsab.out")" -eq 2 ] \
  && ok || bad "trace-summary of the A/B folder: $(head -c 400 "$W/tsab.out")"
"$TANDEM" trace-summary --json "$OUT" >"$W/tsabj.out" 2>&1 && bad "--json of the A/B folder accepted" \
  || { grep -q "its traces are in $OUT/traces/baseline and $OUT/traces/candidate" "$W/tsabj.out" && ok \
       || bad "trace-summary --json of the A/B folder: $(cat "$W/tsabj.out")"; }

# a one-step window gives no interval (a resample could only repeat the data): the table and the sentence say so;
# three profiled steps from the window's step 2 would pass the last step: the log and report.md say which steps
# were profiled.
# The --out holds a quote and a backslash: the profiler's tools.json must still be valid JSON naming that path.
AB1="$W/ab1 \"q\\"
if timeout 300 "${MPI[@]}" "$TANDEM" ab --baseline "" --candidate "--overlap-grad-reduce" "${COMMON[@]}" \
     --steps 2 --window 2:2 --repeats 1 --profile-steps 3 --out "$AB1" >"$W/ab1.out" 2>&1; then
  grep -q "(no interval)" "$W/ab1.out" && grep -q "No interval: 1 step(s) per repeat" "$W/ab1.out" \
    && grep -q '"ci95_pct": null' "$AB1/summary.json" && ok \
    || bad "one-step window: $(grep -m2 -i interval "$W/ab1.out")"
  grep -q "profiling steps 1-2 instead" "$W/ab1.out" && grep -q "profiled run per side (steps 1-2 at level 1)" \
    "$AB1/report.md" && ok || bad "shifted profiled steps not logged: $(grep -h "profil" "$W/ab1.out" "$AB1/report.md")"
  [ -s "$AB1/traces/candidate/trace.json" ] \
    && $PY -c 'import json, sys; assert json.load(open(sys.argv[1]))["profile"]["save_path"] == sys.argv[2]' \
         "$AB1/traces/candidate/tools.json" "$AB1/traces/candidate" && ok \
    || bad "tools.json under an --out with a quote"
else
  bad "tandem ab with a one-step window exited non-zero:"; tail -n 5 "$W/ab1.out"
fi

# the first run's --out again, without profiling: its timelines and traces are gone, not listed as this run's
# (a file of the user's in traces/ stays). Its data lies in a folder whose name a shell would expand or split: the
# commands report.md gives to reproduce the run must hand tandem that path unchanged.
echo keep >"$OUT/traces/baseline/notes.txt"
QD="$W/it's \`x\` \$HOME \"q\""
mkdir -p "$QD" && cp "$W/data/train.json" "$QD/" && ln -s "$W/data/images" "$QD/images"
if timeout 300 "${MPI[@]}" "$TANDEM" ab --baseline "" --candidate "--overlap-grad-reduce" "${COMMON[@]}" \
     --data "$QD/train.json" --steps 2 --window 2:2 --repeats 1 --profile-steps 0 --audit-steps 0 --out "$OUT" \
     >"$W/ab0.out" 2>&1; then
  n=0
  while IFS= read -r line; do # each command, run by a shell that prints the last --data it would get
    got=$(bash -c "set -- ${line#mpirun -np 2 build/tandem * }"'; d=; while [ $# -gt 0 ]; do
                   [ "$1" = --data ] && d=$2; shift; done; printf %s "$d"' 2>&1)
    [ "$got" = "$QD/train.json" ] && n=$((n + 1)) || echo "  reproduce line gives --data '$got'"
  done < <(grep "^mpirun -np 2 build/tandem " "$OUT/report.md")
  [ "$n" = 3 ] && ok || bad "report.md's commands do not reproduce the --data path ($n of 3 do)"
  if [ ! -e "$OUT/timeline_baseline.svg" ] && [ ! -e "$OUT/timeline_candidate.svg" ] \
     && [ ! -e "$OUT/traces/candidate" ] && [ ! -e "$OUT/traces/baseline/trace.json" ] \
     && [ -s "$OUT/traces/baseline/notes.txt" ] && ! grep -q "timeline_\|traces/" "$OUT/report.md"; then ok
  else bad "reused --out: stale profile left or listed: $(ls "$OUT" "$OUT/traces"/* 2>&1 | tr '\n' ' ')"; fi
else
  bad "tandem ab into a reused --out exited non-zero:"; tail -n 5 "$W/ab0.out"
fi

# --load of a checkpoint at iteration 3: every run trains --steps steps from there, the records count from 1
# and carry on the consumed samples (this once ran no step at all and reported nan with exit 0)
if timeout 300 "${MPI[@]}" "$TANDEM" train "${COMMON[@]}" --train-iters 3 --save "$W/ck" >"$W/ck.out" 2>&1 \
   && timeout 600 "${MPI[@]}" "$TANDEM" ab --baseline "" --candidate "--overlap-grad-reduce" "${COMMON[@]}" \
        --load "$W/ck" --steps 3 --window 2:3 --profile-steps 1 --audit-steps 0 --out "$W/abl" >"$W/abl.out" 2>&1; then
  grep -q "from the checkpoint's iteration 3" "$W/abl.out" && $PY - "$W/abl/steps_baseline.csv" "$W/abl/summary.json" <<'PYEOF' \
    && ok || bad "ab --load: $(grep -m3 -iE "iteration|finite|error" "$W/abl.out")"
import csv, json, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [int(r["iteration"]) for r in rows] == [1, 2, 3], rows
assert [int(r["consumed_samples"]) for r in rows] == [16, 20, 24], [r["consumed_samples"] for r in rows]
assert all(math.isfinite(float(r["loss"])) for r in rows)
s = json.load(open(sys.argv[2]))
assert s["all_finite"] is True and s["loss_bitwise_equal"] is True, s
PYEOF
  # the report's commands for one timing run by hand train the same iterations: 4 to 6, so to --train-iters 6
  [ "$(grep -c "build/tandem train .*--load .* --train-iters 6$" "$W/abl/report.md")" = 2 ] && ok \
    || bad "ab --load: report.md's timing run by hand: $(grep "build/tandem train" "$W/abl/report.md")"
else
  bad "train --save or ab --load exited non-zero:"; tail -n 5 "$W/ck.out" "$W/abl.out"
fi
# the same checkpoint copied elsewhere and named with a trailing slash, as train --load takes it (ab read the
# iteration from the directory's name and refused "best/": "is not an iter_NNNNNNN directory")
cp -r "$W/ck/iter_0000003" "$W/best"
if timeout 300 "${MPI[@]}" "$TANDEM" ab --baseline "" --candidate "--overlap-grad-reduce" "${COMMON[@]}" \
     --load "$W/best/" --steps 2 --window 2:2 --repeats 1 --profile-steps 0 --audit-steps 0 --out "$W/abb" \
     >"$W/abb.out" 2>&1 && grep -q "from the checkpoint's iteration 3" "$W/abb.out"; then ok
else bad "ab --load of a renamed iteration directory: $(grep -m2 -iE "tandem ab|error" "$W/abb.out")"; fi

# Ctrl-C mid-protocol (one rank, no launcher: the signal reaches the rank itself): the runs that finished are kept
# in a partial report that says so, the exit status is 130, and the terminal says where the report is
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 "$TANDEM" ab --baseline "" \
  --candidate "--overlap-grad-reduce" "${COMMON[@]}" --steps 4 --window 2:4 --repeats 2 --out "$W/abint" \
  >"$W/int.out" 2>&1 &
ipid=$!
for _ in $(seq 1 600); do grep -q "timing run 2/2, baseline" "$W/int.out" && break; sleep 0.2; done
kill -INT "$ipid"
wait "$ipid"
irc=$?
if [ "$irc" -eq 130 ] && grep -q "partial report in $W/abint/report.md" "$W/int.out" \
   && grep -q "^\*\*Partial report\*\*" "$W/abint/report.md" \
   && $PY - "$W/abint/summary.json" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["partial"] is True and s["stop_signal"] == "SIGINT", s
runs = s["finished_runs"]
assert runs[:2] == ["baseline timing 1", "candidate timing 1"] and "candidate timing 2" not in runs, runs
assert s["baseline"]["mean_step_ms"] > 0 and s["candidate"]["mean_step_ms"] > 0
PYEOF
then ok; else bad "Ctrl-C mid-protocol: rc $irc: $(tail -n 5 "$W/int.out")"; fi

# bad input: one sentence, non-zero exit, no hang
# every input is checked before the first run: one message (not one per rank), no MPI_Abort, no run started
for what in model tokenizer data out; do
  case $what in
    model) extra=(--model "$W/no-such-model") ;;
    tokenizer) extra=(--tokenizer "$W/no-such-tokenizer.json") ;;
    data) extra=(--data "$W/no-such-data.json") ;;
    out) : >"$W/a-file"; extra=(--out "$W/a-file/report") ;;
  esac
  timeout 60 "${MPI[@]}" "$TANDEM" ab --candidate "--overlap-grad-reduce" "${COMMON[@]}" --steps 4 --window 2:4 \
    --out "$W/x" "${extra[@]}" >"$W/in_$what" 2>&1
  irc=$?
  n=$(grep -c "^tandem ab: .*--$what" "$W/in_$what")
  if [ "$irc" -ne 0 ] && [ "$irc" -ne 124 ] && [ "$n" -eq 1 ] && ! grep -q "MPI_ABORT\|timing run" "$W/in_$what"; then ok
  else bad "wrong --$what: rc $irc, $n messages: $(head -c 600 "$W/in_$what")"; fi
done
# identical sides are refused unless --aa asks for them; a window from step 1 only when --window says so
timeout 60 "${MPI[@]}" "$TANDEM" ab "${COMMON[@]}" --steps 4 --out "$W/x" >"$W/aa1" 2>&1 \
  && bad "A/A without --aa accepted" \
  || { [ "$(grep -c "the two sides are identical (no --baseline or --candidate).*--aa" "$W/aa1")" -eq 1 ] && ok \
       || bad "A/A refusal: $(cat "$W/aa1")"; }
timeout 60 "${MPI[@]}" "$TANDEM" ab --candidate "--seed 7" "${COMMON[@]}" --steps 4 --out "$W/x" >"$W/aa2" 2>&1 \
  && bad "identical sides accepted" || { grep -q "no argument differs" "$W/aa2" && ok || bad "A/A: $(cat "$W/aa2")"; }
if timeout 300 "${MPI[@]}" "$TANDEM" ab --aa "${COMMON[@]}" --steps 2 --window 1:2 --profile-steps 0 --audit-steps 0 \
     --out "$W/aa" >"$W/aa3" 2>&1 && grep -q "A/A run (--aa)" "$W/aa3" && grep -q "window 1:2 includes step 1" "$W/aa3" \
     && $PY -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["window"] == [1, 2]' "$W/aa/summary.json"
then ok; else bad "--aa --window 1:2: $(tail -n 5 "$W/aa3")"; fi
# the default window leaves out step 1 even for a few steps
timeout 300 "${MPI[@]}" "$TANDEM" ab --candidate "--overlap-grad-reduce" "${COMMON[@]}" --steps 3 --profile-steps 0 \
  --audit-steps 0 --out "$W/w3" >"$W/w3.out" 2>&1 \
  && $PY -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["window"] == [2, 3], s["window"]' "$W/w3/summary.json" \
  && ok || bad "default window of --steps 3: $(tail -n 3 "$W/w3.out")"
# the demo outside the repository: configs/tiny beside the binary, or a sentence saying where it looked
mkdir -p "$W/elsewhere" && cp "$TANDEM" "$W/elsewhere/tandem"
(cd "$W/elsewhere" && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 60 ./tandem ab) >"$W/demo1" 2>&1 \
  && bad "demo without configs/tiny ran" \
  || { grep -q "the demo needs the tiny configuration.*TANDEM_DEMO_MODEL" "$W/demo1" && ! [ -e "$W/elsewhere/tandem-demo" ] \
       && ok || bad "demo without configs/tiny: $(cat "$W/demo1")"; }
T_ABS=$(cd "$(dirname "$TANDEM")" && pwd)/$(basename "$TANDEM")
if [ -e "$(dirname "$T_ABS")/../configs/tiny/config.json" ]; then
  (cd "$W/elsewhere" && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TANDEM_DEMO_DIR="$W/demo" \
     timeout -s INT 5 "$T_ABS" ab) >"$W/demo2" 2>&1
  grep -q "model .*/configs/tiny)" "$W/demo2" && ! grep -q "cannot open" "$W/demo2" && ok \
    || bad "demo from another folder: $(head -c 600 "$W/demo2")"
fi
timeout 60 "${MPI[@]}" "$TANDEM" ab --candidate "--overlap-grad-reduce" "${COMMON[@]}" --steps 4 --window 3:9 \
  --out "$W/x" >"$W/e1" 2>&1 && bad "window past --steps accepted" || { grep -q "window" "$W/e1" && ok || bad "window error: $(cat "$W/e1")"; }
timeout 60 "${MPI[@]}" "$TANDEM" ab --candidate "--overlap-grad-reduse" "${COMMON[@]}" --steps 4 \
  --out "$W/x" >"$W/e2" 2>&1 && bad "unknown flag accepted" || { grep -q "overlap-grad-reduse" "$W/e2" && ok || bad "flag error: $(cat "$W/e2")"; }
timeout 60 "${MPI[@]}" "$TANDEM" ab --candidate "--overlap-grad-reduce" "${COMMON[@]}" --steps 4 --train-iters 50 \
  --out "$W/x" >"$W/e4" 2>&1 && bad "--train-iters accepted (and ignored)" \
  || { grep -q -- "--train-iters is not used by ab" "$W/e4" && ok || bad "--train-iters error: $(cat "$W/e4")"; }
# under another name (Megatron's --mm-tool is --profile-config; an underscore spelling): the same refusal, saying so
timeout 60 "${MPI[@]}" "$TANDEM" ab --candidate "--overlap-grad-reduce" "${COMMON[@]}" --steps 4 --mm-tool "$W/t.json" \
  --out "$W/x" >"$W/e10" 2>&1 && bad "--mm-tool accepted (and ignored)" \
  || { grep -q -- "--mm-tool sets --profile-config, which is not used by ab" "$W/e10" && ok \
         || bad "--mm-tool error: $(cat "$W/e10")"; }
timeout 60 "${MPI[@]}" "$TANDEM" ab --candidate "--overlap-grad-reduce --save $W/ck_cand" "${COMMON[@]}" --steps 4 \
  --out "$W/x" >"$W/e5" 2>&1 && bad "--save in --candidate accepted (and ignored)" \
  || { grep -q -- "--candidate: --save is not used by ab: measured runs save no checkpoint" "$W/e5" && ok \
         || bad "--candidate --save error: $(cat "$W/e5")"; }
# validation between the measured steps would shift their times (and wait for --overlap-param-gather's all-gather)
timeout 60 "${MPI[@]}" "$TANDEM" ab --candidate "--overlap-grad-reduce" "${COMMON[@]}" --steps 2 \
  --valid-data-path "$W/data/train.json" --eval-interval 1 --eval-iters 1 --out "$W/x" >"$W/e6" 2>&1 \
  && bad "--valid-data-path accepted" \
  || { grep -q -- "--valid-data-path is not used by ab: measured runs do not evaluate" "$W/e6" && ok \
         || bad "--valid-data-path error: $(cat "$W/e6")"; }
timeout 60 "${MPI[@]}" "$TANDEM" ab --candidate "--overlap-grad-reduce --valid-data-path $W/data/train.json" \
  "${COMMON[@]}" --steps 2 --out "$W/x" >"$W/e7" 2>&1 && bad "--valid-data-path in --candidate accepted" \
  || { grep -q -- "--candidate: --valid-data-path is not used by ab" "$W/e7" && ok \
         || bad "--candidate --valid-data-path error: $(cat "$W/e7")"; }
# another spelling of a protocol flag on the command line is refused as such (it was blamed on a --config file)
timeout 60 "${MPI[@]}" "$TANDEM" ab --candidate "--overlap-grad-reduce" "${COMMON[@]}" --train_iters 5 \
  --out "$W/x" >"$W/e11" 2>&1 && bad "--train_iters accepted" \
  || { grep -q -- "tandem ab: --train_iters sets --train-iters, which is not used by ab" "$W/e11" && ok \
         || bad "--train_iters error: $(cat "$W/e11")"; }
# a schedule rule that names --train-iters is about --steps in ab (COMMON warms up over 1 iteration)
timeout 60 "${MPI[@]}" "$TANDEM" ab --candidate "--overlap-grad-reduce" "${COMMON[@]}" --steps 1 --out "$W/x" \
  >"$W/e9" 2>&1 && bad "--steps 1 with --lr-warmup-iters 1 accepted" \
  || { grep -q -- "--lr-warmup-iters 1: must be shorter.*(in ab, --train-iters is --steps)" "$W/e9" && ok \
         || bad "--steps 1 error: $(cat "$W/e9")"; }
# the same flags set by a --config file among the common flags: refused, not silently overridden (or, for the
# validation set, obeyed)
echo '{"valid-data-path": "'"$W/data/train.json"'", "eval-interval": 1}' >"$W/abcfg.json"
timeout 60 "${MPI[@]}" "$TANDEM" ab --candidate "--overlap-grad-reduce" "${COMMON[@]}" --config "$W/abcfg.json" \
  --steps 2 --out "$W/x" >"$W/e8" 2>&1 && bad "--valid-data-path in a --config file accepted" \
  || { grep -q -- "a --config file) set --valid-data-path, which is not used by ab" "$W/e8" && ok \
         || bad "--config --valid-data-path error: $(cat "$W/e8")"; }
# a profile buffer too small for the steps: the lost events are reported, not silently missing from the analysis
echo '{"profile": {"enable": true, "ranks": [-1], "start_step": 2, "end_step": 2, "level": 2, "capacity": 64,
       "save_path": "'"$W/prdrop"'"}}' > "$W/prdrop.json"
timeout 300 "${MPI[@]}" "$TANDEM" train "${COMMON[@]}" --train-iters 2 --profile-config "$W/prdrop.json" >"$W/drop.out" 2>&1 \
  && grep -q "thread compute: [0-9]* events dropped (capacity 64 per thread): the analysis leaves out the steps" \
       "$W/drop.out" && ok || bad "dropped events: $(grep -m2 profiler "$W/drop.out")"
"$TANDEM" trace-summary "$W/nonexistent" >"$W/e3" 2>&1 && bad "missing trace accepted" || { grep -q "nonexistent" "$W/e3" && ok || bad "trace-summary error: $(cat "$W/e3")"; }

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
