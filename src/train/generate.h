/* generate.h - decoding with a trained model, for `tandem generate` and `tandem evaluate`.
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
 *
 * Decoding is greedy unless `sampling.do_sample` is set; then each token is drawn as Hugging
 * Face's generate() does with do_sample=True: the logits divided by the temperature, then
 * top-k, then top-p, then one draw from what is left (tdm_generate_sample). Draw k of an answer
 * uses the counter-based generator at (seed, stream "generate", k), so a seed reproduces the text.
 */
#ifndef TDM_GENERATE_H
#define TDM_GENERATE_H

#include "core/error.h"
#include "data/dataset.h"

/* `tandem generate --do-sample`'s defaults (Hugging Face's), also written into a checkpoint's
 * generation_config.json. */
#define TDM_GENERATE_DEFAULT_TEMPERATURE 1.0
#define TDM_GENERATE_DEFAULT_TOP_K       50
#define TDM_GENERATE_DEFAULT_TOP_P       1.0

/* Hugging Face's generation parameters. do_sample 0 (or temperature 0): greedy. */
typedef struct tdm_sampling {
    int do_sample;
    double temperature; /* > 0: logits / temperature; 0: greedy */
    int top_k;          /* keep the k largest logits (all tied with the k-th too); 0: no limit */
    double top_p;       /* keep the most likely tokens up to cumulative probability >= top_p; 1: all */
    uint64_t seed;
} tdm_sampling;

typedef struct tdm_generator_options {
    const char *model;        /* directory or file with config.json */
    const char *tokenizer;    /* tokenizer.json */
    const char *load;         /* a checkpoint (save dir or iter_XXXXXXX), or NULL */
    const char *hf_weights;   /* a safetensors file / HF directory, or NULL (one of load/hf_weights) */
    const char *preprocessor; /* NULL: next to the model config, else the defaults */
    int no_kv_cache;          /* 1: every step re-runs the whole forward (slow; for checking the cache) */
    int64_t image_max_pixels, image_min_pixels; /* LLaMA-Factory's bounds, as in training (0: none) */
    tdm_sampling sampling;                      /* all zero: greedy */
} tdm_generator_options;

typedef struct tdm_generator tdm_generator;

tdm_generator *tdm_generator_create(const tdm_generator_options *o, tdm_error *err);
void tdm_generator_free(tdm_generator *g);

/* The answer (greedy, or sampled as o->sampling says) to the conversation `turns` (system/user turns; "<image>" tags match
 * `images` in order). *out is malloc'ed UTF-8 (free it). */
int tdm_generator_answer(tdm_generator *g, const tdm_turn *turns, int n_turns, const char *const *images, int n_images,
                         int max_new_tokens, char **out, tdm_error *err);

/* Greedy choice: the index of the largest logit, the lowest index on ties, skipping NaN and the
 * `banned` ids; -1 when nothing is left. */
int tdm_generate_pick(const float *logits, int vocab, const int32_t *banned, int n_banned);

/* The log-likelihood of `continuation` after the prompt of `turns` (as lm-eval's loglikelihood):
 * *sum = sum over its tokens of log p(token | everything before), *n_tokens = their count. The
 * continuation is tokenized alone, as training labels an answer: pass the reference answer
 * followed by "<|im_end|>\n", and the tokens are the ones training's loss counts for it. */
int tdm_generator_loglik(tdm_generator *g, const tdm_turn *turns, int n_turns, const char *const *images, int n_images,
                         const char *continuation, double *sum, int *n_tokens, tdm_error *err);

/* Sampling: fills probs[vocab] with the distribution a token is drawn from (after temperature,
 * top-k and top-p; 0 for the tokens removed, NaN and `banned` ids always removed) and returns the
 * token drawn with uniform number tdm_rng_uniform(s->seed, stream "generate", draw). Greedy
 * (do_sample 0 or temperature 0): probs is one-hot at tdm_generate_pick. `order` is [vocab]
 * scratch. -1 when no token is left. */
int tdm_generate_sample(const float *logits, int vocab, const int32_t *banned, int n_banned, const tdm_sampling *s,
                        uint64_t draw, float *probs, int32_t *order);

#endif
