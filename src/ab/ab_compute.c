/* ab_compute.c - step 5 of the protocol: the window's statistics of each side, the step-by-step
 * precision check, the interval between runs and the verdict (tdm_ab_compute). ab.c runs the steps
 * before it. */
#include "ab/ab.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ab/stats.h"
#include "core/alloc.h"

static int in_window(const tdm_ab_options *o, int64_t it) { return it >= o->window_lo && it <= o->window_hi; }

/* The window's step times of every repeat, one repeat after the other (run_len[r] of repeat r; run_len has
 * s->repeats entries), and the side's summary statistics. */
static void window_stats(const tdm_ab_options *o, tdm_ab_side *s, int world, double **times, int64_t *n_times,
                         int64_t *run_len) {
    double *t = tdm_xmalloc((size_t)(s->repeats * s->steps + 1) * sizeof *t);
    int64_t n = 0;
    double total_ms = 0, flops = 0, cpu = 0, compute_cpu = 0, comm_cpu = 0;
    free(s->repeat_mean_ms);
    s->repeat_mean_ms = tdm_xcalloc((size_t)s->repeats, sizeof *s->repeat_mean_ms);
    s->window_samples = 0;
    s->nan_iterations = s->skipped_iterations = 0;
    for (int r = 0; r < s->repeats; r++) {
        double sum = 0;
        int64_t k = 0;
        for (int64_t i = 0; i < s->steps; i++) {
            const tdm_step_record *rec = &s->records[r * s->steps + i];
            if (rec->nan) s->nan_iterations++;
            if (rec->skipped) s->skipped_iterations++;
            if (!in_window(o, rec->iteration)) continue;
            t[n++] = rec->step_ms;
            sum += rec->step_ms;
            k++;
            total_ms += rec->step_ms;
            s->window_samples += rec->global_batch_size;
            flops += rec->model_flops;
            cpu += rec->cpu_ms, compute_cpu += rec->compute_cpu_ms, comm_cpu += rec->comm_thread_cpu_ms;
        }
        s->repeat_mean_ms[r] = k ? sum / (double)k : NAN;
        run_len[r] = k;
    }
    s->mean_step_ms = tdm_stats_mean(t, n);
    s->median_step_ms = tdm_stats_median(t, n);
    s->stddev_step_ms = tdm_stats_stddev(t, n);
    s->cpu_ms = n ? cpu / (double)n : NAN;
    s->compute_cpu_ms = n ? compute_cpu / (double)n : NAN;
    s->comm_cpu_ms = n && strcmp(s->args.comm_progress, "inline") ? comm_cpu / (double)n : NAN;
    s->cores_busy = total_ms > 0 ? cpu / total_ms : NAN;
    s->samples_per_s = total_ms > 0 ? (double)s->window_samples / (total_ms / 1e3) : NAN;
    s->model_gflops_per_rank = total_ms > 0 && world > 0 ? flops / (total_ms / 1e3) / 1e9 / world : NAN;
    *times = t;
    *n_times = n;
}

static int same_double(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static double rel_dev(double a, double b) {
    double d = fabs(a - b), m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    return m > 0 ? d / m : (d > 0 ? INFINITY : 0);
}

/* Step-by-step comparison of the first timing run of each side. */
static void precision_check(const tdm_ab_side *a, const tdm_ab_side *b, tdm_ab_result *r) {
    r->lr_equal = r->consumed_samples_equal = r->global_batch_equal = 1;
    r->loss_bitwise_equal = r->grad_norm_bitwise_equal = r->all_finite = 1;
    for (int64_t i = 0; i < a->steps && i < b->steps; i++) {
        const tdm_step_record *x = &a->records[i], *y = &b->records[i];
        if (!same_double(x->lr, y->lr)) r->lr_equal = 0;
        if (x->consumed_samples != y->consumed_samples) r->consumed_samples_equal = 0;
        if (x->global_batch_size != y->global_batch_size) r->global_batch_equal = 0;
        if (!same_double(x->loss, y->loss)) {
            if (r->loss_bitwise_equal) r->first_loss_diff_step = x->iteration;
            r->loss_bitwise_equal = 0;
            double d = rel_dev(x->loss, y->loss);
            if (d > r->max_rel_loss_dev) r->max_rel_loss_dev = d;
        }
        if (!same_double(x->grad_norm, y->grad_norm)) {
            if (r->grad_norm_bitwise_equal) r->first_grad_norm_diff_step = x->iteration;
            r->grad_norm_bitwise_equal = 0;
            double d = rel_dev(x->grad_norm, y->grad_norm);
            if (d > r->max_rel_grad_norm_dev) r->max_rel_grad_norm_dev = d;
        }
        if (!isfinite(x->loss) || !isfinite(y->loss) || !isfinite(x->grad_norm) || !isfinite(y->grad_norm))
            r->all_finite = 0;
    }
    /* every repeat of a side must reproduce its first run bit for bit: loss and grad norm, as the sides above */
    r->repeats_bitwise_equal = 1;
    for (int s = 0; s < 2; s++) {
        const tdm_ab_side *side = s ? b : a;
        for (int k = 1; k < side->repeats; k++)
            for (int64_t i = 0; i < side->steps; i++) {
                const tdm_step_record *x = &side->records[i], *y = &side->records[k * side->steps + i];
                if (!same_double(x->loss, y->loss) || !same_double(x->grad_norm, y->grad_norm))
                    r->repeats_bitwise_equal = 0;
            }
    }
}

/* The practice confirmed from the log's DistributedDataParallelConfig line that the
 * candidate really ran with overlap_grad_reduce=True. Generalised: every differing
 * argument ("name: a -> b") that the DDP lines show as "name=value" must show each
 * side's value. */
static void confirm_ddp_lines(tdm_ab_result *r) {
    r->ddp_line_confirms = -1;
    for (int i = 0; i < r->n_diff; i++) {
        char name[128], va[256], vb[256];
        if (sscanf(r->diff_lines[i], "%127[^:]: %255s -> %255s", name, va, vb) != 3) continue;
        for (int s = 0; s < 2; s++) {
            char key[160];
            snprintf(key, sizeof key, "%s=", name);
            const char *p = strstr(r->side[s].ddp_config_line, key);
            if (!p) continue;
            p += strlen(key);
            const char *want = s ? vb : va;
            size_t n = strcspn(p, ",)");
            int match = strlen(want) == n && !strncmp(p, want, n);
            if (r->ddp_line_confirms != 0) r->ddp_line_confirms = match;
        }
    }
}

/* The change between whole runs (stats.h: paired runs), from 3 repeats on: the steps' interval cannot see a
 * host that was slower during one run than the next. */
static void runs_interval(const tdm_ab_side *A, const tdm_ab_side *B, tdm_ab_result *r) {
    r->runs_ci_pairs = 0;
    r->runs_ci.change_pct = r->runs_ci.lo_pct = r->runs_ci.hi_pct = NAN;
    if (A->repeats < 3 || A->repeats != B->repeats ||
        tdm_stats_paired_runs_rel_change(A->repeat_mean_ms, B->repeat_mean_ms, A->repeats, &r->runs_ci) != 0)
        return;
    r->runs_ci_pairs = A->repeats;
}

/* The verdict (noise_sentence), docs/ab-protocol.md: with fewer than 3 repeats per side drift between runs
 * cannot be told from the effect, so no interval is called a result; from 3 on the interval between whole
 * runs leads; runs under load are said in the same sentence. */
static void verdict(tdm_ab_result *r, int have_steps_ci, int64_t steps_per_repeat, int64_t n_window) {
    const tdm_ab_side *A = &r->side[0];
    const tdm_stats_ci *s = &r->step_time_ci, *w = &r->runs_ci;
    char *out = r->noise_sentence;
    const size_t cap = sizeof r->noise_sentence;
    size_t len = 0;
#define ADD(...)                                                                                                       \
    (len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, __VA_ARGS__), len = len < cap ? len : cap)
    out[0] = 0;
    const int steps_contain = have_steps_ci && tdm_stats_ci_contains_zero(s);
    if (r->runs_ci_pairs) {
        const int runs_contain = tdm_stats_ci_contains_zero(w);
        if (runs_contain)
            ADD("Between whole runs the change in mean step time is %+.2f%% (95%% t interval over the %d interleaved "
                "pairs [%+.2f%%, %+.2f%%]), which contains 0: the difference is inside the run-to-run noise",
                w->change_pct, r->runs_ci_pairs, w->lo_pct, w->hi_pct);
        else
            ADD("Between whole runs the mean step time is %s by %.2f%% (95%% t interval over the %d interleaved "
                "pairs [%+.2f%%, %+.2f%%]); the interval excludes 0",
                w->change_pct < 0 ? "lower" : "higher", fabs(w->change_pct), r->runs_ci_pairs, w->lo_pct, w->hi_pct);
        if (have_steps_ci)
            ADD(". Within runs (steps' interval): [%+.2f%%, %+.2f%%]%s", s->lo_pct, s->hi_pct,
                runs_contain && !steps_contain
                    ? ", which excludes 0: the runs differ among themselves more than their steps suggest, so this "
                      "is not yet a result; add --repeats."
                : runs_contain ? "; add --repeats before drawing a conclusion."
                               : ".");
        else ADD("%s", runs_contain ? "; add --repeats before drawing a conclusion." : ".");
    } else if (!have_steps_ci) {
        if (n_window == 0) ADD("No interval: the window holds no measured step.");
        else
            ADD("No interval: %lld step(s) per repeat are too few to resample; widen --window (and --steps) before "
                "drawing a conclusion.",
                (long long)steps_per_repeat);
        ADD(" With %d repeat%s per side, drift between runs cannot be separated from the effect either.", A->repeats,
            A->repeats == 1 ? "" : "s");
    } else if (steps_contain) {
        ADD("The difference is inside the noise: the 95%% interval of the change in mean step time within runs "
            "[%+.2f%%, %+.2f%%] contains 0. With %d repeat%s per side, drift between runs cannot be separated from "
            "the effect either: use --repeats 3 or more before drawing a conclusion.",
            s->lo_pct, s->hi_pct, A->repeats, A->repeats == 1 ? "" : "s");
    } else {
        ADD("Within runs the mean step time is %s by %.2f%% (95%% interval of the steps [%+.2f%%, %+.2f%%]), but with "
            "%d repeat%s per side drift between runs cannot be separated from the effect: this is not yet a result; "
            "use --repeats 3 or more.",
            s->change_pct < 0 ? "lower" : "higher", fabs(s->change_pct), s->lo_pct, s->hi_pct, A->repeats,
            A->repeats == 1 ? "" : "s");
    }
    if (r->runs_under_load)
        ADD(" Under load: %d of %d timing run%s ran on a busy host (other processes took more than %.0f%% of its "
            "CPU, or CPU steal above %.0f%%), so the timings are not trustworthy; measure again on a quiet host.",
            r->runs_under_load, r->n_load, r->n_load == 1 ? "" : "s", TDM_AB_OTHERS_PCT, TDM_AB_STEAL_PCT);
#undef ADD
}

void tdm_ab_compute(const tdm_ab_options *o, tdm_ab_result *r) {
    confirm_ddp_lines(r);
    tdm_ab_side *A = &r->side[0], *B = &r->side[1];
    double *ta, *tb;
    int64_t na, nb;
    int64_t *la = tdm_xcalloc((size_t)A->repeats + 1, sizeof *la);
    int64_t *lb = tdm_xcalloc((size_t)B->repeats + 1, sizeof *lb);
    window_stats(o, A, r->world, &ta, &na, la);
    window_stats(o, B, r->world, &tb, &nb, lb);
    r->step_time_change_pct = tdm_stats_rel_change_pct(A->mean_step_ms, B->mean_step_ms);
    r->median_change_pct = tdm_stats_rel_change_pct(A->median_step_ms, B->median_step_ms);
    r->throughput_change_pct = tdm_stats_rel_change_pct(A->samples_per_s, B->samples_per_s);
    /* Repeat r of each side ran the same iterations on the same batches, interleaved in time: pair them;
     * unless the audit saw different inputs (a candidate flag that changes the data): then nothing pairs. */
    r->ci_paired =
        r->fingerprints_equal != 0 && A->repeats == B->repeats && !memcmp(la, lb, sizeof *la * (size_t)A->repeats);
    int ci_rc = r->ci_paired
                    ? tdm_stats_paired_block_bootstrap_rel_change(ta, tb, la, A->repeats, 0, o->bootstrap_resamples,
                                                                  o->bootstrap_seed, &r->step_time_ci)
                    : tdm_stats_block_bootstrap_rel_change(ta, la, A->repeats, tb, lb, B->repeats, 0,
                                                           o->bootstrap_resamples, o->bootstrap_seed, &r->step_time_ci);
    r->ci_block = A->repeats > 0 ? tdm_stats_auto_block(la[0]) : 1;
    if (ci_rc != 0) {
        r->step_time_ci.change_pct = r->step_time_change_pct;
        r->step_time_ci.lo_pct = r->step_time_ci.hi_pct = NAN;
    }
    runs_interval(A, B, r);
    r->runs_under_load = 0;
    for (int i = 0; i < r->n_load; i++) r->runs_under_load += r->load[i].under_load;
    verdict(r, ci_rc == 0, A->repeats > 0 ? la[0] : 0, na < nb ? na : nb);
    free(ta);
    free(tb);
    free(la);
    free(lb);
    precision_check(A, B, r);
    r->nan_iterations = A->nan_iterations + B->nan_iterations;
    r->skipped_iterations = A->skipped_iterations + B->skipped_iterations;
}
