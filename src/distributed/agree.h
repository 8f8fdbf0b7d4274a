/* agree.h - the ranks agreeing on something small: who failed, whether a list of hashes matches,
 * and the trainer's own collectives (set-up, validation, checks) waited for with a bound.
 *
 *   int first = tdm_first_failed_rank(ok, comm, &n_failed);   // comm's size when every rank is ok
 *   if (first < size) ... every rank knows which rank failed first ...
 *
 * Every function here is collective over comm: every rank calls it, in the same order. The
 * _bounded ones post a nonblocking collective and wait for it like the data-parallel ones
 * (comm.h, tdm_wait_request_bounded): a rank that never joins ends the job after timeout_ns
 * (0: wait forever) with one line naming `what`, instead of hanging it.
 */
#ifndef TDM_DIST_AGREE_H
#define TDM_DIST_AGREE_H

#include <mpi.h>
#include <stdint.h>

#include "core/params.h"

/* Collective: every rank says whether its part succeeded. Returns the lowest failing rank, or
 * the communicator's size when none failed; *n_failed (if not NULL) is how many failed (all of
 * them: one command line failed alike everywhere; some: e.g. an MPMD launch with other flags). */
int tdm_first_failed_rank(int ok, MPI_Comm comm, int *n_failed);
/* The same, each wait bounded by timeout_ns. */
int tdm_first_failed_rank_bounded(int ok, MPI_Comm comm, int *n_failed, uint64_t timeout_ns, const char *what);

/* The index of the first of n hashes whose value differs on some rank of comm (compared by their minimum
 * and maximum across ranks), -1 when all agree. Collective, bounded by timeout_ns. */
int tdm_first_differing_hash(const uint64_t *h, int n, MPI_Comm comm, uint64_t timeout_ns, const char *what);

/* Megatron's check_param_hashes_across_dp_replicas, naming the tensor: collective; an XXH3 of every
 * parameter, compared across the ranks of comm by their minimum and maximum. Returns the index of
 * the first parameter whose bits differ on some rank, or -1 when all agree. */
int tdm_first_differing_param(const tdm_param_table *pt, MPI_Comm comm, uint64_t timeout_ns);

/* In place: buf[0 .. n) reduced by op across the ranks of comm (MPI_Iallreduce), the wait bounded. */
void tdm_allreduce_bounded(void *buf, int n, MPI_Datatype type, MPI_Op op, MPI_Comm comm, uint64_t timeout_ns,
                           const char *what);
/* buf[0 .. n) of rank root to every rank of comm (MPI_Ibcast), the wait bounded. */
void tdm_bcast_bounded(void *buf, int n, MPI_Datatype type, int root, MPI_Comm comm, uint64_t timeout_ns,
                       const char *what);
/* Each rank's n elements of `mine` into all[rank * n ..] on every rank (MPI_Iallgather), the wait bounded. */
void tdm_allgather_bounded(const void *mine, void *all, int n, MPI_Datatype type, MPI_Comm comm, uint64_t timeout_ns,
                           const char *what);

#endif
