#!/usr/bin/python3
"""ref_qwen3vl.py - an independent PyTorch reference of Qwen3-VL, written from
the architecture Hugging Face's Qwen3-VL implements, for the gradient parity test.

It computes everything in float64 with autograd, with attention written out as
explicit masked softmax (torch 1.13 has no scaled_dot_product_attention), so it shares
no code and no structure with the C implementation (which works in fp32 with flash
attention and a hand-written backward).

    ref_qwen3vl.py DIR [--tol 1e-4]

DIR holds what tests/model/test_parity_dump --dump wrote: config.json (Hugging Face
layout), case.json (freeze flags), weights.safetensors, batch.safetensors and
out.safetensors (the C loss, logits when present, and gradients; `tandem dump-grads
--save-inputs DIR` writes the same layout, integers stored as F32). The script checks
  - the parameter names and shapes against the list this file builds from config.json,
  - the labels -> targets shift and the 3-axis position ids (recomputed here, spec §4-5),
  - loss, logits, and every gradient: max|c - ref| / max|ref| per tensor <= tol,
  - that exactly the trainable tensors (from the freeze flags) have gradients,
and prints one line per check and "N passed, N failed".
"""
import json
import math
import struct
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)

# ---- a tiny safetensors reader ---------------------------------------------------------

_DT = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        arr = np.frombuffer(raw[base + b:base + e], dtype=_DT[info["dtype"]]).reshape(info["shape"])
        out[name] = arr.copy()
    return out


# ---- the expected parameter list (spec §6) ----------------------------------------------

def expected_params(cfg):
    v, t = cfg["vision_config"], cfg["text_config"]
    D, Iv, O = v["hidden_size"], v["intermediate_size"], v["out_hidden_size"]
    sm = v["spatial_merge_size"]
    H4 = D * sm * sm
    h, I, V, hd = t["hidden_size"], t["intermediate_size"], t["vocab_size"], t["head_dim"]
    nh, nkv = t["num_attention_heads"], t["num_key_value_heads"]
    p = []
    pv = "model.visual."
    p.append((pv + "patch_embed.proj.weight",
              [D, v["in_channels"], v["temporal_patch_size"], v["patch_size"], v["patch_size"]]))
    p.append((pv + "patch_embed.proj.bias", [D]))
    p.append((pv + "pos_embed.weight", [v["num_position_embeddings"], D]))
    for i in range(v["depth"]):
        b = pv + "blocks.%d." % i
        p += [(b + "norm1.weight", [D]), (b + "norm1.bias", [D]), (b + "norm2.weight", [D]), (b + "norm2.bias", [D]),
              (b + "attn.qkv.weight", [3 * D, D]), (b + "attn.qkv.bias", [3 * D]),
              (b + "attn.proj.weight", [D, D]), (b + "attn.proj.bias", [D]),
              (b + "mlp.linear_fc1.weight", [Iv, D]), (b + "mlp.linear_fc1.bias", [Iv]),
              (b + "mlp.linear_fc2.weight", [D, Iv]), (b + "mlp.linear_fc2.bias", [D])]

    def merger(pre, nd):
        return [(pre + "norm.weight", [nd]), (pre + "norm.bias", [nd]),
                (pre + "linear_fc1.weight", [H4, H4]), (pre + "linear_fc1.bias", [H4]),
                (pre + "linear_fc2.weight", [O, H4]), (pre + "linear_fc2.bias", [O])]

    p += merger(pv + "merger.", D)
    for j in range(len(v["deepstack_visual_indexes"])):
        p += merger(pv + "deepstack_merger_list.%d." % j, H4)
    pt = "model.language_model."
    p.append((pt + "embed_tokens.weight", [V, h]))
    for l in range(t["num_hidden_layers"]):
        b = pt + "layers.%d." % l
        p += [(b + "input_layernorm.weight", [h]),
              (b + "self_attn.q_proj.weight", [nh * hd, h]), (b + "self_attn.k_proj.weight", [nkv * hd, h]),
              (b + "self_attn.v_proj.weight", [nkv * hd, h]), (b + "self_attn.o_proj.weight", [h, nh * hd]),
              (b + "self_attn.q_norm.weight", [hd]), (b + "self_attn.k_norm.weight", [hd]),
              (b + "post_attention_layernorm.weight", [h]),
              (b + "mlp.gate_proj.weight", [I, h]), (b + "mlp.up_proj.weight", [I, h]),
              (b + "mlp.down_proj.weight", [h, I])]
    p.append((pt + "norm.weight", [h]))
    if not cfg["tie_word_embeddings"]:
        p.append(("lm_head.weight", [V, h]))
    return p


def trainable(name, case, tied):
    if name.startswith("model.visual.merger.") or name.startswith("model.visual.deepstack_merger_list."):
        return not case["freeze_projector"]
    if name.startswith("model.visual."):
        return not case["freeze_vision"]
    if name.startswith("model.language_model."):
        return not case["freeze_llm"]
    if name == "lm_head.weight":
        return not case["freeze_lm_head"]
    raise ValueError(name)


# ---- building blocks ---------------------------------------------------------------------

def layer_norm(x, w, b, eps=1e-6):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat([-x[..., d:], x[..., :d]], dim=-1)


def attention(q, k, v, allowed):
    """q [S, nh, d], k/v [S, nkv, d], allowed [S, S] bool. GQA by repeating kv heads."""
    nh, nkv, d = q.shape[1], k.shape[1], q.shape[2]
    rep = nh // nkv
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = torch.einsum("ihd,jhd->hij", q, k) / math.sqrt(d)
    s = s.masked_fill(~allowed.unsqueeze(0), float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.einsum("hij,jhd->ihd", p, v)


# ---- vision (spec §3) --------------------------------------------------------------------

def block_order(a, gh, gw, sm):
    """[gh, gw, ...] in raster order -> [gh*gw, ...] in merge-block order."""
    rest = list(a.shape[2:])
    a = a.reshape([gh // sm, sm, gw // sm, sm] + rest)
    a = a.permute([0, 2, 1, 3] + list(range(4, 4 + len(rest))))
    return a.reshape([gh * gw] + rest)


def vision(W, v, pixels, grids):
    D, heads = v["hidden_size"], v["num_heads"]
    hv = D // heads
    sm = v["spatial_merge_size"]
    S = int(round(math.sqrt(v["num_position_embeddings"])))
    pw = W["model.visual.patch_embed.proj.weight"]
    x = pixels @ pw.reshape(D, -1).t() + W["model.visual.patch_embed.proj.bias"]

    # position embedding, rotary angles and the per-frame mask, image by image
    E = W["model.visual.pos_embed.weight"]
    pos, angles, seg = [], [], []
    inv = 1.0 / (10000.0 ** (torch.arange(0, hv // 2, 2, dtype=torch.float64) / (hv // 2)))
    fid = 0
    for (t, gh, gw) in grids:
        ys = torch.linspace(0, S - 1, gh, dtype=torch.float32).double()
        xs = torch.linspace(0, S - 1, gw, dtype=torch.float32).double()
        y0, x0 = ys.floor().long(), xs.floor().long()
        y1, x1 = (y0 + 1).clamp(max=S - 1), (x0 + 1).clamp(max=S - 1)
        dy, dx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
        grid = ((1 - dy) * (1 - dx) * E[y0[:, None] * S + x0[None, :]] + (1 - dy) * dx * E[y0[:, None] * S + x1[None, :]]
                + dy * (1 - dx) * E[y1[:, None] * S + x0[None, :]] + dy * dx * E[y1[:, None] * S + x1[None, :]])
        rr, cc = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
        rc = torch.stack([rr, cc], dim=-1)
        for _ in range(t):
            pos.append(block_order(grid, gh, gw, sm))
            rcb = block_order(rc, gh, gw, sm).double()
            angles.append(torch.cat([rcb[:, :1] * inv, rcb[:, 1:] * inv], dim=-1))
            seg.append(torch.full((gh * gw,), fid))
            fid += 1
    x = x + torch.cat(pos)
    a = torch.cat(angles)
    emb = torch.cat([a, a], dim=-1)[:, None, :]
    cos, sin = emb.cos(), emb.sin()
    seg = torch.cat(seg)
    allowed = seg[:, None] == seg[None, :]
    N = x.shape[0]

    taps = {}
    for i in range(v["depth"]):
        b = "model.visual.blocks.%d." % i
        y = layer_norm(x, W[b + "norm1.weight"], W[b + "norm1.bias"])
        qkv = (y @ W[b + "attn.qkv.weight"].t() + W[b + "attn.qkv.bias"]).reshape(N, 3, heads, hv)
        q, k, vv = qkv[:, 0], qkv[:, 1], qkv[:, 2]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        o = attention(q, k, vv, allowed).reshape(N, D)
        x = x + o @ W[b + "attn.proj.weight"].t() + W[b + "attn.proj.bias"]
        y = layer_norm(x, W[b + "norm2.weight"], W[b + "norm2.bias"])
        y = gelu_tanh(y @ W[b + "mlp.linear_fc1.weight"].t() + W[b + "mlp.linear_fc1.bias"])
        x = x + y @ W[b + "mlp.linear_fc2.weight"].t() + W[b + "mlp.linear_fc2.bias"]
        taps[i] = x

    def merger(pre, inp, post):
        if post:
            y = layer_norm(inp.reshape(-1, D * sm * sm), W[pre + "norm.weight"], W[pre + "norm.bias"])
        else:
            y = layer_norm(inp, W[pre + "norm.weight"], W[pre + "norm.bias"]).reshape(-1, D * sm * sm)
        y = gelu_erf(y @ W[pre + "linear_fc1.weight"].t() + W[pre + "linear_fc1.bias"])
        return y @ W[pre + "linear_fc2.weight"].t() + W[pre + "linear_fc2.bias"]

    out = merger("model.visual.merger.", x, False)
    feats = [merger("model.visual.deepstack_merger_list.%d." % j, taps[k], True)
             for j, k in enumerate(v["deepstack_visual_indexes"])]
    return out, feats


# ---- text (spec §4) ------------------------------------------------------------------------

def rope_index(ids, cu, grids, cfg):
    """3-axis positions per get_rope_index, written from the spec's prose."""
    sm = cfg["vision_config"]["spatial_merge_size"]
    img_tok = cfg["image_token_id"]
    T = len(ids)
    pos = np.zeros((3, T), dtype=np.int64)
    gi = 0
    for s in range(len(cu) - 1):
        i, nxt = cu[s], 0
        while i < cu[s + 1]:
            if ids[i] == img_tok:
                _, gh, gw = grids[gi]
                gi += 1
                H, W = gh // sm, gw // sm
                for r in range(H):
                    for c in range(W):
                        pos[:, i] = (nxt, nxt + r, nxt + c)
                        i += 1
                nxt = nxt + max(H, W)
            else:
                pos[:, i] = nxt
                nxt += 1
                i += 1
    return pos


def mrope_cos_sin(pos, t):
    hd = t["head_dim"]
    sec = t["rope_scaling"]["mrope_section"]
    inv = 1.0 / (t["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    f = torch.tensor(pos, dtype=torch.float64)[:, :, None] * inv  # [3, T, hd/2]
    F = f[0].clone()
    idx = torch.arange(hd // 2)
    hmask = (idx % 3 == 1) & (idx < 3 * sec[1])
    wmask = (idx % 3 == 2) & (idx < 3 * sec[2])
    F[:, hmask] = f[1][:, hmask]
    F[:, wmask] = f[2][:, wmask]
    emb = torch.cat([F, F], dim=-1)[:, None, :]
    return emb.cos(), emb.sin()


def forward(W, cfg, batch):
    v, t = cfg["vision_config"], cfg["text_config"]
    ids = batch["input_ids"].astype(np.int64)
    cu = batch["cu_seqlens"].astype(np.int64)
    grids = [tuple(int(a) for a in g) for g in batch["image_grid_thw"]]
    T = len(ids)
    h, nh, nkv, hd = t["hidden_size"], t["num_attention_heads"], t["num_key_value_heads"], t["head_dim"]
    eps = t["rms_norm_eps"]
    pt = "model.language_model."
    # HF builds nn.Embedding(vocab, h, padding_idx=text_config.pad_token_id): the lookup of that
    # row passes no gradient back to it (the top-level pad_token_id does not count)
    x = torch.nn.functional.embedding(torch.tensor(ids), W[pt + "embed_tokens.weight"],
                                      padding_idx=t.get("pad_token_id"))
    img = torch.tensor(ids == cfg["image_token_id"])
    feats = []
    if len(grids) > 0:
        vis, feats = vision(W, v, torch.tensor(batch["pixel_values"]).double(), grids)
        x = x.masked_scatter(img[:, None], vis)
    pos = rope_index(ids, cu, grids, cfg)
    cos, sin = mrope_cos_sin(pos, t)
    seg = torch.zeros(T, dtype=torch.long)
    for s in range(len(cu) - 1):
        seg[cu[s]:cu[s + 1]] = s
    ar = torch.arange(T)
    allowed = (seg[:, None] == seg[None, :]) & (ar[None, :] <= ar[:, None])
    for l in range(t["num_hidden_layers"]):
        b = pt + "layers.%d." % l
        y = rms_norm(x, W[b + "input_layernorm.weight"], eps)
        q = (y @ W[b + "self_attn.q_proj.weight"].t()).reshape(T, nh, hd)
        k = (y @ W[b + "self_attn.k_proj.weight"].t()).reshape(T, nkv, hd)
        vv = (y @ W[b + "self_attn.v_proj.weight"].t()).reshape(T, nkv, hd)
        q = rms_norm(q, W[b + "self_attn.q_norm.weight"], eps)
        k = rms_norm(k, W[b + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        o = attention(q, k, vv, allowed).reshape(T, nh * hd)
        x = x + o @ W[b + "self_attn.o_proj.weight"].t()
        y = rms_norm(x, W[b + "post_attention_layernorm.weight"], eps)
        g = y @ W[b + "mlp.gate_proj.weight"].t()
        u = y @ W[b + "mlp.up_proj.weight"].t()
        x = x + (g * torch.sigmoid(g) * u) @ W[b + "mlp.down_proj.weight"].t()
        if l < len(feats):
            x = x.clone()
            x[img] = x[img] + feats[l]
    x = rms_norm(x, W[pt + "norm.weight"], eps)
    head = W[pt + "embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return x @ head.t(), pos


def shifted_targets(labels, cu):
    tg = np.full_like(labels, -100)
    for s in range(len(cu) - 1):
        a, b = cu[s], cu[s + 1]
        tg[a:b - 1] = labels[a + 1:b]
    return tg


def main():
    d = sys.argv[1]
    tol = float(sys.argv[sys.argv.index("--tol") + 1]) if "--tol" in sys.argv else 1e-4
    cfg = json.load(open(d + "/config.json"))
    case = json.load(open(d + "/case.json"))
    Wnp = read_safetensors(d + "/weights.safetensors")
    batch = read_safetensors(d + "/batch.safetensors")
    out = read_safetensors(d + "/out.safetensors")
    tied = cfg["tie_word_embeddings"]
    passed = failed = 0
    worst = 0.0

    def check(ok, what):
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print("  FAIL %s: %s" % (case["name"], what))

    exp = expected_params(cfg)
    got = [(k, list(a.shape)) for k, a in Wnp.items()]
    check(sorted(got) == sorted(exp), "parameter names/shapes differ from the spec's list: %s" %
          sorted(set(map(str, got)) ^ set(map(str, exp)))[:6])

    W = {k: torch.tensor(a).double().requires_grad_(trainable(k, case, tied)) for k, a in Wnp.items()}
    logits, pos = forward(W, cfg, batch)
    check(np.array_equal(pos, batch["position_ids"].astype(np.int64)), "position_ids differ from get_rope_index")
    tg = shifted_targets(batch["labels"].astype(np.int64), batch["cu_seqlens"].astype(np.int64))
    check(np.array_equal(tg, batch["targets"].astype(np.int64)), "targets are not the shifted labels")
    tgt = torch.tensor(tg)
    keep = tgt != -100
    lp = torch.log_softmax(logits[keep], dim=-1)
    nll = -lp.gather(1, tgt[keep][:, None]).squeeze(1)
    loss_sum = nll.sum()
    count = int(keep.sum())
    loss = loss_sum / count
    if any(w.requires_grad for w in W.values()):
        loss.backward()

    def rel(c, r):
        r = np.asarray(r, dtype=np.float64)
        den = np.abs(r).max()
        return float(np.abs(np.asarray(c, dtype=np.float64) - r).max() / (den if den > 0 else 1.0))

    check(int(out["tokens"][0]) == count, "tokens %d vs %d" % (out["tokens"][0], count))
    e = abs(out["loss_sum"][0] - loss_sum.item()) / abs(loss_sum.item())
    worst = max(worst, e)
    check(e <= tol, "loss_sum %.9g vs %.9g (rel %.2e)" % (out["loss_sum"][0], loss_sum.item(), e))
    if "logits" in out:
        e = rel(out["logits"], logits.detach().numpy())
        worst = max(worst, e)
        check(e <= tol, "logits rel err %.2e" % e)
    names_c = sorted(k[5:] for k in out if k.startswith("grad."))
    names_r = sorted(k for k, w in W.items() if w.requires_grad)
    check(names_c == names_r, "trainable sets differ: C-only %s, reference-only %s" %
          (sorted(set(names_c) - set(names_r))[:4], sorted(set(names_r) - set(names_c))[:4]))
    gworst, gname = 0.0, ""
    for k in names_r:
        if "grad." + k not in out:
            continue
        ref = W[k].grad.numpy() if W[k].grad is not None else np.zeros(W[k].shape)
        e = rel(out["grad." + k], ref)
        if e > gworst:
            gworst, gname = e, k
        check(e <= tol, "grad %s rel err %.2e" % (k, e))
    worst = max(worst, gworst)
    print("%s: loss %.9g, %d tokens, %d gradients, worst rel err %.2e (%s)" %
          (case["name"], loss.item(), count, len(names_r), worst, gname or "loss/logits"))
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
