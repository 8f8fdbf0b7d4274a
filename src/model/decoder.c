/* decoder.c - the Qwen3 text decoder forward and backward: token embedding with the
 * image-pad rows replaced by the vision merger output, decoder layers (RMSNorm, q/k
 * projections with per-head q_norm/k_norm before M-RoPE, GQA causal attention per
 * packed sample, SwiGLU MLP), DeepStack features added after the first layers, and
 * the final norm. The loss (fused with lm_head) is driven from qwen3vl.c. And one more
 * token at a time for generation (tdm_model_decode), through the same layer halves.
 *
 * The last layer on the loss's rows only. The loss reads the final hidden state of the
 * rows whose target counts (the assistant's reply: about an eighth of the tokens of an
 * image-text conversation), and of every layer only the last one's output is read at no
 * other row. So that layer computes its keys and values for every row (the kept rows'
 * queries attend to all earlier ones) and everything else (q, attention, o, the MLP, the
 * final norm, the loss) for the kept rows alone, packed. The result is the same
 * arithmetic: every kernel is row-wise but the weight-gradient products, to which the
 * rows left out add exact zeros. tdm_model_set_prune_last_layer(m, 0) turns it off.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "kernels/kernels.h"
#include "model/qwen3vl_impl.h"
#include "prof/prof.h"

static void add_into(float *y, const float *x, int64_t n) { tdm_add_into(y, x, n); }

/* DeepStack features that reach the decoder: feature j is added after layer j. */
static int n_deepstack_used(const tdm_model *m, int n_image_rows) {
    if (n_image_rows == 0) return 0;
    int n = m->cfg.vision.n_deepstack;
    return n < m->cfg.text.num_layers ? n : m->cfg.text.num_layers;
}

/* Rows [r0, r0 + n) of layer l up to the attention: ln1, the q/k/v projections, q_norm /
 * k_norm over each head vector, then RoPE with the rows' angles in a->txt_rope_cos/sin. */
static void layer_qkv(tdm_model *m, int l, int r0, int n) {
    const tdm_text_config *tc = &m->cfg.text;
    model_acts *a = &m->a;
    dec_layer_act *d = &a->lay[l];
    const dec_layer_ix *ix = &m->dl[l];
    int h = tc->hidden_size, nh = tc->num_heads, nkv = tc->num_kv_heads, hd = tc->head_dim;
    int64_t Q = (int64_t)nh * hd, KV = (int64_t)nkv * hd, half = hd / 2;
    float eps = (float)tc->rms_norm_eps;
    float *ln1 = d->ln1 + r0 * (int64_t)h, *q = d->q + r0 * Q, *k = d->k + r0 * KV;
    const float *cs = a->txt_rope_cos + r0 * half, *sn = a->txt_rope_sin + r0 * half;
    TDM_KERNEL("rmsnorm", tdm_rmsnorm_forward(ln1, d->ln1_rstd + r0, d->x + r0 * (int64_t)h,
                                              tdm_model_w(m, ix->in_norm), n, h, eps));
    TDM_KERNEL("linear", tdm_linear_forward(d->q_raw + r0 * Q, ln1, tdm_model_w(m, ix->q), NULL, n, h, (int)Q));
    TDM_KERNEL("linear", tdm_linear_forward(d->k_raw + r0 * KV, ln1, tdm_model_w(m, ix->k), NULL, n, h, (int)KV));
    TDM_KERNEL("linear", tdm_linear_forward(d->v + r0 * KV, ln1, tdm_model_w(m, ix->v), NULL, n, h, (int)KV));
    TDM_KERNEL("rmsnorm", tdm_rmsnorm_forward(q, d->q_rstd + (int64_t)r0 * nh, d->q_raw + r0 * Q,
                                              tdm_model_w(m, ix->q_norm), n * nh, hd, eps));
    TDM_KERNEL("rmsnorm", tdm_rmsnorm_forward(k, d->k_rstd + (int64_t)r0 * nkv, d->k_raw + r0 * KV,
                                              tdm_model_w(m, ix->k_norm), n * nkv, hd, eps));
    TDM_KERNEL("rope", tdm_rope_forward(q, cs, sn, n, nh, hd));
    TDM_KERNEL("rope", tdm_rope_forward(k, cs, sn, n, nkv, hd));
}

/* Rows [r0, r0 + n) of layer l after the attention (d->att filled): the o projection and
 * its residual, ln2, the SwiGLU MLP and its residual into out (the rows of the next input).
 * res_rows: the packed rows' token rows when the layer runs on the loss's rows (r0 = 0),
 * where the residual reads its input; NULL when the rows are the token rows themselves. */
static void layer_out(tdm_model *m, int l, int r0, int n, float *out, const int32_t *res_rows) {
    const tdm_text_config *tc = &m->cfg.text;
    dec_layer_act *d = &m->a.lay[l];
    const dec_layer_ix *ix = &m->dl[l];
    int h = tc->hidden_size, I = tc->intermediate_size, Q = tc->num_heads * tc->head_dim;
    int64_t o = r0 * (int64_t)h, oi = r0 * (int64_t)I;
    float *hh = d->h + o, *ln2 = d->ln2 + o;
    TDM_KERNEL("linear", tdm_linear_forward(hh, d->att + r0 * (int64_t)Q, tdm_model_w(m, ix->o), NULL, n, Q, h));
    if (!res_rows) add_into(hh, d->x + o, (int64_t)n * h);
    else
        for (int i = 0; i < n; i++) add_into(hh + (int64_t)i * h, d->x + (int64_t)res_rows[i] * h, h);
    TDM_KERNEL("rmsnorm", tdm_rmsnorm_forward(ln2, d->ln2_rstd + r0, hh, tdm_model_w(m, ix->post_norm), n, h,
                                              (float)tc->rms_norm_eps));
    TDM_KERNEL("linear", tdm_linear_forward(d->gate + oi, ln2, tdm_model_w(m, ix->gate), NULL, n, h, I));
    TDM_KERNEL("linear", tdm_linear_forward(d->up + oi, ln2, tdm_model_w(m, ix->up), NULL, n, h, I));
    TDM_KERNEL("swiglu", tdm_swiglu_forward(d->act + oi, d->gate + oi, d->up + oi, n, I));
    TDM_KERNEL("linear", tdm_linear_forward(out + o, d->act + oi, tdm_model_w(m, ix->down), NULL, n, I, h));
    add_into(out + o, hh, (int64_t)n * h);
}

/* The kept rows' ln1, packed, as the q product's input. Into a->dh: the loss writes it
 * only after the forward, and the final norm's backward has read it before this layer's
 * backward, so it is free both times and the pruned layer costs no [T,h] buffer. */
static const float *pack_kept_ln1(tdm_model *m, int l) {
    model_acts *a = &m->a;
    int h = m->cfg.text.hidden_size;
    for (int i = 0; i < a->n_keep; i++)
        memcpy(a->dh + (int64_t)i * h, a->lay[l].ln1 + (int64_t)a->keep_rows[i] * h, sizeof(float) * (size_t)h);
    return a->dh;
}

/* The last layer on the kept rows (a->pruned): ln1, k and v on every row; q from the kept
 * rows' ln1, their attention over all earlier keys, and the rest of the layer on them,
 * packed into the first n_keep rows of d's arrays and of out. */
static void layer_forward_kept(tdm_model *m, int l, float *out, const tdm_batch *b) {
    const tdm_text_config *tc = &m->cfg.text;
    model_acts *a = &m->a;
    dec_layer_act *d = &a->lay[l];
    const dec_layer_ix *ix = &m->dl[l];
    int T = b->n_tokens, K = a->n_keep, h = tc->hidden_size, nh = tc->num_heads, nkv = tc->num_kv_heads;
    int hd = tc->head_dim, Q = nh * hd, KV = nkv * hd;
    float eps = (float)tc->rms_norm_eps;
    TDM_KERNEL("rmsnorm", tdm_rmsnorm_forward(d->ln1, d->ln1_rstd, d->x, tdm_model_w(m, ix->in_norm), T, h, eps));
    TDM_KERNEL("linear", tdm_linear_forward(d->q_raw, pack_kept_ln1(m, l), tdm_model_w(m, ix->q), NULL, K, h, Q));
    TDM_KERNEL("linear", tdm_linear_forward(d->k_raw, d->ln1, tdm_model_w(m, ix->k), NULL, T, h, KV));
    TDM_KERNEL("linear", tdm_linear_forward(d->v, d->ln1, tdm_model_w(m, ix->v), NULL, T, h, KV));
    TDM_KERNEL("rmsnorm", tdm_rmsnorm_forward(d->q, d->q_rstd, d->q_raw, tdm_model_w(m, ix->q_norm), K * nh, hd, eps));
    TDM_KERNEL("rmsnorm", tdm_rmsnorm_forward(d->k, d->k_rstd, d->k_raw, tdm_model_w(m, ix->k_norm), T * nkv, hd, eps));
    TDM_KERNEL("rope", tdm_rope_forward(d->q, a->keep_cos, a->keep_sin, K, nh, hd));
    TDM_KERNEL("rope", tdm_rope_forward(d->k, a->txt_rope_cos, a->txt_rope_sin, T, nkv, hd));
    TDM_KERNEL("attention",
               tdm_attention_forward_rows(d->att, d->lse, d->q, d->k, d->v, b->cu_seqlens, a->keep_cu, a->keep_rows,
                                          b->n_seqs, nh, nkv, hd, 1, 1.0f / sqrtf((float)hd), a->attn_ws));
    layer_out(m, l, 0, K, out, a->keep_rows);
}

static void layer_forward(tdm_model *m, int l, float *out, const tdm_batch *b) {
    const tdm_text_config *tc = &m->cfg.text;
    dec_layer_act *d = &m->a.lay[l];
    int T = b->n_tokens, hd = tc->head_dim;
    if (m->a.pruned && l == tc->num_layers - 1) {
        layer_forward_kept(m, l, out, b);
        return;
    }
    layer_qkv(m, l, 0, T);
    TDM_KERNEL("attention",
               tdm_attention_forward(d->att, d->lse, d->q, d->k, d->v, b->cu_seqlens, b->n_seqs, tc->num_heads,
                                     tc->num_kv_heads, hd, 1, 1.0f / sqrtf((float)hd), m->a.attn_ws));
    layer_out(m, l, 0, T, out, NULL);
}

/* Backward of layer_out over n rows (the token rows, or the kept rows packed): g holds the
 * gradient of the output rows on entry and of h on return; a->datt gets the gradient of the
 * attention output. */
static void layer_out_backward(tdm_model *m, int l, float *g, int n) {
    const tdm_text_config *tc = &m->cfg.text;
    model_acts *a = &m->a;
    dec_layer_act *d = &a->lay[l];
    const dec_layer_ix *ix = &m->dl[l];
    int h = tc->hidden_size, I = tc->intermediate_size, Q = tc->num_heads * tc->head_dim;
    int64_t nh = (int64_t)n * h;
    /* MLP: out = h + down(silu(gate(ln2)) * up(ln2)) */
    TDM_KERNEL("linear_bw", tdm_linear_backward(a->dI1, tdm_model_gradp(m, ix->down), NULL, g, d->act,
                                                tdm_model_w(m, ix->down), n, I, h));
    tdm_model_grad_ready(m, ix->down);
    TDM_KERNEL("swiglu_bw", tdm_swiglu_backward(a->dI2, a->dI3, a->dI1, d->gate, d->up, n, I));
    TDM_KERNEL("linear_bw", tdm_linear_backward(a->gt, tdm_model_gradp(m, ix->gate), NULL, a->dI2, d->ln2,
                                                tdm_model_w(m, ix->gate), n, h, I));
    tdm_model_grad_ready(m, ix->gate);
    TDM_KERNEL("linear_bw", tdm_linear_backward(a->gt2, tdm_model_gradp(m, ix->up), NULL, a->dI3, d->ln2,
                                                tdm_model_w(m, ix->up), n, h, I));
    tdm_model_grad_ready(m, ix->up);
    add_into(a->gt, a->gt2, nh);
    TDM_KERNEL("rmsnorm_bw", tdm_rmsnorm_backward(a->gt2, tdm_model_gradp(m, ix->post_norm), a->gt, d->h, d->ln2_rstd,
                                                  tdm_model_w(m, ix->post_norm), n, h));
    tdm_model_grad_ready(m, ix->post_norm);
    add_into(g, a->gt2, nh); /* g = d h */
    /* attention: h = x + o(attn(rope(q_norm(q)), rope(k_norm(k)), v)) */
    TDM_KERNEL("linear_bw", tdm_linear_backward(a->datt, tdm_model_gradp(m, ix->o), NULL, g, d->att,
                                                tdm_model_w(m, ix->o), n, Q, h));
    tdm_model_grad_ready(m, ix->o);
}

/* g: gradient of the layer output on entry ([T,h], or the n_keep packed rows of the last
 * layer on the loss's rows), of the layer input, on every token row, on return. Weight
 * gradients only where trainable (NULL pointers make the kernels skip them).
 * On the kept rows the operations are layer_backward's on those rows, in the same order:
 * the input gradient of the q product is scattered to its token rows (zero elsewhere)
 * before the k and v parts are added, and the residual's d h joins only the kept rows. */
static void layer_backward(tdm_model *m, int l, float *g, const tdm_batch *b) {
    const tdm_text_config *tc = &m->cfg.text;
    model_acts *a = &m->a;
    dec_layer_act *d = &a->lay[l];
    const dec_layer_ix *ix = &m->dl[l];
    int T = b->n_tokens, h = tc->hidden_size, nh = tc->num_heads, nkv = tc->num_kv_heads, hd = tc->head_dim;
    int Q = nh * hd, KV = nkv * hd;
    int64_t Th = (int64_t)T * h;
    /* the query side's rows: every token, or the kept ones packed */
    int kept = a->pruned && l == tc->num_layers - 1, nq = kept ? a->n_keep : T;
    const int32_t *q_pos = kept ? a->keep_rows : NULL, *cu_q = kept ? a->keep_cu : b->cu_seqlens;
    const float *q_cos = kept ? a->keep_cos : a->txt_rope_cos, *q_sin = kept ? a->keep_sin : a->txt_rope_sin;
    layer_out_backward(m, l, g, nq);
    TDM_KERNEL("attention_bw", tdm_attention_backward_rows(a->dq, a->dk, a->dv, a->datt, d->q, d->k, d->v, d->att,
                                                           d->lse, b->cu_seqlens, cu_q, q_pos, b->n_seqs, nh, nkv, hd,
                                                           1, 1.0f / sqrtf((float)hd), a->attn_ws));
    TDM_KERNEL("rope_bw", tdm_rope_backward(a->dq, q_cos, q_sin, nq, nh, hd));
    TDM_KERNEL("rope_bw", tdm_rope_backward(a->dk, a->txt_rope_cos, a->txt_rope_sin, T, nkv, hd));
    TDM_KERNEL("rmsnorm_bw", tdm_rmsnorm_backward(a->dqr, tdm_model_gradp(m, ix->q_norm), a->dq, d->q_raw, d->q_rstd,
                                                  tdm_model_w(m, ix->q_norm), nq * nh, hd));
    tdm_model_grad_ready(m, ix->q_norm);
    TDM_KERNEL("rmsnorm_bw", tdm_rmsnorm_backward(a->dkr, tdm_model_gradp(m, ix->k_norm), a->dk, d->k_raw, d->k_rstd,
                                                  tdm_model_w(m, ix->k_norm), T * nkv, hd));
    tdm_model_grad_ready(m, ix->k_norm);
    TDM_KERNEL("linear_bw", tdm_linear_backward(kept ? a->gt2 : a->gt, tdm_model_gradp(m, ix->q), NULL, a->dqr,
                                                kept ? pack_kept_ln1(m, l) : d->ln1, tdm_model_w(m, ix->q), nq, h, Q));
    tdm_model_grad_ready(m, ix->q);
    if (kept) {
        memset(a->gt, 0, sizeof(float) * (size_t)Th);
        for (int i = 0; i < nq; i++)
            memcpy(a->gt + (int64_t)q_pos[i] * h, a->gt2 + (int64_t)i * h, sizeof(float) * (size_t)h);
    }
    TDM_KERNEL("linear_bw", tdm_linear_backward(a->gt2, tdm_model_gradp(m, ix->k), NULL, a->dkr, d->ln1,
                                                tdm_model_w(m, ix->k), T, h, KV));
    tdm_model_grad_ready(m, ix->k);
    add_into(a->gt, a->gt2, Th);
    TDM_KERNEL("linear_bw", tdm_linear_backward(a->gt2, tdm_model_gradp(m, ix->v), NULL, a->dv, d->ln1,
                                                tdm_model_w(m, ix->v), T, h, KV));
    tdm_model_grad_ready(m, ix->v);
    add_into(a->gt, a->gt2, Th);
    TDM_KERNEL("rmsnorm_bw", tdm_rmsnorm_backward(a->gt2, tdm_model_gradp(m, ix->in_norm), a->gt, d->x, d->ln1_rstd,
                                                  tdm_model_w(m, ix->in_norm), T, h));
    tdm_model_grad_ready(m, ix->in_norm);
    if (!kept) {
        add_into(g, a->gt2, Th); /* g = d x */
        return;
    }
    /* g = d x: the ln1 path on every row plus the residual's d h (packed in g) on the kept rows */
    memcpy(a->gt, a->gt2, sizeof(float) * (size_t)Th);
    for (int i = 0; i < nq; i++) {
        float *row = a->gt + (int64_t)q_pos[i] * h;
        memcpy(row, g + (int64_t)i * h, sizeof(float) * (size_t)h);
        add_into(row, a->gt2 + (int64_t)q_pos[i] * h, h);
    }
    memcpy(g, a->gt, sizeof(float) * (size_t)Th);
}

/* Decides whether this micro-batch's last layer runs on the loss's rows (see the top of the
 * file) and packs what that layer needs. Not when a DeepStack feature joins the last
 * layer's output (a decoder no deeper than the taps), nor when no target counts. */
static void plan_kept_rows(tdm_model *m, const tdm_batch *b, int n_image_rows, int prune) {
    model_acts *a = &m->a;
    const tdm_text_config *tc = &m->cfg.text;
    int L = tc->num_layers, half = tc->head_dim / 2, K = 0;
    a->pruned = 0;
    if (!prune || !m->prune_last || L < 1 || n_deepstack_used(m, n_image_rows) >= L) return;
    for (int s = 0; s < b->n_seqs; s++) {
        a->keep_cu[s] = K;
        for (int i = b->cu_seqlens[s]; i < b->cu_seqlens[s + 1]; i++)
            if (b->targets[i] != -100) {
                a->keep_rows[K] = i;
                a->keep_targets[K] = b->targets[i];
                memcpy(a->keep_cos + (int64_t)K * half, a->txt_rope_cos + (int64_t)i * half, sizeof(float) * half);
                memcpy(a->keep_sin + (int64_t)K * half, a->txt_rope_sin + (int64_t)i * half, sizeof(float) * half);
                K++;
            }
    }
    a->keep_cu[b->n_seqs] = K;
    a->n_keep = K;
    a->pruned = K > 0;
}

void tdm_decoder_forward(tdm_model *m, const tdm_batch *b, int n_image_rows, int prune) {
    const tdm_text_config *tc = &m->cfg.text;
    model_acts *a = &m->a;
    int T = b->n_tokens, h = tc->hidden_size, L = tc->num_layers;
    int O = m->cfg.vision.out_hidden_size;
    uint64_t t0;
    float *x0 = L > 0 ? a->lay[0].x : a->x_final;

    tdm_model_unit_begin(m, m->u_embed, 0, &t0);
    int r = 0;
    for (int i = 0; i < T; i++) {
        int is_image = b->input_ids[i] == m->cfg.image_token_id;
        a->embed_ids[i] = is_image ? -1 : b->input_ids[i];
        if (is_image) a->image_rows[r++] = i;
    }
    TDM_KERNEL("embedding", tdm_embedding_forward(x0, tdm_model_w(m, m->embed), a->embed_ids, T, h));
    /* masked_scatter: image-pad row r takes merged vision row r */
    for (r = 0; r < n_image_rows; r++)
        memcpy(x0 + (int64_t)a->image_rows[r] * h, a->merger.out + (int64_t)r * O, sizeof(float) * h);
    tdm_model_unit_end(m, m->u_embed, 0, t0);

    plan_kept_rows(m, b, n_image_rows, prune);
    int nds = n_deepstack_used(m, n_image_rows), rows = a->pruned ? a->n_keep : T;
    for (int l = 0; l < L; l++) {
        tdm_model_unit_begin(m, m->u_layer0 + l, 0, &t0);
        float *out = l + 1 < L ? a->lay[l + 1].x : a->x_final;
        layer_forward(m, l, out, b);
        if (l < nds) { /* DeepStack: feature l joins the image rows of layer l's output */
            const float *f = a->ds[l].out;
            for (r = 0; r < n_image_rows; r++) add_into(out + (int64_t)a->image_rows[r] * h, f + (int64_t)r * O, h);
        }
        tdm_model_unit_end(m, m->u_layer0 + l, 0, t0);
    }
    tdm_model_unit_begin(m, m->u_norm, 0, &t0);
    TDM_KERNEL("rmsnorm", tdm_rmsnorm_forward(a->fin, a->fin_rstd, a->x_final, tdm_model_w(m, m->final_norm), rows, h,
                                              (float)tc->rms_norm_eps));
    tdm_model_unit_end(m, m->u_norm, 0, t0);
}

/* Recomputation: the forward of layers [g0, g1) again, from the kept input of layer g0,
 * refilling the activations their backward reads (each layer's input included, with the
 * DeepStack features added as in the forward). The last layer's output is not needed
 * again and goes to a scratch buffer. */
static void recompute_layers(tdm_model *m, int g0, int g1, const tdm_batch *b, int n_image_rows) {
    model_acts *a = &m->a;
    int h = m->cfg.text.hidden_size, O = m->cfg.vision.out_hidden_size, nds = n_deepstack_used(m, n_image_rows);
    for (int l = g0; l < g1; l++) {
        float *out = l + 1 < g1 ? a->lay[l + 1].x : a->rc_out;
        layer_forward(m, l, out, b);
        if (l + 1 < g1 && l < nds) {
            const float *f = a->ds[l].out;
            for (int r = 0; r < n_image_rows; r++) add_into(out + (int64_t)a->image_rows[r] * h, f + (int64_t)r * O, h);
        }
    }
}

void tdm_decoder_backward(tdm_model *m, const tdm_batch *b, int n_image_rows, int need_vision) {
    const tdm_text_config *tc = &m->cfg.text;
    model_acts *a = &m->a;
    int T = b->n_tokens, h = tc->hidden_size, L = tc->num_layers, O = m->cfg.vision.out_hidden_size;
    uint64_t t0;
    tdm_model_unit_begin(m, m->u_norm, 1, &t0);
    TDM_KERNEL("rmsnorm_bw",
               tdm_rmsnorm_backward(a->g, tdm_model_gradp(m, m->final_norm), a->dh, a->x_final, a->fin_rstd,
                                    tdm_model_w(m, m->final_norm), a->pruned ? a->n_keep : T, h));
    tdm_model_grad_ready(m, m->final_norm);
    tdm_model_unit_end(m, m->u_norm, 1, t0);

    int nds = n_deepstack_used(m, n_image_rows);
    if (need_vision) /* features past the last layer never reached the loss */
        memset(a->dfeat, 0, sizeof(float) * (size_t)m->cfg.vision.n_deepstack * n_image_rows * O);
    for (int l = L - 1; l >= 0; l--) {
        tdm_model_unit_begin(m, m->u_layer0 + l, 1, &t0);
        if (need_vision && l < nds) { /* the DeepStack add's backward is a gather */
            float *df = a->dfeat + (int64_t)l * n_image_rows * O;
            for (int r = 0; r < n_image_rows; r++)
                memcpy(df + (int64_t)r * O, a->g + (int64_t)a->image_rows[r] * h, sizeof(float) * h);
        }
        int g0, g1;
        if (tdm_recompute_group(&m->rc, L, l, &g0, &g1) && l == g1 - 1) recompute_layers(m, g0, g1, b, n_image_rows);
        layer_backward(m, l, a->g, b);
        tdm_model_unit_end(m, m->u_layer0 + l, 1, t0);
    }

    tdm_model_unit_begin(m, m->u_embed, 1, &t0);
    float *dE = tdm_model_gradp(m, m->embed);
    if (dE) {
        /* HF's nn.Embedding(padding_idx = text_config.pad_token_id): the lookups of that row add
         * nothing to its gradient (a tied lm_head's share, added earlier, stays). The kernel skips
         * negative ids, so those rows are hidden from it for the call. */
        int pad = tc->padding_idx, hidden = 0;
        for (int i = 0; pad >= 0 && i < T; i++)
            if (a->embed_ids[i] == pad) a->embed_ids[i] = -2, hidden = 1;
        TDM_KERNEL("embedding_bw", tdm_embedding_backward(dE, a->g, a->embed_ids, T, h));
        for (int i = 0; hidden && i < T; i++)
            if (a->embed_ids[i] == -2) a->embed_ids[i] = pad;
    }
    tdm_model_grad_ready(m, m->embed);
    if (need_vision)
        for (int r = 0; r < n_image_rows; r++)
            memcpy(a->dmerge + (int64_t)r * O, a->g + (int64_t)a->image_rows[r] * h, sizeof(float) * h);
    tdm_model_unit_end(m, m->u_embed, 1, t0);
}

/* ---- one more token (tdm_model_decode) ------------------------------------------------ */

/* out[hd] = softmax(q . k_j * scale) v_j over the n rows of k, v (row stride ld). */
static void attend_one(float *out, const float *q, const float *k, const float *v, int n, int64_t ld, int hd,
                       float scale, float *p) {
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) {
        const float *kj = k + (int64_t)j * ld;
        float s = 0;
        for (int c = 0; c < hd; c++) s += q[c] * kj[c];
        p[j] = s * scale;
        if (p[j] > mx) mx = p[j];
    }
    double sum = 0;
    for (int j = 0; j < n; j++) sum += p[j] = expf(p[j] - mx);
    memset(out, 0, sizeof(float) * (size_t)hd);
    for (int j = 0; j < n; j++) {
        const float *vj = v + (int64_t)j * ld;
        float w = (float)(p[j] / sum);
        for (int c = 0; c < hd; c++) out[c] += w * vj[c];
    }
}

/* The new token is row t = decode_len of every decoder activation: the layers of the forward
 * above restricted to that row, with the attention of its one query over rows 0..t of the
 * layer's k and v (kv head head / G for GQA; every earlier row is in the past, so no mask).
 * New tokens are text: DeepStack adds nothing to them. The rows past the prompt are free in
 * the reserved activations, so the cache costs no memory. */
int tdm_model_decode(tdm_model *m, int32_t token, const int32_t pos[3], float *logits, tdm_error *err) {
    const tdm_model_config *c = &m->cfg;
    const tdm_text_config *tc = &c->text;
    model_acts *a = &m->a;
    int t = m->decode_len;
    if (t <= 0)
        return tdm_errorf(err, "model decode: no prompt to continue (run tdm_model_forward on a one-sequence batch "
                               "first)");
    if (m->rc.method != TDM_RECOMPUTE_NONE)
        return tdm_errorf(err, "model decode: the key/value cache needs every layer's activations kept (reserve "
                               "without recomputation)");
    if (t >= m->limits.max_tokens)
        return tdm_errorf(err, "model decode: token %d is past the %d reserved", t + 1, m->limits.max_tokens);
    if (token < 0 || token >= tc->vocab_size || token == c->image_token_id || token == c->video_token_id)
        return tdm_errorf(err, "model decode: token id %d is not a text token of the vocabulary of %d", token,
                          tc->vocab_size);
    int h = tc->hidden_size, nh = tc->num_heads, nkv = tc->num_kv_heads, hd = tc->head_dim, L = tc->num_layers;
    int Q = nh * hd, KV = nkv * hd, G = nh / nkv, half = hd / 2;
    float scale = 1.0f / sqrtf((float)hd), *p = tdm_xmalloc(sizeof(float) * (size_t)(t + 1));
    /* the row's angles: position_ids [3, 1] are its t, h, w positions */
    tdm_mrope_tables(a->txt_rope_cos + (int64_t)t * half, a->txt_rope_sin + (int64_t)t * half, pos, 1, tc);
    float *x = (L > 0 ? a->lay[0].x : a->x_final) + (int64_t)t * h;
    tdm_embedding_forward(x, tdm_model_w(m, m->embed), &token, 1, h);
    for (int l = 0; l < L; l++) {
        dec_layer_act *d = &a->lay[l];
        layer_qkv(m, l, t, 1);
        const float *q = d->q + (int64_t)t * Q;
        for (int head = 0; head < nh; head++)
            attend_one(d->att + (int64_t)t * Q + head * hd, q + head * hd, d->k + (head / G) * hd,
                       d->v + (head / G) * hd, t + 1, KV, hd, scale, p);
        layer_out(m, l, t, 1, l + 1 < L ? a->lay[l + 1].x : a->x_final, NULL);
    }
    float *fin = a->fin + (int64_t)t * h;
    tdm_rmsnorm_forward(fin, a->fin_rstd + t, a->x_final + (int64_t)t * h, tdm_model_w(m, m->final_norm), 1, h,
                        (float)tc->rms_norm_eps);
    if (logits) tdm_linear_forward(logits, fin, tdm_model_w(m, m->lm_head), NULL, 1, h, tc->vocab_size);
    free(p);
    m->decode_len = t + 1;
    return 0;
}
