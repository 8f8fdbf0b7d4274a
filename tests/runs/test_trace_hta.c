/* test_trace_hta.c - PyTorch profiler traces from Holistic Trace Analysis' own test data,
 * against the figures HTA's code computes (../shared/fixtures/expected.json): whole-trace
 * overlap and temporal breakdown within 0.01 points, steps and communication kernels exact,
 * with HTA's defaults, with the last step kept, and without rounding; and what the fixtures'
 * README says a reader must find in each trace. */
#include <math.h>
#include <string.h>

#include "core/fs.h"
#include "core/json.h"
#include "fixtures.h"
#include "harness.h"
#include "runs/analyze.h"
#include "runs/trace.h"

static tdm_json_doc *expected;

static const tdm_json *ex(const char *trace, const char *block) {
    return tdm_json_get(tdm_json_get(tdm_json_get(tdm_json_root(expected), "traces"), trace), block);
}

static double exnum(const tdm_json *b, const char *key) {
    const tdm_json *v = tdm_json_get(b, key);
    return v && v->type == TDM_JSON_NUMBER ? v->num : NAN;
}

static int read_one(const char *rel, tdm_runs_set *s) {
    char path[1024];
    fixture(path, sizeof path, rel);
    tdm_error err;
    tdm_runs_set_init(s);
    int rc = tdm_runs_read(s, path, &err);
    CHECK(rc == 0, "%s", err.msg);
    CHECK(rc != 0 || s->n == 1, "%s: %d traces", rel, s->n);
    return rc == 0 && s->n == 1;
}

/* setting: 0 default, 1 last step kept, 2 default without rounding, 3 last kept without rounding */
static void check_block(const char *rel, const tdm_runs_trace *t, const tdm_runs_hta *h, const char *block) {
    const tdm_json *b = ex(rel, block);
    if (!b) return;
    CHECK(h->applicable, "%s %s: not applicable", rel, block);
    CHECK_NEAR(h->overlap_pct, exnum(b, "comp_comm_overlap_pctg"), 0.01);
    CHECK_NEAR(h->idle_pct, exnum(b, "idle_time_pctg"), 0.01);
    CHECK_NEAR(h->compute_pct, exnum(b, "compute_time_pctg"), 0.01);
    CHECK_NEAR(h->non_compute_pct, exnum(b, "non_compute_time_pctg"), 0.01);
    CHECK(h->n_comm_kernels == (int64_t)exnum(b, "comm_kernel_count"), "%s %s: %lld comm kernels, HTA %g", rel, block,
          (long long)h->n_comm_kernels, exnum(b, "comm_kernel_count"));
    CHECK(h->n_steps == (int64_t)exnum(b, "num_steps_analysed"), "%s %s: %lld steps, HTA %g", rel, block,
          (long long)h->n_steps, exnum(b, "num_steps_analysed"));
    if (h->round_ns) { /* integer µs once rounded: HTA's microsecond figures exactly */
        CHECK_NEAR(h->overlap_us, exnum(b, "overlap_us"), 1e-6);
        CHECK_NEAR(h->comm_us, exnum(b, "comm_union_us"), 1e-6);
        CHECK_NEAR(h->idle_us, exnum(b, "idle_time_us"), 1e-6);
        CHECK_NEAR(h->compute_us, exnum(b, "compute_time_us"), 1e-6);
        CHECK_NEAR(h->span_us, exnum(b, "kernel_time_us"), 1e-6);
    }
    const tdm_json *names = tdm_json_get(b, "comm_kernels_by_name");
    for (size_t i = 0; names && i < names->len; i++) {
        int64_t got = 0;
        for (int k = 0; k < h->n_comm_names; k++)
            if (!strncmp(t->names[h->comm_name[k]], names->keys[i], strlen(names->keys[i]))) got += h->comm_name_count[k];
        CHECK(got == (int64_t)names->items[i]->num, "%s %s: %s: %lld, HTA %g", rel, block, names->keys[i],
              (long long)got, names->items[i]->num);
    }
}

static void check_trace(const char *rel) {
    tdm_runs_set s;
    if (!read_one(rel, &s)) {
        tdm_runs_set_free(&s);
        return;
    }
    const tdm_runs_trace *t = s.traces[0];
    const tdm_json *steps = tdm_json_get(tdm_json_get(tdm_json_get(tdm_json_root(expected), "traces"), rel),
                                         "steps_in_trace");
    CHECK(steps && t->n_steps == (int64_t)steps->len, "%s: %lld steps", rel, (long long)t->n_steps);
    for (size_t i = 0; steps && i < steps->len && (int64_t)i < t->n_steps; i++)
        CHECK(t->steps[i].number == (int64_t)steps->items[i]->num, "%s: step %zu is %lld", rel, i,
              (long long)t->steps[i].number);
    CHECK(t->rank == (int64_t)exnum(tdm_json_get(tdm_json_get(tdm_json_root(expected), "traces"), rel), "rank"),
          "%s: rank %lld", rel, (long long)t->rank);
    tdm_runs_analysis a;
    tdm_runs_analyze(&s, &a);
    const char *blocks[4] = {"hta_default", "hta_include_last_profiler_step", "hta_no_ns_rounding",
                             "hta_include_last_profiler_step_no_ns_rounding"};
    for (int h = 0; h < 4; h++) check_block(rel, t, &a.ranks[0].hta[h], blocks[h]);
    tdm_runs_analysis_free(&a);
    tdm_runs_set_free(&s);
}

static void test_nccl_data(void) { check_trace("hta/nccl_parser_config/nccl_data.json.gz"); }
static void test_trace_diff_control(void) { check_trace("hta/trace_diff/control/control.json.gz"); }
static void test_trace_diff_test(void) { check_trace("hta/trace_diff/test/test.json.gz"); }

int main(void) {
    char path[1024];
    if (!fixture(path, sizeof path, "expected.json")) {
        printf("skipped: %s not found (the real-world fixtures are read in place)\n", path);
        printf("0 passed, 0 failed\n");
        return 0;
    }
    size_t len;
    tdm_error err;
    char *text = tdm_read_file(path, 1 << 24, &len, &err);
    expected = text ? tdm_json_parse(text, len, path, &err) : NULL;
    free(text);
    if (!expected) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    RUN(test_nccl_data);
    RUN(test_trace_diff_control);
    RUN(test_trace_diff_test);
    tdm_json_free(expected);
    return TEST_SUMMARY();
}
