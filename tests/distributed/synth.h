/* synth.h - a small synthetic model for the data-parallel tests, shaped like the real
 * one where it matters to dist: parameters registered in forward order with units,
 * a frozen tensor, odd sizes, biases and 1-D norm weights (no weight decay), and the
 * hooks called the way qwen3vl.c calls them (param_needed before the layer that reads
 * a tensor, grad_ready right after its last gradient accumulation, progress between
 * layers, layer_begin/end around every layer).
 *
 *   unit 0        in:        h = x W_in^T + b_in                       x [n, DIN]
 *   unit 1..L     layers.l:  h = h + (rmsnorm(h) W_l^T + b_l)          (layer 1's norm weight frozen)
 *   unit L+1      head:      y = rmsnorm(h) W_head^T                   y [n, DOUT]
 *   loss_sum = 1/2 sum (y - target)^2 over n rows x DOUT; "tokens" = rows.
 */
#ifndef TDM_TEST_DIST_SYNTH_H
#define TDM_TEST_DIST_SYNTH_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/params.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include "prof/prof.h"

enum { SY_DIN = 13, SY_H = 37, SY_DOUT = 11, SY_L = 3, SY_MAXN = 16 };

typedef struct synth {
    tdm_param_table t;
    int in_w, in_b, norm_w[SY_L], fc_w[SY_L], fc_b[SY_L], fnorm_w, head_w;
    int skip_grad_ready; /* table index whose grad_ready is never called (test), or -1 */
    int late_grad_ready; /* table index whose grad_ready comes only at the end of backward
                            (like a tied embedding finishing last), or -1 */
    const tdm_param_hooks *hooks;
    uint64_t layer_t0; /* start of the layer being recorded */
    /* activations [SY_MAXN rows] */
    float x[SY_MAXN * SY_DIN], tgt[SY_MAXN * SY_DOUT];
    float h[SY_L + 1][SY_MAXN * SY_H], a[SY_L][SY_MAXN * SY_H], rstd[SY_L][SY_MAXN];
    float f[SY_MAXN * SY_H], frstd[SY_MAXN], y[SY_MAXN * SY_DOUT];
    float dh[SY_MAXN * SY_H], da[SY_MAXN * SY_H], dt[SY_MAXN * SY_H], df[SY_MAXN * SY_H], dy[SY_MAXN * SY_DOUT];
} synth;

static void synth_build(synth *s) {
    memset(s, 0, sizeof *s);
    s->skip_grad_ready = s->late_grad_ready = -1;
    tdm_param_table *t = &s->t;
    int64_t sh[2];
    sh[0] = SY_H, sh[1] = SY_DIN;
    s->in_w = tdm_param_table_add(t, "in.weight", 2, sh, 1, 0);
    s->in_b = tdm_param_table_add(t, "in.bias", 1, sh, 1, 0);
    for (int l = 0; l < SY_L; l++) {
        char n[64];
        snprintf(n, sizeof n, "layers.%d.norm.weight", l);
        sh[0] = SY_H;
        s->norm_w[l] = tdm_param_table_add(t, n, 1, sh, l != 1, 1 + l);
        snprintf(n, sizeof n, "layers.%d.fc.weight", l);
        sh[0] = SY_H, sh[1] = SY_H;
        s->fc_w[l] = tdm_param_table_add(t, n, 2, sh, 1, 1 + l);
        snprintf(n, sizeof n, "layers.%d.fc.bias", l);
        s->fc_b[l] = tdm_param_table_add(t, n, 1, sh, 1, 1 + l);
    }
    sh[0] = SY_H;
    s->fnorm_w = tdm_param_table_add(t, "norm.weight", 1, sh, 1, SY_L + 1);
    sh[0] = SY_DOUT, sh[1] = SY_H;
    s->head_w = tdm_param_table_add(t, "head.weight", 2, sh, 1, SY_L + 1);
}

/* Deterministic weights (call after the owner bound data pointers). */
static void synth_init(synth *s, uint64_t seed) {
    for (int i = 0; i < s->t.n; i++) {
        tdm_param *p = &s->t.p[i];
        if (p->ndim == 1 && strstr(p->name, "norm")) {
            tdm_rng_fill_uniform(p->data, p->numel, 0.8f, 1.2f, seed, tdm_rng_stream_of(p->name));
        } else {
            float std = p->ndim == 2 ? 1.0f / (float)p->shape[1] : 0.1f;
            tdm_rng_fill_normal(p->data, p->numel, 0.0f, std * 3.0f, seed, tdm_rng_stream_of(p->name));
        }
    }
}

/* Rows of global micro-batch g of step `step`: 5..9 rows, so token counts differ. */
static int synth_rows(int step, int g) { return 5 + (step * 7 + g * 3) % 5; }

static void synth_data(synth *s, int step, int g, uint64_t seed) {
    int n = synth_rows(step, g);
    uint64_t stream = 1000003ull * (uint64_t)step + (uint64_t)g;
    tdm_rng_fill_normal(s->x, (int64_t)n * SY_DIN, 0.0f, 1.0f, seed + 1, stream);
    /* a learnable target: a fixed linear map of x (the same for every batch) plus noise */
    float map[SY_DOUT * SY_DIN];
    tdm_rng_fill_normal(map, SY_DOUT * SY_DIN, 0.0f, 0.5f, seed + 3, 0);
    tdm_rng_fill_normal(s->tgt, (int64_t)n * SY_DOUT, 0.0f, 0.1f, seed + 2, stream);
    for (int r = 0; r < n; r++)
        for (int j = 0; j < SY_DOUT; j++)
            for (int k = 0; k < SY_DIN; k++) s->tgt[r * SY_DOUT + j] += map[j * SY_DIN + k] * s->x[r * SY_DIN + k];
}

#define SY_HOOK(name, ...)                                                                                             \
    do {                                                                                                               \
        if (s->hooks && s->hooks->name) s->hooks->name(s->hooks->ctx, __VA_ARGS__);                                    \
    } while (0)
#define SY_PROGRESS()                                                                                                  \
    do {                                                                                                               \
        if (s->hooks && s->hooks->progress) s->hooks->progress(s->hooks->ctx);                                         \
    } while (0)

/* Layers are recorded for the profiler the way qwen3vl.c records its units (level 1),
 * and announced to the layer hooks when there are any. */
static void sy_layer_begin(synth *s, const char *name, int backward) {
    s->layer_t0 = tdm_prof_on(1) ? tdm_now_ns() : 0;
    SY_HOOK(layer_begin, name, backward);
}
static void sy_layer_end(synth *s, const char *name, int backward) {
    if (tdm_prof_on(1)) tdm_prof_complete(TDM_PROF_LAYER, 1, name, s->layer_t0, tdm_now_ns(), backward);
    SY_HOOK(layer_end, name, backward);
}

static float *sy_w(synth *s, int i) { return s->t.p[i].data; }
static float *sy_g(synth *s, int i) { return s->t.p[i].grad; } /* NULL when frozen */

static void sy_ready(synth *s, int i) {
    if (i != s->skip_grad_ready && i != s->late_grad_ready && s->t.p[i].trainable) SY_HOOK(grad_ready, i);
}

/* Forward and backward of one micro-batch (data already in s->x, s->tgt); gradients
 * of grad_scale * loss_sum are ACCUMULATED. Returns loss_sum; *tokens = rows. */
static double synth_forward_backward(synth *s, int n, float grad_scale, int64_t *tokens) {
    const int H = SY_H;
    static const char *const layer_names[SY_L] = {"layers.0", "layers.1", "layers.2"};
    /* forward */
    sy_layer_begin(s, "in", 0);
    SY_HOOK(param_needed, s->in_w);
    SY_HOOK(param_needed, s->in_b);
    tdm_linear_forward(s->h[0], s->x, sy_w(s, s->in_w), sy_w(s, s->in_b), n, SY_DIN, H);
    sy_layer_end(s, "in", 0);
    SY_PROGRESS();
    for (int l = 0; l < SY_L; l++) {
        sy_layer_begin(s, layer_names[l], 0);
        SY_HOOK(param_needed, s->norm_w[l]);
        SY_HOOK(param_needed, s->fc_w[l]);
        SY_HOOK(param_needed, s->fc_b[l]);
        tdm_rmsnorm_forward(s->a[l], s->rstd[l], s->h[l], sy_w(s, s->norm_w[l]), n, H, 1e-6f);
        tdm_linear_forward(s->h[l + 1], s->a[l], sy_w(s, s->fc_w[l]), sy_w(s, s->fc_b[l]), n, H, H);
        for (int k = 0; k < n * H; k++) s->h[l + 1][k] += s->h[l][k];
        sy_layer_end(s, layer_names[l], 0);
        SY_PROGRESS();
    }
    sy_layer_begin(s, "head", 0);
    SY_HOOK(param_needed, s->fnorm_w);
    SY_HOOK(param_needed, s->head_w);
    tdm_rmsnorm_forward(s->f, s->frstd, s->h[SY_L], sy_w(s, s->fnorm_w), n, H, 1e-6f);
    tdm_linear_forward(s->y, s->f, sy_w(s, s->head_w), NULL, n, H, SY_DOUT);
    double loss = 0.0;
    for (int k = 0; k < n * SY_DOUT; k++) {
        float d = s->y[k] - s->tgt[k];
        loss += 0.5 * (double)d * (double)d;
        s->dy[k] = grad_scale * d;
    }
    sy_layer_end(s, "head", 0);
    SY_PROGRESS();

    /* backward */
    sy_layer_begin(s, "head", 1);
    tdm_linear_backward(s->df, sy_g(s, s->head_w), NULL, s->dy, s->f, sy_w(s, s->head_w), n, H, SY_DOUT);
    sy_ready(s, s->head_w);
    tdm_rmsnorm_backward(s->dh, sy_g(s, s->fnorm_w), s->df, s->h[SY_L], s->frstd, sy_w(s, s->fnorm_w), n, H);
    sy_ready(s, s->fnorm_w);
    sy_layer_end(s, "head", 1);
    SY_PROGRESS();
    for (int l = SY_L - 1; l >= 0; l--) {
        sy_layer_begin(s, layer_names[l], 1);
        tdm_linear_backward(s->da, sy_g(s, s->fc_w[l]), sy_g(s, s->fc_b[l]), s->dh, s->a[l], sy_w(s, s->fc_w[l]), n, H,
                            H);
        sy_ready(s, s->fc_w[l]);
        sy_ready(s, s->fc_b[l]);
        tdm_rmsnorm_backward(s->dt, sy_g(s, s->norm_w[l]), s->da, s->h[l], s->rstd[l], sy_w(s, s->norm_w[l]), n, H);
        sy_ready(s, s->norm_w[l]);
        for (int k = 0; k < n * H; k++) s->dh[k] += s->dt[k];
        sy_layer_end(s, layer_names[l], 1);
        SY_PROGRESS();
    }
    sy_layer_begin(s, "in", 1);
    tdm_linear_backward(NULL, sy_g(s, s->in_w), sy_g(s, s->in_b), s->dh, s->x, sy_w(s, s->in_w), n, SY_DIN, H);
    sy_ready(s, s->in_w);
    sy_ready(s, s->in_b);
    if (s->late_grad_ready >= 0) SY_HOOK(grad_ready, s->late_grad_ready);
    sy_layer_end(s, "in", 1);
    *tokens = n;
    return loss;
}

#endif
