/* feed.h - the trainer's view of the data pipeline: one object that opens the tokenizer,
 * the image preprocessor config and the datasets named by the flags, and hands out this
 * rank's micro-batches in sampler order from a background loader (src/data).
 *
 *   tdm_feed *f = tdm_feed_create(&opt, &err);     // loads and scans the data (no MPI)
 *   tdm_feed_limits(f, &limits);                   // reserve activations with these
 *   tdm_feed_start(f, consumed_samples, &err);     // starts the loader at that position
 *   tdm_feed_next(f, &batch, &wait_ns, &err);      // valid until the next call
 *
 * The preprocessor config is --preprocessor, else preprocessor_config.json next to the
 * model's config.json, else Qwen3-VL's defaults.
 */
#ifndef TDM_FEED_H
#define TDM_FEED_H

#include <stdint.h>

#include "core/error.h"
#include "data/batch.h"
#include "model/config.h"
#include "model/qwen3vl.h"
#include "tokenizer/tokenizer.h"
#include "train/args.h"

typedef struct tdm_feed_options {
    const tdm_train_args *args;
    int dp_rank, dp_size;
    const tdm_model_config *config; /* to check the tokenizer against the vocabulary */
    const char *flag;               /* the flag that named args->data, for messages (NULL: "--data") */
    const struct tdm_feed *like;    /* another feed whose tokenizer and preprocessor to share (loaded and
                                       checked once; it must outlive this one), or NULL to load them */
} tdm_feed_options;

typedef struct tdm_feed tdm_feed;

tdm_feed *tdm_feed_create(const tdm_feed_options *o, tdm_error *err);

/* The tokenizer fits the model: no more ids than its vocabulary, and <|image_pad|> is its
 * image_token_id (otherwise the first batch with a picture would fail far from the cause). */
int tdm_feed_check_tokenizer(const tdm_tokenizer *tok, const char *tok_path, const tdm_model_config *cfg,
                             tdm_error *err);
void tdm_feed_free(tdm_feed *f);
/* The tokenizer the feed encodes with. */
const tdm_tokenizer *tdm_feed_tokenizer(const tdm_feed *f);

/* The largest micro-batch the loader can hand out. */
void tdm_feed_limits(const tdm_feed *f, tdm_model_limits *out);

/* Starts the background loader at global batch consumed_samples / global_batch_size. */
int tdm_feed_start(tdm_feed *f, int64_t consumed_samples, tdm_error *err);

/* The next micro-batch of this rank (the previous one is released). *wait_ns = time
 * blocked waiting for it. */
int tdm_feed_next(tdm_feed *f, const tdm_batch **b, uint64_t *wait_ns, tdm_error *err);

/* Usable samples, and a one-line summary of the data for the start-up log. */
int64_t tdm_feed_n_samples(const tdm_feed *f);
const char *tdm_feed_summary(const tdm_feed *f);

/* Resolves the preprocessor config the way the trainer does (also for generate/evaluate). */
struct tdm_preproc_config;
/* The preprocessor_config.json that tdm_feed_load_preprocessor reads (written into buf[cap]),
 * or NULL when it takes Qwen3-VL's defaults. */
const char *tdm_feed_preprocessor_path(const char *flag_path, const char *model_path, char *buf, size_t cap);
int tdm_feed_load_preprocessor(const char *flag_path, const char *model_path, struct tdm_preproc_config *pp,
                               tdm_error *err);
/* The preprocessor cuts patches the way the model's vision tower expects them: the same
 * patch_size, temporal_patch_size and merge_size (= spatial_merge_size) as cfg, and cfg's 3
 * input channels (images are read as RGB). Otherwise the first image would fail far from the
 * cause ("batch: patch_dim ...") or not at all. pp_path names the file, NULL for the built-in
 * defaults. */
int tdm_feed_check_preprocessor(const struct tdm_preproc_config *pp, const char *pp_path, const tdm_model_config *cfg,
                                tdm_error *err);

#endif
