/* vision.c - the Qwen3-VL vision tower forward and backward: patch embedding plus the
 * interpolated position table, ViT blocks (LayerNorm, 2D RoPE attention inside each
 * image, GELU-tanh MLP), the final patch merger and the DeepStack mergers that tap
 * intermediate blocks.
 *
 * Forward runs units in registration order (patch_embed, blocks, merger, DeepStack
 * mergers), so param_needed fires in table order. The DeepStack mergers run after the
 * last block: their inputs (the tapped block outputs) are saved block inputs anyway.
 * Backward runs the mergers first (their gradients come from the decoder), then the
 * blocks in reverse, adding each DeepStack merger's input gradient at its tap.
 */
#include <math.h>
#include <string.h>

#include "core/clock.h"
#include "kernels/kernels.h"
#include "model/qwen3vl_impl.h"
#include "prof/prof.h"

static void add_into(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

/* The output of block k: the next block's saved input, or the tower output. */
static float *block_output(tdm_model *m, int k) {
    return k + 1 < m->cfg.vision.depth ? m->a.blk[k + 1].x : m->a.vis_out;
}

static void merger_forward(tdm_model *m, const merger_ix *ix, merger_act *ma, const float *in, int postshuffle, int N) {
    const tdm_vision_config *vc = &m->cfg.vision;
    int sm2 = tdm_merge_rows(&m->cfg), D = vc->hidden_size, H4 = sm2 * D, M = N / sm2, O = vc->out_hidden_size;
    /* [N,D] and [M,H4] are the same memory: sm^2 consecutive patch rows form one block,
     * so the norm before the shuffle (final merger) and after it (DeepStack) differ only
     * in the row width they normalise over */
    int ln_rows = postshuffle ? M : N, ln_width = postshuffle ? H4 : D;
    TDM_KERNEL("layernorm", tdm_layernorm_forward(ma->ln, ma->mean, ma->rstd, in, tdm_model_w(m, ix->norm_w),
                                                  tdm_model_w(m, ix->norm_b), ln_rows, ln_width, 1e-6f));
    TDM_KERNEL("linear",
               tdm_linear_forward(ma->fc1, ma->ln, tdm_model_w(m, ix->fc1_w), tdm_model_w(m, ix->fc1_b), M, H4, H4));
    TDM_KERNEL("gelu_erf", tdm_gelu_erf_forward(ma->act, ma->fc1, (int64_t)M * H4));
    TDM_KERNEL("linear",
               tdm_linear_forward(ma->out, ma->act, tdm_model_w(m, ix->fc2_w), tdm_model_w(m, ix->fc2_b), M, H4, O));
}

/* dout [M,O] -> weight gradients (when the projector trains) and, when din != NULL,
 * the gradient of the merger input [N,D] (overwritten). */
static void merger_backward(tdm_model *m, const merger_ix *ix, merger_act *ma, const float *in, const float *dout,
                            float *din, int postshuffle, int N) {
    const tdm_vision_config *vc = &m->cfg.vision;
    model_acts *a = &m->a;
    int sm2 = tdm_merge_rows(&m->cfg), D = vc->hidden_size, H4 = sm2 * D, M = N / sm2, O = vc->out_hidden_size;
    TDM_KERNEL("linear_bw", tdm_linear_backward(a->mdact, tdm_model_gradp(m, ix->fc2_w), tdm_model_gradp(m, ix->fc2_b),
                                                dout, ma->act, tdm_model_w(m, ix->fc2_w), M, H4, O));
    tdm_model_grad_ready(m, ix->fc2_w);
    tdm_model_grad_ready(m, ix->fc2_b);
    TDM_KERNEL("gelu_erf_bw", tdm_gelu_erf_backward(a->mdfc1, a->mdact, ma->fc1, (int64_t)M * H4));
    TDM_KERNEL("linear_bw", tdm_linear_backward(a->mdln, tdm_model_gradp(m, ix->fc1_w), tdm_model_gradp(m, ix->fc1_b),
                                                a->mdfc1, ma->ln, tdm_model_w(m, ix->fc1_w), M, H4, H4));
    tdm_model_grad_ready(m, ix->fc1_w);
    tdm_model_grad_ready(m, ix->fc1_b);
    float *dw = tdm_model_gradp(m, ix->norm_w), *db = tdm_model_gradp(m, ix->norm_b);
    int ln_rows = postshuffle ? M : N, ln_width = postshuffle ? H4 : D;
    if (din || dw || db)
        TDM_KERNEL("layernorm_bw", tdm_layernorm_backward(din, dw, db, a->mdln, in, ma->mean, ma->rstd,
                                                          tdm_model_w(m, ix->norm_w), ln_rows, ln_width));
    tdm_model_grad_ready(m, ix->norm_w);
    tdm_model_grad_ready(m, ix->norm_b);
}

static void block_forward(tdm_model *m, int i, float *out, int nseg) {
    const tdm_vision_config *vc = &m->cfg.vision;
    model_acts *a = &m->a;
    vis_block_act *b = &a->blk[i];
    const vis_block_ix *ix = &m->vb[i];
    int n = a->vis_cu[nseg], D = vc->hidden_size, Iv = vc->intermediate_size, heads = vc->num_heads, hv = D / heads;
    TDM_KERNEL("layernorm", tdm_layernorm_forward(b->ln1, b->ln1_mean, b->ln1_rstd, b->x, tdm_model_w(m, ix->norm1_w),
                                                  tdm_model_w(m, ix->norm1_b), n, D, 1e-6f));
    TDM_KERNEL("linear", tdm_linear_forward(a->qkv_tmp, b->ln1, tdm_model_w(m, ix->qkv_w), tdm_model_w(m, ix->qkv_b), n,
                                            D, 3 * D));
    /* qkv rows are [q | k | v]; split them into three [n, heads, hv] tensors */
    for (int t = 0; t < n; t++) {
        const float *src = a->qkv_tmp + (int64_t)t * 3 * D;
        memcpy(b->q + (int64_t)t * D, src, sizeof(float) * D);
        memcpy(b->k + (int64_t)t * D, src + D, sizeof(float) * D);
        memcpy(b->v + (int64_t)t * D, src + 2 * D, sizeof(float) * D);
    }
    TDM_KERNEL("rope", tdm_rope_forward(b->q, a->vis_rope_cos, a->vis_rope_sin, n, heads, hv));
    TDM_KERNEL("rope", tdm_rope_forward(b->k, a->vis_rope_cos, a->vis_rope_sin, n, heads, hv));
    TDM_KERNEL("attention", tdm_attention_forward(b->att, b->lse, b->q, b->k, b->v, a->vis_cu, nseg, heads, heads, hv,
                                                  0, 1.0f / sqrtf((float)hv), a->attn_ws));
    TDM_KERNEL("linear",
               tdm_linear_forward(b->h, b->att, tdm_model_w(m, ix->proj_w), tdm_model_w(m, ix->proj_b), n, D, D));
    add_into(b->h, b->x, (int64_t)n * D);
    TDM_KERNEL("layernorm", tdm_layernorm_forward(b->ln2, b->ln2_mean, b->ln2_rstd, b->h, tdm_model_w(m, ix->norm2_w),
                                                  tdm_model_w(m, ix->norm2_b), n, D, 1e-6f));
    TDM_KERNEL("linear",
               tdm_linear_forward(b->fc1, b->ln2, tdm_model_w(m, ix->fc1_w), tdm_model_w(m, ix->fc1_b), n, D, Iv));
    TDM_KERNEL("gelu_tanh", tdm_gelu_tanh_forward(b->act, b->fc1, (int64_t)n * Iv));
    TDM_KERNEL("linear",
               tdm_linear_forward(out, b->act, tdm_model_w(m, ix->fc2_w), tdm_model_w(m, ix->fc2_b), n, Iv, D));
    add_into(out, b->h, (int64_t)n * D);
}

/* g [n,D]: gradient of the block output on entry, of the block input on return. */
static void block_backward(tdm_model *m, int i, float *g, int nseg) {
    const tdm_vision_config *vc = &m->cfg.vision;
    model_acts *a = &m->a;
    vis_block_act *b = &a->blk[i];
    const vis_block_ix *ix = &m->vb[i];
    int n = a->vis_cu[nseg], D = vc->hidden_size, Iv = vc->intermediate_size, heads = vc->num_heads, hv = D / heads;
    /* MLP: out = h + fc2(gelu(fc1(ln2(h)))) */
    TDM_KERNEL("linear_bw", tdm_linear_backward(a->vdI1, tdm_model_gradp(m, ix->fc2_w), tdm_model_gradp(m, ix->fc2_b),
                                                g, b->act, tdm_model_w(m, ix->fc2_w), n, Iv, D));
    tdm_model_grad_ready(m, ix->fc2_w);
    tdm_model_grad_ready(m, ix->fc2_b);
    TDM_KERNEL("gelu_tanh_bw", tdm_gelu_tanh_backward(a->vdI2, a->vdI1, b->fc1, (int64_t)n * Iv));
    TDM_KERNEL("linear_bw", tdm_linear_backward(a->vg2, tdm_model_gradp(m, ix->fc1_w), tdm_model_gradp(m, ix->fc1_b),
                                                a->vdI2, b->ln2, tdm_model_w(m, ix->fc1_w), n, D, Iv));
    tdm_model_grad_ready(m, ix->fc1_w);
    tdm_model_grad_ready(m, ix->fc1_b);
    TDM_KERNEL("layernorm_bw",
               tdm_layernorm_backward(a->vg3, tdm_model_gradp(m, ix->norm2_w), tdm_model_gradp(m, ix->norm2_b), a->vg2,
                                      b->h, b->ln2_mean, b->ln2_rstd, tdm_model_w(m, ix->norm2_w), n, D));
    tdm_model_grad_ready(m, ix->norm2_w);
    tdm_model_grad_ready(m, ix->norm2_b);
    add_into(g, a->vg3, (int64_t)n * D); /* g = d h */
    /* attention: h = x + proj(attn(rope(q), rope(k), v)) */
    TDM_KERNEL("linear_bw",
               tdm_linear_backward(a->vdatt, tdm_model_gradp(m, ix->proj_w), tdm_model_gradp(m, ix->proj_b), g, b->att,
                                   tdm_model_w(m, ix->proj_w), n, D, D));
    tdm_model_grad_ready(m, ix->proj_w);
    tdm_model_grad_ready(m, ix->proj_b);
    TDM_KERNEL("attention_bw",
               tdm_attention_backward(a->vdq, a->vdk, a->vdv, a->vdatt, b->q, b->k, b->v, b->att, b->lse, a->vis_cu,
                                      nseg, heads, heads, hv, 0, 1.0f / sqrtf((float)hv), a->attn_ws));
    TDM_KERNEL("rope_bw", tdm_rope_backward(a->vdq, a->vis_rope_cos, a->vis_rope_sin, n, heads, hv));
    TDM_KERNEL("rope_bw", tdm_rope_backward(a->vdk, a->vis_rope_cos, a->vis_rope_sin, n, heads, hv));
    for (int t = 0; t < n; t++) {
        float *dst = a->vdqkv + (int64_t)t * 3 * D;
        memcpy(dst, a->vdq + (int64_t)t * D, sizeof(float) * D);
        memcpy(dst + D, a->vdk + (int64_t)t * D, sizeof(float) * D);
        memcpy(dst + 2 * D, a->vdv + (int64_t)t * D, sizeof(float) * D);
    }
    TDM_KERNEL("linear_bw", tdm_linear_backward(a->vg2, tdm_model_gradp(m, ix->qkv_w), tdm_model_gradp(m, ix->qkv_b),
                                                a->vdqkv, b->ln1, tdm_model_w(m, ix->qkv_w), n, D, 3 * D));
    tdm_model_grad_ready(m, ix->qkv_w);
    tdm_model_grad_ready(m, ix->qkv_b);
    TDM_KERNEL("layernorm_bw",
               tdm_layernorm_backward(a->vg3, tdm_model_gradp(m, ix->norm1_w), tdm_model_gradp(m, ix->norm1_b), a->vg2,
                                      b->x, b->ln1_mean, b->ln1_rstd, tdm_model_w(m, ix->norm1_w), n, D));
    tdm_model_grad_ready(m, ix->norm1_w);
    tdm_model_grad_ready(m, ix->norm1_b);
    add_into(g, a->vg3, (int64_t)n * D); /* g = d x */
}

void tdm_vision_forward(tdm_model *m, const tdm_batch *b, int nseg) {
    const tdm_vision_config *vc = &m->cfg.vision;
    model_acts *a = &m->a;
    int n = b->n_patches, D = vc->hidden_size;
    uint64_t t0;
    /* patch embedding (Conv3d with kernel = stride = a Linear over patch_dim-wide rows)
     * plus the bilinear mix of four position-table rows */
    tdm_model_unit_begin(m, m->u_vis_embed, 0, &t0);
    float *x0 = vc->depth > 0 ? a->blk[0].x : a->vis_out;
    TDM_KERNEL("linear", tdm_linear_forward(x0, b->pixel_values, tdm_model_w(m, m->patch_w), tdm_model_w(m, m->patch_b),
                                            n, b->patch_dim, D));
    const float *E = tdm_model_w(m, m->pos_embed);
    for (int p = 0; p < n; p++) {
        float *row = x0 + (int64_t)p * D;
        for (int c = 0; c < 4; c++) {
            const float *e = E + (int64_t)a->pos_idx[4 * p + c] * D;
            float w = a->pos_w[4 * p + c];
            for (int d = 0; d < D; d++) row[d] += w * e[d];
        }
    }
    tdm_model_unit_end(m, m->u_vis_embed, 0, t0);

    for (int i = 0; i < vc->depth; i++) {
        tdm_model_unit_begin(m, m->u_block0 + i, 0, &t0);
        block_forward(m, i, block_output(m, i), nseg);
        tdm_model_unit_end(m, m->u_block0 + i, 0, t0);
    }
    tdm_model_unit_begin(m, m->u_merger, 0, &t0);
    merger_forward(m, &m->merger, &a->merger, a->vis_out, 0, n);
    tdm_model_unit_end(m, m->u_merger, 0, t0);
    for (int j = 0; j < vc->n_deepstack; j++) {
        tdm_model_unit_begin(m, m->u_ds0 + j, 0, &t0);
        merger_forward(m, &m->ds[j], &a->ds[j], block_output(m, vc->deepstack_indexes[j]), 1, n);
        tdm_model_unit_end(m, m->u_ds0 + j, 0, t0);
    }
}

void tdm_vision_backward(tdm_model *m, const tdm_batch *b, int nseg) {
    const tdm_vision_config *vc = &m->cfg.vision;
    model_acts *a = &m->a;
    int n = b->n_patches, D = vc->hidden_size, M = n / tdm_merge_rows(&m->cfg), O = vc->out_hidden_size;
    int tv = m->train_vision;
    uint64_t t0;
    /* mergers, in reverse registration order; their input gradients wait in dtap / vg */
    for (int j = vc->n_deepstack - 1; j >= 0; j--) {
        tdm_model_unit_begin(m, m->u_ds0 + j, 1, &t0);
        merger_backward(m, &m->ds[j], &a->ds[j], block_output(m, vc->deepstack_indexes[j]),
                        a->dfeat + (int64_t)j * M * O, tv ? a->dtap + (int64_t)j * n * D : NULL, 1, n);
        tdm_model_unit_end(m, m->u_ds0 + j, 1, t0);
    }
    tdm_model_unit_begin(m, m->u_merger, 1, &t0);
    merger_backward(m, &m->merger, &a->merger, a->vis_out, a->dmerge, tv ? a->vg : NULL, 0, n);
    tdm_model_unit_end(m, m->u_merger, 1, t0);
    if (!tv) return; /* frozen tower: no block backward at all */

    for (int i = vc->depth - 1; i >= 0; i--) {
        /* a DeepStack tap on this block's output adds its merger's input gradient */
        for (int j = 0; j < vc->n_deepstack; j++)
            if (vc->deepstack_indexes[j] == i) add_into(a->vg, a->dtap + (int64_t)j * n * D, (int64_t)n * D);
        tdm_model_unit_begin(m, m->u_block0 + i, 1, &t0);
        int g0, g1;
        if (tdm_recompute_group(&m->rc, vc->depth, i, &g0, &g1) && i == g1 - 1) /* the group's forward again */
            for (int k = g0; k < g1; k++) block_forward(m, k, k + 1 < g1 ? block_output(m, k) : a->vrc_out, nseg);
        block_backward(m, i, a->vg, nseg);
        tdm_model_unit_end(m, m->u_block0 + i, 1, t0);
    }

    tdm_model_unit_begin(m, m->u_vis_embed, 1, &t0);
    float *dE = tdm_model_gradp(m, m->pos_embed);
    for (int p = 0; p < n; p++) { /* scatter-add: the same table row serves many patches */
        const float *g = a->vg + (int64_t)p * D;
        for (int c = 0; c < 4; c++) {
            float *e = dE + (int64_t)a->pos_idx[4 * p + c] * D;
            float w = a->pos_w[4 * p + c];
            for (int d = 0; d < D; d++) e[d] += w * g[d];
        }
    }
    tdm_model_grad_ready(m, m->pos_embed);
    TDM_KERNEL("linear_bw",
               tdm_linear_backward(NULL, tdm_model_gradp(m, m->patch_w), tdm_model_gradp(m, m->patch_b), a->vg,
                                   b->pixel_values, tdm_model_w(m, m->patch_w), n, b->patch_dim, D));
    tdm_model_grad_ready(m, m->patch_w);
    tdm_model_grad_ready(m, m->patch_b);
    tdm_model_unit_end(m, m->u_vis_embed, 1, t0);
}
