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
    fixture_path(path, sizeof path, rel);
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
            if (!strncmp(t->names[h->comm_name[k]], names->keys[i], strlen(names->keys[i])))
                got += h->comm_name_count[k];
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
    const tdm_json *steps =
        tdm_json_get(tdm_json_get(tdm_json_get(tdm_json_root(expected), "traces"), rel), "steps_in_trace");
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

/* Communication kernels per step (by their launch) and of one kind. */
static void count_colls(const tdm_runs_trace *t, int64_t step, int kind, int64_t *n, int64_t *bytes) {
    *n = 0, *bytes = 0;
    for (int64_t i = 0; i < t->n_colls; i++) {
        const tdm_runs_coll *c = &t->colls[i];
        if (c->step != step || c->kind != kind) continue;
        (*n)++;
        *bytes += c->bytes;
    }
}

static int has_note(const tdm_runs_trace *t, const char *needle) {
    for (int i = 0; i < t->n_notes; i++)
        if (strstr(t->notes[i], needle)) return 1;
    return 0;
}

/* README: float µs with a ns fraction, displayTimeUnit "ms" that lies, 21 NCCL kernels on
 * stream 40, per step 2 broadcasts (53120 Float + 53 Long) then 5 gradient buckets of
 * 25557032 Float elements in all, group size 2. */
static void test_nccl_data_content(void) {
    tdm_runs_set s;
    if (!read_one("hta/nccl_parser_config/nccl_data.json.gz", &s)) goto out;
    const tdm_runs_trace *t = s.traces[0];
    CHECK(t->ts_float, "float timestamps not seen");
    CHECK(has_note(t, "displayTimeUnit \"ms\""), "no note on displayTimeUnit");
    CHECK(t->world_size == 2 && !strcmp(t->backend, "nccl"), "world %lld backend %s", (long long)t->world_size,
          t->backend);
    CHECK(t->n_colls == 21, "%lld collectives", (long long)t->n_colls);
    int64_t on40 = 0, compute7 = 0, compute = 0;
    for (int64_t i = 0; i < t->n_colls; i++) on40 += t->spans[t->colls[i].span].lane == 40;
    for (int64_t i = 0; i < t->n_spans; i++)
        if (t->spans[i].flags & TDM_RUNS_F_DEVICE && t->spans[i].kind == TDM_RUNS_COMPUTE)
            compute++, compute7 += t->spans[i].lane == 7;
    CHECK(on40 == 21, "%lld NCCL kernels on stream 40", (long long)on40);
    CHECK(compute > 0 && compute7 == compute, "%lld of %lld compute kernels on stream 7", (long long)compute7,
          (long long)compute);
    for (int64_t k = 0; k < t->n_steps; k++) {
        int64_t n, b;
        count_colls(t, k, TDM_RUNS_BROADCAST, &n, &b);
        CHECK(n == 2 && b == 53120 * 4 + 53 * 8, "step %lld: %lld broadcasts of %lld bytes", (long long)k, (long long)n,
              (long long)b);
        count_colls(t, k, TDM_RUNS_ALL_REDUCE, &n, &b);
        CHECK(n == 5 && b == 25557032LL * 4, "step %lld: %lld all-reduces of %lld bytes", (long long)k, (long long)n,
              (long long)b);
    }
    for (int64_t i = 0; i < t->n_colls; i++) {
        CHECK(t->colls[i].group_size == 2, "group size %d", t->colls[i].group_size);
        CHECK(isfinite(t->colls[i].launch_ts) && t->colls[i].launch_ts <= t->colls[i].ts, "launch not found");
    }
out:
    tdm_runs_set_free(&s);
}

/* README: 60 NCCL kernels on stream 21, per step 7 SendRecv that the CPU calls nccl:all_to_all
 * and 3 all-reduces. */
static void test_control_content(void) {
    tdm_runs_set s;
    if (!read_one("hta/trace_diff/control/control.json.gz", &s)) goto out;
    const tdm_runs_trace *t = s.traces[0];
    CHECK(t->n_colls == 60, "%lld collectives", (long long)t->n_colls);
    for (int64_t k = 0; k < t->n_steps; k++) {
        int64_t n, b;
        count_colls(t, k, TDM_RUNS_ALL_TO_ALL, &n, &b);
        CHECK(n == 7, "step %lld: %lld all-to-all", (long long)k, (long long)n);
        count_colls(t, k, TDM_RUNS_ALL_REDUCE, &n, &b);
        CHECK(n == 3, "step %lld: %lld all-reduces", (long long)k, (long long)n);
    }
    for (int64_t i = 0; i < t->n_colls; i++) CHECK(t->spans[t->colls[i].span].lane == 21, "stream");
out:
    tdm_runs_set_free(&s);
}

/* README: the GPU lags the CPU: by GPU time the steps would hold 10, 10, 14, 6, 10, 14 NCCL
 * kernels; by their launch each holds its 10, and 4 were launched after the last step. */
static void test_test_attributed_by_launch(void) {
    tdm_runs_set s;
    if (!read_one("hta/trace_diff/test/test.json.gz", &s)) goto out;
    const tdm_runs_trace *t = s.traces[0];
    CHECK(t->n_colls == 64, "%lld collectives", (long long)t->n_colls);
    int64_t outside = 0;
    for (int64_t i = 0; i < t->n_colls; i++) outside += t->colls[i].step < 0;
    CHECK(outside == 4, "%lld kernels outside the steps", (long long)outside);
    for (int64_t k = 0; k < t->n_steps; k++) {
        int64_t a, r, b;
        count_colls(t, k, TDM_RUNS_ALL_TO_ALL, &a, &b);
        count_colls(t, k, TDM_RUNS_ALL_REDUCE, &r, &b);
        CHECK(a == 7 && r == 3, "step %lld: %lld all-to-all, %lld all-reduce", (long long)k, (long long)a,
              (long long)r);
    }
out:
    tdm_runs_set_free(&s);
}

/* The traces whose oracle figures are held back: read and analysed, sensibly. */
static void test_other_hta_traces(void) {
    const char *rel[] = {"hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz",
                         "hta/negative_queue_length_values_check/rank0.json.gz"};
    for (int i = 0; i < 3; i++) {
        tdm_runs_set s;
        if (!read_one(rel[i], &s)) {
            tdm_runs_set_free(&s);
            continue;
        }
        const tdm_runs_trace *t = s.traces[0];
        tdm_runs_analysis a;
        tdm_runs_analyze(&s, &a);
        CHECK(t->n_steps >= 2 && t->n_colls > 0, "%s: %lld steps, %lld collectives", rel[i], (long long)t->n_steps,
              (long long)t->n_colls);
        for (int h = 0; h < 4; h++) {
            const tdm_runs_hta *x = &a.ranks[0].hta[h];
            CHECK(x->applicable && x->overlap_pct >= 0 && x->overlap_pct <= 100, "%s: overlap %g", rel[i],
                  x->overlap_pct);
            CHECK_NEAR(x->idle_pct + x->compute_pct + x->non_compute_pct, 100, 1e-6);
            CHECK(x->n_comm_kernels > 0, "%s: no communication kernel", rel[i]);
        }
        CHECK(a.ranks[0].hta[1].n_comm_kernels >= a.ranks[0].hta[0].n_comm_kernels,
              "keeping the last step drops kernels");
        for (int64_t k = 0; k < a.ranks[0].n_steps; k++) {
            const tdm_runs_step_stats *st = &a.ranks[0].steps[k];
            CHECK(st->hidden_us <= st->comm_us + 1e-9 && st->exposed_us >= -1e-9, "%s step %lld", rel[i], (long long)k);
        }
        if (i == 2)
            CHECK(has_note(t, "no launching CPU event"), "%s: the kernels without a launch are not noted", rel[i]);
        tdm_runs_analysis_free(&a);
        tdm_runs_set_free(&s);
    }
}

int main(void) {
    char path[1024];
    if (!fixture_path(path, sizeof path, "expected.json")) {
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
    RUN(test_nccl_data_content);
    RUN(test_control_content);
    RUN(test_test_attributed_by_launch);
    RUN(test_other_hta_traces);
    tdm_json_free(expected);
    return TEST_SUMMARY();
}
