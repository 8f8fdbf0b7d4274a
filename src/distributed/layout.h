/* layout.h - where every trainable parameter lives in the flat buffers, and the buckets.
 * Pure bookkeeping: no MPI, no allocation of the buffers themselves (unit-tested alone).
 *
 * The parameter buffer and the fp32 gradient buffer share this layout:
 *
 *   buffer  | bucket 0                          | bucket 1                 | ...
 *           | lm_head | pad | norm | pad | ...  | layers.27.mlp... | pad   |
 *           |<-------- padded (B0) ------------>|
 *   shards  | rank 0: [0, B0/dp) | rank 1: [B0/dp, 2 B0/dp) | ...          (distributed optimizer)
 *
 * - Trainable parameters in REVERSE registration order (registration = forward order),
 *   so bucket 0 holds the output side, whose gradients are ready first in backward.
 * - With the distributed optimizer every parameter starts at a multiple of 64 elements
 *   and every bucket spans a multiple of lcm(dp, 128) elements, so it splits into dp
 *   equal shards; without it nothing is padded.
 * - A bucket closes after the parameter that brings it (intra-bucket padding included)
 *   to >= bucket_size elements; parameters never straddle buckets.
 * - Frozen parameters are not in the buffers at all (offset -1, bucket -1).
 * Units: every offset and size here is in elements (fp32), never bytes.
 */
#ifndef TDM_DIST_LAYOUT_H
#define TDM_DIST_LAYOUT_H

#include <stdint.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "distributed/config.h"
#include "core/params.h"

typedef struct tdm_ddp_bucket {
    int64_t offset; /* first element of the bucket in the flat buffers */
    int64_t numel;  /* sum of its parameters' numel (Megatron's "X elements") */
    int64_t padded; /* elements it spans in the buffers (Megatron's "Y padded size") */
    int64_t shard;  /* padded / dp: elements each rank owns (the whole bucket when not distributed) */
    int first;      /* its parameters are order[first .. first + count) */
    int count;
} tdm_ddp_bucket;

typedef struct tdm_ddp_layout {
    int dp;
    int distributed;     /* use_distributed_optimizer */
    int64_t bucket_size; /* the size the buckets were cut with */
    int n_params;        /* size of the parameter table */
    int64_t *offset;     /* [n_params] first element in the buffers; -1 when frozen */
    int *bucket_of;      /* [n_params] bucket index; -1 when frozen */
    int *order;          /* [n_trainable] table indices in layout (reverse registration) order */
    int n_trainable;
    tdm_ddp_bucket *buckets; /* [n_buckets] */
    int n_buckets;
    int64_t total; /* buffer length in elements (sum of the buckets' padded sizes) */
} tdm_ddp_layout;

/* Builds the layout of table `t` for `dp` ranks. Fails (message naming the reason) when
 * there is no trainable parameter, dp < 1, or a bucket (or, distributed, a shard) would
 * exceed INT_MAX elements (MPI counts are int). Free with tdm_ddp_layout_free. */
int tdm_ddp_layout_build(tdm_ddp_layout *l, const tdm_param_table *t, int dp, const tdm_ddp_config *cfg,
                         tdm_error *err);
void tdm_ddp_layout_free(tdm_ddp_layout *l);

/* The elements rank `rank` owns in bucket b: absolute buffer range [*begin, *end).
 * Distributed: [offset + rank*shard, offset + (rank+1)*shard); otherwise the whole bucket. */
void tdm_ddp_layout_shard(const tdm_ddp_layout *l, int b, int rank, int64_t *begin, int64_t *end);

/* Appends Megatron's bucket table, one line each, newline-terminated:
 *   Number of buckets for gradient all-reduce / reduce-scatter: N
 *   Params for bucket 1 (X elements, Y padded size):
 *   \t<name>                      (one per parameter, layout order)
 * Buckets are numbered from 1 in the text, as Megatron prints them. */
void tdm_ddp_layout_describe(const tdm_ddp_layout *l, const tdm_param_table *t, tdm_strbuf *out);

#endif
