/* trace.h - a profiler trace of one rank, as the analysis sees it: steps, the intervals
 * that ran on the accelerator and on CPU threads, and the collectives.
 *
 *   tdm_runs_set set;
 *   tdm_runs_set_init(&set);
 *   if (tdm_runs_read(&set, "prof/rank0.json.gz", &err) != 0) ...;  // any format below
 *   for (int i = 0; i < set.n; i++) { const tdm_runs_trace *t = set.traces[i]; ... }
 *   tdm_runs_set_free(&set);
 *
 * Formats, told apart by their content, not their names (a file may hold one rank or several):
 *   Kineto     PyTorch profiler JSON, .json or .json.gz (trace_kineto.c); one rank per file
 *   legacy     PyTorch 1.13 without Kineto: a top-level array, no "cat", integer µs, and
 *              ProfilerStep#N labelled one lower than the loop index (reported as N+1)
 *   ascend     Ascend PyTorch profiler's trace_view.json (its "Overlap Analysis" lanes),
 *              step_trace_time.csv, communication.json; msprof-analyze's
 *              cluster_step_trace_time.csv and cluster_communication.json (ascend.c)
 *   tandem     tandem's own trace.json / trace_rank<r>.json (prof/trace.h; trace_tandem.c)
 *
 * Times are µs as the file writes them (float µs with a nanosecond fraction, or integers;
 * a "displayTimeUnit" does not change them: Chrome's format defines ts and dur in µs).
 * Memory: the reader holds a window of the text (runs/json_stream.h) and 48 bytes per interval
 * kept (kernels, memory copies, CPU operators; about three times that while they are sorted),
 * never the document.
 *
 * Classification of accelerator intervals follows Holistic Trace Analysis (HTA):
 *   communication  name starts with nccl, hip or hccl, or contains ncclKernel
 *   memory         name starts with Memcpy, Memset, hipMemcpy, hipMemset or dma
 *   compute        anything else except names starting with nccl, Stream Wait Event, runFunction,
 *                  hip, hccl, job_exe, packet, pe_exe, cpum_exe_subgraph,
 *                  collective_subgraph_execution, cuda...LaunchKernel, or containing Memcpy,
 *                  Memset, dma or Sync, which are "other"
 * On CPU-only traces (gloo) communication is the gloo:* operators on gloo's threads and
 * compute the operators of the other threads (docs/analyze.md).
 */
#ifndef TDM_RUNS_TRACE_H
#define TDM_RUNS_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef enum tdm_runs_kind {
    TDM_RUNS_COMPUTE = 0,
    TDM_RUNS_COMM = 1,
    TDM_RUNS_MEMORY = 2,
    TDM_RUNS_OTHER = 3,
} tdm_runs_kind;

typedef enum tdm_runs_format {
    TDM_RUNS_FMT_KINETO = 0,
    TDM_RUNS_FMT_LEGACY,
    TDM_RUNS_FMT_ASCEND_TIMELINE,
    TDM_RUNS_FMT_ASCEND_STEPS, /* step_trace_time.csv or cluster_step_trace_time.csv: per-step figures only */
    TDM_RUNS_FMT_TANDEM,
} tdm_runs_format;

/* span flags */
#define TDM_RUNS_F_DEVICE    1u /* ran on the accelerator (kernel, memcpy, memset, an Ascend lane) */
#define TDM_RUNS_F_HTA_GPU   2u /* HTA's GPU filter: a stream and a correlation id, or Event/Context Sync */
#define TDM_RUNS_F_STEP_NAME 4u /* named ProfilerStep#N */
#define TDM_RUNS_F_STREAM    8u /* has a stream (HTA counts every such event in its overlap) */

typedef struct tdm_runs_span {
    double ts, dur; /* µs as read */
    int64_t corr;   /* correlation id; -1 when absent */
    int32_t name;   /* index into names */
    int32_t lane;   /* the stream (-1 none) for device spans; the thread index for CPU spans */
    int32_t step;   /* index into steps, -1 outside every step (set by tdm_runs_trace_finish) */
    int32_t launch; /* device spans: the CPU span with the same correlation id, -1 when absent */
    int32_t coll;   /* index into colls, -1 when not a collective */
    uint8_t kind;   /* tdm_runs_kind */
    uint8_t flags;  /* TDM_RUNS_F_* */
} tdm_runs_span;

typedef struct tdm_runs_step {
    int64_t number; /* ProfilerStep#N's N (legacy traces: N + 1); 0 for a whole-trace step */
    double ts, dur; /* µs: the CPU annotation */
} tdm_runs_step;

typedef enum tdm_runs_coll_kind {
    TDM_RUNS_ALL_REDUCE = 0,
    TDM_RUNS_BROADCAST,
    TDM_RUNS_ALL_GATHER,
    TDM_RUNS_REDUCE_SCATTER,
    TDM_RUNS_ALL_TO_ALL,
    TDM_RUNS_SEND_RECV,
    TDM_RUNS_REDUCE,
    TDM_RUNS_BARRIER,
    TDM_RUNS_COLL_OTHER,
    TDM_RUNS_COLL_KINDS
} tdm_runs_coll_kind;

typedef struct tdm_runs_coll {
    int32_t span; /* the span that carried it out (a communication kernel, a gloo operator) */
    int32_t step;
    uint8_t kind;       /* tdm_runs_coll_kind */
    double launch_ts;   /* µs: when the CPU issued it; NaN when unknown */
    double ts, dur;     /* µs: when it ran */
    int64_t bytes;      /* payload as NCCL's tests count it (all-gather: the output); -1 unknown */
    int32_t group_size; /* ranks taking part; -1 unknown */
} tdm_runs_coll;

/* Per-step figures that a format states itself (Ascend's step_trace_time, tandem's own
 * analysis), in µs. */
typedef struct tdm_runs_given_step {
    int64_t number;
    double step, compute, comm, exposed, idle, hidden;
    double last_comm; /* NaN when the format does not say */
} tdm_runs_given_step;

typedef struct tdm_runs_trace {
    char *path;  /* the file read */
    char *label; /* "rank 3" or the file name when no rank is known */
    tdm_runs_format format;
    int64_t rank, world_size; /* -1 when the trace does not say */
    char backend[32];

    char **names; /* interned strings, UTF-8 sanitised */
    int32_t n_names;
    char **threads; /* CPU thread names ("Thread 123" when unnamed) */
    int32_t n_threads;

    tdm_runs_span *spans;
    int64_t n_spans;
    tdm_runs_step *steps; /* sorted by ts */
    int64_t n_steps;
    tdm_runs_coll *colls; /* sorted by ts */
    int64_t n_colls;
    tdm_runs_given_step *given; /* when the format states per-step figures */
    int64_t n_given;

    int64_t ts_base;      /* µs subtracted from every ts read (0 unless a double could not hold them) */
    int has_device;       /* any accelerator interval: analysis on the device; else on the CPU */
    int whole_trace_step; /* no step annotation: one step over the whole trace */
    /* What HTA needs beyond the spans: */
    int ts_float;                               /* some ts was a float or missing: HTA rounds (ceil ts, floor end) */
    int n_step_names;                           /* distinct ProfilerStep#N names among non-kernel events */
    double hta_last_step_ts, hta_last_step_end; /* max over those events, µs as read */

    /* Ascend "Overlap Analysis" lane totals (µs), when the trace has them */
    int has_lanes;
    double lane_computing, lane_comm, lane_comm_not_overlapped, lane_free, lane_span;

    char **notes; /* what the reader assumed or worked around, one sentence each */
    int n_notes;
    struct tdm_runs_x *x; /* the builders' state (trace_internal.h) */
} tdm_runs_trace;

/* One communication operator of one rank from Ascend's communication.json (per rank) or
 * msprof-analyze's cluster_communication.json. */
typedef struct tdm_runs_acomm {
    int64_t rank;    /* -1 when the file does not say */
    char step[32];   /* "step1", or "step" in the cluster file */
    char *op;        /* "hcom_broadcast__501_0@6297232067196334501" */
    double start_us; /* Start Timestamp(us) */
    double elapse_ms, transit_ms, wait_ms, sync_ms, idle_ms;
    double size_mb; /* Transit Size(MB) over the transports (RDMA, HCCS, PCIE, SDMA) */
} tdm_runs_acomm;

/* A set of rank traces (one run). */
typedef struct tdm_runs_set {
    tdm_runs_trace **traces;
    int n;
    tdm_runs_acomm *acomm;
    int64_t n_acomm;
} tdm_runs_set;

void tdm_runs_set_init(tdm_runs_set *s);
void tdm_runs_set_free(tdm_runs_set *s);
/* Reads one file (any format above, told by its content) or every trace file in a directory
 * (*.json, *.json.gz, *.csv the Ascend way, ASCEND_PROFILER_OUTPUT folders), appending its
 * ranks to s. An error names the file and what was expected; s keeps what was read before. */
int tdm_runs_read(tdm_runs_set *s, const char *path, tdm_error *err);

/* Format readers (each appends the ranks it found). tdm_runs_read_json returns
 * TDM_RUNS_NOT_A_TRACE for well-formed JSON that is no trace (an object without "traceEvents"),
 * which a folder's walk skips. */
#define TDM_RUNS_NOT_A_TRACE (-2)
int tdm_runs_read_json(tdm_runs_set *s, const char *path, tdm_error *err); /* trace_kineto.c */
int tdm_runs_read_json_mem(tdm_runs_set *s, const void *data, size_t len, const char *name, tdm_error *err);
int tdm_runs_read_ascend_csv(tdm_runs_set *s, const char *path, tdm_error *err); /* ascend.c */
int tdm_runs_read_ascend_csv_mem(tdm_runs_set *s, const char *text, size_t len, const char *name, tdm_error *err);
int tdm_runs_read_ascend_comm(tdm_runs_set *s, const char *path, tdm_error *err);
int tdm_runs_read_ascend_comm_mem(tdm_runs_set *s, const void *data, size_t len, const char *name, tdm_error *err);

/* Building a trace (the readers use these). */
tdm_runs_trace *tdm_runs_trace_new(const char *path);
void tdm_runs_trace_free(tdm_runs_trace *t);
int32_t tdm_runs_intern(tdm_runs_trace *t, const char *s, size_t len);
tdm_runs_span *tdm_runs_add_span(tdm_runs_trace *t);
void tdm_runs_note(tdm_runs_trace *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sorts, links device spans to their launches, assigns steps (a whole-trace step when there
 * is no annotation, with a note), derives the collectives. */
void tdm_runs_trace_finish(tdm_runs_trace *t);
void tdm_runs_set_add(tdm_runs_set *s, tdm_runs_trace *t);

/* HTA's kernel classification of a name; and the collective kind a kernel or operator name
 * (ncclKernel_AllReduce_..., gloo:all_reduce, nccl:all_to_all) or a "Collective name" argument
 * (allreduce, _allgather_base) stands for, -1 when none. */
tdm_runs_kind tdm_runs_kind_of(const char *name);
int tdm_runs_coll_kind_of(const char *name);
const char *tdm_runs_coll_kind_name(int kind);
/* Bytes per element of a "dtype" argument (Float, BFloat16, c10::Half, Long, Byte ...), 0 unknown. */
int tdm_runs_dtype_bytes(const char *dtype);

#endif
