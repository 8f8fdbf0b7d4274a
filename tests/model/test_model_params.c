/* test_model_params.c - the parameter table: Hugging Face names and shapes, counts
 * against the published totals (spec section 1), freeze flags, units, initial values. */
#include <stdlib.h>

#include "core/alloc.h"
#include "harness.h"
#include "model/qwen3vl.h"
#include "model_configs.h"
#include "random_batch.h"

static void test_2b_counts(void) {
    tdm_model_config c;
    cfg_2b(&c);
    tdm_error err;
    tdm_model *m = tdm_model_create(&c, NULL, &err);
    CHECK(m != NULL, "%s", err.msg);
    if (!m) return;
    tdm_param_table *t = tdm_model_params(m);
    CHECK(tdm_param_table_numel(t, 0) == 2127532032LL, "total %lld", (long long)tdm_param_table_numel(t, 0));
    CHECK(t->n == 315 + 310, "tensors %d", t->n);
    CHECK(tdm_param_table_find(t, "lm_head.weight") < 0, "tied model has no lm_head");
    int i = tdm_param_table_find(t, "model.visual.patch_embed.proj.weight");
    CHECK(i == 0 && t->p[i].ndim == 5 && t->p[i].shape[0] == 1024 && t->p[i].shape[1] == 3 && t->p[i].shape[2] == 2 &&
              t->p[i].shape[3] == 16 && t->p[i].shape[4] == 16,
          "patch_embed");
    i = tdm_param_table_find(t, "model.visual.deepstack_merger_list.2.norm.weight");
    CHECK(i >= 0 && t->p[i].shape[0] == 4096, "deepstack norm");
    i = tdm_param_table_find(t, "model.language_model.layers.27.self_attn.k_proj.weight");
    CHECK(i >= 0 && t->p[i].shape[0] == 1024 && t->p[i].shape[1] == 2048, "k_proj");
    CHECK(strcmp(t->p[t->n - 1].name, "model.language_model.norm.weight") == 0, "last %s", t->p[t->n - 1].name);
    int64_t vis = 0;
    for (int k = 0; k < t->n; k++)
        if (strncmp(t->p[k].name, "model.visual.", 13) == 0) vis += t->p[k].numel;
    CHECK(vis == 406957056LL, "vision %lld", (long long)vis);
    /* units never decrease in registration (forward) order */
    for (int k = 1; k < t->n; k++) CHECK(t->p[k].unit >= t->p[k - 1].unit, "unit order at %s", t->p[k].name);
    tdm_model_free(m);
}

static void test_8b_counts_and_plan(void) {
    tdm_model_config c;
    cfg_8b(&c);
    tdm_error err;
    tdm_freeze fz = {.vision = 1, .projector = 0, .llm = 1, .lm_head = 0};
    tdm_model *m = tdm_model_create(&c, &fz, &err);
    CHECK(m != NULL, "%s", err.msg);
    if (!m) return;
    tdm_param_table *t = tdm_model_params(m);
    CHECK(tdm_param_table_numel(t, 0) == 8767123696LL, "total %lld", (long long)tdm_param_table_numel(t, 0));
    CHECK(t->n == 351 + 399, "tensors %d", t->n);
    CHECK(strcmp(t->p[t->n - 1].name, "lm_head.weight") == 0 && t->p[t->n - 1].trainable, "lm_head trainable");
    int64_t tr = tdm_param_table_numel(t, 1);
    CHECK(tr == 40119040LL + 120377856LL + 622329856LL, "trainable %lld", (long long)tr);
    int i = tdm_param_table_find(t, "model.visual.blocks.3.attn.qkv.weight");
    CHECK(i >= 0 && !t->p[i].trainable, "vision frozen");
    tdm_model_limits lim = {.max_tokens = 4096, .max_seqs = 8, .max_patches = 4096, .max_images = 8};
    int64_t bytes = tdm_model_activation_bytes_for(&c, &lim, NULL, NULL);
    /* at least the saved decoder MLP activations: 36 layers x 3 x T x 12288 floats */
    CHECK(bytes > 36LL * 3 * 4096 * 12288 * 4 && bytes < (int64_t)200 << 30, "activation bytes %lld", (long long)bytes);
    tdm_model_free(m);
}

static void test_init_depends_on_name_only(void) {
    tdm_model_config c;
    cfg_small(&c, 32, 32, 2, 2, 64);
    tdm_error err;
    tdm_model *a = tdm_model_create(&c, NULL, &err);
    c.tie_word_embeddings = 1;
    tdm_model *b = tdm_model_create(&c, NULL, &err);
    float *da, *ga, *db, *gb;
    tdm_param_table_alloc(tdm_model_params(a), &da, &ga, &err);
    tdm_param_table_alloc(tdm_model_params(b), &db, &gb, &err);
    tdm_model_init_weights(a, 7);
    tdm_model_init_weights(b, 7);
    tdm_param_table *ta = tdm_model_params(a), *tb = tdm_model_params(b);
    for (int i = 0; i < tb->n; i++) {
        int j = tdm_param_table_find(ta, tb->p[i].name);
        CHECK(j >= 0 && memcmp(ta->p[j].data, tb->p[i].data, sizeof(float) * tb->p[i].numel) == 0, "%s", tb->p[i].name);
    }
    int k = tdm_param_table_find(ta, "model.visual.blocks.1.norm2.weight");
    CHECK(ta->p[k].data[0] == 1.0f, "norm weight one");
    k = tdm_param_table_find(ta, "model.visual.blocks.1.attn.qkv.bias");
    CHECK(ta->p[k].data[3] == 0.0f, "bias zero");
    k = tdm_param_table_find(ta, "model.language_model.layers.1.mlp.up_proj.weight");
    double s = 0;
    for (int64_t q = 0; q < ta->p[k].numel; q++) s += (double)ta->p[k].data[q] * ta->p[k].data[q];
    double sd = sqrt(s / ta->p[k].numel);
    CHECK(sd > 0.017 && sd < 0.023, "std %g", sd);
    tdm_free_big(da);
    tdm_free_big(ga);
    tdm_free_big(db);
    tdm_free_big(gb);
    tdm_model_free(a);
    tdm_model_free(b);
}

static void test_bad_config(void) {
    tdm_model_config c;
    cfg_small(&c, 32, 32, 2, 2, 64);
    c.text.mrope_section[0] += 1;
    tdm_error err;
    tdm_model *m = tdm_model_create(&c, NULL, &err);
    CHECK(m == NULL && strstr(err.msg, "mrope_section"), "%s", err.msg);
    tdm_model_free(m);
}

/* tdm_model_flops against the count written out by hand for a text-only batch. */
static void test_flops_by_hand(void) {
    tdm_model_config c;
    cfg_small(&c, 32, 64, 2, 3, 128); /* h 64, 4 q / 2 kv heads of 16, MLP 192 */
    tdm_error err;
    tdm_model *m = tdm_model_create(&c, NULL, &err);
    tdm_freeze fz = {1, 1, 1, 0};
    tdm_model *mf = tdm_model_create(&c, &fz, &err);
    rb_sample smp[2] = {{.text_len = 10}, {.text_len = 7}};
    tdm_batch b;
    rb_build(&b, &c, smp, 2, 1);
    double T = 17, h = 64, q = 64, kv = 32, I = 192, V = 128, L = 3;
    double pairs = 10 * 11 / 2 + 7 * 8 / 2, C = (double)b.n_target_tokens;
    double per_layer = 2 * T * h * (q + 2 * kv) + 2 * T * q * h + 3 * 2 * T * h * I; /* forward matmuls */
    double attn = 4 * pairs * q;                                                     /* QK^T and PV */
    double head = 2 * C * h * V;
    double full = L * (3 * per_layer + 3 * attn) + 3 * head; /* forward, dx, dW; attention bw = 2x fwd */
    CHECK(fabs(tdm_model_flops(m, &b) - full) <= 1e-9 * full, "flops %.0f vs %.0f", tdm_model_flops(m, &b), full);
    /* everything frozen but lm_head: decoder forward only, lm_head forward + dW */
    double frozen = L * (per_layer + attn) + 2 * head;
    CHECK(fabs(tdm_model_flops(mf, &b) - frozen) <= 1e-9 * frozen, "frozen flops %.0f vs %.0f", tdm_model_flops(mf, &b),
          frozen);
    rb_free(&b);
    tdm_model_free(m);
    tdm_model_free(mf);
}

int main(void) {
    RUN(test_2b_counts);
    RUN(test_8b_counts_and_plan);
    RUN(test_init_depends_on_name_only);
    RUN(test_bad_config);
    RUN(test_flops_by_hand);
    return TEST_SUMMARY();
}
