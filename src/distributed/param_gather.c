/* param_gather.c - the parameter side of a step with the distributed optimizer: each
 * bucket's all-gather of the updated shards, posted after the optimizer, prefetched and
 * waited on per bucket by forward's param_needed (overlap_param_gather), and flushed
 * before a gradient bucket is launched so every rank issues collectives in one order
 * (see ddp.h). */
#include "distributed/ddp_internal.h"

#include <string.h>

#include "distributed/comm.h"
#include "distributed/ddp.h"
#include "distributed/timers.h"
#include "prof/prof.h"

/* Posts parameter all-gathers in forward order (bucket n_buckets-1 first, the same order
 * on every rank) until the first n of them are out. */
static void dispatch_gathers(tdm_ddp *ddp, int n) {
    const int nb = ddp->L.n_buckets;
    while (ddp->gathers_dispatched < nb && ddp->gathers_dispatched < n) {
        int b = nb - 1 - ddp->gathers_dispatched++;
        if (tdm_prof_on(1)) tdm_prof_instant(TDM_PROF_MARK, 1, "param all-gather posted", b);
        tdm_comm_post(ddp->eng, &ddp->gather_ops[b]);
    }
}

/* ---- post --------------------------------------------------------------------------------- */

void tdm_ddp__post_param_gathers(tdm_ddp *ddp) {
    const int nb = ddp->L.n_buckets;
    memset(ddp->gather_waited, 0, (size_t)nb);
    ddp->gathers_pending = 1;
    ddp->gathers_dispatched = 0;
    if (ddp->cfg.overlap_param_gather) {
        /* Start the first buckets forward needs; param_needed waits per bucket and
         * keeps the next ones in flight (tdm_ddp__param_needed below). */
        dispatch_gathers(ddp, TDM_DDP_GATHER_PREFETCH);
    } else {
        tdm_timers_start(&ddp->timers, TDM_TIMER_PARAMS_ALL_GATHER);
        tdm_ddp__wait_param_gathers(ddp);
        tdm_timers_stop(&ddp->timers, TDM_TIMER_PARAMS_ALL_GATHER);
    }
}

/* ---- prefetch and wait -------------------------------------------------------------------- */

void tdm_ddp__param_needed(void *ctx, int i) {
    tdm_ddp *ddp = ctx;
    if (!ddp->gathers_pending || i < 0 || i >= ddp->L.n_params) return;
    int b = ddp->L.bucket_of[i];
    if (b < 0 || ddp->gather_waited[b]) return;
    const int nb = ddp->L.n_buckets;
    /* All-gathers go out in forward order (bucket nb-1 first), so every rank issues
     * them identically; dispatch up to b, wait for b, and keep the next
     * TDM_DDP_GATHER_PREFETCH buckets in flight. */
    dispatch_gathers(ddp, nb - b);
    ddp->gather_wait_ns += tdm_comm_wait(ddp->eng, &ddp->gather_ops[b]);
    ddp->gather_waited[b] = 1;
    dispatch_gathers(ddp, nb - b + TDM_DDP_GATHER_PREFETCH);
    int all = 1;
    for (int k = 0; k < nb && all; k++) all = ddp->gather_waited[k];
    if (all) ddp->gathers_pending = 0;
}

void tdm_ddp__wait_param_gathers(tdm_ddp *ddp) {
    if (!ddp->gathers_pending) return;
    tdm_ddp__flush_param_gathers(ddp);
    for (int b = 0; b < ddp->L.n_buckets; b++) {
        if (ddp->gather_waited[b]) continue;
        ddp->gather_wait_ns += tdm_comm_wait(ddp->eng, &ddp->gather_ops[b]);
        ddp->gather_waited[b] = 1;
    }
    ddp->gathers_pending = 0;
}

void tdm_ddp_wait_params(tdm_ddp *ddp) { tdm_ddp__wait_param_gathers(ddp); }

/* ---- flush -------------------------------------------------------------------------------- */

void tdm_ddp__flush_param_gathers(tdm_ddp *ddp) {
    if (ddp->gathers_pending) dispatch_gathers(ddp, ddp->L.n_buckets);
}
