/* test_bf16_weights.c - weights stored as bfloat16 bits (the trainer's --bf16): the model widens
 * each unit's weights into its fp32 scratch before the unit's kernels run, so the losses and every
 * gradient are bitwise those of fp32 storage holding the same bfloat16 values, with and without
 * recomputation, frozen parts and tied embeddings; the scratch holds one unit, the largest. */
#include <stdlib.h>

#include "core/alloc.h"
#include "harness.h"
#include "kernels/kernels.h"
#include "model/qwen3vl.h"
#include "model_configs.h"
#include "random_batch.h"

static const rb_sample MB1[] = {
    {.text_len = 4, .n_images = 2, .gh = {4, 2}, .gw = {2, 6}},
    {.text_len = 7, .n_images = 0},
};
static const rb_sample MB2[] = {
    {.text_len = 5, .n_images = 1, .gh = {4}, .gw = {4}},
};

typedef struct run {
    double loss[2];
    float *grad;
    int64_t numel, wide_bytes, largest_unit;
} run;

/* Two accumulated micro-batches; bits: the weights live in bfloat16 storage (data NULL), else in
 * fp32 storage rounded to bfloat16 values. */
static int train(run *out, int bits, int tied, const tdm_freeze *fz, const tdm_recompute *rc, const char *what) {
    tdm_model_config c;
    cfg_small(&c, 32, 32, 4, 4, 64);
    c.tie_word_embeddings = tied;
    tdm_error err;
    tdm_model *m = tdm_model_create(&c, fz, &err);
    CHECK(m != NULL, "%s: create: %s", what, m ? "" : err.msg);
    if (!m) return -1;
    float *data = NULL, *grad = NULL;
    tdm_param_table *t = tdm_model_params(m);
    int ok = tdm_param_table_alloc(t, &data, &grad, &err) == 0;
    uint16_t *store = calloc((size_t)tdm_param_table_numel(t, 0), sizeof *store);
    if (bits) {
        int64_t o = 0;
        for (int i = 0; i < t->n; i++) {
            t->p[i].bits = store + o;
            t->p[i].data = NULL;
            o += t->p[i].numel;
        }
    }
    tdm_model_init_weights(m, 11);
    if (!bits)
        for (int i = 0; i < t->n; i++) tdm_round_to_bf16(t->p[i].data, NULL, t->p[i].data, t->p[i].numel);
    tdm_batch b1, b2;
    rb_build(&b1, &c, MB1, 2, 5);
    rb_build(&b2, &c, MB2, 1, 6);
    tdm_model_limits lim = {b1.n_tokens, 4, b1.n_patches, 4};
    tdm_model_set_recompute(m, rc);
    ok = ok && tdm_model_reserve(m, &lim, &err) == 0;
    tdm_fb_result res;
    ok = ok && tdm_model_forward_backward(m, &b1, 0.25f, &res, &err) == 0;
    out->loss[0] = res.loss_sum;
    ok = ok && tdm_model_forward_backward(m, &b2, 0.5f, &res, &err) == 0;
    out->loss[1] = res.loss_sum;
    CHECK(ok, "%s: %s", what, err.msg);
    int64_t n = 0;
    for (int i = 0; i < t->n; i++) n += t->p[i].trainable ? t->p[i].numel : 0;
    out->numel = n;
    out->grad = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    n = 0;
    for (int i = 0; i < t->n; i++)
        if (t->p[i].trainable) {
            memcpy(out->grad + n, t->p[i].grad, sizeof(float) * (size_t)t->p[i].numel);
            n += t->p[i].numel;
        }
    out->wide_bytes = tdm_model_wide_bytes(m);
    /* the largest unit, counted here from the table */
    int64_t per[256] = {0};
    out->largest_unit = 0;
    for (int i = 0; i < t->n; i++)
        if (t->p[i].unit < 256 && (per[t->p[i].unit] += t->p[i].numel) > out->largest_unit)
            out->largest_unit = per[t->p[i].unit];
    /* tdm_param_values reads either storage */
    float *scratch = malloc(sizeof(float) * (size_t)tdm_param_table_max_numel(t));
    const float *v = tdm_param_values(&t->p[0], scratch);
    CHECK(v != NULL && (bits ? v == scratch : v == t->p[0].data), "%s: tdm_param_values", what);
    free(scratch);
    rb_free(&b1);
    rb_free(&b2);
    tdm_model_free(m);
    tdm_free_big(data);
    tdm_free_big(grad);
    free(store);
    return ok ? 0 : -1;
}

static void compare(int tied, tdm_freeze fz, const tdm_recompute *rc, const char *name) {
    run a, b;
    char wa[160], wb[160];
    snprintf(wa, sizeof wa, "%s, fp32 storage", name);
    snprintf(wb, sizeof wb, "%s, bfloat16 storage", name);
    if (train(&a, 0, tied, &fz, rc, wa) || train(&b, 1, tied, &fz, rc, wb)) return;
    CHECK(a.loss[0] == b.loss[0] && a.loss[1] == b.loss[1], "%s: loss %.17g %.17g from bfloat16 storage, %.17g %.17g",
          name, b.loss[0], b.loss[1], a.loss[0], a.loss[1]);
    CHECK(a.numel == b.numel && memcmp(a.grad, b.grad, sizeof(float) * (size_t)a.numel) == 0,
          "%s: gradients differ between the storages", name);
    CHECK(a.wide_bytes == 0 && b.wide_bytes == 4 * b.largest_unit,
          "%s: scratch %lld bytes (fp32 storage: %lld), expected 4 x the largest unit's %lld elements", name,
          (long long)b.wide_bytes, (long long)a.wide_bytes, (long long)b.largest_unit);
    free(a.grad);
    free(b.grad);
}

static void test_all_trained(void) { compare(0, (tdm_freeze){0, 0, 0, 0}, NULL, "all trained"); }
static void test_tied(void) { compare(1, (tdm_freeze){0, 0, 0, 0}, NULL, "tied embeddings"); }
static void test_frozen(void) {
    compare(0, (tdm_freeze){1, 0, 0, 0}, NULL, "vision frozen");
    compare(0, (tdm_freeze){0, 0, 1, 1}, NULL, "llm frozen");
}
static void test_recompute(void) {
    tdm_recompute u = {TDM_RECOMPUTE_UNIFORM, 2}, bl = {TDM_RECOMPUTE_BLOCK, 3};
    compare(0, (tdm_freeze){0, 0, 0, 0}, &u, "uniform recomputation in groups of 2");
    compare(1, (tdm_freeze){0, 0, 0, 0}, &bl, "block recomputation of 3, tied");
}

int main(void) {
    RUN(test_all_trained);
    RUN(test_tied);
    RUN(test_frozen);
    RUN(test_recompute);
    return TEST_SUMMARY();
}
