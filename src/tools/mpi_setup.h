/* mpi_setup.h - process set-up shared by the commands that train (train, ab). */
#ifndef TDM_TOOLS_MPI_SETUP_H
#define TDM_TOOLS_MPI_SETUP_H

/* Keeps MPI's large scratch buffers on the heap (glibc's largest mmap threshold, no mmap at all
 * above it, no trimming: the project spec's data-parallel.md measured per-call mmap/munmap and first touches costing
 * more than the reduction itself), initialises MPI asking for MPI_THREAD_MULTIPLE (the
 * communication thread needs it; a lower grant is logged and the trainer falls back to
 * inline progress), sets the logger's rank, and gives each rank's BLAS
 * cores / ranks-on-this-node threads unless OPENBLAS_NUM_THREADS is set. Before MPI_Init, under Open MPI,
 * turns its cross-memory attach off where it cannot work or costs more (tdm_mpi_choose_single_copy). */
void tdm_tool_mpi_init(int *argc, char ***argv, int *rank, int *world);

/* After tdm_first_failed_rank on refused flags: the lowest refused rank prints "tandem CMD: msg",
 * with "rank N: " before msg when not every rank refused (an MPMD launch); the others print nothing.
 * Collective on MPI_COMM_WORLD: every rank returns once the message is written. */
void tdm_tool_report_refusal(const char *cmd, int rank, int first_bad, int all_refused, const char *msg);

#endif
