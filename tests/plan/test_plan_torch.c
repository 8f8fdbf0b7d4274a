/* test_plan_torch.c - the step model from a PyTorch DDP trace (src/plan/plan_torch.c) on HTA's
 * nccl_data fixture (../shared/fixtures/README.md): the five gradient buckets of each step,
 * the replay against the trace's mean step, and the predictions' directions; bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "plan/plan.h"
#include "runs/fixtures.h"

#define NCCL_DATA "hta/nccl_parser_config/nccl_data.json.gz"

/* the fixture README's figures: the buckets' Float elements and the ProfilerStep#4..#6 lengths */
static const int64_t BUCKETS[5] = {2049000, 7875584, 6563840, 6637568, 2431040};
static const double STEPS_US[3] = {222442.191, 219726.905, 224936.243};

static double step_of(const tdm_plan_model *m, const char *flags) {
    tdm_plan_config c = m->baseline;
    tdm_error err;
    if (flags && tdm_plan_parse_flags(flags, &c, &err) != 0) {
        CHECK(0, "%s: %s", flags, err.msg);
        return NAN;
    }
    tdm_plan_result r;
    if (tdm_plan_simulate(m, &c, &r, &err) != 0) {
        CHECK(0, "%s: %s", flags ? flags : "baseline", err.msg);
        return NAN;
    }
    double s = r.step_us;
    tdm_plan_result_free(&r);
    return s;
}

static void test_nccl_data(void) {
    if (!fixtures_present(NCCL_DATA)) return;
    tdm_plan_model m;
    tdm_error err;
    char notes[4096];
    tdm_plan_link none = {.alpha_us = -1, .gbps = -1};
    int rc = tdm_plan_from_torch(fixture(NCCL_DATA), none, -1, &m, notes, sizeof notes, &err);
    CHECK(rc == 0, "%s", err.msg);
    if (rc != 0) return;
    /* every step measured (a step with other buckets is left out), each with the five buckets */
    CHECK(m.n_steps_measured == 3, "%d steps", m.n_steps_measured);
    CHECK(m.n_given_buckets == 5, "%d buckets", m.n_given_buckets);
    for (int b = 0; b < 5 && b < m.n_given_buckets; b++)
        CHECK(m.given_buckets[b] == BUCKETS[b], "bucket %d: %lld elements", b, (long long)m.given_buckets[b]);
    CHECK(m.baseline.dp == 2 && m.baseline.overlap_grad && !m.baseline.distributed, "baseline dp %d", m.baseline.dp);
    CHECK(m.cpu_us_per_mb == 0, "GPU trace: CPU per MB %g", m.cpu_us_per_mb);
    CHECK(m.n_measured > 10, "measured timeline of %d segments", m.n_measured);

    tdm_plan_result r;
    CHECK(tdm_plan_simulate(&m, &m.baseline, &r, &err) == 0, "%s", err.msg);
    CHECK(r.n_buckets == 5, "replay cuts %d buckets", r.n_buckets);
    for (int b = 0; b < 5 && b < r.n_buckets; b++)
        CHECK(r.bucket_padded[b] == BUCKETS[b], "replay bucket %d: %lld", b, (long long)r.bucket_padded[b]);
    tdm_plan_result_free(&r);

    /* replay: within 5% of the trace's mean ProfilerStep */
    double measured = (STEPS_US[0] + STEPS_US[1] + STEPS_US[2]) / 3;
    CHECK_NEAR(m.measured_step_us, measured, 0.01);
    double replay = step_of(&m, NULL);
    CHECK(fabs(replay / measured - 1) < 0.05, "replay %.1f us, measured %.1f us", replay, measured);

    /* DDP without overlap: never faster; a faster link: never slower */
    double no_overlap = step_of(&m, "--no-overlap-grad-reduce");
    CHECK(no_overlap >= replay, "no overlap %.1f < replay %.1f", no_overlap, replay);
    char flags[128];
    snprintf(flags, sizeof flags, "--link-gbps %.9g", m.baseline.link.gbps * 2);
    double faster = step_of(&m, flags);
    CHECK(faster <= replay, "link x2 %.1f > replay %.1f", faster, replay);
    snprintf(flags, sizeof flags, "--link-gbps %.9g --link-latency-us %.9g", m.baseline.link.gbps * 2,
             m.baseline.link.alpha_us / 2);
    CHECK(step_of(&m, flags) <= faster, "latency halved too: slower");
    /* the no-overlap step is the replay's compute plus every all-reduce after the backward */
    double comm = 0;
    for (int b = 0; b < 5; b++) comm += tdm_plan_coll_us(TDM_PLAN_ALL_REDUCE, BUCKETS[b] * 4.0, 2, &m.baseline.link);
    double compute = m.head_us + m.units[0].fwd_us + m.sync_us + m.opt_us;
    for (int u = 0; u < m.n_units; u++) compute += m.units[u].bwd_us;
    CHECK_NEAR(no_overlap, compute + comm, 1e-6 * no_overlap);

    /* another bucket size: the gradients re-cut, the same bytes in all */
    tdm_plan_config c = m.baseline;
    CHECK(tdm_plan_parse_flags("--ddp-bucket-size 4000000", &c, &err) == 0, "%s", err.msg);
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    int64_t total = 0;
    for (int b = 0; b < r.n_buckets; b++) total += r.bucket_padded[b];
    CHECK(total == 25557032 && r.n_buckets >= 6 && r.n_buckets <= 7, "%d buckets, %lld elements", r.n_buckets,
          (long long)total);
    tdm_plan_result_free(&r);
    /* one bucket, launched when the last gradient is ready: no better than the measured cut */
    CHECK(step_of(&m, "--ddp-bucket-size 30000000") >= replay - 1e-6, "one bucket faster than five");

    /* another dp size: the ring formulas at p */
    c = m.baseline;
    CHECK(tdm_plan_parse_flags("--dp 8 --no-overlap-grad-reduce", &c, &err) == 0, "%s", err.msg);
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    double comm8 = 0;
    for (int b = 0; b < 5; b++) comm8 += tdm_plan_coll_us(TDM_PLAN_ALL_REDUCE, BUCKETS[b] * 4.0, 8, &m.baseline.link);
    CHECK_NEAR(r.comm_us, comm8, 1e-6 * comm8);
    CHECK_NEAR(r.step_us, compute + comm8, 1e-6 * r.step_us);
    tdm_plan_result_free(&r);

    /* a given link replaces the fit */
    tdm_plan_model g;
    tdm_plan_link given = {.alpha_us = 5, .gbps = 100};
    CHECK(tdm_plan_from_torch(fixture(NCCL_DATA), given, -1, &g, NULL, 0, &err) == 0, "%s", err.msg);
    CHECK(g.baseline.link.gbps == 100 && g.baseline.link.alpha_us == 5, "link %g %g", g.baseline.link.gbps,
          g.baseline.link.alpha_us);
    tdm_plan_model_free(&g);
    tdm_plan_model_free(&m);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void expect_refused(const char *path, const char *want) {
    tdm_plan_model m;
    tdm_error err;
    tdm_plan_link none = {.alpha_us = -1, .gbps = -1};
    int rc = tdm_plan_from_torch(path, none, -1, &m, NULL, 0, &err);
    CHECK(rc != 0 && strstr(err.msg, want) && !strchr(err.msg, '\n'), "%s: %s", path, rc ? err.msg : "accepted");
}

static void test_bad_input(void) {
    char dir[] = "/tmp/tdm_plan_torch_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char a[128], b[128], c[128];
    snprintf(a, sizeof a, "%s/no_nccl.json", dir);
    snprintf(b, sizeof b, "%s/no_steps.json", dir);
    snprintf(c, sizeof c, "%s/cpu_only.json", dir);
    /* a step and a compute kernel, no collective */
    write_text(a,
               "{\"traceEvents\": ["
               "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#1\", \"ts\": 0, \"dur\": 100, "
               "\"pid\": 1, \"tid\": 1},"
               "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"ts\": 1, \"dur\": 1, "
               "\"pid\": 1, \"tid\": 1, \"args\": {\"correlation\": 5}},"
               "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"ts\": 3, \"dur\": 20, \"pid\": 0, "
               "\"tid\": 7, \"args\": {\"stream\": 7, \"correlation\": 5}}]}");
    /* an all-reduce kernel, no step */
    write_text(b, "{\"traceEvents\": ["
                  "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"ts\": 3, \"dur\": 20, \"pid\": 0, "
                  "\"tid\": 7, \"args\": {\"stream\": 7, \"correlation\": 5}},"
                  "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclKernel_AllReduce_RING_LL_Sum_float\", "
                  "\"ts\": 30, \"dur\": 20, \"pid\": 0, \"tid\": 40, \"args\": {\"stream\": 40, \"correlation\": 6, "
                  "\"In msg nelems\": 1000, \"dtype\": \"Float\", \"Group size\": 2}}]}");
    /* CPU operators only */
    write_text(c,
               "{\"traceEvents\": ["
               "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#1\", \"ts\": 0, \"dur\": 100, "
               "\"pid\": 1, \"tid\": 1},"
               "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"ts\": 1, \"dur\": 10, \"pid\": 1, "
               "\"tid\": 1}]}");
    expect_refused(a, "no NCCL all-reduce kernel");
    expect_refused(b, "no ProfilerStep#N annotation");
    expect_refused(c, "no GPU kernel");
    expect_refused("/nonexistent/trace.json", "/nonexistent/trace.json");
    unlink(a), unlink(b), unlink(c);
    rmdir(dir);
    if (!fixtures_present("ascend")) return;
    /* Ascend: steps and operators, but no gradient buckets */
    expect_refused(fixture("ascend/timeline_advice/trace_view.json"), "Ascend");
    expect_refused(fixture("ascend/cluster_analysis_output/cluster_communication.json"), "Ascend");
    expect_refused(fixture("ascend/cluster_analysis_output/cluster_step_trace_time.csv"), "Ascend");
}

/* A hand-made step with known answers: forward kernel 20-120 (thread 1), backward kernels
 * 200-300 and 300-500 (thread 2), all-reduces of 1000 and 3000 floats launched after the first
 * and the second, the optimizer 580-680, the step 0-1000 on the CPU. */
static void test_known_step(void) {
    char dir[] = "/tmp/tdm_plan_torch_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/step.json", dir);
    static const char *const doc[] = {
        "{\"traceEvents\": [",
        "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#1\", \"ts\": 0, \"dur\": 1000, "
        "\"pid\": 1, \"tid\": 1},",
        "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"ts\": 10, \"dur\": 1, \"pid\": "
        "1, \"tid\": 1, \"args\": {\"correlation\": 1}},",
        "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"ts\": 200, \"dur\": 1, \"pid\": "
        "1, \"tid\": 2, \"args\": {\"correlation\": 2}},",
        "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"ts\": 250, \"dur\": 1, \"pid\": "
        "1, \"tid\": 2, \"args\": {\"correlation\": 3}},",
        "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"ts\": 260, \"dur\": 1, \"pid\": "
        "1, \"tid\": 2, \"args\": {\"correlation\": 4}},",
        "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"ts\": 490, \"dur\": 1, \"pid\": "
        "1, \"tid\": 2, \"args\": {\"correlation\": 5}},",
        "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"ts\": 560, \"dur\": 1, \"pid\": "
        "1, \"tid\": 1, \"args\": {\"correlation\": 6}},",
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"ts\": 20, \"dur\": 100, \"pid\": 0, \"tid\": 7, "
        "\"args\": {\"stream\": 7, \"correlation\": 1}},",
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm_bwd\", \"ts\": 200, \"dur\": 100, \"pid\": 0, \"tid\": "
        "7, \"args\": {\"stream\": 7, \"correlation\": 2}},",
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclKernel_AllReduce_RING_LL_Sum_float\", \"ts\": 310, "
        "\"dur\": 50, \"pid\": 0, \"tid\": 40, \"args\": {\"stream\": 40, \"correlation\": 3, \"In msg nelems\": 1000, "
        "\"dtype\": \"Float\", \"Group size\": 2}},",
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm_bwd\", \"ts\": 300, \"dur\": 200, \"pid\": 0, \"tid\": "
        "7, \"args\": {\"stream\": 7, \"correlation\": 4}},",
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclKernel_AllReduce_RING_LL_Sum_float\", \"ts\": 510, "
        "\"dur\": 60, \"pid\": 0, \"tid\": 40, \"args\": {\"stream\": 40, \"correlation\": 5, \"In msg nelems\": 3000, "
        "\"dtype\": \"Float\", \"Group size\": 2}},",
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"sgd\", \"ts\": 580, \"dur\": 100, \"pid\": 0, \"tid\": 7, "
        "\"args\": {\"stream\": 7, \"correlation\": 6}},",
        /* an all-reduce from the step's own thread (a metric's, in the forward): no gradient bucket */
        "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"ts\": 15, \"dur\": 1, "
        "\"pid\": 1, \"tid\": 1, \"args\": {\"correlation\": 7}},",
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclKernel_AllReduce_RING_LL_Sum_float\", \"ts\": 125, "
        "\"dur\": 5, \"pid\": 0, \"tid\": 40, \"args\": {\"stream\": 40, \"correlation\": 7, \"In msg nelems\": 10, "
        "\"dtype\": \"Float\", \"Group size\": 2}}]}"};
    FILE *f = fopen(path, "w");
    if (!f) {
        CHECK(0, "%s", path);
        return;
    }
    for (size_t i = 0; i < sizeof doc / sizeof *doc; i++) fputs(doc[i], f);
    fclose(f);
    tdm_plan_model m;
    tdm_error err;
    tdm_plan_link none = {.alpha_us = -1, .gbps = -1};
    char notes[4096];
    int rc = tdm_plan_from_torch(path, none, -1, &m, notes, sizeof notes, &err);
    unlink(path);
    rmdir(dir);
    CHECK(rc == 0, "%s", err.msg);
    if (rc != 0) return;
    CHECK(m.n_given_buckets == 2 && m.given_buckets[0] == 1000 && m.given_buckets[1] == 3000, "buckets");
    CHECK_NEAR(m.units[0].fwd_us, 180, 1e-9); /* first kernel to the backward's first */
    CHECK_NEAR(m.units[0].bwd_us, 0, 1e-9);   /* the last bucket is ready at the backward's end */
    double b0 = 0, b1 = 0;
    for (int u = 1; u < m.n_units; u++) *(u >= m.n_units - 64 ? &b0 : &b1) += m.units[u].bwd_us;
    CHECK_NEAR(b0, 100, 1e-9); /* bucket 0: ready at 300, the end of the kernel launched before it */
    CHECK_NEAR(b1, 200, 1e-9);
    CHECK_NEAR(m.sync_us, 10, 1e-9); /* the last all-reduce's end to the optimizer */
    CHECK_NEAR(m.opt_us, 100, 1e-9);
    CHECK_NEAR(m.head_us, 340, 1e-9); /* the step's 1000 less the device window 20-680 */
    CHECK_NEAR(m.measured_step_us, 1000, 1e-9);
    CHECK(strstr(notes, "compute kernels busy 0.500 ms of the 0.660 ms device window"), "%s", notes);
    /* the link through both all-reduces: 2 alpha + n / beta = 50 us at 4000 bytes, 60 us at 12000 */
    CHECK_NEAR(m.baseline.link.alpha_us, 22.5, 1e-6);
    CHECK_NEAR(m.baseline.link.gbps, 6.4, 1e-9);
    CHECK_NEAR(step_of(&m, NULL), 990, 1e-6);                        /* the second all-reduce after the backward */
    CHECK_NEAR(step_of(&m, "--no-overlap-grad-reduce"), 1040, 1e-6); /* both after it */
    tdm_plan_model_free(&m);
}

int main(void) {
    RUN(test_known_step);
    RUN(test_nccl_data);
    RUN(test_bad_input);
    return TEST_SUMMARY();
}
