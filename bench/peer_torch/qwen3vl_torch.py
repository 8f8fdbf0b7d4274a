"""qwen3vl_torch.py - Qwen3-VL as a float32 torch.nn.Module for the PyTorch DDP peer.

Written from the architecture Hugging Face's Qwen3-VL implements, the way a PyTorch user would write
it for training on torch 1.13: nn.Linear / nn.LayerNorm / nn.Embedding with Hugging Face
parameter names (so tandem's checkpoint loads with load_state_dict(strict=True)), autograd
for the backward, and attention as explicit masked softmax (1.13 has no
scaled_dot_product_attention) computed per packed sample (text, causal) and per image frame
(vision, full), so no work is spent on pairs across samples.

Two choices keep the peer's work the same as tandem's, so both sides are credited the same
model FLOPs (tdm_model_flops):
  - the lm_head runs only over the rows whose target is counted (targets != -100), as
    tandem's fused loss does;
  - frozen parts get no gradient (requires_grad False), so autograd skips their backward.

The model consumes one micro-batch exactly as `tandem export-batches` writes it (see
load_batch below): packed tokens with cu_seqlens, the 3-axis position ids computed by
tandem's pipeline, targets already shifted, and the image patches.

The small helpers block_order and read_safetensors come from the independent float64
reference tests/model/ref_qwen3vl.py; everything else here is float32.
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "..", "tests", "model"))
import ref_qwen3vl as _ref  # noqa: E402  (sets float64 as the default dtype on import)

torch.set_default_dtype(torch.float32)
read_safetensors = _ref.read_safetensors
block_order = _ref.block_order


# ---- the exported micro-batch ------------------------------------------------------------

def load_batch(path, entry):
    """One file of `tandem export-batches` (layout in src/tools/cmd_export_batches.c):
    int32 cu_seqlens[n_seqs+1], input_ids[n], labels[n], targets[n], position_ids[3, n],
    image_grid_thw[n_images, 3], then float32 pixel_values[n_patches, patch_dim]."""
    raw = open(path, "rb").read()
    n, s, ni = entry["n_tokens"], entry["n_seqs"], entry["n_images"]
    npch, pd = entry["n_patches"], entry["patch_dim"]
    ints = s + 1 + 3 * n + 3 * n + 3 * ni
    if len(raw) != 4 * ints + 4 * npch * pd:
        raise ValueError("%s: %d bytes, index.json's counts say %d" % (path, len(raw), 4 * ints + 4 * npch * pd))
    a = np.frombuffer(raw, dtype="<i4", count=ints)
    o = 0

    def take(k):
        nonlocal o
        o += k
        return a[o - k:o]

    b = {"cu_seqlens": take(s + 1).astype(np.int64), "input_ids": take(n).astype(np.int64),
         "labels": take(n).astype(np.int64), "targets": take(n).astype(np.int64),
         "position_ids": take(3 * n).reshape(3, n).astype(np.int64),
         "image_grid_thw": take(3 * ni).reshape(ni, 3).astype(np.int64)}
    b["pixel_values"] = np.frombuffer(raw, dtype="<f4", offset=4 * ints).reshape(npch, pd).copy()
    return b


# ---- modules -----------------------------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class _Node(nn.Module):
    """A named container, so parameter names follow Hugging Face's layout."""


def _linear(i, o, bias):
    return nn.Linear(i, o, bias=bias)


def _softmax_attention(q, k, v, mask):
    """q [nh, n, d], k/v [nh, n, d]; mask [n, n] bool (True = attend) or None."""
    s = torch.matmul(q, k.transpose(1, 2)) * (1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def _rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat([-x[..., d:], x[..., :d]], dim=-1)


class VisionBlock(nn.Module):
    def __init__(self, D, Iv, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(D, eps=1e-6)
        self.norm2 = nn.LayerNorm(D, eps=1e-6)
        self.attn = _Node()
        self.attn.qkv = _linear(D, 3 * D, True)
        self.attn.proj = _linear(D, D, True)
        self.mlp = _Node()
        self.mlp.linear_fc1 = _linear(D, Iv, True)
        self.mlp.linear_fc2 = _linear(Iv, D, True)

    def forward(self, x, cos, sin, frames):
        N, D = x.shape
        h, hv = self.heads, D // self.heads
        qkv = self.attn.qkv(self.norm1(x)).view(N, 3, h, hv)
        q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        outs = []
        for a, b in frames:  # full attention inside each image frame
            outs.append(_softmax_attention(q[a:b].transpose(0, 1), k[a:b].transpose(0, 1),
                                           v[a:b].transpose(0, 1), None).transpose(0, 1))
        o = torch.cat(outs).reshape(N, D)
        x = x + self.attn.proj(o)
        return x + self.mlp.linear_fc2(F.gelu(self.mlp.linear_fc1(self.norm2(x)), approximate="tanh"))


class Merger(nn.Module):
    def __init__(self, D, sm2, O, post):
        super().__init__()
        H4 = D * sm2
        self.post, self.H4 = post, H4
        self.norm = nn.LayerNorm(H4 if post else D, eps=1e-6)
        self.linear_fc1 = _linear(H4, H4, True)
        self.linear_fc2 = _linear(H4, O, True)

    def forward(self, x):
        y = self.norm(x.reshape(-1, self.H4)) if self.post else self.norm(x).reshape(-1, self.H4)
        return self.linear_fc2(F.gelu(self.linear_fc1(y)))


class Vision(nn.Module):
    def __init__(self, v):
        super().__init__()
        self.v = v
        D = v["hidden_size"]
        self.patch_embed = _Node()
        self.patch_embed.proj = _Node()
        pd = v["in_channels"] * v["temporal_patch_size"] * v["patch_size"] ** 2
        self.patch_embed.proj.weight = nn.Parameter(torch.zeros(D, v["in_channels"], v["temporal_patch_size"],
                                                                v["patch_size"], v["patch_size"]))
        self.patch_embed.proj.bias = nn.Parameter(torch.zeros(D))
        self.pd = pd
        self.pos_embed = nn.Embedding(v["num_position_embeddings"], D)
        self.blocks = nn.ModuleList(VisionBlock(D, v["intermediate_size"], v["num_heads"]) for _ in range(v["depth"]))
        sm2 = v["spatial_merge_size"] ** 2
        self.merger = Merger(D, sm2, v["out_hidden_size"], False)
        self.deepstack_merger_list = nn.ModuleList(Merger(D, sm2, v["out_hidden_size"], True)
                                                   for _ in v["deepstack_visual_indexes"])

    def geometry(self, grids):
        """Per patch row, in merge-block order: the 4 bilinear taps into the position table
        (indices [N, 4], weights [N, 4]), the rotary cos/sin [N, 1, head_dim] and the frames."""
        v = self.v
        D, heads, sm = v["hidden_size"], v["num_heads"], v["spatial_merge_size"]
        hv = D // heads
        S = int(round(math.sqrt(v["num_position_embeddings"])))
        inv = 1.0 / (10000.0 ** (torch.arange(0, hv // 2, 2, dtype=torch.float64) / (hv // 2)))
        idx, wts, ang, frames = [], [], [], []
        row = 0
        for (t, gh, gw) in grids:
            ys = torch.linspace(0, S - 1, gh, dtype=torch.float32).double()
            xs = torch.linspace(0, S - 1, gw, dtype=torch.float32).double()
            y0, x0 = ys.floor().long(), xs.floor().long()
            y1, x1 = (y0 + 1).clamp(max=S - 1), (x0 + 1).clamp(max=S - 1)
            dy, dx = (ys - y0)[:, None], (xs - x0)[None, :]
            i4 = torch.stack([y0[:, None] * S + x0[None, :], y0[:, None] * S + x1[None, :],
                              y1[:, None] * S + x0[None, :], y1[:, None] * S + x1[None, :]], dim=-1)
            w4 = torch.stack([(1 - dy) * (1 - dx), (1 - dy) * dx, dy * (1 - dx), dy * dx], dim=-1)
            rr, cc = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
            rcb = block_order(torch.stack([rr, cc], dim=-1), gh, gw, sm).double()
            for _ in range(t):
                idx.append(block_order(i4, gh, gw, sm))
                wts.append(block_order(w4, gh, gw, sm))
                ang.append(torch.cat([rcb[:, :1] * inv, rcb[:, 1:] * inv], dim=-1))
                frames.append((row, row + gh * gw))
                row += gh * gw
        a = torch.cat(ang)
        emb = torch.cat([a, a], dim=-1)[:, None, :]
        return torch.cat(idx), torch.cat(wts).float(), emb.cos().float(), emb.sin().float(), frames

    def forward(self, pixels, grids):
        idx, wts, cos, sin, frames = self.geometry(grids)
        w = self.patch_embed.proj.weight.reshape(self.patch_embed.proj.weight.shape[0], -1)
        x = F.linear(pixels, w, self.patch_embed.proj.bias)
        x = x + (self.pos_embed.weight[idx] * wts[..., None]).sum(1)
        taps = {}
        for i, blk in enumerate(self.blocks):
            x = blk(x, cos, sin, frames)
            taps[i] = x
        feats = [m(taps[k]) for m, k in zip(self.deepstack_merger_list, self.v["deepstack_visual_indexes"])]
        return self.merger(x), feats


class DecoderLayer(nn.Module):
    def __init__(self, t):
        super().__init__()
        h, hd, eps = t["hidden_size"], t["head_dim"], t["rms_norm_eps"]
        self.nh, self.nkv, self.hd = t["num_attention_heads"], t["num_key_value_heads"], hd
        self.input_layernorm = RMSNorm(h, eps)
        self.post_attention_layernorm = RMSNorm(h, eps)
        self.self_attn = _Node()
        self.self_attn.q_proj = _linear(h, self.nh * hd, False)
        self.self_attn.k_proj = _linear(h, self.nkv * hd, False)
        self.self_attn.v_proj = _linear(h, self.nkv * hd, False)
        self.self_attn.o_proj = _linear(self.nh * hd, h, False)
        self.self_attn.q_norm = RMSNorm(hd, eps)
        self.self_attn.k_norm = RMSNorm(hd, eps)
        self.mlp = _Node()
        self.mlp.gate_proj = _linear(h, t["intermediate_size"], False)
        self.mlp.up_proj = _linear(h, t["intermediate_size"], False)
        self.mlp.down_proj = _linear(t["intermediate_size"], h, False)

    def forward(self, x, cos, sin, segs, masks):
        T = x.shape[0]
        a = self.self_attn
        y = self.input_layernorm(x)
        q = a.q_norm(a.q_proj(y).view(T, self.nh, self.hd))
        k = a.k_norm(a.k_proj(y).view(T, self.nkv, self.hd))
        v = a.v_proj(y).view(T, self.nkv, self.hd)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        rep = self.nh // self.nkv
        outs = []
        for (s, e), m in zip(segs, masks):  # causal attention inside each packed sample
            qs = q[s:e].transpose(0, 1)
            ks = k[s:e].transpose(0, 1).repeat_interleave(rep, dim=0)
            vs = v[s:e].transpose(0, 1).repeat_interleave(rep, dim=0)
            outs.append(_softmax_attention(qs, ks, vs, m).transpose(0, 1))
        x = x + a.o_proj(torch.cat(outs).reshape(T, self.nh * self.hd))
        y = self.post_attention_layernorm(x)
        return x + self.mlp.down_proj(F.silu(self.mlp.gate_proj(y)) * self.mlp.up_proj(y))


class TextModel(nn.Module):
    def __init__(self, t):
        super().__init__()
        self.t = t
        self.embed_tokens = nn.Embedding(t["vocab_size"], t["hidden_size"])
        self.layers = nn.ModuleList(DecoderLayer(t) for _ in range(t["num_hidden_layers"]))
        self.norm = RMSNorm(t["hidden_size"], t["rms_norm_eps"])

    def rope(self, pos):
        """Interleaved M-RoPE (spec §4): cos/sin [T, 1, head_dim] from position ids [3, T]."""
        t = self.t
        hd, sec = t["head_dim"], t["rope_scaling"]["mrope_section"]
        inv = 1.0 / (t["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        f = torch.from_numpy(pos).double()[:, :, None] * inv
        Fq = f[0].clone()
        i = torch.arange(hd // 2)
        hm = (i % 3 == 1) & (i < 3 * sec[1])
        wm = (i % 3 == 2) & (i < 3 * sec[2])
        Fq[:, hm] = f[1][:, hm]
        Fq[:, wm] = f[2][:, wm]
        emb = torch.cat([Fq, Fq], dim=-1)[:, None, :]
        return emb.cos().float(), emb.sin().float()


class Qwen3VL(nn.Module):
    """forward(batch) -> (loss_sum, counted tokens): the summed cross entropy of one micro-batch."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = _Node()
        self.model.visual = Vision(cfg["vision_config"])
        self.model.language_model = TextModel(cfg["text_config"])
        t = cfg["text_config"]
        if cfg.get("tie_word_embeddings"):
            raise ValueError("the peer handles untied lm_head only (as configs/tiny)")
        self.lm_head = _linear(t["hidden_size"], t["vocab_size"], False)
        self._masks = {}

    def causal(self, n):
        m = self._masks.get(n)
        if m is None:
            m = self._masks[n] = torch.ones(n, n, dtype=torch.bool).tril()
        return m

    def forward(self, b):
        lm = self.model.language_model
        ids = torch.from_numpy(b["input_ids"])
        x = lm.embed_tokens(ids)
        img = torch.nonzero(ids == self.cfg["image_token_id"]).squeeze(1)
        feats = []
        if len(b["image_grid_thw"]) > 0:
            grids = [tuple(int(a) for a in g) for g in b["image_grid_thw"]]
            vis, feats = self.model.visual(torch.from_numpy(b["pixel_values"]), grids)
            x = x.index_copy(0, img, vis)
        cos, sin = lm.rope(b["position_ids"])
        cu = b["cu_seqlens"]
        segs = [(int(cu[s]), int(cu[s + 1])) for s in range(len(cu) - 1)]
        masks = [self.causal(e - s) for s, e in segs]
        for l, layer in enumerate(lm.layers):
            x = layer(x, cos, sin, segs, masks)
            if l < len(feats):
                x = x.index_add(0, img, feats[l])
        tg = torch.from_numpy(b["targets"])
        keep = torch.nonzero(tg != -100).squeeze(1)
        logits = self.lm_head(lm.norm(x[keep]))
        return F.cross_entropy(logits, tg[keep], reduction="sum"), int(keep.numel())


def build(config_path, weights_path, freeze):
    """The model with tandem's weights; freeze = dict(vision, projector, llm, lm_head) -> bool."""
    cfg = json.load(open(config_path))
    m = Qwen3VL(cfg)
    W = read_safetensors(weights_path)
    m.load_state_dict({k: torch.from_numpy(a) for k, a in W.items()}, strict=True)
    for name, p in m.named_parameters():
        if name.startswith("model.visual.merger.") or name.startswith("model.visual.deepstack_merger_list."):
            p.requires_grad_(not freeze["projector"])
        elif name.startswith("model.visual."):
            p.requires_grad_(not freeze["vision"])
        elif name.startswith("model.language_model."):
            p.requires_grad_(not freeze["llm"])
        else:
            p.requires_grad_(not freeze["lm_head"])
    return m
