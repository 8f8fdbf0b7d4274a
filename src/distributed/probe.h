/* probe.h - what the machine's data parallelism costs: the MPI library and its transport, and the
 * measured cost per MB of the collectives tandem issues (reduce-scatter, all-gather, through the
 * communication engine, comm.h), next to a plain memcpy of the same bytes and to the cost of first
 * touching fresh pages. `tandem doctor` prints all of it; `tandem train` and `tandem ab` log the
 * library, the transport and a quick collective probe at start (docs/user-guide.md, "tandem doctor").
 *
 * Figures are per MB (1e6 bytes) of the whole buffer a collective covers (a bucket's gradients), so
 * that a step that reduces G MB of gradients and gathers G MB of parameters costs about
 * G x (reduce-scatter + all-gather). Collective figures are the maximum over ranks.
 */
#ifndef TDM_DIST_PROBE_H
#define TDM_DIST_PROBE_H

#include <mpi.h>
#include <stdint.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "distributed/config.h"

typedef enum tdm_mpi_kind { TDM_MPI_OPEN_MPI, TDM_MPI_MPICH, TDM_MPI_OTHER } tdm_mpi_kind;

typedef struct tdm_mpi_info {
    tdm_mpi_kind kind;
    char library[96];    /* "Open MPI v4.1.4", "MPICH 4.0.2" (MPI_Get_library_version, first part) */
    char transport[160]; /* "shared memory (btl vader)", "MPICH device ch4:ofi", ... */
    /* Open MPI: vader's single-copy mechanism as the library holds it after MPI_Init ("cma", "none",
     * "xpmem", "knem", "emulated"), and who chose it; "" for another library */
    char single_copy[24];
    char single_copy_from[64];
    int one_host;      /* every rank of the communicator shares this host's memory */
    int shared_memory; /* the ranks' collectives go through shared memory: copies the ranks' own threads make */
} tdm_mpi_info;

/* After MPI_Init; collective over comm (the one-host check). */
void tdm_mpi_info_get(MPI_Comm comm, tdm_mpi_info *out);
/* "Open MPI v4.1.4, shared memory (btl vader), single-copy mechanism none (OMPI_MCA_...)" (no newline). */
void tdm_mpi_info_format(const tdm_mpi_info *m, tdm_strbuf *sb);

/* Called before MPI_Init: when the library is Open MPI, no single-copy mechanism was chosen
 * (OMPI_MCA_btl_vader_single_copy_mechanism unset), and cross-memory attach cannot work here or costs more
 * than copying through the shared segment, sets the variable to "none" (docs/user-guide.md,
 * "Launching"). Returns the reason when it set it, else NULL. */
const char *tdm_mpi_choose_single_copy(void);

typedef struct tdm_coll_cost {
    double mb;                    /* the buffer each collective covered, MB */
    int reps;                     /* timed repetitions (the median is kept) */
    double rs_wall_ms, rs_cpu_ms; /* reduce-scatter: wall and calling-thread CPU, ms per MB */
    double ag_wall_ms, ag_cpu_ms; /* all-gather */
    double memcpy_ms;             /* a memcpy of the same bytes, ms per MB */
} tdm_coll_cost;

/* Collective over comm (2 ranks or more): `reps` timed reduce-scatters and all-gathers of `mb` MB each
 * after one untimed pair, through a communication engine with inline progress on a duplicate of comm,
 * on buffers touched beforehand. A wait longer than timeout_ns (0: none) ends the job as the engine's do
 * (comm.h). -1 with err when the buffers cannot be had (on every rank alike). */
int tdm_probe_collectives(MPI_Comm comm, double mb, int reps, uint64_t timeout_ns, tdm_coll_cost *out, tdm_error *err);
/* The same with MPI's collectives (mpi_op 1: MPI_Ireduce_scatter_block and MPI's op, MPI_Iallgather) instead of
 * tandem's exchange, or tandem's (mpi_op 0), whatever TANDEM_REDUCE_SCATTER says. */
int tdm_probe_collectives_rs(MPI_Comm comm, double mb, int reps, int mpi_op, uint64_t timeout_ns, tdm_coll_cost *out,
                             tdm_error *err);

/* k collectives posted at once, then waited for, against the same k posted one by one (each waited for before
 * the next is posted): what a step pays when its buckets go out together (no overlap: every bucket after the
 * backward) rather than as they become ready. The model of tandem plan runs the collectives one after another on
 * the link; some libraries run collectives in flight together slower than that (docs/user-guide.md,
 * "tandem doctor"). Times are of all k, ms. */
typedef struct tdm_together_cost {
    double mb; /* each collective's buffer, MB */
    int k;
    double rs_one_ms, rs_together_ms; /* reduce-scatters: one by one, posted together */
    double ag_one_ms, ag_together_ms; /* all-gathers */
} tdm_together_cost;

/* Collective over comm (2 ranks or more): `reps` rounds of each kind, one by one and together in turn (which goes
 * first alternates), through an engine with inline progress on a duplicate of comm. The ranks of a step end their
 * backward apart: the last rank posts each round one collective's time (one by one) after the others, and the
 * figures are its own, from its first post (as tandem plan fits the link to the rank that posted last); medians
 * over rounds. k from 2 to 64; -1 with err as tdm_probe_collectives. */
int tdm_probe_posted_together(MPI_Comm comm, double mb, int k, int reps, uint64_t timeout_ns, tdm_together_cost *out,
                              tdm_error *err);

/* A collective in flight while the rank computes: what it costs the compute, and how fast it moves there.
 * What `tandem plan` needs to predict an overlap (--comm-cpu-us-per-mb, --comm-speed-beside): the CPU time a
 * communication thread reports leaves out the kernel's work for a network transport and the caches, and inline
 * progress moves only at the progress calls. */
typedef struct tdm_beside_cost {
    double mb;             /* each collective's buffer, MB: a reduce-scatter and an all-gather in flight at once */
    double chunk_ms;       /* one piece of compute (tandem's linear forward) between two progress calls, alone */
    double compute_ms;     /* the compute alone, ms */
    double moved_mb;       /* MB of collectives completed while it ran beside them */
    double lost_us_per_mb; /* compute time lost per MB moved beside it, us (can be below 0 by noise) */
    double speed;          /* a collective's time alone over its time beside compute (NaN: fewer than 3 completed) */
} tdm_beside_cost;

/* Collective over comm (2 ranks or more): each of `reps` rounds times `compute_ms` of compute alone, then the
 * same compute with a reduce-scatter and an all-gather of `mb` MB each kept in flight through an engine of
 * `mode` (a communication thread at `thread_nice`, or inline progress after every piece), and times the two
 * collectives alone (waited for). Medians over rounds, means over ranks. -1 with err as tdm_probe_collectives. */
int tdm_probe_beside_compute(MPI_Comm comm, tdm_ddp_progress mode, int thread_nice, double mb, double compute_ms,
                             int reps, uint64_t timeout_ns, tdm_beside_cost *out, tdm_error *err);

/* This rank alone: ms per MB of memcpy between two touched buffers of `mb` MB (median of reps). */
double tdm_probe_memcpy(double mb, int reps);
/* This rank alone: ms per MB to write `mb` MB of fresh pages (mmap'd, first touch: a page fault each)
 * and of the same bytes into a buffer already touched. Medians of reps. */
void tdm_probe_page_faults(double mb, int reps, double *fresh_ms, double *reused_ms);
/* This rank alone: ms per MB (of one operand) of tandem's vector sum y += x (kernels' tdm_add_into). */
double tdm_probe_vector_sum(double mb, int reps);

/* The start-up line of train and ab: library, transport, and the quick probe's figures (no newline). */
void tdm_probe_format_line(const tdm_mpi_info *m, const tdm_coll_cost *c, int dp, tdm_strbuf *sb);

#endif
