/* batch.h - one micro-batch as the model consumes it: several samples packed into one
 * token stream (no padding tokens) plus the patches of all their images.
 *
 * Produced by the data pipeline (src/data), consumed by the model (src/model). The
 * model reads it and never modifies it.
 *
 * Token stream: sample s occupies rows cu_seqlens[s] .. cu_seqlens[s+1]-1.
 * Images: image j has grid (t, h, w) = image_grid_thw[3j .. 3j+2] in patch units; its
 * t*h*w patch rows are consecutive in pixel_values, images in the order their
 * <|image_pad|> runs appear in the token stream; each image has t*h*w/merge^2
 * <|image_pad|> tokens.
 */
#ifndef TDM_BATCH_H
#define TDM_BATCH_H

#include <stdint.h>

typedef struct tdm_batch {
    int n_tokens;
    int n_seqs;
    int32_t *cu_seqlens;     /* [n_seqs + 1] */
    int32_t *input_ids;      /* [n_tokens] */
    int32_t *labels;         /* [n_tokens] unshifted, -100 where not trained (HF convention) */
    int32_t *targets;        /* [n_tokens] shifted inside each sample: targets[i] = labels[i+1],
                              -100 at the last token of every sample */
    int32_t *position_ids;   /* [3, n_tokens]: t row, then h row, then w row (get_rope_index) */
    int64_t n_target_tokens; /* number of targets != -100 */

    int n_images;
    int32_t *image_grid_thw; /* [n_images, 3] */
    int n_patches;           /* sum of t*h*w */
    int patch_dim;           /* in_channels * temporal_patch * patch^2 (1536 for patch 16) */
    float *pixel_values;     /* [n_patches, patch_dim], Qwen's patch order, values in [-1, 1] */

    int n_samples;        /* samples packed here (== n_seqs) */
    int64_t first_sample; /* position of its first sample in the run's sample stream:
                                step*G + this rank's and micro-batch's offset (-1: built by hand) */
    uint64_t fingerprint; /* XXH3 of ids, labels, positions, grids and pixels */
    int64_t step;         /* the global batch this micro-batch belongs to (-1: built by hand) */
    int micro;            /* its index among this rank's micro-batches of that step */

    /* capacities of the arrays above (the loader reuses buffers) */
    int cap_tokens, cap_seqs, cap_images, cap_patches;
} tdm_batch;

/* Buffers (src/data/batch.c). A zeroed struct is an empty batch. */
void tdm_batch_init(tdm_batch *b);
void tdm_batch_free(tdm_batch *b);
/* Grows the arrays to hold at least these counts (never shrinks); sets patch_dim. */
void tdm_batch_reserve(tdm_batch *b, int tokens, int seqs, int images, int patches, int patch_dim);

#endif
