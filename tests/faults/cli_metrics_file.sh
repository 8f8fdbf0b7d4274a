#!/usr/bin/env bash
# cli_metrics_file.sh - every line of metrics.jsonl stays valid JSON: a torn last line (a run
# killed mid-write, a full disk) is removed before the next run appends, a write that finds the
# disk full leaves no partial line, and a run into a --run-dir that already holds lines starts
# (without --load) with a {"run": ...} header record; a resumed run continues without one.
source "$(dirname "$0")/lib.sh"
have train || skip_all "tandem train is not built"
command -v python3 >/dev/null || skip_all "python3 is needed to check the JSON lines"
make_data

# valid FILE: every line is one JSON object; prints what is wrong
valid() {
  python3 - "$1" <<'PYEOF'
import json, sys
data = open(sys.argv[1], 'rb').read()
if data and not data.endswith(b'\n'):
    sys.exit('the last line has no newline')
for i, line in enumerate(data.decode().splitlines(), 1):
    try:
        if not isinstance(json.loads(line), dict): sys.exit(f'line {i} is not an object')
    except ValueError as e:
        sys.exit(f'line {i} is not JSON: {e}: {line[:60]}')
PYEOF
}

run="$W/run"
start_job "$W/a.log" "${TRAIN[@]}" --train-iters 2 --run-dir "$run"
wait_job 120
[ "$RC" -eq 0 ] && [ "$(wc -l < "$run/metrics.jsonl")" -eq 2 ] && ! grep -q '"run"' "$run/metrics.jsonl" && ok \
  || bad "a first run: exit $RC, $(wc -l < "$run/metrics.jsonl") lines (expected 2 metrics lines, no header)"

# a torn last line, then a second (fresh) run into the same --run-dir
printf '{"iteration":3,"consumed_sam' >> "$run/metrics.jsonl"
start_job "$W/b.log" "${TRAIN[@]}" --train-iters 2 --run-dir "$run"
wait_job 120
[ "$RC" -eq 0 ] && ok || { bad "the second run: exit $RC"; tail -n 5 "$W/b.log"; }
msg=$(valid "$run/metrics.jsonl") && ok || bad "after a torn line and a second run: $msg"
grep -q "metrics.jsonl: removed a torn last line" "$W/b.log" && ok || bad "no warning about the torn line"
[ "$(wc -l < "$run/metrics.jsonl")" -eq 5 ] && ok || bad "$(wc -l < "$run/metrics.jsonl") lines, expected 2 + header + 2"
sed -n 3p "$run/metrics.jsonl" | grep -qE '^\{"run":\{"start":"[0-9T:-]+Z","command":\[.*"train".*\],"ranks":2\}\}$' \
  && ok || bad "line 3 is not the second run's header: $(sed -n 3p "$run/metrics.jsonl" | cut -c1-200)"

# a full disk: a tmpfs with room for a few lines only
if [ "$(id -u)" = 0 ] && MNT="$W/mnt" && mkdir -p "$MNT" && mount -t tmpfs -o size=8k tmpfs "$MNT" 2>/dev/null; then
  start_job "$W/c.log" "${TRAIN[@]}" --train-iters 40 --run-dir "$MNT/run"
  wait_job 300
  [ "$RC" -eq 0 ] && grep -q "metrics stop here" "$W/c.log" && ok \
    || { bad "a full disk: exit $RC or no 'metrics stop here' warning"; tail -n 3 "$W/c.log"; }
  msg=$(valid "$MNT/run/metrics.jsonl") && ok || bad "after a full disk: $msg"
  n=$(wc -l < "$MNT/run/metrics.jsonl")
  [ "$n" -gt 0 ] && [ "$n" -lt 40 ] && ok || bad "after a full disk: $n lines (expected some, fewer than 40)"
else
  echo "skipped the full-disk case: mounting a tmpfs needs root"
fi
finish
