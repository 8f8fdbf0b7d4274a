#!/usr/bin/env bash
# Replays: the model rebuilt from each profile's own trace predicts that run's mean traced step (tandem plan's
# "replay" line); prints each profile's error and, over all, the mean |error| and how many are within 5%.
#   bench/plan/replays.sh PROFILE...     env: TANDEM (build/tandem), PLAN_FLAGS (extra tandem plan flags, e.g.
#                                        "--comm-progress thread --doctor DOCTOR.json"), MODEL (configs/tiny)
# e.g. bench/plan/replays.sh build/plan-link-sweep-s/n*/ab/*/traces/*
set -u
cd "$(dirname "$0")/../.."
TANDEM=${TANDEM:-build/tandem}
[ $# -gt 0 ] || { echo "replays.sh: expected one or more profile folders (tandem's trace.json and analysis.json)" >&2; exit 2; }
out=$(mktemp -d /tmp/tdm_replays.XXXXXX)
trap 'rm -rf "$out"' EXIT
for p in "$@"; do
  # shellcheck disable=SC2086 # PLAN_FLAGS is split into words on purpose
  if "$TANDEM" plan "$p" --model "${MODEL:-configs/tiny}" --freeze-vision --freeze-projector ${PLAN_FLAGS:-} \
    --out "$out/plan" >"$out/plan.txt" 2>&1; then
    line=$(grep -E "^replay: " "$out/plan.txt")
    err=$(sed -nE 's/.*\(([-+][0-9.]+)%\).*/\1/p' <<<"$line")
    echo "$p ${err:-?}%"
  else
    echo "$p plan failed: $(head -n 1 "$out/plan.txt")"
  fi
done | tee "$out/all.txt"
python3 - "$out/all.txt" <<'PY'
import re, sys
e = [float(m.group(1)) for m in (re.search(r" ([-+][0-9.]+)%$", l) for l in open(sys.argv[1])) if m]
if e:
    print("%d replays: %+.1f%% .. %+.1f%%, mean |error| %.1f%%, %d within 5%%"
          % (len(e), min(e), max(e), sum(map(abs, e)) / len(e), sum(abs(x) <= 5 for x in e)))
PY
