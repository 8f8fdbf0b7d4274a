/* ab_runs.c - the A/B analysis of finished runs (ab_runs.h): window, statistics, precision check,
 * configuration diff, warnings. The table and the report files are ab_runs_report.c's. */
#include "ab/ab_runs.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ab/ab.h"
#include "core/alloc.h"
#include "core/fs.h"

void tdm_ab_runs_options_default(tdm_ab_runs_options *o) {
    memset(o, 0, sizeof *o);
    o->window_lo = 21;
    o->window_hi = 200;
    o->bootstrap_seed = 20261129;
    o->bootstrap_resamples = 2000;
    snprintf(o->out, sizeof o->out, "ab-report");
}

static void push(char ***list, int *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void push(char ***list, int *n, const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    *list = tdm_xrealloc(*list, (size_t)(*n + 1) * sizeof **list);
    (*list)[(*n)++] = tdm_xstrdup(buf);
}

/* ---- the window ---- */

/* The first iteration a line covers. */
static int64_t line_start(const tdm_run_iter *x) { return x->iteration - x->interval + 1; }

static int in_window(const tdm_ab_runs_result *r, const tdm_run_iter *x) {
    return isfinite(x->elapsed_ms) && line_start(x) >= r->window_lo && x->iteration <= r->window_hi;
}

/* The iterations with a step time that every run of the side covers. */
static void held(tdm_ab_runs_side *s) {
    s->held_lo = 0, s->held_hi = INT64_MAX;
    for (int k = 0; k < s->n_runs; k++) {
        const tdm_run_log *run = &s->runs[k];
        int64_t lo = 0, hi = 0;
        for (int64_t i = 0; i < run->n_iters; i++)
            if (isfinite(run->iters[i].elapsed_ms)) {
                if (!lo) lo = line_start(&run->iters[i]);
                hi = run->iters[i].iteration;
            }
        if (!lo) lo = INT64_MAX, hi = 0; /* no step time at all */
        if (lo > s->held_lo) s->held_lo = lo;
        if (hi < s->held_hi) s->held_hi = hi;
    }
}

static int choose_window(const tdm_ab_runs_options *o, tdm_ab_runs_result *r, tdm_error *err) {
    const tdm_ab_runs_side *A = &r->side[0], *B = &r->side[1];
    for (int s = 0; s < 2; s++)
        if (r->side[s].held_lo > r->side[s].held_hi)
            return tdm_errorf(err, "the %s's run%s hold%s no iteration with a step time%s", r->side[s].label,
                              r->side[s].n_runs > 1 ? "s" : "", r->side[s].n_runs > 1 ? "" : "s",
                              r->side[s].n_runs > 1 ? " that all of them cover" : "");
    int64_t lo = A->held_lo > B->held_lo ? A->held_lo : B->held_lo;
    int64_t hi = A->held_hi < B->held_hi ? A->held_hi : B->held_hi;
    char holds[200];
    snprintf(holds, sizeof holds, "the runs hold iterations %lld-%lld (baseline) and %lld-%lld (candidate)",
             (long long)A->held_lo, (long long)A->held_hi, (long long)B->held_lo, (long long)B->held_hi);
    if (lo > hi) return tdm_errorf(err, "the two sides share no iteration with a step time: %s", holds);
    int64_t wlo = o->window_lo > lo ? o->window_lo : lo, whi = o->window_hi < hi ? o->window_hi : hi;
    if (o->window_given) {
        if (wlo > whi)
            return tdm_errorf(err, "--window %lld:%lld holds no iteration both sides logged: %s",
                              (long long)o->window_lo, (long long)o->window_hi, holds);
        if (wlo != o->window_lo || whi != o->window_hi)
            snprintf(r->window_note, sizeof r->window_note, "--window %lld:%lld clipped to %lld:%lld: %s",
                     (long long)o->window_lo, (long long)o->window_hi, (long long)wlo, (long long)whi, holds);
        else snprintf(r->window_note, sizeof r->window_note, "--window %lld:%lld", (long long)wlo, (long long)whi);
    } else {
        /* shorter than the practice's warm-up: the warm-up a run names (MindSpeed's warm_up), else the first 10% */
        int64_t warm = 0;
        for (int s = 0; s < 2; s++)
            for (int k = 0; k < r->side[s].n_runs; k++)
                if (r->side[s].runs[k].warm_up > warm) warm = r->side[s].runs[k].warm_up;
        switch (tdm_ab_default_window(lo, hi, warm, &wlo, &whi)) {
        case TDM_AB_WINDOW_PRACTICE:
            if (wlo != 21 || whi != 200)
                snprintf(r->window_note, sizeof r->window_note, "the practice's window 21:200 clipped to %lld:%lld: %s",
                         (long long)wlo, (long long)whi, holds);
            else snprintf(r->window_note, sizeof r->window_note, "the practice's window 21:200");
            break;
        case TDM_AB_WINDOW_WARM_UP:
            snprintf(r->window_note, sizeof r->window_note,
                     "%s, fewer than the practice's window 21:200 needs: window %lld:%lld, after the %lld warm-up "
                     "step%s a run names",
                     holds, (long long)wlo, (long long)whi, (long long)warm, warm == 1 ? "" : "s");
            break;
        case TDM_AB_WINDOW_TENTH:
            snprintf(r->window_note, sizeof r->window_note,
                     "%s, fewer than the practice's window 21:200 needs: window %lld:%lld (the first 10%% are "
                     "warm-up)",
                     holds, (long long)wlo, (long long)whi);
            break;
        }
    }
    r->window_lo = wlo, r->window_hi = whi;
    return 0;
}

/* ---- statistics ---- */

/* The window's step times of every run one after the other (run_len[k] of run k), and the side's figures. */
static void window_stats(tdm_ab_runs_result *r, tdm_ab_runs_side *s, double **times, int64_t *n_times,
                         int64_t *run_len) {
    int64_t cap = 1;
    for (int k = 0; k < s->n_runs; k++) cap += s->runs[k].n_iters;
    double *t = tdm_xmalloc((size_t)cap * sizeof *t);
    int64_t n = 0, iters = 0, samples = 0;
    double weighted_ms = 0;
    int samples_known = 1;
    s->run_mean_ms = tdm_xcalloc((size_t)s->n_runs, sizeof *s->run_mean_ms);
    s->global_batch = 0;
    s->log_interval = -1;
    s->nan_iterations = s->skipped_iterations = -1;
    for (int k = 0; k < s->n_runs; k++) {
        const tdm_run_log *run = &s->runs[k];
        double sum = 0;
        int64_t cov = 0, lines = 0;
        for (int64_t i = 0; i < run->n_iters; i++) {
            const tdm_run_iter *x = &run->iters[i];
            if (x->nan >= 0) s->nan_iterations = (s->nan_iterations < 0 ? 0 : s->nan_iterations) + x->nan;
            if (x->skipped >= 0)
                s->skipped_iterations = (s->skipped_iterations < 0 ? 0 : s->skipped_iterations) + x->skipped;
            if (!in_window(r, x)) continue;
            t[n++] = x->elapsed_ms;
            lines++;
            sum += x->elapsed_ms * x->interval;
            cov += x->interval;
            if (x->global_batch > 0) samples += x->global_batch * x->interval;
            else samples_known = 0;
            if (k == 0) {
                if (s->global_batch == 0) s->global_batch = x->global_batch;
                else if (s->global_batch != x->global_batch) s->global_batch = -1;
                if (s->log_interval < 0) s->log_interval = x->interval;
                else if (s->log_interval != x->interval) s->log_interval = 0;
            }
        }
        s->run_mean_ms[k] = cov ? sum / (double)cov : NAN;
        run_len[k] = lines;
        weighted_ms += sum;
        iters += cov;
    }
    if (s->log_interval < 0) s->log_interval = 0;
    s->window_lines = n;
    s->window_iterations = iters;
    s->window_samples = samples_known ? samples : 0;
    s->mean_step_ms = iters ? weighted_ms / (double)iters : NAN;
    s->median_step_ms = tdm_stats_median(t, n);
    s->stddev_step_ms = tdm_stats_stddev(t, n);
    s->samples_per_s = samples_known && weighted_ms > 0 ? (double)samples / (weighted_ms / 1e3) : NAN;
    *times = t;
    *n_times = n;
}

/* Welch's t interval of the change of the mean over runs (candidate against baseline, the baseline's
 * mean taken as exact): each run's mean is one observation. */
static void runs_interval(tdm_ab_runs_result *r) {
    const tdm_ab_runs_side *A = &r->side[0], *B = &r->side[1];
    r->runs_ci.change_pct = r->runs_ci.lo_pct = r->runs_ci.hi_pct = NAN;
    r->runs_ci_df = NAN;
    if (A->n_runs < 2 || B->n_runs < 2) return;
    double ma = tdm_stats_mean(A->run_mean_ms, A->n_runs), mb = tdm_stats_mean(B->run_mean_ms, B->n_runs);
    double sa = tdm_stats_stddev(A->run_mean_ms, A->n_runs), sb = tdm_stats_stddev(B->run_mean_ms, B->n_runs);
    if (!isfinite(ma) || !isfinite(mb) || !isfinite(sa) || !isfinite(sb) || ma <= 0) return;
    double va = sa * sa / A->n_runs, vb = sb * sb / B->n_runs, se = sqrt(va + vb);
    double df = va + vb > 0 ? (va + vb) * (va + vb) / (va * va / (A->n_runs - 1) + vb * vb / (B->n_runs - 1))
                            : A->n_runs + B->n_runs - 2;
    int idf = (int)floor(df);
    double t = tdm_stats_t975(idf < 1 ? 1 : idf);
    r->runs_ci.change_pct = 100.0 * (mb - ma) / ma;
    r->runs_ci.lo_pct = 100.0 * (mb - ma - t * se) / ma;
    r->runs_ci.hi_pct = 100.0 * (mb - ma + t * se) / ma;
    r->runs_ci_df = df;
    size_t len = strlen(r->noise_sentence);
    snprintf(r->noise_sentence + len, sizeof r->noise_sentence - len,
             " Between whole runs: %+.2f%% (95%% Welch t interval over %d and %d runs [%+.2f%%, %+.2f%%]), which %s 0.",
             r->runs_ci.change_pct, A->n_runs, B->n_runs, r->runs_ci.lo_pct, r->runs_ci.hi_pct,
             tdm_stats_ci_contains_zero(&r->runs_ci) ? "contains" : "excludes");
}

static void statistics(const tdm_ab_runs_options *o, tdm_ab_runs_result *r) {
    tdm_ab_runs_side *A = &r->side[0], *B = &r->side[1];
    double *ta, *tb;
    int64_t na, nb;
    int64_t *la = tdm_xcalloc((size_t)A->n_runs, sizeof *la), *lb = tdm_xcalloc((size_t)B->n_runs, sizeof *lb);
    window_stats(r, A, &ta, &na, la);
    window_stats(r, B, &tb, &nb, lb);
    r->step_time_change_pct = tdm_stats_rel_change_pct(A->mean_step_ms, B->mean_step_ms);
    r->median_change_pct = tdm_stats_rel_change_pct(A->median_step_ms, B->median_step_ms);
    r->throughput_change_pct = tdm_stats_rel_change_pct(A->samples_per_s, B->samples_per_s);
    r->ci_block = tdm_stats_auto_block(la[0]);
    if (tdm_stats_block_bootstrap_rel_change(ta, la, A->n_runs, tb, lb, B->n_runs, 0, o->bootstrap_resamples,
                                             o->bootstrap_seed, &r->step_time_ci) == 0) {
        tdm_stats_noise_sentence(&r->step_time_ci, "mean step time", r->noise_sentence, sizeof r->noise_sentence);
    } else {
        r->step_time_ci.change_pct = r->step_time_change_pct;
        r->step_time_ci.lo_pct = r->step_time_ci.hi_pct = NAN;
        if (na == 0 || nb == 0)
            snprintf(r->noise_sentence, sizeof r->noise_sentence,
                     "No interval: the window holds no complete logged line of the %s.",
                     na == 0 ? "baseline" : "candidate");
        else
            snprintf(r->noise_sentence, sizeof r->noise_sentence,
                     "No interval: %lld and %lld logged line(s) in the window are too few to resample; log more "
                     "iterations (--log-interval 1) before drawing a conclusion.",
                     (long long)na, (long long)nb);
    }
    runs_interval(r);
    free(ta), free(tb), free(la), free(lb);
}

/* ---- precision, step by step ---- */

enum field { F_LR, F_CONSUMED, F_BATCH, F_LOSS, F_GRAD };

static int get(const tdm_run_iter *x, enum field f, double *v, tdm_run_prec *p) {
    *p = 0;
    switch (f) {
    case F_LR: *v = x->lr, *p = x->lr_prec; return !isnan(x->lr);
    case F_CONSUMED: *v = (double)x->consumed_samples; return x->consumed_samples >= 0;
    case F_BATCH: *v = (double)x->global_batch; return x->global_batch > 0;
    case F_LOSS: *v = x->lm_loss, *p = x->loss_prec; return !isnan(x->lm_loss);
    case F_GRAD: *v = x->grad_norm, *p = x->grad_norm_prec; return !isnan(x->grad_norm);
    }
    return 0;
}

/* |b - a| relative to the baseline's a (to the larger one when a is 0). */
static double rel_dev(double a, double b) {
    double d = fabs(a - b), m = fabs(a) > 0 ? fabs(a) : fabs(b);
    return m > 0 ? d / m : (d > 0 ? INFINITY : 0);
}

static void check_pair(tdm_ab_runs_check *c, int64_t it, double a, tdm_run_prec pa, double b, tdm_run_prec pb) {
    if (c->compared++ == 0) {
        char x[32], y[32];
        tdm_run_prec_describe(pa, x, sizeof x);
        tdm_run_prec_describe(pb, y, sizeof y);
        if (!pa && !pb) c->precision[0] = 0;
        else if (!strcmp(x, y)) snprintf(c->precision, sizeof c->precision, "%s", x);
        else if (pa && pb && (pa & ~0x3f) == (pb & ~0x3f)) /* "4 and 7 significant digits" */
            snprintf(c->precision, sizeof c->precision, "%d and %s", TDM_RUN_PREC_DIGITS(pa), y);
        else snprintf(c->precision, sizeof c->precision, "%s and %s", x, y);
    }
    if (tdm_run_equal_at_precision(a, pa, b, pb)) {
        c->equal++;
        return;
    }
    if (!c->first_diff) c->first_diff = it;
    double d = rel_dev(a, b);
    if (d > c->max_rel_dev || !c->max_dev_at) c->max_rel_dev = d, c->max_dev_at = it;
}

static void verdict(tdm_ab_runs_check *c) {
    c->verdict = c->compared == 0          ? TDM_AB_RUNS_ABSENT
                 : c->equal == c->compared ? TDM_AB_RUNS_EQUAL
                                           : TDM_AB_RUNS_DIFFER;
}

/* Walks the iterations of a and b in step, calling `pair` on each iteration both hold. */
#define FOR_COMMON(a, b, i, j)                                                                                         \
    for (int64_t i = 0, j = 0; i < (a)->n_iters && j < (b)->n_iters;)                                                  \
        if ((a)->iters[i].iteration < (b)->iters[j].iteration) i++;                                                    \
        else if ((a)->iters[i].iteration > (b)->iters[j].iteration) j++;                                               \
        else                                                                                                           \
            for (int once_ = 1; once_; once_ = 0, i++, j++)

static void compare_field(const tdm_run_log *a, const tdm_run_log *b, enum field f, tdm_ab_runs_check *c) {
    FOR_COMMON(a, b, i, j) {
        double x, y;
        tdm_run_prec px, py;
        int ha = get(&a->iters[i], f, &x, &px), hb = get(&b->iters[j], f, &y, &py);
        if (ha && hb) check_pair(c, a->iters[i].iteration, x, px, y, py);
        else if (ha != hb) c->one_side_only++;
    }
    verdict(c);
}

static void compare_other_losses(const tdm_run_log *a, const tdm_run_log *b, tdm_ab_runs_check *c) {
    for (int ka = 0; ka < a->n_loss_names; ka++)
        for (int kb = 0; kb < b->n_loss_names; kb++) {
            if (strcmp(a->loss_names[ka], b->loss_names[kb])) continue;
            FOR_COMMON(a, b, i, j) {
                double x = a->iters[i].other_loss[ka], y = b->iters[j].other_loss[kb];
                if (!isnan(x) && !isnan(y)) check_pair(c, a->iters[i].iteration, x, 0, y, 0);
                else if (isnan(x) != isnan(y)) c->one_side_only++;
            }
        }
    verdict(c);
}

static void compare_validation(const tdm_run_log *a, const tdm_run_log *b, tdm_ab_runs_check *c) {
    for (int64_t i = 0; i < a->n_valid; i++)
        for (int64_t j = 0; j < b->n_valid; j++) {
            const tdm_run_valid *x = &a->valid[i], *y = &b->valid[j];
            if (x->iteration != y->iteration || strcmp(x->set, y->set) || isnan(x->lm_loss) || isnan(y->lm_loss))
                continue;
            check_pair(c, x->iteration, x->lm_loss, x->loss_prec, y->lm_loss, y->loss_prec);
            break;
        }
    verdict(c);
}

/* Each side's runs against its first: losses and grad norms equal at the printed precision. */
static int repeats_equal(const tdm_ab_runs_side *s) {
    for (int k = 1; k < s->n_runs; k++) {
        tdm_ab_runs_check l, g;
        memset(&l, 0, sizeof l), memset(&g, 0, sizeof g);
        compare_field(&s->runs[0], &s->runs[k], F_LOSS, &l);
        compare_field(&s->runs[0], &s->runs[k], F_GRAD, &g);
        if (l.verdict == TDM_AB_RUNS_DIFFER || g.verdict == TDM_AB_RUNS_DIFFER) return 0;
    }
    return 1;
}

static void precision(tdm_ab_runs_result *r) {
    const tdm_run_log *a = &r->side[0].runs[0], *b = &r->side[1].runs[0];
    static const char *const names[TDM_AB_RUNS_CHECKS] = {"learning rate", "consumed samples", "global batch size",
                                                          "loss",          "grad norm",        "validation loss",
                                                          "other losses"};
    for (int k = 0; k < TDM_AB_RUNS_CHECKS; k++)
        memset(&r->checks[k], 0, sizeof r->checks[k]), r->checks[k].name = names[k];
    compare_field(a, b, F_LR, &r->checks[0]);
    compare_field(a, b, F_CONSUMED, &r->checks[1]);
    compare_field(a, b, F_BATCH, &r->checks[2]);
    compare_field(a, b, F_LOSS, &r->checks[3]);
    compare_field(a, b, F_GRAD, &r->checks[4]);
    compare_validation(a, b, &r->checks[5]);
    compare_other_losses(a, b, &r->checks[6]);
    r->common_steps = 0;
    FOR_COMMON(a, b, i, j) r->common_steps++;
    r->all_finite = 1;
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < r->side[s].n_runs; k++)
            for (int64_t i = 0; i < r->side[s].runs[k].n_iters; i++) {
                const tdm_run_iter *x = &r->side[s].runs[k].iters[i];
                if ((!isnan(x->lm_loss) && !isfinite(x->lm_loss)) ||
                    (!isnan(x->grad_norm) && !isfinite(x->grad_norm)) || x->nan > 0)
                    r->all_finite = 0;
            }
    r->repeats_equal = repeats_equal(&r->side[0]) && repeats_equal(&r->side[1]);
}

/* ---- the configuration diff ---- */

static void norm(const char *name, char *out, size_t cap) {
    while (*name == '-') name++;
    size_t i = 0;
    for (; name[i] && i + 1 < cap; i++) out[i] = name[i] == '-' ? '_' : name[i];
    out[i] = 0;
}

/* Where each run wrote its output: not part of the configuration. */
static int output_location(const char *n) {
    static const char *const keys[] = {"save",          "tensorboard_dir", "wandb_save_dir", "wandb_exp_name",
                                       "wandb_project", "data_cache_path", "run_dir"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        if (!strcmp(n, keys[k])) return 1;
    return 0;
}

static const tdm_run_kv *find_kv(const tdm_run_kv *kv, int n, const char *normed) {
    char b[256];
    for (int i = n - 1; i >= 0; i--) {
        norm(kv[i].key, b, sizeof b);
        if (!strcmp(b, normed)) return &kv[i];
    }
    return NULL;
}

/* Appends "name: a -> b" / "name = v" lines for two key/value lists (prefix "env " for ENV_VARS). */
static void diff_kv(tdm_ab_runs_result *r, const tdm_run_kv *a, int na, const tdm_run_kv *b, int nb,
                    const char *prefix) {
    char n[256];
    for (int pass = 0; pass < 2; pass++) {
        const tdm_run_kv *src = pass ? b : a, *other = pass ? a : b;
        int ns = pass ? nb : na, no = pass ? na : nb;
        for (int i = 0; i < ns; i++) {
            norm(src[i].key, n, sizeof n);
            const tdm_run_kv *mine = find_kv(src, ns, n), *theirs = find_kv(other, no, n);
            if (mine != &src[i]) continue; /* a repeated key: its last value counts */
            if (pass && theirs) continue;  /* both have it: done in the first pass */
            const char *va = pass ? "(absent)" : src[i].value, *vb = pass     ? src[i].value
                                                                     : theirs ? theirs->value
                                                                              : "(absent)";
            if (output_location(n)) push(&r->skipped_lines, &r->n_skipped, "%s%s: %s | %s", prefix, src[i].key, va, vb);
            else if (strcmp(va, vb)) push(&r->diff_lines, &r->n_diff, "%s%s: %s -> %s", prefix, src[i].key, va, vb);
            else push(&r->same_lines, &r->n_same, "%s%s = %s", prefix, src[i].key, va);
        }
    }
}

/* The "name=value" fields of a DDP config line, at the top level of its parentheses. */
static int ddp_fields(const char *line, char names[][64], char values[][128], int cap) {
    const char *p = strchr(line, '(');
    if (!p) return 0;
    int n = 0;
    for (p++; *p && n < cap;) {
        while (*p == ' ' || *p == ',') p++;
        const char *eq = p;
        while (*eq && *eq != '=' && *eq != ')' && *eq != ',') eq++;
        if (*eq != '=') break;
        const char *v = eq + 1, *e = v;
        int depth = 0;
        for (; *e && (depth > 0 || (*e != ',' && *e != ')')); e++)
            depth += (*e == '(' || *e == '[' || *e == '{') - (*e == ')' || *e == ']' || *e == '}');
        snprintf(names[n], 64, "%.*s", (int)(eq - p < 63 ? eq - p : 63), p);
        snprintf(values[n], 128, "%.*s", (int)(e - v < 127 ? e - v : 127), v);
        n++;
        p = e;
        if (*p == ')') break;
    }
    return n;
}

static void config_diff(tdm_ab_runs_result *r) {
    const tdm_run_log *a = &r->side[0].runs[0], *b = &r->side[1].runs[0];
    r->args_known = a->n_args > 0 && b->n_args > 0;
    if (a->n_args || b->n_args) diff_kv(r, a->args, a->n_args, b->args, b->n_args, "");
    if (a->n_env || b->n_env) diff_kv(r, a->env, a->n_env, b->env, b->n_env, "env ");
    /* the DDP config lines: each differing argument they show must show that side's value (ab.h); a field
     * that differs and is no argument is a difference of its own */
    r->ddp_line_confirms = -1;
    if (!a->ddp_config[0] || !b->ddp_config[0]) return;
    enum { MAXF = 64 };
    char na[MAXF][64], va[MAXF][128], nb[MAXF][64], vb[MAXF][128];
    int fa = ddp_fields(a->ddp_config, na, va, MAXF), fb = ddp_fields(b->ddp_config, nb, vb, MAXF);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < (pass ? fb : fa); i++) {
            const char *name = pass ? nb[i] : na[i], *mine = pass ? vb[i] : va[i], *theirs = "(absent)";
            for (int j = 0; j < (pass ? fa : fb); j++)
                if (!strcmp(name, pass ? na[j] : nb[j])) theirs = pass ? va[j] : vb[j];
            if (pass && strcmp(theirs, "(absent)")) continue; /* in both: the first pass did it */
            const char *x = pass ? theirs : mine, *y = pass ? mine : theirs;
            const char *ax = tdm_run_log_arg(a, name), *bx = tdm_run_log_arg(b, name);
            if (ax && bx && strcmp(ax, bx)) {
                int match = !strcmp(ax, x) && !strcmp(bx, y);
                if (r->ddp_line_confirms != 0) r->ddp_line_confirms = match;
            } else if (strcmp(x, y)) {
                push(&r->diff_lines, &r->n_diff, "DistributedDataParallelConfig.%s: %s -> %s", name, x, y);
            }
        }
}

/* ---- warnings and what logs cannot tell ---- */

static int diff_names(const tdm_ab_runs_result *r, const char *const *keys, size_t nk, char *out, size_t cap) {
    int n = 0;
    out[0] = 0;
    for (int i = 0; i < r->n_diff; i++) {
        char name[256], k[256];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(r->diff_lines[i], ":"), r->diff_lines[i]);
        norm(name, k, sizeof k);
        for (size_t j = 0; j < nk; j++)
            if (!strcmp(k, keys[j])) {
                size_t l = strlen(out);
                if (l + 8 < cap) snprintf(out + l, cap - l, "%s%s", n ? "; " : "", r->diff_lines[i]);
                n++;
            }
    }
    return n;
}

/* "11 from 1 to 50, every 5": the gap all but at most one of the steps share */
static void describe_steps(const tdm_run_log *run, char *out, size_t cap) {
    int64_t n = run->n_iters, first = n ? run->iters[0].iteration : 0, last = n ? run->iters[n - 1].iteration : 0;
    int64_t gap = 0, agree = 0;
    for (int64_t i = 1; i < n && i <= 3; i++) { /* the common gap is among the first three when all but one share it */
        int64_t g = run->iters[i].iteration - run->iters[i - 1].iteration, k = 0;
        for (int64_t j = 1; j < n; j++) k += run->iters[j].iteration - run->iters[j - 1].iteration == g;
        if (k > agree) agree = k, gap = g;
    }
    if (n > 2 && agree >= n - 2)
        snprintf(out, cap, "%lld from %lld to %lld, every %lld", (long long)n, (long long)first, (long long)last,
                 (long long)gap);
    else snprintf(out, cap, "%lld from %lld to %lld", (long long)n, (long long)first, (long long)last);
}

/* Longer than most: one check after the other, each with its own sentence. */
static void warnings(tdm_ab_runs_result *r) {
    const tdm_ab_runs_side *A = &r->side[0], *B = &r->side[1];
    const tdm_run_log *a = &A->runs[0], *b = &B->runs[0];
    char list[1200];
    static const char *const model_keys[] = {
        "num_layers", "hidden_size",       "num_attention_heads", "ffn_hidden_size", "num_query_groups", "kv_channels",
        "seq_length", "padded_vocab_size", "vocab_size",          "num_experts",     "model_name",       "mm_model"};
    static const char *const layout_keys[] = {"world_size",
                                              "data_parallel_size",
                                              "tensor_model_parallel_size",
                                              "pipeline_model_parallel_size",
                                              "context_parallel_size",
                                              "expert_model_parallel_size",
                                              "nproc_per_node",
                                              "nnodes"};
    if (diff_names(r, model_keys, sizeof model_keys / sizeof *model_keys, list, sizeof list))
        push(&r->warnings, &r->n_warnings, "The two sides train different models (%s): this is not an A/B of one flag.",
             list);
    if (diff_names(r, layout_keys, sizeof layout_keys / sizeof *layout_keys, list, sizeof list))
        push(&r->warnings, &r->n_warnings,
             "The two sides run on different world sizes or parallel layouts (%s): their step times are of "
             "different work per rank.",
             list);
    if (A->global_batch > 0 && B->global_batch > 0 && A->global_batch != B->global_batch)
        push(&r->warnings, &r->n_warnings,
             "The two sides have different global batches (%lld and %lld samples): a step is not the same work; "
             "compare samples/s, not step time.",
             (long long)A->global_batch, (long long)B->global_batch);
    if (r->n_diff > 1 && r->args_known)
        push(&r->warnings, &r->n_warnings, "%d settings differ: a change cannot be put down to one of them.",
             r->n_diff);
    if (r->n_diff == 0 && r->args_known)
        push(&r->warnings, &r->n_warnings,
             "No argument differs between the two sides (an A/A comparison: any change "
             "is noise).");
    /* the sides log different iterations: aligned by iteration, and said so */
    int64_t only_a = a->n_iters - r->common_steps, only_b = b->n_iters - r->common_steps;
    if (only_a || only_b) {
        char sa[96], sb[96];
        describe_steps(a, sa, sizeof sa);
        describe_steps(b, sb, sizeof sb);
        push(&r->warnings, &r->n_warnings,
             "The sides log different iterations (baseline %s; candidate %s): the precision rows compare the %lld "
             "both logged.",
             sa, sb, (long long)r->common_steps);
    }
    if (A->log_interval > 0 && B->log_interval > 0 && A->log_interval != B->log_interval)
        push(&r->warnings, &r->n_warnings,
             "The baseline's step times are means over %d iterations, the candidate's over %d: their spread is not "
             "comparable.",
             A->log_interval, B->log_interval);
    const tdm_ab_runs_check *loss = &r->checks[3];
    if (loss->verdict == TDM_AB_RUNS_DIFFER && loss->max_rel_dev > 0.01)
        push(&r->warnings, &r->n_warnings,
             "The losses differ by up to %.2g%% (iteration %lld): more than the 1%% within which MindSpeed-MM's CI "
             "holds runs of one configuration; check that both sides trained the same model on the same data from "
             "the same seed.",
             100 * loss->max_rel_dev, (long long)loss->max_dev_at);
    if (!r->repeats_equal)
        push(&r->warnings, &r->n_warnings,
             "The runs of a side differ from its first run in loss or grad norm: the "
             "repeats did not train alike.");
    /* repeats of one side with other arguments than its first run */
    for (int s = 0; s < 2; s++)
        for (int k = 1; k < r->side[s].n_runs; k++) {
            tdm_ab_runs_result tmp;
            memset(&tmp, 0, sizeof tmp);
            const tdm_run_log *x = &r->side[s].runs[0], *y = &r->side[s].runs[k];
            diff_kv(&tmp, x->args, x->n_args, y->args, y->n_args, "");
            if (tmp.n_diff)
                push(&r->warnings, &r->n_warnings,
                     "%s run %d (%s) differs from run 1 in %d argument%s (%s%s): the "
                     "repeats are not one configuration.",
                     r->side[s].label, k + 1, y->path, tmp.n_diff, tmp.n_diff == 1 ? "" : "s", tmp.diff_lines[0],
                     tmp.n_diff > 1 ? "; ..." : "");
            for (int i = 0; i < tmp.n_diff; i++) free(tmp.diff_lines[i]);
            for (int i = 0; i < tmp.n_same; i++) free(tmp.same_lines[i]);
            for (int i = 0; i < tmp.n_skipped; i++) free(tmp.skipped_lines[i]);
            free(tmp.diff_lines), free(tmp.same_lines), free(tmp.skipped_lines);
        }
    /* the traces given with the runs */
    int ta = A->trace_ranks > 0, tb = B->trace_ranks > 0;
    if (ta != tb)
        push(&r->warnings, &r->n_warnings,
             "Only the %s's runs come with profiler traces: the communication rows "
             "show one side.",
             ta ? "baseline" : "candidate");
    for (int s = 0; s < 2; s++) {
        const tdm_ab_runs_side *x = &r->side[s];
        if (x->traced_runs > 0 && x->traced_runs < x->n_runs)
            push(&r->warnings, &r->n_warnings,
                 "%d of the %s's %d runs come with traces: its communication rows are "
                 "theirs alone.",
                 x->traced_runs, x->label, x->n_runs);
        for (int i = 0; i < x->n_trace_notes; i++)
            push(&r->warnings, &r->n_warnings, "%s traces: %s%s", x->label, x->trace_notes[i],
                 x->trace_notes[i][0] && x->trace_notes[i][strlen(x->trace_notes[i]) - 1] == '.' ? "" : ".");
    }
    if (A->trace_world_size > 0 && B->trace_world_size > 0 && A->trace_world_size != B->trace_world_size)
        push(&r->warnings, &r->n_warnings,
             "The traces state different world sizes (%lld and %lld ranks): their communication is of different "
             "collectives.",
             (long long)A->trace_world_size, (long long)B->trace_world_size);
    /* each run's own: resumed, cut, crashed, ... */
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < r->side[s].n_runs; k++) {
            const tdm_run_log *x = &r->side[s].runs[k];
            for (int i = 0; i < x->n_warnings; i++)
                push(&r->warnings, &r->n_warnings, "%s run %d (%s): %s.", r->side[s].label, k + 1, x->path,
                     x->warnings[i]);
        }
}

static void limits(tdm_ab_runs_result *r) {
    const tdm_ab_runs_check *loss = &r->checks[3];
    if (loss->verdict == TDM_AB_RUNS_EQUAL)
        push(&r->limits, &r->n_limits,
             "Loss printed to %s: equal at that precision; bitwise equality cannot be "
             "checked from logs.",
             loss->precision[0] ? loss->precision : "its stored digits");
    else if (loss->verdict == TDM_AB_RUNS_DIFFER)
        push(&r->limits, &r->n_limits,
             "Loss printed to %s: a deviation below the last printed digit cannot be seen, "
             "so the steps called equal may still differ in their bits.",
             loss->precision[0] ? loss->precision : "its stored digits");
    else
        push(&r->limits, &r->n_limits,
             "The two sides' first runs log no loss at a common iteration: the losses "
             "cannot be compared.");
    push(&r->limits, &r->n_limits,
         "Logs carry no fingerprint of the batches: equal consumed samples and equal early "
         "losses are the only evidence that both sides read the same data in the same "
         "order.");
    int golden = 0, logs = 0, baseline = 0, traced = 0;
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < r->side[s].n_runs; k++) {
            tdm_run_format f = r->side[s].runs[k].format;
            golden |= f == TDM_RUN_MEGATRON_GOLDEN, logs |= f == TDM_RUN_MEGATRON_LOG,
                baseline |= f == TDM_RUN_MINDSPEED_BASELINE;
            traced |= f == TDM_RUN_PROFILER_TRACES;
        }
    if (logs)
        push(&r->limits, &r->n_limits,
             "A log's step time is the elapsed time per iteration the logging rank measured, "
             "averaged over each line's --log-interval iterations: the slowest rank's step "
             "and the spread inside a line are not in the log.");
    if (golden)
        push(&r->limits, &r->n_limits,
             "Golden values keep one iteration's time every few steps, and no learning "
             "rate, consumed samples or grad norm.");
    if (baseline)
        push(&r->limits, &r->n_limits,
             "A MindSpeed-MM baseline keeps a loss and a time per step, and no learning "
             "rate, batch or grad norm.");
    if (traced)
        push(&r->limits, &r->n_limits,
             "A run given as profiler traces alone has the profiled steps only: each step's "
             "time is the slowest traced rank's ProfilerStep, with no loss, learning rate "
             "or batch to compare.");
    if (r->side[0].trace_ranks > 0 || r->side[1].trace_ranks > 0)
        push(&r->limits, &r->n_limits,
             "The communication rows are the traces' profiled steps, a mean over every "
             "rank traced (%lld and %lld rank-steps): those steps need not lie in the "
             "window, and CPU time is not in them.",
             (long long)r->side[0].trace_steps, (long long)r->side[1].trace_steps);
    else
        push(&r->limits, &r->n_limits,
             "Hidden and exposed communication, compute and CPU time are not in logs: give "
             "each run's profiler traces with it (LOG,TRACES; docs/analyze.md).");
    if (r->side[0].n_runs > 1 || r->side[1].n_runs > 1)
        push(&r->limits, &r->n_limits,
             "Whether the runs ran interleaved, or on the same machines, is not in the logs: "
             "the interval between runs treats them as independent.");
    else
        push(&r->limits, &r->n_limits,
             "One run per side: the interval sees the noise within each run, not how much "
             "whole runs differ (give --baseline-run and --candidate-run 2 or more runs "
             "each).");
}

int tdm_ab_runs_compute(const tdm_ab_runs_options *o, tdm_ab_runs_result *r, tdm_error *err) {
    for (int s = 0; s < 2; s++) {
        if (r->side[s].n_runs < 1) return tdm_errorf(err, "the %s has no run", r->side[s].label);
        held(&r->side[s]);
    }
    if (choose_window(o, r, err) != 0) return -1;
    statistics(o, r);
    precision(r);
    config_diff(r);
    const char *wa = tdm_run_log_arg(&r->side[0].runs[0], "world_size"),
               *wb = tdm_run_log_arg(&r->side[1].runs[0], "world_size");
    r->world_size = wa && wb && !strcmp(wa, wb) ? atoi(wa) : 0;
    warnings(r);
    limits(r);
    return 0;
}

int tdm_ab_runs(const tdm_ab_runs_options *o, tdm_ab_runs_result *r, tdm_strbuf *table, tdm_error *err) {
    memset(r, 0, sizeof *r);
    static const char *const labels[2] = {"baseline", "candidate"};
    for (int s = 0; s < 2; s++) {
        tdm_ab_runs_side *side = &r->side[s];
        side->label = labels[s];
        if (o->n_runs[s] < 1)
            return tdm_errorf(err, "--%s-run: expected one or more runs (logs, golden values or test-case directories)",
                              s ? "candidate" : "baseline");
        side->runs = tdm_xcalloc((size_t)o->n_runs[s], sizeof *side->runs);
        side->trace_paths = tdm_xcalloc((size_t)o->n_runs[s], sizeof *side->trace_paths);
        side->trace_world_size = -1;
        for (int k = 0; k < o->n_runs[s]; k++) {
            side->n_runs = k + 1;
            char log[4096], traces[4096];
            int required;
            if (tdm_ab_runs_split(o->runs[s][k], log, sizeof log, traces, sizeof traces, &required, err) != 0)
                return tdm_error_prefix(err, "--%s-run", s ? "candidate" : "baseline");
            if (tdm_run_log_read(log, &side->runs[k], err) != 0) { /* no log: profiler traces alone? */
                tdm_run_log_free(&side->runs[k]);
                if (traces[0] || !tdm_ab_runs_log_from_traces(log, &side->runs[k]))
                    return tdm_error_prefix(err, "--%s-run", s ? "candidate" : "baseline");
                snprintf(traces, sizeof traces, "%s", log);
                required = 1;
            }
            if (traces[0] && tdm_ab_runs_read_traces(side, k, traces, required, err) != 0)
                return tdm_error_prefix(err, "--%s-run", s ? "candidate" : "baseline");
        }
        tdm_ab_runs_finish_traces(side);
    }
    if (tdm_ab_runs_compute(o, r, err) != 0) return -1;
    if (tdm_mkdirs(o->out, err) != 0) return -1;
    if (tdm_ab_runs_write_report(o, r, err) != 0) return -1;
    if (table) tdm_ab_runs_format_table(o, r, table);
    return 0;
}

void tdm_ab_runs_result_free(tdm_ab_runs_result *r) {
    for (int s = 0; s < 2; s++) {
        for (int k = 0; k < r->side[s].n_runs; k++) tdm_run_log_free(&r->side[s].runs[k]);
        free(r->side[s].runs);
        free(r->side[s].run_mean_ms);
        for (int k = 0; k < r->side[s].n_runs && r->side[s].trace_paths; k++) free(r->side[s].trace_paths[k]);
        free(r->side[s].trace_paths);
        for (int i = 0; i < r->side[s].n_trace_notes; i++) free(r->side[s].trace_notes[i]);
        free(r->side[s].trace_notes);
    }
    char **lists[] = {r->diff_lines, r->same_lines, r->skipped_lines, r->warnings, r->limits};
    int ns[] = {r->n_diff, r->n_same, r->n_skipped, r->n_warnings, r->n_limits};
    for (int l = 0; l < 5; l++) {
        for (int i = 0; i < ns[l]; i++) free(lists[l][i]);
        free(lists[l]);
    }
    memset(r, 0, sizeof *r);
}
