/* qwen3vl.c - the model's life cycle: the parameter table (Hugging Face names, forward
 * order), initial weights, activation reservation, hooks, and the step driver that runs
 * vision -> decoder -> loss forward and then the hand-written backward in reverse. */
#include "model/qwen3vl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include "model/qwen3vl_impl.h"
#include "prof/prof.h"

/* ---- parameter table ------------------------------------------------------------ */

typedef struct reg_ctx {
    tdm_model *m;
    int unit;
    int trainable;
} reg_ctx;

static int reg(reg_ctx *r, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3, int64_t d4) {
    int64_t shape[5] = {d0, d1, d2, d3, d4};
    return tdm_param_table_add(&r->m->params, name, ndim, shape, r->trainable, r->unit);
}

static void reg_merger(reg_ctx *r, const char *prefix, merger_ix *ix, int64_t norm_dim, int64_t h4, int64_t out) {
    char nm[TDM_PARAM_NAME_MAX];
    snprintf(nm, sizeof nm, "%s.norm.weight", prefix);
    ix->norm_w = reg(r, nm, 1, norm_dim, 0, 0, 0, 0);
    snprintf(nm, sizeof nm, "%s.norm.bias", prefix);
    ix->norm_b = reg(r, nm, 1, norm_dim, 0, 0, 0, 0);
    snprintf(nm, sizeof nm, "%s.linear_fc1.weight", prefix);
    ix->fc1_w = reg(r, nm, 2, h4, h4, 0, 0, 0);
    snprintf(nm, sizeof nm, "%s.linear_fc1.bias", prefix);
    ix->fc1_b = reg(r, nm, 1, h4, 0, 0, 0, 0);
    snprintf(nm, sizeof nm, "%s.linear_fc2.weight", prefix);
    ix->fc2_w = reg(r, nm, 2, out, h4, 0, 0, 0);
    snprintf(nm, sizeof nm, "%s.linear_fc2.bias", prefix);
    ix->fc2_b = reg(r, nm, 1, out, 0, 0, 0, 0);
}

/* Checks what the layout below relies on; config.c validates the file itself, this
 * guards hand-built configs (tests, benchmarks). */
static int check_config(const tdm_model_config *c, tdm_error *err) {
    const tdm_vision_config *v = &c->vision;
    const tdm_text_config *t = &c->text;
    if (v->depth < 0 || v->hidden_size <= 0 || v->num_heads <= 0 || v->hidden_size % v->num_heads ||
        (v->hidden_size / v->num_heads) % 4 || v->intermediate_size <= 0 || v->patch_size <= 0 ||
        v->temporal_patch_size <= 0 || v->in_channels <= 0 || v->spatial_merge_size <= 0 ||
        v->num_position_embeddings <= 0 || v->out_hidden_size != t->hidden_size)
        return tdm_errorf(err, "%s: vision config sizes are inconsistent", c->path);
    int s = (int)lround(sqrt((double)v->num_position_embeddings));
    if (s * s != v->num_position_embeddings)
        return tdm_errorf(err, "%s: vision num_position_embeddings %d is not a square", c->path,
                          v->num_position_embeddings);
    if (v->n_deepstack < 0 || v->n_deepstack > TDM_MAX_DEEPSTACK)
        return tdm_errorf(err, "%s: %d deepstack indexes (at most %d)", c->path, v->n_deepstack, TDM_MAX_DEEPSTACK);
    for (int j = 0; j < v->n_deepstack; j++)
        if (v->deepstack_indexes[j] < 0 || v->deepstack_indexes[j] >= v->depth)
            return tdm_errorf(err, "%s: deepstack index %d is outside the %d vision blocks", c->path,
                              v->deepstack_indexes[j], v->depth);
    if (t->hidden_size <= 0 || t->num_layers < 0 || t->num_heads <= 0 || t->num_kv_heads <= 0 ||
        t->num_heads % t->num_kv_heads || t->head_dim <= 0 || t->head_dim % 2 || t->intermediate_size <= 0 ||
        t->vocab_size <= 0 || t->rope_theta <= 0)
        return tdm_errorf(err, "%s: text config sizes are inconsistent", c->path);
    if (t->mrope_section[0] + t->mrope_section[1] + t->mrope_section[2] != t->head_dim / 2)
        return tdm_errorf(err, "%s: mrope_section [%d,%d,%d] does not sum to head_dim/2 = %d", c->path,
                          t->mrope_section[0], t->mrope_section[1], t->mrope_section[2], t->head_dim / 2);
    return 0;
}

/* Longer than most: registers every tensor of the checkpoint in forward order, one line each
 * under its Hugging Face name, so the list can be read against the checkpoint's. */
tdm_model *tdm_model_create(const tdm_model_config *cfg, const tdm_freeze *freeze, tdm_error *err) {
    if (check_config(cfg, err)) return NULL;
    tdm_model *m = tdm_xcalloc(1, sizeof *m);
    m->cfg = *cfg;
    if (freeze) m->freeze = *freeze;
    const tdm_vision_config *vc = &cfg->vision;
    const tdm_text_config *tc = &cfg->text;
    int64_t D = vc->hidden_size, Iv = vc->intermediate_size, H4 = (int64_t)tdm_merge_rows(cfg) * D;
    int64_t O = vc->out_hidden_size, h = tc->hidden_size, hd = tc->head_dim;
    int nds = vc->n_deepstack;

    m->train_vision = !m->freeze.vision;
    m->train_projector = !m->freeze.projector;
    m->train_llm = !m->freeze.llm;
    m->train_head = cfg->tie_word_embeddings ? m->train_llm : !m->freeze.lm_head;
    m->prune_last = 1;

    /* units in forward order */
    m->u_vis_embed = 0;
    m->u_block0 = 1;
    m->u_merger = 1 + vc->depth;
    m->u_ds0 = m->u_merger + 1;
    m->u_embed = m->u_ds0 + nds;
    m->u_layer0 = m->u_embed + 1;
    m->u_norm = m->u_layer0 + tc->num_layers;
    m->u_head = m->u_norm + 1;
    m->n_units = m->u_head + 1;
    m->unit_name = tdm_xcalloc((size_t)m->n_units, sizeof *m->unit_name);
    snprintf(m->unit_name[m->u_vis_embed], UNIT_NAME_MAX, "vision.patch_embed");
    for (int i = 0; i < vc->depth; i++) snprintf(m->unit_name[m->u_block0 + i], UNIT_NAME_MAX, "vision.block.%d", i);
    snprintf(m->unit_name[m->u_merger], UNIT_NAME_MAX, "vision.merger");
    for (int j = 0; j < nds; j++) snprintf(m->unit_name[m->u_ds0 + j], UNIT_NAME_MAX, "vision.deepstack_merger.%d", j);
    snprintf(m->unit_name[m->u_embed], UNIT_NAME_MAX, "embed_tokens");
    for (int l = 0; l < tc->num_layers; l++) snprintf(m->unit_name[m->u_layer0 + l], UNIT_NAME_MAX, "layer.%d", l);
    snprintf(m->unit_name[m->u_norm], UNIT_NAME_MAX, "norm");
    snprintf(m->unit_name[m->u_head], UNIT_NAME_MAX, "lm_head");

    reg_ctx r = {m, m->u_vis_embed, m->train_vision};
    char nm[TDM_PARAM_NAME_MAX];
    m->patch_w = reg(&r, "model.visual.patch_embed.proj.weight", 5, D, vc->in_channels, vc->temporal_patch_size,
                     vc->patch_size, vc->patch_size);
    m->patch_b = reg(&r, "model.visual.patch_embed.proj.bias", 1, D, 0, 0, 0, 0);
    m->pos_embed = reg(&r, "model.visual.pos_embed.weight", 2, vc->num_position_embeddings, D, 0, 0, 0);
    m->vb = tdm_xcalloc((size_t)(vc->depth > 0 ? vc->depth : 1), sizeof *m->vb);
    for (int i = 0; i < vc->depth; i++) {
        vis_block_ix *b = &m->vb[i];
        r.unit = m->u_block0 + i;
#define VREG(field, suffix, nd, a0, a1)                                                                                \
    snprintf(nm, sizeof nm, "model.visual.blocks.%d.%s", i, suffix);                                                   \
    b->field = reg(&r, nm, nd, a0, a1, 0, 0, 0)
        VREG(norm1_w, "norm1.weight", 1, D, 0);
        VREG(norm1_b, "norm1.bias", 1, D, 0);
        VREG(norm2_w, "norm2.weight", 1, D, 0);
        VREG(norm2_b, "norm2.bias", 1, D, 0);
        VREG(qkv_w, "attn.qkv.weight", 2, 3 * D, D);
        VREG(qkv_b, "attn.qkv.bias", 1, 3 * D, 0);
        VREG(proj_w, "attn.proj.weight", 2, D, D);
        VREG(proj_b, "attn.proj.bias", 1, D, 0);
        VREG(fc1_w, "mlp.linear_fc1.weight", 2, Iv, D);
        VREG(fc1_b, "mlp.linear_fc1.bias", 1, Iv, 0);
        VREG(fc2_w, "mlp.linear_fc2.weight", 2, D, Iv);
        VREG(fc2_b, "mlp.linear_fc2.bias", 1, D, 0);
#undef VREG
    }
    r.trainable = m->train_projector;
    r.unit = m->u_merger;
    reg_merger(&r, "model.visual.merger", &m->merger, D, H4, O);
    for (int j = 0; j < nds; j++) {
        r.unit = m->u_ds0 + j;
        char prefix[TDM_PARAM_NAME_MAX];
        snprintf(prefix, sizeof prefix, "model.visual.deepstack_merger_list.%d", j);
        reg_merger(&r, prefix, &m->ds[j], H4, H4, O);
    }

    r.trainable = m->train_llm;
    r.unit = m->u_embed;
    m->embed = reg(&r, "model.language_model.embed_tokens.weight", 2, tc->vocab_size, h, 0, 0, 0);
    m->dl = tdm_xcalloc((size_t)(tc->num_layers > 0 ? tc->num_layers : 1), sizeof *m->dl);
    for (int l = 0; l < tc->num_layers; l++) {
        dec_layer_ix *d = &m->dl[l];
        r.unit = m->u_layer0 + l;
#define TREG(field, suffix, nd, a0, a1)                                                                                \
    snprintf(nm, sizeof nm, "model.language_model.layers.%d.%s", l, suffix);                                           \
    d->field = reg(&r, nm, nd, a0, a1, 0, 0, 0)
        TREG(in_norm, "input_layernorm.weight", 1, h, 0);
        TREG(q, "self_attn.q_proj.weight", 2, tc->num_heads * hd, h);
        TREG(k, "self_attn.k_proj.weight", 2, tc->num_kv_heads * hd, h);
        TREG(v, "self_attn.v_proj.weight", 2, tc->num_kv_heads * hd, h);
        TREG(o, "self_attn.o_proj.weight", 2, h, tc->num_heads * hd);
        TREG(q_norm, "self_attn.q_norm.weight", 1, hd, 0);
        TREG(k_norm, "self_attn.k_norm.weight", 1, hd, 0);
        TREG(post_norm, "post_attention_layernorm.weight", 1, h, 0);
        TREG(gate, "mlp.gate_proj.weight", 2, tc->intermediate_size, h);
        TREG(up, "mlp.up_proj.weight", 2, tc->intermediate_size, h);
        TREG(down, "mlp.down_proj.weight", 2, h, tc->intermediate_size);
#undef TREG
    }
    r.unit = m->u_norm;
    m->final_norm = reg(&r, "model.language_model.norm.weight", 1, h, 0, 0, 0, 0);
    if (cfg->tie_word_embeddings) {
        m->lm_head = m->embed;
    } else {
        r.unit = m->u_head;
        r.trainable = m->train_head;
        m->lm_head = reg(&r, "lm_head.weight", 2, tc->vocab_size, h, 0, 0, 0);
    }
    return m;
}

void tdm_model_free(tdm_model *m) {
    if (!m) return;
    tdm_free_big(m->act_block);
    tdm_free_big(m->wide);
    free(m->wide_off);
    free(m->a.blk);
    free(m->a.ds);
    free(m->a.lay);
    free(m->vb);
    free(m->dl);
    free(m->unit_name);
    tdm_param_table_free(&m->params);
    free(m);
}

tdm_param_table *tdm_model_params(tdm_model *m) { return &m->params; }
const tdm_model_config *tdm_model_get_config(const tdm_model *m) { return &m->cfg; }
int tdm_model_n_units(const tdm_model *m) { return m->n_units; }
const char *tdm_model_unit_name(const tdm_model *m, int unit) {
    return unit >= 0 && unit < m->n_units ? m->unit_name[unit] : "";
}

/* ---- initial weights ------------------------------------------------------------- */

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* One tensor's initial values into data[numel]. */
static void init_tensor(const tdm_model *m, int i, float *data, uint64_t seed) {
    const tdm_param *p = &m->params.p[i];
    /* norms: every 1-D ".weight" (LayerNorm, RMSNorm, q/k norm); biases: ".bias" */
    if (ends_with(p->name, ".bias")) {
        memset(data, 0, sizeof(float) * (size_t)p->numel);
    } else if (p->ndim == 1) {
        for (int64_t k = 0; k < p->numel; k++) data[k] = 1.0f;
    } else {
        /* The vision position table starts at the scale of a patch embedding (0.02 x
         * sqrt(patch_dim) for unit-scale pixels, 0.78 at patch 16), so "where" is visible in
         * every visual token from the first step. At 0.02 it is 1/40 of the patch embedding and
         * a tower trained from scratch took hundreds of steps to find where a lone object is,
         * and in 64 x 64 pictures never did (docs/learning.md). */
        float std = 0.02f;
        if (i == m->pos_embed) std = 0.02f * sqrtf((float)tdm_vision_patch_dim(&m->cfg.vision));
        tdm_rng_fill_normal(data, p->numel, 0.0f, std, seed, tdm_rng_stream_of(p->name));
    }
}

void tdm_model_init_weights(tdm_model *m, uint64_t seed) {
    float *tmp = NULL; /* bfloat16 storage: the values are drawn in fp32, then rounded */
    for (int i = 0; i < m->params.n; i++) {
        tdm_param *p = &m->params.p[i];
        if (!p->data && !p->bits) continue;
        if (p->bits && !tmp) tmp = tdm_xmalloc(sizeof(float) * (size_t)tdm_param_table_max_numel(&m->params));
        float *data = p->bits ? tmp : p->data;
        init_tensor(m, i, data, seed);
        if (p->bits) tdm_round_to_bf16(NULL, p->bits, data, p->numel);
    }
    free(tmp);
    m->wide_unit = -1;
}

/* ---- hooks and profiler ---------------------------------------------------------- */

void tdm_model_set_hooks(tdm_model *m, const tdm_param_hooks *hooks) {
    if (hooks) m->hooks = *hooks;
    else memset(&m->hooks, 0, sizeof m->hooks);
}

void tdm_model_unit_begin(tdm_model *m, int unit, int backward, uint64_t *t0) {
    if (!backward && m->hooks.param_needed) {
        /* Parameters are registered in forward order, so a unit's parameters are one run. */
        for (int i = 0; i < m->params.n; i++)
            if (m->params.p[i].unit == unit) m->hooks.param_needed(m->hooks.ctx, i);
    }
    if (m->hooks.layer_begin) m->hooks.layer_begin(m->hooks.ctx, m->unit_name[unit], backward);
    *t0 = tdm_prof_on(1) ? tdm_now_ns() : 0;
}

void tdm_model_unit_end(tdm_model *m, int unit, int backward, uint64_t t0) {
    if (tdm_prof_on(1)) tdm_prof_complete(TDM_PROF_LAYER, 1, m->unit_name[unit], t0, tdm_now_ns(), backward);
    if (m->hooks.layer_end) m->hooks.layer_end(m->hooks.ctx, m->unit_name[unit], backward);
    if (m->hooks.progress) m->hooks.progress(m->hooks.ctx);
}

void tdm_model_grad_ready(tdm_model *m, int param) {
    if (m->params.p[param].trainable && m->hooks.grad_ready) m->hooks.grad_ready(m->hooks.ctx, param);
}

float *tdm_model_gradp(tdm_model *m, int param) {
    tdm_param *p = &m->params.p[param];
    return p->trainable ? p->grad : NULL;
}

/* ---- activations ------------------------------------------------------------------ */

int64_t tdm_model_activation_bytes_for(const tdm_model_config *cfg, const tdm_model_limits *limits,
                                       const tdm_recompute *rc, const tdm_freeze *freeze) {
    model_acts a;
    memset(&a, 0, sizeof a);
    int64_t bytes = tdm_model_layout_acts(cfg, limits, rc, !(freeze && freeze->vision), NULL, &a);
    free(a.blk);
    free(a.ds);
    free(a.lay);
    return bytes;
}

static int wide_alloc(tdm_model *m, tdm_error *err);

int tdm_model_reserve(tdm_model *m, const tdm_model_limits *limits, tdm_error *err) {
    const tdm_model_config *c = &m->cfg;
    m->decode_len = 0;
    int sm2 = tdm_merge_rows(c);
    if (limits->max_tokens <= 0 || limits->max_seqs <= 0 || limits->max_patches < 0 || limits->max_images < 0)
        return tdm_errorf(err, "model limits: tokens %d, samples %d, patches %d, images %d are not all positive",
                          limits->max_tokens, limits->max_seqs, limits->max_patches, limits->max_images);
    if (limits->max_patches % sm2)
        return tdm_errorf(err, "model limits: max_patches %d is not a multiple of %d", limits->max_patches, sm2);
    if (m->act_block) {
        tdm_free_big(m->act_block);
        free(m->a.blk);
        free(m->a.ds);
        free(m->a.lay);
        m->act_block = NULL;
    }
    memset(&m->a, 0, sizeof m->a);
    int64_t bytes = tdm_model_layout_acts(c, limits, &m->rc, m->train_vision, NULL, &m->a);
    free(m->a.blk);
    free(m->a.ds);
    free(m->a.lay);
    memset(&m->a, 0, sizeof m->a);
    m->act_block = tdm_alloc_big((size_t)bytes, err);
    if (!m->act_block) return tdm_error_prefix(err, "model activations (%lld bytes)", (long long)bytes);
    tdm_model_layout_acts(c, limits, &m->rc, m->train_vision, m->act_block, &m->a);
    if (wide_alloc(m, err) != 0) return -1;
    m->act_bytes = bytes;
    m->limits = *limits;
    m->reserved = 1;
    return 0;
}

int64_t tdm_model_activation_bytes(const tdm_model *m) { return m->act_bytes; }

/* ---- bfloat16 weights, widened a unit at a time ---------------------------------------- */

int64_t tdm_model_wide_scratch_bytes(const tdm_param_table *t, int bits_only) {
    int n_units = 0;
    for (int i = 0; i < t->n; i++)
        if (t->p[i].unit + 1 > n_units) n_units = t->p[i].unit + 1;
    int64_t best = 0, *per = tdm_xcalloc((size_t)n_units + 1, sizeof *per);
    for (int i = 0; i < t->n; i++)
        if ((t->p[i].bits || !bits_only) && t->p[i].unit >= 0) per[t->p[i].unit] += t->p[i].numel;
    for (int u = 0; u < n_units; u++)
        if (per[u] > best) best = per[u];
    free(per);
    return best * (int64_t)sizeof(float);
}

static int wide_alloc(tdm_model *m, tdm_error *err) {
    int64_t bytes = tdm_model_wide_scratch_bytes(&m->params, 1);
    if (m->wide && m->wide_bytes >= bytes) return 0;
    tdm_free_big(m->wide);
    free(m->wide_off);
    m->wide_off = NULL;
    m->wide_bytes = 0;
    m->wide_unit = -1;
    m->wide = bytes ? tdm_alloc_big((size_t)bytes, err) : NULL;
    if (bytes && !m->wide)
        return tdm_error_prefix(err, "bfloat16 weights' fp32 scratch (%lld bytes)", (long long)bytes);
    m->wide_off = tdm_xcalloc((size_t)m->params.n, sizeof *m->wide_off);
    m->wide_bytes = bytes;
    return 0;
}

const float *tdm_model__wide(const tdm_model *mc, int param) {
    tdm_model *m = (tdm_model *)mc; /* the scratch is a cache: reading weights changes nothing else */
    const int u = m->params.p[param].unit;
    if (m->wide_unit != u || !m->wide) {
        tdm_error err;
        if (wide_alloc(m, &err) != 0) { /* tdm_model_reserve allocates it; only a tool skipping that gets here */
            fprintf(stderr, "tandem: %s\n", err.msg);
            abort();
        }
        int64_t off = 0;
        for (int i = 0; i < m->params.n; i++) {
            const tdm_param *p = &m->params.p[i];
            if (p->unit != u || !p->bits) continue;
            tdm_widen_bf16(m->wide + off, p->bits, p->numel);
            m->wide_off[i] = off;
            off += p->numel;
        }
        m->wide_unit = u;
    }
    return m->wide + m->wide_off[param];
}

void tdm_model_weights_changed(tdm_model *m) { m->wide_unit = -1; }
int64_t tdm_model_wide_bytes(const tdm_model *m) { return m->wide_bytes; }

int tdm_recompute_from_flags(const char *granularity, const char *method, int num_layers, const tdm_model_config *cfg,
                             tdm_recompute *rc, tdm_error *err) {
    rc->method = TDM_RECOMPUTE_NONE;
    rc->num_layers = 0;
    const int full = granularity && !strcmp(granularity, "full"), given = method && method[0];
    if (granularity && granularity[0] && !full && strcmp(granularity, "selective"))
        return tdm_errorf(err, "--recompute-granularity %s: expected full or selective", granularity);
    if (!full) {
        if (given || num_layers)
            return tdm_errorf(err, "%s: only with --recompute-granularity full",
                              given ? "--recompute-method" : "--recompute-num-layers");
        return 0;
    }
    if (!given) return tdm_errorf(err, "--recompute-granularity full: requires --recompute-method uniform or block");
    if (strcmp(method, "uniform") && strcmp(method, "block"))
        return tdm_errorf(err, "--recompute-method %s: expected uniform or block", method);
    if (num_layers < 1)
        return tdm_errorf(err, "--recompute-granularity full: requires --recompute-num-layers N (at least 1)");
    if (cfg && num_layers > cfg->text.num_layers)
        return tdm_errorf(err, "--recompute-num-layers %d: expected between 1 and the %d decoder layers of %s",
                          num_layers, cfg->text.num_layers, cfg->path);
    rc->method = !strcmp(method, "block") ? TDM_RECOMPUTE_BLOCK : TDM_RECOMPUTE_UNIFORM;
    rc->num_layers = num_layers;
    return 0;
}

void tdm_model_set_prune_last_layer(tdm_model *m, int on) { m->prune_last = on != 0; }

void tdm_model_set_recompute(tdm_model *m, const tdm_recompute *rc) {
    if (rc) m->rc = *rc;
    else memset(&m->rc, 0, sizeof m->rc);
}

/* ---- the step ----------------------------------------------------------------------- */

/* Checks a batch against the config and the reserved limits; counts image pads. */
static int check_batch(const tdm_model *m, const tdm_batch *b, int *n_image_rows, tdm_error *err) {
    const tdm_model_config *c = &m->cfg;
    const tdm_vision_config *vc = &c->vision;
    if (!m->reserved) return tdm_errorf(err, "model: tdm_model_reserve was not called");
    if (b->n_tokens <= 0 || b->n_tokens > m->limits.max_tokens)
        return tdm_errorf(err, "batch: %d tokens (the reserved limit is %d)", b->n_tokens, m->limits.max_tokens);
    if (b->n_seqs <= 0 || b->n_seqs > m->limits.max_seqs)
        return tdm_errorf(err, "batch: %d samples (the reserved limit is %d)", b->n_seqs, m->limits.max_seqs);
    if (b->n_patches < 0 || b->n_patches > m->limits.max_patches || b->n_images > m->limits.max_images)
        return tdm_errorf(err, "batch: %d patches in %d images (the reserved limits are %d and %d)", b->n_patches,
                          b->n_images, m->limits.max_patches, m->limits.max_images);
    if (b->cu_seqlens[0] != 0 || b->cu_seqlens[b->n_seqs] != b->n_tokens)
        return tdm_errorf(err, "batch: cu_seqlens do not cover the %d tokens", b->n_tokens);
    for (int s = 0; s < b->n_seqs; s++)
        if (b->cu_seqlens[s + 1] <= b->cu_seqlens[s])
            return tdm_errorf(err, "batch: sample %d is empty or cu_seqlens decrease", s);
    int sm = vc->spatial_merge_size;
    /* In 64 bits, each image bounded before the next multiplication: a product that wrapped
     * could match n_patches by accident. */
    int64_t np = 0;
    for (int j = 0; j < b->n_images; j++) {
        const int32_t *g = b->image_grid_thw + 3 * j;
        if (g[0] <= 0 || g[1] <= 0 || g[2] <= 0 || g[1] % sm || g[2] % sm)
            return tdm_errorf(err,
                              "batch: image %d has grid (%d, %d, %d), expected positive sizes with h and w "
                              "multiples of %d",
                              j, g[0], g[1], g[2], sm);
        int64_t th = (int64_t)g[0] * g[1];
        if (th > m->limits.max_patches || th * g[2] > m->limits.max_patches)
            return tdm_errorf(err, "batch: image %d has grid (%d, %d, %d), more patches than the reserved limit of %d",
                              j, g[0], g[1], g[2], m->limits.max_patches);
        np += th * g[2];
    }
    if (np != b->n_patches)
        return tdm_errorf(err, "batch: image grids hold %lld patches but n_patches is %d", (long long)np, b->n_patches);
    int pd = vc->in_channels * vc->temporal_patch_size * vc->patch_size * vc->patch_size;
    if (b->n_patches > 0 && b->patch_dim != pd)
        return tdm_errorf(err, "batch: patch_dim %d, the vision config expects %d", b->patch_dim, pd);
    int pads = 0;
    for (int i = 0; i < b->n_tokens; i++) {
        int32_t id = b->input_ids[i];
        if (id < 0 || id >= c->text.vocab_size)
            return tdm_errorf(err, "batch: token %d has id %d outside the vocabulary of %d", i, id, c->text.vocab_size);
        int32_t t = b->targets[i];
        if (t != -100 && (t < 0 || t >= c->text.vocab_size))
            return tdm_errorf(err, "batch: token %d has target %d outside the vocabulary of %d", i, t,
                              c->text.vocab_size);
        pads += id == c->image_token_id;
    }
    if (pads * tdm_merge_rows(c) != b->n_patches)
        return tdm_errorf(err, "batch: %d image-pad tokens but the images hold %d merged patches", pads,
                          b->n_patches / tdm_merge_rows(c));
    *n_image_rows = pads;
    return 0;
}

/* Units [lo, hi) that this micro-batch does not run (the vision tower of a text-only
 * batch) still keep the hook contract, so the data-parallel layer's counts add up:
 * forward announces their parameters as needed, backward reports their (untouched,
 * zero-contribution) gradients ready, in reverse order. */
static void skip_units(tdm_model *m, int lo, int hi, int backward) {
    if (!backward) {
        if (!m->hooks.param_needed) return;
        for (int i = 0; i < m->params.n; i++)
            if (m->params.p[i].unit >= lo && m->params.p[i].unit < hi) m->hooks.param_needed(m->hooks.ctx, i);
    } else {
        for (int i = m->params.n - 1; i >= 0; i--)
            if (m->params.p[i].unit >= lo && m->params.p[i].unit < hi) tdm_model_grad_ready(m, i);
    }
}

/* Forward through vision and decoder up to the final norm (fills m->a). */
static int run_forward(tdm_model *m, const tdm_batch *b, int prune, int *n_image_rows, int *nseg, tdm_error *err) {
    if (check_batch(m, b, n_image_rows, err)) return -1;
    m->wide_unit = -1; /* bfloat16 weights: the optimizer or the all-gathers changed them since */
    model_acts *a = &m->a;
    *nseg = 0;
    if (b->n_patches > 0)
        *nseg = tdm_vision_tables(a->vis_rope_cos, a->vis_rope_sin, a->pos_idx, a->pos_w, a->vis_cu, b->image_grid_thw,
                                  b->n_images, &m->cfg.vision);
    tdm_mrope_tables(a->txt_rope_cos, a->txt_rope_sin, b->position_ids, b->n_tokens, &m->cfg.text);
    if (b->n_patches > 0) tdm_vision_forward(m, b, *nseg);
    else skip_units(m, m->u_vis_embed, m->u_embed, 0); /* text-only micro-batch */
    tdm_decoder_forward(m, b, *n_image_rows, prune);
    return 0;
}

/* The rows of the final norm's output the loss reads, with their targets: every token, or
 * the kept rows packed when the last layer ran on them (decoder.c). */
static int loss_rows(const tdm_model *m, const tdm_batch *b, const int32_t **targets) {
    *targets = m->a.pruned ? m->a.keep_targets : b->targets;
    return m->a.pruned ? m->a.n_keep : b->n_tokens;
}

int tdm_model_forward_backward(tdm_model *m, const tdm_batch *b, float grad_scale, tdm_fb_result *res, tdm_error *err) {
    int n_img = 0, nseg = 0;
    m->decode_len = 0; /* the backward reuses activation rows as scratch */
    if (run_forward(m, b, 1, &n_img, &nseg, err)) return -1;
    model_acts *a = &m->a;
    const tdm_text_config *tc = &m->cfg.text;
    const int32_t *targets;
    int rows = loss_rows(m, b, &targets);
    int need_vision = b->n_patches > 0 && (m->train_vision || m->train_projector);
    int need_decoder = m->train_llm || need_vision;

    /* the loss, fused with the lm_head and (when anything trains) its backward */
    uint64_t t0;
    tdm_model_unit_begin(m, m->u_head, 0, &t0);
    int64_t count = 0;
    float *dw_head = m->train_head ? m->params.p[m->lm_head].grad : NULL;
    float *dh = need_decoder ? a->dh : NULL;
    double loss = 0;
    TDM_KERNEL("xent",
               loss = tdm_xent_fused(dh, dw_head, a->fin, tdm_model_w(m, m->lm_head), targets, rows, tc->hidden_size,
                                     tc->vocab_size, grad_scale, a->xent_chunk, a->xent_ws, &count));
    tdm_model_unit_end(m, m->u_head, 0, t0);
    /* untied lm_head: final now; tied: the embedding backward adds more later */
    if (!m->cfg.tie_word_embeddings) tdm_model_grad_ready(m, m->lm_head);

    if (need_decoder) tdm_decoder_backward(m, b, n_img, need_vision);
    else if (m->cfg.tie_word_embeddings) tdm_model_grad_ready(m, m->embed);
    if (need_vision) tdm_vision_backward(m, b, nseg);
    else if (b->n_patches == 0) skip_units(m, m->u_vis_embed, m->u_embed, 1);
    res->loss_sum = loss;
    res->n_tokens = count;
    return 0;
}

int tdm_model_forward(tdm_model *m, const tdm_batch *b, const int32_t *rows, int n_rows, float *logits,
                      tdm_fb_result *res, tdm_error *err) {
    int n_img = 0, nseg = 0;
    if (logits && (n_rows < 0 || n_rows > b->n_tokens))
        return tdm_errorf(err, "model forward: %d logit rows requested from %d tokens", n_rows, b->n_tokens);
    for (int r = 0; logits && r < n_rows; r++)
        if (rows[r] < 0 || rows[r] >= b->n_tokens)
            return tdm_errorf(err, "model forward: logit row %d is outside the %d tokens", rows[r], b->n_tokens);
    m->decode_len = 0;
    /* logits of arbitrary rows need the last layer on every row */
    if (run_forward(m, b, !logits || n_rows == 0, &n_img, &nseg, err)) return -1;
    m->decode_len = b->n_seqs == 1 ? b->n_tokens : 0; /* one sequence: its k, v rows are a KV cache */
    model_acts *a = &m->a;
    const tdm_text_config *tc = &m->cfg.text;
    int64_t count = 0;
    uint64_t t0;
    tdm_model_unit_begin(m, m->u_head, 0, &t0);
    const int32_t *targets;
    int n_loss = loss_rows(m, b, &targets);
    double loss = tdm_xent_fused(NULL, NULL, a->fin, tdm_model_w(m, m->lm_head), targets, n_loss, tc->hidden_size,
                                 tc->vocab_size, 1.0f, a->xent_chunk, a->xent_ws, &count);
    if (logits && n_rows > 0) {
        /* gather the requested rows into scratch (n_rows <= T) and project them at once */
        int64_t h = tc->hidden_size;
        for (int r = 0; r < n_rows; r++) memcpy(a->gt + r * h, a->fin + (int64_t)rows[r] * h, sizeof(float) * h);
        tdm_linear_forward(logits, a->gt, tdm_model_w(m, m->lm_head), NULL, n_rows, tc->hidden_size, tc->vocab_size);
    }
    tdm_model_unit_end(m, m->u_head, 0, t0);
    if (res) {
        res->loss_sum = loss;
        res->n_tokens = count;
    }
    return 0;
}

/* ---- FLOPs ---------------------------------------------------------------------------- */

/* A linear over n rows: forward 2*n*in*out; the backward adds the same again for the
 * input gradient when it is needed and for the weight gradient when it trains. */
static double lin_flops(double n, double in, double out, int need_dx, int train_w) {
    return 2 * n * in * out * (1 + (need_dx ? 1 : 0) + (train_w ? 1 : 0));
}

double tdm_model_flops(const tdm_model *m, const tdm_batch *b) {
    const tdm_vision_config *vc = &m->cfg.vision;
    const tdm_text_config *tc = &m->cfg.text;
    int need_vision = b->n_patches > 0 && (m->train_vision || m->train_projector);
    int need_dec = m->train_llm || need_vision;
    double f = 0, N = b->n_patches, T = b->n_tokens, M = N / tdm_merge_rows(&m->cfg);
    double D = vc->hidden_size, Iv = vc->intermediate_size, H4 = tdm_merge_rows(&m->cfg) * D, O = vc->out_hidden_size;
    int tv = m->train_vision, tp = m->train_projector, tl = m->train_llm;
    if (N > 0) {
        double pd = (double)vc->in_channels * vc->temporal_patch_size * vc->patch_size * vc->patch_size;
        f += lin_flops(N, pd, D, 0, tv);
        /* attention pairs: full per image frame */
        double pairs = 0;
        for (int j = 0; j < b->n_images; j++) {
            double s = (double)b->image_grid_thw[3 * j + 1] * b->image_grid_thw[3 * j + 2];
            pairs += b->image_grid_thw[3 * j] * s * s;
        }
        double attn_fwd = 4 * pairs * D; /* QK^T and PV over all heads */
        for (int i = 0; i < vc->depth; i++) {
            f += lin_flops(N, D, 3 * D, tv, tv) + lin_flops(N, D, D, tv, tv) + lin_flops(N, D, Iv, tv, tv) +
                 lin_flops(N, Iv, D, tv, tv);
            f += attn_fwd * (tv ? 3 : 1); /* backward: dV, dP, dQ, dK */
        }
        int nmerg = 1 + vc->n_deepstack;
        f += nmerg * (lin_flops(M, H4, H4, tv || tp, tp) + lin_flops(M, H4, O, tv || tp, tp));
    }
    double h = tc->hidden_size, q = (double)tc->num_heads * tc->head_dim, kv = (double)tc->num_kv_heads * tc->head_dim;
    double I = tc->intermediate_size;
    double pairs = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        double n = b->cu_seqlens[s + 1] - b->cu_seqlens[s];
        pairs += n * (n + 1) / 2;
    }
    for (int l = 0; l < tc->num_layers; l++) {
        f +=
            lin_flops(T, h, q, need_dec, tl) + 2 * lin_flops(T, h, kv, need_dec, tl) + lin_flops(T, q, h, need_dec, tl);
        f += 3 * lin_flops(T, h, I, need_dec, tl);
        f += 4 * pairs * q * (need_dec ? 3 : 1);
    }
    /* lm_head over the counted rows only: the fused loss skips ignored rows */
    double counted = 0;
    for (int i = 0; i < b->n_tokens; i++) counted += b->targets[i] != -100;
    f += lin_flops(counted, h, tc->vocab_size, need_dec, m->train_head);
    return f;
}
