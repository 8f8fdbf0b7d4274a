/* prof_internal.h - shared between the recording side (prof.c) and the CPU statistics
 * reader (cpustat.c); not for other modules. */
#ifndef TDM_PROF_INTERNAL_H
#define TDM_PROF_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "prof/profiler.h"

#define PROF_STACK_DEPTH 64

/* Raw cumulative counters of one thread, as /proc reports them. */
typedef struct prof_cpu_raw {
    int64_t utime_ticks, stime_ticks, minflt, majflt;
    int64_t vol_switches, invol_switches;
    int64_t run_ns;
    int64_t wait_poll_ns; /* the thread's own count (tdm_prof_thread_wait_poll_cpu), not /proc's */
    int valid;
} prof_cpu_raw;

typedef struct prof_open { /* an interval begun and not yet ended */
    const char *name;
    uint64_t t0;
    int64_t arg;
    uint8_t cat, level;
} prof_open;

typedef struct prof_thread {
    struct prof_thread *next;
    int index;
    int64_t os_tid;
    char name[32];
    int named;
    int exited; /* the thread ended; its events stay until the next recording starts */
    /* owner-only fields */
    int generation;
    tdm_prof_event *ev;
    atomic_llong cap; /* read by the controller when it prepares spares */
    int64_t dropped;
    prof_open stack[PROF_STACK_DEPTH];
    int depth;
    int overflow; /* begins refused for depth; their ends are swallowed */
    /* a buffer the controller allocated and touched for the next recording, taken by
     * the owner at its first event (so page faults land outside the profiled steps) */
    _Atomic(tdm_prof_event *) spare;
    int64_t spare_cap; /* written with spare, and read with it, under the global lock */
    /* published to the collector */
    atomic_int generation_pub;
    atomic_llong n;
    /* added to by the owner, read by the collector */
    atomic_llong wait_poll_ns;
    /* written under the global lock */
    prof_cpu_raw cpu_start, cpu_end;
} prof_thread;

/* Reads /proc/self/task/<tid>/{stat,status,schedstat}; raw->valid = 0 on failure. */
void prof_read_cpu(int64_t os_tid, prof_cpu_raw *raw);
/* end - start, converted to ms; out->valid only when both samples were. */
void prof_cpu_delta(const prof_cpu_raw *start, const prof_cpu_raw *end, tdm_prof_cpu_stats *out);

int prof_thread_is_named(void);

#endif
