/* trace.c - Chrome trace JSON writer and reader. */
#include "prof/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/fs.h"

tdm_prof_rec *tdm_prof_recs_from_collection(const tdm_prof_collection *c, int32_t rank, int64_t *n) {
    tdm_prof_rec *r = tdm_xmalloc((size_t)(c->n_events + 1) * sizeof *r);
    for (int64_t i = 0; i < c->n_events; i++) {
        const tdm_prof_event *e = &c->events[i];
        const char *tname = e->tid >= 0 && e->tid < c->n_threads ? c->threads[e->tid].name : "";
        r[i] = (tdm_prof_rec){
            .name = e->name ? e->name : "?",
            /* signed: an event may start before the origin (opened before session start) */
            .t0_us = (double)((int64_t)(e->t0_ns - c->origin_ns)) / 1e3,
            .t1_us = (double)((int64_t)(e->t1_ns - c->origin_ns)) / 1e3,
            .arg = e->arg,
            .bytes = e->bytes,
            .rank = rank,
            .tid = e->tid,
            .cat = e->cat,
            .thread_kind = (uint8_t)tdm_prof_thread_kind_of(tname),
            .instant = e->instant,
            .level = e->level,
        };
    }
    *n = c->n_events;
    return r;
}

static void sep(tdm_strbuf *sb, int *first) {
    if (*first) *first = 0;
    else tdm_sb_puts(sb, ",\n");
}

/* The ends of the open events of one lane, innermost last. */
typedef struct lane_stack {
    double *end;
    int64_t n, cap;
} lane_stack;

typedef struct thread_lanes {
    lane_stack *lane;
    int n;
} thread_lanes;

typedef struct by_start {
    double t0, t1;
    int64_t i;
} by_start;

static int cmp_by_start(const void *a, const void *b) {
    const by_start *x = a, *y = b;
    if (x->t0 != y->t0) return x->t0 < y->t0 ? -1 : 1;
    if (x->t1 != y->t1) return x->t1 > y->t1 ? -1 : 1; /* enclosing first */
    return (x->i > y->i) - (x->i < y->i);
}

/* The lane of each record (lane[i] for recs[i]) and the number of lanes of each thread (tl[t].n).
 * The complete ("X") events of one Chrome trace thread must nest: a viewer drops or misdraws an event
 * that starts inside another and ends after it (Perfetto counts slice_drop_overlapping_complete_event).
 * Collectives in flight overlap on the communication thread (the parameter all-gathers posted together,
 * gradient buckets), and a COMM record of the inline progress mode spans the compute thread's layers. So
 * each event goes to the first lane of its thread in which it nests; lane 0 is the thread's own track. */
static int *assign_lanes(const tdm_prof_rec *recs, int64_t n, thread_lanes *tl, int n_threads) {
    int *lane = tdm_xcalloc((size_t)n + 1, sizeof *lane);
    by_start *order = tdm_xmalloc((size_t)(n + 1) * sizeof *order);
    for (int64_t i = 0; i < n; i++) order[i] = (by_start){recs[i].t0_us, recs[i].t1_us, i};
    qsort(order, (size_t)n, sizeof *order, cmp_by_start);
    for (int64_t k = 0; k < n; k++) {
        const tdm_prof_rec *r = &recs[order[k].i];
        if (r->tid < 0 || r->tid >= n_threads) continue; /* not in the thread table: its own track as is */
        thread_lanes *t = &tl[r->tid];
        /* a collective in flight recorded on a thread of another kind (inline progress) never takes the thread's
         * own track: one posted before the step would push the step and its layers off it */
        int l = r->cat == TDM_PROF_COMM && r->thread_kind != TDM_PROF_THREAD_COMM ? 1 : 0;
        for (;; l++) {
            while (t->n <= l) {
                t->lane = tdm_xrealloc(t->lane, (size_t)(t->n + 1) * sizeof *t->lane);
                t->lane[t->n++] = (lane_stack){0};
            }
            lane_stack *st = &t->lane[l];
            while (st->n > 0 && st->end[st->n - 1] <= r->t0_us) st->n--; /* closed before r starts */
            if (st->n == 0 || r->t1_us <= st->end[st->n - 1]) break;     /* r nests in the innermost open one */
        }
        lane_stack *st = &t->lane[l];
        if (st->n == st->cap) {
            st->cap = st->cap ? 2 * st->cap : 16;
            st->end = tdm_xrealloc(st->end, (size_t)st->cap * sizeof *st->end);
        }
        st->end[st->n++] = r->t1_us;
        lane[order[k].i] = l;
    }
    free(order);
    return lane;
}

void tdm_prof_trace_append_rank(tdm_strbuf *sb, int32_t rank, const tdm_prof_thread *threads, int n_threads,
                                const tdm_prof_rec *recs, int64_t n, int *first) {
    thread_lanes *tl = tdm_xcalloc((size_t)n_threads + 1, sizeof *tl);
    int *lane = assign_lanes(recs, n, tl, n_threads);
    sep(sb, first);
    tdm_sb_printf(sb, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d\"}}",
                  rank, rank);
    sep(sb, first);
    tdm_sb_printf(sb,
                  "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}",
                  rank, rank);
    for (int i = 0; i < n_threads; i++) {
        if (!threads[i].present) continue;
        const int idx = threads[i].tid, lanes = idx >= 0 && idx < n_threads && tl[idx].n > 1 ? tl[idx].n : 1;
        for (int l = 0; l < lanes; l++) { /* lane l > 0: track tid + l * TDM_PROF_TRACE_LANE_TID, "comm (2)" */
            const int64_t tid = (int64_t)idx + (int64_t)l * TDM_PROF_TRACE_LANE_TID;
            char name[48];
            if (l == 0) snprintf(name, sizeof name, "%s", threads[i].name);
            else snprintf(name, sizeof name, "%s (%d)", threads[i].name, l + 1);
            sep(sb, first);
            tdm_sb_printf(sb,
                          "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%lld,\"args\":{\"name\":", rank,
                          (long long)tid);
            tdm_sb_json_string(sb, name, strlen(name));
            tdm_sb_puts(sb, "}}");
            /* compute first, then comm, then loader, in Perfetto's track order; a thread's lanes beside it */
            sep(sb, first);
            tdm_sb_printf(sb,
                          "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%lld,"
                          "\"args\":{\"sort_index\":%d}}",
                          rank, (long long)tid, (int)tdm_prof_thread_kind_of(threads[i].name) * 100 + idx);
        }
    }
    for (int64_t i = 0; i < n; i++) {
        const tdm_prof_rec *r = &recs[i];
        sep(sb, first);
        tdm_sb_puts(sb, "{\"name\":");
        tdm_sb_json_string(sb, r->name, strlen(r->name));
        if (r->instant)
            tdm_sb_printf(sb, ",\"cat\":\"%s\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f", tdm_prof_cat_name(r->cat),
                          r->t0_us);
        else
            tdm_sb_printf(sb, ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f", tdm_prof_cat_name(r->cat),
                          r->t0_us, r->t1_us - r->t0_us);
        tdm_sb_printf(sb, ",\"pid\":%d,\"tid\":%lld,\"args\":{\"arg\":%lld,\"level\":%d", r->rank,
                      (long long)r->tid + (long long)lane[i] * TDM_PROF_TRACE_LANE_TID, (long long)r->arg, r->level);
        if (r->bytes >= 0) tdm_sb_printf(sb, ",\"bytes\":%lld", (long long)r->bytes);
        tdm_sb_puts(sb, "}}");
    }
    for (int t = 0; t < n_threads; t++) {
        for (int l = 0; l < tl[t].n; l++) free(tl[t].lane[l].end);
        free(tl[t].lane);
    }
    free(tl);
    free(lane);
}

void tdm_prof_trace_open(tdm_strbuf *sb) { tdm_sb_puts(sb, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"); }
void tdm_prof_trace_close(tdm_strbuf *sb) { tdm_sb_puts(sb, "\n]}\n"); }

/* ---- reading ---- */

typedef struct thread_name {
    int64_t pid, tid;
    int64_t order; /* position in the file: a later name for the same thread wins */
    const char *name;
} thread_name;

static int cmp_thread_name(const void *a, const void *b) {
    const thread_name *x = a, *y = b;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

/* The last name given to (pid, tid) in tn[n], sorted by cmp_thread_name; "" if none.
 * A binary search: a trace may name as many threads as it has events. */
static const char *thread_name_of(const thread_name *tn, int64_t n, int64_t pid, int64_t tid) {
    int64_t lo = 0, hi = n; /* first entry after every (pid, tid, *) */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (tn[mid].pid < pid || (tn[mid].pid == pid && tn[mid].tid <= tid)) lo = mid + 1;
        else hi = mid;
    }
    return lo > 0 && tn[lo - 1].pid == pid && tn[lo - 1].tid == tid ? tn[lo - 1].name : "";
}

static int cmp_rec(const void *a, const void *b) {
    const tdm_prof_rec *x = a, *y = b;
    if (x->rank != y->rank) return x->rank - y->rank;
    if (x->t0_us != y->t0_us) return x->t0_us < y->t0_us ? -1 : 1;
    return (x->t1_us < y->t1_us) - (x->t1_us > y->t1_us);
}

static int get_num(const tdm_json *o, const char *key, double *v) {
    const tdm_json *x = tdm_json_get(o, key);
    if (!x || x->type != TDM_JSON_NUMBER) return -1;
    *v = x->num;
    return 0;
}

/* A pid or tid that converts to int32 without overflow. */
static int id_in_range(double v) { return v > -2147483649.0 && v < 2147483648.0; }

int tdm_prof_trace_parse(const char *text, size_t len, const char *name, tdm_prof_trace *t, tdm_error *err) {
    memset(t, 0, sizeof *t);
    thread_name *tn = NULL;
    t->doc = tdm_json_parse(text, len, name, err);
    if (!t->doc) return -1;
    const tdm_json *root = tdm_json_root(t->doc);
    const tdm_json *ev = root->type == TDM_JSON_ARRAY ? root : tdm_json_get(root, "traceEvents");
    if (!ev || ev->type != TDM_JSON_ARRAY) {
        tdm_errorf(err, "%s: expected an object with a \"traceEvents\" array", name);
        goto fail;
    }
    t->recs = tdm_xmalloc((ev->len + 1) * sizeof *t->recs);
    tn = tdm_xmalloc((ev->len + 1) * sizeof *tn);
    int64_t n_tn = 0;
    int max_pid = -1;
    for (size_t i = 0; i < ev->len; i++) { /* thread names first: they may follow events */
        const tdm_json *e = ev->items[i];
        if (e->type != TDM_JSON_OBJECT) {
            tdm_errorf(err, "%s: traceEvents[%zu]: expected an object", name, i);
            goto fail;
        }
        const tdm_json *ph = tdm_json_get(e, "ph"), *nm = tdm_json_get(e, "name");
        if (!ph || ph->type != TDM_JSON_STRING || strcmp(ph->str, "M") || !nm || nm->type != TDM_JSON_STRING ||
            strcmp(nm->str, "thread_name"))
            continue;
        double pid = 0, tid = 0;
        const tdm_json *tname = tdm_json_get(tdm_json_get(e, "args"), "name");
        if (get_num(e, "pid", &pid) || get_num(e, "tid", &tid) || !tname || tname->type != TDM_JSON_STRING ||
            !id_in_range(pid) || !id_in_range(tid)) {
            tdm_errorf(err, "%s: traceEvents[%zu]: thread_name needs pid, tid and args.name", name, i);
            goto fail;
        }
        tn[n_tn] = (thread_name){(int64_t)pid, (int64_t)tid, n_tn, tname->str};
        n_tn++;
    }
    qsort(tn, (size_t)n_tn, sizeof *tn, cmp_thread_name);
    for (size_t i = 0; i < ev->len; i++) {
        const tdm_json *e = ev->items[i];
        const tdm_json *ph = tdm_json_get(e, "ph"), *nm = tdm_json_get(e, "name"), *cat = tdm_json_get(e, "cat");
        if (!ph || ph->type != TDM_JSON_STRING) {
            tdm_errorf(err, "%s: traceEvents[%zu]: expected a string \"ph\"", name, i);
            goto fail;
        }
        int instant = !strcmp(ph->str, "i") || !strcmp(ph->str, "I");
        if (strcmp(ph->str, "X") && !instant) continue;
        double ts, dur = 0, pid = 0, tid = 0;
        if (!nm || nm->type != TDM_JSON_STRING || get_num(e, "ts", &ts) || (!instant && get_num(e, "dur", &dur)) ||
            get_num(e, "pid", &pid) || get_num(e, "tid", &tid) || dur < 0 || pid < 0 || pid > 1e6 ||
            !id_in_range(tid)) {
            tdm_errorf(err,
                       "%s: traceEvents[%zu]: expected name, ts, pid in [0, 1e6], a 32-bit tid (and dur >= 0 "
                       "for \"X\")",
                       name, i);
            goto fail;
        }
        int c = cat && cat->type == TDM_JSON_STRING ? tdm_prof_cat_from_name(cat->str) : -1;
        double arg = -1, level = 0, bytes = -1;
        const tdm_json *args = tdm_json_get(e, "args");
        get_num(args, "arg", &arg);
        get_num(args, "level", &level);
        get_num(args, "bytes", &bytes);
        /* converting a double outside the target type's range is undefined behaviour */
        if (!(arg > -9e18 && arg < 9e18) || !(level >= 0 && level <= 255) || !(bytes >= -1 && bytes < 9e18)) {
            tdm_errorf(err,
                       "%s: traceEvents[%zu]: args.arg must fit 64 bits, args.level be in [0, 255] and args.bytes "
                       "in [0, 9e18)",
                       name, i);
            goto fail;
        }
        tdm_prof_rec *r = &t->recs[t->n++];
        const char *thread = thread_name_of(tn, n_tn, (int64_t)pid, (int64_t)tid);
        *r = (tdm_prof_rec){.name = nm->str,
                            .t0_us = ts,
                            .t1_us = ts + dur,
                            .arg = (int64_t)arg,
                            .bytes = bytes >= 0 ? (int64_t)bytes : -1,
                            .rank = (int32_t)pid,
                            .tid = (int32_t)tid,
                            .cat = (uint8_t)(c < 0 ? TDM_PROF_MARK : c),
                            .thread_kind = (uint8_t)tdm_prof_thread_kind_of(thread),
                            .instant = (uint8_t)instant,
                            .level = (uint8_t)level};
        if ((int)pid > max_pid) max_pid = (int)pid;
    }
    free(tn);
    (void)max_pid;
    qsort(t->recs, (size_t)t->n, sizeof *t->recs, cmp_rec);
    /* the ranks present: a one-rank file (trace_rank1.json) or a run that profiled some ranks
     * holds fewer than 1 + its largest pid */
    t->ranks = tdm_xmalloc((size_t)(t->n + 1) * sizeof *t->ranks);
    t->n_ranks = 0;
    for (int64_t i = 0; i < t->n; i++)
        if (t->n_ranks == 0 || t->ranks[t->n_ranks - 1] != t->recs[i].rank) t->ranks[t->n_ranks++] = t->recs[i].rank;
    return 0;
fail:
    free(tn);
    tdm_prof_trace_free(t);
    return -1;
}

int tdm_prof_trace_load(const char *path, size_t max_bytes, tdm_prof_trace *t, tdm_error *err) {
    size_t len;
    char *text = tdm_read_file(path, max_bytes, &len, err);
    if (!text) {
        memset(t, 0, sizeof *t);
        return -1;
    }
    int rc = tdm_prof_trace_parse(text, len, path, t, err);
    free(text);
    return rc;
}

void tdm_prof_trace_free(tdm_prof_trace *t) {
    if (t->doc) tdm_json_free(t->doc);
    free(t->recs);
    free(t->ranks);
    memset(t, 0, sizeof *t);
}

static void json_num(tdm_strbuf *sb, const char *key, double v) {
    if (isfinite(v)) tdm_sb_printf(sb, "\"%s\":%.6g", key, v);
    else tdm_sb_printf(sb, "\"%s\":null", key);
}

static void step_json(tdm_strbuf *sb, const tdm_prof_step_stats *s) {
    tdm_sb_printf(sb, "{\"rank\":%d,\"step\":%lld,", s->rank, (long long)s->step);
    json_num(sb, "step_ms", s->step_ms), tdm_sb_putc(sb, ',');
    json_num(sb, "compute_ms", s->compute_ms), tdm_sb_putc(sb, ',');
    json_num(sb, "comm_ms", s->comm_ms), tdm_sb_putc(sb, ',');
    json_num(sb, "hidden_comm_ms", s->hidden_ms), tdm_sb_putc(sb, ',');
    json_num(sb, "exposed_comm_ms", s->exposed_ms), tdm_sb_putc(sb, ',');
    json_num(sb, "last_bucket_comm_ms", s->last_comm_ms), tdm_sb_putc(sb, ',');
    json_num(sb, "hideable_comm_ms", s->hideable_ms), tdm_sb_putc(sb, ',');
    json_num(sb, "data_wait_ms", s->data_wait_ms), tdm_sb_putc(sb, ',');
    json_num(sb, "wait_ms", s->wait_ms), tdm_sb_putc(sb, ',');
    json_num(sb, "ideal_step_ms", s->ideal_step_ms), tdm_sb_putc(sb, ',');
    json_num(sb, "overlap_efficiency", s->overlap_efficiency), tdm_sb_putc(sb, ',');
    json_num(sb, "sched_hideable_comm_ms", s->sched_hideable_ms), tdm_sb_putc(sb, ',');
    json_num(sb, "sched_ideal_step_ms", s->sched_ideal_step_ms), tdm_sb_putc(sb, ',');
    json_num(sb, "sched_overlap_efficiency", s->sched_overlap_efficiency);
    tdm_sb_putc(sb, '}');
}

void tdm_prof_trace_summarize(const tdm_prof_trace *t, tdm_strbuf *text, tdm_strbuf *json) {
    tdm_prof_op_row *rows = tdm_xmalloc((size_t)(t->n + 1) * sizeof *rows);
    int64_t n_rows = tdm_prof_op_summary(t->recs, t->n, rows);
    tdm_prof_step_stats *steps = NULL;
    int64_t n_steps = 0;
    /* recs are sorted by rank: each rank reads only its own run, so a sparse pid (up to
     * 1e6 in a hand-made trace) costs nothing instead of a pass over every record */
    for (int64_t lo = 0, hi; lo < t->n; lo = hi) {
        const int32_t r = t->recs[lo].rank;
        for (hi = lo; hi < t->n && t->recs[hi].rank == r; hi++) continue;
        int64_t k = tdm_prof_analyze_rank(t->recs + lo, hi - lo, r, NULL, 0);
        steps = tdm_xrealloc(steps, (size_t)(n_steps + k + 1) * sizeof *steps);
        n_steps += tdm_prof_analyze_rank(t->recs + lo, hi - lo, r, steps + n_steps, k);
    }
    if (text) {
        tdm_prof_format_op_summary(text, rows, n_rows, t->ranks, t->n_ranks);
        tdm_sb_putc(text, '\n');
        tdm_prof_format_steps(text, steps, n_steps);
    }
    if (json) {
        tdm_sb_puts(json, "{\"n_ranks\":");
        tdm_sb_printf(json, "%d,\"ranks\":[", t->n_ranks);
        for (int i = 0; i < t->n_ranks; i++) tdm_sb_printf(json, "%s%d", i ? "," : "", t->ranks[i]);
        tdm_sb_puts(json, "],\"steps\":[");
        for (int64_t i = 0; i < n_steps; i++) {
            if (i) tdm_sb_puts(json, ",\n");
            step_json(json, &steps[i]);
        }
        tdm_prof_step_stats m;
        tdm_prof_step_stats_mean(steps, n_steps, &m);
        tdm_sb_puts(json, "],\n\"mean\":");
        step_json(json, &m);
        tdm_sb_puts(json, ",\n\"operators\":[");
        for (int64_t i = 0; i < n_rows; i++) {
            if (i) tdm_sb_puts(json, ",\n");
            tdm_sb_puts(json, "{\"name\":");
            tdm_sb_json_string(json, rows[i].name, strlen(rows[i].name));
            tdm_sb_printf(json, ",\"cat\":\"%s\",\"count\":%lld,", tdm_prof_cat_name(rows[i].cat),
                          (long long)rows[i].count);
            json_num(json, "total_ms", rows[i].total_ms), tdm_sb_putc(json, ',');
            json_num(json, "mean_ms", rows[i].mean_ms), tdm_sb_putc(json, ',');
            json_num(json, "max_ms", rows[i].max_ms);
            tdm_sb_putc(json, '}');
        }
        tdm_sb_puts(json, "]}");
    }
    free(rows);
    free(steps);
}

void tdm_prof_format_threads(tdm_strbuf *sb, const tdm_json *th) { tdm_prof_format_threads_of(sb, th, NULL, 0); }

void tdm_prof_format_threads_of(tdm_strbuf *sb, const tdm_json *th, const int *ranks, int n_ranks) {
    if (!th || th->type != TDM_JSON_ARRAY || !th->len) return;
    size_t shown = 0;
    for (size_t i = 0; i < th->len; i++) { /* the rows of the listed ranks only, when a list is given */
        double r = -1;
        tdm_json_get_num(th->items[i], "rank", &r, NULL);
        int keep = !ranks;
        for (int k = 0; !keep && k < n_ranks; k++) keep = ranks[k] == (int)r;
        shown += keep;
    }
    if (!shown) return;
    tdm_sb_printf(sb, "\nPer-thread CPU statistics over the profiled steps\n");
    tdm_sb_printf(sb, "  %4s %-12s %9s %9s %9s %9s %9s %9s %8s\n", "rank", "thread", "user ms", "sys ms", "run ms",
                  "vol csw", "invol csw", "minflt", "dropped");
    for (size_t i = 0; i < th->len; i++) {
        const tdm_json *t = th->items[i];
        const tdm_json *nm = tdm_json_get(t, "name");
        double v[8] = {-1, -1, -1, -1, -1, -1, -1, 0};
        const char *keys[] = {
            "rank",         "user_ms",       "system_ms", "run_ms", "voluntary_switches", "involuntary_switches",
            "minor_faults", "dropped_events"};
        for (int k = 0; k < 8; k++) tdm_json_get_num(t, keys[k], &v[k], NULL);
        int keep = !ranks;
        for (int k = 0; !keep && k < n_ranks; k++) keep = ranks[k] == (int)v[0];
        if (!keep) continue;
        tdm_sb_printf(sb, "  %4.0f %-12.12s %9.1f %9.1f %9.2f %9.0f %9.0f %9.0f %8.0f\n", v[0],
                      nm && nm->type == TDM_JSON_STRING ? nm->str : "?", v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
    }
    tdm_sb_printf(sb, "  (user/sys have the kernel's tick resolution; run ms is the scheduler's ns count. Voluntary\n"
                      "   switches are blocking waits; involuntary ones mean the thread was preempted.)\n");
}
