/* plan.c - collective costs, bucketing and the simulated schedule of one step (see plan.h). */
#include "plan/plan.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

/* With --overlap-param-gather, all-gathers kept in flight ahead of the one forward waits for
 * (src/distributed/ddp_internal.h, TDM_DDP_GATHER_PREFETCH). */
#define GATHER_PREFETCH 2

static double busy_fraction(const tdm_plan_model *m, double bytes, double d);
static double speed_beside_compute(const tdm_plan_model *m, double rho);

const char *tdm_plan_kind_name(int kind) {
    static const char *const n[] = {"reduce_scatter", "all_gather", "all_reduce"};
    return kind >= 0 && kind < TDM_PLAN_KINDS ? n[kind] : "other";
}

void tdm_plan_coll_factors(int kind, double bytes, int p, const tdm_plan_link *l, double *steps, double *wire_bytes) {
    *steps = *wire_bytes = 0;
    if (p <= 1) return;
    if (kind == TDM_PLAN_ALL_REDUCE && l->tree) {
        *steps = 2 * ceil(log2((double)p));
        *wire_bytes = 2 * bytes;
        return;
    }
    double k = kind == TDM_PLAN_ALL_REDUCE ? 2.0 : 1.0;
    *steps = k * (p - 1);
    *wire_bytes = k * (p - 1) / (double)p * bytes;
}

double tdm_plan_coll_us(int kind, double bytes, int p, const tdm_plan_link *l) {
    double steps, wire;
    tdm_plan_coll_factors(kind, bytes, p, l, &steps, &wire);
    if (steps == 0) return 0;
    return steps * l->alpha_us + wire / (l->gbps * 125.0); /* Gbit/s = 125 bytes/µs */
}

double tdm_plan_nice_share(int nice) {
    double w = 1024.0 / pow(1.25, nice);
    return w / (w + 1024.0);
}

double tdm_plan_alone_us(const tdm_plan_model *m, double bytes, double wall_us, double beside) {
    /* d = wall (1 - beside) + wall beside speed(d): a fixed point the iteration reaches from d = wall */
    double d = wall_us;
    for (int i = 0; i < 200; i++) {
        double next = wall_us * (1 - beside) + wall_us * beside * speed_beside_compute(m, busy_fraction(m, bytes, d));
        if (fabs(next - d) <= 1e-9 * wall_us) return next;
        d = next;
    }
    return d;
}

void tdm_plan_model_free(tdm_plan_model *m) {
    free(m->units);
    free(m->params);
    free(m->measured);
    free(m->given_buckets);
    free(m->apart_at);
    free(m->apart_weight);
    free(m->apart_ref);
    memset(m, 0, sizeof *m);
}

void tdm_plan_result_free(tdm_plan_result *r) {
    free(r->bucket_padded);
    free(r->colls);
    free(r->segs);
    memset(r, 0, sizeof *r);
}

/* ---- buckets (src/distributed/layout.c's rule) ------------------------------------------- */

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

int64_t tdm_plan_trainable(const tdm_plan_model *m) {
    int64_t n = 0;
    for (int i = 0; i < m->n_params; i++) n += m->params[i].trainable ? m->params[i].numel : 0;
    return n;
}

/* The distributed optimizer's alignment (layout.c): parameters start at 64 elements, buckets end at lcm(dp, 128). */
static int64_t param_align(const tdm_plan_config *c) { return c->distributed ? 64 : 1; }
static int64_t bucket_align(const tdm_plan_config *c) {
    return c->distributed ? (int64_t)c->dp / gcd64(c->dp, 128) * 128 : 1;
}

int tdm_plan_buckets(const tdm_plan_model *m, const tdm_plan_config *c, int64_t **padded, int **bucket_of,
                     tdm_error *err) {
    if (c->dp < 1) return tdm_errorf(err, "dp size %d: expected at least 1", c->dp);
    const int64_t trainable = tdm_plan_trainable(m);
    int n_tr = 0;
    for (int i = 0; i < m->n_params; i++) n_tr += m->params[i].trainable != 0;
    if (n_tr == 0) return tdm_errorf(err, "the parameter table has no trainable parameter");
    int64_t size;
    const int given = c->given_cut && m->n_given_buckets > 0;
    if (given) size = m->given_buckets[0];
    else if (c->num_buckets > 0) size = (trainable + c->num_buckets - 1) / c->num_buckets;
    else if (c->bucket_size > 0) size = c->bucket_size;
    else size = 1000000 * (int64_t)c->dp > 40000000 ? 1000000 * (int64_t)c->dp : 40000000;
    if (size < 1) size = 1;
    const int64_t palign = param_align(c), balign = bucket_align(c);
    int64_t *pad = tdm_xmalloc((size_t)n_tr * sizeof *pad);
    int *bo = tdm_xmalloc((size_t)(m->n_params + 1) * sizeof *bo);
    for (int i = 0; i < m->n_params; i++) bo[i] = -1;
    int nb = 0, k = 0, open = 0;
    int64_t pos = 0, start = 0;
    for (int i = m->n_params - 1; i >= 0; i--) {
        const tdm_plan_param *p = &m->params[i];
        if (!p->trainable) continue;
        if (!open) start = pos, open = 1;
        pos = round_up(pos, palign) + p->numel;
        bo[i] = nb;
        k++;
        if (pos - start >= size || k == n_tr) {
            pos = start + round_up(pos - start, balign);
            pad[nb++] = pos - start;
            open = 0;
            if (given) size = m->given_buckets[nb < m->n_given_buckets ? nb : m->n_given_buckets - 1];
        }
    }
    *padded = pad;
    if (bucket_of) *bucket_of = bo;
    else free(bo);
    return nb;
}

/* Whether c cuts m's trainable parameters into n buckets of elems[] padded elements each (any sizes when
 * elems is NULL): 1 yes, 0 no, -1 when c cuts none (bad settings). *got: how many c cuts. */
static int cuts_as(const tdm_plan_model *m, const tdm_plan_config *c, const int64_t *elems, int n, int *got) {
    int64_t *pad = NULL;
    tdm_error e;
    *got = tdm_plan_buckets(m, c, &pad, NULL, &e);
    if (*got < 0) return -1;
    int same = *got == n;
    for (int b = 0; same && elems && b < n; b++) same = pad[b] == elems[b];
    free(pad);
    return same;
}

int tdm_plan_match_cut(const tdm_plan_model *m, tdm_plan_config *c, const int64_t *elems, int n, int64_t range[2]) {
    if (n < 1) return 0;
    tdm_plan_config t = *c;
    t.given_cut = 0, t.bucket_size = 0;
    int got;
    for (t.num_buckets = n; t.num_buckets <= 4 * n + 8; t.num_buckets++) {
        int same = cuts_as(m, &t, elems, n, &got);
        if (same == 1) {
            c->num_buckets = t.num_buckets, c->bucket_size = 0, c->given_cut = 0;
            return 1;
        }
        if (same < 0 || got > n) break;
    }
    if (!elems) return 0;
    /* a size closes a bucket at the parameter that brings it there: the sizes that close the first bucket at one
     * of its parameters run from just above the content before it to the content with it (alignment included) */
    const int64_t palign = param_align(c);
    int64_t pos = 0, before = 0;
    t.num_buckets = 0;
    for (int i = m->n_params - 1; i >= 0; i--) {
        if (!m->params[i].trainable) continue;
        before = pos;
        pos = round_up(pos, palign) + m->params[i].numel;
        if (pos > elems[0]) break; /* a padded bucket holds at least its content */
        t.bucket_size = pos;
        if (cuts_as(m, &t, elems, n, &got) != 1) continue;
        /* the sizes that cut every bucket alike are one range, (before, pos] at most: its least by bisection */
        int64_t lo = before + 1, hi = pos;
        while (lo < hi) {
            t.bucket_size = lo + (hi - lo) / 2;
            if (cuts_as(m, &t, elems, n, &got) == 1) hi = t.bucket_size;
            else lo = t.bucket_size + 1;
        }
        if (range) range[0] = lo, range[1] = pos;
        /* of the range, the roundest size: what a user gives (1000000 rather than 1049216) */
        int64_t pick = pos;
        for (int64_t p10 = (int64_t)1000000000000000000; p10 >= 1; p10 /= 10) {
            const int64_t r = (lo + p10 - 1) / p10 * p10;
            if (r <= pos) {
                pick = r;
                break;
            }
        }
        c->bucket_size = pick, c->num_buckets = 0, c->given_cut = 0;
        return 2;
    }
    return 0;
}

/* ---- the simulation ---------------------------------------------------------------------- */

double tdm_plan_rank_wait_us(const tdm_plan_model *m, int from, int to) {
    const int U = m->n_units, R = m->apart_ranks;
    if (m->apart_steps < 1 || R < 2 || to <= from || from < -1 || to > U) return 0;
    double sum = 0, wsum = 0;
    for (int k = 0; k < m->apart_steps; k++) {
        const double w = m->apart_weight[k];
        if (!(w > 0)) continue;
        double ref = 0, most = -INFINITY;
        for (int r = 0; r < R; r++) {
            const double *at = m->apart_at + ((size_t)k * R + r) * (U + 1);
            const double d = at[to] - (from >= 0 ? at[from] : 0);
            if (d > most) most = d;
            if (r == m->apart_ref[k]) ref = d;
        }
        sum += w * (most - ref), wsum += w;
    }
    return wsum > 0 ? sum / wsum * (m->apart_scale > 0 ? m->apart_scale : 1) : 0;
}

typedef struct sim {
    const tdm_plan_model *m;
    const tdm_plan_config *c;
    tdm_plan_result *r;
    const double *extra;      /* [n_segs of the previous pass] CPU taken from each compute segment */
    const tdm_plan_seg *prev; /* the previous pass's compute segments (NULL in the first) */
    int n_prev;
    double scale; /* compute time over the measured one (oversubscribed cores) */
    double t;     /* the compute thread's clock */
    double link_free;
    double grad_at;    /* when the last gradient collective was posted (NaN: none yet) */
    double grad_first; /* its group's first member's time alone, not yet slowed (grad_together) */
    int nb;
    int64_t *padded;
    double *ag_end; /* [nb] NaN until dispatched */
    int ag_dispatched;
    int met; /* the unit where the ranks last met in this step (-1: its start) */
    int seg_cap, coll_cap;
} sim;

/* Appends g to the pass's segments and moves the compute thread's clock to its end. */
static void push_seg(sim *s, tdm_plan_seg g) {
    tdm_plan_result *r = s->r;
    if (r->n_segs == s->seg_cap) {
        s->seg_cap = s->seg_cap ? 2 * s->seg_cap : 256;
        r->segs = tdm_xrealloc(r->segs, (size_t)s->seg_cap * sizeof *r->segs);
    }
    r->segs[r->n_segs++] = g;
    s->t = g.t1_us;
}

static void seg(sim *s, double dur, int unit, int backward, const char *what) {
    const double extra = s->extra ? s->extra[s->r->n_segs] : 0;
    dur *= s->scale;
    push_seg(s, (tdm_plan_seg){s->t, s->t + dur + extra, unit, backward, what, extra});
}

/* The share of its CPU-bound part a collective of alone-time d moving `bytes` runs at while compute
 * runs beside it: 1 without contention. */
static double busy_fraction(const tdm_plan_model *m, double bytes, double d) {
    if (!(m->cpu_us_per_mb > 0) || !(d > 0)) return 0;
    double rho = m->cpu_us_per_mb * bytes / 1e6 / d;
    return rho < 1 ? rho : 1;
}
static double speed_beside_compute(const tdm_plan_model *m, double rho) {
    if (m->speed_beside > 0) return m->speed_beside < 1 ? m->speed_beside : 1;
    return m->comm_share > 0 && m->comm_share < 1 && rho > 0 ? 1 / (1 - rho + rho / m->comm_share) : 1;
}

/* When a collective of alone-time d started at `start` ends: it runs at speed v (alone-time per
 * µs) while the previous pass's compute segments run, at 1 in the gaps between them. */
static double progress_end(const sim *s, double start, double d, double v) {
    if (v >= 1 || !s->prev) return start + d;
    double t = start, left = d;
    for (int i = 0; i < s->n_prev; i++) {
        const double a = s->prev[i].t0_us, b = s->prev[i].t1_us;
        if (b <= t) continue;
        if (a > t) {
            if (left <= a - t) return t + left;
            left -= a - t;
            t = a;
        }
        if (left <= (b - t) * v) return t + left / v;
        left -= (b - t) * v;
        t = b;
    }
    return t + left;
}

/* Posts a collective at `at`; it takes f times its time alone, plus `extra`. */
static double post_slowed(sim *s, int kind, int bucket, double bytes, double at, double f, double extra) {
    tdm_plan_result *r = s->r;
    if (r->n_colls == s->coll_cap) {
        s->coll_cap = s->coll_cap ? 2 * s->coll_cap : 64;
        r->colls = tdm_xrealloc(r->colls, (size_t)s->coll_cap * sizeof *r->colls);
    }
    double start = at > s->link_free ? at : s->link_free;
    double d = tdm_plan_coll_us(kind, bytes, s->c->dp, &s->c->link);
    double end = progress_end(s, start, d * f + extra, speed_beside_compute(s->m, busy_fraction(s->m, bytes, d)));
    s->link_free = end;
    r->colls[r->n_colls++] = (tdm_plan_coll){kind, bucket, bytes, at, start, end, 0};
    return end;
}

static double post(sim *s, int kind, int bucket, double bytes, double at) {
    return post_slowed(s, kind, bucket, bytes, at, 1, 0);
}

/* A bucket's gradient collective, posted now. Those posted at one instant (no compute between them: the buckets
 * left after the backward) run grad_together times as long as one by one; the group's first member is posted
 * before the group is known, so the second carries its share. */
static double post_grad(sim *s, int kind, int bucket, double bytes) {
    const double d = tdm_plan_coll_us(kind, bytes, s->c->dp, &s->c->link), f = s->m->grad_together;
    if (!(f > 1)) return post(s, kind, bucket, bytes, s->t);
    if (s->grad_at != s->t) { /* a new group, of one so far */
        s->grad_at = s->t, s->grad_first = d;
        return post(s, kind, bucket, bytes, s->t);
    }
    const double extra = (f - 1) * s->grad_first;
    s->grad_first = 0;
    return post_slowed(s, kind, bucket, bytes, s->t, f, extra);
}

/* all-gathers go out in forward order, bucket nb-1 first, until the first n are out */
static void dispatch_gathers(sim *s, int n) {
    double bytes_per = s->c->bf16_params ? 2.0 : 4.0;
    while (s->ag_dispatched < s->nb && s->ag_dispatched < n) {
        int b = s->nb - 1 - s->ag_dispatched++;
        s->ag_end[b] = post(s, TDM_PLAN_ALL_GATHER, b, (double)s->padded[b] * bytes_per, s->t);
    }
}

static void wait_until(sim *s, double t) {
    if (t > s->t) s->t = t;
}

/* Where the ranks may meet, at unit `u` (n_units: the backward's end): when they do (`meets`), the step waits for
 * the slowest rank's compute since they last met (s->met). The wait is a segment (TDM_PLAN_SEG_RANKS) at every
 * such point, empty where they do not meet, so that the passes' segments stay in step: the rank waits there while
 * the slowest computes, so collectives in flight move as beside compute, and nothing is charged to it. */
static void meet(sim *s, int u, int meets) {
    const double w = meets && s->c->dp > 1 ? tdm_plan_rank_wait_us(s->m, s->met, u) * s->scale : 0;
    if (meets) s->met = u;
    push_seg(s, (tdm_plan_seg){s->t, s->t + w, TDM_PLAN_SEG_RANKS, 0, "slowest rank", 0});
    s->r->rank_wait_us += w;
}

/* One pass of the schedule with the CPU taken per segment as given (extra, NULL: none). */
static void run_once(sim *s, const int *bucket_of, const int *ready_unit, const double *ready_frac) {
    const tdm_plan_model *m = s->m;
    const tdm_plan_config *c = s->c;
    const int nb = s->nb, U = m->n_units;
    const int grad_kind = c->distributed ? TDM_PLAN_REDUCE_SCATTER : TDM_PLAN_ALL_REDUCE;
    s->t = 0;
    s->link_free = 0;
    s->grad_at = NAN, s->grad_first = 0;
    s->ag_dispatched = 0;
    s->met = -1;
    s->r->rank_wait_us = 0;
    s->r->n_segs = s->r->n_colls = 0;
    for (int b = 0; b < nb; b++) s->ag_end[b] = NAN;
    unsigned char *waited = tdm_xcalloc((size_t)nb + 1, 1);
    double *rs_end = tdm_xmalloc((size_t)(nb + 1) * sizeof *rs_end);
    int gathers_overlapped = c->distributed && c->overlap_param && c->dp > 1;
    if (gathers_overlapped) dispatch_gathers(s, GATHER_PREFETCH); /* posted by the previous step's optimizer */
    seg(s, m->head_us, -1, 0, "head");
    int next_launch = 0;
    for (int mb = 0; mb < m->n_micro; mb++) {
        const int last = mb == m->n_micro - 1;
        for (int u = 0; u < U; u++) {
            if (gathers_overlapped && mb == 0)
                for (int i = 0; i < m->n_params; i++) {
                    if (m->params[i].unit != u || !m->params[i].trainable) continue;
                    int b = bucket_of[i];
                    if (waited[b]) continue;
                    dispatch_gathers(s, nb - b);
                    /* not done on arrival: it needs every rank, each of which arrives with its own compute */
                    const int meets = s->ag_end[b] > s->t;
                    wait_until(s, s->ag_end[b]);
                    meet(s, u, meets);
                    waited[b] = 1;
                    dispatch_gathers(s, nb - b + GATHER_PREFETCH);
                }
            seg(s, m->units[u].fwd_us, u, 0, "forward");
        }
        seg(s, m->fb_other_us, -1, 0, "loss");
        for (int u = U - 1; u >= 0; u--) {
            double done = 0; /* of the unit's backward: it is cut where a bucket becomes ready */
            while (last && c->overlap_grad && next_launch < nb && ready_unit[next_launch] >= u) {
                const double f = ready_unit[next_launch] == u ? ready_frac[next_launch] : 0;
                if (f > done) seg(s, m->units[u].bwd_us * (f - done), u, 1, "backward"), done = f;
                if (gathers_overlapped) dispatch_gathers(s, nb);
                rs_end[next_launch] = post_grad(s, grad_kind, next_launch, (double)s->padded[next_launch] * 4.0);
                next_launch++;
            }
            if (done < 1) seg(s, m->units[u].bwd_us * (1 - done), u, 1, "backward");
        }
    }
    for (; next_launch < nb; next_launch++) {
        if (gathers_overlapped) dispatch_gathers(s, nb);
        rs_end[next_launch] = post_grad(s, grad_kind, next_launch, (double)s->padded[next_launch] * 4.0);
    }
    for (int b = 0; b < nb; b++) wait_until(s, rs_end[b]);
    meet(s, U, 1);
    if (c->dp > 1 && m->agree_us > 0) { /* the rank whose gradient collectives completed last */
        push_seg(s, (tdm_plan_seg){s->t, s->t + m->agree_us, TDM_PLAN_SEG_RANKS, 0, "last rank's collectives", 0});
        s->r->rank_wait_us += m->agree_us;
    }
    if (gathers_overlapped)
        for (int b = 0; b < nb; b++) wait_until(s, s->ag_end[b]);
    seg(s, m->sync_us, -1, 0, "sync");
    seg(s, m->opt_us, -1, 0, "optimizer");
    if (c->distributed && !gathers_overlapped && c->dp > 1) {
        dispatch_gathers(s, nb);
        for (int b = 0; b < nb; b++) wait_until(s, s->ag_end[b]);
    }
    s->r->step_us = s->t;
    free(waited);
    free(rs_end);
}

/* Overlap of [a0, a1) with the compute segments (sorted, disjoint). */
static double overlap_compute(const tdm_plan_result *r, double a0, double a1) {
    double h = 0;
    for (int i = 0; i < r->n_segs; i++) {
        if (r->segs[i].unit == TDM_PLAN_SEG_RANKS) continue;
        double lo = r->segs[i].t0_us > a0 ? r->segs[i].t0_us : a0;
        double hi = r->segs[i].t1_us < a1 ? r->segs[i].t1_us : a1;
        if (hi > lo) h += hi - lo;
    }
    return h;
}

/* The times some collective of r is in flight (posted and not done): merged [t0, t1) pairs into *fly
 * (realloc'd), their number returned. */
static int in_flight(const tdm_plan_result *r, double **fly) {
    double *f = tdm_xrealloc(*fly, (size_t)(2 * r->n_colls + 2) * sizeof *f);
    int n = 0;
    for (int k = 0; k < r->n_colls; k++) f[2 * n] = r->colls[k].post_us, f[2 * n + 1] = r->colls[k].end_us, n++;
    for (int i = 1; i < n; i++) /* by post: insertion sort, the collectives come nearly in order */
        for (int j = i; j > 0 && f[2 * j - 2] > f[2 * j]; j--) {
            double a = f[2 * j], b = f[2 * j + 1];
            f[2 * j] = f[2 * j - 2], f[2 * j + 1] = f[2 * j - 1];
            f[2 * j - 2] = a, f[2 * j - 1] = b;
        }
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && f[2 * i] <= f[2 * m - 1]) {
            if (f[2 * i + 1] > f[2 * m - 1]) f[2 * m - 1] = f[2 * i + 1];
        } else {
            f[2 * m] = f[2 * i], f[2 * m + 1] = f[2 * i + 1], m++;
        }
    }
    *fly = f;
    return m;
}

int tdm_plan_simulate(const tdm_plan_model *m, const tdm_plan_config *c, tdm_plan_result *r, tdm_error *err) {
    memset(r, 0, sizeof *r);
    if (!(c->link.gbps > 0) || !(c->link.alpha_us >= 0))
        return tdm_errorf(err,
                          "link %g Gbit/s, latency %g us: expected a bandwidth above 0 and a latency of at least 0",
                          c->link.gbps, c->link.alpha_us);
    if (c->overlap_param && !(c->overlap_grad && c->distributed))
        return tdm_errorf(err, "--overlap-param-gather: requires --overlap-grad-reduce and --use-distributed-optimizer "
                               "(as tandem train)");
    if (m->n_micro < 1)
        return tdm_errorf(err, "the model has %d micro-batches a step: expected at least 1", m->n_micro);
    sim s = {.m = m, .c = c, .r = r, .scale = 1};
    if (m->cores > 0) {
        double now = c->dp > m->cores ? (double)c->dp / m->cores : 1;
        double then = m->baseline.dp > m->cores ? (double)m->baseline.dp / m->cores : 1;
        s.scale = now / then;
    }
    int *bucket_of = NULL;
    int nb = tdm_plan_buckets(m, c, &s.padded, &bucket_of, err);
    if (nb < 0) return -1;
    /* A bucket is ready in the backward of the lowest unit among its parameters, at the share of that unit's
     * backward its parameters there end (ready_frac): a unit's gradients come in reverse registration order,
     * each after its own kernels (src/model), taken to cost in proportion to the parameter's elements. */
    int *ready_unit = tdm_xmalloc((size_t)nb * sizeof *ready_unit);
    double *ready_frac = tdm_xcalloc((size_t)nb + 1, sizeof *ready_frac);
    for (int b = 0; b < nb; b++) ready_unit[b] = m->n_units;
    for (int i = 0; i < m->n_params; i++)
        if (bucket_of[i] >= 0 && m->params[i].unit < ready_unit[bucket_of[i]])
            ready_unit[bucket_of[i]] = m->params[i].unit;
    {
        double *total = tdm_xcalloc((size_t)m->n_units + 1, sizeof *total),
               *done = tdm_xcalloc((size_t)m->n_units + 1, sizeof *done);
        for (int i = 0; i < m->n_params; i++)
            if (m->params[i].unit >= 0 && m->params[i].unit < m->n_units)
                total[m->params[i].unit] += m->params[i].numel;
        for (int i = m->n_params - 1; i >= 0; i--) {
            const int u = m->params[i].unit, b = bucket_of[i];
            if (u < 0 || u >= m->n_units) continue;
            done[u] += m->params[i].numel;
            if (b >= 0 && u == ready_unit[b] && total[u] > 0 && done[u] / total[u] > ready_frac[b])
                ready_frac[b] = done[u] / total[u];
        }
        for (int b = 0; b < nb; b++)
            if (ready_unit[b] < m->n_units && !(ready_frac[b] > 0)) ready_frac[b] = 1;
        free(total);
        free(done);
    }
    s.nb = nb;
    s.ag_end = tdm_xmalloc((size_t)(nb + 1) * sizeof *s.ag_end);
    /* The CPU that driving the collectives takes from the compute they overlap, found by a few
     * passes: each pass charges every segment for what was in flight beside it in the last one,
     * and (comm_share) slows each collective where the last one's compute ran beside it. */
    double *extra = NULL;
    tdm_plan_seg *prev = NULL;
    const int given_slow = m->speed_beside > 0 && m->speed_beside < 1; /* tandem doctor's speed beside compute */
    const int contended = (m->comm_share > 0 && m->comm_share < 1) || given_slow;
    const int charged = m->cpu_us_per_mb > 0 || given_slow || m->lost_share > 0;
    double *fly = NULL; /* lost_share: the times some collective is in flight, [t0, t1) pairs in order */
    for (int pass = 0; pass < (charged ? (contended ? 16 : 8) : 1); pass++) {
        s.extra = extra;
        run_once(&s, bucket_of, ready_unit, ready_frac);
        if (!charged) break;
        double *next = tdm_xcalloc((size_t)r->n_segs + 1, sizeof *next);
        /* each compute segment is charged rate x its overlap with [t0, t1): a share of the time anything is in flight
         * (lost_share), else each collective's CPU per µs of its flight */
        const int nf = m->lost_share > 0 ? in_flight(r, &fly) : r->n_colls;
        for (int k = 0; k < nf; k++) {
            double t0, t1, rate;
            if (m->lost_share > 0) {
                t0 = fly[2 * k], t1 = fly[2 * k + 1], rate = m->lost_share;
            } else {
                const tdm_plan_coll *cl = &r->colls[k];
                const double dur = cl->end_us - cl->start_us;
                if (!(dur > 0)) continue;
                /* CPU µs per µs in flight beside compute: the busy fraction at its speed there */
                const double d = tdm_plan_coll_us(cl->kind, cl->bytes, c->dp, &c->link),
                             rho = busy_fraction(m, cl->bytes, d);
                t0 = cl->start_us, t1 = cl->end_us;
                rate = contended ? rho * speed_beside_compute(m, rho) : m->cpu_us_per_mb * cl->bytes / 1e6 / dur;
            }
            for (int i = 0; i < r->n_segs; i++) {
                const tdm_plan_seg *g = &r->segs[i];
                const double lo = g->t0_us > t0 ? g->t0_us : t0, hi = g->t1_us < t1 ? g->t1_us : t1;
                if (hi > lo && g->unit != TDM_PLAN_SEG_RANKS) next[i] += (hi - lo) * rate;
            }
        }
        free(extra);
        extra = next;
        if (contended) {
            prev = tdm_xrealloc(prev, (size_t)(r->n_segs + 1) * sizeof *prev);
            memcpy(prev, r->segs, (size_t)r->n_segs * sizeof *prev);
            s.prev = prev, s.n_prev = r->n_segs;
        }
    }
    free(prev);
    free(fly);
    r->cpu_taken_us = 0;
    if (extra)
        for (int i = 0; i < r->n_segs; i++) r->cpu_taken_us += extra[i];
    free(extra);
    for (int i = 0; i < r->n_segs; i++)
        if (r->segs[i].unit != TDM_PLAN_SEG_RANKS) r->compute_us += r->segs[i].t1_us - r->segs[i].t0_us;
    for (int k = 0; k < r->n_colls; k++) {
        tdm_plan_coll *cl = &r->colls[k];
        cl->hidden_us = overlap_compute(r, cl->start_us, cl->end_us);
        r->comm_us += cl->end_us - cl->start_us; /* FIFO: the collectives never overlap each other */
        r->hidden_us += cl->hidden_us;
    }
    r->exposed_us = r->comm_us - r->hidden_us;
    r->n_buckets = nb;
    r->bucket_padded = s.padded;
    free(s.ag_end);
    free(ready_unit);
    free(ready_frac);
    free(bucket_of);
    return 0;
}

/* ---- calibration -------------------------------------------------------------------------- */

/* Sets m's compute to `base` (the units' times, then head, loss, sync, optimizer) times f. */
static void set_compute(tdm_plan_model *m, const tdm_plan_unit *units, const double *other, double f) {
    for (int u = 0; u < m->n_units; u++) {
        m->units[u].fwd_us = units[u].fwd_us * f;
        m->units[u].bwd_us = units[u].bwd_us * f;
    }
    m->head_us = other[0] * f, m->fb_other_us = other[1] * f, m->sync_us = other[2] * f, m->opt_us = other[3] * f;
    m->apart_scale = f;
}

static int baseline_step(const tdm_plan_model *m, double *step_us, tdm_error *err) {
    tdm_plan_result r;
    if (tdm_plan_simulate(m, &m->baseline, &r, err) != 0) return -1;
    *step_us = r.step_us;
    tdm_plan_result_free(&r);
    return 0;
}

int tdm_plan_calibrate(tdm_plan_model *m, double measured_us, double *factor, tdm_error *err) {
    if (!(measured_us > 0) || !isfinite(measured_us))
        return tdm_errorf(err, "measured baseline step %g ms: expected a time above 0", measured_us / 1e3);
    tdm_plan_unit *units = tdm_xmalloc((size_t)(m->n_units + 1) * sizeof *units);
    memcpy(units, m->units, (size_t)m->n_units * sizeof *units);
    const double other[4] = {m->head_us, m->fb_other_us, m->sync_us, m->opt_us};
    /* The step grows with the compute: bisect the factor on a log scale between the bounds. */
    double lo = 0.01, hi = 100, at_lo, at_hi;
    int rc = 0;
    set_compute(m, units, other, lo);
    if (baseline_step(m, &at_lo, err) != 0) goto fail;
    set_compute(m, units, other, hi);
    if (baseline_step(m, &at_hi, err) != 0) goto fail;
    if (!(measured_us >= at_lo && measured_us <= at_hi)) {
        rc = tdm_errorf(err,
                        "measured baseline step %.3f ms: the model's baseline takes %.3f to %.3f ms with its compute "
                        "scaled from 1/100 to 100 times the trace's; expected a run of the traced setting",
                        measured_us / 1e3, at_lo / 1e3, at_hi / 1e3);
        goto fail;
    }
    for (int i = 0; i < 60 && hi / lo > 1 + 1e-9; i++) {
        double mid = sqrt(lo * hi), at;
        set_compute(m, units, other, mid);
        if (baseline_step(m, &at, err) != 0) goto fail;
        if (at < measured_us) lo = mid;
        else hi = mid;
    }
    *factor = sqrt(lo * hi);
    set_compute(m, units, other, *factor);
    free(units);
    return 0;
fail:
    set_compute(m, units, other, 1);
    free(units);
    return rc ? rc : -1;
}

/* ---- candidate flags ---------------------------------------------------------------------- */

static int num_arg(const char *flag, const char *v, double lo, double hi, double *out, tdm_error *err) {
    char *end;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || end == v || *end || errno || !isfinite(x) || x < lo || x > hi)
        return tdm_errorf(err, "%s %s: expected a number from %g to %g", flag, v ? v : "(missing)", lo, hi);
    *out = x;
    return 0;
}

int tdm_plan_parse_flags(const char *flags, tdm_plan_config *c, tdm_error *err) {
    char buf[1024];
    if (strlen(flags) >= sizeof buf)
        return tdm_errorf(err, "candidate flags: longer than %d characters", (int)sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", flags);
    char *save = NULL;
    for (char *w = strtok_r(buf, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save)) {
        char *v = NULL;
        char *eq = strchr(w, '=');
        if (eq) *eq = '\0', v = eq + 1;
#define NEXT() (v ? v : (v = strtok_r(NULL, " \t\n", &save)))
        double x;
        if (!strcmp(w, "--overlap-grad-reduce")) c->overlap_grad = 1;
        else if (!strcmp(w, "--no-overlap-grad-reduce")) c->overlap_grad = 0;
        else if (!strcmp(w, "--overlap-param-gather")) c->overlap_param = 1;
        else if (!strcmp(w, "--no-overlap-param-gather")) c->overlap_param = 0;
        else if (!strcmp(w, "--use-distributed-optimizer")) c->distributed = 1;
        else if (!strcmp(w, "--no-distributed-optimizer")) c->distributed = 0;
        else if (!strcmp(w, "--bf16")) c->bf16_params = 1;
        else if (!strcmp(w, "--ddp-bucket-size")) {
            if (num_arg(w, NEXT(), 1, 2147483647.0, &x, err)) return -1;
            c->bucket_size = (int64_t)x, c->num_buckets = 0, c->given_cut = 0;
        } else if (!strcmp(w, "--ddp-num-buckets")) {
            if (num_arg(w, NEXT(), 1, 1e6, &x, err)) return -1;
            c->num_buckets = (int)x, c->bucket_size = 0, c->given_cut = 0;
        } else if (!strcmp(w, "--dp") || !strcmp(w, "--data-parallel-size")) {
            if (num_arg(w, NEXT(), 1, 65536, &x, err)) return -1;
            c->dp = (int)x;
        } else if (!strcmp(w, "--link-gbps")) {
            if (num_arg(w, NEXT(), 1e-6, 1e6, &x, err)) return -1;
            c->link.gbps = x;
        } else if (!strcmp(w, "--link-latency-us")) {
            if (num_arg(w, NEXT(), 0, 1e9, &x, err)) return -1;
            c->link.alpha_us = x;
        } else if (!strcmp(w, "--link-algo")) {
            const char *a = NEXT();
            if (!a || (strcmp(a, "ring") && strcmp(a, "tree")))
                return tdm_errorf(err, "--link-algo %s: expected ring or tree", a ? a : "(missing)");
            c->link.tree = !strcmp(a, "tree");
        } else if (!strcmp(w, "--link-scale")) { /* the link so far (the fitted one) x times as fast */
            if (num_arg(w, NEXT(), 1e-6, 1e6, &x, err)) return -1;
            c->link.gbps *= x;
        } else {
            return tdm_errorf(
                err,
                "candidate flag '%s': expected --overlap-grad-reduce, --overlap-param-gather (or their "
                "--no- forms), --ddp-bucket-size N, --ddp-num-buckets N, --dp N, "
                "--use-distributed-optimizer, --bf16, --link-gbps X, --link-scale X, --link-latency-us X or "
                "--link-algo ring|tree",
                w);
        }
#undef NEXT
    }
    return 0;
}

void tdm_plan_config_flags(const tdm_plan_config *c, const tdm_plan_config *b, char *out, int cap) {
    int n = 0;
    out[0] = '\0';
#define ADD(...)                                                                                                       \
    do {                                                                                                               \
        if (n < cap) n += snprintf(out + n, (size_t)(cap - n), __VA_ARGS__);                                           \
    } while (0)
    if (c->overlap_grad != b->overlap_grad)
        ADD("%s--%soverlap-grad-reduce", n ? " " : "", c->overlap_grad ? "" : "no-");
    if (c->overlap_param != b->overlap_param)
        ADD("%s--%soverlap-param-gather", n ? " " : "", c->overlap_param ? "" : "no-");
    if (c->distributed != b->distributed)
        ADD("%s--%s", n ? " " : "", c->distributed ? "use-distributed-optimizer" : "no-distributed-optimizer");
    if (c->bucket_size != b->bucket_size || c->num_buckets != b->num_buckets) {
        if (c->num_buckets > 0) ADD("%s--ddp-num-buckets %d", n ? " " : "", c->num_buckets);
        else if (c->bucket_size > 0) ADD("%s--ddp-bucket-size %lld", n ? " " : "", (long long)c->bucket_size);
    }
    if (c->dp != b->dp) ADD("%s--dp %d", n ? " " : "", c->dp);
    if (c->link.gbps != b->link.gbps) ADD("%s--link-gbps %g", n ? " " : "", c->link.gbps);
    if (c->link.alpha_us != b->link.alpha_us) ADD("%s--link-latency-us %g", n ? " " : "", c->link.alpha_us);
    if (c->link.tree != b->link.tree) ADD("%s--link-algo %s", n ? " " : "", c->link.tree ? "tree" : "ring");
#undef ADD
}

void tdm_plan_confirm_flags(const tdm_plan_model *m, const tdm_plan_config *best, char *base, int base_cap, char *cand,
                            int cand_cap) {
    tdm_plan_config c = *best;
    int n = 0;
    base[0] = '\0';
    if (m->baseline.overlap_grad && !c.overlap_grad && n < base_cap)
        n += snprintf(base + n, (size_t)(base_cap - n), "--overlap-grad-reduce"), c.overlap_grad = 1;
    if (m->baseline.overlap_param && !c.overlap_param && n < base_cap)
        n += snprintf(base + n, (size_t)(base_cap - n), "%s--overlap-param-gather", n ? " " : ""), c.overlap_param = 1;
    if (m->baseline.bucket_size > 0 && c.num_buckets > 0) /* as tdm_plan_buckets takes a count */
        c.bucket_size = (tdm_plan_trainable(m) + c.num_buckets - 1) / c.num_buckets, c.num_buckets = 0;
    tdm_plan_config_flags(&c, &m->baseline, cand, cand_cap);
}
