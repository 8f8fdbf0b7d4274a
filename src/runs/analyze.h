/* analyze.h - what a run's traces say about overlap: per rank and per step, the whole trace
 * the way Holistic Trace Analysis (HTA) measures it, across ranks, per collective kind, and
 * the diagnostics that name a cause. Pure functions of the traces (runs/trace.h).
 *
 * Per step, per rank (µs):
 *   step      the ProfilerStep's CPU duration (Ascend: Computing + Communication(Not
 *             Overlapped) + Free; formats that state their own figures: theirs)
 *   compute   union of compute intervals attributed to the step (device kernels, through
 *             their launching CPU event; on a CPU-only trace the operators of non-gloo threads)
 *   comm      union of communication intervals (kernels; gloo operators)
 *   hidden    comm ∩ compute           exposed   comm - hidden
 *   idle      step minus everything that ran (never below 0)
 *   overlap   hidden / comm, in percent
 *   last      the step's last collective (by launch, else by start): the one that cannot
 *             overlap the backward; its duration and its exposed part
 * Whole trace, HTA's definitions (hta/analyzers, at commit f4d0062c): overlap =
 * |compute∪ ∩ comm∪| / |comm∪| over every kernel kept; temporal breakdown: span = last merged
 * kernel interval's end - first's start, idle = span - |kernels∪|, compute = |compute∪|,
 * non-compute = the rest. With HTA's defaults the last profiled step is dropped (only kernels
 * launched by CPU events that start before the last ProfilerStep starts) and float timestamps
 * are rounded (ts = ceil(ts), end = floor(ts + dur)); both can be switched off.
 */
#ifndef TDM_RUNS_ANALYZE_H
#define TDM_RUNS_ANALYZE_H

#include <stdint.h>

#include "runs/trace.h"

typedef struct tdm_runs_hta {
    int include_last_step, round_ns; /* the setting */
    int applicable;                  /* 0 when the trace has no kernels on streams (CPU-only, Ascend, tandem) */
    int filtered;                    /* HTA filters kernels only with 2 or more ProfilerStep annotations */
    double overlap_pct;              /* NaN when there is no communication */
    double overlap_us, comm_us;
    double idle_pct, compute_pct, non_compute_pct;
    double idle_us, compute_us, non_compute_us, span_us;
    int64_t n_steps; /* profiler steps among the events kept */
    int64_t n_kernels, n_comm_kernels;
    int n_comm_names; /* communication kernels per name (the first 16 names) */
    int32_t comm_name[16];
    int64_t comm_name_count[16];
} tdm_runs_hta;

/* HTA's figures for one rank under one setting. */
void tdm_runs_hta_compute(const tdm_runs_trace *t, int include_last_step, int round_ns, tdm_runs_hta *out);

typedef struct tdm_runs_step_stats {
    int64_t number;
    double step_us, compute_us, comm_us, hidden_us, exposed_us, idle_us;
    double overlap_pct;              /* NaN without communication */
    int64_t last_coll;               /* index into the trace's colls, -1 none */
    double last_us, last_exposed_us; /* NaN when unknown */
    int64_t n_colls;
} tdm_runs_step_stats;

typedef struct tdm_runs_kind_stats {
    int kind; /* tdm_runs_coll_kind */
    int64_t count, count_sized;
    double total_us, total_bytes, sized_us;
    double algbw_gbs, busbw_gbs; /* over the collectives with a known size; NaN when none */
    int group_size;              /* -1 unknown */
} tdm_runs_kind_stats;

typedef struct tdm_runs_rank_stats {
    const tdm_runs_trace *trace;
    tdm_runs_step_stats *steps;
    int64_t n_steps;
    tdm_runs_step_stats mean; /* over the steps (number -1); overlap from the totals */
    tdm_runs_hta hta[4];      /* [include_last][no rounding]: default, last kept, and without rounding */
    tdm_runs_kind_stats kinds[TDM_RUNS_COLL_KINDS];
    int n_kinds;
} tdm_runs_rank_stats;

enum {
    TDM_RUNS_DIAG_NOTHING_HIDDEN = 0,
    TDM_RUNS_DIAG_GRADS_AFTER_BACKWARD,
    TDM_RUNS_DIAG_ALLGATHER_ORDER,
    TDM_RUNS_DIAG_RANK_LATE,
    TDM_RUNS_DIAG_SLOW_RANK,
    TDM_RUNS_DIAG_COUNT
};

typedef struct tdm_runs_analysis {
    tdm_runs_rank_stats *ranks; /* one per trace, in the set's order */
    int n_ranks;
    int slowest;   /* index into ranks by mean step time, -1 none */
    double spread; /* (max - min) / mean of the ranks' mean step times; NaN with one rank */
    int fired[TDM_RUNS_DIAG_COUNT];
    char diag[TDM_RUNS_DIAG_COUNT][512]; /* the sentence of each diagnostic that fired */
} tdm_runs_analysis;

/* msprof-analyze's slow-rank rule: a spread above 5% of the mean. */
#define TDM_RUNS_SLOW_RANK_SPREAD 0.05

void tdm_runs_analyze(const tdm_runs_set *s, tdm_runs_analysis *a);
void tdm_runs_analysis_free(tdm_runs_analysis *a);

/* Bus bandwidth factor of a collective kind on n ranks (NCCL tests' convention). */
double tdm_runs_busbw_factor(int kind, int n);

#endif
