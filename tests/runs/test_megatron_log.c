/* Tests of the training-log reader (src/runs/megatron_log.c, run.c): the two real Megatron-LM
 * logs of ../shared/fixtures/megatron/logs line by line, and made-up hostile logs (ANSI colours,
 * carriage returns, appended runs, a last line cut short, glued lines, no iteration line). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "fixtures.h"
#include "harness.h"
#include "runs/megatron_log.h"
#include "runs/run.h"

static int has_warning(const tdm_run_log *r, const char *part) {
    for (int i = 0; i < r->n_warnings; i++)
        if (strstr(r->warnings[i], part)) return 1;
    return 0;
}

static int read_text(const char *text, tdm_run_log *r, tdm_error *e) {
    return tdm_megatron_log_read_mem(text, strlen(text), "made-up.log", r, e);
}

/* A Megatron iteration line, as training_log prints it (lr and loss in %.6E, grad norm %.3f). */
static void iter_line(tdm_strbuf *sb, int it, int of, double ms, double lr, double loss, double gn) {
    tdm_sb_printf(sb,
                  " iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f | learning "
                  "rate: %.6E | global batch size: %5d | lm loss: %.6E | loss scale: 1.0 | grad norm: %.3f | number "
                  "of skipped iterations: %3d | number of nan iterations: %3d |\n",
                  it, of, 8 * it, ms, lr, 8, loss, gn, 0, 0);
}

/* ---- the real logs ---- */

static void test_complete_run(void) {
    if (!fixtures_present("the complete 200-iteration Megatron log")) return;
    tdm_run_log r;
    tdm_error e;
    int rc = tdm_run_log_read(fixture("megatron/logs/tp4_core_r0.5.0_200iter.log"), &r, &e);
    CHECK(rc == 0, "%s", e.msg);
    CHECK(r.format == TDM_RUN_MEGATRON_LOG, "format %d", r.format);
    CHECK(r.lines == 734, "lines %lld", (long long)r.lines);
    CHECK(r.n_iters == 20, "iterations %lld", (long long)r.n_iters);
    CHECK(r.train_iters == 200, "of %lld", (long long)r.train_iters);
    CHECK(r.passes == 1 && !r.crashed && r.n_warnings == 0, "passes %d crashed %d warnings %d", r.passes, r.crashed,
          r.n_warnings);
    static const double ms[20] = {1011.8, 388.3, 385.1, 392.6, 384.9, 385.6, 384.4, 385.1, 385.6, 395.7,
                                  385.2,  384.3, 383.3, 384.5, 382.2, 382.8, 383.6, 389.7, 386.0, 384.4};
    static const double loss[20] = {NAN,          1.096171E+01, 1.067098E+01, 1.001153E+01, 9.559246E+00,
                                    9.356075E+00, 9.246494E+00, 9.104178E+00, 8.897788E+00, 8.766370E+00,
                                    8.635515E+00, 8.545827E+00, 8.472692E+00, 8.391251E+00, 8.315047E+00,
                                    8.226217E+00, 8.159902E+00, 8.071524E+00, 8.010191E+00, 7.913759E+00};
    int skipped = 0;
    double sum = 0;
    int n = 0;
    for (int i = 0; i < 20 && i < r.n_iters; i++) {
        const tdm_run_iter *x = &r.iters[i];
        CHECK(x->iteration == 10 * (i + 1) && x->interval == 10, "line %d: iteration %lld interval %d", i,
              (long long)x->iteration, x->interval);
        CHECK(x->consumed_samples == 160 * (i + 1) && x->global_batch == 16, "iteration %lld: %lld samples, batch %lld",
              (long long)x->iteration, (long long)x->consumed_samples, (long long)x->global_batch);
        CHECK(x->elapsed_ms == ms[i], "iteration %lld: %.1f ms", (long long)x->iteration, x->elapsed_ms);
        CHECK(i == 0 ? isnan(x->lm_loss) && isnan(x->grad_norm) : x->lm_loss == loss[i] && isfinite(x->grad_norm),
              "iteration %lld: loss %.7g grad norm %g", (long long)x->iteration, x->lm_loss, x->grad_norm);
        CHECK(x->nan == 0, "iteration %lld: nan %d", (long long)x->iteration, x->nan);
        CHECK(x->lr_prec == (TDM_RUN_PREC_SIG | 4), "lr printed with 3 decimals: prec %#x", x->lr_prec);
        skipped += x->skipped;
        if (x->iteration >= 30) sum += x->elapsed_ms, n++;
    }
    CHECK(r.n_iters == 20 && r.iters[0].skipped == 10 && r.iters[0].loss_scale == 8388608.0, "iteration 10: %d skipped",
          r.iters[0].skipped);
    CHECK(r.n_iters == 20 && r.iters[1].skipped == 5 && r.iters[1].lr == 2.344E-07 && r.iters[1].grad_norm == 25.472,
          "iteration 20");
    CHECK(skipped == 15, "skipped %d", skipped);
    CHECK_NEAR(sum / n, 385.833, 5e-4);
    /* the arguments block */
    CHECK(r.n_args == 274, "arguments %d", r.n_args);
    const char *v = tdm_run_log_arg(&r, "overlap_grad_reduce");
    CHECK(v && !strcmp(v, "False"), "overlap_grad_reduce %s", v ? v : "(none)");
    v = tdm_run_log_arg(&r, "adam_beta2");
    CHECK(v && !strcmp(v, "0.999"), "adam_beta2 %s", v ? v : "(none)");
    v = tdm_run_log_arg(&r, "--global-batch-size");
    CHECK(v && !strcmp(v, "16"), "global_batch_size %s", v ? v : "(none)");
    CHECK(r.ddp_config[0] == 0, "no DDP line in this version: '%s'", r.ddp_config);
    /* validation: at 100, 200, then the final validation-set and test-set evaluations */
    CHECK(r.n_valid == 4, "validation lines %lld", (long long)r.n_valid);
    if (r.n_valid == 4) {
        CHECK(r.valid[0].iteration == 100 && r.valid[0].lm_loss == 8.687662E+00 && !r.valid[0].set[0], "valid 0");
        CHECK(r.valid[1].iteration == 200 && r.valid[1].lm_loss == 7.900960E+00, "valid 1");
        CHECK(!strcmp(r.valid[2].set, "validation set") && r.valid[2].lm_loss == 7.900509E+00, "valid 2 '%s'",
              r.valid[2].set);
        CHECK(!strcmp(r.valid[3].set, "test set") && r.valid[3].lm_loss == 7.693538E+00 &&
                  r.valid[3].ppl == 2.194124E+03,
              "valid 3 '%s'", r.valid[3].set);
    }
    /* timers: save-checkpoint after 50, 100, 150, 200; evaluate after 100 and 200 (and the two final ones) */
    int saves = 0, evals = 0;
    for (int64_t i = 0; i < r.n_timers; i++) {
        const char *name = r.timer_names[r.timers[i].name];
        if (!strcmp(name, "save-checkpoint")) saves++;
        if (!strcmp(name, "evaluate")) evals++;
        if (!strcmp(name, "save-checkpoint") && r.timers[i].after_iteration == 50)
            CHECK(r.timers[i].min_ms == 1796.45 && r.timers[i].max_ms == 1796.45, "save at 50");
        if (!strcmp(name, "train/valid/test-data-iterators-setup"))
            CHECK(r.timers[i].after_iteration == 0 && r.timers[i].max_ms == 158.54, "set-up timer");
    }
    CHECK(saves == 4 && evals == 4, "save-checkpoint %d, evaluate %d", saves, evals);
    tdm_run_log_free(&r);
}

static void test_crash_while_saving(void) {
    if (!fixtures_present("the Megatron log that dies while saving")) return;
    tdm_run_log r;
    tdm_error e;
    int rc = tdm_run_log_read(fixture("megatron/logs/tp4_main_crash_at_iter50.log"), &r, &e);
    CHECK(rc == 0, "%s", e.msg);
    CHECK(r.lines == 884, "lines %lld", (long long)r.lines);
    CHECK(r.n_iters == 5 && r.train_iters == 200, "%lld iterations of %lld", (long long)r.n_iters,
          (long long)r.train_iters);
    static const double ms[5] = {995.3, 457.6, 464.2, 437.8, 436.9};
    for (int i = 0; i < 5 && i < r.n_iters; i++) {
        CHECK(r.iters[i].iteration == 10 * (i + 1) && r.iters[i].elapsed_ms == ms[i], "line %d: %lld %.1f", i,
              (long long)r.iters[i].iteration, r.iters[i].elapsed_ms);
        CHECK(r.iters[i].lr_prec == (TDM_RUN_PREC_SIG | 7), "lr with 6 decimals: %#x", r.iters[i].lr_prec);
    }
    CHECK(r.n_iters == 5 && r.iters[1].lr == 2.343750E-07 && r.iters[4].lm_loss == 9.606478E+00, "values");
    CHECK(r.crashed, "the crash");
    CHECK(strstr(r.crash, "AttributeError") && strstr(r.crash, "saving checkpoint at iteration 50"), "crash: %s",
          r.crash);
    CHECK(has_warning(&r, "failed after iteration 50 of 200"), "%s", r.n_warnings ? r.warnings[0] : "no warning");
    CHECK(strstr(r.ddp_config, "DistributedDataParallelConfig(") == r.ddp_config, "%s", r.ddp_config);
    char buf[64];
    const char *v = tdm_run_log_ddp_field(&r, "overlap_grad_reduce", buf, sizeof buf);
    CHECK(v && !strcmp(v, "False"), "ddp overlap_grad_reduce %s", v ? v : "(none)");
    CHECK(tdm_run_log_ddp_field(&r, "grad_reduce_in_fp32", buf, sizeof buf) != NULL, "first field");
    CHECK(tdm_run_log_ddp_field(&r, "reduce", buf, sizeof buf) == NULL, "a name is matched whole");
    v = tdm_run_log_arg(&r, "overlap_grad_reduce");
    CHECK(v && !strcmp(v, "False"), "argument overlap_grad_reduce %s", v ? v : "(none)");
    CHECK(r.n_args == 354, "arguments %d", r.n_args);
    tdm_run_log_free(&r);
}

/* ---- made-up logs ---- */

static void test_ansi_cr_crlf(void) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_sb_puts(&sb, "\x1b[32mINFO\x1b[0m starting\r\n");
    tdm_sb_puts(&sb, "progress 10%\rprogress 50%\r");
    iter_line(&sb, 1, 3, 100.0, 1e-4, 5.0, 1.0); /* after two progress pieces on the same line */
    tdm_sb_puts(&sb, "\x1b[1m\x1b[34m");
    iter_line(&sb, 2, 3, 101.0, 1e-4, 4.5, 1.0);
    sb.data[sb.len - 1] = '\r', tdm_sb_puts(&sb, "\n"); /* CRLF */
    tdm_sb_puts(&sb, " iteration        3/       3 | consumed samples:           24 | elapsed time per iteration "
                     "(ms): \x1b[31m102.0\x1b[0m | lm loss: 4.000000E+00 | number of skipped iterations:   0 | number "
                     "of nan iterations:   0 |\r\n");
    tdm_run_log r;
    tdm_error e;
    CHECK(read_text(sb.data, &r, &e) == 0, "%s", e.msg);
    CHECK(r.n_iters == 3, "%lld iterations", (long long)r.n_iters);
    if (r.n_iters == 3) {
        CHECK(r.iters[0].elapsed_ms == 100.0 && r.iters[1].lm_loss == 4.5, "values");
        CHECK(r.iters[2].elapsed_ms == 102.0 && r.iters[2].lm_loss == 4.0, "escape inside a value: %g",
              r.iters[2].elapsed_ms);
    }
    CHECK(r.n_warnings == 0, "%s", r.n_warnings ? r.warnings[0] : "");
    tdm_run_log_free(&r);
    tdm_sb_free(&sb);
}

static void test_appended_runs(void) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_sb_puts(&sb,
                "------------------------ arguments ------------------------\n  log_interval ............ 1\n"
                "  overlap_grad_reduce ..... False\n-------------------- end of arguments ---------------------\n");
    for (int i = 1; i <= 5; i++) iter_line(&sb, i, 6, 100.0 + i, 1e-4, 5.0 - 0.1 * i, 1.0);
    /* the job dies, is resumed from the checkpoint at 3, and reaches 4 before dying again */
    tdm_sb_puts(&sb, "Traceback (most recent call last):\nRuntimeError: NCCL timeout\n");
    tdm_sb_puts(&sb, "------------------------ arguments ------------------------\n  log_interval ............ 1\n"
                     "  overlap_grad_reduce ..... True\n-------------------- end of arguments ---------------------\n");
    tdm_sb_puts(&sb, "  successfully loaded checkpoint from ck [ t 0, p 0 ] at iteration 3\n");
    for (int i = 4; i <= 4; i++) iter_line(&sb, i, 6, 200.0 + i, 1e-4, 9.0, 1.0);
    /* then restarted by hand without an arguments block: the iteration going back starts pass 3 */
    iter_line(&sb, 2, 6, 300.0, 1e-4, 9.5, 1.0);
    iter_line(&sb, 3, 6, 301.0, 1e-4, 9.4, 1.0);
    tdm_run_log r;
    tdm_error e;
    CHECK(read_text(sb.data, &r, &e) == 0, "%s", e.msg);
    CHECK(r.passes == 3, "passes %d", r.passes);
    CHECK(r.n_iters == 5, "%lld iterations", (long long)r.n_iters);
    if (r.n_iters == 5) {
        CHECK(r.iters[0].elapsed_ms == 101.0 && r.iters[0].pass == 1, "1 from pass 1");
        CHECK(r.iters[1].elapsed_ms == 300.0 && r.iters[1].pass == 3, "2 from pass 3");
        CHECK(r.iters[2].elapsed_ms == 301.0 && r.iters[2].pass == 3, "3 from pass 3");
        CHECK(r.iters[3].elapsed_ms == 204.0 && r.iters[3].pass == 2 && r.iters[3].interval == 1, "4 from pass 2");
        CHECK(r.iters[4].elapsed_ms == 105.0 && r.iters[4].pass == 1, "5 from pass 1");
    }
    CHECK(has_warning(&r, "holds 3 runs appended"), "%s", r.n_warnings ? r.warnings[0] : "no warning");
    CHECK(has_warning(&r, "pass 2 starts at iteration 4 after the log reached 5"), "where pass 2 starts");
    CHECK(has_warning(&r, "iterations 4-5 come from passes before pass 3"), "the joined series");
    CHECK(has_warning(&r, "overlap_grad_reduce: False -> True"), "the arguments that changed");
    CHECK(!r.crashed, "the traceback came before iterations: no crash at the end");
    const char *v = tdm_run_log_arg(&r, "overlap_grad_reduce");
    CHECK(v && !strcmp(v, "True"), "the last block's arguments: %s", v ? v : "(none)");
    tdm_run_log_free(&r);
    tdm_sb_free(&sb);
}

static void test_cut_last_line(void) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    iter_line(&sb, 1, 4, 100.0, 1e-4, 5.0, 1.0);
    iter_line(&sb, 2, 4, 101.0, 1e-4, 4.9, 1.0);
    tdm_sb_puts(&sb, " iteration        3/       4 | consumed samples:           24 | elapsed time per iteration (ms): "
                     "102.0 | learning rate: 1.000000E-04 | global batch size:     8 | lm loss: 4.8");
    tdm_run_log r;
    tdm_error e;
    CHECK(read_text(sb.data, &r, &e) == 0, "%s", e.msg);
    CHECK(r.n_iters == 2, "the cut line is not used: %lld iterations", (long long)r.n_iters);
    CHECK(has_warning(&r, "its last line is an iteration line cut short"), "%s",
          r.n_warnings ? r.warnings[0] : "no warning");
    CHECK(has_warning(&r, "ends at iteration 2 of 4 without a traceback"), "the early end");
    tdm_run_log_free(&r);
    /* a complete last line without its newline is used */
    sb.len = 0;
    iter_line(&sb, 1, 1, 100.0, 1e-4, 5.0, 1.0);
    sb.data[--sb.len] = 0;
    CHECK(read_text(sb.data, &r, &e) == 0 && r.n_iters == 1 && r.n_warnings == 0, "%s",
          r.n_warnings ? r.warnings[0] : e.msg);
    tdm_run_log_free(&r);
    tdm_sb_free(&sb);
}

static void test_glued_lines(void) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    /* another rank's output before and after an iteration line, on the same line */
    tdm_sb_puts(&sb, "[Rank 1] (after 1 iterations) memory (MB) | allocated: 17.5 | max allocated: 46.7");
    iter_line(&sb, 1, 2, 100.0, 1e-4, 5.0, 1.0);
    sb.data[--sb.len] = 0;
    tdm_sb_puts(&sb, "[Rank 2] (after 1 iterations) memory (MB) | allocated: 17.5 | max allocated: 46.7\n");
    /* a line cut by a restart, glued to the next pass's first line */
    tdm_sb_puts(&sb, " iteration        2/       2 | consumed samples:           16 | elapsed time per it");
    iter_line(&sb, 2, 2, 111.0, 1e-4, 4.0, 1.0);
    tdm_run_log r;
    tdm_error e;
    CHECK(read_text(sb.data, &r, &e) == 0, "%s", e.msg);
    CHECK(r.n_iters == 2 && r.iters[0].elapsed_ms == 100.0 && r.iters[1].elapsed_ms == 111.0, "%lld iterations",
          (long long)r.n_iters);
    CHECK(r.n_warnings == 0, "%s", r.n_warnings ? r.warnings[0] : "");
    tdm_run_log_free(&r);
    tdm_sb_free(&sb);
}

static void test_no_iteration_line(void) {
    tdm_run_log r;
    tdm_error e;
    CHECK(read_text("hello\nworld\n", &r, &e) != 0, "a log without iterations");
    CHECK(strstr(e.msg, "made-up.log: no iteration line") && !strchr(e.msg, '\n'), "%s", e.msg);
    tdm_run_log_free(&r);
    CHECK(read_text("------------------------ arguments ------------------------\n  a ..... 1\n", &r, &e) != 0, "args");
    CHECK(strstr(e.msg, "an arguments block but no iteration line"), "%s", e.msg);
    tdm_run_log_free(&r);
    CHECK(read_text("", &r, &e) != 0 && strstr(e.msg, "empty"), "%s", e.msg);
    tdm_run_log_free(&r);
    CHECK(read_text(" iteration 1/ 2 | consumed samples: 8 | elapsed ti", &r, &e) != 0, "only a cut line");
    CHECK(strstr(e.msg, "cut short"), "%s", e.msg);
    tdm_run_log_free(&r);
}

/* tandem's own iteration line (src/train/log.c) goes through the same reader */
static void test_tandem_line(void) {
    const char *text = "[2026-11-29 18:00:00.123456] iteration        5/      20 | consumed samples:           40 | "
                       "elapsed time per iteration (ms): 812.3 | throughput per GPU (TFLOP/s/GPU): 0.0123 | learning "
                       "rate: 1.000000E-04 | global batch size:     8 | lm loss: 6.123457E+00 | loss scale: 1.0 | grad "
                       "norm: 2.345 | num zeros: 12.0 | params norm: 123.456 | mtp_1 loss: 7.000000E+00 | number of "
                       "skipped iterations:   0 | number of nan iterations:   0 |\n";
    tdm_run_log r;
    tdm_error e;
    CHECK(read_text(text, &r, &e) == 0, "%s", e.msg);
    if (r.n_iters == 1) {
        const tdm_run_iter *x = &r.iters[0];
        CHECK(x->iteration == 5 && x->interval == 5 && x->consumed_samples == 40 && x->global_batch == 8, "counts");
        CHECK(x->elapsed_ms == 812.3 && x->throughput == 0.0123 && x->lr == 1e-4 && x->lm_loss == 6.123457, "values");
        CHECK(x->grad_norm == 2.345 && x->num_zeros == 12.0 && x->params_norm == 123.456, "norms");
        CHECK(r.n_loss_names == 1 && !strcmp(r.loss_names[0], "mtp_1 loss") && x->other_loss[0] == 7.0, "other loss");
        CHECK(x->loss_prec == (TDM_RUN_PREC_SIG | 7) && x->grad_norm_prec == (TDM_RUN_PREC_DEC | 3), "precision");
    }
    CHECK(r.train_iters == 20, "of %lld", (long long)r.train_iters);
    tdm_run_log_free(&r);
}

/* Any split of the input gives the same run. */
static void test_chunking(void) {
    if (!fixtures_present("chunked reading of the real log")) return;
    FILE *f = fopen(fixture("megatron/logs/tp4_core_r0.5.0_200iter.log"), "rb");
    CHECK(f != NULL, "open");
    if (!f) return;
    char *buf = tdm_xmalloc(1 << 20);
    size_t n = fread(buf, 1, 1 << 20, f);
    fclose(f);
    tdm_run_log whole, parts;
    tdm_error e;
    CHECK(tdm_megatron_log_read_mem(buf, n, "whole", &whole, &e) == 0, "%s", e.msg);
    size_t sizes[] = {1, 7, 4096};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        tdm_run_log_init(&parts);
        tdm_megatron_parser *p = tdm_megatron_parser_new(&parts);
        for (size_t i = 0; i < n; i += sizes[k])
            tdm_megatron_parser_feed(p, buf + i, n - i < sizes[k] ? n - i : sizes[k]);
        CHECK(tdm_megatron_parser_finish(p, &e) == 0, "%s", e.msg);
        CHECK(parts.n_iters == whole.n_iters && parts.lines == whole.lines && parts.n_args == whole.n_args &&
                  parts.n_timers == whole.n_timers && parts.n_valid == whole.n_valid,
              "pieces of %zu", sizes[k]);
        CHECK(parts.n_iters == whole.n_iters &&
                  !memcmp(parts.iters, whole.iters, (size_t)whole.n_iters * sizeof *whole.iters),
              "records, pieces of %zu", sizes[k]);
        tdm_run_log_free(&parts);
    }
    tdm_run_log_free(&whole);
    free(buf);
}

static void test_long_line(void) {
    size_t n = TDM_RUN_LINE_MAX * 2 + 100;
    char *text = tdm_xmalloc(n + 400);
    memset(text, 'x', n);
    text[n] = '\n';
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    iter_line(&sb, 1, 1, 10.0, 1e-4, 5.0, 1.0);
    memcpy(text + n + 1, sb.data, sb.len + 1);
    tdm_run_log r;
    tdm_error e;
    CHECK(read_text(text, &r, &e) == 0 && r.n_iters == 1, "%s", e.msg);
    CHECK(r.long_lines == 1 && has_warning(&r, "longer than"), "long lines %lld", (long long)r.long_lines);
    tdm_run_log_free(&r);
    tdm_sb_free(&sb);
    free(text);
}

/* ---- decimals ---- */

static void test_numbers(void) {
    static const char *const cases[] = {"1.096171E+01",
                                        "388.3",
                                        "0.000E+00",
                                        "2.344E-07",
                                        "-12",
                                        "25.472",
                                        "8388608.0",
                                        "1e-30",
                                        "123456789012345678901234",
                                        "0.1",
                                        "3.14159265358979323846",
                                        "1.7976931348623157e308",
                                        "4.9e-324",
                                        "0.000001234"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        double v;
        tdm_run_prec p;
        size_t k = tdm_run_parse_number(cases[i], strlen(cases[i]), &v, &p);
        CHECK(k == strlen(cases[i]) && v == strtod(cases[i], NULL), "%s -> %.17g (%zu bytes)", cases[i], v, k);
    }
    double v;
    tdm_run_prec p;
    tdm_run_parse_number("1.096171E+01", 12, &v, &p);
    CHECK(p == (TDM_RUN_PREC_SIG | 7), "%#x", p);
    tdm_run_parse_number("0.000E+00", 9, &v, &p);
    CHECK(p == (TDM_RUN_PREC_SIG | 4), "%#x", p);
    tdm_run_parse_number("25.472", 6, &v, &p);
    CHECK(p == (TDM_RUN_PREC_DEC | 3), "%#x", p);
    CHECK(tdm_run_parse_number("nan |", 5, &v, &p) == 3 && isnan(v), "nan");
    CHECK(tdm_run_parse_number("-inf", 4, &v, &p) == 4 && isinf(v) && v < 0, "-inf");
    CHECK(tdm_run_parse_number("abc", 3, &v, &p) == 0 && tdm_run_parse_number(".", 1, &v, &p) == 0, "not numbers");
    CHECK(tdm_run_parse_number("12.5 |", 6, &v, &p) == 4 && v == 12.5, "stops at the blank");
    /* the same value printed with 4 and 7 significant digits is equal at 4 */
    tdm_run_prec p4 = TDM_RUN_PREC_SIG | 4, p7 = TDM_RUN_PREC_SIG | 7, d3 = TDM_RUN_PREC_DEC | 3;
    CHECK(tdm_run_equal_at_precision(2.344E-07, p4, 2.343750E-07, p7), "2.344E-07 = 2.343750E-07 at 4 digits");
    CHECK(!tdm_run_equal_at_precision(2.344E-07, p4, 2.345750E-07, p7), "2.344E-07 != 2.345750E-07");
    CHECK(!tdm_run_equal_at_precision(10.96171, p7, 10.96172, p7), "same precision: exact");
    CHECK(tdm_run_equal_at_precision(NAN, p7, NAN, p7) && !tdm_run_equal_at_precision(NAN, p7, 1.0, p7), "NaN");
    CHECK(tdm_run_equal_at_precision(25.472, d3, 25.4718, TDM_RUN_PREC_DEC | 4), "decimals");
    char s[64];
    tdm_run_prec_describe(p7, s, sizeof s);
    CHECK(!strcmp(s, "7 significant digits"), "%s", s);
}

int main(void) {
    RUN(test_complete_run);
    RUN(test_crash_while_saving);
    RUN(test_ansi_cr_crlf);
    RUN(test_appended_runs);
    RUN(test_cut_last_line);
    RUN(test_glued_lines);
    RUN(test_no_iteration_line);
    RUN(test_tandem_line);
    RUN(test_chunking);
    RUN(test_long_line);
    RUN(test_numbers);
    return TEST_SUMMARY();
}
