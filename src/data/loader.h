/* loader.h - a background thread that builds the next micro-batches while the trainer
 * computes on the current one.
 *
 *   tdm_loader_options lo = {.sampler = {...}, .start_consumed = 0, .ring = 3};
 *   tdm_loader *l = tdm_loader_create(data, &lo, &err);
 *   for (step ...) for (m = 0; m < tdm_loader_micro_per_step(l); m++) {
 *       const tdm_batch *b; uint64_t waited_ns;
 *       if (tdm_loader_next(l, &b, &waited_ns, &err) != 0) ... a data error, err names the sample ...
 *       ... forward/backward on b (valid until the next tdm_loader_next) ...
 *   }
 *   tdm_loader_free(l);
 *
 * The thread produces this rank's micro-batches in sampler order (sampler.h) starting at
 * global batch start_consumed / G, into a ring of `ring` batch buffers reserved once at
 * the dataset's largest micro-batch (tdm_data_batch_limits). Item k of the stream is a pure
 * function of (dataset, sampler options, start, k): thread timing only changes how long
 * next() waits, never what it returns. A batch being consumed is never overwritten: the
 * slot is released when next() is called again. An error in the thread is delivered by
 * the next() that reaches the failing item, and the thread stops producing.
 */
#ifndef TDM_LOADER_H
#define TDM_LOADER_H

#include <stdint.h>

#include "core/error.h"
#include "data/batch.h"
#include "data/pipeline.h"
#include "data/sampler.h"

typedef struct tdm_loader_options {
    tdm_sampler_options sampler;
    int64_t start_consumed; /* samples consumed before (resume); a multiple of G */
    int ring;               /* batch buffers; 0 means 3 (one in use, two being prepared) */
} tdm_loader_options;

typedef struct tdm_loader tdm_loader;

/* Validates the options, reserves the ring and starts the thread. `d` must outlive it. */
tdm_loader *tdm_loader_create(const tdm_data *d, const tdm_loader_options *o, tdm_error *err);

/* Hands out the next micro-batch (releasing the previous one). *wait_ns = time blocked
 * waiting for it (0 when it was ready). Returns 0, or -1 with the loader thread's error. */
int tdm_loader_next(tdm_loader *l, const tdm_batch **batch, uint64_t *wait_ns, tdm_error *err);

int tdm_loader_micro_per_step(const tdm_loader *l);
int64_t tdm_loader_steps_per_epoch(const tdm_loader *l);
/* The buffers' capacity (largest micro-batch): reserve model activations with these. */
const tdm_batch_limits *tdm_loader_limits(const tdm_loader *l);

/* Stops the thread (without waiting for the ring to drain) and frees everything. */
void tdm_loader_free(tdm_loader *l);

#endif
