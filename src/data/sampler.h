/* sampler.h - which samples go into which micro-batch, on which data-parallel rank.
 *
 * Megatron's pretraining sampler semantics, made independent of dp:
 *   - epoch e's order is a permutation of the n samples (Fisher-Yates driven by the
 *     counter-based generator: a pure function of (seed, e)), or the identity without shuffle;
 *   - the run is a sequence of global batches of G samples: global batch k (k counts across
 *     epochs) = positions [j*G, (j+1)*G) of its epoch's order, j = k mod steps_per_epoch,
 *     steps_per_epoch = floor(n / G) (the last partial batch of an epoch is dropped);
 *   - rank r of dp takes the contiguous slice [r*G/dp, (r+1)*G/dp) of it and cuts that into
 *     G/(dp*mbs) micro-batches of mbs samples.
 * So the samples of a step are the same whatever dp is, and resuming at consumed_samples
 * c (a multiple of G) continues with global batch c/G: nothing depends on history.
 */
#ifndef TDM_SAMPLER_H
#define TDM_SAMPLER_H

#include <stdint.h>

#include "core/error.h"

typedef struct tdm_sampler_options {
    uint64_t seed;
    int shuffle;               /* 0: every epoch in dataset order */
    int64_t global_batch_size; /* G, samples per optimizer step over all ranks */
    int micro_batch_size;      /* mbs, samples per forward/backward on one rank */
    int dp_rank, dp_size;
} tdm_sampler_options;

typedef struct tdm_sampler {
    tdm_sampler_options o;
    int64_t n_samples;
    int64_t steps_per_epoch;
    int micro_per_step;  /* G / (dp * mbs) micro-batches per step on each rank */
    int64_t order_epoch; /* the epoch `order` holds, -1 none */
    int64_t *order;      /* [n_samples] */
} tdm_sampler;

/* Checks G % (dp*mbs) == 0, 0 <= rank < dp, n_samples >= G. */
int tdm_sampler_init(tdm_sampler *s, int64_t n_samples, const tdm_sampler_options *o, tdm_error *err);
void tdm_sampler_free(tdm_sampler *s);

/* The G sample indices of global batch `step` (all ranks), in rank-slice order. */
void tdm_sampler_global_batch(tdm_sampler *s, int64_t step, int64_t *out);

/* This rank's micro-batch `micro` (0 <= micro < micro_per_step) of global batch `step`:
 * mbs sample indices into out. *first (if non-NULL) = step*G + the slice offset, the
 * position of its first sample in the run's sample stream. */
void tdm_sampler_micro_batch(tdm_sampler *s, int64_t step, int micro, int64_t *out, int64_t *first);

/* The global batch a run that has consumed `consumed_samples` continues with; error when
 * it is not a multiple of G. */
int tdm_sampler_step_at(const tdm_sampler *s, int64_t consumed_samples, int64_t *step, tdm_error *err);

#endif
