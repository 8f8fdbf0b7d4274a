/* timers.c - Megatron's named step timers (see timers.h). */
#include "distributed/timers.h"

#include <string.h>

#include "core/clock.h"

static const char *const names[TDM_TIMER_COUNT] = {
    [TDM_TIMER_FORWARD_BACKWARD] = "forward-backward",
    [TDM_TIMER_ALL_GRADS_SYNC] = "all-grads-sync",
    [TDM_TIMER_PARAMS_ALL_GATHER] = "params-all-gather",
    [TDM_TIMER_OPTIMIZER] = "optimizer",
};

const char *tdm_timer_name(tdm_timer_id id) { return id >= 0 && id < TDM_TIMER_COUNT ? names[id] : "?"; }

void tdm_timers_reset(tdm_timers *t) { memset(t, 0, sizeof *t); }

void tdm_timers_start(tdm_timers *t, tdm_timer_id id) {
    t->start_ns[id] = tdm_now_ns();
    t->used[id] = 1;
}

void tdm_timers_stop(tdm_timers *t, tdm_timer_id id) {
    if (t->start_ns[id]) t->elapsed_ns[id] += tdm_now_ns() - t->start_ns[id];
    t->start_ns[id] = 0;
}

double tdm_timers_elapsed_ms(const tdm_timers *t, tdm_timer_id id) { return (double)t->elapsed_ns[id] / 1e6; }

void tdm_timing_format_option(const tdm_timing *tm, tdm_timing_option option, tdm_strbuf *out) {
    if (option == TDM_TIMING_ALL) {
        tdm_sb_puts(out, "times across ranks (ms):\n");
        const int kept = tm->n_ranks < TDM_TIMING_MAX_RANKS ? tm->n_ranks : TDM_TIMING_MAX_RANKS;
        for (int i = 0; i < TDM_TIMER_COUNT; i++) {
            if (!tm->valid[i]) continue;
            tdm_sb_printf(out, "  %s:\n", names[i]);
            for (int r = 0; r < kept; r++)
                if (tm->rank_ms[r][i] >= 0) tdm_sb_printf(out, "     rank %2d: %.2f\n", r, tm->rank_ms[r][i]);
            if (tm->n_ranks > kept) tdm_sb_printf(out, "     (%d more ranks)\n", tm->n_ranks - kept);
        }
        return;
    }
    tdm_sb_puts(out,
                option == TDM_TIMING_MAX ? "max time across ranks (ms):\n" : "(min, max) time across ranks (ms):\n");
    for (int i = 0; i < TDM_TIMER_COUNT; i++) {
        if (!tm->valid[i]) continue;
        /* Megatron: (name + ' ').ljust(48, '.') */
        char col[49];
        size_t n = strlen(names[i]);
        memcpy(col, names[i], n);
        col[n++] = ' ';
        while (n < 48) col[n++] = '.';
        col[n] = 0;
        if (option == TDM_TIMING_MAX) tdm_sb_printf(out, "    %s: %.2f\n", col, tm->max_ms[i]);
        else tdm_sb_printf(out, "    %s: (%.2f, %.2f)\n", col, tm->min_ms[i], tm->max_ms[i]);
    }
}

void tdm_timing_format(const tdm_timing *tm, tdm_strbuf *out) { tdm_timing_format_option(tm, TDM_TIMING_MINMAX, out); }
