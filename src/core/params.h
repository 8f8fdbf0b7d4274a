/* params.h - the parameter table and the hooks through which a model talks to the
 * data-parallel layer, without knowing anything about MPI.
 *
 * A model registers its tensors in forward order (vision, mergers, embedding, decoder
 * layers, final norm, lm_head) with their Hugging Face names. It does not allocate
 * trainable storage itself: whoever owns the flat buffers (the data-parallel layer,
 * or tdm_param_table_alloc for single-process tools and tests) points `data` and
 * `grad` into them. Frozen tensors get `data` storage only, and `grad == NULL`.
 *
 * Hooks, the way PyTorch hooks serve DDP:
 *   param_needed(i)  forward is about to read parameter i (the parameter all-gather
 *                    must have landed); called once per parameter per forward, in
 *                    forward order, before the layer that reads it runs.
 *   grad_ready(i)    backward has finished writing parameter i's gradient for this
 *                    micro-batch; called exactly once per trainable parameter per
 *                    backward, right after the last kernel that accumulates into it.
 *   progress()       called between layers in forward and backward, so an inline
 *                    progress mode can poll MPI from the compute thread.
 *   layer_begin/end  named phases for the profiler (may be NULL).
 * Every hook may be NULL.
 */
#ifndef TDM_PARAMS_H
#define TDM_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define TDM_PARAM_NAME_MAX 96
#define TDM_PARAM_MAX_DIMS 5

typedef struct tdm_param {
    char name[TDM_PARAM_NAME_MAX]; /* Hugging Face tensor name */
    int ndim;
    int64_t shape[TDM_PARAM_MAX_DIMS];
    int64_t numel;
    int trainable;  /* 0 when frozen by a freeze flag */
    int no_decay;   /* 1 for biases and 1-D tensors (norm weights): Megatron applies no weight decay */
    float lr_mult;  /* its learning rate is the schedule's times this (1; --vision-lr-mult) */
    int unit;       /* index of the layer (forward order) that reads it, for the profiler and prefetch */
    float *data;    /* [numel]; NULL when the values are stored as bits (and then read with tdm_param_values) */
    uint16_t *bits; /* [numel] bfloat16 storage instead of data (the trainer's --bf16), or NULL */
    float *grad;    /* [numel] fp32 main grad, NULL when frozen */
} tdm_param;

typedef struct tdm_param_table {
    tdm_param *p;
    int n;
    int cap;
} tdm_param_table;

typedef struct tdm_param_hooks {
    void *ctx;
    void (*param_needed)(void *ctx, int param_index);
    void (*grad_ready)(void *ctx, int param_index);
    void (*progress)(void *ctx);
    void (*layer_begin)(void *ctx, const char *name, int is_backward);
    void (*layer_end)(void *ctx, const char *name, int is_backward);
} tdm_param_hooks;

/* Appends a tensor; returns its index. shape has ndim entries. */
int tdm_param_table_add(tdm_param_table *t, const char *name, int ndim, const int64_t *shape, int trainable, int unit);
void tdm_param_table_free(tdm_param_table *t);
int tdm_param_table_find(const tdm_param_table *t, const char *name);
int64_t tdm_param_table_numel(const tdm_param_table *t, int trainable_only);
/* The largest numel of a tensor of the table (the size of a scratch for tdm_param_values). */
int64_t tdm_param_table_max_numel(const tdm_param_table *t);
/* The fp32 values of p: p->data, or its bfloat16 bits widened (exactly) into scratch[numel]. */
const float *tdm_param_values(const tdm_param *p, float *scratch);
/* Feeds p's fp32 values (widened in small pieces when stored as bits) into an XXH3-64 state:
 * the same hash for the same values whatever the storage. */
struct XXH3_state_s;
void tdm_param_hash_update(const tdm_param *p, struct XXH3_state_s *state);
/* XXH3-64 of p's fp32 values; 0 when p has no storage. */
uint64_t tdm_param_hash(const tdm_param *p);

/* Simple owner for tools and tests that run without the data-parallel layer: one
 * allocation for all data, one for the gradients of trainable tensors, laid out in
 * registration order without padding. Returns the two blocks through *data_out and
 * *grad_out (free with tdm_free_big). */
int tdm_param_table_alloc(tdm_param_table *t, float **data_out, float **grad_out, tdm_error *err);

#endif
