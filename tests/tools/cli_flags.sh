#!/usr/bin/env bash
# cli_flags.sh - one flag parser for every subcommand (src/core/flags.c): each command `tandem --help` lists
# answers --help with exit 0 and a usage line, and --version; a misspelt flag exits 2 with the closest name;
# a missing or bad value gets the same sentence everywhere; `tandem --version` and `tandem version` print the
# version; a misspelt command gets the closest command.
#   TANDEM=build/tandem bash tests/tools/cli_flags.sh
set -u
cd "$(dirname "$0")/../.."
TANDEM=${TANDEM:-build/tandem}
MPIRUN=${MPIRUN:-mpirun.openmpi}
case "$MPIRUN" in
  *openmpi*) MPI=("$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -np 1) ;;
  *) MPI=("$MPIRUN" -np 1) ;;
esac
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
W=$(mktemp -d /tmp/tdm_cli_flags.XXXXXX)
trap 'rm -rf "$W"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

# expect NAME RC NEEDLE CMD...: CMD exits RC and its output (stdout and stderr) holds NEEDLE
expect() {
  local name=$1 want=$2 needle=$3; shift 3
  timeout -k 5 60 "$@" >"$W/out" 2>&1 </dev/null
  local rc=$?
  if [ "$rc" -ne "$want" ]; then bad "$name: exit $rc, expected $want: $(head -c 300 "$W/out")"
  elif ! grep -qF -- "$needle" "$W/out"; then bad "$name: the output does not hold '$needle': $(head -c 300 "$W/out")"
  else ok; fi
}

cmds=$("$TANDEM" --help | awk '/^commands:/{on=1; next} on && /^  [a-z]/{print $1}')
[ "$(wc -w <<<"$cmds")" -ge 10 ] && ok || bad "tandem --help lists $(wc -w <<<"$cmds") commands"
for c in $cmds; do
  # the MPI commands parse their flags once MPI runs: under the launcher, one rank
  run=("$TANDEM" "$c")
  case $c in train | ab) run=("${MPI[@]}" "$TANDEM" "$c") ;; esac
  "$TANDEM" "$c" --help >"$W/help" 2>"$W/help.err"
  rc=$?
  [ "$rc" -eq 0 ] && head -n 1 "$W/help" | grep -q "^usage: " && [ ! -s "$W/help.err" ] && ok \
    || bad "tandem $c --help: exit $rc, first line '$(head -n 1 "$W/help")'"
  expect "tandem $c --version" 0 "tandem " "$TANDEM" "$c" --version
  flag=$(awk '/^  --[a-z]/{print $1; exit}' "$W/help")
  if [ -n "$flag" ]; then # its first flag without its last letter
    expect "tandem $c ${flag%?}" 2 "unknown flag '${flag%?}'; did you mean '$flag'?" "${run[@]}" "${flag%?}"
  else
    expect "tandem $c --frobnicate" 2 "unknown flag '--frobnicate' (tandem $c --help lists the flags)" \
      "${run[@]}" --frobnicate
  fi
done

# the same sentences in every command
expect "gen-data: missing value" 2 "tandem gen-data: --samples: expected a value (N) after it" \
  "$TANDEM" gen-data --out "$W/g" --samples
expect "gen-data: a flag for a value" 2 "--out: expected a value (DIR), got the flag '--samples'" \
  "$TANDEM" gen-data --out --samples 2
expect "train-tokenizer: bad value" 2 "tandem train-tokenizer: --vocab-size: expected an integer, got 'x'" \
  "$TANDEM" train-tokenizer --data d.json --vocab-size x --out t.json
expect "inspect: out of range" 2 "tandem inspect: --dp: 0 is out of range [1, 1048576]" \
  "$TANDEM" inspect --model configs/tiny --dp 0
expect "generate: a value twice" 2 "tandem generate: --prompt given twice (it takes one value)" \
  "$TANDEM" generate --prompt a --prompt b
expect "train: a bad value" 2 "tandem train: --lr: expected a number, got 'x'" "${MPI[@]}" "$TANDEM" train --lr x
expect "ab: its own flag misspelt" 2 "unknown flag '--repeat'; did you mean '--repeats'?" \
  "${MPI[@]}" "$TANDEM" ab --repeat 3
expect "trace-summary: no argument" 2 "tandem trace-summary: expected DIR|TRACE.json" "$TANDEM" trace-summary
expect "trace-summary: two" 2 "unexpected argument 'b'" "$TANDEM" trace-summary a b
# --flag=value as --flag value
expect "gen-data --flag=value" 0 "wrote 2 training and 1 held-out samples" \
  "$TANDEM" gen-data --out="$W/g" --samples=2 --heldout=1 --scene=mixed
# flags a command does not use are errors, not ignored
for f in --save --tensorboard-dir --load; do
  expect "export-batches $f" 2 "$f is a \`tandem train\` flag that does not change the batches" \
    "$TANDEM" export-batches --out "$W/e" "$f" "$W/x"
done
expect "inspect --lr" 2 "--lr is a \`tandem train\` flag that does not change the memory plan" \
  "$TANDEM" inspect --model configs/tiny --lr 1e-3

# the version, both ways; a misspelt command
expect "tandem --version" 0 "tandem " "$TANDEM" --version
v1=$(head -n 1 "$W/out")
expect "tandem version" 0 "$v1" "$TANDEM" version
grep -qE '^tandem [A-Za-z0-9._-]+$' <<<"$v1" && ok || bad "version line '$v1'"
expect "tandem trian" 2 "unknown command 'trian'; did you mean 'train'?" "$TANDEM" trian
expect "tandem frobnicate" 2 "unknown command 'frobnicate' (tandem --help lists the commands)" "$TANDEM" frobnicate

echo "cli_flags: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
