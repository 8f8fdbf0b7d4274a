/* table.h - building parameter tables in dist tests. The dist tests link only the
 * modules below dist (model/params.c is not among them), so this mirrors
 * tdm_param_table_add's rules: no_decay for 1-D tensors and biases. */
#ifndef TDM_TEST_DIST_TABLE_H
#define TDM_TEST_DIST_TABLE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/params.h"

static inline int tbl_add(tdm_param_table *t, const char *name, int ndim, const int64_t *shape, int trainable, int unit) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->p = realloc(t->p, (size_t)t->cap * sizeof *t->p);
    }
    tdm_param *p = &t->p[t->n];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) p->shape[i] = shape[i], p->numel *= shape[i];
    p->trainable = trainable;
    size_t len = strlen(name);
    p->no_decay = ndim == 1 || (len >= 5 && strcmp(name + len - 5, ".bias") == 0);
    p->unit = unit;
    p->lr_mult = 1.0f;
    return t->n++;
}

static inline void tbl_free(tdm_param_table *t) {
    free(t->p);
    memset(t, 0, sizeof *t);
}

static inline int64_t tbl_numel(const tdm_param_table *t) {
    int64_t n = 0;
    for (int i = 0; i < t->n; i++) n += t->p[i].numel;
    return n;
}

static inline int64_t tbl_numel_trainable(const tdm_param_table *t) {
    int64_t n = 0;
    for (int i = 0; i < t->n; i++) n += t->p[i].trainable ? t->p[i].numel : 0;
    return n;
}

#endif
