/* layout.c - reverse-order bucketing of the trainable parameters (see layout.h). */
#include "distributed/layout.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

int tdm_ddp_layout_build(tdm_ddp_layout *l, const tdm_param_table *t, int dp, const tdm_ddp_config *cfg,
                         tdm_error *err) {
    memset(l, 0, sizeof *l);
    if (dp < 1) return tdm_errorf(err, "data-parallel size %d: expected at least 1", dp);
    int n_trainable = 0;
    int64_t trainable_numel = 0;
    for (int i = 0; i < t->n; i++) {
        if (!t->p[i].trainable) continue;
        if (t->p[i].numel <= 0) return tdm_errorf(err, "parameter %s: expected at least one element", t->p[i].name);
        n_trainable++;
        trainable_numel += t->p[i].numel;
    }
    if (n_trainable == 0) return tdm_errorf(err, "parameter table: no trainable parameter (everything is frozen)");

    const int dist = cfg->use_distributed_optimizer;
    /* Megatron: parameters start 128-byte aligned (64 values at >= 16 bits) and buckets
     * end at a multiple of lcm(dp, 128) so every bucket splits into dp equal shards. */
    const int64_t param_align = dist ? 64 : 1;
    const int64_t bucket_align = dist ? (int64_t)dp / gcd64(dp, 128) * 128 : 1;

    l->dp = dp;
    l->distributed = dist;
    l->bucket_size = tdm_ddp_config_bucket_size(cfg, dp, trainable_numel);
    l->n_params = t->n;
    l->n_trainable = n_trainable;
    l->offset = tdm_xmalloc((size_t)t->n * sizeof *l->offset);
    l->bucket_of = tdm_xmalloc((size_t)t->n * sizeof *l->bucket_of);
    l->order = tdm_xmalloc((size_t)n_trainable * sizeof *l->order);
    l->buckets = tdm_xcalloc((size_t)n_trainable, sizeof *l->buckets); /* at most one bucket per parameter */
    for (int i = 0; i < t->n; i++) l->offset[i] = -1, l->bucket_of[i] = -1;

    int64_t pos = 0; /* next free element */
    int nb = 0, k = 0;
    tdm_ddp_bucket *cur = NULL;
    for (int i = t->n - 1; i >= 0; i--) {
        const tdm_param *p = &t->p[i];
        if (!p->trainable) continue;
        if (!cur) {
            cur = &l->buckets[nb];
            cur->offset = pos;
            cur->first = k;
        }
        pos = round_up(pos, param_align);
        l->offset[i] = pos;
        l->bucket_of[i] = nb;
        l->order[k++] = i;
        cur->count++;
        cur->numel += p->numel;
        pos += p->numel;
        if (pos - cur->offset >= l->bucket_size || k == n_trainable) {
            pos = cur->offset + round_up(pos - cur->offset, bucket_align);
            cur->padded = pos - cur->offset;
            cur->shard = cur->padded / (dist ? dp : 1);
            if (cur->padded > INT_MAX) {
                const long long padded = (long long)cur->padded; /* cur lives in l, freed next */
                tdm_ddp_layout_free(l);
                return tdm_errorf(err,
                                  "bucket %d: %lld elements exceed what one MPI collective can count (%d); "
                                  "use a smaller --ddp-bucket-size",
                                  nb + 1, padded, INT_MAX);
            }
            nb++;
            cur = NULL;
        }
    }
    l->n_buckets = nb;
    l->total = pos;
    return 0;
}

void tdm_ddp_layout_free(tdm_ddp_layout *l) {
    free(l->offset);
    free(l->bucket_of);
    free(l->order);
    free(l->buckets);
    memset(l, 0, sizeof *l);
}

void tdm_ddp_layout_shard(const tdm_ddp_layout *l, int b, int rank, int64_t *begin, int64_t *end) {
    const tdm_ddp_bucket *bk = &l->buckets[b];
    if (!l->distributed) {
        *begin = bk->offset;
        *end = bk->offset + bk->padded;
        return;
    }
    *begin = bk->offset + (int64_t)rank * bk->shard;
    *end = *begin + bk->shard;
}

void tdm_ddp_layout_describe(const tdm_ddp_layout *l, const tdm_param_table *t, tdm_strbuf *out) {
    tdm_sb_printf(out, "Number of buckets for gradient all-reduce / reduce-scatter: %d\n", l->n_buckets);
    for (int b = 0; b < l->n_buckets; b++) {
        const tdm_ddp_bucket *bk = &l->buckets[b];
        tdm_sb_printf(out, "Params for bucket %d (%lld elements, %lld padded size):\n", b + 1, (long long)bk->numel,
                      (long long)bk->padded);
        for (int k = bk->first; k < bk->first + bk->count; k++) tdm_sb_printf(out, "\t%s\n", t->p[l->order[k]].name);
    }
}
