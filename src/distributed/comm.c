/* comm.c - FIFO of collectives, progressed by a polling thread or inline (see comm.h). */
#include "distributed/comm.h"

#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "kernels/kernels.h"
#include "prof/prof.h"

/* Polling policy of the communication thread while something is in flight and compute runs
 * beside it: this many back-to-back MPI_Test rounds first (a collective that is about to finish
 * costs no sleep latency), then sleeps of SLEEP_SHORT_NS, and SLEEP_LONG_NS once a transfer has
 * been pending for a while. Measured with bench/bench_comm (2 ranks, shared memory, 33.6 MB of
 * gradients in 4 buckets): the thread used 22-24 ms of CPU while the reduce-scatters alone took
 * 230-265 ms, and 3-5% of the step time in full steps.
 * While the compute thread is blocked waiting on a collective, its core is free, and every sleep
 * stalls the transfer: through shared memory a message moves only when a rank polls
 * (bench/plan/poll_pace.sh: a lone 1-bucket reduce-scatter took twice the time of three smaller
 * ones). Then the thread polls back to back, yielding the core at each round to any thread that
 * is ready to run; an inline wait does the same. Not where the host has more ranks than cores: there
 * the polls would take the cores the other ranks compute on (tdm_comm_default_wait_spin). */
enum { SPIN_POLLS = 32, SHORT_SLEEPS = 50 };
#define SLEEP_SHORT_NS 20000L
#define SLEEP_LONG_NS  50000L
#define CTL_SPIN_NS    2000000ull
/* the tag of tandem's reduce-scatter messages, on the engine's own communicator */
#define XCHG_TAG       7301

struct tdm_comm {
    MPI_Comm comm;
    int rank, size;
    tdm_ddp_progress mode;
    int max_ops;
    int thread_nice;
    uint64_t timeout_ns; /* a wait longer than this aborts the job; 0: wait forever */
    int applied_nice;    /* what the thread read back; -1 until then (guarded by mu) */

    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* compute -> comm: something queued, or stop */
    pthread_cond_t done_cv; /* comm -> compute: some op completed */
    tdm_comm_op **queue;    /* ring [max_ops], guarded by mu */
    int q_head, q_len;
    int stop;          /* guarded by mu */
    int64_t completed; /* guarded by mu */
    int waiters;       /* compute threads blocked in tdm_comm_wait: changed under mu, read atomically */

    tdm_comm_op **active; /* [max_ops] ops with an MPI request: owned by the thread (THREAD)
                               or the compute thread (INLINE) */
    int n_active;
    tdm_comm_op **taken; /* [max_ops] the thread's scratch */
    tdm_comm_op **done;  /* [max_ops] the thread's scratch */

    tdm_comm_op **pending; /* [max_ops] posted and not yet waited: compute thread only */
    int n_pending;

    int own_rs;    /* reduce-scatters by tandem's exchange (comm.h), not MPI's */
    int wait_spin; /* a blocked wait polls back to back, yielding (comm.h), not with the back-off */
    uint64_t gen;  /* this engine's number, for the ops' scratch */
    void **owned;  /* the ops' xreqs and xbuf, freed with the engine */
    int n_owned, cap_owned;

    pthread_t thread;
    int has_thread;
    clockid_t thread_clock;
    uint64_t final_thread_cpu_ns;
    uint64_t wait_poll_cpu_ns; /* of the thread's CPU, polling while compute waited: written by the thread,
                                  read atomically */
};

static void *own(tdm_comm *c, void *p) {
    if (c->n_owned == c->cap_owned) {
        c->cap_owned = c->cap_owned ? 2 * c->cap_owned : 16;
        c->owned = tdm_xrealloc(c->owned, (size_t)c->cap_owned * sizeof *c->owned);
    }
    return c->owned[c->n_owned++] = p;
}

/* Whether reduce-scatters and all-gathers go by tandem's exchange rather than MPI's collectives. */
static int uses_exchange(const tdm_comm *c) { return c->own_rs && c->size > 1; }

/* The op's requests for tandem's exchange, allocated on its first use by this engine (and freed with it); its
 * scratch (xbuf) is the reduce-scatter's to size. */
static void exchange_reqs(tdm_comm *c, tdm_comm_op *op) {
    if (op->xgen == c->gen) return;
    op->xreqs = own(c, tdm_xcalloc((size_t)2 * (size_t)(c->size - 1), sizeof *op->xreqs));
    op->xbuf = NULL, op->xcount = -1;
    op->xgen = c->gen;
}

/* tandem's reduce-scatter: the other ranks' copies of this rank's block land in op->xbuf (allocated and
 * touched on the op's first use, then reused: no page is faulted again), this rank's copies of theirs go
 * straight from buf; the sum is done on completion (finish_op). Point-to-point on the engine's own
 * communicator: every rank posts the ops in the same order, and MPI keeps messages of one pair in order.
 * Sends are posted before receives. Under a rendezvous protocol a receive that matches the peer's request
 * at once (it arrived while this rank was progressing something else) answers it before this rank's own
 * request is out; the peer then starts its data before it has seen that request, and its answer to it
 * waits behind that data (Open MPI over TCP queues every fragment to a peer behind the one being written):
 * the two directions run one after the other, and the rank that posted first completes one transfer late.
 * With the request out first, the peer answers it before any data moves. */
static void start_exchange(tdm_comm *c, tdm_comm_op *op) {
    const int p = c->size, r = c->rank, n = op->count;
    exchange_reqs(c, op);
    if (op->xcount != n) {
        op->xbuf = own(c, tdm_xcalloc((size_t)(p - 1) * (size_t)n, sizeof *op->xbuf));
        op->xcount = n;
    }
    int k = 0;
    for (int i = 1; i < p; i++) { /* to the next ranks first, so that pairs do not all queue on rank 0 */
        const int q = (r + i) % p;
        MPI_Isend(op->buf + (size_t)q * (size_t)n, n, MPI_FLOAT, q, XCHG_TAG, c->comm, &op->xreqs[k++]);
    }
    for (int q = 0; q < p; q++)
        if (q != r)
            MPI_Irecv(op->xbuf + (size_t)(q < r ? q : q - 1) * (size_t)n, n, MPI_FLOAT, q, XCHG_TAG, c->comm,
                      &op->xreqs[k++]);
    op->n_xreqs = k;
}

/* tandem's all-gather (with its exchange): this rank's block of base (n elements of `elem` bytes) to every other
 * rank, theirs straight into their blocks, sends first as the exchange's are. */
static void start_gather(tdm_comm *c, tdm_comm_op *op, void *base, MPI_Datatype type, size_t elem) {
    const int p = c->size, r = c->rank, n = op->count;
    exchange_reqs(c, op);
    char *b = base;
    int k = 0;
    for (int i = 1; i < p; i++)
        MPI_Isend(b + (size_t)r * (size_t)n * elem, n, type, (r + i) % p, XCHG_TAG, c->comm, &op->xreqs[k++]);
    for (int i = 1; i < p; i++) {
        const int q = (r + p - i) % p;
        MPI_Irecv(b + (size_t)q * (size_t)n * elem, n, type, q, XCHG_TAG, c->comm, &op->xreqs[k++]);
    }
    op->n_xreqs = k;
}

/* Whether op's transfer is complete (one MPI_Test, or one of each of the exchange's requests: a completed
 * request is MPI_REQUEST_NULL, which tests complete). */
static int test_op(tdm_comm_op *op) {
    int flag = 0;
    if (op->n_xreqs > 0) {
        flag = 1;
        for (int i = 0; i < op->n_xreqs; i++) {
            int f = 0;
            MPI_Test(&op->xreqs[i], &f, MPI_STATUS_IGNORE);
            flag &= f;
        }
        if (flag) op->n_xreqs = 0;
    } else {
        MPI_Test(&op->req, &flag, MPI_STATUS_IGNORE);
    }
    return flag;
}

/* The exchange's sum: rank r's block is the sum of every rank's copy of it in rank order, ((b0 + b1) + b2)
 * + ..., the same bits whichever rank computes it and whichever thread runs it. */
static void sum_exchange(const tdm_comm *c, tdm_comm_op *op) {
    const int p = c->size, r = c->rank;
    const int64_t n = op->count;
    float *mine = op->buf + (size_t)r * (size_t)n;
    if (p == 2) { /* b0 + b1 == b1 + b0: one pass into place */
        tdm_add_into(mine, op->xbuf, n);
        return;
    }
    float *acc = r == 0 ? mine : op->xbuf; /* block 0's copy */
    for (int q = 1; q < p; q++) tdm_add_into(acc, q == r ? mine : op->xbuf + (size_t)(q < r ? q : q - 1) * n, n);
    if (acc != mine) memcpy(mine, acc, (size_t)n * sizeof(float));
}

/* Issues the MPI call of op. */
static void start_op(tdm_comm *c, tdm_comm_op *op) {
    const int exchange = uses_exchange(c);
    op->start_ns = tdm_now_ns();
    op->n_xreqs = 0;
    switch (op->kind) {
    case TDM_COMM_ALLREDUCE:
        MPI_Iallreduce(MPI_IN_PLACE, op->buf, op->count, MPI_FLOAT, MPI_SUM, c->comm, &op->req);
        break;
    case TDM_COMM_REDUCE_SCATTER:
        if (exchange) start_exchange(c, op);
        else MPI_Ireduce_scatter_block(MPI_IN_PLACE, op->buf, op->count, MPI_FLOAT, MPI_SUM, c->comm, &op->req);
        break;
    case TDM_COMM_ALLGATHER:
        if (exchange) start_gather(c, op, op->buf, MPI_FLOAT, sizeof(float));
        else MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, op->buf, op->count, MPI_FLOAT, c->comm, &op->req);
        break;
    case TDM_COMM_ALLGATHER_BF16:
        if (exchange) start_gather(c, op, op->bits, MPI_UINT16_T, sizeof(uint16_t));
        else MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, op->bits, op->count, MPI_UINT16_T, c->comm, &op->req);
        break;
    }
}

/* Runs in whichever thread observed completion, before anyone is told. */
static void finish_op(tdm_comm *c, tdm_comm_op *op) {
    /* In-place reduce-scatter leaves rank r's block at the start of the buffer; move it
     * to where the layout says rank r's shard lives. */
    if (op->kind == TDM_COMM_REDUCE_SCATTER && uses_exchange(c)) sum_exchange(c, op);
    else if (op->kind == TDM_COMM_REDUCE_SCATTER && c->rank != 0)
        memmove(op->buf + (size_t)c->rank * (size_t)op->count, op->buf, (size_t)op->count * sizeof(float));
    /* bfloat16 parameters: the peers' shards widened into the fp32 values the kernels read. This
     * rank's own shard is skipped: the optimizer wrote its values and its bits together. */
    if (op->kind == TDM_COMM_ALLGATHER_BF16 && op->buf) { /* no buf: the bits are the parameters' storage */
        const int64_t n = op->count, r = c->rank;
        tdm_widen_bf16(op->buf, op->bits, r * n);
        tdm_widen_bf16(op->buf + (r + 1) * n, op->bits + (r + 1) * n, (c->size - r - 1) * n);
    }
    op->done_ns = tdm_now_ns();
    if (tdm_prof_on(1)) {
        /* bytes as NCCL's tests count them: an all-reduce's buffer, the others' whole (all ranks') buffer */
        const int64_t elems = op->kind == TDM_COMM_ALLREDUCE ? (int64_t)op->count : (int64_t)op->count * c->size;
        tdm_prof_collective(1, op->name, op->start_ns, op->done_ns, op->bucket,
                            elems * (op->kind == TDM_COMM_ALLGATHER_BF16 ? 2 : 4));
    }
}

static void sleep_ns(long ns) {
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

/* The back-off after the idle_polls-th poll in a row that completed nothing. */
static void poll_backoff(int idle_polls) {
    if (idle_polls > SPIN_POLLS) sleep_ns(idle_polls > SPIN_POLLS + SHORT_SLEEPS ? SLEEP_LONG_NS : SLEEP_SHORT_NS);
}

/* The thread leaves back-to-back polling (begun at its CPU time t0): the CPU it took counts apart. */
static void end_wait_poll(tdm_comm *c, uint64_t *t0) {
    if (!*t0) return;
    uint64_t now = tdm_thread_cpu_ns(), d = now > *t0 ? now - *t0 : 0;
    __atomic_store_n(&c->wait_poll_cpu_ns, c->wait_poll_cpu_ns + d, __ATOMIC_RELAXED);
    tdm_prof_thread_wait_poll_cpu(d);
    *t0 = 0;
}

static void *comm_main(void *arg) {
    tdm_comm *c = arg;
    tdm_prof_thread_name("comm");
    prctl(PR_SET_NAME, "tdm-comm", 0, 0, 0); /* what top -H, perf and gdb show for this thread */
    /* The default 50 us timer slack would stretch every short sleep to ~70-100 us. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    /* A lower priority than compute: on busy cores the thread then runs when a compute
     * thread blocks or its time slice ends, instead of preempting it at every poll. On
     * Linux the "process" of setpriority is this thread (a thread id). Raising one's own
     * niceness needs no privilege; failing to is harmless, so it is not checked. */
    const id_t tid = (id_t)syscall(SYS_gettid);
    if (c->thread_nice > 0) (void)setpriority(PRIO_PROCESS, tid, c->thread_nice);
    errno = 0;
    int nice_now = getpriority(PRIO_PROCESS, tid);
    int idle_polls = 0;
    uint64_t wait_poll_t0 = 0; /* the thread's CPU time when it began polling for a waiter; 0: not */
    pthread_mutex_lock(&c->mu);
    c->applied_nice = errno == 0 ? nice_now : -1;
    for (;;) {
        if (c->q_len == 0 && c->n_active == 0) end_wait_poll(c, &wait_poll_t0);
        while (!c->stop && c->q_len == 0 && c->n_active == 0) pthread_cond_wait(&c->work_cv, &c->mu);
        if (c->stop && c->q_len == 0 && c->n_active == 0) break;
        int n_taken = 0;
        while (c->q_len > 0) {
            c->taken[n_taken++] = c->queue[c->q_head];
            c->q_head = (c->q_head + 1) % c->max_ops;
            c->q_len--;
        }
        pthread_mutex_unlock(&c->mu);

        for (int i = 0; i < n_taken; i++) { /* FIFO order = the order every rank posts in */
            start_op(c, c->taken[i]);
            c->active[c->n_active++] = c->taken[i];
        }
        int n_done = 0;
        for (int i = 0; i < c->n_active;) {
            if (test_op(c->active[i])) {
                finish_op(c, c->active[i]);
                c->done[n_done++] = c->active[i];
                c->active[i] = c->active[--c->n_active];
            } else {
                i++;
            }
        }
        if (n_done > 0) {
            pthread_mutex_lock(&c->mu);
            for (int i = 0; i < n_done; i++) c->done[i]->state = TDM_COMM_DONE;
            c->completed += n_done;
            pthread_cond_broadcast(&c->done_cv);
            pthread_mutex_unlock(&c->mu);
            idle_polls = 0;
            end_wait_poll(c, &wait_poll_t0);
        } else if (n_taken == 0 && c->n_active > 0) {
            if (c->wait_spin && __atomic_load_n(&c->waiters, __ATOMIC_RELAXED) > 0) {
                if (!wait_poll_t0) wait_poll_t0 = tdm_thread_cpu_ns();
                sched_yield();
            } else {
                end_wait_poll(c, &wait_poll_t0);
                poll_backoff(++idle_polls);
            }
        }
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    end_wait_poll(c, &wait_poll_t0);
    return NULL;
}

/* A collective that has not completed after the timeout waits for a rank that will never
 * join: stuck (a failed allocation that a library retries forever, a stopped process) or
 * gone without its launcher noticing. Nothing can be returned to the caller with the
 * collective still posted, so the job ends here, on every rank. bucket < 0: a control
 * collective. */
static void timeout_abort_as(int rank, uint64_t timeout_ns, const char *what, int bucket, uint64_t waited_ns) {
    char where[32] = "";
    if (bucket >= 0) snprintf(where, sizeof where, " of bucket %d", bucket + 1);
    fprintf(stderr,
            "tandem: rank %d: the data-parallel %s%s has not completed after %.1f s "
            "(--distributed-timeout-minutes %g): another rank is stuck or has died; aborting the job\n",
            rank, what ? what : "collective", where, (double)waited_ns / 1e9, (double)timeout_ns / 60e9);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort(); /* MPI_Abort does not return; if it did, the job must still end */
}

static void timeout_abort(const tdm_comm *c, const char *what, int bucket, uint64_t waited_ns) {
    timeout_abort_as(c->rank, c->timeout_ns, what, bucket, waited_ns);
}

void tdm_comm_set_timeout(tdm_comm *c, uint64_t timeout_ns) { c->timeout_ns = timeout_ns; }

tdm_comm *tdm_comm_create(MPI_Comm comm, tdm_ddp_progress mode, int max_ops, int thread_nice, tdm_error *err) {
    tdm_comm *c = tdm_xcalloc(1, sizeof *c);
    c->comm = comm;
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->size);
    c->mode = mode;
    c->thread_nice = thread_nice;
    static uint64_t engines; /* engines are created by the compute thread only */
    c->gen = ++engines;
    c->own_rs = tdm_comm_default_own_reduce_scatter();
    c->wait_spin = tdm_comm_default_wait_spin();
    c->applied_nice = -1;
    c->max_ops = max_ops > 0 ? max_ops : 1;
    c->queue = tdm_xcalloc((size_t)c->max_ops, sizeof *c->queue);
    c->active = tdm_xcalloc((size_t)c->max_ops, sizeof *c->active);
    c->taken = tdm_xcalloc((size_t)c->max_ops, sizeof *c->taken);
    c->done = tdm_xcalloc((size_t)c->max_ops, sizeof *c->done);
    c->pending = tdm_xcalloc((size_t)c->max_ops, sizeof *c->pending);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->work_cv, NULL);
    pthread_condattr_t ca; /* timed waits on done_cv count on the clock of tdm_now_ns */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->done_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (mode == TDM_DDP_PROGRESS_THREAD) {
        if (pthread_create(&c->thread, NULL, comm_main, c) != 0) {
            tdm_comm_free(c);
            tdm_errorf(err, "communication thread: pthread_create failed");
            return NULL;
        }
        c->has_thread = 1;
        if (pthread_getcpuclockid(c->thread, &c->thread_clock) != 0) c->thread_clock = (clockid_t)-1;
    }
    return c;
}

void tdm_comm_free(tdm_comm *c) {
    if (!c) return;
    tdm_comm_wait_all(c);
    if (c->has_thread) {
        c->final_thread_cpu_ns = tdm_comm_thread_cpu_ns(c);
        pthread_mutex_lock(&c->mu);
        c->stop = 1;
        pthread_cond_signal(&c->work_cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
    }
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->work_cv);
    pthread_cond_destroy(&c->done_cv);
    if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
    free(c->queue);
    free(c->active);
    free(c->taken);
    free(c->done);
    free(c->pending);
    for (int i = 0; i < c->n_owned; i++) free(c->owned[i]);
    free(c->owned);
    free(c);
}

int tdm_comm_default_own_reduce_scatter(void) {
    const char *rs = getenv("TANDEM_REDUCE_SCATTER");
    if (rs && !strcmp(rs, "mpi")) return 0;
    if (rs && !strcmp(rs, "tandem")) return 1;
    /* measured (docs/benchmarks.md, "Data parallelism on two cores"): under Open MPI the exchange takes half the
     * communication thread's CPU of MPI's op; under MPICH no difference showed, and MPI's op stays */
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(ver, &len);
    return !strncmp(ver, "Open MPI", 8);
}

/* Whether a wait that blocks compute polls back to back, and why, in words (why may be NULL). The ranks on this
 * host come from the launcher (Open MPI, MPICH's Hydra; 1 without one), not from a collective: a rank whose
 * engine is not made would leave the others waiting in it. The cores are the host's online ones, not this
 * process's affinity: a launcher that binds each rank to a core of its own leaves one. */
static int wait_spin_rule(char *why, size_t n) {
    const char *v = getenv("TANDEM_WAIT_POLL");
    if (v && (!strcmp(v, "spin") || !strcmp(v, "backoff"))) {
        const int spin = !strcmp(v, "spin");
        if (why) snprintf(why, n, "%s (TANDEM_WAIT_POLL=%s)", spin ? "back to back" : "back-off", v);
        return spin;
    }
    const char *r = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!r) r = getenv("MPI_LOCALNRANKS");
    const long ranks = r && atol(r) > 0 ? atol(r) : 1, online = sysconf(_SC_NPROCESSORS_ONLN),
               cores = online > 0 ? online : 1;
    /* more ranks than cores, and the polls would take the cores that the other ranks compute on
     * (docs/benchmarks.md, "Waiting on a collective": 3 ranks on 2 cores, +11% a step) */
    const int spin = ranks <= cores;
    if (why)
        snprintf(why, n, "%s (%ld rank%s on this host, %ld core%s)", spin ? "back to back" : "back-off", ranks,
                 ranks == 1 ? "" : "s", cores, cores == 1 ? "" : "s");
    return spin;
}

int tdm_comm_default_wait_spin(void) { return wait_spin_rule(NULL, 0); }

void tdm_comm_describe_wait_poll(char *buf, size_t n) { (void)wait_spin_rule(buf, n); }

const char *tdm_comm_reduce_scatter_name(const tdm_comm *c) { return c->own_rs ? "tandem" : "mpi"; }

void tdm_comm_set_reduce_scatter(tdm_comm *c, int own) { c->own_rs = own; }

void tdm_comm_post(tdm_comm *c, tdm_comm_op *op) {
    /* A caller's bug, not bad input: an op posted again before its wait, or more ops in
     * flight than the engine was sized for, would corrupt the ring and the pending list. */
    if (c->n_pending >= c->max_ops || (op->state != TDM_COMM_IDLE && op->state != TDM_COMM_DONE)) {
        fprintf(stderr, "tandem: internal error: tdm_comm_post of '%s' (bucket %d) %s\n", op->name ? op->name : "?",
                op->bucket,
                c->n_pending >= c->max_ops ? "with every slot of the engine in flight" : "before its previous wait");
        abort();
    }
    op->post_ns = tdm_now_ns();
    op->start_ns = op->done_ns = 0;
    c->pending[c->n_pending++] = op;
    if (c->mode == TDM_DDP_PROGRESS_INLINE) {
        op->state = TDM_COMM_ACTIVE;
        start_op(c, op);
        c->active[c->n_active++] = op;
        return;
    }
    pthread_mutex_lock(&c->mu);
    op->state = TDM_COMM_QUEUED;
    c->queue[(c->q_head + c->q_len) % c->max_ops] = op;
    c->q_len++;
    pthread_cond_signal(&c->work_cv);
    pthread_mutex_unlock(&c->mu);
}

void tdm_comm_progress(tdm_comm *c) {
    if (c->mode != TDM_DDP_PROGRESS_INLINE) return;
    for (int i = 0; i < c->n_active;) {
        tdm_comm_op *op = c->active[i];
        if (test_op(op)) {
            finish_op(c, op);
            op->state = TDM_COMM_DONE;
            c->completed++;
            c->active[i] = c->active[--c->n_active];
        } else {
            i++;
        }
    }
}

int tdm_comm_test(tdm_comm *c, tdm_comm_op *op) {
    if (c->mode == TDM_DDP_PROGRESS_INLINE) return op->state == TDM_COMM_DONE;
    pthread_mutex_lock(&c->mu);
    int done = op->state == TDM_COMM_DONE;
    pthread_mutex_unlock(&c->mu);
    return done;
}

uint64_t tdm_comm_wait(tdm_comm *c, tdm_comm_op *op) {
    uint64_t waited = 0;
    for (int i = 0; i < c->n_pending; i++)
        if (c->pending[i] == op) {
            c->pending[i] = c->pending[--c->n_pending];
            break;
        }
    if (c->mode == TDM_DDP_PROGRESS_INLINE) {
        if (op->state == TDM_COMM_ACTIVE) {
            /* Not MPI_Wait: it busy-polls without yielding, and on a loaded machine that
             * takes the core the peer rank needs to make its half of the progress. */
            uint64_t t0 = tdm_now_ns();
            for (int idle = 0;; idle++) {
                tdm_comm_progress(c);
                if (op->state == TDM_COMM_DONE) break;
                uint64_t now = tdm_now_ns();
                if (c->timeout_ns && now - t0 > c->timeout_ns) timeout_abort(c, op->name, op->bucket, now - t0);
                if (c->wait_spin) sched_yield();
                else poll_backoff(idle);
            }
            waited = tdm_now_ns() - t0;
        }
        op->state = TDM_COMM_IDLE;
    } else {
        pthread_mutex_lock(&c->mu);
        if (op->state == TDM_COMM_QUEUED) {
            __atomic_store_n(&c->waiters, c->waiters + 1, __ATOMIC_RELAXED);
            uint64_t t0 = tdm_now_ns();
            const uint64_t deadline = t0 + c->timeout_ns;
            const struct timespec dl = {(time_t)(deadline / 1000000000ull), (long)(deadline % 1000000000ull)};
            while (op->state != TDM_COMM_DONE) {
                if (!c->timeout_ns) {
                    pthread_cond_wait(&c->done_cv, &c->mu);
                } else if (pthread_cond_timedwait(&c->done_cv, &c->mu, &dl) == ETIMEDOUT &&
                           op->state != TDM_COMM_DONE) {
                    pthread_mutex_unlock(&c->mu);
                    timeout_abort(c, op->name, op->bucket, tdm_now_ns() - t0);
                }
            }
            waited = tdm_now_ns() - t0;
            __atomic_store_n(&c->waiters, c->waiters - 1, __ATOMIC_RELAXED);
        }
        op->state = TDM_COMM_IDLE;
        pthread_mutex_unlock(&c->mu);
    }
    if (waited && tdm_prof_on(1)) {
        uint64_t t1 = tdm_now_ns();
        tdm_prof_complete(TDM_PROF_WAIT, 1, op->name, t1 - waited, t1, op->bucket);
    }
    return waited;
}

static uint64_t wait_request(int rank, uint64_t timeout_ns, MPI_Request *req, const char *what) {
    /* Control collectives are small and usually wait for a peer that is about to arrive: the
     * first CTL_SPIN_NS poll back to back, as the blocking call did (a sleep there costs
     * ~0.1 ms with the compute thread's timer slack); longer waits back off like the others. */
    uint64_t t0 = tdm_now_ns();
    for (int idle = 0;;) {
        int flag = 0;
        MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (flag) break;
        uint64_t now = tdm_now_ns();
        if (timeout_ns && now - t0 > timeout_ns) timeout_abort_as(rank, timeout_ns, what, -1, now - t0);
        if (now - t0 > CTL_SPIN_NS) poll_backoff(++idle);
    }
    return tdm_now_ns() - t0;
}

uint64_t tdm_comm_wait_request(tdm_comm *c, MPI_Request *req, const char *what) {
    return wait_request(c->rank, c->timeout_ns, req, what);
}

void tdm_wait_request_spin_bounded(MPI_Request *req, uint64_t timeout_ns, const char *what) {
    if (!timeout_ns) {
        MPI_Wait(req, MPI_STATUS_IGNORE);
        return;
    }
    uint64_t t0 = tdm_now_ns();
    for (;;) {
        int flag = 0;
        MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (flag) return;
        uint64_t now = tdm_now_ns();
        if (now - t0 > timeout_ns) {
            int rank = 0;
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
            timeout_abort_as(rank, timeout_ns, what, -1, now - t0);
        }
    }
}

uint64_t tdm_wait_request_bounded(MPI_Request *req, uint64_t timeout_ns, const char *what) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return wait_request(rank, timeout_ns, req, what);
}

void tdm_comm_wait_all(tdm_comm *c) {
    while (c->n_pending > 0) tdm_comm_wait(c, c->pending[0]);
}

uint64_t tdm_comm_thread_cpu_ns(const tdm_comm *c) {
    if (!c->has_thread) return 0;
    if (c->stop || c->thread_clock == (clockid_t)-1) return c->final_thread_cpu_ns;
    struct timespec ts;
    if (clock_gettime(c->thread_clock, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t tdm_comm_thread_wait_poll_cpu_ns(const tdm_comm *c) {
    return c->has_thread ? __atomic_load_n(&c->wait_poll_cpu_ns, __ATOMIC_RELAXED) : 0;
}

int tdm_comm_thread_nice(const tdm_comm *c) {
    if (!c->has_thread) return -1;
    tdm_comm *m = (tdm_comm *)c;
    pthread_mutex_lock(&m->mu);
    int v = c->applied_nice;
    pthread_mutex_unlock(&m->mu);
    return v;
}

int64_t tdm_comm_completed(const tdm_comm *c) {
    tdm_comm *m = (tdm_comm *)c;
    if (c->mode == TDM_DDP_PROGRESS_INLINE) return c->completed;
    pthread_mutex_lock(&m->mu);
    int64_t n = c->completed;
    pthread_mutex_unlock(&m->mu);
    return n;
}
