/* decode.c - one more token through the text decoder, attending to the keys and values the
 * previous forward left in the activations (a KV cache that costs no extra memory: the rows
 * of the reserved activations past the prompt). See tdm_model_decode in qwen3vl.h.
 *
 * The new token is row t = n_past of every decoder activation; the layer is the forward of
 * decoder.c restricted to that row, with the attention of one query over rows 0..t of the
 * layer's k and v (its kv head for GQA, no mask needed: every earlier row is in the past).
 * New tokens are text, so DeepStack adds nothing to them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "kernels/kernels.h"
#include "model/qwen3vl_impl.h"

static void add_into(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

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

int tdm_model_decode(tdm_model *m, int32_t token, const int32_t pos[3], float *logits, tdm_error *err) {
    const tdm_model_config *c = &m->cfg;
    const tdm_text_config *tc = &c->text;
    model_acts *a = &m->a;
    int t = m->decode_len;
    if (t <= 0)
        return tdm_errorf(err, "model decode: no prompt to continue (run tdm_model_forward on a one-sequence batch "
                               "first)");
    if (t >= m->limits.max_tokens)
        return tdm_errorf(err, "model decode: token %d is past the %d reserved", t + 1, m->limits.max_tokens);
    if (token < 0 || token >= tc->vocab_size || token == c->image_token_id || token == c->video_token_id)
        return tdm_errorf(err, "model decode: token id %d is not a text token of the vocabulary of %d", token,
                          tc->vocab_size);
    int h = tc->hidden_size, nh = tc->num_heads, nkv = tc->num_kv_heads, hd = tc->head_dim, L = tc->num_layers;
    int I = tc->intermediate_size, Q = nh * hd, KV = nkv * hd, G = nh / nkv, half = hd / 2;
    float eps = (float)tc->rms_norm_eps, scale = 1.0f / sqrtf((float)hd);
    float *cs = tdm_xmalloc(sizeof(float) * (size_t)(2 * half + t + 1)), *sn = cs + half, *p = sn + half;
    tdm_mrope_tables(cs, sn, pos, 1, tc); /* [3, 1]: the new token's t, h, w positions */

    float *x = (L > 0 ? a->lay[0].x : a->x_final) + (int64_t)t * h;
    tdm_embedding_forward(x, tdm_model_w(m, m->embed), &token, 1, h);
    for (int l = 0; l < L; l++) {
        dec_layer_act *d = &a->lay[l];
        const dec_layer_ix *ix = &m->dl[l];
        float *ln1 = d->ln1 + (int64_t)t * h, *q = d->q + (int64_t)t * Q, *k = d->k + (int64_t)t * KV;
        float *qr = d->q_raw + (int64_t)t * Q, *kr = d->k_raw + (int64_t)t * KV, *v = d->v + (int64_t)t * KV;
        float *att = d->att + (int64_t)t * Q, *hh = d->h + (int64_t)t * h, *ln2 = d->ln2 + (int64_t)t * h;
        float *gate = d->gate + (int64_t)t * I, *up = d->up + (int64_t)t * I, *act = d->act + (int64_t)t * I;
        float *out = (l + 1 < L ? a->lay[l + 1].x : a->x_final) + (int64_t)t * h;
        tdm_rmsnorm_forward(ln1, d->ln1_rstd + t, x, tdm_model_w(m, ix->in_norm), 1, h, eps);
        tdm_linear_forward(qr, ln1, tdm_model_w(m, ix->q), NULL, 1, h, Q);
        tdm_linear_forward(kr, ln1, tdm_model_w(m, ix->k), NULL, 1, h, KV);
        tdm_linear_forward(v, ln1, tdm_model_w(m, ix->v), NULL, 1, h, KV);
        tdm_rmsnorm_forward(q, d->q_rstd + (int64_t)t * nh, qr, tdm_model_w(m, ix->q_norm), nh, hd, eps);
        tdm_rmsnorm_forward(k, d->k_rstd + (int64_t)t * nkv, kr, tdm_model_w(m, ix->k_norm), nkv, hd, eps);
        tdm_rope_forward(q, cs, sn, 1, nh, hd);
        tdm_rope_forward(k, cs, sn, 1, nkv, hd);
        for (int head = 0; head < nh; head++) /* query head `head` reads kv head head / G */
            attend_one(att + head * hd, q + head * hd, d->k + (head / G) * hd, d->v + (head / G) * hd, t + 1, KV, hd,
                       scale, p);
        tdm_linear_forward(hh, att, tdm_model_w(m, ix->o), NULL, 1, Q, h);
        add_into(hh, x, h);
        tdm_rmsnorm_forward(ln2, d->ln2_rstd + t, hh, tdm_model_w(m, ix->post_norm), 1, h, eps);
        tdm_linear_forward(gate, ln2, tdm_model_w(m, ix->gate), NULL, 1, h, I);
        tdm_linear_forward(up, ln2, tdm_model_w(m, ix->up), NULL, 1, h, I);
        tdm_swiglu_forward(act, gate, up, 1, I);
        tdm_linear_forward(out, act, tdm_model_w(m, ix->down), NULL, 1, I, h);
        add_into(out, hh, h);
        x = out;
    }
    float *fin = a->fin + (int64_t)t * h;
    tdm_rmsnorm_forward(fin, a->fin_rstd + t, x, tdm_model_w(m, m->final_norm), 1, h, eps);
    if (logits) tdm_linear_forward(logits, fin, tdm_model_w(m, m->lm_head), NULL, 1, h, tc->vocab_size);
    free(cs);
    m->decode_len = t + 1;
    return 0;
}
