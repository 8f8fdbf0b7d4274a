/* analyze.c - per-step overlap, HTA's whole-trace figures, collectives and diagnostics. */
#include "runs/analyze.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "prof/analysis.h"
#include "runs/trace_internal.h"

/* ---- HTA ------------------------------------------------------------------------------- */

typedef struct hiv {
    double ts, end;
} hiv;

static int cmp_hiv(const void *a, const void *b) {
    const hiv *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* HTA's merge_kernel_intervals: sorted by start, a row opens a new group when it starts after
 * every earlier row's end; a group is (its first start, its largest end). With rounding, a
 * kernel shorter than a microsecond can end before it starts, and HTA keeps such a group with
 * its negative length: so does this. Returns the number of groups, written over v. */
static int64_t hta_merge(hiv *v, int64_t n) {
    if (n == 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_hiv);
    int64_t g = 0;
    hiv cur = v[0];
    double cummax = v[0].end;
    for (int64_t i = 1; i < n; i++) {
        if (v[i].ts > cummax) {
            v[g++] = cur;
            cur = v[i];
        } else if (v[i].end > cur.end) {
            cur.end = v[i].end;
        }
        if (v[i].end > cummax) cummax = v[i].end;
    }
    v[g++] = cur;
    return g;
}

static double hta_len(const hiv *v, int64_t n) {
    double a = 0, b = 0; /* HTA sums ends and starts separately */
    for (int64_t i = 0; i < n; i++) a += v[i].end, b += v[i].ts;
    return a - b;
}

typedef struct hev {
    double t;
    int d;
} hev;

static int cmp_hev(const void *a, const void *b) {
    const hev *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

/* Time during which the running status (comm +1, compute +2) is exactly 3 after all the changes
 * at an instant: HTA's cumulative-status overlap, which does not depend on the order of ties. */
static double hta_overlap(const hiv *comm, int64_t nc, const hiv *comp, int64_t np) {
    hev *e = tdm_xmalloc((size_t)(2 * (nc + np) + 1) * sizeof *e);
    int64_t n = 0;
    for (int64_t i = 0; i < nc; i++) e[n++] = (hev){comm[i].ts, 1}, e[n++] = (hev){comm[i].end, -1};
    for (int64_t i = 0; i < np; i++) e[n++] = (hev){comp[i].ts, 2}, e[n++] = (hev){comp[i].end, -2};
    qsort(e, (size_t)n, sizeof *e, cmp_hev);
    double sum = 0;
    int run = 0;
    for (int64_t i = 0; i < n;) {
        int64_t j = i;
        while (j < n && e[j].t == e[i].t) run += e[j++].d;
        if (run == 3 && j < n) sum += e[j].t - e[i].t;
        i = j;
    }
    free(e);
    return sum;
}

void tdm_runs_hta_compute(const tdm_runs_trace *t, int include_last, int round_ns, tdm_runs_hta *o) {
    memset(o, 0, sizeof *o);
    o->include_last_step = include_last;
    o->round_ns = round_ns;
    o->overlap_pct = o->idle_pct = o->compute_pct = o->non_compute_pct = NAN;
    int any_stream = 0, any_cpu = 0;
    for (int64_t i = 0; i < t->n_spans; i++) {
        any_stream |= (t->spans[i].flags & TDM_RUNS_F_STREAM) != 0;
        any_cpu |= !(t->spans[i].flags & TDM_RUNS_F_HTA_GPU);
    }
    o->applicable = any_stream && t->format == TDM_RUNS_FMT_KINETO;
    if (!o->applicable) return;
    int rnd = round_ns && t->ts_float;
#define R(x)       (rnd ? ceil(x) : (x))
#define E(ts, dur) (rnd ? floor((ts) + (dur)) : (ts) + (dur))
    o->filtered = t->n_step_names >= 2 && any_cpu;
    double last_start = R(t->hta_last_step_ts), last_end = rnd ? floor(t->hta_last_step_end) : t->hta_last_step_end;
#define KEEP_CPU(ts) (!o->filtered || (include_last ? R(ts) <= last_end : R(ts) < last_start))
    /* HTA first moves every rank's events so that the earliest starts at 0 (its sums of ends and
     * starts would lose the microseconds at 1.7e15 µs) */
    double base = INFINITY;
    for (int64_t i = 0; i < t->n_spans; i++)
        if (R(t->spans[i].ts) < base) base = R(t->spans[i].ts);
    hiv *all = tdm_xmalloc((size_t)(t->n_spans + 1) * sizeof *all);
    hiv *comm = tdm_xmalloc((size_t)(t->n_spans + 1) * sizeof *comm);
    hiv *comp = tdm_xmalloc((size_t)(t->n_spans + 1) * sizeof *comp);
    int64_t na = 0, nc = 0, np = 0;
    for (int64_t i = 0; i < t->n_spans; i++) {
        const tdm_runs_span *s = &t->spans[i];
        if (!(s->flags & TDM_RUNS_F_STREAM)) continue;
        int keep;
        if (s->flags & TDM_RUNS_F_HTA_GPU) {
            const tdm_runs_span *l = s->launch >= 0 ? &t->spans[s->launch] : NULL;
            keep = !o->filtered || (l && !(l->flags & TDM_RUNS_F_HTA_GPU) && KEEP_CPU(l->ts));
        } else {
            keep = KEEP_CPU(s->ts); /* a stream but no correlation: HTA files it with the CPU events */
        }
        if (!keep) continue;
        hiv v = {R(s->ts) - base, E(s->ts, s->dur) - base};
        all[na++] = v;
        o->n_kernels++;
        if (s->kind == TDM_RUNS_COMM) {
            comm[nc++] = v;
            o->n_comm_kernels++;
            int k;
            for (k = 0; k < o->n_comm_names && o->comm_name[k] != s->name; k++) continue;
            if (k == o->n_comm_names && k < 16) o->comm_name[o->n_comm_names++] = s->name;
            if (k < 16) o->comm_name_count[k]++;
        } else if (s->kind == TDM_RUNS_COMPUTE) {
            comp[np++] = v;
        }
    }
    for (int64_t i = 0; i < t->n_steps; i++)
        if (!t->whole_trace_step && KEEP_CPU(t->steps[i].ts)) o->n_steps++;
    nc = hta_merge(comm, nc);
    np = hta_merge(comp, np);
    na = hta_merge(all, na);
    o->comm_us = hta_len(comm, nc);
    o->overlap_us = hta_overlap(comm, nc, comp, np);
    if (nc > 0 && o->comm_us != 0) o->overlap_pct = 100.0 * o->overlap_us / o->comm_us;
    if (na > 0) {
        o->span_us = all[na - 1].end - all[0].ts;
        o->idle_us = o->span_us - hta_len(all, na);
        o->compute_us = hta_len(comp, np);
        o->non_compute_us = o->span_us - o->compute_us - o->idle_us;
        if (o->span_us > 0) {
            o->idle_pct = 100.0 * o->idle_us / o->span_us;
            o->compute_pct = 100.0 * o->compute_us / o->span_us;
            o->non_compute_pct = 100.0 * o->non_compute_us / o->span_us;
        }
    }
#undef R
#undef E
#undef KEEP_CPU
    free(all);
    free(comm);
    free(comp);
}

/* ---- per step -------------------------------------------------------------------------- */

double tdm_runs_busbw_factor(int kind, int n) {
    if (n < 1) return NAN;
    switch (kind) {
    case TDM_RUNS_ALL_REDUCE: return 2.0 * (n - 1) / n;
    case TDM_RUNS_ALL_GATHER:
    case TDM_RUNS_REDUCE_SCATTER:
    case TDM_RUNS_ALL_TO_ALL: return (double)(n - 1) / n;
    case TDM_RUNS_BROADCAST:
    case TDM_RUNS_REDUCE:
    case TDM_RUNS_SEND_RECV: return 1.0;
    default: return NAN;
    }
}

/* Collectives grouped by step: idx[start[k] .. start[k+1]) are step k's, in time order. */
typedef struct by_step {
    int64_t *start, *idx;
} by_step;

static by_step colls_by_step(const tdm_runs_trace *t) {
    int64_t ns = t->n_steps;
    by_step b = {tdm_xcalloc((size_t)ns + 2, sizeof(int64_t)), tdm_xmalloc((size_t)(t->n_colls + 1) * sizeof(int64_t))};
    for (int64_t c = 0; c < t->n_colls; c++)
        if (t->colls[c].step >= 0 && t->colls[c].step < ns) b.start[t->colls[c].step + 1]++;
    for (int64_t k = 0; k < ns; k++) b.start[k + 1] += b.start[k];
    int64_t *fill = tdm_xmalloc((size_t)(ns + 1) * sizeof *fill);
    memcpy(fill, b.start, (size_t)(ns + 1) * sizeof *fill);
    for (int64_t c = 0; c < t->n_colls; c++)
        if (t->colls[c].step >= 0 && t->colls[c].step < ns) b.idx[fill[t->colls[c].step]++] = c;
    free(fill);
    return b;
}

static void by_step_free(by_step *b) {
    free(b->start);
    free(b->idx);
}

static int64_t add_iv(tdm_prof_interval *v, int64_t n, double ts, double dur) {
    if (dur > 0) v[n++] = (tdm_prof_interval){ts, ts + dur};
    return n;
}

/* Threads that carry gloo's transfers on a CPU-only trace. */
static uint8_t *comm_threads(const tdm_runs_trace *t) {
    uint8_t *c = tdm_xcalloc((size_t)t->n_threads + 1, 1);
    for (int64_t i = 0; i < t->n_colls; i++) {
        const tdm_runs_span *s = &t->spans[t->colls[i].span];
        if (!(s->flags & TDM_RUNS_F_DEVICE) && s->lane >= 0 && s->lane < t->n_threads) c[s->lane] = 1;
    }
    return c;
}

/* Longer than most: one pass over a step's spans computes every figure of the step together. */
static void analyze_steps(const tdm_runs_trace *t, tdm_runs_rank_stats *r) {
    if (t->n_given > 0) {
        r->n_steps = t->n_given;
        r->steps = tdm_xcalloc((size_t)t->n_given, sizeof *r->steps);
        for (int64_t i = 0; i < t->n_given; i++) {
            const tdm_runs_given_step *g = &t->given[i];
            r->steps[i] = (tdm_runs_step_stats){.number = g->number,
                                                .step_us = g->step,
                                                .compute_us = g->compute,
                                                .comm_us = g->comm,
                                                .hidden_us = g->hidden,
                                                .exposed_us = g->exposed,
                                                .idle_us = g->idle,
                                                .overlap_pct = g->comm > 0 ? 100 * g->hidden / g->comm : NAN,
                                                .last_coll = -1,
                                                .last_us = g->last_comm,
                                                .last_exposed_us = NAN};
        }
        for (int64_t c = 0; c < t->n_colls; c++) { /* each collective to the given step of its step's number */
            const int32_t k = t->colls[c].step;
            if (k < 0 || k >= t->n_steps) continue;
            for (int64_t i = 0; i < t->n_given; i++)
                if (t->given[i].number == t->steps[k].number) {
                    r->steps[i].n_colls++;
                    break;
                }
        }
        return;
    }
    int64_t ns = t->n_steps;
    r->n_steps = ns;
    r->steps = tdm_xcalloc((size_t)ns + 1, sizeof *r->steps);
    /* spans grouped by step */
    int64_t *start = tdm_xcalloc((size_t)ns + 2, sizeof *start);
    for (int64_t i = 0; i < t->n_spans; i++)
        if (t->spans[i].step >= 0) start[t->spans[i].step + 1]++;
    for (int64_t k = 0; k < ns; k++) start[k + 1] += start[k];
    int64_t *idx = tdm_xmalloc((size_t)(start[ns] + 1) * sizeof *idx),
            *fill = tdm_xmalloc((size_t)(ns + 1) * sizeof *fill);
    memcpy(fill, start, (size_t)ns * sizeof *fill);
    for (int64_t i = 0; i < t->n_spans; i++)
        if (t->spans[i].step >= 0) idx[fill[t->spans[i].step]++] = i;
    free(fill);
    uint8_t *cthr = t->has_device ? NULL : comm_threads(t);
    by_step cb = colls_by_step(t);
    int64_t cap = 0;
    for (int64_t k = 0; k < ns; k++)
        if (start[k + 1] - start[k] > cap) cap = start[k + 1] - start[k];
    tdm_prof_interval *C = tdm_xmalloc((size_t)(cap + 1) * sizeof *C), *M = tdm_xmalloc((size_t)(cap + 1) * sizeof *M),
                      *A = tdm_xmalloc((size_t)(2 * cap + 2) * sizeof *A),
                      *X = tdm_xmalloc((size_t)(cap + 1) * sizeof *X), *F = tdm_xmalloc((size_t)(cap + 1) * sizeof *F);
    for (int64_t k = 0; k < ns; k++) {
        int64_t nC = 0, nM = 0, nA = 0, nX = 0, nF = 0;
        for (int64_t j = start[k]; j < start[k + 1]; j++) {
            const tdm_runs_span *s = &t->spans[idx[j]];
            if (t->has_device) {
                if (!(s->flags & TDM_RUNS_F_DEVICE)) continue;
                if (t->has_lanes && s->kind == TDM_RUNS_OTHER) {
                    if (s->lane == 2) nX = add_iv(X, nX, s->ts, s->dur);
                    else if (s->lane == 3) nF = add_iv(F, nF, s->ts, s->dur);
                    continue;
                }
                if (s->kind == TDM_RUNS_COMPUTE) nC = add_iv(C, nC, s->ts, s->dur);
                else if (s->kind == TDM_RUNS_COMM) nM = add_iv(M, nM, s->ts, s->dur);
                nA = add_iv(A, nA, s->ts, s->dur);
            } else {
                if (s->flags & TDM_RUNS_F_DEVICE) continue;
                if (s->coll >= 0) nM = add_iv(M, nM, s->ts, s->dur);
                else if (s->kind == TDM_RUNS_COMPUTE && !(s->lane >= 0 && s->lane < t->n_threads && cthr[s->lane]))
                    nC = add_iv(C, nC, s->ts, s->dur);
            }
        }
        nC = tdm_prof_intervals_union(C, nC);
        nM = tdm_prof_intervals_union(M, nM);
        if (!t->has_device) {
            memcpy(A, C, (size_t)nC * sizeof *A);
            memcpy(A + nC, M, (size_t)nM * sizeof *A);
            nA = nC + nM;
        }
        nA = tdm_prof_intervals_union(A, nA);
        tdm_runs_step_stats *st = &r->steps[k];
        st->number = t->steps[k].number;
        st->compute_us = tdm_prof_intervals_length(C, nC);
        st->comm_us = tdm_prof_intervals_length(M, nM);
        st->hidden_us = tdm_prof_intervals_intersect_length(C, nC, M, nM);
        st->exposed_us = st->comm_us - st->hidden_us;
        if (t->has_lanes) {
            nX = tdm_prof_intervals_union(X, nX);
            nF = tdm_prof_intervals_union(F, nF);
            st->exposed_us = tdm_prof_intervals_length(X, nX);
            st->hidden_us = st->comm_us > st->exposed_us ? st->comm_us - st->exposed_us : 0;
            st->idle_us = tdm_prof_intervals_length(F, nF);
            st->step_us = st->compute_us + st->exposed_us + st->idle_us;
        } else {
            st->step_us = t->steps[k].dur;
            double idle = st->step_us - tdm_prof_intervals_length(A, nA);
            st->idle_us = idle > 0 ? idle : 0;
        }
        st->overlap_pct = st->comm_us > 0 ? 100.0 * st->hidden_us / st->comm_us : NAN;
        st->last_coll = -1;
        st->last_us = st->last_exposed_us = NAN;
        double best = -INFINITY;
        for (int64_t j = cb.start[k]; j < cb.start[k + 1]; j++) {
            int64_t c = cb.idx[j];
            const tdm_runs_coll *cl = &t->colls[c];
            st->n_colls++;
            double when = isfinite(cl->launch_ts) ? cl->launch_ts : cl->ts;
            if (when >= best) best = when, st->last_coll = c;
        }
        if (st->last_coll >= 0) {
            const tdm_runs_coll *cl = &t->colls[st->last_coll];
            tdm_prof_interval one = {cl->ts, cl->ts + cl->dur};
            st->last_us = cl->dur;
            st->last_exposed_us = cl->dur - tdm_prof_intervals_intersect_length(&one, cl->dur > 0, C, nC);
        }
    }
    free(C), free(M), free(A), free(X), free(F);
    free(cthr);
    by_step_free(&cb);
    free(idx);
    free(start);
}

static void mean_steps(tdm_runs_rank_stats *r) {
    tdm_runs_step_stats m = {.number = -1, .last_coll = -1};
    double n = 0, nl = 0, last = 0, nx = 0, last_x = 0;
    for (int64_t i = 0; i < r->n_steps; i++) {
        const tdm_runs_step_stats *s = &r->steps[i];
        m.step_us += s->step_us, m.compute_us += s->compute_us, m.comm_us += s->comm_us;
        m.hidden_us += s->hidden_us, m.exposed_us += s->exposed_us, m.idle_us += s->idle_us;
        m.n_colls += s->n_colls;
        n++;
        if (isfinite(s->last_us)) last += s->last_us, nl++;
        if (isfinite(s->last_us) && isfinite(s->last_exposed_us)) last_x += s->last_exposed_us, nx++;
    }
    m.overlap_pct = m.comm_us > 0 ? 100.0 * m.hidden_us / m.comm_us : NAN;
    if (n > 0) {
        m.step_us /= n, m.compute_us /= n, m.comm_us /= n, m.hidden_us /= n, m.exposed_us /= n, m.idle_us /= n;
    } else {
        m.step_us = m.compute_us = m.comm_us = m.hidden_us = m.exposed_us = m.idle_us = NAN;
    }
    m.last_us = nl > 0 ? last / nl : NAN;
    m.last_exposed_us = nx > 0 ? last_x / nx : NAN; /* NaN: not known (a format's own per-step figures) */
    r->mean = m;
}

static void kind_stats(const tdm_runs_trace *t, tdm_runs_rank_stats *r) {
    tdm_runs_kind_stats k[TDM_RUNS_COLL_KINDS];
    memset(k, 0, sizeof k);
    for (int i = 0; i < TDM_RUNS_COLL_KINDS; i++) k[i].kind = i, k[i].group_size = -1;
    for (int64_t i = 0; i < t->n_colls; i++) {
        const tdm_runs_coll *c = &t->colls[i];
        tdm_runs_kind_stats *s = &k[c->kind < TDM_RUNS_COLL_KINDS ? c->kind : TDM_RUNS_COLL_OTHER];
        s->count++;
        s->total_us += c->dur;
        if (c->group_size > 0 && s->group_size < 0) s->group_size = c->group_size;
        if (c->bytes >= 0) s->count_sized++, s->total_bytes += (double)c->bytes, s->sized_us += c->dur;
    }
    r->n_kinds = 0;
    for (int i = 0; i < TDM_RUNS_COLL_KINDS; i++) {
        if (!k[i].count) continue;
        int n = k[i].group_size > 0 ? k[i].group_size : t->world_size > 0 ? (int)t->world_size : -1;
        k[i].algbw_gbs = k[i].count_sized && k[i].sized_us > 0 ? k[i].total_bytes / k[i].sized_us / 1e3 : NAN;
        k[i].busbw_gbs = k[i].algbw_gbs * tdm_runs_busbw_factor(i, n);
        if (k[i].group_size < 0) k[i].group_size = n;
        r->kinds[r->n_kinds++] = k[i];
    }
}

/* ---- diagnostics ----------------------------------------------------------------------- */

static int starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* 1 when every step that has gradient collectives and a visible backward launched all of them
 * after the backward's last operator ended; 0 when some step overlapped; -1 when no step says. */
static int grads_after_backward(const tdm_runs_trace *t) {
    int64_t ns = t->n_steps;
    uint8_t *bw_name = tdm_xcalloc((size_t)t->n_names + 1, 1);
    for (int32_t i = 0; i < t->n_names; i++)
        bw_name[i] =
            starts(t->names[i], "autograd::engine::evaluate_function") || !strcmp(t->names[i], "## backward ##");
    double *bw_end = tdm_xmalloc((size_t)(ns + 1) * sizeof *bw_end);
    int64_t *n_grad = tdm_xcalloc((size_t)ns + 1, sizeof *n_grad),
            *before = tdm_xcalloc((size_t)ns + 1, sizeof *before);
    for (int64_t k = 0; k < ns; k++) bw_end[k] = -INFINITY;
    for (int64_t i = 0; i < t->n_spans; i++) {
        const tdm_runs_span *s = &t->spans[i];
        if (s->step < 0 || (s->flags & TDM_RUNS_F_DEVICE) || !bw_name[s->name]) continue;
        if (s->ts + s->dur > bw_end[s->step]) bw_end[s->step] = s->ts + s->dur;
    }
    for (int64_t c = 0; c < t->n_colls; c++) {
        const tdm_runs_coll *cl = &t->colls[c];
        if (cl->step < 0 || !(cl->kind == TDM_RUNS_ALL_REDUCE || cl->kind == TDM_RUNS_REDUCE_SCATTER) ||
            !isfinite(cl->launch_ts))
            continue;
        n_grad[cl->step]++;
        before[cl->step] += cl->launch_ts < bw_end[cl->step];
    }
    int verdict = -1;
    for (int64_t k = 0; k < ns && verdict != 0; k++) {
        if (!isfinite(bw_end[k]) || !n_grad[k]) continue;
        verdict = before[k] ? 0 : 1;
    }
    free(bw_name), free(bw_end), free(n_grad), free(before);
    return verdict;
}

/* 1 when some step's parameter all-gathers (sizes known, 2 or more) come in the same order of
 * sizes as its gradient collectives (the backward's bucket order) and that order is not its own
 * reverse: the forward needs the first layers first, which the backward reduces last. */
static int allgather_backward_order(const tdm_runs_trace *t, int64_t *step_out) {
    by_step cb = colls_by_step(t);
    int found = 0;
    for (int64_t k = 0; k < t->n_steps && !found; k++) {
        int64_t ag[64], gr[64];
        int na = 0, ng = 0, sized = 1;
        for (int64_t j = cb.start[k]; j < cb.start[k + 1]; j++) {
            const tdm_runs_coll *cl = &t->colls[cb.idx[j]];
            if (cl->kind == TDM_RUNS_ALL_GATHER && na < 64) ag[na++] = cl->bytes, sized &= cl->bytes >= 0;
            if ((cl->kind == TDM_RUNS_REDUCE_SCATTER || cl->kind == TDM_RUNS_ALL_REDUCE) && ng < 64)
                gr[ng++] = cl->bytes, sized &= cl->bytes >= 0;
        }
        if (!sized || na < 2 || na != ng) continue;
        int same = 1, palin = 1;
        for (int i = 0; i < na; i++) {
            /* reduce-scatter input = all-gather output: the same bucket has the same size */
            same &= ag[i] == gr[i];
            palin &= gr[i] == gr[ng - 1 - i];
        }
        if (same && !palin) {
            *step_out = t->steps[k].number;
            found = 1;
        }
    }
    by_step_free(&cb);
    return found;
}

/* Longer than most: the cross-rank figures and then each diagnostic, in the order the report gives them. */
void tdm_runs_analyze(const tdm_runs_set *s, tdm_runs_analysis *a) {
    memset(a, 0, sizeof *a);
    a->n_ranks = s->n;
    a->ranks = tdm_xcalloc((size_t)s->n + 1, sizeof *a->ranks);
    a->slowest = -1;
    a->spread = NAN;
    for (int i = 0; i < s->n; i++) {
        const tdm_runs_trace *t = s->traces[i];
        tdm_runs_rank_stats *r = &a->ranks[i];
        r->trace = t;
        analyze_steps(t, r);
        mean_steps(r);
        for (int h = 0; h < 4; h++) tdm_runs_hta_compute(t, h & 1, !(h & 2), &r->hta[h]);
        kind_stats(t, r);
    }
    /* slowest rank and spread, msprof's way: over the ranks' mean step times */
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    int n = 0;
    for (int i = 0; i < a->n_ranks; i++) {
        double v = a->ranks[i].mean.step_us;
        if (!isfinite(v)) continue;
        if (v > hi) hi = v, a->slowest = i;
        if (v < lo) lo = v;
        sum += v;
        n++;
    }
    if (n >= 2 && sum > 0) {
        a->spread = (hi - lo) / (sum / n);
        if (a->spread > TDM_RUNS_SLOW_RANK_SPREAD) {
            a->fired[TDM_RUNS_DIAG_SLOW_RANK] = 1;
            snprintf(a->diag[TDM_RUNS_DIAG_SLOW_RANK], sizeof a->diag[0],
                     "slow rank: %s's mean step is %.1f%% above the fastest rank's (spread %.2f%% of the mean, over "
                     "msprof-analyze's 5%% rule)",
                     a->ranks[a->slowest].trace->label, 100.0 * (hi - lo) / lo, 100.0 * a->spread);
        }
    }
    /* nothing hidden: communication on every rank, none of it during compute */
    double comm = 0, hidden = 0;
    int ranks_with_comm = 0, all_none = 1;
    for (int i = 0; i < a->n_ranks; i++) {
        const tdm_runs_step_stats *m = &a->ranks[i].mean;
        if (!(m->comm_us > 0)) continue;
        ranks_with_comm++;
        comm += m->comm_us, hidden += m->hidden_us;
        if (m->hidden_us > 0.01 * m->comm_us) all_none = 0;
    }
    if (ranks_with_comm > 0 && all_none) {
        a->fired[TDM_RUNS_DIAG_NOTHING_HIDDEN] = 1;
        snprintf(a->diag[TDM_RUNS_DIAG_NOTHING_HIDDEN], sizeof a->diag[0],
                 "nothing hidden: %.2f%% of the communication ran during compute. Communication that waits for "
                 "compute is serialised behind it: one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1 on NVIDIA GPUs "
                 "puts communication kernels behind the compute kernels issued before them), or overlap switched off "
                 "(--overlap-grad-reduce, --overlap-param-gather)",
                 comm > 0 ? 100.0 * hidden / comm : 0.0);
    }
    /* gradient collectives after the backward */
    int fired_ranks = 0, judged = 0;
    for (int i = 0; i < a->n_ranks; i++) {
        int v = grads_after_backward(a->ranks[i].trace);
        if (v < 0) continue;
        judged++;
        fired_ranks += v;
    }
    if (judged > 0 && fired_ranks == judged) {
        a->fired[TDM_RUNS_DIAG_GRADS_AFTER_BACKWARD] = 1;
        snprintf(a->diag[TDM_RUNS_DIAG_GRADS_AFTER_BACKWARD], sizeof a->diag[0],
                 "every gradient collective was launched after the backward ended, so none can overlap it: the "
                 "gradients are reduced at the end of the step (no --overlap-grad-reduce, or DDP's hooks did not "
                 "fire during the backward)");
    }
    for (int i = 0; i < a->n_ranks; i++) {
        int64_t step = 0;
        if (allgather_backward_order(a->ranks[i].trace, &step)) {
            a->fired[TDM_RUNS_DIAG_ALLGATHER_ORDER] = 1;
            snprintf(a->diag[TDM_RUNS_DIAG_ALLGATHER_ORDER], sizeof a->diag[0],
                     "%s, step %lld: the parameter all-gathers come in the gradient buckets' order (the backward's), "
                     "not the forward's: the forward waits for the bucket it needs first, which is gathered last",
                     a->ranks[i].trace->label, (long long)step);
            break;
        }
    }
    /* one rank consistently late: in every step all ranks hold, the same rank has the least
     * exposed communication (the others wait for it), by a margin of 5% of the step */
    if (a->n_ranks >= 2) {
        const tdm_runs_rank_stats *r0 = &a->ranks[0];
        int late = -1, steps = 0, consistent = 1;
        double margin_sum = 0, late_x = 0, others_x = 0;
        for (int64_t k = 0; k < r0->n_steps && consistent; k++) {
            int64_t num = r0->steps[k].number;
            int who = -1;
            double best = INFINITY, rest = 0, step = 0;
            int have = 0;
            for (int i = 0; i < a->n_ranks; i++) {
                const tdm_runs_rank_stats *r = &a->ranks[i];
                const tdm_runs_step_stats *st = NULL;
                for (int64_t j = 0; j < r->n_steps; j++)
                    if (r->steps[j].number == num) st = &r->steps[j];
                if (!st || !(st->comm_us > 0)) continue;
                have++;
                rest += st->exposed_us;
                step += st->step_us;
                if (st->exposed_us < best) best = st->exposed_us, who = i;
            }
            if (have != a->n_ranks || who < 0) continue;
            double others = (rest - best) / (have - 1);
            if (late >= 0 && who != late) consistent = 0;
            late = who;
            steps++;
            margin_sum += (others - best) / (step / have);
            late_x += best, others_x += others;
        }
        if (consistent && steps >= 2 && late >= 0 && margin_sum / steps >= 0.05) {
            a->fired[TDM_RUNS_DIAG_RANK_LATE] = 1;
            snprintf(a->diag[TDM_RUNS_DIAG_RANK_LATE], sizeof a->diag[0],
                     "%s is late in every step: the other ranks' collectives wait for it (their exposed communication "
                     "%.2f ms per step against %.2f ms on %s)",
                     a->ranks[late].trace->label, others_x / steps / 1e3, late_x / steps / 1e3,
                     a->ranks[late].trace->label);
        }
    }
}

void tdm_runs_analysis_free(tdm_runs_analysis *a) {
    for (int i = 0; i < a->n_ranks; i++) free(a->ranks[i].steps);
    free(a->ranks);
    memset(a, 0, sizeof *a);
}
