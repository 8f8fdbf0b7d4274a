/* config.h - a Hugging Face Qwen3-VL config.json, read into plain structs.
 *
 * Every size the model uses comes from here; nothing assumes the tiny demo's numbers.
 * tdm_model_config_load accepts a file or a directory holding config.json. Unknown
 * model types, missing fields, contradictory values (hidden_size not divisible by the
 * head count, an mrope_section that does not sum to head_dim/2, a deepstack index past
 * the vision depth...) are errors that name the file and the field.
 */
#ifndef TDM_CONFIG_H
#define TDM_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define TDM_MAX_DEEPSTACK 8

typedef struct tdm_vision_config {
    int depth;
    int hidden_size; /* D */
    int num_heads;
    int intermediate_size;       /* I_v */
    int patch_size;              /* 16 */
    int temporal_patch_size;     /* 2 */
    int in_channels;             /* 3 */
    int spatial_merge_size;      /* 2 */
    int num_position_embeddings; /* 2304 = 48 x 48 */
    int out_hidden_size;         /* O: the merger output width = text hidden size */
    int n_deepstack;
    int deepstack_indexes[TDM_MAX_DEEPSTACK];
    char hidden_act[32]; /* "gelu_pytorch_tanh" */
} tdm_vision_config;

typedef struct tdm_text_config {
    int hidden_size; /* h */
    int num_layers;
    int num_heads;
    int num_kv_heads;
    int head_dim;
    int intermediate_size;
    int vocab_size;
    double rope_theta;
    double rms_norm_eps;
    int mrope_section[3];
    int mrope_interleaved;
    int max_position_embeddings;
    char hidden_act[32]; /* "silu" */
    /* text_config.pad_token_id, -1 when absent: HF's nn.Embedding padding_idx, whose row the
     * token lookup leaves without gradient (the top-level pad_token_id does not set it) */
    int padding_idx;
} tdm_text_config;

typedef struct tdm_model_config {
    char path[1024]; /* the config.json it came from */
    tdm_vision_config vision;
    tdm_text_config text;
    int tie_word_embeddings;
    int image_token_id;
    int video_token_id;
    int vision_start_token_id;
    int vision_end_token_id;
    /* Optional in config.json (text_config first, then top level); -1 when absent. eos_token_id
     * may also be a list of ids, as transformers allows: the first is kept here.
     * The shipped configs leave pad_token_id out of text_config, so the embedding has no
     * padding row (text.padding_idx -1, HF padding_idx = None). */
    int bos_token_id;
    int eos_token_id;
    int pad_token_id;
} tdm_model_config;

/* Sanity bounds: a config outside them is refused before anything is allocated. */
#define TDM_CONFIG_MAX_LAYERS    1024  /* vision depth, text layers */
#define TDM_CONFIG_MAX_HIDDEN    65536 /* any hidden or intermediate width */
#define TDM_CONFIG_MAX_HEADS     1024
#define TDM_CONFIG_MAX_VOCAB     (1 << 22)
#define TDM_CONFIG_MAX_POSITIONS (1 << 24)
#define TDM_CONFIG_MAX_PARAMS    ((int64_t)1 << 38) /* 275 G parameters, ~1 TB of fp32 weights */
#define TDM_CONFIG_MAX_BYTES     (1 << 20)          /* config.json file size */

/* Reads `file_or_dir` (a config.json, or a directory holding one) into *cfg.
 * Every error names the file and the field, e.g.
 *   "m/config.json: text_config.num_key_value_heads: 3 does not divide num_attention_heads 16".
 * Architectural sizes are required even where HF has a default, because HF's defaults
 * describe no shipped checkpoint; small constants default to HF's values: patch_size 16,
 * temporal_patch_size 2, spatial_merge_size 2, in_channels 3, the activations,
 * rms_norm_eps 1e-6, rope_theta 5e6, mrope_interleaved true, tie_word_embeddings false,
 * the four vision token ids (151655, 151656, 151652, 151653). */
int tdm_model_config_load(const char *file_or_dir, tdm_model_config *cfg, tdm_error *err);

/* Same, from JSON text already in memory; `name` stands for the file in messages. */
int tdm_model_config_parse(const char *json, size_t len, const char *name, tdm_model_config *cfg, tdm_error *err);

/* Derived sizes, for readers of the struct. */
static inline int tdm_vision_head_dim(const tdm_vision_config *v) { return v->hidden_size / v->num_heads; }
/* Width of one merged token before the merger MLP: spatial_merge_size^2 * D. */
static inline int tdm_vision_merge_dim(const tdm_vision_config *v) {
    return v->spatial_merge_size * v->spatial_merge_size * v->hidden_size;
}
/* Elements of one flattened patch: in_channels * temporal * patch * patch. */
static inline int tdm_vision_patch_dim(const tdm_vision_config *v) {
    return v->in_channels * v->temporal_patch_size * v->patch_size * v->patch_size;
}

#endif
