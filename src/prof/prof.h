/* prof.h - the profiler's recording side: cheap events into per-thread buffers.
 *
 * Any module may record; nothing is written until the owner (the trainer) dumps.
 * When profiling is off (the default) every call is one load and one branch.
 * Names are NOT copied: pass string literals or strings that live until the dump.
 *
 * Levels (MindSpeed-MM tools.json "level"):
 *   0  phases: data wait, forward, backward, gradient sync, optimizer, parameter gather
 *   1  + per-layer compute, per-bucket communication (posted, started, completed), waits
 *   2  + kernels
 *
 *   if (tdm_prof_on(1)) t0 = tdm_now_ns();  ...  tdm_prof_complete(TDM_PROF_LAYER, 1, name, t0, tdm_now_ns(), -1);
 * or
 *   tdm_prof_begin(TDM_PROF_PHASE, 0, "forward", -1);  ...  tdm_prof_end(TDM_PROF_PHASE, 0);
 */
#ifndef TDM_PROF_H
#define TDM_PROF_H

#include <stdatomic.h>
#include <stdint.h>

typedef enum tdm_prof_cat {
    TDM_PROF_PHASE = 0,  /* step phases (level 0) */
    TDM_PROF_LAYER = 1,  /* per-layer compute (level 1) */
    TDM_PROF_COMM = 2,   /* a collective in flight: from start to completion (level 1) */
    TDM_PROF_WAIT = 3,   /* a thread blocked waiting for something (level 1) */
    TDM_PROF_DATA = 4,   /* loader work and the trainer's wait for data (level 0) */
    TDM_PROF_KERNEL = 5, /* one kernel call (level 2) */
    TDM_PROF_MARK = 6,   /* instant events: bucket posted, step boundary (level 1) */
} tdm_prof_cat;

/* -1 when profiling is off, else the active level. Read by the inline fast path from
 * every thread while the controller changes it: an atomic, whose acquire load (a plain
 * load on x86) also makes the recording's generation, published before it, visible. */
extern _Atomic int tdm_prof_active_level;
static inline int tdm_prof_on(int level) {
    return atomic_load_explicit(&tdm_prof_active_level, memory_order_acquire) >= level;
}

/* Names the calling thread's track ("compute", "comm", "loader"). */
void tdm_prof_thread_name(const char *name);

/* Adds ns to the CPU time the calling (named) thread spent polling while another thread was blocked
 * waiting on it: that time took no core from the waiter. Reported beside the thread's CPU, within it. */
void tdm_prof_thread_wait_poll_cpu(uint64_t ns);

/* Interval events; `arg` is an optional integer shown in the trace (bucket index,
 * bytes, step), -1 for none. begin/end nest per thread. */
void tdm_prof_begin(tdm_prof_cat cat, int level, const char *name, int64_t arg);
void tdm_prof_end(tdm_prof_cat cat, int level);
void tdm_prof_complete(tdm_prof_cat cat, int level, const char *name, uint64_t t0_ns, uint64_t t1_ns, int64_t arg);
/* A collective, TDM_PROF_COMM: as tdm_prof_complete, with the bytes it covered as NCCL's tests count them (an
 * all-reduce's buffer, a reduce-scatter's input, an all-gather's output), written to the trace as args.bytes. */
void tdm_prof_collective(int level, const char *name, uint64_t t0_ns, uint64_t t1_ns, int64_t arg, int64_t bytes);
void tdm_prof_instant(tdm_prof_cat cat, int level, const char *name, int64_t arg);

#endif
