/* Tests of the JSON run readers (src/runs/golden.c, model_config.c, and run.c's format detection):
 * Megatron-LM golden values and their model_config.yaml under ../shared/fixtures/megatron/test_cases,
 * MindSpeed-MM baselines under ../shared/fixtures/mindspeed-mm, and malformed made-up files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"
#include "fixtures.h"
#include "harness.h"
#include "runs/golden.h"
#include "runs/run.h"

#define GPT     "megatron/test_cases/gpt/"
#define PAIR1_A GPT "gpt3_mr_tp1_pp4_vp1_dgx_a100_1N8G"
#define PAIR1_B GPT "gpt3_345m_nightly_dgx_a100_1N8G_tp1_pp4_vp1_overlap_grad_reduce"
#define PAIR3_B GPT "gpt3_mcore_te_tp4_pp1_dist_optimizer_overlap_grad_reduce_param_gather"

static const tdm_run_iter *step(const tdm_run_log *r, int64_t it) {
    for (int64_t i = 0; i < r->n_iters; i++)
        if (r->iters[i].iteration == it) return &r->iters[i];
    return NULL;
}

static void test_golden_pair1(void) {
    if (!fixtures_present("Megatron-LM golden values")) return;
    tdm_run_log a, b;
    tdm_error e;
    CHECK(tdm_run_log_read(fixture(PAIR1_A), &a, &e) == 0, "%s", e.msg); /* a directory: its one golden file */
    CHECK(tdm_run_log_read(fixture(PAIR1_B "/golden_values_dev.json"), &b, &e) == 0, "%s", e.msg);
    CHECK(a.format == TDM_RUN_MEGATRON_GOLDEN && b.format == TDM_RUN_MEGATRON_GOLDEN, "formats");
    CHECK(a.n_iters == 11 && b.n_iters == 11, "steps %lld %lld", (long long)a.n_iters, (long long)b.n_iters);
    static const int steps[11] = {1, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50};
    for (int i = 0; i < 11 && i < a.n_iters && i < b.n_iters; i++) {
        CHECK(a.iters[i].iteration == steps[i] && a.iters[i].interval == 1, "step %lld",
              (long long)a.iters[i].iteration);
        CHECK(a.iters[i].lm_loss == b.iters[i].lm_loss, "step %d: loss %.7g vs %.7g", steps[i], a.iters[i].lm_loss,
              b.iters[i].lm_loss);
        CHECK(a.iters[i].global_batch == 32 && a.iters[i].consumed_samples == -1, "batch from model_config.yaml");
        CHECK(steps[i] <= 15 ? isnan(a.iters[i].num_zeros) : isfinite(a.iters[i].num_zeros), "num-zeros \"nan\"");
    }
    CHECK(a.n_iters == 11 && a.iters[0].lm_loss == 10.79424 && a.iters[10].lm_loss == 10.21715, "losses");
    CHECK(a.n_iters == 11 && fabs(a.iters[0].elapsed_ms - 5884.35) < 1e-9 &&
              fabs(a.iters[1].elapsed_ms - 153.04) < 1e-9,
          "seconds to ms: %.9g", a.n_iters ? a.iters[0].elapsed_ms : 0.0);
    CHECK(a.n_iters && a.iters[0].loss_prec == (TDM_RUN_PREC_DEC | 5), "loss printed with 5 decimals: %#x",
          a.n_iters ? a.iters[0].loss_prec : 0);
    CHECK(a.train_iters == 50, "train iters %lld", (long long)a.train_iters);
    /* the arguments: model_config.yaml's MODEL_ARGS, the candidate has the one flag more */
    CHECK(tdm_run_log_arg(&a, "overlap_grad_reduce") == NULL, "baseline has no --overlap-grad-reduce");
    const char *v = tdm_run_log_arg(&b, "overlap_grad_reduce");
    CHECK(v && !strcmp(v, "true"), "candidate --overlap-grad-reduce %s", v ? v : "(none)");
    CHECK(a.n_args + 1 == b.n_args, "arguments %d and %d", a.n_args, b.n_args);
    v = tdm_run_log_arg(&a, "--lr-warmup-fraction");
    CHECK(v && !strcmp(v, ".01"), "%s", v ? v : "(none)");
    CHECK(a.n_env == 4 && !strcmp(a.env[0].key, "CUDA_DEVICE_MAX_CONNECTIONS") && !strcmp(a.env[0].value, "1"),
          "ENV_VARS %d", a.n_env);
    CHECK(a.n_env == 4 && !strcmp(a.env[3].value, ":4096:8"), "a value with colons");
    tdm_run_log_free(&a);
    tdm_run_log_free(&b);
}

static void test_golden_lts(void) {
    if (!fixtures_present("Megatron-LM golden values (lts)")) return;
    tdm_run_log b;
    tdm_error e;
    CHECK(tdm_run_log_read(fixture(PAIR3_B "/golden_values_lts_dgx_a100.json"), &b, &e) == 0, "%s", e.msg);
    CHECK(b.n_iters == 50, "every step: %lld", (long long)b.n_iters);
    const tdm_run_iter *s1 = step(&b, 1), *s2 = step(&b, 2);
    CHECK(s1 && isfinite(s1->lm_loss) && isnan(s1->elapsed_ms), "step 1 has a loss but no iteration time");
    CHECK(s2 && isfinite(s2->elapsed_ms), "iteration time from step 2");
    int times = 0;
    for (int64_t i = 0; i < b.n_iters; i++) times += isfinite(b.iters[i].elapsed_ms);
    CHECK(times == 49, "49 iteration times, %d", times);
    const char *v = tdm_run_log_arg(&b, "overlap-param-gather");
    CHECK(v && !strcmp(v, "true"), "%s", v ? v : "(none)");
    v = tdm_run_log_arg(&b, "dist-ckpt-strictness");
    CHECK(v && !strcmp(v, "log_all"), "comment after a value: '%s'", v ? v : "(none)");
    tdm_run_log_free(&b);
    /* its directory holds two golden files: the reader asks which */
    CHECK(tdm_run_log_read(fixture(PAIR3_B), &b, &e) != 0, "two golden files");
    CHECK(strstr(e.msg, "holds 2 golden values files") && strstr(e.msg, "name the one to read"), "%s", e.msg);
    tdm_run_log_free(&b);
}

static void test_mindspeed(void) {
    if (!fixtures_present("MindSpeed-MM baselines")) return;
    tdm_run_log r;
    tdm_error e;
    CHECK(tdm_run_log_read(fixture("mindspeed-mm/baseline_results/finetune_qwen3vl_30B.json"), &r, &e) == 0, "%s",
          e.msg);
    CHECK(r.format == TDM_RUN_MINDSPEED_BASELINE && r.n_iters == 4 && r.warm_up == 1, "%lld steps, warm_up %lld",
          (long long)r.n_iters, (long long)r.warm_up);
    if (r.n_iters == 4) {
        CHECK(r.iters[0].lm_loss == 154.8069 && r.iters[3].lm_loss == 41.90138, "losses");
        CHECK(r.iters[0].elapsed_ms == 13377.8 && r.iters[3].elapsed_ms == 9715.3, "times");
        CHECK(r.iters[0].loss_prec == (TDM_RUN_PREC_SIG | 7), "loss precision %#x", r.iters[0].loss_prec);
        CHECK(r.iters[0].global_batch == 0, "no batch size in a baseline");
    }
    tdm_run_log_free(&r);
    CHECK(tdm_run_log_read(fixture("mindspeed-mm/baseline_results/finetune_qwen3vl_30B_v1.json"), &r, &e) == 0, "%s",
          e.msg);
    CHECK(r.n_iters == 5 && r.warm_up == 2 && r.iters[0].lm_loss == 12.36213 && r.iters[4].elapsed_ms == 1219.1, "v1");
    double sum = 0;
    for (int64_t i = r.warm_up; i < r.n_iters; i++) sum += r.iters[i].elapsed_ms;
    CHECK_NEAR(sum / (double)(r.n_iters - r.warm_up), 1242.767, 1e-3);
    tdm_run_log_free(&r);
}

static int bad_json(const char *text, const char *want) {
    tdm_run_log r;
    tdm_error e;
    int rc = tdm_run_json_read_mem(text, strlen(text), "x.json", &r, &e);
    tdm_run_log_free(&r);
    if (rc == 0) {
        fprintf(stderr, "    accepted: %s\n", text);
        return 0;
    }
    if (!strstr(e.msg, want)) fprintf(stderr, "    %s -> %s\n", text, e.msg);
    return strstr(e.msg, want) != NULL && strstr(e.msg, "x.json") == e.msg;
}

static void test_bad_json(void) {
    CHECK(bad_json("{\"a\": 1}", "neither Megatron-LM golden values"), "other JSON");
    CHECK(bad_json("[1, 2]", "neither"), "an array");
    CHECK(bad_json("{\"lm loss\": {\"values\": {\"x\": 1}}}", "step \"x\" is not a positive integer"), "bad step");
    CHECK(bad_json("{\"lm loss\": {\"values\": {\"0\": 1}}}", "not a positive integer"), "step 0");
    CHECK(bad_json("{\"lm loss\": {\"values\": {\"1\": [1]}}}", "expected a number or \"nan\""), "bad value");
    CHECK(bad_json("{\"lm loss\": {\"values\": {}}}", "without any step"), "no step");
    CHECK(bad_json("{\"loss\": 3}", "expected an array of numbers"), "baseline loss");
    CHECK(bad_json("{\"loss\": [1, \"a\"]}", "\"loss\"[1] is a string"), "baseline value");
    CHECK(bad_json("{\"loss\": []}", "no step"), "empty baseline");
    CHECK(bad_json("{\"loss\": [1], \"warm_up\": -1}", "warm_up"), "warm_up");
    CHECK(bad_json("{\"loss\": [1", "x.json:1"), "cut JSON");
}

static void test_yaml(void) {
    tdm_run_log r;
    tdm_error e;
    tdm_run_log_init(&r);
    const char *y = "ENV_VARS:\n  A: '1'\nMODEL_ARGS:\n  # a comment\n  --x: \"a # b\"  # and another\n"
                    "  --global-batch-size: 64\nTEST_TYPE: regular\nOTHER:\n  - item\n";
    CHECK(tdm_run_model_config_read_mem(y, strlen(y), "m.yaml", &r, &e) == 0, "%s", e.msg);
    CHECK(r.n_env == 1 && !strcmp(r.env[0].value, "1"), "quotes");
    const char *v = tdm_run_log_arg(&r, "x");
    CHECK(v && !strcmp(v, "a # b"), "a '#' inside quotes: %s", v ? v : "(none)");
    CHECK(r.n_args == 2, "args %d", r.n_args);
    tdm_run_log_free(&r);
    tdm_run_log_init(&r);
    y = "MODEL_ARGS:\n  - item\n";
    CHECK(tdm_run_model_config_read_mem(y, strlen(y), "m.yaml", &r, &e) != 0 && strstr(e.msg, "m.yaml:2: a list item"),
          "%s", e.msg);
    tdm_run_log_free(&r);
    tdm_run_log_init(&r);
    y = "just text\n";
    CHECK(tdm_run_model_config_read_mem(y, strlen(y), "m.yaml", &r, &e) != 0 && strstr(e.msg, "m.yaml:1:"), "%s",
          e.msg);
    tdm_run_log_free(&r);
}

/* The entry point on files that are none of the formats */
static void test_detection(void) {
    char dir[] = "/tmp/tdm_runs_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    tdm_run_log r;
    tdm_error e;
    snprintf(path, sizeof path, "%s/missing.log", dir);
    CHECK(tdm_run_log_read(path, &r, &e) != 0 && strstr(e.msg, "missing.log: No such file"), "%s", e.msg);
    tdm_run_log_free(&r);
    snprintf(path, sizeof path, "%s/empty.log", dir);
    CHECK(tdm_write_file_atomic(path, "", 0, NULL) == 0, "write");
    CHECK(tdm_run_log_read(path, &r, &e) != 0 && strstr(e.msg, "empty"), "%s", e.msg);
    tdm_run_log_free(&r);
    snprintf(path, sizeof path, "%s/log.gz", dir);
    CHECK(tdm_write_file_atomic(path, "\x1f\x8b\x08\x00", 4, NULL) == 0, "write");
    CHECK(tdm_run_log_read(path, &r, &e) != 0 && strstr(e.msg, "gzip"), "%s", e.msg);
    tdm_run_log_free(&r);
    snprintf(path, sizeof path, "%s/golden_values_dev.json", dir);
    const char *g = "{\"lm loss\": {\"start_step\": 1, \"end_step\": 2, \"step_interval\": 1, \"values\": {\"1\": 2.5, "
                    "\"2\": 2.25}}}";
    CHECK(tdm_write_file_atomic(path, g, strlen(g), NULL) == 0, "write");
    CHECK(tdm_run_log_read(path, &r, &e) == 0 && r.n_iters == 2, "%s", e.msg);
    CHECK(r.n_warnings == 1 && strstr(r.warnings[0], "no model_config.yaml"), "%s",
          r.n_warnings ? r.warnings[0] : "no warning");
    tdm_run_log_free(&r);
    CHECK(tdm_run_log_read(dir, &r, &e) == 0 && r.n_iters == 2, "a directory with one golden file: %s", e.msg);
    tdm_run_log_free(&r);
    unlink(path);
    CHECK(tdm_run_log_read(dir, &r, &e) != 0 && strstr(e.msg, "without golden_values"), "%s", e.msg);
    tdm_run_log_free(&r);
    snprintf(path, sizeof path, "%s/empty.log", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/log.gz", dir);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    RUN(test_golden_pair1);
    RUN(test_golden_lts);
    RUN(test_mindspeed);
    RUN(test_bad_json);
    RUN(test_yaml);
    RUN(test_detection);
    return TEST_SUMMARY();
}
