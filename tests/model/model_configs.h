/* model_configs.h - hand-built configs for the model tests and benchmarks: the shipped
 * 2B and 8B shapes (spec section 1) and small shapes of the same architecture. */
#ifndef TDM_TEST_MODEL_CONFIGS_H
#define TDM_TEST_MODEL_CONFIGS_H

#include <stdio.h>
#include <string.h>

#include "model/config.h"

static inline void cfg_common(tdm_model_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->path, sizeof c->path, "(built in code)");
    c->vision.patch_size = 16;
    c->vision.temporal_patch_size = 2;
    c->vision.in_channels = 3;
    c->vision.spatial_merge_size = 2;
    c->vision.num_position_embeddings = 2304;
    c->vision.n_deepstack = 3;
    snprintf(c->vision.hidden_act, sizeof c->vision.hidden_act, "gelu_pytorch_tanh");
    c->text.rope_theta = 5000000.0;
    c->text.rms_norm_eps = 1e-6;
    c->text.mrope_interleaved = 1;
    c->text.max_position_embeddings = 262144;
    snprintf(c->text.hidden_act, sizeof c->text.hidden_act, "silu");
    c->text.padding_idx = -1;
    c->image_token_id = 151655;
    c->video_token_id = 151656;
    c->vision_start_token_id = 151652;
    c->vision_end_token_id = 151653;
}

static inline void cfg_2b(tdm_model_config *c) {
    cfg_common(c);
    c->vision.depth = 24;
    c->vision.hidden_size = 1024;
    c->vision.num_heads = 16;
    c->vision.intermediate_size = 4096;
    c->vision.out_hidden_size = 2048;
    c->vision.deepstack_indexes[0] = 5;
    c->vision.deepstack_indexes[1] = 11;
    c->vision.deepstack_indexes[2] = 17;
    c->text.hidden_size = 2048;
    c->text.num_layers = 28;
    c->text.num_heads = 16;
    c->text.num_kv_heads = 8;
    c->text.head_dim = 128;
    c->text.intermediate_size = 6144;
    c->text.vocab_size = 151936;
    c->text.mrope_section[0] = 24;
    c->text.mrope_section[1] = 20;
    c->text.mrope_section[2] = 20;
    c->tie_word_embeddings = 1;
}

static inline void cfg_8b(tdm_model_config *c) {
    cfg_common(c);
    c->vision.depth = 27;
    c->vision.hidden_size = 1152;
    c->vision.num_heads = 16;
    c->vision.intermediate_size = 4304;
    c->vision.out_hidden_size = 4096;
    c->vision.deepstack_indexes[0] = 8;
    c->vision.deepstack_indexes[1] = 16;
    c->vision.deepstack_indexes[2] = 24;
    c->text.hidden_size = 4096;
    c->text.num_layers = 36;
    c->text.num_heads = 32;
    c->text.num_kv_heads = 8;
    c->text.head_dim = 128;
    c->text.intermediate_size = 12288;
    c->text.vocab_size = 151936;
    c->text.mrope_section[0] = 24;
    c->text.mrope_section[1] = 20;
    c->text.mrope_section[2] = 20;
    c->tie_word_embeddings = 0;
}

/* A small model of the same architecture: vision width dv (4 heads), text width ht
 * with 4 query and 2 kv heads of head_dim ht/4, MLPs 3x wide, `vocab` tokens, patch 4
 * (patch_dim 96), an 8x8 position table. Image pad/start/end ids are the last three
 * vocabulary entries. */
static inline void cfg_small(tdm_model_config *c, int dv, int ht, int vdepth, int layers, int vocab) {
    cfg_common(c);
    c->vision.depth = vdepth;
    c->vision.hidden_size = dv;
    c->vision.num_heads = 4;
    c->vision.intermediate_size = 3 * dv;
    c->vision.patch_size = 4;
    c->vision.num_position_embeddings = 64;
    c->vision.out_hidden_size = ht;
    c->vision.n_deepstack = vdepth >= 3 ? 3 : vdepth;
    for (int j = 0; j < c->vision.n_deepstack; j++) c->vision.deepstack_indexes[j] = j;
    c->text.hidden_size = ht;
    c->text.num_layers = layers;
    c->text.num_heads = 4;
    c->text.num_kv_heads = 2;
    c->text.head_dim = ht / 4;
    c->text.intermediate_size = 3 * ht;
    c->text.vocab_size = vocab;
    c->text.rope_theta = 10000.0;
    int half = ht / 8; /* head_dim / 2 */
    c->text.mrope_section[1] = half / 4;
    c->text.mrope_section[2] = half / 4;
    c->text.mrope_section[0] = half - 2 * (half / 4);
    c->image_token_id = vocab - 1;
    c->vision_start_token_id = vocab - 3;
    c->vision_end_token_id = vocab - 2;
    c->video_token_id = vocab - 4;
}

#endif
