/* inspect.c - parameter counts per component from the parameter table, and the text of
 * `tandem inspect` (see inspect.h). */
#include "model/inspect.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *prefix, *label;
    tdm_freeze_group group;
} comps[TDM_COMP_COUNT] = {
    [TDM_COMP_PATCH_EMBED] = {"model.visual.patch_embed.", "patch_embed", TDM_GROUP_VISION},
    [TDM_COMP_POS_EMBED] = {"model.visual.pos_embed.", "pos_embed", TDM_GROUP_VISION},
    [TDM_COMP_VIT_BLOCKS] = {"model.visual.blocks.", "ViT blocks", TDM_GROUP_VISION},
    [TDM_COMP_MERGER] = {"model.visual.merger.", "final merger", TDM_GROUP_PROJECTOR},
    [TDM_COMP_DEEPSTACK] = {"model.visual.deepstack_merger_list.", "DeepStack mergers", TDM_GROUP_PROJECTOR},
    [TDM_COMP_EMBED] = {"model.language_model.embed_tokens.", "embed_tokens", TDM_GROUP_LLM},
    [TDM_COMP_LAYERS] = {"model.language_model.layers.", "decoder layers", TDM_GROUP_LLM},
    [TDM_COMP_NORM] = {"model.language_model.norm.", "final norm", TDM_GROUP_LLM},
    [TDM_COMP_LM_HEAD] = {"lm_head.", "lm_head", TDM_GROUP_LM_HEAD},
};

static const char *const group_label[TDM_GROUP_COUNT] = {
    [TDM_GROUP_VISION] = "vision encoder",
    [TDM_GROUP_PROJECTOR] = "projector (mergers)",
    [TDM_GROUP_LLM] = "language model",
    [TDM_GROUP_LM_HEAD] = "lm_head",
};
static const char *const group_flag[TDM_GROUP_COUNT] = {
    [TDM_GROUP_VISION] = "--freeze-vision",
    [TDM_GROUP_PROJECTOR] = "--freeze-projector",
    [TDM_GROUP_LLM] = "--freeze-llm",
    [TDM_GROUP_LM_HEAD] = "--freeze-lm-head",
};

int tdm_component_of(const char *name) {
    for (int c = 0; c < TDM_COMP_COUNT; c++)
        if (strncmp(name, comps[c].prefix, strlen(comps[c].prefix)) == 0) return c;
    return -1;
}

tdm_freeze_group tdm_component_group(tdm_component c) { return comps[c].group; }

int tdm_inspect_count(const tdm_param_table *t, const tdm_model_config *cfg, tdm_param_counts *c, tdm_error *err) {
    (void)cfg;
    memset(c, 0, sizeof *c);
    for (int i = 0; i < t->n; i++) {
        const tdm_param *p = &t->p[i];
        int k = tdm_component_of(p->name);
        if (k < 0) return tdm_errorf(err, "parameter table: tensor \"%s\" belongs to no known component", p->name);
        c->comp[k] += p->numel;
        if (p->trainable) c->comp_trainable[k] += p->numel;
        c->total += p->numel;
        if (p->trainable) c->trainable += p->numel;
        else c->frozen += p->numel;
    }
    c->n_tensors = t->n;
    for (int k = TDM_COMP_PATCH_EMBED; k <= TDM_COMP_DEEPSTACK; k++) c->vision_total += c->comp[k];
    for (int k = TDM_COMP_EMBED; k <= TDM_COMP_LM_HEAD; k++) c->llm_total += c->comp[k];
    return 0;
}

/* 8767123696 -> "8,767,123,696" */
static const char *commas(char *buf, size_t cap, int64_t v) {
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%lld", (long long)(v < 0 ? -v : v)), at = 0;
    if (v < 0 && at < (int)cap - 1) buf[at++] = '-';
    for (int i = 0; i < n && at < (int)cap - 1; i++) {
        if (i > 0 && (n - i) % 3 == 0 && at < (int)cap - 1) buf[at++] = ',';
        if (at < (int)cap - 1) buf[at++] = digits[i];
    }
    buf[at] = 0;
    return buf;
}

/* Bytes in binary units with two decimals: "32.66 GiB". */
static const char *human(char *buf, size_t cap, int64_t bytes) {
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, cap, u ? "%.2f %s" : "%.0f %s", v, unit[u]);
    return buf;
}

static void row_count(tdm_strbuf *o, const char *label, int64_t n, int64_t trainable) {
    char a[40], b[40];
    tdm_sb_printf(o, "  %-44s %17s %17s\n", label, commas(a, sizeof a, n), commas(b, sizeof b, trainable));
}

static void row_mem(tdm_strbuf *o, const char *label, int64_t ddp, int64_t dist) {
    char a[40], b[40];
    tdm_sb_printf(o, "  %-44s %13s %26s\n", label, human(a, sizeof a, ddp), dist >= 0 ? human(b, sizeof b, dist) : "");
}

void tdm_inspect_format(const tdm_model_config *cfg, const tdm_param_counts *c, const tdm_memory_plan *plan,
                        tdm_strbuf *o) {
    const int depth = cfg->vision.depth, layers = cfg->text.num_layers, nds = cfg->vision.n_deepstack;
    char a[40], b[40], label[96];
    tdm_sb_printf(o, "model: %s (qwen3_vl, %s)\n", cfg->path,
                  cfg->tie_word_embeddings ? "lm_head tied to embed_tokens" : "untied lm_head");
    tdm_sb_printf(o, "  vision: depth %d, hidden %d, heads %d, intermediate %d, out %d, deepstack taps %d\n", depth,
                  cfg->vision.hidden_size, cfg->vision.num_heads, cfg->vision.intermediate_size,
                  cfg->vision.out_hidden_size, nds);
    tdm_sb_printf(o, "  text:   layers %d, hidden %d, heads %d/%d kv, head_dim %d, intermediate %d, vocab %d\n\n",
                  layers, cfg->text.hidden_size, cfg->text.num_heads, cfg->text.num_kv_heads, cfg->text.head_dim,
                  cfg->text.intermediate_size, cfg->text.vocab_size);

    tdm_sb_printf(o, "parameters (counted from the model's parameter table, %d tensors)\n", c->n_tensors);
    tdm_sb_printf(o, "  %-44s %17s %17s\n", "component", "parameters", "trainable");
    for (int k = 0; k < TDM_COMP_COUNT; k++) {
        int64_t n = c->comp[k];
        if (k == TDM_COMP_VIT_BLOCKS && depth > 0 && n % depth == 0)
            snprintf(label, sizeof label, "vision: %s (%d x %s)", comps[k].label, depth,
                     commas(a, sizeof a, n / depth));
        else if (k == TDM_COMP_DEEPSTACK) snprintf(label, sizeof label, "vision: %s (%d)", comps[k].label, nds);
        else if (k == TDM_COMP_LAYERS && layers > 0 && n % layers == 0)
            snprintf(label, sizeof label, "LLM: %s (%d x %s)", comps[k].label, layers, commas(a, sizeof a, n / layers));
        else if (k == TDM_COMP_LM_HEAD && cfg->tie_word_embeddings)
            snprintf(label, sizeof label, "LLM: lm_head (tied: embed_tokens)");
        else snprintf(label, sizeof label, "%s: %s", k <= TDM_COMP_DEEPSTACK ? "vision" : "LLM", comps[k].label);
        row_count(o, label, n, c->comp_trainable[k]);
        if (k == TDM_COMP_DEEPSTACK) {
            int64_t tr = 0;
            for (int j = 0; j <= TDM_COMP_DEEPSTACK; j++) tr += c->comp_trainable[j];
            row_count(o, "vision total", c->vision_total, tr);
        }
    }
    int64_t llm_tr = 0;
    for (int j = TDM_COMP_EMBED; j <= TDM_COMP_LM_HEAD; j++) llm_tr += c->comp_trainable[j];
    row_count(o, "LLM total", c->llm_total, llm_tr);
    row_count(o, "model total", c->total, c->trainable);
    tdm_sb_printf(o, "  (%s bytes in bf16, %s bytes in fp32)\n\n", commas(a, sizeof a, 2 * c->total),
                  commas(b, sizeof b, 4 * c->total));

    tdm_sb_printf(o, "freeze groups\n");
    for (int g = 0; g < TDM_GROUP_COUNT; g++) {
        int64_t n = 0, tr = 0;
        for (int k = 0; k < TDM_COMP_COUNT; k++)
            if (comps[k].group == (tdm_freeze_group)g) n += c->comp[k], tr += c->comp_trainable[k];
        const char *state =
            n == 0    ? (g == TDM_GROUP_LM_HEAD && cfg->tie_word_embeddings ? "tied: follows --freeze-llm" : "-")
            : tr == n ? "trainable"
            : tr == 0 ? "frozen"
                      : "partly frozen";
        tdm_sb_printf(o, "  %-22s %17s  %-10s (%s)\n", group_label[g], commas(a, sizeof a, n), state, group_flag[g]);
    }
    tdm_sb_printf(o, "  trainable %s, frozen %s\n\n", commas(a, sizeof a, c->trainable),
                  commas(b, sizeof b, c->frozen));

    const int64_t F = 4; /* bytes per fp32 */
    tdm_sb_printf(o,
                  "memory plan per rank (dp %d, bucket size %s elements: %d buckets; %d with the distributed "
                  "optimizer)\n",
                  plan->dp, commas(a, sizeof a, plan->bucket_size), plan->n_buckets_ddp, plan->n_buckets_dist);
    tdm_sb_printf(o, "  %-44s %13s %26s\n", "", "DDP", "distributed optimizer");
    const int64_t W = plan->bf16_params ? 2 : F; /* --bf16: weights stored as bfloat16 */
    int64_t w_ddp = W * (c->frozen + plan->buffer_ddp), w_dist = W * (c->frozen + plan->buffer_dist);
    int64_t g_ddp = F * plan->buffer_ddp, g_dist = F * plan->buffer_dist;
    /* Adam m and v in fp32; the distributed optimizer keeps them for 1/dp of the padded buffer. */
    const int64_t owned_dist = plan->dp > 0 ? plan->buffer_dist / plan->dp : 0;
    int64_t o_ddp = 2 * F * plan->buffer_ddp, o_dist = 2 * F * owned_dist;
    row_mem(o, plan->bf16_params ? "weights bf16 (--bf16, 2 bytes each)" : "weights fp32", w_ddp, w_dist);
    if (!plan->bf16_params) row_mem(o, "  (weights bf16, for reference)", 2 * c->total, -1);
    row_mem(o, "gradients fp32 (trainable)", g_ddp, g_dist);
    row_mem(o, "Adam m + v fp32", o_ddp, o_dist);
    if (plan->bf16_params) {
        /* --bf16 (ddp.c): the optimizer's fp32 main copy of what it owns (the all-gathers land in the
         * bfloat16 weights), and the fp32 scratch the model widens one layer's weights into */
        const int64_t main_ddp = F * plan->buffer_ddp, main_dist = F * owned_dist;
        row_mem(o, "fp32 main parameters (--bf16)", main_ddp, main_dist);
        row_mem(o, "fp32 scratch, largest layer widened (--bf16)", plan->wide_scratch_bytes, plan->wide_scratch_bytes);
        o_ddp += main_ddp + plan->wide_scratch_bytes;
        o_dist += main_dist + plan->wide_scratch_bytes;
    }
    int64_t act = plan->activation_bytes >= 0 ? plan->activation_bytes : 0;
    if (plan->activation_bytes >= 0) {
        snprintf(label, sizeof label, "activations (%lld tokens, %lld patches)", (long long)plan->micro_batch_tokens,
                 (long long)plan->micro_batch_patches);
        row_mem(o, label, act, act);
    }
    row_mem(o, plan->activation_bytes >= 0 ? "total" : "total (without activations)", w_ddp + g_ddp + o_ddp + act,
            w_dist + g_dist + o_dist + act);
    tdm_sb_printf(o,
                  "  padding with the distributed optimizer: %s elements (parameters start at multiples of 64, "
                  "buckets span multiples of lcm(dp, 128))\n",
                  commas(a, sizeof a, plan->buffer_dist - plan->buffer_ddp));
    if (plan->activation_bytes < 0)
        tdm_sb_printf(
            o, "  activations: not computed (give --micro-batch-tokens, and --micro-batch-patches for pictures)\n");
}
