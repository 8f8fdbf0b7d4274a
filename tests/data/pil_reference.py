"""pil_reference.py OUTDIR - reference values from PIL and numpy for tests/data/test_preprocess.c.

Writes test images in several colour types (PNG via PIL, JPEG via PIL), and for each:
  NAME.src.(png|jpg)   the file the C decoder reads
  NAME.rgb             PIL's Image.open(src).convert("RGB") as raw bytes [h, w, 3]
  NAME.rs              that RGB image resized with Image.resize((W, H), Image.BICUBIC), raw bytes
and manifest.txt with one line per case: NAME SRC W H RW RH.
Also smart.txt: "h w min max -> rh rw" lines from a transcription of Qwen's smart_resize,
and patches.f32 / patches.txt: Qwen's patch flattening (numpy reshape/transpose) of one image.
Run with /usr/bin/python3 (Debian's python3-pil and numpy)."""
import math
import os
import sys

import numpy as np
from PIL import Image

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(1234)


def pattern(h, w, ch):
    """Smooth gradients plus noise plus a hard edge: exercises both flat and sharp areas."""
    y, x = np.mgrid[0:h, 0:w]
    planes = []
    for c in range(ch):
        p = 127 + 100 * np.sin(x / (3.0 + c) + y / 5.0) + rng.normal(0, 25, (h, w))
        p[(x > w // 2) & (y < h // 3)] = 255 * (c % 2)
        planes.append(p)
    a = np.stack(planes, -1) if ch > 1 else planes[0]
    return np.clip(a, 0, 255).astype(np.uint8)


cases = []  # (name, PIL image, format, target (w, h))
cases.append(("rgb_down", Image.fromarray(pattern(97, 131, 3), "RGB"), "png", (64, 48)))
cases.append(("rgb_up", Image.fromarray(pattern(37, 29, 3), "RGB"), "png", (96, 64)))
cases.append(("rgb_odd", Image.fromarray(pattern(101, 77, 3), "RGB"), "png", (77, 160)))
cases.append(("rgb_big_down", Image.fromarray(pattern(300, 211, 3), "RGB"), "png", (32, 64)))
cases.append(("grey", Image.fromarray(pattern(60, 90, 1), "L"), "png", (128, 96)))
cases.append(("grey_alpha", Image.fromarray(pattern(45, 70, 2), "LA"), "png", (64, 64)))
cases.append(("rgba", Image.fromarray(pattern(80, 50, 4), "RGBA"), "png", (32, 96)))
pal = Image.fromarray(pattern(70, 66, 3), "RGB").quantize(colors=40)
cases.append(("palette", pal, "png", (64, 32)))
palt = pal.copy()
palt.info["transparency"] = 3
cases.append(("palette_trns", palt, "png", (48, 48)))
cases.append(("jpeg_rgb", Image.fromarray(pattern(90, 120, 3), "RGB"), "jpg", (64, 64)))
cases.append(("jpeg_grey", Image.fromarray(pattern(50, 81, 1), "L"), "jpg", (96, 64)))
cases.append(("jpeg_progressive_444", Image.fromarray(pattern(70, 95, 3), "RGB"), "jpg_prog", (48, 80)))
grey_t = Image.fromarray(pattern(30, 41, 1), "L")
grey_t.info["transparency"] = 17
cases.append(("grey_trns", grey_t, "png", (64, 40)))
cases.append(("bilevel", Image.fromarray(pattern(40, 40, 1) > 128).convert("1"), "png", (32, 32)))

with open(os.path.join(out, "manifest.txt"), "w") as man:
    for name, img, fmt, (tw, th) in cases:
        src = os.path.join(out, f"{name}.src.{fmt}")
        if fmt == "png":
            img.save(src, transparency=img.info["transparency"]) if "transparency" in img.info else img.save(src)
        elif fmt == "jpg_prog":
            src = os.path.join(out, f"{name}.src.jpg")
            img.save(src, quality=85, progressive=True, subsampling=0)
        else:
            img.save(src, quality=90)
        rgb = Image.open(src).convert("RGB")
        open(os.path.join(out, f"{name}.rgb"), "wb").write(rgb.tobytes())
        rs = rgb.resize((tw, th), Image.BICUBIC)
        open(os.path.join(out, f"{name}.rs"), "wb").write(rs.tobytes())
        man.write(f"{name} {src} {rgb.width} {rgb.height} {tw} {th}\n")

    # 16-bit RGB with alpha, written by hand (PIL cannot write it): libpng keeps the high byte,
    # as PIL's "RGBA;16B" unpacking does.
    import struct, zlib
    h16, w16 = 9, 13
    v = rng.integers(0, 65536, (h16, w16, 4), dtype=np.uint16)
    raw = b"".join(b"\0" + v[y].astype(">u2").tobytes() for y in range(h16))
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)

    def add_case(name, src, data, rs_w, rs_h):
        """Writes data to src and records what PIL makes of it: NAME.rgb (convert("RGB")), NAME.rs
        (that resized bicubic to rs_w x rs_h) and the manifest line. Returns the RGB image."""
        open(src, "wb").write(data)
        rgb = Image.open(src).convert("RGB")
        open(os.path.join(out, f"{name}.rgb"), "wb").write(rgb.tobytes())
        open(os.path.join(out, f"{name}.rs"), "wb").write(rgb.resize((rs_w, rs_h), Image.BICUBIC).tobytes())
        man.write(f"{name} {src} {rgb.width} {rgb.height} {rs_w} {rs_h}\n")
        return rgb
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w16, h16, 16, 6, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    rgb = add_case("rgba16", os.path.join(out, "rgba16.src.png"), png, 20, 7)
    assert rgb.tobytes() == (v[:, :, :3] >> 8).astype(np.uint8).tobytes()

    # 16-bit grey, by hand too: PIL opens it as a 16-bit integer image and convert("RGB") clips
    # each value to 255 (not the high byte). Half the values below 256, so both sides show.
    hg, wg = 11, 17
    g = rng.integers(0, 65536, (hg, wg), dtype=np.uint16)
    g[:, ::2] = rng.integers(0, 256, (hg, (wg + 1) // 2), dtype=np.uint16)
    raw = b"".join(b"\0" + g[y].astype(">u2").tobytes() for y in range(hg))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", wg, hg, 16, 0, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    rgb = add_case("grey16", os.path.join(out, "grey16.src.png"), png, 24, 9)
    assert rgb.tobytes() == np.repeat(np.minimum(g, 255).astype(np.uint8)[:, :, None], 3, 2).tobytes()

    # Files whose header is broken (PIL refuses them all): the header probe that runs when the
    # dataset is scanned must refuse them too, not the decoder in the middle of training.
    rows = zlib.compress(b"\0" * (1 + 3 * 8) * 8)
    broken = {
        "depth3": chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 3, 2, 0, 0, 0)),
        "ihdr_crc": chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0))[:-1] + b"\0",
        "interlace2": chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 2)),
    }
    for name, ihdr in broken.items():
        src = os.path.join(out, f"broken_{name}.png")
        open(src, "wb").write(b"\x89PNG\r\n\x1a\n" + ihdr + chunk(b"IDAT", rows) + chunk(b"IEND", b""))
        try:
            Image.open(src).convert("RGB")
            raise SystemExit(f"{src}: PIL opens it")
        except (OSError, SyntaxError, ValueError):
            pass

    # A baseline JPEG whose scan is whole but whose end is cut (a segment after the scan, then
    # no EOI): PIL has every row when the data runs out and keeps the image. A progressive one
    # is read whole before its first row, so PIL refuses it cut anywhere, as the decoder must.
    for name, base, tail in (("jpeg_cut_after_scan", "jpeg_rgb", b"\xff\xfe\x00\x10cut"),
                             ("jpeg_grey_cut_after_scan", "jpeg_grey", b"\xff\xfe\x00\x10cut"),
                             ("jpeg_cut_in_dht_after_scan", "jpeg_rgb", b"\xff\xc4\x00")):
        whole = open(os.path.join(out, f"{base}.src.jpg"), "rb").read()
        assert whole[-2:] == b"\xff\xd9"
        rgb = add_case(name, os.path.join(out, f"{name}.src.jpg"), whole[:-2] + tail, 40, 40)
        assert rgb.tobytes() == Image.open(os.path.join(out, f"{base}.src.jpg")).convert("RGB").tobytes()
    whole = open(os.path.join(out, "jpeg_progressive_444.src.jpg"), "rb").read()
    src = os.path.join(out, "broken_jpeg_progressive_cut.jpg")
    open(src, "wb").write(whole[:-2] + b"\xff\xfe\x00\x10cut")
    try:
        Image.open(src).convert("RGB")
        raise SystemExit(f"{src}: PIL opens it")
    except OSError:
        pass

    # A palette shorter than the indexes used (some encoders write only the colours they think
    # are used): PIL's palette starts as a grey ramp, so index i past the end is (i, i, i).
    for name, depth, n_pal, (hs, ws) in (("palette_short4", 4, 5, (13, 19)), ("palette_short8", 8, 3, (10, 21))):
        idx = rng.integers(0, 1 << depth, (hs, ws), dtype=np.uint8)
        if depth == 4:
            idx = (idx[:, 0::2] << 4) | np.pad(idx[:, 1::2], ((0, 0), (0, ws % 2)))
        raw = b"".join(b"\0" + idx[y].tobytes() for y in range(hs))
        plte = rng.integers(0, 256, 3 * n_pal, dtype=np.uint8).tobytes()
        png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", ws, hs, depth, 3, 0, 0, 0))
        png += chunk(b"PLTE", plte) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
        add_case(name, os.path.join(out, f"{name}.src.png"), png, 32, 32)

    # Damage after the image data, as in files whose download stopped a few bytes short: PIL
    # reads a PNG only up to the end of its IDAT chunks and checks no IDAT/IEND CRC, so all of
    # these open. Each is a variant of rgb_odd (several IDAT chunks would change nothing).
    good = open(os.path.join(out, "rgb_odd.src.png"), "rb").read()
    last = good.rindex(b"IDAT")
    idat_end = last + 4 + struct.unpack(">I", good[last - 4:last])[0]  # end of the last IDAT's data
    bad_crc = bytearray(good)
    bad_crc[idat_end] ^= 0xFF
    first, zdata, pos = None, b"", 8
    while pos < len(good):  # the IDAT chunks' data, in order
        n, t = struct.unpack(">I4s", good[pos:pos + 8])
        if t == b"IDAT":
            first = pos if first is None else first
            zdata += good[pos + 8:pos + 8 + n]
        pos += 12 + n
    variants = {
        # a zlib stream without its checksum, then IEND: every row is there
        "png_zlib_stream_short": good[:first] + chunk(b"IDAT", zdata[:-4]) + chunk(b"IEND", b""),
        "png_no_iend": good[:-12],
        "png_cut_in_iend": good[:-6],
        "png_cut_in_idat_crc": good[:idat_end + 2],
        "png_cut_after_idat_data": good[:idat_end],
        "png_cut_in_zlib_checksum": good[:idat_end - 2],  # every row is there, not the adler32
        "png_bad_idat_crc": bytes(bad_crc),
        "png_bad_iend_crc": good[:-1] + bytes([good[-1] ^ 0xFF]),
    }
    for name, data in variants.items():
        add_case(name, os.path.join(out, f"{name}.src.png"), data, 40, 24)


def smart_resize(height, width, factor, min_pixels, max_pixels):
    if max(height, width) / min(height, width) > 200:
        return (-1, -1)
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


with open(os.path.join(out, "smart.txt"), "w") as f:
    sizes = [(480, 640), (224, 224), (1080, 1920), (48, 48), (16, 16), (80, 112), (1, 300), (1, 201)]
    sizes += [(int(h), int(w)) for h, w in rng.integers(1, 3000, (200, 2))]
    sizes += [(int(h), int(w)) for h, w in rng.integers(20, 400, (100, 2))]
    for h, w in sizes:
        for lo, hi in ((65536, 16777216), (4096, 16384), (3136, 12845056)):
            rh, rw = smart_resize(h, w, 32, lo, hi)
            f.write(f"{h} {w} {lo} {hi} {rh} {rw}\n")

# Patch flattening exactly as the HF processor code does it (reshape + transpose), on an
# image already at a multiple of 32, normalised with mean = std = 0.5.
H, W, P, T, M = 64, 96, 16, 2, 2
img = pattern(H, W, 3)
open(os.path.join(out, "patch_src.rgb"), "wb").write(img.tobytes())
x = (img.astype(np.float64) / 255.0 - 0.5) / 0.5
x = x.astype(np.float32).transpose(2, 0, 1)[None]  # [1, C, H, W]
x = np.concatenate([x, x], 0)  # T = 2 identical frames
gh, gw = H // P, W // P
x = x.reshape(1, T, 3, gh // M, M, P, gw // M, M, P)
x = x.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
x = x.reshape(gh * gw, 3 * T * P * P)
x.astype(np.float32).tofile(os.path.join(out, "patches.f32"))
with open(os.path.join(out, "patches.txt"), "w") as f:
    f.write(f"{H} {W} {gh * gw} {3 * T * P * P}\n")

# LLaMA-Factory's picture bounds before the processor (mm_plugin's _preprocess_image, transcribed:
# each side int()-truncated, PIL's default bicubic Image.resize), then the processor (smart_resize
# and a bicubic resize): lf.txt "name src max_px min_px proc_min proc_max pw ph rw rh" and NAME.lf,
# the bytes the patches are cut from.
def lf_prescale(img, max_px, min_px):
    if max_px and img.width * img.height > max_px:
        f = math.sqrt(max_px / (img.width * img.height))
        img = img.resize((int(img.width * f), int(img.height * f)))
    if min_px and img.width * img.height < min_px:
        f = math.sqrt(min_px / (img.width * img.height))
        img = img.resize((int(img.width * f), int(img.height * f)))
    return img


with open(os.path.join(out, "lf.txt"), "w") as f:
    lf_cases = [("lf_down", (300, 211), 20000, 0), ("lf_up", (37, 29), 0, 4000), ("lf_both_noop", (90, 120), 20000, 1000),
                ("lf_down_odd", (1001, 333), 65537, 1024), ("lf_up_then_proc_up", (13, 40), 0, 900),
                # min = max: the max bound's truncated sides fall under the min bound, a second PIL resize
                # (333x1001 -> 57x173 -> 57x174)
                ("lf_max_then_min", (1001, 333), 9999, 9999)]
    for name, (h, w), max_px, min_px in lf_cases:
        src = os.path.join(out, f"{name}.src.png")
        Image.fromarray(pattern(h, w, 3), "RGB").save(src)
        pre = lf_prescale(Image.open(src).convert("RGB"), max_px, min_px)
        lo, hi = 3136, 12845056
        rh, rw = smart_resize(pre.height, pre.width, 32, lo, hi)
        rs = pre.resize((rw, rh), Image.BICUBIC) if (rw, rh) != pre.size else pre
        open(os.path.join(out, f"{name}.lf"), "wb").write(rs.tobytes())
        f.write(f"{name} {src} {max_px} {min_px} {lo} {hi} {pre.width} {pre.height} {rw} {rh}\n")
