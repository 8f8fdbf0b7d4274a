/* two_micro_batches.h - the step the model's storage and recomputation tests compare: two
 * micro-batches with gradients accumulated (images of several sizes, so that DeepStack rows
 * move, then text only), their loss sums, and a copy of every trainable gradient. */
#ifndef TDM_TEST_TWO_MICRO_BATCHES_H
#define TDM_TEST_TWO_MICRO_BATCHES_H

#include <stdlib.h>
#include <string.h>

#include "model/qwen3vl.h"
#include "random_batch.h"

static const rb_sample TMB_MB1[] = {
    {.text_len = 4, .n_images = 2, .gh = {4, 2}, .gw = {2, 6}},
    {.text_len = 7, .n_images = 0},
};
static const rb_sample TMB_MB2[] = {
    {.text_len = 5, .n_images = 1, .gh = {4}, .gw = {4}},
};

/* Reserves m for the first micro-batch's limits (*lim) under recomputation rc, runs both, and
 * fills loss[2], *grad (malloc'd, the trainable parameters' gradients in table order) and *numel.
 * -1 with err set when a call fails. */
static inline int tmb_run(tdm_model *m, const tdm_model_config *c, const tdm_recompute *rc, double loss[2],
                          float **grad, int64_t *numel, tdm_model_limits *lim, tdm_error *err) {
    tdm_batch b1, b2;
    rb_build(&b1, c, TMB_MB1, 2, 5);
    rb_build(&b2, c, TMB_MB2, 1, 6);
    *lim = (tdm_model_limits){b1.n_tokens, 4, b1.n_patches, 4};
    tdm_model_set_recompute(m, rc);
    int ok = tdm_model_reserve(m, lim, err) == 0;
    tdm_fb_result res;
    ok = ok && tdm_model_forward_backward(m, &b1, 0.25f, &res, err) == 0;
    loss[0] = res.loss_sum;
    ok = ok && tdm_model_forward_backward(m, &b2, 0.5f, &res, err) == 0;
    loss[1] = res.loss_sum;
    const tdm_param_table *t = tdm_model_params(m);
    int64_t n = 0;
    for (int i = 0; i < t->n; i++) n += t->p[i].trainable ? t->p[i].numel : 0;
    *numel = n;
    *grad = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    n = 0;
    for (int i = 0; ok && i < t->n; i++)
        if (t->p[i].trainable) {
            memcpy(*grad + n, t->p[i].grad, sizeof(float) * (size_t)t->p[i].numel);
            n += t->p[i].numel;
        }
    rb_free(&b1);
    rb_free(&b2);
    return ok ? 0 : -1;
}

#endif
