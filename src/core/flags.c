/* flags.c - the command-line parser of every subcommand (flags.h). */
#include "core/flags.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

/* integers beyond this are refused: a double holds every integer below it exactly */
#define BIG        9.0e15
#define HELP_WIDTH 100
#define HELP_LEFT  36 /* "  " + the flag column + " " */

/* ------------------------------------------------------------------ names */

/* typed[0..n) against name[0..len), '_' typed being '-'. */
static int name_eq_n(const char *typed, size_t n, const char *name, size_t len) {
    if (n != len) return 0;
    for (size_t i = 0; i < n; i++)
        if ((typed[i] == '_' ? '-' : typed[i]) != name[i]) return 0;
    return 1;
}

static int name_eq(const char *typed, size_t n, const char *name) { return name_eq_n(typed, n, name, strlen(name)); }

static int visible(const tdm_flag *f) {
    return !(f->opts & TDM_FLAG_HIDDEN) && f->kind != TDM_FLAG_FIXED && f->kind != TDM_FLAG_REFUSED;
}

/* Whether the flag reads a value (given as its name implies it: an alias "x=V" takes none). */
static int takes_value(const tdm_flag *f, const char *implied) {
    if (implied) return 0;
    switch (f->kind) {
    case TDM_FLAG_BOOL:
    case TDM_FLAG_REFUSED: return 0;
    case TDM_FLAG_FIXED: return f->def != NULL;
    default: return 1;
    }
}

const tdm_flag *tdm_flag_lookup(const tdm_flag *flags, int n_flags, const char *name, size_t n, const char **implied) {
    if (implied) *implied = NULL;
    for (int i = 0; i < n_flags; i++)
        if (name_eq(name, n, flags[i].name)) return &flags[i];
    for (int i = 0; i < n_flags; i++) {
        for (const char *a = flags[i].aliases; a && *a;) {
            size_t len = strcspn(a, "|");
            const char *eq = memchr(a, '=', len);
            if (name_eq_n(name, n, a, eq ? (size_t)(eq - a) : len)) {
                if (implied && eq) *implied = eq + 1; /* to the end: such an alias is the last (flags.h) */
                return &flags[i];
            }
            a += len;
            if (*a == '|') a++;
        }
    }
    return NULL;
}

/* The tables of p in order: flags, then more[]. */
static int n_tables(const tdm_flags *p) { return 1 + p->n_more; }
static tdm_flag_table table_at(const tdm_flags *p, int t) {
    if (t == 0) return (tdm_flag_table){p->flags, p->n_flags};
    return p->more[t - 1];
}

/* The flag and its index over all of p's tables. */
static const tdm_flag *find_indexed(const tdm_flags *p, const char *name, size_t n, const char **implied, int *index) {
    int base = 0;
    for (int t = 0; t < n_tables(p); t++) {
        tdm_flag_table tb = table_at(p, t);
        const tdm_flag *f = tdm_flag_lookup(tb.flags, tb.n, name, n, implied);
        if (f) {
            if (index) *index = base + (int)(f - tb.flags);
            return f;
        }
        base += tb.n;
    }
    return NULL;
}

const tdm_flag *tdm_flags_find(const tdm_flags *p, const char *name, size_t n, const char **implied) {
    return find_indexed(p, name, n, implied, NULL);
}

/* ------------------------------------------------------------------ suggestions */

int tdm_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 128 || lb > 128) return (int)(la > lb ? la : lb);
    int row[129];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] == b[j - 1] ? 0 : 1);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static int close_enough(int d, size_t n) {
    int limit = (int)n / 2 > 3 ? (int)n / 2 : 3;
    return d <= limit;
}

const char *tdm_closest_word(const char *typed, const char *const *words, int n) {
    const char *best = NULL;
    int best_d = INT_MAX;
    for (int i = 0; i < n; i++) {
        int d = tdm_edit_distance(typed, words[i]);
        if (d < best_d) best_d = d, best = words[i];
    }
    return best && close_enough(best_d, strlen(typed)) ? best : NULL;
}

static void closest_in(const tdm_flags *p, const char *typed, const char **best, int *best_d) {
    for (int t = 0; t < n_tables(p); t++) {
        tdm_flag_table tb = table_at(p, t);
        for (int i = 0; i < tb.n; i++) {
            if (!visible(&tb.flags[i])) continue;
            int d = tdm_edit_distance(typed, tb.flags[i].name);
            if (d < *best_d) *best_d = d, *best = tb.flags[i].name;
        }
    }
}

const char *tdm_flags_suggest(const tdm_flags *p, const char *name, size_t n) {
    char typed[129];
    if (n > 128) n = 128;
    for (size_t i = 0; i < n; i++) typed[i] = name[i] == '_' ? '-' : name[i];
    typed[n] = 0;
    const char *best = NULL;
    int best_d = INT_MAX;
    closest_in(p, typed, &best, &best_d);
    if (p->pass) closest_in(p->pass, typed, &best, &best_d);
    return best && close_enough(best_d, n) ? best : NULL;
}

int tdm_flags_unknown(const tdm_flags *p, const char *name, size_t n, const char *where, tdm_error *err) {
    if (!where) where = "";
    for (const tdm_flags *q = p; q; q = q == p ? p->pass : NULL) {
        const tdm_flag *f = tdm_flags_find(q, name, n, NULL);
        if (f && f->kind == TDM_FLAG_REFUSED) return tdm_errorf(err, "%s--%s: %s", where, f->name, f->help);
    }
    if (p->unknown) {
        tdm_error own = {{0}};
        if (p->unknown(name, n, &own) != 0) return tdm_errorf(err, "%s%s", where, own.msg);
    }
    const char *s = tdm_flags_suggest(p, name, n);
    if (s) return tdm_errorf(err, "%sunknown flag '--%.*s'; did you mean '--%s'?", where, (int)n, name, s);
    return tdm_errorf(err, "%sunknown flag '--%.*s' (%s --help lists the flags)", where, (int)n, name,
                      p->command ? p->command : "--help");
}

/* ------------------------------------------------------------------ values */

static void *target_of(const tdm_flag *f, void *target) { return f->ptr ? f->ptr : (char *)target + f->off; }

static int *count_of(const tdm_flag *f, void *target) {
    return f->count_ptr ? f->count_ptr : (int *)(void *)((char *)target + f->count_off);
}

/* not hex: strtod would read "0x10" as 16 */
int tdm_flag_parse_int(const char *s, int64_t *out) {
    if (!*s || isspace((unsigned char)*s) || strpbrk(s, "xX")) return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) {
        double d = strtod(s, &end);
        if (*end || !isfinite(d) || d != floor(d) || fabs(d) > BIG) return -1;
        v = (long long)d;
    }
    *out = v;
    return 0;
}

static int parse_bool(const char *s, int *out) {
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "1")) return *out = 1, 0;
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "0")) return *out = 0, 0;
    return -1;
}

static int has_range(const tdm_flag *f) { return f->lo < f->hi; }

/* The index of val among f->choices ("a|b|c"), or -1. */
static int choice_index(const tdm_flag *f, const char *val) {
    size_t n = strlen(val);
    int k = 0;
    for (const char *c = f->choices ? f->choices : ""; *c; k++) {
        size_t len = strcspn(c, "|");
        if (len == n && !strncmp(c, val, n)) return k;
        c += len;
        if (*c == '|') c++;
    }
    return -1;
}

/* Longer than most: one case per kind, so that every sentence about a value is in one place.
 * Sets f from its text; a default (is_default) skips the range check: one outside it means "unset". */
static int set_value(const tdm_flag *f, void *target, const char *val, const char *what, int is_default,
                     tdm_error *err) {
    void *dst = f->kind == TDM_FLAG_LIST || f->kind == TDM_FLAG_CUSTOM ? NULL : target_of(f, target);
    switch (f->kind) {
    case TDM_FLAG_INT:
    case TDM_FLAG_I64: {
        int64_t v;
        if (tdm_flag_parse_int(val, &v) != 0) return tdm_errorf(err, "%s: expected an integer, got '%s'", what, val);
        double lo = has_range(f) ? f->lo : f->kind == TDM_FLAG_INT ? INT_MIN : -BIG;
        double hi = has_range(f) ? f->hi : f->kind == TDM_FLAG_INT ? INT_MAX : BIG;
        if (!is_default && ((double)v < lo || (double)v > hi))
            return tdm_errorf(err, "%s: %lld is out of range [%.0f, %.0f]", what, (long long)v, lo, hi);
        if (f->kind == TDM_FLAG_INT) *(int *)dst = (int)v;
        else *(int64_t *)dst = v;
        return 0;
    }
    case TDM_FLAG_U64: {
        errno = 0;
        char *end;
        if (!*val || *val == '-' || isspace((unsigned char)*val) || strpbrk(val, "xX"))
            return tdm_errorf(err, "%s: expected a non-negative integer, got '%s'", what, val);
        unsigned long long v = strtoull(val, &end, 10);
        if (errno || *end) { /* an integral value in exponent form (1e3), as the other integer flags take */
            double d = strtod(val, &end);
            if (*end || !isfinite(d) || d != floor(d) || d < 0 || d > BIG)
                return tdm_errorf(err, "%s: expected a non-negative integer, got '%s'", what, val);
            v = (unsigned long long)d;
        }
        if (!is_default && has_range(f) && ((double)v < f->lo || (double)v > f->hi))
            return tdm_errorf(err, "%s: %llu is out of range [%.0f, %.0f]", what, v, f->lo, f->hi);
        *(uint64_t *)dst = v;
        return 0;
    }
    case TDM_FLAG_DOUBLE: {
        errno = 0;
        char *end;
        double v = strtod(val, &end);
        if (!*val || *end || errno == ERANGE || !isfinite(v))
            return tdm_errorf(err, "%s: expected a number, got '%s'", what, val);
        if (!is_default && has_range(f) && (v < f->lo || v > f->hi))
            return tdm_errorf(err, "%s: %s is out of range [%g, %g]", what, val, f->lo, f->hi);
        *(double *)dst = v;
        return 0;
    }
    case TDM_FLAG_STRING:
    case TDM_FLAG_PATH:
    case TDM_FLAG_CHOICE: {
        size_t n = strlen(val);
        if (f->cap > 0 && n >= f->cap)
            return tdm_errorf(err, "%s: value is %zu bytes, longer than %zu", what, n, f->cap - 1);
        if (f->kind == TDM_FLAG_PATH && n == 0)
            return tdm_errorf(err, "%s: expected a path, got an empty string", what);
        int k = f->kind == TDM_FLAG_CHOICE ? choice_index(f, val) : 0;
        if (k < 0) return tdm_errorf(err, "%s: expected one of %s, got '%s'", what, f->choices, val);
        if (f->cap > 0) memcpy(dst, val, n + 1);
        else if (f->kind == TDM_FLAG_CHOICE) *(int *)dst = k;
        else *(const char **)dst = val;
        return 0;
    }
    case TDM_FLAG_BOOL: {
        int b;
        if (parse_bool(val, &b) != 0) return tdm_errorf(err, "%s: expected true or false, got '%s'", what, val);
        *(int *)dst = f->opts & TDM_FLAG_NEGATE ? !b : b;
        return 0;
    }
    case TDM_FLAG_LIST: {
        size_t n = strlen(val);
        if (n == 0) return tdm_errorf(err, "%s: expected a path, got an empty string", what);
        if (f->cap > 0 && n >= f->cap) return tdm_errorf(err, "%s: path is longer than %zu bytes", what, f->cap - 1);
        int *count = count_of(f, target);
        if (*count >= f->max) return tdm_errorf(err, "%s: more than %d values", what, f->max);
        char *items = target_of(f, target);
        if (f->cap > 0) memcpy(items + (size_t)*count * f->cap, val, n + 1);
        else ((const char **)(void *)items)[*count] = val;
        (*count)++;
        return 0;
    }
    case TDM_FLAG_CUSTOM: return f->set(f, target, val, what, err);
    case TDM_FLAG_FIXED: {
        if (!f->def) {
            int b;
            if (parse_bool(val, &b) != 0)
                return tdm_errorf(err, "%s: a switch, expected true or false, got '%s'", what, val);
            if (!b) return tdm_errorf(err, "%s: only true is accepted: tandem has no other way to run", what);
            return 0;
        }
        char *end;
        double v = strtod(val, &end);
        if (end == val || *end || v != strtod(f->def, NULL))
            return tdm_errorf(err, "%s %s: %s; only %s is accepted", what, val, f->help, f->def);
        return 0;
    }
    case TDM_FLAG_REFUSED: return tdm_errorf(err, "%s: %s", what, f->help);
    }
    return tdm_errorf(err, "%s: internal error: unknown flag kind", what);
}

int tdm_flag_set(const tdm_flag *f, void *target, const char *val, const char *what, tdm_error *err) {
    return set_value(f, target, val, what, 0, err);
}

void tdm_flags_defaults(const tdm_flags *p, void *target) {
    for (int t = 0; t < n_tables(p); t++) {
        tdm_flag_table tb = table_at(p, t);
        for (int i = 0; i < tb.n; i++) {
            const tdm_flag *f = &tb.flags[i];
            if (!f->def || f->kind == TDM_FLAG_FIXED || f->kind == TDM_FLAG_REFUSED) continue;
            if (f->kind == TDM_FLAG_LIST) *count_of(f, target) = 0;
            (void)set_value(f, target, f->def, "default", 1, NULL);
        }
    }
}

/* ------------------------------------------------------------------ argv */

static int is_help(const char *s) { return !strcmp(s, "--help") || !strcmp(s, "-h"); }

int tdm_flags_wants(const tdm_flags *p, int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (is_help(s)) return TDM_FLAGS_HELP;
        if (!strcmp(s, "--version")) return TDM_FLAGS_VERSION;
        if (strncmp(s, "--", 2) != 0 || strchr(s, '=')) continue;
        const char *implied;
        const tdm_flag *f = tdm_flags_find(p, s + 2, strlen(s + 2), &implied);
        if (!f && p->pass) f = tdm_flags_find(p->pass, s + 2, strlen(s + 2), &implied);
        if (f && takes_value(f, implied)) i++; /* its value, whatever it looks like */
    }
    return 0;
}

/* The value of argv[*i] (a flag named --name that takes one): after '=', else the next word. */
static int fetch_value(const tdm_flag *f, const char *eq, int argc, char **argv, int *i, const char **val,
                       tdm_error *err) {
    if (eq) {
        *val = eq + 1;
        return 0;
    }
    const char *meta = f->metavar ? f->metavar : "VALUE";
    if (*i + 1 >= argc) return tdm_errorf(err, "--%s: expected a value (%s) after it", f->name, meta);
    *val = argv[++*i];
    if (strncmp(*val, "--", 2) == 0 && !(f->opts & TDM_FLAG_DASHES))
        return tdm_errorf(err, "--%s: expected a value (%s), got the flag '%s'", f->name, meta, *val);
    return 0;
}

/* A FIXED flag on the command line: "--use-x", "--use-x=true", "--size 1". */
static int fixed_flag(const tdm_flag *f, const char *eq, int argc, char **argv, int *i, tdm_error *err) {
    if (!f->def) {
        int b = 1;
        if (eq && parse_bool(eq + 1, &b) != 0)
            return tdm_errorf(err, "--%s: a switch, expected true or false, got '%s'", f->name, eq + 1);
        if (!b) return tdm_errorf(err, "--%s=false: tandem has no other way to run", f->name);
        return 0;
    }
    const char *val = eq ? eq + 1 : (*i + 1 < argc ? argv[++*i] : NULL);
    char *end;
    double v = val ? strtod(val, &end) : 0;
    if (!val || end == val || *end || v != strtod(f->def, NULL))
        return tdm_errorf(err, "--%s %s: %s; only %s is accepted", f->name, val ? val : "(no value)", f->help, f->def);
    return 0;
}

static int n_all_flags(const tdm_flags *p) {
    int n = 0;
    for (int t = 0; t < n_tables(p); t++) n += table_at(p, t).n;
    return n;
}

static int positional(const tdm_flags *p, void *target, const char *s, int *n_pos, tdm_error *err) {
    const tdm_positional *last = p->n_pos > 0 ? &p->pos[p->n_pos - 1] : NULL;
    if (s[0] != '-' && last && last->many && *n_pos >= p->n_pos - 1) { /* RUN...: every further word */
        const char **words = *(const char ***)(void *)((char *)target + last->off);
        int *count = (int *)(void *)((char *)target + last->count_off);
        words[(*count)++] = s;
        *n_pos = p->n_pos;
        return 0;
    }
    if (s[0] != '-' && *n_pos < p->n_pos) {
        const tdm_positional *ps = &p->pos[(*n_pos)++];
        *(ps->ptr ? ps->ptr : (const char **)(void *)((char *)target + ps->off)) = s;
        return 0;
    }
    if (s[0] != '-' && p->n_pos > 0)
        return tdm_errorf(err, "unexpected argument '%s' (%s is given already; flags start with --)", s,
                          p->pos[p->n_pos - 1].metavar);
    return tdm_errorf(err, "unexpected argument '%s' (flags start with --)", s);
}

int tdm_flags_parse(const tdm_flags *p, void *target, int argc, char **argv, char **rest, int *n_rest, tdm_error *err) {
    int wants = tdm_flags_wants(p, argc, argv);
    if (wants) return wants;
    if (n_rest) *n_rest = 0;
    unsigned char *seen = tdm_xcalloc((size_t)n_all_flags(p) + 1, 1);
    int rc = -1, n_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (strncmp(s, "--", 2) != 0 || s[2] == 0) {
            if (positional(p, target, s, &n_pos, err) != 0) goto out;
            continue;
        }
        const char *name = s + 2, *eq = strchr(name, '='), *implied, *val;
        size_t n = eq ? (size_t)(eq - name) : strlen(name);
        int index;
        const tdm_flag *f = find_indexed(p, name, n, &implied, &index);
        if (!f && p->pass) {
            /* another command's flag: handed on with its value, refused now only when it always is */
            const tdm_flag *g = tdm_flags_find(p->pass, name, n, &implied);
            if (g && g->kind == TDM_FLAG_REFUSED) {
                tdm_errorf(err, "--%s: %s", g->name, g->help);
                goto out;
            }
            if (g) {
                if (rest) rest[(*n_rest)++] = (char *)s;
                if (takes_value(g, implied) && !eq) {
                    if (fetch_value(g, eq, argc, argv, &i, &val, err) != 0) goto out;
                    if (rest) rest[(*n_rest)++] = (char *)val;
                }
                continue;
            }
        }
        if (!f) {
            tdm_flags_unknown(p, name, n, "", err);
            goto out;
        }
        if (implied && eq) {
            tdm_errorf(err, "--%.*s: a switch, it takes no value", (int)n, name);
            goto out;
        }
        if (f->kind == TDM_FLAG_REFUSED) {
            tdm_errorf(err, "--%s: %s", f->name, f->help);
            goto out;
        }
        if (f->kind == TDM_FLAG_FIXED) {
            if (fixed_flag(f, eq, argc, argv, &i, err) != 0) goto out;
            continue;
        }
        if (implied) val = implied;
        else if (!takes_value(f, NULL)) val = eq ? eq + 1 : "true";
        else if (fetch_value(f, eq, argc, argv, &i, &val, err) != 0) goto out;
        if (seen[index] && (p->opts & TDM_FLAGS_ONCE) && f->kind != TDM_FLAG_LIST && takes_value(f, implied)) {
            tdm_errorf(err, "--%s given twice (it takes one value)", f->name);
            goto out;
        }
        if (f->kind == TDM_FLAG_LIST && !seen[index]) *count_of(f, target) = 0; /* replaces the list held before */
        seen[index] = 1;
        char what[160];
        snprintf(what, sizeof what, "--%s", f->name);
        if (set_value(f, target, val, what, 0, err) != 0) goto out;
        if (f->kind == TDM_FLAG_LIST && (f->opts & TDM_FLAG_MANY))
            while (i + 1 < argc && argv[i + 1][0] != '-')
                if (set_value(f, target, argv[++i], what, 0, err) != 0) goto out;
    }
    if (n_pos < p->min_pos) {
        tdm_errorf(err, "expected %s (%s --help)", p->pos[n_pos].metavar, p->command ? p->command : "");
        goto out;
    }
    rc = 0;
out:
    free(seen);
    return rc;
}

/* ------------------------------------------------------------------ --help */

/* Appends text wrapped to HELP_WIDTH columns, continuation lines indented by `indent`, starting at column
 * `col`; ends the line. */
static void wrap(tdm_strbuf *sb, const char *text, size_t col, size_t indent) {
    const char *p = text;
    int first = 1;
    while (*p) {
        while (*p == ' ') p++;
        size_t w = strcspn(p, " ");
        if (!w) break;
        if (!first && col + 1 + w > HELP_WIDTH) {
            tdm_sb_putc(sb, '\n');
            for (size_t k = 0; k < indent; k++) tdm_sb_putc(sb, ' ');
            col = indent;
            first = 1;
        }
        if (!first) tdm_sb_putc(sb, ' '), col++;
        tdm_sb_append(sb, p, w);
        col += w;
        p += w;
        first = 0;
    }
    tdm_sb_putc(sb, '\n');
}

/* The default as --help shows it, or NULL: none for switches, lists and values outside the range. */
static const char *shown_default(const tdm_flag *f) {
    if (!f->def || f->kind == TDM_FLAG_BOOL || f->kind == TDM_FLAG_LIST || f->kind == TDM_FLAG_CUSTOM) return NULL;
    if (f->kind == TDM_FLAG_INT || f->kind == TDM_FLAG_I64 || f->kind == TDM_FLAG_U64 || f->kind == TDM_FLAG_DOUBLE) {
        double v = strtod(f->def, NULL);
        if (has_range(f) && (v < f->lo || v > f->hi)) return NULL;
    }
    return f->def;
}

static void entry(tdm_strbuf *sb, const char *left, const char *help, const char *def) {
    tdm_strbuf text;
    tdm_sb_init(&text);
    tdm_sb_puts(&text, help ? help : "");
    if (def) tdm_sb_printf(&text, " (default %s)", def);
    size_t indent = 2 + HELP_LEFT + 1;
    if (strlen(left) > HELP_LEFT) {
        tdm_sb_printf(sb, "  %s\n%*s", left, (int)indent, "");
    } else {
        tdm_sb_printf(sb, "  %-*s ", HELP_LEFT, left);
    }
    wrap(sb, text.data ? text.data : "", indent, indent);
    tdm_sb_free(&text);
}

void tdm_flags_format_flags(const tdm_flags *p, tdm_strbuf *sb) {
    const char *group = NULL;
    int any = 0;
    for (int t = 0; t < n_tables(p); t++) {
        tdm_flag_table tb = table_at(p, t);
        for (int i = 0; i < tb.n; i++) {
            const tdm_flag *f = &tb.flags[i];
            if (!visible(f)) continue;
            if (f->group && (!group || strcmp(group, f->group) != 0)) {
                group = f->group;
                tdm_sb_printf(sb, "%s%s:\n", any ? "\n" : "", group);
            }
            char left[160];
            snprintf(left, sizeof left, "--%s%s%s", f->name, takes_value(f, NULL) ? " " : "",
                     takes_value(f, NULL) ? (f->metavar ? f->metavar : "VALUE") : "");
            entry(sb, left, f->help, shown_default(f));
            any = 1;
        }
    }
}

void tdm_flags_format_help(const tdm_flags *p, tdm_strbuf *sb) {
    tdm_sb_printf(sb, "usage: %s\n", p->usage ? p->usage : p->command);
    if (p->about) tdm_sb_printf(sb, "%s\n", p->about);
    tdm_sb_putc(sb, '\n');
    for (int i = 0; i < p->n_pos; i++) entry(sb, p->pos[i].metavar, p->pos[i].help, NULL);
    tdm_flags_format_flags(p, sb);
    if (p->epilog) tdm_sb_printf(sb, "\n%s", p->epilog);
}
