/* trace_model.c - building a rank's trace: interned names, spans, and the pass that links
 * kernels to their launches, steps and collectives once everything is read. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/alloc.h"
#include "runs/trace.h"
#include "runs/trace_internal.h"

void tdm_runs_set_init(tdm_runs_set *s) { memset(s, 0, sizeof *s); }

void tdm_runs_set_free(tdm_runs_set *s) {
    for (int i = 0; i < s->n; i++) tdm_runs_trace_free(s->traces[i]);
    free(s->traces);
    for (int64_t i = 0; i < s->n_acomm; i++) free(s->acomm[i].op);
    free(s->acomm);
    memset(s, 0, sizeof *s);
}

void tdm_runs_set_add(tdm_runs_set *s, tdm_runs_trace *t) {
    s->traces = tdm_xrealloc(s->traces, (size_t)(s->n + 1) * sizeof *s->traces);
    s->traces[s->n++] = t;
}

tdm_runs_trace *tdm_runs_trace_new(const char *path) {
    tdm_runs_trace *t = tdm_xcalloc(1, sizeof *t);
    t->path = tdm_xstrdup(path);
    t->rank = t->world_size = -1;
    t->hta_last_step_ts = t->hta_last_step_end = -INFINITY;
    t->x = tdm_xcalloc(1, sizeof *t->x);
    return t;
}

void tdm_runs_trace_free(tdm_runs_trace *t) {
    if (!t) return;
    free(t->path);
    free(t->label);
    if (t->x) {
        for (int32_t i = 0; i < t->n_names; i++)
            if (t->x->raws[i] != t->names[i]) free(t->x->raws[i]);
        free(t->x->raws);
    }
    for (int32_t i = 0; i < t->n_names; i++) free(t->names[i]);
    free(t->names);
    for (int32_t i = 0; i < t->n_threads; i++) free(t->threads[i]);
    free(t->threads);
    free(t->spans);
    free(t->steps);
    free(t->colls);
    free(t->given);
    for (int i = 0; i < t->n_notes; i++) free(t->notes[i]);
    free(t->notes);
    if (t->x) {
        free(t->x->index);
        free(t->x->step_numbers);
        free(t->x->hashes);
        free(t->x->kinds);
        free(t->x->lens);
        free(t->x);
    }
    free(t);
}

/* Copies s[0..len) with invalid UTF-8 and control bytes replaced by '?', so that every
 * name prints and goes into JSON as it is. */
static char *sanitised(const char *s, size_t len) {
    char *o = tdm_xmalloc(len + 1);
    size_t i = 0;
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        int ok = n > 0 && i + n <= len && !(n == 2 && c < 0xC2) && !(n == 4 && c > 0xF4);
        for (size_t k = 1; ok && k < n; k++) ok = ((unsigned char)s[i + k] & 0xC0) == 0x80;
        if (ok && n == 3) {
            unsigned char c1 = (unsigned char)s[i + 1];
            ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
        }
        if (ok && n == 4) {
            unsigned char c1 = (unsigned char)s[i + 1];
            ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
        }
        if (!ok || c < 0x20 || c == 0x7f) {
            o[i] = '?';
            i++;
            continue;
        }
        memcpy(o + i, s + i, n);
        i += n;
    }
    o[len] = '\0';
    return o;
}

int32_t tdm_runs_intern(tdm_runs_trace *t, const char *s, size_t len) {
    struct tdm_runs_x *x = t->x;
    if (x->index_cap == 0 || (size_t)t->n_names * 2 >= x->index_cap) {
        size_t cap = x->index_cap ? x->index_cap * 2 : 1024;
        int32_t *idx = tdm_xmalloc(cap * sizeof *idx);
        for (size_t i = 0; i < cap; i++) idx[i] = -1;
        for (int32_t k = 0; k < t->n_names; k++) {
            size_t pos = (size_t)t->x->hashes[k] & (cap - 1);
            while (idx[pos] >= 0) pos = (pos + 1) & (cap - 1);
            idx[pos] = k;
        }
        free(x->index);
        x->index = idx;
        x->index_cap = cap;
    }
    uint64_t h = XXH3_64bits(s, len);
    size_t pos = (size_t)h & (x->index_cap - 1);
    while (x->index[pos] >= 0) {
        int32_t k = x->index[pos];
        if (x->hashes[k] == h && x->lens[k] == len && memcmp(x->raws[k], s, len) == 0) return k;
        pos = (pos + 1) & (x->index_cap - 1);
    }
    int32_t id = t->n_names++;
    if ((size_t)id >= x->names_cap) {
        x->names_cap = x->names_cap ? x->names_cap * 2 : 256;
        t->names = tdm_xrealloc(t->names, x->names_cap * sizeof *t->names);
        x->hashes = tdm_xrealloc(x->hashes, x->names_cap * sizeof *x->hashes);
        x->lens = tdm_xrealloc(x->lens, x->names_cap * sizeof *x->lens);
        x->raws = tdm_xrealloc(x->raws, x->names_cap * sizeof *x->raws);
        x->kinds = tdm_xrealloc(x->kinds, x->names_cap * 2);
    }
    x->kinds[2 * id] = x->kinds[2 * id + 1] = -1;
    t->names[id] = sanitised(s, len);
    x->hashes[id] = h;
    x->lens[id] = len;
    /* the raw bytes are compared on lookup; a sanitised copy differs only where the input
     * had invalid bytes, and then it is kept raw beside it */
    x->raws[id] = memcmp(t->names[id], s, len) == 0 ? t->names[id] : memcpy(tdm_xmalloc(len + 1), s, len);
    x->index[pos] = id;
    return id;
}

tdm_runs_span *tdm_runs_add_span(tdm_runs_trace *t) {
    if ((size_t)t->n_spans >= t->x->spans_cap) {
        t->x->spans_cap = t->x->spans_cap ? t->x->spans_cap * 2 : 4096;
        t->spans = tdm_xrealloc(t->spans, t->x->spans_cap * sizeof *t->spans);
    }
    tdm_runs_span *s = &t->spans[t->n_spans++];
    memset(s, 0, sizeof *s);
    s->corr = -1;
    s->lane = -1;
    s->step = -1;
    s->launch = -1;
    s->coll = -1;
    return s;
}

void tdm_runs_add_step(tdm_runs_trace *t, int64_t number, double ts, double dur) {
    if ((size_t)t->n_steps >= t->x->steps_cap) {
        t->x->steps_cap = t->x->steps_cap ? t->x->steps_cap * 2 : 64;
        t->steps = tdm_xrealloc(t->steps, t->x->steps_cap * sizeof *t->steps);
    }
    t->steps[t->n_steps++] = (tdm_runs_step){number, ts, dur};
}

void tdm_runs_saw_step_name(tdm_runs_trace *t, int64_t number, double ts, double dur) {
    struct tdm_runs_x *x = t->x;
    if (ts > t->hta_last_step_ts) t->hta_last_step_ts = ts;
    if (ts + dur > t->hta_last_step_end) t->hta_last_step_end = ts + dur;
    for (int64_t i = 0; i < x->n_step_numbers; i++)
        if (x->step_numbers[i] == number) return;
    if (x->n_step_numbers >= x->step_numbers_cap) {
        x->step_numbers_cap = x->step_numbers_cap ? x->step_numbers_cap * 2 : 64;
        x->step_numbers = tdm_xrealloc(x->step_numbers, (size_t)x->step_numbers_cap * sizeof *x->step_numbers);
    }
    x->step_numbers[x->n_step_numbers++] = number;
    t->n_step_names = (int)x->n_step_numbers;
}

int32_t tdm_runs_add_coll(tdm_runs_trace *t, const tdm_runs_coll *c) {
    if ((size_t)t->n_colls >= t->x->colls_cap) {
        t->x->colls_cap = t->x->colls_cap ? t->x->colls_cap * 2 : 64;
        t->colls = tdm_xrealloc(t->colls, t->x->colls_cap * sizeof *t->colls);
    }
    t->colls[t->n_colls] = *c;
    return (int32_t)t->n_colls++;
}

void tdm_runs_note(tdm_runs_trace *t, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (int i = 0; i < t->n_notes; i++)
        if (!strcmp(t->notes[i], buf)) return;
    t->notes = tdm_xrealloc(t->notes, (size_t)(t->n_notes + 1) * sizeof *t->notes);
    t->notes[t->n_notes++] = tdm_xstrdup(buf);
}

/* HTA's patterns (hta/common/types.py), as prefix and substring tests. */
static int starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static int cuda_launch_kernel(const char *s) { return starts(s, "cuda") && strstr(s + 4, "LaunchKernel") != NULL; }

tdm_runs_kind tdm_runs_kind_of(const char *n) {
    if (starts(n, "nccl") || starts(n, "hip") || starts(n, "hccl") || strstr(n, "ncclKernel")) return TDM_RUNS_COMM;
    if (starts(n, "Memcpy") || starts(n, "hipMemcpy") || starts(n, "Memset") || starts(n, "hipMemset") ||
        starts(n, "dma"))
        return TDM_RUNS_MEMORY;
    static const char *const not_compute_prefix[] = {"nccl",        "Stream Wait Event",
                                                     "runFunction", "hip",
                                                     "job_exe",     "packet",
                                                     "pe_exe",      "cpum_exe_subgraph",
                                                     "hccl",        "collective_subgraph_execution"};
    for (size_t i = 0; i < sizeof not_compute_prefix / sizeof *not_compute_prefix; i++)
        if (starts(n, not_compute_prefix[i])) return TDM_RUNS_OTHER;
    if (strstr(n, "Memcpy") || strstr(n, "Memset") || strstr(n, "dma") || strstr(n, "Sync") || cuda_launch_kernel(n))
        return TDM_RUNS_OTHER;
    return TDM_RUNS_COMPUTE;
}

int tdm_runs_coll_kind_of(const char *name) {
    char b[256];
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < sizeof b; p++) {
        if (*p == '(') break; /* a kernel's parameter list */
        if (*p == '_' || *p == ' ' || *p == '-') continue;
        b[k++] = (char)tolower((unsigned char)*p);
    }
    b[k] = '\0';
    if (strstr(b, "allreduce")) return TDM_RUNS_ALL_REDUCE;
    if (strstr(b, "reducescatter")) return TDM_RUNS_REDUCE_SCATTER;
    if (strstr(b, "allgather")) return TDM_RUNS_ALL_GATHER;
    if (strstr(b, "alltoall")) return TDM_RUNS_ALL_TO_ALL;
    if (strstr(b, "broadcast")) return TDM_RUNS_BROADCAST;
    if (strstr(b, "sendrecv") || strstr(b, "send") || strstr(b, "recv")) return TDM_RUNS_SEND_RECV;
    if (strstr(b, "barrier")) return TDM_RUNS_BARRIER;
    if (strstr(b, "reduce")) return TDM_RUNS_REDUCE;
    return -1;
}

const char *tdm_runs_coll_kind_name(int kind) {
    static const char *const n[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all",
                                    "send_recv",  "reduce",    "barrier",    "other"};
    return kind >= 0 && kind < TDM_RUNS_COLL_KINDS ? n[kind] : "other";
}

int tdm_runs_dtype_bytes(const char *d) {
    char b[32];
    size_t k = 0;
    if (starts(d, "c10::")) d += 5;
    if (starts(d, "torch.")) d += 6;
    for (; *d && k + 1 < sizeof b; d++) b[k++] = (char)tolower((unsigned char)*d);
    b[k] = '\0';
    static const struct {
        const char *n;
        int bytes;
    } t[] = {{"float", 4},    {"float32", 4}, {"double", 8}, {"float64", 8}, {"half", 2},  {"float16", 2},
             {"bfloat16", 2}, {"long", 8},    {"int64", 8},  {"int", 4},     {"int32", 4}, {"short", 2},
             {"int16", 2},    {"byte", 1},    {"uint8", 1},  {"char", 1},    {"int8", 1},  {"bool", 1}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (!strcmp(b, t[i].n)) return t[i].bytes;
    if (starts(b, "float8")) return 1;
    return 0;
}

/* ---- the pass after reading ---------------------------------------------------------- */

/* qsort with n == 0 may not be given the NULL of an empty array */
static void sort_n(void *p, int64_t n, size_t size, int (*cmp)(const void *, const void *)) {
    if (n > 1) qsort(p, (size_t)n, size, cmp);
}

/* The order of spans by ts, ties in file order: an LSD radix sort (stable) of the doubles' bits
 * made unsigned-comparable, 11 bits a pass, passes whose digit never varies skipped. A trace
 * holds up to millions of spans; a comparison sort spent more time than reading them. */
static int64_t *sort_by_ts(const tdm_runs_span *s, int64_t n) {
    typedef struct {
        uint64_t key;
        int64_t idx;
    } ki;
    ki *a = tdm_xmalloc((size_t)(n + 1) * sizeof *a), *b = tdm_xmalloc((size_t)(n + 1) * sizeof *b);
    for (int64_t i = 0; i < n; i++) {
        uint64_t u;
        double d = s[i].ts == 0 ? 0.0 : s[i].ts; /* -0 sorts with 0 */
        memcpy(&u, &d, sizeof u);
        a[i].key = (u >> 63) ? ~u : u | ((uint64_t)1 << 63);
        a[i].idx = i;
    }
    for (int shift = 0; shift < 64; shift += 11) {
        int64_t count[2048] = {0};
        for (int64_t i = 0; i < n; i++) count[(a[i].key >> shift) & 2047]++;
        int64_t used = 0;
        for (int d = 0; d < 2048; d++) used += count[d] > 0;
        if (used <= 1) continue;
        for (int64_t d = 0, sum = 0; d < 2048; d++) {
            int64_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (int64_t i = 0; i < n; i++) b[count[(a[i].key >> shift) & 2047]++] = a[i];
        ki *tmp = a;
        a = b;
        b = tmp;
    }
    int64_t *perm = tdm_xmalloc((size_t)(n + 1) * sizeof *perm);
    for (int64_t i = 0; i < n; i++) perm[i] = a[i].idx;
    free(a);
    free(b);
    return perm;
}

static int cmp_step(const void *a, const void *b) {
    const tdm_runs_step *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return (x->number > y->number) - (x->number < y->number);
}

typedef struct corr_ix {
    int64_t corr;
    int64_t idx;
} corr_ix;
static int cmp_corr(const void *a, const void *b) {
    const corr_ix *x = a, *y = b;
    if (x->corr != y->corr) return x->corr < y->corr ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static int cmp_coll(const void *a, const void *b) {
    const tdm_runs_coll *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return (x->span > y->span) - (x->span < y->span);
}

/* The step whose CPU window holds t, -1 when none. */
int64_t tdm_runs_step_at(const tdm_runs_trace *t, double ts) {
    int64_t lo = 0, hi = t->n_steps; /* last step with start <= ts */
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (t->steps[mid].ts <= ts) lo = mid + 1;
        else hi = mid;
    }
    int64_t k = lo - 1;
    if (k < 0) return -1;
    return ts <= t->steps[k].ts + t->steps[k].dur ? k : -1;
}

/* A device span without a launch: the last step started before it (work queued on the device
 * runs after its step's CPU window), but not past the end of the last step. */
static int64_t step_by_device_time(const tdm_runs_trace *t, double ts) {
    int64_t lo = 0, hi = t->n_steps;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (t->steps[mid].ts <= ts) lo = mid + 1;
        else hi = mid;
    }
    int64_t k = lo - 1;
    if (k < 0) return -1;
    if (k == t->n_steps - 1 && ts > t->steps[k].ts + t->steps[k].dur) return -1;
    return k;
}

static int cpu_comm_op(const char *n) {
    return starts(n, "gloo:") || starts(n, "nccl:") || starts(n, "c10d::") || starts(n, "record_param_comms") ||
           starts(n, "hccl:");
}

int tdm_runs_name_kind(tdm_runs_trace *t, int32_t id, int device) {
    int8_t *k = &t->x->kinds[2 * id + (device ? 0 : 1)];
    if (*k < 0) *k = (int8_t)(device ? (int)tdm_runs_kind_of(t->names[id]) : tdm_runs_cpu_kind(t->names[id]));
    return *k;
}

int tdm_runs_cpu_kind(const char *n) {
    if (starts(n, "ProfilerStep#")) return TDM_RUNS_OTHER;
    return cpu_comm_op(n) ? TDM_RUNS_COMM : TDM_RUNS_COMPUTE;
}

/* The communication annotations on the launch's thread that hold time ts (up to cap, the
 * innermost first), into out; returns how many. */
static int enclosing_comm_ops(const tdm_runs_trace *t, const int64_t *ops, int64_t n_ops, int32_t lane, double ts,
                              int64_t *out, int cap) {
    int got = 0;
    int64_t lo = 0, hi = n_ops; /* ops sorted by (lane, ts) */
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        const tdm_runs_span *s = &t->spans[ops[mid]];
        if (s->lane < lane || (s->lane == lane && s->ts <= ts)) lo = mid + 1;
        else hi = mid;
    }
    for (int64_t k = lo - 1, seen = 0; k >= 0 && seen < 16 && got < cap; k--, seen++) {
        const tdm_runs_span *s = &t->spans[ops[k]];
        if (s->lane != lane) break;
        if (s->ts <= ts && ts <= s->ts + s->dur) out[got++] = ops[k];
    }
    return got;
}

static const tdm_runs_trace *ops_base;
static int cmp_op_lane(const void *a, const void *b) {
    const tdm_runs_span *x = &ops_base->spans[*(const int64_t *)a], *y = &ops_base->spans[*(const int64_t *)b];
    if (x->lane != y->lane) return x->lane < y->lane ? -1 : 1;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return (*(const int64_t *)a > *(const int64_t *)b) - (*(const int64_t *)a < *(const int64_t *)b);
}

/* Longer than most: its five numbered passes share the sorted spans; each is commented. */
void tdm_runs_trace_finish(tdm_runs_trace *t) {
    /* 1. spans in time order (ties in file order); descriptors follow their spans */
    int64_t n = t->n_spans;
    int64_t *perm = sort_by_ts(t->spans, n);
    tdm_runs_span *sorted = tdm_xmalloc((size_t)(n + 1) * sizeof *sorted);
    for (int64_t i = 0; i < n; i++) sorted[i] = t->spans[perm[i]];
    free(t->spans);
    t->spans = sorted;
    t->x->spans_cap = (size_t)n + 1;
    free(perm);
    for (int64_t i = 0; i < n; i++)
        if (t->spans[i].coll >= 0) t->colls[t->spans[i].coll].span = (int32_t)i;

    /* 2. steps: sorted, one per number (the longest when a number repeats) */
    sort_n(t->steps, t->n_steps, sizeof *t->steps, cmp_step);
    int64_t m = 0;
    for (int64_t i = 0; i < t->n_steps; i++) {
        int64_t j;
        for (j = 0; j < m && t->steps[j].number != t->steps[i].number; j++) continue;
        if (j < m) {
            if (t->steps[i].dur > t->steps[j].dur) t->steps[j] = t->steps[i];
            continue;
        }
        t->steps[m++] = t->steps[i];
    }
    t->n_steps = m;
    sort_n(t->steps, t->n_steps, sizeof *t->steps, cmp_step);
    for (int64_t i = 0; i + 1 < t->n_steps; i++) /* a step ends where the next begins, at the latest */
        if (t->steps[i].ts + t->steps[i].dur > t->steps[i + 1].ts)
            t->steps[i].dur = t->steps[i + 1].ts - t->steps[i].ts;
    if (t->n_steps == 0 && n > 0 && t->n_given == 0) {
        double lo = INFINITY, hi = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            if (t->spans[i].ts < lo) lo = t->spans[i].ts;
            if (t->spans[i].ts + t->spans[i].dur > hi) hi = t->spans[i].ts + t->spans[i].dur;
        }
        tdm_runs_add_step(t, 0, lo, hi - lo);
        t->whole_trace_step = 1;
        tdm_runs_note(t, "%s has no ProfilerStep#N annotation: the whole trace is analysed as one step", t->path);
    }

    /* 3. device spans -> launching CPU span, by correlation id */
    corr_ix *cx = tdm_xmalloc((size_t)(n + 1) * sizeof *cx);
    int64_t ncx = 0;
    for (int64_t i = 0; i < n; i++)
        if (!(t->spans[i].flags & TDM_RUNS_F_DEVICE) && t->spans[i].corr >= 0)
            cx[ncx++] = (corr_ix){t->spans[i].corr, i};
    sort_n(cx, ncx, sizeof *cx, cmp_corr);
    int64_t n_launches = ncx;
    int64_t dev = 0, dev_unlaunched = 0;
    for (int64_t i = 0; i < n; i++) {
        tdm_runs_span *s = &t->spans[i];
        if (!(s->flags & TDM_RUNS_F_DEVICE)) continue;
        dev++;
        if (s->corr < 0 || ncx == 0) continue;
        int64_t lo = 0, hi = ncx;
        while (lo < hi) {
            int64_t mid = (lo + hi) / 2;
            if (cx[mid].corr < s->corr) lo = mid + 1;
            else hi = mid;
        }
        if (lo < ncx && cx[lo].corr == s->corr) s->launch = (int32_t)cx[lo].idx;
    }
    free(cx);
    t->has_device = dev > 0;

    /* 4. steps of spans: CPU spans by their start, device spans by their launch */
    for (int64_t i = 0; i < n; i++) {
        tdm_runs_span *s = &t->spans[i];
        if (!(s->flags & TDM_RUNS_F_DEVICE)) s->step = (int32_t)tdm_runs_step_at(t, s->ts);
        else if (s->launch >= 0) s->step = (int32_t)tdm_runs_step_at(t, t->spans[s->launch].ts);
        else if (s->corr >= 0 && n_launches > 0) {
            s->step = -1; /* launched before the profiler started, or after it stopped */
            dev_unlaunched++;
        } else {
            s->step = (int32_t)step_by_device_time(t, s->ts);
        }
    }
    if (dev_unlaunched > 0)
        tdm_runs_note(t,
                      "%lld of %lld GPU kernels and copies have no launching CPU event in the trace (launched "
                      "outside the profiled window): they are left out of the steps",
                      (long long)dev_unlaunched, (long long)dev);

    /* 5. collectives */
    int64_t *ops = tdm_xmalloc((size_t)(n + 1) * sizeof *ops);
    int64_t n_ops = 0;
    for (int64_t i = 0; i < n; i++)
        if (!(t->spans[i].flags & TDM_RUNS_F_DEVICE) && t->spans[i].kind == TDM_RUNS_COMM) ops[n_ops++] = i;
    ops_base = t;
    sort_n(ops, n_ops, sizeof *ops, cmp_op_lane);
    if (t->has_device) {
        for (int64_t i = 0; i < n; i++) {
            tdm_runs_span *s = &t->spans[i];
            if (!(s->flags & TDM_RUNS_F_DEVICE) || s->kind != TDM_RUNS_COMM) continue;
            if (s->coll < 0) {
                int k = tdm_runs_coll_kind_of(t->names[s->name]);
                tdm_runs_coll c = {.span = (int32_t)i,
                                   .kind = (uint8_t)(k < 0 ? TDM_RUNS_COLL_OTHER : k),
                                   .bytes = -1,
                                   .group_size = -1};
                s->coll = tdm_runs_add_coll(t, &c);
            }
            tdm_runs_coll *c = &t->colls[s->coll];
            c->ts = s->ts;
            c->dur = s->dur;
            c->launch_ts = s->launch >= 0 ? t->spans[s->launch].ts : NAN;
            if (s->launch >= 0) { /* the CPU side names all-to-all (carried out as SendRecv) and may know sizes */
                int64_t encl[4];
                int ne = enclosing_comm_ops(t, ops, n_ops, t->spans[s->launch].lane, t->spans[s->launch].ts, encl, 4);
                for (int e = 0; e < ne; e++) {
                    const tdm_runs_span *o = &t->spans[encl[e]];
                    int k = tdm_runs_coll_kind_of(t->names[o->name]);
                    if (k >= 0 && (c->kind == TDM_RUNS_SEND_RECV || c->kind == TDM_RUNS_COLL_OTHER) &&
                        k != TDM_RUNS_SEND_RECV)
                        c->kind = (uint8_t)k;
                    if (o->coll >= 0 && c->bytes < 0) {
                        c->bytes = t->colls[o->coll].bytes;
                        if (c->group_size < 0) c->group_size = t->colls[o->coll].group_size;
                    }
                }
            }
        }
    } else if (t->format != TDM_RUNS_FMT_TANDEM) { /* tandem's reader made its collectives */
        /* CPU-only: gloo's operators are the transfers; the launches are record_param_comms (or,
         * in older PyTorch, c10d::<op>) on the other threads, matched in order per kind */
        int use_rpc = 0;
        for (int64_t k = 0; k < n_ops; k++) use_rpc |= starts(t->names[t->spans[ops[k]].name], "record_param_comms");
        int64_t next_launch[TDM_RUNS_COLL_KINDS] = {0};
        int64_t *launches = tdm_xmalloc((size_t)(n + 1) * sizeof *launches);
        int64_t n_l = 0;
        for (int64_t i = 0; i < n; i++) {
            const tdm_runs_span *s = &t->spans[i];
            if (s->flags & TDM_RUNS_F_DEVICE || s->kind != TDM_RUNS_COMM) continue;
            const char *nm = t->names[s->name];
            if (use_rpc ? starts(nm, "record_param_comms") : starts(nm, "c10d::")) launches[n_l++] = i;
        }
        for (int64_t i = 0; i < n; i++) {
            tdm_runs_span *s = &t->spans[i];
            if (s->flags & TDM_RUNS_F_DEVICE || !starts(t->names[s->name], "gloo:")) continue;
            int k = tdm_runs_coll_kind_of(t->names[s->name]);
            if (k < 0) k = TDM_RUNS_COLL_OTHER;
            tdm_runs_coll c = {.span = (int32_t)i,
                               .kind = (uint8_t)k,
                               .ts = s->ts,
                               .dur = s->dur,
                               .launch_ts = NAN,
                               .bytes = -1,
                               .group_size = -1};
            for (int64_t j = next_launch[k]; j < n_l; j++) {
                const tdm_runs_span *l = &t->spans[launches[j]];
                int lk = l->coll >= 0 ? t->colls[l->coll].kind : tdm_runs_coll_kind_of(t->names[l->name]);
                if (lk != k) continue;
                c.launch_ts = l->ts;
                if (l->coll >= 0) c.bytes = t->colls[l->coll].bytes, c.group_size = t->colls[l->coll].group_size;
                next_launch[k] = j + 1;
                break;
            }
            s->coll = tdm_runs_add_coll(t, &c);
        }
        free(launches);
    }
    free(ops);
    /* keep the executions only (CPU descriptors were read from record_param_comms' arguments) */
    int64_t kept = 0;
    for (int64_t i = 0; i < t->n_colls; i++) {
        tdm_runs_coll c = t->colls[i];
        const tdm_runs_span *s = &t->spans[c.span];
        int exec = t->has_device                      ? (s->flags & TDM_RUNS_F_DEVICE) != 0
                   : t->format == TDM_RUNS_FMT_TANDEM ? 1
                                                      : starts(t->names[s->name], "gloo:");
        if (!exec || s->coll != i) continue;
        c.step = s->step;
        t->colls[kept++] = c;
    }
    t->n_colls = kept;
    sort_n(t->colls, t->n_colls, sizeof *t->colls, cmp_coll);
    for (int64_t i = 0; i < n; i++) t->spans[i].coll = -1;
    for (int64_t i = 0; i < t->n_colls; i++) t->spans[t->colls[i].span].coll = (int32_t)i;

    if (!t->label) {
        char b[64];
        if (t->rank >= 0) snprintf(b, sizeof b, "rank %lld", (long long)t->rank);
        t->label = tdm_xstrdup(t->rank >= 0 ? b : t->path);
    }
}
