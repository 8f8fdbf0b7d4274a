/* test_model_hooks.c - the contract between the model and the data-parallel layer:
 * param_needed once per parameter per forward in table order; grad_ready exactly once
 * per trainable parameter per backward, never for a frozen one, and only when that
 * gradient is final; no vision backward when vision and projector are frozen;
 * gradients accumulate across micro-batches; bad batches are errors, not crashes. */
#include <stdlib.h>

#include "core/alloc.h"
#include "harness.h"
#include "model/qwen3vl.h"
#include "model_configs.h"
#include "prof/profiler.h"
#include "random_batch.h"

typedef struct rec {
    tdm_param_table *t;
    int n_needed, last_needed, order_ok;
    int *needed, *ready;
    float **snap;         /* copy of each gradient when grad_ready fired */
    int vision_bw_layers; /* layer_begin(..., backward) for vision units */
    int begins, ends, progress;
} rec;

static void on_needed(void *ctx, int i) {
    rec *r = ctx;
    if (i <= r->last_needed) r->order_ok = 0;
    r->last_needed = i;
    r->needed[i]++;
}
static void on_ready(void *ctx, int i) {
    rec *r = ctx;
    r->ready[i]++;
    tdm_param *p = &r->t->p[i];
    if (!r->snap[i]) r->snap[i] = malloc(sizeof(float) * (size_t)p->numel);
    memcpy(r->snap[i], p->grad, sizeof(float) * (size_t)p->numel);
}
static void on_progress(void *ctx) { ((rec *)ctx)->progress++; }
static void on_begin(void *ctx, const char *name, int bw) {
    rec *r = ctx;
    r->begins++;
    if (bw && strncmp(name, "vision", 6) == 0) r->vision_bw_layers++;
}
static void on_end(void *ctx, const char *name, int bw) {
    (void)name;
    (void)bw;
    ((rec *)ctx)->ends++;
}

/* Zeroed counters for table t, installed as m's hooks (the model copies the struct). */
static void rec_install(rec *r, tdm_param_table *t, tdm_model *m) {
    *r = (rec){.t = t, .last_needed = -1, .order_ok = 1};
    r->needed = calloc((size_t)t->n, sizeof(int));
    r->ready = calloc((size_t)t->n, sizeof(int));
    r->snap = calloc((size_t)t->n, sizeof(float *));
    tdm_param_hooks h = {r, on_needed, on_ready, on_progress, on_begin, on_end};
    tdm_model_set_hooks(m, &h);
}
static void rec_free(rec *r) {
    for (int i = 0; i < r->t->n; i++) free(r->snap[i]);
    free(r->snap);
    free(r->needed);
    free(r->ready);
}

static const rb_sample SAMPLES[] = {
    {.text_len = 4, .n_images = 2, .gh = {4, 2}, .gw = {2, 6}},
    {.text_len = 7, .n_images = 0},
};

typedef struct setup {
    tdm_model *m;
    float *data, *grad;
    tdm_batch b;
} setup;

static int make(setup *s, int tied, tdm_freeze fz) {
    tdm_model_config c;
    cfg_small(&c, 32, 32, 3, 2, 64);
    c.tie_word_embeddings = tied;
    tdm_error err;
    s->m = tdm_model_create(&c, &fz, &err);
    if (!s->m) return -1;
    if (tdm_param_table_alloc(tdm_model_params(s->m), &s->data, &s->grad, &err)) return -1;
    tdm_model_init_weights(s->m, 3);
    rb_build(&s->b, &c, SAMPLES, 2, 5);
    tdm_model_limits lim = {s->b.n_tokens, 4, s->b.n_patches, 4};
    return tdm_model_reserve(s->m, &lim, &err);
}

static void unmake(setup *s) {
    tdm_model_free(s->m);
    tdm_free_big(s->data);
    tdm_free_big(s->grad);
    rb_free(&s->b);
}

static void check_contract(int tied, tdm_freeze fz, const char *what) {
    setup s;
    CHECK(make(&s, tied, fz) == 0, "%s: setup", what);
    tdm_param_table *t = tdm_model_params(s.m);
    rec r;
    rec_install(&r, t, s.m);
    tdm_fb_result res;
    tdm_error err;
    CHECK(tdm_model_forward_backward(s.m, &s.b, 0.5f, &res, &err) == 0, "%s: %s", what, err.msg);
    CHECK(r.order_ok, "%s: param_needed out of table order", what);
    CHECK(r.begins == r.ends && r.progress == r.ends && r.begins > 0, "%s: begins %d ends %d progress %d", what,
          r.begins, r.ends, r.progress);
    for (int i = 0; i < t->n; i++) {
        tdm_param *p = &t->p[i];
        CHECK(r.needed[i] == 1, "%s: param_needed(%s) called %d times", what, p->name, r.needed[i]);
        CHECK(r.ready[i] == (p->trainable ? 1 : 0), "%s: grad_ready(%s) called %d times (trainable %d)", what, p->name,
              r.ready[i], p->trainable);
        if (p->trainable && r.snap[i])
            CHECK(memcmp(r.snap[i], p->grad, sizeof(float) * (size_t)p->numel) == 0, "%s: %s changed after grad_ready",
                  what, p->name);
    }
    if (fz.vision && fz.projector) CHECK(r.vision_bw_layers == 0, "%s: vision backward ran", what);
    else CHECK(r.vision_bw_layers > 0, "%s: no vision backward", what);
    rec_free(&r);
    unmake(&s);
}

static void test_hooks_untied(void) { check_contract(0, (tdm_freeze){0, 0, 0, 0}, "untied"); }
static void test_hooks_tied(void) { check_contract(1, (tdm_freeze){0, 0, 0, 0}, "tied"); }
static void test_hooks_frozen_vision(void) { check_contract(0, (tdm_freeze){1, 1, 0, 0}, "vision+projector frozen"); }
static void test_hooks_frozen_llm(void) { check_contract(1, (tdm_freeze){0, 0, 1, 1}, "llm frozen"); }
static void test_hooks_projector_only(void) { check_contract(0, (tdm_freeze){1, 0, 1, 1}, "projector only"); }

/* At profiler level 1 the model records one LAYER event per unit and pass, whatever
 * hooks are installed (the data-parallel layer once recorded them a second time). */
static void test_one_profiler_event_per_unit(void) {
    setup s;
    CHECK(make(&s, 0, (tdm_freeze){1, 1, 0, 0}) == 0, "setup");
    tdm_param_table *t = tdm_model_params(s.m);
    rec r;
    rec_install(&r, t, s.m);
    tdm_prof_record_start(1, 100000);
    tdm_fb_result res;
    tdm_error err;
    CHECK(tdm_model_forward_backward(s.m, &s.b, 0.5f, &res, &err) == 0, "%s", err.msg);
    tdm_prof_record_stop();
    tdm_prof_collection c;
    tdm_prof_collect(&c);
    int layers = 0;
    for (int64_t k = 0; k < c.n_events; k++) layers += c.events[k].cat == TDM_PROF_LAYER;
    CHECK(layers == r.begins && layers > 0, "%d layer events for %d unit passes", layers, r.begins);
    tdm_prof_collection_free(&c);
    rec_free(&r);
    unmake(&s);
}

/* Forward only (generation, evaluation): every parameter needed once, in order, no grads. */
static void test_forward_only_hooks(void) {
    setup s;
    CHECK(make(&s, 0, (tdm_freeze){0, 0, 0, 0}) == 0, "setup");
    tdm_param_table *t = tdm_model_params(s.m);
    rec r;
    rec_install(&r, t, s.m);
    int32_t rows[2] = {0, 3};
    int V = tdm_model_get_config(s.m)->text.vocab_size;
    float *logits = calloc((size_t)2 * V, sizeof(float));
    tdm_fb_result res;
    tdm_error err;
    CHECK(tdm_model_forward(s.m, &s.b, rows, 2, logits, &res, &err) == 0, "%s", err.msg);
    CHECK(r.order_ok, "param_needed out of order");
    for (int i = 0; i < t->n; i++) {
        CHECK(r.needed[i] == 1, "param_needed(%s) %d times", t->p[i].name, r.needed[i]);
        CHECK(r.ready[i] == 0, "grad_ready(%s) in a forward", t->p[i].name);
    }
    int64_t ng = tdm_param_table_numel(t, 1);
    int nz = 0;
    for (int64_t i = 0; i < ng; i++) nz += s.grad[i] != 0.0f;
    CHECK(nz == 0, "%d gradient entries written by a forward", nz);
    free(logits);
    rec_free(&r);
    unmake(&s);
}

/* A text-only micro-batch runs no vision, but the counts must still add up. */
static void test_hooks_text_only(void) {
    tdm_model_config c;
    cfg_small(&c, 32, 32, 3, 2, 64);
    tdm_error err;
    tdm_model *m = tdm_model_create(&c, NULL, &err);
    float *d, *g;
    tdm_param_table_alloc(tdm_model_params(m), &d, &g, &err);
    tdm_model_init_weights(m, 1);
    rb_sample smp[2] = {{.text_len = 6}, {.text_len = 9}};
    tdm_batch b;
    rb_build(&b, &c, smp, 2, 4);
    tdm_model_limits lim = {64, 2, 64, 2};
    CHECK(tdm_model_reserve(m, &lim, &err) == 0, "%s", err.msg);
    tdm_param_table *t = tdm_model_params(m);
    rec r;
    rec_install(&r, t, m);
    tdm_fb_result res;
    CHECK(tdm_model_forward_backward(m, &b, 1.0f, &res, &err) == 0, "%s", err.msg);
    CHECK(r.order_ok, "param_needed out of order");
    for (int i = 0; i < t->n; i++) {
        CHECK(r.needed[i] == 1, "param_needed(%s) %d times", t->p[i].name, r.needed[i]);
        CHECK(r.ready[i] == 1, "grad_ready(%s) %d times", t->p[i].name, r.ready[i]);
    }
    rec_free(&r);
    rb_free(&b);
    tdm_free_big(d);
    tdm_free_big(g);
    tdm_model_free(m);
}

static void test_gradients_accumulate(void) {
    setup s;
    CHECK(make(&s, 0, (tdm_freeze){0, 0, 0, 0}) == 0, "setup");
    tdm_param_table *t = tdm_model_params(s.m);
    int64_t ng = tdm_param_table_numel(t, 1);
    tdm_fb_result r1, r2;
    tdm_error err;
    tdm_model_forward_backward(s.m, &s.b, 1.0f, &r1, &err);
    float *once = malloc(sizeof(float) * (size_t)ng);
    memcpy(once, s.grad, sizeof(float) * (size_t)ng);
    tdm_model_forward_backward(s.m, &s.b, 1.0f, &r2, &err);
    CHECK(r1.loss_sum == r2.loss_sum && r1.n_tokens == r2.n_tokens, "same loss twice");
    double worst = 0, mx = 0;
    for (int64_t i = 0; i < ng; i++) {
        double d = fabs((double)s.grad[i] - 2.0 * once[i]);
        worst = d > worst ? d : worst;
        mx = fabs(once[i]) > mx ? fabs(once[i]) : mx;
    }
    CHECK(worst <= 1e-5 * mx && mx > 0, "two micro-batches: max |g2 - 2 g1| = %g (max |g1| %g)", worst, mx);
    free(once);
    unmake(&s);
}

static void test_bad_batches(void) {
    setup s;
    CHECK(make(&s, 0, (tdm_freeze){0, 0, 0, 0}) == 0, "setup");
    tdm_fb_result r;
    tdm_error err;
    const tdm_model_config *c = tdm_model_get_config(s.m);
    /* one image pad too few */
    int k = 0;
    while (s.b.input_ids[k] != c->image_token_id) k++;
    s.b.input_ids[k] = 5;
    CHECK(tdm_model_forward_backward(s.m, &s.b, 1.0f, &r, &err) != 0 && strstr(err.msg, "image-pad"), "%s", err.msg);
    s.b.input_ids[k] = c->image_token_id;
    /* a token outside the vocabulary */
    s.b.input_ids[0] = c->text.vocab_size;
    CHECK(tdm_model_forward_backward(s.m, &s.b, 1.0f, &r, &err) != 0 && strstr(err.msg, "vocabulary"), "%s", err.msg);
    s.b.input_ids[0] = 1;
    /* a frame count whose patch count wraps a 32-bit int back to the true one: t*h*w
     * = h*w + 2^32, which once passed the check and sent the vision tables past their end */
    int32_t *g = s.b.image_grid_thw, t_saved = g[0];
    int v = __builtin_ctzll((unsigned long long)((int64_t)g[1] * g[2]));
    g[0] = (int32_t)(t_saved + ((int64_t)1 << (32 - v)));
    CHECK(tdm_model_forward_backward(s.m, &s.b, 1.0f, &r, &err) != 0 && strstr(err.msg, "image 0 has grid"), "%s",
          err.msg);
    g[0] = t_saved;
    /* more tokens than reserved */
    s.b.n_tokens += 1;
    s.b.cu_seqlens[s.b.n_seqs] += 1;
    CHECK(tdm_model_forward_backward(s.m, &s.b, 1.0f, &r, &err) != 0 && strstr(err.msg, "limit"), "%s", err.msg);
    s.b.n_tokens -= 1;
    s.b.cu_seqlens[s.b.n_seqs] -= 1;
    CHECK(tdm_model_forward_backward(s.m, &s.b, 1.0f, &r, &err) == 0, "restored batch: %s", err.msg);
    unmake(&s);
}

static void test_text_only_batch(void) {
    tdm_model_config c;
    cfg_small(&c, 32, 32, 3, 2, 64);
    tdm_error err;
    tdm_model *m = tdm_model_create(&c, NULL, &err);
    float *d, *g;
    tdm_param_table_alloc(tdm_model_params(m), &d, &g, &err);
    tdm_model_init_weights(m, 1);
    rb_sample smp[1] = {{.text_len = 12, .n_images = 0}};
    tdm_batch b;
    rb_build(&b, &c, smp, 1, 2);
    tdm_model_limits lim = {64, 2, 0, 0}; /* a text-only reservation: no vision buffers */
    CHECK(tdm_model_reserve(m, &lim, &err) == 0, "%s", err.msg);
    tdm_fb_result r;
    CHECK(tdm_model_forward_backward(m, &b, 1.0f, &r, &err) == 0, "%s", err.msg);
    /* uniform-ish predictions at init: loss per token near log(vocab) */
    double per = r.loss_sum / (double)r.n_tokens;
    CHECK(r.n_tokens > 0 && fabs(per - log(64.0)) < 0.5, "loss per token %g vs log V %g", per, log(64.0));
    rb_free(&b);
    tdm_free_big(d);
    tdm_free_big(g);
    tdm_model_free(m);
}

int main(void) {
    RUN(test_hooks_untied);
    RUN(test_hooks_tied);
    RUN(test_hooks_frozen_vision);
    RUN(test_hooks_frozen_llm);
    RUN(test_hooks_projector_only);
    RUN(test_forward_only_hooks);
    RUN(test_one_profiler_event_per_unit);
    RUN(test_hooks_text_only);
    RUN(test_gradients_accumulate);
    RUN(test_bad_batches);
    RUN(test_text_only_batch);
    return TEST_SUMMARY();
}
