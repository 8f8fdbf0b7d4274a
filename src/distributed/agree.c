/* agree.c - small cross-rank agreements (see agree.h). */
#include "distributed/agree.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/alloc.h"
#include "distributed/comm.h"

int tdm_first_failed_rank_bounded(int ok, MPI_Comm comm, int *n_failed, uint64_t timeout_ns, const char *what) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int first = ok ? size : rank, nf = !ok;
    MPI_Request r[2];
    MPI_Iallreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm, &r[0]);
    if (n_failed) MPI_Iallreduce(MPI_IN_PLACE, &nf, 1, MPI_INT, MPI_SUM, comm, &r[1]);
    tdm_wait_request_bounded(&r[0], timeout_ns, what);
    if (n_failed) {
        tdm_wait_request_bounded(&r[1], timeout_ns, what);
        *n_failed = nf;
    }
    return first;
}

int tdm_first_failed_rank(int ok, MPI_Comm comm, int *n_failed) {
    return tdm_first_failed_rank_bounded(ok, comm, n_failed, 0, "agreement of the ranks");
}

int tdm_first_differing_hash(const uint64_t *h, int n, MPI_Comm comm, uint64_t timeout_ns, const char *what) {
    uint64_t *lo = tdm_xmalloc(sizeof *lo * ((size_t)n + 1)), *hi = tdm_xmalloc(sizeof *hi * ((size_t)n + 1));
    memcpy(lo, h, sizeof *lo * (size_t)n);
    memcpy(hi, h, sizeof *hi * (size_t)n);
    MPI_Request r[2];
    MPI_Iallreduce(MPI_IN_PLACE, lo, n, MPI_UINT64_T, MPI_MIN, comm, &r[0]);
    MPI_Iallreduce(MPI_IN_PLACE, hi, n, MPI_UINT64_T, MPI_MAX, comm, &r[1]);
    tdm_wait_request_bounded(&r[0], timeout_ns, what);
    tdm_wait_request_bounded(&r[1], timeout_ns, what);
    int first = -1;
    for (int i = 0; i < n && first < 0; i++)
        if (lo[i] != hi[i]) first = i;
    free(lo);
    free(hi);
    return first;
}

int tdm_first_differing_param(const tdm_param_table *pt, MPI_Comm comm, uint64_t timeout_ns) {
    uint64_t *h = tdm_xcalloc((size_t)pt->n + 1, sizeof *h);
    for (int i = 0; i < pt->n; i++) h[i] = tdm_param_hash(&pt->p[i]);
    int first = tdm_first_differing_hash(h, pt->n, comm, timeout_ns, "weight-hash check");
    free(h);
    return first;
}

/* The trainer's own collectives (agreements, checks, the fingerprint audit): nonblocking, and
 * waited for like the data-parallel ones, so that a rank stuck in set-up, validation or a check ends the job
 * after --distributed-timeout-minutes instead of hanging it. A checkpoint save's collectives are bounded the
 * same way (trainer_save.c, optimizer_state.c): the timeout must cover rank 0's writing of a checkpoint. */
void tdm_allreduce_bounded(void *buf, int n, MPI_Datatype type, MPI_Op op, MPI_Comm comm, uint64_t timeout_ns,
                           const char *what) {
    MPI_Request r;
    MPI_Iallreduce(MPI_IN_PLACE, buf, n, type, op, comm, &r);
    tdm_wait_request_bounded(&r, timeout_ns, what);
}

void tdm_bcast_bounded(void *buf, int n, MPI_Datatype type, int root, MPI_Comm comm, uint64_t timeout_ns,
                       const char *what) {
    MPI_Request r;
    MPI_Ibcast(buf, n, type, root, comm, &r);
    tdm_wait_request_bounded(&r, timeout_ns, what);
}

void tdm_allgather_bounded(const void *mine, void *all, int n, MPI_Datatype type, MPI_Comm comm, uint64_t timeout_ns,
                           const char *what) {
    MPI_Request r;
    MPI_Iallgather(mine, n, type, all, n, type, comm, &r);
    tdm_wait_request_bounded(&r, timeout_ns, what);
}
