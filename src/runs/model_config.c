/* model_config.c - a Megatron-LM test case's model_config.yaml (golden.h). Only the shape those
 * files have is read: top-level keys, and under MODEL_ARGS and ENV_VARS one "key: value" per
 * indented line, with "# comments" and optional quotes. Other sections are skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runs/golden.h"

static void trim(const char **s, size_t *n) {
    while (*n && (**s == ' ' || **s == '\t')) (*s)++, (*n)--;
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t' || (*s)[*n - 1] == '\r')) (*n)--;
}

static void unquote(const char **s, size_t *n) {
    if (*n >= 2 && ((**s == '"' && (*s)[*n - 1] == '"') || (**s == '\'' && (*s)[*n - 1] == '\''))) (*s)++, *n -= 2;
}

/* The line without a comment: '#' at its start or after a blank, outside quotes. */
static size_t uncommented(const char *s, size_t n) {
    char quote = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (quote) {
            if (c == quote) quote = 0;
        } else if (c == '"' || c == '\'') {
            if (i == 0 || s[i - 1] == ' ' || s[i - 1] == ':') quote = c;
        } else if (c == '#' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) {
            return i;
        }
    }
    return n;
}

int tdm_run_model_config_read_mem(const char *text, size_t len, const char *name, tdm_run_log *run, tdm_error *err) {
    enum { NONE, ARGS, ENV } section = NONE;
    int line_no = 0, have_args = 0;
    for (const char *p = text, *end = text + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        const char *s = p;
        p += n + 1;
        line_no++;
        n = uncommented(s, n);
        size_t indent = 0;
        while (indent < n && (s[indent] == ' ' || s[indent] == '\t')) indent++;
        trim(&s, &n);
        if (!n || (n == 3 && !memcmp(s, "---", 3))) continue;
        const char *colon = NULL;
        for (size_t i = 0; i < n && !colon; i++)
            if (s[i] == ':' && (i + 1 == n || s[i + 1] == ' ' || s[i + 1] == '\t')) colon = s + i;
        if (indent == 0) {
            if (!colon)
                return tdm_errorf(err,
                                  "%s:%d: expected a top-level \"KEY:\" (a Megatron test case's model_config.yaml)",
                                  name, line_no);
            size_t kn = (size_t)(colon - s), vn = n - kn - 1;
            const char *v = colon + 1;
            trim(&v, &vn);
            section = NONE;
            if (!vn && kn == 10 && !memcmp(s, "MODEL_ARGS", 10)) section = ARGS, have_args = 1;
            else if (!vn && kn == 8 && !memcmp(s, "ENV_VARS", 8)) section = ENV;
            continue;
        }
        if (section == NONE) continue;
        if (s[0] == '-' && (n == 1 || s[1] == ' '))
            return tdm_errorf(err, "%s:%d: a list item under %s: expected \"key: value\" lines", name, line_no,
                              section == ARGS ? "MODEL_ARGS" : "ENV_VARS");
        if (!colon) return tdm_errorf(err, "%s:%d: expected \"key: value\"", name, line_no);
        const char *k = s, *v = colon + 1;
        size_t kn = (size_t)(colon - s), vn = n - kn - 1;
        trim(&k, &kn);
        trim(&v, &vn);
        unquote(&k, &kn);
        unquote(&v, &vn);
        if (!kn) return tdm_errorf(err, "%s:%d: an empty key", name, line_no);
        if (section == ARGS) tdm_run_add_kv(&run->args, &run->n_args, k, kn, v, vn);
        else tdm_run_add_kv(&run->env, &run->n_env, k, kn, v, vn);
    }
    if (!have_args) tdm_run_warn(run, "%s has no MODEL_ARGS: its arguments are unknown", name);
    const char *gbs = tdm_run_log_arg(run, "global_batch_size"), *iters = tdm_run_log_arg(run, "train_iters");
    char *e;
    long long g = gbs ? strtoll(gbs, &e, 10) : 0;
    if (gbs && (*e || g < 1)) g = 0;
    for (int64_t i = 0; g > 0 && i < run->n_iters; i++)
        if (!run->iters[i].global_batch) run->iters[i].global_batch = g;
    long long t = iters ? strtoll(iters, &e, 10) : 0;
    if (iters && !*e && t > 0) run->train_iters = t;
    return 0;
}
