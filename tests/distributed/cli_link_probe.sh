#!/usr/bin/env bash
# cli_link_probe.sh - bench/link/link_probe.c (the emulated link's probe) builds without warnings and runs on
# 2 ranks over shared memory: one CSV row per (operation, size) with positive times and CPU, and exit 0, which
# says the reduce-scatter with the user-defined vectorised sum gave bitwise MPI_SUM's result on every rank.
source "$(dirname "$0")/../train/lib.sh"
case "$MPIRUN" in *mpich*) CC_MPI=mpicc.mpich ;; *) CC_MPI=mpicc.openmpi ;; esac

if "$CC_MPI" -O2 -Wall -Wextra -Werror -o "$W/link_probe" bench/link/link_probe.c 2>"$W/cc.log"; then
  ok "link_probe builds with -Wall -Wextra -Werror"
else
  bad "link_probe does not build cleanly"; cat "$W/cc.log"; finish; exit 1
fi
if timeout 300 "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$W/link_probe" 1 >"$W/probe.csv" 2>"$W/probe.err"; then
  ok "link_probe exits 0 (the vectorised sum's reduce-scatter is bitwise MPI_SUM's)"
else
  bad "link_probe failed"; tail -n 5 "$W/probe.err"
fi
$PY - "$W/probe.csv" <<'PYEOF' && ok "15 rows, every time and CPU figure positive" || bad "the probe's CSV"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ops = {"reduce_scatter", "ireduce_scatter", "ireduce_scatter_vsum", "allgather", "iallgather"}
assert len(rows) == 15, len(rows)
assert {r["op"] for r in rows} == ops and {r["size_mb"] for r in rows} == {"4", "16", "64"}
for r in rows:
    for k in ("median_ms", "min_ms", "busbw_gbit_s", "cpu_ms"):
        assert float(r[k]) > 0, (r, k)
PYEOF
finish
