/* test_log.c - the iteration line, timers block, metrics JSON and progress text against literal strings. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "train/log.h"

static void test_iteration_line_is_megatrons(void) {
    setenv("TZ", "UTC", 1);
    tzset();
    struct timespec now = {.tv_sec = 1795975200 /* 2026-11-29 18:00:00 UTC */, .tv_nsec = 123456789};
    tdm_iter_line l = {.iteration = 5,
                       .train_iters = 20,
                       .consumed_samples = 40,
                       .elapsed_ms_per_iter = 812.34,
                       .lr = 1e-4,
                       .global_batch_size = 8,
                       .loss = 6.54321,
                       .loss_scale = 1.0,
                       .grad_norm = 1.23456,
                       .skipped = 0,
                       .nan = 0};
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_format_iter_line(&sb, &now, &l);
    const char *want =
        "[2026-11-29 18:00:00.123456] iteration        5/      20 | consumed samples:           40 | "
        "elapsed time per iteration (ms): 812.3 | learning rate: 1.000000E-04 | global batch size:     8 | "
        "lm loss: 6.543210E+00 | loss scale: 1.0 | grad norm: 1.235 | number of skipped iterations:   0 | "
        "number of nan iterations:   0 |";
    CHECK(!strcmp(sb.data, want), "\n got  %s\n want %s", sb.data, want);
    tdm_sb_clear(&sb);
    l.lr = 3.5e-123;
    l.loss = 1e200 * 1e200; /* inf */
    l.nan = 12;
    tdm_format_iter_line(&sb, &now, &l);
    CHECK(strstr(sb.data, "learning rate: 3.500000E-123 |"), "%s", sb.data);
    CHECK(strstr(sb.data, "lm loss: INF |"), "%s", sb.data);
    CHECK(strstr(sb.data, "number of nan iterations:  12 |"), "%s", sb.data);
    CHECK(!strstr(sb.data, "throughput") && !strstr(sb.data, "num zeros") && !strstr(sb.data, "params norm"), "%s",
          sb.data);
    /* Megatron's optional fields, where its training_log puts them */
    tdm_sb_clear(&sb);
    l = (tdm_iter_line){.iteration = 5,
                        .train_iters = 20,
                        .consumed_samples = 40,
                        .elapsed_ms_per_iter = 812.34,
                        .lr = 1e-4,
                        .global_batch_size = 8,
                        .loss = 6.54321,
                        .loss_scale = 1.0,
                        .grad_norm = 1.23456,
                        .has_throughput = 1,
                        .throughput = 0.0421875,
                        .has_num_zeros = 1,
                        .num_zeros = 1234,
                        .has_params_norm = 1,
                        .params_norm = 81.10075};
    tdm_format_iter_line(&sb, &now, &l);
    want = "[2026-11-29 18:00:00.123456] iteration        5/      20 | consumed samples:           40 | "
           "elapsed time per iteration (ms): 812.3 | throughput per GPU (TFLOP/s/GPU): 0.0422 | "
           "learning rate: 1.000000E-04 | global batch size:     8 | lm loss: 6.543210E+00 | loss scale: 1.0 | "
           "grad norm: 1.235 | num zeros: 1234.0 | params norm: 81.101 | number of skipped iterations:   0 | "
           "number of nan iterations:   0 |";
    CHECK(!strcmp(sb.data, want), "\n got  %s\n want %s", sb.data, want);
    tdm_sb_free(&sb);
}

static void test_timers_block(void) {
    const char *names[] = {"forward-backward", "all-grads-sync"};
    double mn[] = {100.0, 2.5}, mx[] = {110.125, 3.0};
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_format_timers(&sb, 2, names, mn, mx);
    const char *want = "(min, max) time across ranks (ms):\n"
                       "    forward-backward ...............................: (100.00, 110.12)\n"
                       "    all-grads-sync .................................: (2.50, 3.00)";
    CHECK(!strcmp(sb.data, want), "\n got  %s\n want %s", sb.data, want);
    tdm_sb_free(&sb);
}

static void test_metrics_json(void) {
    tdm_step_record r = {.iteration = 3,
                         .consumed_samples = 24,
                         .global_batch_size = 8,
                         .tokens = 100,
                         .lr = 0.1,
                         .loss = 2.0 / 3.0,
                         .grad_norm = 0.5,
                         .step_ms = 12.5,
                         .compute_cpu_ms = 11.25,
                         .cpu_ms = 13.0,
                         .fingerprint = 0xabcULL};
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_format_metrics_json(&sb, &r, 1);
    const char *want =
        "{\"iteration\":3,\"consumed_samples\":24,\"lr\":0.10000000000000001,\"weight_decay\":0,"
        "\"global_batch_size\":8,"
        "\"tokens\":100,\"loss\":0.66666666666666663,\"grad_norm\":0.5,\"skipped\":0,\"nan\":0,"
        "\"model_flops\":0,\"step_ms\":12.500,\"data_wait_ms\":0.000,\"fwd_bwd_ms\":0.000,\"grad_sync_ms\":0.000,"
        "\"optimizer_ms\":0.000,\"param_gather_ms\":0.000,\"comm_thread_cpu_ms\":0.000,"
        "\"compute_cpu_ms\":11.250,\"cpu_ms\":13.000,\"fingerprint\":\"0000000000000abc\"}";
    CHECK(!strcmp(sb.data, want), "\n got  %s\n want %s", sb.data, want);
    CHECK(strtod(strstr(sb.data, "\"loss\":") + 7, NULL) == 2.0 / 3.0, "all digits round-trip");
    tdm_sb_clear(&sb);
    r.loss = 0.0 / 0.0 * 0.0;
    r.loss = r.loss != r.loss ? r.loss : __builtin_nan("");
    tdm_format_metrics_json(&sb, &r, 0);
    CHECK(strstr(sb.data, "\"loss\":\"NaN\"") && !strstr(sb.data, "fingerprint"), "%s", sb.data);
    CHECK(!strstr(sb.data, "params_norm") && !strstr(sb.data, "num_zeros"), "%s", sb.data);
    tdm_sb_clear(&sb);
    r.model_flops = 13841211392.0;
    r.has_params_norm = 1, r.params_norm = 81.1;
    r.has_num_zeros = 1, r.num_zeros = 240128;
    tdm_format_metrics_json(&sb, &r, 0);
    CHECK(strstr(sb.data, "\"nan\":0,\"model_flops\":13841211392,\"params_norm\":81.099999999999994,"
                          "\"num_zeros\":240128,\"step_ms\""),
          "%s", sb.data);
    tdm_sb_free(&sb);
}

static void test_progress(void) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_format_progress(&sb, 50, 200, 312.4);
    const char *want = "progress: iteration 50/200 (25.0%), 312.4 ms/iteration, ETA 0:00:47";
    CHECK(!strcmp(sb.data, want), "\n got  %s\n want %s", sb.data, want);
    tdm_sb_free(&sb);
}

/* The ETA's step time is the mean of the last TDM_STEP_WINDOW steps, not the last step's. */
static void test_step_window(void) {
    tdm_step_window w;
    memset(&w, 0, sizeof w);
    CHECK(tdm_step_window_mean(&w) == 0.0, "empty window: %g", tdm_step_window_mean(&w));
    tdm_step_window_push(&w, 100.0);
    tdm_step_window_push(&w, 300.0);
    CHECK(tdm_step_window_mean(&w) == 200.0, "two steps: %g, want 200", tdm_step_window_mean(&w));
    for (int i = 0; i < 30; i++) tdm_step_window_push(&w, 100.0); /* the first two have left the window */
    tdm_step_window_push(&w, 2100.0);                             /* one slow step among 19 of 100 ms */
    CHECK(tdm_step_window_mean(&w) == 200.0, "19 x 100 + 2100: %g, want 200", tdm_step_window_mean(&w));
}

int main(void) {
    RUN(test_iteration_line_is_megatrons);
    RUN(test_timers_block);
    RUN(test_metrics_json);
    RUN(test_progress);
    RUN(test_step_window);
    return TEST_SUMMARY();
}
