/* run.h - one finished training run as its logs tell it: the runs tandem did not train
 * (Megatron-LM, MindSpeed-MM) and tandem's own, read into one model so that `tandem ab
 * --baseline-run A --candidate-run B` compares them the way it compares its own runs.
 *
 *   tdm_run_log run;
 *   tdm_error err;
 *   if (tdm_run_log_read("logs/run_a.log", &run, &err) != 0) { ...err.msg: one sentence... }
 *   for (int64_t i = 0; i < run.n_iters; i++) use(run.iters[i].iteration, run.iters[i].elapsed_ms);
 *   const char *v = tdm_run_log_arg(&run, "overlap_grad_reduce");   // "False", or NULL
 *   tdm_run_log_free(&run);
 *
 * What a log holds, and what a reader must not invent:
 *   - A logged line covers `interval` iterations (Megatron's --log-interval): its elapsed
 *     time is their mean, its skipped / NaN counts are their sum, its loss their mean. The
 *     iteration it names is the last of them.
 *   - A value that the source did not log is NaN (doubles) or -1 (counts); global_batch is
 *     0 when unknown. Nothing is derived from other fields behind the caller's back.
 *   - Each printed decimal keeps its printed precision (tdm_run_prec), so two runs can be
 *     compared "at the printed precision": a log cannot show more than that.
 *   - Iterations are ascending and unique. A file with several runs appended (a resumed
 *     job) keeps, for each iteration, the line of the last pass that logged it; `passes`
 *     counts them and a warning says so.
 * Formats (run.c detects them, docs/ab-runs.md lists what each holds):
 *   megatron_log.c  stdout of the rank that logs (Megatron-LM, MindSpeed, tandem train)
 *   golden.c        Megatron functional-test golden_values_*.json (+ model_config.yaml beside it,
 *                   model_config.c) and MindSpeed-MM baseline JSON
 */
#ifndef TDM_RUNS_RUN_H
#define TDM_RUNS_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* Printed precision of a decimal: 0 unknown; TDM_RUN_PREC_SIG + n: n significant digits (as
 * "1.096171E+01", n = 7); TDM_RUN_PREC_DEC + n: n digits after the point (as "25.472", n = 3). */
typedef uint8_t tdm_run_prec;
#define TDM_RUN_PREC_SIG       0x40
#define TDM_RUN_PREC_DEC       0x80
#define TDM_RUN_PREC_DIGITS(p) ((int)((p)&0x3f))

/* Losses other than "lm loss" that a line may carry ("mtp_1 loss", "load_balancing_loss"):
 * the first few names seen are kept, the rest counted in a warning. */
#define TDM_RUN_MAX_LOSSES      4
/* Longest line considered; the rest of a longer line is dropped (and counted). */
#define TDM_RUN_LINE_MAX        65536
/* Bounds on what one log may make us keep besides its iterations. */
#define TDM_RUN_MAX_ARGS        4096
#define TDM_RUN_MAX_TIMER_NAMES 256
#define TDM_RUN_MAX_TIMERS      1000000
#define TDM_RUN_MAX_VALID       100000
#define TDM_RUN_MAX_WARNINGS    64

typedef struct tdm_run_iter {
    int64_t iteration;        /* the last iteration the line covers, 1-based */
    int64_t consumed_samples; /* after it; -1 not logged */
    int64_t global_batch;     /* samples per iteration; 0 not logged */
    int32_t interval;         /* iterations the line covers (1 with --log-interval 1) */
    int32_t skipped, nan;     /* iterations skipped / with NaN among them; -1 not logged */
    uint32_t pass;            /* 1 for the file's first run, 2 for a run appended after it, ... */
    tdm_run_prec lr_prec, loss_prec, grad_norm_prec;
    /* NaN when not logged */
    double elapsed_ms; /* per iteration, mean over the interval (golden values: that step's) */
    double lr;
    double lm_loss; /* absent when every iteration of the interval was skipped */
    double loss_scale;
    double grad_norm;
    double throughput; /* "throughput per GPU (TFLOP/s/GPU)" */
    double params_norm;
    double num_zeros;
    double other_loss[TDM_RUN_MAX_LOSSES]; /* by index into tdm_run_log.loss_names */
} tdm_run_iter;

typedef struct tdm_run_kv {
    char *key, *value;
} tdm_run_kv;

/* One line of a "(min, max) time across ranks (ms):" block, after the iteration logged before it. */
typedef struct tdm_run_timer {
    int64_t after_iteration; /* 0: before the first iteration line (set-up) */
    int name;                /* index into tdm_run_log.timer_names */
    double min_ms, max_ms;   /* min is NaN for a "max time across ranks" block */
} tdm_run_timer;

/* " validation loss at iteration 100 [on validation set|on test set] | lm loss value: ... | lm loss PPL: ... |" */
typedef struct tdm_run_valid {
    int64_t iteration;
    char set[24];        /* "" (periodic evaluation), "validation set", "test set" */
    double lm_loss, ppl; /* NaN when absent */
    tdm_run_prec loss_prec;
} tdm_run_valid;

typedef enum tdm_run_format {
    TDM_RUN_MEGATRON_LOG = 1,
    TDM_RUN_MEGATRON_GOLDEN = 2,
    TDM_RUN_MINDSPEED_BASELINE = 3,
    TDM_RUN_PROFILER_TRACES = 4, /* step times from profiler traces alone (ab/ab_runs_traces.c) */
} tdm_run_format;

typedef struct tdm_run_log {
    tdm_run_format format;
    char path[1024];
    char source[256];    /* what was read, in words: "Megatron-LM log (734 lines)" */
    tdm_run_iter *iters; /* [n_iters], ascending iteration */
    int64_t n_iters, cap_iters;
    /* the arguments block ("  name ...... value"), or model_config.yaml's MODEL_ARGS ("--name": value);
     * keys as printed, looked up by tdm_run_log_arg with '-' and '_' alike and leading "--" ignored */
    tdm_run_kv *args;
    int n_args;
    tdm_run_kv *env; /* model_config.yaml's ENV_VARS */
    int n_env;
    char ddp_config[2048]; /* "DistributedDataParallelConfig(...)" as logged, "" if none */
    char *loss_names[TDM_RUN_MAX_LOSSES];
    int n_loss_names;
    char *timer_names[TDM_RUN_MAX_TIMER_NAMES];
    int n_timer_names;
    tdm_run_timer *timers;
    int64_t n_timers, cap_timers;
    tdm_run_valid *valid;
    int64_t n_valid, cap_valid;
    char *warnings[TDM_RUN_MAX_WARNINGS]; /* sentences about the input: resumed, cut, crashed, ... */
    int n_warnings, dropped_warnings;
    int64_t train_iters; /* the "/ M" of the iteration lines (or train_iters argument), 0 unknown */
    int passes;          /* runs appended in the file (1 for a plain log) */
    int crashed;         /* a Python traceback follows the last iteration line */
    char crash[320];     /* what it said ("AttributeError: ...", while "saving checkpoint ...") */
    int64_t warm_up;     /* iterations the source itself calls warm-up (MindSpeed's warm_up), 0 none */
    int64_t lines, bytes, long_lines;
} tdm_run_log;

/* Reads a run from `path`, detecting the format: a directory (a Megatron test case: its one
 * golden_values_*.json and model_config.yaml), a JSON file (golden values, or a MindSpeed
 * baseline), or else a text log. Fails with one sentence naming the path when the input is
 * none of them, unreadable, or holds no iteration. *run is zeroed first; free it with
 * tdm_run_log_free, also after failure. */
int tdm_run_log_read(const char *path, tdm_run_log *run, tdm_error *err);
void tdm_run_log_free(tdm_run_log *run);
void tdm_run_log_init(tdm_run_log *run);

/* The argument's value as printed, or NULL. Names match with '-' and '_' alike and without a
 * leading "--": "overlap_grad_reduce" finds "--overlap-grad-reduce" too. */
const char *tdm_run_log_arg(const tdm_run_log *run, const char *name);
/* The same for one "name=value" inside the DDP config line (into out[cap]); NULL if absent. */
const char *tdm_run_log_ddp_field(const tdm_run_log *run, const char *name, char *out, size_t cap);

/* Helpers for the readers (run.c). */
void tdm_run_warn(tdm_run_log *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A record with every field "not logged" for `iteration`. */
tdm_run_iter tdm_run_iter_empty(int64_t iteration);
/* Appends x, in any order. Fails only past the bound on iterations. */
int tdm_run_append_iter(tdm_run_log *run, const tdm_run_iter *x, tdm_error *err);
/* Puts the iterations in order and keeps, of those with the same iteration, the one appended
 * last (the later pass wins). Stable, O(n log n); nothing to do when already in order. */
void tdm_run_sort_iters(tdm_run_log *run);
/* The record of `iteration`, or NULL (binary search: the iterations must be sorted). */
tdm_run_iter *tdm_run_find_iter(tdm_run_log *run, int64_t iteration);
void tdm_run_add_kv(tdm_run_kv **kv, int *n, const char *key, size_t klen, const char *value, size_t vlen);
/* The index of a loss name (added when new and there is room), or -1. */
int tdm_run_loss_index(tdm_run_log *run, const char *name, size_t len);

/* Parses a decimal ("1.096171E+01", "388.3", "-2", "nan", "inf") at s[0..n): the value (the
 * correctly rounded double, as strtod gives) and its printed precision. Returns the bytes
 * read, 0 when s does not start with a number. */
size_t tdm_run_parse_number(const char *s, size_t n, double *v, tdm_run_prec *prec);

/* 1 when a and b are equal at the coarser of their printed precisions (both rounded to it);
 * NaNs are equal to each other. An unknown precision compares the values exactly. */
int tdm_run_equal_at_precision(double a, tdm_run_prec pa, double b, tdm_run_prec pb);
/* "7 significant digits", "3 decimals", "as stored" into out[cap]. */
void tdm_run_prec_describe(tdm_run_prec p, char *out, size_t cap);

#endif
