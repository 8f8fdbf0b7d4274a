/* trace_kineto.c - Chrome-format trace events as PyTorch's profiler writes them (Kineto's
 * object with "traceEvents"; PyTorch 1.13's legacy top-level array), and the Ascend PyTorch
 * profiler's trace_view.json, which shares the format. One pass over the stream: each event
 * is read into a small record, and only what the analysis needs is kept (trace.h). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "runs/json_stream.h"
#include "runs/trace.h"
#include "runs/trace_internal.h"

/* One event's fields; strings live in `arena` until the next event. */
typedef struct kev {
    char ph;
    size_t name, name_len, cat, cat_len, pid, pid_len, tid, tid_len, aname, aname_len, coll, coll_len, dtype, dtype_len;
    int has_name, has_cat, has_pid, has_tid, has_ts, has_dur, has_aname, has_coll, has_dtype;
    int ts_int;
    double ts, dur;
    int64_t stream, corr;
    double in_nelems, out_nelems, group_size;
} kev;

typedef struct thread_key {
    char *key;  /* "pid\x1ftid" */
    char *pid;  /* for process names */
    char *name; /* thread_name metadata, NULL until seen */
} thread_key;

typedef struct reader {
    tdm_js *js;
    const char *path;
    tdm_runs_trace *t;
    tdm_strbuf arena;
    kev e;
    thread_key *threads;
    int32_t n_threads, last_thread;
    char **proc_pid, **proc_name; /* process_name metadata */
    int n_proc;
    int64_t n_events, n_x, n_skipped_x, n_begin_end;
    int top_array, any_cat, tandem_cats, foreign_cats, any_step_phase, base_decided;
    char time_unit[16];
    tdm_error *err;
} reader;

#define MAX_THREADS 65536

static size_t keep_str(reader *r, size_t *len) {
    size_t n;
    const char *s = tdm_js_text(r->js, &n);
    size_t off = r->arena.len;
    tdm_sb_append(&r->arena, s, n);
    tdm_sb_putc(&r->arena, '\0');
    *len = n;
    return off;
}

static const char *astr(const reader *r, size_t off) { return r->arena.data + off; }

static int fail_js(reader *r) { return tdm_errorf(r->err, "%s", tdm_js_error(r->js)); }

/* A number, or a string holding one (Ascend writes "ts" as a string). */
static int read_num(reader *r, double *v, int *is_int) {
    tdm_js_tok k = tdm_js_next(r->js);
    if (k == TDM_JS_ERROR) return -1;
    if (k == TDM_JS_NUMBER || k == TDM_JS_STRING) {
        *v = tdm_js_number(r->js);
        if (is_int) *is_int = k == TDM_JS_NUMBER && tdm_js_number_is_int(r->js);
        return isfinite(*v) ? 1 : 0;
    }
    if (k == TDM_JS_OBJECT || k == TDM_JS_ARRAY) return tdm_js_skip_rest(r->js) ? -1 : 0;
    return 0;
}

/* A timestamp. A double holds µs with a nanosecond fraction exactly enough up to 2^53 ns
 * (Kineto's float µs since boot); Ascend writes 19 digits ("1704161511422904.204", a string):
 * then the trace's times are kept relative to the first one's whole microseconds (ts_base),
 * decimal by decimal, so that no nanosecond is lost. */
static int read_ts(reader *r, double *v, int *is_int) {
    tdm_js_tok k = tdm_js_next(r->js);
    if (k == TDM_JS_ERROR) return -1;
    if (k == TDM_JS_OBJECT || k == TDM_JS_ARRAY) return tdm_js_skip_rest(r->js) ? -1 : 0;
    if (k != TDM_JS_NUMBER && k != TDM_JS_STRING) return 0;
    *is_int = k == TDM_JS_NUMBER && tdm_js_number_is_int(r->js);
    double d = tdm_js_number(r->js);
    if (!isfinite(d)) return 0;
    size_t n;
    const char *s = tdm_js_text(r->js, &n);
    /* whole digits and fraction digits, when the text is plain [-]digits[.digits] */
    int64_t ip = 0;
    int nd = 0, neg = 0, plain = 1;
    size_t i = 0;
    if (i < n && s[i] == '-') neg = 1, i++;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        if (nd < 18) ip = ip * 10 + (s[i] - '0');
        else plain = 0;
        nd++;
    }
    size_t frac_at = i;
    int nf = 0;
    if (i < n && s[i] == '.')
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) nf++;
    if (i != n || neg) plain = 0;
    if (!r->base_decided) {
        r->base_decided = 1;
        /* the decimal mantissa beyond 2^53: a double cannot hold it */
        if (plain && (double)ip * pow(10, nf) >= 9007199254740992.0) r->t->ts_base = ip;
    }
    if (r->t->ts_base == 0 || !plain) {
        *v = d - (double)r->t->ts_base;
        return 1;
    }
    double frac = 0;
    if (nf > 0) { /* "0.204" from ".204": the digit before the point is a whole-µs digit, replaced */
        char b[40];
        int m = nf < 30 ? nf : 30;
        b[0] = '0';
        memcpy(b + 1, s + frac_at, (size_t)m + 1);
        if (tdm_js_parse_number(b, (size_t)m + 2, &frac) != 0) frac = 0;
    }
    *v = (double)(ip - r->t->ts_base) + frac;
    return 1;
}

static int read_id(reader *r, size_t *off, size_t *len, int *has) {
    tdm_js_tok k = tdm_js_next(r->js);
    if (k == TDM_JS_ERROR) return -1;
    if (k == TDM_JS_NUMBER || k == TDM_JS_STRING) {
        *off = keep_str(r, len);
        *has = 1;
        return 0;
    }
    if (k == TDM_JS_OBJECT || k == TDM_JS_ARRAY) return tdm_js_skip_rest(r->js);
    return 0;
}

static int read_string_field(reader *r, size_t *off, size_t *len, int *has) {
    tdm_js_tok k = tdm_js_next(r->js);
    if (k == TDM_JS_ERROR) return -1;
    if (k == TDM_JS_STRING) {
        *off = keep_str(r, len);
        *has = 1;
        return 0;
    }
    if (k == TDM_JS_OBJECT || k == TDM_JS_ARRAY) return tdm_js_skip_rest(r->js);
    return 0;
}

static int64_t as_id(double v) { return v >= 0 && v < 9e18 ? (int64_t)v : -1; }

#define KEY_IS(lit) (n == sizeof(lit) - 1 && memcmp(key, lit, sizeof(lit) - 1) == 0)

static int read_args(reader *r) {
    kev *e = &r->e;
    tdm_js_tok k;
    while ((k = tdm_js_next(r->js)) == TDM_JS_KEY) {
        size_t n;
        const char *key = tdm_js_text(r->js, &n);
        double v;
        int rc = 0;
        if (KEY_IS("stream")) {
            if ((rc = read_num(r, &v, NULL)) < 0) return -1;
            e->stream = rc ? (int64_t)(v >= -1 && v < 2e9 ? v : -1) : -1;
        } else if (KEY_IS("correlation")) {
            if ((rc = read_num(r, &v, NULL)) < 0) return -1;
            e->corr = rc ? as_id(v) : -1;
        } else if (KEY_IS("Collective name")) {
            if (read_string_field(r, &e->coll, &e->coll_len, &e->has_coll)) return -1;
        } else if (KEY_IS("In msg nelems")) {
            if ((rc = read_num(r, &v, NULL)) < 0) return -1;
            if (rc) e->in_nelems = v;
        } else if (KEY_IS("Out msg nelems")) {
            if ((rc = read_num(r, &v, NULL)) < 0) return -1;
            if (rc) e->out_nelems = v;
        } else if (KEY_IS("Group size")) {
            if ((rc = read_num(r, &v, NULL)) < 0) return -1;
            if (rc) e->group_size = v;
        } else if (KEY_IS("dtype")) {
            if (read_string_field(r, &e->dtype, &e->dtype_len, &e->has_dtype)) return -1;
        } else if (KEY_IS("name")) {
            if (read_string_field(r, &e->aname, &e->aname_len, &e->has_aname)) return -1;
        } else if (tdm_js_skip_value(r->js) != 0) {
            return -1;
        }
    }
    return k == TDM_JS_OBJECT_END ? 0 : -1;
}

/* Reads one event object (the '{' already read) into r->e. */
static int read_event(reader *r) {
    kev *e = &r->e;
    memset(e, 0, sizeof *e);
    e->stream = e->corr = -1;
    e->in_nelems = e->out_nelems = e->group_size = NAN;
    tdm_sb_clear(&r->arena);
    tdm_js_tok k;
    while ((k = tdm_js_next(r->js)) == TDM_JS_KEY) {
        size_t n;
        const char *key = tdm_js_text(r->js, &n);
        int rc;
        if (KEY_IS("ph")) {
            size_t off, len;
            int has = 0;
            rc = read_string_field(r, &off, &len, &has);
            if (has && len > 0) e->ph = astr(r, off)[0];
        } else if (KEY_IS("ts")) {
            int got = read_ts(r, &e->ts, &e->ts_int);
            if (got < 0) return -1;
            e->has_ts = got;
            rc = 0;
        } else if (KEY_IS("dur")) {
            int got = read_num(r, &e->dur, NULL);
            if (got < 0) return -1;
            e->has_dur = got;
            rc = 0;
        } else if (KEY_IS("name")) {
            rc = read_string_field(r, &e->name, &e->name_len, &e->has_name);
        } else if (KEY_IS("cat")) {
            rc = read_string_field(r, &e->cat, &e->cat_len, &e->has_cat);
        } else if (KEY_IS("pid")) {
            rc = read_id(r, &e->pid, &e->pid_len, &e->has_pid);
        } else if (KEY_IS("tid")) {
            rc = read_id(r, &e->tid, &e->tid_len, &e->has_tid);
        } else if (KEY_IS("args")) {
            tdm_js_tok a = tdm_js_next(r->js);
            if (a == TDM_JS_ERROR) return -1;
            rc = a == TDM_JS_OBJECT ? read_args(r) : a == TDM_JS_ARRAY ? tdm_js_skip_rest(r->js) : 0;
        } else {
            rc = tdm_js_skip_value(r->js);
        }
        if (rc) return -1;
    }
    return k == TDM_JS_OBJECT_END ? 0 : -1;
}

static int32_t thread_of(reader *r) {
    kev *e = &r->e;
    const char *pid = e->has_pid ? astr(r, e->pid) : "";
    const char *tid = e->has_tid ? astr(r, e->tid) : "";
    size_t lp = strlen(pid), lt = strlen(tid);
    if (r->last_thread >= 0) {
        const char *k = r->threads[r->last_thread].key;
        if (!strncmp(k, pid, lp) && k[lp] == '\x1f' && !strcmp(k + lp + 1, tid)) return r->last_thread;
    }
    for (int32_t i = 0; i < r->n_threads; i++) {
        const char *k = r->threads[i].key;
        if (!strncmp(k, pid, lp) && k[lp] == '\x1f' && !strcmp(k + lp + 1, tid)) return r->last_thread = i;
    }
    if (r->n_threads >= MAX_THREADS) return r->last_thread = MAX_THREADS - 1; /* a flood of threads: pooled */
    r->threads = tdm_xrealloc(r->threads, (size_t)(r->n_threads + 1) * sizeof *r->threads);
    thread_key *th = &r->threads[r->n_threads];
    th->key = tdm_xmalloc(lp + lt + 2);
    memcpy(th->key, pid, lp);
    th->key[lp] = '\x1f';
    memcpy(th->key + lp + 1, tid, lt + 1);
    th->pid = tdm_xstrdup(pid);
    th->name = NULL;
    return r->last_thread = r->n_threads++;
}

static int starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* ProfilerStep#N -> N, else -1. */
static int64_t step_number(const char *name) {
    if (!starts(name, "ProfilerStep#")) return -1;
    const char *p = name + 13;
    if (!isdigit((unsigned char)*p)) return -1;
    int64_t v = 0;
    for (; isdigit((unsigned char)*p) && v < ((int64_t)1 << 58); p++) v = v * 10 + (*p - '0');
    return v;
}

static int tandem_cat(const char *c) {
    return !strcmp(c, "phase") || !strcmp(c, "layer") || !strcmp(c, "comm") || !strcmp(c, "wait") ||
           !strcmp(c, "data") || !strcmp(c, "kernel") || !strcmp(c, "mark");
}

static void on_event(reader *r) {
    kev *e = &r->e;
    tdm_runs_trace *t = r->t;
    r->n_events++;
    if (!e->has_ts || !e->ts_int) t->ts_float = 1; /* pandas' ts column turns float64 */
    const char *cat = e->has_cat ? astr(r, e->cat) : "";
    const char *name = e->has_name ? astr(r, e->name) : "";
    if (e->has_cat) {
        r->any_cat = 1;
        if (tandem_cat(cat)) r->tandem_cats++;
        else r->foreign_cats++;
        if (!strcmp(cat, "phase") && !strcmp(name, "step")) r->any_step_phase = 1;
    }
    if (e->ph == 'M') {
        if (!e->has_aname) return;
        const char *v = astr(r, e->aname);
        if (!strcmp(name, "process_name")) {
            const char *pid = e->has_pid ? astr(r, e->pid) : "";
            r->proc_pid = tdm_xrealloc(r->proc_pid, (size_t)(r->n_proc + 1) * sizeof *r->proc_pid);
            r->proc_name = tdm_xrealloc(r->proc_name, (size_t)(r->n_proc + 1) * sizeof *r->proc_name);
            r->proc_pid[r->n_proc] = tdm_xstrdup(pid);
            r->proc_name[r->n_proc++] = tdm_xstrdup(v);
        } else if (!strcmp(name, "thread_name")) {
            int32_t th = thread_of(r);
            free(r->threads[th].name);
            r->threads[th].name = tdm_xstrdup(v);
        }
        return;
    }
    if (e->ph == 'B' || e->ph == 'E') {
        r->n_begin_end++;
        return;
    }
    if (e->ph != 'X') return;
    r->n_x++;
    if (!e->has_ts || !e->has_dur || e->dur < 0 || !e->has_name) {
        r->n_skipped_x++;
        return;
    }
    int device = starts(cat, "kernel") || (starts(cat, "gpu_mem") && strlen(cat) > 7) ||
                 starts(cat, "mtia_ccp_events") || e->stream >= 0;
    int hta_gpu = (e->stream >= 0 && e->corr >= 0) || !strcmp(name, "Event Sync") || !strcmp(name, "Context Sync");
    int64_t sn = step_number(name);
    if (sn >= 0 && !hta_gpu && e->has_cat) tdm_runs_saw_step_name(t, sn, e->ts, e->dur);
    if (!strcmp(cat, "gpu_user_annotation") || !strcmp(cat, "Trace")) return; /* the GPU's copies of CPU annotations */
    if (sn >= 0 && !device && (!e->has_cat || !strcmp(cat, "user_annotation") || !strcmp(cat, "cpu_op")))
        tdm_runs_add_step(t, sn, e->ts, e->dur);

    tdm_runs_span *s = tdm_runs_add_span(t);
    s->ts = e->ts;
    s->dur = e->dur;
    s->corr = e->corr;
    s->name = tdm_runs_intern(t, name, e->name_len);
    if (device) {
        s->flags |= TDM_RUNS_F_DEVICE;
        s->lane = (int32_t)e->stream;
        s->kind = (uint8_t)tdm_runs_name_kind(t, s->name, 1);
    } else {
        s->lane = thread_of(r);
        s->kind = (uint8_t)tdm_runs_name_kind(t, s->name, 0);
    }
    if (hta_gpu) s->flags |= TDM_RUNS_F_HTA_GPU;
    if (e->stream != -1) s->flags |= TDM_RUNS_F_STREAM;
    if (sn >= 0) s->flags |= TDM_RUNS_F_STEP_NAME;
    if (e->has_coll || (device && s->kind == TDM_RUNS_COMM && (isfinite(e->in_nelems) || isfinite(e->group_size)))) {
        const char *cn = e->has_coll ? astr(r, e->coll) : name;
        int k = tdm_runs_coll_kind_of(cn);
        if (k < 0) k = tdm_runs_coll_kind_of(name);
        int eb = e->has_dtype ? tdm_runs_dtype_bytes(astr(r, e->dtype)) : 0;
        double nel = k == TDM_RUNS_ALL_GATHER ? e->out_nelems : e->in_nelems;
        if (!isfinite(nel)) nel = isfinite(e->in_nelems) ? e->in_nelems : e->out_nelems;
        tdm_runs_coll c = {.span = (int32_t)(s - t->spans),
                           .kind = (uint8_t)(k < 0 ? TDM_RUNS_COLL_OTHER : k),
                           .launch_ts = NAN,
                           .bytes = eb > 0 && isfinite(nel) && nel >= 0 && nel < 1e17 ? (int64_t)nel * eb : -1,
                           .group_size = isfinite(e->group_size) && e->group_size >= 1 && e->group_size < 1e9
                                             ? (int32_t)e->group_size
                                             : -1};
        s->coll = tdm_runs_add_coll(t, &c);
    }
}

static int read_events(reader *r) {
    tdm_js_tok k;
    int64_t i = 0;
    while ((k = tdm_js_next(r->js)) != TDM_JS_ARRAY_END) {
        if (k == TDM_JS_ERROR) return fail_js(r);
        if (k != TDM_JS_OBJECT)
            return tdm_errorf(r->err, "%s: traceEvents[%lld]: expected an event object", r->path, (long long)i);
        if (read_event(r) != 0) return fail_js(r);
        on_event(r);
        i++;
    }
    return 0;
}

static int read_distributed_info(reader *r) {
    tdm_js_tok k;
    while ((k = tdm_js_next(r->js)) == TDM_JS_KEY) {
        const char *key = tdm_js_text(r->js, NULL);
        double v;
        int rc;
        if (!strcmp(key, "rank") || !strcmp(key, "world_size")) {
            int is_rank = key[0] == 'r';
            if ((rc = read_num(r, &v, NULL)) < 0) return fail_js(r);
            if (rc && v >= 0 && v < 1e9) {
                if (is_rank) r->t->rank = (int64_t)v;
                else r->t->world_size = (int64_t)v;
            }
        } else if (!strcmp(key, "backend")) {
            tdm_js_tok b = tdm_js_next(r->js);
            if (b == TDM_JS_ERROR) return fail_js(r);
            if (b == TDM_JS_STRING) snprintf(r->t->backend, sizeof r->t->backend, "%s", tdm_js_text(r->js, NULL));
            else if ((b == TDM_JS_OBJECT || b == TDM_JS_ARRAY) && tdm_js_skip_rest(r->js)) return fail_js(r);
        } else if (tdm_js_skip_value(r->js) != 0) {
            return fail_js(r);
        }
    }
    return k == TDM_JS_OBJECT_END ? 0 : fail_js(r);
}

static int read_document(reader *r) {
    tdm_js_tok k = tdm_js_next(r->js);
    if (k == TDM_JS_ERROR) return fail_js(r);
    if (k == TDM_JS_ARRAY) {
        r->top_array = 1;
        if (read_events(r)) return -1;
    } else if (k == TDM_JS_OBJECT) {
        int seen_events = 0;
        while ((k = tdm_js_next(r->js)) == TDM_JS_KEY) {
            const char *key = tdm_js_text(r->js, NULL);
            if (!strcmp(key, "traceEvents")) {
                tdm_js_tok a = tdm_js_next(r->js);
                if (a == TDM_JS_ERROR) return fail_js(r);
                if (a != TDM_JS_ARRAY)
                    return tdm_errorf(r->err, "%s: \"traceEvents\" must be an array of events", r->path);
                if (read_events(r)) return -1;
                seen_events = 1;
            } else if (!strcmp(key, "distributedInfo")) {
                tdm_js_tok a = tdm_js_next(r->js);
                if (a == TDM_JS_ERROR) return fail_js(r);
                if (a == TDM_JS_OBJECT) {
                    if (read_distributed_info(r)) return -1;
                } else if (a == TDM_JS_ARRAY && tdm_js_skip_rest(r->js)) {
                    return fail_js(r);
                }
            } else if (!strcmp(key, "displayTimeUnit")) {
                tdm_js_tok a = tdm_js_next(r->js);
                if (a == TDM_JS_ERROR) return fail_js(r);
                if (a == TDM_JS_STRING) snprintf(r->time_unit, sizeof r->time_unit, "%s", tdm_js_text(r->js, NULL));
                else if ((a == TDM_JS_OBJECT || a == TDM_JS_ARRAY) && tdm_js_skip_rest(r->js)) return fail_js(r);
            } else if (tdm_js_skip_value(r->js) != 0) {
                return fail_js(r);
            }
        }
        if (k == TDM_JS_ERROR) return fail_js(r);
        if (!seen_events) {
            tdm_errorf(r->err,
                       "%s: expected a profiler trace: a JSON object with a \"traceEvents\" array, or an "
                       "array of events",
                       r->path);
            return TDM_RUNS_NOT_A_TRACE;
        }
    } else {
        return tdm_errorf(r->err,
                          "%s: expected a profiler trace: a JSON object with a \"traceEvents\" array, or an "
                          "array of events",
                          r->path);
    }
    k = tdm_js_next(r->js);
    if (k != TDM_JS_EOF) return fail_js(r);
    return 0;
}

static const char *proc_name_of(const reader *r, const char *pid) {
    for (int i = r->n_proc - 1; i >= 0; i--)
        if (!strcmp(r->proc_pid[i], pid)) return r->proc_name[i];
    return NULL;
}

/* Ascend's "Overlap Analysis" process: its lanes become device spans (Computing, Communication)
 * and totals; the device's own tasks are dropped then (the lanes already account for them). */
static void ascend_lanes(reader *r) {
    tdm_runs_trace *t = r->t;
    int32_t *lane_kind =
        tdm_xmalloc((size_t)(r->n_threads + 1) * sizeof *lane_kind); /* -1 keep CPU, 0..3 lane, 4 drop */
    int any = 0;
    for (int32_t i = 0; i < r->n_threads; i++) {
        const char *pn = proc_name_of(r, r->threads[i].pid), *tn = r->threads[i].name;
        lane_kind[i] = -1;
        if (pn && !strcmp(pn, "Overlap Analysis") && tn) {
            if (!strcmp(tn, "Computing")) lane_kind[i] = 0;
            else if (!strcmp(tn, "Communication")) lane_kind[i] = 1;
            else if (!strcmp(tn, "Communication(Not Overlapped)")) lane_kind[i] = 2;
            else if (!strcmp(tn, "Free")) lane_kind[i] = 3;
            any |= lane_kind[i] >= 0;
        }
    }
    if (!any) {
        /* no lanes: the NPU's tasks are the device timeline, communication by their HCCL names */
        for (int64_t i = 0; i < t->n_spans; i++) {
            tdm_runs_span *s = &t->spans[i];
            if (s->flags & TDM_RUNS_F_DEVICE) continue;
            const char *pn = proc_name_of(r, r->threads[s->lane].pid);
            if (!pn || strcmp(pn, "Ascend Hardware")) continue;
            const char *nm = t->names[s->name];
            s->flags |= TDM_RUNS_F_DEVICE;
            s->kind = (uint8_t)(strncmp(nm, "hcom", 4) == 0 || strncmp(nm, "Hccl", 4) == 0 || strstr(nm, "hccl")
                                    ? TDM_RUNS_COMM
                                    : TDM_RUNS_COMPUTE);
        }
        free(lane_kind);
        return;
    }
    for (int32_t i = 0; i < r->n_threads; i++) {
        const char *pn = proc_name_of(r, r->threads[i].pid);
        if (lane_kind[i] < 0 && pn && !strcmp(pn, "Ascend Hardware")) lane_kind[i] = 4;
    }
    t->has_lanes = 1;
    double lo = INFINITY, hi = -INFINITY;
    int64_t kept = 0, dropped_tasks = 0;
    for (int64_t i = 0; i < t->n_spans; i++) {
        tdm_runs_span s = t->spans[i];
        int lk = (s.flags & TDM_RUNS_F_DEVICE) ? -1 : lane_kind[s.lane];
        if (lk >= 0 && lk <= 3) {
            if (s.ts < lo) lo = s.ts;
            if (s.ts + s.dur > hi) hi = s.ts + s.dur;
            double *sum = lk == 0   ? &t->lane_computing
                          : lk == 1 ? &t->lane_comm
                          : lk == 2 ? &t->lane_comm_not_overlapped
                                    : &t->lane_free;
            *sum += s.dur;
            s.flags = (uint8_t)(s.flags | TDM_RUNS_F_DEVICE);
            s.kind = lk == 0 ? TDM_RUNS_COMPUTE : lk == 1 ? TDM_RUNS_COMM : TDM_RUNS_OTHER;
            s.lane = lk;
        } else if (lk == 4) {
            dropped_tasks++;
            continue;
        }
        if (s.coll >= 0) t->colls[s.coll].span = (int32_t)kept;
        t->spans[kept++] = s;
    }
    t->n_spans = kept;
    t->lane_span = hi > lo ? hi - lo : 0;
    if (t->lane_comm == 0)
        tdm_runs_note(t, "%s: the Overlap Analysis lanes hold no communication: nothing to hide, nothing exposed",
                      t->path);
    (void)dropped_tasks;
    free(lane_kind);
}

/* rank<N> / rank_<N> / rank-<N> in a file name, -1 when none. */
static int64_t rank_from_name(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (const char *p = base; (p = strstr(p, "rank")) != NULL; p += 4) {
        const char *q = p + 4;
        while (*q == '_' || *q == '-') q++;
        if (isdigit((unsigned char)*q)) return strtoll(q, NULL, 10);
    }
    return -1;
}

int tdm_runs_read_tandem(tdm_runs_set *s, const char *path, tdm_error *err); /* trace_tandem.c */

static int read_with(tdm_runs_set *s, tdm_js *js, const char *path, int is_file, tdm_error *err) {
    reader r;
    memset(&r, 0, sizeof r);
    r.js = js;
    r.path = path;
    r.err = err;
    r.last_thread = -1;
    r.t = tdm_runs_trace_new(path);
    tdm_sb_init(&r.arena);
    int rc = read_document(&r);
    tdm_runs_trace *t = r.t;
    if (rc == 0 && r.any_step_phase && r.foreign_cats == 0) {
        /* tandem's own trace (prof/trace.h): its analysis is tandem's own */
        tdm_runs_trace_free(t);
        t = NULL;
        rc = is_file ? tdm_runs_read_tandem(s, path, err)
                     : tdm_errorf(err, "%s: a tandem trace is read from its file", path);
    }
    if (rc == 0 && t) {
        t->threads = tdm_xmalloc((size_t)(r.n_threads + 1) * sizeof *t->threads);
        for (int32_t i = 0; i < r.n_threads; i++) {
            char b[300];
            const char *tid = strchr(r.threads[i].key, '\x1f') + 1;
            snprintf(b, sizeof b, "Thread %s", tid);
            t->threads[i] = tdm_xstrdup(r.threads[i].name ? r.threads[i].name : b);
        }
        t->n_threads = r.n_threads;
        if (r.top_array && !r.any_cat) {
            t->format = TDM_RUNS_FMT_LEGACY;
            for (int64_t i = 0; i < t->n_steps; i++) t->steps[i].number += 1;
            tdm_runs_note(t,
                          "%s: PyTorch's legacy profiler format (a top-level array without \"cat\"): its "
                          "ProfilerStep#N labels are one lower than the loop index, reported here as N+1",
                          path);
        } else {
            t->format = TDM_RUNS_FMT_KINETO;
        }
        ascend_lanes(&r);
        if (t->has_lanes) t->format = TDM_RUNS_FMT_ASCEND_TIMELINE;
        if (t->rank < 0) {
            t->rank = rank_from_name(path);
            if (t->rank >= 0)
                tdm_runs_note(t, "%s: no distributedInfo: the rank (%lld) is taken from the file name", path,
                              (long long)t->rank);
        }
        if (r.time_unit[0] && strcmp(r.time_unit, "us") != 0)
            tdm_runs_note(t, "%s: displayTimeUnit \"%s\" only sets how a viewer displays times: ts and dur are µs",
                          path, r.time_unit);
        if (r.n_skipped_x)
            tdm_runs_note(t, "%s: %lld complete (\"X\") events without a name, ts or a non-negative dur were skipped",
                          path, (long long)r.n_skipped_x);
        if (r.n_begin_end)
            tdm_runs_note(t, "%s: %lld begin/end (\"B\"/\"E\") events were not used", path, (long long)r.n_begin_end);
        if (r.n_x == 0)
            rc = tdm_errorf(err, "%s: the trace holds no complete (\"X\") events: nothing to analyse", path);
        else {
            tdm_runs_trace_finish(t);
            tdm_runs_set_add(s, t);
            t = NULL;
        }
    }
    if (t) tdm_runs_trace_free(t);
    for (int32_t i = 0; i < r.n_threads; i++) {
        free(r.threads[i].key);
        free(r.threads[i].pid);
        free(r.threads[i].name);
    }
    free(r.threads);
    for (int i = 0; i < r.n_proc; i++) free(r.proc_pid[i]), free(r.proc_name[i]);
    free(r.proc_pid);
    free(r.proc_name);
    tdm_sb_free(&r.arena);
    return rc;
}

int tdm_runs_read_json(tdm_runs_set *s, const char *path, tdm_error *err) {
    tdm_js *js = tdm_js_open_file(path, err);
    if (!js) return -1;
    int rc = read_with(s, js, path, 1, err);
    tdm_js_close(js);
    return rc;
}

int tdm_runs_read_json_mem(tdm_runs_set *s, const void *data, size_t len, const char *name, tdm_error *err) {
    tdm_js *js = tdm_js_open_mem(data, len, name);
    int rc = read_with(s, js, name, 0, err);
    tdm_js_close(js);
    return rc;
}
