#include "core/params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/alloc.h"

int tdm_param_table_add(tdm_param_table *t, const char *name, int ndim, const int64_t *shape, int trainable, int unit) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 256;
        t->p = tdm_xrealloc(t->p, (size_t)t->cap * sizeof *t->p);
    }
    tdm_param *p = &t->p[t->n];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel *= shape[i];
    }
    p->trainable = trainable;
    size_t len = strlen(name);
    p->no_decay = ndim == 1 || (len >= 5 && strcmp(name + len - 5, ".bias") == 0);
    p->unit = unit;
    p->lr_mult = 1.0f;
    return t->n++;
}

void tdm_param_table_free(tdm_param_table *t) {
    free(t->p);
    t->p = NULL;
    t->n = t->cap = 0;
}

int tdm_param_table_find(const tdm_param_table *t, const char *name) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->p[i].name, name) == 0) return i;
    return -1;
}

int64_t tdm_param_table_numel(const tdm_param_table *t, int trainable_only) {
    int64_t s = 0;
    for (int i = 0; i < t->n; i++)
        if (!trainable_only || t->p[i].trainable) s += t->p[i].numel;
    return s;
}

int tdm_param_table_alloc(tdm_param_table *t, float **data_out, float **grad_out, tdm_error *err) {
    int64_t nd = tdm_param_table_numel(t, 0), ng = tdm_param_table_numel(t, 1);
    float *data = tdm_alloc_big((size_t)nd * sizeof(float), err);
    if (!data) return -1;
    float *grad = tdm_alloc_big((size_t)(ng ? ng : 1) * sizeof(float), err);
    if (!grad) {
        tdm_free_big(data);
        return -1;
    }
    int64_t od = 0, og = 0;
    for (int i = 0; i < t->n; i++) {
        t->p[i].data = data + od;
        od += t->p[i].numel;
        if (t->p[i].trainable) {
            t->p[i].grad = grad + og;
            og += t->p[i].numel;
        } else {
            t->p[i].grad = NULL;
        }
    }
    *data_out = data;
    *grad_out = grad;
    return 0;
}

int64_t tdm_param_table_max_numel(const tdm_param_table *t) {
    int64_t m = 0;
    for (int i = 0; i < t->n; i++)
        if (t->p[i].numel > m) m = t->p[i].numel;
    return m;
}

const float *tdm_param_values(const tdm_param *p, float *scratch) {
    if (!p->bits) return p->data;
    uint32_t *u = (uint32_t *)scratch; /* bfloat16 is the high half of a float32: widening is exact */
    for (int64_t k = 0; k < p->numel; k++) u[k] = (uint32_t)p->bits[k] << 16;
    return scratch;
}

void tdm_param_hash_update(const tdm_param *p, struct XXH3_state_s *state) {
    if (!p->bits) {
        if (p->data) XXH3_64bits_update(state, p->data, sizeof(float) * (size_t)p->numel);
        return;
    }
    uint32_t piece[4096];
    for (int64_t k = 0; k < p->numel; k += 4096) {
        int64_t n = p->numel - k < 4096 ? p->numel - k : 4096;
        for (int64_t j = 0; j < n; j++) piece[j] = (uint32_t)p->bits[k + j] << 16;
        XXH3_64bits_update(state, piece, sizeof(float) * (size_t)n);
    }
}

uint64_t tdm_param_hash(const tdm_param *p) {
    if (!p->data && !p->bits) return 0;
    XXH3_state_t *s = XXH3_createState();
    XXH3_64bits_reset(s);
    tdm_param_hash_update(p, s);
    uint64_t h = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return h;
}
