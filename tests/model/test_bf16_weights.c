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
#include "two_micro_batches.h"

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
    tdm_model_limits lim;
    out->grad = NULL, out->numel = 0;
    ok = ok && tmb_run(m, &c, rc, out->loss, &out->grad, &out->numel, &lim, &err) == 0;
    CHECK(ok, "%s: %s", what, err.msg);
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
