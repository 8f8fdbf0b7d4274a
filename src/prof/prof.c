/* prof.c - recording: per-thread preallocated event buffers.
 *
 * Each thread that records (or names itself) gets one prof_thread, found through a
 * thread-local pointer and kept on a global list under a mutex so the collector can
 * reach it. A thread's buffer is (re)sized by that thread itself, at its first event of
 * a recording, so the hot path never takes a lock and never allocates: it checks the
 * level, reads the clock, writes one slot and publishes it with a release store of the
 * count. A full buffer counts drops instead of growing. (The one lock taken off the hot
 * path: the first event of a recording picks up its spare buffer under the global mutex.)
 *
 * Recordings are numbered (g_generation). A buffer that belongs to an older recording
 * is reset by its owner on its next event, and skipped by the collector.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "prof/prof_internal.h"

_Atomic int tdm_prof_active_level = -1;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static prof_thread *g_threads; /* list, newest first */
static int g_n_threads;
static atomic_int g_generation; /* recording number; 0 = never recorded */
static atomic_llong g_capacity = 1 << 20;
static _Thread_local prof_thread *t_self;
static pthread_key_t g_exit_key;
static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;

/* The thread's counters from /proc and its own. */
static void read_cpu(prof_thread *t, prof_cpu_raw *raw) {
    prof_read_cpu(t->os_tid, raw);
    raw->wait_poll_ns = atomic_load_explicit(&t->wait_poll_ns, memory_order_relaxed);
}

/* Runs when a registered thread ends (the trainer's communication and loader threads
 * end with each run): its last CPU counters are taken while /proc still has them, and
 * its events stay for the collector; the next tdm_prof_record_start frees it. */
static void thread_exited(void *p) {
    prof_thread *t = p;
    pthread_mutex_lock(&g_lock);
    if (tdm_prof_on(0)) read_cpu(t, &t->cpu_end);
    t->exited = 1;
    pthread_mutex_unlock(&g_lock);
}

static void make_exit_key(void) { pthread_key_create(&g_exit_key, thread_exited); }

static prof_thread *register_thread(void) {
    prof_thread *t = tdm_xcalloc(1, sizeof *t);
    t->os_tid = (int64_t)syscall(SYS_gettid);
    /* A thread born during a recording takes its CPU baseline here (once per thread);
     * the others get theirs from tdm_prof_record_start. */
    read_cpu(t, &t->cpu_start);
    pthread_mutex_lock(&g_lock);
    t->index = g_n_threads++;
    snprintf(t->name, sizeof t->name, "thread %d", t->index);
    t->next = g_threads;
    g_threads = t;
    pthread_mutex_unlock(&g_lock);
    t_self = t;
    pthread_once(&g_exit_once, make_exit_key);
    pthread_setspecific(g_exit_key, t);
    return t;
}

/* The calling thread's buffer, ready for the current recording; NULL if it has no room
 * at all (allocation is the owner's job, once per recording). */
static prof_thread *self_for_recording(void) {
    prof_thread *t = t_self;
    if (!t) t = register_thread();
    int gen = atomic_load_explicit(&g_generation, memory_order_acquire);
    if (t->generation != gen) {
        int64_t cap = atomic_load(&g_capacity);
        if (t->cap != cap) {
            tdm_free_big(t->ev);
            /* spare and spare_cap are read together under the lock the controller writes
             * them under: a spare_cap of the controller's next buffer paired with this
             * (smaller) one would let the events run past its end */
            pthread_mutex_lock(&g_lock);
            tdm_prof_event *spare = atomic_exchange_explicit(&t->spare, NULL, memory_order_acquire);
            int64_t spare_cap = t->spare_cap;
            pthread_mutex_unlock(&g_lock);
            if (spare && spare_cap != cap) {
                tdm_free_big(spare);
                spare = NULL;
            }
            /* a thread born during the recording allocates here, once; out of memory
             * leaves capacity 0 and every event counts as dropped */
            t->ev = spare ? spare : tdm_alloc_big((size_t)cap * sizeof *t->ev, NULL);
            t->cap = t->ev ? cap : 0;
        }
        t->depth = 0;
        t->dropped = 0;
        atomic_store_explicit(&t->n, 0, memory_order_relaxed);
        atomic_store_explicit(&t->generation_pub, gen, memory_order_release);
        t->generation = gen;
    }
    return t;
}

static void push_event(prof_thread *t, tdm_prof_cat cat, int level, const char *name, uint64_t t0, uint64_t t1,
                       int64_t arg, int64_t bytes, int instant) {
    int64_t n = atomic_load_explicit(&t->n, memory_order_relaxed);
    if (n >= t->cap) {
        t->dropped++;
        return;
    }
    tdm_prof_event *e = &t->ev[n];
    e->name = name;
    e->t0_ns = t0;
    e->t1_ns = t1;
    e->arg = arg;
    e->bytes = bytes;
    e->tid = t->index;
    e->cat = (uint8_t)cat;
    e->level = (uint8_t)level;
    e->instant = (uint8_t)instant;
    atomic_store_explicit(&t->n, n + 1, memory_order_release);
}

void tdm_prof_thread_name(const char *name) {
    prof_thread *t = t_self ? t_self : register_thread();
    pthread_mutex_lock(&g_lock); /* the collector copies names under the lock */
    snprintf(t->name, sizeof t->name, "%s", name);
    t->named = 1;
    pthread_mutex_unlock(&g_lock);
}

void tdm_prof_thread_wait_poll_cpu(uint64_t ns) {
    prof_thread *t = t_self ? t_self : register_thread();
    atomic_fetch_add_explicit(&t->wait_poll_ns, (long long)ns, memory_order_relaxed);
}

void tdm_prof_begin(tdm_prof_cat cat, int level, const char *name, int64_t arg) {
    if (!tdm_prof_on(level)) return;
    prof_thread *t = self_for_recording();
    if (t->depth >= PROF_STACK_DEPTH) { /* too deep: the matching end will be dropped too */
        t->dropped++;
        t->overflow++;
        return;
    }
    prof_open *o = &t->stack[t->depth++];
    o->name = name;
    o->cat = (uint8_t)cat;
    o->level = (uint8_t)level;
    o->arg = arg;
    o->t0 = tdm_now_ns();
}

void tdm_prof_end(tdm_prof_cat cat, int level) {
    (void)level;
    prof_thread *t = t_self;
    /* No level check: an interval opened while recording is closed even if recording
     * stopped in between, so the stack stays balanced. */
    if (!t || t->generation != atomic_load_explicit(&g_generation, memory_order_relaxed)) return;
    if (t->overflow > 0) {
        t->overflow--;
        return;
    }
    if (t->depth == 0) return; /* opened before recording started */
    uint64_t now = tdm_now_ns();
    prof_open *o = &t->stack[--t->depth];
    (void)cat; /* mismatched cat means a caller bug; the stack order still decides */
    push_event(t, (tdm_prof_cat)o->cat, o->level, o->name, o->t0, now, o->arg, -1, 0);
}

void tdm_prof_complete(tdm_prof_cat cat, int level, const char *name, uint64_t t0_ns, uint64_t t1_ns, int64_t arg) {
    if (!tdm_prof_on(level)) return;
    push_event(self_for_recording(), cat, level, name, t0_ns, t1_ns, arg, -1, 0);
}

void tdm_prof_collective(int level, const char *name, uint64_t t0_ns, uint64_t t1_ns, int64_t arg, int64_t bytes) {
    if (!tdm_prof_on(level)) return;
    push_event(self_for_recording(), TDM_PROF_COMM, level, name, t0_ns, t1_ns, arg, bytes, 0);
}

void tdm_prof_instant(tdm_prof_cat cat, int level, const char *name, int64_t arg) {
    if (!tdm_prof_on(level)) return;
    uint64_t now = tdm_now_ns();
    push_event(self_for_recording(), cat, level, name, now, now, arg, -1, 1);
}

/* ---- control ---- */

void tdm_prof_record_start(int level, int64_t capacity) {
    if (capacity < 16) capacity = 16;
    atomic_store(&g_capacity, capacity);
    atomic_store_explicit(&tdm_prof_active_level, -1, memory_order_release);
    pthread_mutex_lock(&g_lock);
    int gen = atomic_load(&g_generation) + 1;
    atomic_store_explicit(&g_generation, gen, memory_order_release);
    /* Threads that ended are forgotten now: nobody will collect their old events. */
    for (prof_thread **pp = &g_threads; *pp;) {
        prof_thread *t = *pp;
        if (!t->exited) {
            pp = &t->next;
            continue;
        }
        *pp = t->next;
        tdm_free_big(t->ev);
        tdm_free_big(atomic_load(&t->spare));
        free(t);
    }
    /* Buffers for the threads that exist now, allocated and touched here rather than
     * at their first event; and their CPU baselines. */
    for (prof_thread *t = g_threads; t; t = t->next) {
        if (t->cap != capacity && !atomic_load_explicit(&t->spare, memory_order_acquire)) {
            tdm_prof_event *buf = tdm_alloc_big((size_t)capacity * sizeof *buf, NULL);
            if (buf) {
                t->spare_cap = capacity;
                atomic_store_explicit(&t->spare, buf, memory_order_release);
            }
        }
        read_cpu(t, &t->cpu_start);
    }
    pthread_mutex_unlock(&g_lock);
    atomic_store_explicit(&tdm_prof_active_level, level, memory_order_release);
}

void tdm_prof_record_stop(void) {
    if (!tdm_prof_on(0)) return;
    atomic_store_explicit(&tdm_prof_active_level, -1, memory_order_release);
    pthread_mutex_lock(&g_lock);
    for (prof_thread *t = g_threads; t; t = t->next)
        if (!t->exited) read_cpu(t, &t->cpu_end);
    pthread_mutex_unlock(&g_lock);
}

static int cmp_event(const void *a, const void *b) {
    const tdm_prof_event *x = a, *y = b;
    if (x->t0_ns != y->t0_ns) return x->t0_ns < y->t0_ns ? -1 : 1;
    if (x->t1_ns != y->t1_ns) return x->t1_ns > y->t1_ns ? -1 : 1; /* enclosing first */
    return x->tid - y->tid;
}

void tdm_prof_collect(tdm_prof_collection *out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&g_lock);
    int gen = atomic_load(&g_generation);
    int64_t total = 0;
    for (prof_thread *t = g_threads; t; t = t->next)
        if (atomic_load_explicit(&t->generation_pub, memory_order_acquire) == gen)
            total += atomic_load_explicit(&t->n, memory_order_acquire);
    out->threads = tdm_xcalloc((size_t)(g_n_threads > 0 ? g_n_threads : 1), sizeof *out->threads);
    out->events = tdm_xmalloc((size_t)(total > 0 ? total : 1) * sizeof *out->events);
    for (prof_thread *t = g_threads; t; t = t->next) {
        tdm_prof_thread *th = &out->threads[t->index];
        snprintf(th->name, sizeof th->name, "%s", t->name);
        th->tid = t->index;
        th->os_tid = t->os_tid;
        th->present = !t->exited || atomic_load_explicit(&t->generation_pub, memory_order_acquire) == gen;
        if (atomic_load_explicit(&t->generation_pub, memory_order_acquire) != gen) {
            prof_cpu_delta(&t->cpu_start, &t->cpu_end, &th->cpu);
            continue;
        }
        int64_t n = atomic_load_explicit(&t->n, memory_order_acquire);
        if (out->n_events + n > total) n = total - out->n_events;
        memcpy(out->events + out->n_events, t->ev, (size_t)n * sizeof *t->ev);
        out->n_events += n;
        th->dropped = t->dropped;
        prof_cpu_delta(&t->cpu_start, &t->cpu_end, &th->cpu);
    }
    out->n_threads = g_n_threads;
    pthread_mutex_unlock(&g_lock);
    qsort(out->events, (size_t)out->n_events, sizeof *out->events, cmp_event);
}

void tdm_prof_collection_free(tdm_prof_collection *c) {
    free(c->events);
    free(c->threads);
    memset(c, 0, sizeof *c);
}

int prof_thread_is_named(void) { return t_self && t_self->named; }
