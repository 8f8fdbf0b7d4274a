/* run.c - the run model's bookkeeping (run.h): iterations in order, arguments, warnings,
 * decimals with their printed precision, and the one entry point that detects a format. */
#include "runs/run.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "runs/golden.h"
#include "runs/megatron_log.h"

/* More iteration lines than this in one run is refused: 16M lines is a 5 GB log at
 * --log-interval 1, and 2.5 GB of records. */
#define MAX_ITERS ((int64_t)1 << 24)

void tdm_run_log_init(tdm_run_log *run) {
    memset(run, 0, sizeof *run);
    run->passes = 1;
}

static void free_kv(tdm_run_kv *kv, int n) {
    for (int i = 0; i < n; i++) free(kv[i].key), free(kv[i].value);
    free(kv);
}

void tdm_run_log_free(tdm_run_log *run) {
    free(run->iters);
    free_kv(run->args, run->n_args);
    free_kv(run->env, run->n_env);
    for (int i = 0; i < run->n_loss_names; i++) free(run->loss_names[i]);
    for (int i = 0; i < run->n_timer_names; i++) free(run->timer_names[i]);
    free(run->timers);
    free(run->valid);
    for (int i = 0; i < run->n_warnings; i++) free(run->warnings[i]);
    tdm_run_log_init(run);
}

void tdm_run_warn(tdm_run_log *run, const char *fmt, ...) {
    if (run->n_warnings == TDM_RUN_MAX_WARNINGS) {
        run->dropped_warnings++;
        return;
    }
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    run->warnings[run->n_warnings++] = tdm_xstrdup(buf);
}

tdm_run_iter tdm_run_iter_empty(int64_t iteration) {
    tdm_run_iter x;
    memset(&x, 0, sizeof x);
    x.iteration = iteration;
    x.consumed_samples = -1;
    x.interval = 1;
    x.skipped = x.nan = -1;
    x.pass = 1;
    x.elapsed_ms = x.lr = x.lm_loss = x.loss_scale = x.grad_norm = NAN;
    x.throughput = x.params_norm = x.num_zeros = NAN;
    for (int k = 0; k < TDM_RUN_MAX_LOSSES; k++) x.other_loss[k] = NAN;
    return x;
}

int tdm_run_append_iter(tdm_run_log *run, const tdm_run_iter *x, tdm_error *err) {
    if (run->n_iters == MAX_ITERS)
        return tdm_errorf(err, "%s: more than %lld iteration lines", run->path, (long long)MAX_ITERS);
    if (run->n_iters == run->cap_iters) {
        run->cap_iters = run->cap_iters ? 2 * run->cap_iters : 256;
        run->iters = tdm_xrealloc(run->iters, (size_t)run->cap_iters * sizeof *run->iters);
    }
    run->iters[run->n_iters++] = *x;
    return 0;
}

/* Bottom-up merge sort by iteration: stable, so equal iterations stay in the order appended. */
static void merge_sort(tdm_run_iter *a, int64_t n) {
    tdm_run_iter *tmp = tdm_xmalloc((size_t)n * sizeof *tmp), *src = a, *dst = tmp;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, k = lo;
            while (i < mid && j < hi) dst[k++] = src[j].iteration < src[i].iteration ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        tdm_run_iter *t = src;
        src = dst, dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
    free(tmp);
}

void tdm_run_sort_iters(tdm_run_log *run) {
    int64_t n = run->n_iters, i = 1;
    while (i < n && run->iters[i - 1].iteration < run->iters[i].iteration) i++;
    if (i >= n) return; /* ascending and unique already: the usual log */
    merge_sort(run->iters, n);
    int64_t o = 0;
    for (int64_t k = 0; k < n; k++) {
        if (o > 0 && run->iters[o - 1].iteration == run->iters[k].iteration) o--; /* the later one wins */
        run->iters[o++] = run->iters[k];
    }
    run->n_iters = o;
}

tdm_run_iter *tdm_run_find_iter(tdm_run_log *run, int64_t it) {
    int64_t lo = 0, hi = run->n_iters;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (run->iters[mid].iteration < it) lo = mid + 1;
        else hi = mid;
    }
    return lo < run->n_iters && run->iters[lo].iteration == it ? &run->iters[lo] : NULL;
}

void tdm_run_add_kv(tdm_run_kv **kv, int *n, const char *key, size_t klen, const char *value, size_t vlen) {
    if (*n >= TDM_RUN_MAX_ARGS) return;
    if ((*n & (*n - 1)) == 0) *kv = tdm_xrealloc(*kv, (size_t)(*n ? 2 * *n : 1) * sizeof **kv);
    char *k = tdm_xmalloc(klen + 1), *v = tdm_xmalloc(vlen + 1);
    memcpy(k, key, klen), k[klen] = 0;
    memcpy(v, value, vlen), v[vlen] = 0;
    (*kv)[*n].key = k;
    (*kv)[*n].value = v;
    ++*n;
}

int tdm_run_loss_index(tdm_run_log *run, const char *name, size_t len) {
    for (int i = 0; i < run->n_loss_names; i++)
        if (strlen(run->loss_names[i]) == len && !memcmp(run->loss_names[i], name, len)) return i;
    if (run->n_loss_names == TDM_RUN_MAX_LOSSES) return -1;
    char *s = tdm_xmalloc(len + 1);
    memcpy(s, name, len), s[len] = 0;
    run->loss_names[run->n_loss_names] = s;
    return run->n_loss_names++;
}

/* "--overlap-grad-reduce" and "overlap_grad_reduce" are the same name. */
static int same_name(const char *a, const char *b) {
    while (*a == '-') a++;
    while (*b == '-') b++;
    for (; *a && *b; a++, b++) {
        char x = *a == '-' ? '_' : *a, y = *b == '-' ? '_' : *b;
        if (x != y) return 0;
    }
    return *a == *b;
}

const char *tdm_run_log_arg(const tdm_run_log *run, const char *name) {
    for (int i = run->n_args - 1; i >= 0; i--)
        if (same_name(run->args[i].key, name)) return run->args[i].value;
    return NULL;
}

const char *tdm_run_log_ddp_field(const tdm_run_log *run, const char *name, char *out, size_t cap) {
    size_t n = strlen(name);
    for (const char *p = run->ddp_config; (p = strstr(p, name)); p += n) {
        const char *before = p == run->ddp_config ? "(" : p - 1;
        if ((*before != '(' && *before != ' ' && *before != ',') || p[n] != '=') continue;
        const char *v = p + n + 1;
        size_t len = strcspn(v, ",)");
        snprintf(out, cap, "%.*s", (int)len, v);
        return out;
    }
    return NULL;
}

/* ---- decimals ---- */

static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                       1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int word_at(const char *s, size_t n, const char *w) {
    size_t k = strlen(w);
    if (n < k) return 0;
    for (size_t i = 0; i < k; i++)
        if ((s[i] | 0x20) != w[i]) return 0;
    return 1;
}

size_t tdm_run_parse_number(const char *s, size_t n, double *v, tdm_run_prec *prec) {
    size_t i = 0;
    int neg = 0;
    if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    /* nan, inf, infinity (Python prints them so) */
    if (i < n && !is_digit(s[i]) && s[i] != '.') {
        size_t k = 0;
        if (word_at(s + i, n - i, "nan")) *v = NAN, k = 3;
        else if (word_at(s + i, n - i, "infinity")) *v = neg ? -INFINITY : INFINITY, k = 8;
        else if (word_at(s + i, n - i, "inf")) *v = neg ? -INFINITY : INFINITY, k = 3;
        if (!k) return 0;
        *prec = 0;
        return i + k;
    }
    uint64_t m = 0;
    int digits = 0; /* digits accumulated into m (at most 19) */
    int sig = 0;    /* digits from the first non-zero one on */
    int int_digits = 0, frac_digits = 0, exp10 = 0, in_frac = 0, overflow = 0, any = 0;
    for (; i < n; i++) {
        char c = s[i];
        if (is_digit(c)) {
            any = 1;
            if (in_frac) frac_digits++;
            else int_digits++;
            if (sig == 0 && c == '0') { /* a leading zero: no digit of m, but a place after the point */
                if (in_frac) exp10--;
                continue;
            }
            sig++;
            if (digits < 19) {
                m = m * 10 + (uint64_t)(c - '0'), digits++;
                if (in_frac) exp10--;
            } else {
                overflow = 1;
                if (!in_frac) exp10++;
            }
        } else if (c == '.' && !in_frac) {
            in_frac = 1;
        } else {
            break;
        }
    }
    if (!any) return 0;
    int has_exp = 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        int eneg = 0, e = 0, edig = 0;
        if (j < n && (s[j] == '-' || s[j] == '+')) eneg = s[j++] == '-';
        for (; j < n && is_digit(s[j]); j++, edig++)
            if (e < 100000) e = e * 10 + (s[j] - '0');
        if (edig) {
            has_exp = 1;
            exp10 += eneg ? -e : e;
            i = j;
        }
    }
    /* Clinger's fast path: an exact mantissa times an exact power of ten rounds once */
    if (!overflow && m < ((uint64_t)1 << 53) && exp10 >= -22 && exp10 <= 22) {
        double x = (double)m;
        x = exp10 < 0 ? x / pow10_exact[-exp10] : x * pow10_exact[exp10];
        *v = neg ? -x : x;
    } else {
        char buf[400];
        size_t len = i < sizeof buf - 1 ? i : sizeof buf - 1;
        memcpy(buf, s, len);
        buf[len] = 0;
        *v = strtod(buf, NULL);
    }
    if (has_exp) { /* "%.6E" prints 7 digits, "0.000E+00" 4 */
        int p = sig ? sig : int_digits + frac_digits;
        *prec = (tdm_run_prec)(TDM_RUN_PREC_SIG | (p > 63 ? 63 : p));
    } else {
        *prec = (tdm_run_prec)(TDM_RUN_PREC_DEC | (frac_digits > 63 ? 63 : frac_digits));
    }
    return i;
}

/* The size of one unit in the last printed place of v. */
static double resolution(double v, tdm_run_prec p) {
    int d = TDM_RUN_PREC_DIGITS(p);
    if (p & TDM_RUN_PREC_DEC) return pow(10.0, -d);
    double a = fabs(v);
    int e = a > 0 ? (int)floor(log10(a)) : 0;
    return pow(10.0, e - d + 1);
}

static void print_at(char *out, size_t cap, double v, tdm_run_prec p) {
    int d = TDM_RUN_PREC_DIGITS(p);
    if (p & TDM_RUN_PREC_DEC) snprintf(out, cap, "%.*f", d, v);
    else snprintf(out, cap, "%.*e", d > 0 ? d - 1 : 0, v);
}

int tdm_run_equal_at_precision(double a, tdm_run_prec pa, double b, tdm_run_prec pb) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (pa == pb || !pa || !pb || isinf(a) || isinf(b)) return a == b;
    tdm_run_prec p = resolution(a, pa) >= resolution(b, pb) ? pa : pb;
    char x[400], y[400];
    print_at(x, sizeof x, a, p);
    print_at(y, sizeof y, b, p);
    return !strcmp(x, y);
}

void tdm_run_prec_describe(tdm_run_prec p, char *out, size_t cap) {
    int d = TDM_RUN_PREC_DIGITS(p);
    if (p & TDM_RUN_PREC_SIG) snprintf(out, cap, "%d significant digit%s", d, d == 1 ? "" : "s");
    else if (p & TDM_RUN_PREC_DEC) snprintf(out, cap, "%d decimal%s", d, d == 1 ? "" : "s");
    else snprintf(out, cap, "as stored");
}

/* ---- the entry point ---- */

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* The one golden_values_*.json of a test-case directory, into out[cap]. */
static int golden_in_dir(const char *dir, char *out, size_t cap, tdm_error *err) {
    DIR *d = opendir(dir);
    if (!d) return tdm_errorf(err, "%s: cannot read the directory (%s)", dir, strerror(errno));
    char names[2][256];
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, "golden_values", 13) && ends_with(e->d_name, ".json")) {
            if (n < 2) snprintf(names[n], sizeof names[n], "%s", e->d_name);
            n++;
        }
    closedir(d);
    if (n == 0)
        return tdm_errorf(err,
                          "%s: a directory without golden_values_*.json or *.log: expected a Megatron-LM test "
                          "case directory or a run folder with its log, or name a log or JSON file (traces "
                          "alone: give them as LOG,TRACES)",
                          dir);
    if (strlen(dir) + strlen(names[0]) + 2 > cap) return tdm_errorf(err, "%.200s...: path too long", dir);
    if (n > 1)
        return tdm_errorf(err, "%s holds %d golden values files (%s, %s%s): name the one to read", dir, n, names[0],
                          names[1], n > 2 ? ", ..." : "");
    size_t dl = strlen(dir), nl = strlen(names[0]);
    memcpy(out, dir, dl);
    out[dl] = '/';
    memcpy(out + dl + 1, names[0], nl + 1);
    return 0;
}

int tdm_run_log_read(const char *path, tdm_run_log *run, tdm_error *err) {
    tdm_run_log_init(run);
    struct stat st;
    if (stat(path, &st) != 0) return tdm_errorf(err, "%s: %s", path, strerror(errno));
    char file[sizeof run->path];
    if (strlen(path) + 1 > sizeof file) return tdm_errorf(err, "%.200s...: path too long", path);
    snprintf(file, sizeof file, "%s", path);
    if (S_ISDIR(st.st_mode)) {
        if (golden_in_dir(path, file, sizeof file, err) != 0) return -1;
        if (stat(file, &st) != 0) return tdm_errorf(err, "%s: %s", file, strerror(errno));
    }
    snprintf(run->path, sizeof run->path, "%s", file);
    FILE *f = fopen(file, "rb");
    if (!f) return tdm_errorf(err, "%s: %s", file, strerror(errno));
    unsigned char head[64];
    size_t nh = fread(head, 1, sizeof head, f);
    fclose(f);
    if (nh == 0) return tdm_errorf(err, "%s: empty file: expected a training log or a golden values JSON", file);
    if (nh >= 2 && head[0] == 0x1f && head[1] == 0x8b) /* a compressed log (golden values are never gzip'd) */
        return tdm_megatron_log_read_file(file, run, err);
    size_t k = 0;
    if (nh >= 3 && head[0] == 0xef && head[1] == 0xbb && head[2] == 0xbf) k = 3; /* UTF-8 byte order mark */
    while (k < nh && (head[k] == ' ' || head[k] == '\t' || head[k] == '\r' || head[k] == '\n')) k++;
    if (k < nh && head[k] == '{') return tdm_run_json_read_file(file, run, err);
    return tdm_megatron_log_read_file(file, run, err);
}
