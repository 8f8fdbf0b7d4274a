/* activations.c - where every saved activation and scratch buffer of a step lives.
 *
 * One function lays everything out over one block, so the same code answers "how many
 * bytes for these limits" (base == NULL: inspect's memory plan, without allocating) and
 * carves the real block in tdm_model_reserve. Each buffer starts on a 64-byte boundary.
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "kernels/kernels.h"
#include "model/qwen3vl_impl.h"

typedef struct carver {
    char *base;
    int64_t off;
} carver;

static void *carve(carver *c, int64_t bytes) {
    void *p = c->base ? c->base + c->off : NULL;
    c->off += (bytes + 63) & ~(int64_t)63;
    return p;
}
static float *cf(carver *c, int64_t n) { return carve(c, n * (int64_t)sizeof(float)); }
static int32_t *ci(carver *c, int64_t n) { return carve(c, n * (int64_t)sizeof(int32_t)); }

static void carve_merger(carver *c, merger_act *ma, int64_t rows_norm, int64_t norm_dim, int64_t M, int64_t H4,
                         int64_t O) {
    ma->ln = cf(c, rows_norm * norm_dim);
    ma->mean = cf(c, rows_norm);
    ma->rstd = cf(c, rows_norm);
    ma->fc1 = cf(c, M * H4);
    ma->act = cf(c, M * H4);
    ma->out = cf(c, M * O);
}

static void carve_vis_block(carver *c, vis_block_act *b, int64_t N, int64_t D, int64_t Iv, int64_t heads, int with_x) {
    b->x = with_x ? cf(c, N * D) : NULL;
    b->ln1 = cf(c, N * D);
    b->ln1_mean = cf(c, N);
    b->ln1_rstd = cf(c, N);
    b->q = cf(c, N * D);
    b->k = cf(c, N * D);
    b->v = cf(c, N * D);
    b->att = cf(c, N * D);
    b->lse = cf(c, N * heads);
    b->h = cf(c, N * D);
    b->ln2 = cf(c, N * D);
    b->ln2_mean = cf(c, N);
    b->ln2_rstd = cf(c, N);
    b->fc1 = cf(c, N * Iv);
    b->act = cf(c, N * Iv);
}

static void carve_dec_layer(carver *c, dec_layer_act *d, int64_t T, int64_t h, int64_t I, int64_t nh, int64_t nkv,
                            int64_t Q, int64_t KV, int with_x) {
    d->x = with_x ? cf(c, T * h) : NULL;
    d->ln1 = cf(c, T * h);
    d->ln1_rstd = cf(c, T);
    d->q_raw = cf(c, T * Q);
    d->q_rstd = cf(c, T * nh);
    d->q = cf(c, T * Q);
    d->k_raw = cf(c, T * KV);
    d->k_rstd = cf(c, T * nkv);
    d->k = cf(c, T * KV);
    d->v = cf(c, T * KV);
    d->att = cf(c, T * Q);
    d->lse = cf(c, T * nh);
    d->h = cf(c, T * h);
    d->ln2 = cf(c, T * h);
    d->ln2_rstd = cf(c, T);
    d->gate = cf(c, T * I);
    d->up = cf(c, T * I);
    d->act = cf(c, T * I);
}

/* Is block k's output read by a DeepStack merger? */
static int is_tap(const tdm_vision_config *vc, int k) {
    for (int j = 0; j < vc->n_deepstack; j++)
        if (vc->deepstack_indexes[j] == k) return 1;
    return 0;
}

/* Longer than most: one carve per activation buffer, in layout order, so the whole plan of the
 * activation memory reads top to bottom in one place. */
int64_t tdm_model_layout_acts(const tdm_model_config *cfg, const tdm_model_limits *lim, const tdm_recompute *rc,
                              int vision_backward, char *base, model_acts *a) {
    const tdm_vision_config *vc = &cfg->vision;
    const tdm_text_config *tc = &cfg->text;
    carver c = {base, 0};
    int sm2 = tdm_merge_rows(cfg);
    int64_t N = lim->max_patches, M = N / sm2, T = lim->max_tokens;
    int64_t D = vc->hidden_size, Iv = vc->intermediate_size, H4 = sm2 * D, O = vc->out_hidden_size;
    int64_t heads = vc->num_heads, hv = D / heads;
    int64_t h = tc->hidden_size, I = tc->intermediate_size, nh = tc->num_heads, nkv = tc->num_kv_heads;
    int64_t hd = tc->head_dim, Q = nh * hd, KV = nkv * hd;
    int depth = N > 0 ? vc->depth : 0, nds = N > 0 ? vc->n_deepstack : 0, L = tc->num_layers;

    a->blk = tdm_xcalloc((size_t)(depth > 0 ? depth : 1), sizeof *a->blk);
    a->ds = tdm_xcalloc((size_t)(nds > 0 ? nds : 1), sizeof *a->ds);
    a->lay = tdm_xcalloc((size_t)(L > 0 ? L : 1), sizeof *a->lay);

    /* vision (nothing when the limits allow no patches) */
    if (N > 0) {
        a->vis_rope_cos = cf(&c, N * (hv / 2));
        a->vis_rope_sin = cf(&c, N * (hv / 2));
        a->pos_idx = ci(&c, N * 4);
        a->pos_w = cf(&c, N * 4);
        a->vis_cu = ci(&c, M + 2);
        /* A block's saved input is the previous block's output: DeepStack reads the tapped
         * ones after the tower, so those are always kept. Without a backward through the
         * blocks (a frozen tower) the blocks share one set and two inputs in turn; with
         * recomputation a group shares the slots and keeps its first input. */
        int slots = vision_backward ? tdm_recompute_slots(rc, depth) : 1, g0, g1;
        for (int i = 0; vision_backward && i < depth; i++)
            if (!tdm_recompute_group(rc, depth, i, &g0, &g1)) carve_vis_block(&c, &a->blk[i], N, D, Iv, heads, 1);
        vis_block_act *slot = tdm_xcalloc((size_t)(slots > 0 ? slots : 1), sizeof *slot);
        if (vision_backward && slots > 0 && !tdm_recompute_group(rc, depth, depth - 1, &g0, &g1)) {
            slot[0] = a->blk[depth - 1]; /* kept, and its backward is over first (as in the decoder) */
            a->vrc_out = a->blk[depth - 1].x;
        } else {
            for (int s = 0; s < slots; s++) carve_vis_block(&c, &slot[s], N, D, Iv, heads, s > 0);
            if (vision_backward && slots > 0) a->vrc_out = cf(&c, N * D);
        }
        float *turn[2] = {NULL, NULL};
        if (!vision_backward) turn[0] = cf(&c, N * D), turn[1] = depth > 1 ? cf(&c, N * D) : NULL;
        for (int i = 0; i < depth; i++) {
            vis_block_act *b = &a->blk[i];
            int tapped_in = i > 0 && is_tap(vc, i - 1);
            if (!vision_backward) {
                *b = slot[0];
                b->x = tapped_in ? cf(&c, N * D) : turn[i % 2];
            } else if (tdm_recompute_group(rc, depth, i, &g0, &g1)) {
                *b = slot[i - g0];
                if (i == g0 || tapped_in) b->x = cf(&c, N * D);
            }
        }
        free(slot);
        a->vis_out = cf(&c, N * D);
        a->qkv_tmp = cf(&c, N * 3 * D);
        carve_merger(&c, &a->merger, N, D, M, H4, O);
        for (int j = 0; j < nds; j++) carve_merger(&c, &a->ds[j], M, H4, M, H4, O);
        if (vision_backward) { /* the blocks' backward scratch */
            a->vg = cf(&c, N * D);
            a->vg2 = cf(&c, N * D);
            a->vg3 = cf(&c, N * D);
            a->vdI1 = cf(&c, N * Iv);
            a->vdI2 = cf(&c, N * Iv);
            a->vdq = cf(&c, N * D);
            a->vdk = cf(&c, N * D);
            a->vdv = cf(&c, N * D);
            a->vdatt = cf(&c, N * D);
            a->vdqkv = cf(&c, N * 3 * D);
        }
        a->mdln = cf(&c, M * H4);
        a->mdfc1 = cf(&c, M * H4);
        a->mdact = cf(&c, M * H4);
        a->dmerge = cf(&c, M * O);
        a->dfeat = cf(&c, (nds > 0 ? nds : 1) * M * O);
        if (vision_backward) a->dtap = cf(&c, (nds > 0 ? nds : 1) * N * D);
    }

    /* text */
    a->txt_rope_cos = cf(&c, T * (hd / 2));
    a->txt_rope_sin = cf(&c, T * (hd / 2));
    a->embed_ids = ci(&c, T);
    a->image_rows = ci(&c, T);
    /* Recomputed layers use the slots of their group and keep the group's first input.
     * Under the block method the layers past the recomputed ones are kept, and their
     * backward is over before the recomputed layers' starts: the last one's buffers
     * serve as the slot and the scratch output, at no extra memory. */
    int slots = tdm_recompute_slots(rc, L), g0, g1;
    for (int l = 0; l < L; l++)
        if (!tdm_recompute_group(rc, L, l, &g0, &g1)) carve_dec_layer(&c, &a->lay[l], T, h, I, nh, nkv, Q, KV, 1);
    dec_layer_act *slot = tdm_xcalloc((size_t)(slots > 0 ? slots : 1), sizeof *slot);
    if (slots > 0 && !tdm_recompute_group(rc, L, L - 1, &g0, &g1)) {
        slot[0] = a->lay[L - 1];
        a->rc_out = a->lay[L - 1].x;
    } else if (slots > 0) {
        for (int s = 0; s < slots; s++) carve_dec_layer(&c, &slot[s], T, h, I, nh, nkv, Q, KV, s > 0);
        a->rc_out = cf(&c, T * h);
    }
    for (int l = 0; l < L; l++) {
        if (!tdm_recompute_group(rc, L, l, &g0, &g1)) continue;
        dec_layer_act *d = &a->lay[l];
        *d = slot[l - g0];
        if (l == g0) d->x = cf(&c, T * h);
    }
    free(slot);
    a->x_final = cf(&c, T * h);
    a->fin = cf(&c, T * h);
    a->fin_rstd = cf(&c, T);
    a->g = cf(&c, T * h);
    a->gt = cf(&c, T * h);
    a->gt2 = cf(&c, T * h);
    a->dI1 = cf(&c, T * I);
    a->dI2 = cf(&c, T * I);
    a->dI3 = cf(&c, T * I);
    a->datt = cf(&c, T * Q);
    a->dq = cf(&c, T * Q);
    a->dqr = cf(&c, T * Q);
    a->dk = cf(&c, T * KV);
    a->dkr = cf(&c, T * KV);
    a->dv = cf(&c, T * KV);
    a->dh = cf(&c, T * h);
    /* the last layer on the loss's rows (decoder.c): the rows, their samples, targets and
     * angles, packed */
    a->keep_rows = ci(&c, T);
    a->keep_cu = ci(&c, (int64_t)lim->max_seqs + 1);
    a->keep_targets = ci(&c, T);
    a->keep_cos = cf(&c, T * (hd / 2));
    a->keep_sin = cf(&c, T * (hd / 2));

    /* kernel workspaces: one attention workspace serves both towers */
    int64_t ws = tdm_attention_workspace_floats((int)T, (int)nh, (int)nkv, (int)hd);
    if (N > 0) {
        int64_t wv = tdm_attention_workspace_floats((int)N, (int)heads, (int)heads, (int)hv);
        if (wv > ws) ws = wv;
    }
    a->attn_ws = cf(&c, ws > 0 ? ws : 1);
    /* Rows per lm_head piece: each piece streams the whole [V,h] W and dW, so pieces
     * are as tall as a ~128 MiB logits workspace allows (220 rows at V = 151936), up
     * to the kernel's 256. */
    int64_t chunk = ((int64_t)32 << 20) / tc->vocab_size;
    chunk = chunk < 64 ? 64 : chunk > 256 ? 256 : chunk;
    a->xent_chunk = (int)(T < chunk ? T : chunk);
    a->xent_ws = cf(&c, tdm_xent_workspace_floats(a->xent_chunk, tc->vocab_size, tc->hidden_size));
    return c.off;
}
