/* link_probe.c - times the two collectives of data-parallel training between 2 ranks:
 * reduce-scatter (every rank gives N bytes of fp32 and receives the sum of its N/2) and
 * all-gather (every rank gives N/2 bytes and receives N), blocking and nonblocking, for
 * N = 4, 16 and 64 MB. Prints one line per (operation, size) with the median of REPEATS
 * timed calls and the bus bandwidth, (p-1)/p * N / t, in Gbit/s: the rate each rank's link
 * carried. Used by run_link_bench.sh to check that the emulated link delivers its rate.
 *   mpirun -np 2 link_probe [REPEATS]      (default 5; one untimed warm-up call first) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { RS, IRS, AG, IAG, N_OPS };
static const char *OP_NAME[N_OPS] = {"reduce_scatter", "ireduce_scatter", "allgather", "iallgather"};

/* One call of op on `count` floats per rank share (N = count * p floats in all). */
static void run_op(int op, float *full, float *part, int count) {
    MPI_Request rq;
    switch (op) {
    case RS: MPI_Reduce_scatter_block(full, part, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case IRS:
        MPI_Ireduce_scatter_block(full, part, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        break;
    case AG: MPI_Allgather(part, count, MPI_FLOAT, full, count, MPI_FLOAT, MPI_COMM_WORLD); break;
    case IAG:
        MPI_Iallgather(part, count, MPI_FLOAT, full, count, MPI_FLOAT, MPI_COMM_WORLD, &rq);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        break;
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    int repeats = argc > 1 ? atoi(argv[1]) : 5;
    if (repeats < 1 || repeats > 1000) repeats = 5;
    static const int sizes_mb[] = {4, 16, 64};
    size_t max_floats = (size_t)64 << 18; /* 64 MB of fp32 */
    float *full = malloc(max_floats * sizeof(float)), *part = malloc(max_floats * sizeof(float));
    double *t = malloc(sizeof(double) * (size_t)repeats);
    if (!full || !part || !t) MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0; i < max_floats; i++) full[i] = part[i] = (float)(i % 1000) * 0.001f;
    if (rank == 0) printf("op,size_mb,median_ms,min_ms,busbw_gbit_s\n");
    for (int s = 0; s < 3; s++) {
        int count = (int)(((size_t)sizes_mb[s] << 18) / (size_t)p); /* floats per rank share */
        for (int op = 0; op < N_OPS; op++) {
            run_op(op, full, part, count); /* warm-up: connections, buffers */
            for (int r = 0; r < repeats; r++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                run_op(op, full, part, count);
                double dt = MPI_Wtime() - t0, worst;
                MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                t[r] = worst;
            }
            qsort(t, (size_t)repeats, sizeof(double), cmp_double);
            double med = t[repeats / 2];
            double bytes = (double)sizes_mb[s] * 1048576.0;
            if (rank == 0)
                printf("%s,%d,%.2f,%.2f,%.3f\n", OP_NAME[op], sizes_mb[s], med * 1e3, t[0] * 1e3,
                       (double)(p - 1) / p * bytes * 8 / med / 1e9);
            fflush(stdout);
        }
    }
    free(full);
    free(part);
    free(t);
    MPI_Finalize();
    return 0;
}
