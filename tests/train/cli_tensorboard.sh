#!/usr/bin/env bash
# cli_tensorboard.sh - TensorBoard event files (--tensorboard-dir and Megatron's companion flags), 2 ranks,
# tiny model. The files are read back by an independent reader: Debian's protobuf library (the message
# classes built from TensorBoard's event.proto / summary.proto field numbers, written out below) and
# python3-crc32c for the record checksums. Checked:
#   - the TFRecord framing and both masked CRC-32Cs of every record; the first event is "brain.Event:2";
#   - Megatron's tags at every --tensorboard-log-interval, each also "... vs samples" over consumed samples,
#     with the values of metrics.jsonl / valid.jsonl (as float32, TensorBoard's simple_value);
#   - iteration-time at --log-interval with --log-timers-to-tensorboard (and throughput with --log-throughput:
#     the interval's model FLOPs / (seconds x 1e12 x ranks) of metrics.jsonl); validation ppl with its flag;
#   - num-zeros and params-norm with --log-num-zeros-in-grad and --log-params-norm;
#   - each step timer as NAME-time with --log-timers-to-tensorboard (Megatron's timers.write), and no
#     learning-rate with --no-log-learning-rate-to-tensorboard;
#   - a resumed run adds a second event file and continues the steps;
#   - a --tensorboard-dir that cannot be created is refused with one sentence.
# Env: TANDEM (build/tandem), MPIRUN (mpirun.openmpi or mpirun.mpich).
. "$(dirname "$0")/lib.sh"
tiny_setup 96 24
COMMON=(--model "$W/model" --tokenizer "$W/tok.json" --data "$W/data/train.json" --micro-batch-size 2
        --global-batch-size 8 --lr 1e-3 --lr-warmup-iters 1 --seq-length 512 --seed 7 --freeze-vision
        --valid-data-path "$W/data/test.json" --eval-interval 3 --eval-iters 1 --run-dir "$W/run"
        --tensorboard-dir "$W/tb" --tensorboard-log-interval 2 --log-interval 3 --log-timers-to-tensorboard
        --log-validation-ppl-to-tensorboard --log-world-size-to-tensorboard --save "$W/ckpt"
        --log-throughput --log-num-zeros-in-grad --log-params-norm)
train() { "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train "${COMMON[@]}" "$@"; }

train --train-iters 6 >"$W/a.log" 2>&1 || bad "first run exited non-zero: $(tail -3 "$W/a.log")"
grep -q "TensorBoard events: $W/tb/events.out.tfevents." "$W/a.log" && ok "the log names the event file" \
  || bad "no 'TensorBoard events:' line"
train --train-iters 8 --load "$W/ckpt" >"$W/b.log" 2>&1 || bad "resumed run exited non-zero: $(tail -3 "$W/b.log")"

if $PY - "$W/tb" "$W/run/metrics.jsonl" "$W/run/valid.jsonl" <<'PYEOF'; then ok "event files: framing, CRCs, Megatron's tags and values"; else bad "event files"; fi
import glob, json, math, os, struct, sys
import crc32c
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

# TensorBoard's event.proto / summary.proto, the fields used (numbers as published by TensorFlow)
fdp = descriptor_pb2.FileDescriptorProto(name="tb_subset.proto", package="tb")
F = descriptor_pb2.FieldDescriptorProto
def msg(name, fields):
    m = fdp.message_type.add(name=name)
    for fname, num, typ, label, tname in fields:
        f = m.field.add(name=fname, number=num, type=typ, label=label)
        if tname: f.type_name = tname
msg("Value", [("tag", 1, F.TYPE_STRING, F.LABEL_OPTIONAL, None), ("simple_value", 2, F.TYPE_FLOAT, F.LABEL_OPTIONAL, None)])
msg("Summary", [("value", 1, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".tb.Value")])
msg("Event", [("wall_time", 1, F.TYPE_DOUBLE, F.LABEL_OPTIONAL, None), ("step", 2, F.TYPE_INT64, F.LABEL_OPTIONAL, None),
              ("file_version", 3, F.TYPE_STRING, F.LABEL_OPTIONAL, None),
              ("summary", 5, F.TYPE_MESSAGE, F.LABEL_OPTIONAL, ".tb.Summary")])
pool = descriptor_pool.DescriptorPool()
pool.Add(fdp)
Event = message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("tb.Event"))

def masked(b):
    c = crc32c.crc32c(b)
    return (((c >> 15) | (c << 17)) + 0xa282ead8) & 0xFFFFFFFF

files = sorted(glob.glob(os.path.join(sys.argv[1], "*tfevents*")))
assert len(files) == 2, files   # the first run and the resumed one
scalars = {}   # tag -> {step: value}
for path in files:
    data = open(path, "rb").read()
    pos, first = 0, True
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        (lc,) = struct.unpack_from("<I", data, pos + 8)
        assert lc == masked(data[pos:pos + 8]), "length crc"
        body = data[pos + 12:pos + 12 + n]
        (dc,) = struct.unpack_from("<I", data, pos + 12 + n)
        assert dc == masked(body), "data crc"
        pos += 16 + n
        ev = Event()
        ev.ParseFromString(body)
        assert ev.wall_time > 1.7e9
        if first:
            assert ev.file_version == "brain.Event:2", ev
            first = False
            continue
        for v in ev.summary.value:
            assert ev.step not in scalars.setdefault(v.tag, {}), (v.tag, ev.step)
            scalars[v.tag][ev.step] = v.simple_value
    assert pos == len(data)
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
metrics = {r["iteration"]: r for r in map(json.loads, open(sys.argv[2]))}
valid = {r["iteration"]: r for r in map(json.loads, open(sys.argv[3]))}
logged = [i for i in sorted(metrics) if i % 2 == 0]
assert logged == [2, 4, 6, 8], logged
for tag, key in [("lm loss", "loss"), ("learning-rate", "lr"), ("grad-norm", "grad_norm"),
                 ("batch-size", "global_batch_size"), ("num-zeros", "num_zeros"), ("params-norm", "params_norm")]:
    assert sorted(scalars[tag]) == logged, (tag, scalars[tag])
    for i in logged:
        m = metrics[i]
        assert scalars[tag][i] == f32(m[key]), (tag, i, scalars[tag][i], m[key])
        assert scalars[tag + " vs samples"][m["consumed_samples"]] == f32(m[key]), (tag, i)
assert all(v == 1.0 for v in scalars["loss-scale"].values()) and sorted(scalars["loss-scale"]) == logged
assert all(v == 2.0 for v in scalars["world-size"].values())
assert sorted(scalars["iteration-time"]) == [3, 6, 8], scalars["iteration-time"]   # --log-interval 3, and the last
assert all(0 < v < 60 for v in scalars["iteration-time"].values())
# Megatron's timers.write: every timer's max across ranks of its mean per iteration since the last iteration line,
# in seconds, at every --tensorboard-log-interval (2), by iteration only; at least rank 0's own mean (metrics.jsonl)
since = {2: [1, 2], 4: [4], 6: [4, 5, 6], 8: [7, 8]}   # iteration lines at 3 and 6; the resumed run starts at 7
for tag in ["forward-backward-time", "all-grads-sync-time", "optimizer-time"]:
    assert sorted(scalars[tag]) == logged and tag + " vs samples" not in scalars, (tag, scalars.get(tag))
for i, its in since.items():
    fb = scalars["forward-backward-time"][i]
    mine = sum(metrics[k]["fwd_bwd_ms"] for k in its) / len(its) / 1e3
    assert 0.9 * mine <= fb < 60 and scalars["all-grads-sync-time"][i] <= fb, (i, fb, mine)
assert sorted(scalars["throughput"]) == [3, 6, 8], scalars["throughput"]
for i, its in [(3, [1, 2, 3]), (6, [4, 5, 6]), (8, [7, 8])]:   # the resumed run's interval starts at 7
    ref = sum(metrics[k]["model_flops"] for k in its) / (sum(metrics[k]["step_ms"] for k in its) / 1e3 * 1e12 * 2)
    assert abs(scalars["throughput"][i] - ref) <= 1e-4 * ref, (i, scalars["throughput"][i], ref)
assert sorted(scalars["lm loss validation"]) == sorted(valid) == [3, 6, 8], (scalars["lm loss validation"], valid)
for i, r in valid.items():
    assert scalars["lm loss validation"][i] == f32(r["loss"])
    assert scalars["lm loss validation vs samples"][r["consumed_samples"]] == f32(r["loss"])
    assert scalars["lm loss validation ppl"][i] == f32(math.exp(min(20, r["loss"])))
print(len(scalars), "tags;", sum(len(v) for v in scalars.values()), "scalars in", len(files), "files")
PYEOF

# --- --no-log-learning-rate-to-tensorboard ------------------------------------------------------------------------
"$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train "${COMMON[@]}" --train-iters 2 --save "$W/ckpt3" --tensorboard-dir "$W/tb3" \
  --no-log-learning-rate-to-tensorboard >"$W/d.log" 2>&1 || bad "--no-log-learning-rate-to-tensorboard run: $(tail -3 "$W/d.log")"
f=$(ls "$W"/tb3/*tfevents* 2>/dev/null | head -1)
[ -n "$f" ] && ! grep -q "learning-rate" "$f" && grep -q "grad-norm" "$f" \
  && ok "--no-log-learning-rate-to-tensorboard: no learning-rate tag, the others written" \
  || bad "--no-log-learning-rate-to-tensorboard: $(strings "$f" 2>/dev/null | grep -c learning-rate) learning-rate records"

# --- a directory that cannot be created --------------------------------------------------------
: >"$W/plainfile"
if "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train "${COMMON[@]}" --train-iters 2 --save "$W/ckpt2" \
     --tensorboard-dir "$W/plainfile/tb" >"$W/c.log" 2>&1; then
  bad "--tensorboard-dir under a plain file accepted"
else
  grep -q "tensorboard-dir" "$W/c.log" && ! grep -q "Segmentation\|core dumped" "$W/c.log" \
    && ok "--tensorboard-dir under a plain file refused: $(grep -m1 "tensorboard-dir" "$W/c.log")" \
    || bad "--tensorboard-dir under a plain file: $(tail -3 "$W/c.log")"
fi
finish
