/* generate.h - greedy decoding with a trained model, for `tandem generate` and `tandem evaluate`.
 *
 *   tdm_generator *g = tdm_generator_create(&opt, &err);      // config, tokenizer, weights
 *   char *answer;
 *   tdm_generator_answer(g, turns, n_turns, images, n_images, 16, &answer, &err);
 *
 * The prompt runs through the whole model once; each new token then runs through the
 * decoder alone, attending to the keys and values the earlier rows left in the model's
 * activations (a KV cache, tdm_model_decode). `no_kv_cache` re-runs the full forward over
 * the prompt and the tokens so far at every step instead (the reference). Decoding stops
 * at <|im_end|> or <|endoftext|> or after max_new_tokens; the answer excludes the stop
 * token. New text tokens get positions (p, p, p) continuing from the prompt's next free
 * position, as Qwen3-VL's get_rope_index does for generated tokens. The vision placeholders
 * <|image_pad|> and <|video_pad|> are never chosen: fed back into the next forward, one would
 * stand for a row of an image that does not exist (an untrained model does pick them).
 */
#ifndef TDM_GENERATE_H
#define TDM_GENERATE_H

#include "core/error.h"
#include "data/dataset.h"

typedef struct tdm_generator_options {
    const char *model;        /* directory or file with config.json */
    const char *tokenizer;    /* tokenizer.json */
    const char *load;         /* a checkpoint (save dir or iter_XXXXXXX), or NULL */
    const char *hf_weights;   /* a safetensors file / HF directory, or NULL (one of load/hf_weights) */
    const char *preprocessor; /* NULL: next to the model config, else the defaults */
    int no_kv_cache;          /* 1: every step re-runs the whole forward (slow; for checking the cache) */
    int64_t image_max_pixels, image_min_pixels; /* LLaMA-Factory's bounds, as in training (0: none) */
} tdm_generator_options;

typedef struct tdm_generator tdm_generator;

tdm_generator *tdm_generator_create(const tdm_generator_options *o, tdm_error *err);
void tdm_generator_free(tdm_generator *g);

/* Greedy answer to the conversation `turns` (system/user turns; "<image>" tags match
 * `images` in order). *out is malloc'ed UTF-8 (free it). */
int tdm_generator_answer(tdm_generator *g, const tdm_turn *turns, int n_turns, const char *const *images,
                         int n_images, int max_new_tokens, char **out, tdm_error *err);

/* Greedy choice: the index of the largest logit, the lowest index on ties, skipping NaN and the
 * `banned` ids; -1 when nothing is left. */
int tdm_generate_pick(const float *logits, int vocab, const int32_t *banned, int n_banned);

#endif
