#!/usr/bin/env bash
# run_link_bench.sh - data-parallel communication over an emulated cluster link (root; iproute2).
#
# Two network namespaces, each a "host" with one rank, joined by a veth pair whose both
# ends are shaped with htb to RATE (0.5, 1, 2 Gbit/s); the ranks talk TCP over a private
# /30 that exists only inside those namespaces. mpirun runs in the first namespace and
# starts the other rank through bench/link/agent.sh (an ssh stand-in: ip netns exec).
# Everything created is deleted on exit, interrupt or failure; stale namespaces left by a
# killed earlier run (same name prefix) are deleted at start. An interrupt (Ctrl-C, SIGTERM)
# stops the MPI job that is running at once rather than after it.
#
#   bench/link/run_link_bench.sh probe   link_probe (reduce-scatter / all-gather of 4, 16,
#                                        64 MB: time, bandwidth, CPU) with Open MPI and MPICH at each rate
#   bench/link/run_link_bench.sh ab      tandem ab at each rate, progress thread and inline:
#                                        baseline vs --overlap-grad-reduce, and vs both overlap flags
#   bench/link/run_link_bench.sh doctor  tandem doctor at each rate with each of PROBE_MPIS (--max-mb DOCTOR_MB, 16): what a
#                                        collective of BESIDE_MB (2, about ab's buckets) costs the compute beside it
#                                        and its speed there (tandem plan's inputs)
#   bench/link/run_link_bench.sh finish  finish_probe: when each rank completes a stream of exchanges posted
#                                        apart (FINISH_CASES: ";"-separated argument lists, finish_probe's
#                                        arguments less REPEATS, which is PROBE_REPEATS) with each of
#                                        PROBE_MPIS at each rate, into $OUT/finish_<mpi>_<rate>.csv
#   bench/link/run_link_bench.sh         probe and ab
# Environment: RATES ("0.5 1 2", Gbit/s), PROBE_MPIS ("openmpi mpich"), POLL_US (the probe's sleep between
# MPI_Test calls of a nonblocking collective, 50 as in tandem's communication thread), AB_MPI (openmpi),
# MODES ("thread inline"), CANDS ("overlap_grad overlap_both"; "custom": BASE_FLAGS against CAND_FLAGS),
# STEPS (30), WINDOW (11:30), PROFILE_STEPS (15: the profiled run of each A/B side),
# GBS (global batch, 12: sets the compute per step against the fixed gradient traffic), MBS (micro-batch
# size, 1; MBS = GBS/2 gives one micro-batch per rank, so the whole backward can hide the reduce-scatter),
# MBS_BY_RATE ("RATE:MBS ...", e.g. "0.5:24 1:12 2:6": at a listed rate, micro-batch MBS and global batch
# 2 x MBS, one micro-batch per rank; chooses the compute per step so that communication is a given
# share of it at every rate), BUCKETS (gradient buckets, 8), REPEATS (interleaved timing runs per side, 1),
# AB_FLAGS (extra train flags), DOCTOR_FLAGS (extra tandem doctor flags, e.g. --comm-thread-nice 0 beside AB_FLAGS
# --comm-thread-nice 0), DIST_OPT (1: --use-distributed-optimizer, reduce-scatter + all-gather; 0: the plain
# optimizer, one all-reduce per bucket),
# OUT (build/link-bench), LINK_PREFIX (tdmlink: the names of the namespaces and veth ends; a test uses its own),
# LINK_SYSCTL (KEY=VALUE ... set in both namespaces, e.g. net.ipv4.tcp_slow_start_after_idle=0),
# PROBE_REPEATS (5: timed calls per probe point), MPIRUN_ARGS (more mpirun flags for Open MPI runs, e.g.
# "--mca btl_tcp_eager_limit 4194304"). Results: $OUT/probe_<mpi>_<rate>.csv, $OUT/ab/<run>/summary.json,
# the tables $OUT/probe.md and $OUT/ab.md, and $OUT/ab.svg (step time against link rate:
# baseline, candidates and their ideal bound; bench/link/plot_link.py).
set -uo pipefail
cd "$(dirname "$0")/../.."
WHAT=${1:-all}
RATES=${RATES:-"0.5 1 2"}
PROBE_MPIS=${PROBE_MPIS:-"openmpi mpich"}
AB_MPI=${AB_MPI:-openmpi}
MODES=${MODES:-"thread inline"}
STEPS=${STEPS:-30}
WINDOW=${WINDOW:-11:30}
OUT=$(realpath -m "${OUT:-build/link-bench}")
PREFIX=${LINK_PREFIX:-tdmlink} # every namespace and veth end this script creates starts with this
NS_A=${PREFIX}a NS_B=${PREFIX}b
IP_A=10.213.117.1 IP_B=10.213.117.2 SUBNET=10.213.117.0/30
DEV=tdm0                  # the veth end's name inside each namespace
AGENT=$PWD/bench/link/agent.sh
PY=/usr/bin/python3

die() { echo "run_link_bench.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
[[ $PREFIX =~ ^[a-z][a-z0-9]{0,12}$ ]] || die "LINK_PREFIX: expected 1-13 lower-case letters and digits, got '$PREFIX'"
[[ ${PROBE_REPEATS:-5} =~ ^[1-9][0-9]{0,2}$ ]] || die "PROBE_REPEATS: expected 1-999, got '$PROBE_REPEATS'"
[[ ${POLL_US:-50} =~ ^[1-9][0-9]{0,5}$ ]] || die "POLL_US: expected microseconds, 1-999999, got '$POLL_US'"
for kv in ${LINK_SYSCTL:-}; do
  [[ $kv =~ ^[a-z0-9_.]+=[^=]+$ ]] || die "LINK_SYSCTL: expected KEY=VALUE settings such as net.ipv4.tcp_slow_start_after_idle=0, got '$kv'"
done
for pair in ${MBS_BY_RATE:-}; do
  [[ $pair =~ ^[0-9.]+:[1-9][0-9]*$ ]] || die "MBS_BY_RATE: expected RATE:MBS pairs such as 0.5:24, got '$pair'"
done
command -v ip >/dev/null && command -v tc >/dev/null || die "needs iproute2 (ip, tc)"

delete_namespaces() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX" || true); do
    # ranks still running inside (an interrupted run) go first, by pid
    local p
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null  # deleting a namespace deletes its veth end and the pair
  done
  ip link del "${PREFIX}A" 2>/dev/null # a pair created but never moved (a set-up that failed half-way)
  return 0
}
# The MPI job runs in the background and the script waits for it: bash runs a trap only once the
# foreground command it waits on has ended, and timeout(1) puts the job in a process group of its own,
# out of reach of the terminal's Ctrl-C, so a foreground job would make an interrupt wait for the run
# to finish (up to 30 minutes). `wait` returns at once on a trapped signal; the trap stops the job.
JOB=
exec 3>&2 # the script's stderr: a trap runs inside mpi_run, whose stderr goes to a file
on_signal() {
  [ -n "$JOB" ] && kill -TERM "$JOB" 2>/dev/null
  echo "run_link_bench.sh: interrupted; deleting the link" >&3
  exit 130
}
cleanup() { delete_namespaces; }
trap cleanup EXIT
trap on_signal INT TERM
delete_namespaces

setup_link() {
  ip netns add "$NS_A" && ip netns add "$NS_B" || die "cannot create network namespaces"
  ip link add "${PREFIX}A" type veth peer name "${PREFIX}B" || die "cannot create a veth pair"
  ip link set "${PREFIX}A" netns "$NS_A" && ip link set "${PREFIX}B" netns "$NS_B" || die "cannot move the veth ends"
  local ns ip end
  for end in "$NS_A ${PREFIX}A $IP_A" "$NS_B ${PREFIX}B $IP_B"; do
    set -- $end; ns=$1; ip=$3
    ip -n "$ns" link set "$2" name "$DEV"
    ip -n "$ns" addr add "$ip/30" dev "$DEV"
    ip -n "$ns" link set "$DEV" up
    ip -n "$ns" link set lo up
    tc -n "$ns" qdisc add dev "$DEV" root handle 1: htb default 10
    tc -n "$ns" class add dev "$DEV" parent 1: classid 1:10 htb rate 1gbit quantum 60000
  done
  ip -n "$NS_A" route get "$IP_B" | grep -q "dev $DEV" || die "$IP_B is not routed over the veth pair"
  local kv
  for kv in ${LINK_SYSCTL:-}; do # the namespaces' own TCP settings, e.g. net.ipv4.tcp_slow_start_after_idle=0
    for ns in "$NS_A" "$NS_B"; do
      ip netns exec "$ns" sysctl -q -w "$kv" >/dev/null 2>&1 || die "LINK_SYSCTL: cannot set $kv in $ns (no such setting, or not one a network namespace has)"
    done
  done
}

set_rate() { # Gbit/s, on both directions
  local ns mbit
  mbit=$($PY -c "print(int(float('$1') * 1000))")
  for ns in "$NS_A" "$NS_B"; do
    tc -n "$ns" class change dev "$DEV" parent 1: classid 1:10 htb rate "${mbit}mbit" burst 256k cburst 256k quantum 60000 \
      || die "cannot set the rate to $1 Gbit/s"
  done
}

export LINK_NS_MAP="$IP_A=$NS_A $IP_B=$NS_B"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1

# mpi_run MPI SECONDS PROGRAM ARGS...: one rank per namespace, TCP only, over the /30,
# killed after SECONDS; in the background, waited for (see on_signal).
mpi_run() {
  local mpi=$1 limit=$2 rc; shift 2
  # shellcheck disable=SC2206 # MPIRUN_ARGS is split into words on purpose
  local extra=(${MPIRUN_ARGS:-})
  if [ "$mpi" = openmpi ]; then
    timeout -k 10 "$limit" ip netns exec "$NS_A" mpirun.openmpi --bind-to none -np 2 --host "$IP_A:1,$IP_B:1" \
      --mca plm_rsh_agent "$AGENT" --mca btl tcp,self --mca btl_tcp_if_include "$SUBNET" \
      --mca oob_tcp_if_include "$SUBNET" -x OPENBLAS_NUM_THREADS "${extra[@]}" "$@" </dev/null &
  else
    UCX_TLS=tcp,self UCX_NET_DEVICES=$DEV timeout -k 10 "$limit" ip netns exec "$NS_A" mpiexec.hydra -np 2 -hosts "$IP_A:1,$IP_B:1" \
      -launcher ssh -launcher-exec "$AGENT" -genvall "$@" </dev/null &
  fi
  JOB=$!
  wait "$JOB"; rc=$?
  JOB=
  return $rc
}

mkdir -p "$OUT"
setup_link
echo "link: $NS_A ($IP_A) <-> $NS_B ($IP_B), htb on $DEV in both namespaces"

# ---------------------------------------------------------------- probe
if [ "$WHAT" = probe ] || [ "$WHAT" = all ]; then
  for mpi in $PROBE_MPIS; do
    cc=mpicc.$mpi
    command -v "$cc" >/dev/null || { echo "skipping $mpi: no $cc"; continue; }
    "$cc" -O2 -Wall -Wextra -o "$OUT/link_probe_$mpi" bench/link/link_probe.c || die "cannot build link_probe with $cc"
    for rate in $RATES; do
      set_rate "$rate"
      echo "== probe $mpi at $rate Gbit/s"
      mpi_run "$mpi" 600 "$OUT/link_probe_$mpi" "${PROBE_REPEATS:-5}" "${POLL_US:-50}" \
        >"$OUT/probe_${mpi}_$rate.csv" 2>"$OUT/probe_${mpi}_$rate.err" \
        || { echo "probe $mpi at $rate Gbit/s failed:"; tail -n 20 "$OUT/probe_${mpi}_$rate.err"; }
      cat "$OUT/probe_${mpi}_$rate.csv"
    done
  done
  $PY - "$OUT" "$RATES" "$PROBE_MPIS" >"$OUT/probe.md" <<'PYEOF'
import csv, os, sys
out, rates, mpis = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
print("| MPI | link (Gbit/s) | operation | 4 MB ms (Gbit/s; CPU ms) | 16 MB ms (Gbit/s; CPU ms) "
      "| 64 MB ms (Gbit/s; CPU ms) |")
print("|---|---|---|---|---|---|")
for mpi in mpis:
    for rate in rates:
        p = os.path.join(out, f"probe_{mpi}_{rate}.csv")
        if not os.path.exists(p): continue
        rows = {}
        for r in csv.DictReader(open(p)):
            rows.setdefault(r["op"], {})[r["size_mb"]] = r
        for op, by in rows.items():
            cells = [f"{float(by[s]['median_ms']):.1f} ({float(by[s]['busbw_gbit_s']):.2f}; "
                     f"{float(by[s]['cpu_ms']):.1f})" if s in by else "-" for s in ("4", "16", "64")]
            print(f"| {mpi} | {rate} | {op} | " + " | ".join(cells) + " |")
PYEOF
  cat "$OUT/probe.md"
fi

# ---------------------------------------------------------------- tandem doctor
# what a collective in flight costs the compute beside it on this link, per progress mode (tandem plan's
# --comm-cpu-us-per-mb and --comm-speed-beside): $OUT/doctor_<mpi>_<rate>.txt, and its report for tandem plan
# --doctor in $OUT/doctor_<mpi>_<rate>.json
if [ "$WHAT" = doctor ]; then
  case $OUT in /*) dout=$OUT ;; *) dout=$PWD/$OUT ;; esac
  for mpi in $PROBE_MPIS; do
    if [ "$mpi" = openmpi ]; then t=$PWD/build/tandem; else t=$PWD/build-$mpi/tandem; fi
    [ -x "$t" ] || { echo "skipping $mpi: no $t (make${mpi:+ MPI=$mpi} ...)"; continue; }
    for rate in $RATES; do
      set_rate "$rate"
      echo "== doctor $mpi at $rate Gbit/s"
      # shellcheck disable=SC2086 # DOCTOR_FLAGS is split into words on purpose
      mpi_run "$mpi" 600 "$t" doctor --max-mb "${DOCTOR_MB:-16}" --beside-mb "${BESIDE_MB:-2}" --reps "${PROBE_REPEATS:-5}" ${DOCTOR_FLAGS:-} \
        --json "$dout/doctor_${mpi}_$rate.json" >"$OUT/doctor_${mpi}_$rate.txt" 2>&1 || echo "doctor $mpi at $rate Gbit/s failed"
      sed -n '/beside compute/,$p' "$OUT/doctor_${mpi}_$rate.txt" | grep -E "beside|progress|thread|inline|tandem plan"
    done
  done
fi

# ---------------------------------------------------------------- finish_probe
# which rank completes a stream of gradient exchanges last when the ranks post them apart, and by how much
if [ "$WHAT" = finish ]; then
  IFS=';' read -r -a cases <<<"${FINISH_CASES:-1 7.35 20 5 1;2 3.67 20 5 1;2 3.67 20 5 0;7 1.05 20 2 1;7 1.05 20 2 0}"
  for mpi in $PROBE_MPIS; do
    cc=mpicc.$mpi
    command -v "$cc" >/dev/null || { echo "skipping $mpi: no $cc"; continue; }
    "$cc" -O2 -Wall -Wextra -pthread -o "$OUT/finish_probe_$mpi" bench/link/finish_probe.c || die "cannot build finish_probe with $cc"
    for rate in $RATES; do
      set_rate "$rate"
      echo "== finish $mpi at $rate Gbit/s"
      : >"$OUT/finish_${mpi}_$rate.csv"
      for c in "${cases[@]}"; do
        # shellcheck disable=SC2086 # each case is an argument list: NB MB LAG SPACING THREAD [LATE_POLLS SEND_FIRST [NICE COMPUTE [BACKOFF]]]
        set -- $c
        mpi_run "$mpi" 300 "$OUT/finish_probe_$mpi" "${@:1:5}" "${PROBE_REPEATS:-5}" "${@:6}" >>"$OUT/finish_${mpi}_$rate.csv" \
          2>>"$OUT/finish_${mpi}_$rate.err" || echo "finish_probe $mpi at $rate Gbit/s ($c) failed"
      done
      grep -v '^nb' "$OUT/finish_${mpi}_$rate.csv"
    done
  done
fi

# ---------------------------------------------------------------- tandem ab
if [ "$WHAT" = ab ] || [ "$WHAT" = all ]; then
  if [ "$AB_MPI" = openmpi ]; then TANDEM=${TANDEM:-$PWD/build/tandem}; else TANDEM=${TANDEM:-$PWD/build-$AB_MPI/tandem}; fi
  "$TANDEM" --help 2>/dev/null | grep -qE "^  ab " || die "$TANDEM has no 'ab' command (make build/tandem)"
  # a private copy, so a rebuild of build/tandem during the runs cannot change or break them
  cp "$TANDEM" "$OUT/tandem" && TANDEM=$OUT/tandem
  D="$OUT/data"
  [ -f "$D/train.json" ] || "$TANDEM" gen-data --out "$D" --samples 2000 --heldout 10 --seed 1 >/dev/null || die "gen-data failed"
  [ -f "$D/tok.json" ] || "$TANDEM" train-tokenizer --data tests/tokenizer/train_sample.json --data "$D/train.json" \
    --vocab-size 1024 --out "$D/tok.json" >/dev/null || die "train-tokenizer failed"
  # Vision tower and projector frozen, as in the demo: the language model's gradients cross
  # the link every step (reduce-scatter), and the updated parameters (all-gather).
  COMMON=(--model "$PWD/configs/tiny" --tokenizer "$D/tok.json" --data "$D/train.json"
          --freeze-vision --freeze-projector --ddp-num-buckets "${BUCKETS:-8}"
          --seq-length 512 --lr 1e-4 --lr-warmup-iters 2 --seed 1234
          --steps "$STEPS" --window "$WINDOW" --repeats "${REPEATS:-1}" --audit-steps 0 --profile-steps "${PROFILE_STEPS:-15}" ${AB_FLAGS:-})
  case ${DIST_OPT:-1} in
    1) COMMON+=(--use-distributed-optimizer) ;;
    0) ;;
    *) die "DIST_OPT: expected 1 (distributed optimizer) or 0 (plain), got '$DIST_OPT'" ;;
  esac
  for rate in $RATES; do
    set_rate "$rate"
    mbs=${MBS:-1} gbs=${GBS:-12}
    for pair in ${MBS_BY_RATE:-}; do # RATE:MBS, checked at the start
      [ "${pair%%:*}" = "$rate" ] && mbs=${pair#*:} gbs=$((2 * ${pair#*:}))
    done
    echo "== $rate Gbit/s: micro-batch $mbs, global batch $gbs"
    for mode in $MODES; do
      for cand in ${CANDS:-overlap_grad overlap_both}; do
        bflags=""
        case $cand in
          overlap_grad) cflags="--overlap-grad-reduce" ;;
          overlap_both) cflags="--overlap-grad-reduce --overlap-param-gather" ;;
          custom) bflags=${BASE_FLAGS:-}; cflags=${CAND_FLAGS:?CANDS=custom needs CAND_FLAGS (and optionally BASE_FLAGS)} ;;
          *) die "CANDS: unknown candidate '$cand' (overlap_grad, overlap_both, custom)" ;;
        esac
        run="${rate}gbit_${mode}_${cand}"
        echo "== ab $run"
        rm -rf "$OUT/ab/$run"; mkdir -p "$OUT/ab"
        echo "$mbs $gbs" >"$OUT/ab/$run.batch"
        mpi_run "$AB_MPI" 1800 "$TANDEM" ab --baseline "$bflags" --candidate "$cflags" --comm-progress "$mode" \
          "${COMMON[@]}" --micro-batch-size "$mbs" --global-batch-size "$gbs" --out "$OUT/ab/$run" >"$OUT/ab/$run.log" 2>&1 \
          || { echo "ab $run failed:"; tail -n 20 "$OUT/ab/$run.log"; }
        grep -E "mean step time|exposed|overlap efficiency" "$OUT/ab/$run.log" | head -n 8
      done
    done
  done
  $PY bench/link/ab_table.py "$OUT/ab" "$RATES" "$MODES" "${CANDS:-overlap_grad overlap_both}" >"$OUT/ab.md"
  cat "$OUT/ab.md"
  $PY bench/link/plot_link.py --out "$OUT/ab.svg" "$AB_MPI=$OUT" && echo "plot: $OUT/ab.svg"
fi
