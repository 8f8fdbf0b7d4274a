#include "tools/mpi_setup.h"

#include <malloc.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/log.h"
#include "distributed/probe.h"

void openblas_set_num_threads(int num_threads);

/* Ranks on this node, from the launcher's environment (Open MPI, MPICH/Hydra), else 1. */
static int local_ranks(void) {
    const char *v = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!v) v = getenv("MPI_LOCALNRANKS");
    int n = v ? atoi(v) : 1;
    return n > 0 ? n : 1;
}

void tdm_tool_mpi_init(int *argc, char ***argv, int *rank, int *world) {
    mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's maximum on 64-bit; larger values are refused */
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    /* Nor above it: MPI's per-call scratch of a collective larger than 32 MB (Open MPI's reduce-scatter takes the
     * whole bucket) would be mmap'd fresh, and its pages faulted in, every step; from the heap it is reused
     * (docs/benchmarks.md, "Data parallelism on two cores") */
    mallopt(M_MMAP_MAX, 0);
    /* and one arena for every thread: the communication thread issues the collectives, and a scratch buffer in a
     * thread arena of its own lives in a heap that glibc unmaps as soon as it is free again */
    mallopt(M_ARENA_MAX, 1);
    /* before MPI_Init: Open MPI reads its OMPI_MCA_* variables there */
    const char *single_copy = tdm_mpi_choose_single_copy();
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, world);
    tdm_log_set_rank(*rank, *world);
    if (!getenv("OPENBLAS_NUM_THREADS")) {
        int n = (int)(sysconf(_SC_NPROCESSORS_ONLN) / local_ranks());
        openblas_set_num_threads(n > 0 ? n : 1);
    }
    if (single_copy)
        tdm_log_info("Open MPI: single-copy mechanism none (OMPI_MCA_btl_vader_single_copy_mechanism set by tandem: "
                     "%s)",
                     single_copy);
    if (provided < MPI_THREAD_MULTIPLE)
        tdm_log_info("MPI granted thread level %d, not MPI_THREAD_MULTIPLE: communication falls back to inline "
                     "progress",
                     provided);
}

void tdm_tool_report_refusal(const char *cmd, int rank, int first_bad, int all_refused, const char *msg) {
    if (rank == first_bad) {
        if (all_refused) fprintf(stderr, "tandem %s: %s\n", cmd, msg);
        else fprintf(stderr, "tandem %s: rank %d: %s\n", cmd, rank, msg);
        fflush(stderr);
    }
    /* no rank leaves before the message is out: mpirun kills the others as soon as one rank exits
     * non-zero, which on a busy machine came before the speaking rank had printed */
    MPI_Barrier(MPI_COMM_WORLD);
}
