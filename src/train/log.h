/* log.h - what the trainer writes about each step: Megatron's iteration line, the
 * timers block, JSON Lines metrics, and a progress line for people.
 *
 * The formatting functions only build text (testable against literal strings); the
 * trainer decides who prints (rank 0) and when (every --log-interval steps).
 *
 * Iteration line (Megatron's training_log, fields separated by " | "):
 *   [2026-11-29 18:00:00.123456] iteration        5/      20 | consumed samples:           40 |
 *   elapsed time per iteration (ms): 812.3 | learning rate: 1.000000E-04 | global batch size:     8 |
 *   lm loss: 6.543210E+00 | loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations:   0 |
 *   number of nan iterations:   0 |
 * (one line). C's %E prints at least two exponent digits, like Python's {:.6E}.
 */
#ifndef TDM_TRAIN_LOG_H
#define TDM_TRAIN_LOG_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "train/trainer.h"

typedef struct tdm_iter_line {
    int64_t iteration, train_iters, consumed_samples;
    double elapsed_ms_per_iter; /* mean over the log interval */
    double lr;
    int global_batch_size;
    double loss;       /* mean of the interval's per-step losses */
    double loss_scale; /* 1.0: fp32 training has no loss scaling */
    double grad_norm;  /* of the last step */
    int skipped, nan;  /* counts over the interval */
    /* Megatron's optional fields, each printed only when its has_ flag is set */
    int has_throughput, has_num_zeros, has_params_norm;
    double throughput;  /* --log-throughput: model TFLOP/s per rank over the interval */
    double num_zeros;   /* --log-num-zeros-in-grad: of the last step */
    double params_norm; /* --log-params-norm: of the last step */
} tdm_iter_line;

/* Appends the iteration line (no newline) stamped with wall-clock time `now`
 * (CLOCK_REALTIME, printed in local time with microseconds). */
void tdm_format_iter_line(tdm_strbuf *sb, const struct timespec *now, const tdm_iter_line *l);

/* Megatron's timers block with --timing-log-level 1: "(min, max) time across ranks (ms):"
 * then one "    name ....: (min, max)" line per timer (two decimals). */
void tdm_format_timers(tdm_strbuf *sb, int n, const char *const *names, const double *min_ms, const double *max_ms);

/* One JSON object (no newline) for metrics.jsonl: iteration, consumed_samples, lr,
 * global_batch_size, tokens, loss (all 17 digits), grad_norm, skipped, nan, step_ms,
 * data_wait_ms, fwd_bwd_ms, grad_sync_ms, optimizer_ms, param_gather_ms,
 * comm_thread_cpu_ms, compute_cpu_ms (the trainer's thread), cpu_ms (the process), and "fingerprint"
 * (16 hex digits) when with_fingerprint. */
void tdm_format_metrics_json(tdm_strbuf *sb, const tdm_step_record *r, int with_fingerprint);

/* Appending writer of <dir>/metrics.jsonl (created with its directory). A resumed run
 * appends to the same file. Every line is whole: a torn last line (no newline) is removed on
 * open, each record is one write(), and a write cut short is cut back off. When the file already
 * holds lines, `header` (one JSON object, no newline; NULL: none) is written first. */
typedef struct tdm_metrics_writer tdm_metrics_writer;
tdm_metrics_writer *tdm_metrics_open(const char *dir, const char *header, tdm_error *err);
int tdm_metrics_write(tdm_metrics_writer *w, const tdm_step_record *r, int with_fingerprint, tdm_error *err);
void tdm_metrics_close(tdm_metrics_writer *w);

/* Megatron's validation block (three lines, each with a newline): a rule of dashes, then
 * " validation loss at PREFIX | lm loss value: 2.345678E+00 | lm loss PPL: 1.043760E+01 | ",
 * then the rule again; the rules are one longer than the line. PPL = exp(min(20, loss)). */
void tdm_format_validation(tdm_strbuf *sb, const char *prefix, double loss);

/* One JSON object (no newline) for valid.jsonl: iteration, consumed_samples (training),
 * loss (17 digits), ppl, tokens, samples (validation samples read), ms. */
void tdm_format_validation_json(tdm_strbuf *sb, int64_t iteration, int64_t consumed_samples, double loss,
                                int64_t tokens, int64_t samples, double ms);

/* "progress: iteration 50/200 (25.0%), 312.4 ms/iteration, ETA 0:00:46" (no newline). */
void tdm_format_progress(tdm_strbuf *sb, int64_t done, int64_t total, double ms_per_iter);

/* The step times of the last TDM_STEP_WINDOW iterations (fewer at the start), whose mean the
 * progress line's ms/iteration and ETA use. Zero-initialised is empty. */
enum { TDM_STEP_WINDOW = 20 };
typedef struct tdm_step_window {
    double ms[TDM_STEP_WINDOW];
    int n, next;
} tdm_step_window;
void tdm_step_window_push(tdm_step_window *w, double ms);
double tdm_step_window_mean(const tdm_step_window *w); /* 0 when empty */

#endif
