/* loader.c - background micro-batch production into a ring (see loader.h).
 *
 * Item k of the stream goes to slot k % ring. Two counters under one mutex carry all the
 * synchronisation: `produced` (items 0..produced-1 are ready) and `released` (items the
 * consumer gave back). The producer may fill item k once k - released < ring; the
 * consumer may take item k once k < produced.
 */
#include "data/loader.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "prof/prof.h"

typedef struct slot {
    tdm_batch batch;
    int failed;
    tdm_error err;
} slot;

struct tdm_loader {
    const tdm_data *data;
    tdm_sampler sampler;
    int64_t start_step;
    int ring;
    slot *slots;
    int64_t *idx; /* [mbs], producer's scratch */
    tdm_batch_limits limits;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t ready, space;
    int64_t produced, released, next_item;
    int holding, stop;
};

static void *producer(void *arg) {
    tdm_loader *l = arg;
    const int mps = l->sampler.micro_per_step;
    tdm_prof_thread_name("loader");
    for (int64_t k = 0;; k++) {
        pthread_mutex_lock(&l->mu);
        while (!l->stop && k - l->released >= l->ring) pthread_cond_wait(&l->space, &l->mu);
        int stop = l->stop;
        pthread_mutex_unlock(&l->mu);
        if (stop) break;

        slot *s = &l->slots[k % l->ring];
        int64_t step = l->start_step + k / mps, first;
        int micro = (int)(k % mps);
        tdm_sampler_micro_batch(&l->sampler, step, micro, l->idx, &first);
        tdm_prof_begin(TDM_PROF_DATA, 0, "build micro-batch", step);
        s->failed = tdm_data_build_batch(l->data, l->idx, l->sampler.o.micro_batch_size, &s->batch, &s->err) != 0;
        tdm_prof_end(TDM_PROF_DATA, 0);
        s->batch.step = step;
        s->batch.micro = micro;
        s->batch.first_sample = first;

        pthread_mutex_lock(&l->mu);
        l->produced = k + 1;
        pthread_cond_signal(&l->ready);
        pthread_mutex_unlock(&l->mu);
        if (s->failed) break; /* the consumer gets the error when it reaches this item */
    }
    return NULL;
}

/* Frees everything create allocated; the thread is not running (never started, or joined). */
static void destroy(tdm_loader *l) {
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->ready);
    pthread_cond_destroy(&l->space);
    for (int i = 0; i < l->ring; i++) tdm_batch_free(&l->slots[i].batch);
    free(l->slots);
    free(l->idx);
    tdm_sampler_free(&l->sampler);
    free(l);
}

tdm_loader *tdm_loader_create(const tdm_data *d, const tdm_loader_options *o, tdm_error *err) {
    tdm_loader *l = tdm_xcalloc(1, sizeof *l);
    l->data = d;
    l->ring = o->ring > 0 ? o->ring : 3;
    if (tdm_sampler_init(&l->sampler, tdm_data_n_samples(d), &o->sampler, err) != 0 ||
        tdm_sampler_step_at(&l->sampler, o->start_consumed, &l->start_step, err) != 0) {
        tdm_sampler_free(&l->sampler);
        free(l);
        return NULL;
    }
    tdm_data_batch_limits(d, o->sampler.micro_batch_size, &l->limits);
    l->slots = tdm_xcalloc((size_t)l->ring, sizeof(slot));
    for (int i = 0; i < l->ring; i++) {
        tdm_batch_init(&l->slots[i].batch);
        tdm_batch_reserve(&l->slots[i].batch, l->limits.tokens, l->limits.samples, l->limits.images, l->limits.patches,
                          tdm_data_patch_dim(d));
    }
    l->idx = tdm_xmalloc(sizeof(int64_t) * (size_t)o->sampler.micro_batch_size);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->ready, NULL);
    pthread_cond_init(&l->space, NULL);
    if (pthread_create(&l->thread, NULL, producer, l) != 0) {
        tdm_errorf(err, "cannot start the data loader thread");
        destroy(l);
        return NULL;
    }
    return l;
}

int tdm_loader_next(tdm_loader *l, const tdm_batch **batch, uint64_t *wait_ns, tdm_error *err) {
    pthread_mutex_lock(&l->mu);
    if (l->holding) {
        l->released++;
        l->holding = 0;
        pthread_cond_signal(&l->space);
    }
    uint64_t t0 = tdm_now_ns(), waited = 0;
    if (l->produced <= l->next_item) {
        while (l->produced <= l->next_item) pthread_cond_wait(&l->ready, &l->mu);
        waited = tdm_now_ns() - t0;
    }
    slot *s = &l->slots[l->next_item % l->ring];
    if (wait_ns) *wait_ns = waited;
    if (s->failed) {
        /* stays failed: every later call reports the same error */
        pthread_mutex_unlock(&l->mu);
        tdm_errorf(err, "%s", s->err.msg);
        *batch = NULL;
        return -1;
    }
    l->holding = 1;
    l->next_item++;
    pthread_mutex_unlock(&l->mu);
    *batch = &s->batch;
    return 0;
}

int tdm_loader_micro_per_step(const tdm_loader *l) { return l->sampler.micro_per_step; }
int64_t tdm_loader_steps_per_epoch(const tdm_loader *l) { return l->sampler.steps_per_epoch; }
const tdm_batch_limits *tdm_loader_limits(const tdm_loader *l) { return &l->limits; }

void tdm_loader_free(tdm_loader *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->space);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    destroy(l);
}
