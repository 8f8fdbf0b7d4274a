/* Tests of `tandem ab` on finished runs (src/ab/ab_runs.c, ab_runs_report.c): the three
 * overlap off/on golden-value pairs of Megatron-LM's functional tests and the real Megatron logs
 * under ../shared/fixtures, MindSpeed-MM baselines, and made-up logs for repeats, the DDP line
 * confirmation, sides that differ in model or batch, and bad input. summary.json must carry every
 * key the in-process protocol writes (report.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ab/ab.h"
#include "ab/ab_runs.h"
#include "core/alloc.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "harness.h"
#include "runs/fixtures.h"

#define GPT  "megatron/test_cases/gpt/"
#define P1_A GPT "gpt3_mr_tp1_pp4_vp1_dgx_a100_1N8G"
#define P1_B GPT "gpt3_345m_nightly_dgx_a100_1N8G_tp1_pp4_vp1_overlap_grad_reduce"
#define P2_A GPT "gpt3_345m_nightly_dgx_a100_1N8G_tp4_pp1"
#define P2_B GPT "gpt3_345m_nightly_dgx_a100_1N8G_tp4_pp1_overlap_grad_reduce"
#define P3_A GPT "gpt3_mcore_te_tp4_pp1_dist_optimizer_overlap_grad_reduce"
#define P3_B GPT "gpt3_mcore_te_tp4_pp1_dist_optimizer_overlap_grad_reduce_param_gather"

static char tmp[64];

static int ab(const char *const *a, int na, const char *const *b, int nb, const char *window, tdm_ab_runs_result *r,
              tdm_strbuf *table, tdm_error *e) {
    tdm_ab_runs_options o;
    tdm_ab_runs_options_default(&o);
    o.runs[0] = a, o.n_runs[0] = na, o.runs[1] = b, o.n_runs[1] = nb;
    o.bootstrap_resamples = 500;
    snprintf(o.out, sizeof o.out, "%s/report", tmp);
    if (window) {
        o.window_given = 1;
        if (tdm_ab_parse_window(window, &o.window_lo, &o.window_hi, e) != 0) return -1;
    }
    return tdm_ab_runs(&o, r, table, e);
}

static int pair(const char *a, const char *b, const char *window, tdm_ab_runs_result *r, tdm_strbuf *table,
                tdm_error *e) {
    const char *pa[1] = {a}, *pb[1] = {b};
    return ab(pa, 1, pb, 1, window, r, table, e);
}

static int has(char *const *list, int n, const char *part) {
    for (int i = 0; i < n; i++)
        if (strstr(list[i], part)) return 1;
    return 0;
}

/* ---- the golden-value pairs ---- */

static void test_pair1_deterministic(void) {
    if (!fixtures_present("golden pair 1")) return;
    tdm_ab_runs_result r;
    tdm_strbuf t;
    tdm_sb_init(&t);
    tdm_error e;
    CHECK(pair(fixture(P1_A), fixture(P1_B), "5:50", &r, &t, &e) == 0, "%s", e.msg);
    CHECK(r.n_diff == 1 && strstr(r.diff_lines[0], "--overlap-grad-reduce: (absent) -> true"), "diff %d: %s", r.n_diff,
          r.n_diff ? r.diff_lines[0] : "");
    const tdm_ab_runs_check *loss = &r.checks[3];
    CHECK(loss->verdict == TDM_AB_RUNS_EQUAL && loss->compared == 11, "loss %d over %lld", loss->verdict,
          (long long)loss->compared);
    CHECK(t.data && strstr(t.data, "identical at the printed precision"), "the table says so");
    CHECK(has(r.limits, r.n_limits, "bitwise equality cannot be checked from logs"), "what logs cannot tell");
    CHECK_NEAR(r.side[0].median_step_ms, 156.055, 1e-9);
    CHECK_NEAR(r.side[1].median_step_ms, 163.71, 1e-9);
    CHECK(r.window_lo == 5 && r.window_hi == 50 && r.side[0].window_lines == 10, "window %lld:%lld, %lld lines",
          (long long)r.window_lo, (long long)r.window_hi, (long long)r.side[0].window_lines);
    CHECK(r.checks[0].verdict == TDM_AB_RUNS_ABSENT && r.checks[4].verdict == TDM_AB_RUNS_ABSENT,
          "no lr, no grad norm");
    CHECK(r.checks[2].verdict == TDM_AB_RUNS_EQUAL, "global batch from model_config.yaml");
    CHECK(isfinite(r.step_time_ci.lo_pct) && r.step_time_change_pct > 0, "slower with overlap: %+.2f%%",
          r.step_time_change_pct);
    tdm_ab_runs_result_free(&r);
    /* the default window: 21:200 clipped to the 50 iterations, and said so */
    CHECK(pair(fixture(P1_A), fixture(P1_B), NULL, &r, NULL, &e) == 0, "%s", e.msg);
    CHECK(r.window_lo == 21 && r.window_hi == 50 && strstr(r.window_note, "clipped to 21:50"), "%s", r.window_note);
    tdm_ab_runs_result_free(&r);
    tdm_sb_free(&t);
}

static void test_pair2(void) {
    if (!fixtures_present("golden pair 2")) return;
    tdm_ab_runs_result r;
    tdm_error e;
    CHECK(pair(fixture(P2_A), fixture(P2_B), "5:50", &r, NULL, &e) == 0, "%s", e.msg);
    CHECK(r.n_diff == 1 && strstr(r.diff_lines[0], "--overlap-grad-reduce"), "diff %d", r.n_diff);
    const tdm_ab_runs_check *loss = &r.checks[3];
    CHECK(loss->verdict == TDM_AB_RUNS_DIFFER && loss->equal == 0 && loss->compared == 11, "differ at every step");
    CHECK(loss->max_dev_at == 40 && fabs(loss->max_rel_dev - 2.8e-4) < 0.05e-4, "%.3g at %lld", loss->max_rel_dev,
          (long long)loss->max_dev_at);
    CHECK_NEAR(r.side[0].median_step_ms, 289.075, 1e-9);
    CHECK_NEAR(r.side[1].median_step_ms, 308.18, 1e-9);
    CHECK(!has(r.warnings, r.n_warnings, "losses differ by up to"), "2.8e-4 is not a mismatch");
    tdm_ab_runs_result_free(&r);
}

static void test_pair3(void) {
    if (!fixtures_present("golden pair 3")) return;
    tdm_ab_runs_result r;
    tdm_error e;
    CHECK(pair(fixture(P3_A "/golden_values_dev_dgx_a100.json"), fixture(P3_B "/golden_values_dev_dgx_a100.json"),
               "5:50", &r, NULL, &e) == 0,
          "%s", e.msg);
    CHECK(r.n_diff == 1 && strstr(r.diff_lines[0], "--overlap-param-gather: (absent) -> true"), "diff %d: %s", r.n_diff,
          r.n_diff ? r.diff_lines[0] : "");
    const tdm_ab_runs_check *loss = &r.checks[3];
    CHECK(loss->equal == 2 && loss->compared == 11, "identical at %lld of %lld", (long long)loss->equal,
          (long long)loss->compared);
    CHECK(loss->max_dev_at == 40 && fabs(loss->max_rel_dev - 2.6e-5) < 0.05e-5, "%.3g at %lld", loss->max_rel_dev,
          (long long)loss->max_dev_at);
    CHECK_NEAR(r.side[0].median_step_ms, 304.505, 1e-9);
    CHECK_NEAR(r.side[1].median_step_ms, 405.835, 1e-9);
    tdm_ab_runs_result_free(&r);
    /* the lts files: logged every 5 steps against every step, losses of other runs */
    CHECK(pair(fixture(P3_A "/golden_values_lts_dgx_a100.json"), fixture(P3_B "/golden_values_lts_dgx_a100.json"), NULL,
               &r, NULL, &e) == 0,
          "%s", e.msg);
    CHECK(r.common_steps == 11 && r.checks[3].compared == 11, "aligned: %lld", (long long)r.common_steps);
    CHECK(has(r.warnings, r.n_warnings,
              "log different iterations (baseline 11 from 1 to 50, every 5; candidate 50 "
              "from 1 to 50, every 1)"),
          "%s", r.n_warnings ? r.warnings[0] : "no warning");
    CHECK(has(r.warnings, r.n_warnings, "losses differ by up to 4.7% (iteration 45)"), "the mismatch flagged");
    CHECK(r.checks[3].max_dev_at == 45 && fabs(r.checks[3].max_rel_dev - 0.0466) < 0.001, "%.4g",
          r.checks[3].max_rel_dev);
    CHECK(r.side[0].held_lo == 1 && r.side[1].held_lo == 2, "iteration time from step 2: %lld",
          (long long)r.side[1].held_lo);
    CHECK(r.side[0].window_lines == 6 && r.side[1].window_lines == 30, "window lines %lld %lld",
          (long long)r.side[0].window_lines, (long long)r.side[1].window_lines);
    tdm_ab_runs_result_free(&r);
}

/* ---- summary.json: the in-process protocol's keys, and more ---- */

/* Fills a minimal in-process result (ab.h) and writes its report into dir. */
static void inprocess_report(const char *dir) {
    tdm_ab_options o;
    tdm_ab_result r;
    tdm_ab_options_default(&o);
    o.steps = 8, o.window_lo = 2, o.window_hi = 8, o.repeats = 1, o.bootstrap_resamples = 50;
    snprintf(o.out, sizeof o.out, "%s", dir);
    memset(&r, 0, sizeof r);
    r.world = 1;
    for (int s = 0; s < 2; s++) {
        tdm_ab_side *side = &r.side[s];
        side->label = s ? "candidate" : "baseline";
        side->repeats = 1, side->steps = 8;
        side->records = tdm_xcalloc(8, sizeof *side->records);
        for (int i = 0; i < 8; i++)
            side->records[i] =
                (tdm_step_record){.iteration = i + 1, .global_batch_size = 4, .loss = 1, .step_ms = 10 + i};
        snprintf(side->trace_dir, sizeof side->trace_dir, "/nonexistent");
    }
    tdm_ab_compute(&o, &r);
    tdm_error e;
    CHECK(tdm_mkdirs(dir, &e) == 0 && tdm_ab_write_report(&o, &r, &e) == 0, "%s", e.msg);
    tdm_ab_result_free(&r);
}

static tdm_json_doc *read_json(const char *path) {
    size_t len;
    tdm_error e;
    char *text = tdm_read_file(path, 1 << 24, &len, &e);
    tdm_json_doc *d = text ? tdm_json_parse(text, len, path, &e) : NULL;
    CHECK(d != NULL, "%s", e.msg);
    free(text);
    return d;
}

static void keys_included(const tdm_json *want, const tdm_json *have, const char *where) {
    /* what only a live protocol records: the host's load around each timing run, a stop by a signal */
    static const char *const live_only[] = {"partial",     "stop_signal",     "finished_runs",
                                            "local_ranks", "runs_under_load", "load"};
    for (size_t i = 0; want && i < want->len; i++) {
        int skip = 0;
        for (size_t k = 0; k < sizeof live_only / sizeof *live_only; k++) skip |= !strcmp(want->keys[i], live_only[k]);
        if (skip && !strcmp(where, "")) continue;
        const tdm_json *h = tdm_json_get(have, want->keys[i]);
        CHECK(h != NULL, "summary.json on runs lacks %s%s", where, want->keys[i]);
        if (h && want->items[i]->type == TDM_JSON_OBJECT && h->type == TDM_JSON_OBJECT && !strcmp(where, "")) {
            char inner[64];
            snprintf(inner, sizeof inner, "%s.", want->keys[i]);
            keys_included(want->items[i], h, inner);
        }
    }
}

static void test_summary_keys(void) {
    if (!fixtures_present("summary.json keys on golden values")) return;
    char dir[128];
    snprintf(dir, sizeof dir, "%s/inprocess", tmp);
    inprocess_report(dir);
    tdm_ab_runs_result r;
    tdm_error e;
    CHECK(pair(fixture(P2_A), fixture(P2_B), NULL, &r, NULL, &e) == 0, "%s", e.msg);
    tdm_ab_runs_result_free(&r);
    char path[200];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    tdm_json_doc *want = read_json(path);
    snprintf(path, sizeof path, "%s/report/summary.json", tmp);
    tdm_json_doc *have = read_json(path);
    if (want && have) {
        keys_included(tdm_json_root(want), tdm_json_root(have), "");
        const tdm_json *root = tdm_json_root(have);
        const tdm_json *v = tdm_json_get(root, "loss_bitwise_equal");
        CHECK(v && v->type == TDM_JSON_NULL, "bitwise equality is not known from logs");
        v = tdm_json_get(root, "loss_equal_at_printed_precision");
        CHECK(v && v->type == TDM_JSON_FALSE, "loss differs at the printed precision");
        v = tdm_json_get(root, "config_diff");
        CHECK(v && v->len == 1, "config_diff");
        double d = 0;
        tdm_json_get_num(tdm_json_get(tdm_json_get(root, "precision"), "loss"), "max_rel_dev", &d, &e);
        CHECK(fabs(d - 2.8e-4) < 0.05e-4, "precision.loss.max_rel_dev %g", d);
    }
    tdm_json_free(want);
    tdm_json_free(have);
    static const char *const files[] = {"report.md", "summary.json",  "steps_baseline.csv", "steps_candidate.csv",
                                        "loss.svg",  "step_time.svg", "step_time_hist.svg"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/report/%s", tmp, files[i]);
        CHECK(tdm_file_exists(path), "%s missing", files[i]);
    }
}

/* ---- MindSpeed-MM baselines and the real logs as runs ---- */

static void test_mindspeed_runs(void) {
    if (!fixtures_present("MindSpeed-MM baselines as runs")) return;
    const char *v0 = fixture("mindspeed-mm/baseline_results/finetune_qwen3vl_30B.json");
    tdm_ab_runs_result r;
    tdm_error e;
    CHECK(pair(v0, v0, NULL, &r, NULL, &e) == 0, "%s", e.msg);
    CHECK(r.window_lo == 2 && r.window_hi == 4 && strstr(r.window_note, "warm-up"), "%s", r.window_note);
    CHECK_NEAR(r.side[0].mean_step_ms, 9638.767, 1e-3);
    CHECK(r.checks[3].verdict == TDM_AB_RUNS_EQUAL && r.checks[3].compared == 4, "the same file: equal losses");
    CHECK(isnan(r.side[0].samples_per_s), "no batch size, no samples/s");
    tdm_ab_runs_result_free(&r);
}

static void test_real_logs(void) {
    if (!fixtures_present("the real Megatron logs as runs")) return;
    tdm_ab_runs_result r;
    tdm_strbuf t;
    tdm_sb_init(&t);
    tdm_error e;
    CHECK(pair(fixture("megatron/logs/tp4_core_r0.5.0_200iter.log"),
               fixture("megatron/logs/tp4_main_crash_at_iter50.log"), NULL, &r, &t, &e) == 0,
          "%s", e.msg);
    CHECK(r.window_lo == 21 && r.window_hi == 50 && strstr(r.window_note, "1-200 (baseline) and 1-50 (candidate)"),
          "%s", r.window_note);
    CHECK(r.side[0].window_lines == 3 && r.side[0].skipped_iterations == 15 && r.side[1].skipped_iterations == 15,
          "lines %lld", (long long)r.side[0].window_lines);
    CHECK(r.checks[1].verdict == TDM_AB_RUNS_EQUAL && r.checks[0].verdict == TDM_AB_RUNS_EQUAL,
          "consumed samples, and lr printed with 3 and 6 decimals, equal");
    CHECK(has(r.warnings, r.n_warnings, "failed after iteration 50 of 200"), "the crash");
    CHECK(r.ddp_line_confirms == -1, "a DDP line on one side only");
    CHECK(t.data && strstr(t.data, "0 and 0 / 15 and 15"), "NaN and skipped");
    tdm_ab_runs_result_free(&r);
    tdm_sb_free(&t);
}

/* ---- made-up logs ---- */

typedef struct fake_log {
    const char *overlap; /* overlap_grad_reduce argument */
    const char *ddp;     /* its value in the DDP line (NULL: no line) */
    int hidden, gbs, n;
    double ms, loss_shift;
} fake_log;

static const char *write_log(const char *name, const fake_log *f, int seed) {
    static char paths[8][160];
    static int k;
    char *path = paths[k++ % 8];
    snprintf(path, 160, "%s/%s", tmp, name);
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_sb_printf(&sb,
                  "------------------------ arguments ------------------------\n"
                  "  global_batch_size ............................... %d\n"
                  "  hidden_size ..................................... %d\n"
                  "  overlap_grad_reduce ............................. %s\n"
                  "  save ............................................ /ck/%s\n"
                  "  world_size ...................................... 8\n"
                  "-------------------- end of arguments ---------------------\n",
                  f->gbs, f->hidden, f->overlap, name);
    if (f->ddp)
        tdm_sb_printf(&sb,
                      "Setting up DistributedDataParallel with config DistributedDataParallelConfig("
                      "grad_reduce_in_fp32=False, overlap_grad_reduce=%s, bucket_size=None)\n",
                      f->ddp);
    for (int i = 1; i <= f->n; i++) {
        double ms = f->ms * (1.0 + 0.01 * sin(i * 1.7 + seed));
        tdm_sb_printf(&sb,
                      " iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f | learning "
                      "rate: %.6E | global batch size: %5d | lm loss: %.6E | loss scale: 1.0 | grad norm: %.3f | "
                      "number of skipped iterations:   0 | number of nan iterations:   0 |\n",
                      i, f->n, i * f->gbs, ms, 1e-4 * i / f->n, f->gbs, 8.0 - 0.01 * i + f->loss_shift,
                      2.0 - 0.001 * i);
    }
    CHECK(tdm_write_file_atomic(path, sb.data, sb.len, NULL) == 0, "write %s", path);
    tdm_sb_free(&sb);
    return path;
}

static void test_repeats_and_ddp(void) {
    fake_log a = {"False", "False", 512, 16, 60, 100.0, 0}, b = {"True", "True", 512, 16, 60, 90.0, 0};
    const char *pa[2] = {write_log("a1.log", &a, 1), write_log("a2.log", &a, 2)};
    const char *pb[3] = {write_log("b1.log", &b, 3), write_log("b2.log", &b, 4), write_log("b3.log", &b, 5)};
    tdm_ab_runs_result r;
    tdm_error e;
    CHECK(ab(pa, 2, pb, 3, NULL, &r, NULL, &e) == 0, "%s", e.msg);
    CHECK(r.n_diff == 1 && !strcmp(r.diff_lines[0], "overlap_grad_reduce: False -> True"), "diff %d: %s", r.n_diff,
          r.n_diff ? r.diff_lines[0] : "");
    CHECK(r.n_skipped == 1 && strstr(r.skipped_lines[0], "save: /ck/a1.log | /ck/b1.log"), "output locations");
    CHECK(r.ddp_line_confirms == 1, "the DDP lines confirm the flag");
    CHECK(r.window_lo == 21 && r.window_hi == 60, "window %lld:%lld", (long long)r.window_lo, (long long)r.window_hi);
    CHECK(r.side[0].window_lines == 80 && r.side[1].window_lines == 120, "lines %lld %lld",
          (long long)r.side[0].window_lines, (long long)r.side[1].window_lines);
    CHECK(isfinite(r.runs_ci.lo_pct) && r.runs_ci.hi_pct < 0, "Welch interval between runs [%g, %g]", r.runs_ci.lo_pct,
          r.runs_ci.hi_pct);
    CHECK(strstr(r.noise_sentence, "Between whole runs") != NULL, "%s", r.noise_sentence);
    CHECK(r.step_time_change_pct < -9 && r.step_time_change_pct > -11, "%g", r.step_time_change_pct);
    CHECK(r.checks[3].verdict == TDM_AB_RUNS_EQUAL && r.repeats_equal && r.world_size == 8, "loss, repeats, world");
    CHECK_NEAR(r.side[0].samples_per_s, 16 * 1000.0 / r.side[0].mean_step_ms, 1e-9);
    tdm_ab_runs_result_free(&r);
    /* a DDP line that contradicts its arguments */
    fake_log c = b;
    c.ddp = "False";
    const char *pc[1] = {write_log("c.log", &c, 6)};
    CHECK(ab(pa, 1, pc, 1, NULL, &r, NULL, &e) == 0, "%s", e.msg);
    CHECK(r.ddp_line_confirms == 0, "the DDP line shows False for a True argument");
    tdm_ab_runs_result_free(&r);
}

static void test_different_work(void) {
    fake_log a = {"False", NULL, 512, 16, 40, 100.0, 0}, b = {"True", NULL, 1024, 32, 40, 100.0, 0.5};
    const char *pa[1] = {write_log("w_a.log", &a, 1)}, *pb[1] = {write_log("w_b.log", &b, 2)};
    tdm_ab_runs_result r;
    tdm_error e;
    CHECK(ab(pa, 1, pb, 1, NULL, &r, NULL, &e) == 0, "%s", e.msg);
    CHECK(has(r.warnings, r.n_warnings, "different models (hidden_size: 512 -> 1024)"), "model warning");
    CHECK(has(r.warnings, r.n_warnings, "different global batches (16 and 32 samples)"), "batch warning");
    CHECK(has(r.warnings, r.n_warnings, "settings differ: a change cannot be put down"), "several settings");
    CHECK(r.checks[2].verdict == TDM_AB_RUNS_DIFFER && r.checks[1].verdict == TDM_AB_RUNS_DIFFER, "batch rows");
    CHECK(r.checks[3].verdict == TDM_AB_RUNS_DIFFER, "loss");
    tdm_ab_runs_result_free(&r);
}

static void test_bad_input(void) {
    fake_log a = {"False", NULL, 512, 16, 30, 100.0, 0};
    const char *good[1] = {write_log("g.log", &a, 1)};
    char missing[160], empty[160];
    snprintf(missing, sizeof missing, "%s/missing.log", tmp);
    snprintf(empty, sizeof empty, "%s/noiter.log", tmp);
    CHECK(tdm_write_file_atomic(empty, "starting\nsetting up\n", 20, NULL) == 0, "write");
    const char *pm[1] = {missing}, *pe[1] = {empty};
    tdm_ab_runs_result r;
    tdm_error e;
    CHECK(ab(good, 1, pm, 1, NULL, &r, NULL, &e) != 0, "missing run");
    CHECK(strstr(e.msg, "--candidate-run: ") == e.msg && strstr(e.msg, "missing.log: No such file"), "%s", e.msg);
    tdm_ab_runs_result_free(&r);
    CHECK(ab(pe, 1, good, 1, NULL, &r, NULL, &e) != 0, "no iteration line");
    CHECK(strstr(e.msg, "--baseline-run: ") == e.msg && strstr(e.msg, "noiter.log: no iteration line"), "%s", e.msg);
    tdm_ab_runs_result_free(&r);
    CHECK(ab(good, 1, good, 1, "100:200", &r, NULL, &e) != 0, "a window past the runs");
    CHECK(strstr(e.msg, "--window 100:200 holds no iteration both sides logged"), "%s", e.msg);
    tdm_ab_runs_result_free(&r);
    CHECK(ab(good, 1, good, 1, "5:10", &r, NULL, &e) == 0 && r.window_lo == 5 && r.window_hi == 10, "%s", e.msg);
    CHECK(has(r.warnings, r.n_warnings, "No argument differs"), "an A/A comparison is said");
    tdm_ab_runs_result_free(&r);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "/tmp/tdm_test_ab_runs_%d", (int)getpid());
    tdm_mkdirs(tmp, NULL);
    RUN(test_pair1_deterministic);
    RUN(test_pair2);
    RUN(test_pair3);
    RUN(test_summary_keys);
    RUN(test_mindspeed_runs);
    RUN(test_real_logs);
    RUN(test_repeats_and_ddp);
    RUN(test_different_work);
    RUN(test_bad_input);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return TEST_SUMMARY();
}
