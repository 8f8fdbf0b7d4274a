#!/usr/bin/env bash
# cli_gen_data.sh - `tandem gen-data`: flags, errors, determinism, the files it writes.
#   TANDEM=build/tandem bash tests/data/cli_gen_data.sh
set -u
cd "$(dirname "$0")/../.."
TANDEM=${TANDEM:-build/tandem}
passed=0 failed=0
check() { # description, then a command that must succeed
  local what=$1; shift
  if "$@" >/dev/null 2>&1; then passed=$((passed + 1)); else echo "FAIL: $what" >&2; failed=$((failed + 1)); fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check "--help exits 0 and documents --out" bash -c "'$TANDEM' gen-data --help | grep -q -- --out"
check "missing --out is an error" bash -c "! '$TANDEM' gen-data --samples 3"
check "a bad number is an error naming the flag" bash -c "'$TANDEM' gen-data --out '$tmp/x' --samples abc 2>&1 | grep -q -- --samples"
check "an unknown flag is an error" bash -c "! '$TANDEM' gen-data --out '$tmp/x' --frobnicate 1"
check "an unknown --scene is an error naming the flag" bash -c "'$TANDEM' gen-data --out '$tmp/x' --scene odd 2>&1 | grep -q -- --scene"
check "min > max is an error" bash -c "! '$TANDEM' gen-data --out '$tmp/x' --min-size 100 --max-size 80"
check "an unwritable folder is an error" bash -c "! '$TANDEM' gen-data --out /proc/no/such/dir --samples 2"
check "default run" "$TANDEM" gen-data --out "$tmp/a"
check "2000 training samples" bash -c "[ \$(grep -c '\"messages\"' '$tmp/a/train.json') = 2000 ]"
check "200 held-out samples" bash -c "[ \$(grep -c '\"messages\"' '$tmp/a/test.json') = 200 ]"
check "same seed, same bytes" bash -c "'$TANDEM' gen-data --out '$tmp/b' >/dev/null && diff -r '$tmp/a' '$tmp/b'"
check "another seed, other data" bash -c "'$TANDEM' gen-data --out '$tmp/c' --seed 9 --samples 50 --heldout 5 && ! cmp -s '$tmp/a/train.json' '$tmp/c/train.json'"
check "the default data supports the demo's 1024-id tokenizer" bash -c "'$TANDEM' train-tokenizer --data '$tmp/a/train.json' --vocab-size 1024 --out '$tmp/tok.json' | grep -q '742 merges'"
check "held-out answers are closed (no captions)" bash -c "! grep -q 'Describe' '$tmp/a/test.json'"
check "square PNGs within --min-size/--max-size" /usr/bin/python3 - "$tmp/c" <<'PY'
import json, os, sys
from PIL import Image
d = sys.argv[1]
for s in json.load(open(os.path.join(d, "train.json"))):
    for p in s["images"]:
        w, h = Image.open(os.path.join(d, p)).size
        assert 64 <= w <= 128 and w == h, (p, w, h)
PY
# The held-out split is what tandem evaluate scores per kind: all four closed kinds, each
# answer from its closed set, and the answer visible in the picture (the named cell holds
# a shape that fills most of it, in the colour asked about).
check "held-out: four closed kinds, answers in the picture" /usr/bin/python3 - "$tmp/a" <<'PY'
import json, os, re, sys
from PIL import Image
d = sys.argv[1]
rgb = {"red": (225, 30, 30), "green": (30, 170, 50), "blue": (30, 70, 230), "yellow": (240, 210, 20),
       "purple": (150, 50, 190)}
cells = {"top left": (0, 0), "top right": (1, 0), "bottom left": (0, 1), "bottom right": (1, 1)}
kinds = {}
for s in json.load(open(os.path.join(d, "test.json"))):
    q, a = s["messages"][0]["content"].lower(), s["messages"][1]["content"]
    im = Image.open(os.path.join(d, s["images"][0])).convert("RGB")
    w, h = im.size
    px = im.load()
    def cover(cx, cy, colour=None):  # fraction of the cell's pixels that are not background
        n = sum(1 for y in range(cy * h // 2, (cy + 1) * h // 2) for x in range(cx * w // 2, (cx + 1) * w // 2)
                if px[x, y] != (255, 255, 255) and (colour is None or px[x, y] == colour))
        return n / (w // 2 * h // 2)
    if "colour" in q:
        kind = "colour"
        assert a in rgb, a
        assert max(cover(cx, cy, rgb[a]) for cx in (0, 1) for cy in (0, 1)) > 0.2, (s, "colour not drawn")
    elif re.fullmatch(r"[0-4]", a):
        kind = "count"
    elif a in cells:
        kind = "position"
        assert cover(*cells[a]) > 0.2, (s, "no shape in the answer's cell")
    else:
        kind = "shape"
        assert a in ("circle", "square", "triangle", "cross") and "shape" in q, s
        cell = [c for c in cells if c in q]
        assert len(cell) == 1 and cover(*cells[cell[0]]) > 0.2, (s, "no shape in the asked cell")
    kinds[kind] = kinds.get(kind, 0) + 1
assert sorted(kinds) == ["colour", "count", "position", "shape"] and min(kinds.values()) >= 30, kinds
PY
# The default scene: each picture's shapes are copies of one shape in one colour, and "where"
# is asked about a lone shape only; --scene mixed draws colours (and kinds) per shape.
cat > "$tmp/scene.py" <<'PY'
import json, os, sys
from PIL import Image
d, scene = sys.argv[1], sys.argv[2]
cells = ("top left", "top right", "bottom left", "bottom right")
multi = 0
for split in ("train", "test"):
    for s in json.load(open(os.path.join(d, split + ".json"))):
        if not s["images"]:
            continue
        im = Image.open(os.path.join(d, s["images"][0])).convert("RGB")
        colours = {c for _, c in im.getcolors(1 << 16) if c != (255, 255, 255)}
        w, h = im.size
        def cover(cx, cy):  # fraction of a cell that is not background
            cell = im.crop((cx * w // 2, cy * h // 2, (cx + 1) * w // 2, (cy + 1) * h // 2))
            return sum(n for n, c in cell.getcolors(1 << 16) if c != (255, 255, 255)) / (w // 2 * (h // 2))
        occupied = sum(1 for cx in (0, 1) for cy in (0, 1) if cover(cx, cy) > 0.1)
        multi += len(colours) > 1
        if scene == "same":
            assert len(colours) == 1, (s, colours)
            for q, a in zip(s["messages"][::2], s["messages"][1::2]):
                if a["content"] in cells:
                    assert occupied == 1, (s, "a position question about one of several shapes")
if scene == "mixed":
    assert multi > 100, multi
PY
check "default scene: one colour per picture, position asked about a lone shape" /usr/bin/python3 "$tmp/scene.py" "$tmp/a" same
check "--scene mixed: shapes of several colours" bash -c "'$TANDEM' gen-data --out '$tmp/m' --scene mixed --samples 400 --heldout 40 && /usr/bin/python3 '$tmp/scene.py' '$tmp/m' mixed"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
