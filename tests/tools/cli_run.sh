#!/usr/bin/env bash
# cli_run.sh - scripts/run.sh, the one launch line (docs/user-guide.md, Launching):
#   - a 2-rank, 2-step `tandem train` through it with Open MPI and with MPICH (an MPICH build: TANDEM_MPICH,
#     default build-mpich/tandem; else only a 2-rank shell command), as root and as a user (nobody, when this
#     runs as root and setpriv exists);
#   - the launcher flags it adds: --bind-to none; --allow-run-as-root for root only; the CMA variable in a
#     container, a value already set kept; --oversubscribe beyond the cores; none of them for MPICH;
#   - bad input: one sentence, exit 2.
# Env: TANDEM (build/tandem), TANDEM_MPICH.
. "$(dirname "$0")/../train/lib.sh"
unset OMPI_MCA_btl_vader_single_copy_mechanism # run.sh decides
RUN=scripts/run.sh
OMPI=mpirun.openmpi MPICH=mpirun.mpich
TANDEM_MPICH=${TANDEM_MPICH:-build-mpich/tandem}
tiny_setup 16 4
chmod -R a+rwX "$W"
chmod a+rx "$W"

# train2 NAME LAUNCHER BINARY [PREFIX...]: 2 ranks, 2 steps; the log says 2 ranks and reaches step 2
train2() {
  local name=$1 launcher=$2 bin=$3; shift 3
  local out="$W/${name// /_}"
  mkdir -p "$out" && chmod a+rwx "$out"
  "$@" env HOME="$W" MPIRUN="$launcher" "$RUN" -np 2 "$bin" train --model "$W/model" --tokenizer "$W/tok.json" \
    --data "$W/data/train.json" --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --train-iters 2 \
    --seq-length 512 --save "$out/ck" > "$out/log" 2>&1 < /dev/null
  local rc=$?
  if [ "$rc" -eq 0 ] && grep -qE 'iteration +2/ +2' "$out/log" && grep -qE 'per rank per step, 2 ranks$' "$out/log" \
     && [ -d "$out/ck/iter_0000002" ]; then
    ok "$name: 2 ranks, 2 steps, saved"
  else
    bad "$name: exit $rc"
    tail -n 8 "$out/log"
  fi
}

# --- 1. runs ------------------------------------------------------------------------------
train2 "Open MPI as $(id -un)" "$OMPI" "$TANDEM"
if [ "$(id -u)" -eq 0 ] && command -v setpriv > /dev/null; then
  train2 "Open MPI as nobody" "$OMPI" "$PWD/$TANDEM" setpriv --reuid=65534 --regid=65534 --clear-groups
else
  echo "skip: the run as another user (needs root and setpriv)"
fi
if ! command -v "$MPICH" > /dev/null; then
  echo "skip: MPICH runs ($MPICH not installed)"
else
  r=$(MPIRUN=$MPICH "$RUN" -np 2 sh -c 'echo rank $PMI_RANK of $PMI_SIZE' 2>&1 | sort | tr '\n' ' ')
  [ "$r" = "rank 0 of 2 rank 1 of 2 " ] && ok "MPICH: 2 ranks ($r)" || bad "MPICH: '$r'"
  if [ -x "$TANDEM_MPICH" ]; then
    train2 "MPICH as $(id -un)" "$MPICH" "$TANDEM_MPICH"
    [ "$(id -u)" -eq 0 ] && command -v setpriv > /dev/null &&
      train2 "MPICH as nobody" "$MPICH" "$PWD/$TANDEM_MPICH" setpriv --reuid=65534 --regid=65534 --clear-groups
  else
    echo "skip: tandem under MPICH ($TANDEM_MPICH not built: make MPI=mpich)"
  fi
fi

# --- 2. the flags added -------------------------------------------------------------------
dry() { env -u OMPI_MCA_btl_vader_single_copy_mechanism RUN_DRY=1 "$@" 2>&1; }
d=$(dry MPIRUN=$OMPI "$RUN" -np 2 tandem inspect)
case "$d" in *"--bind-to none"*" -np 2 "*"/tandem inspect") ok "Open MPI: --bind-to none" ;; *) bad "Open MPI flags: $d" ;; esac
if [ "$(id -u)" -eq 0 ]; then
  [[ "$d" == *--allow-run-as-root* ]] && ok "root: --allow-run-as-root" || bad "root without --allow-run-as-root: $d"
fi
if command -v setpriv > /dev/null && [ "$(id -u)" -eq 0 ]; then
  u=$(dry MPIRUN=$OMPI setpriv --reuid=65534 --regid=65534 --clear-groups "$RUN" -np 2 tandem inspect)
  [[ "$u" != *--allow-run-as-root* && "$u" == *"--bind-to none"* ]] && ok "a user: no --allow-run-as-root" \
    || bad "as nobody: $u"
fi
if [ -e /.dockerenv ] || [ -e /run/.containerenv ]; then
  c=$(dry MPIRUN=$OMPI "$RUN" -np 2 /bin/true)
  [[ "$c" == OMPI_MCA_btl_vader_single_copy_mechanism=none* ]] && ok "in a container: CMA off" || bad "container: $c"
fi
[[ "$d" != *single_copy_mechanism* ]] && ok "tandem: its own choice of CMA (no variable set)" || bad "tandem: $d"
k=$(RUN_DRY=1 OMPI_MCA_btl_vader_single_copy_mechanism=cma MPIRUN=$OMPI "$RUN" -np 2 tandem inspect)
[[ "$k" == OMPI_MCA_btl_vader_single_copy_mechanism=cma* ]] && ok "a CMA setting already made is kept" || bad "$k"
many=$(( $(nproc) + 1 ))
o=$(dry MPIRUN=$OMPI "$RUN" -np "$many" tandem inspect)
[[ "$o" == *--oversubscribe* ]] && ok "-np $many > $(nproc) cores: --oversubscribe" || bad "no --oversubscribe: $o"
[[ "$d" != *--oversubscribe* ]] && ok "-np 2: no --oversubscribe" || bad "--oversubscribe at -np 2"
if command -v "$MPICH" > /dev/null; then
  m=$(dry MPIRUN=$MPICH "$RUN" -np 2 -H localhost tandem inspect)
  [[ "$m" == "$MPICH -H localhost -np 2 "*"/tandem inspect" ]] && ok "MPICH: no extra flags ($m)" || bad "MPICH: $m"
fi

# --- 3. bad input -------------------------------------------------------------------------
bad_input() { # NEEDLE ARGS...
  local needle=$1; shift
  local e rc
  e=$("$RUN" "$@" 2>&1); rc=$?
  [ "$rc" -eq 2 ] && [ "$(printf '%s\n' "$e" | wc -l)" -eq 1 ] && [[ "$e" == *"$needle"* ]] \
    && ok "run.sh $*: $e" || bad "run.sh $*: exit $rc: $e"
}
bad_input "-np N is required" tandem inspect
bad_input "-np 0: expected a positive whole number" -np 0 tandem inspect
bad_input "--map-by: expected -np N" --map-by core -np 2 tandem inspect
e=$(MPIRUN=no-such-mpirun "$RUN" -np 2 tandem inspect 2>&1); rc=$?
[ "$rc" -eq 2 ] && [[ "$e" == *"no-such-mpirun: no such launcher"* ]] && ok "a missing launcher: $e" || bad "missing launcher: $rc $e"
finish
