/* ab_runs_report.c - the A/B result on finished runs: the terminal table in the shape of the
 * in-process protocol's (report.c), and the report directory: report.md, summary.json with the
 * same keys (null where logs cannot tell), steps_<side>.csv and the plots. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ab/ab_runs.h"
#include "ab/svg.h"
#include "ab/report_fmt.h"
#include "core/alloc.h"
#include "core/fs.h"
#include "train/hosts.h"

static void pct(char *b, size_t cap, double v) {
    if (isfinite(v)) snprintf(b, cap, "%+.2f%%", v);
    else snprintf(b, cap, "n/a");
}

/* One precision row's verdict in words. */
static void check_text(const tdm_ab_runs_check *c, int decimals, char *out, size_t cap) {
    char extra[128] = "";
    if (c->one_side_only)
        snprintf(extra, sizeof extra, "; logged by one side only at %lld iteration%s", (long long)c->one_side_only,
                 c->one_side_only == 1 ? "" : "s");
    char prec[96] = "";
    if (c->precision[0]) snprintf(prec, sizeof prec, " (%s)", c->precision);
    if (c->verdict == TDM_AB_RUNS_ABSENT) {
        snprintf(out, cap, "not in the logs%s", extra);
    } else if (c->verdict == TDM_AB_RUNS_EQUAL) {
        if (decimals)
            snprintf(out, cap, "yes: identical at the printed precision%s at all %lld iteration%s%s", prec,
                     (long long)c->compared, c->compared == 1 ? "" : "s", extra);
        else snprintf(out, cap, "yes (%lld iteration%s)%s", (long long)c->compared, c->compared == 1 ? "" : "s", extra);
    } else if (decimals) {
        snprintf(out, cap,
                 "NO at %lld of %lld iterations%s: largest relative deviation %.2g at iteration %lld "
                 "(first at %lld)%s",
                 (long long)(c->compared - c->equal), (long long)c->compared, prec, c->max_rel_dev,
                 (long long)c->max_dev_at, (long long)c->first_diff, extra);
    } else {
        snprintf(out, cap, "NO at %lld of %lld iterations (first at %lld)%s", (long long)(c->compared - c->equal),
                 (long long)c->compared, (long long)c->first_diff, extra);
    }
}

static void count_pair(char *out, size_t cap, int64_t a, int64_t b) {
    char x[24], y[24];
    if (a >= 0) snprintf(x, sizeof x, "%lld", (long long)a);
    else snprintf(x, sizeof x, "n/a");
    if (b >= 0) snprintf(y, sizeof y, "%lld", (long long)b);
    else snprintf(y, sizeof y, "n/a");
    snprintf(out, cap, "%s and %s", x, y);
}

/* Longer than most: the table's rows in the order they print, one after the other. */
void tdm_ab_runs_format_table(const tdm_ab_runs_options *o, const tdm_ab_runs_result *r, tdm_strbuf *sb) {
    const tdm_ab_runs_side *A = &r->side[0], *B = &r->side[1];
    char ch[200], line[600];
    tdm_sb_printf(sb, "\nA/B result on finished runs: %d baseline run%s, %d candidate run%s; iterations %lld-%lld\n",
                  A->n_runs, A->n_runs == 1 ? "" : "s", B->n_runs, B->n_runs == 1 ? "" : "s", (long long)r->window_lo,
                  (long long)r->window_hi);
    tdm_sb_printf(sb, "  window: %s\n", r->window_note);
    for (int s = 0; s < 2; s++) {
        const tdm_ab_runs_side *side = &r->side[s];
        for (int k = 0; k < side->n_runs; k++)
            tdm_sb_printf(sb, "  %-9s: %s (%s)\n", k ? "" : side->label, side->runs[k].path, side->runs[k].source);
        if (side->runs[0].ddp_config[0]) tdm_sb_printf(sb, "  %-9s  %s\n", "", side->runs[0].ddp_config);
    }
    tdm_sb_puts(sb, "  configuration: ");
    if (r->n_diff == 0)
        tdm_sb_puts(sb, r->args_known ? "the two sides are IDENTICAL (nothing to compare)\n"
                                      : "unknown (a side has no arguments block)\n");
    enum { SHOWN = 5 };
    for (int i = 0; i < r->n_diff && i < SHOWN; i++)
        tdm_sb_printf(sb, "%s%s", i ? "; " : r->n_diff == 1 ? "only " : "", r->diff_lines[i]);
    if (r->n_diff > SHOWN) tdm_sb_printf(sb, "; ... (%d settings in all, listed in report.md)", r->n_diff);
    if (r->n_diff)
        tdm_sb_printf(sb, " differ%s; %d other settings identical\n",
                      r->args_known ? "" : " (a side has no arguments block)", r->n_same);

    tdm_sb_printf(sb, "\n  %-40s %12s %12s   %s\n", "Performance (window)", "baseline", "candidate", "change");
    if (isfinite(r->step_time_ci.lo_pct))
        snprintf(ch, sizeof ch, "%+.2f%%  (95%% CI %+.2f%% .. %+.2f%%)", r->step_time_change_pct,
                 r->step_time_ci.lo_pct, r->step_time_ci.hi_pct);
    else snprintf(ch, sizeof ch, "%+.2f%%  (no interval)", r->step_time_change_pct);
    tdm_ab_row3(sb, "mean step time (ms)", A->mean_step_ms, B->mean_step_ms, ch);
    const char *runs_row = "  between whole runs (Welch)";
    if (isfinite(r->runs_ci.lo_pct))
        tdm_sb_printf(sb, "  %-40s %12s %12s   %+.2f%%  (95%% CI %+.2f%% .. %+.2f%%, t over %d and %d runs)\n",
                      runs_row, "", "", r->runs_ci.change_pct, r->runs_ci.lo_pct, r->runs_ci.hi_pct, A->n_runs,
                      B->n_runs);
    else tdm_sb_printf(sb, "  %-40s %12s %12s   n/a (needs 2 or more runs per side)\n", runs_row, "", "");
    pct(ch, sizeof ch, r->median_change_pct);
    tdm_ab_row3(sb, "median step time (ms)", A->median_step_ms, B->median_step_ms, ch);
    pct(ch, sizeof ch, r->throughput_change_pct);
    tdm_ab_row3(sb, "sample throughput (samples/s)", A->samples_per_s, B->samples_per_s, ch);
    tdm_sb_printf(sb, "  %-40s %12lld %12lld\n", "logged lines in the window", (long long)A->window_lines,
                  (long long)B->window_lines);
    tdm_sb_printf(sb, "  %s\n", r->noise_sentence);
    if (r->ddp_line_confirms >= 0)
        tdm_sb_printf(sb, "  DDP config lines show each side's value of the differing flags: %s\n",
                      r->ddp_line_confirms ? "yes" : "NO");

    tdm_sb_printf(sb, "\n  Precision (every iteration both first runs logged: %lld)\n", (long long)r->common_steps);
    static const int order[] = {0, 1, 2, 3, 4, 6, 5};
    for (size_t k = 0; k < sizeof order / sizeof *order; k++) {
        const tdm_ab_runs_check *c = &r->checks[order[k]];
        int decimals = order[k] != 1 && order[k] != 2;
        if ((order[k] == 5 || order[k] == 6) && c->verdict == TDM_AB_RUNS_ABSENT && !c->one_side_only) continue;
        char name[120];
        if (decimals) snprintf(name, sizeof name, "%s equal at the printed precision", c->name);
        else snprintf(name, sizeof name, "%s identical", c->name);
        check_text(c, decimals, line, sizeof line);
        tdm_sb_printf(sb, "  %-52s %s\n", name, line);
    }
    tdm_sb_printf(sb, "  %-52s %s\n", "loss and grad norm finite", r->all_finite ? "yes" : "NO");
    char a[64], b[64]; /* two counts of at most 20 digits */
    count_pair(a, sizeof a, A->nan_iterations, B->nan_iterations);
    count_pair(b, sizeof b, A->skipped_iterations, B->skipped_iterations);
    if (A->nan_iterations < 0 && B->nan_iterations < 0 && A->skipped_iterations < 0 && B->skipped_iterations < 0)
        tdm_sb_printf(sb, "  %-52s %s\n", "NaN iterations / skipped iterations", "not in the logs");
    else tdm_sb_printf(sb, "  %-52s %s / %s\n", "NaN iterations / skipped (baseline and candidate)", a, b);
    tdm_sb_printf(sb, "  %-52s %s\n", "input fingerprints identical", "not in logs");
    if (A->n_runs > 1 || B->n_runs > 1)
        tdm_sb_printf(sb, "  %-52s %s\n", "runs of each side equal at the printed precision",
                      r->repeats_equal ? "yes" : "NO");
    if (A->trace_ranks > 0 || B->trace_ranks > 0) {
        tdm_sb_printf(sb, "\n  %-40s %12s %12s\n", "Communication (profiler traces, ms/step)", "baseline", "candidate");
        double na = A->trace_ranks > 0 ? 0 : NAN, nb = B->trace_ranks > 0 ? 0 : NAN; /* NaN: no traces */
        tdm_ab_row3(sb, "communication busy", A->trace_comm_ms + na, B->trace_comm_ms + nb, NULL);
        tdm_ab_row3(sb, "  hidden behind compute", A->trace_hidden_ms + na, B->trace_hidden_ms + nb, NULL);
        tdm_ab_row3(sb, "  exposed", A->trace_exposed_ms + na, B->trace_exposed_ms + nb, NULL);
        tdm_ab_row3(sb, "compute", A->trace_compute_ms + na, B->trace_compute_ms + nb, NULL);
        tdm_ab_row3(sb, "step (profiled)", A->trace_step_ms + na, B->trace_step_ms + nb, NULL);
        tdm_ab_row3(sb, "  last collective (cannot overlap)", A->trace_last_ms + na, B->trace_last_ms + nb, NULL);
        char ea[32], eb[32];
        pct(ea, sizeof ea, A->trace_overlap_pct + na);
        pct(eb, sizeof eb, B->trace_overlap_pct + nb);
        tdm_sb_printf(sb, "  %-40s %12s %12s\n", "overlap (hidden / communication)", ea + (ea[0] == '+'),
                      eb + (eb[0] == '+'));
        snprintf(ea, sizeof ea, "%d / %lld", A->trace_ranks, (long long)A->trace_steps);
        snprintf(eb, sizeof eb, "%d / %lld", B->trace_ranks, (long long)B->trace_steps);
        tdm_sb_printf(sb, "  %-40s %12s %12s\n", "ranks / rank-steps traced", A->trace_ranks ? ea : "n/a",
                      B->trace_ranks ? eb : "n/a");
    } else {
        tdm_sb_printf(sb, "\n  %-40s %s\n", "Communication (hidden / exposed)",
                      "not in logs (give traces: --baseline-run LOG,TRACES)");
    }
    if (r->n_warnings) {
        tdm_sb_puts(sb, "\n  Warnings\n");
        for (int i = 0; i < r->n_warnings; i++) tdm_sb_printf(sb, "  - %s\n", r->warnings[i]);
    }
    tdm_sb_puts(sb, "\n  What the logs cannot establish\n");
    for (int i = 0; i < r->n_limits; i++) tdm_sb_printf(sb, "  - %s\n", r->limits[i]);
    tdm_sb_printf(sb, "\n  Report: %s/report.md\n", o->out);
}

/* ---- files ---- */

static void csv_num(tdm_strbuf *sb, double v) {
    if (isnan(v)) tdm_sb_puts(sb, ",");
    else tdm_sb_printf(sb, ",%.17g", v);
}

static void csv_count(tdm_strbuf *sb, int64_t v, int64_t unknown_below) {
    if (v < unknown_below) tdm_sb_puts(sb, ",");
    else tdm_sb_printf(sb, ",%lld", (long long)v);
}

/* The in-process CSV's first columns (report.c), then what a log adds; an empty cell: not logged. */
static void csv_side(const tdm_ab_runs_side *s, tdm_strbuf *sb) {
    tdm_sb_puts(sb, "repeat,iteration,consumed_samples,global_batch_size,lr,loss,grad_norm,skipped,nan,step_ms,"
                    "interval,loss_scale,throughput,params_norm,num_zeros,pass\n");
    for (int k = 0; k < s->n_runs; k++)
        for (int64_t i = 0; i < s->runs[k].n_iters; i++) {
            const tdm_run_iter *x = &s->runs[k].iters[i];
            tdm_sb_printf(sb, "%d,%lld", k + 1, (long long)x->iteration);
            csv_count(sb, x->consumed_samples, 0);
            csv_count(sb, x->global_batch, 1);
            csv_num(sb, x->lr), csv_num(sb, x->lm_loss), csv_num(sb, x->grad_norm);
            csv_count(sb, x->skipped, 0);
            csv_count(sb, x->nan, 0);
            csv_num(sb, x->elapsed_ms);
            tdm_sb_printf(sb, ",%d", x->interval);
            csv_num(sb, x->loss_scale), csv_num(sb, x->throughput), csv_num(sb, x->params_norm),
                csv_num(sb, x->num_zeros);
            tdm_sb_printf(sb, ",%d\n", x->pass);
        }
}

static void json_count(tdm_strbuf *sb, const char *key, int64_t v) {
    if (v >= 0) tdm_sb_printf(sb, "\"%s\": %lld", key, (long long)v);
    else tdm_sb_printf(sb, "\"%s\": null", key);
}

static const char *tf(int v) { return v ? "true" : "false"; }

/* true / false from a check, null when not logged */
static const char *check_bool(const tdm_ab_runs_check *c) {
    return c->verdict == TDM_AB_RUNS_ABSENT ? "null" : tf(c->verdict == TDM_AB_RUNS_EQUAL);
}

static void json_strings(tdm_strbuf *sb, const char *key, char *const *v, int n) {
    tdm_sb_printf(sb, "\"%s\": [", key);
    for (int i = 0; i < n; i++) {
        if (i) tdm_sb_puts(sb, ", ");
        tdm_sb_json_string(sb, v[i], strlen(v[i]));
    }
    tdm_sb_puts(sb, "]");
}

/* The in-process side object's keys (report.c), null where a log cannot tell, then the runs'. */
static void json_side(tdm_strbuf *sb, const tdm_ab_runs_side *s) {
    tdm_sb_puts(sb, "{");
    tdm_ab_json_num(sb, "mean_step_ms", s->mean_step_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "median_step_ms", s->median_step_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "stddev_step_ms", s->stddev_step_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "samples_per_s", s->samples_per_s), tdm_sb_puts(sb, ",\n    ");
    /* from the traces when given (ms per profiled step, mean over the ranks), else null */
    double nt = s->trace_ranks > 0 ? 0 : NAN;
    tdm_ab_json_num(sb, "comm_ms", s->trace_comm_ms + nt), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "hidden_comm_ms", s->trace_hidden_ms + nt), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "exposed_comm_ms", s->trace_exposed_ms + nt), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "compute_ms", s->trace_compute_ms + nt), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "prof_step_ms", s->trace_step_ms + nt), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "last_bucket_comm_ms", s->trace_last_ms + nt), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "overlap_pct", s->trace_overlap_pct + nt), tdm_sb_puts(sb, ",\n    ");
    tdm_sb_printf(sb, "\"trace_ranks\": %d, \"trace_rank_steps\": %lld, ", s->trace_ranks, (long long)s->trace_steps);
    json_count(sb, "trace_world_size", s->trace_ranks > 0 && s->trace_world_size > 0 ? s->trace_world_size : -1);
    tdm_sb_puts(sb, ", \"traces\": [");
    for (int k = 0, first = 1; k < s->n_runs; k++)
        if (s->trace_paths && s->trace_paths[k]) {
            tdm_sb_puts(sb, first ? "" : ", ");
            tdm_sb_json_string(sb, s->trace_paths[k], strlen(s->trace_paths[k]));
            first = 0;
        }
    tdm_sb_puts(sb, "],\n    ");
    static const char *const unknown[] = {
        "model_gflops_per_rank",    "data_wait_ms", "ideal_step_ms",  "overlap_efficiency", "sched_ideal_step_ms",
        "sched_overlap_efficiency", "cpu_ms",       "compute_cpu_ms", "comm_cpu_ms",        "cores_busy"};
    for (size_t k = 0; k < sizeof unknown / sizeof *unknown; k++) tdm_sb_printf(sb, "\"%s\": null, ", unknown[k]);
    tdm_sb_puts(sb, "\n    ");
    json_count(sb, "window_samples", s->window_samples > 0 ? s->window_samples : -1), tdm_sb_puts(sb, ", ");
    json_count(sb, "nan_iterations", s->nan_iterations), tdm_sb_puts(sb, ", ");
    json_count(sb, "skipped_iterations", s->skipped_iterations), tdm_sb_puts(sb, ", ");
    tdm_sb_puts(sb, "\"repeat_mean_step_ms\": [");
    for (int k = 0; k < s->n_runs; k++)
        tdm_sb_printf(sb, "%s%.6g", k ? ", " : "", isfinite(s->run_mean_ms[k]) ? s->run_mean_ms[k] : -1.0);
    tdm_sb_puts(sb, "],\n    ");
    tdm_sb_json_key_string(sb, "ddp_config", s->runs[0].ddp_config);
    tdm_sb_puts(sb, ",\n    \"runs\": [");
    for (int k = 0; k < s->n_runs; k++) {
        const tdm_run_log *run = &s->runs[k];
        tdm_sb_puts(sb, k ? ",\n      {" : "\n      {");
        tdm_sb_json_key_string(sb, "path", run->path), tdm_sb_puts(sb, ", ");
        tdm_sb_json_key_string(sb, "source", run->source), tdm_sb_puts(sb, ", ");
        tdm_sb_printf(sb, "\"passes\": %d, \"crashed\": %s, ", run->passes, tf(run->crashed));
        json_strings(sb, "warnings", run->warnings, run->n_warnings);
        tdm_sb_puts(sb, "}");
    }
    tdm_sb_puts(sb, "],\n    ");
    tdm_sb_printf(sb, "\"window_lines\": %lld, \"window_iterations\": %lld, \"held\": [%lld, %lld], ",
                  (long long)s->window_lines, (long long)s->window_iterations, (long long)s->held_lo,
                  (long long)s->held_hi);
    json_count(sb, "global_batch_size", s->global_batch > 0 ? s->global_batch : -1), tdm_sb_puts(sb, ", ");
    json_count(sb, "log_interval", s->log_interval > 0 ? s->log_interval : -1);
    tdm_sb_puts(sb, "}");
}

static void json_check(tdm_strbuf *sb, const tdm_ab_runs_check *c) {
    tdm_sb_printf(sb, "{\"equal\": %s, \"compared\": %lld, \"equal_steps\": %lld, \"one_side_only\": %lld, ",
                  check_bool(c), (long long)c->compared, (long long)c->equal, (long long)c->one_side_only);
    tdm_sb_printf(sb, "\"first_diff_step\": %lld, \"max_rel_dev_step\": %lld, ", (long long)c->first_diff,
                  (long long)c->max_dev_at);
    tdm_ab_json_num(sb, "max_rel_dev", c->max_rel_dev), tdm_sb_puts(sb, ", ");
    tdm_sb_json_key_string(sb, "printed_precision", c->precision);
    tdm_sb_puts(sb, "}");
}

static void summary_json(const tdm_ab_runs_options *o, const tdm_ab_runs_result *r, tdm_strbuf *sb) {
    const tdm_ab_runs_side *A = &r->side[0], *B = &r->side[1];
    const tdm_ab_runs_check *lr = &r->checks[0], *cs = &r->checks[1], *gbs = &r->checks[2], *loss = &r->checks[3],
                            *gn = &r->checks[4];
    tdm_sb_puts(sb, "{\n  \"source\": \"finished runs\",\n  \"baseline\": ");
    json_side(sb, A);
    tdm_sb_puts(sb, ",\n  \"candidate\": ");
    json_side(sb, B);
    tdm_sb_puts(sb, ",\n  ");
    tdm_ab_json_num(sb, "step_time_change_pct", r->step_time_change_pct), tdm_sb_puts(sb, ",\n  ");
    tdm_ab_json_num(sb, "median_step_time_change_pct", r->median_change_pct), tdm_sb_puts(sb, ",\n  ");
    tdm_ab_json_num(sb, "throughput_change_pct", r->throughput_change_pct), tdm_sb_puts(sb, ",\n  ");
    if (isfinite(r->step_time_ci.lo_pct))
        tdm_sb_printf(sb, "\"ci95_pct\": [%.6g, %.6g],\n  \"inside_noise\": %s,\n  ", r->step_time_ci.lo_pct,
                      r->step_time_ci.hi_pct, tf(tdm_stats_ci_contains_zero(&r->step_time_ci)));
    else tdm_sb_puts(sb, "\"ci95_pct\": null,\n  \"inside_noise\": null,\n  ");
    tdm_sb_printf(sb, "\"ci_block_steps\": %d,\n  \"ci_paired\": false,\n  ", r->ci_block);
    if (isfinite(r->runs_ci.lo_pct))
        tdm_sb_printf(sb,
                      "\"runs_change_pct\": %.6g,\n  \"runs_ci95_pct\": [%.6g, %.6g],\n  \"runs_inside_noise\": %s,\n  "
                      "\"runs_ci_df\": %.4g,\n  ",
                      r->runs_ci.change_pct, r->runs_ci.lo_pct, r->runs_ci.hi_pct,
                      tf(tdm_stats_ci_contains_zero(&r->runs_ci)), r->runs_ci_df);
    else
        tdm_sb_puts(sb, "\"runs_change_pct\": null,\n  \"runs_ci95_pct\": null,\n  \"runs_inside_noise\": null,\n  "
                        "\"runs_ci_df\": null,\n  ");
    tdm_sb_puts(sb, "\"runs_ci_pairs\": 0,\n  ");
    tdm_sb_json_key_string(sb, "noise_sentence", r->noise_sentence);
    tdm_sb_printf(sb, ",\n  \"window\": [%lld, %lld],\n  ", (long long)r->window_lo, (long long)r->window_hi);
    tdm_sb_json_key_string(sb, "window_note", r->window_note);
    int64_t steps = A->held_hi > B->held_hi ? A->held_hi : B->held_hi;
    tdm_sb_printf(sb, ",\n  \"steps\": %lld,\n  \"repeats\": %d,\n  \"runs_per_side\": [%d, %d],\n  ", (long long)steps,
                  A->n_runs < B->n_runs ? A->n_runs : B->n_runs, A->n_runs, B->n_runs);
    if (r->world_size > 0) tdm_sb_printf(sb, "\"world_size\": %d,\n  ", r->world_size);
    else tdm_sb_puts(sb, "\"world_size\": null,\n  ");
    tdm_sb_puts(sb, "\"cores_online\": null,\n  \"hosts\": {"); /* the machines the runs ran on are not in their logs */
    for (int i = 0; i < TDM_HOSTS_N; i++) tdm_sb_printf(sb, "%s\"%s\": null", i ? ", " : "", tdm_hosts_names[i]);
    tdm_sb_puts(sb, "},\n  ");
    /* bitwise equality cannot be read from a log: null; what a log shows is the printed precision */
    tdm_sb_printf(sb, "\"loss_bitwise_equal\": null,\n  \"first_loss_diff_step\": %lld,\n  ",
                  (long long)loss->first_diff);
    tdm_ab_json_num(sb, "max_rel_loss_dev", loss->compared ? loss->max_rel_dev : NAN);
    tdm_sb_printf(sb, ",\n  \"grad_norm_bitwise_equal\": null,\n  \"first_grad_norm_diff_step\": %lld,\n  ",
                  (long long)gn->first_diff);
    tdm_ab_json_num(sb, "max_rel_grad_norm_dev", gn->compared ? gn->max_rel_dev : NAN);
    tdm_sb_printf(sb,
                  ",\n  \"lr_equal\": %s,\n  \"consumed_samples_equal\": %s,\n  \"global_batch_size_equal\": %s,\n"
                  "  \"all_finite\": %s,\n  \"repeats_bitwise_equal\": null,\n  \"ddp_config_confirms_diff\": %s,\n",
                  check_bool(lr), check_bool(cs), check_bool(gbs), tf(r->all_finite),
                  r->ddp_line_confirms < 0 ? "null" : tf(r->ddp_line_confirms));
    tdm_sb_puts(sb, "  \"fingerprints_equal\": null,\n  \"audit_steps\": 0,\n  ");
    int64_t nan = A->nan_iterations < 0 && B->nan_iterations < 0 ? -1
                                                                 : (A->nan_iterations > 0 ? A->nan_iterations : 0) +
                                                                       (B->nan_iterations > 0 ? B->nan_iterations : 0);
    int64_t skip = A->skipped_iterations < 0 && B->skipped_iterations < 0
                       ? -1
                       : (A->skipped_iterations > 0 ? A->skipped_iterations : 0) +
                             (B->skipped_iterations > 0 ? B->skipped_iterations : 0);
    json_count(sb, "nan_iterations", nan), tdm_sb_puts(sb, ",\n  ");
    json_count(sb, "skipped_iterations", skip), tdm_sb_puts(sb, ",\n  ");
    tdm_sb_puts(sb, "\"overlap_efficiency\": null,\n  \"sched_overlap_efficiency\": null,\n  ");
    json_strings(sb, "config_diff", r->diff_lines, r->n_diff);
    tdm_sb_puts(sb, ",\n  \"wall_s\": null,\n");
    /* what a log adds */
    tdm_sb_printf(sb, "  \"loss_equal_at_printed_precision\": %s,\n  \"grad_norm_equal_at_printed_precision\": %s,\n",
                  check_bool(loss), check_bool(gn));
    tdm_sb_printf(sb, "  \"runs_equal_at_printed_precision\": %s,\n  \"common_steps\": %lld,\n  \"precision\": {",
                  tf(r->repeats_equal), (long long)r->common_steps);
    static const char *const keys[TDM_AB_RUNS_CHECKS] = {"lr",        "consumed_samples", "global_batch_size", "loss",
                                                         "grad_norm", "validation_loss",  "other_losses"};
    for (int k = 0; k < TDM_AB_RUNS_CHECKS; k++) {
        tdm_sb_printf(sb, "%s\n    \"%s\": ", k ? "," : "", keys[k]);
        json_check(sb, &r->checks[k]);
    }
    tdm_sb_puts(sb, "},\n  ");
    json_strings(sb, "config_same", r->same_lines, r->n_same), tdm_sb_puts(sb, ",\n  ");
    json_strings(sb, "config_not_compared", r->skipped_lines, r->n_skipped), tdm_sb_puts(sb, ",\n  ");
    json_strings(sb, "warnings", r->warnings, r->n_warnings), tdm_sb_puts(sb, ",\n  ");
    json_strings(sb, "cannot_establish", r->limits, r->n_limits);
    (void)o;
    tdm_sb_puts(sb, "\n}\n");
}

/* The first run's values of a side at its iterations: x and y, n of them. */
static int64_t series(const tdm_run_log *run, int loss, double **x, double **y) {
    *x = tdm_xcalloc((size_t)run->n_iters + 1, sizeof **x);
    *y = tdm_xcalloc((size_t)run->n_iters + 1, sizeof **y);
    for (int64_t i = 0; i < run->n_iters; i++) {
        (*x)[i] = (double)run->iters[i].iteration;
        (*y)[i] = loss ? run->iters[i].lm_loss : run->iters[i].elapsed_ms;
    }
    return run->n_iters;
}

static double *window_values(const tdm_ab_runs_result *r, const tdm_ab_runs_side *s, int64_t *n) {
    int64_t cap = 1;
    for (int k = 0; k < s->n_runs; k++) cap += s->runs[k].n_iters;
    double *t = tdm_xcalloc((size_t)cap, sizeof *t);
    *n = 0;
    for (int k = 0; k < s->n_runs; k++)
        for (int64_t i = 0; i < s->runs[k].n_iters; i++) {
            const tdm_run_iter *x = &s->runs[k].iters[i];
            if (isfinite(x->elapsed_ms) && x->iteration - x->interval + 1 >= r->window_lo &&
                x->iteration <= r->window_hi)
                t[(*n)++] = x->elapsed_ms;
        }
    return t;
}

static int plots(const tdm_ab_runs_options *o, const tdm_ab_runs_result *r, tdm_strbuf *sb, tdm_error *err) {
    const tdm_ab_runs_side *A = &r->side[0], *B = &r->side[1];
    double *xa, *ya, *xb, *yb;
    int rc = 0;
    static const char *const colour[2] = {"#4e79a7", "#e15759"};
    for (int loss = 1; loss >= 0; loss--) {
        int64_t na = series(&A->runs[0], loss, &xa, &ya), nb = series(&B->runs[0], loss, &xb, &yb);
        tdm_svg_series s[2] = {{"baseline", xa, ya, na, colour[0]}, {"candidate", xb, yb, nb, colour[1]}};
        tdm_sb_clear(sb);
        if (loss)
            tdm_svg_line_plot(sb, "Loss per logged iteration (first run of each side)", "iteration", "loss", s, 2);
        else tdm_svg_line_plot(sb, "Step time per logged iteration (first run of each side)", "iteration", "ms", s, 2);
        rc |= tdm_ab_write_sb(o->out, loss ? "loss.svg" : "step_time.svg", sb, err);
        free(xa), free(ya), free(xb), free(yb);
    }
    int64_t nwa, nwb;
    double *wa = window_values(r, A, &nwa), *wb = window_values(r, B, &nwb);
    tdm_svg_series h[2] = {{"baseline", NULL, wa, nwa, colour[0]}, {"candidate", NULL, wb, nwb, colour[1]}};
    tdm_sb_clear(sb);
    tdm_svg_histogram(sb, "Step-time distribution in the window (logged lines, all runs)", "step time (ms)", h, 2, 30);
    rc |= tdm_ab_write_sb(o->out, "step_time_hist.svg", sb, err);
    free(wa), free(wb);
    return rc;
}

int tdm_ab_runs_write_report(const tdm_ab_runs_options *o, const tdm_ab_runs_result *r, tdm_error *err) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    for (int s = 0; s < 2; s++) {
        tdm_sb_clear(&sb);
        csv_side(&r->side[s], &sb);
        if (tdm_ab_write_sb(o->out, s ? "steps_candidate.csv" : "steps_baseline.csv", &sb, err) != 0) goto fail;
    }
    tdm_sb_clear(&sb);
    summary_json(o, r, &sb);
    if (tdm_ab_write_sb(o->out, "summary.json", &sb, err) != 0) goto fail;
    if (plots(o, r, &sb, err) != 0) goto fail;

    tdm_sb_clear(&sb);
    tdm_sb_puts(&sb, "# A/B report on finished runs\n\n```\n");
    tdm_ab_runs_format_table(o, r, &sb);
    tdm_sb_puts(&sb, "```\n\n## What was compared\n\n");
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < r->side[s].n_runs; k++)
            tdm_sb_printf(&sb, "- %s run %d: `%s`: %s\n", r->side[s].label, k + 1, r->side[s].runs[k].path,
                          r->side[s].runs[k].source);
    tdm_sb_printf(&sb, "\n- Window: %s. A logged line counts when every iteration it averages is inside.\n",
                  r->window_note);
    tdm_sb_printf(&sb,
                  "- The mean step time weights each line by the iterations it covers; the median and the 95%% "
                  "interval take each line as one value. The interval is a percentile bootstrap (%d resamples, "
                  "seed %llu) in blocks of %d consecutive lines within each run, not paired: nothing in a log "
                  "says the two sides ran the same iterations side by side.\n",
                  o->bootstrap_resamples, (unsigned long long)o->bootstrap_seed, r->ci_block);
    if (isfinite(r->runs_ci.lo_pct))
        tdm_sb_printf(&sb, "- Between whole runs: Welch's t interval on the runs' means (%.1f degrees of freedom).\n",
                      r->runs_ci_df);
    tdm_sb_puts(&sb, "- The precision rows compare the first run of each side at every iteration both logged; "
                     "decimals are equal when they print alike at the coarser of the two sides' printed "
                     "precisions.\n");
    tdm_sb_puts(&sb, "\n## Plots\n\n![loss](loss.svg)\n\n![step time](step_time.svg)\n\n![distribution]"
                     "(step_time_hist.svg)\n\n## Configurations\n\nDiffering settings (baseline -> candidate):\n\n");
    for (int i = 0; i < r->n_diff; i++) tdm_sb_printf(&sb, "- `%s`\n", r->diff_lines[i]);
    if (!r->n_diff) tdm_sb_puts(&sb, "- none\n");
    if (r->n_skipped) {
        tdm_sb_puts(&sb, "\nNot compared (where each run wrote its output: baseline | candidate):\n\n");
        for (int i = 0; i < r->n_skipped; i++) tdm_sb_printf(&sb, "- `%s`\n", r->skipped_lines[i]);
    }
    tdm_sb_printf(&sb, "\nIdentical settings (%d):\n\n```\n", r->n_same);
    for (int i = 0; i < r->n_same; i++) tdm_sb_printf(&sb, "%s\n", r->same_lines[i]);
    tdm_sb_puts(&sb, "```\n\n## Reproduce\n\n```sh\n");
    if (o->command_line) tdm_sb_printf(&sb, "%s\n", o->command_line);
    tdm_sb_puts(&sb, "```\n\n## Files\n\n- `summary.json`: the numbers above (keys in docs/ab-runs.md)\n"
                     "- `steps_baseline.csv`, `steps_candidate.csv`: every logged line of every run\n"
                     "- `loss.svg`, `step_time.svg`, `step_time_hist.svg`\n");
    if (tdm_ab_write_sb(o->out, "report.md", &sb, err) != 0) goto fail;
    tdm_sb_free(&sb);
    return 0;
fail:
    tdm_sb_free(&sb);
    return -1;
}
