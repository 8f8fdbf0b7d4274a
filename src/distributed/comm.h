/* comm.h - the communication engine: nonblocking MPI collectives issued in FIFO order
 * and progressed either by a communication thread or inline by the compute thread.
 *
 * Why (the project spec's data-parallel.md, "Progress"): neither Open MPI nor MPICH advances a nonblocking
 * collective unless some MPI call runs in the process, and a thread blocked in
 * MPI_Wait burns a core. So:
 * - THREAD: one thread owns the engine's communicator. The compute thread hands it
 *   ops (tdm_comm_post: a FIFO, mutex + condition variable); the thread issues each
 *   MPI_I* call in FIFO order, then polls every op in flight with MPI_Test: a short
 *   spin (a few dozen polls), then sleeps of 20-50 us, and blocks on the condition
 *   variable (zero CPU) when nothing is queued or in flight. Completion is signalled
 *   back through a second condition variable.
 * - INLINE: tdm_comm_post issues the MPI_I* call at once from the compute thread, and
 *   tdm_comm_progress (called between layers and at each final gradient) tests every op
 *   in flight; a wait polls with the same spin-then-sleep back-off rather than MPI_Wait,
 *   which busy-polls.
 * Both issue the same calls in the same order with the same buffers, so results are
 * bitwise identical. All functions except the thread's own loop are called by the
 * compute thread only.
 */
#ifndef TDM_DIST_COMM_H
#define TDM_DIST_COMM_H

#include <mpi.h>
#include <stdint.h>

#include "core/error.h"
#include "distributed/config.h"

typedef enum tdm_comm_kind {
    TDM_COMM_ALLREDUCE,      /* in place: buf[0 .. count) summed over ranks */
    TDM_COMM_REDUCE_SCATTER, /* in place: buf[0 .. count*size) summed; rank r keeps
                                buf[r*count .. (r+1)*count). Under Open MPI tandem's own exchange: each
                                rank sends every other rank its block and sums the copies it receives
                                in rank order with the kernels' vector sum; elsewhere
                                MPI_Ireduce_scatter_block and MPI's op (TANDEM_REDUCE_SCATTER=tandem|mpi
                                chooses; tdm_comm_default_own_reduce_scatter) */
    TDM_COMM_ALLGATHER,      /* in place: rank r contributes buf[r*count .. (r+1)*count). With tandem's exchange
                                (the reduce-scatter's choice) each rank sends its block to every other and
                                receives theirs in place, sends first; else MPI_Iallgather */
    TDM_COMM_ALLGATHER_BF16, /* in place on bits[0 .. count*size) (bfloat16, rank r contributes
                                bits[r*count ..)); on completion the other ranks' elements are
                                widened into buf as fp32 (the caller keeps buf[r*count ..) equal
                                to its own bits) */
} tdm_comm_kind;

typedef enum tdm_comm_state {
    TDM_COMM_IDLE = 0, /* never posted, or completion consumed by a wait */
    TDM_COMM_QUEUED,   /* handed to the engine; in THREAD mode it stays QUEUED while the
                          thread issues and polls it, until DONE */
    TDM_COMM_ACTIVE,   /* INLINE mode only: MPI_I* issued */
    TDM_COMM_DONE,     /* completed (buffers final) */
} tdm_comm_state;

/* One collective. The caller owns the struct (one per bucket and kind, reused every
 * step) and fills kind, buf, count, bucket and name before posting. */
typedef struct tdm_comm_op {
    tdm_comm_kind kind;
    float *buf;
    uint16_t *bits;   /* ALLGATHER_BF16 only */
    int count;        /* elements (per rank for REDUCE_SCATTER and ALLGATHER) */
    int bucket;       /* for the profiler */
    const char *name; /* profiler event name, a string literal */
    /* engine-owned: */
    MPI_Request req;
    MPI_Request *xreqs;  /* tandem's exchange: [2 (size - 1)] sends, then receives */
    float *xbuf;         /* [(size - 1) * count]: the other ranks' copies of this rank's block, touched once */
    int n_xreqs, xcount; /* requests in flight; the count xbuf was sized for */
    uint64_t xgen;       /* the engine that owns xreqs and xbuf (they are freed with it) */
    int state;           /* tdm_comm_state; guarded by the engine's mutex */
    uint64_t post_ns, start_ns, done_ns; /* CLOCK_MONOTONIC */
} tdm_comm_op;

typedef struct tdm_comm tdm_comm;

/* Takes ownership of `comm` (frees it). max_ops bounds the ops in flight at once;
 * thread_nice (0-19) is the communication thread's niceness (THREAD mode only). */
tdm_comm *tdm_comm_create(MPI_Comm comm, tdm_ddp_progress mode, int max_ops, int thread_nice, tdm_error *err);
/* A wait (tdm_comm_wait, tdm_comm_wait_request) that lasts longer than timeout_ns (0, the default: forever) means
 * that a peer rank will never join the collective: stuck, or gone without its launcher
 * noticing. The engine then prints one line naming the collective, its bucket and the
 * timeout, and ends the job with MPI_Abort, so that no rank hangs. */
void tdm_comm_set_timeout(tdm_comm *c, uint64_t timeout_ns);
/* Waits for every posted op, stops the thread, frees the communicator. */
void tdm_comm_free(tdm_comm *c);

/* Hands `op` over (state must be IDLE or DONE). */
void tdm_comm_post(tdm_comm *c, tdm_comm_op *op);
/* INLINE: MPI_Test on every op in flight. THREAD: nothing. Cheap: call it often. */
void tdm_comm_progress(tdm_comm *c);
/* 1 when `op` is DONE (its buffers final; a wait on it returns at once), else 0. Never blocks; INLINE: no
 * MPI call (tdm_comm_progress makes the progress). */
int tdm_comm_test(tdm_comm *c, tdm_comm_op *op);
/* Blocks until `op` is DONE (returns at once if it is, or if it was never posted),
 * then sets it IDLE. Returns the nanoseconds spent blocked. */
uint64_t tdm_comm_wait(tdm_comm *c, tdm_comm_op *op);
/* Waits for `req`, a nonblocking collective the compute thread started on another
 * communicator (the control collectives: agreement, sums, timers), polling with the
 * engine's back-off and timeout. Returns the nanoseconds spent. */
uint64_t tdm_comm_wait_request(tdm_comm *c, MPI_Request *req, const char *what);
/* Waits for every op posted so far. */
void tdm_comm_wait_all(tdm_comm *c);
/* The same wait for a collective outside any engine (the trainer's start-up, validation and audit
 * agreements): polled, and after timeout_ns (0: never) one line naming `what` and the job ends. */
uint64_t tdm_wait_request_bounded(MPI_Request *req, uint64_t timeout_ns, const char *what);
/* The same for a transfer (a checkpoint's optimizer-state gather): polled back to back, as a
 * blocking MPI_Wait polls, with no back-off that would slow a large message; timeout_ns 0: MPI_Wait. */
void tdm_wait_request_spin_bounded(MPI_Request *req, uint64_t timeout_ns, const char *what);

/* 1 when reduce-scatters run as tandem's exchange by default: TANDEM_REDUCE_SCATTER=tandem or mpi when set,
 * else under Open MPI (measured: docs/benchmarks.md) and not under another library. */
int tdm_comm_default_own_reduce_scatter(void);
/* 1 when a wait that blocks the compute thread polls back to back, yielding the core at each round, rather than
 * with the back-off that runs beside compute (comm.c): TANDEM_WAIT_POLL=spin or backoff when set, else when the
 * launcher's ranks on this host are no more than its online cores. */
int tdm_comm_default_wait_spin(void);
/* That choice in words, with why: "back to back (2 ranks on this host, 2 cores)", "back-off (TANDEM_WAIT_POLL=
 * backoff)". */
void tdm_comm_describe_wait_poll(char *buf, size_t n);
/* "tandem" (its own exchange and vector sum) or "mpi" (MPI_Ireduce_scatter_block): how reduce-scatters run. */
const char *tdm_comm_reduce_scatter_name(const tdm_comm *c);
/* Chooses it (own: tandem's exchange) before any op is posted. */
void tdm_comm_set_reduce_scatter(tdm_comm *c, int own);

/* CPU time the communication thread has consumed (0 in INLINE mode). */
uint64_t tdm_comm_thread_cpu_ns(const tdm_comm *c);
/* The part of it spent polling back to back while the compute thread was blocked in tdm_comm_wait: CPU that
 * took no core from compute. */
uint64_t tdm_comm_thread_wait_poll_cpu_ns(const tdm_comm *c);
/* The communication thread's niceness as it read it back once started (-1 in INLINE mode
 * or before the thread has run). */
int tdm_comm_thread_nice(const tdm_comm *c);
int64_t tdm_comm_completed(const tdm_comm *c);

#endif
