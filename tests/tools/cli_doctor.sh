#!/usr/bin/env bash
# cli_doctor.sh - tandem doctor (src/tools/cmd_doctor.c): under mpirun -np 2 every section is printed and every
# figure is a positive, finite number; one rank prints the local measurements and says the collectives were not
# measured; Open MPI's single-copy mechanism and who chose it are named, also where cross-memory attach is
# refused (tests/tools/no_cma.py); bad flags exit 2 with one sentence.
# No figure is compared with a time.
#   TANDEM=build/tandem bash tests/tools/cli_doctor.sh
set -u
cd "$(dirname "$0")/../.."
TANDEM=${TANDEM:-build/tandem}
MPIRUN=${MPIRUN:-mpirun.openmpi}
case "$MPIRUN" in
  *openmpi*) MPIFLAGS=(--allow-run-as-root --oversubscribe --bind-to none) ;;
  *) MPIFLAGS=() ;;
esac
export OPENBLAS_NUM_THREADS=1
W=$(mktemp -d /tmp/tdm_cli_doctor.XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }
QUICK=(--max-mb 1 --reps 2 --gemm-size 256 --beside-ms 100)
# a row of the collectives table: size, reduce-scatter and CPU, all-gather and CPU, memcpy, two ratios
ROW='^ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$'

# every number of the lines matching REGEX is finite and > 0 (at least MIN numbers in all)
positive() { # file regex min
  awk -v re="$2" -v min="$3" '
    $0 ~ re { for (i = 1; i <= NF; i++) { v = $i; gsub(/[(),x;]/, "", v)
              if (v ~ /^[0-9]+(\.[0-9]+)?$/) { n++; if (v + 0 <= 0) badv++ }
              else if (tolower(v) ~ /^(nan|inf|-nan|-inf)$/) badv++ } }
    END { exit !(n >= min && badv == 0) }' "$1"
}

# --- 2 ranks -------------------------------------------------------------------------------
timeout -k 5 120 "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" doctor "${QUICK[@]}" --json "$W/doctor.json" >"$W/two" 2>&1
rc=$?
[ "$rc" -eq 0 ] && ok "2 ranks: exit 0" || bad "2 ranks: exit $rc: $(head -c 400 "$W/two")"
for line in "^tandem doctor: 2 ranks on one host, [0-9]+ cores online" "^  processor " "^  OpenBLAS " "^  MPI  " \
            "^  sgemm ceiling +[0-9.]+ GFLOP/s per rank" "^  memcpy +[0-9.]+ ms/MB" "^  vector sum +[0-9.]+ ms/MB" \
            "^  page faults +[0-9.]+ ms/MB first touch of fresh pages, [0-9.]+ ms/MB reused" \
            "^  collectives +2 ranks, per MB" "^settings tandem uses$" "^  BLAS threads +1 per rank: OPENBLAS_NUM_THREADS" \
            "^ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +\((MPI_Ireduce_scatter_block and MPI's op, MPI_Iallgather|tandem's exchange: vector sum, all-gather in place)\)$" \
            "^  all-gather +(tandem's exchange|MPI_Iallgather): [0-9.]+ ms/MB of CPU here against [0-9.]+ with (MPI_Iallgather|tandem's exchange) \(the same choice\)$" \
            "^  reduce-scatter +(tandem's exchange and vector sum|MPI_Ireduce_scatter_block and MPI's op): [0-9.]+ ms/MB of CPU here against [0-9.]+ with " \
            "^  progress " "^  verdict .* ms per MB of gradients" "pay for themselves when each trains more than about [0-9]+ tokens"; do
  grep -qE -- "$line" "$W/two" && ok "2 ranks: /$line/" || bad "2 ranks: no line /$line/"
done
# what a collective costs the compute beside it, per progress mode, and the flags that give it to tandem plan
for line in "^  beside compute +a reduce-scatter and an all-gather of 0.25 MB each kept in flight" \
            "^ +[0-9]+ ms \(pieces of [0-9.]+ ms, a progress call after each\); the thread at nice 10$" \
            "^      thread +-?[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$" "^      inline +-?[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$" \
            "^  tandem plan +thread: --comm-lost-share 0\.[0-9]+ --comm-speed-beside [0-9.]+$" \
            "^  tandem plan +inline: --comm-cpu-us-per-mb [0-9]+ --comm-speed-beside [0-9.]+$"; do
  grep -qE -- "$line" "$W/two" && ok "2 ranks: /$line/" || bad "2 ranks: no line /$line/: $(sed -n '/beside/,/settings/p' "$W/two")"
done
# the flags it prints are tandem plan's own and in range: plan accepts them (a refusal names the flag)
for mode in thread inline; do
  flags=$(grep -E "^  tandem plan +$mode: " "$W/two" | sed 's/^[^:]*: //')
  "$TANDEM" plan --practice --out "$W/practice_$mode" $flags >"$W/practice_$mode.txt" 2>&1 \
    && grep -q "speed_beside\|link bandwidth" "$W/practice_$mode.txt" \
    && ok "2 ranks: tandem plan takes the $mode flags ($flags)" || bad "2 ranks: tandem plan $flags: $(cat "$W/practice_$mode.txt")"
done
# --json: the same figures as a report (what tandem plan --doctor reads), its flags the printed ones
python3 - "$W/doctor.json" "$W/two" <<'PYEOF' && ok "2 ranks: --json writes the report with the printed figures" \
  || bad "2 ranks: --json: see above"
import json, math, re, sys
d, text = json.load(open(sys.argv[1])), open(sys.argv[2]).read()
errs = []
if d.get("tandem_doctor") != 1 or d.get("ranks") != 2 or d.get("one_host") is not True: errs.append("header %s" % d)
if len(d.get("collectives", [])) != 3: errs.append("collectives %s" % d.get("collectives"))
for c in d.get("collectives", []):
    for k in ("mb", "reduce_scatter_ms_per_mb", "all_gather_ms_per_mb"):
        if not (isinstance(c.get(k), (int, float)) and c[k] > 0): errs.append("collectives %s %s" % (k, c))
# the engine tandem does not use here: the printed row's four figures, and which engine it is
o, row = d.get("other_engine", {}), re.search(r"^ +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+) +\((MPI_I|tandem)", text, re.M)
if not row or o.get("engine") != ("mpi" if row.group(6) == "MPI_I" else "tandem") or any(
        abs(o.get(k, -1) - float(row.group(i + 1))) > 0.006 for i, k in enumerate(("mb", "reduce_scatter_ms_per_mb",
        "reduce_scatter_cpu_ms_per_mb", "all_gather_ms_per_mb", "all_gather_cpu_ms_per_mb"))):
    errs.append("other_engine %s against %s" % (o, row and row.group(0)))
for k in ("sgemm_gflops_fastest", "memcpy_ms_per_mb", "vector_sum_ms_per_mb"):
    if not (isinstance(d.get(k), (int, float)) and d[k] > 0): errs.append("%s %s" % (k, d.get(k)))
b = d.get("beside_compute", {})
if b.get("comm_thread_nice") != 10 or abs(b.get("mb", 0) - 0.25) > 0.01: errs.append("beside_compute %s" % b)
for mode in ("thread", "inline"):
    line = re.search(r"^  tandem plan +%s: (.*)$" % mode, text, re.M)
    m = b.get(mode, {})
    if not line or m.get("plan_flags") != line.group(1): errs.append("%s: %s against %s" % (mode, m, line and line.group(1)))
    if not math.isfinite(m.get("compute_lost_us_per_mb") or float("nan")) or not m.get("speed", 0) > 0: errs.append("%s %s" % (mode, m))
    # the share of the compute's time lost: what it lost per MB times the MB moved, over its time alone plus that
    lost = max(m.get("compute_lost_us_per_mb", 0), 0) * m.get("moved_mb", 0) / 1e3
    share = lost / (m.get("compute_ms", 0) + lost) if m.get("compute_ms", 0) > 0 else -1
    if abs(m.get("compute_lost_share", -1) - share) > 1e-4 * share + 1e-6: errs.append("%s share %s" % (mode, m))  # 6 digits
# posted together: k collectives of --max-mb / k, both ways timed, the ratio theirs, the printed figures the same
t = d.get("posted_together", {})
if t.get("k") != 8 or not t.get("mb", 0) > 0: errs.append("posted_together %s" % t)
for kind, name in (("reduce_scatter", "reduce-scatter"), ("all_gather", "all-gather")):
    f = t.get(kind, {})
    one, tog = f.get("one_by_one_ms", 0), f.get("together_ms", 0)
    if not (one > 0 and tog > 0) or abs(f.get("ratio", 0) - tog / one) > 1e-4 * tog / one: errs.append("%s %s" % (kind, f))
    row = re.search(r"^      %s +([0-9.]+) +([0-9.]+) +([0-9.]+)$" % name, text, re.M)
    if not row or abs(float(row.group(1)) - one) > 0.006 or abs(float(row.group(2)) - tog) > 0.006: errs.append("%s printed %s" % (kind, row and row.group(0)))
if "  report           %s" % sys.argv[1] not in text: errs.append("no report line")
for e in errs: print(e)
sys.exit(1 if errs else 0)
PYEOF
[ "$(grep -cE "$ROW" "$W/two")" -eq 3 ] \
  && ok "2 ranks: three sizes in the collectives table" || bad "2 ranks: the collectives table: $(sed -n '/collectives/,/settings/p' "$W/two")"
positive "$W/two" "$ROW" 24 \
  && ok "2 ranks: every collective figure positive and finite" || bad "2 ranks: a collective figure is not positive: $(cat "$W/two")"
positive "$W/two" '^  (sgemm ceiling|memcpy|vector sum|page faults) ' 8 \
  && ok "2 ranks: the local figures positive and finite" || bad "2 ranks: a local figure: $(cat "$W/two")"
[ "$(grep -c '^tandem doctor:' "$W/two")" -eq 1 ] && ok "2 ranks: rank 0 alone prints" || bad "2 ranks: printed more than once"

# --- Open MPI: the single-copy mechanism and who chose it -------------------------------------
case "$MPIRUN" in
  *openmpi*)
    OMPI_MCA_btl_vader_single_copy_mechanism=none timeout -k 5 120 "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" doctor \
      "${QUICK[@]}" >"$W/none" 2>&1
    grep -qE "^  reduce-scatter +tandem's exchange and vector sum: .*tandem's default under Open MPI" "$W/two" \
      && ok "Open MPI: tandem's reduce-scatter by default" || bad "Open MPI: $(grep 'reduce-scatter ' "$W/two")"
    grep -qE "^  MPI +Open MPI .*single-copy mechanism none \(OMPI_MCA_btl_vader_single_copy_mechanism\)" "$W/none" \
      && grep -qE "^  single copy +none: your setting is kept" "$W/none" \
      && ok "Open MPI: a single-copy mechanism set in the environment is named and kept" \
      || bad "Open MPI: single copy: $(grep -E 'MPI|single' "$W/none")"
    # where cross-memory attach is refused (a container without CAP_SYS_PTRACE; here a seccomp filter on
    # process_vm_readv, inherited by mpirun and the ranks), tandem finds it before MPI_Init and turns it off:
    # no failed read, and it says so. Forcing it back on shows the filter bites: Open MPI's reads fail.
    env -u OMPI_MCA_btl_vader_single_copy_mechanism timeout -k 5 120 python3 tests/tools/no_cma.py "$MPIRUN" \
      "${MPIFLAGS[@]}" -np 2 "$TANDEM" doctor "${QUICK[@]}" >"$W/refused" 2>&1
    rc=$?
    if [ "$rc" -eq 77 ]; then echo "skip: cross-memory attach refused: $(tail -n 1 "$W/refused")"
    else
      [ "$rc" -eq 0 ] && grep -qE "^  MPI +Open MPI .*single-copy mechanism none \(set by tandem: cross-memory attach is refused here\)" "$W/refused" \
        && grep -qE "^  single copy +none: cross-memory attach is refused here" "$W/refused" \
        && ! grep -q "Read -1" "$W/refused" && positive "$W/refused" "$ROW" 24 \
        && ok "Open MPI, cross-memory attach refused: tandem turns it off and says so" \
        || bad "Open MPI, cross-memory attach refused: exit $rc: $(head -c 600 "$W/refused")"
      OMPI_MCA_btl_vader_single_copy_mechanism=cma timeout -k 5 120 python3 tests/tools/no_cma.py "$MPIRUN" \
        "${MPIFLAGS[@]}" -np 2 "$TANDEM" doctor "${QUICK[@]}" >"$W/forced" 2>&1
      grep -q "Read -1, expected [0-9]*, errno = 1" "$W/forced" && ok "Open MPI, cross-memory attach forced on: the filter refuses it" \
        || bad "Open MPI, cross-memory attach forced on under the filter: no failed read: $(head -c 400 "$W/forced")"
    fi
    ;;
  *)
    grep -qE "^  MPI +MPICH" "$W/two" && ok "MPICH named" || bad "MPICH: $(grep MPI "$W/two")"
    grep -qE "^  reduce-scatter +MPI_Ireduce_scatter_block and MPI's op: .*the default under this MPI" "$W/two" \
      && ok "MPICH: MPI's reduce-scatter by default" || bad "MPICH: $(grep 'reduce-scatter ' "$W/two")" ;;
esac

# --- one rank ----------------------------------------------------------------------------------
timeout -k 5 120 "$TANDEM" doctor "${QUICK[@]}" >"$W/one" 2>&1
rc=$?
[ "$rc" -eq 0 ] && ok "1 rank: exit 0" || bad "1 rank: exit $rc: $(head -c 400 "$W/one")"
grep -qE "^tandem doctor: 1 rank " "$W/one" && grep -qE "^  collectives +not measured: one rank" "$W/one" \
  && ! grep -q "verdict" "$W/one" && ok "1 rank: local measurements only, and says so" || bad "1 rank: $(cat "$W/one")"
positive "$W/one" '^  (sgemm ceiling|memcpy|vector sum|page faults) ' 8 \
  && ok "1 rank: figures positive and finite" || bad "1 rank: a figure: $(cat "$W/one")"

# --- flags -------------------------------------------------------------------------------------
expect() { # name rc needle cmd...
  local name=$1 want=$2 needle=$3; shift 3
  timeout -k 5 60 "$@" >"$W/out" 2>&1 </dev/null
  local rc=$?
  if [ "$rc" -ne "$want" ]; then bad "$name: exit $rc, expected $want: $(head -c 300 "$W/out")"
  elif ! grep -qF -- "$needle" "$W/out"; then bad "$name: no '$needle' in: $(head -c 300 "$W/out")"
  else ok "$name"; fi
}
expect "--help" 0 "usage: mpirun -np 2 tandem doctor" "$TANDEM" doctor --help
expect "--reps 0 refused" 2 "tandem doctor: --reps" "$TANDEM" doctor --reps 0
expect "--max-mb abc refused" 2 "tandem doctor: --max-mb" "$TANDEM" doctor --max-mb abc
expect "a misspelt flag gets the closest name" 2 "did you mean '--reps'" "$TANDEM" doctor --resp 3
expect "--json into a missing folder: exit 1 on every rank" 1 "tandem doctor: --json: $W/no/such/" \
  "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" doctor "${QUICK[@]}" --beside-ms 0 --json "$W/no/such/d.json"
expect "a bad flag under 2 ranks" 2 "tandem doctor: --gemm-size" "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" doctor --gemm-size 1
[ "$(grep -c '^tandem doctor:' "$W/out")" -eq 1 ] && ok "a bad flag under 2 ranks: one sentence" \
  || bad "a bad flag under 2 ranks: $(cat "$W/out")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
