/* generate.c - greedy and sampled decoding (see generate.h). */
#include "train/generate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "core/alloc.h"
#include "core/rng.h"
#include "data/batch.h"
#include "data/pipeline.h"
#include "data/preprocess.h"
#include "model/config.h"
#include "model/qwen3vl.h"
#include "model/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"
#include "train/feed.h"

struct tdm_generator {
    tdm_model_config cfg;
    tdm_model *model;
    float *data, *grad;
    tdm_tokenizer *tok;
    tdm_preproc_config pp;
    tdm_model_limits reserved;
    int32_t stop_ids[2];
    int32_t unsayable[2]; /* <|image_pad|>, <|video_pad|>: fed back, they would stand for vision rows */
    tdm_batch b;
    float *logits;  /* [vocab] */
    float *probs;   /* [vocab]: sampling's distribution */
    int32_t *order; /* [vocab]: sampling's scratch */
    tdm_sampling sampling;
    int kv_cache; /* 1: the prompt once, then one token at a time (tdm_model_decode) */
};

tdm_generator *tdm_generator_create(const tdm_generator_options *o, tdm_error *err) {
    tdm_generator *g = tdm_xcalloc(1, sizeof *g);
    tdm_batch_init(&g->b);
    if (o->load && o->load[0] && o->hf_weights && o->hf_weights[0]) {
        tdm_errorf(err, "--load %s and --hf-weights %s: give one source of weights", o->load, o->hf_weights);
        goto fail;
    }
    if (tdm_model_config_load(o->model, &g->cfg, err) != 0) goto fail;
    /* everything frozen: no gradient memory, forward only */
    tdm_freeze fz = {1, 1, 1, 1};
    g->model = tdm_model_create(&g->cfg, &fz, err);
    if (!g->model) goto fail;
    tdm_param_table *pt = tdm_model_params(g->model);
    if (tdm_param_table_alloc(pt, &g->data, &g->grad, err) != 0) goto fail;
    if (o->load && o->load[0]) {
        tdm_ckpt ck;
        if (tdm_ckpt_open_weights(o->load, &ck, err) != 0) goto fail;
        int rc = tdm_ckpt_load_weights(&ck, pt, err);
        tdm_ckpt_close(&ck);
        if (rc != 0) goto fail;
    } else if (o->hf_weights && o->hf_weights[0]) {
        tdm_safetensors *st = tdm_safetensors_open(o->hf_weights, err);
        if (!st) goto fail;
        int rc = tdm_safetensors_load_params(st, pt, g->cfg.tie_word_embeddings ? TDM_ST_TIED_LM_HEAD : 0, NULL, err);
        tdm_safetensors_close(st);
        if (rc != 0) goto fail;
    } else {
        tdm_errorf(err, "no weights: give --load CKPT or --hf-weights FILE");
        goto fail;
    }
    g->tok = tdm_tokenizer_load(o->tokenizer, err);
    if (!g->tok || tdm_feed_check_tokenizer(g->tok, o->tokenizer, &g->cfg, err) != 0) goto fail;
    if (tdm_feed_load_preprocessor(o->preprocessor, o->model, &g->pp, err) != 0) goto fail;
    char pp_buf[2200];
    const char *pp_path = tdm_feed_preprocessor_path(o->preprocessor, o->model, pp_buf, sizeof pp_buf);
    if (tdm_feed_check_preprocessor(&g->pp, pp_path, &g->cfg, err) != 0) goto fail;
    if (tdm_preproc_set_bounds(&g->pp, o->image_max_pixels, o->image_min_pixels, err) != 0) goto fail;
    g->stop_ids[0] = tdm_tokenizer_token_id(g->tok, "<|im_end|>");
    g->stop_ids[1] = tdm_tokenizer_token_id(g->tok, "<|endoftext|>");
    if (g->stop_ids[0] < 0) {
        tdm_errorf(err, "%s: no <|im_end|> token", o->tokenizer);
        goto fail;
    }
    g->kv_cache = !o->no_kv_cache;
    g->unsayable[0] = g->cfg.image_token_id;
    g->unsayable[1] = g->cfg.video_token_id;
    g->logits = tdm_xmalloc(sizeof(float) * (size_t)g->cfg.text.vocab_size);
    g->probs = tdm_xmalloc(sizeof(float) * (size_t)g->cfg.text.vocab_size);
    g->order = tdm_xmalloc(sizeof(int32_t) * (size_t)g->cfg.text.vocab_size);
    g->sampling = o->sampling;
    return g;
fail:
    tdm_generator_free(g);
    return NULL;
}

void tdm_generator_free(tdm_generator *g) {
    if (!g) return;
    tdm_model_free(g->model);
    tdm_free_big(g->data);
    tdm_free_big(g->grad);
    tdm_tokenizer_free(g->tok);
    tdm_batch_free(&g->b);
    free(g->logits);
    free(g->probs);
    free(g->order);
    free(g);
}

int tdm_generate_pick(const float *logits, int vocab, const int32_t *banned, int n_banned) {
    int best = -1;
    for (int v = 0; v < vocab; v++) {
        int skip = logits[v] != logits[v]; /* NaN */
        for (int k = 0; k < n_banned && !skip; k++) skip = banned[k] == v;
        if (!skip && (best < 0 || logits[v] > logits[best])) best = v;
    }
    return best;
}

static const float *sort_keys; /* qsort's comparison reads the scaled logits from here */

static int by_logit_desc(const void *a, const void *b) {
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    float x = sort_keys[i], y = sort_keys[j];
    if (x != y) return x > y ? -1 : 1;
    return (i > j) - (i < j);
}

int tdm_generate_sample(const float *logits, int vocab, const int32_t *banned, int n_banned, const tdm_sampling *s,
                        uint64_t draw, float *probs, int32_t *order) {
    if (!s->do_sample || !(s->temperature > 0)) {
        int best = tdm_generate_pick(logits, vocab, banned, n_banned);
        for (int v = 0; v < vocab; v++) probs[v] = v == best ? 1.0f : 0.0f;
        return best;
    }
    /* probs holds the scaled logits first (-inf: removed), then the probabilities */
    int n = 0;
    for (int v = 0; v < vocab; v++) {
        int skip = logits[v] != logits[v];
        for (int k = 0; k < n_banned && !skip; k++) skip = banned[k] == v;
        probs[v] = skip ? -INFINITY : (float)(logits[v] / s->temperature);
        if (!skip && probs[v] > -INFINITY) order[n++] = v;
    }
    if (n == 0) { /* everything removed, or every logit -inf: greedy's answer, if any */
        int best = tdm_generate_pick(logits, vocab, banned, n_banned);
        for (int v = 0; v < vocab; v++) probs[v] = v == best ? 1.0f : 0.0f;
        return best;
    }
    sort_keys = probs;
    qsort(order, (size_t)n, sizeof *order, by_logit_desc);
    sort_keys = NULL;
    if (isinf(probs[order[0]])) { /* +inf, or a float overflow by a tiny temperature: greedy's choice, surely */
        int best = tdm_generate_pick(logits, vocab, banned, n_banned);
        for (int v = 0; v < vocab; v++) probs[v] = v == best ? 1.0f : 0.0f;
        return best;
    }
    /* top-k: the k largest, and every token tied with the k-th (a threshold, as Hugging Face's) */
    int kept = n;
    if (s->top_k > 0 && s->top_k < n) {
        float th = probs[order[s->top_k - 1]];
        kept = s->top_k;
        while (kept < n && probs[order[kept]] >= th) kept++;
    }
    /* softmax over the kept tokens */
    double mx = probs[order[0]], z = 0;
    for (int i = 0; i < kept; i++) z += exp((double)probs[order[i]] - mx);
    /* top-p: the most likely tokens while the mass before them is below p (at least one) */
    if (s->top_p < 1.0) {
        double cum = 0;
        int i = 0;
        while (i < kept && cum < s->top_p) cum += exp((double)probs[order[i++]] - mx) / z;
        kept = i > 0 ? i : 1;
        z = 0;
        for (i = 0; i < kept; i++) z += exp((double)probs[order[i]] - mx);
    }
    double *p = NULL; /* the kept tokens' probabilities, in order */
    p = tdm_xmalloc(sizeof(double) * (size_t)kept);
    for (int i = 0; i < kept; i++) p[i] = exp((double)probs[order[i]] - mx) / z;
    for (int v = 0; v < vocab; v++) probs[v] = 0.0f;
    for (int i = 0; i < kept; i++) probs[order[i]] = (float)p[i];
    /* one draw: the first token whose cumulative probability exceeds u */
    double u = tdm_rng_uniform(s->seed, tdm_rng_stream_of("generate"), draw), cum = 0;
    int pick = order[kept - 1];
    for (int i = 0; i < kept; i++) {
        cum += p[i];
        if (u < cum) {
            pick = order[i];
            break;
        }
    }
    free(p);
    return pick;
}

/* Activations for at least these sizes (grown, never shrunk). */
static int ensure_reserved(tdm_generator *g, int tokens, int patches, int images, tdm_error *err) {
    tdm_model_limits *r = &g->reserved;
    if (tokens <= r->max_tokens && patches <= r->max_patches && images <= r->max_images && r->max_seqs) return 0;
    tdm_model_limits l = {.max_tokens = tokens > r->max_tokens ? tokens : r->max_tokens,
                          .max_seqs = 1,
                          .max_patches = patches > r->max_patches ? patches : r->max_patches,
                          .max_images = images > r->max_images ? images : r->max_images};
    if (tdm_model_reserve(g->model, &l, err) != 0) return -1;
    *r = l;
    return 0;
}

int tdm_generator_answer(tdm_generator *g, const tdm_turn *turns, int n_turns, const char *const *images, int n_images,
                         int max_new_tokens, char **out, tdm_error *err) {
    tdm_batch *b = &g->b;
    int64_t next_pos;
    if (max_new_tokens < 1 || max_new_tokens > 1 << 16)
        return tdm_errorf(err, "max new tokens %d: expected 1..65536", max_new_tokens);
    if (tdm_data_build_prompt(g->tok, &g->pp, turns, n_turns, images, n_images, b, &next_pos, err) != 0) return -1;
    int n0 = b->n_tokens;
    if (n0 + max_new_tokens > g->cfg.text.max_position_embeddings)
        max_new_tokens = g->cfg.text.max_position_embeddings - n0;
    if (max_new_tokens < 1) return tdm_errorf(err, "the prompt (%d tokens) fills the model's context", n0);
    tdm_batch_reserve(b, n0 + max_new_tokens, 1, n_images, b->n_patches, tdm_preproc_patch_dim(&g->pp));
    if (ensure_reserved(g, n0 + max_new_tokens, b->n_patches, n_images, err) != 0) return -1;
    /* position rows are [3, n] with stride n: re-laid out below as n grows, so keep a copy */
    int cap = n0 + max_new_tokens;
    int32_t *pos = tdm_xmalloc(sizeof(int32_t) * 3 * (size_t)cap);
    for (int a = 0; a < 3; a++)
        memcpy(pos + (size_t)a * cap, b->position_ids + (size_t)a * n0, sizeof(int32_t) * (size_t)n0);
    tdm_ids ans = {0};
    int rc = 0;
    int32_t last = -1; /* the token chosen last, fed to the next step */
    for (int k = 0; k < max_new_tokens; k++) {
        int n = b->n_tokens;
        if (k > 0 && g->kv_cache) { /* one token through the decoder, against the cached keys and values */
            int32_t p3[3] = {(int32_t)(next_pos - 1), (int32_t)(next_pos - 1), (int32_t)(next_pos - 1)};
            if (tdm_model_decode(g->model, last, p3, g->logits, err) != 0) {
                rc = -1;
                break;
            }
        } else { /* the prompt, and without the cache every step: the whole sequence again */
            for (int a = 0; a < 3; a++)
                memcpy(b->position_ids + (size_t)a * n, pos + (size_t)a * cap, sizeof(int32_t) * (size_t)n);
            int32_t row = n - 1;
            tdm_fb_result r;
            if (tdm_model_forward(g->model, b, &row, 1, g->logits, &r, err) != 0) {
                rc = -1;
                break;
            }
        }
        int best = tdm_generate_sample(g->logits, g->cfg.text.vocab_size, g->unsayable, 2, &g->sampling, (uint64_t)k,
                                       g->probs, g->order);
        if (best < 0) {
            rc = tdm_errorf(err, "no token can be generated: every logit is NaN or a vision placeholder");
            break;
        }
        if (best == g->stop_ids[0] || best == g->stop_ids[1]) break;
        tdm_ids_push(&ans, best);
        last = best;
        if (!g->kv_cache) {
            b->input_ids[n] = best;
            b->labels[n] = b->targets[n] = -100;
            for (int a = 0; a < 3; a++) pos[(size_t)a * cap + n] = (int32_t)next_pos;
            b->n_tokens = n + 1;
            b->cu_seqlens[1] = n + 1;
        }
        next_pos++;
    }
    free(pos);
    if (rc == 0) *out = tdm_tokenizer_decode(g->tok, ans.data, ans.len);
    tdm_ids_free(&ans);
    return rc;
}

int tdm_generator_loglik(tdm_generator *g, const tdm_turn *turns, int n_turns, const char *const *images, int n_images,
                         const char *continuation, double *sum, int *n_tokens, tdm_error *err) {
    tdm_batch *b = &g->b;
    int64_t next_pos;
    if (tdm_data_build_prompt(g->tok, &g->pp, turns, n_turns, images, n_images, b, &next_pos, err) != 0) return -1;
    tdm_ids cont = {0};
    if (tdm_tokenizer_encode(g->tok, continuation, strlen(continuation), &cont, err) != 0) {
        tdm_ids_free(&cont);
        return -1;
    }
    int n0 = b->n_tokens, m = (int)cont.len, n = n0 + m;
    if (m < 1 || n > g->cfg.text.max_position_embeddings) {
        tdm_ids_free(&cont);
        return m < 1 ? tdm_errorf(err, "an empty answer has no log-likelihood")
                     : tdm_errorf(err, "the prompt and answer (%d tokens) exceed the model's context (%d)", n,
                                  g->cfg.text.max_position_embeddings);
    }
    /* positions [3, n0] -> [3, n]: the answer's tokens at (p, p, p) from next_pos, as generated */
    int32_t *pos = tdm_xmalloc(sizeof(int32_t) * 3 * (size_t)n);
    for (int a = 0; a < 3; a++) {
        memcpy(pos + (size_t)a * n, b->position_ids + (size_t)a * n0, sizeof(int32_t) * (size_t)n0);
        for (int i = 0; i < m; i++) pos[(size_t)a * n + n0 + i] = (int32_t)(next_pos + i);
    }
    tdm_batch_reserve(b, n, 1, n_images, b->n_patches, tdm_preproc_patch_dim(&g->pp));
    memcpy(b->position_ids, pos, sizeof(int32_t) * 3 * (size_t)n);
    free(pos);
    for (int i = 0; i < m; i++) {
        b->input_ids[n0 + i] = cont.data[i];
        b->labels[n0 + i] = b->targets[n0 + i] = -100;
    }
    b->n_tokens = n;
    b->cu_seqlens[1] = n;
    int rc = ensure_reserved(g, n, b->n_patches, n_images, err);
    /* the logits of the rows before each answer token */
    int32_t *rows = tdm_xmalloc(sizeof(int32_t) * (size_t)m);
    for (int i = 0; i < m; i++) rows[i] = n0 - 1 + i;
    const int vocab = g->cfg.text.vocab_size;
    float *lg = rc == 0 ? tdm_xmalloc(sizeof(float) * (size_t)m * (size_t)vocab) : NULL;
    tdm_fb_result r;
    if (rc == 0) rc = tdm_model_forward(g->model, b, rows, m, lg, &r, err);
    double total = 0;
    for (int i = 0; rc == 0 && i < m; i++) { /* log_softmax, in double */
        const float *l = lg + (size_t)i * vocab;
        double mx = l[0], z = 0;
        for (int v = 1; v < vocab; v++) mx = l[v] > mx ? l[v] : mx;
        for (int v = 0; v < vocab; v++) z += exp((double)l[v] - mx);
        total += (double)l[cont.data[i]] - mx - log(z);
    }
    free(lg);
    free(rows);
    tdm_ids_free(&cont);
    if (rc != 0) return -1;
    *sum = total;
    *n_tokens = m;
    return 0;
}
