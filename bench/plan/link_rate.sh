#!/usr/bin/env bash
# tandem plan across link rates, from the runs bench/plan/link_plan.sh left in OUT: each rate's profiled
# baseline predicts the other rates' baseline step and `--overlap-grad-reduce` candidate (`--link-scale` by the
# rates' ratio: the fitted link that much faster; with tandem doctor's report measured at the traced rate,
# calibrated to the traced rate's A/B baseline), set beside what tandem ab measured at those rates.
#   OUT=build/plan-link-d-ompi bench/plan/link_rate.sh     env OUT (build/plan-link), AB_MPI (openmpi), RATES
#                                                          ("0.5 1 2"), MODES ("thread inline"), TANDEM
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/plan-link} AB_MPI=${AB_MPI:-openmpi} RATES=${RATES:-0.5 1 2} MODES=${MODES:-thread inline}
TANDEM=${TANDEM:-build/tandem}
mean() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]["mean_step_ms"])' "$@"; }
echo "$AB_MPI, runs in $OUT, tandem $(git describe --always --dirty)"
echo "| traced Gbit/s | progress | predicted Gbit/s | predicted baseline ms | measured | error | predicted change | measured change | error (points) |"
echo "|---|---|---|---|---|---|---|---|---|"
for mode in $MODES; do for src in $RATES; do
  from="$OUT/ab/${src}gbit_${mode}_overlap_grad"
  [ -f "$from/summary.json" ] || { echo "| $src | $mode | - | no runs in $from |"; continue; }
  doc=(--comm-progress "$mode")
  [ -f "$OUT/doctor_${AB_MPI}_$src.json" ] && doc+=(--doctor "$OUT/doctor_${AB_MPI}_$src.json")
  plan() { # out flags...: the traced rate's baseline, calibrated
    local out=$1; shift
    "$TANDEM" plan "$from/traces/baseline" --model configs/tiny --freeze-vision --freeze-projector "${doc[@]}" \
      --baseline-step-ms "$(mean "$from/summary.json" baseline)" --out "$out" "$@" >"$out.txt" 2>&1
  }
  for dst in $RATES; do
    [ "$dst" = "$src" ] && continue
    to="$OUT/ab/${dst}gbit_${mode}_overlap_grad"
    [ -f "$to/summary.json" ] || continue
    x=$(python3 -c "print('%.6g' % ($dst / $src))")
    plan "$from/plan-rate-$dst" --candidate "--link-scale $x" --candidate "--link-scale $x --overlap-grad-reduce" \
      || { echo "| $src | $mode | $dst | plan failed: $(head -n 1 "$from/plan-rate-$dst.txt") |"; continue; }
    python3 - "$from/plan-rate-$dst/plan.json" "$to/summary.json" "$src" "$mode" "$dst" <<'PY'
import json, sys
p, s = json.load(open(sys.argv[1]))["predictions"], json.load(open(sys.argv[2]))
src, mode, dst = sys.argv[3:]
pa, pb = p[1]["step_us"] / 1e3, p[2]["step_us"] / 1e3
ma, mb = s["baseline"]["mean_step_ms"], s["candidate"]["mean_step_ms"]
pc, mc = (pb / pa - 1) * 100, (mb / ma - 1) * 100
print("| %s | %s | %s | %.1f | %.1f | %+.1f%% | %+.2f%% | %+.2f%% | %.2f |" %
      (src, mode, dst, pa, ma, (pa / ma - 1) * 100, pc, mc, abs(pc - mc)))
PY
  done
done; done
