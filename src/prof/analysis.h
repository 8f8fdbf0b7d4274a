/* analysis.h - what a recorded timeline says: interval arithmetic, per-step overlap
 * analysis and the operator summary. Pure functions over arrays: no clock, no I/O,
 * so each can be checked on hand-made event sets (tests/prof/test_analysis.c).
 *
 * Per step (the PHASE "step" envelope of the compute thread), per rank, in ms:
 *   compute   union of compute intervals on compute threads (PHASE other than "step",
 *             LAYER, KERNEL), minus the time those threads were waiting (WAIT, DATA); a
 *             COMM record on a compute thread (inline progress) is not subtracted: it spans
 *             its collective's flight while the thread computed on, and the part the thread
 *             blocked on is that collective's WAIT
 *   comm      union of COMM intervals on every thread (communication busy time)
 *   hidden    comm ∩ compute: communication that ran while the model computed
 *   exposed   comm - hidden
 *   last      the gradient collective that started last (the bucket of the first layers,
 *             ready only when the backward ends): it cannot overlap
 *   hideable  min(comm - last, compute), at least hidden: at most this much could hide
 *   data_wait union of DATA intervals on compute threads (the trainer waiting for a batch)
 *   wait      union of WAIT intervals on compute threads (any blocking wait)
 *   ideal     step - (hideable - hidden): the step time if all hideable comm were hidden;
 *             for a step that overlaps nothing, max(compute, comm - last) + last
 *   overlap efficiency = hidden / hideable; NaN when min(comm - last, compute) is under 5% of
 *             the communication (nothing hideable, or all of it in the last bucket: a part
 *             of the last one that happened to hide would otherwise read as 100%)
 * The bound above pools all communication and all compute; the schedule decides which
 * compute a collective can actually run behind. The same three figures per schedule:
 *   grad window   from the first gradient bucket's post to the last one's (the backward
 *                 still running after the first bucket is ready); a schedule that posts
 *                 every bucket after the backward has an empty window
 *   param window  from the first parameter all-gather's post (the step's start when one is
 *                 already in flight then) to the end of the last one: the forward with
 *                 --overlap-param-gather, nothing but the posting loop without it
 *   sched hideable  min(grad comm - last, compute in the grad window)
 *                   + min(param comm, compute in the param window),
 *                   at most hideable and at least hidden
 *   sched ideal / sched efficiency  as ideal and efficiency, with sched hideable; the
 *                 efficiency is NaN when sched hideable is under 5% of the step (a schedule
 *                 that overlaps nothing but a few NaN checks)
 * Posts are the MARK instants "grad bucket posted" / "param all-gather posted" (the starts
 * of the COMM records of that kind when a trace has none); gradient collectives are COMM
 * records named "grad...", parameter ones "param...".
 * Threads are classified by name: "comm..." communication, "loader..." data loading,
 * anything else compute.
 */
#ifndef TDM_PROF_ANALYSIS_H
#define TDM_PROF_ANALYSIS_H

#include <stdint.h>

#include "core/strbuf.h"

/* A half-open time interval [t0, t1), in any one unit (the analysis uses µs). */
typedef struct tdm_prof_interval {
    double t0, t1;
} tdm_prof_interval;

/* Sorts iv[0..n) and merges overlapping or touching intervals in place, dropping empty
 * ones. Returns the number left; the result is sorted and disjoint (a "union"). */
int64_t tdm_prof_intervals_union(tdm_prof_interval *iv, int64_t n);
/* Total length of a union. */
double tdm_prof_intervals_length(const tdm_prof_interval *u, int64_t n);
/* Length of a ∩ b, both unions. */
double tdm_prof_intervals_intersect_length(const tdm_prof_interval *a, int64_t na, const tdm_prof_interval *b,
                                           int64_t nb);
/* out = a \ b, both unions; out needs room for na + nb intervals. Returns the count. */
int64_t tdm_prof_intervals_subtract(const tdm_prof_interval *a, int64_t na, const tdm_prof_interval *b, int64_t nb,
                                    tdm_prof_interval *out);
/* Clips a union to [lo, hi) in place; returns the count. */
int64_t tdm_prof_intervals_clip(tdm_prof_interval *u, int64_t n, double lo, double hi);

typedef enum tdm_prof_thread_kind {
    TDM_PROF_THREAD_COMPUTE = 0,
    TDM_PROF_THREAD_COMM = 1,
    TDM_PROF_THREAD_LOADER = 2,
} tdm_prof_thread_kind;

tdm_prof_thread_kind tdm_prof_thread_kind_of(const char *thread_name);

/* One event as the analysis and the trace writer/reader see it: µs from the session's
 * time zero, with its rank and thread. `name` is borrowed. */
typedef struct tdm_prof_rec {
    const char *name;
    double t0_us, t1_us;
    int64_t arg;
    int64_t bytes; /* a collective's bytes; -1 when not recorded */
    int32_t rank, tid;
    uint8_t cat;         /* tdm_prof_cat */
    uint8_t thread_kind; /* tdm_prof_thread_kind */
    uint8_t instant;
    uint8_t level;
} tdm_prof_rec;

typedef struct tdm_prof_step_stats {
    int32_t rank;
    int64_t step;
    double step_ms, compute_ms, comm_ms, hidden_ms, exposed_ms, hideable_ms;
    double last_comm_ms; /* the last gradient collective, which cannot overlap, from when no earlier one is in flight */
    double data_wait_ms, wait_ms, ideal_step_ms;
    double overlap_efficiency; /* NaN when free_hideable is under 5% of comm (nothing could hide) */
    double sched_hideable_ms, sched_ideal_step_ms;
    double sched_overlap_efficiency; /* NaN when sched_hideable is under 5% of the step */
    double free_hideable_ms;         /* min(comm - last, compute), at least 0: hideable before it is raised to hidden */
} tdm_prof_step_stats;

/* Analyses every step envelope found among rank `rank`'s records (others are ignored).
 * Writes up to `cap` results, in step order, into out; returns how many steps there
 * were (may exceed cap). */
int64_t tdm_prof_analyze_rank(const tdm_prof_rec *recs, int64_t n, int32_t rank, tdm_prof_step_stats *out, int64_t cap);

/* Mean over steps and ranks (overlap efficiencies: total hidden / total hideable); every figure NaN for n == 0. */
void tdm_prof_step_stats_mean(const tdm_prof_step_stats *s, int64_t n, tdm_prof_step_stats *mean);

typedef struct tdm_prof_op_row {
    const char *name;
    uint8_t cat;
    int64_t count;
    double total_ms, mean_ms, max_ms;
} tdm_prof_op_row;

/* Operator summary over all interval events (instants and step envelopes excluded),
 * keyed by (cat, name), sorted by total time descending. `out` needs room for n rows.
 * Returns the number of rows. */
int64_t tdm_prof_op_summary(const tdm_prof_rec *recs, int64_t n, tdm_prof_op_row *out);

/* The practice's warning printed with every operator summary. */
extern const char *const tdm_prof_summary_warning;

const char *tdm_prof_cat_name(int cat);
/* -1 when unknown. */
int tdm_prof_cat_from_name(const char *name);

/* Text renderings (what `tandem trace-summary` prints). */
void tdm_prof_format_op_summary(tdm_strbuf *sb, const tdm_prof_op_row *rows, int64_t n, const int *ranks, int n_ranks);
void tdm_prof_format_steps(tdm_strbuf *sb, const tdm_prof_step_stats *s, int64_t n);

#endif
