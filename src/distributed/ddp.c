/* ddp.c - creating, configuring and freeing the data-parallel state, the hooks the model
 * calls, the control collectives and the public accessors (see ddp.h). A step's work is
 * in grad_sync.c, optimizer.c and param_gather.c (ddp_internal.h). */
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

static void hook_progress(void *ctx) {
    tdm_ddp *ddp = ctx;
    tdm_comm_progress(ddp->eng);
}

tdm_param_hooks tdm_ddp_hooks(tdm_ddp *ddp) {
    tdm_param_hooks h = {0};
    h.ctx = ddp;
    h.param_needed = tdm_ddp__param_needed;
    h.grad_ready = tdm_ddp__grad_ready;
    h.progress = hook_progress;
    return h;
}

/* ---- control collectives ------------------------------------------------------------ */

/* A small blocking collective on the control communicator (flags, norms, loss sums) that
 * started at t0_ns is mostly this rank waiting for the slowest one to arrive: the profiler
 * records it as a wait, so that the analysis does not count it as compute. */
void tdm_ddp__record_control_wait(const char *name, uint64_t t0_ns) {
    if (tdm_prof_on(1)) tdm_prof_complete(TDM_PROF_WAIT, 1, name, t0_ns, tdm_now_ns(), -1);
}

/* Waits for a control collective started on ddp->ctl: polled, and bounded by the timeout
 * like the bucket collectives (a blocking call would wait for a stuck rank forever). */
void tdm_ddp__ctl_wait(tdm_ddp *ddp, MPI_Request *req, const char *what) { tdm_comm_wait_request(ddp->eng, req, what); }

/* ---- life cycle ---------------------------------------------------------------------- */

/* This rank's buffers, optimizer state and per-bucket bookkeeping for layout ddp->L, and
 * the table's data/grad pointers bound into them. The only failure is an allocation,
 * which can happen on one rank alone. */
static int alloc_buffers(tdm_ddp *ddp, tdm_error *err) {
    tdm_param_table *t = ddp->t;
    const tdm_ddp_layout *L = &ddp->L;
    const int nb = L->n_buckets;

    const int storage16 = ddp->cfg.bf16_params && ddp->cfg.bf16_storage;
    if (storage16) ddp->bits = tdm_alloc_big((size_t)L->total * sizeof(uint16_t), err);
    else ddp->params = tdm_alloc_big((size_t)L->total * sizeof(float), err);
    ddp->grads = ddp->params || ddp->bits ? tdm_alloc_big((size_t)L->total * sizeof(float), err) : NULL;
    if (!ddp->grads) return -1;
    for (int i = 0; i < t->n; i++)
        if (!t->p[i].trainable) ddp->frozen_numel += t->p[i].numel;
    if (ddp->frozen_numel > 0 && storage16 &&
        !(ddp->frozen_bits = tdm_alloc_big((size_t)ddp->frozen_numel * sizeof(uint16_t), err)))
        return -1;
    if (ddp->frozen_numel > 0 && !storage16 &&
        !(ddp->frozen = tdm_alloc_big((size_t)ddp->frozen_numel * sizeof(float), err)))
        return -1;
    int64_t fo = 0;
    for (int i = 0; i < t->n; i++) {
        tdm_param *p = &t->p[i];
        if (p->trainable) {
            p->data = storage16 ? NULL : ddp->params + L->offset[i];
            p->bits = storage16 ? ddp->bits + L->offset[i] : NULL;
            p->grad = ddp->grads + L->offset[i];
        } else {
            p->data = storage16 ? NULL : ddp->frozen + fo;
            p->bits = storage16 ? ddp->frozen_bits + fo : NULL;
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
    if (ddp->cfg.bf16_params && L->distributed && !ddp->bits &&
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
        a->buf = ddp->params ? ddp->params + bk->offset : NULL; /* NULL: the bits are the parameters */
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
    else MPI_Comm_free(&bucket_comm);
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
                       ddp->rank, (unsigned long long)mine[1], (unsigned long long)mine[2], (unsigned long long)root[1],
                       (unsigned long long)root[2]);
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
    tdm_free_big(ddp->frozen_bits);
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
    const int64_t each = ddp->params ? (int64_t)sizeof(float) : (int64_t)sizeof(uint16_t);
    out->param_bytes = ddp->L.total * each;
    out->grad_bytes = ddp->L.total * (int64_t)sizeof(float);
    out->frozen_bytes = ddp->frozen_numel * each;
    const int per = ddp->cfg.bf16_params ? 3 : 2; /* m, v, and the fp32 main copy of bfloat16 parameters */
    out->optim_bytes = per * ddp->opt_numel * (int64_t)sizeof(float);
    out->optim_bytes_unsharded = per * ddp->L.total * (int64_t)sizeof(float);
    out->param_bits_bytes = ddp->bits && ddp->params ? ddp->L.total * (int64_t)sizeof(uint16_t) : 0;
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
        tdm_sb_printf(out, "parameters: bfloat16 values%s; gradients accumulated and reduced in fp32%s\n",
                      ddp->L.distributed ? ", all-gathered as 16 bits" : "", ddp->params ? "" : "; stored as 16 bits");
    if (ddp->cfg.bf16_params && !ddp->params)
        tdm_sb_printf(out, "weights (bfloat16, frozen ones included) per rank: %.2f MiB\n",
                      (double)(mem.param_bytes + mem.frozen_bytes) / mib);
    tdm_sb_printf(out, "data-parallel progress: %s\n", tdm_ddp_progress_name(ddp->cfg.progress));
}

void tdm_ddp_params_loaded(tdm_ddp *ddp) {
    if (!ddp->cfg.bf16_params) return;
    tdm_ddp__wait_param_gathers(ddp);
    if (ddp->params) {
        tdm_round_to_bf16(ddp->params, ddp->bits, ddp->params, ddp->L.total);
        if (ddp->frozen_numel) tdm_round_to_bf16(ddp->frozen, NULL, ddp->frozen, ddp->frozen_numel);
    } /* else stored as 16 bits: whoever wrote the weights rounded them into the bits */
    for (int b = 0; b < ddp->L.n_buckets; b++) {
        int64_t s, e;
        tdm_ddp_layout_shard(&ddp->L, b, ddp->rank, &s, &e);
        if (ddp->params) memcpy(ddp->main + ddp->state_offset[b], ddp->params + s, (size_t)(e - s) * sizeof(float));
        else tdm_widen_bf16(ddp->main + ddp->state_offset[b], ddp->bits + s, e - s);
    }
}

int tdm_ddp_broadcast_params(tdm_ddp *ddp, int root, tdm_error *err) {
    if (root < 0 || root >= ddp->size)
        return tdm_errorf(err, "broadcast root %d: expected a rank in [0, %d)", root, ddp->size);
    tdm_ddp__wait_param_gathers(ddp);
    const int wide = ddp->params != NULL; /* else stored as 16 bits */
    void *bufs[2] = {wide ? (void *)ddp->params : ddp->bits, wide ? (void *)ddp->frozen : ddp->frozen_bits};
    int64_t lens[2] = {ddp->L.total, ddp->frozen_numel};
    const size_t each = wide ? sizeof(float) : sizeof(uint16_t);
    for (int k = 0; k < 2; k++)
        for (int64_t o = 0; o < lens[k]; o += INT_MAX / 2) {
            int64_t n = lens[k] - o < INT_MAX / 2 ? lens[k] - o : INT_MAX / 2;
            MPI_Request req;
            MPI_Ibcast((char *)bufs[k] + (size_t)o * each, (int)n, wide ? MPI_FLOAT : MPI_UINT16_T, root, ddp->ctl,
                       &req);
            tdm_ddp__ctl_wait(ddp, &req, "parameter broadcast");
        }
    return 0;
}

/* ---- per step ------------------------------------------------------------------------ */

int tdm_ddp_sum_across_ranks(tdm_ddp *ddp, double *vals, int n, tdm_error *err) {
    if (n < 0 || n > 64) return tdm_errorf(err, "sum across ranks: %d values, expected at most 64", n);
    uint64_t t0 = tdm_now_ns();
    MPI_Request req;
    MPI_Iallgather(vals, n, MPI_DOUBLE, ddp->gather_scratch, n, MPI_DOUBLE, ddp->ctl, &req);
    tdm_ddp__ctl_wait(ddp, &req, "sum across ranks");
    tdm_ddp__record_control_wait("sum across ranks", t0);
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
    tdm_ddp__ctl_wait(ddp, &req, "timers report");
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
    out->comm_thread_wait_poll_cpu_ns = tdm_comm_thread_wait_poll_cpu_ns(ddp->eng);
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
