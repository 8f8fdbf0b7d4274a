/* generate.c - greedy decoding (see generate.h). */
#include "train/generate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
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
    float *logits; /* [vocab] */
    int kv_cache;  /* 1: the prompt once, then one token at a time (tdm_model_decode) */
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

int tdm_generator_answer(tdm_generator *g, const tdm_turn *turns, int n_turns, const char *const *images,
                         int n_images, int max_new_tokens, char **out, tdm_error *err) {
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
    for (int a = 0; a < 3; a++) memcpy(pos + (size_t)a * cap, b->position_ids + (size_t)a * n0, sizeof(int32_t) * (size_t)n0);
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
        int best = tdm_generate_pick(g->logits, g->cfg.text.vocab_size, g->unsayable, 2);
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
