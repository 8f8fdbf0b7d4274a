#!/usr/bin/env bash
# run_targets_bench.sh - what the portable build costs: bench_kernels and bench_model from the native
# build (build/) and from `make PORTABLE=v3` (build-v3/), run alternately REPEATS times on this machine,
# each kernel's and each model size's median time portable / native. CPU times of one thread, so
# neighbours on a shared host inflate both sides alike; the load average is printed before and after.
#   make -j2 bench && make -j2 PORTABLE=v3 bench && REPEATS=3 bench/run_targets_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${REPEATS:-3} STEPS=${STEPS:-5} SIZES=${SIZES:-"tiny small"}
NATIVE=${NATIVE:-build/bench} PORTABLE=${PORTABLE_BENCH:-build-v3/bench}
for b in "$NATIVE" "$PORTABLE"; do
  for p in bench_kernels bench_model; do
    [ -x "$b/$p" ] || { echo "run_targets_bench: $b/$p: not built; expected make bench and make PORTABLE=v3 bench" >&2; exit 2; }
  done
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$NATIVE/bench_model" --steps 1 --only tiny 2>/dev/null | grep '^platform:' || true
for r in $(seq 1 "$REPEATS"); do
  for side in native portable; do
    b=$NATIVE; [ "$side" = portable ] && b=$PORTABLE
    OPENBLAS_NUM_THREADS=1 "$b/bench_kernels" --quick > "$out/k.$side.$r" 2>&1
    for s in $SIZES; do OPENBLAS_NUM_THREADS=1 "$b/bench_model" --steps "$STEPS" --only "$s" > "$out/m.$s.$side.$r" 2>&1; done
  done
done
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "$REPEATS" "$SIZES" <<'PYEOF'
import re, statistics, sys, glob
out, reps, sizes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def kernels(path):
    res = {}
    for line in open(path):
        m = re.match(r'^(\S.*?)\s+(\d+\.\d+) ms', line)
        if m and 'naive' not in line: res[re.sub(r'\s+', ' ', m.group(1))] = float(m.group(2))
    return res
def model(path):
    for line in open(path):
        m = re.search(r'cpu best\s+([\d.]+) ms median\s+([\d.]+) ms', line)
        if m: return float(m.group(2))
    raise SystemExit(f"run_targets_bench: no step time in {path}")
print(f"\n{'case':60s} {'native ms':>10s} {'portable ms':>12s} {'portable/native':>16s}")
for s in sizes:
    n = statistics.median(model(f"{out}/m.{s}.native.{r}") for r in range(1, reps + 1))
    p = statistics.median(model(f"{out}/m.{s}.portable.{r}") for r in range(1, reps + 1))
    print(f"{'model step ' + s + ' (median of medians)':60s} {n:10.2f} {p:12.2f} {p / n:16.3f}")
kn = [kernels(f"{out}/k.native.{r}") for r in range(1, reps + 1)]
kp = [kernels(f"{out}/k.portable.{r}") for r in range(1, reps + 1)]
for name in kn[0]:
    if all(name in k for k in kn + kp):
        n = statistics.median(k[name] for k in kn); p = statistics.median(k[name] for k in kp)
        print(f"{name:60s} {n:10.3f} {p:12.3f} {p / n:16.3f}")
PYEOF
