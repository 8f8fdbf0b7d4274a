/* ab_runs.h - the A/B protocol's analysis on runs that are already finished: the logs of
 * Megatron-LM, MindSpeed-MM or tandem jobs (src/runs/run.h), several runs per side as repeats.
 *
 *   tandem ab --baseline-run A.log [A2.log ...] --candidate-run B.log [B2.log ...] [--window 21:200] [--out DIR]
 *
 * It gives what `tandem ab` gives for its own runs (ab.h), as far as logs allow:
 *   - the window (the practice's 21:200 by default, clipped to the iterations every run holds,
 *     and said so; a logged line counts when every iteration it averages is inside);
 *   - mean and median step time (the logged "elapsed time per iteration", the mean weighted by the
 *     iterations each line covers), samples/s = global batch x 1000 / ms, their changes, the 95%
 *     block-bootstrap interval over the window's lines (stratified by run, not paired: nothing
 *     says the runs were interleaved), and with 2 runs or more per side Welch's t interval between
 *     whole runs;
 *   - the precision rows, step by step over the iterations both sides' first runs logged:
 *     learning rate, consumed samples, global batch identical; loss and grad norm equal at the
 *     printed precision, else the largest relative deviation and its iteration; NaN and skipped
 *     iterations;
 *   - the configuration diff from the arguments blocks (or model_config.yaml) and the DDP config
 *     lines, with the same confirmation as ab.h;
 *   - warnings (different models, world sizes or global batches, sides logged at different steps,
 *     losses far apart, each run's own warnings: resumed, crashed, cut) and plain statements of
 *     what logs cannot establish.
 *   - with profiler traces (a RUN given as LOG,TRACES, or a folder holding one log and the
 *     traces), the hidden/exposed rows per side from runs/analyze.h.
 * Output: the terminal table, and in the report directory report.md, summary.json (the keys of
 * the in-process protocol, null where a log cannot tell, plus the runs' own), steps_<side>.csv,
 * loss.svg, step_time.svg, step_time_hist.svg. docs/ab-runs.md explains them. */
#ifndef TDM_AB_RUNS_H
#define TDM_AB_RUNS_H

#include <stdint.h>

#include "ab/stats.h"
#include "core/error.h"
#include "core/strbuf.h"
#include "runs/run.h"

typedef struct tdm_ab_runs_options {
    /* [0] baseline, [1] candidate: paths (logs, golden values, test-case dirs), each optionally
     * ",TRACES" (a trace file or folder), or a folder holding one *.log and the traces */
    const char *const *runs[2];
    int n_runs[2];
    int window_given; /* else the practice's 21:200, clipped */
    int64_t window_lo, window_hi;
    uint64_t bootstrap_seed;
    int bootstrap_resamples;
    char out[1024];           /* report directory */
    const char *command_line; /* for the report (may be NULL) */
} tdm_ab_runs_options;

/* Defaults: window 21:200 (not given), seed and resamples as ab.h's, out "ab-report". */
void tdm_ab_runs_options_default(tdm_ab_runs_options *o);

/* One row of the precision check. */
typedef enum tdm_ab_runs_verdict {
    TDM_AB_RUNS_ABSENT = 0, /* not logged on both sides at any common iteration */
    TDM_AB_RUNS_EQUAL = 1,
    TDM_AB_RUNS_DIFFER = 2,
} tdm_ab_runs_verdict;

typedef struct tdm_ab_runs_check {
    const char *name; /* "learning rate", "loss", ... */
    tdm_ab_runs_verdict verdict;
    int64_t compared;      /* iterations where both sides logged it */
    int64_t equal;         /* of which equal (at the printed precision for decimals) */
    int64_t one_side_only; /* iterations where only one side logged it */
    int64_t first_diff;    /* iteration of the first difference, 0 if none */
    int64_t max_dev_at;    /* iteration of the largest relative deviation */
    double max_rel_dev;    /* |a - b| / max(|a|, |b|), 0 when equal */
    char precision[80];    /* "7 significant digits" (the coarser side's), "" for counts */
} tdm_ab_runs_check;

enum {
    TDM_AB_RUNS_CHECKS = 7
}; /* lr, consumed samples, global batch, loss, grad norm, validation loss, other losses */

typedef struct tdm_ab_runs_side {
    const char *label; /* "baseline" / "candidate" */
    tdm_run_log *runs; /* [n_runs] */
    int n_runs;
    int64_t held_lo, held_hi; /* the iterations with a step time every run of the side covers */
    double mean_step_ms, median_step_ms, stddev_step_ms, samples_per_s;
    double *run_mean_ms;                        /* [n_runs] */
    int64_t window_lines;                       /* logged lines in the window, all runs */
    int64_t window_iterations;                  /* iterations they cover */
    int64_t window_samples;                     /* samples of those iterations; 0 when a line lacks the global batch */
    int64_t nan_iterations, skipped_iterations; /* over every logged line of every run; -1 when not logged */
    int64_t global_batch;                       /* in the window, first run; 0 unknown, -1 when it changes */
    int log_interval;                           /* iterations per line in the window, first run; 0 when it varies */
    /* profiler traces given with the runs ("LOG,TRACES" or a folder holding both), through
     * tdm_runs_analyze: ms per profiled step, the mean over every rank of every traced run */
    char **trace_paths; /* [n_runs]: the traces of each run, NULL when none */
    int traced_runs, trace_ranks;
    int64_t trace_steps;      /* profiled steps, summed over the ranks */
    int64_t trace_world_size; /* as the traces state it, -1 unknown, 0 when the runs differ */
    double trace_step_ms, trace_compute_ms, trace_comm_ms, trace_hidden_ms, trace_exposed_ms, trace_last_ms;
    double trace_overlap_pct; /* hidden / communication, NaN without communication */
    char **trace_notes;       /* what the trace readers assumed ("no ProfilerStep#N annotation: ...") */
    int n_trace_notes;
} tdm_ab_runs_side;

typedef struct tdm_ab_runs_result {
    tdm_ab_runs_side side[2];
    int64_t window_lo, window_hi;
    char window_note[512]; /* how the window was chosen */
    char **diff_lines;     /* "name: a -> b" */
    int n_diff;
    char **same_lines; /* "name = value" */
    int n_same;
    char **skipped_lines; /* output locations, not compared: "name: a | b" */
    int n_skipped;
    int args_known;        /* both first runs have arguments */
    int ddp_line_confirms; /* as ab.h: 1, 0, or -1 when no differing argument is in both DDP lines */
    double step_time_change_pct, median_change_pct, throughput_change_pct;
    tdm_stats_ci step_time_ci; /* lo/hi NaN when there is no interval */
    int ci_block;
    tdm_stats_ci runs_ci; /* Welch t between whole runs; NaN without 2 runs per side */
    double runs_ci_df;
    char noise_sentence[1024];
    tdm_ab_runs_check checks[TDM_AB_RUNS_CHECKS];
    int64_t common_steps; /* iterations both first runs logged */
    int all_finite;       /* every logged loss and grad norm finite */
    int repeats_equal;    /* each side's runs equal to its first at the printed precision (1 with one run) */
    int world_size;       /* from the arguments, 0 unknown or differing */
    char **warnings;
    int n_warnings;
    char **limits; /* what the logs cannot establish */
    int n_limits;
} tdm_ab_runs_result;

/* Reads every run, compares, and writes the report directory; `table` (if not NULL) gets the
 * terminal table. Fails with one sentence on a run that cannot be read, a window that holds no
 * logged iteration, or an unwritable directory. Free res with tdm_ab_runs_result_free, also
 * after failure. */
int tdm_ab_runs(const tdm_ab_runs_options *o, tdm_ab_runs_result *res, tdm_strbuf *table, tdm_error *err);
void tdm_ab_runs_result_free(tdm_ab_runs_result *res);

/* The comparison alone, on runs already read into res->side[s].runs (tests). */
int tdm_ab_runs_compute(const tdm_ab_runs_options *o, tdm_ab_runs_result *res, tdm_error *err);

/* ab_runs_traces.c */
/* Where a RUN argument's log and traces are: "LOG,TRACES" (when no file has the whole name; the traces
 * required), a folder that holds one *.log or *.log.gz and no golden values (the traces are the
 * folder's, if any), else the argument is the log and traces[0] = 0. */
int tdm_ab_runs_split(const char *arg, char *log, size_t log_cap, char *traces, size_t traces_cap, int *traces_required,
                      tdm_error *err);
/* Reads run k's traces (side->n_runs set) and adds their figures to the side; with required 0 a folder
 * without traces is no error. tdm_ab_runs_finish_traces turns the sums into means. */
int tdm_ab_runs_read_traces(tdm_ab_runs_side *side, int k, const char *path, int required, tdm_error *err);
/* A run given as profiler traces alone: its steps as iterations, each step's time the slowest traced
 * rank's ProfilerStep duration (the step every rank waits for), no loss, learning rate or batch.
 * 1 with run filled, 0 when path holds no trace with steps (run left initialised). */
int tdm_ab_runs_log_from_traces(const char *path, tdm_run_log *run);
void tdm_ab_runs_finish_traces(tdm_ab_runs_side *side);

/* ab_runs_report.c */
void tdm_ab_runs_format_table(const tdm_ab_runs_options *o, const tdm_ab_runs_result *r, tdm_strbuf *sb);
int tdm_ab_runs_write_report(const tdm_ab_runs_options *o, const tdm_ab_runs_result *r, tdm_error *err);

#endif
