/* ddp.c - flat buffers, grad-ready counting, bucket launch and gradient sync
 * (see ddp.h). The optimizer side lives in optimizer.c. */
#include "distributed/ddp.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "distributed/ddp_internal.h"
#include "kernels/kernels.h"
#include "prof/prof.h"

/* ---- hooks ----------------------------------------------------------------------- */

static void launch_bucket(tdm_ddp *ddp, int b);

static void hook_param_needed(void *ctx, int i) {
    tdm_ddp *ddp = ctx;
    if (!ddp->gathers_pending || i < 0 || i >= ddp->L.n_params) return;
    int b = ddp->L.bucket_of[i];
    if (b < 0 || ddp->gather_waited[b]) return;
    const int nb = ddp->L.n_buckets;
    /* All-gathers go out in forward order (bucket nb-1 first), so every rank issues
     * them identically; dispatch up to b, wait for b, and keep the next
     * TDM_DDP_GATHER_PREFETCH buckets in flight. */
    tdm_ddp__dispatch_gathers(ddp, nb - b);
    ddp->gather_wait_ns += tdm_comm_wait(ddp->eng, &ddp->gather_ops[b]);
    ddp->gather_waited[b] = 1;
    tdm_ddp__dispatch_gathers(ddp, nb - b + TDM_DDP_GATHER_PREFETCH);
    int all = 1;
    for (int k = 0; k < nb && all; k++) all = ddp->gather_waited[k];
    if (all) ddp->gathers_pending = 0;
}

static void hook_grad_ready(void *ctx, int i) {
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

static void hook_progress(void *ctx) {
    tdm_ddp *ddp = ctx;
    tdm_comm_progress(ddp->eng);
}

tdm_param_hooks tdm_ddp_hooks(tdm_ddp *ddp) {
    tdm_param_hooks h = {0};
    h.ctx = ddp;
    h.param_needed = hook_param_needed;
    h.grad_ready = hook_grad_ready;
    h.progress = hook_progress;
    return h;
}

/* ---- gradient launch ---------------------------------------------------------------- */

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

void tdm_ddp__dispatch_gathers(tdm_ddp *ddp, int n) {
    const int nb = ddp->L.n_buckets;
    while (ddp->gathers_dispatched < nb && ddp->gathers_dispatched < n) {
        int b = nb - 1 - ddp->gathers_dispatched++;
        if (tdm_prof_on(1)) tdm_prof_instant(TDM_PROF_MARK, 1, "param all-gather posted", b);
        tdm_comm_post(ddp->eng, &ddp->gather_ops[b]);
    }
}

void tdm_ddp__dispatch_all_gathers(tdm_ddp *ddp) {
    if (ddp->gathers_pending) tdm_ddp__dispatch_gathers(ddp, ddp->L.n_buckets);
}

void tdm_ddp__wait_all_gathers(tdm_ddp *ddp) {
    if (!ddp->gathers_pending) return;
    tdm_ddp__dispatch_all_gathers(ddp);
    for (int b = 0; b < ddp->L.n_buckets; b++) {
        if (ddp->gather_waited[b]) continue;
        ddp->gather_wait_ns += tdm_comm_wait(ddp->eng, &ddp->gather_ops[b]);
        ddp->gather_waited[b] = 1;
    }
    ddp->gathers_pending = 0;
}

/* A small blocking collective on the control communicator (flags, norms, loss sums) that
 * started at t0_ns is mostly this rank waiting for the slowest one to arrive: the profiler
 * records it as a wait, so that the analysis does not count it as compute. */
static void record_control_wait(const char *name, uint64_t t0_ns) {
    if (tdm_prof_on(1)) tdm_prof_complete(TDM_PROF_WAIT, 1, name, t0_ns, tdm_now_ns(), -1);
}

/* Waits for a control collective started on ddp->ctl: polled, and bounded by the timeout
 * like the bucket collectives (a blocking call would wait for a stuck rank forever). */
static void ctl_wait(tdm_ddp *ddp, MPI_Request *req, const char *what) { tdm_comm_wait_request(ddp->eng, req, what); }

static void launch_bucket(tdm_ddp *ddp, int b) {
    if (ddp->inject_iteration == ddp->iteration && (ddp->inject_rank < 0 || ddp->inject_rank == ddp->rank)) {
        int i = ddp->inject_param >= 0 ? ddp->inject_param : ddp->L.order[ddp->L.buckets[0].first];
        if (i < ddp->L.n_params && ddp->L.bucket_of[i] == b) ddp->grads[ddp->L.offset[i]] = NAN;
    }
    if (ddp->cfg.check_for_nan_in_grad) check_bucket(ddp, b);
    /* Gathers still undispatched (a parameter forward never asked for) go first, so the
     * order of collectives stays the same on every rank. */
    tdm_ddp__dispatch_all_gathers(ddp);
    ddp->trace[b].post_seq = ++ddp->seq;
    if (tdm_prof_on(1)) tdm_prof_instant(TDM_PROF_MARK, 1, "grad bucket posted", b);
    tdm_comm_post(ddp->eng, &ddp->grad_ops[b]);
}

/* ---- life cycle ---------------------------------------------------------------------- */

/* This rank's buffers, optimizer state and per-bucket bookkeeping for layout ddp->L, and
 * the table's data/grad pointers bound into them. The only failure is an allocation,
 * which can happen on one rank alone. */
static int alloc_buffers(tdm_ddp *ddp, tdm_error *err) {
    tdm_param_table *t = ddp->t;
    const tdm_ddp_layout *L = &ddp->L;
    const int nb = L->n_buckets;

    ddp->params = tdm_alloc_big((size_t)L->total * sizeof(float), err);
    ddp->grads = ddp->params ? tdm_alloc_big((size_t)L->total * sizeof(float), err) : NULL;
    if (!ddp->grads) return -1;
    for (int i = 0; i < t->n; i++)
        if (!t->p[i].trainable) ddp->frozen_numel += t->p[i].numel;
    if (ddp->frozen_numel > 0 && !(ddp->frozen = tdm_alloc_big((size_t)ddp->frozen_numel * sizeof(float), err)))
        return -1;
    int64_t fo = 0;
    for (int i = 0; i < t->n; i++) {
        tdm_param *p = &t->p[i];
        if (p->trainable) {
            p->data = ddp->params + L->offset[i];
            p->grad = ddp->grads + L->offset[i];
        } else {
            p->data = ddp->frozen + fo;
            p->grad = NULL;
            fo += p->numel;
        }
    }

    /* Optimizer state: only the owned range of each bucket. */
    ddp->state_offset = tdm_xcalloc((size_t)nb, sizeof *ddp->state_offset);
    for (int b = 0; b < nb; b++) {
        int64_t s, e;
        tdm_ddp_layout_shard(L, b, ddp->rank, &s, &e);
        ddp->state_offset[b] = ddp->opt_numel;
        ddp->opt_numel += e - s;
    }
    ddp->m = tdm_alloc_big((size_t)ddp->opt_numel * sizeof(float), err);
    ddp->v = ddp->m ? tdm_alloc_big((size_t)ddp->opt_numel * sizeof(float), err) : NULL;
    if (!ddp->v) return -1;
    if (ddp->cfg.bf16_params && !(ddp->main = tdm_alloc_big((size_t)ddp->opt_numel * sizeof(float), err))) return -1;
    if (ddp->cfg.bf16_params && L->distributed &&
        !(ddp->bits = tdm_alloc_big((size_t)L->total * sizeof(uint16_t), err)))
        return -1;

    ddp->grad_ops = tdm_xcalloc((size_t)nb, sizeof *ddp->grad_ops);
    ddp->gather_ops = tdm_xcalloc((size_t)nb, sizeof *ddp->gather_ops);
    for (int b = 0; b < nb; b++) {
        const tdm_ddp_bucket *bk = &L->buckets[b];
        tdm_comm_op *g = &ddp->grad_ops[b];
        g->bucket = b;
        g->buf = ddp->grads + bk->offset;
        if (L->distributed) {
            g->kind = TDM_COMM_REDUCE_SCATTER;
            g->count = (int)bk->shard;
            g->name = "grad reduce-scatter";
        } else {
            g->kind = TDM_COMM_ALLREDUCE;
            g->count = (int)bk->padded;
            g->name = "grad all-reduce";
        }
        tdm_comm_op *a = &ddp->gather_ops[b];
        a->kind = ddp->bits ? TDM_COMM_ALLGATHER_BF16 : TDM_COMM_ALLGATHER;
        a->bucket = b;
        a->buf = ddp->params + bk->offset;
        a->bits = ddp->bits ? ddp->bits + bk->offset : NULL;
        a->count = (int)bk->shard;
        a->name = "param all-gather";
    }
    ddp->ready = tdm_xcalloc((size_t)t->n, 1);
    ddp->ready_count = tdm_xcalloc((size_t)nb, sizeof *ddp->ready_count);
    ddp->gather_waited = tdm_xcalloc((size_t)nb, 1);
    ddp->trace = tdm_xcalloc((size_t)nb, sizeof *ddp->trace);
    ddp->gather_scratch = tdm_xcalloc((size_t)ddp->size * 64, sizeof *ddp->gather_scratch);

    return 0;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    for (size_t j = 0; j < n; j++) h = (h ^ ((const unsigned char *)p)[j]) * 1099511628211ull;
    return h;
}

/* What ranks must agree on before pairing bucket collectives: [0] a hash of every trainable
 * parameter's name, size and place and every bucket's padded size, [1] the number of
 * trainable tensors, [2] their elements. */
static void layout_signature(const tdm_ddp_layout *L, const tdm_param_table *t, uint64_t out[3]) {
    uint64_t h = 1469598103934665603ull;
    int64_t numel = 0;
    for (int k = 0; k < L->n_trainable; k++) {
        const tdm_param *p = &t->p[L->order[k]];
        h = fnv1a(h, p->name, strlen(p->name) + 1);
        h = fnv1a(h, &p->numel, sizeof p->numel);
        h = fnv1a(h, &L->offset[L->order[k]], sizeof L->offset[0]);
        numel += p->numel;
    }
    for (int b = 0; b < L->n_buckets; b++) h = fnv1a(h, &L->buckets[b].padded, sizeof L->buckets[b].padded);
    out[0] = h;
    out[1] = (uint64_t)L->n_trainable;
    out[2] = (uint64_t)numel;
}

tdm_ddp *tdm_ddp_create(MPI_Comm dp_comm, tdm_param_table *t, const tdm_ddp_config *cfg, tdm_error *err) {
    if (tdm_ddp_config_check(cfg, err) != 0) return NULL;
    if (cfg->progress == TDM_DDP_PROGRESS_THREAD) {
        int level = MPI_THREAD_SINGLE;
        MPI_Query_thread(&level);
        if (level < MPI_THREAD_MULTIPLE) {
            tdm_errorf(err, "communication thread: MPI was not initialised with MPI_THREAD_MULTIPLE; "
                            "use inline progress (see tdm_ddp_progress_for_thread_level)");
            return NULL;
        }
    }
    tdm_ddp *ddp = tdm_xcalloc(1, sizeof *ddp);
    ddp->cfg = *cfg;
    ddp->t = t;
    ddp->ctl = MPI_COMM_NULL;
    MPI_Comm_rank(dp_comm, &ddp->rank);
    MPI_Comm_size(dp_comm, &ddp->size);
    ddp->is_last_microbatch = 1;
    ddp->dup_param = ddp->nan_bucket = ddp->nan_param = -1;
    ddp->iteration = 1;
    ddp->inject_rank = -1;
    ddp->inject_iteration = -1;
    tdm_timers_reset(&ddp->timers);
    /* The layout is built from this rank's table, and the tables can differ between ranks
     * (another model config on one node), and with them whether building succeeds; an
     * allocation can fail on one rank alone. So the collective duplications come first, the
     * ranks compare their layouts with rank 0's (different bucket sizes would pair
     * collectives of different lengths), and they agree on the outcome before returning:
     * none is left waiting in a collective the others skipped. */
    MPI_Comm bucket_comm;
    MPI_Comm_dup(dp_comm, &ddp->ctl);
    MPI_Comm_dup(dp_comm, &bucket_comm);
    int ok = tdm_ddp_layout_build(&ddp->L, t, ddp->size, cfg, err) == 0;
    uint64_t mine[3] = {0, 0, 0}, root[3];
    if (ok) layout_signature(&ddp->L, t, mine);
    if (ok && cfg->bf16_params) mine[0] ^= 0x9e3779b97f4a7c15ull; /* the all-gathers' element type */
    memcpy(root, mine, sizeof root);
    MPI_Bcast(root, 3, MPI_UINT64_T, 0, ddp->ctl);
    const int same = ok && memcmp(root, mine, sizeof root) == 0;
    if (same) ok = alloc_buffers(ddp, err) == 0;
    if (same && ok)
        ok = (ddp->eng = tdm_comm_create(bucket_comm, cfg->progress, 2 * ddp->L.n_buckets, cfg->comm_thread_nice,
                                         err)) != NULL;
    else
        MPI_Comm_free(&bucket_comm);
    if (same && ok) tdm_comm_set_timeout(ddp->eng, (uint64_t)(cfg->timeout_minutes * 60e9));
    /* [0] lowest rank that failed on its own, [1] lowest rank whose layout is not rank 0's */
    int bad[2] = {ok ? INT_MAX : ddp->rank, ok && !same ? ddp->rank : INT_MAX};
    MPI_Allreduce(MPI_IN_PLACE, bad, 2, MPI_INT, MPI_MIN, ddp->ctl);
    if (bad[1] != INT_MAX) {
        if (bad[1] == ddp->rank)
            tdm_errorf(err,
                       "rank %d: the trainable parameters differ from rank 0's (here %llu tensors, %llu elements; "
                       "rank 0: %llu, %llu, or the same counts in other names, shapes or order): every "
                       "data-parallel rank must load the same model config with the same freezing and --bf16 flags",
                       ddp->rank, (unsigned long long)mine[1], (unsigned long long)mine[2],
                       (unsigned long long)root[1], (unsigned long long)root[2]);
        else if (ok)
            tdm_errorf(err,
                       "rank %d's trainable parameters differ from rank 0's (%llu tensors, %llu elements on rank 0): "
                       "every data-parallel rank must load the same model config with the same freezing and --bf16 "
                       "flags",
                       bad[1], (unsigned long long)root[1], (unsigned long long)root[2]);
        goto fail;
    }
    if (bad[0] != INT_MAX) {
        /* every rank returns the failing rank's reason: a caller prints one rank's message */
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", ddp->rank == bad[0] ? err->msg : "");
        MPI_Bcast(why, (int)sizeof why, MPI_CHAR, bad[0], ddp->ctl);
        if (ok) tdm_errorf(err, "data-parallel setup failed on rank %d: %s", bad[0], why);
        goto fail;
    }
    return ddp;
fail:
    tdm_ddp_free(ddp);
    return NULL;
}

void tdm_ddp_free(tdm_ddp *ddp) {
    if (!ddp) return;
    tdm_comm_free(ddp->eng);
    if (ddp->ctl != MPI_COMM_NULL) MPI_Comm_free(&ddp->ctl);
    tdm_free_big(ddp->params);
    tdm_free_big(ddp->grads);
    tdm_free_big(ddp->frozen);
    tdm_free_big(ddp->m);
    tdm_free_big(ddp->v);
    tdm_free_big(ddp->main);
    tdm_free_big(ddp->bits);
    free(ddp->state_offset);
    free(ddp->grad_ops);
    free(ddp->gather_ops);
    free(ddp->ready);
    free(ddp->ready_count);
    free(ddp->gather_waited);
    free(ddp->trace);
    free(ddp->gather_scratch);
    tdm_ddp_layout_free(&ddp->L);
    free(ddp);
}

int tdm_ddp_rank(const tdm_ddp *ddp) { return ddp->rank; }
int tdm_ddp_size(const tdm_ddp *ddp) { return ddp->size; }
const tdm_ddp_config *tdm_ddp_get_config(const tdm_ddp *ddp) { return &ddp->cfg; }
const tdm_ddp_layout *tdm_ddp_get_layout(const tdm_ddp *ddp) { return &ddp->L; }
float *tdm_ddp_param_buffer(tdm_ddp *ddp) { return ddp->params; }
float *tdm_ddp_grad_buffer(tdm_ddp *ddp) { return ddp->grads; }

void tdm_ddp_get_memory(const tdm_ddp *ddp, tdm_ddp_memory *out) {
    out->param_bytes = ddp->L.total * (int64_t)sizeof(float);
    out->grad_bytes = ddp->L.total * (int64_t)sizeof(float);
    out->frozen_bytes = ddp->frozen_numel * (int64_t)sizeof(float);
    const int per = ddp->cfg.bf16_params ? 3 : 2; /* m, v, and the fp32 main copy of bfloat16 parameters */
    out->optim_bytes = per * ddp->opt_numel * (int64_t)sizeof(float);
    out->optim_bytes_unsharded = per * ddp->L.total * (int64_t)sizeof(float);
    out->param_bits_bytes = ddp->bits ? ddp->L.total * (int64_t)sizeof(uint16_t) : 0;
}

void tdm_ddp_describe(const tdm_ddp *ddp, tdm_strbuf *out) {
    tdm_ddp_config_describe(&ddp->cfg, ddp->L.bucket_size, out);
    tdm_sb_putc(out, '\n');
    tdm_ddp_layout_describe(&ddp->L, ddp->t, out);
    tdm_ddp_memory mem;
    tdm_ddp_get_memory(ddp, &mem);
    const double mib = 1024.0 * 1024.0;
    const char *what = ddp->cfg.bf16_params ? "Adam m, v and fp32 main parameters" : "Adam m, v";
    if (ddp->L.distributed)
        tdm_sb_printf(out, "optimizer state (%s) per rank: %.2f MiB (1/%d of %.2f MiB unsharded)\n", what,
                      (double)mem.optim_bytes / mib, ddp->size, (double)mem.optim_bytes_unsharded / mib);
    else
        tdm_sb_printf(out, "optimizer state (%s) per rank: %.2f MiB (not sharded)\n", what,
                      (double)mem.optim_bytes / mib);
    if (ddp->cfg.bf16_params)
        tdm_sb_printf(out, "parameters: bfloat16 values%s; gradients accumulated and reduced in fp32\n",
                      ddp->L.distributed ? ", all-gathered as 16 bits" : "");
    tdm_sb_printf(out, "data-parallel progress: %s\n", tdm_ddp_progress_name(ddp->cfg.progress));
}

void tdm_ddp_params_loaded(tdm_ddp *ddp) {
    if (!ddp->cfg.bf16_params) return;
    tdm_ddp__wait_all_gathers(ddp);
    tdm_round_to_bf16(ddp->params, ddp->bits, ddp->params, ddp->L.total);
    if (ddp->frozen_numel) tdm_round_to_bf16(ddp->frozen, NULL, ddp->frozen, ddp->frozen_numel);
    for (int b = 0; b < ddp->L.n_buckets; b++) {
        int64_t s, e;
        tdm_ddp_layout_shard(&ddp->L, b, ddp->rank, &s, &e);
        memcpy(ddp->main + ddp->state_offset[b], ddp->params + s, (size_t)(e - s) * sizeof(float));
    }
}

int tdm_ddp_broadcast_params(tdm_ddp *ddp, int root, tdm_error *err) {
    if (root < 0 || root >= ddp->size)
        return tdm_errorf(err, "broadcast root %d: expected a rank in [0, %d)", root, ddp->size);
    tdm_ddp__wait_all_gathers(ddp);
    float *bufs[2] = {ddp->params, ddp->frozen};
    int64_t lens[2] = {ddp->L.total, ddp->frozen_numel};
    for (int k = 0; k < 2; k++)
        for (int64_t o = 0; o < lens[k]; o += INT_MAX / 2) {
            int64_t n = lens[k] - o < INT_MAX / 2 ? lens[k] - o : INT_MAX / 2;
            MPI_Request req;
            MPI_Ibcast(bufs[k] + o, (int)n, MPI_FLOAT, root, ddp->ctl, &req);
            ctl_wait(ddp, &req, "parameter broadcast");
        }
    return 0;
}

/* ---- per step ------------------------------------------------------------------------ */

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
    tdm_ddp__wait_all_gathers(ddp);

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
    ctl_wait(ddp, &req, "agreement after the gradient sync");
    record_control_wait("grad sync: ranks agree", t_agree);
    int rc = 0;
    if (flags[0] != INT_MAX) {
        int64_t info[3] = {ddp->iteration, ddp->nan_bucket, ddp->nan_param};
        MPI_Ibcast(info, 3, MPI_INT64_T, flags[0], ddp->ctl, &req);
        ctl_wait(ddp, &req, "NaN report");
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

void tdm_ddp_wait_params(tdm_ddp *ddp) { tdm_ddp__wait_all_gathers(ddp); }

int tdm_ddp_sum_across_ranks(tdm_ddp *ddp, double *vals, int n, tdm_error *err) {
    if (n < 0 || n > 64) return tdm_errorf(err, "sum across ranks: %d values, expected at most 64", n);
    uint64_t t0 = tdm_now_ns();
    MPI_Request req;
    MPI_Iallgather(vals, n, MPI_DOUBLE, ddp->gather_scratch, n, MPI_DOUBLE, ddp->ctl, &req);
    ctl_wait(ddp, &req, "sum across ranks");
    record_control_wait("sum across ranks", t0);
    for (int k = 0; k < n; k++) {
        double s = 0.0;
        for (int r = 0; r < ddp->size; r++) s += ddp->gather_scratch[(size_t)r * n + k];
        vals[k] = s;
    }
    return 0;
}

int64_t tdm_ddp_iteration(const tdm_ddp *ddp) { return ddp->iteration; }
void tdm_ddp_set_iteration(tdm_ddp *ddp, int64_t iteration) { ddp->iteration = iteration; }

/* ---- timers, stats, tests ---------------------------------------------------------------- */

void tdm_ddp_timer_start(tdm_ddp *ddp, tdm_timer_id id) { tdm_timers_start(&ddp->timers, id); }
void tdm_ddp_timer_stop(tdm_ddp *ddp, tdm_timer_id id) { tdm_timers_stop(&ddp->timers, id); }
double tdm_ddp_timer_elapsed_ms(const tdm_ddp *ddp, tdm_timer_id id) { return tdm_timers_elapsed_ms(&ddp->timers, id); }

static int timers_report(tdm_ddp *ddp, double normalizer, int reset, tdm_timing *out, tdm_error *err) {
    if (!(normalizer > 0)) return tdm_errorf(err, "timers: normalizer %g, expected > 0", normalizer);
    /* every rank's values (-1: the rank did not use the timer, and must not drag the min to 0) */
    double mine[TDM_TIMER_COUNT];
    for (int i = 0; i < TDM_TIMER_COUNT; i++)
        mine[i] = ddp->timers.used[i] ? tdm_timers_elapsed_ms(&ddp->timers, i) / normalizer : -1.0;
    double *all = tdm_xmalloc(sizeof(double) * TDM_TIMER_COUNT * (size_t)ddp->size);
    MPI_Request req;
    MPI_Iallgather(mine, TDM_TIMER_COUNT, MPI_DOUBLE, all, TDM_TIMER_COUNT, MPI_DOUBLE, ddp->ctl, &req);
    ctl_wait(ddp, &req, "timers report");
    out->n_ranks = ddp->size;
    for (int i = 0; i < TDM_TIMER_COUNT; i++) {
        double mn = INFINITY, mx = -INFINITY;
        for (int r = 0; r < ddp->size; r++) {
            const double v = all[(size_t)r * TDM_TIMER_COUNT + i];
            if (r < TDM_TIMING_MAX_RANKS) out->rank_ms[r][i] = v;
            if (v < 0) continue;
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
        }
        out->valid[i] = mx >= 0;
        out->min_ms[i] = out->valid[i] ? mn : 0.0;
        out->max_ms[i] = out->valid[i] ? mx : 0.0;
    }
    free(all);
    if (reset) tdm_timers_reset(&ddp->timers);
    return 0;
}

int tdm_ddp_timers_report(tdm_ddp *ddp, double normalizer, tdm_timing *out, tdm_error *err) {
    return timers_report(ddp, normalizer, 1, out, err);
}

int tdm_ddp_timers_peek(tdm_ddp *ddp, double normalizer, tdm_timing *out, tdm_error *err) {
    return timers_report(ddp, normalizer, 0, out, err);
}

void tdm_ddp_get_stats(const tdm_ddp *ddp, tdm_ddp_stats *out) {
    out->comm_thread_cpu_ns = tdm_comm_thread_cpu_ns(ddp->eng);
    out->grad_wait_ns = ddp->grad_wait_ns;
    out->gather_wait_ns = ddp->gather_wait_ns;
    out->collectives = tdm_comm_completed(ddp->eng);
    out->comm_thread_nice = tdm_comm_thread_nice(ddp->eng);
}

uint64_t tdm_ddp_tick(tdm_ddp *ddp) { return ++ddp->seq; }

void tdm_ddp_get_bucket_trace(const tdm_ddp *ddp, int b, tdm_ddp_bucket_trace *out) {
    if (b < 0 || b >= ddp->L.n_buckets) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = ddp->trace[b];
}

void tdm_ddp_inject_nan(tdm_ddp *ddp, int rank, int64_t iteration, int param) {
    ddp->inject_rank = rank;
    ddp->inject_iteration = iteration;
    ddp->inject_param = param;
}
