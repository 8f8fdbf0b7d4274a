#!/usr/bin/python3
"""make_corpus.py OUT MODEL_DIR TOKENIZER.json IMAGE.png - writes the broken inputs that
cli_badinput.sh feeds to tandem. Binary cases are generated here rather than committed;
each is a small variation of a valid file, so it fails for exactly one reason.

Layout written under OUT (every file's name says what is wrong with it):
  json/*.json              malformed or adversarial JSON (read as config, tokenizer, dataset)
  config/<case>/config.json   Qwen3-VL configs with missing or absurd fields
  tokenizer/*.json         broken tokenizer.json files
  image/<case>.{png,jpg} + image/<case>.json   broken pictures and a one-sample dataset using each
  dataset/*.json           datasets that parse as JSON but break the dataset rules
  safetensors/*.safetensors   headers whose offsets, lengths or dtypes lie
  paths/*.json             samples whose image path names no picture (a NUL inside, a symlink loop)
"""
import copy
import io
import json
import os
import struct
import sys
import zlib

out, model_dir, tok_path, png_path = sys.argv[1:5]


def write(rel, data):
    path = os.path.join(out, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# ---------------------------------------------------------------- generic JSON
depth = 100000
write("json/deep_nesting.json", "[" * depth + "]" * depth)
write("json/deep_objects.json", '{"a":' * 50000 + "1" + "}" * 50000)
write("json/huge_number.json", '{"vocab_size": 1' + "0" * 400 + "}")
write("json/huge_exponent.json", '{"x": 1e999999999999}')
write("json/invalid_utf8.json", b'{"model_type": "qwen3_vl\xff\xfe", "text_config": {}}')
write("json/overlong_utf8.json", b'{"k": "\xc0\xaf"}')
write("json/lone_surrogate.json", '{"k": "\\ud800"}')
write("json/trailing_comma.json", '{"a": [1, 2,], "b": 3,}')
write("json/unterminated_string.json", '{"a": "abc')
write("json/truncated.json", '{"messages": [{"role": "user", "content": "hi"')
write("json/empty.json", "")
write("json/nul_bytes.json", b'{"a":\x00 1}')
write("json/not_json.json", "model_type = qwen3_vl\n")
write("json/garbage_after.json", '{"a": 1} {"b": 2}')
write("json/bom_and_text.json", b"\xef\xbb\xbfhello")
write("json/control_char_in_string.json", b'{"a": "x\x01y"}')
write("json/top_level_number.json", "42")

# ---------------------------------------------------------------- config.json
base = json.load(open(os.path.join(model_dir, "config.json")))


def config_case(name, edit):
    c = copy.deepcopy(base)
    edit(c)
    write(f"config/{name}/config.json", json.dumps(c, indent=1))


def drop(path):
    def f(c):
        d = c
        for k in path[:-1]:
            d = d[k]
        del d[path[-1]]
    return f


def setv(path, v):
    def f(c):
        d = c
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = v
    return f


config_case("missing_text_config", drop(["text_config"]))
config_case("missing_vision_config", drop(["vision_config"]))
config_case("missing_hidden_size", drop(["text_config", "hidden_size"]))
config_case("zero_layers", setv(["text_config", "num_hidden_layers"], 0))
config_case("negative_hidden", setv(["text_config", "hidden_size"], -64))
config_case("huge_vocab", setv(["text_config", "vocab_size"], 10 ** 12))
config_case("huge_intermediate", setv(["text_config", "intermediate_size"], 2 ** 31))
config_case("string_heads", setv(["text_config", "num_attention_heads"], "four"))
config_case("fraction_layers", setv(["text_config", "num_hidden_layers"], 2.5))
config_case("kv_heads_not_dividing", setv(["text_config", "num_key_value_heads"], 3))
config_case("vision_heads_not_dividing", setv(["vision_config", "num_heads"], 7))
config_case("deepstack_past_depth", setv(["vision_config", "deepstack_visual_indexes"], [0, 99]))
config_case("mrope_wrong_sum", lambda c: c["text_config"].setdefault("rope_scaling", {}).update(
    {"mrope_section": [1, 1, 1], "rope_type": "default", "mrope_interleaved": True}))
config_case("wrong_model_type", setv(["model_type"], "llama"))
config_case("nan_eps", lambda c: None)  # replaced below: JSON has no NaN literal
write("config/nan_eps/config.json",
      json.dumps(base, indent=1).replace('"rms_norm_eps": 1e-06', '"rms_norm_eps": NaN'))
write("config/text_config_is_list/config.json", json.dumps({**base, "text_config": [1, 2]}))

# ---------------------------------------------------------------- tokenizer.json
tok = json.load(open(tok_path))


def tok_case(name, edit):
    t = copy.deepcopy(tok)
    edit(t)
    write(f"tokenizer/{name}.json", json.dumps(t))


tok_case("missing_model", lambda t: t.pop("model"))
tok_case("wordpiece_model", lambda t: t["model"].update({"type": "WordPiece"}))
tok_case("merge_without_space", lambda t: t["model"]["merges"].insert(0, "abc"))
tok_case("negative_id", lambda t: t["model"]["vocab"].update({"neg": -5}))
tok_case("huge_id", lambda t: t["model"]["vocab"].update({"big": 2 ** 31 - 1}))
tok_case("added_token_id_huge", lambda t: t["added_tokens"].append(
    {"id": 10 ** 15, "content": "<x>", "special": True, "normalized": False}))
tok_case("added_token_empty", lambda t: t["added_tokens"].append(
    {"id": 5000, "content": "", "special": True, "normalized": False}))
tok_case("vocab_is_list", lambda t: t["model"].update({"vocab": [1, 2, 3]}))
tok_case("bad_regex", lambda t: t["pre_tokenizer"]["pretokenizers"][0]["pattern"].update({"Regex": "([a-"}))
tok_case("unknown_normalizer", lambda t: t.update({"normalizer": {"type": "Lowercase"}}))

# ---------------------------------------------------------------- images
png = open(png_path, "rb").read()


def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def png_with_size(w, h):
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 64)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def png_with_ztxt_bomb(mb):
    """The valid PNG with a zTXt chunk that inflates to `mb` MiB of zeros (about 1 KB per MiB)."""
    z = zlib.compressobj(9)
    bomb = b"".join(z.compress(bytes(1 << 20)) for _ in range(mb)) + z.flush()
    return png[:33] + chunk(b"zTXt", b"Comment\0\0" + bomb) + png[33:]


def jpeg_bytes(mode="RGB"):
    try:
        from PIL import Image
        b = io.BytesIO()
        Image.new(mode, (48, 32), (200, 30, 10, 0)[:len(mode)]).save(b, "JPEG", quality=85)
        return b.getvalue()
    except ImportError:
        return None


def stalling_jpeg(w, h, repeat):
    """A grey progressive JPEG (flat but for one dark quarter: a scan is a few bytes) whose last
    scan is written `repeat` more times: each repeat decodes every block again."""
    try:
        from PIL import Image
    except ImportError:
        return None
    im = Image.new("L", (w, h), 128)
    im.paste(40, (0, 0, w // 2, h // 2))
    b = io.BytesIO()
    im.save(b, "JPEG", progressive=True, quality=90)
    d = b.getvalue()
    last = d.rfind(b"\xff\xda")  # 0xFF in entropy-coded data is followed by 0x00: this is the last SOS
    return d[:-2] + d[last:-2] * repeat + d[-2:]


jpg = jpeg_bytes()
cmyk = jpeg_bytes("CMYK")
images = {
    "truncated_png.png": png[: len(png) // 2],
    "header_only_png.png": png[:33],
    "wrong_magic_png.png": b"\x89PNX" + png[4:],
    "huge_png.png": png_with_size(100000, 100000),  # valid CRCs: only the size is wrong
    "zero_width_png.png": png_with_size(0, 16),
    "too_wide_png.png": png_with_size(3000, 10),  # a valid header; smart_resize refuses the aspect ratio
    "bad_crc_png.png": png[:29] + bytes([png[29] ^ 0xFF]) + png[30:],
    "text_as_png.png": b"this is not an image\n",
    "empty.png": b"",
    "ztxt_bomb_png.png": png_with_ztxt_bomb(200),  # PIL: "Decompressed Data Too Large"
}
if jpg:
    sof = jpg.find(b"\xff\xc0")
    huge_jpg = bytearray(jpg)
    huge_jpg[sof + 5:sof + 9] = struct.pack(">HH", 65500, 65500)  # height, width
    images.update({
        "truncated_jpeg.jpg": jpg[: len(jpg) // 2],
        "wrong_magic_jpeg.jpg": b"\xff\xd8\x00" + jpg[3:],
        "huge_jpeg.jpg": bytes(huge_jpg),
        "png_named_jpeg.jpg": b"\xff\xd8\xff\xe0" + b"\x00" * 12,
        "cmyk_jpeg.jpg": cmyk,  # a valid file, but refused (PIL would convert it): at the header
        # thousands of scans of a few bytes: beyond the scan limit (12 KB)
        "many_scans_jpeg.jpg": stalling_jpeg(32, 32, 1100),
        # fewer scans, each decoding all 4096 blocks again for 12 bytes: beyond the work budget (4 KB)
        "scan_work_jpeg.jpg": stalling_jpeg(512, 512, 200),
    })
for name, data in images.items():
    write(f"image/{name}", data)
    sample = [{"messages": [{"role": "user", "content": "<image>What is this?"},
                            {"role": "assistant", "content": "a square"}], "images": [name]}]
    write(f"image/{os.path.splitext(name)[0]}.json", json.dumps(sample))

# ---------------------------------------------------------------- dataset rules
ok_turns = [{"role": "user", "content": "Hello?"}, {"role": "assistant", "content": "Hi."}]
datasets = {
    "unknown_role": [{"messages": [{"role": "wizard", "content": "x"}, {"role": "assistant", "content": "y"}]}],
    "image_count_mismatch": [{"messages": [{"role": "user", "content": "<image><image>Q"},
                                           {"role": "assistant", "content": "A"}], "images": ["a.png"]}],
    "missing_image_file": [{"messages": [{"role": "user", "content": "<image>Q"},
                                         {"role": "assistant", "content": "A"}], "images": ["no_such.png"]}],
    "ends_with_user": [{"messages": ok_turns + [{"role": "user", "content": "more?"}]}],
    "empty_answer": [{"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": ""}]}],
    "content_is_number": [{"messages": [{"role": "user", "content": 5}, {"role": "assistant", "content": "A"}]}],
    "sample_is_string": ["just a string"],
    "no_messages": [{"text": "hello"}],
    "image_path_escapes": [{"messages": [{"role": "user", "content": "<image>Q"},
                                         {"role": "assistant", "content": "A"}], "images": ["../../../etc/passwd"]}],
    "video_sample": [{"messages": [{"role": "user", "content": "<video>Q"}, {"role": "assistant", "content": "A"}],
                      "videos": ["clip.mp4"]}],
    "too_many_images": [{"messages": [{"role": "user", "content": "<image>" * 100 + "Q"},
                                      {"role": "assistant", "content": "A"}], "images": ["x.png"] * 100}],
}
for name, d in datasets.items():
    write(f"dataset/{name}.json", json.dumps(d))
write("dataset/jsonl_bad_line.jsonl", json.dumps({"messages": ok_turns}) + "\n{not json\n")

# ---------------------------------------------------------------- safetensors
def st(header, data, hlen=None):
    h = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return struct.pack("<Q", len(h) if hlen is None else hlen) + h + data


t = lambda dt, shape, a, b: {"dtype": dt, "shape": shape, "data_offsets": [a, b]}
data16 = b"\x00" * 16
st_cases = {
    "offsets_past_end": st({"w": t("F32", [4], 0, 64)}, data16),
    "offsets_reversed": st({"w": t("F32", [4], 16, 0)}, data16),
    "length_disagrees_with_shape": st({"w": t("F32", [3], 0, 16)}, data16),
    "overlapping_tensors": st({"a": t("F32", [4], 0, 16), "b": t("F32", [2], 8, 16)}, data16),
    "gap_in_data": st({"a": t("F32", [2], 0, 8)}, data16),
    "header_length_past_file": st({"w": t("F32", [4], 0, 16)}, data16, hlen=1 << 20),
    "header_length_huge": st({"w": t("F32", [4], 0, 16)}, data16, hlen=(1 << 63) + 5),
    "header_not_json": st(b"{this is not json}", data16),
    "unknown_dtype": st({"w": t("F33", [4], 0, 16)}, data16),
    "negative_shape": st({"w": t("F32", [-4], 0, 16)}, data16),
    "shape_overflow": st({"w": t("F32", [2 ** 40, 2 ** 40], 0, 16)}, data16),
    "offsets_huge": st({"w": t("F32", [4], 2 ** 64 - 8, 2 ** 64 + 8)}, data16),
    "shorter_than_8_bytes": b"\x10\x00\x00",
    "empty": b"",
}
for name, data in st_cases.items():
    write(f"safetensors/{name}.safetensors", data)

# ---------------------------------------------------------------- for multi-rank training runs
# Good samples around one broken picture whose header is valid, so the damage is found by
# the loader while decoding, mid-run, on one rank.
write("image/good.png", png)
good = {"messages": [{"role": "user", "content": "<image>What is this?"},
                     {"role": "assistant", "content": "a square"}], "images": ["../image/good.png"]}
write("train/good.json", json.dumps([good] * 2))
for broken in ["truncated_png.png", "truncated_jpeg.jpg"] + (["many_scans_jpeg.jpg"] if jpg else []):
    bad = dict(good, images=["../image/" + broken])
    write(f"train/mixed_{os.path.splitext(broken)[0]}.json", json.dumps([good] * 3 + [bad] + [good] * 4))
# Image paths that name no picture: a NUL inside one (cut there, it is good.png, which exists), and a
# symlink loop (whose message must give the system's reason).
write("paths/nul_in_path.json", json.dumps([dict(good, images=["../image/good.png\u0000.junk"])]))
for a, b in [("loop_a.png", "loop_b.png"), ("loop_b.png", "loop_a.png")]:
    if not os.path.lexists(os.path.join(out, "paths", a)):
        os.symlink(b, os.path.join(out, "paths", a))
write("paths/symlink_loop.json", json.dumps([dict(good, images=["loop_a.png"])]))
# One sample of about 3 M tokens: training must drop it against --seq-length before any
# allocation sized by it (dump-grads has no such limit yet, so only `train` reads it).
write("train/too_long_sample.json", json.dumps(
    [{"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "word " * 1000000}]}]))

# ---------------------------------------------------------------- preprocessor_config.json
# model folders: the valid config.json beside a broken preprocessor_config.json
pp = json.load(open(os.path.join(model_dir, "preprocessor_config.json")))
pp_cases = {
    "min_pixels_huge": {"min_pixels": 2 ** 40, "max_pixels": 2 ** 41},
    "patch_size_zero": {"patch_size": 0},
    "merge_size_huge": {"merge_size": 1000},
    "mean_too_short": {"image_mean": [0.5, 0.5]},
    "std_zero": {"image_std": [0.0, 0.5, 0.5]},
    "min_above_max": {"min_pixels": 20000, "max_pixels": 10000},
    "patch_size_string": {"patch_size": "16"},
}
for name, edit in pp_cases.items():
    write(f"preproc/{name}/config.json", json.dumps(base, indent=1))
    write(f"preproc/{name}/preprocessor_config.json", json.dumps({**pp, **edit}, indent=1))
write("preproc/malformed/config.json", json.dumps(base, indent=1))
write("preproc/malformed/preprocessor_config.json", '{"patch_size": 16,, }')
