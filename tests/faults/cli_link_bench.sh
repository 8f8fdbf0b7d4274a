#!/usr/bin/env bash
# cli_link_bench.sh - bench/link/run_link_bench.sh, the emulated cluster link (root, iproute2): it shapes the
# link (the probe's all-gathers carry no more than the rate), and it deletes the namespaces and veth pair it
# created after a run, after a failure once the link is up, and at once on Ctrl-C during an MPI job (before
# 2026-12-01 an interrupt waited for the running job to end). The namespaces get this test's own prefix, so a
# benchmark running beside it is not touched. Skipped where network namespaces cannot be made (not root).
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip_all "needs root (network namespaces)"
command -v ip >/dev/null && command -v tc >/dev/null || skip_all "needs iproute2 (ip, tc)"
command -v mpirun.openmpi >/dev/null || skip_all "needs Open MPI"
PFX=tdmt$(($$ % 100000))
ip netns add "${PFX}x" 2>/dev/null || skip_all "cannot create a network namespace here"
ip netns del "${PFX}x"

ours_left() { # namespaces and links of ours still there
  { ip netns list 2>/dev/null | awk '{print $1}'; ip -o link show 2>/dev/null | awk -F': ' '{print $2}'; } |
    grep -c "^$PFX" || true
}
delete_ours() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PFX"); do ip netns del "$ns"; done
  ip link del "${PFX}A" 2>/dev/null
  return 0
}
trap 'fault_cleanup; delete_ours' EXIT
PY=/usr/bin/python3
LB=(env LINK_PREFIX="$PFX" PROBE_MPIS=openmpi) # then RATES, OUT, ... and bench/link/run_link_bench.sh

# 0. A malformed setting: one sentence naming it, before anything is created.
"${LB[@]}" POLL_US=abc bench/link/run_link_bench.sh probe >"$W/lb0.log" 2>&1; rc=$?
[ "$rc" = 1 ] && grep -q "POLL_US: expected microseconds" "$W/lb0.log" && [ "$(ours_left)" = 0 ] && ok ||
  { bad "POLL_US=abc: exit $rc"; cat "$W/lb0.log"; }

# 0b. A namespace setting the kernel refuses (LINK_SYSCTL), once the link is up: one sentence naming it, nothing left.
"${LB[@]}" LINK_SYSCTL=net.ipv4.no_such_setting=1 OUT="$W/lb0b" bench/link/run_link_bench.sh probe >"$W/lb0b.log" 2>&1
rc=$?
[ "$rc" = 1 ] && grep -q "LINK_SYSCTL: cannot set net.ipv4.no_such_setting=1" "$W/lb0b.log" && [ "$(ours_left)" = 0 ] &&
  ok || { bad "LINK_SYSCTL=net.ipv4.no_such_setting=1: exit $rc, $(ours_left) left"; cat "$W/lb0b.log"; }

# 1. A probe at 1 Gbit/s: exit 0, a full CSV, the all-gathers shaped, nothing left behind.
timeout 600 "${LB[@]}" RATES=1 PROBE_REPEATS=1 OUT="$W/lb1" bench/link/run_link_bench.sh probe >"$W/lb1.log" 2>&1; rc=$?
[ "$rc" = 0 ] && ok || { bad "the probe exited $rc"; tail -n 5 "$W/lb1.log"; }
$PY - "$W/lb1/probe_openmpi_1.csv" <<'PYEOF' 2>"$W/lb1.py" && ok || { bad "probe CSV: $(tail -n 1 "$W/lb1.py")"; }
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 15, f"{len(rows)} rows, expected 15"
gathers = [float(r["busbw_gbit_s"]) for r in rows if r["op"].endswith("allgather")]
# unshaped, TCP between the namespaces carries 4-5 Gbit/s on these machines
assert max(gathers) <= 1.15, f"an all-gather carried {max(gathers)} Gbit/s on a 1 Gbit/s link"
assert min(gathers) > 0.05, f"an all-gather carried only {min(gathers)} Gbit/s"
PYEOF
[ "$(ours_left)" = 0 ] && ok || bad "namespaces or links left after a probe: $(ip netns list | grep "^$PFX")"

# 2. A failure once the link is up (no tandem with an 'ab' command): a non-zero exit that says why, nothing left.
timeout 120 "${LB[@]}" RATES=1 TANDEM=/bin/true OUT="$W/lb2" bench/link/run_link_bench.sh ab >"$W/lb2.log" 2>&1; rc=$?
[ "$rc" != 0 ] && grep -q "has no 'ab' command" "$W/lb2.log" && ok ||
  { bad "failure: exit $rc"; tail -n 3 "$W/lb2.log"; }
[ "$(ours_left)" = 0 ] && ok || bad "namespaces or links left after a failure"

# 3. Ctrl-C while the probe runs at 0.5 Gbit/s (many repeats: minutes if not interrupted). Job control gives the
#    run its own process group, as a terminal does, and SIGINT goes to that group.
set -m
"${LB[@]}" RATES=0.5 PROBE_REPEATS=50 OUT="$W/lb3" bench/link/run_link_bench.sh probe \
  >"$W/lb3.log" 2>&1 </dev/null &
JOB=$!
set +m
end=$((SECONDS + 120))
# a probe rank's command line starts with the program's path; the compiler building it (-o that path) and mpirun
# name it later in theirs, and matching them made the wait end before any rank had started
until pgrep -f "^$W/lb3/link_probe_openmpi" >/dev/null || [ $SECONDS -ge $end ] || ! kill -0 "$JOB" 2>/dev/null; do
  sleep 0.2
done
if pgrep -f "^$W/lb3/link_probe_openmpi" >/dev/null; then
  sleep 1
  kill -INT -- -"$JOB"
  t0=$SECONDS
  wait_job 30
  [ "$RC" = 130 ] && ok ||
    { bad "Ctrl-C: exit $RC ($((SECONDS - t0)) s after it), expected 130"; tail -n 3 "$W/lb3.log"; }
  grep -q "interrupted; deleting the link" "$W/lb3.log" && ok || bad "Ctrl-C: no message"
  sleep 1
  [ "$(ours_left)" = 0 ] && ok || bad "namespaces or links left after Ctrl-C"
  pgrep -f "^$W/lb3/link_probe_openmpi" >/dev/null && bad "a probe rank outlived Ctrl-C" || ok
  echo "Ctrl-C: the script ended $((SECONDS - t0)) s after it"
else
  # where it stalled: the script's processes (its own process group) as they stand, then its log
  kill -0 "$JOB" 2>/dev/null && state="was still running" || state="had ended"
  bad "the probe never started: after $((SECONDS - end + 120)) s the script $state"
  ps -e -o pgid=,pid=,etimes=,stat=,args= | awk -v g="$JOB" '$1 == g' | cut -c1-160
  tail -n 5 "$W/lb3.log"; wait_job 5
fi
finish
