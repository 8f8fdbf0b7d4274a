#!/usr/bin/env bash
# cli_judged.sh - bench/plan/judged.py, the load judge of bench/plan's shared-memory runs: one record line a run
# whose verdict follows its figures (tandem ab's thresholds: other processes > 10% of the CPUs, steal > 5%), the
# command's exit status passed on, a busy process beside the command counted as other processes' CPU (where one
# process is a large enough share of the machine to be seen: 8 CPUs or fewer), the command's own CPU not, and bad
# usage one sentence.
. "$(dirname "$0")/../train/lib.sh"
J=(/usr/bin/python3 bench/plan/judged.py)
verdict_follows() { # RECORD: every line's verdict is its figures' verdict
  awk '{ want = ($2 > 10 || $3 > 5) ? 1 : 0; if (NF != 3 || $1 != want) bad_lines++ } END { exit bad_lines > 0 }' "$1"
}

"${J[@]}" "$W/r1" -- true && [ "$(wc -l <"$W/r1")" = 1 ] && verdict_follows "$W/r1" \
  && ok "one record line, its verdict following its figures: $(cat "$W/r1")" || bad "record of true: $(cat "$W/r1" 2>&1)"
"${J[@]}" "$W/r1" -- sh -c 'exit 3'; rc=$?
[ "$rc" = 3 ] && [ "$(wc -l <"$W/r1")" = 2 ] && ok "the command's exit status (3) passed on, its run recorded" \
  || bad "exit status $rc, $(wc -l <"$W/r1") record lines"

# a busy process that is not the command's: counted as other processes' CPU
if [ "$(nproc)" -le 8 ]; then
  timeout 3 sh -c 'while :; do :; done' &
  busy=$!
  sleep 0.2
  "${J[@]}" "$W/r2" -- sleep 1.5
  wait "$busy" 2>/dev/null
  awk -v min="$(awk -v n="$(nproc)" 'BEGIN { print 60 / n }')" '{ exit !($1 == 1 && $2 >= min) }' "$W/r2" \
    && ok "a busy process beside the command judged as load: $(cat "$W/r2")" \
    || bad "a busy process beside the command not seen: $(cat "$W/r2") (nproc $(nproc))"
else
  ok "skipped the busy-neighbour check: $(nproc) CPUs, one busy process is under the 10% threshold"
fi

# the command's own CPU is not other processes': the host's busy share over the same window, less the record's
# figure, leaves the command's share (a busy loop: at least half a CPU, however loaded the host is)
busy_ticks() { awk '/^cpu / { t = 0; for (i = 2; i <= 9 && i <= NF; i++) t += $i; print $2 + $3 + $4, t }' /proc/stat; }
read -r b0 t0 < <(busy_ticks)
"${J[@]}" "$W/r3" -- timeout 1.5 sh -c 'while :; do :; done'
read -r b1 t1 < <(busy_ticks)
mine=$(awk -v b="$((b1 - b0))" -v t="$((t1 - t0))" '{ printf "%.1f", 100 * b / t - $2 }' "$W/r3")
awk -v m="$mine" -v n="$(nproc)" 'BEGIN { exit !(m >= 50 / n) }' \
  && ok "the command's own CPU left out: $(cat "$W/r3"), the command's share $mine%" \
  || bad "the command's own CPU counted as others': $(cat "$W/r3"), the command's share $mine% (nproc $(nproc))"

"${J[@]}" "$W/r4" true >"$W/usage.txt" 2>&1 && bad "no '--': accepted" \
  || { grep -q "expected RECORD -- COMMAND" "$W/usage.txt" && ok "no '--': $(cat "$W/usage.txt")" \
       || bad "no '--': $(cat "$W/usage.txt")"; }
"${J[@]}" "$W/r4" -- "$W/no-such-command" >"$W/nocmd.txt" 2>&1 && bad "a missing command: exit 0" \
  || { grep -q "cannot run $W/no-such-command" "$W/nocmd.txt" && ok "a missing command: $(cat "$W/nocmd.txt")" \
       || bad "a missing command: $(cat "$W/nocmd.txt")"; }
finish
