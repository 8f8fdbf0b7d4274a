/* plan_trace.c - a step model from tandem's own trace (prof/trace.h's reader): per-unit compute,
 * the fixed parts of the step, the baseline's settings and the link fitted to its collectives
 * (see plan.h and docs/plan.md). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/json.h"
#include "plan/plan.h"
#include "prof/prof.h"
#include "prof/trace.h"

/* tandem writes traces of a few MB; a bound keeps a wrong file from taking the memory */
#define PLAN_TRACE_MAX ((size_t)2 << 30)
/* a collective with compute beside it for less than this share of its flight flew alone of compute */
#define CLEAR_BESIDE   0.05

void tdm_plan_note(char *notes, int cap, const char *fmt, ...) {
    if (!notes || cap <= 0) return;
    size_t n = strlen(notes);
    if ((int)n >= cap - 1) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notes + n, (size_t)cap - n, fmt, ap);
    va_end(ap);
    n = strlen(notes);
    if ((int)n < cap - 1) notes[n] = '\n', notes[n + 1] = '\0';
}

/* Whether j, when present, is a finite number of 0 or more (a thread's CPU figures). */
static int cpu_figure_ok(const tdm_json *j) {
    return !j || (j->type == TDM_JSON_NUMBER && isfinite(j->num) && j->num >= 0);
}

void tdm_plan_run_info_init(tdm_plan_run_info *ri) {
    memset(ri, 0, sizeof *ri);
    ri->shared_memory = ri->comm_thread_nice = -1;
}

int tdm_plan_run_info_parse(const char *text, size_t len, const char *name, tdm_plan_run_info *ri, double *comm_cpu_ms,
                            tdm_error *err) {
    tdm_plan_run_info_init(ri);
    *comm_cpu_ms = NAN;
    tdm_error je;
    tdm_json_doc *doc = tdm_json_parse(text, len, name, &je);
    if (!doc) return tdm_errorf(err, "%s (expected the analysis.json that tandem train's profiler writes)", je.msg);
    const tdm_json *root = tdm_json_root(doc);
    const tdm_json *shm = tdm_json_get(root, "shared_memory"), *tr = tdm_json_get(root, "transport"),
                   *pr = tdm_json_get(root, "comm_progress"), *ni = tdm_json_get(root, "comm_thread_nice"),
                   *th = tdm_json_get(root, "threads");
    const char *bad = NULL; /* what the file holds that the profiler never writes */
    if (root->type != TDM_JSON_OBJECT) bad = "is not a JSON object";
    else if (shm && shm->type != TDM_JSON_TRUE && shm->type != TDM_JSON_FALSE)
        bad = "has a \"shared_memory\" that is not true or false";
    else if (tr && tr->type != TDM_JSON_STRING) bad = "has a \"transport\" that is not a string";
    else if (pr && (pr->type != TDM_JSON_STRING || (strcmp(pr->str, "thread") && strcmp(pr->str, "inline"))))
        bad = "has a \"comm_progress\" other than \"thread\" or \"inline\"";
    else if (ni && !(ni->type == TDM_JSON_NUMBER && ni->is_int && ni->i64 >= 0 && ni->i64 <= 19))
        bad = "has a \"comm_thread_nice\" that is not a whole number from 0 to 19";
    else if (th && th->type != TDM_JSON_ARRAY) bad = "has a \"threads\" that is not an array";
    double ms = th && !bad ? 0 : NAN;
    for (size_t i = 0; th && !bad && i < th->len; i++) {
        const tdm_json *t = th->items[i], *tn = tdm_json_get(t, "name"), *u = tdm_json_get(t, "user_ms"),
                       *sy = tdm_json_get(t, "system_ms"), *wp = tdm_json_get(t, "wait_poll_ms");
        if (t->type != TDM_JSON_OBJECT || !tn || tn->type != TDM_JSON_STRING)
            bad = "has a thread that is not an object with a \"name\"";
        else if (!cpu_figure_ok(u) || !cpu_figure_ok(sy) || !cpu_figure_ok(wp))
            bad = "has a thread whose user_ms, system_ms or wait_poll_ms is not a number of 0 or more";
        else if (!strncmp(tn->str, "comm", 4)) /* less its polls while compute waited: no core taken */
            ms += (u ? u->num : 0) + (sy ? sy->num : 0) - (wp ? wp->num : 0);
    }
    if (!bad) {
        if (shm) ri->shared_memory = shm->type == TDM_JSON_TRUE;
        if (tr) snprintf(ri->transport, sizeof ri->transport, "%s", tr->str);
        if (pr) snprintf(ri->comm_progress, sizeof ri->comm_progress, "%s", pr->str);
        if (ni) ri->comm_thread_nice = (int)ni->i64;
        *comm_cpu_ms = ms < 0 ? 0 : ms; /* user and system time count in 10 ms ticks */
    }
    tdm_json_free(doc);
    if (bad) return tdm_errorf(err, "%s %s; expected the analysis.json that tandem train's profiler writes", name, bad);
    return 0;
}

int tdm_plan_run_info_read(const char *trace_path, tdm_plan_run_info *ri, double *comm_cpu_ms, tdm_error *err) {
    char dir[4096], path[4200];
    struct stat st;
    if (stat(trace_path, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(dir, sizeof dir, "%s", trace_path);
    else tdm_dirname(trace_path, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/analysis.json", dir);
    if (stat(path, &st) != 0 && errno == ENOENT) { /* a trace written before the profiler wrote it */
        tdm_plan_run_info_init(ri);
        *comm_cpu_ms = NAN;
        return 0;
    }
    size_t len;
    char *text = tdm_read_file(path, (size_t)1 << 28, &len, err);
    if (!text) return -1;
    int rc = tdm_plan_run_info_parse(text, len, path, ri, comm_cpu_ms, err);
    free(text);
    return rc;
}

static int starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* The gradient sync's wait for the other ranks' agreement (src/distributed/grad_sync.c): it ends when the rank
 * whose gradient collectives complete last joins. */
#define AGREE_WAIT "grad sync: ranks agree"

/* 0 grad collective, 1 parameter all-gather, -1 neither */
static int coll_side(const char *name) { return starts(name, "grad ") ? 0 : starts(name, "param ") ? 1 : -1; }

typedef struct acc {
    double sum, n;
} acc;

/* One collective of one rank: its own time in the k-th traced step. */
typedef struct own_t {
    int step, key;         /* key: side * max_b + bucket */
    int rank;              /* index into the trace's ranks */
    double us;             /* own time: each instant shared 1/k among the k of the rank's collectives in flight */
    double us_fifo;        /* own time where the link serves them in the order posted: each instant the earliest's */
    double fifo_beside_us; /* of us_fifo, the time the rank's compute (layers) ran beside it */
    int solo;              /* no other collective of the rank was in flight during its flight */
    double beside;         /* the fraction of its flight the rank's compute (layers) ran beside it */
    int64_t bytes;         /* as the trace recorded them; -1 when it does not */
} own_t;

typedef struct own_list {
    own_t *v;
    int64_t n, cap;
} own_list;

/* Per (side, bucket) of step k: the collective's own time, each instant of its record counted
 * 1/k while k of the rank's collectives are in flight (the link is shared), and counted to the one
 * posted first of them (us_fifo: over TCP, Open MPI sends one rank's messages to a peer in the order
 * posted; a bucket posted behind another completes one transfer after it, the first as if alone). */
static void own_times(const tdm_prof_rec *r, int64_t lo, int64_t hi, double s0, double s1, int k_step, int ri,
                      own_list *own, int max_b) {
    int64_t idx[512];
    int n = 0;
    for (int64_t i = lo; i < hi && n < 512; i++)
        if (!r[i].instant && r[i].cat == TDM_PROF_COMM && coll_side(r[i].name) >= 0 && r[i].t0_us >= s0 &&
            r[i].t0_us < s1 && r[i].arg >= 0 && r[i].arg < max_b)
            idx[n++] = i;
    for (int a = 0; a < n; a++) {
        const tdm_prof_rec *x = &r[idx[a]];
        /* cut x at every start and end of the others; 1/k on each piece */
        double cuts[1026];
        int nc = 0;
        cuts[nc++] = x->t0_us;
        cuts[nc++] = x->t1_us;
        for (int b = 0; b < n; b++) {
            const tdm_prof_rec *y = &r[idx[b]];
            if (y->t0_us > x->t0_us && y->t0_us < x->t1_us) cuts[nc++] = y->t0_us;
            if (y->t1_us > x->t0_us && y->t1_us < x->t1_us) cuts[nc++] = y->t1_us;
        }
        for (int i = 1; i < nc; i++) /* insertion sort: a handful of cuts */
            for (int j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
                double t = cuts[j];
                cuts[j] = cuts[j - 1];
                cuts[j - 1] = t;
            }
        double t = 0, fifo = 0, pieces[2 * 1026];
        int solo = 1, np = 0;
        for (int i = 0; i + 1 < nc; i++) {
            double mid = 0.5 * (cuts[i] + cuts[i + 1]);
            int k = 0, first = -1;
            for (int b = 0; b < n; b++) {
                const tdm_prof_rec *y = &r[idx[b]];
                if (!(y->t0_us <= mid && mid < y->t1_us)) continue;
                k++;
                if (first < 0 || y->t0_us < r[idx[first]].t0_us) first = b;
            }
            if (k > 0) t += (cuts[i + 1] - cuts[i]) / k;
            if (first == a) {
                fifo += cuts[i + 1] - cuts[i];
                pieces[2 * np] = cuts[i], pieces[2 * np + 1] = cuts[i + 1], np++;
            }
            if (k > 1) solo = 0;
        }
        if (own->n == own->cap) {
            own->cap = own->cap ? 2 * own->cap : 256;
            own->v = tdm_xrealloc(own->v, (size_t)own->cap * sizeof *own->v);
        }
        double lay = 0, lay_fifo = 0;
        for (int64_t i = lo; i < hi; i++) {
            const tdm_prof_rec *y = &r[i];
            if (y->t0_us >= x->t1_us) break; /* a rank's records are sorted by start */
            if (y->instant || y->cat != TDM_PROF_LAYER || y->thread_kind != TDM_PROF_THREAD_COMPUTE) continue;
            double a0 = y->t0_us > x->t0_us ? y->t0_us : x->t0_us, a1 = y->t1_us < x->t1_us ? y->t1_us : x->t1_us;
            if (a1 > a0) lay += a1 - a0;
            for (int q = 0; q < np; q++) {
                double b0 = y->t0_us > pieces[2 * q] ? y->t0_us : pieces[2 * q],
                       b1 = y->t1_us < pieces[2 * q + 1] ? y->t1_us : pieces[2 * q + 1];
                if (b1 > b0) lay_fifo += b1 - b0;
            }
        }
        double flight = x->t1_us - x->t0_us;
        own->v[own->n++] = (own_t){.step = k_step,
                                   .key = coll_side(x->name) * max_b + (int)x->arg,
                                   .rank = ri,
                                   .us = t,
                                   .us_fifo = fifo,
                                   .fifo_beside_us = lay_fifo,
                                   .solo = solo,
                                   .beside = flight > 0 ? lay / flight : 0,
                                   .bytes = x->bytes};
    }
}

/* An overlapped run over a network: each side's (gradients, parameters) collectives, taken in the order posted
 * (tau: each instant of flight counted to the earliest in flight), kept the link busy for their time in all, of
 * which tau_beside ran beside compute, at speed v there: for each side s with wire bytes W_s, latencies X_s,
 * time T_s and T_s' of it beside compute, W_s u + alpha X_s = (T_s - T_s') + v T_s' (u: microseconds per byte).
 * Per collective that does not hold: a bucket queued behind another moved part of its bytes before its turn,
 * so those after the backward look faster than the link and the ones beside compute slower. The two sides'
 * equations give u and v where they differ in their share beside compute (an all-gather side without
 * --overlap-param-gather has none: the link is its own); 0 when they do not, or the answer is no speed. */
static int link_by_sides(int n, const double *x, const double *w, const double *tau, const double *tau_beside,
                         const int *side_of, double alpha_us, double *u, double *v) {
    double W[2] = {0, 0}, A[2] = {0, 0}, C[2] = {0, 0};
    for (int i = 0; i < n; i++) {
        const int s = side_of[i];
        W[s] += w[i], C[s] += tau_beside[i], A[s] += tau[i] - tau_beside[i] - alpha_us * x[i];
    }
    /* W0 u - C0 v = A0, W1 u - C1 v = A1 */
    const double det = -W[0] * C[1] + W[1] * C[0], scale = (W[0] + W[1]) * (C[0] + C[1]);
    if (!(scale > 0) || fabs(det) < 0.05 * scale) return 0;
    *u = (-A[0] * C[1] + A[1] * C[0]) / det;
    *v = (W[0] * A[1] - W[1] * A[0]) / det;
    return *u > 0 && *v > 0;
}

/* Without --overlap-grad-reduce the reduce-scatters are posted at once after the backward, the all-gathers at once
 * after the optimizer; over a network both move the same bytes on the wire at the link's speed, each rank about
 * in step with the others after the reduce-scatters. When the reduce-scatters took longer per byte on the wire,
 * the library ran them slower posted together on the rank that reached them last (measured: MPICH's, not Open
 * MPI's; a bucket posted alone moves at the all-gathers' speed): that ratio is the model's grad_together, and the
 * reduce-scatters' own times are taken back to one by one for the link's fit. Inline progress only: with a
 * communication thread the buckets posted through the backward ran no faster than the baseline's posted together
 * (docs/plan.md, limits). */
static void grads_together(const tdm_plan_config *c, const tdm_plan_run_info *run, int nb, int n, const double *w,
                           double *tau, const int *side_of, tdm_plan_model *m, char *notes, int notes_cap) {
    if (!c->distributed || c->overlap_grad || c->dp < 2 || run->shared_memory != 0 ||
        strcmp(run->comm_progress, "inline") || nb < 2)
        return;
    double t[2] = {0, 0}, wire[2] = {0, 0};
    int k = 0;
    for (int i = 0; i < n; i++) t[side_of[i]] += tau[i], wire[side_of[i]] += w[i], k += side_of[i] == 0;
    if (!(wire[0] > 0 && wire[1] > 0 && t[1] > 0) || k < 2) return;
    const double r = (t[0] / wire[0]) / (t[1] / wire[1]);
    if (!(r > 1)) return;
    m->grad_together = r < 4 ? r : 4;
    for (int i = 0; i < n; i++)
        if (side_of[i] == 0) tau[i] /= m->grad_together;
    tdm_plan_note(notes, notes_cap,
                  "the %d reduce-scatters, posted together after the backward, took %.3f times the all-gathers' time "
                  "per byte on the wire: posted at once they ran that much slower than one by one (the model's "
                  "gradient collectives posted at one instant do; one posted alone moves at the all-gathers' speed)",
                  k, m->grad_together);
}

/* The unit a layer record names, n_units when none. */
static int unit_index(const tdm_plan_trace_in *in, const char *name) {
    int u = 0;
    while (u < in->n_units && strcmp(in->unit_names[u], name)) u++;
    return u;
}

/* The compute thread's time from s0 to t, less its waits [w0[j], w1[j]) (sorted by start, none before s0). */
static double compute_to(double t, double s0, const double *w0, const double *w1, int nw) {
    double c = t - s0;
    for (int j = 0; j < nw && w0[j] < t; j++) c -= (w1[j] < t ? w1[j] : t) - w0[j];
    return c;
}

/* A rank's compute in the step [s0, s1) from its start to each unit's first forward into at[u] (left NaN where the
 * unit did not run), and to the gradient sync's start (sy0: the backward's end) into at[n_units]; the compute
 * thread's waits left out. */
static void ranks_apart(const tdm_prof_rec *r, int64_t lo, int64_t hi, double s0, double s1, double sy0,
                        const tdm_plan_trace_in *in, double *at) {
    double w0[256], w1[256];
    int nw = 0;
    for (int64_t i = lo; i < hi && r[i].t0_us < s1; i++) /* sorted by start */
        if (!r[i].instant && r[i].cat == TDM_PROF_WAIT && r[i].thread_kind == TDM_PROF_THREAD_COMPUTE &&
            r[i].t0_us >= s0 && nw < 256)
            w0[nw] = r[i].t0_us, w1[nw] = r[i].t1_us, nw++;
    for (int64_t i = lo; i < hi && r[i].t0_us < s1; i++) {
        const tdm_prof_rec *x = &r[i];
        if (x->instant || x->cat != TDM_PROF_LAYER || x->thread_kind != TDM_PROF_THREAD_COMPUTE || x->arg != 0 ||
            x->t0_us < s0)
            continue;
        const int u = unit_index(in, x->name);
        if (u < in->n_units && !isfinite(at[u])) at[u] = compute_to(x->t0_us, s0, w0, w1, nw);
    }
    if (isfinite(sy0)) at[in->n_units] = compute_to(sy0, s0, w0, w1, nw);
}

/* A training step's envelope on the compute thread. */
static int is_step(const tdm_prof_rec *x) {
    return !x->instant && x->cat == TDM_PROF_PHASE && x->thread_kind == TDM_PROF_THREAD_COMPUTE &&
           !strcmp(x->name, "step");
}

/* The layer time of each traced step of rank ri (steps in order, as tdm_plan_from_trace counts them). */
static int layer_time_per_step(const tdm_prof_trace *pt, int64_t lo, int64_t hi, double *out, int cap) {
    const tdm_prof_rec *r = pt->recs;
    int k = 0;
    for (int64_t e = lo; e < hi; e++) {
        const tdm_prof_rec *env = &r[e];
        if (!is_step(env)) continue;
        double t = 0;
        for (int64_t i = lo; i < hi && r[i].t0_us < env->t1_us; i++) /* sorted by start */
            if (!r[i].instant && r[i].cat == TDM_PROF_LAYER && r[i].thread_kind == TDM_PROF_THREAD_COMPUTE &&
                r[i].t0_us >= env->t0_us)
                t += r[i].t1_us - r[i].t0_us;
        if (k < cap) out[k] = t;
        k++;
    }
    return k;
}

void tdm_plan_fit_link(const double *x, const double *w, const double *tau, int n, tdm_plan_link *l, int alpha_given,
                       int gbps_given) {
    double sxx = 0, sxw = 0, sww = 0, sxt = 0, swt = 0;
    for (int i = 0; i < n; i++) {
        sxx += x[i] * x[i], sxw += x[i] * w[i], sww += w[i] * w[i];
        sxt += x[i] * tau[i], swt += w[i] * tau[i];
    }
    if (alpha_given && gbps_given) return;
    if (gbps_given) {
        double g = 1.0 / (l->gbps * 125.0);
        l->alpha_us = sxx > 0 ? (sxt - g * sxw) / sxx : 0;
        if (l->alpha_us < 0) l->alpha_us = 0;
        return;
    }
    double alpha = alpha_given ? l->alpha_us : 0, g = 0;
    if (!alpha_given) {
        double det = sxx * sww - sxw * sxw;
        if (fabs(det) > 1e-9 * sxx * sww) {
            alpha = (sxt * sww - swt * sxw) / det;
            g = (sxx * swt - sxw * sxt) / det;
        }
        if (!(alpha >= 0) || !(g > 0)) alpha = 0, g = 0;
    }
    if (!(g > 0)) g = sww > 0 ? (swt - alpha * sxw) / sww : 0;
    if (!(g > 0)) g = 1.0 / (10.0 * 125.0); /* nothing to fit: 10 Gbit/s, said in a note by the caller */
    l->alpha_us = alpha;
    l->gbps = 1.0 / (g * 125.0);
}

/* The link of tandem's own trace. A collective's own time tells its transfer apart only when it flew
 * alone: collectives in flight together on a rank share the link, and their ends are seen when the
 * library completes them, often together, so only their sum is measured. The latency is fitted (with
 * the bandwidth, least squares) to the collectives that flew alone, when they come in two sizes or
 * more; else it is 0. The bandwidth then makes the model's collectives take, in all, the time the
 * measured ones took. */
static void fit_link_solo(const double *x, const double *w, const double *tau, const int *solo, int n, tdm_plan_link *l,
                          int *n_alone, int *n_sizes) {
    double xs[2 * 512], ws[2 * 512], ts[2 * 512];
    int ns = 0, sizes = 0;
    for (int i = 0; i < n && ns < 2 * 512; i++)
        if (solo[i]) {
            int seen = 0;
            for (int j = 0; j < ns; j++) seen |= ws[j] == w[i] && xs[j] == x[i];
            sizes += !seen;
            xs[ns] = x[i], ws[ns] = w[i], ts[ns] = tau[i], ns++;
        }
    l->alpha_us = 0;
    if (sizes >= 2) {
        tdm_plan_link s = {.alpha_us = 0, .gbps = 0};
        tdm_plan_fit_link(xs, ws, ts, ns, &s, 0, 0);
        l->alpha_us = s.alpha_us;
    }
    double sx = 0, sw = 0, st = 0;
    for (int i = 0; i < n; i++) sx += x[i], sw += w[i], st += tau[i];
    double g = sw > 0 ? (st - l->alpha_us * sx) / sw : 0;
    if (!(g > 0)) { /* the latency alone would take longer than all the collectives did */
        l->alpha_us = 0;
        g = sw > 0 ? st / sw : 0;
    }
    if (!(g > 0)) g = 1.0 / (10.0 * 125.0); /* nothing to fit: 10 Gbit/s, said in a note by the caller */
    l->gbps = 1.0 / (g * 125.0);
    *n_alone = ns, *n_sizes = sizes;
}

/* fit_link_solo's note; the bandwidth's part only where its bandwidth was kept. */
static void note_link_solo(char *notes, int notes_cap, int n_alone, int n, int n_sizes, int bandwidth_kept) {
    if (n > 0)
        tdm_plan_note(notes, notes_cap, "link latency %s (%d of %d collective(s) flew alone, in %d size(s))%s",
                      n_sizes >= 2 ? "fitted to the collectives that flew alone" : "taken as 0", n_alone, n, n_sizes,
                      bandwidth_kept ? "; the bandwidth makes the collectives take the measured time in all" : "");
}

/* in_path's trace.json (in_path itself, or the file in the folder it names) into path[cap]. */
static int trace_path(const char *in_path, char *path, size_t cap, tdm_error *err) {
    struct stat st;
    if (stat(in_path, &st) != 0)
        return tdm_errorf(err, "%s: no such file or directory; expected tandem's trace.json or its folder", in_path);
    if (S_ISDIR(st.st_mode)) snprintf(path, cap, "%s/trace.json", in_path);
    else snprintf(path, cap, "%s", in_path);
    if (stat(path, &st) != 0)
        return tdm_errorf(err, "%s: no trace.json in the folder; expected the save_path of a profiled tandem run",
                          in_path);
    return 0;
}

/* The trace at path (resolved by trace_path) into *pt. */
static int load_trace(const char *path, tdm_prof_trace *pt, tdm_error *err) {
    tdm_error le;
    if (tdm_prof_trace_load(path, PLAN_TRACE_MAX, pt, &le) != 0)
        return strstr(le.msg, "expected") ? tdm_errorf(err, "%s", le.msg)
                                          : tdm_errorf(err, "%s (expected tandem's trace.json)", le.msg);
    return 0;
}

int tdm_plan_trace_read(const char *in_path, tdm_prof_trace *pt, tdm_error *err) {
    char path[4096];
    memset(pt, 0, sizeof *pt);
    return trace_path(in_path, path, sizeof path, err) != 0 ? -1 : load_trace(path, pt, err);
}

/* How many times traced step k counts (tdm_plan_trace_in's step_weight). */
static double step_weight(const tdm_plan_trace_in *in, int k) {
    return !in->step_weight ? 1 : k >= 0 && k < in->n_step_weight ? in->step_weight[k] : 0;
}

int tdm_plan_from_trace(const tdm_plan_trace_in *in, tdm_plan_model *m, char *notes, int notes_cap, tdm_error *err) {
    memset(m, 0, sizeof *m);
    if (notes && notes_cap > 0) notes[0] = '\0';
    char path[4096];
    if (trace_path(in->path, path, sizeof path, err) != 0) return -1;
    tdm_prof_trace pt;
    m->measured_step_us = NAN;
    if (in->trace) pt = *in->trace; /* the caller's: not freed here */
    else if (load_trace(path, &pt, err) != 0) return -1;

    const int U = in->n_units;
    const int MAXB = 4096;
    acc *fwd = tdm_xcalloc((size_t)U + 1, sizeof *fwd), *bwd = tdm_xcalloc((size_t)U + 1, sizeof *bwd);
    own_list own_l = {0};
    int64_t *seen = NULL;
    acc *own = NULL, *own_fifo = NULL;
    double *records = NULL, *beside = NULL;
    double *solo_n = NULL, *fifo_beside = NULL;
    acc step = {0, 0}, head = {0, 0}, fb_other = {0, 0}, sync = {0, 0}, opt = {0, 0}, micro = {0, 0};
    int max_grad_b = -1, any_param = 0, grad_in_fb = 0, param_in_fb = 0, unknown_layers = 0;
    /* The step waits for its slowest rank: of each traced step, the compute is taken from the rank
     * with the most layer time (the others wait for it in the collectives), over the steps all
     * ranks hold. */
    int64_t *rlo = tdm_xmalloc((size_t)(pt.n_ranks + 1) * sizeof *rlo),
            *rhi = tdm_xmalloc((size_t)(pt.n_ranks + 1) * sizeof *rhi);
    int max_steps = 0;
    for (int ri = 0; ri < pt.n_ranks; ri++) {
        int64_t lo = 0, hi;
        while (lo < pt.n && pt.recs[lo].rank != pt.ranks[ri]) lo++;
        for (hi = lo; hi < pt.n && pt.recs[hi].rank == pt.ranks[ri]; hi++) continue;
        rlo[ri] = lo, rhi[ri] = hi;
        int ns = 0;
        for (int64_t i = lo; i < hi; i++) ns += is_step(&pt.recs[i]);
        if (ns > max_steps) max_steps = ns;
    }
    int *crit = tdm_xcalloc((size_t)max_steps + 1, sizeof *crit), n_common = max_steps;
    double *layer_t = tdm_xcalloc((size_t)max_steps + 1, sizeof *layer_t),
           *best_t = tdm_xcalloc((size_t)max_steps + 1, sizeof *best_t),
           *agree = tdm_xcalloc((size_t)max_steps + 1, sizeof *agree); /* per step, the longest agreement wait */
    for (int ri = 0; ri < pt.n_ranks; ri++) {
        int ns = layer_time_per_step(&pt, rlo[ri], rhi[ri], layer_t, max_steps);
        if (ns < n_common) n_common = ns;
        for (int k = 0; k < ns; k++)
            if (ri == 0 || layer_t[k] > best_t[k]) best_t[k] = layer_t[k], crit[k] = ri;
    }
    free(layer_t);
    free(best_t);
    double *apart = tdm_xmalloc(((size_t)n_common * pt.n_ranks * (U + 1) + 1) * sizeof *apart);
    for (size_t i = 0; i < (size_t)n_common * pt.n_ranks * (U + 1); i++) apart[i] = NAN;
    for (int ri = 0; ri < pt.n_ranks; ri++) {
        const int64_t lo = rlo[ri], hi = rhi[ri];
        const tdm_prof_rec *r = pt.recs;
        int k_step = -1;
        for (int64_t e = lo; e < hi; e++) {
            const tdm_prof_rec *env = &r[e];
            if (!is_step(env)) continue;
            k_step++;
            const int use = k_step >= n_common || crit[k_step] == ri; /* this rank's compute is the step's */
            const double wt = step_weight(in, k_step);
            const double s0 = env->t0_us, s1 = env->t1_us;
            /* until the rank's next step: the all-gathers an overlapped optimizer posts may start after the step's
             * record ends */
            double s_next = INFINITY;
            for (int64_t j = e + 1; j < hi; j++)
                if (is_step(&r[j])) {
                    s_next = r[j].t0_us;
                    break;
                }
            double fb_t = 0, sync_t = 0, opt_t = 0, layers = 0, w_fb = 0, w_sync = 0, w_opt = 0, agree_t = 0;
            int n_fb = 0;
            /* phases first: the waits and marks are placed by them */
            double fb0[64], fb1[64], sy0 = NAN, sy1 = NAN, op0 = NAN, op1 = NAN;
            for (int64_t i = lo; i < hi; i++) {
                const tdm_prof_rec *x = &r[i];
                if (x->instant || x->thread_kind != TDM_PROF_THREAD_COMPUTE || x->cat != TDM_PROF_PHASE) continue;
                if (x->t0_us < s0 || x->t0_us >= s1) continue;
                double d = x->t1_us - x->t0_us;
                if (!strcmp(x->name, "forward-backward")) {
                    if (n_fb < 64) fb0[n_fb] = x->t0_us, fb1[n_fb] = x->t1_us;
                    n_fb++, fb_t += d;
                } else if (!strcmp(x->name, "grad sync")) sync_t += d, sy0 = x->t0_us, sy1 = x->t1_us;
                else if (!strcmp(x->name, "optimizer")) opt_t += d, op0 = x->t0_us, op1 = x->t1_us;
            }
            if (n_fb == 0) continue;
            for (int64_t i = lo; i < hi; i++) {
                const tdm_prof_rec *x = &r[i];
                if (x->t0_us < s0 || x->t0_us >= s1) continue;
                int in_fb = 0;
                for (int k = 0; k < n_fb && k < 64; k++) in_fb |= x->t0_us >= fb0[k] && x->t0_us <= fb1[k];
                if (x->instant && x->cat == TDM_PROF_MARK) {
                    if (!strcmp(x->name, "grad bucket posted") && in_fb) grad_in_fb = 1;
                    if (!strcmp(x->name, "param all-gather posted") && in_fb) param_in_fb = 1;
                    continue;
                }
                if (x->instant) continue;
                if (x->cat == TDM_PROF_COMM) {
                    int side = coll_side(x->name);
                    if (side == 0 && x->arg > max_grad_b && x->arg < MAXB) max_grad_b = (int)x->arg;
                    if (side == 1) any_param = 1;
                    continue;
                }
                if (x->thread_kind != TDM_PROF_THREAD_COMPUTE) continue;
                if (x->cat == TDM_PROF_LAYER) {
                    const int u = unit_index(in, x->name);
                    if (u == U) {
                        unknown_layers += use;
                        continue;
                    }
                    if (!use) continue;
                    acc *a = x->arg ? &bwd[u] : &fwd[u];
                    a->sum += (x->t1_us - x->t0_us) * wt;
                    layers += x->t1_us - x->t0_us;
                } else if (x->cat == TDM_PROF_WAIT && coll_side(x->name) >= 0) {
                    double d = x->t1_us - x->t0_us;
                    if (in_fb) {
                        w_fb += d;
                        if (coll_side(x->name) == 1) param_in_fb = 1;
                    } else if (x->t0_us >= sy0 && x->t0_us <= sy1) {
                        w_sync += d;
                        if (!strcmp(x->name, AGREE_WAIT)) agree_t += d;
                    } else if (x->t0_us >= op0 && x->t0_us <= op1) w_opt += d;
                }
            }
            if (k_step < n_common) {
                ranks_apart(r, lo, hi, s0, s1, sy0, in, apart + ((size_t)k_step * pt.n_ranks + ri) * (U + 1));
                if (agree_t > agree[k_step]) agree[k_step] = agree_t;
            }
            own_times(r, lo, hi, s0, s_next > s1 ? s_next : s1, k_step, ri, &own_l, MAXB);
            step.sum += (s1 - s0) * wt, step.n += wt;
            if (ri == 0) { /* the timeline of this rank's last step */
                m->n_measured = 0;
                m->measured_one_us = s1 - s0;
                for (int64_t i = lo; i < hi; i++) {
                    const tdm_prof_rec *x = &r[i];
                    if (x->instant || x->t0_us < s0 || x->t0_us >= s1) continue;
                    int comm = x->cat == TDM_PROF_COMM && coll_side(x->name) >= 0;
                    int comp = x->thread_kind == TDM_PROF_THREAD_COMPUTE && x->cat == TDM_PROF_LAYER;
                    if (!comm && !comp) continue;
                    m->measured = tdm_xrealloc(m->measured, (size_t)(m->n_measured + 1) * sizeof *m->measured);
                    m->measured[m->n_measured++] =
                        (tdm_plan_seg){x->t0_us - s0,          x->t1_us - s0,           comm ? -1 : 0,
                                       comm ? 2 : (int)x->arg, comm ? "comm" : "layer", 0};
                }
            }
            if (!use) continue;
            for (int u = 0; u < U; u++) fwd[u].n += n_fb * wt, bwd[u].n += n_fb * wt;
            head.sum += ((s1 - s0) - fb_t - sync_t - opt_t) * wt, head.n += wt;
            fb_other.sum += (fb_t - layers - w_fb) / n_fb * wt, fb_other.n += wt;
            sync.sum += (sync_t - w_sync) * wt, sync.n += wt;
            opt.sum += (opt_t - w_opt) * wt, opt.n += wt;
            micro.sum += n_fb * wt, micro.n += wt;
        }
    }
    int rc = 0;
    if (!(step.n > 0)) {
        rc = tdm_errorf(err,
                        "%s: no profiled step with a forward-backward phase; expected the trace of `tandem train "
                        "--profile-config` at level 1 or 2",
                        path);
        goto out;
    }
    if (unknown_layers)
        tdm_plan_note(notes, notes_cap,
                      "%d layer events name no unit of the model given: the model may differ from the run's",
                      unknown_layers);
    double layers_seen = 0;
    for (int u = 0; u < U; u++) layers_seen += fwd[u].sum + bwd[u].sum;
    if (layers_seen <= 0) {
        rc = tdm_errorf(err, "%s: no per-layer event of the model's units; expected a trace recorded at level 1 or 2",
                        path);
        goto out;
    }
    m->n_units = U;
    m->units = tdm_xcalloc((size_t)U + 1, sizeof *m->units);
    for (int u = 0; u < U; u++) {
        snprintf(m->units[u].name, sizeof m->units[u].name, "%s", in->unit_names[u]);
        m->units[u].fwd_us = fwd[u].n > 0 ? fwd[u].sum / fwd[u].n : 0;
        m->units[u].bwd_us = bwd[u].n > 0 ? bwd[u].sum / bwd[u].n : 0;
    }
    m->n_params = in->n_params;
    m->params = tdm_xmalloc((size_t)(in->n_params + 1) * sizeof *m->params);
    memcpy(m->params, in->params, (size_t)in->n_params * sizeof *m->params);
    m->n_micro = (int)lround(micro.sum / micro.n);
    m->head_us = head.sum / head.n;
    m->fb_other_us = fb_other.sum / fb_other.n;
    m->sync_us = sync.sum / sync.n;
    m->opt_us = opt.sum / opt.n;
    if (m->head_us < 0) m->head_us = 0;
    if (m->fb_other_us < 0) m->fb_other_us = 0;
    m->measured_step_us = step.sum / step.n;
    m->n_steps_measured = (int)step.n;
    m->n_traced_steps = n_common;
    if (pt.n_ranks > 1 && n_common > 0) {
        double sum = 0, wsum = 0;
        for (int k = 0; k < n_common; k++) sum += agree[k] * step_weight(in, k), wsum += step_weight(in, k);
        m->agree_us = wsum > 0 ? sum / wsum : 0;
        m->apart_steps = n_common, m->apart_ranks = pt.n_ranks, m->apart_at = apart, apart = NULL;
        m->apart_weight = tdm_xmalloc((size_t)n_common * sizeof *m->apart_weight);
        m->apart_ref = tdm_xmalloc((size_t)n_common * sizeof *m->apart_ref);
        for (int k = 0; k < n_common; k++) {
            int whole = 1;
            for (int ri = 0; ri < pt.n_ranks; ri++) { /* a unit a step did not run (no image): met at the next */
                double *at = m->apart_at + ((size_t)k * pt.n_ranks + ri) * (U + 1);
                whole &= isfinite(at[U]);
                for (int u = U - 1; u >= 0; u--)
                    if (!isfinite(at[u])) at[u] = at[u + 1];
            }
            m->apart_weight[k] = whole ? step_weight(in, k) : 0;
            m->apart_ref[k] = crit[k];
        }
    }

    tdm_plan_config *c = &m->baseline;
    memset(c, 0, sizeof *c);
    c->dp = pt.n_ranks;
    c->distributed = any_param;
    c->overlap_grad = grad_in_fb;
    c->overlap_param = any_param && param_in_fb;
    /* each bucket's bytes, as first recorded (0: not recorded) */
    seen = tdm_xcalloc(2 * (size_t)MAXB, sizeof *seen);
    for (int64_t i = 0; i < own_l.n; i++)
        if (own_l.v[i].bytes > 0 && !seen[own_l.v[i].key]) seen[own_l.v[i].key] = own_l.v[i].bytes;
    int cut_by = 0;         /* 1: a bucket count cuts them, 2: a bucket size, as tdm_plan_match_cut */
    int64_t range[2] = {0}; /* the sizes that do */
    if (max_grad_b >= 0) {  /* the run's cut: from each gradient bucket's bytes where recorded, else its count */
        const int traced = max_grad_b + 1;
        int64_t *elems = tdm_xmalloc((size_t)traced * sizeof *elems);
        int all = 1;
        for (int b = 0; b < traced; b++) elems[b] = seen[b] / 4, all &= seen[b] > 0 && seen[b] % 4 == 0;
        c->num_buckets = traced;
        cut_by = all ? tdm_plan_match_cut(m, c, elems, traced, range) : 0;
        if (!cut_by) tdm_plan_match_cut(m, c, NULL, traced, NULL);
        free(elems);
    }
    char cut[128] = "";
    if (cut_by == 2 && range[0] < range[1])
        snprintf(cut, sizeof cut, "as --ddp-bucket-size %lld cuts them, or any from %lld to %lld: from their bytes",
                 (long long)c->bucket_size, (long long)range[0], (long long)range[1]);
    else if (cut_by == 2)
        snprintf(cut, sizeof cut, "as --ddp-bucket-size %lld cuts them, from their bytes", (long long)c->bucket_size);
    else snprintf(cut, sizeof cut, "as --ddp-num-buckets %d cuts them%s", c->num_buckets, cut_by ? ", bytes too" : "");
    tdm_plan_note(notes, notes_cap,
                  "baseline read from the trace: dp %d, %s, %d bucket(s) (%s), overlap-grad-reduce %s, "
                  "overlap-param-gather %s",
                  c->dp, c->distributed ? "distributed optimizer" : "all-reduce", max_grad_b + 1, cut,
                  c->overlap_grad ? "on" : "off", c->overlap_param ? "on" : "off");
    if (in->baseline_flags && in->baseline_flags[0]) {
        tdm_error fe;
        if (tdm_plan_parse_flags(in->baseline_flags, c, &fe) != 0) {
            rc = tdm_errorf(err, "--baseline: %s", fe.msg);
            goto out;
        }
        tdm_plan_note(notes, notes_cap, "then as --baseline says: %s", in->baseline_flags);
    }
    c->link = in->link;
    if (c->dp != pt.n_ranks)
        tdm_plan_note(notes, notes_cap, "the trace holds %d rank(s) but the baseline says dp %d", pt.n_ranks, c->dp);

    /* the link: fitted to the collectives' own times, with the baseline's bucket sizes. Of one
     * step's collectives of one side (gradients, parameters), the rank whose took least in all with no
     * compute beside them waited least for the others: it posted last or, of collectives posted by all
     * at once and waited for later (an overlapped all-gather), reached the wait last; its own times are
     * the transfers', the others' add the wait for the slowest rank (taken as compute, or as the ranks
     * apart). Its times are taken together: collectives in flight at once share the link differently on
     * each rank, so a least per collective, taken from several ranks, would add up to less than any
     * rank saw. */
    own = tdm_xcalloc(2 * (size_t)MAXB, sizeof *own);
    own_fifo = tdm_xcalloc(2 * (size_t)MAXB, sizeof *own_fifo);
    records = tdm_xcalloc(2 * (size_t)MAXB, sizeof *records); /* every rank's, for the bytes moved */
    beside = tdm_xcalloc(2 * (size_t)MAXB, sizeof *beside);
    solo_n = tdm_xcalloc(2 * (size_t)MAXB, sizeof *solo_n);
    fifo_beside = tdm_xcalloc(2 * (size_t)MAXB, sizeof *fifo_beside);
    {
        const size_t cells = ((size_t)max_steps + 1) * 2 * (size_t)pt.n_ranks; /* (step, side, rank) */
        double *total = tdm_xcalloc(cells, sizeof *total);
        int *count = tdm_xcalloc(cells, sizeof *count),
            *least = tdm_xcalloc(((size_t)max_steps + 1) * 2, sizeof *least);
        for (int64_t i = 0; i < own_l.n; i++) {
            const own_t *o = &own_l.v[i];
            size_t at = ((size_t)o->step * 2 + (size_t)(o->key / MAXB)) * (size_t)pt.n_ranks + (size_t)o->rank;
            total[at] += o->us * (1 - o->beside), count[at]++;
        }
        for (int k = 0; k <= max_steps; k++)
            for (int side = 0; side < 2; side++) { /* of the ranks that hold every collective, the least */
                const size_t at = ((size_t)k * 2 + (size_t)side) * (size_t)pt.n_ranks;
                int most = 0, best = -1;
                for (int ri = 0; ri < pt.n_ranks; ri++) most = count[at + ri] > most ? count[at + ri] : most;
                for (int ri = 0; ri < pt.n_ranks; ri++)
                    if (count[at + ri] == most && (best < 0 || total[at + ri] < total[at + best])) best = ri;
                least[k * 2 + side] = best;
            }
        for (int64_t i = 0; i < own_l.n; i++) {
            const own_t *o = &own_l.v[i];
            records[o->key] += 1;
            if (o->rank != least[o->step * 2 + o->key / MAXB]) continue;
            const double wt = step_weight(in, o->step);
            own[o->key].sum += o->us * wt, own[o->key].n += wt;
            own_fifo[o->key].sum += o->us_fifo * wt;
            beside[o->key] += o->beside * wt;
            solo_n[o->key] += o->solo * wt;
            fifo_beside[o->key] += o->fifo_beside_us * wt;
        }
        free(total);
        free(count);
        free(least);
    }
    int64_t *padded = NULL;
    int nb = tdm_plan_buckets(m, c, &padded, NULL, err);
    if (nb < 0) {
        rc = -1;
        goto out;
    }
    /* where the trace recorded its collectives' bytes: the model's buckets must move as many in all, else the
     * model config, freeze flags or --bf16 are not the run's and every prediction would be of another model;
     * the same total cut otherwise (the run's --ddp-bucket-size) is said in a note */
    {
        for (int side = 0; side < 2 && rc == 0; side++) {
            double traced = 0, cut = 0;
            int any = 0, differ = -1;
            for (int b = 0; b < MAXB; b++) {
                traced += (double)seen[side * MAXB + b], any |= seen[side * MAXB + b] > 0;
                const double mine = b < nb ? (double)padded[b] * (side && c->bf16_params ? 2 : 4) : 0;
                cut += mine;
                if (differ < 0 && seen[side * MAXB + b] > 0 && (double)seen[side * MAXB + b] != mine) differ = b;
            }
            if (!any) continue;
            if (fabs(traced - cut) > 0.01 * cut) {
                const int bf16_hint = side && fabs(traced * 2 - cut) <= 0.01 * cut,
                          fp32_hint = side && fabs(traced - 2 * cut) <= 0.02 * cut;
                rc = tdm_errorf(err,
                                "%s: the run's %s moved %.0f bytes a step where the buckets cut from the model "
                                "config make %.0f: expected the run's --model and --freeze-... flags%s",
                                path, side ? "parameter all-gathers" : "gradient collectives", traced, cut,
                                bf16_hint   ? " and --baseline \"--bf16\" (its all-gathers moved 2-byte values)"
                                : fp32_hint ? " (its all-gathers moved 4-byte values: the run had no --bf16)"
                                            : "");
            } else if (differ >= 0)
                tdm_plan_note(
                    notes, notes_cap,
                    "the run cut its buckets otherwise than these settings do (bucket %d moved %lld "
                    "bytes, here %.0f): the predictions are of these buckets; check --baseline's bucket flags",
                    differ, (long long)seen[side * MAXB + differ],
                    differ < nb ? (double)padded[differ] * (side && c->bf16_params ? 2 : 4) : 0.0);
        }
        if (rc != 0) {
            free(padded);
            goto out;
        }
    }
    /* the CPU that driving the collectives took: the communication threads' time over the bytes moved */
    tdm_plan_run_info run;
    double cpu_ms = in->run_comm_cpu_ms;
    if (in->run) run = *in->run; /* the caller's, read once for every resample */
    else if (tdm_plan_run_info_read(path, &run, &cpu_ms, err) != 0) {
        free(padded);
        rc = -1;
        goto out;
    }
    if (in->comm_progress && in->comm_progress[0])
        snprintf(run.comm_progress, sizeof run.comm_progress, "%s", in->comm_progress);
    const int shared_memory = run.shared_memory;
    double x[2 * 512], w[2 * 512], tau[2 * 512], bytes_of[2 * 512], beside_of[2 * 512], tau_beside[2 * 512], moved = 0;
    int solo[2 * 512], side_of[2 * 512];
    int n = 0, mismatch = 0;
    for (int side = 0; side < 2; side++)
        for (int b = 0; b < MAXB && n < 1024; b++) {
            const acc *o = &own[side * MAXB + b];
            if (o->n == 0) continue;
            if (b >= nb) {
                mismatch = 1;
                continue;
            }
            int kind = side ? TDM_PLAN_ALL_GATHER : c->distributed ? TDM_PLAN_REDUCE_SCATTER : TDM_PLAN_ALL_REDUCE;
            double bytes = (double)padded[b] * (side && c->bf16_params ? 2.0 : 4.0);
            tdm_plan_coll_factors(kind, bytes, c->dp, &c->link, &x[n], &w[n]);
            /* over a network the link serves a rank's collectives in the order posted */
            tau[n] = (shared_memory == 0 ? own_fifo[side * MAXB + b].sum : o->sum) / o->n;
            bytes_of[n] = bytes, beside_of[n] = beside[side * MAXB + b] / o->n, side_of[n] = side;
            tau_beside[n] = fifo_beside[side * MAXB + b] / o->n;
            solo[n] = solo_n[side * MAXB + b] == o->n; /* alone in every step it was taken from */
            moved += records[side * MAXB + b] * bytes;
            n++;
        }
    free(padded);
    m->measured_cpu_us_per_mb = isfinite(cpu_ms) && moved > 0 ? cpu_ms * 1e3 / (moved / 1e6) : NAN;
    if (in->cpu_us_per_mb >= 0) m->cpu_us_per_mb = in->cpu_us_per_mb;
    else m->cpu_us_per_mb = isfinite(m->measured_cpu_us_per_mb) ? m->measured_cpu_us_per_mb : 0;
    /* On shared memory a communication thread (one that took CPU) makes the copies itself and competes
     * with compute at its niceness; over a network the kernel moves the bytes, the thread only feeds it. */
    if (isfinite(cpu_ms) && cpu_ms > 0 && shared_memory == 1) m->comm_share = tdm_plan_nice_share(in->comm_thread_nice);
    if (isfinite(cpu_ms) && cpu_ms > 0 && shared_memory < 0)
        tdm_plan_note(notes, notes_cap,
                      "analysis.json does not say the run's transport: the communication thread is taken to run "
                      "as soon as it needs to (on shared memory it competes with compute: profile with this "
                      "tandem)");
    if (in->speed_beside > 0) m->speed_beside = in->speed_beside;
    if (in->lost_share > 0) m->lost_share = in->lost_share;
    if (mismatch)
        tdm_plan_note(notes, notes_cap,
                      "the trace has more buckets than the baseline's settings make (%d): the extra ones are "
                      "left out of the link's fit",
                      nb);
    grads_together(c, &run, nb, n, w, tau, side_of, m, notes, notes_cap);
    int alpha_given = in->link.alpha_us >= 0, gbps_given = in->link.gbps > 0;
    if (!alpha_given) c->link.alpha_us = 0;
    if (n == 0 && !gbps_given)
        tdm_plan_note(notes, notes_cap,
                      "no collective in the trace to fit the link to: 10 Gbit/s assumed (give --link-gbps)");
    /* An overlapped baseline whose collectives flew both with no compute beside them and beside it: the first
     * measure the link, the others how fast a collective moves where compute runs (unless given): alone time
     * a = wall (1 - beside) + wall beside speed, summed over them. */
    int n_clear = 0;
    for (int i = 0; i < n; i++) n_clear += beside_of[i] < CLEAR_BESIDE;
    if (!(m->speed_beside > 0) && !alpha_given && !gbps_given && n_clear > 0 && n_clear < n) {
        double xs[2 * 512], ws[2 * 512], ts[2 * 512];
        int ss[2 * 512], k = 0;
        for (int i = 0; i < n; i++)
            if (beside_of[i] < CLEAR_BESIDE) xs[k] = x[i], ws[k] = w[i], ts[k] = tau[i], ss[k] = solo[i], k++;
        int n_alone, n_sizes;
        fit_link_solo(xs, ws, ts, ss, k, &c->link, &n_alone, &n_sizes);
        double u, v;
        const int by_sides =
            shared_memory == 0 && link_by_sides(n, x, w, tau, tau_beside, side_of, c->link.alpha_us, &u, &v);
        note_link_solo(notes, notes_cap, n_alone, k, n_sizes, !by_sides);
        if (by_sides) {
            c->link.gbps = 1.0 / (u * 125.0);
        } else {
            double gained = 0, beside_t = 0;
            for (int i = 0; i < n; i++) {
                if (beside_of[i] < CLEAR_BESIDE) continue;
                const double alone = c->link.alpha_us * x[i] + w[i] / (c->link.gbps * 125.0);
                gained += alone - tau[i] * (1 - beside_of[i]), beside_t += tau[i] * beside_of[i];
            }
            v = beside_t > 0 ? gained / beside_t : 1;
        }
        m->speed_beside = v > 1 ? 1 : v < 0.001 ? 0.001 : v;
        if (by_sides)
            tdm_plan_note(notes, notes_cap,
                          "over a network the library moves a rank's collectives in flight together, so a bucket "
                          "queued behind another moved some of its bytes before its turn: the link and the speed "
                          "beside compute are fitted to each side's (gradients, parameters) time with some "
                          "collective in flight, with and without compute beside it: the link %.4g Gbit/s, beside "
                          "compute %.3g of that speed (as --comm-speed-beside; tandem doctor measures it apart)",
                          c->link.gbps, m->speed_beside);
        else
            tdm_plan_note(notes, notes_cap,
                          "the %d collective(s) that flew with no compute beside them fit the link; the %d beside "
                          "it moved there at %.3g of their speed alone (as --comm-speed-beside; tandem doctor "
                          "measures it apart)",
                          k, n - k, m->speed_beside);
    } else {
        /* a collective that ran beside compute was slowed there: fit the link to its time alone */
        double slowed = 0;
        for (int i = 0; i < n; i++) {
            double alone = tdm_plan_alone_us(m, bytes_of[i], tau[i], beside_of[i]);
            slowed += tau[i] - alone;
            tau[i] = alone;
        }
        if (alpha_given || gbps_given) {
            tdm_plan_fit_link(x, w, tau, n, &c->link, alpha_given, gbps_given);
        } else {
            int n_alone, n_sizes;
            fit_link_solo(x, w, tau, solo, n, &c->link, &n_alone, &n_sizes);
            note_link_solo(notes, notes_cap, n_alone, n, n_sizes, 1);
        }
        if (m->speed_beside > 0 && slowed > 0)
            tdm_plan_note(notes, notes_cap,
                          "a collective moves at %.3g of its speed alone where compute runs (--comm-speed-beside): "
                          "the collectives that ran beside it took %.4g ms longer than alone, left out of the link's "
                          "fit",
                          m->speed_beside, slowed / 1e3);
        else if (m->speed_beside > 0)
            tdm_plan_note(notes, notes_cap,
                          "a collective moves at %.3g of its speed alone where compute runs (--comm-speed-beside)",
                          m->speed_beside);
        else if (slowed > 0)
            tdm_plan_note(notes, notes_cap,
                          "the communication thread (nice %d) gets %.3g of a core beside compute: the collectives "
                          "that ran beside it took %.4g ms longer than alone, left out of the link's fit",
                          in->comm_thread_nice, m->comm_share, slowed / 1e3);
    }
    if (isfinite(m->measured_cpu_us_per_mb))
        tdm_plan_note(notes, notes_cap, "communication threads: %.4g CPU us per MB moved (analysis.json); %s",
                      m->measured_cpu_us_per_mb,
                      in->cpu_us_per_mb >= 0 ? "not used (given)" : "taken from overlapped compute");
    else if (in->cpu_us_per_mb < 0)
        tdm_plan_note(notes, notes_cap,
                      "no analysis.json beside the trace: no CPU cost of driving collectives (give "
                      "--comm-cpu-us-per-mb)");
    /* an overlapped baseline's measured compute already holds that CPU where it was taken: each part
     * (a unit's forward or backward, the head, the loss, sync, optimizer) is the measured time less
     * the CPU the model charges it, found by a few passes (the charge moves as the parts shrink) */
    if ((m->cpu_us_per_mb > 0 || m->lost_share > 0) && (c->overlap_grad || c->overlap_param)) {
        const int P = 2 * U + 4; /* fwd[u], bwd[u], head, loss, sync, optimizer */
        double *meas = tdm_xmalloc((size_t)P * sizeof *meas), *chg = tdm_xmalloc((size_t)P * sizeof *chg),
               *cnt = tdm_xmalloc((size_t)P * sizeof *cnt);
        double *const part[4] = {&m->head_us, &m->fb_other_us, &m->sync_us, &m->opt_us};
        static const char *const part_name[4] = {"head", "loss", "sync", "optimizer"};
        for (int u = 0; u < U; u++) meas[2 * u] = m->units[u].fwd_us, meas[2 * u + 1] = m->units[u].bwd_us;
        for (int k = 0; k < 4; k++) meas[2 * U + k] = *part[k];
        for (int pass = 0; pass < 12; pass++) {
            tdm_plan_result r;
            tdm_error e2;
            if (tdm_plan_simulate(m, c, &r, &e2) != 0) break;
            memset(chg, 0, (size_t)P * sizeof *chg);
            memset(cnt, 0, (size_t)P * sizeof *cnt);
            for (int i = 0; i < r.n_segs; i++) {
                const tdm_plan_seg *g = &r.segs[i];
                int at = -1;
                if (g->unit >= 0 && g->unit < U) at = 2 * g->unit + (g->backward ? 1 : 0);
                for (int k = 0; k < 4 && at < 0; k++)
                    if (!strcmp(g->what, part_name[k])) at = 2 * U + k;
                if (at >= 0) chg[at] += g->cpu_us, cnt[at] += 1;
            }
            tdm_plan_result_free(&r);
            double moved = 0;
            for (int q = 0; q < P; q++) {
                double want = meas[q] - (cnt[q] > 0 ? chg[q] / cnt[q] : 0);
                if (want < 0.05 * meas[q]) want = 0.05 * meas[q];
                double *v = q < 2 * U ? (q % 2 ? &m->units[q / 2].bwd_us : &m->units[q / 2].fwd_us) : part[q - 2 * U];
                moved += fabs(*v - want);
                *v = want;
            }
            if (moved < 1e-3) break;
        }
        free(meas);
        free(chg);
        free(cnt);
    }
    tdm_plan_note(notes, notes_cap,
                  "link: %.4g Gbit/s (%s), latency %.4g us per %s step (%s), from %d measured collective(s)",
                  c->link.gbps, gbps_given ? "given" : "fitted", c->link.alpha_us,
                  c->link.tree && !c->distributed ? "tree" : "ring", alpha_given ? "given" : "fitted", n);
out:
    free(fwd);
    free(bwd);
    free(own);
    free(own_fifo);
    free(records);
    free(beside);
    free(solo_n);
    free(fifo_beside);
    free(own_l.v);
    free(seen);
    free(rlo);
    free(rhi);
    free(crit);
    free(agree);
    free(apart);
    if (!in->trace) tdm_prof_trace_free(&pt);
    if (rc != 0) tdm_plan_model_free(m);
    return rc;
}
