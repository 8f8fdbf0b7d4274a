/* report.c - the A/B result: the terminal table in the shape of the practice's, and the
 * report directory (report.md, per-step CSV, SVG plots, summary.json; the traces are
 * already under traces/ from the profiled runs). */
#include <cblas.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "ab/report_fmt.h"
#include "core/alloc.h"
#include "core/fs.h"
#include "core/strbuf.h"
#include "prof/prof.h"
#include "prof/trace.h"
#include "ab/ab.h"
#include "ab/svg.h"

static const char *sig_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }

static const char *yes_no(int v) { return v ? "yes" : "NO"; }

static void fmt_pct(char *b, size_t cap, double v) {
    if (isfinite(v)) snprintf(b, cap, "%.1f%%", 100.0 * v);
    else snprintf(b, cap, "n/a");
}

/* Longer than most: the table's rows in the order they print, one after the other. */
void tdm_ab_format_table(const tdm_ab_options *o, const tdm_ab_result *r, tdm_strbuf *sb) {
    const tdm_ab_side *A = &r->side[0], *B = &r->side[1];
    char ch[160];
    tdm_sb_printf(sb, "\nA/B result: %d rank%s, steps %lld-%lld of %lld, %d repeat%s per side (interleaved A B)\n",
                  r->world, r->world == 1 ? "" : "s", (long long)o->window_lo, (long long)o->window_hi,
                  (long long)o->steps, o->repeats, o->repeats == 1 ? "" : "s");
    if (r->partial) {
        tdm_sb_printf(sb, "  PARTIAL: stopped by %s after %d of %d timing runs; finished:", sig_name(r->stop_signal),
                      r->n_load, 2 * o->repeats);
        for (int i = 0; i < r->n_finished; i++) tdm_sb_printf(sb, "%s %s", i ? "," : "", r->finished[i]);
        tdm_sb_puts(sb, r->n_finished ? "\n" : " none\n");
        if (A->repeats == 0 || B->repeats == 0) {
            tdm_sb_printf(sb, "  %s\n\n  Report: %s/report.md (%.0f s in all)\n", r->noise_sentence, o->out, r->wall_s);
            return;
        }
    }
    tdm_sb_printf(sb, "  baseline : %s\n  candidate: %s\n", A->ddp_config_line, B->ddp_config_line);
    tdm_sb_puts(sb, "  configuration: ");
    if (r->n_diff == 0) tdm_sb_puts(sb, "the two sides are IDENTICAL (nothing to compare)\n");
    for (int i = 0; i < r->n_diff; i++) tdm_sb_printf(sb, "%s%s", i ? "; " : "only ", r->diff_lines[i]);
    if (r->n_diff) tdm_sb_printf(sb, " differ; %d other arguments identical\n", r->n_same);
    tdm_sb_printf(sb, "\n  %-40s %12s %12s   %s\n", "Performance (window)", "baseline", "candidate", "change");
    if (isfinite(r->step_time_ci.lo_pct))
        snprintf(ch, sizeof ch, "%+.2f%%  (95%% CI %+.2f%% .. %+.2f%%)", r->step_time_change_pct,
                 r->step_time_ci.lo_pct, r->step_time_ci.hi_pct);
    else snprintf(ch, sizeof ch, "%+.2f%%  (no interval)", r->step_time_change_pct);
    tdm_ab_row3(sb, "mean step time (ms)", A->mean_step_ms, B->mean_step_ms, ch);
    const char *runs_row = "  between whole runs (paired)";
    if (r->runs_ci_pairs)
        tdm_sb_printf(sb, "  %-40s %12s %12s   %+.2f%%  (95%% CI %+.2f%% .. %+.2f%%, t over %d pairs)\n", runs_row, "",
                      "", r->runs_ci.change_pct, r->runs_ci.lo_pct, r->runs_ci.hi_pct, r->runs_ci_pairs);
    else tdm_sb_printf(sb, "  %-40s %12s %12s   n/a (needs --repeats 3 or more)\n", runs_row, "", "");
    snprintf(ch, sizeof ch, "%+.2f%%", r->median_change_pct);
    tdm_ab_row3(sb, "median step time (ms)", A->median_step_ms, B->median_step_ms, ch);
    snprintf(ch, sizeof ch, "%+.2f%%", r->throughput_change_pct);
    tdm_ab_row3(sb, "sample throughput (samples/s)", A->samples_per_s, B->samples_per_s, ch);
    tdm_ab_row3(sb, "model throughput per rank (GFLOP/s)", A->model_gflops_per_rank, B->model_gflops_per_rank, NULL);
    tdm_sb_printf(sb, "  %s\n", r->noise_sentence);
    if (r->n_load) {
        double lmax = NAN, omax = NAN, smax = NAN;
        for (int i = 0; i < r->n_load; i++) {
            const tdm_ab_load *l = &r->load[i];
            const double v = fmax(l->load_before, l->load_after); /* fmax ignores a NaN */
            if (isfinite(v) && !(v <= lmax)) lmax = v;
            if (isfinite(l->others_pct) && !(l->others_pct <= omax)) omax = l->others_pct;
            if (isfinite(l->steal_pct) && !(l->steal_pct <= smax)) smax = l->steal_pct;
        }
        char ls[32] = "n/a", os[32] = "n/a", ss[32] = "n/a";
        if (isfinite(lmax)) snprintf(ls, sizeof ls, "%.2f", lmax);
        if (isfinite(omax)) snprintf(os, sizeof os, "%.1f%%", omax);
        if (isfinite(smax)) snprintf(ss, sizeof ss, "%.1f%%", smax);
        tdm_sb_printf(sb,
                      "  Host (rank 0's machine, %d cores, %d rank%s of this job): other processes' CPU up to %s, "
                      "CPU steal up to %s, load average up to %s; %d of %d timing run%s under load\n",
                      r->cores_online, r->local_ranks, r->local_ranks == 1 ? "" : "s", os, ss, ls, r->runs_under_load,
                      r->n_load, r->n_load == 1 ? "" : "s");
    }

    if (r->ddp_line_confirms >= 0)
        tdm_sb_printf(sb, "  DDP config lines show each side's value of the differing flags: %s\n",
                      yes_no(r->ddp_line_confirms));
    tdm_sb_puts(sb, "\n  Precision (every step, first timing run of each side)\n");
    tdm_sb_printf(sb, "  %-52s %s\n", "learning rate identical", yes_no(r->lr_equal));
    tdm_sb_printf(sb, "  %-52s %s\n", "consumed samples identical", yes_no(r->consumed_samples_equal));
    tdm_sb_printf(sb, "  %-52s %s\n", "global batch size identical", yes_no(r->global_batch_equal));
    if (r->loss_bitwise_equal) tdm_sb_printf(sb, "  %-52s %s\n", "loss bitwise identical", "yes");
    else
        tdm_sb_printf(sb, "  %-52s NO: first at step %lld, max relative deviation %.3g\n", "loss bitwise identical",
                      (long long)r->first_loss_diff_step, r->max_rel_loss_dev);
    if (r->grad_norm_bitwise_equal) tdm_sb_printf(sb, "  %-52s %s\n", "grad norm bitwise identical", "yes");
    else
        tdm_sb_printf(sb, "  %-52s NO: first at step %lld, max relative deviation %.3g\n",
                      "grad norm bitwise identical", (long long)r->first_grad_norm_diff_step, r->max_rel_grad_norm_dev);
    tdm_sb_printf(sb, "  %-52s %s\n", "loss and grad norm finite", yes_no(r->all_finite));
    tdm_sb_printf(sb, "  %-52s %d / %d\n", "NaN iterations / skipped iterations", r->nan_iterations,
                  r->skipped_iterations);
    if (r->fingerprints_equal < 0) tdm_sb_printf(sb, "  %-52s %s\n", "input fingerprints identical", "not audited");
    else if (r->fingerprints_equal)
        tdm_sb_printf(sb, "  %-52s yes (%lld steps)\n", "input fingerprints identical", (long long)A->audit_steps);
    else
        tdm_sb_printf(sb, "  %-52s NO: first at step %lld\n", "input fingerprints identical",
                      (long long)r->first_fingerprint_diff_step);
    if (o->repeats > 1)
        tdm_sb_printf(sb, "  %-52s %s\n", "repeats of each side bitwise identical", yes_no(r->repeats_bitwise_equal));

    tdm_sb_printf(sb, "\n  %-40s %12s %12s\n", "Communication (profiled run, ms/step)", "baseline", "candidate");
    tdm_ab_row3(sb, "communication busy", A->comm_ms, B->comm_ms, NULL);
    tdm_ab_row3(sb, "  hidden behind compute", A->hidden_comm_ms, B->hidden_comm_ms, NULL);
    tdm_ab_row3(sb, "  exposed", A->exposed_comm_ms, B->exposed_comm_ms, NULL);
    tdm_ab_row3(sb, "compute", A->compute_ms, B->compute_ms, NULL);
    tdm_ab_row3(sb, "data wait", A->data_wait_ms, B->data_wait_ms, NULL);
    tdm_ab_row3(sb, "step (profiled)", A->prof_step_ms, B->prof_step_ms, NULL);
    tdm_ab_row3(sb, "  last bucket (cannot overlap)", A->last_bucket_comm_ms, B->last_bucket_comm_ms, NULL);
    tdm_ab_row3(sb, "ideal step (all hideable comm hidden)", A->ideal_step_ms, B->ideal_step_ms, NULL);
    char ea[32], eb[32];
    fmt_pct(ea, sizeof ea, A->overlap_efficiency);
    fmt_pct(eb, sizeof eb, B->overlap_efficiency);
    tdm_sb_printf(sb, "  %-40s %12s %12s\n", "overlap efficiency (hidden / hideable)", ea, eb);
    tdm_ab_row3(sb, "ideal step (this schedule's overlap)", A->sched_ideal_step_ms, B->sched_ideal_step_ms, NULL);
    fmt_pct(ea, sizeof ea, A->sched_overlap_efficiency);
    fmt_pct(eb, sizeof eb, B->sched_overlap_efficiency);
    tdm_sb_printf(sb, "  %-40s %12s %12s\n", "overlap efficiency (this schedule)", ea, eb);

    /* Where the communication's CPU work goes: on a machine without a spare core it is taken
     * from compute, whatever the overlap hides (docs/ab-protocol.md). */
    tdm_sb_printf(sb, "\n  %-40s %12s %12s\n", "CPU (timing runs, ms/step, rank mean)", "baseline", "candidate");
    tdm_ab_row3(sb, "process (all threads)", A->cpu_ms, B->cpu_ms, NULL);
    tdm_ab_row3(sb, "  compute thread", A->compute_cpu_ms, B->compute_cpu_ms, NULL);
    tdm_ab_row3(sb, "  communication thread", A->comm_cpu_ms, B->comm_cpu_ms, NULL);
    char ca[32] = "n/a", cb[32] = "n/a";
    if (isfinite(A->cores_busy)) snprintf(ca, sizeof ca, "%.2f", A->cores_busy);
    if (isfinite(B->cores_busy)) snprintf(cb, sizeof cb, "%.2f", B->cores_busy);
    tdm_sb_printf(sb, "  %-40s %12s %12s   of %d online on rank 0's machine\n", "cores busy per rank", ca, cb,
                  r->cores_online);
    tdm_sb_printf(sb, "\n  Report: %s/report.md (%.0f s in all)\n", o->out, r->wall_s);
}

/* ---- files ---- */

static void csv_side(const tdm_ab_side *s, tdm_strbuf *sb) {
    tdm_sb_puts(sb, "repeat,iteration,consumed_samples,global_batch_size,lr,loss,grad_norm,skipped,nan,step_ms,"
                    "data_wait_ms,fwd_bwd_ms,grad_sync_ms,optimizer_ms,param_gather_ms,comm_thread_cpu_ms,"
                    "compute_cpu_ms,cpu_ms\n");
    for (int k = 0; k < s->repeats; k++)
        for (int64_t i = 0; i < s->steps; i++) {
            const tdm_step_record *x = &s->records[k * s->steps + i];
            tdm_sb_printf(sb, "%d,%lld,%lld,%d,%.17g,%.17g,%.17g,%d,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n",
                          k + 1, (long long)x->iteration, (long long)x->consumed_samples, x->global_batch_size, x->lr,
                          x->loss, x->grad_norm, x->skipped, x->nan, x->step_ms, x->data_wait_ms, x->fwd_bwd_ms,
                          x->grad_sync_ms, x->optimizer_ms, x->param_gather_ms, x->comm_thread_cpu_ms,
                          x->compute_cpu_ms, x->cpu_ms);
        }
}

static void json_side(tdm_strbuf *sb, const tdm_ab_side *s) {
    tdm_sb_puts(sb, "{");
    tdm_ab_json_num(sb, "mean_step_ms", s->mean_step_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "median_step_ms", s->median_step_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "stddev_step_ms", s->stddev_step_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "samples_per_s", s->samples_per_s), tdm_sb_puts(sb, ",\n    ");
    tdm_ab_json_num(sb, "model_gflops_per_rank", s->model_gflops_per_rank), tdm_sb_puts(sb, ",\n    ");
    tdm_ab_json_num(sb, "comm_ms", s->comm_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "hidden_comm_ms", s->hidden_comm_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "exposed_comm_ms", s->exposed_comm_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "compute_ms", s->compute_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "data_wait_ms", s->data_wait_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "ideal_step_ms", s->ideal_step_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "last_bucket_comm_ms", s->last_bucket_comm_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "overlap_efficiency", s->overlap_efficiency), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "sched_ideal_step_ms", s->sched_ideal_step_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "sched_overlap_efficiency", s->sched_overlap_efficiency), tdm_sb_puts(sb, ",\n    ");
    tdm_ab_json_num(sb, "cpu_ms", s->cpu_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "compute_cpu_ms", s->compute_cpu_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "comm_cpu_ms", s->comm_cpu_ms), tdm_sb_puts(sb, ", ");
    tdm_ab_json_num(sb, "cores_busy", s->cores_busy), tdm_sb_puts(sb, ",\n    ");
    tdm_sb_printf(sb, "\"window_samples\": %lld, \"nan_iterations\": %d, \"skipped_iterations\": %d, ",
                  (long long)s->window_samples, s->nan_iterations, s->skipped_iterations);
    tdm_sb_puts(sb, "\"repeat_mean_step_ms\": [");
    for (int k = 0; s->repeat_mean_ms && k < s->repeats; k++)
        tdm_sb_printf(sb, "%s%.6g", k ? ", " : "", isfinite(s->repeat_mean_ms[k]) ? s->repeat_mean_ms[k] : -1.0);
    tdm_sb_puts(sb, "],\n    \"ddp_config\": ");
    tdm_sb_json_string(sb, s->ddp_config_line, strlen(s->ddp_config_line));
    tdm_sb_puts(sb, "}");
}

static void summary_json(const tdm_ab_options *o, const tdm_ab_result *r, tdm_strbuf *sb) {
    const tdm_ab_side *A = &r->side[0], *B = &r->side[1];
    tdm_sb_printf(sb, "{\n  \"partial\": %s,\n  \"stop_signal\": ", r->partial ? "true" : "false");
    if (r->partial) tdm_sb_printf(sb, "\"%s\"", sig_name(r->stop_signal));
    else tdm_sb_puts(sb, "null");
    tdm_sb_puts(sb, ",\n  \"finished_runs\": [");
    for (int i = 0; i < r->n_finished; i++) {
        if (i) tdm_sb_puts(sb, ", ");
        tdm_sb_json_string(sb, r->finished[i], strlen(r->finished[i]));
    }
    tdm_sb_puts(sb, "],\n  \"baseline\": ");
    json_side(sb, A);
    tdm_sb_puts(sb, ",\n  \"candidate\": ");
    json_side(sb, B);
    tdm_sb_puts(sb, ",\n  ");
    const char *tf[] = {"false", "true"};
    tdm_ab_json_num(sb, "step_time_change_pct", r->step_time_change_pct), tdm_sb_puts(sb, ",\n  ");
    tdm_ab_json_num(sb, "median_step_time_change_pct", r->median_change_pct), tdm_sb_puts(sb, ",\n  ");
    tdm_ab_json_num(sb, "throughput_change_pct", r->throughput_change_pct), tdm_sb_puts(sb, ",\n  ");
    if (isfinite(r->step_time_ci.lo_pct))
        tdm_sb_printf(sb, "\"ci95_pct\": [%.6g, %.6g],\n  \"inside_noise\": %s,\n  ", r->step_time_ci.lo_pct,
                      r->step_time_ci.hi_pct, tdm_stats_ci_contains_zero(&r->step_time_ci) ? "true" : "false");
    else tdm_sb_puts(sb, "\"ci95_pct\": null,\n  \"inside_noise\": null,\n  ");
    tdm_sb_printf(sb, "\"ci_block_steps\": %d,\n  \"ci_paired\": %s,\n  ", r->ci_block, tf[!!r->ci_paired]);
    if (r->runs_ci_pairs)
        tdm_sb_printf(sb,
                      "\"runs_change_pct\": %.6g,\n  \"runs_ci95_pct\": [%.6g, %.6g],\n"
                      "  \"runs_inside_noise\": %s,\n  ",
                      r->runs_ci.change_pct, r->runs_ci.lo_pct, r->runs_ci.hi_pct,
                      tdm_stats_ci_contains_zero(&r->runs_ci) ? "true" : "false");
    else tdm_sb_puts(sb, "\"runs_change_pct\": null,\n  \"runs_ci95_pct\": null,\n  \"runs_inside_noise\": null,\n  ");
    tdm_sb_printf(sb, "\"runs_ci_pairs\": %d,\n  ", r->runs_ci_pairs);
    /* the host around every timing run, in the order they ran (baseline 1, candidate 1, baseline 2, ...) */
    tdm_sb_printf(sb, "\"local_ranks\": %d,\n  \"runs_under_load\": %d,\n  \"load\": [", r->local_ranks,
                  r->runs_under_load);
    for (int i = 0; i < r->n_load; i++) {
        const tdm_ab_load *l = &r->load[i];
        tdm_sb_printf(sb, "%s\n    {\"side\": \"%s\", \"repeat\": %d, ", i ? "," : "", i % 2 ? "candidate" : "baseline",
                      i / 2 + 1);
        tdm_ab_json_num(sb, "load_before", l->load_before), tdm_sb_puts(sb, ", ");
        tdm_ab_json_num(sb, "load_after", l->load_after), tdm_sb_puts(sb, ", ");
        tdm_ab_json_num(sb, "others_pct", l->others_pct), tdm_sb_puts(sb, ", ");
        tdm_ab_json_num(sb, "steal_pct", l->steal_pct);
        tdm_sb_printf(sb, ", \"under_load\": %s}", l->under_load ? "true" : "false");
    }
    tdm_sb_puts(sb, r->n_load ? "\n  ],\n  " : "],\n  ");
    tdm_sb_puts(sb, "\"noise_sentence\": ");
    tdm_sb_json_string(sb, r->noise_sentence, strlen(r->noise_sentence));
    tdm_sb_printf(sb, ",\n  \"window\": [%lld, %lld],\n  \"steps\": %lld,\n  \"repeats\": %d,\n  \"world_size\": %d,\n",
                  (long long)o->window_lo, (long long)o->window_hi, (long long)o->steps, o->repeats, r->world);
    tdm_sb_printf(sb, "  \"cores_online\": %d,\n  \"hosts\": {", r->cores_online);
    for (int i = 0; i < TDM_HOSTS_N; i++) {
        tdm_sb_printf(sb, "%s\"%s\": ", i ? ", " : "", tdm_hosts_names[i]);
        const char *v = r->hosts.value[i] ? r->hosts.value[i] : "";
        tdm_sb_json_string(sb, v, strlen(v));
    }
    tdm_sb_puts(sb, "},\n");
    tdm_sb_printf(sb, "  \"loss_bitwise_equal\": %s,\n  \"first_loss_diff_step\": %lld,\n  ",
                  tf[!!r->loss_bitwise_equal], (long long)r->first_loss_diff_step);
    tdm_ab_json_num(sb, "max_rel_loss_dev", r->max_rel_loss_dev);
    tdm_sb_printf(sb, ",\n  \"grad_norm_bitwise_equal\": %s,\n  \"first_grad_norm_diff_step\": %lld,\n  ",
                  tf[!!r->grad_norm_bitwise_equal], (long long)r->first_grad_norm_diff_step);
    tdm_ab_json_num(sb, "max_rel_grad_norm_dev", r->max_rel_grad_norm_dev);
    tdm_sb_printf(sb,
                  ",\n  \"lr_equal\": %s,\n  \"consumed_samples_equal\": %s,\n  \"global_batch_size_equal\": %s,\n"
                  "  \"all_finite\": %s,\n  \"repeats_bitwise_equal\": %s,\n  \"ddp_config_confirms_diff\": %s,\n",
                  tf[!!r->lr_equal], tf[!!r->consumed_samples_equal], tf[!!r->global_batch_equal], tf[!!r->all_finite],
                  tf[!!r->repeats_bitwise_equal], r->ddp_line_confirms < 0 ? "null" : tf[!!r->ddp_line_confirms]);
    if (r->fingerprints_equal < 0) tdm_sb_puts(sb, "  \"fingerprints_equal\": null,\n");
    else tdm_sb_printf(sb, "  \"fingerprints_equal\": %s,\n", tf[!!r->fingerprints_equal]);
    tdm_sb_printf(sb, "  \"audit_steps\": %lld,\n  \"nan_iterations\": %d,\n  \"skipped_iterations\": %d,\n  ",
                  (long long)A->audit_steps, r->nan_iterations, r->skipped_iterations);
    tdm_ab_json_num(sb, "overlap_efficiency", B->overlap_efficiency), tdm_sb_puts(sb, ",\n  ");
    tdm_ab_json_num(sb, "sched_overlap_efficiency", B->sched_overlap_efficiency);
    tdm_sb_puts(sb, ",\n  \"config_diff\": [");
    for (int i = 0; i < r->n_diff; i++) {
        if (i) tdm_sb_puts(sb, ", ");
        tdm_sb_json_string(sb, r->diff_lines[i], strlen(r->diff_lines[i]));
    }
    tdm_sb_printf(sb, "],\n  \"wall_s\": %.1f\n}\n", r->wall_s);
}

/* Mean over repeats of each step's value (loss or step time) of one side. */
static double *per_step_mean(const tdm_ab_side *s, int loss) {
    double *y = tdm_xcalloc((size_t)s->steps + 1, sizeof *y);
    for (int64_t i = 0; i < s->steps; i++) {
        double acc = 0;
        for (int k = 0; k < s->repeats; k++) {
            const tdm_step_record *x = &s->records[k * s->steps + i];
            acc += loss ? x->loss : x->step_ms;
        }
        y[i] = loss ? s->records[i].loss : acc / s->repeats; /* loss: first run (repeats are identical) */
    }
    return y;
}

static double *window_times(const tdm_ab_options *o, const tdm_ab_side *s, int64_t *n) {
    double *t = tdm_xcalloc((size_t)(s->repeats * s->steps) + 1, sizeof *t);
    *n = 0;
    for (int64_t i = 0; i < s->repeats * s->steps; i++)
        if (s->records[i].iteration >= o->window_lo && s->records[i].iteration <= o->window_hi)
            t[(*n)++] = s->records[i].step_ms;
    return t;
}

/* One step of one side's merged trace as a timeline SVG; 0 when written, -1 when the
 * trace is missing or holds no step (the report says so). */
static int timeline_svg(const tdm_ab_side *s, const char *out, tdm_strbuf *sb) {
    char path[1300];
    snprintf(path, sizeof path, "%s/trace.json", s->trace_dir);
    tdm_prof_trace t;
    if (tdm_prof_trace_load(path, (size_t)1 << 30, &t, NULL) != 0) return -1;
    (void)out;
    /* the last complete step envelope on rank 0 */
    const tdm_prof_rec *env = NULL;
    for (int64_t i = 0; i < t.n; i++)
        if (t.recs[i].rank == 0 && !t.recs[i].instant && t.recs[i].cat == TDM_PROF_PHASE &&
            !strcmp(t.recs[i].name, "step"))
            env = &t.recs[i];
    if (!env) {
        tdm_prof_trace_free(&t);
        return -1;
    }
    double lo = env->t0_us, hi = env->t1_us;
    int64_t step = env->arg;
    /* rows: distinct (rank, tid) with events in range (every one: 8 ranks with extra tracks are many) */
    int cap_rows = 16, n_rows = 0;
    int *row_rank = tdm_xmalloc(sizeof(int) * (size_t)cap_rows), *row_tid = tdm_xmalloc(sizeof(int) * (size_t)cap_rows);
    char(*labels)[48] = tdm_xmalloc(sizeof *labels * (size_t)cap_rows);
    tdm_svg_bar *bars = tdm_xmalloc((size_t)(t.n + 1) * sizeof *bars);
    int64_t nb = 0;
    for (int64_t i = 0; i < t.n; i++) {
        const tdm_prof_rec *e = &t.recs[i];
        if (e->instant || e->t1_us < lo || e->t0_us > hi) continue;
        if (e->cat == TDM_PROF_PHASE && !strcmp(e->name, "step")) continue;
        int row = -1;
        for (int k = 0; k < n_rows; k++)
            if (row_rank[k] == e->rank && row_tid[k] == e->tid) row = k;
        if (row < 0) {
            if (n_rows == cap_rows) {
                cap_rows *= 2;
                row_rank = tdm_xrealloc(row_rank, sizeof(int) * (size_t)cap_rows);
                row_tid = tdm_xrealloc(row_tid, sizeof(int) * (size_t)cap_rows);
                labels = tdm_xrealloc(labels, sizeof *labels * (size_t)cap_rows);
            }
            row = n_rows++;
            row_rank[row] = e->rank;
            row_tid[row] = e->tid;
            static const char *const kinds[] = {"compute", "comm", "loader"};
            const int lane = e->tid / TDM_PROF_TRACE_LANE_TID; /* a thread's extra track: "rank 0 comm (2)" */
            snprintf(labels[row], sizeof labels[row], lane > 0 ? "rank %d %s (%d)" : "rank %d %s", e->rank,
                     kinds[e->thread_kind < 3 ? e->thread_kind : 0], lane + 1);
        }
        int kind = e->cat == TDM_PROF_COMM   ? TDM_SVG_COMM
                   : e->cat == TDM_PROF_WAIT ? TDM_SVG_WAIT
                   : e->cat == TDM_PROF_DATA ? TDM_SVG_DATA
                                             : TDM_SVG_COMPUTE;
        int depth = e->cat == TDM_PROF_LAYER ? 1 : e->cat == TDM_PROF_KERNEL ? 2 : e->cat == TDM_PROF_WAIT ? 1 : 0;
        bars[nb++] = (tdm_svg_bar){row, (e->t0_us - lo) / 1e3, (e->t1_us - lo) / 1e3, kind, depth};
    }
    /* rows in reading order: by rank, then compute, comm, loader */
    size_t nr = (size_t)n_rows + 1;
    int *order = tdm_xmalloc(sizeof(int) * nr), *where = tdm_xmalloc(sizeof(int) * nr);
    int *kind_of = tdm_xmalloc(sizeof(int) * nr);
    const char **label_ptr = tdm_xmalloc(sizeof(char *) * nr);
    for (int k = 0; k < n_rows; k++) {
        order[k] = k;
        kind_of[k] = strstr(labels[k], "compute") ? 0 : strstr(labels[k], "comm") ? 1 : 2;
    }
    for (int i = 1; i < n_rows; i++) /* insertion sort: tens of rows */
        for (int j = i; j > 0; j--) {
            int x = order[j - 1], y = order[j];
            long kx = (long)row_rank[x] * 16 + kind_of[x], ky = (long)row_rank[y] * 16 + kind_of[y];
            if (kx < ky || (kx == ky && row_tid[x] <= row_tid[y])) break;
            order[j - 1] = y, order[j] = x;
        }
    for (int k = 0; k < n_rows; k++) {
        where[order[k]] = k;
        label_ptr[k] = labels[order[k]];
    }
    for (int64_t i = 0; i < nb; i++) bars[i].row = where[bars[i].row];
    char title[160];
    snprintf(title, sizeof title, "%s: step %lld timeline (rank 0's step, all ranks)", s->label, (long long)step);
    tdm_svg_timeline(sb, title, label_ptr, n_rows, bars, nb, 0, (hi - lo) / 1e3);
    free(bars);
    free(row_rank), free(row_tid), free(labels), free(order), free(where), free(kind_of), free(label_ptr);
    tdm_prof_trace_free(&t);
    return 0;
}

static void machine_info(tdm_strbuf *sb, const tdm_hosts *h) {
    struct utsname u;
    if (uname(&u) == 0) tdm_sb_printf(sb, "- uname: %s %s %s %s\n", u.sysname, u.release, u.version, u.machine);
    tdm_sb_printf(sb, "- online CPUs (nproc): %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
    static const char *const what[TDM_HOSTS_N] = {"processor", "vector extensions", "compiler target",
                                                  "OpenBLAS kernels", "waits on a collective poll"};
    for (int i = 0; i < TDM_HOSTS_N; i++)
        if (h->value[i]) tdm_sb_printf(sb, "- %s: %s\n", what[i], h->value[i]);
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(ver, &len);
    ver[strcspn(ver, "\n")] = 0;
    tdm_sb_printf(sb, "- MPI library: %s\n", ver);
    tdm_sb_printf(sb, "- OpenBLAS: %s (%d thread%s per rank)\n", openblas_get_config(), openblas_get_num_threads(),
                  openblas_get_num_threads() == 1 ? "" : "s");
}

/* The arguments as a shell reads them back: anything beyond plain characters in single quotes, a single
 * quote inside as '\'' (close, an escaped quote, reopen). */
static void quote_flags(tdm_strbuf *sb, int argc, char **argv) {
    static const char plain[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./:=,+@%";
    for (int i = 0; i < argc; i++) {
        tdm_sb_putc(sb, ' ');
        const char *a = argv[i];
        if (a[0] && strspn(a, plain) == strlen(a)) {
            tdm_sb_puts(sb, a);
            continue;
        }
        tdm_sb_putc(sb, '\'');
        for (const char *p = a; *p; p++)
            if (*p == '\'') tdm_sb_puts(sb, "'\\''");
            else tdm_sb_putc(sb, *p);
        tdm_sb_putc(sb, '\'');
    }
}

/* Longer than most: the report folder's files in order, each a few lines. */
int tdm_ab_write_report(const tdm_ab_options *o, const tdm_ab_result *r, tdm_error *err) {
    const tdm_ab_side *A = &r->side[0], *B = &r->side[1];
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    int rc = 0;
    /* per-step CSV */
    csv_side(A, &sb);
    if (tdm_ab_write_sb(o->out, "steps_baseline.csv", &sb, err) != 0) goto fail;
    tdm_sb_clear(&sb);
    csv_side(B, &sb);
    if (tdm_ab_write_sb(o->out, "steps_candidate.csv", &sb, err) != 0) goto fail;
    tdm_sb_clear(&sb);
    summary_json(o, r, &sb);
    if (tdm_ab_write_sb(o->out, "summary.json", &sb, err) != 0) goto fail;

    /* plots: none when a side has no finished timing run (a partial report) */
    const int compare = A->repeats > 0 && B->repeats > 0;
    int have_tl[2] = {0, 0};
    if (!compare) goto report_md;
    double *la = per_step_mean(A, 1), *lb = per_step_mean(B, 1), *sa = per_step_mean(A, 0), *sbm = per_step_mean(B, 0);
    tdm_svg_series loss[2] = {{"baseline", NULL, la, A->steps, "#4e79a7"},
                              {"candidate", NULL, lb, B->steps, "#e15759"}};
    tdm_svg_series st[2] = {{"baseline", NULL, sa, A->steps, "#4e79a7"}, {"candidate", NULL, sbm, B->steps, "#e15759"}};
    tdm_sb_clear(&sb);
    tdm_svg_line_plot(&sb, "Loss per step (overlaid; identical runs draw one line)", "iteration", "loss", loss, 2);
    rc |= tdm_ab_write_sb(o->out, "loss.svg", &sb, err);
    tdm_sb_clear(&sb);
    tdm_svg_line_plot_window(&sb, "Step time per step (mean over repeats; slowest rank)", "iteration", "ms", st, 2,
                             (double)o->window_lo, (double)o->window_hi);
    rc |= tdm_ab_write_sb(o->out, "step_time.svg", &sb, err);
    int64_t nwa, nwb;
    double *wa = window_times(o, A, &nwa), *wb = window_times(o, B, &nwb);
    tdm_svg_series hs[2] = {{"baseline", NULL, wa, nwa, "#4e79a7"}, {"candidate", NULL, wb, nwb, "#e15759"}};
    tdm_sb_clear(&sb);
    tdm_svg_histogram(&sb, "Step-time distribution in the window", "step time (ms)", hs, 2, 30);
    rc |= tdm_ab_write_sb(o->out, "step_time_hist.svg", &sb, err);
    free(la), free(lb), free(sa), free(sbm), free(wa), free(wb);
    for (int s = 0; s < 2; s++) {
        tdm_sb_clear(&sb);
        have_tl[s] = timeline_svg(&r->side[s], o->out, &sb) == 0;
        char file[64];
        snprintf(file, sizeof file, "timeline_%s.svg", r->side[s].label);
        if (have_tl[s]) rc |= tdm_ab_write_sb(o->out, file, &sb, err);
    }
    if (rc) goto fail;

report_md:
    tdm_sb_clear(&sb);
    tdm_sb_puts(&sb, "# A/B report\n\n");
    if (r->partial)
        tdm_sb_printf(&sb,
                      "**Partial report**: `tandem ab` was stopped by %s after %d of %d timing runs; it holds only "
                      "the runs that finished (listed below and in `summary.json`'s `finished_runs`).\n\n",
                      sig_name(r->stop_signal), r->n_load, 2 * o->repeats);
    tdm_sb_puts(&sb, "```\n");
    tdm_ab_format_table(o, r, &sb);
    tdm_sb_puts(&sb, "```\n\n## What was run\n\n");
    tdm_sb_printf(&sb,
                  "- %d timing run(s) per side, interleaved baseline, candidate, baseline, ...: %lld steps each, "
                  "profiling off, fingerprint audit off, no checkpoints. Statistics over steps %lld-%lld of "
                  "every run, step time = the slowest rank's.\n",
                  o->repeats, (long long)o->steps, (long long)o->window_lo, (long long)o->window_hi);
    tdm_sb_printf(&sb,
                  "- The 95%% interval is a percentile bootstrap of the window's steps (%d resamples, seed %llu) "
                  "in blocks of %d consecutive steps within each repeat (neighbouring steps are not "
                  "independent: a slow period slows several in a row)%s. It does not see how much whole "
                  "runs differ, so also compare the repeats' means:",
                  o->bootstrap_resamples, (unsigned long long)o->bootstrap_seed, r->ci_block,
                  r->ci_paired ? ", paired: each resample takes the same iterations of both sides' repeat r, which "
                                 "ran the same batches, so what the two share (a batch's size) cancels"
                  : r->fingerprints_equal == 0 ? ", not paired: the two sides' inputs differ"
                                               : "");
    for (int s = 0; s < 2; s++) {
        tdm_sb_printf(&sb, " %s", r->side[s].label);
        for (int k = 0; r->side[s].repeat_mean_ms && k < r->side[s].repeats; k++)
            tdm_sb_printf(&sb, "%s%.2f", k ? ", " : " ", r->side[s].repeat_mean_ms[k]);
        tdm_sb_puts(&sb, s ? " ms.\n" : " ms;");
    }
    if (r->runs_ci_pairs)
        tdm_sb_printf(&sb,
                      "- Between whole runs: the mean over the %d pairs (baseline run r, candidate run r, "
                      "interleaved) of each pair's change, %+.2f%%, with its 95%% Student t interval "
                      "[%+.2f%%, %+.2f%%] (%d degrees of freedom): it sees a host that is slower during one run "
                      "than the next, which the steps' interval cannot.\n",
                      r->runs_ci_pairs, r->runs_ci.change_pct, r->runs_ci.lo_pct, r->runs_ci.hi_pct,
                      r->runs_ci_pairs - 1);
    if (r->n_load) {
        tdm_sb_printf(&sb,
                      "- The host around each timing run (rank 0's machine, %d cores online, %d rank%s of this job "
                      "there; a run is under load when other processes took more than %.0f%% of its CPU time over "
                      "the run, or CPU steal exceeds %.0f%%; the load average counts the job's own threads too):\n\n"
                      "  | run | load before | load after | other processes' CPU | steal | under load |\n"
                      "  |---|---|---|---|---|---|\n",
                      r->cores_online, r->local_ranks, r->local_ranks == 1 ? "" : "s", TDM_AB_OTHERS_PCT,
                      TDM_AB_STEAL_PCT);
        for (int i = 0; i < r->n_load; i++) {
            const tdm_ab_load *l = &r->load[i];
            char b[32] = "n/a", a[32] = "n/a", ot[32] = "n/a", st[32] = "n/a";
            if (isfinite(l->load_before)) snprintf(b, sizeof b, "%.2f", l->load_before);
            if (isfinite(l->load_after)) snprintf(a, sizeof a, "%.2f", l->load_after);
            if (isfinite(l->others_pct)) snprintf(ot, sizeof ot, "%.1f%%", l->others_pct);
            if (isfinite(l->steal_pct)) snprintf(st, sizeof st, "%.1f%%", l->steal_pct);
            tdm_sb_printf(&sb, "  | %s %d | %s | %s | %s | %s | %s |\n", i % 2 ? "candidate" : "baseline", i / 2 + 1, b,
                          a, ot, st, l->under_load ? "**yes**" : "no");
        }
        tdm_sb_putc(&sb, '\n');
    }
    if (A->audit_steps > 0)
        tdm_sb_printf(&sb,
                      "- One fingerprint audit run per side (%lld steps): the hash of every rank's micro-batches "
                      "at every step, compared between the sides.\n",
                      (long long)A->audit_steps);
    if (o->profile_steps > 0) /* the steps recorded: --profile-steps from the window's start, moved back from the end */
        tdm_sb_printf(&sb,
                      "- One profiled run per side (steps %lld-%lld at level %d): traces in `traces/<side>/` "
                      "(`trace.json` opens in https://ui.perfetto.dev), analysis by `tandem trace-summary "
                      "traces/<side>`.\n",
                      (long long)r->profile_first, (long long)r->profile_last, o->profile_level);
    if (!compare) tdm_sb_puts(&sb, "\n## Plots\n\nnone: a side has no finished timing run\n\n");
    else
        tdm_sb_puts(&sb, "\n## Plots\n\n![loss](loss.svg)\n\n![step "
                         "time](step_time.svg)\n\n![distribution](step_time_hist.svg)\n\n");
    for (int s = 0; s < 2; s++)
        if (have_tl[s]) tdm_sb_printf(&sb, "![timeline %s](timeline_%s.svg)\n\n", r->side[s].label, r->side[s].label);
        else tdm_sb_printf(&sb, "(no timeline for the %s: its profiled run left no trace)\n\n", r->side[s].label);
    tdm_sb_puts(&sb, "## Configurations\n\nDiffering arguments (baseline -> candidate):\n\n");
    for (int i = 0; i < r->n_diff; i++) tdm_sb_printf(&sb, "- `%s`\n", r->diff_lines[i]);
    if (!r->n_diff) tdm_sb_puts(&sb, "- none\n");
    tdm_sb_printf(&sb, "\nIdentical arguments (%d):\n\n```\n", r->n_same);
    for (int i = 0; i < r->n_same; i++) tdm_sb_printf(&sb, "%s\n", r->same_lines[i]);
    tdm_sb_puts(&sb, "```\n\n## Reproduce\n\n```sh\n");
    if (o->command_line) tdm_sb_printf(&sb, "%s\n", o->command_line);
    tdm_sb_puts(&sb, "# one timing run of each side by hand:\n");
    for (int s = 0; s < 2; s++) {
        tdm_sb_printf(&sb, "mpirun -np %d build/tandem train", r->world);
        quote_flags(&sb, o->common_argc, o->common_argv);
        /* the side's flags as tandem split them, each quoted for the shell ($ and ` stay literal) */
        const char *f = s ? o->candidate_flags : o->baseline_flags;
        char **words;
        int nw;
        tdm_error e;
        if (f && *f && tdm_train_args_split(f, &words, &nw, &e) == 0) {
            quote_flags(&sb, nw, words);
            free(words);
        }
        /* from a --load checkpoint at iteration L the runs trained iterations L+1 to L+steps */
        tdm_sb_printf(&sb, " --train-iters %lld\n", (long long)(r->side[s].start_iteration + o->steps));
    }
    tdm_sb_puts(&sb, "```\n\n## Machine and libraries\n\n");
    machine_info(&sb, &r->hosts);
    tdm_sb_puts(&sb, "\n## Files\n\n- `summary.json`: the numbers above (keys documented in docs/ab-protocol.md)\n"
                     "- `steps_baseline.csv`, `steps_candidate.csv`: every step of every timing run\n"
                     "- `loss.svg`, `step_time.svg`, `step_time_hist.svg`");
    for (int s = 0; s < 2; s++)
        if (have_tl[s]) tdm_sb_printf(&sb, ", `timeline_%s.svg`", r->side[s].label);
    tdm_sb_putc(&sb, '\n');
    if (o->profile_steps > 0)
        tdm_sb_puts(&sb, "- `traces/<side>/`: `trace.json` (all ranks), `trace_rank<r>.json`, `analysis.json`, "
                         "`summary.txt`, `tools.json`\n");
    if (tdm_ab_write_sb(o->out, "report.md", &sb, err) != 0) goto fail;
    tdm_sb_free(&sb);
    return 0;
fail:
    tdm_sb_free(&sb);
    return -1;
}
