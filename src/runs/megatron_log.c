/* megatron_log.c - Megatron-LM / MindSpeed / tandem training logs, line by line (megatron_log.h). */
#include "runs/megatron_log.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/alloc.h"

#define MAX_PASS_STARTS 16

struct tdm_megatron_parser {
    tdm_run_log *run;
    char *carry; /* the line begun in an earlier piece of input [TDM_RUN_LINE_MAX] */
    size_t carry_len;
    int carry_long; /* it went past TDM_RUN_LINE_MAX: the rest is dropped */
    char *scratch;  /* a line without its ANSI escape sequences [TDM_RUN_LINE_MAX] */
    int failed;
    tdm_error err;
    /* arguments block */
    int in_args, args_blocks;
    tdm_run_kv *prev_args; /* the block before the current one, to say how an appended run differs */
    int n_prev_args;
    /* timers block */
    int in_timers, timers_minmax;
    /* passes: an iteration that goes back, or an arguments block after iterations, starts one */
    int64_t pass_last; /* the last iteration line of the current pass, 0 before one */
    int new_pass_pending;
    int64_t resume_from;                /* "loaded checkpoint ... at iteration N": where the current pass starts */
    int64_t starts[MAX_PASS_STARTS][2]; /* pass k + 2: its first iteration, the largest before it */
    int n_starts;
    int64_t max_iter, iter_lines;
    /* the end of the job */
    int traceback;    /* a Python traceback since the last iteration line */
    char saving[160]; /* a checkpoint save begun and not reported done */
    /* counted, said once at the end */
    int64_t cut_lines, cut_line_no, dropped_losses, dropped_timers, dropped_valid;
    char cut_text[96];
    int cut_at_eof;
};

tdm_megatron_parser *tdm_megatron_parser_new(tdm_run_log *run) {
    tdm_megatron_parser *p = tdm_xcalloc(1, sizeof *p);
    p->run = run;
    p->carry = tdm_xmalloc(TDM_RUN_LINE_MAX);
    p->scratch = tdm_xmalloc(TDM_RUN_LINE_MAX);
    return p;
}

/* ---- small text helpers: every line is (pointer, length), never NUL-terminated ---- */

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_name(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_' || c == '-' || c == '.';
}
/* timers are named "train/valid/test-data-iterators-setup" too */
static int is_timer_name(char c) { return is_name(c) || c == '/'; }

static const char *find(const char *s, size_t n, const char *lit) { return memmem(s, n, lit, strlen(lit)); }

static inline void trim(const char **s, size_t *n) {
    while (*n && is_space(**s)) (*s)++, (*n)--;
    while (*n && (is_space((*s)[*n - 1]) || (*s)[*n - 1] == 0)) (*n)--;
}

static int eq(const char *s, size_t n, const char *lit) { return strlen(lit) == n && !memcmp(s, lit, n); }

/* A non-negative integer at s (leading blanks skipped); the bytes read, 0 if none. */
static size_t parse_count(const char *s, size_t n, int64_t *out) {
    size_t i = 0;
    while (i < n && is_space(s[i])) i++;
    size_t d = i;
    int64_t v = 0;
    for (; i < n && is_digit(s[i]); i++)
        if (v < ((int64_t)1 << 53)) v = v * 10 + (s[i] - '0');
    if (i == d) return 0;
    *out = v;
    return i;
}

/* A whole field value as a number (blanks around it allowed, nothing else). */
static int field_number(const char *s, size_t n, double *v, tdm_run_prec *prec) {
    trim(&s, &n);
    tdm_run_prec pr;
    size_t k = tdm_run_parse_number(s, n, v, prec ? prec : &pr);
    return k > 0 && k == n;
}

static int field_count(const char *s, size_t n, int64_t *v) {
    double x;
    if (!field_number(s, n, &x, NULL) || !(x >= 0) || x > 9.0e15 || x != floor(x)) return 0;
    *v = (int64_t)x;
    return 1;
}

static void fail(tdm_megatron_parser *p, const tdm_error *e) {
    if (!p->failed) p->err = *e;
    p->failed = 1;
}

/* ---- iteration lines ---- */

/* Where "iteration <blanks> N <blanks>/" starts in s[0..n), the last such place (an earlier one
 * is a line cut short and glued to this one), or NULL. Found from its '/', the rarest of its bytes
 * on a log's lines, looking back. */
static const char *iteration_pattern(const char *s, size_t n) {
    const char *best = NULL, *end = s + n;
    for (const char *q = s; (q = memchr(q, '/', (size_t)(end - q))); q++) {
        const char *r = q;
        while (r > s && is_space(r[-1])) r--;
        const char *d = r;
        while (d > s && is_digit(d[-1])) d--;
        if (d == r || d == s || !is_space(d[-1])) continue;
        while (d > s && is_space(d[-1])) d--;
        if (d - s >= 9 && !memcmp(d - 9, "iteration", 9)) best = d - 9;
    }
    return best;
}

static void note_cut(tdm_megatron_parser *p, const char *s, size_t n, int at_eof) {
    if (p->cut_lines++ == 0) {
        p->cut_line_no = p->run->lines;
        p->cut_at_eof = at_eof;
        snprintf(p->cut_text, sizeof p->cut_text, "%.*s%s", (int)(n < 60 ? n : 60), s, n > 60 ? "..." : "");
        for (char *c = p->cut_text; *c; c++)
            if ((unsigned char)*c < 0x20) *c = ' ';
    }
}

/* Longer than most: the fields of Megatron's iteration line, in the order it prints them. */
static void iteration_line(tdm_megatron_parser *p, const char *s, size_t n, int at_eof) {
    tdm_run_log *run = p->run;
    const char *end = s + n, *q = s + 9;
    int64_t it = 0, of = 0;
    q += parse_count(q, (size_t)(end - q), &it);
    while (q < end && is_space(*q)) q++;
    q++; /* the '/' */
    size_t k = parse_count(q, (size_t)(end - q), &of);
    q += k;
    if (it < 1) return; /* "iteration 0/": not a training iteration */
    tdm_run_iter x = tdm_run_iter_empty(it);
    int saw_nan_field = 0;
    const char *bar = memchr(q, '|', (size_t)(end - q));
    if (!bar) {
        note_cut(p, s, n, at_eof);
        return;
    }
    /* fields "key: value |" until the last '|'; what follows it is either blank or other output */
    for (const char *f = bar + 1; f < end;) {
        const char *next = f, *colon = NULL; /* one pass to the field's end, noting its first ':' */
        for (; next < end && *next != '|'; next++)
            if (*next == ':' && !colon) colon = next;
        if (next == end) break;
        if (colon) {
            const char *key = f, *val = colon + 1;
            size_t kn = (size_t)(colon - f), vn = (size_t)(next - val);
            trim(&key, &kn);
            switch (kn) {
            case 7:
                if (eq(key, kn, "lm loss")) field_number(val, vn, &x.lm_loss, &x.loss_prec);
                else goto other;
                break;
            case 9:
                if (eq(key, kn, "grad norm")) field_number(val, vn, &x.grad_norm, &x.grad_norm_prec);
                else if (eq(key, kn, "num zeros")) field_number(val, vn, &x.num_zeros, NULL);
                else goto other;
                break;
            case 10:
                if (eq(key, kn, "loss scale")) field_number(val, vn, &x.loss_scale, NULL);
                else goto other;
                break;
            case 11:
                if (eq(key, kn, "params norm")) field_number(val, vn, &x.params_norm, NULL);
                else goto other;
                break;
            case 13:
                if (eq(key, kn, "learning rate")) field_number(val, vn, &x.lr, &x.lr_prec);
                else goto other;
                break;
            case 16:
                if (eq(key, kn, "consumed samples")) field_count(val, vn, &x.consumed_samples);
                else goto other;
                break;
            case 17:
                if (eq(key, kn, "global batch size")) field_count(val, vn, &x.global_batch);
                else goto other;
                break;
            case 24:
                if (eq(key, kn, "number of nan iterations")) {
                    int64_t c;
                    if (field_count(val, vn, &c)) x.nan = (int32_t)(c > INT32_MAX ? INT32_MAX : c), saw_nan_field = 1;
                } else goto other;
                break;
            case 28:
                if (eq(key, kn, "number of skipped iterations")) {
                    int64_t c;
                    if (field_count(val, vn, &c)) x.skipped = (int32_t)(c > INT32_MAX ? INT32_MAX : c);
                } else goto other;
                break;
            case 31:
                if (eq(key, kn, "elapsed time per iteration (ms)")) field_number(val, vn, &x.elapsed_ms, NULL);
                else goto other;
                break;
            default:
            other:
                if (kn > 18 && !memcmp(key, "throughput per GPU", 18)) {
                    field_number(val, vn, &x.throughput, NULL);
                } else if (find(key, kn, "loss") && !find(key, kn, "scale")) {
                    double v;
                    tdm_run_prec pr;
                    if (field_number(val, vn, &v, &pr)) {
                        int idx = tdm_run_loss_index(run, key, kn);
                        if (idx >= 0) x.other_loss[idx] = v;
                        else p->dropped_losses++;
                    }
                }
            }
        }
        f = next + 1;
    }
    /* complete: the closing "number of nan iterations: N |" came, or the line ends in '|' */
    const char *last_bar = end;
    while (last_bar > s && last_bar[-1] != '|') last_bar--;
    const char *tail = last_bar;
    size_t tn = (size_t)(end - tail);
    trim(&tail, &tn);
    if (!saw_nan_field && tn) {
        note_cut(p, s, n, at_eof);
        return;
    }
    if (of > 0) run->train_iters = of;
    /* a new pass: an iteration that goes back, or an arguments block after this pass's iterations */
    if (p->new_pass_pending || (p->pass_last > 0 && it <= p->pass_last)) {
        if (p->n_starts < MAX_PASS_STARTS) {
            p->starts[p->n_starts][0] = it;
            p->starts[p->n_starts][1] = p->max_iter;
            p->n_starts++;
        }
        run->passes++;
        if (!p->new_pass_pending) p->resume_from = 0; /* no arguments block: nothing said where it resumed */
        p->new_pass_pending = 0;
        p->pass_last = 0;
    }
    /* the iterations this line covers: back to the previous line of this pass, or to where it resumed */
    int64_t prev = p->pass_last > 0 ? p->pass_last : p->resume_from;
    if (prev >= it) prev = 0;
    x.interval = (int32_t)(it - prev > INT32_MAX ? INT32_MAX : it - prev);
    x.pass = (uint32_t)run->passes;
    tdm_error e;
    if (tdm_run_append_iter(run, &x, &e) != 0) {
        fail(p, &e);
        return;
    }
    p->pass_last = it;
    if (it > p->max_iter) p->max_iter = it;
    p->iter_lines++;
    p->traceback = 0;
    p->saving[0] = 0;
}

/* ---- arguments block ---- */

/* "  name ........ value": the name's and the value's places; 0 when the line is not one. */
static int dotted(const char *s, size_t n, int timer, const char **name, size_t *nn, const char **val, size_t *vn) {
    const char *end = s + n, *d = NULL;
    for (const char *q = s; q + 1 < end; q++)
        if (q[0] == ' ' && q[1] == '.' && (q + 2 == end || q[2] == '.' || q[2] == ' ')) {
            d = q;
            break;
        }
    const char *ne;
    if (d) {
        ne = d;
    } else { /* a name of 48 characters or more has no dots: "  name  value" */
        const char *a = s;
        while (a < end && is_space(*a)) a++;
        ne = a;
        while (ne < end && !is_space(*ne)) ne++;
        if (a == s || ne + 2 >= end || ne[1] != ' ') return 0;
        d = ne;
    }
    const char *nb = ne;
    while (nb > s && !is_space(nb[-1])) nb--;
    if (nb == ne) return 0;
    for (const char *c = nb; c < ne; c++)
        if (!(timer ? is_timer_name(*c) : is_name(*c))) return 0;
    const char *v = d;
    while (v < end && is_space(*v)) v++;
    while (v < end && *v == '.') v++;
    if (v < end && *v == ':') v++; /* timers: "name .....: (a, b)" */
    size_t len = (size_t)(end - v);
    trim(&v, &len);
    *name = nb, *nn = (size_t)(ne - nb), *val = v, *vn = len;
    return 1;
}

static void args_block_end(tdm_megatron_parser *p) {
    tdm_run_log *run = p->run;
    p->in_args = 0;
    const char *v = tdm_run_log_arg(run, "train_iters");
    int64_t ti;
    if (v && !run->train_iters && field_count(v, strlen(v), &ti)) run->train_iters = ti;
    if (!p->n_prev_args) return;
    /* an appended run: say how its arguments differ from the run before it */
    char list[600] = "";
    int diffs = 0;
    for (int i = 0; i < run->n_args; i++) {
        const char *old = NULL;
        for (int j = 0; j < p->n_prev_args && !old; j++)
            if (!strcmp(p->prev_args[j].key, run->args[i].key)) old = p->prev_args[j].value;
        if (old && !strcmp(old, run->args[i].value)) continue;
        if (diffs++ < 3) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s%s: %.40s -> %.40s", l ? "; " : "", run->args[i].key,
                     old ? old : "(absent)", run->args[i].value);
        }
    }
    if (diffs)
        tdm_run_warn(run, "its arguments block %d differs from the one before in %d argument%s (%s%s)", p->args_blocks,
                     diffs, diffs == 1 ? "" : "s", list, diffs > 3 ? "; ..." : "");
    for (int i = 0; i < p->n_prev_args; i++) free(p->prev_args[i].key), free(p->prev_args[i].value);
    free(p->prev_args);
    p->prev_args = NULL;
    p->n_prev_args = 0;
}

static void args_block_begin(tdm_megatron_parser *p) {
    tdm_run_log *run = p->run;
    if (p->in_args) args_block_end(p);
    p->in_args = 1;
    p->args_blocks++;
    if (p->pass_last > 0) p->new_pass_pending = 1;
    p->resume_from = 0;
    for (int i = 0; i < p->n_prev_args; i++) free(p->prev_args[i].key), free(p->prev_args[i].value);
    free(p->prev_args);
    p->prev_args = run->args;
    p->n_prev_args = run->n_args;
    run->args = NULL;
    run->n_args = 0;
}

/* ---- timers, validation, the end of the job ---- */

static int timer_line(tdm_megatron_parser *p, const char *s, size_t n) {
    tdm_run_log *run = p->run;
    const char *name, *val;
    size_t nn, vn;
    if (!dotted(s, n, 1, &name, &nn, &val, &vn)) return 0;
    double lo = NAN, hi;
    if (vn && val[0] == '(') {
        const char *comma = memchr(val, ',', vn);
        if (!comma || val[vn - 1] != ')') return 0;
        if (!field_number(val + 1, (size_t)(comma - val - 1), &lo, NULL)) return 0;
        if (!field_number(comma + 1, (size_t)(val + vn - 1 - comma - 1), &hi, NULL)) return 0;
    } else if (!field_number(val, vn, &hi, NULL)) {
        return 0;
    }
    int id = -1;
    for (int i = 0; i < run->n_timer_names && id < 0; i++)
        if (strlen(run->timer_names[i]) == nn && !memcmp(run->timer_names[i], name, nn)) id = i;
    if (id < 0 && run->n_timer_names < TDM_RUN_MAX_TIMER_NAMES) {
        char *c = tdm_xmalloc(nn + 1);
        memcpy(c, name, nn), c[nn] = 0;
        id = run->n_timer_names;
        run->timer_names[run->n_timer_names++] = c;
    }
    if (id < 0 || run->n_timers == TDM_RUN_MAX_TIMERS) {
        p->dropped_timers++;
        return 1;
    }
    if (run->n_timers == run->cap_timers) {
        run->cap_timers = run->cap_timers ? 2 * run->cap_timers : 64;
        run->timers = tdm_xrealloc(run->timers, (size_t)run->cap_timers * sizeof *run->timers);
    }
    run->timers[run->n_timers++] = (tdm_run_timer){p->pass_last, id, lo, hi};
    return 1;
}

static void validation_line(tdm_megatron_parser *p, const char *s, size_t n) {
    tdm_run_log *run = p->run;
    const char *end = s + n, *q = s + strlen("validation loss at iteration");
    tdm_run_valid v;
    memset(&v, 0, sizeof v);
    v.lm_loss = v.ppl = NAN;
    size_t k = parse_count(q, (size_t)(end - q), &v.iteration);
    if (!k) return;
    q += k;
    const char *bar = memchr(q, '|', (size_t)(end - q));
    if (!bar) return;
    const char *label = q;
    size_t ln = (size_t)(bar - q);
    trim(&label, &ln);
    if (ln > 3 && !memcmp(label, "on ", 3)) label += 3, ln -= 3;
    snprintf(v.set, sizeof v.set, "%.*s", (int)ln, label);
    for (const char *f = bar + 1; f < end;) {
        const char *next = f, *colon = NULL; /* one pass to the field's end, noting its first ':' */
        for (; next < end && *next != '|'; next++)
            if (*next == ':' && !colon) colon = next;
        if (next == end) break;
        if (colon) {
            const char *key = f;
            size_t kn = (size_t)(colon - f);
            trim(&key, &kn);
            if (eq(key, kn, "lm loss value"))
                field_number(colon + 1, (size_t)(next - colon - 1), &v.lm_loss, &v.loss_prec);
            else if (eq(key, kn, "lm loss PPL")) field_number(colon + 1, (size_t)(next - colon - 1), &v.ppl, NULL);
        }
        f = next + 1;
    }
    if (run->n_valid == TDM_RUN_MAX_VALID) {
        p->dropped_valid++;
        return;
    }
    if (run->n_valid == run->cap_valid) {
        run->cap_valid = run->cap_valid ? 2 * run->cap_valid : 16;
        run->valid = tdm_xrealloc(run->valid, (size_t)run->cap_valid * sizeof *run->valid);
    }
    run->valid[run->n_valid++] = v;
}

/* "AttributeError: 'NoneType' object ..." (after an optional "[rank2]: "): the exception a traceback ends with. */
static int exception_line(const char *s, size_t n) {
    if (n && s[0] == '[') {
        const char *c = find(s, n, "]: ");
        if (c) n -= (size_t)(c + 3 - s), s = c + 3;
    }
    size_t i = 0;
    while (i < n && (is_name(s[i]) && s[i] != '-')) i++;
    if (i == 0 || (i < n && s[i] != ':')) return 0;
    static const char *const kinds[] = {"Error", "Exception", "Interrupt", "Exit"};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        size_t l = strlen(kinds[k]);
        if (i >= l && !memcmp(s + i - l, kinds[k], l)) return 1;
    }
    return 0;
}

static void other_line(tdm_megatron_parser *p, const char *s, size_t n) {
    tdm_run_log *run = p->run;
    const char *q;
    if (find(s, n, "-- arguments --")) {
        args_block_begin(p);
    } else if ((q = find(s, n, "DistributedDataParallelConfig("))) {
        size_t len = (size_t)(s + n - q);
        snprintf(run->ddp_config, sizeof run->ddp_config, "%.*s", (int)len, q);
    } else if ((q = find(s, n, "time across ranks (ms):"))) {
        p->in_timers = 1;
        p->timers_minmax = find(s, n, "(min, max)") != NULL;
    } else if ((q = find(s, n, "validation loss at iteration"))) {
        validation_line(p, q, (size_t)(s + n - q));
    } else if (find(s, n, "Traceback (most recent call last)")) {
        if (!p->traceback) run->crash[0] = 0;
        p->traceback = 1;
    } else if (p->traceback && !run->crash[0] && exception_line(s, n)) {
        const char *c = s;
        size_t len = n;
        if (len && c[0] == '[' && (q = find(c, len, "]: "))) len -= (size_t)(q + 3 - c), c = q + 3;
        snprintf(run->crash, sizeof run->crash, "%.*s", (int)(len < 200 ? len : 200), c);
    } else if (find(s, n, "saved checkpoint")) {
        p->saving[0] = 0;
    } else if ((q = find(s, n, "saving checkpoint at iteration"))) {
        snprintf(p->saving, sizeof p->saving, "%.*s", (int)((size_t)(s + n - q) < 120 ? s + n - q : 120), q);
    } else if ((q = find(s, n, "loaded checkpoint")) && (q = find(q, (size_t)(s + n - q), "at iteration"))) {
        int64_t it;
        if (parse_count(q + 12, (size_t)(s + n - q - 12), &it)) p->resume_from = it;
    }
}

/* One line without its newline, carriage returns or escape sequences. */
static void piece(tdm_megatron_parser *p, const char *s, size_t n, int at_eof) {
    tdm_run_log *run = p->run;
    while (n && (is_space(s[n - 1]) || s[n - 1] == 0)) n--;
    if (p->in_args) {
        if (find(s, n, "end of arguments")) {
            args_block_end(p);
            return;
        }
        const char *name, *val;
        size_t nn, vn;
        if (!iteration_pattern(s, n)) { /* an iteration line ends a block cut short */
            if (n && dotted(s, n, 0, &name, &nn, &val, &vn))
                tdm_run_add_kv(&run->args, &run->n_args, name, nn, val, vn);
            return;
        }
        args_block_end(p);
    }
    if (p->in_timers) {
        if (n && timer_line(p, s, n)) return;
        p->in_timers = 0;
    }
    if (!n) return;
    const char *it = iteration_pattern(s, n);
    if (it) iteration_line(p, it, (size_t)(s + n - it), at_eof);
    else other_line(p, s, n);
}

static void line(tdm_megatron_parser *p, const char *s, size_t n, int at_eof) {
    p->run->lines++;
    if (memchr(s, 0x1b, n)) { /* ANSI escape sequences: CSI "ESC [ ... final byte", or ESC and one byte */
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
            if (s[i] != 0x1b) {
                p->scratch[o++] = s[i];
                continue;
            }
            if (i + 1 < n && s[i + 1] == '[') {
                i += 2;
                while (i < n && !((unsigned char)s[i] >= 0x40 && (unsigned char)s[i] <= 0x7e)) i++;
            } else if (i + 1 < n) {
                i++;
            }
        }
        s = p->scratch, n = o;
    }
    /* carriage returns: each piece is what a terminal showed for a moment; read them all */
    const char *cr;
    while ((cr = memchr(s, '\r', n))) {
        size_t k = (size_t)(cr - s);
        if (k) piece(p, s, k, 0);
        s = cr + 1, n -= k + 1;
    }
    piece(p, s, n, at_eof);
}

void tdm_megatron_parser_feed(tdm_megatron_parser *p, const char *data, size_t n) {
    if (p->failed) return;
    p->run->bytes += (int64_t)n;
    while (n) {
        const char *nl = memchr(data, '\n', n);
        size_t k = nl ? (size_t)(nl - data) : n;
        if (p->carry_len || !nl) { /* finish (or begin) a line that spans pieces of input */
            size_t room = TDM_RUN_LINE_MAX - p->carry_len, take = k < room ? k : room;
            memcpy(p->carry + p->carry_len, data, take);
            p->carry_len += take;
            if (take < k) p->carry_long = 1;
            if (!nl) return;
            if (p->carry_long) p->run->long_lines++;
            line(p, p->carry, p->carry_len, 0);
            p->carry_len = 0, p->carry_long = 0;
        } else if (k > TDM_RUN_LINE_MAX) {
            p->run->long_lines++;
            line(p, data, TDM_RUN_LINE_MAX, 0);
        } else {
            line(p, data, k, 0);
        }
        data += k + 1, n -= k + 1;
        if (p->failed) return;
    }
}

/* "AttributeError: ..., while saving checkpoint at iteration 50 ...", with runs of blanks as one. */
static void crash_text(char *out, size_t cap, const char *exc, const char *saving) {
    size_t o = 0;
    const char *parts[3] = {exc, exc[0] && saving[0] ? ", " : "", saving[0] ? "while " : ""};
    for (int k = 0; k < 4; k++) {
        const char *src = k < 3 ? parts[k] : saving;
        for (; *src && o + 1 < cap; src++)
            if (!(*src == ' ' && o && out[o - 1] == ' ')) out[o++] = *src;
    }
    out[o] = 0;
}

static void say_passes(tdm_megatron_parser *p) {
    tdm_run_log *run = p->run;
    char list[700] = "";
    for (int k = 0; k < p->n_starts; k++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%spass %d starts at iteration %lld after the log reached %lld",
                 k ? "; " : "", k + 2, (long long)p->starts[k][0], (long long)p->starts[k][1]);
    }
    tdm_run_warn(run,
                 "holds %d runs appended one after the other (a resumed or restarted job: %s%s); for each "
                 "iteration the line of the last pass that logged it is used",
                 run->passes, list, run->passes - 1 > p->n_starts ? "; ..." : "");
    /* iterations an earlier pass logged beyond where a later one stopped: two trajectories joined */
    uint32_t maxpass = 0, later = 0;
    int64_t lo = 0, hi = 0;
    for (int64_t i = 0; i < run->n_iters; i++) {
        const tdm_run_iter *x = &run->iters[i];
        if (x->pass < maxpass) {
            if (!lo) lo = x->iteration, later = maxpass;
            hi = x->iteration;
        }
        if (x->pass > maxpass) maxpass = x->pass;
    }
    if (lo)
        tdm_run_warn(run,
                     "iterations %lld-%lld come from passes before pass %u, which did not reach them: the series "
                     "joins two trajectories",
                     (long long)lo, (long long)hi, later);
}

int tdm_megatron_parser_finish(tdm_megatron_parser *p, tdm_error *err) {
    tdm_run_log *run = p->run;
    if (!p->failed && p->carry_len) {
        if (p->carry_long) run->long_lines++;
        line(p, p->carry, p->carry_len, 1);
    }
    if (p->in_args) args_block_end(p);
    tdm_run_sort_iters(run); /* appended runs: each iteration's line of the last pass */
    for (int i = 0; i < p->n_prev_args; i++) free(p->prev_args[i].key), free(p->prev_args[i].value);
    free(p->prev_args);
    int rc = 0;
    if (p->failed) {
        rc = -1;
        if (err) *err = p->err;
    } else if (run->n_iters == 0) {
        rc = -1;
        if (run->bytes == 0)
            tdm_errorf(err, "%s: empty: expected the output of a Megatron-LM, MindSpeed or tandem training job",
                       run->path);
        else if (p->cut_lines)
            tdm_errorf(err, "%s: its only iteration line is cut short (line %lld: \"%s\"): no iteration to read",
                       run->path, (long long)p->cut_line_no, p->cut_text);
        else if (p->args_blocks)
            tdm_errorf(err,
                       "%s: an arguments block but no iteration line: the job stopped before it logged an "
                       "iteration, or this is the output of a rank that does not log them (Megatron logs "
                       "them on the last rank)",
                       run->path);
        else
            tdm_errorf(err,
                       "%s: no iteration line (\" iteration N/ M | consumed samples: ... |\"): expected the "
                       "output of a Megatron-LM, MindSpeed or tandem training job",
                       run->path);
    }
    if (rc == 0) {
        const tdm_run_iter *first = &run->iters[0], *last = &run->iters[run->n_iters - 1];
        char of[48] = "";
        if (run->train_iters) snprintf(of, sizeof of, " of %lld", (long long)run->train_iters);
        snprintf(run->source, sizeof run->source,
                 "training log, %lld iteration line%s (iterations %lld-%lld%s), %lld lines", (long long)p->iter_lines,
                 p->iter_lines == 1 ? "" : "s", (long long)(first->iteration - first->interval + 1),
                 (long long)last->iteration, of, (long long)run->lines);
        if (run->passes > 1) say_passes(p);
        if (p->cut_lines)
            tdm_run_warn(run, "%s iteration line%s cut short (%s %lld: \"%s\"): not used",
                         p->cut_at_eof && p->cut_lines == 1 ? "its last line is an" : "has",
                         p->cut_lines == 1 && !p->cut_at_eof ? " an" : "",
                         p->cut_at_eof ? "the end of the file, line" : "first at line", (long long)p->cut_line_no,
                         p->cut_text);
        if (p->traceback) {
            run->crashed = 1;
            char what[sizeof run->crash] = "";
            crash_text(what, sizeof what, run->crash, p->saving);
            memcpy(run->crash, what, sizeof what);
            tdm_run_warn(run,
                         "the job failed after iteration %lld%s: a Python traceback follows the last iteration "
                         "line%s%s%s",
                         (long long)last->iteration, of, what[0] ? " (" : "", what, what[0] ? ")" : "");
        } else if (run->train_iters && last->iteration < run->train_iters) {
            tdm_run_warn(run,
                         "ends at iteration %lld of %lld without a traceback: the job was stopped, or the log is "
                         "cut",
                         (long long)last->iteration, (long long)run->train_iters);
        }
        if (run->long_lines)
            tdm_run_warn(run, "%lld line%s longer than %d bytes: read up to there", (long long)run->long_lines,
                         run->long_lines == 1 ? "" : "s", TDM_RUN_LINE_MAX);
        if (p->dropped_losses)
            tdm_run_warn(run, "more than %d other losses on its iteration lines: the others are not kept",
                         TDM_RUN_MAX_LOSSES);
        if (p->dropped_timers)
            tdm_run_warn(run, "%lld timer lines beyond the %d names / %d lines kept", (long long)p->dropped_timers,
                         TDM_RUN_MAX_TIMER_NAMES, TDM_RUN_MAX_TIMERS);
        if (p->dropped_valid)
            tdm_run_warn(run, "%lld validation lines beyond the %d kept", (long long)p->dropped_valid,
                         TDM_RUN_MAX_VALID);
    }
    free(p->carry);
    free(p->scratch);
    free(p);
    return rc;
}

int tdm_megatron_log_read_mem(const char *data, size_t n, const char *name, tdm_run_log *run, tdm_error *err) {
    tdm_run_log_init(run);
    snprintf(run->path, sizeof run->path, "%s", name);
    tdm_megatron_parser *p = tdm_megatron_parser_new(run);
    tdm_megatron_parser_feed(p, data, n);
    run->format = TDM_RUN_MEGATRON_LOG;
    return tdm_megatron_parser_finish(p, err);
}

int tdm_megatron_log_read_file(const char *path, tdm_run_log *run, tdm_error *err) {
    tdm_run_log_init(run);
    snprintf(run->path, sizeof run->path, "%s", path);
    run->format = TDM_RUN_MEGATRON_LOG;
    gzFile f = gzopen(path, "rb"); /* gzip-compressed or plain, by its bytes */
    if (!f) return tdm_errorf(err, "%s: %s", path, strerror(errno ? errno : ENOMEM));
    gzbuffer(f, 1 << 17);
    tdm_megatron_parser *p = tdm_megatron_parser_new(run);
    enum { CHUNK = 1 << 20 };
    char *buf = tdm_xmalloc(CHUNK);
    int got;
    uint64_t text = 0;
    while ((got = gzread(f, buf, CHUNK)) > 0) {
        tdm_megatron_parser_feed(p, buf, (size_t)got);
        text += (uint64_t)got;
    }
    int zerr = Z_OK, saved = errno;
    const char *zmsg = gzerror(f, &zerr); /* a stream that ends early is Z_BUF_ERROR after the last read */
    char what[200];
    snprintf(what, sizeof what, "%s", zmsg ? zmsg : "");
    gzclose(f);
    free(buf);
    int rc = tdm_megatron_parser_finish(p, err);
    if (zerr == Z_BUF_ERROR)
        return tdm_errorf(err,
                          "%s: the compressed data ends early, after %llu bytes of text (a truncated .gz file); "
                          "expected the rest of the gzip stream",
                          path, (unsigned long long)text);
    if (got < 0 && zerr == Z_ERRNO) return tdm_errorf(err, "%s: read error (%s)", path, strerror(saved));
    if (got < 0 || zerr != Z_OK) return tdm_errorf(err, "%s: not a valid gzip stream (%s)", path, what);
    return rc;
}
