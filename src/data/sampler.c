/* sampler.c - deterministic, dp-independent batch sampling (see sampler.h). */
#include "data/sampler.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/rng.h"

/* Random stream of the shuffle; the epoch is the counter's high part (see permute). */
#define SAMPLER_STREAM 0x73616d706c6572ull /* "sampler" */

int tdm_sampler_init(tdm_sampler *s, int64_t n_samples, const tdm_sampler_options *o, tdm_error *err) {
    memset(s, 0, sizeof *s);
    if (o->dp_size < 1 || o->dp_rank < 0 || o->dp_rank >= o->dp_size)
        return tdm_errorf(err, "data-parallel rank %d of %d is invalid", o->dp_rank, o->dp_size);
    if (o->micro_batch_size < 1 || o->global_batch_size < 1 ||
        o->global_batch_size % ((int64_t)o->micro_batch_size * o->dp_size) != 0)
        return tdm_errorf(err,
                          "global batch size %lld must be a positive multiple of micro batch size %d x data-parallel "
                          "size %d",
                          (long long)o->global_batch_size, o->micro_batch_size, o->dp_size);
    if (n_samples < o->global_batch_size)
        return tdm_errorf(err, "the dataset has %lld usable samples, fewer than one global batch of %lld",
                          (long long)n_samples, (long long)o->global_batch_size);
    s->o = *o;
    s->n_samples = n_samples;
    s->steps_per_epoch = n_samples / o->global_batch_size;
    s->micro_per_step = (int)(o->global_batch_size / ((int64_t)o->micro_batch_size * o->dp_size));
    s->order_epoch = -1;
    s->order = tdm_xmalloc(sizeof(int64_t) * (size_t)n_samples);
    return 0;
}

void tdm_sampler_free(tdm_sampler *s) {
    free(s->order);
    memset(s, 0, sizeof *s);
}

/* Fisher-Yates: for i = n-1..1 swap i with j uniform in [0, i], j from random draw
 * (epoch, i): a pure function of (seed, epoch). j = floor(u * (i+1) / 2^64), whose bias
 * is below (i+1)/2^64, far too small to matter. */
static void permute(tdm_sampler *s, int64_t epoch) {
    int64_t n = s->n_samples;
    for (int64_t i = 0; i < n; i++) s->order[i] = i;
    if (s->o.shuffle) {
        for (int64_t i = n - 1; i > 0; i--) {
            uint64_t u = tdm_rng_u64(s->o.seed, SAMPLER_STREAM + (uint64_t)epoch, (uint64_t)i);
            int64_t j = (int64_t)(((unsigned __int128)u * (uint64_t)(i + 1)) >> 64);
            int64_t t = s->order[i];
            s->order[i] = s->order[j];
            s->order[j] = t;
        }
    }
    s->order_epoch = epoch;
}

static const int64_t *batch_start(tdm_sampler *s, int64_t step) {
    int64_t epoch = step / s->steps_per_epoch;
    if (epoch != s->order_epoch) permute(s, epoch);
    return s->order + (step % s->steps_per_epoch) * s->o.global_batch_size;
}

void tdm_sampler_global_batch(tdm_sampler *s, int64_t step, int64_t *out) {
    memcpy(out, batch_start(s, step), sizeof(int64_t) * (size_t)s->o.global_batch_size);
}

void tdm_sampler_micro_batch(tdm_sampler *s, int64_t step, int micro, int64_t *out, int64_t *first) {
    int64_t slice = s->o.global_batch_size / s->o.dp_size;
    int64_t off = s->o.dp_rank * slice + (int64_t)micro * s->o.micro_batch_size;
    memcpy(out, batch_start(s, step) + off, sizeof(int64_t) * (size_t)s->o.micro_batch_size);
    if (first) *first = step * s->o.global_batch_size + off;
}

int tdm_sampler_step_at(const tdm_sampler *s, int64_t consumed_samples, int64_t *step, tdm_error *err) {
    if (consumed_samples < 0 || consumed_samples % s->o.global_batch_size != 0)
        return tdm_errorf(err, "consumed samples %lld is not a multiple of the global batch size %lld",
                          (long long)consumed_samples, (long long)s->o.global_batch_size);
    *step = consumed_samples / s->o.global_batch_size;
    return 0;
}
