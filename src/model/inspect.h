/* inspect.h - what `tandem inspect` reports: parameter counts per component, counted from
 * the model's own parameter table (so they can never disagree with what the model
 * allocates and trains), and a per-rank memory plan.
 *
 *   tdm_model *m = tdm_model_create(&cfg, &freeze, &err);
 *   tdm_param_counts c;
 *   tdm_inspect_count(tdm_model_params(m), &cfg, &c, &err);
 *   tdm_memory_plan plan = {...};    // buffer sizes from the data-parallel layout (src/distributed)
 *   tdm_strbuf out; tdm_sb_init(&out);
 *   tdm_inspect_format(&cfg, &c, &plan, &out);
 *
 * The memory plan's buffer sizes come from the caller because the padding rules belong
 * to the data-parallel layer (src/distributed/layout.h), which the model module may not call;
 * src/tools/cmd_inspect.c builds that layout and fills the plan.
 */
#ifndef TDM_INSPECT_H
#define TDM_INSPECT_H

#include <stdint.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "model/config.h"
#include "core/params.h"

/* Components, in forward order; each parameter name belongs to exactly one. */
typedef enum tdm_component {
    TDM_COMP_PATCH_EMBED, /* model.visual.patch_embed.* */
    TDM_COMP_POS_EMBED,   /* model.visual.pos_embed.* */
    TDM_COMP_VIT_BLOCKS,  /* model.visual.blocks.* */
    TDM_COMP_MERGER,      /* model.visual.merger.* */
    TDM_COMP_DEEPSTACK,   /* model.visual.deepstack_merger_list.* */
    TDM_COMP_EMBED,       /* model.language_model.embed_tokens.* */
    TDM_COMP_LAYERS,      /* model.language_model.layers.* */
    TDM_COMP_NORM,        /* model.language_model.norm.* */
    TDM_COMP_LM_HEAD,     /* lm_head.* */
    TDM_COMP_COUNT
} tdm_component;

/* The four groups the freeze flags act on (tdm_freeze). */
typedef enum tdm_freeze_group {
    TDM_GROUP_VISION,    /* patch_embed, pos_embed, blocks */
    TDM_GROUP_PROJECTOR, /* merger, deepstack mergers */
    TDM_GROUP_LLM,       /* embed_tokens, layers, norm */
    TDM_GROUP_LM_HEAD,   /* lm_head (absent when tied: it is embed_tokens) */
    TDM_GROUP_COUNT
} tdm_freeze_group;

typedef struct tdm_param_counts {
    int64_t comp[TDM_COMP_COUNT]; /* elements per component */
    int64_t comp_trainable[TDM_COMP_COUNT];
    int n_tensors;
    int64_t vision_total; /* vision tower incl. mergers (the spec's "vision total") */
    int64_t llm_total;    /* language model incl. lm_head (the spec's "LLM total") */
    int64_t total, trainable, frozen;
} tdm_param_counts;

/* Which component a Hugging Face tensor name belongs to; -1 when none. */
int tdm_component_of(const char *name);
tdm_freeze_group tdm_component_group(tdm_component c);

/* Counts the table's elements per component and trainable/frozen. A tensor that belongs
 * to no component is an error naming it (the report must add up). */
int tdm_inspect_count(const tdm_param_table *t, const tdm_model_config *cfg, tdm_param_counts *c, tdm_error *err);

/* Per-rank memory, bytes unless stated. Filled by the caller from the data-parallel
 * layout; the formatter derives nothing about padding on its own. */
typedef struct tdm_memory_plan {
    int dp;
    int64_t bucket_size;        /* elements the buckets were cut with */
    int n_buckets_ddp;          /* buckets without the distributed optimizer */
    int n_buckets_dist;         /* buckets with it */
    int64_t buffer_ddp;         /* elements of the flat param/grad buffer, no padding */
    int64_t buffer_dist;        /* elements with the distributed optimizer's padding */
    int64_t micro_batch_tokens; /* 0 when not asked */
    int64_t micro_batch_patches;
    int64_t activation_bytes;   /* -1 when not computed */
    int bf16_params;            /* train --bf16: weights stored as bfloat16 (2 bytes each, the all-gathers
                                   land in them), an fp32 main copy beside Adam's m and v, and the fp32
                                   scratch one layer's weights are widened into */
    int64_t wide_scratch_bytes; /* that scratch (tdm_model_wide_scratch_bytes) */
} tdm_memory_plan;

/* Appends the human-readable report (parameter table, freeze groups, memory plan). */
void tdm_inspect_format(const tdm_model_config *cfg, const tdm_param_counts *c, const tdm_memory_plan *plan,
                        tdm_strbuf *out);

#endif
