/* plan_torch.c - a step model from a PyTorch DDP trace (Kineto JSON, through runs/trace.h's
 * reader): the compute timeline, each gradient bucket's ready time and bytes, the link fitted
 * to the all-reduces (see plan.h and docs/plan.md, "From a PyTorch trace"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "plan/plan.h"
#include "runs/trace.h"

/* pieces a measured bucket is cut into: the grain at which another bucket size can be cut */
#define PIECES      64
#define MAX_BUCKETS 1024

/* One step as measured, µs from the step's first compute kernel. */
typedef struct tstep {
    double fwd, tail, sync, opt, head; /* head: the step's CPU time minus its device window */
    double busy, window;               /* the compute kernels' union; first compute kernel to last */
    double ready[MAX_BUCKETS];         /* from the backward's start, non-decreasing */
    double own[MAX_BUCKETS];           /* the all-reduce kernel's time */
    int64_t bytes[MAX_BUCKETS];
    int nb;
} tstep;

static int is_compute(const tdm_runs_span *s) { return (s->flags & TDM_RUNS_F_DEVICE) && s->kind == TDM_RUNS_COMPUTE; }

/* The thread a device span was launched from, -1 when unknown. */
static int launch_lane(const tdm_runs_trace *t, const tdm_runs_span *s) {
    return s->launch >= 0 ? t->spans[s->launch].lane : -1;
}

/* Measures step si, whose compute kernels are spans idx[0..n) in ts order; 0 when it has a
 * backward and at least one gradient all-reduce. */
static int measure_step(const tdm_runs_trace *t, int64_t si, const int64_t *idx, int64_t n, tstep *o, int *group) {
    memset(o, 0, sizeof *o);
    double s0 = INFINITY, cend = -INFINITY, first_ts = INFINITY;
    int main_lane = -1;
    for (int64_t j = 0; j < n; j++) {
        const tdm_runs_span *s = &t->spans[idx[j]];
        if (s->step != si || !is_compute(s)) continue;
        if (s->ts < first_ts) first_ts = s->ts, main_lane = launch_lane(t, s);
        if (s->ts < s0) s0 = s->ts;
        if (s->ts + s->dur > cend) cend = s->ts + s->dur;
    }
    if (!isfinite(s0)) return -1;
    double u0 = NAN, u1 = NAN; /* the union of the kernels, in ts order */
    for (int64_t j = 0; j < n; j++) {
        const tdm_runs_span *s = &t->spans[idx[j]];
        if (isfinite(u0) && s->ts <= u1) {
            if (s->ts + s->dur > u1) u1 = s->ts + s->dur;
            continue;
        }
        if (isfinite(u0)) o->busy += u1 - u0;
        u0 = s->ts, u1 = s->ts + s->dur;
    }
    if (isfinite(u0)) o->busy += u1 - u0;
    o->window = cend - s0;
    double b0 = INFINITY, bend = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        const tdm_runs_span *s = &t->spans[idx[j]];
        if (s->step != si || !is_compute(s)) continue;
        int lane = launch_lane(t, s);
        if (lane < 0 || lane == main_lane) continue;
        if (s->ts < b0) b0 = s->ts;
        if (s->ts + s->dur > bend) bend = s->ts + s->dur;
    }
    if (!isfinite(b0)) return -1; /* no kernel from another thread: no autograd backward seen */
    double opt0 = cend, ar_end = -INFINITY, prev = b0;
    for (int64_t j = 0; j < n; j++) {
        const tdm_runs_span *s = &t->spans[idx[j]];
        if (s->step == si && is_compute(s) && launch_lane(t, s) == main_lane && s->ts >= bend && s->ts < opt0)
            opt0 = s->ts;
    }
    for (int64_t k = 0; k < t->n_colls; k++) {
        const tdm_runs_coll *c = &t->colls[k];
        if (c->step != si || c->kind != TDM_RUNS_ALL_REDUCE || c->bytes <= 0 || o->nb >= MAX_BUCKETS) continue;
        /* DDP's reducer launches the buckets from autograd's thread: one from the step's thread is not a gradient's */
        if (c->span >= 0 && launch_lane(t, &t->spans[c->span]) == main_lane) continue;
        /* ready: the end of the last compute kernel launched before the all-reduce was */
        double r = NAN;
        if (isfinite(c->launch_ts)) {
            double best = -INFINITY;
            for (int64_t j = 0; j < n; j++) {
                const tdm_runs_span *s = &t->spans[idx[j]];
                if (s->step != si || !is_compute(s) || s->launch < 0) continue;
                if (t->spans[s->launch].ts <= c->launch_ts && s->ts + s->dur > best) best = s->ts + s->dur;
            }
            if (isfinite(best)) r = best;
        }
        if (!isfinite(r)) r = c->ts;
        if (r > bend) r = bend;
        if (r < prev) r = prev;
        prev = r;
        o->ready[o->nb] = r - b0;
        o->own[o->nb] = c->dur;
        o->bytes[o->nb] = c->bytes;
        o->nb++;
        if (c->ts + c->dur > ar_end) ar_end = c->ts + c->dur;
        if (c->group_size > 0) *group = c->group_size;
    }
    if (o->nb == 0) return -1;
    o->fwd = b0 - s0;
    o->tail = bend - b0 - o->ready[o->nb - 1];
    double wait_end = ar_end > bend ? ar_end : bend;
    o->sync = opt0 > wait_end ? opt0 - wait_end : 0;
    o->opt = cend - opt0;
    o->head = t->steps[si].dur - (cend - s0);
    return 0;
}

/* The compute busy intervals and collectives of step si, from its first compute kernel plus
 * `at` (the model's head, which the replay puts first). */
static void measured_timeline(const tdm_runs_trace *t, int64_t si, double at, tdm_plan_model *m) {
    double s0 = INFINITY;
    int main_lane = -1;
    for (int64_t i = 0; i < t->n_spans; i++)
        if (t->spans[i].step == si && is_compute(&t->spans[i]) && t->spans[i].ts < s0)
            s0 = t->spans[i].ts, main_lane = launch_lane(t, &t->spans[i]);
    s0 -= at;
    int cap = 0;
    double c0 = NAN, c1 = NAN;
    int c_bwd = 0;
    for (int64_t i = 0; i <= t->n_spans; i++) { /* spans are sorted by ts: merge touching kernels */
        const tdm_runs_span *s = i < t->n_spans ? &t->spans[i] : NULL;
        int comp = s && s->step == si && is_compute(s);
        int comm = s && s->step == si && s->coll >= 0 && (s->flags & TDM_RUNS_F_DEVICE);
        if (!comp && !comm && s) continue;
        if (isfinite(c0) && (!s || (comp && s->ts > c1))) {
            if (m->n_measured == cap) {
                cap = cap ? 2 * cap : 256;
                m->measured = tdm_xrealloc(m->measured, (size_t)cap * sizeof *m->measured);
            }
            m->measured[m->n_measured++] = (tdm_plan_seg){c0 - s0, c1 - s0, 0, c_bwd, "compute", 0};
            c0 = NAN;
        }
        if (!s) break;
        if (comp) {
            if (!isfinite(c0)) c0 = s->ts, c1 = s->ts + s->dur, c_bwd = launch_lane(t, s) != main_lane;
            else if (s->ts + s->dur > c1) c1 = s->ts + s->dur;
        } else {
            if (m->n_measured == cap) {
                cap = cap ? 2 * cap : 256;
                m->measured = tdm_xrealloc(m->measured, (size_t)cap * sizeof *m->measured);
            }
            m->measured[m->n_measured++] = (tdm_plan_seg){s->ts - s0, s->ts + s->dur - s0, -1, 2, "comm", 0};
        }
    }
    m->measured_one_us = 0;
    for (int i = 0; i < m->n_measured; i++)
        if (m->measured[i].t1_us > m->measured_one_us) m->measured_one_us = m->measured[i].t1_us;
}

int tdm_plan_from_torch(const char *path, tdm_plan_link link, double cpu_us_per_mb, tdm_plan_model *m, char *notes,
                        int notes_cap, tdm_error *err) {
    memset(m, 0, sizeof *m);
    tdm_runs_set set;
    tdm_runs_set_init(&set);
    int rc = tdm_runs_read(&set, path, err);
    if (rc == 0) rc = tdm_plan_from_runs(&set, path, link, cpu_us_per_mb, m, notes, notes_cap, err);
    tdm_runs_set_free(&set);
    return rc;
}

int tdm_plan_from_runs(const struct tdm_runs_set *runs, const char *path, tdm_plan_link link, double cpu_us_per_mb,
                       tdm_plan_model *m, char *notes, int notes_cap, tdm_error *err) {
    memset(m, 0, sizeof *m);
    m->measured_step_us = NAN;
    if (notes && notes_cap > 0) notes[0] = '\0';
    const tdm_runs_set set = *runs;
    int rc = -1;
    tstep *st = NULL;
    int64_t *start = NULL, *idx = NULL;
    if (set.n == 0 && set.n_acomm > 0) {
        tdm_errorf(err,
                   "%s: Ascend communication operators only: no step timeline, and nothing says which operator reduces "
                   "a gradient bucket; expected a PyTorch (Kineto) trace",
                   path);
        goto out;
    }
    if (set.n == 0) {
        tdm_errorf(err, "%s: no trace found; expected a PyTorch profiler trace (Kineto JSON) or tandem's trace.json",
                   path);
        goto out;
    }
    const tdm_runs_trace *t = set.traces[0];
    if (t->format == TDM_RUNS_FMT_TANDEM) {
        tdm_errorf(err,
                   "%s: tandem's own trace: --model DIR is required with it (the run's config.json: the parameters "
                   "the buckets are cut from)",
                   t->path);
        goto out;
    }
    if (t->format == TDM_RUNS_FMT_ASCEND_TIMELINE || t->format == TDM_RUNS_FMT_ASCEND_STEPS) {
        tdm_errorf(err,
                   "%s: an Ascend trace: its readers give steps and communication operators, but not which operator "
                   "reduces a gradient bucket nor when its gradients were ready; expected a PyTorch (Kineto) trace",
                   t->path);
        goto out;
    }
    if (!t->has_device) {
        tdm_errorf(err,
                   "%s: no GPU kernel in the trace; expected a PyTorch DDP trace recorded with CUDA activities "
                   "(NCCL all-reduce kernels)",
                   t->path);
        goto out;
    }
    if (t->whole_trace_step || t->n_steps == 0) {
        tdm_errorf(err, "%s: no ProfilerStep#N annotation; expected a trace of torch.profiler with a schedule (steps)",
                   t->path);
        goto out;
    }
    int any_ar = 0;
    for (int64_t k = 0; k < t->n_colls; k++) any_ar |= t->colls[k].kind == TDM_RUNS_ALL_REDUCE;
    if (!any_ar) {
        tdm_errorf(err,
                   "%s: no NCCL all-reduce kernel in the trace; expected a PyTorch DDP trace whose gradient buckets "
                   "are all-reduced",
                   t->path);
        goto out;
    }
    if (set.n > 1)
        tdm_plan_note(notes, notes_cap, "%d traces read: the model is built from the first, %s", set.n, t->label);

    st = tdm_xcalloc((size_t)t->n_steps, sizeof *st);
    /* each step's compute kernels, in ts order (a counting sort by step) */
    start = tdm_xcalloc((size_t)t->n_steps + 1, sizeof *start);
    for (int64_t i = 0; i < t->n_spans; i++)
        if (is_compute(&t->spans[i]) && t->spans[i].step >= 0 && t->spans[i].step < t->n_steps)
            start[t->spans[i].step + 1]++;
    for (int64_t si = 0; si < t->n_steps; si++) start[si + 1] += start[si];
    idx = tdm_xmalloc((size_t)start[t->n_steps] * sizeof *idx + 1);
    int64_t *fill = tdm_xcalloc((size_t)t->n_steps + 1, sizeof *fill);
    for (int64_t i = 0; i < t->n_spans; i++)
        if (is_compute(&t->spans[i]) && t->spans[i].step >= 0 && t->spans[i].step < t->n_steps)
            idx[start[t->spans[i].step] + fill[t->spans[i].step]++] = i;
    free(fill);
    int group = -1, n_ok = 0, ref = -1, skipped = 0;
    for (int64_t si = 0; si < t->n_steps; si++) {
        if (measure_step(t, si, idx + start[si], start[si + 1] - start[si], &st[si], &group) != 0) {
            st[si].nb = 0;
            skipped++;
            continue;
        }
        if (ref < 0) ref = (int)si;
        int same = st[si].nb == st[ref].nb;
        for (int b = 0; same && b < st[si].nb; b++) same = st[si].bytes[b] == st[ref].bytes[b];
        if (!same) {
            st[si].nb = 0;
            skipped++;
            continue;
        }
        n_ok++;
    }
    if (n_ok == 0) {
        tdm_errorf(err,
                   "%s: no step with both an autograd backward (kernels launched from a second thread) and a "
                   "gradient all-reduce of known size; expected a PyTorch DDP training trace",
                   t->path);
        goto out;
    }
    if (skipped)
        tdm_plan_note(notes, notes_cap,
                      "%d step(s) left out: no backward or all-reduce in them, or buckets other than the first step's",
                      skipped);
    const tstep *r0 = &st[ref];
    const int nb = r0->nb;
    tstep mean;
    memset(&mean, 0, sizeof mean);
    double step_sum = 0;
    for (int64_t si = 0; si < t->n_steps; si++) {
        if (st[si].nb == 0) continue;
        mean.fwd += st[si].fwd / n_ok, mean.tail += st[si].tail / n_ok, mean.sync += st[si].sync / n_ok;
        mean.opt += st[si].opt / n_ok, mean.head += st[si].head / n_ok;
        mean.busy += st[si].busy / n_ok, mean.window += st[si].window / n_ok;
        for (int b = 0; b < nb; b++) mean.ready[b] += st[si].ready[b] / n_ok, mean.own[b] += st[si].own[b] / n_ok;
        step_sum += t->steps[si].dur;
    }
    m->measured_step_us = step_sum / n_ok;
    m->n_steps_measured = n_ok;
    m->n_micro = 1;
    m->head_us = mean.head > 0 ? mean.head : 0;
    m->sync_us = mean.sync;
    m->opt_us = mean.opt;
    /* units: 0 holds the forward and the backward after the last bucket; then PIECES units per
     * bucket, the last bucket's first: the backward runs them from the highest down */
    const int U = 1 + nb * PIECES;
    m->n_units = U;
    m->units = tdm_xcalloc((size_t)U, sizeof *m->units);
    m->n_params = U - 1;
    m->params = tdm_xcalloc((size_t)U, sizeof *m->params);
    m->given_buckets = tdm_xcalloc((size_t)nb, sizeof *m->given_buckets);
    m->n_given_buckets = nb;
    snprintf(m->units[0].name, sizeof m->units[0].name, "forward");
    m->units[0].fwd_us = mean.fwd;
    m->units[0].bwd_us = mean.tail > 0 ? mean.tail : 0;
    for (int b = 0; b < nb; b++) {
        int64_t elems = (r0->bytes[b] + 3) / 4; /* the simulation moves 4-byte gradients */
        m->given_buckets[b] = elems;
        double d = (mean.ready[b] - (b ? mean.ready[b - 1] : 0)) / PIECES;
        for (int k = 0; k < PIECES; k++) {
            int u = U - 1 - (b * PIECES + k);
            snprintf(m->units[u].name, sizeof m->units[u].name, "bucket%d.%d", b, k);
            m->units[u].bwd_us = d > 0 ? d : 0;
            m->params[u - 1] = (tdm_plan_param){elems / PIECES + (k < elems % PIECES), u, 1};
        }
    }
    tdm_plan_config *c = &m->baseline;
    c->dp = group > 0 ? group : (t->world_size > 0 ? (int)t->world_size : 2);
    c->overlap_grad = 1;
    c->given_cut = 1;
    c->link = link;
    m->cpu_us_per_mb = cpu_us_per_mb >= 0 ? cpu_us_per_mb : 0;
    m->measured_cpu_us_per_mb = NAN;
    for (int64_t si = t->n_steps - 1; si >= 0; si--) /* the last step measured */
        if (st[si].nb) {
            measured_timeline(t, si, m->head_us, m);
            break;
        }

    double x[MAX_BUCKETS], w[MAX_BUCKETS];
    for (int b = 0; b < nb; b++)
        tdm_plan_coll_factors(TDM_PLAN_ALL_REDUCE, (double)m->given_buckets[b] * 4.0, c->dp, &c->link, &x[b], &w[b]);
    int alpha_given = link.alpha_us >= 0, gbps_given = link.gbps > 0;
    if (!alpha_given) c->link.alpha_us = 0;
    tdm_plan_fit_link(x, w, mean.own, nb, &c->link, alpha_given, gbps_given);

    int64_t total = 0;
    for (int b = 0; b < nb; b++) total += r0->bytes[b];
    tdm_plan_note(
        notes, notes_cap,
        "PyTorch DDP trace (%s): %d step(s), group size %d, %d gradient all-reduce bucket(s) of %.4g MB in all, "
        "overlap-grad-reduce on (DDP)",
        t->label, n_ok, c->dp, nb, total / 1e6);
    tdm_plan_note(notes, notes_cap,
                  "forward %.3f ms, backward %.3f ms, from the backward's end or the last all-reduce to the optimizer "
                  "%.3f ms, optimizer %.3f ms, outside the device window %.3f ms (means)",
                  mean.fwd / 1e3, (mean.ready[nb - 1] + mean.tail) / 1e3, mean.sync / 1e3, mean.opt / 1e3,
                  m->head_us / 1e3);
    tdm_plan_note(
        notes, notes_cap,
        "compute kernels busy %.3f ms of the %.3f ms device window (the rest: the GPU waiting for the CPU or an "
        "all-reduce; the model keeps it as measured)",
        mean.busy / 1e3, mean.window / 1e3);
    tdm_plan_note(
        notes, notes_cap,
        "a bucket is ready at the end of the last compute kernel launched before its all-reduce; other bucket "
        "sizes interpolate the ready time over the measured buckets' cumulative bytes");
    tdm_plan_note(notes, notes_cap, "CPU cost of driving collectives: %.4g us per MB (%s)", m->cpu_us_per_mb,
                  cpu_us_per_mb >= 0 ? "given" : "GPU collectives: none taken from compute");
    tdm_plan_note(notes, notes_cap, "link: %.4g Gbit/s (%s), latency %.4g us per %s step (%s), from %d all-reduce(s)",
                  c->link.gbps, gbps_given ? "given" : "fitted", c->link.alpha_us, c->link.tree ? "tree" : "ring",
                  alpha_given ? "given" : "fitted", nb);
    rc = 0;
out:
    free(st);
    free(start);
    free(idx);
    if (rc != 0) tdm_plan_model_free(m);
    return rc;
}
