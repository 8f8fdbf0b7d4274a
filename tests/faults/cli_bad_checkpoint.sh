#!/usr/bin/env bash
# cli_bad_checkpoint.sh - `tandem train --load` refuses, on every rank and with a message
# naming the file, a checkpoint of another model shape, a truncated weights file, a
# corrupt safetensors header, a tracker naming a missing or garbled iteration, a
# corrupt trainer_state.json, a FIFO in place of a file and a --global-batch-size that does not divide
# the samples consumed; and `dump-grads --load` refuses the same weights.
source "$(dirname "$0")/lib.sh"
have train || skip_all "tandem train is not built"
make_data
PY=/usr/bin/python3

make_checkpoint

variant() { rm -rf "$W/$1"; cp -r "$W/good" "$W/$1"; }

# refused NAME NEEDLE FLAGS...: `train --load` must fail cleanly, naming NEEDLE, on 2 ranks.
refused() {
  local name=$1 needle=$2; shift 2
  local log="$W/$name.log"
  start_job "$log" "${TRAIN[@]}" --train-iters 2 "$@"
  wait_job 60
  local msg
  msg=$(grep -o "tandem train: .*" "$log" | head -n1)
  echo "$name: exit $RC: $msg"
  if [ "$RC" = 124 ]; then bad "$name: hung"
  elif [ "$RC" -eq 0 ] || [ "$RC" -ge 128 ]; then bad "$name: exit $RC"; tail -n 5 "$log"
  elif ! echo "$msg" | grep -qF -- "$needle"; then bad "$name: the message does not name '$needle'"; tail -n 5 "$log"
  else ok; fi
  [ "$(ranks_left)" = 0 ] && ok || bad "$name: a rank outlived mpirun"
}

# another model shape: the same checkpoint, loaded into a wider MLP
mkdir -p "$W/wide"
$PY - configs/tiny/config.json "$W/wide/config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["text_config"]["intermediate_size"] *= 2
json.dump(c, open(sys.argv[2], "w"), indent=1)
PYEOF
cp configs/tiny/preprocessor_config.json "$W/wide/" 2>/dev/null
refused other_shape "$IT" --model "$W/wide" --load "$W/good"

# another global batch size that does not divide the 2 samples consumed (the sampler's error named neither
# --load nor the flag)
refused other_global_batch "consumed 2 samples, not a multiple of the global batch size 4" --load "$W/good" \
  --global-batch-size 4

variant truncated
truncate -s 1000000 "$W/truncated/$IT/model.safetensors"
refused truncated "model.safetensors" --load "$W/truncated"

variant header
$PY - "$W/header/$IT/model.safetensors" <<'PYEOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
i = b.index(b'"shape"')
b[i + 1] = ord("X")          # "Xhape": the header still parses as JSON, but lies
open(p, "wb").write(bytes(b))
PYEOF
refused corrupt_header "model.safetensors" --load "$W/header"

variant flipped
$PY - "$W/flipped/$IT/model.safetensors" <<'PYEOF'
import sys
p = sys.argv[1]
with open(p, "r+b") as f:
    f.seek(-100, 2); x = f.read(1); f.seek(-100, 2); f.write(bytes([x[0] ^ 0x40]))
PYEOF
refused flipped_data_bit "model.safetensors" --load "$W/flipped"

variant tracker_missing
echo 7 > "$W/tracker_missing/latest_checkpointed_iteration.txt"
refused tracker_names_missing_iteration "iter_0000007" --load "$W/tracker_missing"

variant tracker_garbage
printf 'seven\n' > "$W/tracker_garbage/latest_checkpointed_iteration.txt"
refused tracker_garbage "latest_checkpointed_iteration.txt" --load "$W/tracker_garbage"

variant state
printf '{"format_version": 1, "iteration": ' > "$W/state/$IT/trainer_state.json"
refused corrupt_trainer_state "trainer_state.json" --load "$W/state"

# a FIFO in place of the weights: refused at once (opening it for reading would wait for a writer)
variant fifo
rm "$W/fifo/$IT/model.safetensors" && mkfifo "$W/fifo/$IT/model.safetensors"
refused fifo_in_checkpoint "model.safetensors: a FIFO (named pipe), not a regular file" --load "$W/fifo"

variant no_optimizer
rm "$W/no_optimizer/$IT/optimizer.safetensors"
refused missing_optimizer_file "optimizer.safetensors" --load "$W/no_optimizer"
# ... but the weights alone are enough where the Adam state is not used
start_job "$W/no_optimizer_weights.log" "${TRAIN[@]}" --train-iters 2 --load "$W/no_optimizer" --no-load-optim
wait_job 120
[ "$RC" -eq 0 ] && ok || { bad "--no-load-optim without optimizer.safetensors: exit $RC"; tail -n 3 "$W/no_optimizer_weights.log"; }
start_job "$W/no_optimizer_ft.log" "${TRAIN[@]}" --train-iters 1 --load "$W/no_optimizer" --finetune
wait_job 120
[ "$RC" -eq 0 ] && ok || { bad "--finetune without optimizer.safetensors: exit $RC"; tail -n 3 "$W/no_optimizer_ft.log"; }

if have dump-grads; then
  timeout 60 "$TANDEM" dump-grads --model configs/tiny --tokenizer "$W/tok.json" --data "$W/data/train.json" \
    --load "$W/truncated/$IT" --out "$W/g.safetensors" >/dev/null 2>"$W/dg.err"
  rc=$?
  [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "model.safetensors" "$W/dg.err" && ok \
    || { bad "dump-grads --load of a truncated checkpoint: exit $rc"; cat "$W/dg.err"; }
fi
finish
