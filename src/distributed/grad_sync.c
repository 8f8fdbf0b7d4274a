/* grad_sync.c - the gradient side of a step: grad-ready counting, the NaN check and the
 * launch of each bucket's reduce-scatter or all-reduce, and the finish that waits for
 * them and agrees across ranks on errors (see ddp.h). */
#include "distributed/ddp_internal.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "core/clock.h"
#include "distributed/comm.h"
#include "distributed/ddp.h"
#include "kernels/kernels.h"
#include "prof/prof.h"

static void launch_bucket(tdm_ddp *ddp, int b);

/* ---- grad-ready counting -------------------------------------------------------------- */

void tdm_ddp__grad_ready(void *ctx, int i) {
    tdm_ddp *ddp = ctx;
    /* Inline progress: besides between layers, test the collectives in flight each time a
     * gradient is final, a dozen times per layer in the backward, so that a transfer that
     * needs several rounds (a TCP rendezvous) does not stall for a whole layer. Nothing in
     * THREAD mode. */
    tdm_comm_progress(ddp->eng);
    if (!ddp->is_last_microbatch || i < 0 || i >= ddp->L.n_params) return;
    int b = ddp->L.bucket_of[i];
    if (b < 0) return; /* frozen: nothing to reduce */
    if (ddp->ready[i]) {
        if (ddp->dup_param < 0) ddp->dup_param = i;
        return;
    }
    ddp->ready[i] = 1;
    if (++ddp->ready_count[b] < ddp->L.buckets[b].count) return;
    ddp->trace[b].ready_seq = ++ddp->seq;
    if (!ddp->cfg.overlap_grad_reduce) return;
    /* Post in bucket order: a bucket ready before an earlier one waits for it, so the
     * sequence of collectives is the same on every rank whatever the hook order. */
    while (ddp->next_launch < ddp->L.n_buckets &&
           ddp->ready_count[ddp->next_launch] == ddp->L.buckets[ddp->next_launch].count)
        launch_bucket(ddp, ddp->next_launch++);
}

void tdm_ddp_zero_grad(tdm_ddp *ddp) {
    memset(ddp->grads, 0, (size_t)ddp->L.total * sizeof(float));
    memset(ddp->ready, 0, (size_t)ddp->L.n_params);
    memset(ddp->ready_count, 0, (size_t)ddp->L.n_buckets * sizeof *ddp->ready_count);
    memset(ddp->trace, 0, (size_t)ddp->L.n_buckets * sizeof *ddp->trace);
    ddp->next_launch = 0;
    ddp->dup_param = ddp->nan_bucket = ddp->nan_param = -1;
    ddp->grads_synced = 0;
    ddp->is_last_microbatch = 1;
}

void tdm_ddp_set_is_last_microbatch(tdm_ddp *ddp, int is_last) { ddp->is_last_microbatch = is_last != 0; }

/* ---- bucket launch ---------------------------------------------------------------------- */

/* Local NaN/Inf check of bucket b before it is communicated (Megatron's
 * check_for_nan_in_grad): one vectorised pass (tdm_all_finite; a sum of squares in double
 * said the same, since it cannot overflow for finite floats, at 4.3x the instructions); only
 * on failure do we look for the first parameter holding the bad value. */
static void check_bucket(tdm_ddp *ddp, int b) {
    const tdm_ddp_bucket *bk = &ddp->L.buckets[b];
    if (tdm_all_finite(ddp->grads + bk->offset, bk->padded) || ddp->nan_bucket >= 0) return;
    ddp->nan_bucket = b;
    for (int k = bk->first; k < bk->first + bk->count; k++) {
        int i = ddp->L.order[k];
        const float *pg = ddp->grads + ddp->L.offset[i];
        for (int64_t e = 0; e < ddp->t->p[i].numel; e++)
            if (!isfinite(pg[e])) {
                ddp->nan_param = i;
                return;
            }
    }
}

static void launch_bucket(tdm_ddp *ddp, int b) {
    if (ddp->inject_iteration == ddp->iteration && (ddp->inject_rank < 0 || ddp->inject_rank == ddp->rank)) {
        int i = ddp->inject_param >= 0 ? ddp->inject_param : ddp->L.order[ddp->L.buckets[0].first];
        if (i < ddp->L.n_params && ddp->L.bucket_of[i] == b) ddp->grads[ddp->L.offset[i]] = NAN;
    }
    if (ddp->cfg.check_for_nan_in_grad) check_bucket(ddp, b);
    /* Gathers still undispatched (a parameter forward never asked for) go first, so the
     * order of collectives stays the same on every rank. */
    tdm_ddp__flush_param_gathers(ddp);
    ddp->trace[b].post_seq = ++ddp->seq;
    if (tdm_prof_on(1)) tdm_prof_instant(TDM_PROF_MARK, 1, "grad bucket posted", b);
    tdm_comm_post(ddp->eng, &ddp->grad_ops[b]);
}

/* ---- finish ----------------------------------------------------------------------------- */

int tdm_ddp_finish_grad_sync(tdm_ddp *ddp, tdm_error *err) {
    tdm_timers_start(&ddp->timers, TDM_TIMER_ALL_GRADS_SYNC);
    const int nb = ddp->L.n_buckets;
    /* Every bucket is communicated even when a gradient is missing or non-finite, so
     * no rank is left waiting in a collective the others never start. */
    while (ddp->next_launch < nb) launch_bucket(ddp, ddp->next_launch++);
    for (int b = 0; b < nb; b++) {
        ddp->grad_wait_ns += tdm_comm_wait(ddp->eng, &ddp->grad_ops[b]);
        tdm_comm_op *op = &ddp->grad_ops[b];
        ddp->trace[b].post_ns = op->post_ns;
        ddp->trace[b].start_ns = op->start_ns;
        ddp->trace[b].done_ns = op->done_ns;
    }
    tdm_ddp__wait_param_gathers(ddp);

    /* Agree across ranks: [0] lowest rank that saw a non-finite gradient, [1] lowest
     * parameter index that got no gradient, [2] lowest one that got two. */
    int missing = INT_MAX;
    for (int i = 0; i < ddp->L.n_params && missing == INT_MAX; i++)
        if (ddp->L.bucket_of[i] >= 0 && !ddp->ready[i]) missing = i;
    int flags[3] = {ddp->nan_bucket >= 0 ? ddp->rank : INT_MAX, missing,
                    ddp->dup_param >= 0 ? ddp->dup_param : INT_MAX};
    uint64_t t_agree = tdm_now_ns();
    MPI_Request req;
    MPI_Iallreduce(MPI_IN_PLACE, flags, 3, MPI_INT, MPI_MIN, ddp->ctl, &req);
    tdm_ddp__ctl_wait(ddp, &req, "agreement after the gradient sync");
    tdm_ddp__record_control_wait("grad sync: ranks agree", t_agree);
    int rc = 0;
    if (flags[0] != INT_MAX) {
        int64_t info[3] = {ddp->iteration, ddp->nan_bucket, ddp->nan_param};
        MPI_Ibcast(info, 3, MPI_INT64_T, flags[0], ddp->ctl, &req);
        tdm_ddp__ctl_wait(ddp, &req, "NaN report");
        const char *pname = info[2] >= 0 && info[2] < ddp->L.n_params ? ddp->t->p[info[2]].name : "(padding)";
        rc = tdm_errorf(err,
                        "rank %d, iteration %lld: found NaN or Inf in the local gradient before data-parallel "
                        "communication: bucket %lld (of %d, numbered as in the start-up table), first in "
                        "parameter %s",
                        flags[0], (long long)info[0], (long long)info[1] + 1, nb, pname);
    } else if (flags[1] != INT_MAX) {
        rc = tdm_errorf(err,
                        "parameter %s received no gradient in iteration %lld (its grad_ready hook never ran "
                        "in the last micro-batch)",
                        ddp->t->p[flags[1]].name, (long long)ddp->iteration);
    } else if (flags[2] != INT_MAX) {
        rc = tdm_errorf(err, "parameter %s reported grad_ready twice in one backward (iteration %lld)",
                        ddp->t->p[flags[2]].name, (long long)ddp->iteration);
    }
    ddp->grads_synced = rc == 0;
    tdm_timers_stop(&ddp->timers, TDM_TIMER_ALL_GRADS_SYNC);
    return rc;
}
