/* ascend.c - the Ascend profiler's per-step CSVs and communication JSON.
 *
 * step_trace_time.csv (ASCEND_PROFILER_OUTPUT of one rank) and msprof-analyze's
 * cluster_step_trace_time.csv (every rank, Type "rank" rows, and "stage" rows whose columns
 * are the maxima over a stage's ranks) give, per step, in µs: Computing, Communication(Not
 * Overlapped), Overlapped, Communication, Free and Stage, with Computing + Communication(Not
 * Overlapped) + Free = Stage. Columns are found by their header names, so the older layout and
 * the newer ones (a leading Device_id, Preparing, DP/PP/TP Index) read alike.
 * communication.json (one rank: {step: {"collective"|"p2p": {op: info}}}) and
 * cluster_communication.json ({group: {step: {op: {rank: info}}}}) give per operator its
 * elapse, transit, wait, synchronisation and idle times and the bytes per transport. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "runs/json_stream.h"
#include "runs/trace.h"
#include "runs/trace_internal.h"

#define CSV_LINE_MAX ((size_t)1 << 20)
#define CSV_FIELDS   64

/* Splits one CSV line in place (RFC 4180 quotes); returns the number of fields. */
static int csv_split(char *line, char **f, int cap) {
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == cap) return n;
        char *w = p, *start = p;
        if (*p == '"') {
            p++;
            for (;;) {
                if (*p == '\0') break;
                if (*p == '"') {
                    if (p[1] == '"') {
                        *w++ = '"';
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                *w++ = *p++;
            }
            while (*p && *p != ',') p++; /* text after a closing quote is dropped */
        } else {
            while (*p && *p != ',') w++, p++;
        }
        int more = *p == ',';
        *w = '\0';
        f[n++] = start;
        if (!more) return n;
        p++;
    }
}

static int col_of(char **h, int nh, const char *name) {
    for (int i = 0; i < nh; i++)
        if (!strcmp(h[i], name)) return i;
    return -1;
}

static int num_field(char *s, double *v) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    if (!n) return -1;
    return tdm_js_parse_number(s, n, v);
}

static int64_t rank_in_path(const char *path) {
    int64_t r = -1;
    for (const char *p = path; (p = strstr(p, "rank")) != NULL; p += 4) {
        const char *q = p + 4;
        while (*q == '_' || *q == '-') q++;
        if (isdigit((unsigned char)*q)) r = strtoll(q, NULL, 10);
    }
    return r;
}

typedef struct line_src {
    FILE *f;
    const char *text, *end;
} line_src;

/* Next line into *buf (without the newline); 1, 0 at the end, -1 when longer than the cap. */
static int next_line(line_src *ls, char **buf, size_t *cap) {
    size_t n = 0;
    int c, any = 0;
    for (;;) {
        if (ls->f) c = getc(ls->f);
        else c = ls->text < ls->end ? (unsigned char)*ls->text++ : EOF;
        if (c == EOF) break;
        any = 1;
        if (c == '\n') break;
        if (n + 2 > *cap) {
            if (*cap >= CSV_LINE_MAX) return -1;
            *cap = *cap ? *cap * 2 : 4096;
            *buf = tdm_xrealloc(*buf, *cap);
        }
        (*buf)[n++] = (char)c;
    }
    if (!any) return 0;
    if (!*buf) *buf = tdm_xmalloc(*cap = 4096);
    if (n && (*buf)[n - 1] == '\r') n--;
    (*buf)[n] = '\0';
    return 1;
}

static tdm_runs_trace *trace_for_rank(tdm_runs_set *s, tdm_runs_trace **mine, int *n_mine, const char *path,
                                      int64_t rank) {
    for (int i = 0; i < *n_mine; i++)
        if (mine[i]->rank == rank) return mine[i];
    tdm_runs_trace *t = tdm_runs_trace_new(path);
    t->format = TDM_RUNS_FMT_ASCEND_STEPS;
    t->rank = rank;
    mine[(*n_mine)++] = t;
    (void)s;
    return t;
}

static int read_csv(tdm_runs_set *s, line_src *ls, const char *path, tdm_error *err) {
    char *line = NULL;
    size_t cap = 0;
    char *h[CSV_FIELDS], *f[CSV_FIELDS];
    int rc = next_line(ls, &line, &cap);
    if (rc <= 0) {
        free(line);
        return tdm_errorf(err, "%s: %s", path, rc < 0 ? "a line longer than 1 MiB" : "empty file; expected a header");
    }
    char *header = tdm_xstrdup(line[0] == '\xEF' && line[1] == '\xBB' && line[2] == '\xBF' ? line + 3 : line);
    int nh = csv_split(header, h, CSV_FIELDS);
    int c_step = col_of(h, nh, "Step"), c_type = col_of(h, nh, "Type"), c_index = col_of(h, nh, "Index"),
        c_dev = col_of(h, nh, "Device_id"), c_comp = col_of(h, nh, "Computing"),
        c_nov = col_of(h, nh, "Communication(Not Overlapped)"), c_ov = col_of(h, nh, "Overlapped"),
        c_comm = col_of(h, nh, "Communication"), c_free = col_of(h, nh, "Free"), c_stage = col_of(h, nh, "Stage");
    if (c_comp < 0 || c_nov < 0 || c_comm < 0 || c_free < 0 || c_stage < 0) {
        free(header);
        free(line);
        return tdm_errorf(err,
                          "%s: expected an Ascend step_trace_time CSV: a header with Computing, "
                          "Communication(Not Overlapped), Communication, Free and Stage columns",
                          path);
    }
    tdm_runs_trace *mine[4096];
    int n_mine = 0, stage_rows = 0, lineno = 1, bad = 0;
    int64_t file_rank = rank_in_path(path);
    double worst_identity = 0;
    while ((rc = next_line(ls, &line, &cap)) == 1) {
        lineno++;
        if (!line[0]) continue;
        int n = csv_split(line, f, CSV_FIELDS);
        if (n < nh) {
            bad = tdm_errorf(err, "%s:%d: %d fields where the header has %d", path, lineno, n, nh);
            break;
        }
        if (c_type >= 0 && strcmp(f[c_type], "rank") != 0) {
            stage_rows++; /* a stage row: maxima over the stage's ranks, not a rank */
            continue;
        }
        double v[6];
        int cols[6] = {c_comp, c_nov, c_ov, c_comm, c_free, c_stage};
        for (int k = 0; k < 6 && !bad; k++) {
            if (cols[k] < 0) {
                v[k] = NAN;
                continue;
            }
            if (num_field(f[cols[k]], &v[k]) != 0 || !isfinite(v[k]))
                bad = tdm_errorf(err, "%s:%d: column %s: expected a number of µs, found '%.40s'", path, lineno,
                                 h[cols[k]], f[cols[k]]);
        }
        if (bad) break;
        int64_t rank = file_rank;
        double rv;
        if (c_index >= 0 && num_field(f[c_index], &rv) == 0 && rv >= 0 && rv < 1e9) rank = (int64_t)rv;
        else if (c_dev >= 0 && num_field(f[c_dev], &rv) == 0 && rv >= 0 && rv < 1e9 && rank < 0) rank = (int64_t)rv;
        double sv = 0;
        int64_t number = c_step >= 0 && num_field(f[c_step], &sv) == 0 && sv >= 0 && sv < 9e18 ? (int64_t)sv : 0;
        if (n_mine == 4096 && !(n_mine && mine[n_mine - 1]->rank == rank)) {
            bad = tdm_errorf(err, "%s: more than 4096 ranks", path);
            break;
        }
        tdm_runs_trace *t = trace_for_rank(s, mine, &n_mine, path, rank);
        double hidden = isfinite(v[2]) ? v[2] : v[3] - v[1];
        double identity = fabs(v[0] + v[1] + v[4] - v[5]);
        if (identity > worst_identity) worst_identity = identity;
        t->given = tdm_xrealloc(t->given, (size_t)(t->n_given + 1) * sizeof *t->given);
        t->given[t->n_given++] = (tdm_runs_given_step){.number = number,
                                                       .step = v[5],
                                                       .compute = v[0],
                                                       .comm = v[3],
                                                       .exposed = v[1],
                                                       .idle = v[4],
                                                       .hidden = hidden,
                                                       .last_comm = NAN};
    }
    if (rc < 0 && !bad) bad = tdm_errorf(err, "%s:%d: a line longer than 1 MiB", path, lineno + 1);
    if (!bad && n_mine == 0) bad = tdm_errorf(err, "%s: no rank rows; expected one row per step (and rank)", path);
    for (int i = 0; i < n_mine; i++) {
        tdm_runs_trace *t = mine[i];
        if (bad) {
            tdm_runs_trace_free(t);
            continue;
        }
        if (stage_rows)
            tdm_runs_note(t, "%s: %d stage row(s) skipped: their columns are maxima over a stage's ranks, not a rank",
                          path, stage_rows);
        if (worst_identity > 1.0)
            tdm_runs_note(t, "%s: Computing + Communication(Not Overlapped) + Free differs from Stage by up to %.3f µs",
                          path, worst_identity);
        tdm_runs_trace_finish(t);
        tdm_runs_set_add(s, t);
    }
    free(header);
    free(line);
    return bad ? -1 : 0;
}

int tdm_runs_read_ascend_csv(tdm_runs_set *s, const char *path, tdm_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return tdm_errorf(err, "%s: cannot open: %s", path, strerror(errno));
    line_src ls = {f, NULL, NULL};
    int rc = read_csv(s, &ls, path, err);
    fclose(f);
    return rc;
}

int tdm_runs_read_ascend_csv_mem(tdm_runs_set *s, const char *text, size_t len, const char *name, tdm_error *err) {
    line_src ls = {NULL, text, text + len};
    return read_csv(s, &ls, name, err);
}

/* ---- communication.json ---------------------------------------------------------------- */

typedef struct comm_reader {
    tdm_js *js;
    tdm_runs_set *s;
    const char *path;
    int64_t file_rank;
    char keys[8][128];
    tdm_error *err;
} comm_reader;

static int js_fail(comm_reader *c) { return tdm_errorf(c->err, "%s", tdm_js_error(c->js)); }

/* Reads an object of numbers; wants[] names the keys, out[] their values (NaN when absent). */
static int read_numbers(comm_reader *c, const char *const *wants, double *out, int n) {
    for (int i = 0; i < n; i++) out[i] = NAN;
    tdm_js_tok k;
    while ((k = tdm_js_next(c->js)) == TDM_JS_KEY) {
        const char *key = tdm_js_text(c->js, NULL);
        int i;
        for (i = 0; i < n && strcmp(key, wants[i]); i++) continue;
        if (i == n) {
            if (tdm_js_skip_value(c->js)) return js_fail(c);
            continue;
        }
        tdm_js_tok v = tdm_js_next(c->js);
        if (v == TDM_JS_ERROR) return js_fail(c);
        if (v == TDM_JS_NUMBER || v == TDM_JS_STRING) out[i] = tdm_js_number(c->js);
        else if ((v == TDM_JS_OBJECT || v == TDM_JS_ARRAY) && tdm_js_skip_rest(c->js)) return js_fail(c);
    }
    return k == TDM_JS_OBJECT_END ? 0 : js_fail(c);
}

/* The object at depth d (its '{' read), whose key path is c->keys[0..d). */
static int comm_object(comm_reader *c, int d) {
    tdm_runs_acomm rec;
    memset(&rec, 0, sizeof rec);
    int is_op = 0;
    tdm_js_tok k;
    while ((k = tdm_js_next(c->js)) == TDM_JS_KEY) {
        const char *key = tdm_js_text(c->js, NULL);
        if (!strcmp(key, "Communication Time Info")) {
            tdm_js_tok v = tdm_js_next(c->js);
            if (v == TDM_JS_ERROR) return js_fail(c);
            if (v != TDM_JS_OBJECT)
                return tdm_errorf(c->err, "%s: \"Communication Time Info\" must be an object", c->path);
            static const char *const w[] = {"Start Timestamp(us)", "Elapse Time(ms)",          "Transit Time(ms)",
                                            "Wait Time(ms)",       "Synchronization Time(ms)", "Idle Time(ms)"};
            double x[6];
            if (read_numbers(c, w, x, 6)) return -1;
            rec.start_us = x[0], rec.elapse_ms = x[1], rec.transit_ms = x[2], rec.wait_ms = x[3], rec.sync_ms = x[4];
            rec.idle_ms = x[5];
            is_op = 1;
        } else if (!strcmp(key, "Communication Bandwidth Info")) {
            tdm_js_tok v = tdm_js_next(c->js);
            if (v == TDM_JS_ERROR) return js_fail(c);
            if (v != TDM_JS_OBJECT) {
                if ((v == TDM_JS_ARRAY) && tdm_js_skip_rest(c->js)) return js_fail(c);
                continue;
            }
            tdm_js_tok tk;
            while ((tk = tdm_js_next(c->js)) == TDM_JS_KEY) { /* per transport */
                tdm_js_tok o = tdm_js_next(c->js);
                if (o == TDM_JS_ERROR) return js_fail(c);
                if (o != TDM_JS_OBJECT) {
                    if (o == TDM_JS_ARRAY && tdm_js_skip_rest(c->js)) return js_fail(c);
                    continue;
                }
                static const char *const w[] = {"Transit Size(MB)"};
                double x[1];
                if (read_numbers(c, w, x, 1)) return -1;
                if (isfinite(x[0])) rec.size_mb += x[0];
            }
            if (tk != TDM_JS_OBJECT_END) return js_fail(c);
            is_op = 1;
        } else {
            char kb[128];
            snprintf(kb, sizeof kb, "%s", key);
            tdm_js_tok v = tdm_js_next(c->js);
            if (v == TDM_JS_ERROR) return js_fail(c);
            if (v == TDM_JS_OBJECT) {
                if (d >= 8) {
                    if (tdm_js_skip_rest(c->js)) return js_fail(c);
                    continue;
                }
                snprintf(c->keys[d], sizeof c->keys[d], "%s", kb);
                if (comm_object(c, d + 1)) return -1;
            } else if (v == TDM_JS_ARRAY && tdm_js_skip_rest(c->js)) {
                return js_fail(c);
            }
        }
    }
    if (k != TDM_JS_OBJECT_END) return js_fail(c);
    if (!is_op) return 0;
    /* cluster file: [group, step, op, rank]; a rank's file: [step, collective|p2p, op] */
    const char *op = d >= 1 ? c->keys[d - 1] : "?";
    rec.rank = c->file_rank;
    if (d >= 4) {
        char *e;
        long long r = strtoll(c->keys[d - 1], &e, 10);
        if (*e == '\0' && e != c->keys[d - 1]) {
            rec.rank = r;
            op = c->keys[d - 2];
        }
        snprintf(rec.step, sizeof rec.step, "%.31s", c->keys[1]);
    } else if (d >= 1) {
        snprintf(rec.step, sizeof rec.step, "%.31s", c->keys[0]);
    }
    rec.op = tdm_xstrdup(op);
    c->s->acomm = tdm_xrealloc(c->s->acomm, (size_t)(c->s->n_acomm + 1) * sizeof *c->s->acomm);
    c->s->acomm[c->s->n_acomm++] = rec;
    return 0;
}

static int read_comm(tdm_runs_set *s, tdm_js *js, const char *path, tdm_error *err) {
    comm_reader c = {.js = js, .s = s, .path = path, .file_rank = rank_in_path(path), .err = err};
    int64_t before = s->n_acomm;
    tdm_js_tok k = tdm_js_next(js);
    if (k == TDM_JS_ERROR) return js_fail(&c);
    if (k != TDM_JS_OBJECT)
        return tdm_errorf(err, "%s: expected Ascend communication JSON: an object of steps (or groups)", path);
    if (comm_object(&c, 0)) goto fail;
    if (tdm_js_next(js) != TDM_JS_EOF) {
        js_fail(&c);
        goto fail;
    }
    if (s->n_acomm == before) {
        tdm_errorf(err, "%s: no operator with \"Communication Time Info\"; expected Ascend communication JSON", path);
        goto fail;
    }
    return 0;
fail:
    for (int64_t i = before; i < s->n_acomm; i++) free(s->acomm[i].op);
    s->n_acomm = before;
    return -1;
}

int tdm_runs_read_ascend_comm(tdm_runs_set *s, const char *path, tdm_error *err) {
    tdm_js *js = tdm_js_open_file(path, err);
    if (!js) return -1;
    int rc = read_comm(s, js, path, err);
    tdm_js_close(js);
    return rc;
}

int tdm_runs_read_ascend_comm_mem(tdm_runs_set *s, const void *data, size_t len, const char *name, tdm_error *err) {
    tdm_js *js = tdm_js_open_mem(data, len, name);
    int rc = read_comm(s, js, name, err);
    tdm_js_close(js);
    return rc;
}
