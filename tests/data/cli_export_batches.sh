#!/usr/bin/env bash
# cli_export_batches.sh - `tandem export-batches` on gen-data output, checked by an independent
# Python reading of the exported arrays:
#   - get_rope_index re-implemented from the spec (qwen3vl.md section 4) gives the same positions;
#   - targets are labels shifted inside each sample; labels are -100 or the token id, and
#     every sample ends with a trained "<|im_end|>\n";
#   - image-pad runs match the grids; pixel values lie in [-1, 1];
#   - dp=1 and dp=2 export the same micro-batches (same fingerprints) for every step;
#   - two exports are byte-identical;
#   - --image-min-pixels (LLaMA-Factory's bound) scales the pictures up before the processor: more patches;
#   - --model is required, and train flags that do not change the batches (--save, ...) are refused.
#   TANDEM=build/tandem bash tests/data/cli_export_batches.sh
set -u
cd "$(dirname "$0")/../.."
TANDEM=${TANDEM:-build/tandem}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; echo "0 passed, 1 failed"; exit 1; }

"$TANDEM" gen-data --out "$tmp/d" --samples 64 --heldout 4 >/dev/null || fail "gen-data"
"$TANDEM" train-tokenizer --data "$tmp/d/train.json" --vocab-size 1024 --out "$tmp/tok.json" >/dev/null 2>&1 || fail "train-tokenizer"
flags=(--model configs/tiny --data "$tmp/d/train.json" --tokenizer "$tmp/tok.json"
       --global-batch-size 8 --micro-batch-size 2 --seed 5 --steps 3)
"$TANDEM" export-batches "${flags[@]}" --out "$tmp/e1" >/dev/null || fail "export dp=1"
"$TANDEM" export-batches "${flags[@]}" --out "$tmp/e2" --dp 2 >/dev/null || fail "export dp=2"
"$TANDEM" export-batches "${flags[@]}" --out "$tmp/e1b" >/dev/null || fail "export dp=1 again"
"$TANDEM" export-batches "${flags[@]}" --out "$tmp/bad" --dp 3 >/dev/null 2>&1 && fail "dp 3 does not divide 8"
# --model is required (its preprocessor and token ids are train's); train flags that do not select the batches are
# refused, not ignored
"$TANDEM" export-batches "${flags[@]:2}" --out "$tmp/bad" 2>&1 >/dev/null | grep -q -- "--model DIR" \
  || fail "export-batches without --model accepted"
for f in "--save $tmp/s" "--tensorboard-dir $tmp/tb" "--load $tmp/s"; do
  "$TANDEM" export-batches "${flags[@]}" --out "$tmp/bad" $f 2>&1 >/dev/null \
    | grep -q -- "${f%% *} is a \`tandem train\` flag that does not change the batches" || fail "export-batches $f accepted"
done
# LLaMA-Factory's bounds before the processor: pictures scaled up to 128 x 128 give four times the patches
"$TANDEM" export-batches "${flags[@]}" --out "$tmp/lf" --image-min-pixels 16384 >/dev/null || fail "--image-min-pixels"
"$TANDEM" export-batches "${flags[@]}" --out "$tmp/bad" --image-min-pixels 9 --image-max-pixels 8 2>&1 >/dev/null \
  | grep -q "image-min-pixels 9: larger than --image-max-pixels 8" || fail "--image-min-pixels above the max accepted"

/usr/bin/python3 - "$tmp" <<'PY'
import json, os, sys
import numpy as np
tmp = sys.argv[1]
passed = failed = 0
def check(ok, what):
    global passed, failed
    if ok: passed += 1
    else:
        failed += 1
        print("FAIL:", what, file=sys.stderr)

tok = json.load(open(os.path.join(tmp, "tok.json")))
special = {a["content"]: a["id"] for a in tok["added_tokens"]}
PAD, IM_END = special["<|image_pad|>"], special["<|im_end|>"]
NL = tok["model"]["vocab"]["\u010a"]  # byte-level "\n"

def rope_index(ids, grids, merge=2):
    """get_rope_index as the spec words it, for one sequence."""
    pos = np.zeros((3, len(ids)), np.int64)
    p = i = img = 0
    while i < len(ids):
        if ids[i] != PAD:
            pos[:, i] = p; p += 1; i += 1; continue
        t, h, w = grids[img]; img += 1
        H, W = h // merge, w // merge
        for ti in range(t):
            for r in range(H):
                for c in range(W):
                    pos[:, i] = (p + ti, p + r, p + c); i += 1
        p += max(t, H, W)
    return pos

def load(d, b):
    raw = open(os.path.join(d, b["file"]), "rb").read()
    n, s, ni, npt, D = b["n_tokens"], b["n_seqs"], b["n_images"], b["n_patches"], b["patch_dim"]
    i32 = np.frombuffer(raw, "<i4", count=(s + 1) + 6 * n + 3 * ni)
    o = 0
    def take(k):
        nonlocal o
        v = i32[o:o + k]; o += k; return v
    cu, ids, lab, tgt = take(s + 1), take(n), take(n), take(n)
    pos, grid = take(3 * n).reshape(3, n), take(3 * ni).reshape(ni, 3)
    pix = np.frombuffer(raw, "<f4", offset=4 * o, count=npt * D)
    check(len(raw) == 4 * o + 4 * npt * D, f"{b['file']}: size")
    return cu, ids, lab, tgt, pos, grid, pix

for name in ("e1", "e2"):
    d = os.path.join(tmp, name)
    idx = json.load(open(os.path.join(d, "index.json")))
    for b in idx["batches"]:
        cu, ids, lab, tgt, pos, grid, pix = load(d, b)
        where = f"{name}/{b['file']}"
        check(cu[0] == 0 and cu[-1] == b["n_tokens"] and all(np.diff(cu) > 0), where + ": cu_seqlens")
        img = 0
        ok_pos = ok_tgt = ok_lab = ok_end = True
        for s in range(b["n_seqs"]):
            a, e = cu[s], cu[s + 1]
            sid = ids[a:e].tolist()
            k = sum(1 for j in range(len(sid)) if sid[j] == PAD and (j == 0 or sid[j - 1] != PAD))
            g = grid[img:img + k].tolist(); img += k
            ok_pos &= np.array_equal(rope_index(sid, g), pos[:, a:e])
            ok_tgt &= np.array_equal(tgt[a:e - 1], lab[a + 1:e]) and tgt[e - 1] == -100
            ok_lab &= bool(np.all((lab[a:e] == -100) | (lab[a:e] == ids[a:e])))
            ok_end &= sid[-2:] == [IM_END, NL] and lab[e - 2] == IM_END and lab[e - 1] == NL and lab[a] == -100
            ok_lab &= bool(np.all(lab[a:e][np.array(sid) == PAD] == -100))
        check(ok_pos, where + ": positions differ from get_rope_index")
        check(ok_tgt, where + ": targets are not labels shifted within each sample")
        check(ok_lab, where + ": labels")
        check(ok_end, where + ": samples must end with a trained <|im_end|>\\n")
        check(img == b["n_images"] and int((ids == PAD).sum()) == int((grid[:, 1] * grid[:, 2]).sum()) // 4,
              where + ": image pads vs grids")
        check(int((grid.prod(1)).sum()) == b["n_patches"], where + ": patches vs grids")
        check(pix.size == 0 or (pix.min() >= -1 and pix.max() <= 1), where + ": pixel range")
        check(int((tgt != -100).sum()) == b["n_target_tokens"], where + ": target count")

e1 = json.load(open(os.path.join(tmp, "e1", "index.json")))["batches"]
e2 = json.load(open(os.path.join(tmp, "e2", "index.json")))["batches"]
f1 = {(b["step"], b["micro"]): b["fingerprint"] for b in e1}
f2 = {(b["step"], 2 * b["rank"] + b["micro"]): b["fingerprint"] for b in e2}
check(len(f1) == 12 and f1 == f2, "dp=1 and dp=2 micro-batches differ")
e1b = json.load(open(os.path.join(tmp, "e1b", "index.json")))["batches"]
check([b["fingerprint"] for b in e1] == [b["fingerprint"] for b in e1b], "export not reproducible")
check(len(set(f1.values())) == 12, "micro-batches repeat")
lf = json.load(open(os.path.join(tmp, "lf", "index.json")))["batches"]
p1, plf = sum(b["n_patches"] for b in e1), sum(b["n_patches"] for b in lf)
check(plf > p1, f"--image-min-pixels 16384: {plf} patches, {p1} without")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
