/* test_recompute.c - activation recomputation and the frozen tower's shared activations:
 * for every method, group size and freeze pattern, two accumulated micro-batches give
 * bitwise the loss and every gradient of the run that keeps all activations (the same
 * kernels on the same inputs: anything else is a bug, not rounding), while reserving
 * less memory; forward-only gives the same loss; decode is refused under recomputation.
 * The run that keeps everything is itself checked against the float64 reference
 * (tests/model/peer_parity.sh). */
#include <stdlib.h>

#include "core/alloc.h"
#include "harness.h"
#include "model/qwen3vl.h"
#include "model_configs.h"
#include "random_batch.h"
#include "two_micro_batches.h"

static void config(tdm_model_config *c) {
    cfg_small(c, 32, 32, 5, 5, 64);
    /* taps inside and at the ends of recompute groups */
    c->vision.n_deepstack = 3;
    c->vision.deepstack_indexes[0] = 0;
    c->vision.deepstack_indexes[1] = 2;
    c->vision.deepstack_indexes[2] = 3;
}

typedef struct run {
    double loss[2];
    float *grad; /* a copy of the whole gradient storage */
    int64_t numel, act_bytes;
} run;

/* Trains two micro-batches (gradients accumulated) and keeps the loss sums and the gradients. */
static int train(run *out, const tdm_freeze *fz, const tdm_recompute *rc, const char *what) {
    tdm_model_config c;
    config(&c);
    tdm_error err;
    tdm_model *m = tdm_model_create(&c, fz, &err);
    CHECK(m != NULL, "%s: create: %s", what, m ? "" : err.msg);
    if (!m) return -1;
    float *data = NULL, *grad = NULL;
    tdm_param_table *t = tdm_model_params(m);
    int ok = tdm_param_table_alloc(t, &data, &grad, &err) == 0;
    tdm_model_init_weights(m, 11);
    tdm_model_limits lim = {0};
    out->grad = NULL, out->numel = 0;
    ok = ok && tmb_run(m, &c, rc, out->loss, &out->grad, &out->numel, &lim, &err) == 0;
    CHECK(ok, "%s: %s", what, err.msg);
    out->act_bytes = tdm_model_activation_bytes(m);
    CHECK(out->act_bytes == tdm_model_activation_bytes_for(&c, &lim, rc, fz),
          "%s: reserved %lld bytes, the plan says %lld", what, (long long)out->act_bytes,
          (long long)tdm_model_activation_bytes_for(&c, &lim, rc, fz));
    tdm_model_free(m);
    tdm_free_big(data);
    tdm_free_big(grad);
    return ok ? 0 : -1;
}

static void check_freeze(tdm_freeze fz, const char *fname) {
    static const tdm_recompute RCS[] = {
        {TDM_RECOMPUTE_UNIFORM, 1},  {TDM_RECOMPUTE_UNIFORM, 2}, {TDM_RECOMPUTE_UNIFORM, 3}, {TDM_RECOMPUTE_UNIFORM, 5},
        {TDM_RECOMPUTE_UNIFORM, 40}, {TDM_RECOMPUTE_BLOCK, 1},   {TDM_RECOMPUTE_BLOCK, 3},   {TDM_RECOMPUTE_BLOCK, 5},
    };
    run base;
    char what[128];
    snprintf(what, sizeof what, "%s, everything kept", fname);
    if (train(&base, &fz, NULL, what)) return;
    for (size_t k = 0; k < sizeof RCS / sizeof *RCS; k++) {
        run r;
        snprintf(what, sizeof what, "%s, %s %d", fname, RCS[k].method == TDM_RECOMPUTE_UNIFORM ? "uniform" : "block",
                 RCS[k].num_layers);
        if (train(&r, &fz, &RCS[k], what)) continue;
        CHECK(r.loss[0] == base.loss[0] && r.loss[1] == base.loss[1], "%s: loss %.17g %.17g, kept %.17g %.17g", what,
              r.loss[0], r.loss[1], base.loss[0], base.loss[1]);
        CHECK(r.numel == base.numel && memcmp(r.grad, base.grad, sizeof(float) * (size_t)r.numel) == 0,
              "%s: gradients differ from the run that keeps every activation", what);
        /* one group of the whole tower rebuilds every layer at once: nothing to save */
        if (RCS[k].method == TDM_RECOMPUTE_BLOCK || RCS[k].num_layers < 5)
            CHECK(r.act_bytes < base.act_bytes, "%s: %lld activation bytes, not fewer than %lld kept", what,
                  (long long)r.act_bytes, (long long)base.act_bytes);
        free(r.grad);
    }
    free(base.grad);
}

static void test_all_trained(void) { check_freeze((tdm_freeze){0, 0, 0, 0}, "all trained"); }
static void test_vision_frozen(void) { check_freeze((tdm_freeze){1, 0, 0, 0}, "vision frozen"); }
static void test_vision_projector_frozen(void) { check_freeze((tdm_freeze){1, 1, 0, 0}, "vision+projector frozen"); }
static void test_llm_frozen(void) { check_freeze((tdm_freeze){0, 0, 1, 1}, "llm frozen"); }

/* A tower without a backward keeps one block's activations, not depth of them. */
static void test_frozen_tower_memory(void) {
    tdm_model_config c;
    config(&c);
    tdm_model_limits lim = {200, 4, 256, 4};
    int64_t all = tdm_model_activation_bytes_for(&c, &lim, NULL, NULL);
    tdm_freeze fz = {1, 0, 0, 0};
    int64_t frozen = tdm_model_activation_bytes_for(&c, &lim, NULL, &fz);
    /* one block's saved set: 9 [N,D] + 2 [N,Iv] + 4 [N] + [N,heads] floats */
    int64_t N = lim.max_patches, D = c.vision.hidden_size, Iv = c.vision.intermediate_size;
    int64_t block = 4 * (9 * N * D + 2 * N * Iv + 4 * N + N * c.vision.num_heads);
    CHECK(all - frozen >= (c.vision.depth - 2) * block, "frozen tower saves %lld bytes, expected at least %lld",
          (long long)(all - frozen), (long long)((c.vision.depth - 2) * block));
}

/* Forward only under recomputation: the same loss; decode refused. */
static void test_forward_and_decode(void) {
    tdm_model_config c;
    config(&c);
    tdm_error err;
    double loss[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        tdm_freeze fz = {0, 0, 0, 0};
        tdm_model *m = tdm_model_create(&c, &fz, &err);
        float *data = NULL, *grad = NULL;
        CHECK(m && tdm_param_table_alloc(tdm_model_params(m), &data, &grad, &err) == 0, "setup");
        if (!m) return;
        tdm_model_init_weights(m, 11);
        tdm_batch b;
        rb_build(&b, &c, TMB_MB2, 1, 6);
        tdm_model_limits lim = {b.n_tokens + 4, 1, b.n_patches, 1};
        tdm_recompute rc = {TDM_RECOMPUTE_UNIFORM, 2};
        tdm_model_set_recompute(m, k ? &rc : NULL);
        tdm_fb_result res;
        CHECK(tdm_model_reserve(m, &lim, &err) == 0 && tdm_model_forward(m, &b, NULL, 0, NULL, &res, &err) == 0,
              "forward: %s", err.msg);
        loss[k] = res.loss_sum;
        int32_t pos[3] = {100, 100, 100};
        float logits[64];
        int drc = tdm_model_decode(m, 1, pos, logits, &err);
        if (k)
            CHECK(drc != 0 && strstr(err.msg, "recomputation"), "decode under recomputation: rc %d '%s'", drc,
                  drc ? err.msg : "");
        else CHECK(drc == 0, "decode: %s", err.msg);
        rb_free(&b);
        tdm_model_free(m);
        tdm_free_big(data);
        tdm_free_big(grad);
    }
    CHECK(loss[0] == loss[1], "forward-only loss %.17g under recomputation, %.17g without", loss[1], loss[0]);
}

int main(void) {
    RUN(test_all_trained);
    RUN(test_vision_frozen);
    RUN(test_vision_projector_frozen);
    RUN(test_llm_frozen);
    RUN(test_frozen_tower_memory);
    RUN(test_forward_and_decode);
    return TEST_SUMMARY();
}
