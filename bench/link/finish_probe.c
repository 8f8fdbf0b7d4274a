/* finish_probe.c - when each of 2 ranks completes a stream of gradient exchanges posted apart.
 *
 * Each rank posts NB exchanges of MB megabytes each (tandem's reduce-scatter between 2 ranks: Irecv of
 * half the buffer from the peer, Isend of the other half to it), one every SPACING_MS, rank 1 starting
 * LAG_MS after rank 0 (the later rank of a step), and completes them as tandem's communication thread
 * does: MPI_Test, and a sleep of 50 us when nothing completed. With THREAD 1 a second thread posts and
 * completes them while the main thread waits for it polling a flag with sched_yield (tandem's compute
 * thread in a wait); with 0 the main thread does it all. Prints, per repeat, each rank's time from the
 * common start to its last exchange's completion, and their difference (rank 0 less rank 1: > 0 when the
 * rank that posted first completed last). With LATE_POLLS 1 the later rank drives MPI's progress (MPI_Iprobe)
 * while it waits to post, as a rank in a barrier or completing other collectives does: the early rank's first
 * message arrives there before the matching receive is posted. SEND_FIRST 1 posts each Isend before its Irecv;
 * 2 posts the Isends of all the exchanges due at once (SPACING_MS 0: all of them) before any of their Irecvs.
 * With THREAD 1, NICE sets the second thread's niceness (tandem's --comm-thread-nice) and COMPUTE 1 has the main
 * thread compute (a float loop on 256 KB) from the common start to its rank's last post, as a backward that makes
 * gradient buckets ready does, and only then wait, asleep (tandem's compute thread blocks on a condition variable);
 * while it waits the thread polls back to back, yielding, as tandem's does for a waiting compute thread, or with
 * BACKOFF 1 keeps sleeping 50 us when nothing completed (TANDEM_WAIT_POLL=backoff).
 *   mpirun -np 2 finish_probe [NB [MB [LAG_MS [SPACING_MS [THREAD [REPEATS [LATE_POLLS [SEND_FIRST [NICE [COMPUTE
 *   [BACKOFF]]]]]]]]]]]   (defaults 2 3.67 20 5 1 5 0 0 0 0 0) */
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef struct probe {
    int nb, rank, peer, n; /* n: floats each way per exchange */
    int late_polls, send_first, nice, backoff;
    double lag_s, spacing_s, t0, *done;
    float *send, *recv;
    volatile int finished;
    volatile int waiting; /* the main thread has stopped computing and waits */
} probe;

static double now(void) { return MPI_Wtime(); }

static void sleep_until(double t) {
    for (double d = t - now(); d > 0; d = t - now()) {
        struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

/* Posts the exchanges on schedule and completes them; done[k]: exchange k's completion from t0. */
static void *run(void *arg) {
    probe *p = arg;
    if (p->nice > 0) (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), p->nice);
    MPI_Request *req = malloc((size_t)p->nb * 2 * sizeof *req);
    int posted = 0, left = p->nb;
    while (left > 0) {
        const double start = p->t0 + (p->rank ? p->lag_s : 0);
        int due = posted; /* the exchanges whose time has come: posted together */
        while (due < p->nb && now() >= start + due * p->spacing_s) due++;
        for (int k = posted; k < due; k++) {
            const size_t at = (size_t)k * (size_t)p->n;
            if (p->send_first) MPI_Isend(p->send + at, p->n, MPI_FLOAT, p->peer, k, MPI_COMM_WORLD, &req[2 * k + 1]);
            if (p->send_first != 2) MPI_Irecv(p->recv + at, p->n, MPI_FLOAT, p->peer, k, MPI_COMM_WORLD, &req[2 * k]);
            if (!p->send_first) MPI_Isend(p->send + at, p->n, MPI_FLOAT, p->peer, k, MPI_COMM_WORLD, &req[2 * k + 1]);
            p->done[k] = -1;
        }
        if (p->send_first == 2) /* every send of the exchanges posted together before any of their receives */
            for (int k = posted; k < due; k++)
                MPI_Irecv(p->recv + (size_t)k * (size_t)p->n, p->n, MPI_FLOAT, p->peer, k, MPI_COMM_WORLD, &req[2 * k]);
        posted = due;
        int any = 0;
        for (int k = 0; k < posted; k++) {
            if (p->done[k] >= 0) continue;
            int f = 0;
            MPI_Status st[2];
            MPI_Testall(2, &req[2 * k], &f, st);
            if (f) p->done[k] = now() - p->t0, left--, any = 1;
        }
        if (!any) {
            if (!p->backoff && __atomic_load_n(&p->waiting, __ATOMIC_ACQUIRE)) sched_yield();
            else usleep(50);
        }
        if (posted < p->nb && left == p->nb - posted) {
            const double next = start + posted * p->spacing_s;
            if (p->late_polls && posted == 0) { /* waiting to post the first exchange */
                int f;
                while (now() < next) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &f, MPI_STATUS_IGNORE);
            }
            sleep_until(next);
        }
    }
    free(req);
    __atomic_store_n(&p->finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* The main thread's work until t: a float loop over 256 KB (in L2), checking the clock every pass. */
static float compute_until(double t) {
    enum { N = 65536 };
    static float x[N];
    float acc = 0;
    while (now() < t) {
        for (int i = 0; i < N; i++) x[i] = x[i] * 0.999f + 0.001f * (float)i, acc += x[i];
    }
    return acc;
}

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int nb = argc > 1 ? atoi(argv[1]) : 2;
    const double mb = argc > 2 ? atof(argv[2]) : 3.67;
    const double lag_ms = argc > 3 ? atof(argv[3]) : 20, spacing_ms = argc > 4 ? atof(argv[4]) : 5;
    const int thread = argc > 5 ? atoi(argv[5]) : 1, repeats = argc > 6 ? atoi(argv[6]) : 5;
    const int late_polls = argc > 7 ? atoi(argv[7]) : 0, send_first = argc > 8 ? atoi(argv[8]) : 0;
    const int nice = argc > 9 ? atoi(argv[9]) : 0, compute = argc > 10 ? atoi(argv[10]) : 0;
    const int backoff = argc > 11 ? atoi(argv[11]) : 0;
    if (size != 2 || nb < 1 || nb > 64 || !(mb > 0) || repeats < 1 || (thread && provided < MPI_THREAD_MULTIPLE) ||
        nice < 0 || nice > 19 || (compute && !thread) || (backoff != 0 && backoff != 1)) {
        if (rank == 0)
            fprintf(stderr, "finish_probe: 2 ranks, NB 1-64, MB > 0, REPEATS >= 1, NICE 0-19, BACKOFF 0 or 1 (and "
                            "threads; COMPUTE needs THREAD 1)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    probe p = {.nb = nb, .rank = rank, .peer = 1 - rank, .lag_s = lag_ms / 1e3, .spacing_s = spacing_ms / 1e3};
    p.late_polls = late_polls, p.send_first = send_first, p.nice = nice, p.backoff = backoff;
    p.n = (int)(mb * 1e6 / 4 / 2);
    p.send = calloc((size_t)nb * (size_t)p.n, sizeof *p.send);
    p.recv = calloc((size_t)nb * (size_t)p.n, sizeof *p.recv);
    p.done = calloc((size_t)nb, sizeof *p.done);
    if (rank == 0)
        printf("nb,mb,lag_ms,spacing_ms,thread,late_polls,send_first,nice,compute,backoff,repeat,rank0_ms,rank1_ms,"
               "apart_ms\n");
    volatile float sink = 0;             /* keeps the compute */
    for (int r = 0; r <= repeats; r++) { /* repeat 0: a warm-up, not printed */
        MPI_Barrier(MPI_COMM_WORLD);
        p.t0 = now() + 0.01;
        p.finished = 0;
        p.waiting = 0;
        if (thread) {
            pthread_t th;
            pthread_create(&th, NULL, run, &p);
            if (compute) {
                sink += compute_until(p.t0 + (rank ? p.lag_s : 0) + (nb - 1) * p.spacing_s);
                __atomic_store_n(&p.waiting, 1, __ATOMIC_RELEASE);
            }
            while (!__atomic_load_n(&p.finished, __ATOMIC_ACQUIRE)) { /* COMPUTE: asleep, as tandem's blocked wait */
                if (compute) usleep(200);
                else sched_yield();
            }
            pthread_join(th, NULL);
        } else {
            run(&p);
        }
        double last = 0, both[2];
        for (int k = 0; k < nb; k++) last = p.done[k] > last ? p.done[k] : last;
        MPI_Gather(&last, 1, MPI_DOUBLE, both, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (rank == 0 && r > 0)
            printf("%d,%.2f,%.1f,%.1f,%d,%d,%d,%d,%d,%d,%d,%.2f,%.2f,%.2f\n", nb, mb, lag_ms, spacing_ms, thread,
                   late_polls, send_first, nice, compute, backoff, r, both[0] * 1e3, both[1] * 1e3,
                   (both[0] - both[1]) * 1e3);
    }
    free(p.send);
    free(p.recv);
    free(p.done);
    MPI_Finalize();
    return 0;
}
