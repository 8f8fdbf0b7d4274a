#!/usr/bin/env bash
# cli_megatron_flags.sh - Megatron launch-script flags beyond the basic ones, 2 ranks, tiny model:
#   - sample-based training (--train-samples, --lr-warmup-samples, --lr-decay-samples): on sample counts that
#     are whole global batches it is the iteration-based run bitwise (every lr, loss and grad norm); on others
#     it runs train_samples // global batch iterations with the schedule over the samples, against a float64
#     reference of Megatron's formula;
#   - --no-save-optim: the checkpoint has no optimizer file, resuming it asks for --no-load-optim and works
#     with it;
#   - --use-checkpoint-opt_param-scheduler resumes with the checkpoint's schedule whatever the flags say (the
#     run equals an uninterrupted one bitwise), --override-opt_param-scheduler with the flags' (tandem's default);
#   - --lr-decay-style WSD (each --lr-wsd-decay-style) and --weight-decay-incr-style: lr and weight decay of every
#     iteration against a float64 transcription of Megatron's get_lr / get_wd; WSD over the whole decay span
#     and a flat increment are the linear decay and --weight-decay bitwise; the rules refused with a sentence;
#   - --exit-signal-handler, --no-load-rng and --no-save-rng are accepted (what tandem does anyway) and show
#     in the arguments block.
# Env: TANDEM (build/tandem), MPIRUN (mpirun.openmpi or mpirun.mpich).
. "$(dirname "$0")/lib.sh"
tiny_setup 96 0
COMMON=(--model "$W/model" --tokenizer "$W/tok.json" --data "$W/data/train.json" --micro-batch-size 2
        --global-batch-size 8 --lr 1e-3 --min-lr 1e-5 --lr-decay-style cosine --seq-length 512 --seed 7
        --freeze-vision --freeze-projector)
train() { "$MPIRUN" "${MPIFLAGS[@]}" -np 2 "$TANDEM" train "${COMMON[@]}" "$@"; }
curve() { sed -E 's/.*"iteration":([0-9]+),"consumed_samples":([0-9]+),"lr":([^,]+),.*"loss":([^,]+),"grad_norm":([^,]+),.*/\1 \2 \3 \4 \5/' "$1"; }

# --- 1. samples against iterations -------------------------------------------------------------
train --train-iters 6 --lr-warmup-iters 1 --lr-decay-iters 5 --run-dir "$W/it" >"$W/it.log" 2>&1 \
  || bad "iteration-based run exited non-zero: $(tail -3 "$W/it.log")"
train --train-samples 48 --lr-warmup-samples 8 --lr-decay-samples 40 --run-dir "$W/sa" >"$W/sa.log" 2>&1 \
  || bad "sample-based run exited non-zero: $(tail -3 "$W/sa.log")"
[ -n "$(curve "$W/it/metrics.jsonl")" ] && [ "$(curve "$W/sa/metrics.jsonl")" = "$(curve "$W/it/metrics.jsonl")" ] \
  && ok "--train-samples 48 (warm-up 8, decay 40 samples) = --train-iters 6 (1, 5): every lr, loss, grad norm bitwise" \
  || bad "sample-based run differs from the iteration-based one"
grep -q "train_samples \.* 48" "$W/sa.log" && grep -q "train_iters \.* 6$" "$W/sa.log" \
  && ok "the arguments block shows train_samples 48 and the derived train_iters 6" || bad "arguments block"
train --train-samples 45 --lr-warmup-samples 3 --lr-warmup-init 1e-4 --run-dir "$W/odd" >"$W/odd.log" 2>&1 \
  || bad "--train-samples 45 exited non-zero: $(tail -3 "$W/odd.log")"
if $PY - "$W/odd/metrics.jsonl" <<'PYEOF'; then ok "--train-samples 45: 5 iterations, lr of Megatron's sample schedule (float64, rel. 1e-12)"; else bad "--train-samples 45 schedule"; fi
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["iteration"] for r in rows] == [1, 2, 3, 4, 5], rows   # 45 // 8
def lr(n, max_lr=1e-3, min_lr=1e-5, init=1e-4, warm=3, decay=45):   # Megatron's OptimizerParamScheduler.get_lr
    if warm > 0 and n <= warm:
        return init + (max_lr - init) * n / warm
    if n > decay:
        return min_lr
    r = (n - warm) / (decay - warm)
    return min_lr + 0.5 * (math.cos(math.pi * r) + 1.0) * (max_lr - min_lr)
for r in rows:   # the logged lr is the one after the step: of the samples consumed so far
    ref = lr(r["consumed_samples"])
    assert abs(r["lr"] - ref) <= 1e-12 * ref, (r["iteration"], r["lr"], ref)
PYEOF
if train --train-samples 48 --train-iters 6 >"$W/both.log" 2>&1; then bad "--train-samples with --train-iters accepted"
else grep -q "give one of them" "$W/both.log" && ok "--train-samples with --train-iters refused" \
  || bad "both: $(tail -2 "$W/both.log")"; fi

# --- 2. --no-save-optim --------------------------------------------------------------------------
train --train-iters 3 --lr-warmup-iters 1 --save "$W/ck" --no-save-optim >"$W/ns.log" 2>&1 \
  || bad "--no-save-optim run exited non-zero: $(tail -3 "$W/ns.log")"
d=$(ls -d "$W"/ck/iter_* 2>/dev/null | tail -1)
[ -n "$d" ] && [ -f "$d/model.safetensors" ] && [ ! -e "$d/optimizer.safetensors" ] \
  && ok "--no-save-optim: weights saved, no optimizer file" || bad "--no-save-optim checkpoint: $(ls "$d" 2>&1)"
if train --train-iters 4 --lr-warmup-iters 1 --load "$W/ck" >"$W/nl.log" 2>&1; then
  bad "resuming an optimizer-less checkpoint without --no-load-optim accepted"
else
  grep -q "holds no optimizer state (add --no-load-optim)" "$W/nl.log" && ok "resuming it asks for --no-load-optim" \
    || bad "resume without --no-load-optim: $(tail -2 "$W/nl.log")"
fi
train --train-iters 4 --lr-warmup-iters 1 --load "$W/ck" --no-load-optim >"$W/nlo.log" 2>&1 \
  && grep -q "iteration        4/       4" "$W/nlo.log" && ok "--no-load-optim resumes it at iteration 4" \
  || bad "--no-load-optim resume: $(tail -3 "$W/nlo.log")"

# --- 3. the schedule on resume: --use-checkpoint-opt_param-scheduler / --override-opt_param-scheduler ------
S6=(--lr-warmup-iters 1 --lr-decay-iters 6)
train --train-iters 6 "${S6[@]}" --run-dir "$W/s_all" >"$W/s_all.log" 2>&1 || bad "6-iteration run failed"
train --train-iters 3 "${S6[@]}" --run-dir "$W/s_res" --save "$W/ck_s" >"$W/s_a.log" 2>&1 || bad "3-iteration run failed"
train --train-iters 6 --lr 5e-4 --min-lr 0 --lr-decay-style linear --lr-warmup-iters 2 --run-dir "$W/s_res" \
  --load "$W/ck_s" --use-checkpoint-opt_param-scheduler >"$W/s_b.log" 2>&1 \
  || bad "--use-checkpoint-opt_param-scheduler resume failed: $(tail -3 "$W/s_b.log")"
[ "$(curve "$W/s_res/metrics.jsonl")" = "$(curve "$W/s_all/metrics.jsonl")" ] \
  && ok "--use-checkpoint-opt_param-scheduler: the checkpoint's schedule; every lr, loss, grad norm as uninterrupted" \
  || bad "--use-checkpoint-opt_param-scheduler: the resumed run differs from the uninterrupted one"
train --train-iters 6 --lr 5e-4 "${S6[@]}" --run-dir "$W/s_ovr" --load "$W/ck_s" --override-opt_param-scheduler \
  >"$W/s_c.log" 2>&1 || bad "--override-opt_param-scheduler resume failed: $(tail -3 "$W/s_c.log")"
lr4() { sed -nE 's/.*"iteration":4,.*"lr":([^,]+),.*/\1/p' "$1"; }
[ -n "$(lr4 "$W/s_ovr/metrics.jsonl")" ] && [ "$(lr4 "$W/s_ovr/metrics.jsonl")" != "$(lr4 "$W/s_all/metrics.jsonl")" ] \
  && ok "--override-opt_param-scheduler: the flags' schedule (lr $(lr4 "$W/s_ovr/metrics.jsonl") at iteration 4)" \
  || bad "--override-opt_param-scheduler: lr at iteration 4 '$(lr4 "$W/s_ovr/metrics.jsonl")'"
# the weight-decay schedule is the checkpoint's too (as Megatron's state): saved by a 6-iteration run stopped at 3
WD=(--weight-decay-incr-style linear --start-weight-decay 0 --end-weight-decay 0.3)
wdcurve() { sed -E 's/.*"lr":([^,]+),"weight_decay":([^,]+),.*"loss":([^,]+),"grad_norm":([^,]+),.*/\1 \2 \3 \4/' "$1"; }
train --train-iters 6 "${S6[@]}" "${WD[@]}" --run-dir "$W/wd_all" >"$W/wd_all.log" 2>&1 || bad "wd: 6-iteration run"
train --train-iters 6 "${S6[@]}" "${WD[@]}" --exit-interval 3 --save "$W/ck_wd" --run-dir "$W/wd_res" \
  >"$W/wd_a.log" 2>&1 || bad "wd: run stopped at 3"
train --train-iters 6 "${S6[@]}" --weight-decay 0.05 --run-dir "$W/wd_res" --load "$W/ck_wd" \
  --use-checkpoint-opt_param-scheduler >"$W/wd_b.log" 2>&1 || bad "wd: resume failed: $(tail -3 "$W/wd_b.log")"
[ -n "$(wdcurve "$W/wd_all/metrics.jsonl")" ] && [ "$(wdcurve "$W/wd_res/metrics.jsonl")" = "$(wdcurve "$W/wd_all/metrics.jsonl")" ] \
  && grep -q "weight decay linear from 0 to 0.3 over 48 samples" "$W/wd_b.log" \
  && ok "--use-checkpoint-opt_param-scheduler: the checkpoint's weight-decay increase too; every lr, wd, loss, grad norm as uninterrupted" \
  || bad "--use-checkpoint-opt_param-scheduler: weight-decay schedule not the checkpoint's"
for f in "--override-opt_param-scheduler --use-checkpoint-opt_param-scheduler --load $W/ck_s|give at most one" \
         "--use-checkpoint-opt_param-scheduler|requires --load DIR"; do
  if train --train-iters 4 ${f%%|*} >"$W/s_bad.log" 2>&1; then bad "${f%%|*} accepted"
  else grep -q "${f##*|}" "$W/s_bad.log" && ok "refused: ${f%%|*}" || bad "${f%%|*}: $(tail -2 "$W/s_bad.log")"; fi
done
# trainer_state.json is not checksummed: a hand-edited schedule is refused, not resumed (decay_steps 0 trained
# at the floor rate from the first step)
st=$(ls -d "$W"/ck_s/iter_* | tail -1)/trainer_state.json
sed -i -E 's/"decay_steps": [0-9]+/"decay_steps": 0/' "$st"
if train --train-iters 6 "${S6[@]}" --load "$W/ck_s" --use-checkpoint-opt_param-scheduler >"$W/s_bad.log" 2>&1; then
  bad "--use-checkpoint-opt_param-scheduler took decay_steps 0"
else grep -q "trainer_state.json: scheduler: decay_steps is 0, expected at least 1" "$W/s_bad.log" \
  && ok "refused: a checkpoint schedule with decay_steps 0" || bad "decay_steps 0: $(tail -2 "$W/s_bad.log")"; fi

# --- 4. WSD and the weight-decay increment, against a float64 transcription of Megatron's get_lr / get_wd ------
for ws in exponential linear cosine minus_sqrt; do
  train --train-iters 8 --lr-warmup-iters 1 --lr-decay-style WSD --lr-wsd-decay-style $ws --lr-wsd-decay-iters 3 \
    --min-lr 1e-5 --weight-decay-incr-style cosine --start-weight-decay 0.01 --end-weight-decay 0.1 \
    --run-dir "$W/wsd_$ws" >"$W/wsd_$ws.log" 2>&1 || bad "WSD $ws: $(tail -3 "$W/wsd_$ws.log")"
  if $PY - "$W/wsd_$ws/metrics.jsonl" $ws <<'PYEOF'; then ok "WSD $ws (final 3 of 8 iterations) and a cosine weight-decay increase: every lr and wd as Megatron's (rel. 1e-12)"; else bad "WSD $ws schedule"; fi
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
style = sys.argv[2]
assert [r["iteration"] for r in rows] == list(range(1, 9)), rows
max_lr, min_lr, warm, decay, wsd = 1e-3, 1e-5, 8, 64, 24      # samples: iterations x global batch 8
def lr(n):                                                      # OptimizerParamScheduler.get_lr, WSD branch
    if n <= warm:
        return max_lr * n / warm
    if n > decay:
        return min_lr
    start = decay - wsd
    if n <= start:
        c = 1.0
    else:
        q = (n - start) / wsd
        c = {"linear": 1.0 - q, "cosine": 0.5 * (math.cos(math.pi * q) + 1.0),
             "exponential": 2.0 * math.pow(0.5, q) - 1.0, "minus_sqrt": 1.0 - math.sqrt(q)}[style]
    return min_lr + c * (max_lr - min_lr)
def wd(n, start=0.01, end=0.1, incr=64):                        # get_wd, cosine
    if n > incr:
        return end
    return start + 0.5 * (math.cos(math.pi * (1 - n / incr)) + 1.0) * (end - start)
for r in rows:
    n = r["consumed_samples"]
    assert abs(r["lr"] - lr(n)) <= 1e-12 * max(lr(n), 1e-30), (r["iteration"], r["lr"], lr(n))
    assert abs(r["weight_decay"] - wd(n)) <= 1e-12 * wd(n), (r["iteration"], r["weight_decay"], wd(n))
assert rows[2]["lr"] == max_lr and rows[-1]["lr"] == min_lr     # stable, then decayed to the floor
PYEOF
done
# in samples (--train-samples): the same schedule as the iteration-based WSD linear run above, bitwise
train --train-samples 64 --lr-warmup-samples 8 --lr-decay-style WSD --lr-wsd-decay-style linear \
  --lr-wsd-decay-samples 24 --min-lr 1e-5 --weight-decay-incr-style cosine --start-weight-decay 0.01 \
  --end-weight-decay 0.1 --run-dir "$W/wsd_sa" >"$W/wsd_sa.log" 2>&1 || bad "WSD in samples: $(tail -3 "$W/wsd_sa.log")"
[ -n "$(wdcurve "$W/wsd_linear/metrics.jsonl")" ] && [ "$(wdcurve "$W/wsd_sa/metrics.jsonl")" = "$(wdcurve "$W/wsd_linear/metrics.jsonl")" ] \
  && ok "WSD with --train-samples 64 / --lr-wsd-decay-samples 24 = --train-iters 8 / --lr-wsd-decay-iters 3, bitwise" \
  || bad "WSD in samples differs from WSD in iterations"
# resuming a WSD checkpoint under --use-checkpoint-opt_param-scheduler: its style and weight decay are the
# checkpoint's, the final decay's length and shape the flags' (no checkpoint records them, as Megatron's)
train --train-iters 8 --lr-warmup-iters 1 --lr-decay-style WSD --lr-wsd-decay-style linear --lr-wsd-decay-iters 3 \
  --min-lr 1e-5 --weight-decay-incr-style cosine --start-weight-decay 0.01 --end-weight-decay 0.1 --exit-interval 3 \
  --save "$W/ck_wsd" --run-dir "$W/wsd_r" >"$W/wsd_r.log" 2>&1 || bad "WSD run stopped at 3: $(tail -3 "$W/wsd_r.log")"
if train --train-iters 8 --lr-warmup-iters 1 --min-lr 1e-5 --load "$W/ck_wsd" --use-checkpoint-opt_param-scheduler \
     >"$W/wsd_r1.log" 2>&1; then bad "a WSD checkpoint resumed without the final decay's length"
else grep -q "decays by WSD, whose final decay checkpoints do not record: give it with --lr-wsd-decay-iters N" \
  "$W/wsd_r1.log" && ok "refused: a WSD checkpoint's schedule without --lr-wsd-decay-iters" \
  || bad "WSD resume without length: $(tail -2 "$W/wsd_r1.log")"; fi
train --train-iters 8 --lr-warmup-iters 1 --min-lr 1e-5 --lr-wsd-decay-style linear --lr-wsd-decay-iters 3 \
  --load "$W/ck_wsd" --use-checkpoint-opt_param-scheduler --run-dir "$W/wsd_r" >"$W/wsd_r2.log" 2>&1 \
  || bad "WSD resume: $(tail -3 "$W/wsd_r2.log")"
[ "$(wdcurve "$W/wsd_r/metrics.jsonl")" = "$(wdcurve "$W/wsd_linear/metrics.jsonl")" ] \
  && ok "a WSD checkpoint resumed with --lr-wsd-decay-iters: every lr, wd, loss, grad norm as uninterrupted" \
  || bad "WSD resume differs from the uninterrupted run"
# the same numbers reach the optimizer: WSD over the whole decay span is the linear decay, and a flat increment is
# --weight-decay, bitwise in every loss and grad norm
train --train-iters 6 --lr-warmup-iters 1 --lr-decay-style linear --weight-decay 0.05 --run-dir "$W/lin" \
  >"$W/lin.log" 2>&1 || bad "linear run: $(tail -3 "$W/lin.log")"
train --train-iters 6 --lr-warmup-iters 1 --lr-decay-style WSD --lr-wsd-decay-style linear --lr-wsd-decay-iters 5 \
  --weight-decay-incr-style linear --start-weight-decay 0.05 --end-weight-decay 0.05 --run-dir "$W/wsdlin" \
  >"$W/wsdlin.log" 2>&1 || bad "WSD linear run: $(tail -3 "$W/wsdlin.log")"
[ -n "$(curve "$W/lin/metrics.jsonl")" ] && [ "$(curve "$W/wsdlin/metrics.jsonl")" = "$(curve "$W/lin/metrics.jsonl")" ] \
  && ok "WSD linear over the whole decay span + a flat wd increment = linear decay + --weight-decay, bitwise" \
  || bad "WSD linear / flat increment differ from linear / --weight-decay"
train --train-iters 6 --lr-warmup-iters 1 --lr-decay-style linear --weight-decay-incr-style linear \
  --start-weight-decay 0 --end-weight-decay 0.5 --run-dir "$W/wdinc" >"$W/wdinc.log" 2>&1 || bad "wd increment run"
[ "$(curve "$W/wdinc/metrics.jsonl" | sed -n 1p)" = "$(curve "$W/lin/metrics.jsonl" | sed -n 1p)" ] \
  && [ "$(curve "$W/wdinc/metrics.jsonl" | tail -1)" != "$(curve "$W/lin/metrics.jsonl" | tail -1)" ] \
  && ok "a weight-decay increase from 0 changes the training after the first step, not before it" \
  || bad "weight-decay increase: first or last step unexpected"
for f in "--lr-decay-style WSD|requires the length of its final decay (--lr-wsd-decay-iters N)" \
         "--lr-decay-style WSD --lr-wsd-decay-iters 9|at most the decay span" \
         "--start-weight-decay 0.1|only with --weight-decay-incr-style linear or cosine" \
         "--weight-decay-incr-style linear --start-weight-decay 0.1|requires --start-weight-decay and --end-weight-decay" \
         "--weight-decay-incr-style cosine --start-weight-decay 0.2 --end-weight-decay 0.1|only increases" \
         "--lr-wsd-decay-samples 8|only with --train-samples"; do
  if train --train-iters 8 ${f%%|*} >"$W/w_bad.log" 2>&1; then bad "${f%%|*} accepted"
  else grep -q -- "${f##*|}" "$W/w_bad.log" && ok "refused: ${f%%|*}" || bad "${f%%|*}: $(tail -2 "$W/w_bad.log")"; fi
done

# --- 5. flags accepted for what tandem does anyway -------------------------------------------------
train --train-iters 2 --lr-warmup-iters 1 --exit-signal-handler --no-load-rng --no-save-rng >"$W/acc.log" 2>&1 \
  && grep -q "exit_signal_handler \.* True" "$W/acc.log" && grep -q "no_load_rng \.* True" "$W/acc.log" \
  && ok "--exit-signal-handler --no-load-rng --no-save-rng accepted" || bad "accepted flags: $(tail -3 "$W/acc.log")"
finish
