/* golden.c - Megatron-LM golden values and MindSpeed-MM baselines (golden.h). */
#include "runs/golden.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/json.h"

/* Both formats are small (a few kB upstream); a larger file is not one of them. */
#define MAX_JSON_BYTES ((size_t)64 << 20)
#define MAX_STEP       1000000000LL

/* The fewest decimals (fixed) or significant digits (exponent form) that print v back exactly. */
static tdm_run_prec shortest(double v, int sig) {
    if (!isfinite(v)) return 0;
    char buf[64];
    for (int d = sig ? 1 : 0; d <= 17; d++) {
        if (sig) snprintf(buf, sizeof buf, "%.*e", d - 1, v);
        else snprintf(buf, sizeof buf, "%.*f", d, v);
        if (strtod(buf, NULL) == v) return (tdm_run_prec)((sig ? TDM_RUN_PREC_SIG : TDM_RUN_PREC_DEC) | d);
    }
    return (tdm_run_prec)((sig ? TDM_RUN_PREC_SIG : TDM_RUN_PREC_DEC) | 17);
}

static tdm_run_prec finer(tdm_run_prec a, tdm_run_prec b) {
    return TDM_RUN_PREC_DIGITS(a) >= TDM_RUN_PREC_DIGITS(b) ? a : b;
}

enum metric { M_LOSS, M_OTHER_LOSS, M_TIME, M_ZEROS, M_IGNORED };

static enum metric metric_kind(const char *name) {
    if (!strcmp(name, "lm loss")) return M_LOSS;
    if (!strcmp(name, "iteration-time") || !strcmp(name, "iteration_time")) return M_TIME;
    if (!strcmp(name, "num-zeros") || !strcmp(name, "num_zeros")) return M_ZEROS;
    if (strstr(name, "loss") && !strstr(name, "scale")) return M_OTHER_LOSS;
    return M_IGNORED;
}

/* A metric's step key as a number; 0 when it is not a step. */
static long long step_of(const char *key) {
    char *end;
    long long step = strtoll(key, &end, 10);
    return end == key || *end || step < 1 || step > MAX_STEP ? 0 : step;
}

static int golden(const tdm_json *root, const char *name, tdm_run_log *run, tdm_error *err) {
    run->format = TDM_RUN_MEGATRON_GOLDEN;
    char kept[256] = "", ignored[256] = "";
    tdm_run_prec loss_prec = 0;
    enum metric kinds[64];
    int others[64];
    size_t n_metrics = root->len < 64 ? root->len : 64;
    /* first the steps of every metric, as records in order; then each value into its record */
    for (int phase = 0; phase < 2; phase++) {
        for (size_t m = 0; m < n_metrics; m++) {
            const char *metric = root->keys[m];
            const tdm_json *obj = root->items[m], *values = tdm_json_get(obj, "values");
            if (phase == 0) {
                if (!values || values->type != TDM_JSON_OBJECT)
                    return tdm_errorf(err,
                                      "%s: metric \"%.80s\": expected {\"start_step\", \"end_step\", "
                                      "\"step_interval\", \"values\": {\"step\": value}}",
                                      name, metric);
                kinds[m] = metric_kind(metric);
                others[m] = -1;
                if (kinds[m] == M_OTHER_LOSS && (others[m] = tdm_run_loss_index(run, metric, strlen(metric))) < 0)
                    kinds[m] = M_IGNORED;
                char *list = kinds[m] == M_IGNORED ? ignored : kept;
                size_t l = strlen(list);
                if (l < 200) snprintf(list + l, 256 - l, "%s\"%.60s\"", l ? ", " : "", metric);
            }
            if (kinds[m] == M_IGNORED) continue;
            for (size_t i = 0; i < values->len; i++) {
                long long step = step_of(values->keys[i]);
                if (!step)
                    return tdm_errorf(err, "%s: metric \"%.80s\": step \"%.40s\" is not a positive integer", name,
                                      metric, values->keys[i]);
                const tdm_json *v = values->items[i];
                double x;
                if (v->type == TDM_JSON_NUMBER) x = v->num;
                else if (v->type == TDM_JSON_NULL ||
                         (v->type == TDM_JSON_STRING && (!strcmp(v->str, "nan") || !strcmp(v->str, "NaN"))))
                    x = NAN;
                else
                    return tdm_errorf(err, "%s: metric \"%.80s\", step %lld: expected a number or \"nan\", found %s",
                                      name, metric, step, tdm_json_type_name(v->type));
                if (phase == 0) {
                    tdm_run_iter e = tdm_run_iter_empty(step); /* each value is one step's (Megatron logs every
                                                                  step; the file keeps some) */
                    if (tdm_run_append_iter(run, &e, err) != 0) return -1;
                    continue;
                }
                tdm_run_iter *r = tdm_run_find_iter(run, step);
                switch (kinds[m]) {
                case M_LOSS:
                    r->lm_loss = x;
                    loss_prec = finer(loss_prec, shortest(x, 0));
                    break;
                case M_OTHER_LOSS: r->other_loss[others[m]] = x; break;
                case M_TIME: r->elapsed_ms = x * 1e3; break; /* seconds */
                case M_ZEROS: r->num_zeros = x; break;
                case M_IGNORED: break;
                }
            }
        }
        if (phase == 0) tdm_run_sort_iters(run);
    }
    if (root->len > n_metrics) tdm_run_warn(run, "more than 64 metrics: the others are not read");
    if (run->n_iters == 0) return tdm_errorf(err, "%s: golden values without any step", name);
    for (int64_t i = 0; i < run->n_iters; i++) run->iters[i].loss_prec = isnan(run->iters[i].lm_loss) ? 0 : loss_prec;
    snprintf(run->source, sizeof run->source, "Megatron-LM golden values, steps %lld-%lld (%lld logged): %s%s%s",
             (long long)run->iters[0].iteration, (long long)run->iters[run->n_iters - 1].iteration,
             (long long)run->n_iters, kept[0] ? kept : "no metric kept", ignored[0] ? "; not used: " : "", ignored);
    return 0;
}

static int baseline(const tdm_json *root, const char *name, tdm_run_log *run, tdm_error *err) {
    run->format = TDM_RUN_MINDSPEED_BASELINE;
    const tdm_json *loss = tdm_json_get(root, "loss"), *time = tdm_json_get(root, "time");
    const char *keys[2] = {"loss", "time"};
    const tdm_json *lists[2] = {loss, time};
    for (int k = 0; k < 2; k++)
        if (lists[k] && lists[k]->type != TDM_JSON_ARRAY)
            return tdm_errorf(err, "%s: \"%s\" is %s: expected an array of numbers, one per step", name, keys[k],
                              tdm_json_type_name(lists[k]->type));
    size_t n = 0;
    for (int k = 0; k < 2; k++)
        if (lists[k] && lists[k]->len > n) n = lists[k]->len;
    if (n == 0) return tdm_errorf(err, "%s: a MindSpeed baseline with no step in \"loss\" or \"time\"", name);
    if (n > (size_t)MAX_STEP) return tdm_errorf(err, "%s: too many steps", name);
    tdm_run_prec prec = 0;
    for (size_t i = 0; i < n; i++) {
        tdm_run_iter x = tdm_run_iter_empty((int64_t)i + 1);
        for (int k = 0; k < 2; k++) {
            const tdm_json *v = lists[k] ? tdm_json_at(lists[k], i) : NULL;
            if (!v) continue;
            if (v->type != TDM_JSON_NUMBER && v->type != TDM_JSON_NULL)
                return tdm_errorf(err, "%s: \"%s\"[%zu] is %s: expected a number", name, keys[k], i,
                                  tdm_json_type_name(v->type));
            double d = v->type == TDM_JSON_NUMBER ? v->num : NAN;
            if (k == 0) x.lm_loss = d, prec = finer(prec, shortest(d, 1));
            else x.elapsed_ms = d;
        }
        if (tdm_run_append_iter(run, &x, err) != 0) return -1;
    }
    for (int64_t i = 0; i < run->n_iters; i++) run->iters[i].loss_prec = isnan(run->iters[i].lm_loss) ? 0 : prec;
    const tdm_json *w = tdm_json_get(root, "warm_up");
    if (w) {
        if (w->type != TDM_JSON_NUMBER || !w->is_int || w->i64 < 0 || w->i64 > MAX_STEP)
            return tdm_errorf(err, "%s: \"warm_up\" must be a number of steps", name);
        run->warm_up = w->i64;
    }
    snprintf(run->source, sizeof run->source, "MindSpeed-MM baseline, %zu steps (loss %zu, time %zu)%s", n,
             loss ? loss->len : 0, time ? time->len : 0, w ? ", warm_up given" : "");
    return 0;
}

int tdm_run_json_read_mem(const char *text, size_t len, const char *name, tdm_run_log *run, tdm_error *err) {
    tdm_run_log_init(run);
    snprintf(run->path, sizeof run->path, "%s", name);
    tdm_json_doc *d = tdm_json_parse(text, len, name, err);
    if (!d) return -1;
    const tdm_json *root = tdm_json_root(d);
    int rc;
    int is_golden = root->type == TDM_JSON_OBJECT && root->len > 0;
    for (size_t i = 0; is_golden && i < root->len; i++)
        if (root->items[i]->type != TDM_JSON_OBJECT || !tdm_json_get(root->items[i], "values")) is_golden = 0;
    if (is_golden) rc = golden(root, name, run, err);
    else if (root->type == TDM_JSON_OBJECT && (tdm_json_get(root, "loss") || tdm_json_get(root, "time")))
        rc = baseline(root, name, run, err);
    else
        rc = tdm_errorf(err,
                        "%s: JSON, but neither Megatron-LM golden values ({\"lm loss\": {\"values\": {...}}, "
                        "...}) nor a MindSpeed-MM baseline ({\"loss\": [...], \"time\": [...]})",
                        name);
    tdm_json_free(d);
    return rc;
}

int tdm_run_json_read_file(const char *path, tdm_run_log *run, tdm_error *err) {
    size_t len;
    char *text = tdm_read_file(path, MAX_JSON_BYTES, &len, err);
    if (!text) {
        tdm_run_log_init(run);
        return -1;
    }
    int rc = tdm_run_json_read_mem(text, len, path, run, err);
    free(text);
    run->bytes = (int64_t)len;
    if (rc != 0 || run->format != TDM_RUN_MEGATRON_GOLDEN) return rc;
    /* the test case's model_config.yaml beside it: the arguments, the batch, the iterations */
    char dir[1024], yaml[1100];
    tdm_dirname(path, dir, sizeof dir);
    snprintf(yaml, sizeof yaml, "%s/model_config.yaml", dir);
    if (!tdm_file_exists(yaml)) {
        tdm_run_warn(run, "no model_config.yaml beside it: its arguments are unknown");
        return 0;
    }
    text = tdm_read_file(yaml, MAX_JSON_BYTES, &len, err);
    if (!text) return -1;
    rc = tdm_run_model_config_read_mem(text, len, yaml, run, err);
    free(text);
    return rc;
}
