#!/usr/bin/env bash
# cli_dp_warning.sh - "never slower than one rank without saying so" (docs/user-guide.md, "When more ranks are
# slower"), with the condition forced both ways by TANDEM_DP_COST_SCALE (the measured communication times that
# factor): 1e9 makes any step's communication outweigh what the second rank saves, 0 makes it cost nothing. No
# time is compared with anything. Also the start-up line naming the MPI library, transport and probe.
# Env: TANDEM (build/tandem), MPIRUN (mpirun.openmpi or mpirun.mpich).
. "$(dirname "$0")/lib.sh"
tiny_setup 48 4

A=(--model "$W/model" --tokenizer "$W/tok.json" --data "$W/data/train.json" --micro-batch-size 2
   --global-batch-size 8 --lr 1e-3 --seq-length 512 --log-interval 2)
T=(--train-iters 4)

TANDEM_DP_COST_SCALE=1e9 "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train "${A[@]}" "${T[@]}" >"$W/forced.log" 2>&1 \
  && ok "forced: the run succeeds" || bad "forced: exit non-zero: $(tail -n 3 "$W/forced.log")"
n=$(grep -c "warning: data parallelism costs more than it saves here" "$W/forced.log")
[ "$n" -eq 1 ] && ok "forced: the warning is printed once" || bad "forced: the warning printed $n times"
w=$(grep "costs more than it saves" "$W/forced.log")
for needle in "1 rank with 2 BLAS threads (OPENBLAS_NUM_THREADS=2)" "--global-batch-size: about " "ms per step instead of" \
              "(tandem doctor measures it)" "--micro-batch-size 4" "transport: "; do
  [[ "$w" == *"$needle"* ]] && ok "forced: the warning says '$needle'" || bad "forced: no '$needle' in: $w"
done
case "$MPIRUN" in
  *openmpi*) [[ "$w" == *"(2) MPICH"* ]] && ok "Open MPI: MPICH is named as the other MPI" || bad "the other MPI: $w" ;;
  *) [[ "$w" == *"(2) Open MPI"* ]] && ok "MPICH: Open MPI is named as the other MPI" || bad "the other MPI: $w" ;;
esac
grep -qE "^data-parallel transport: .+ \| measured over 4\.0 MB, 2 ranks \(ms/MB\): reduce-scatter [0-9.]+ \(CPU [0-9.]+\), all-gather [0-9.]+ \(CPU [0-9.]+\), memcpy [0-9.]+$" "$W/forced.log" \
  && ok "2 ranks: the transport line with the probe's figures" || bad "2 ranks: transport line: $(grep -m1 transport "$W/forced.log")"

TANDEM_DP_COST_SCALE=0 "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train "${A[@]}" "${T[@]}" >"$W/free.log" 2>&1 \
  && ! grep -q "costs more than it saves" "$W/free.log" && ok "communication that costs nothing: no warning" \
  || bad "scale 0: $(grep -m1 'costs more' "$W/free.log")"

TANDEM_DP_COST_SCALE=1e9 "$TANDEM" train "${A[@]}" "${T[@]}" >"$W/one.log" 2>&1 && ! grep -q "costs more than it saves" "$W/one.log" \
  && ok "1 rank: never warns" || bad "1 rank: $(tail -n 2 "$W/one.log")"
grep -qE "^data-parallel transport: .+; 1 rank: no collectives$" "$W/one.log" \
  && ok "1 rank: the transport line says no collectives" || bad "1 rank: transport line: $(grep -m1 transport "$W/one.log")"

# tandem ab: the transport once, the inner runs' warning once
TANDEM_DP_COST_SCALE=1e9 "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" ab "${A[@]}" --steps 4 --window 2:4 --audit-steps 0 \
  --candidate "--overlap-grad-reduce" --out "$W/ab" >"$W/ab.log" 2>&1 || bad "ab: exit non-zero: $(tail -n 3 "$W/ab.log")"
[ "$(grep -c 'A/B: data-parallel transport: ' "$W/ab.log")" -eq 1 ] && ok "ab: the transport line once" \
  || bad "ab: transport lines: $(grep -c 'transport' "$W/ab.log")"
[ "$(grep -c 'costs more than it saves' "$W/ab.log")" -eq 1 ] && ok "ab: the warning once" \
  || bad "ab: warnings: $(grep -c 'costs more than it saves' "$W/ab.log")"
finish
