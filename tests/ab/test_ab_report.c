/* Tests of the A/B driver's arithmetic and report (src/ab/ab.c, report.c) on made-up
 * step records, without training: window statistics, the precision check (equal runs,
 * a loss that departs at a known step, a NaN), and that the report directory holds every
 * file with a summary.json carrying the documented keys. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/rng.h"
#include "harness.h"
#include "ab/ab.h"

enum { STEPS = 40, MAX_REPEATS = 8 };
static int fake_repeats = 2;             /* timing runs per side that fake() makes */
static double run_speed[2][MAX_REPEATS]; /* [side][repeat]: a host slower during that run (0 = 1) */

/* Fills both sides: baseline steps take `base_ms`, candidate `cand_ms`, with 2% noise;
 * losses and everything else identical. */
static void fake(tdm_ab_options *o, tdm_ab_result *r, double base_ms, double cand_ms) {
    tdm_ab_options_default(o);
    o->steps = STEPS;
    o->window_lo = 11;
    o->window_hi = STEPS;
    o->repeats = fake_repeats;
    o->bootstrap_resamples = 500;
    memset(r, 0, sizeof *r);
    r->world = 2;
    r->fingerprints_equal = 1;
    for (int s = 0; s < 2; s++) {
        tdm_ab_side *side = &r->side[s];
        side->label = s ? "candidate" : "baseline";
        side->repeats = fake_repeats;
        side->steps = STEPS;
        side->records = tdm_xcalloc(fake_repeats * STEPS, sizeof *side->records);
        for (int k = 0; k < fake_repeats; k++)
            for (int i = 0; i < STEPS; i++) {
                tdm_step_record *x = &side->records[k * STEPS + i];
                x->iteration = i + 1;
                x->global_batch_size = 8;
                x->consumed_samples = 8 * (i + 1);
                x->lr = 1e-3 * (i + 1) / STEPS;
                x->loss = 5.0 / (1.0 + 0.1 * i);
                x->grad_norm = 1.0 + 0.01 * i;
                double noise = 0.02 * tdm_rng_normal(5, (uint64_t)(s * 10 + k), (uint64_t)i);
                x->step_ms = (s ? cand_ms : base_ms) * (1.0 + noise) * (run_speed[s][k] ? run_speed[s][k] : 1.0);
                x->model_flops = 3.0e9; /* per step, both sides: the same batches */
                /* CPU per step: compute 60% of the step, the communication thread 10 ms more on the candidate */
                x->compute_cpu_ms = 0.6 * x->step_ms;
                x->comm_thread_cpu_ms = s ? 25.0 : 15.0;
                x->cpu_ms = x->compute_cpu_ms + x->comm_thread_cpu_ms + 1.0;
            }
        side->comm_ms = side->hidden_comm_ms = side->exposed_comm_ms = NAN;
        side->compute_ms = side->data_wait_ms = side->ideal_step_ms = side->prof_step_ms = NAN;
        side->overlap_efficiency = side->sched_ideal_step_ms = side->sched_overlap_efficiency = NAN;
        snprintf(side->ddp_config_line, sizeof side->ddp_config_line,
                 "DistributedDataParallelConfig(overlap_grad_reduce=%s)", s ? "True" : "False");
        snprintf(side->trace_dir, sizeof side->trace_dir, "/nonexistent");
    }
    r->diff_lines = tdm_xcalloc(2, sizeof(char *));
    r->diff_lines[r->n_diff++] = tdm_xstrdup("overlap_grad_reduce: False -> True");
    r->same_lines = tdm_xcalloc(2, sizeof(char *));
    r->same_lines[r->n_same++] = tdm_xstrdup("seed = 1234");
}

static void test_statistics_and_equal_precision(void) {
    tdm_ab_options o;
    tdm_ab_result r;
    fake(&o, &r, 100.0, 90.0);
    tdm_ab_compute(&o, &r);
    CHECK_NEAR(r.side[0].mean_step_ms, 100.0, 1.0);
    CHECK_NEAR(r.side[1].mean_step_ms, 90.0, 1.0);
    CHECK(r.side[0].window_samples == 8 * 30 * fake_repeats, "samples in the window: %lld",
          (long long)r.side[0].window_samples);
    /* samples/s = samples / window time = 8 / (mean step in s) */
    CHECK_NEAR(r.side[0].samples_per_s, 8.0 / (r.side[0].mean_step_ms / 1e3), 1e-9);
    /* model GFLOP/s per rank = FLOPs / window time / ranks */
    CHECK_NEAR(r.side[1].model_gflops_per_rank, 3.0 / (r.side[1].mean_step_ms / 1e3) / r.world, 1e-9);
    CHECK_NEAR(r.step_time_change_pct, -10.0, 1.0);
    CHECK(r.step_time_ci.lo_pct < r.step_time_change_pct && r.step_time_change_pct < r.step_time_ci.hi_pct &&
              r.step_time_ci.hi_pct < 0,
          "interval [%g, %g] excludes 0", r.step_time_ci.lo_pct, r.step_time_ci.hi_pct);
    /* 2 repeats per side: the steps' interval excludes 0, but drift between runs cannot be told from the effect,
     * so the verdict says so and calls nothing a result */
    CHECK(strstr(r.noise_sentence, "lower") && strstr(r.noise_sentence, "drift between runs cannot be separated") &&
              !strstr(r.noise_sentence, "excludes 0"),
          "%s", r.noise_sentence);
    CHECK_NEAR(r.throughput_change_pct, 100.0 * (100.0 / 90.0 - 1.0), 1.5);
    CHECK(r.lr_equal && r.consumed_samples_equal && r.global_batch_equal && r.loss_bitwise_equal &&
              r.grad_norm_bitwise_equal && r.all_finite && r.repeats_bitwise_equal,
          "identical runs pass every precision row");
    CHECK(r.nan_iterations == 0 && r.skipped_iterations == 0, "no NaN");
    CHECK(r.ddp_line_confirms == 1, "the DDP lines show False and True");
    snprintf(r.side[1].ddp_config_line, sizeof r.side[1].ddp_config_line, "X(overlap_grad_reduce=False)");
    tdm_ab_compute(&o, &r);
    CHECK(r.ddp_line_confirms == 0, "a candidate whose DDP line says False is caught");
    snprintf(r.side[1].ddp_config_line, sizeof r.side[1].ddp_config_line, "X(overlap_grad_reduce=True)");
    tdm_ab_compute(&o, &r); /* idempotent */
    CHECK(r.nan_iterations == 0 && r.side[0].window_samples == 8 * 30 * fake_repeats, "compute twice, same counts");
    CHECK(r.ci_paired == 1 && r.ci_block == 4, "paired, blocks of ceil(30^(1/3)) = 4: %d, %d", r.ci_paired, r.ci_block);
    /* CPU: window means; cores busy = CPU / time over the same steps */
    CHECK_NEAR(r.side[0].comm_cpu_ms, 15.0, 1e-9);
    CHECK_NEAR(r.side[1].comm_cpu_ms, 25.0, 1e-9);
    CHECK_NEAR(r.side[1].compute_cpu_ms, 0.6 * r.side[1].mean_step_ms, 1e-9);
    CHECK_NEAR(r.side[1].cpu_ms, 0.6 * r.side[1].mean_step_ms + 26.0, 1e-9);
    CHECK_NEAR(r.side[0].cores_busy, r.side[0].cpu_ms / r.side[0].mean_step_ms, 1e-9);
    snprintf(r.side[1].args.comm_progress, sizeof r.side[1].args.comm_progress, "inline");
    tdm_ab_compute(&o, &r);
    CHECK(isnan(r.side[1].comm_cpu_ms) && isfinite(r.side[0].comm_cpu_ms), "inline progress: no thread, no figure");
    snprintf(r.side[1].args.comm_progress, sizeof r.side[1].args.comm_progress, "thread");
    r.fingerprints_equal = 0; /* the candidate's flags changed the data: its steps pair with nothing */
    tdm_ab_compute(&o, &r);
    CHECK(r.ci_paired == 0 && isfinite(r.step_time_ci.lo_pct), "different inputs: an unpaired interval");
    tdm_ab_result_free(&r);
}

/* From 3 repeats on, the change between whole runs: its interval sees a host that drifts from run to run,
 * which the steps' interval (within runs) does not. */
static void test_between_runs(void) {
    tdm_ab_options o;
    tdm_ab_result r;
    fake(&o, &r, 100.0, 90.0);
    tdm_ab_compute(&o, &r);
    CHECK(r.runs_ci_pairs == 0 && isnan(r.runs_ci.lo_pct) && !strstr(r.noise_sentence, "whole runs"),
          "2 repeats: no interval between runs");
    tdm_ab_result_free(&r);

    fake_repeats = 4; /* steady host: both intervals exclude 0 and agree */
    fake(&o, &r, 100.0, 90.0);
    tdm_ab_compute(&o, &r);
    CHECK(r.runs_ci_pairs == 4 && r.runs_ci.hi_pct < 0 && fabs(r.runs_ci.change_pct + 10.0) < 1.0,
          "4 pairs, -10%%: %g [%g, %g]", r.runs_ci.change_pct, r.runs_ci.lo_pct, r.runs_ci.hi_pct);
    CHECK(!strncmp(r.noise_sentence, "Between whole runs the mean step time is lower", 46) &&
              strstr(r.noise_sentence, "excludes 0") && !strstr(r.noise_sentence, "cannot be separated"),
          "from 3 repeats on the runs' interval leads: %s", r.noise_sentence);
    tdm_ab_result_free(&r);

    /* a drifting host: every other run 12% slower, the candidate's runs out of step with the baseline's. Within
     * runs the candidate is 5% faster at 2% noise per step, and the steps' interval excludes 0; between runs
     * the pairs change by +6.6% and -15.2% in turn, and that interval must contain 0 and say so. */
    const double slow[2][4] = {{1.0, 1.12, 1.0, 1.12}, {1.12, 1.0, 1.12, 1.0}};
    for (int side = 0; side < 2; side++) memcpy(run_speed[side], slow[side], sizeof slow[side]);
    fake(&o, &r, 100.0, 95.0);
    tdm_ab_compute(&o, &r);
    CHECK(r.step_time_ci.hi_pct < 0, "steps' interval [%g, %g] excludes 0", r.step_time_ci.lo_pct,
          r.step_time_ci.hi_pct);
    CHECK(r.runs_ci.lo_pct < 0 && r.runs_ci.hi_pct > 0, "runs' interval [%g, %g] contains 0", r.runs_ci.lo_pct,
          r.runs_ci.hi_pct);
    CHECK(strstr(r.noise_sentence, "not yet a result") != NULL, "%s", r.noise_sentence);
    tdm_ab_result_free(&r);
    memset(run_speed, 0, sizeof run_speed);
    fake_repeats = 2;
}

/* The host around each timing run: /proc readings, the rule that flags a run, and the verdict that says so. */
static void test_host_load(void) {
    char dir[] = "/tmp/tdm_ab_loadXXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char la[128], st[128];
    snprintf(la, sizeof la, "%s/loadavg", dir);
    snprintf(st, sizeof st, "%s/stat", dir);
    FILE *f = fopen(la, "w");
    fputs("2.50 1.00 0.50 3/400 12345\n", f);
    fclose(f);
    f = fopen(st, "w");
    /* user 100, nice 20, system 80: 200 busy ticks; idle 700; steal 100; 1000 in all */
    fputs("cpu  100 20 80 700 0 0 0 100 0 0\ncpu0 50 10 40 350 0 0 0 50 0 0\n", f);
    fclose(f);
    tdm_ab_host_sample b, a;
    tdm_ab_host_sample_read(la, st, &b);
    CHECK_NEAR(b.load1, 2.5, 1e-12);
    CHECK(b.have_stat && b.total == 1000 && b.busy == 200 && b.steal == 100, "total %llu busy %llu steal %llu", b.total,
          b.busy, b.steal);
    a = b;
    a.total = 2000, a.busy = 1100, a.steal = 120; /* over the run: 1000 ticks, 900 busy, 20 stolen (2%) */
    tdm_ab_load l;
    tdm_ab_load_judge(&b, &a, 8.5, 100.0, &l); /* the job's 8.5 s at 100 ticks/s: others 50 of 1000 ticks */
    CHECK_NEAR(l.steal_pct, 2.0, 1e-12);
    CHECK_NEAR(l.others_pct, 5.0, 1e-12);
    CHECK(!l.under_load, "others 5%%, 2%% steal: not under load");
    CHECK_NEAR(l.load_before, 2.5, 1e-12);
    tdm_ab_load_judge(&b, &a, 7.5, 100.0, &l); /* others 150 of 1000 ticks */
    CHECK(l.under_load && fabs(l.others_pct - 15.0) < 1e-9, "others 15%%: under load (%g)", l.others_pct);
    tdm_ab_load_judge(&b, &a, 9.2, 100.0, &l); /* the job counted a few ticks more than were sampled busy */
    CHECK(!l.under_load && l.others_pct == 0.0, "a share below zero is none (%g)", l.others_pct);
    a.steal = 200; /* 10% steal */
    tdm_ab_load_judge(&b, &a, 8.5, 100.0, &l);
    CHECK(l.under_load && fabs(l.steal_pct - 10.0) < 1e-9, "10%% steal: under load");
    tdm_ab_load_judge(&b, &a, NAN, 100.0, &l);
    CHECK(isnan(l.others_pct) && l.under_load, "the job's CPU unknown: others unknown, steal still judged");
    tdm_ab_host_sample_read("/nonexistent/loadavg", "/nonexistent/stat", &b);
    CHECK(isnan(b.load1) && !b.have_stat, "unreadable: NaN, no stat");
    tdm_ab_load_judge(&b, &b, 1.0, 100.0, &l);
    CHECK(!l.under_load && isnan(l.steal_pct) && isnan(l.others_pct), "unknown is not flagged");
    unlink(la), unlink(st), rmdir(dir);

    /* a flagged run is said in the verdict, and recorded in summary.json and report.md */
    tdm_ab_options o;
    tdm_ab_result r;
    fake(&o, &r, 100.0, 90.0);
    r.n_load = 2 * fake_repeats;
    r.local_ranks = 2;
    r.cores_online = 2;
    r.load = tdm_xcalloc((size_t)r.n_load, sizeof *r.load);
    for (int i = 0; i < r.n_load; i++) r.load[i] = (tdm_ab_load){1.0, 2.0, 1.5, 0.5, 0};
    r.load[1] = (tdm_ab_load){4.5, 5.0, 30.0, 12.0, 1};
    tdm_ab_compute(&o, &r);
    CHECK(r.runs_under_load == 1 && strstr(r.noise_sentence, "Under load: 1 of 4 timing runs"), "%s", r.noise_sentence);
    char out[] = "/tmp/tdm_ab_loadrepXXXXXX";
    CHECK(mkdtemp(out) != NULL, "mkdtemp");
    snprintf(o.out, sizeof o.out, "%s", out);
    tdm_error err = {{0}};
    CHECK(tdm_ab_write_report(&o, &r, &err) == 0, "report: %s", err.msg);
    char path[256];
    snprintf(path, sizeof path, "%s/summary.json", out);
    size_t len;
    char *text = tdm_read_file(path, 1 << 20, &len, NULL);
    tdm_json_doc *d = text ? tdm_json_parse(text, len, path, NULL) : NULL;
    CHECK(d != NULL, "summary.json parses");
    if (d) {
        const tdm_json *root = tdm_json_root(d), *ld = tdm_json_get(root, "load");
        const tdm_json *u = tdm_json_get(root, "runs_under_load");
        CHECK(u && u->type == TDM_JSON_NUMBER && u->num == 1, "runs_under_load 1");
        CHECK(ld && ld->type == TDM_JSON_ARRAY, "load is an array");
        CHECK(text && strstr(text, "\"side\": \"candidate\", \"repeat\": 1, \"load_before\": 4.5") &&
                  strstr(text, "\"others_pct\": 30, \"steal_pct\": 12, \"under_load\": true"),
              "the flagged run in summary.json");
        tdm_json_free(d);
    }
    free(text);
    snprintf(path, sizeof path, "%s/report.md", out);
    text = tdm_read_file(path, 1 << 20, &len, NULL);
    CHECK(text && strstr(text, "| candidate 1 | 4.50 | 5.00 | 30.0% | 12.0% | **yes** |") && strstr(text, "Under load"),
          "report.md has the load table and the verdict");
    free(text);
    tdm_ab_result_free(&r);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    CHECK(system(cmd) == 0, "cleanup");
}

static void test_precision_differences(void) {
    tdm_ab_options o;
    tdm_ab_result r;
    fake(&o, &r, 100.0, 100.0);
    tdm_step_record *c = r.side[1].records;
    c[6].loss *= 1.0 + 1e-6; /* step 7 departs */
    c[9].loss *= 1.0 - 3e-6; /* larger, later */
    c[20].nan = 1;
    c[20].grad_norm = NAN;
    c[3].lr += 1e-12;
    tdm_ab_compute(&o, &r);
    CHECK(!r.loss_bitwise_equal && r.first_loss_diff_step == 7, "first differing step %lld",
          (long long)r.first_loss_diff_step);
    CHECK_NEAR(r.max_rel_loss_dev, 3e-6, 1e-9);
    CHECK(!r.grad_norm_bitwise_equal && r.first_grad_norm_diff_step == 21, "grad norm");
    CHECK(!r.all_finite && r.nan_iterations == 1, "NaN counted: %d", r.nan_iterations);
    CHECK(!r.lr_equal && r.consumed_samples_equal, "lr differs only");
    CHECK(strstr(r.noise_sentence, "inside the noise") != NULL, "same speed: %s", r.noise_sentence);
    tdm_ab_result_free(&r);

    /* a repeat that reproduces the loss but not the grad norm is not bitwise identical */
    fake(&o, &r, 100.0, 100.0);
    tdm_ab_compute(&o, &r);
    CHECK(r.repeats_bitwise_equal, "identical repeats");
    r.side[0].records[STEPS + 12].grad_norm *= 1.0 + 1e-12; /* the baseline's second repeat, step 13 */
    tdm_ab_compute(&o, &r);
    CHECK(!r.repeats_bitwise_equal && r.loss_bitwise_equal && r.grad_norm_bitwise_equal,
          "a repeat's grad norm departs: repeats %d, sides' loss %d and grad norm %d", r.repeats_bitwise_equal,
          r.loss_bitwise_equal, r.grad_norm_bitwise_equal);
    tdm_ab_result_free(&r);
}

static void test_report_files(void) {
    tdm_ab_options o;
    tdm_ab_result r;
    fake(&o, &r, 100.0, 90.0);
    tdm_ab_compute(&o, &r);
    snprintf(o.out, sizeof o.out, "/tmp/tdm_test_ab_report_%d", (int)getpid());
    /* a side's flags reach report.md's commands quoted for the shell: $ and ` stay literal */
    o.candidate_flags = "--overlap-grad-reduce --image-root \"/im$HOME`id`\"";
    tdm_error err;
    CHECK(tdm_mkdirs(o.out, &err) == 0, "%s", err.msg);
    CHECK(tdm_ab_write_report(&o, &r, &err) == 0, "%s", err.msg);
    const char *files[] = {"report.md", "summary.json",  "steps_baseline.csv", "steps_candidate.csv",
                           "loss.svg",  "step_time.svg", "step_time_hist.svg"};
    char path[1200];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/%s", o.out, files[i]);
        CHECK(tdm_file_exists(path), "%s missing", files[i]);
    }
    snprintf(path, sizeof path, "%s/summary.json", o.out);
    size_t len;
    char *text = tdm_read_file(path, 1 << 20, &len, &err);
    tdm_json_doc *d = text ? tdm_json_parse(text, len, path, &err) : NULL;
    CHECK(d != NULL, "summary.json parses: %s", err.msg);
    if (d) {
        const tdm_json *root = tdm_json_root(d);
        const char *top[] = {"step_time_change_pct",
                             "throughput_change_pct",
                             "ci95_pct",
                             "window",
                             "repeats",
                             "loss_bitwise_equal",
                             "max_rel_loss_dev",
                             "lr_equal",
                             "consumed_samples_equal",
                             "fingerprints_equal",
                             "nan_iterations",
                             "skipped_iterations",
                             "overlap_efficiency",
                             "sched_overlap_efficiency",
                             "first_loss_diff_step",
                             "first_grad_norm_diff_step",
                             "cores_online",
                             "runs_ci95_pct",
                             "runs_change_pct",
                             "runs_ci_pairs"};
        for (size_t i = 0; i < sizeof top / sizeof *top; i++)
            CHECK(tdm_json_get(root, top[i]) != NULL, "summary.json lacks %s", top[i]);
        const char *side_keys[] = {"mean_step_ms",   "samples_per_s", "exposed_comm_ms", "cpu_ms",
                                   "compute_cpu_ms", "comm_cpu_ms",   "cores_busy"};
        for (int s = 0; s < 2; s++)
            for (size_t i = 0; i < sizeof side_keys / sizeof *side_keys; i++)
                CHECK(tdm_json_get(tdm_json_get(root, s ? "candidate" : "baseline"), side_keys[i]) != NULL,
                      "summary.json lacks %s.%s", s ? "candidate" : "baseline", side_keys[i]);
        const tdm_json *eq = tdm_json_get(root, "loss_bitwise_equal");
        CHECK(eq && eq->type == TDM_JSON_TRUE, "loss_bitwise_equal true");
        double m = 0;
        tdm_json_get_num(tdm_json_get(root, "baseline"), "mean_step_ms", &m, &err);
        CHECK_NEAR(m, r.side[0].mean_step_ms, 1e-6);
        tdm_json_free(d);
    }
    free(text);
    snprintf(path, sizeof path, "%s/report.md", o.out);
    text = tdm_read_file(path, 1 << 20, &len, &err);
    CHECK(text && strstr(text, "mean step time") && strstr(text, "overlap_grad_reduce: False -> True") &&
              strstr(text, "MPI library") && strstr(text, "OpenBLAS") && strstr(text, "cores busy per rank"),
          "report.md has the table, the CPU rows, the diff and the machine");
    CHECK(text && strstr(text, " --overlap-grad-reduce --image-root '/im$HOME`id`' --train-iters"),
          "report.md: the candidate's flags quoted for the shell");
    free(text);
    snprintf(path, sizeof path, "%s/steps_candidate.csv", o.out);
    text = tdm_read_file(path, 1 << 20, &len, &err);
    int lines = 0;
    for (size_t i = 0; text && i < len; i++) lines += text[i] == '\n';
    CHECK(lines == 1 + fake_repeats * STEPS, "csv rows %d", lines);
    free(text);
    /* the timeline of a profiled step: two collectives in flight together are on the comm thread's two tracks
     * (prof/trace.h), two rows named apart */
    snprintf(r.side[1].trace_dir, sizeof r.side[1].trace_dir, "%s/traces/candidate", o.out);
    CHECK(tdm_mkdirs(r.side[1].trace_dir, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/trace.json", r.side[1].trace_dir);
    const char *trace =
        "{\"traceEvents\":["
        "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"compute\"}},"
        "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":1,\"args\":{\"name\":\"comm\"}},"
        "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":65537,\"args\":{\"name\":\"comm (2)\"}},"
        "{\"name\":\"step\",\"cat\":\"phase\",\"ph\":\"X\",\"ts\":0,\"dur\":100,\"pid\":0,\"tid\":0,"
        "\"args\":{\"arg\":3}},"
        "{\"name\":\"layer.0\",\"cat\":\"layer\",\"ph\":\"X\",\"ts\":5,\"dur\":50,\"pid\":0,\"tid\":0},"
        "{\"name\":\"grad reduce-scatter\",\"cat\":\"comm\",\"ph\":\"X\",\"ts\":10,\"dur\":40,\"pid\":0,\"tid\":1},"
        "{\"name\":\"grad reduce-scatter\",\"cat\":\"comm\",\"ph\":\"X\",\"ts\":20,\"dur\":60,\"pid\":0,"
        "\"tid\":65537}]}\n";
    CHECK(tdm_write_file_atomic(path, trace, strlen(trace), &err) == 0, "%s", err.msg);
    CHECK(tdm_ab_write_report(&o, &r, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/timeline_candidate.svg", o.out);
    text = tdm_read_file(path, 1 << 20, &len, &err);
    CHECK(text && strstr(text, ">rank 0 comm<") && strstr(text, ">rank 0 comm (2)<"), "timeline rows: %s",
          text ? "not named apart" : err.msg);
    free(text);
    /* 80 ranks' compute threads: every row is drawn (64 were, the rest dropped without a word) */
    tdm_strbuf big;
    tdm_sb_init(&big);
    tdm_sb_puts(&big, "{\"traceEvents\":[{\"name\":\"step\",\"cat\":\"phase\",\"ph\":\"X\",\"ts\":0,\"dur\":100,"
                      "\"pid\":0,\"tid\":0,\"args\":{\"arg\":3}}");
    for (int rk = 0; rk < 80; rk++)
        tdm_sb_printf(&big,
                      ",{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"compute\"}},"
                      "{\"name\":\"layer.0\",\"cat\":\"layer\",\"ph\":\"X\",\"ts\":5,\"dur\":50,\"pid\":%d,"
                      "\"tid\":0}",
                      rk, rk);
    tdm_sb_puts(&big, "]}\n");
    snprintf(path, sizeof path, "%s/trace.json", r.side[1].trace_dir);
    CHECK(tdm_write_file_atomic(path, big.data, big.len, &err) == 0, "%s", err.msg);
    tdm_sb_free(&big);
    CHECK(tdm_ab_write_report(&o, &r, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/timeline_candidate.svg", o.out);
    text = tdm_read_file(path, 1 << 22, &len, &err);
    CHECK(text && strstr(text, ">rank 0 compute<") && strstr(text, ">rank 79 compute<"), "timeline of 80 ranks: %s",
          text ? "rows missing" : err.msg);
    free(text);
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", o.out);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", o.out);
    tdm_ab_result_free(&r);
}

static void test_window_parse(void) {
    int64_t lo, hi;
    tdm_error err;
    CHECK(tdm_ab_parse_window("21:200", &lo, &hi, &err) == 0 && lo == 21 && hi == 200, "21:200");
    CHECK(tdm_ab_parse_window("0:5", &lo, &hi, &err) != 0, "0 refused");
    CHECK(tdm_ab_parse_window("9:5", &lo, &hi, &err) != 0, "reversed refused");
    CHECK(tdm_ab_parse_window("21-200", &lo, &hi, &err) != 0 && strstr(err.msg, "21-200"), "%s", err.msg);
}

/* The default window of logged runs: the practice's 21:200 clipped, else after the warm-up a run
 * names, else after the first 10% (worked by hand). */
static void test_default_window(void) {
    int64_t lo, hi;
    CHECK(tdm_ab_default_window(1, 200, 0, &lo, &hi) == TDM_AB_WINDOW_PRACTICE && lo == 21 && hi == 200, "1-200");
    CHECK(tdm_ab_default_window(1, 500, 5, &lo, &hi) == TDM_AB_WINDOW_PRACTICE && lo == 21 && hi == 200, "1-500");
    CHECK(tdm_ab_default_window(50, 120, 0, &lo, &hi) == TDM_AB_WINDOW_PRACTICE && lo == 50 && hi == 120, "50-120");
    CHECK(tdm_ab_default_window(1, 10, 0, &lo, &hi) == TDM_AB_WINDOW_TENTH && lo == 2 && hi == 10, "1-10: %lld-%lld",
          (long long)lo, (long long)hi);
    CHECK(tdm_ab_default_window(1, 10, 3, &lo, &hi) == TDM_AB_WINDOW_WARM_UP && lo == 4 && hi == 10, "warm-up 3");
    CHECK(tdm_ab_default_window(1, 10, 30, &lo, &hi) == TDM_AB_WINDOW_WARM_UP && lo == 10 && hi == 10,
          "warm-up past the end keeps the last step");
    CHECK(tdm_ab_default_window(251, 300, 0, &lo, &hi) == TDM_AB_WINDOW_TENTH && lo == 256 && hi == 300,
          "a resumed log past 200: %lld-%lld", (long long)lo, (long long)hi);
}

int main(void) {
    RUN(test_statistics_and_equal_precision);
    RUN(test_between_runs);
    RUN(test_host_load);
    RUN(test_precision_differences);
    RUN(test_report_files);
    RUN(test_window_parse);
    RUN(test_default_window);
    return TEST_SUMMARY();
}
