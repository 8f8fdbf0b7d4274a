#!/usr/bin/env bash
# cli_blas_core.sh - OpenBLAS's kernel set (src/kernels/blas_core.c). Where OpenBLAS does not know
# the CPU and picks a generic set, tandem asks for the one the CPU runs (OPENBLAS_CORETYPE, then runs
# itself again); elsewhere it changes nothing. The expected set comes from scripts/blas-core.sh, an
# independent reading of /proc/cpuinfo and of OpenBLAS's own choice, so both branches are checked on
# whichever machine runs this:
#   - tandem ends up on that set (OpenBLAS's own choice when the script names none);
#   - a user's OPENBLAS_CORETYPE is kept as it is;
#   - under mpirun (2 ranks) training works and rank 0 logs the choice exactly when tandem made one.
# Env: TANDEM (build/tandem), MPIRUN (mpirun.openmpi or mpirun.mpich).
. "$(dirname "$0")/../train/lib.sh"
unset OPENBLAS_CORETYPE TANDEM_BLAS_CORE_FROM
cores() { OPENBLAS_VERBOSE=2 "$TANDEM" --help 2>&1 >/dev/null | sed -n 's/^Core: //p'; }
own=$(cores | head -1)
want=$(scripts/blas-core.sh "$TANDEM")
got=$(cores | tail -1)
n=$(cores | wc -l)
if [ -z "$own" ]; then
  bad "OPENBLAS_VERBOSE=2 printed no 'Core:' line (not a DYNAMIC_ARCH OpenBLAS?)"
elif [ -n "$want" ]; then
  [ "$got" = "$want" ] && [ "$n" -eq 2 ] && ok "OpenBLAS chose $own here; tandem runs on $want (the CPU's set)" \
    || bad "OpenBLAS chose $own, expected tandem on $want, got $got after $n loads"
else
  [ "$got" = "$own" ] && [ "$n" -eq 1 ] && ok "OpenBLAS's own choice ($own) kept: it fits this CPU" \
    || bad "OpenBLAS chose $own (fits this CPU), tandem ended on $got after $n loads"
fi
u=$(OPENBLAS_CORETYPE=Haswell OPENBLAS_VERBOSE=2 "$TANDEM" --help 2>&1 >/dev/null | sed -n 's/^Core: //p' | tr '\n' ' ')
[ "$u" = "Haswell " ] && ok "a user's OPENBLAS_CORETYPE=Haswell is kept (loaded once)" || bad "user's choice: loads '$u'"

tiny_setup 24 0
"$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train --model "$W/model" --tokenizer "$W/tok.json" \
  --data "$W/data/train.json" --micro-batch-size 2 --global-batch-size 4 --seq-length 512 --train-iters 1 \
  >"$W/train.log" 2>&1 || bad "training under mpirun exited non-zero: $(tail -3 "$W/train.log")"
if [ -n "$want" ]; then
  grep -q "OpenBLAS: its $want kernels (OPENBLAS_CORETYPE set by tandem: the library does not know this CPU and chose its generic $own set" "$W/train.log" \
    && [ "$(grep -c "OPENBLAS_CORETYPE set by tandem" "$W/train.log")" -eq 1 ] \
    && ok "2 ranks: rank 0 logs the kernel set tandem chose, once" || bad "no or repeated log line: $(grep OpenBLAS "$W/train.log")"
else
  ! grep -q "OPENBLAS_CORETYPE set by tandem" "$W/train.log" && ok "2 ranks: no kernel note where OpenBLAS chose well" \
    || bad "a kernel note although OpenBLAS's choice fits: $(grep OpenBLAS "$W/train.log")"
fi
finish
