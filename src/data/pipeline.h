/* pipeline.h - a dataset made ready for training: validated, tokenized, image sizes known,
 * and micro-batches built from it by sample index.
 *
 *   tdm_data *d = tdm_data_open(&opt, tok, &pp, &err);     // loads, scans, tokenizes
 *   tdm_batch b; tdm_batch_init(&b);
 *   int64_t idx[] = {4, 17};
 *   tdm_data_build_batch(d, idx, 2, &b, &err);              // decode, resize, pack
 *
 * Opening scans every sample once: image headers give each image's grid (no pixels are
 * decoded), the chat template gives its tokens, so tokens and patches per sample are known
 * before training starts (tdm_data_batch_limits). Token ids are cached; building a batch
 * only decodes and resizes images and copies.
 *
 * Sequence-length policy: a sample whose tokens (images expanded) exceed seq_length is
 * DROPPED at open and counted in stats.n_dropped_long (the caller logs it). Samples are
 * never cut, so an image's tokens are never split from its pixels.
 *
 * Sample indices passed to build_batch are in [0, tdm_data_n_samples): the usable samples,
 * in file order, after bad and long ones were removed.
 * After open, a tdm_data is read-only: build_batch may run on several threads at once
 * (each with its own batch).
 */
#ifndef TDM_PIPELINE_H
#define TDM_PIPELINE_H

#include <stdint.h>

#include "core/error.h"
#include "data/batch.h"
#include "data/dataset.h"
#include "data/preprocess.h"
#include "tokenizer/tokenizer.h"

typedef struct tdm_data_options {
    const char *const *files; /* dataset files, read in order */
    int n_files;
    const char *image_root;   /* NULL: each file's folder */
    int skip_bad_samples;     /* skip and count bad samples (rules, unreadable image headers) */
    int seq_length;           /* max tokens per sample after image expansion; 0 = no cap */
    int64_t max_image_pixels; /* 0: TDM_IMAGE_MAX_PIXELS */
} tdm_data_options;

typedef struct tdm_data_stats {
    int64_t n_skipped_bad;  /* skipped under skip_bad_samples */
    int64_t n_dropped_long; /* longer than seq_length, dropped */
    int64_t n_samples;      /* usable */
    int64_t n_images;       /* over usable samples */
    int64_t total_tokens;   /* over usable samples, images expanded */
    int64_t total_target_tokens;
    int max_tokens, max_patches, max_images; /* per sample */
    char first_problem[1024];                /* why the first sample was skipped or dropped ("" if none) */
} tdm_data_stats;

/* Largest micro-batch of k samples any sampler order can produce (sum of the k largest
 * per-sample counts): reserve activations and batch buffers once with these. */
typedef struct tdm_batch_limits {
    int tokens, patches, images, samples;
} tdm_batch_limits;

typedef struct tdm_data tdm_data;

tdm_data *tdm_data_open(const tdm_data_options *o, const tdm_tokenizer *tok, const tdm_preproc_config *pp,
                        tdm_error *err);
void tdm_data_free(tdm_data *d);

int64_t tdm_data_n_samples(const tdm_data *d);
const tdm_data_stats *tdm_data_get_stats(const tdm_data *d);
const tdm_dataset *tdm_data_dataset(const tdm_data *d);
/* Dataset index (into tdm_data_dataset()->samples) of usable sample i. */
int64_t tdm_data_source_index(const tdm_data *d, int64_t i);
int tdm_data_patch_dim(const tdm_data *d);
int tdm_data_sample_tokens(const tdm_data *d, int64_t i);
int tdm_data_sample_patches(const tdm_data *d, int64_t i);

void tdm_data_batch_limits(const tdm_data *d, int k, tdm_batch_limits *out);

/* Packs usable samples idx[0..n) into b (growing its buffers when needed): token stream
 * with cu_seqlens, labels and shifted targets, 3D positions, grids, pixels, fingerprint.
 * b->step = -1, b->first_sample = -1; the loader sets them. Errors name the sample (an
 * image that cannot be decoded, or whose size changed since open). */
int tdm_data_build_batch(const tdm_data *d, const int64_t *idx, int n, tdm_batch *b, tdm_error *err);

/* A generation prompt (tandem generate / evaluate) as a one-sequence batch: the turns
 * (typically [system,] user; "<image>" tags in the text, one per path in `images`) followed
 * by "<|im_start|>assistant\n". Images are decoded and preprocessed; labels and targets are
 * all -100. *next_pos (if non-NULL) = max position + 1, from which decoding continues
 * (rope_delta = *next_pos - n_tokens). The model's reference answer is not included. */
int tdm_data_build_prompt(const tdm_tokenizer *tok, const tdm_preproc_config *pp, const tdm_turn *turns, int n_turns,
                          const char *const *images, int n_images, tdm_batch *b, int64_t *next_pos, tdm_error *err);

/* XXH3-64 of what the model consumes: ids, labels, positions, grids, pixels. */
uint64_t tdm_batch_fingerprint(const tdm_batch *b);

#endif
