/* ddp_internal.h - the tdm_ddp struct and the functions the data-parallel files call
 * across each other. Not a public header. One step goes through:
 *   grad_sync.c     grad_ready counting, bucket launch (reduce-scatter or all-reduce), finish
 *   optimizer.c     gradient norm, clipping, AdamW on the owned shards
 *   param_gather.c  parameter all-gathers: post, prefetch and wait (param_needed), flush
 * and ddp.c creates, configures and frees it and installs the hooks. */
#ifndef TDM_DIST_DDP_INTERNAL_H
#define TDM_DIST_DDP_INTERNAL_H

#include "distributed/comm.h"
#include "distributed/ddp.h"

struct tdm_ddp {
    tdm_ddp_config cfg;
    tdm_param_table *t;
    tdm_ddp_layout L;
    MPI_Comm ctl; /* private duplicate for blocking control collectives (compute thread) */
    int rank, size;
    tdm_comm *eng; /* owns the other private duplicate: bucket collectives */

    float *params; /* [L.total] flat parameter buffer, layout order */
    float *grads;  /* [L.total] flat fp32 gradient buffer */
    float *frozen; /* [frozen_numel] storage of frozen parameters */
    int64_t frozen_numel;
    float *m, *v;          /* [opt_numel] Adam state of the owned elements, bucket by bucket */
    float *main;           /* [opt_numel] bf16_params: the fp32 main copy of the owned elements (NULL in fp32,
                         where the parameter buffer is its own main copy) */
    uint16_t *bits;        /* [L.total] bf16_params with the distributed optimizer: the bfloat16 bits the
                         parameter all-gathers move; with bf16_storage (either optimizer) the parameters'
                         storage, and params is NULL */
    uint16_t *frozen_bits; /* [frozen_numel] bf16_storage: the frozen parameters' storage (frozen NULL) */
    int64_t opt_numel;
    int64_t *state_offset; /* [n_buckets] where bucket b's owned range starts in m/v */
    int64_t opt_step;      /* Adam step count */
    int64_t iteration;     /* 1-based, the iteration being computed */

    tdm_comm_op *grad_ops;   /* [n_buckets] all-reduce or reduce-scatter */
    tdm_comm_op *gather_ops; /* [n_buckets] all-gather (distributed optimizer) */

    /* gradient side, reset by zero_grad */
    int is_last_microbatch;
    unsigned char *ready;      /* [n_params] grad_ready seen in the last micro-batch */
    int *ready_count;          /* [n_buckets] */
    int next_launch;           /* buckets [0, next_launch) have been posted this step */
    int dup_param;             /* first parameter that reported grad_ready twice, or -1 */
    int nan_bucket, nan_param; /* first non-finite bucket/parameter found on this rank, or -1 */
    int grads_synced;          /* finish_grad_sync completed this step */

    /* parameter side (overlap_param_gather) */
    int gathers_pending;          /* some all-gather not yet waited */
    int gathers_dispatched;       /* in forward order: buckets n-1, n-2, ... */
    unsigned char *gather_waited; /* [n_buckets] */

    /* evidence, measurements, tests */
    uint64_t seq;
    tdm_ddp_bucket_trace *trace; /* [n_buckets] */
    tdm_timers timers;
    uint64_t grad_wait_ns, gather_wait_ns;
    int inject_rank, inject_param;
    int64_t inject_iteration;
    double *gather_scratch; /* [size * 64] for tdm_ddp_sum_across_ranks */
};

/* With --overlap-param-gather, how many all-gathers ahead of the bucket forward needs
 * are kept in flight. Megatron dispatches one; two keep the link busy while forward
 * runs layers that hold no trainable parameter (a frozen vision tower), and cut the
 * step at 0.5 Gbit/s (docs/benchmarks.md, "Communication-heavy steps"). */
#define TDM_DDP_GATHER_PREFETCH 2

/* ---- grad_sync.c ---- */

/* The grad_ready hook: counts parameter i ready in the last micro-batch and, with
 * overlap_grad_reduce, launches the buckets that became complete, in bucket order. */
void tdm_ddp__grad_ready(void *ctx, int i);

/* ---- param_gather.c ---- */

/* The param_needed hook: waits for the all-gather of parameter i's bucket and keeps the
 * next TDM_DDP_GATHER_PREFETCH ones in flight (overlap_param_gather). */
void tdm_ddp__param_needed(void *ctx, int i);
/* After the optimizer updated the owned shards (distributed optimizer): starts the
 * step's parameter all-gathers, the first ones only with overlap_param_gather (forward
 * waits per bucket), otherwise all of them, waited here and timed as params-all-gather. */
void tdm_ddp__post_param_gathers(tdm_ddp *ddp);
/* The flush: dispatches every all-gather not yet dispatched, in forward order. */
void tdm_ddp__flush_param_gathers(tdm_ddp *ddp);
/* Waits for every dispatched all-gather (flushing first). */
void tdm_ddp__wait_param_gathers(tdm_ddp *ddp);

/* ---- ddp.c ---- */

/* Waits for a control collective started on ddp->ctl, bounded by the timeout. */
void tdm_ddp__ctl_wait(tdm_ddp *ddp, MPI_Request *req, const char *what);
/* Records the control collective that started at t0_ns as a profiler wait. */
void tdm_ddp__record_control_wait(const char *name, uint64_t t0_ns);

#endif
