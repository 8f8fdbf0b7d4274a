#!/usr/bin/env bash
# cli_ckpt_corrupt.sh - `tandem train --load` on 2 ranks refuses a checkpoint whose tensor files
# were damaged where only the load itself can see it (checksums are computed as the tensors are
# read, not by a read of their own first): a flipped byte in the middle of optimizer.safetensors,
# at its last byte, in its header, in the middle of model.safetensors, and a truncated
# optimizer.safetensors. Each refusal names the file and the mismatch, exits non-zero before the
# first step on every rank, leaves no rank behind; the undamaged checkpoint resumes.
source "$(dirname "$0")/lib.sh"
have train || skip_all "tandem train is not built"
make_data
PY=/usr/bin/python3

make_checkpoint

# damaged NAME FILE WHERE: a copy of the checkpoint with one byte of FILE flipped at WHERE
# (middle, last, header), an Adam tensor's name changed in the header (rename), or FILE cut by 8 bytes (cut)
damaged() {
  rm -rf "$W/$1"; cp -r "$W/good" "$W/$1"
  $PY - "$W/$1/$IT/$2" "$3" <<'PYEOF'
import struct, sys
p, where = sys.argv[1], sys.argv[2]
b = bytearray(open(p, "rb").read())
if where == "cut":
    b = b[:-8]
elif where == "rename":  # one Adam tensor's name in the header, same length: the header still parses
    n = struct.unpack("<Q", b[:8])[0]
    at = b.index(b'"exp_avg.', 8, 8 + n) + len('"exp_avg.')
    b[at] ^= 0x20
else:
    n = struct.unpack("<Q", b[:8])[0]
    at = {"middle": 8 + n + (len(b) - 8 - n) // 2, "last": len(b) - 1, "header": 8 + n // 2}[where]
    b[at] ^= 0x01
open(p, "wb").write(bytes(b))
PYEOF
}

# refused NAME NEEDLE...: `train --load $W/NAME` must fail on 2 ranks, before its first step (2),
# with a message holding every NEEDLE
refused() {
  local name=$1; shift
  local log="$W/$name.log"
  start_job "$log" "${TRAIN[@]}" --train-iters 2 --load "$W/$name"
  wait_job 60
  local msg needle
  msg=$(grep -o "tandem train: .*" "$log" | head -n1)
  echo "$name: exit $RC: $msg"
  if [ "$RC" = 124 ]; then bad "$name: hung"; return; fi
  if [ "$RC" -eq 0 ] || [ "$RC" -ge 128 ]; then bad "$name: exit $RC"; tail -n 5 "$log"; return; fi
  for needle in "$@"; do
    echo "$msg" | grep -qF -- "$needle" || { bad "$name: the message does not say '$needle'"; tail -n 5 "$log"; return; }
  done
  grep -qE "^ *iteration +2/" "$log" && { bad "$name: trained an iteration on the damaged checkpoint"; return; }
  [ "$(ranks_left)" = 0 ] || { bad "$name: a rank outlived mpirun"; return; }
  ok
}

damaged opt_middle optimizer.safetensors middle
refused opt_middle "optimizer.safetensors" "does not match" "corrupted"
damaged opt_last optimizer.safetensors last
refused opt_last "optimizer.safetensors" "corrupted"
damaged opt_header optimizer.safetensors header
refused opt_header "optimizer.safetensors" "corrupted"
damaged opt_rename optimizer.safetensors rename
refused opt_rename "optimizer.safetensors" "corrupted"
grep -q "frozen when it was saved" "$W/opt_rename.log" \
  && bad "opt_rename: a damaged file is blamed on a parameter frozen at the save" || ok
damaged opt_cut optimizer.safetensors cut
refused opt_cut "optimizer.safetensors" "truncated"
damaged model_middle model.safetensors middle
refused model_middle "model.safetensors" "does not match" "corrupted"

# the same checkpoint undamaged resumes (and trains its iteration 2)
start_job "$W/resume.log" "${TRAIN[@]}" --train-iters 2 --load "$W/good"
wait_job 120
if [ "$RC" -eq 0 ] && grep -q "loaded checkpoint" "$W/resume.log"; then ok
else bad "resuming the undamaged checkpoint: exit $RC"; tail -n 5 "$W/resume.log"; fi
finish
