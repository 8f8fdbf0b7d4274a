/* profiler.h - the profiler's control side: configuration, sessions, collection.
 *
 * prof.h is what every module calls to record; this header is what the owner of the
 * training loop (the trainer) calls to decide when recording happens and to write the
 * results. A session, on every rank of `comm`:
 *
 *   tdm_prof_config cfg;
 *   if (tdm_prof_config_load("tools.json", &cfg, &err) != 0) ...   // or tdm_prof_config_default
 *   tdm_prof_session_start(&cfg, comm, &err);      // collective: agrees a clock origin
 *   for (step = 1; step <= n; step++) {
 *       tdm_prof_step_begin(step);                  // recording on for start_step..end_step
 *       ... forward, backward, optimizer ...
 *       tdm_prof_step_end(step);                    // off after end_step
 *   }
 *   tdm_prof_session_finish(comm, &err);            // collective: writes save_path/...
 *
 * Config file (MindSpeed-MM tools.json layout; the object may also stand at top level):
 *   {"profile": {"enable": true, "ranks": [-1], "start_step": 3, "end_step": 5,
 *                "level": 1, "save_path": "./profiling"}}
 * ranks: [-1] = all ranks, else the list of ranks that record. Steps are 1-based
 * optimizer iterations, inclusive. Optional "capacity": events per thread (default 1M).
 * MindSpeed-MM's layout (schedule in "static_param", recording the iterations after
 * start_step up to end_step) is read with its own semantics; unknown keys are refused.
 *
 * Files written by tdm_prof_session_finish (rank 0 writes the merged ones):
 *   save_path/trace_rank<r>.json   Chrome trace of rank r (open in Perfetto / chrome://tracing)
 *   save_path/trace.json           all ranks merged, one process per rank
 *   save_path/analysis.json        per rank and step: compute, comm, hidden, exposed, data wait
 *                                  (see analysis.h), plus per-thread CPU statistics and the config's
 *                                  transport, shared_memory, comm_progress and comm_thread_nice when set
 *   save_path/summary.txt          operator summary + per-step analysis, as `tandem trace-summary` prints
 * When no rank recorded (enable false) nothing is written and finish is a cheap collective.
 */
#ifndef TDM_PROFILER_H
#define TDM_PROFILER_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "prof/prof.h"

#define TDM_PROF_MAX_RANKS_LISTED 256

typedef struct tdm_prof_config {
    int enable;
    int all_ranks; /* ranks: [-1] */
    int n_ranks;   /* else: the listed ranks */
    int ranks[TDM_PROF_MAX_RANKS_LISTED];
    int64_t start_step, end_step; /* 1-based, inclusive */
    int level;                    /* 0, 1 or 2 (prof.h) */
    char save_path[1024];
    int64_t capacity; /* events per thread buffer */
    /* set by the caller, not the file: the transport, written to analysis.json for tandem plan */
    char transport[160];    /* "" unknown */
    int shared_memory;      /* -1 unknown, else whether the ranks' collectives go through shared memory */
    char comm_progress[16]; /* "" unknown, else the run's --comm-progress (thread | inline) */
    int comm_thread_nice;   /* -1 unknown, else the run's --comm-thread-nice (written with thread progress) */
} tdm_prof_config;

/* Profiling off; the other fields at MindSpeed-MM's defaults (all ranks, steps 1..1, level 0). */
void tdm_prof_config_default(tdm_prof_config *cfg);

/* Parses a tool-config JSON text; `name` (the file name) prefixes errors, which name
 * the field: "tools.json: profile.level: expected 0, 1 or 2". */
int tdm_prof_config_parse(const char *text, size_t len, const char *name, tdm_prof_config *cfg, tdm_error *err);
int tdm_prof_config_load(const char *path, tdm_prof_config *cfg, tdm_error *err);

/* Collective over comm. Aligns the ranks' clocks (a barrier, then each rank takes its
 * CLOCK_MONOTONIC reading as time zero, so traces of different hosts line up to the
 * barrier's skew), names the calling thread "compute" unless it was named, and arms the
 * step hooks. Does not start recording. Fails on an invalid config. */
int tdm_prof_session_start(const tdm_prof_config *cfg, MPI_Comm comm, tdm_error *err);

/* Step hooks, called by the training loop's thread. step_begin turns recording on when
 * start_step <= step <= end_step on a selected rank, and opens the step's envelope event
 * (PHASE "step", arg = step); step_end closes it and turns recording off after end_step.
 * Both are no-ops outside a session. */
void tdm_prof_step_begin(int64_t step);
void tdm_prof_step_end(int64_t step);

/* Collective over comm: stops recording, writes the files listed above and ends the
 * session. The event buffers stay allocated for the next session. */
int tdm_prof_session_finish(MPI_Comm comm, tdm_error *err);

/* Lower-level recording control (tests, the overhead bench): start recording at
 * `level` with buffers of `capacity` events per thread, or stop. Starting a new
 * recording discards the previous one's events. */
void tdm_prof_record_start(int level, int64_t capacity);
void tdm_prof_record_stop(void);

/* One recorded event, as collected. Times are ns of CLOCK_MONOTONIC. */
typedef struct tdm_prof_event {
    const char *name;
    uint64_t t0_ns, t1_ns; /* t1 == t0 for an instant */
    int64_t arg;           /* -1 for none */
    int64_t bytes;         /* a collective's bytes (tdm_prof_collective); -1 for none */
    int32_t tid;           /* index into the collected thread table */
    uint8_t cat;           /* tdm_prof_cat */
    uint8_t level;
    uint8_t instant;
} tdm_prof_event;

/* Per-thread CPU statistics over the recording, from /proc/self/task/<tid>
 * (getrusage(RUSAGE_THREAD) only answers for the calling thread). */
typedef struct tdm_prof_cpu_stats {
    double user_ms, system_ms;    /* clock-tick resolution (10 ms at USER_HZ=100) */
    double run_ms;                /* schedstat: ns-resolution time on a CPU */
    double wait_poll_ms;          /* of user + system: polling while another thread waited on this one */
    int64_t voluntary_switches;   /* blocked (waits, I/O, locks) */
    int64_t involuntary_switches; /* preempted: a sign of oversubscribed cores */
    int64_t minor_faults, major_faults;
    int valid; /* 0 when the thread had exited or /proc was unreadable */
} tdm_prof_cpu_stats;

typedef struct tdm_prof_thread {
    char name[32];
    int32_t tid;     /* index, as in tdm_prof_event.tid */
    int64_t os_tid;  /* the kernel's thread id */
    int64_t dropped; /* events lost because the buffer was full */
    int present;     /* took part in the last recording (0: a slot of a thread long gone) */
    tdm_prof_cpu_stats cpu;
} tdm_prof_thread;

typedef struct tdm_prof_collection {
    tdm_prof_event *events; /* sorted by t0 */
    int64_t n_events;
    tdm_prof_thread *threads;
    int n_threads;
    uint64_t origin_ns; /* time zero of the session (0 outside a session) */
} tdm_prof_collection;

/* Copies the events of the last recording of every thread (call after stopping). */
void tdm_prof_collect(tdm_prof_collection *out);
void tdm_prof_collection_free(tdm_prof_collection *c);

#endif
