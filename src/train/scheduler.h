/* scheduler.h - Megatron-LM's OptimizerParamScheduler (learning rate and weight decay), counted in samples.
 *
 * Megatron counts scheduler "steps" in samples when training by iterations:
 *   warmup_steps = lr_warmup_iters x global_batch   (or lr_warmup_fraction x decay_steps, not rounded)
 *   decay_steps  = lr_decay_iters  x global_batch   (lr_decay_iters defaults to train_iters)
 * and lr(n), n = samples consumed so far, is
 *   n <= warmup_steps (warmup_steps > 0):  init + (max - init) * n / warmup_steps
 *   constant:                              max
 *   n > decay_steps:                       min
 *   inverse-square-root:                   max(min, max * sqrt(max(warmup,1)) / sqrt(max(n,1)))
 *   otherwise r = (n - warmup) / (decay - warmup):
 *     linear: min + (max - min) * (1 - r);   cosine: min + (max - min) * (cos(pi r) + 1) / 2
 *     WSD (warmup-stable-decay): max until decay - wsd_decay_steps, then min + (max - min) * c(q),
 *       q = (n - (decay - wsd_decay_steps)) / wsd_decay_steps and c by --lr-wsd-decay-style:
 *       exponential 2 * 0.5^q - 1, linear 1 - q, cosine (cos(pi q) + 1) / 2, minus_sqrt 1 - sqrt(q)
 * The weight decay wd(n) (Megatron's get_wd) goes from start_wd to end_wd over wd_incr_steps (train_iters x
 * global batch, or train_samples): constant end_wd; otherwise s = n / wd_incr_steps, linear start + (end -
 * start) * s, cosine start + (end - start) * (cos(pi (1 - s)) + 1) / 2; end_wd once n > wd_incr_steps.
 *
 * Megatron's timing, which we keep so logs match: the optimizer step of iteration i
 * uses lr(consumed before i); the scheduler then advances by the global batch, and
 * the iteration line logs the advanced value lr(consumed after i). With warmup from 0
 * the very first step therefore runs at lr = init.
 */
#ifndef TDM_SCHEDULER_H
#define TDM_SCHEDULER_H

#include <stdint.h>

#include "core/error.h"

typedef enum tdm_lr_style {
    TDM_LR_CONSTANT,
    TDM_LR_LINEAR,
    TDM_LR_COSINE,
    TDM_LR_INVERSE_SQRT,
    TDM_LR_WSD,
} tdm_lr_style;

typedef enum tdm_wsd_style { TDM_WSD_EXPONENTIAL, TDM_WSD_LINEAR, TDM_WSD_COSINE, TDM_WSD_MINUS_SQRT } tdm_wsd_style;
typedef enum tdm_wd_style { TDM_WD_CONSTANT, TDM_WD_LINEAR, TDM_WD_COSINE } tdm_wd_style;

typedef struct tdm_lr_scheduler {
    double max_lr, min_lr, init_lr;
    tdm_lr_style style;
    double warmup_steps;     /* samples; fractional with --lr-warmup-fraction, as Megatron's */
    int64_t decay_steps;     /* samples */
    int64_t num_steps;       /* samples consumed so far */
    tdm_wsd_style wsd_style; /* WSD: the shape of the final decay */
    int64_t wsd_decay_steps; /* WSD: samples of the final decay (the end of the decay span) */
    double start_wd, end_wd; /* weight decay; both --weight-decay unless it increases */
    tdm_wd_style wd_style;
    int64_t wd_incr_steps; /* samples */
} tdm_lr_scheduler;

/* "constant" | "linear" | "cosine" | "inverse-square-root" | "WSD" -> style; -1 if unknown. */
int tdm_lr_style_parse(const char *name, tdm_lr_style *out);
const char *tdm_lr_style_name(tdm_lr_style s);
/* "exponential" | "linear" | "cosine" | "minus_sqrt"; "constant" | "linear" | "cosine". -1 if unknown. */
int tdm_wsd_style_parse(const char *name, tdm_wsd_style *out);
int tdm_wd_style_parse(const char *name, tdm_wd_style *out);
const char *tdm_wd_style_name(tdm_wd_style s);

/* Sets up the schedule from iteration counts (see above). warmup_fraction < 0 means
 * "use warmup_iters"; decay_iters <= 0 means train_iters. Errors: max < min, max < init, a
 * warmup longer than the decay, non-positive sizes. */
int tdm_lr_scheduler_init(tdm_lr_scheduler *s, double max_lr, double min_lr, double init_lr, tdm_lr_style style,
                          int64_t warmup_iters, double warmup_fraction, int64_t decay_iters, int64_t train_iters,
                          int64_t global_batch, tdm_error *err);

/* WSD's final decay: wsd_iters x global_batch samples (1 <= that <= the decay span). */
int tdm_lr_scheduler_set_wsd(tdm_lr_scheduler *s, tdm_wsd_style style, int64_t wsd_iters, int64_t global_batch,
                             tdm_error *err);
/* The weight-decay schedule (init leaves it constant at 0): from start_wd to end_wd over incr_steps samples;
 * constant needs start == end. Errors: negative, end < start, incr_steps < 1. */
int tdm_lr_scheduler_set_wd(tdm_lr_scheduler *s, tdm_wd_style style, double start_wd, double end_wd, int64_t incr_steps,
                            tdm_error *err);

/* Checks a schedule set up other than by tdm_lr_scheduler_init (a checkpoint's, under
 * --use-checkpoint-opt_param-scheduler) against init's rules: finite, non-negative rates with
 * min <= max and init <= max, a decay span of at least one sample, a warmup of none or
 * shorter than it. Errors name the trainer_state.json keys. */
int tdm_lr_scheduler_check(const tdm_lr_scheduler *s, tdm_error *err);

/* Weight decay at sample count n, and at the current num_steps. */
double tdm_lr_scheduler_wd_at(const tdm_lr_scheduler *s, int64_t n);
double tdm_lr_scheduler_wd(const tdm_lr_scheduler *s);
/* lr at the current num_steps. */
double tdm_lr_scheduler_lr(const tdm_lr_scheduler *s);
/* lr at any sample count n (a pure function of the setup). */
double tdm_lr_scheduler_lr_at(const tdm_lr_scheduler *s, int64_t n);
/* Advances by `samples` (the global batch of the step just taken). */
void tdm_lr_scheduler_step(tdm_lr_scheduler *s, int64_t samples);

#endif
