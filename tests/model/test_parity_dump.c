/* test_parity_dump.c - the C half of the PyTorch parity test (tests/model/peer_parity.sh).
 *
 *   test_parity_dump --dump DIR CASE   builds the case's model with random weights and a
 *       random packed batch, runs one forward+backward (grad_scale = 1/tokens, so the
 *       gradients are those of the mean loss) and one forward for the logits of every
 *       row, and writes DIR/config.json (Hugging Face layout), DIR/case.json (freeze
 *       flags), DIR/weights.safetensors, DIR/batch.safetensors and DIR/out.safetensors
 *       (loss, tokens, logits, "grad.<name>" for every trainable tensor).
 *   test_parity_dump --list            prints the case names.
 *   test_parity_dump                   (as a unit test) runs every case in memory and
 *       checks what needs no reference: forward-only and forward+backward agree on the
 *       loss, and every trainable tensor, and only those, receives a finite non-zero
 *       gradient. The forward+backward runs the last decoder layer on the loss's rows
 *       (the default; the forward for every row's logits cannot), so the two losses agree
 *       to float rounding (relative 1e-6); a second forward+backward with that off must
 *       give the forward's loss bit for bit, and gradients within 1e-5 (normalised) of
 *       the first's. The PyTorch comparison (peer_parity.sh) checks the default path.
 *
 * Cases: several images of different sizes in one batch, several packed samples (one
 * without an image), GQA (4 query / 2 kv heads), DeepStack taps at blocks 0, 2 and 3 of
 * 4 (the last one is the tower output), tied and untied lm_head, the freeze settings
 * none, vision+projector, llm (+lm_head), and long segments (an image of 192 patches, a
 * sample of 280 tokens) so attention runs over several tiles. Config variants real
 * checkpoints differ in: as many kv heads as query heads, head_dim wider than
 * hidden / heads, one decoder layer without DeepStack, one vision block with one tap,
 * more DeepStack taps than decoder layers, a text_config.pad_token_id (the embedding's padding_idx) that
 * occurs in the batch, tied and untied.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/rng.h"
#include "harness.h"
#include "model/qwen3vl.h"
#include "model_configs.h"
#include "random_batch.h"

static const rb_sample SAMPLES[] = {
    {.text_len = 5, .n_images = 2, .gh = {4, 6}, .gw = {4, 2}},
    {.text_len = 9, .n_images = 0},
    {.text_len = 3, .n_images = 1, .gh = {2}, .gw = {8}},
};

/* Long segments: attention spans several kernel tiles in both towers. */
static const rb_sample LONG_SAMPLES[] = {
    {.text_len = 90, .n_images = 1, .gh = {16}, .gw = {12}},
    {.text_len = 140, .n_images = 0},
};

/* Config variants of the same small model: the shapes real checkpoints differ in. */
enum pshape {
    PSHAPE_BASE,       /* 4 query / 2 kv heads of 16 = hidden / heads, 3 layers, 3 DeepStack taps */
    PSHAPE_MHA,        /* num_key_value_heads == num_attention_heads */
    PSHAPE_WIDE_HEADS, /* head_dim 32 != hidden / heads 16: q/o projections wider than the residual */
    PSHAPE_ONE_LAYER,  /* one decoder layer and no DeepStack taps */
    PSHAPE_TAP_LAST,   /* one vision block, one decoder layer, a single tap at block 0 */
    PSHAPE_TAPS_PAST,  /* three taps but two decoder layers: the third feature reaches nothing */
    PSHAPE_PAD_ROW,    /* text_config.pad_token_id = <|vision_start|>, a token of every image sample */
};

typedef struct pcase {
    const char *name;
    int tied;
    tdm_freeze freeze;
    const rb_sample *samples;
    int n_samples;
    int shape; /* a pshape: the config variant */
} pcase;

static const pcase CASES[] = {
    {"untied", 0, {0, 0, 0, 0}, SAMPLES, 3, PSHAPE_BASE},
    {"tied", 1, {0, 0, 0, 0}, SAMPLES, 3, PSHAPE_BASE},
    {"freeze_vision_projector", 0, {1, 1, 0, 0}, SAMPLES, 3, PSHAPE_BASE},
    {"freeze_llm", 0, {0, 0, 1, 1}, SAMPLES, 3, PSHAPE_BASE},
    {"tied_freeze_llm", 1, {0, 0, 1, 0}, SAMPLES, 3, PSHAPE_BASE},
    {"long_segments", 0, {0, 0, 0, 0}, LONG_SAMPLES, 2, PSHAPE_BASE},
    {"mha", 0, {0, 0, 0, 0}, SAMPLES, 3, PSHAPE_MHA},
    {"wide_heads", 1, {0, 0, 0, 0}, SAMPLES, 3, PSHAPE_WIDE_HEADS},
    {"one_layer_no_deepstack", 1, {0, 0, 0, 0}, SAMPLES, 3, PSHAPE_ONE_LAYER},
    {"one_block_one_layer", 0, {0, 0, 0, 0}, SAMPLES, 3, PSHAPE_TAP_LAST},
    {"taps_past_layers", 0, {0, 0, 0, 0}, SAMPLES, 3, PSHAPE_TAPS_PAST},
    {"text_pad_token", 0, {0, 0, 0, 0}, SAMPLES, 3, PSHAPE_PAD_ROW},
    {"text_pad_token_tied", 1, {0, 0, 0, 0}, SAMPLES, 3, PSHAPE_PAD_ROW},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

static void parity_config(tdm_model_config *c, int tied, int shape) {
    /* vision 48 wide (4 heads of 12), text 64 wide (4 q / 2 kv heads of 16), vocab 96 */
    cfg_small(c, 48, 64, 4, 3, 96);
    c->vision.n_deepstack = 3;
    c->vision.deepstack_indexes[0] = 0;
    c->vision.deepstack_indexes[1] = 2;
    c->vision.deepstack_indexes[2] = 3;
    c->text.mrope_section[0] = 4;
    c->text.mrope_section[1] = 2;
    c->text.mrope_section[2] = 2;
    c->tie_word_embeddings = tied;
    switch (shape) {
    case PSHAPE_MHA: c->text.num_kv_heads = c->text.num_heads; break;
    case PSHAPE_WIDE_HEADS:
        c->text.head_dim = 32;
        c->text.mrope_section[0] = 8;
        c->text.mrope_section[1] = 4;
        c->text.mrope_section[2] = 4;
        break;
    case PSHAPE_ONE_LAYER:
        c->text.num_layers = 1;
        c->vision.n_deepstack = 0;
        break;
    case PSHAPE_PAD_ROW: c->text.padding_idx = c->vision_start_token_id; break;
    case PSHAPE_TAPS_PAST: c->text.num_layers = 2; break;
    case PSHAPE_TAP_LAST:
        c->vision.depth = 1;
        c->text.num_layers = 1;
        c->vision.n_deepstack = 1;
        c->vision.deepstack_indexes[0] = 0;
        break;
    }
}

/* Random weights with every path exercised: matrices N(0, 1/in), norm weights around
 * one, biases small but non-zero. Values depend only on (seed, name). */
static void random_weights(tdm_model *m, uint64_t seed) {
    tdm_param_table *t = tdm_model_params(m);
    for (int i = 0; i < t->n; i++) {
        tdm_param *p = &t->p[i];
        uint64_t st = tdm_rng_stream_of(p->name);
        size_t len = strlen(p->name);
        if (len > 5 && strcmp(p->name + len - 5, ".bias") == 0) {
            tdm_rng_fill_normal(p->data, p->numel, 0.0f, 0.1f, seed, st);
        } else if (p->ndim == 1) {
            tdm_rng_fill_normal(p->data, p->numel, 1.0f, 0.2f, seed, st);
        } else {
            int64_t in = p->numel / p->shape[0];
            if (strstr(p->name, "embed_tokens") || strstr(p->name, "pos_embed")) in = 1;
            tdm_rng_fill_normal(p->data, p->numel, 0.0f, (float)(1.0 / sqrt((double)in)), seed, st);
        }
    }
}

typedef struct run_out {
    tdm_model *m;
    float *data, *grad;
    tdm_batch b;
    double loss_fb, loss_fwd;
    int64_t tokens;
    float *logits; /* [T, V] */
} run_out;

static int run_case(const pcase *pc, run_out *o, tdm_error *err) {
    memset(o, 0, sizeof *o);
    tdm_model_config c;
    parity_config(&c, pc->tied, pc->shape);
    o->m = tdm_model_create(&c, &pc->freeze, err);
    if (!o->m) return -1;
    if (tdm_param_table_alloc(tdm_model_params(o->m), &o->data, &o->grad, err)) return -1;
    random_weights(o->m, 1234);
    rb_build(&o->b, &c, pc->samples, pc->n_samples, 99);
    tdm_model_limits lim = {o->b.n_tokens, o->b.n_seqs, o->b.n_patches, o->b.n_images};
    if (tdm_model_reserve(o->m, &lim, err)) return -1;
    tdm_fb_result r;
    float scale = (float)(1.0 / (double)o->b.n_target_tokens);
    if (tdm_model_forward_backward(o->m, &o->b, scale, &r, err)) return -1;
    o->loss_fb = r.loss_sum;
    o->tokens = r.n_tokens;
    int T = o->b.n_tokens, V = c.text.vocab_size;
    int32_t *rows = tdm_xmalloc(sizeof(int32_t) * T);
    for (int i = 0; i < T; i++) rows[i] = i;
    o->logits = tdm_xmalloc(sizeof(float) * (size_t)T * V);
    int rc = tdm_model_forward(o->m, &o->b, rows, T, o->logits, &r, err);
    free(rows);
    o->loss_fwd = r.loss_sum;
    return rc;
}

static void free_run(run_out *o) {
    tdm_model_free(o->m);
    tdm_free_big(o->data);
    tdm_free_big(o->grad);
    rb_free(&o->b);
    free(o->logits);
}

/* ---- a minimal safetensors writer (F32 / I32 / F64), enough for the dumps ---------- */

typedef struct st_item {
    char name[128];
    const char *dtype;
    int ndim;
    int64_t shape[5];
    const void *data;
    size_t bytes;
} st_item;

static int st_write(const char *path, const st_item *it, int n) {
    char *hdr = tdm_xmalloc(256 * (size_t)n + 64);
    size_t len = 0, off = 0;
    len += (size_t)sprintf(hdr + len, "{");
    for (int i = 0; i < n; i++) {
        len +=
            (size_t)sprintf(hdr + len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", it[i].name, it[i].dtype);
        for (int d = 0; d < it[i].ndim; d++)
            len += (size_t)sprintf(hdr + len, "%s%lld", d ? "," : "", (long long)it[i].shape[d]);
        len += (size_t)sprintf(hdr + len, "],\"data_offsets\":[%zu,%zu]}", off, off + it[i].bytes);
        off += it[i].bytes;
    }
    len += (size_t)sprintf(hdr + len, "}");
    while (len % 8) hdr[len++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(hdr);
        return -1;
    }
    uint64_t n64 = len;
    fwrite(&n64, 8, 1, f);
    fwrite(hdr, 1, len, f);
    for (int i = 0; i < n; i++) fwrite(it[i].data, 1, it[i].bytes, f);
    free(hdr);
    return fclose(f);
}

static st_item item(const char *name, const char *dtype, int ndim, const int64_t *shape, const void *data) {
    st_item it;
    memset(&it, 0, sizeof it);
    snprintf(it.name, sizeof it.name, "%s", name);
    it.dtype = dtype;
    it.ndim = ndim;
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= (it.shape[d] = shape[d]);
    it.data = data;
    it.bytes = (size_t)n * (strcmp(dtype, "F64") == 0 ? 8 : 4);
    return it;
}

static int write_config(const char *path, const tdm_model_config *c) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    const tdm_vision_config *v = &c->vision;
    const tdm_text_config *t = &c->text;
    fprintf(f, "{\"model_type\": \"qwen3_vl\", \"tie_word_embeddings\": %s, \"image_token_id\": %d,\n",
            c->tie_word_embeddings ? "true" : "false", c->image_token_id);
    fprintf(f, " \"video_token_id\": %d, \"vision_start_token_id\": %d, \"vision_end_token_id\": %d,\n",
            c->video_token_id, c->vision_start_token_id, c->vision_end_token_id);
    fprintf(f,
            " \"vision_config\": {\"depth\": %d, \"hidden_size\": %d, \"num_heads\": %d, \"intermediate_size\": %d,"
            " \"patch_size\": %d, \"temporal_patch_size\": %d, \"in_channels\": %d, \"spatial_merge_size\": %d,"
            " \"num_position_embeddings\": %d, \"out_hidden_size\": %d, \"hidden_act\": \"%s\","
            " \"deepstack_visual_indexes\": [",
            v->depth, v->hidden_size, v->num_heads, v->intermediate_size, v->patch_size, v->temporal_patch_size,
            v->in_channels, v->spatial_merge_size, v->num_position_embeddings, v->out_hidden_size, v->hidden_act);
    for (int j = 0; j < v->n_deepstack; j++) fprintf(f, "%s%d", j ? ", " : "", v->deepstack_indexes[j]);
    fprintf(f,
            "]},\n \"text_config\": {\"hidden_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d,"
            " \"num_key_value_heads\": %d, \"head_dim\": %d, \"intermediate_size\": %d, \"vocab_size\": %d,"
            " \"rope_theta\": %.17g, \"rms_norm_eps\": %.17g, \"hidden_act\": \"%s\", \"attention_bias\": false,"
            " \"rope_scaling\": {\"rope_type\": \"default\", \"mrope_section\": [%d, %d, %d],"
            " \"mrope_interleaved\": %s}",
            t->hidden_size, t->num_layers, t->num_heads, t->num_kv_heads, t->head_dim, t->intermediate_size,
            t->vocab_size, t->rope_theta, t->rms_norm_eps, t->hidden_act, t->mrope_section[0], t->mrope_section[1],
            t->mrope_section[2], t->mrope_interleaved ? "true" : "false");
    if (t->padding_idx >= 0) fprintf(f, ", \"pad_token_id\": %d", t->padding_idx);
    fprintf(f, "}}\n");
    return fclose(f);
}

static int dump(const char *dir, const pcase *pc) {
    tdm_error err;
    run_out o;
    char path[1200];
    if (run_case(pc, &o, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    tdm_param_table *t = tdm_model_params(o.m);
    const tdm_model_config *c = tdm_model_get_config(o.m);
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = write_config(path, c);
    snprintf(path, sizeof path, "%s/case.json", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f,
                "{\"name\": \"%s\", \"freeze_vision\": %d, \"freeze_projector\": %d, \"freeze_llm\": %d,"
                " \"freeze_lm_head\": %d}\n",
                pc->name, pc->freeze.vision, pc->freeze.projector, pc->freeze.llm, pc->freeze.lm_head);
        rc |= fclose(f);
    }
    st_item *it = tdm_xcalloc((size_t)t->n + 16, sizeof *it);
    for (int i = 0; i < t->n; i++) it[i] = item(t->p[i].name, "F32", t->p[i].ndim, t->p[i].shape, t->p[i].data);
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    rc |= st_write(path, it, t->n);

    tdm_batch *b = &o.b;
    int64_t T = b->n_tokens, S1 = b->n_seqs + 1, NI = b->n_images, NP = b->n_patches, PD = b->patch_dim;
    int64_t sh3T[2] = {3, T}, shNI[2] = {NI, 3}, shPX[2] = {NP, PD};
    int k = 0;
    it[k++] = item("input_ids", "I32", 1, &T, b->input_ids);
    it[k++] = item("labels", "I32", 1, &T, b->labels);
    it[k++] = item("targets", "I32", 1, &T, b->targets);
    it[k++] = item("cu_seqlens", "I32", 1, &S1, b->cu_seqlens);
    it[k++] = item("position_ids", "I32", 2, sh3T, b->position_ids);
    it[k++] = item("image_grid_thw", "I32", 2, shNI, b->image_grid_thw);
    it[k++] = item("pixel_values", "F32", 2, shPX, b->pixel_values);
    snprintf(path, sizeof path, "%s/batch.safetensors", dir);
    rc |= st_write(path, it, k);

    double loss = o.loss_fb, tokens = (double)o.tokens;
    int64_t one = 1, shL[2] = {T, c->text.vocab_size};
    k = 0;
    it[k++] = item("loss_sum", "F64", 1, &one, &loss);
    it[k++] = item("tokens", "F64", 1, &one, &tokens);
    it[k++] = item("logits", "F32", 2, shL, o.logits);
    for (int i = 0; i < t->n; i++) {
        if (!t->p[i].trainable) continue;
        char nm[160];
        snprintf(nm, sizeof nm, "grad.%s", t->p[i].name);
        it[k++] = item(nm, "F32", t->p[i].ndim, t->p[i].shape, t->p[i].grad);
        if (k == t->n + 16) break;
    }
    snprintf(path, sizeof path, "%s/out.safetensors", dir);
    rc |= st_write(path, it, k);
    free(it);
    free_run(&o);
    if (rc) fprintf(stderr, "error: could not write the dump into %s\n", dir);
    return rc ? 1 : 0;
}

/* The forward+backward again with the last layer on every row: the forward's loss
 * exactly, and the same gradients to float rounding. */
static void check_unpruned(const pcase *pc, run_out *o) {
    tdm_param_table *t = tdm_model_params(o->m);
    float **keep = tdm_xcalloc((size_t)t->n, sizeof *keep);
    for (int i = 0; i < t->n; i++)
        if (t->p[i].grad) {
            keep[i] = tdm_xmalloc(sizeof(float) * (size_t)t->p[i].numel);
            memcpy(keep[i], t->p[i].grad, sizeof(float) * (size_t)t->p[i].numel);
            memset(t->p[i].grad, 0, sizeof(float) * (size_t)t->p[i].numel);
        }
    tdm_model_set_prune_last_layer(o->m, 0);
    tdm_fb_result r;
    tdm_error err;
    float scale = (float)(1.0 / (double)o->b.n_target_tokens);
    CHECK(tdm_model_forward_backward(o->m, &o->b, scale, &r, &err) == 0, "%s: %s", pc->name, err.msg);
    CHECK(r.loss_sum == o->loss_fwd, "%s: loss on every row %.17g vs forward-only %.17g", pc->name, r.loss_sum,
          o->loss_fwd);
    for (int i = 0; i < t->n; i++) {
        if (!keep[i]) continue;
        double num = 0, den = 0;
        for (int64_t q = 0; q < t->p[i].numel; q++) {
            double d = (double)keep[i][q] - t->p[i].grad[q];
            num += d * d, den += (double)t->p[i].grad[q] * t->p[i].grad[q];
        }
        CHECK(num <= 1e-10 * den, "%s: gradient of %s, loss rows only vs every row: normalised error %.3g", pc->name,
              t->p[i].name, den > 0 ? sqrt(num / den) : sqrt(num));
        free(keep[i]);
    }
    free(keep);
    tdm_model_set_prune_last_layer(o->m, 1);
}

static void check_case(const pcase *pc) {
    tdm_error err;
    run_out o;
    int rc = run_case(pc, &o, &err);
    CHECK(rc == 0, "%s: %s", pc->name, err.msg);
    if (rc == 0) {
        CHECK(fabs(o.loss_fb - o.loss_fwd) <= 1e-6 * fabs(o.loss_fwd), "%s: loss %.17g vs forward-only %.17g", pc->name,
              o.loss_fb, o.loss_fwd);
        check_unpruned(pc, &o);
        CHECK(o.tokens == o.b.n_target_tokens && o.tokens > 0, "%s: tokens %lld", pc->name, (long long)o.tokens);
        tdm_param_table *t = tdm_model_params(o.m);
        for (int i = 0; i < t->n; i++) {
            tdm_param *p = &t->p[i];
            if (!p->trainable) {
                CHECK(p->grad == NULL, "%s: frozen %s has a gradient", pc->name, p->name);
                continue;
            }
            double s = 0;
            for (int64_t q = 0; q < p->numel; q++) s += fabs((double)p->grad[q]);
            /* a DeepStack merger past the last decoder layer reaches no loss: exactly zero */
            const tdm_model_config *c = tdm_model_get_config(o.m);
            int j = -1;
            if (sscanf(p->name, "model.visual.deepstack_merger_list.%d.", &j) == 1 && j >= c->text.num_layers) {
                CHECK(s == 0, "%s: unused %s has gradient %g", pc->name, p->name, s);
                continue;
            }
            CHECK(isfinite(s) && s > 0, "%s: gradient of %s sums to %g", pc->name, p->name, s);
        }
    }
    free_run(&o);
}

static void test_cases_self_consistent(void) {
    for (int i = 0; i < N_CASES; i++) check_case(&CASES[i]);
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < N_CASES; i++) printf("%s\n", CASES[i].name);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "--dump") == 0) {
        for (int i = 0; i < N_CASES; i++)
            if (strcmp(argv[3], CASES[i].name) == 0) return dump(argv[2], &CASES[i]);
        fprintf(stderr, "error: unknown case \"%s\" (see --list)\n", argv[3]);
        return 2;
    }
    RUN(test_cases_self_consistent);
    return TEST_SUMMARY();
}
