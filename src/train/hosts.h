/* hosts.h - the processors, compiler targets, OpenBLAS kernel sets and waits' polling of all ranks, as the
 * arguments block, tandem ab's summary.json and its report show them. One value per item
 * when every rank agrees; "X (ranks 0-3); Y (ranks 4-7)" on a job of mixed hosts.
 * Collective over comm. */
#ifndef TDM_TRAIN_HOSTS_H
#define TDM_TRAIN_HOSTS_H

#include <mpi.h>

enum { TDM_HOSTS_CPU, TDM_HOSTS_ISA, TDM_HOSTS_BUILD_TARGET, TDM_HOSTS_BLAS, TDM_HOSTS_WAIT_POLL, TDM_HOSTS_N };

typedef struct tdm_hosts {
    char *value[TDM_HOSTS_N]; /* heap strings; valid on every rank */
    int mixed;                /* some item differs between ranks */
} tdm_hosts;

/* The names the arguments block and summary.json use for the items, in enum order:
 * host_cpu, host_vector_isa, build_target, openblas_kernels, comm_wait_poll. */
extern const char *const tdm_hosts_names[TDM_HOSTS_N];

void tdm_hosts_describe(MPI_Comm comm, tdm_hosts *h);

/* One item's values, one per rank, as hosts.value shows them (a heap string). */
char *tdm_hosts_combine(const char *const *per_rank, int world);
void tdm_hosts_free(tdm_hosts *h);

#endif
