#!/usr/bin/env bash
# cli_pretrained.sh - --pretrained on one rank: it says what it loaded (path, format, files, tensors,
# parameters, stored dtype, tensors ignored); given a --save folder instead of weights it fails with one
# sentence naming the iter_NNNNNNN folder to give and --load for resuming.
# Env: TANDEM (build/tandem).
. "$(dirname "$0")/lib.sh"
tiny_setup 32 4
tiny_saved_run

# a --save folder: one sentence pointing at its latest iter folder and at --load
"$TANDEM" train "${COMMON[@]}" --train-iters 1 --pretrained "$W/ck" > "$W/folder.log" 2>&1; rc=$?
msg=$(grep -F "tandem train: --pretrained" "$W/folder.log")
if [ "$rc" -ne 0 ] && echo "$msg" | grep -qF -- "$W/ck/iter_0000002" && echo "$msg" | grep -qF -- "--load $W/ck" \
   && [ "$(echo "$msg" | wc -l)" -eq 1 ]; then
  ok "--pretrained of a save folder: '$msg'"
else
  bad "--pretrained of a save folder (rc $rc)"; tail -3 "$W/folder.log"
fi

# an iter folder: loads, and says what
"$TANDEM" train "${COMMON[@]}" --train-iters 1 --pretrained "$W/ck/iter_0000002" > "$W/iter.log" 2>&1; rc=$?
line=$(grep -F -- "--pretrained: loaded $W/ck/iter_0000002" "$W/iter.log")
nparams=$("$TANDEM" inspect --model "$W/model" 2>/dev/null | sed -nE 's/^  model total +([0-9,]+).*/\1/p' | head -1 | tr -d ,)
if [ "$rc" -eq 0 ] && echo "$line" | grep -qE "\(tandem checkpoint, weights only, 1 file\): [0-9]+ tensors, [0-9]+ parameters, stored F32, held in fp32"; then
  ok "--pretrained of an iter folder: '$line'"
else
  bad "--pretrained of an iter folder (rc $rc): '$line'"; tail -3 "$W/iter.log"
fi
if [ -n "$nparams" ]; then
  echo "$line" | grep -qF " $nparams parameters" && ok "the parameter count is inspect's ($nparams)" \
    || bad "the parameter count differs from inspect's $nparams: '$line'"
fi

# Hugging Face weights: BF16, one extra tensor the model has no use for
/usr/bin/python3 - "$W/ck/iter_0000002/model.safetensors" "$W/hf/model.safetensors" <<'PYEOF'
import json, os, struct, sys
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(os.path.dirname(dst), exist_ok=True)
f = open(src, "rb"); n = struct.unpack("<Q", f.read(8))[0]; head = json.loads(f.read(n)); base = 8 + n
head.pop("__metadata__", None)
out, blobs, off = {}, [], 0
for name, t in sorted(head.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    f.seek(base + t["data_offsets"][0]); raw = f.read(t["data_offsets"][1] - t["data_offsets"][0])
    assert t["dtype"] == "F32"
    vals = struct.unpack("<%dI" % (len(raw) // 4), raw)
    b = struct.pack("<%dH" % len(vals), *[v >> 16 for v in vals])  # truncation is a bf16 value too
    out[name] = {"dtype": "BF16", "shape": t["shape"], "data_offsets": [off, off + len(b)]}; blobs.append(b); off += len(b)
b = struct.pack("<2H", 0x3f80, 0x4000)
out["model.unused.weight"] = {"dtype": "BF16", "shape": [2], "data_offsets": [off, off + len(b)]}; blobs.append(b)
h = json.dumps(out).encode(); h += b" " * ((8 - len(h) % 8) % 8)
open(dst, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PYEOF
"$TANDEM" train "${COMMON[@]}" --train-iters 1 --pretrained "$W/hf" > "$W/hf.log" 2>&1; rc=$?
l1=$(grep -F -- "--pretrained: loaded $W/hf" "$W/hf.log")
l2=$(grep -F -- "--pretrained: 1 tensors of the file ignored" "$W/hf.log")
if [ "$rc" -eq 0 ] && echo "$l1" | grep -qF "(Hugging Face safetensors, 1 file)" && echo "$l1" | grep -qF "stored BF16" \
   && echo "$l2" | grep -qF "(first: model.unused.weight)"; then
  ok "--pretrained of Hugging Face BF16 weights: '$l1' / '$l2'"
else
  bad "--pretrained of Hugging Face weights (rc $rc): '$l1' / '$l2'"; tail -3 "$W/hf.log"
fi
finish
