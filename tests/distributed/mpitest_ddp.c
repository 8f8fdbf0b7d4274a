/* mpitest_ddp.c - data parallelism end to end on the synthetic model (synth.h), under
 * mpirun with any number of ranks (scripts/test.sh runs 2; also run with 4,
 * oversubscribed, and with MPICH).
 *
 * Numerical contract checked here:
 * - bitwise: overlap_grad_reduce on vs off, overlap_param_gather on vs off, thread vs
 *   inline progress; every step's loss and grad norm and the final parameters, with
 *   gradient accumulation (2 micro-batches per rank), 30 steps;
 * - close: dp = N vs dp = 1 with N x the accumulation (same global batch), and the
 *   distributed optimizer vs the plain one (summation order differs; tolerances below);
 * - errors: a parameter without gradient, an injected NaN: every rank returns an error
 *   in the same iteration, nobody hangs;
 * - structure: with overlap the first bucket is posted before the backward of the
 *   first decoder layer starts; without it, after backward ends;
 * - forward never reads a parameter before its all-gather has landed;
 * - optimizer state: pieces cover every element once and load at another dp.
 */
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "distributed/comm.h"
#include "distributed/ddp.h"
#include "distributed/optimizer.h"
#include "distributed/probe.h"
#include "distributed/synth.h"
#include "harness.h"
#include "prof/profiler.h"

enum { STEPS = 30, MICRO = 2 };
static const uint64_t SEED = 1234;
static int g_rank, g_size;

typedef struct run_opts {
    tdm_ddp_config cfg;
    MPI_Comm comm;
    int micro; /* micro-batches per rank per step */
    int steps;
    int skip_param;    /* table index that never reports grad_ready, or -1 */
    int late_param;    /* table index that reports grad_ready at the end of backward, or -1 */
    int nan_rank;      /* inject a NaN on this rank ... */
    int64_t nan_iter;  /* ... in this iteration (-1: never) */
    int record_needed; /* hash every parameter as forward reads it */
    int mult_param;    /* table index whose lr_mult is `mult`, or -1 */
    float mult;
    int round_init; /* start from the initial weights rounded to bfloat16 (in fp32 too) */
} run_opts;

typedef struct run_result {
    double loss[STEPS], norm[STEPS];
    float *params; /* final values of every tensor, registration order */
    int64_t n_values;
    int failed_step; /* -1: all steps succeeded */
    char err[1024];
    uint64_t *needed_hash; /* [steps][n_params], first micro-batch's forward */
    tdm_ddp_bucket_trace trace0, trace1, trace_last;
    uint64_t tick_layer0_bwd, tick_bwd_end;
    int n_buckets;
    uint64_t comm_cpu_ns, wall_ns, wait_poll_cpu_ns;
    int comm_nice;
    tdm_ddp_memory mem;
    tdm_timing timing;
} run_result;

typedef struct wrap {
    tdm_param_hooks inner;
    tdm_ddp *ddp;
    synth *s;
    run_result *res;
    int step, recording;
    uint64_t tick_layer0_bwd;
} wrap;

static void w_param_needed(void *ctx, int i) {
    wrap *w = ctx;
    w->inner.param_needed(w->inner.ctx, i);
    if (w->recording) { /* FNV-1a of the bits forward is about to read */
        const tdm_param *p = &w->s->t.p[i];
        uint64_t h = 1469598103934665603ull;
        const unsigned char *b = (const unsigned char *)p->data;
        for (int64_t k = 0; k < p->numel * 4; k++) h = (h ^ b[k]) * 1099511628211ull;
        w->res->needed_hash[(size_t)w->step * (size_t)w->s->t.n + (size_t)i] = h;
    }
}
static void w_grad_ready(void *ctx, int i) {
    wrap *w = ctx;
    w->inner.grad_ready(w->inner.ctx, i);
}
static void w_progress(void *ctx) {
    wrap *w = ctx;
    w->inner.progress(w->inner.ctx);
}
static void w_layer_begin(void *ctx, const char *name, int is_backward) {
    wrap *w = ctx;
    if (is_backward && strcmp(name, "layers.0") == 0) w->tick_layer0_bwd = tdm_ddp_tick(w->ddp);
    if (w->inner.layer_begin) w->inner.layer_begin(w->inner.ctx, name, is_backward);
}
static void w_layer_end(void *ctx, const char *name, int is_backward) {
    wrap *w = ctx;
    if (w->inner.layer_end) w->inner.layer_end(w->inner.ctx, name, is_backward);
}

static run_opts default_opts(int dist, int overlap, int param_gather, tdm_ddp_progress prog) {
    run_opts o;
    memset(&o, 0, sizeof o);
    tdm_ddp_config_default(&o.cfg);
    o.cfg.use_distributed_optimizer = dist;
    o.cfg.overlap_grad_reduce = overlap;
    o.cfg.overlap_param_gather = param_gather;
    o.cfg.progress = prog;
    o.cfg.bucket_size = 300; /* 5 buckets: head | norm, layers.2 | layers.1 | layers.0 | in */
    o.comm = MPI_COMM_WORLD;
    o.micro = MICRO;
    o.steps = STEPS;
    o.skip_param = -1;
    o.late_param = -1;
    o.nan_rank = -1;
    o.nan_iter = -1;
    o.mult_param = -1;
    return o;
}

/* Trains the synthetic model as the trainer would; fills *res (free with run_free). */
static int run(const run_opts *o, run_result *res) {
    memset(res, 0, sizeof *res);
    res->failed_step = -1;
    synth *s = calloc(1, sizeof *s);
    synth_build(s);
    s->skip_grad_ready = o->skip_param;
    s->late_grad_ready = o->late_param;
    int rank, dp;
    MPI_Comm_rank(o->comm, &rank);
    MPI_Comm_size(o->comm, &dp);
    tdm_error err;
    tdm_ddp *ddp = tdm_ddp_create(o->comm, &s->t, &o->cfg, &err);
    if (!ddp) {
        snprintf(res->err, sizeof res->err, "%s", err.msg);
        res->failed_step = 0;
        tdm_param_table_free(&s->t);
        free(s);
        return -1;
    }
    synth_init(s, SEED);
    if (o->round_init)
        for (int i = 0; i < s->t.n; i++) tdm_round_to_bf16(s->t.p[i].data, NULL, s->t.p[i].data, s->t.p[i].numel);
    tdm_ddp_params_loaded(ddp); /* bf16_params: rounds the weights and takes the main copy */
    if (o->mult_param >= 0) s->t.p[o->mult_param].lr_mult = o->mult;
    if (o->nan_iter >= 0) tdm_ddp_inject_nan(ddp, o->nan_rank, o->nan_iter, -1);
    res->n_buckets = tdm_ddp_get_layout(ddp)->n_buckets;
    if (o->record_needed) res->needed_hash = calloc((size_t)o->steps * (size_t)s->t.n, sizeof *res->needed_hash);
    wrap w = {.inner = tdm_ddp_hooks(ddp), .ddp = ddp, .s = s, .res = res};
    tdm_param_hooks hooks = {.ctx = &w,
                             .param_needed = w_param_needed,
                             .grad_ready = w_grad_ready,
                             .progress = w_progress,
                             .layer_begin = w_layer_begin,
                             .layer_end = w_layer_end};
    s->hooks = &hooks;
    tdm_adamw_config hp = {
        .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f, .clip_grad = 1.0f};
    tdm_ddp_stats st0;
    tdm_ddp_get_stats(ddp, &st0);
    uint64_t t0 = tdm_now_ns();
    for (int step = 0; step < o->steps; step++) {
        w.step = step;
        tdm_ddp_timer_start(ddp, TDM_TIMER_FORWARD_BACKWARD);
        tdm_ddp_zero_grad(ddp);
        double sums[2] = {0, 0};
        for (int k = 0; k < o->micro; k++) {
            int g = rank * o->micro + k; /* global micro-batch index */
            w.recording = o->record_needed && k == 0;
            tdm_ddp_set_is_last_microbatch(ddp, k == o->micro - 1);
            synth_data(s, step, g, SEED);
            int64_t tok;
            sums[0] += synth_forward_backward(s, synth_rows(step, g), 1.0f, &tok);
            sums[1] += (double)tok;
        }
        res->tick_bwd_end = tdm_ddp_tick(ddp);
        res->tick_layer0_bwd = w.tick_layer0_bwd;
        if (tdm_ddp_finish_grad_sync(ddp, &err) != 0) {
            snprintf(res->err, sizeof res->err, "%s", err.msg);
            res->failed_step = step;
            break;
        }
        tdm_ddp_timer_stop(ddp, TDM_TIMER_FORWARD_BACKWARD);
        tdm_ddp_get_bucket_trace(ddp, 0, &res->trace0);
        tdm_ddp_get_bucket_trace(ddp, 1, &res->trace1);
        tdm_ddp_get_bucket_trace(ddp, res->n_buckets - 1, &res->trace_last);
        if (tdm_ddp_sum_across_ranks(ddp, sums, 2, &err) != 0 ||
            tdm_ddp_optimizer_step(ddp, &hp, (float)(1.0 / sums[1]), &res->norm[step], &err) != 0) {
            snprintf(res->err, sizeof res->err, "%s", err.msg);
            res->failed_step = step;
            break;
        }
        res->loss[step] = sums[0] / sums[1];
    }
    res->wall_ns = tdm_now_ns() - t0;
    tdm_ddp_stats st1;
    tdm_ddp_get_stats(ddp, &st1);
    res->comm_cpu_ns = st1.comm_thread_cpu_ns - st0.comm_thread_cpu_ns;
    res->wait_poll_cpu_ns = st1.comm_thread_wait_poll_cpu_ns - st0.comm_thread_wait_poll_cpu_ns;
    res->comm_nice = st1.comm_thread_nice;
    tdm_ddp_get_memory(ddp, &res->mem);
    if (res->failed_step < 0) tdm_ddp_timers_report(ddp, o->steps, &res->timing, &err);
    tdm_ddp_wait_params(ddp);
    res->n_values = tdm_param_table_numel(&s->t, 0);
    res->params = malloc((size_t)res->n_values * sizeof(float));
    int64_t off = 0;
    for (int i = 0; i < s->t.n; i++) {
        memcpy(res->params + off, s->t.p[i].data, (size_t)s->t.p[i].numel * sizeof(float));
        off += s->t.p[i].numel;
    }
    tdm_ddp_free(ddp);
    tdm_param_table_free(&s->t);
    free(s);
    return res->failed_step < 0 ? 0 : -1;
}

static void run_free(run_result *r) {
    free(r->params);
    free(r->needed_hash);
}

/* Bitwise equality of two runs' losses, norms and final parameters. */
static void check_bitwise(const run_result *a, const run_result *b, const char *what) {
    CHECK(a->failed_step < 0 && b->failed_step < 0, "%s: runs failed: '%s' / '%s'", what, a->err, b->err);
    CHECK(memcmp(a->loss, b->loss, sizeof a->loss) == 0, "%s: losses differ", what);
    CHECK(memcmp(a->norm, b->norm, sizeof a->norm) == 0, "%s: grad norms differ", what);
    CHECK(a->n_values == b->n_values && memcmp(a->params, b->params, (size_t)a->n_values * sizeof(float)) == 0,
          "%s: final parameters differ", what);
}

static double max_rel_diff_params(const run_result *a, const run_result *b) {
    double worst = 0;
    for (int64_t k = 0; k < a->n_values; k++) {
        double d = fabs((double)a->params[k] - (double)b->params[k]) / (fabs((double)a->params[k]) + 1e-2);
        if (d > worst) worst = d;
    }
    return worst;
}

/* ---- tests ----------------------------------------------------------------------------- */

static void test_learns(void) {
    run_opts o = default_opts(1, 1, 1, TDM_DDP_PROGRESS_THREAD);
    run_result r;
    CHECK(run(&o, &r) == 0, "%s", r.err);
    CHECK(r.n_buckets == 5, "%d buckets", r.n_buckets);
    CHECK(r.loss[STEPS - 1] < 0.8 * r.loss[0], "loss %g -> %g: training does not learn", r.loss[0], r.loss[STEPS - 1]);
    CHECK(r.norm[0] > 0 && isfinite(r.norm[0]), "norm %g", r.norm[0]);
    run_result again;
    run(&o, &again);
    check_bitwise(&r, &again, "the same run twice");
    run_free(&again);
    run_free(&r);
}

/* A parameter's lr_mult scales its AdamW step, learning rate and decoupled weight decay alike
 * (--vision-lr-mult): at 0 it stays where it started, at 0.5 one step moves it half as far,
 * and every other parameter moves bit for bit as without the multiplier. */
static void test_lr_mult(void) {
    synth *s0 = calloc(1, sizeof *s0); /* the initial values, in registration order */
    synth_build(s0);
    int64_t off = 0, total = 0;
    const int P = 3; /* layers.0.fc.weight: 2-D, so weight decay applies */
    for (int i = 0; i < s0->t.n; i++) {
        if (i < P) off += s0->t.p[i].numel;
        total += s0->t.p[i].numel;
    }
    float *init = malloc((size_t)total * sizeof(float));
    for (int i = 0, k = 0; i < s0->t.n; k += (int)s0->t.p[i].numel, i++) s0->t.p[i].data = init + k;
    synth_init(s0, SEED);
    const int64_t n = s0->t.p[P].numel;
    CHECK(!strcmp(s0->t.p[P].name, "layers.0.fc.weight") && !s0->t.p[P].no_decay, "param %d is %s", P, s0->t.p[P].name);

    run_opts o = default_opts(1, 1, 0, TDM_DDP_PROGRESS_THREAD);
    o.steps = 1;
    run_result full, half, zero;
    run(&o, &full);
    o.mult_param = P, o.mult = 0.5f;
    run(&o, &half);
    o.mult = 0.0f;
    run(&o, &zero);
    CHECK(full.failed_step < 0 && half.failed_step < 0 && zero.failed_step < 0, "runs failed");
    CHECK(memcmp(zero.params + off, init + off, (size_t)n * sizeof(float)) == 0, "lr_mult 0: the parameter moved");
    double worst = 0, moved = 0;
    for (int64_t k = off; k < off + n; k++) {
        double df = (double)full.params[k] - init[k], dh = (double)half.params[k] - init[k];
        double e = fabs(dh - 0.5 * df) / (fabs(df) + 1e-7);
        if (e > worst) worst = e;
        moved += fabs(df);
    }
    CHECK(moved > 1e-3 * (double)n, "the parameter barely moved without a multiplier (%g)", moved);
    CHECK(worst < 1e-3, "lr_mult 0.5: step not half of the full one (worst relative error %g)", worst);
    CHECK(memcmp(half.params, full.params, (size_t)off * sizeof(float)) == 0 &&
              memcmp(half.params + off + n, full.params + off + n, (size_t)(total - off - n) * sizeof(float)) == 0,
          "lr_mult on one parameter changed another");
    run_free(&full);
    run_free(&half);
    run_free(&zero);
    free(init);
    tdm_param_table_free(&s0->t);
    free(s0);
}

static void test_overlap_bitwise_plain(void) {
    run_result a, b;
    run_opts o = default_opts(0, 0, 0, TDM_DDP_PROGRESS_THREAD);
    run(&o, &a);
    o.cfg.overlap_grad_reduce = 1;
    run(&o, &b);
    check_bitwise(&a, &b, "all-reduce, overlap off vs on");
    run_free(&a);
    run_free(&b);
}

static void test_overlap_bitwise_distributed(void) {
    run_result a, b, c;
    run_opts o = default_opts(1, 0, 0, TDM_DDP_PROGRESS_THREAD);
    run(&o, &a);
    o.cfg.overlap_grad_reduce = 1;
    run(&o, &b);
    o.cfg.overlap_param_gather = 1;
    run(&o, &c);
    check_bitwise(&a, &b, "distributed, overlap_grad_reduce off vs on");
    check_bitwise(&a, &c, "distributed, + overlap_param_gather");
    run_free(&a);
    run_free(&b);
    run_free(&c);
}

static void test_thread_vs_inline_bitwise(void) {
    for (int dist = 0; dist <= 1; dist++) {
        run_result a, b;
        run_opts o = default_opts(dist, 1, dist, TDM_DDP_PROGRESS_THREAD);
        run(&o, &a);
        o.cfg.progress = TDM_DDP_PROGRESS_INLINE;
        run(&o, &b);
        check_bitwise(&a, &b, dist ? "distributed: thread vs inline" : "all-reduce: thread vs inline");
        run_free(&a);
        run_free(&b);
    }
}

/* dp = N against dp = 1 on MPI_COMM_SELF with N x the micro-batches: the same global
 * batch, only the order of the gradient sums differs. Measured worst relative
 * difference is ~1e-6 on losses and parameters after 30 AdamW steps; we allow 1e-4
 * on parameters (relative to |p| + 0.01) and 1e-5 on losses. */
static void test_dp_matches_single_rank(void) {
    for (int dist = 0; dist <= 1; dist++) {
        run_result a, b;
        run_opts o = default_opts(dist, 1, 0, TDM_DDP_PROGRESS_THREAD);
        run(&o, &a);
        o.comm = MPI_COMM_SELF;
        o.micro = MICRO * g_size;
        run(&o, &b);
        CHECK(a.failed_step < 0 && b.failed_step < 0, "%s / %s", a.err, b.err);
        double worst_loss = 0;
        for (int s = 0; s < STEPS; s++) {
            double d = fabs(a.loss[s] - b.loss[s]) / fabs(b.loss[s]);
            if (d > worst_loss) worst_loss = d;
        }
        double worst_p = max_rel_diff_params(&a, &b);
        CHECK(worst_loss <= 1e-5, "dist %d: loss rel diff %g", dist, worst_loss);
        CHECK(worst_p <= 1e-4, "dist %d: param rel diff %g", dist, worst_p);
        if (g_rank == 0)
            printf("  dp=%d vs dp=1 (%s): max rel diff loss %.2e, params %.2e\n", g_size,
                   dist ? "distributed" : "plain", worst_loss, worst_p);
        run_free(&a);
        run_free(&b);
    }
}

/* bfloat16 parameters (--bf16): every weight the model computes with stays a bfloat16 value; the
 * overlap flags and progress modes change no bit; after one step from bfloat16 weights the
 * parameters are the fp32 optimizer's result rounded to bfloat16 (the main copy took the fp32
 * path's exact update, and the all-gather of 16 bits brought every rank's shard back); over
 * several steps the run stays close to fp32 but not equal to it; the memory accounts for the main
 * copy and the 16-bit gather buffer. */
static void test_bf16_params(void) {
    run_result a, b, c, f;
    run_opts o = default_opts(1, 0, 0, TDM_DDP_PROGRESS_THREAD);
    o.cfg.bf16_params = 1;
    run(&o, &a);
    o.cfg.overlap_grad_reduce = o.cfg.overlap_param_gather = 1;
    run(&o, &b);
    o.cfg.progress = TDM_DDP_PROGRESS_INLINE;
    run(&o, &c);
    check_bitwise(&a, &b, "bf16: both overlap flags");
    check_bitwise(&a, &c, "bf16: inline progress");
    int64_t not_bf16 = 0;
    for (int64_t k = 0; k < a.n_values; k++) {
        uint32_t u;
        memcpy(&u, &a.params[k], 4);
        not_bf16 += (u & 0xffffu) != 0;
    }
    CHECK(a.failed_step < 0 && not_bf16 == 0, "%lld of %lld final values are not bfloat16 (%s)", (long long)not_bf16,
          (long long)a.n_values, a.err);
    CHECK(a.mem.optim_bytes == 3 * (a.mem.param_bytes / g_size) && a.mem.param_bits_bytes * 2 == a.mem.param_bytes,
          "memory: optimizer %lld bytes, 16-bit buffer %lld, parameters %lld", (long long)a.mem.optim_bytes,
          (long long)a.mem.param_bits_bytes, (long long)a.mem.param_bytes);
    run_opts of = default_opts(1, 0, 0, TDM_DDP_PROGRESS_THREAD);
    of.round_init = 1;
    run(&of, &f);
    double wp = max_rel_diff_params(&a, &f), wl = fabs(a.loss[STEPS - 1] - f.loss[STEPS - 1]) / f.loss[STEPS - 1];
    /* bfloat16 keeps 8 significant bits: the runs part, but the loss they reach stays within 1% */
    CHECK(f.failed_step < 0 && wp > 0 && wl < 1e-2, "bf16 vs fp32 after %d steps: params max rel diff %g, loss %g",
          STEPS, wp, wl);
    run_free(&f);
    run_free(&b);
    /* one step from the same bfloat16 weights: bf16 == round(fp32), element for element */
    o = default_opts(1, 1, 1, TDM_DDP_PROGRESS_THREAD);
    o.cfg.bf16_params = 1;
    o.steps = 1;
    of.steps = 1;
    run(&o, &b);
    run(&of, &f);
    int64_t differ = 0;
    for (int64_t k = 0; k < f.n_values; k++) {
        float r;
        tdm_round_to_bf16(&r, NULL, &f.params[k], 1);
        differ += memcmp(&r, &b.params[k], 4) != 0;
    }
    CHECK(b.failed_step < 0 && f.failed_step < 0 && differ == 0 && b.loss[0] == f.loss[0] && b.norm[0] == f.norm[0],
          "one step: %lld of %lld parameters are not the fp32 step's rounded", (long long)differ,
          (long long)f.n_values);
    if (g_rank == 0)
        printf("  bf16 vs fp32 after %d steps: max rel diff of parameters %.2e, of the loss %.2e\n", STEPS, wp, wl);
    run_free(&a);
    run_free(&b);
    run_free(&c);
    run_free(&f);
}

static void test_distributed_matches_plain(void) {
    run_result a, b;
    run_opts o = default_opts(0, 1, 0, TDM_DDP_PROGRESS_THREAD);
    run(&o, &a);
    o.cfg.use_distributed_optimizer = 1;
    run(&o, &b);
    CHECK(a.failed_step < 0 && b.failed_step < 0, "%s / %s", a.err, b.err);
    double worst = 0;
    for (int s = 0; s < STEPS; s++) {
        double d = fabs(a.norm[s] - b.norm[s]) / a.norm[s];
        if (d > worst) worst = d;
        /* the gradients are bitwise the same sums; only the norm's summation differs */
    }
    double wp = max_rel_diff_params(&a, &b);
    CHECK(worst <= 1e-6, "grad norm rel diff %g", worst);
    CHECK(wp <= 1e-4, "param rel diff %g", wp);
    if (g_rank == 0) printf("  distributed vs plain: max rel diff grad norm %.2e, params %.2e\n", worst, wp);
    /* memory: m and v for 1/dp of the (padded) buffer */
    CHECK(b.mem.optim_bytes * g_size == b.mem.optim_bytes_unsharded, "optimizer bytes %lld x %d != %lld",
          (long long)b.mem.optim_bytes, g_size, (long long)b.mem.optim_bytes_unsharded);
    CHECK(a.mem.optim_bytes == a.mem.optim_bytes_unsharded, "plain optimizer holds everything");
    CHECK(b.mem.frozen_bytes == SY_H * 4 && b.mem.grad_bytes == b.mem.param_bytes, "frozen %lld",
          (long long)b.mem.frozen_bytes);
    run_free(&a);
    run_free(&b);
}

/* Every rank ends every step with the same parameters, loss and grad norm, bit for bit:
 * with the plain optimizer each rank updates its own full copy from its own all-reduced
 * gradients, so a reduction whose result differed between ranks in one bit would let the
 * replicas drift apart without any error. */
static void test_replicas_identical(void) {
    for (int dist = 0; dist <= 1; dist++)
        for (int prog = 0; prog <= 1; prog++) {
            run_result r;
            run_opts o = default_opts(dist, 1, dist, prog ? TDM_DDP_PROGRESS_INLINE : TDM_DDP_PROGRESS_THREAD);
            CHECK(run(&o, &r) == 0, "%s", r.err);
            float *p0 = malloc((size_t)r.n_values * sizeof(float));
            double ln0[2 * STEPS];
            memcpy(p0, r.params, (size_t)r.n_values * sizeof(float));
            memcpy(ln0, r.loss, sizeof r.loss);
            memcpy(ln0 + STEPS, r.norm, sizeof r.norm);
            MPI_Bcast(p0, (int)r.n_values, MPI_FLOAT, 0, MPI_COMM_WORLD);
            MPI_Bcast(ln0, 2 * STEPS, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            int differ[2] = {memcmp(p0, r.params, (size_t)r.n_values * sizeof(float)) != 0,
                             memcmp(ln0, r.loss, sizeof r.loss) != 0 ||
                                 memcmp(ln0 + STEPS, r.norm, sizeof r.norm) != 0};
            MPI_Allreduce(MPI_IN_PLACE, differ, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            CHECK(!differ[0], "%s, %s progress: the ranks' parameters differ after %d steps",
                  dist ? "distributed" : "plain", prog ? "inline" : "thread", STEPS);
            CHECK(!differ[1], "%s: the ranks' losses or grad norms differ", dist ? "distributed" : "plain");
            free(p0);
            run_free(&r);
        }
}

static void test_missing_gradient_is_an_error(void) {
    for (int overlap = 0; overlap <= 1; overlap++) {
        run_opts o = default_opts(1, overlap, 0, TDM_DDP_PROGRESS_THREAD);
        o.skip_param = 7; /* layers.1.fc.bias: in.w, in.b, layers.0 x3, layers.1.norm, .fc.weight, .fc.bias */
        run_result r;
        CHECK(run(&o, &r) != 0, "a missing gradient went unnoticed");
        CHECK(r.failed_step == 0, "failed at step %d", r.failed_step);
        CHECK(strstr(r.err, "layers.1.fc.bias") && strstr(r.err, "received no gradient"), "message: %s", r.err);
        run_free(&r);
    }
}

static void test_nan_injection_stops_every_rank(void) {
    for (int overlap = 0; overlap <= 1; overlap++) {
        run_opts o = default_opts(overlap, overlap, 0, overlap ? TDM_DDP_PROGRESS_THREAD : TDM_DDP_PROGRESS_INLINE);
        o.nan_rank = g_size - 1;
        o.nan_iter = 3;
        run_result r;
        CHECK(run(&o, &r) != 0, "NaN went unnoticed");
        CHECK(r.failed_step == 2, "failed at step %d (iteration 3 expected)", r.failed_step);
        char want[64];
        snprintf(want, sizeof want, "rank %d, iteration 3", g_size - 1);
        CHECK(strstr(r.err, want) && strstr(r.err, "bucket 1") && strstr(r.err, "head.weight"), "message: %s", r.err);
        if (g_rank == 0 && overlap) printf("  NaN message: %s\n", r.err);
        run_free(&r);
    }
}

/* The overlap is structural: compare the bucket posts with ticks taken in backward. */
static void test_structural_overlap_order(void) {
    for (int overlap = 0; overlap <= 1; overlap++)
        for (int prog = 0; prog <= 1; prog++) {
            run_opts o = default_opts(1, overlap, 0, prog ? TDM_DDP_PROGRESS_INLINE : TDM_DDP_PROGRESS_THREAD);
            o.steps = 3;
            run_result r;
            CHECK(run(&o, &r) == 0, "%s", r.err);
            CHECK(r.trace0.ready_seq > 0 && r.trace0.ready_seq < r.tick_layer0_bwd, "bucket 0 ready at %llu",
                  (unsigned long long)r.trace0.ready_seq);
            if (overlap) {
                CHECK(r.trace0.post_seq < r.tick_layer0_bwd,
                      "overlap on: bucket 0 posted at tick %llu, first decoder layer backward began at %llu",
                      (unsigned long long)r.trace0.post_seq, (unsigned long long)r.tick_layer0_bwd);
                CHECK(r.trace_last.post_seq < r.tick_bwd_end, "overlap on: last bucket posted after backward");
            } else {
                CHECK(r.trace0.post_seq > r.tick_bwd_end,
                      "overlap off: bucket 0 posted at tick %llu, backward ended at %llu",
                      (unsigned long long)r.trace0.post_seq, (unsigned long long)r.tick_bwd_end);
            }
            CHECK(r.trace0.post_ns <= r.trace0.start_ns && r.trace0.start_ns <= r.trace0.done_ns,
                  "post/start/done times out of order");
            run_free(&r);
        }
}

/* Buckets are posted in index order even when a later one is ready first (here the
 * head, bucket 0, reports last, like a tied embedding): no rank can issue collectives
 * in a different order, nothing hangs, and the numbers do not change. */
static void test_bucket_order_kept_when_ready_out_of_order(void) {
    synth tmp;
    synth_build(&tmp);
    int head = tmp.head_w;
    tdm_param_table_free(&tmp.t);
    run_result a, b;
    run_opts o = default_opts(1, 0, 0, TDM_DDP_PROGRESS_THREAD);
    run(&o, &a);
    o.cfg.overlap_grad_reduce = 1;
    o.late_param = head;
    run(&o, &b);
    check_bitwise(&a, &b, "late bucket 0 with overlap vs no overlap");
    CHECK(b.trace1.ready_seq < b.tick_layer0_bwd, "bucket 1 should be ready early");
    CHECK(b.trace0.post_seq > b.tick_layer0_bwd && b.trace1.post_seq > b.trace0.post_seq,
          "bucket 1 posted at %llu before bucket 0 at %llu", (unsigned long long)b.trace1.post_seq,
          (unsigned long long)b.trace0.post_seq);
    run_free(&a);
    run_free(&b);
}

/* Forward must read exactly the values the synchronous gather would have produced. */
static void test_param_gather_never_read_early(void) {
    run_result a, b;
    run_opts o = default_opts(1, 1, 0, TDM_DDP_PROGRESS_THREAD);
    o.record_needed = 1;
    run(&o, &a);
    o.cfg.overlap_param_gather = 1;
    run(&o, &b);
    synth s;
    synth_build(&s);
    int n = s.t.n;
    int bad = 0;
    for (int k = 0; k < STEPS * n; k++)
        if (s.t.p[k % n].trainable && a.needed_hash[k] != b.needed_hash[k]) bad++;
    CHECK(bad == 0, "%d (step, parameter) reads saw values other than the synchronous gather's", bad);
    CHECK(a.needed_hash[n] != a.needed_hash[0], "hashes do not change between steps: the check is vacuous");
    tdm_param_table_free(&s.t);
    run_free(&a);
    run_free(&b);
}

static void test_timers_report(void) {
    for (int pg = 0; pg <= 1; pg++) {
        run_opts o = default_opts(1, 1, pg, TDM_DDP_PROGRESS_THREAD);
        o.steps = 4;
        run_result r;
        CHECK(run(&o, &r) == 0, "%s", r.err);
        CHECK(r.timing.valid[TDM_TIMER_FORWARD_BACKWARD] && r.timing.valid[TDM_TIMER_ALL_GRADS_SYNC] &&
                  r.timing.valid[TDM_TIMER_OPTIMIZER],
              "timers missing");
        CHECK(r.timing.valid[TDM_TIMER_PARAMS_ALL_GATHER] == !pg, "params-all-gather only when synchronous");
        CHECK(r.timing.min_ms[TDM_TIMER_OPTIMIZER] <= r.timing.max_ms[TDM_TIMER_OPTIMIZER], "min > max");
        if (g_rank == 0 && pg) {
            tdm_strbuf sb;
            tdm_sb_init(&sb);
            tdm_timing_format(&r.timing, &sb);
            printf("%s", sb.data);
            tdm_sb_free(&sb);
        }
        run_free(&r);
    }
}

/* Optimizer state written at dp = N loads at dp = 1 (and vice versa would work the
 * same way): the stored pieces cover every element once, and loading keeps exactly
 * the owned intersection. */
static void test_optimizer_state_reshard(void) {
    synth *s = calloc(1, sizeof *s);
    synth_build(s);
    tdm_error err;
    run_opts o = default_opts(1, 1, 0, TDM_DDP_PROGRESS_INLINE);
    tdm_ddp *ddp = tdm_ddp_create(MPI_COMM_WORLD, &s->t, &o.cfg, &err);
    CHECK(ddp != NULL, "%s", err.msg);
    if (!ddp) return;
    /* buffers: trainable tensors are views at their layout offsets, frozen ones are not */
    const tdm_ddp_layout *L = tdm_ddp_get_layout(ddp);
    for (int i = 0; i < s->t.n; i++) {
        const tdm_param *p = &s->t.p[i];
        if (p->trainable)
            CHECK(p->data == tdm_ddp_param_buffer(ddp) + L->offset[i] &&
                      p->grad == tdm_ddp_grad_buffer(ddp) + L->offset[i],
                  "%s is not a view into the buffers", p->name);
        else CHECK(p->grad == NULL && p->data != NULL, "frozen %s", p->name);
    }
    /* start-up text */
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_ddp_describe(ddp, &sb);
    char frac[32];
    snprintf(frac, sizeof frac, "(1/%d of ", g_size);
    CHECK(strstr(sb.data, "Setting up DistributedDataParallel with config DistributedDataParallelConfig(") &&
              strstr(sb.data, "Number of buckets for gradient all-reduce / reduce-scatter: 5\n") &&
              strstr(sb.data, "Params for bucket 1 (407 elements, ") && strstr(sb.data, "\thead.weight\n") &&
              strstr(sb.data, frac),
          "describe:\n%s", sb.data);
    tdm_sb_free(&sb);
    /* broadcast: every rank ends with rank 0's values, frozen tensors included */
    for (int i = 0; i < s->t.n; i++)
        for (int64_t e = 0; e < s->t.p[i].numel; e++) s->t.p[i].data[e] = (float)(g_rank * 1000 + i) + 0.5f * (float)e;
    CHECK(tdm_ddp_broadcast_params(ddp, 0, &err) == 0, "%s", err.msg);
    int wrong = 0;
    for (int i = 0; i < s->t.n; i++)
        for (int64_t e = 0; e < s->t.p[i].numel; e++) wrong += s->t.p[i].data[e] != (float)i + 0.5f * (float)e;
    CHECK(wrong == 0, "%d values differ from rank 0's after broadcast", wrong);
    /* fill the state with a value that names its (param, element) */
    int np = tdm_ddp_opt_pieces(ddp, NULL, 0);
    tdm_ddp_opt_piece *pc = calloc((size_t)np, sizeof *pc);
    tdm_ddp_opt_pieces(ddp, pc, np);
    float *m = tdm_ddp_opt_m(ddp), *v = tdm_ddp_opt_v(ddp);
    int64_t mine = 0;
    for (int k = 0; k < np; k++) {
        for (int64_t e = 0; e < pc[k].count; e++) {
            m[pc[k].state_offset + e] = (float)(pc[k].param * 10000 + pc[k].param_offset + e);
            v[pc[k].state_offset + e] = -(float)(pc[k].param * 10000 + pc[k].param_offset + e);
        }
        mine += pc[k].count;
    }
    /* every trainable element exactly once across ranks */
    int64_t total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    CHECK(total == tdm_param_table_numel(&s->t, 1), "pieces cover %lld of %lld elements", (long long)total,
          (long long)tdm_param_table_numel(&s->t, 1));

    /* a dp = 1 optimizer (plain layout) loads every rank's pieces */
    synth *s1 = calloc(1, sizeof *s1);
    synth_build(s1);
    tdm_ddp_config c1 = o.cfg;
    c1.use_distributed_optimizer = 0;
    tdm_ddp *one = tdm_ddp_create(MPI_COMM_SELF, &s1->t, &c1, &err);
    CHECK(one != NULL, "%s", err.msg);
    for (int r = 0; r < g_size && one; r++) {
        int n = np;
        MPI_Bcast(&n, 1, MPI_INT, r, MPI_COMM_WORLD);
        tdm_ddp_opt_piece *rp = r == g_rank ? pc : calloc((size_t)n, sizeof *rp);
        MPI_Bcast(rp, n * (int)sizeof *rp, MPI_BYTE, r, MPI_COMM_WORLD);
        for (int k = 0; k < n; k++) {
            float *bm = malloc((size_t)rp[k].count * sizeof(float)), *bv = malloc((size_t)rp[k].count * sizeof(float));
            if (r == g_rank) {
                memcpy(bm, m + rp[k].state_offset, (size_t)rp[k].count * sizeof(float));
                memcpy(bv, v + rp[k].state_offset, (size_t)rp[k].count * sizeof(float));
            }
            MPI_Bcast(bm, (int)rp[k].count, MPI_FLOAT, r, MPI_COMM_WORLD);
            MPI_Bcast(bv, (int)rp[k].count, MPI_FLOAT, r, MPI_COMM_WORLD);
            CHECK(tdm_ddp_opt_load_piece(one, rp[k].param, rp[k].param_offset, rp[k].count, bm, bv, &err) == 0, "%s",
                  err.msg);
            free(bm);
            free(bv);
        }
        if (rp != pc) free(rp);
    }
    if (one) {
        int n1 = tdm_ddp_opt_pieces(one, NULL, 0);
        tdm_ddp_opt_piece *p1 = calloc((size_t)n1, sizeof *p1);
        tdm_ddp_opt_pieces(one, p1, n1);
        int bad = 0;
        float *m1 = tdm_ddp_opt_m(one), *v1 = tdm_ddp_opt_v(one);
        for (int k = 0; k < n1; k++)
            for (int64_t e = 0; e < p1[k].count; e++) {
                float want = (float)(p1[k].param * 10000 + p1[k].param_offset + e);
                bad += m1[p1[k].state_offset + e] != want || v1[p1[k].state_offset + e] != -want;
            }
        CHECK(bad == 0, "%d state elements wrong after loading at dp=1", bad);
        float dummy[4] = {0};
        CHECK(tdm_ddp_opt_load_piece(one, s1->fc_w[0], 0, 1, dummy, dummy, &err) == 0, "%s", err.msg);
        CHECK(tdm_ddp_opt_load_piece(one, s1->norm_w[1], 0, 1, dummy, dummy, &err) != 0 && strstr(err.msg, "frozen"),
              "loading state of a frozen parameter: %s", err.msg);
        CHECK(tdm_ddp_opt_load_piece(one, s1->in_b, 30, 10, dummy, dummy, &err) != 0 && strstr(err.msg, "in.bias"),
              "out-of-range piece: %s", err.msg);
        /* offset + count past INT64_MAX once wrapped negative and passed the range check */
        CHECK(tdm_ddp_opt_load_piece(one, s1->in_b, 1, INT64_MAX, dummy, dummy, &err) != 0 &&
                  strstr(err.msg, "in.bias"),
              "piece whose end overflows: %s", err.msg);
        free(p1);
    }
    tdm_ddp_free(one);
    tdm_param_table_free(&s1->t);
    free(s1);
    free(pc);
    tdm_ddp_free(ddp);
    tdm_param_table_free(&s->t);
    free(s);
}

/* Level-1 profiler events: per bucket, a post mark and a completed collective on the
 * comm thread's track; layers from the hooks on the compute track. */
static void test_profiler_events(void) {
    for (int prog = 0; prog <= 1; prog++) {
        run_opts o = default_opts(1, 1, 0, prog ? TDM_DDP_PROGRESS_INLINE : TDM_DDP_PROGRESS_THREAD);
        o.steps = 3;
        tdm_prof_record_start(1, 100000);
        run_result r;
        CHECK(run(&o, &r) == 0, "%s", r.err);
        tdm_prof_record_stop();
        tdm_prof_collection c;
        tdm_prof_collect(&c);
        int rs = 0, ag = 0, posted = 0, layers = 0, off_track = 0;
        for (int64_t k = 0; k < c.n_events; k++) {
            const tdm_prof_event *e = &c.events[k];
            const char *track = e->tid >= 0 && e->tid < c.n_threads ? c.threads[e->tid].name : "";
            if (e->cat == TDM_PROF_COMM && strcmp(e->name, "grad reduce-scatter") == 0) rs++;
            if (e->cat == TDM_PROF_COMM && strcmp(e->name, "param all-gather") == 0) ag++;
            if (e->cat == TDM_PROF_COMM && !prog && strcmp(track, "comm") != 0) off_track++;
            if (e->cat == TDM_PROF_MARK && strcmp(e->name, "grad bucket posted") == 0) posted++;
            if (e->cat == TDM_PROF_LAYER) layers++;
            CHECK(e->t1_ns >= e->t0_ns, "event %s ends before it starts", e->name);
        }
        CHECK(rs == 3 * r.n_buckets && ag == 3 * r.n_buckets && posted == 3 * r.n_buckets,
              "%s: %d reduce-scatters, %d all-gathers, %d posts for 3 steps of %d buckets", prog ? "inline" : "thread",
              rs, ag, posted, r.n_buckets);
        CHECK(off_track == 0, "%d collectives recorded outside the comm thread's track", off_track);
        CHECK(layers == 3 * MICRO * 2 * (SY_L + 2), "%d layer events", layers);
        tdm_prof_collection_free(&c);
        run_free(&r);
    }
}

/* The small blocking collectives of a step (the ranks agreeing after the gradient sync,
 * the gradient norm, the loss sums) are waits for the slowest rank, not compute: each is
 * recorded as a WAIT on the calling thread, so the overlap analysis subtracts it from
 * compute. Rank 1 arrives at a sum across ranks 50 ms late: rank 0's wait must show it. */
static void test_control_collectives_are_waits(void) {
    run_opts o = default_opts(1, 1, 1, TDM_DDP_PROGRESS_THREAD);
    o.steps = 3;
    tdm_prof_record_start(1, 100000);
    run_result r;
    CHECK(run(&o, &r) == 0, "%s", r.err);
    synth *s = calloc(1, sizeof *s);
    synth_build(s);
    tdm_error err;
    tdm_ddp *ddp = tdm_ddp_create(MPI_COMM_WORLD, &s->t, &o.cfg, &err);
    CHECK(ddp != NULL, "%s", err.msg);
    double v = 1.0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 1) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (ddp) CHECK(tdm_ddp_sum_across_ranks(ddp, &v, 1, &err) == 0 && v == g_size, "sum %g", v);
    tdm_prof_record_stop();
    tdm_prof_collection c;
    tdm_prof_collect(&c);
    int agree = 0, sums = 0;
    double late_ms = 0;
    for (int64_t k = 0; k < c.n_events; k++) {
        const tdm_prof_event *e = &c.events[k];
        if (e->cat != TDM_PROF_WAIT) continue;
        if (!strcmp(e->name, "grad sync: ranks agree")) agree++;
        if (!strcmp(e->name, "sum across ranks")) {
            sums++;
            late_ms = (double)(e->t1_ns - e->t0_ns) / 1e6; /* the last one is the late call */
        }
    }
    CHECK(agree == 3, "%d waits for the ranks' agreement in 3 steps", agree);
    CHECK(sums == 3 * 2 + 1, "%d sums across ranks recorded as waits (3 steps of a loss sum and a gradient norm, + 1)",
          sums);
    if (g_rank == 0 && g_size > 1) /* alone, rank 0 has nobody to wait for */
        CHECK(late_ms > 10.0, "rank 0 waited %.1f ms for a rank 50 ms late", late_ms);
    tdm_prof_collection_free(&c);
    tdm_ddp_free(ddp);
    tdm_param_table_free(&s->t);
    free(s);
    run_free(&r);
}

/* Not an assertion (no timing tests): how much CPU the communication thread used. */
static void test_report_comm_thread_cpu(void) {
    run_opts o = default_opts(1, 1, 1, TDM_DDP_PROGRESS_THREAD);
    run_result r;
    CHECK(run(&o, &r) == 0, "%s", r.err);
    double cpu_ms = (double)r.comm_cpu_ns / 1e6 / STEPS, wall_ms = (double)r.wall_ns / 1e6 / STEPS;
    double all[2] = {cpu_ms, wall_ms}, mx[2];
    MPI_Allreduce(all, mx, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("  comm thread CPU per step: %.3f ms (max over ranks) against %.3f ms wall per step\n", mx[0], mx[1]);
    CHECK(r.comm_cpu_ns > 0, "the communication thread's CPU clock did not advance");
    /* The thread asks for its niceness; without privilege it cannot go below the process's. */
    const int base = getpriority(PRIO_PROCESS, 0);
    const int want = TDM_DDP_COMM_THREAD_NICE > base ? TDM_DDP_COMM_THREAD_NICE : base;
    CHECK(r.comm_nice == want || (r.comm_nice == TDM_DDP_COMM_THREAD_NICE && geteuid() == 0),
          "communication thread at nice %d, expected the default %d (process at %d)", r.comm_nice,
          TDM_DDP_COMM_THREAD_NICE, base);
    run_free(&r);
    o.cfg.comm_thread_nice = 13;
    o.steps = 2;
    CHECK(run(&o, &r) == 0, "%s", r.err);
    CHECK(r.comm_nice == (13 > base ? 13 : base) || (r.comm_nice == 13 && geteuid() == 0),
          "--comm-thread-nice 13: the thread runs at nice %d", r.comm_nice);
    run_free(&r);
    o.cfg.comm_thread_nice = 20;
    tdm_error err;
    CHECK(tdm_ddp_config_check(&o.cfg, &err) != 0 && strstr(err.msg, "expected 0 to 19"), "nice 20 accepted");
}

/* Sets (v non-NULL) or unsets an environment variable; returns its old value (malloc'd, or NULL). */
static char *swap_env(const char *name, const char *v) {
    const char *old = getenv(name);
    char *keep = old ? strdup(old) : NULL;
    if (v) setenv(name, v, 1);
    else unsetenv(name);
    return keep;
}

static void restore_env(const char *name, char *keep) {
    free(swap_env(name, keep));
    free(keep);
}

/* How a wait that blocks compute polls: TANDEM_WAIT_POLL, else back to back where the host's ranks fit its
 * cores; the same bits either way, and the polls while compute waited counted apart (within the thread's CPU,
 * and none with the back-off). */
static void test_wait_poll(void) {
    char *poll = swap_env("TANDEM_WAIT_POLL", NULL), *ompi = swap_env("OMPI_COMM_WORLD_LOCAL_SIZE", "100000"),
         *hydra = swap_env("MPI_LOCALNRANKS", NULL);
    CHECK(tdm_comm_default_wait_spin() == 0, "100000 ranks on this host: the waits should back off");
    char why[160];
    tdm_comm_describe_wait_poll(why, sizeof why);
    CHECK(!strncmp(why, "back-off (100000 ranks on this host, ", 37), "described as '%s'", why);
    free(swap_env("OMPI_COMM_WORLD_LOCAL_SIZE", NULL));
    free(swap_env("MPI_LOCALNRANKS", "1"));
    CHECK(tdm_comm_default_wait_spin() == 1, "one rank on this host: the waits should poll back to back");
    free(swap_env("TANDEM_WAIT_POLL", "backoff"));
    CHECK(tdm_comm_default_wait_spin() == 0, "TANDEM_WAIT_POLL=backoff not followed");
    tdm_comm_describe_wait_poll(why, sizeof why);
    CHECK(!strcmp(why, "back-off (TANDEM_WAIT_POLL=backoff)"), "described as '%s'", why);
    free(swap_env("MPI_LOCALNRANKS", "100000"));
    free(swap_env("TANDEM_WAIT_POLL", "spin"));
    CHECK(tdm_comm_default_wait_spin() == 1, "TANDEM_WAIT_POLL=spin not followed");
    for (int dist = 0; dist <= 1; dist++) {
        run_result a, b;
        run_opts o = default_opts(dist, 0, 0, TDM_DDP_PROGRESS_THREAD); /* no overlap: every collective waited */
        run(&o, &a);
        free(swap_env("TANDEM_WAIT_POLL", "backoff"));
        run(&o, &b);
        free(swap_env("TANDEM_WAIT_POLL", "spin"));
        check_bitwise(&a, &b,
                      dist ? "distributed: waits polled back to back vs backing off"
                           : "all-reduce: waits polled back to back vs backing off");
        CHECK(a.wait_poll_cpu_ns <= a.comm_cpu_ns, "polls while compute waited: %llu ns of the thread's %llu",
              (unsigned long long)a.wait_poll_cpu_ns, (unsigned long long)a.comm_cpu_ns);
        CHECK(b.wait_poll_cpu_ns == 0, "backing off, %llu ns counted as polls while compute waited",
              (unsigned long long)b.wait_poll_cpu_ns);
        run_free(&a);
        run_free(&b);
    }
    restore_env("TANDEM_WAIT_POLL", poll);
    restore_env("OMPI_COMM_WORLD_LOCAL_SIZE", ompi);
    restore_env("MPI_LOCALNRANKS", hydra);
}

/* A communication engine on a duplicate of the world (mode 0: a thread, 1: inline), NULL after a failed check. */
static tdm_comm *test_engine(int mode, int max_ops) {
    tdm_error err = {{0}};
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    tdm_comm *c = tdm_comm_create(dup, (tdm_ddp_progress)mode, max_ops, 0, &err);
    CHECK(c != NULL, "%s", err.msg);
    return c;
}

/* An allocation that fails on one rank alone (the last rank's frozen storage: frozen
 * tensors are outside the layout, so the layouts still agree) fails tdm_ddp_create on
 * every rank, naming that rank and its reason (whichever rank's message the caller
 * prints, it says why); the other ranks used to wait in MPI_Comm_dup for good. */
/* tdm_comm_test: never blocks, says DONE once the op is (a thread's progress, or inline the progress calls), and
 * a wait after it returns at once; the beside-compute probe that uses it agrees on the ops it posts on every
 * rank (no hang), in both modes, and moves collectives while it computes. */
static void test_comm_test_and_beside_probe(void) {
    for (int mode = 0; mode <= 1; mode++) {
        tdm_error err = {{0}};
        tdm_comm *c = test_engine(mode, 2);
        if (!c) continue;
        float buf[2 * 64];
        for (int i = 0; i < 2 * 64; i++) buf[i] = (float)(g_rank + 1);
        tdm_comm_op op = {.kind = TDM_COMM_ALLREDUCE, .buf = buf, .count = 2 * 64, .name = "test"};
        CHECK(tdm_comm_test(c, &op) == 0, "an op never posted is not done");
        tdm_comm_post(c, &op);
        uint64_t t0 = tdm_now_ns();
        while (!tdm_comm_test(c, &op) && tdm_now_ns() - t0 < 30000000000ull) {
            tdm_comm_progress(c);
            sched_yield();
        }
        CHECK(tdm_comm_test(c, &op) == 1, "%s: not done after 30 s", mode ? "inline" : "thread");
        CHECK(tdm_comm_wait(c, &op) == 0, "a wait after the test said done blocked");
        int world = 1;
        MPI_Comm_size(MPI_COMM_WORLD, &world);
        const float want = (float)(world * (world + 1) / 2);
        CHECK(buf[0] == want && buf[127] == want, "the all-reduce gave %g, expected %g", buf[0], want);
        CHECK(tdm_comm_test(c, &op) == 0, "a waited op is idle, not done");
        tdm_comm_free(c);
        tdm_beside_cost b;
        CHECK(tdm_probe_beside_compute(MPI_COMM_WORLD, (tdm_ddp_progress)mode, 10, 0.25, 100, 2, 0, &b, &err) == 0,
              "%s", err.msg);
        CHECK(b.mb > 0.2 && b.mb <= 0.25 && b.chunk_ms > 0 && b.compute_ms > 0, "mb %g chunk %g ms compute %g ms", b.mb,
              b.chunk_ms, b.compute_ms);
        CHECK(b.moved_mb > 0 && isfinite(b.lost_us_per_mb), "%s: moved %g MB, lost %g us/MB",
              mode ? "inline" : "thread", b.moved_mb, b.lost_us_per_mb);
        /* a speed needs 3 completions on every rank (a sanitizer's slow thread may not make them) */
        CHECK(isnan(b.speed) || (b.speed > 0 && b.speed < 10), "%s: speed %g", mode ? "inline" : "thread", b.speed);
    }
}

/* The all-gathers by tandem's exchange and by MPI_Iallgather, in both progress modes, float and bfloat16 (their
 * widening included), interleaved with reduce-scatters on the same engine: every rank ends with every rank's block,
 * the same bits both ways. */
static void test_allgather_both_ways(void) {
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    enum { N = 300 }; /* elements per rank */
    for (int mode = 0; mode <= 1; mode++)
        for (int own = 0; own <= 1; own++) {
            tdm_comm *c = test_engine(mode, 3);
            if (!c) continue;
            tdm_comm_set_reduce_scatter(c, own);
            float *f = calloc((size_t)N * world, sizeof *f), *w = calloc((size_t)N * world, sizeof *w),
                  *rs = calloc((size_t)N * world, sizeof *rs);
            uint16_t *bits = calloc((size_t)N * world, sizeof *bits);
            for (int i = 0; i < N; i++) {
                f[(size_t)g_rank * N + i] = (float)g_rank + (float)i / 512.0f;
                w[(size_t)g_rank * N + i] = (float)(g_rank + 1) * 0.5f;
                bits[(size_t)g_rank * N + i] = (uint16_t)(0x3f80 + g_rank * 16 + i % 16); /* 1.0 .. */
            }
            for (int i = 0; i < N * world; i++) rs[i] = 1.0f;
            tdm_comm_op ops[3] = {
                {.kind = TDM_COMM_ALLGATHER, .buf = f, .count = N, .name = "ag"},
                {.kind = TDM_COMM_REDUCE_SCATTER, .buf = rs, .count = N, .name = "rs"},
                {.kind = TDM_COMM_ALLGATHER_BF16, .buf = w, .bits = bits, .count = N, .name = "ag16"},
            };
            for (int rep = 0; rep < 2; rep++) { /* the second reuses the ops' requests */
                for (int k = 0; k < 3; k++) tdm_comm_post(c, &ops[k]);
                for (int k = 0; k < 3; k++) tdm_comm_wait(c, &ops[k]);
                if (!rep)
                    for (int i = 0; i < N * world; i++) rs[i] = 1.0f;
            }
            int bad = 0;
            for (int q = 0; q < world; q++)
                for (int i = 0; i < N; i++) {
                    const size_t at = (size_t)q * N + i;
                    const uint16_t b = (uint16_t)(0x3f80 + q * 16 + i % 16);
                    uint32_t u = (uint32_t)b << 16;
                    float wb;
                    memcpy(&wb, &u, sizeof wb);
                    bad += f[at] != (float)q + (float)i / 512.0f || bits[at] != b || (q != g_rank && w[at] != wb) ||
                           (q == g_rank && w[at] != (float)(g_rank + 1) * 0.5f);
                }
            for (int i = 0; i < N; i++) bad += rs[(size_t)g_rank * N + i] != (float)world;
            CHECK(bad == 0, "%s, %s: %d elements wrong", mode ? "inline" : "thread", own ? "tandem's" : "MPI's", bad);
            free(f), free(w), free(rs), free(bits);
            tdm_comm_free(c);
        }
}

/* The posted-together probe: k collectives of each kind timed both ways, the last rank's figures on every rank;
 * a k out of range is refused alike on every rank (before any MPI call). */
static void test_posted_together_probe(void) {
    tdm_error err = {{0}};
    tdm_together_cost t;
    CHECK(tdm_probe_posted_together(MPI_COMM_WORLD, 0.25, 1, 2, 0, &t, &err) != 0 &&
              strstr(err.msg, "expected 2 to 64"),
          "k 1: %s", err.msg);
    CHECK(tdm_probe_posted_together(MPI_COMM_WORLD, 0.0625, 4, 2, 0, &t, &err) == 0, "%s", err.msg);
    CHECK(t.k == 4 && t.mb > 0 && t.mb <= 0.0625, "k %d mb %g", t.k, t.mb);
    const double v[4] = {t.rs_one_ms, t.rs_together_ms, t.ag_one_ms, t.ag_together_ms};
    double lo[4], hi[4];
    MPI_Allreduce(v, lo, 4, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(v, hi, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    for (int i = 0; i < 4; i++)
        CHECK(v[i] > 0 && isfinite(v[i]) && lo[i] == hi[i], "figure %d: %g (ranks %g .. %g)", i, v[i], lo[i], hi[i]);
}

static void test_create_fails_on_every_rank(void) {
    synth *s = malloc(sizeof *s);
    synth_build(s);
    if (g_rank == g_size - 1) {
        int64_t sh[2] = {(int64_t)1 << 30, (int64_t)1 << 28}; /* 2^58 floats: 4 EiB, which no allocator gives */
        tdm_param_table_add(&s->t, "huge.frozen", 2, sh, 0, SY_L + 2);
    }
    tdm_ddp_config cfg;
    tdm_ddp_config_default(&cfg);
    tdm_error err = {{0}};
    tdm_ddp *ddp = tdm_ddp_create(MPI_COMM_WORLD, &s->t, &cfg, &err);
    char want[32];
    snprintf(want, sizeof want, "rank %d", g_size - 1);
    CHECK(ddp == NULL && strstr(err.msg, "out of memory") && (g_rank == g_size - 1 || strstr(err.msg, want)),
          "rank %d: %s", g_rank, ddp ? "created" : err.msg);
    tdm_ddp_free(ddp);
    tdm_param_table_free(&s->t);
    free(s);
}

/* Ranks whose parameter tables differ (another model config on one node) must not pair
 * bucket collectives of different lengths: tdm_ddp_create fails on every rank, naming the
 * odd rank. (a) the last rank has one more trainable tensor; (b) everything is frozen there,
 * so its layout cannot be built at all: it used to return before the collective
 * duplications, leaving the other ranks in MPI_Comm_dup for good. */
static void test_create_refuses_different_tables(void) {
    if (g_size < 2) return;
    const int odd = g_size - 1;
    for (int c = 0; c < 3; c++) {
        synth *s = malloc(sizeof *s);
        synth_build(s);
        if (g_rank == odd && c == 0) {
            int64_t sh[1] = {5};
            tdm_param_table_add(&s->t, "extra.bias", 1, sh, 1, SY_L + 2);
        }
        if (g_rank == odd && c == 1)
            for (int i = 0; i < s->t.n; i++) s->t.p[i].trainable = 0;
        tdm_ddp_config cfg;
        tdm_ddp_config_default(&cfg);
        cfg.bf16_params = g_rank == odd && c == 2; /* the all-gathers would pair 16-bit with 32-bit elements */
        tdm_error err = {{0}};
        tdm_ddp *ddp = tdm_ddp_create(MPI_COMM_WORLD, &s->t, &cfg, &err);
        char want[32];
        snprintf(want, sizeof want, "rank %d", odd);
        const char *expect = c == 1 ? "no trainable parameter" : "differ from rank 0";
        CHECK(ddp == NULL && strstr(err.msg, expect) && (g_rank == odd || strstr(err.msg, want)),
              "case %d, rank %d: %s", c, g_rank, ddp ? "created" : err.msg);
        if (g_rank == 0 && c == 0) printf("  %s\n", err.msg);
        tdm_ddp_free(ddp);
        tdm_param_table_free(&s->t);
        free(s);
    }
}

/* MPI's profiling interface: this binary's MPI_Test counts the calls the main thread
 * makes while counting is on, then hands over to the library's PMPI_Test. */
static pthread_t g_main_thread;
static atomic_int g_count_tests;
static atomic_long g_main_tests;
int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status) {
    if (atomic_load(&g_count_tests) && pthread_equal(pthread_self(), g_main_thread)) atomic_fetch_add(&g_main_tests, 1);
    return PMPI_Test(req, flag, status);
}

/* Inline progress tests the collectives in flight at every final gradient, not only
 * between layers: a backward that only reports gradients (no layer hooks) still makes
 * the compute thread test the buckets posted so far. With the communication thread the
 * compute thread never tests. */
static void test_inline_progress_at_each_gradient(void) {
    for (int prog = 0; prog < 2; prog++) {
        synth *s = calloc(1, sizeof *s);
        synth_build(s);
        run_opts o = default_opts(1, 1, 0, prog ? TDM_DDP_PROGRESS_INLINE : TDM_DDP_PROGRESS_THREAD);
        tdm_error err;
        tdm_ddp *ddp = tdm_ddp_create(MPI_COMM_WORLD, &s->t, &o.cfg, &err);
        CHECK(ddp != NULL, "%s", err.msg);
        if (!ddp) {
            tdm_param_table_free(&s->t);
            free(s);
            return;
        }
        tdm_param_hooks h = tdm_ddp_hooks(ddp);
        tdm_ddp_zero_grad(ddp);
        tdm_ddp_set_is_last_microbatch(ddp, 1);
        atomic_store(&g_main_tests, 0);
        atomic_store(&g_count_tests, 1);
        for (int i = s->t.n - 1; i >= 0; i--) h.grad_ready(h.ctx, i); /* backward order: bucket 0 first */
        atomic_store(&g_count_tests, 0);
        long tests = atomic_load(&g_main_tests);
        if (prog) CHECK(tests > 0, "inline: no MPI_Test from the gradient hooks with 5 buckets posted in turn");
        else CHECK(tests == 0, "thread: the compute thread called MPI_Test %ld times", tests);
        CHECK(tdm_ddp_finish_grad_sync(ddp, &err) == 0, "%s", err.msg);
        tdm_ddp_free(ddp);
        tdm_param_table_free(&s->t);
        free(s);
    }
}

/* The sanitizers abort on an allocation they cannot serve; the test above wants the
 * library's own out-of-memory path, as it runs without them. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "allocator_may_return_null=1"; }

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    g_main_thread = pthread_self();
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "MPI did not grant MPI_THREAD_MULTIPLE\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    RUN(test_learns);
    RUN(test_lr_mult);
    RUN(test_overlap_bitwise_plain);
    RUN(test_overlap_bitwise_distributed);
    RUN(test_thread_vs_inline_bitwise);
    RUN(test_dp_matches_single_rank);
    RUN(test_distributed_matches_plain);
    RUN(test_bf16_params);
    RUN(test_replicas_identical);
    RUN(test_missing_gradient_is_an_error);
    RUN(test_nan_injection_stops_every_rank);
    RUN(test_structural_overlap_order);
    RUN(test_bucket_order_kept_when_ready_out_of_order);
    RUN(test_param_gather_never_read_early);
    RUN(test_timers_report);
    RUN(test_optimizer_state_reshard);
    RUN(test_profiler_events);
    RUN(test_control_collectives_are_waits);
    RUN(test_report_comm_thread_cpu);
    RUN(test_wait_poll);
    RUN(test_comm_test_and_beside_probe);
    RUN(test_allgather_both_ways);
    RUN(test_posted_together_probe);
    RUN(test_create_fails_on_every_rank);
    RUN(test_create_refuses_different_tables);
    RUN(test_inline_progress_at_each_gradient);
    /* one summary for the job: failures on any rank count */
    int counts[2] = {t_passed, t_failed}, worst[2];
    MPI_Allreduce(counts, worst, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    t_failed = worst[1];
    t_passed = counts[0] + counts[1] - t_failed;
    int rc = 0;
    if (g_rank == 0) rc = TEST_SUMMARY();
    else rc = t_failed ? 1 : 0;
    MPI_Finalize();
    return rc;
}
