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

#include <stdint.h>

#include "core/error.h"

#define TDM_MAX_DEEPSTACK 8

typedef struct tdm_vision_config {
    int depth;
    int hidden_size;          /* D */
    int num_heads;
    int intermediate_size;    /* I_v */
    int patch_size;           /* 16 */
    int temporal_patch_size;  /* 2 */
    int in_channels;          /* 3 */
    int spatial_merge_size;   /* 2 */
    int num_position_embeddings; /* 2304 = 48 x 48 */
    int out_hidden_size;      /* O: the merger output width = text hidden size */
    int n_deepstack;
    int deepstack_indexes[TDM_MAX_DEEPSTACK];
    char hidden_act[32];      /* "gelu_pytorch_tanh" */
} tdm_vision_config;

typedef struct tdm_text_config {
    int hidden_size;          /* h */
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
    char hidden_act[32];      /* "silu" */
} tdm_text_config;

typedef struct tdm_model_config {
    char path[1024];          /* the config.json it came from */
    tdm_vision_config vision;
    tdm_text_config text;
    int tie_word_embeddings;
    int image_token_id;
    int video_token_id;
    int vision_start_token_id;
    int vision_end_token_id;
} tdm_model_config;

int tdm_model_config_load(const char *file_or_dir, tdm_model_config *cfg, tdm_error *err);
int tdm_model_config_parse(const char *json, size_t len, const char *name, tdm_model_config *cfg, tdm_error *err);

#endif
