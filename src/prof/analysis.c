/* analysis.c - interval arithmetic, per-step overlap analysis, operator summary. */
#include "prof/analysis.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "prof/prof.h"

static int cmp_interval(const void *a, const void *b) {
    const tdm_prof_interval *x = a, *y = b;
    if (x->t0 != y->t0) return x->t0 < y->t0 ? -1 : 1;
    return (x->t1 > y->t1) - (x->t1 < y->t1);
}

int64_t tdm_prof_intervals_union(tdm_prof_interval *iv, int64_t n) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (iv[i].t1 > iv[i].t0) iv[m++] = iv[i];
    qsort(iv, (size_t)m, sizeof *iv, cmp_interval);
    int64_t k = 0;
    for (int64_t i = 0; i < m; i++) {
        if (k > 0 && iv[i].t0 <= iv[k - 1].t1) {
            if (iv[i].t1 > iv[k - 1].t1) iv[k - 1].t1 = iv[i].t1;
        } else {
            iv[k++] = iv[i];
        }
    }
    return k;
}

double tdm_prof_intervals_length(const tdm_prof_interval *u, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += u[i].t1 - u[i].t0;
    return s;
}

double tdm_prof_intervals_intersect_length(const tdm_prof_interval *a, int64_t na, const tdm_prof_interval *b,
                                           int64_t nb) {
    double s = 0;
    int64_t i = 0, j = 0;
    while (i < na && j < nb) { /* two-pointer sweep over sorted disjoint lists */
        double lo = a[i].t0 > b[j].t0 ? a[i].t0 : b[j].t0;
        double hi = a[i].t1 < b[j].t1 ? a[i].t1 : b[j].t1;
        if (hi > lo) s += hi - lo;
        if (a[i].t1 < b[j].t1) i++;
        else j++;
    }
    return s;
}

int64_t tdm_prof_intervals_subtract(const tdm_prof_interval *a, int64_t na, const tdm_prof_interval *b, int64_t nb,
                                    tdm_prof_interval *out) {
    int64_t k = 0, j = 0;
    for (int64_t i = 0; i < na; i++) {
        double cur = a[i].t0, end = a[i].t1;
        while (j < nb && b[j].t1 <= cur) j++;
        int64_t jj = j;
        while (jj < nb && b[jj].t0 < end) {
            if (b[jj].t0 > cur) out[k++] = (tdm_prof_interval){cur, b[jj].t0};
            if (b[jj].t1 > cur) cur = b[jj].t1;
            if (cur >= end) break;
            jj++;
        }
        if (cur < end) out[k++] = (tdm_prof_interval){cur, end};
    }
    return k;
}

int64_t tdm_prof_intervals_clip(tdm_prof_interval *u, int64_t n, double lo, double hi) {
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = u[i].t0 > lo ? u[i].t0 : lo, b = u[i].t1 < hi ? u[i].t1 : hi;
        if (b > a) u[k++] = (tdm_prof_interval){a, b};
    }
    return k;
}

tdm_prof_thread_kind tdm_prof_thread_kind_of(const char *name) {
    if (!strncmp(name, "comm", 4)) return TDM_PROF_THREAD_COMM;
    if (!strncmp(name, "loader", 6)) return TDM_PROF_THREAD_LOADER;
    return TDM_PROF_THREAD_COMPUTE;
}

static int is_step_envelope(const tdm_prof_rec *r) {
    return r->cat == TDM_PROF_PHASE && r->thread_kind == TDM_PROF_THREAD_COMPUTE && !r->instant &&
           !strcmp(r->name, "step");
}

/* The union of the records of one rank that `want` selects, clipped to [lo, hi). */
typedef int (*rec_filter)(const tdm_prof_rec *r);
static int64_t gather(const tdm_prof_rec *recs, int64_t n, int32_t rank, rec_filter want, double lo, double hi,
                      tdm_prof_interval *iv) {
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        const tdm_prof_rec *r = &recs[i];
        if (r->rank != rank || r->instant || !want(r)) continue;
        if (r->t1_us <= lo || r->t0_us >= hi) continue;
        iv[k++] = (tdm_prof_interval){r->t0_us, r->t1_us};
    }
    k = tdm_prof_intervals_union(iv, k);
    return tdm_prof_intervals_clip(iv, k, lo, hi);
}

static int on_compute(const tdm_prof_rec *r) { return r->thread_kind == TDM_PROF_THREAD_COMPUTE; }
static int f_compute(const tdm_prof_rec *r) {
    return on_compute(r) && (r->cat == TDM_PROF_LAYER || r->cat == TDM_PROF_KERNEL ||
                             (r->cat == TDM_PROF_PHASE && strcmp(r->name, "step") != 0));
}
/* Blocked, not computing: waits and data waits. A COMM record on the compute thread (the
 * inline progress mode finishes collectives there) spans the time the collective was in
 * flight while the thread went on computing, so it is not subtracted: the blocking part
 * of any collective is recorded separately as a WAIT. */
static int f_not_computing(const tdm_prof_rec *r) {
    return on_compute(r) && (r->cat == TDM_PROF_WAIT || r->cat == TDM_PROF_DATA);
}
static int f_comm(const tdm_prof_rec *r) { return r->cat == TDM_PROF_COMM; }
static int f_data_wait(const tdm_prof_rec *r) { return on_compute(r) && r->cat == TDM_PROF_DATA; }
static int f_wait(const tdm_prof_rec *r) { return on_compute(r) && r->cat == TDM_PROF_WAIT; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The part of the step's communication that cannot overlap: the gradient collective that
 * started last (the bucket holding the first layers, whose gradients are ready only when the
 * backward ends), or the last-starting collective when none is named "grad ..."; of several
 * started at the same instant, the one that ended last. Only its own transfer counts, not
 * the time it shared the link with collectives posted before it (all buckets at once, as
 * without overlap, or onto a backlog): the link is taken as shared equally by the k
 * collectives in flight, so each instant of its record counts 1/k. (Its whole record would
 * count the others' transfers too; only the instants after the others ended would miss the
 * part it moved beside them, and completions are seen when the thread polls, often several
 * at once.) In µs, clipped to the step; 0 when the step has no collective. `scratch` needs
 * room for 2n times. */
static double last_grad_comm_us(const tdm_prof_rec *recs, int64_t n, int32_t rank, double lo, double hi,
                                double *scratch) {
    const tdm_prof_rec *last = NULL;
    int last_grad = 0;
    for (int64_t i = 0; i < n; i++) {
        const tdm_prof_rec *r = &recs[i];
        if (r->rank != rank || r->instant || !f_comm(r) || r->t1_us <= lo || r->t0_us >= hi) continue;
        int grad = !strncmp(r->name, "grad", 4);
        if (!last || grad > last_grad ||
            (grad == last_grad && (r->t0_us > last->t0_us || (r->t0_us == last->t0_us && r->t1_us > last->t1_us))))
            last = r, last_grad = grad;
    }
    if (!last) return 0;
    double a = last->t0_us > lo ? last->t0_us : lo, b = last->t1_us < hi ? last->t1_us : hi;
    int64_t nt = 0; /* every start and end inside (a, b) splits it into pieces of constant k */
    scratch[nt++] = a;
    scratch[nt++] = b;
    for (int64_t i = 0; i < n; i++) {
        const tdm_prof_rec *r = &recs[i];
        if (r->rank != rank || r->instant || !f_comm(r)) continue;
        if (r->t0_us > a && r->t0_us < b) scratch[nt++] = r->t0_us;
        if (r->t1_us > a && r->t1_us < b) scratch[nt++] = r->t1_us;
    }
    qsort(scratch, (size_t)nt, sizeof *scratch, cmp_double);
    double own = 0;
    for (int64_t p = 0; p + 1 < nt; p++) {
        double t0 = scratch[p], t1 = scratch[p + 1], mid = 0.5 * (t0 + t1);
        if (t1 <= t0) continue;
        int k = 0;
        for (int64_t i = 0; i < n; i++) {
            const tdm_prof_rec *r = &recs[i];
            if (r->rank == rank && !r->instant && f_comm(r) && r->t0_us <= mid && r->t1_us > mid) k++;
        }
        own += (t1 - t0) / (k > 0 ? k : 1);
    }
    return own;
}

static int f_grad_comm(const tdm_prof_rec *r) { return f_comm(r) && !strncmp(r->name, "grad", 4); }
static int f_param_comm(const tdm_prof_rec *r) { return f_comm(r) && !strncmp(r->name, "param", 5); }

/* The window in which a kind of collective could run behind compute (see analysis.h):
 * from its first post in [lo, hi) (lo when one is already in flight at lo) to its last post
 * (to_last_post) or to the end of its last collective. Returns 0 when the step has none. */
static int comm_window(const tdm_prof_rec *recs, int64_t n, int32_t rank, rec_filter kind, const char *post_mark,
                       int to_last_post, double lo, double hi, double *w0, double *w1) {
    double first_post = INFINITY, last_post = -INFINITY;                         /* the MARK instants */
    double first_start = INFINITY, last_start = -INFINITY, last_end = -INFINITY; /* the COMM records */
    int in_flight_at_lo = 0, any = 0;
    for (int64_t i = 0; i < n; i++) {
        const tdm_prof_rec *r = &recs[i];
        if (r->rank != rank) continue;
        if (r->instant) {
            if (r->cat != TDM_PROF_MARK || strcmp(r->name, post_mark) != 0 || r->t0_us < lo || r->t0_us >= hi) continue;
            if (r->t0_us < first_post) first_post = r->t0_us;
            if (r->t0_us > last_post) last_post = r->t0_us;
        } else if (kind(r) && r->t1_us > lo && r->t0_us < hi) {
            any = 1;
            if (r->t0_us <= lo) in_flight_at_lo = 1;
            if (r->t0_us < first_start) first_start = r->t0_us;
            if (r->t0_us > last_start) last_start = r->t0_us;
            if (r->t1_us > last_end) last_end = r->t1_us;
        }
    }
    if (!any) return 0;
    *w0 = in_flight_at_lo ? lo : isfinite(first_post) ? first_post : first_start;
    if (to_last_post) *w1 = isfinite(last_post) ? last_post : last_start;
    else *w1 = last_end;
    if (*w0 < lo) *w0 = lo;
    if (*w1 > hi) *w1 = hi;
    return *w1 > *w0;
}

/* How much of one kind of collective its schedule lets hide, in µs: min(its busy time in
 * [lo, hi) minus `unhideable_us`, the compute union c[0..nc) inside its window); 0 when the
 * step has none. `scratch` needs room for n + 1 intervals. */
static double sched_hideable_us(const tdm_prof_rec *recs, int64_t n, int32_t rank, rec_filter kind,
                                const char *post_mark, int to_last_post, double unhideable_us, double lo, double hi,
                                const tdm_prof_interval *c, int64_t nc, tdm_prof_interval *scratch) {
    tdm_prof_interval w;
    if (!comm_window(recs, n, rank, kind, post_mark, to_last_post, lo, hi, &w.t0, &w.t1)) return 0;
    double busy = tdm_prof_intervals_length(scratch, gather(recs, n, rank, kind, lo, hi, scratch)) - unhideable_us;
    double behind = tdm_prof_intervals_intersect_length(c, nc, &w, 1);
    return busy < behind ? busy : behind;
}

/* hidden / sched hideable, NaN when the schedule lets less than 5% of the step overlap: a
 * schedule without overlap still posts its buckets between the NaN checks of the next ones
 * (about 1% of a small step), and a ratio of those fractions of a millisecond would read
 * as "95% of what the schedule allows" for a run that overlaps nothing. Works on sums as
 * well as on one step. */
static double sched_efficiency(double hidden, double hideable, double step) {
    return hideable > 0 && hideable >= 0.05 * step ? hidden / hideable : NAN;
}

/* hidden / hideable, NaN when what could hide apart from the last bucket (free) is under 5% of
 * the communication: with everything in the last bucket, the bit of it that happened to
 * overlap raises hideable to hidden and the ratio would read 100% for a run that hid nothing
 * it could. Works on sums as well as on one step. */
static double overlap_efficiency(double hidden, double hideable, double free_hideable, double comm) {
    return hideable > 0 && free_hideable > 0 && free_hideable >= 0.05 * comm ? hidden / hideable : NAN;
}

int64_t tdm_prof_analyze_rank(const tdm_prof_rec *recs, int64_t n, int32_t rank, tdm_prof_step_stats *out,
                              int64_t cap) {
    tdm_prof_interval *a = tdm_xmalloc((size_t)(n + 1) * sizeof *a);
    tdm_prof_interval *b = tdm_xmalloc((size_t)(n + 1) * sizeof *b);
    tdm_prof_interval *c = tdm_xmalloc((size_t)(2 * n + 2) * sizeof *c);
    double *ts = tdm_xmalloc((size_t)(2 * n + 2) * sizeof *ts);
    int64_t n_steps = 0;
    for (int64_t i = 0; i < n; i++) {
        const tdm_prof_rec *env = &recs[i];
        if (env->rank != rank || !is_step_envelope(env)) continue;
        double lo = env->t0_us, hi = env->t1_us;
        tdm_prof_step_stats s = {.rank = rank, .step = env->arg, .step_ms = (hi - lo) / 1e3};
        int64_t na = gather(recs, n, rank, f_compute, lo, hi, a);
        int64_t nb = gather(recs, n, rank, f_not_computing, lo, hi, b);
        int64_t nc = tdm_prof_intervals_subtract(a, na, b, nb, c); /* compute busy */
        s.compute_ms = tdm_prof_intervals_length(c, nc) / 1e3;
        na = gather(recs, n, rank, f_comm, lo, hi, a);
        s.comm_ms = tdm_prof_intervals_length(a, na) / 1e3;
        s.hidden_ms = tdm_prof_intervals_intersect_length(a, na, c, nc) / 1e3;
        s.exposed_ms = s.comm_ms - s.hidden_ms;
        s.last_comm_ms = last_grad_comm_us(recs, n, rank, lo, hi, ts) / 1e3;
        double can_hide = s.comm_ms - s.last_comm_ms;
        s.hideable_ms = can_hide < s.compute_ms ? can_hide : s.compute_ms;
        if (s.hideable_ms < 0) s.hideable_ms = 0;
        s.free_hideable_ms = s.hideable_ms;
        if (s.hideable_ms < s.hidden_ms) s.hideable_ms = s.hidden_ms; /* part of the last one did hide */
        s.ideal_step_ms = s.step_ms - (s.hideable_ms - s.hidden_ms);
        s.overlap_efficiency = overlap_efficiency(s.hidden_ms, s.hideable_ms, s.free_hideable_ms, s.comm_ms);
        /* the schedule's bound: each kind of collective only behind the compute of its window
         * (the last gradient bucket cannot hide at all) */
        const double last = s.last_comm_ms * 1e3;
        double sched = sched_hideable_us(recs, n, rank, f_grad_comm, "grad bucket posted", 1, last, lo, hi, c, nc, b);
        sched += sched_hideable_us(recs, n, rank, f_param_comm, "param all-gather posted", 0, 0, lo, hi, c, nc, b);
        s.sched_hideable_ms = sched / 1e3;
        if (s.sched_hideable_ms > s.hideable_ms) s.sched_hideable_ms = s.hideable_ms;
        if (s.sched_hideable_ms < s.hidden_ms) s.sched_hideable_ms = s.hidden_ms;
        s.sched_ideal_step_ms = s.step_ms - (s.sched_hideable_ms - s.hidden_ms);
        s.sched_overlap_efficiency = sched_efficiency(s.hidden_ms, s.sched_hideable_ms, s.step_ms);
        nb = gather(recs, n, rank, f_data_wait, lo, hi, b);
        s.data_wait_ms = tdm_prof_intervals_length(b, nb) / 1e3;
        nb = gather(recs, n, rank, f_wait, lo, hi, b);
        s.wait_ms = tdm_prof_intervals_length(b, nb) / 1e3;
        /* insertion by step: envelopes arrive in time order, which is step order */
        if (n_steps < cap) out[n_steps] = s;
        n_steps++;
    }
    free(a);
    free(b);
    free(c);
    free(ts);
    return n_steps;
}

void tdm_prof_step_stats_mean(const tdm_prof_step_stats *s, int64_t n, tdm_prof_step_stats *m) {
    memset(m, 0, sizeof *m);
    m->rank = -1;
    m->step = -1;
    m->overlap_efficiency = m->sched_overlap_efficiency = NAN;
    if (n <= 0) { /* no step: every figure unknown (null in JSON, n/a in ab's table), not a step of 0 ms */
        m->step_ms = m->compute_ms = m->comm_ms = m->hidden_ms = m->exposed_ms = m->hideable_ms = NAN;
        m->last_comm_ms = m->data_wait_ms = m->wait_ms = m->ideal_step_ms = NAN;
        m->sched_hideable_ms = m->sched_ideal_step_ms = m->free_hideable_ms = NAN;
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        m->step_ms += s[i].step_ms;
        m->compute_ms += s[i].compute_ms;
        m->comm_ms += s[i].comm_ms;
        m->hidden_ms += s[i].hidden_ms;
        m->exposed_ms += s[i].exposed_ms;
        m->hideable_ms += s[i].hideable_ms;
        m->last_comm_ms += s[i].last_comm_ms;
        m->data_wait_ms += s[i].data_wait_ms;
        m->wait_ms += s[i].wait_ms;
        m->ideal_step_ms += s[i].ideal_step_ms;
        m->sched_hideable_ms += s[i].sched_hideable_ms;
        m->sched_ideal_step_ms += s[i].sched_ideal_step_ms;
        m->free_hideable_ms += s[i].free_hideable_ms;
    }
    m->overlap_efficiency = overlap_efficiency(m->hidden_ms, m->hideable_ms, m->free_hideable_ms, m->comm_ms);
    m->sched_overlap_efficiency = sched_efficiency(m->hidden_ms, m->sched_hideable_ms, m->step_ms);
    double k = (double)n;
    m->step_ms /= k, m->compute_ms /= k, m->comm_ms /= k, m->hidden_ms /= k, m->exposed_ms /= k;
    m->hideable_ms /= k, m->last_comm_ms /= k, m->data_wait_ms /= k, m->wait_ms /= k, m->ideal_step_ms /= k;
    m->sched_hideable_ms /= k, m->sched_ideal_step_ms /= k, m->free_hideable_ms /= k;
}

static int cmp_row_key(const void *a, const void *b) {
    const tdm_prof_rec *x = *(const tdm_prof_rec *const *)a, *y = *(const tdm_prof_rec *const *)b;
    if (x->cat != y->cat) return x->cat - y->cat;
    return strcmp(x->name, y->name);
}
static int cmp_row_total(const void *a, const void *b) {
    const tdm_prof_op_row *x = a, *y = b;
    return (x->total_ms < y->total_ms) - (x->total_ms > y->total_ms);
}

int64_t tdm_prof_op_summary(const tdm_prof_rec *recs, int64_t n, tdm_prof_op_row *out) {
    const tdm_prof_rec **p = tdm_xmalloc((size_t)(n + 1) * sizeof *p);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (!recs[i].instant && !is_step_envelope(&recs[i])) p[m++] = &recs[i];
    qsort(p, (size_t)m, sizeof *p, cmp_row_key);
    int64_t k = 0;
    for (int64_t i = 0; i < m; i++) {
        double d = (p[i]->t1_us - p[i]->t0_us) / 1e3;
        if (k == 0 || cmp_row_key(&p[i], &p[i - 1]) != 0) {
            out[k++] = (tdm_prof_op_row){.name = p[i]->name, .cat = p[i]->cat};
        }
        tdm_prof_op_row *r = &out[k - 1];
        r->count++;
        r->total_ms += d;
        if (d > r->max_ms) r->max_ms = d;
    }
    for (int64_t i = 0; i < k; i++) out[i].mean_ms = out[i].total_ms / (double)out[i].count;
    qsort(out, (size_t)k, sizeof *out, cmp_row_total);
    free(p);
    return k;
}

const char *const tdm_prof_summary_warning =
    "Per-operator totals include time spent waiting: they cannot be added up into a step time or turned into an "
    "achievable speed-up; they only say where to look. The timeline (per-step analysis below) decides whether "
    "overlap can remove exposed communication.";

static const char *const cat_names[] = {"phase", "layer", "comm", "wait", "data", "kernel", "mark"};

const char *tdm_prof_cat_name(int cat) {
    return cat >= 0 && cat < (int)(sizeof cat_names / sizeof *cat_names) ? cat_names[cat] : "other";
}

int tdm_prof_cat_from_name(const char *name) {
    for (int i = 0; i < (int)(sizeof cat_names / sizeof *cat_names); i++)
        if (!strcmp(name, cat_names[i])) return i;
    return -1;
}

void tdm_prof_format_op_summary(tdm_strbuf *sb, const tdm_prof_op_row *rows, int64_t n, const int *ranks, int n_ranks) {
    int all = 1; /* ranks 0..n_ranks-1: the whole job */
    for (int i = 0; i < n_ranks; i++) all &= ranks[i] == i;
    if (all) {
        tdm_sb_printf(sb, "Operator summary (all %d rank%s together)\n", n_ranks, n_ranks == 1 ? "" : "s");
    } else {
        tdm_sb_printf(sb, "Operator summary (rank%s", n_ranks == 1 ? "" : "s");
        for (int i = 0; i < n_ranks && i < 16; i++) tdm_sb_printf(sb, "%s %d", i ? "," : "", ranks[i]);
        tdm_sb_printf(sb, "%s%s)\n", n_ranks > 16 ? ", ..." : "", n_ranks == 1 ? "" : " together");
    }
    tdm_sb_printf(sb, "  %-34s %-7s %8s %12s %11s %11s\n", "name", "cat", "count", "total ms", "mean ms", "max ms");
    for (int64_t i = 0; i < n; i++)
        tdm_sb_printf(sb, "  %-34.34s %-7s %8lld %12.3f %11.4f %11.4f\n", rows[i].name, tdm_prof_cat_name(rows[i].cat),
                      (long long)rows[i].count, rows[i].total_ms, rows[i].mean_ms, rows[i].max_ms);
    tdm_sb_printf(sb, "Note: %s\n", tdm_prof_summary_warning);
}

static void fmt_eff(char *buf, size_t cap, double e) {
    if (isnan(e)) snprintf(buf, cap, "n/a");
    else snprintf(buf, cap, "%.1f%%", 100.0 * e);
}

void tdm_prof_format_steps(tdm_strbuf *sb, const tdm_prof_step_stats *s, int64_t n) {
    tdm_sb_printf(sb, "Per-step analysis (ms; hidden = comm during compute, exposed = comm - hidden; ideal and "
                      "overlap: against all compute, and against the compute each collective's schedule allows)\n");
    tdm_sb_printf(sb, "  %4s %5s %9s %9s %9s %9s %9s %9s %9s %9s %8s %11s %8s\n", "rank", "step", "step", "compute",
                  "comm", "hidden", "exposed", "data wait", "wait", "ideal", "overlap", "sched ideal", "sched");
    if (n == 0) {
        tdm_sb_printf(sb, "  (no step envelopes: the profile covered no complete step)\n");
        return;
    }
    char e[16], f[16];
    tdm_prof_step_stats m;
    tdm_prof_step_stats_mean(s, n, &m);
    for (int64_t i = 0; i <= n; i++) { /* the steps, then their mean */
        const tdm_prof_step_stats *x = i < n ? &s[i] : &m;
        fmt_eff(e, sizeof e, x->overlap_efficiency);
        fmt_eff(f, sizeof f, x->sched_overlap_efficiency);
        char rank[8] = "mean", step[24] = "";
        if (i < n) {
            snprintf(rank, sizeof rank, "%d", x->rank);
            snprintf(step, sizeof step, "%lld", (long long)x->step);
        }
        tdm_sb_printf(sb, "  %4s %5s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %8s %11.3f %8s\n", rank, step,
                      x->step_ms, x->compute_ms, x->comm_ms, x->hidden_ms, x->exposed_ms, x->data_wait_ms, x->wait_ms,
                      x->ideal_step_ms, e, x->sched_ideal_step_ms, f);
    }
}
