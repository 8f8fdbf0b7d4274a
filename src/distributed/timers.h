/* timers.h - Megatron's step timers, reduced to (min, max) across ranks.
 *
 * With --timing-log-level 1 Megatron prints, every log interval,
 *   (min, max) time across ranks (ms):
 *       forward-backward ...............................: (123.45, 124.56)
 *       all-grads-sync .................................: (1.02, 1.10)
 *       params-all-gather ..............................: (3.30, 3.41)
 *       optimizer ......................................: (10.00, 10.20)
 * Each value is the time a rank accumulated in that timer since the last report,
 * divided by the normalizer (the number of iterations in the interval). A timer that
 * was never started in the interval is left out. Times are wall-clock, CLOCK_MONOTONIC.
 * forward-backward includes all-grads-sync; optimizer includes params-all-gather
 * (when the gather is synchronous), as in Megatron.
 */
#ifndef TDM_DIST_TIMERS_H
#define TDM_DIST_TIMERS_H

#include <stdint.h>

#include "core/strbuf.h"

typedef enum tdm_timer_id {
    TDM_TIMER_FORWARD_BACKWARD = 0, /* started/stopped by the trainer */
    TDM_TIMER_ALL_GRADS_SYNC,       /* tdm_ddp_finish_grad_sync */
    TDM_TIMER_PARAMS_ALL_GATHER,    /* synchronous parameter all-gather (not overlapped) */
    TDM_TIMER_OPTIMIZER,            /* tdm_ddp_optimizer_step */
    TDM_TIMER_COUNT
} tdm_timer_id;

typedef struct tdm_timers {
    uint64_t start_ns[TDM_TIMER_COUNT];
    uint64_t elapsed_ns[TDM_TIMER_COUNT]; /* accumulated since the last reset */
    int used[TDM_TIMER_COUNT];            /* started at least once since the last reset */
} tdm_timers;

/* One reduced timer value set: ms per iteration, min and max over ranks; valid[i] = 0
 * when no rank used timer i. */
enum { TDM_TIMING_MAX_RANKS = 256 }; /* ranks whose own values a report keeps (--timing-log-option all) */

typedef struct tdm_timing {
    double min_ms[TDM_TIMER_COUNT];
    double max_ms[TDM_TIMER_COUNT];
    int valid[TDM_TIMER_COUNT];
    int n_ranks;                                           /* ranks in the job */
    double rank_ms[TDM_TIMING_MAX_RANKS][TDM_TIMER_COUNT]; /* each rank's value, < 0 when it did not use the timer */
} tdm_timing;

/* Megatron's --timing-log-option */
typedef enum tdm_timing_option { TDM_TIMING_MINMAX, TDM_TIMING_MAX, TDM_TIMING_ALL } tdm_timing_option;

const char *tdm_timer_name(tdm_timer_id id); /* "forward-backward", ... */
void tdm_timers_reset(tdm_timers *t);
void tdm_timers_start(tdm_timers *t, tdm_timer_id id);
void tdm_timers_stop(tdm_timers *t, tdm_timer_id id);
/* Milliseconds accumulated in timer id since the last reset (this rank). */
double tdm_timers_elapsed_ms(const tdm_timers *t, tdm_timer_id id);

/* Appends the block above (header line and one line per valid timer, each
 * newline-terminated), names dotted out to Megatron's column. */
void tdm_timing_format(const tdm_timing *tm, tdm_strbuf *out);
/* The same for each --timing-log-option, in Megatron's words: minmax as above; max "max time across ranks
 * (ms):" and one value per timer; all "times across ranks (ms):", then per timer "  name:" and a line
 * "     rank  R: ms" for each rank that used it (the first TDM_TIMING_MAX_RANKS ranks, then how many more). */
void tdm_timing_format_option(const tdm_timing *tm, tdm_timing_option option, tdm_strbuf *out);

#endif
