#!/usr/bin/env bash
# cli_one_rank_bad_input.sh - an input that is bad on one rank only (a file missing on one node:
# each rank here runs in its own folder and reads --tokenizer and --model relative to it): every
# rank exits non-zero, nothing hangs, and the one message names that rank and the input; an input
# bad on every rank alike keeps one message without a rank.
source "$(dirname "$0")/lib.sh"
have train || skip_all "tandem train is not built"
make_data

BIN=$(realpath "$TANDEM")
cat >"$W/by_rank.sh" <<'SH'
#!/bin/sh
# runs the command in the folder of this rank (r0, r1, ...) next to this script
cd "$(dirname "$0")/r${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}" && exec "$@"
SH
chmod +x "$W/by_rank.sh"
ARGS=(train --model model --tokenizer tok.json --data "$W/data/train.json" --freeze-vision --freeze-projector
      --global-batch-size 2 --seq-length 512 --lr 1e-4 --train-iters 2)

# case LABEL MISSING_ON EXPECTED_REGEX: tok.json is absent in the folders of the ranks in MISSING_ON
run_case() {
  local what=$1 missing=$2 want=$3 r log="$W/$1.log"
  for r in 0 1; do
    rm -rf "$W/r$r"; mkdir -p "$W/r$r/model"
    cp configs/tiny/config.json configs/tiny/preprocessor_config.json "$W/r$r/model/"
    case " $missing " in *" $r "*) ;; *) cp "$W/tok.json" "$W/r$r/tok.json" ;; esac
  done
  "${MPI[@]}" "$W/by_rank.sh" "$BIN" "${ARGS[@]}" >"$log" 2>&1 </dev/null &
  JOB=$!
  wait_job 60
  if [ "$RC" = 124 ]; then bad "$what: the job still ran after 60 s"; tail -n 5 "$log"; return; fi
  [ "$RC" -ne 0 ] && ok || bad "$what: mpirun exited 0"
  [ "$(ranks_left)" = 0 ] && ok || bad "$what: a rank outlived mpirun"
  grep -qE "$want" "$log" && ok || { bad "$what: expected a line matching '$want'"; grep "tandem" "$log" | head -3; }
  # anywhere in a line: mpirun forwards stdout and stderr on their own, so the message can land inside a long
  # stdout line (the arguments block passed 4 KiB, a read of the forwarding)
  [ "$(grep -o 'tandem train: ' "$log" | wc -l)" = 1 ] && ok \
    || { bad "$what: not exactly one message"; grep tandem "$log"; }
}
run_case "missing on rank 1" "1" "tandem train: rank 1: tok.json: cannot open"
run_case "missing on rank 0" "0" "tandem train: rank 0: tok.json: cannot open"
run_case "missing everywhere" "0 1" "tandem train: tok.json: cannot open"
finish
