/* Tests of tdm_model_decode (src/model/decode.c), the KV-cache step of generation: after a forward over a
 * prompt, each decoded token's logits must equal those of a full forward over the prompt plus every token
 * decoded so far (the reference: no cache, the training forward with flash attention over the whole
 * sequence). Prompts with images (vision rows and DeepStack in the cache) and text only; GQA (4 query
 * heads over 2 kv heads; also as many kv heads as query heads, head_dim wider than hidden / heads with a
 * tied lm_head, one layer without DeepStack); interleaved M-RoPE at positions that continue the prompt's.
 * Tolerance: 2e-5 of the largest |logit| (float32, different summation orders in attention). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "harness.h"
#include "model/qwen3vl.h"
#include "model/model_configs.h"
#include "model/random_batch.h"

enum { NEW = 6 };

/* b extended by the tokens ids[0..k) at positions next, next+1, ...: a fresh batch (free with rb_free). */
static void extend(tdm_batch *out, const tdm_batch *b, const int32_t *ids, int k, int32_t next) {
    int n = b->n_tokens, T = n + k;
    *out = *b;
    out->n_tokens = T;
    out->cap_tokens = T;
    out->cu_seqlens = calloc(2, sizeof(int32_t));
    out->cu_seqlens[1] = T;
    out->input_ids = calloc((size_t)T, sizeof(int32_t));
    out->labels = calloc((size_t)T, sizeof(int32_t));
    out->targets = calloc((size_t)T, sizeof(int32_t));
    out->position_ids = calloc((size_t)3 * T, sizeof(int32_t));
    memcpy(out->input_ids, b->input_ids, sizeof(int32_t) * (size_t)n);
    memcpy(out->input_ids + n, ids, sizeof(int32_t) * (size_t)k);
    for (int i = 0; i < T; i++) out->labels[i] = out->targets[i] = -100;
    out->n_target_tokens = 0;
    for (int a = 0; a < 3; a++) {
        memcpy(out->position_ids + (size_t)a * T, b->position_ids + (size_t)a * n, sizeof(int32_t) * (size_t)n);
        for (int j = 0; j < k; j++) out->position_ids[(size_t)a * T + n + j] = next + j;
    }
    size_t np = (size_t)(b->n_patches ? b->n_patches : 1) * (size_t)b->patch_dim;
    out->pixel_values = malloc(sizeof(float) * np);
    memcpy(out->pixel_values, b->pixel_values, sizeof(float) * np);
    out->image_grid_thw = calloc((size_t)3 * (b->n_images ? b->n_images : 1), sizeof(int32_t));
    memcpy(out->image_grid_thw, b->image_grid_thw, sizeof(int32_t) * 3 * (size_t)b->n_images);
}

static double max_abs(const float *x, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

static void check_decode_cfg(const rb_sample *smp, const char *what, void (*edit)(tdm_model_config *)) {
    tdm_model_config c;
    cfg_small(&c, 32, 32, 3, 2, 64);
    if (edit) edit(&c);
    tdm_error err;
    tdm_freeze fz = {1, 1, 1, 1};
    tdm_model *m = tdm_model_create(&c, &fz, &err);
    float *data = NULL, *grad = NULL;
    CHECK(m && tdm_param_table_alloc(tdm_model_params(m), &data, &grad, &err) == 0, "%s: create", what);
    tdm_model_init_weights(m, 11);
    tdm_batch b;
    rb_build(&b, &c, smp, 1, 17);
    int n = b.n_tokens, V = c.text.vocab_size;
    tdm_model_limits lim = {n + NEW, 1, b.n_patches, b.n_images};
    CHECK(tdm_model_reserve(m, &lim, &err) == 0, "%s: reserve: %s", what, err.msg);
    int32_t next = 0;
    for (int i = 0; i < 3 * n; i++) next = b.position_ids[i] + 1 > next ? b.position_ids[i] + 1 : next;
    int32_t ids[NEW] = {5, 17, 5, 42, 0, 59}; /* text ids (the placeholders are the last four) */
    float *got = tdm_xmalloc(sizeof(float) * (size_t)V), *want = tdm_xmalloc(sizeof(float) * (size_t)V);
    double worst = 0;
    for (int k = 0; k < NEW; k++) {
        /* the reference first: a full forward over the prompt and the k + 1 tokens so far */
        tdm_batch e;
        extend(&e, &b, ids, k + 1, next);
        int32_t row = n + k;
        CHECK(tdm_model_forward(m, &e, &row, 1, want, NULL, &err) == 0, "%s: full forward: %s", what, err.msg);
        rb_free(&e);
        /* then the cache: the prompt once, and the k + 1 tokens one at a time */
        int32_t prow = n - 1;
        CHECK(tdm_model_forward(m, &b, &prow, 1, got, NULL, &err) == 0, "%s: prompt: %s", what, err.msg);
        for (int j = 0; j <= k; j++) {
            int32_t pos[3] = {next + j, next + j, next + j};
            CHECK(tdm_model_decode(m, ids[j], pos, got, &err) == 0, "%s: decode %d: %s", what, j, err.msg);
        }
        double scale = max_abs(want, V), d = 0;
        for (int v = 0; v < V; v++) d = fmax(d, fabs((double)got[v] - want[v]));
        worst = fmax(worst, d / scale);
        CHECK(d <= 2e-5 * scale, "%s: token %d: logits differ by %.3g (largest %.3g)", what, k + 1, d, scale);
    }
    printf("# %s: %d-token prompt, %d decoded: worst logit difference %.2g of the largest\n", what, n, NEW, worst);

    /* misuse: a placeholder token, past the reserve, and a backward in between all refuse */
    int32_t prow = n - 1, pos[3] = {next, next, next};
    CHECK(tdm_model_forward(m, &b, &prow, 1, got, NULL, &err) == 0, "%s: prompt", what);
    CHECK(tdm_model_decode(m, c.image_token_id, pos, got, &err) != 0 && strstr(err.msg, "not a text token"),
          "%s: an image placeholder refused: %s", what, err.msg);
    for (int j = 0; j < NEW; j++) CHECK(tdm_model_decode(m, 1, pos, got, &err) == 0, "%s: fill the reserve", what);
    CHECK(tdm_model_decode(m, 1, pos, got, &err) != 0 && strstr(err.msg, "reserved"), "%s: past the reserve: %s", what,
          err.msg);
    tdm_model_free(m);
    tdm_free_big(data);
    tdm_free_big(grad);
    rb_free(&b);
    free(got);
    free(want);
}

static void check_decode(const rb_sample *smp, const char *what) { check_decode_cfg(smp, what, NULL); }

static void edit_mha(tdm_model_config *c) { c->text.num_kv_heads = c->text.num_heads; }
static void edit_wide(tdm_model_config *c) {
    c->text.head_dim = 16;
    c->text.mrope_section[0] = 4;
    c->text.mrope_section[1] = 2;
    c->text.mrope_section[2] = 2;
    c->tie_word_embeddings = 1;
}
static void edit_one(tdm_model_config *c) {
    c->text.num_layers = 1;
    c->vision.n_deepstack = 0;
}

static void test_decode_shapes(void) {
    rb_sample s = {.text_len = 5, .n_images = 2, .gh = {4, 2}, .gw = {2, 6}};
    check_decode_cfg(&s, "kv heads == q heads", edit_mha);
    check_decode_cfg(&s, "head_dim 16 != hidden/heads 8, tied", edit_wide);
    check_decode_cfg(&s, "one layer, no DeepStack", edit_one);
}

static void test_decode_text_only(void) {
    rb_sample s = {.text_len = 9, .n_images = 0};
    check_decode(&s, "text only");
}

static void test_decode_after_images(void) {
    rb_sample s = {.text_len = 5, .n_images = 2, .gh = {4, 2}, .gw = {2, 6}};
    check_decode(&s, "two images");
}

/* No forward before, or a packed batch of two samples before: nothing to continue. */
static void test_decode_needs_one_sequence(void) {
    tdm_model_config c;
    cfg_small(&c, 32, 32, 3, 2, 64);
    tdm_error err;
    tdm_freeze fz = {1, 1, 1, 1};
    tdm_model *m = tdm_model_create(&c, &fz, &err);
    float *data = NULL, *grad = NULL, logits[64];
    CHECK(m && tdm_param_table_alloc(tdm_model_params(m), &data, &grad, &err) == 0, "create");
    tdm_model_init_weights(m, 3);
    rb_sample s[2] = {{.text_len = 4, .n_images = 0}, {.text_len = 6, .n_images = 0}};
    tdm_batch b;
    rb_build(&b, &c, s, 2, 5);
    tdm_model_limits lim = {b.n_tokens + 4, 2, 0, 0};
    CHECK(tdm_model_reserve(m, &lim, &err) == 0, "reserve: %s", err.msg);
    int32_t pos[3] = {20, 20, 20}, row = 0;
    CHECK(tdm_model_decode(m, 1, pos, logits, &err) != 0 && strstr(err.msg, "no prompt"), "no forward: %s", err.msg);
    CHECK(tdm_model_forward(m, &b, &row, 1, logits, NULL, &err) == 0, "packed forward: %s", err.msg);
    CHECK(tdm_model_decode(m, 1, pos, logits, &err) != 0 && strstr(err.msg, "no prompt"), "after a packed batch: %s",
          err.msg);
    tdm_model_free(m);
    tdm_free_big(data);
    tdm_free_big(grad);
    rb_free(&b);
}

int main(void) {
    RUN(test_decode_text_only);
    RUN(test_decode_after_images);
    RUN(test_decode_needs_one_sequence);
    RUN(test_decode_shapes);
    return TEST_SUMMARY();
}
