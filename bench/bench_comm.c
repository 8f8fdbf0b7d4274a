/* bench_comm.c - what overlapping the gradient reduce-scatter buys, and what the
 * communication thread costs, on a stack of linear layers whose backward accumulates
 * real gradients into the data-parallel buffer. Not a test: it prints ms per step and
 * ratios against two ceilings measured in the same run:
 *   compute   forward + backward alone (no communication)
 *   comm      the bucket collectives alone (backward replaced by grad_ready calls)
 * "hidden" is the part of comm that did not add to the step:
 *   (compute + comm - step) / comm.
 * With all cores computing on shared memory little can hide (the reduction itself is
 * CPU work; data-parallel.md), so the point on this machine is the CPU column: the
 * comm thread's CPU time per step (CLOCK_THREAD_CPUTIME_ID) next to the step time.
 *   mpirun -np 2 build/bench/bench_comm [units] [rows] [steps]
 */
#include <cblas.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "distributed/ddp.h"
#include "distributed/optimizer.h"
#include "core/rng.h"
#include "core/params.h"
#include "kernels/kernels.h"
#include "bench_platform.h"

enum { D = 1024 };

typedef struct bench {
    tdm_param_table t;
    int units, rows;
    float *x;       /* [units + 1][rows, D] activations */
    float *dy, *dx; /* [rows, D] */
    const tdm_param_hooks *hooks;
} bench;

static void fwd_bwd(bench *b, int do_compute) {
    const tdm_param_hooks *h = b->hooks;
    for (int u = 0; u < b->units; u++) {
        if (h && h->param_needed) h->param_needed(h->ctx, 2 * u), h->param_needed(h->ctx, 2 * u + 1);
        if (do_compute)
            tdm_linear_forward(b->x + (size_t)(u + 1) * b->rows * D, b->x + (size_t)u * b->rows * D, b->t.p[2 * u].data,
                               b->t.p[2 * u + 1].data, b->rows, D, D);
        if (h && h->progress) h->progress(h->ctx);
    }
    for (int u = b->units - 1; u >= 0; u--) {
        if (do_compute) {
            tdm_linear_backward(b->dx, b->t.p[2 * u].grad, b->t.p[2 * u + 1].grad, b->dy,
                                b->x + (size_t)u * b->rows * D, b->t.p[2 * u].data, b->rows, D, D);
            memcpy(b->dy, b->dx, (size_t)b->rows * D * sizeof(float));
        }
        if (h && h->grad_ready) h->grad_ready(h->ctx, 2 * u), h->grad_ready(h->ctx, 2 * u + 1);
        if (h && h->progress) h->progress(h->ctx);
    }
}

typedef struct result {
    double step_ms, cpu_ms;
} result;

/* mode: 0 compute only, 1 comm only, 2 both. Returns the median-free mean over steps
 * after one warm-up step, max over ranks. */
static result measure(bench *b, tdm_ddp_config cfg, int mode, int steps) {
    tdm_error err;
    tdm_ddp *ddp = tdm_ddp_create(MPI_COMM_WORLD, &b->t, &cfg, &err);
    if (!ddp) {
        fprintf(stderr, "bench_comm: %s\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < b->t.n; i++) tdm_rng_fill_normal(b->t.p[i].data, b->t.p[i].numel, 0, 0.02f, 1, i);
    tdm_param_hooks h = tdm_ddp_hooks(ddp);
    b->hooks = mode == 0 ? NULL : &h;
    tdm_ddp_stats s0;
    uint64_t t0 = 0;
    for (int s = 0; s <= steps; s++) {
        if (s == 1) {
            MPI_Barrier(MPI_COMM_WORLD);
            tdm_ddp_get_stats(ddp, &s0);
            t0 = tdm_now_ns();
        }
        tdm_ddp_zero_grad(ddp);
        fwd_bwd(b, mode != 1);
        if (mode != 0 && tdm_ddp_finish_grad_sync(ddp, &err) != 0) {
            fprintf(stderr, "bench_comm: %s\n", err.msg);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    double loc[2];
    loc[0] = (double)(tdm_now_ns() - t0) / 1e6 / steps;
    tdm_ddp_stats s1;
    tdm_ddp_get_stats(ddp, &s1);
    loc[1] = (double)(s1.comm_thread_cpu_ns - s0.comm_thread_cpu_ns) / 1e6 / steps;
    double mx[2];
    MPI_Allreduce(loc, mx, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    tdm_ddp_free(ddp);
    return (result){mx[0], mx[1]};
}

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    openblas_set_num_threads(1);
    if (rank == 0) bench_print_platform(stdout);
    bench b;
    memset(&b, 0, sizeof b);
    b.units = argc > 1 ? atoi(argv[1]) : 8;
    b.rows = argc > 2 ? atoi(argv[2]) : 128;
    int steps = argc > 3 ? atoi(argv[3]) : 4;
    if (b.units < 1 || b.units > 64 || b.rows < 1 || b.rows > 4096 || steps < 1) {
        if (rank == 0) fprintf(stderr, "usage: bench_comm [units 1..64] [rows 1..4096] [steps]\n");
        MPI_Finalize();
        return 2;
    }
    for (int u = 0; u < b.units; u++) {
        char n[64];
        int64_t sh[2] = {D, D};
        snprintf(n, sizeof n, "layers.%d.weight", u);
        tdm_param_table_add(&b.t, n, 2, sh, 1, u);
        snprintf(n, sizeof n, "layers.%d.bias", u);
        tdm_param_table_add(&b.t, n, 1, sh, 1, u);
    }
    tdm_error err;
    b.x = tdm_alloc_big((size_t)(b.units + 1) * b.rows * D * sizeof(float), &err);
    b.dy = tdm_alloc_big((size_t)b.rows * D * sizeof(float), &err);
    b.dx = tdm_alloc_big((size_t)b.rows * D * sizeof(float), &err);
    if (!b.x || !b.dy || !b.dx) MPI_Abort(MPI_COMM_WORLD, 1);
    tdm_rng_fill_normal(b.x, (int64_t)b.rows * D, 0, 1, 2, rank);

    tdm_ddp_config cfg;
    tdm_ddp_config_default(&cfg);
    cfg.use_distributed_optimizer = 1;
    cfg.bucket_size = 2 * D * D; /* two layers per bucket */
    result compute = measure(&b, cfg, 0, steps);
    result comm = measure(&b, cfg, 1, steps);
    if (rank == 0) {
        printf("bench_comm: %d ranks, %d layers of %dx%d (%.1f MB of gradients, %d buckets), %d rows\n", size, b.units,
               D, D, (double)b.units * (D * D + D) * 4 / 1e6, (b.units + 1) / 2, b.rows);
        printf("  ceiling compute only: %8.2f ms/step\n", compute.step_ms);
        printf("  ceiling comm only:    %8.2f ms/step (comm thread CPU %.2f ms)\n", comm.step_ms, comm.cpu_ms);
        printf("  %-26s %10s %10s %14s %12s\n", "configuration", "ms/step", "hidden", "comm-thr CPU", "CPU/step");
    }
    const struct {
        const char *name;
        int overlap;
        tdm_ddp_progress prog;
    } cfgs[] = {
        {"overlap off, thread", 0, TDM_DDP_PROGRESS_THREAD},
        {"overlap on,  thread", 1, TDM_DDP_PROGRESS_THREAD},
        {"overlap off, inline", 0, TDM_DDP_PROGRESS_INLINE},
        {"overlap on,  inline", 1, TDM_DDP_PROGRESS_INLINE},
    };
    for (size_t k = 0; k < sizeof cfgs / sizeof *cfgs; k++) {
        cfg.overlap_grad_reduce = cfgs[k].overlap;
        cfg.progress = cfgs[k].prog;
        result r = measure(&b, cfg, 2, steps);
        double hidden = (compute.step_ms + comm.step_ms - r.step_ms) / comm.step_ms;
        if (rank == 0)
            printf("  %-26s %10.2f %9.0f%% %11.2f ms %11.1f%%\n", cfgs[k].name, r.step_ms, 100 * hidden, r.cpu_ms,
                   100 * r.cpu_ms / r.step_ms);
    }
    tdm_free_big(b.x);
    tdm_free_big(b.dy);
    tdm_free_big(b.dx);
    tdm_param_table_free(&b.t);
    MPI_Finalize();
    return 0;
}
