/* scheduler.h - Megatron-LM's OptimizerParamScheduler (learning rate part), counted in samples.
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
} tdm_lr_style;

typedef struct tdm_lr_scheduler {
    double max_lr, min_lr, init_lr;
    tdm_lr_style style;
    double warmup_steps;  /* samples; fractional with --lr-warmup-fraction, as Megatron's */
    int64_t decay_steps;  /* samples */
    int64_t num_steps;    /* samples consumed so far */
} tdm_lr_scheduler;

/* "constant" | "linear" | "cosine" | "inverse-square-root" -> style; -1 if unknown. */
int tdm_lr_style_parse(const char *name, tdm_lr_style *out);
const char *tdm_lr_style_name(tdm_lr_style s);

/* Sets up the schedule from iteration counts (see above). warmup_fraction < 0 means
 * "use warmup_iters"; decay_iters <= 0 means train_iters. Errors: max < min, max < init, a
 * warmup longer than the decay, non-positive sizes. */
int tdm_lr_scheduler_init(tdm_lr_scheduler *s, double max_lr, double min_lr, double init_lr, tdm_lr_style style,
                          int64_t warmup_iters, double warmup_fraction, int64_t decay_iters, int64_t train_iters,
                          int64_t global_batch, tdm_error *err);

/* Checks a schedule set up other than by tdm_lr_scheduler_init (a checkpoint's, under
 * --use-checkpoint-opt_param-scheduler) against init's rules: finite, non-negative rates with
 * min <= max and init <= max, a decay span of at least one sample, a warmup of none or
 * shorter than it. Errors name the trainer_state.json keys. */
int tdm_lr_scheduler_check(const tdm_lr_scheduler *s, tdm_error *err);

/* lr at the current num_steps. */
double tdm_lr_scheduler_lr(const tdm_lr_scheduler *s);
/* lr at any sample count n (a pure function of the setup). */
double tdm_lr_scheduler_lr_at(const tdm_lr_scheduler *s, int64_t n);
/* Advances by `samples` (the global batch of the step just taken). */
void tdm_lr_scheduler_step(tdm_lr_scheduler *s, int64_t samples);

#endif
