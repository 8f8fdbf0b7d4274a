/* link_probe.c - times the two collectives of data-parallel training between 2 ranks:
 * reduce-scatter (every rank gives N bytes of fp32 and receives the sum of its N/2) and
 * all-gather (every rank gives N/2 bytes and receives N), blocking and nonblocking, for
 * N = 4, 16 and 64 MB. Prints one line per (operation, size) with the median of REPEATS
 * timed calls, the bus bandwidth, (p-1)/p * N / t, in Gbit/s (the rate each rank's link
 * carried), and the CPU time the call cost each rank (median, mean over ranks).
 *
 * The nonblocking calls are completed the way tandem's communication thread does it:
 * MPI_Test, and a sleep of POLL_US (50) when it found nothing done, so that their CPU time is the
 * work of the transfer rather than a busy wait. `ireduce_scatter_vsum` is the nonblocking
 * reduce-scatter with a user-defined commutative sum of eight lanes at a time in place of
 * MPI_SUM (MPICH 4.0's built-in float sum is a scalar loop); its result is checked to be
 * bitwise that of MPI_SUM. Used by run_link_bench.sh to check that the emulated link
 * delivers its rate.
 *   mpirun -np 2 link_probe [REPEATS [POLL_US]]   (default 5 and 50; one untimed warm-up call first) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef float v8f __attribute__((vector_size(32)));

static void vsum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const float *x = in;
    float *y = inout;
    int n = *len, i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f a, b;
        memcpy(&a, x + i, sizeof a);
        memcpy(&b, y + i, sizeof b);
        b = a + b;
        memcpy(y + i, &b, sizeof b);
    }
    for (; i < n; i++) y[i] = x[i] + y[i];
}

static long poll_ns = 50000;

static void test_until_done(MPI_Request *rq) {
    const struct timespec nap = {0, poll_ns};
    for (int flag = 0;;) {
        MPI_Test(rq, &flag, MPI_STATUS_IGNORE);
        if (flag) return;
        nanosleep(&nap, NULL);
    }
}

enum { RS, IRS, IRS_VSUM, AG, IAG, N_OPS };
static const char *OP_NAME[N_OPS] = {"reduce_scatter", "ireduce_scatter", "ireduce_scatter_vsum", "allgather",
                                     "iallgather"};
static MPI_Op vsum_op;

/* One call of op on `count` floats per rank share (N = count * p floats in all). */
static void run_op(int op, float *full, float *part, int count) {
    MPI_Request rq;
    switch (op) {
    case RS: MPI_Reduce_scatter_block(full, part, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case IRS:
    case IRS_VSUM:
        MPI_Ireduce_scatter_block(full, part, count, MPI_FLOAT, op == IRS ? MPI_SUM : vsum_op, MPI_COMM_WORLD, &rq);
        test_until_done(&rq);
        break;
    case AG: MPI_Allgather(part, count, MPI_FLOAT, full, count, MPI_FLOAT, MPI_COMM_WORLD); break;
    case IAG:
        MPI_Iallgather(part, count, MPI_FLOAT, full, count, MPI_FLOAT, MPI_COMM_WORLD, &rq);
        test_until_done(&rq);
        break;
    }
}

static void fill(float *full, size_t n, int rank) {
    for (size_t i = 0; i < n; i++) full[i] = (float)((i * 7 + (size_t)rank * 13) % 1001) * 0.37f + 1e-3f * (float)rank;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    MPI_Op_create(vsum, 1, &vsum_op);
    int repeats = argc > 1 ? atoi(argv[1]) : 5;
    if (repeats < 1 || repeats > 1000) repeats = 5;
    if (argc > 2 && atol(argv[2]) > 0 && atol(argv[2]) < 1000000) poll_ns = atol(argv[2]) * 1000;
    static const int sizes_mb[] = {4, 16, 64};
    size_t max_floats = (size_t)64 << 18; /* 64 MB of fp32 */
    float *full = malloc(max_floats * sizeof(float)), *part = malloc(max_floats * sizeof(float));
    float *ref = malloc(max_floats / (size_t)p * sizeof(float)); /* one rank share of the largest size */
    double *t = malloc(sizeof(double) * (size_t)repeats), *c = malloc(sizeof(double) * (size_t)repeats);
    if (!full || !part || !ref || !t || !c) MPI_Abort(MPI_COMM_WORLD, 1);
    fill(full, max_floats, rank);
    memcpy(part, full, max_floats * sizeof(float));
    int mismatch = 0;
    if (rank == 0) printf("op,size_mb,median_ms,min_ms,busbw_gbit_s,cpu_ms\n");
    for (int s = 0; s < 3; s++) {
        int count = (int)(((size_t)sizes_mb[s] << 18) / (size_t)p); /* floats per rank share */
        for (int op = 0; op < N_OPS; op++) {
            run_op(op, full, part, count); /* warm-up: connections, buffers */
            if (op == IRS) memcpy(ref, part, (size_t)count * sizeof(float));
            if (op == IRS_VSUM && memcmp(ref, part, (size_t)count * sizeof(float)) != 0) mismatch = 1;
            for (int r = 0; r < repeats; r++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime(), c0 = cpu_seconds();
                run_op(op, full, part, count);
                double dt = MPI_Wtime() - t0, dc = cpu_seconds() - c0, worst;
                MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                t[r] = worst;
                c[r] = dc;
            }
            qsort(t, (size_t)repeats, sizeof(double), cmp_double);
            qsort(c, (size_t)repeats, sizeof(double), cmp_double);
            double med = t[repeats / 2], cpu = c[repeats / 2], cpu_sum;
            MPI_Reduce(&cpu, &cpu_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            double bytes = (double)sizes_mb[s] * 1048576.0;
            if (rank == 0)
                printf("%s,%d,%.2f,%.2f,%.3f,%.2f\n", OP_NAME[op], sizes_mb[s], med * 1e3, t[0] * 1e3,
                       (double)(p - 1) / p * bytes * 8 / med / 1e9, cpu_sum / p * 1e3);
            fflush(stdout);
        }
    }
    int any_mismatch = 0;
    MPI_Allreduce(&mismatch, &any_mismatch, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_mismatch && rank == 0)
        fprintf(stderr, "link_probe: the vectorised sum's reduce-scatter differs from MPI_SUM's\n");
    MPI_Op_free(&vsum_op);
    free(full);
    free(part);
    free(ref);
    free(t);
    free(c);
    MPI_Finalize();
    return any_mismatch;
}
