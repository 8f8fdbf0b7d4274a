/* cmd_plan.c - `tandem plan`: predicts what an overlap flag, a bucket size, a dp size or a faster
 * link buys, from a model of one step (src/plan) built from a profiled baseline run, or from a
 * model config's FLOPs for the practice (docs/plan.md). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ab/ab.h"
#include "ab/stats.h"
#include "core/alloc.h"
#include "core/fs.h"
#include "core/rng.h"
#include "core/strbuf.h"
#include "distributed/config.h"
#include "model/config.h"
#include "model/qwen3vl.h"
#include "plan/plan.h"
#include "prof/trace.h"
#include "runs/run.h"
#include "tools/cli.h"
#include "tools/commands.h"

#define MAX_CANDIDATES    32
#define MAX_BASELINE_RUNS 16
#define INTERVAL_SEED     20261205 /* the resamples of the traced steps: the same interval for the same trace */

typedef struct plan_opts {
    const char *trace;
    const char *model;
    int freeze_vision, freeze_projector, freeze_llm, freeze_lm_head;
    const char *baseline;
    const char *baseline_runs[MAX_BASELINE_RUNS], *window;
    int n_baseline_runs;
    double baseline_step_ms;
    const char *candidates[MAX_CANDIDATES];
    int n_candidates;
    double link_gbps, link_latency_us, cpu_us_per_mb, min_gain, speed_beside, lost_share;
    const char *out, *doctor;
    char comm_progress[16], link_algo[8];
    int suggest, practice, resamples;
    double tflops;
    int64_t tokens, patches;
    int micro, dp, cores, comm_nice;
} plan_opts;

static const tdm_flag FLAGS[] = {
    {.name = "model",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(plan_opts, model),
     .metavar = "DIR",
     .help = "the run's model config (config.json): the parameter table the buckets are cut from"},
    {.name = "freeze-vision", .kind = TDM_FLAG_BOOL, .off = offsetof(plan_opts, freeze_vision), .help = "as train"},
    {.name = "freeze-projector",
     .kind = TDM_FLAG_BOOL,
     .off = offsetof(plan_opts, freeze_projector),
     .help = "as train"},
    {.name = "freeze-llm", .kind = TDM_FLAG_BOOL, .off = offsetof(plan_opts, freeze_llm), .help = "as train"},
    {.name = "freeze-lm-head", .kind = TDM_FLAG_BOOL, .off = offsetof(plan_opts, freeze_lm_head), .help = "as train"},
    {.name = "baseline",
     .kind = TDM_FLAG_STRING,
     .off = offsetof(plan_opts, baseline),
     .opts = TDM_FLAG_DASHES,
     .metavar = "\"FLAGS\"",
     .help = "what the trace cannot show of the traced run's settings, over what it does (dp, overlap flags, "
             "distributed optimizer, bucket count as --ddp-num-buckets): a --ddp-bucket-size, --bf16"},
    {.name = "baseline-run",
     .kind = TDM_FLAG_LIST,
     .off = offsetof(plan_opts, baseline_runs),
     .count_off = offsetof(plan_opts, n_baseline_runs),
     .max = MAX_BASELINE_RUNS,
     .opts = TDM_FLAG_MANY,
     .metavar = "LOG...",
     .help = "logs of the traced setting run without the profiler (Megatron-LM, MindSpeed, tandem train; as tandem "
             "ab --baseline-run reads): the model's compute is scaled so that the replay takes their mean step"},
    {.name = "window",
     .kind = TDM_FLAG_STRING,
     .off = offsetof(plan_opts, window),
     .metavar = "A:B",
     .help = "with --baseline-run: the iterations of the mean, inclusive (default the practice's 21:200 clipped to the "
             "log; in a shorter one, after the warm-up it names, else after its first 10%)"},
    {.name = "baseline-step-ms",
     .kind = TDM_FLAG_DOUBLE,
     .off = offsetof(plan_opts, baseline_step_ms),
     .lo = 1e-6,
     .hi = 1e9,
     .metavar = "X",
     .help = "as --baseline-run, with the traced setting's mean step given in ms"},
    {.name = "candidate",
     .kind = TDM_FLAG_LIST,
     .off = offsetof(plan_opts, candidates),
     .count_off = offsetof(plan_opts, n_candidates),
     .max = MAX_CANDIDATES,
     .opts = TDM_FLAG_DASHES,
     .metavar = "\"FLAGS\"",
     .help = "a setting to predict (repeat the flag for more), relative to the baseline: --overlap-grad-reduce, "
             "--overlap-param-gather, "
             "--ddp-bucket-size N, --ddp-num-buckets N, --dp N, --link-gbps X, --link-scale X (the baseline's link "
             "X times as fast), --link-latency-us X, --link-algo ring|tree (default: the overlap flags)"},
    {.name = "link-gbps",
     .kind = TDM_FLAG_DOUBLE,
     .off = offsetof(plan_opts, link_gbps),
     .lo = 1e-6,
     .hi = 1e6,
     .metavar = "X",
     .help = "link bandwidth in Gbit/s (default: fitted to the baseline's collectives; practice: 800)"},
    {.name = "link-latency-us",
     .kind = TDM_FLAG_DOUBLE,
     .off = offsetof(plan_opts, link_latency_us),
     .lo = 0,
     .hi = 1e9,
     .metavar = "X",
     .help = "latency of one step of the algorithm (--link-algo) in us (default: fitted; practice: 10)"},
    {.name = "link-algo",
     .kind = TDM_FLAG_CHOICE,
     .off = offsetof(plan_opts, link_algo),
     .cap = sizeof(((plan_opts *)0)->link_algo),
     .choices = "ring|tree",
     .def = "ring",
     .metavar = "ALGO",
     .help = "how the baseline's all-reduces ran: ring, or NCCL's double binary tree (NCCL_ALGO=Tree: "
             "2 ceil(log2 dp) latencies, 2 n / bandwidth); reduce-scatter and all-gather run as rings either way"},
    {.name = "comm-cpu-us-per-mb",
     .kind = TDM_FLAG_DOUBLE,
     .off = offsetof(plan_opts, cpu_us_per_mb),
     .lo = 0,
     .hi = 1e9,
     .metavar = "X",
     .help = "CPU us that driving 1 MB of a collective takes from the compute it overlaps (inline progress, "
             "or a communication thread without a core of its own; default: measured, the trace's communication "
             "threads' CPU time over the bytes they moved; practice: 0)"},
    {.name = "comm-speed-beside",
     .kind = TDM_FLAG_DOUBLE,
     .off = offsetof(plan_opts, speed_beside),
     .lo = 0.001,
     .hi = 1,
     .metavar = "X",
     .help = "the share of its speed alone a collective moves at while compute runs beside it, as tandem doctor's "
             "\"beside compute\" measures it for a progress mode (default: a communication thread on shared memory "
             "slows by its share of the core at --comm-thread-nice, else nothing slows)"},
    {.name = "comm-lost-share",
     .kind = TDM_FLAG_DOUBLE,
     .off = offsetof(plan_opts, lost_share),
     .lo = 0,
     .hi = 0.95,
     .metavar = "X",
     .help = "the share of its time compute loses while any collective is in flight beside it, in place of "
             "--comm-cpu-us-per-mb: a communication thread's cost, as tandem doctor's thread line measures it "
             "(its polls and wake-ups follow the time in flight more than the bytes)"},
    {.name = "doctor",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(plan_opts, doctor),
     .metavar = "FILE",
     .help = "tandem doctor's JSON report (tandem doctor --json FILE, run where the traced run ran): its "
             "beside-compute figures for the traced run's progress mode, as --comm-lost-share (thread) or "
             "--comm-cpu-us-per-mb (inline) and --comm-speed-beside (a flag given wins)"},
    {.name = "comm-progress",
     .kind = TDM_FLAG_CHOICE,
     .off = offsetof(plan_opts, comm_progress),
     .cap = sizeof(((plan_opts *)0)->comm_progress),
     .choices = "thread|inline",
     .metavar = "MODE",
     .help = "the traced run's --comm-progress (default: as the trace's analysis.json says, else thread): the line "
             "of tandem doctor's report --doctor takes, and, inline, a baseline's reduce-scatters posted together "
             "are read for how much slower they ran"},
    {.name = "comm-thread-nice",
     .kind = TDM_FLAG_INT,
     .off = offsetof(plan_opts, comm_nice),
     .lo = 0,
     .hi = 19,
     .def = "-1",
     .metavar = "N",
     .help = "the traced run's --comm-thread-nice (as train; default: as the trace's analysis.json says, else 10): "
             "a communication thread without a core of its own gets the scheduler's share of a core at that "
             "niceness beside compute, and its collectives slow there"},
    {.name = "cores",
     .kind = TDM_FLAG_INT,
     .off = offsetof(plan_opts, cores),
     .lo = 0,
     .hi = 1e6,
     .def = "0",
     .metavar = "N",
     .help = "cores one host's ranks share: a dp size above it slows compute by dp / N (oversubscribed ranks; "
             "0: every rank has a core)"},
    {.name = "suggest",
     .kind = TDM_FLAG_BOOL,
     .off = offsetof(plan_opts, suggest),
     .help = "search the bucket count and the overlap flags and propose the best, with the `tandem ab` command "
             "that confirms it"},
    {.name = "min-gain",
     .kind = TDM_FLAG_DOUBLE,
     .off = offsetof(plan_opts, min_gain),
     .lo = 0,
     .hi = 100,
     .def = "1",
     .metavar = "PCT",
     .help = "--suggest proposes a change only when it is predicted at least PCT% faster than the baseline (runs of "
             "one setting differ by about that); else it says to keep the baseline"},
    {.name = "resamples",
     .kind = TDM_FLAG_INT,
     .off = offsetof(plan_opts, resamples),
     .lo = 0,
     .hi = 100000,
     .def = "200",
     .metavar = "N",
     .help = "each change's 95% interval: the model rebuilt from N resamples of the traced steps, drawn with "
             "replacement (tandem's trace of 3 steps or more; 0: none)"},
    {.name = "practice",
     .kind = TDM_FLAG_BOOL,
     .off = offsetof(plan_opts, practice),
     .help = "no trace: the practice's Qwen3-VL-8B step (configs/qwen3-vl-8b unless --model), vision and projector "
             "frozen, compute from FLOPs at --tflops, with the sensitivity to each assumption"},
    {.name = "tflops",
     .kind = TDM_FLAG_DOUBLE,
     .off = offsetof(plan_opts, tflops),
     .lo = 1e-6,
     .hi = 1e6,
     .def = "200",
     .metavar = "X",
     .help = "practice: sustained TFLOP/s of one device"},
    {.name = "tokens",
     .kind = TDM_FLAG_I64,
     .off = offsetof(plan_opts, tokens),
     .lo = 1,
     .hi = 1e9,
     .def = "4096",
     .metavar = "N",
     .help = "practice: tokens per micro-batch"},
    {.name = "patches",
     .kind = TDM_FLAG_I64,
     .off = offsetof(plan_opts, patches),
     .lo = 0,
     .hi = 1e9,
     .def = "4096",
     .metavar = "N",
     .help = "practice: vision patches per micro-batch (the frozen tower's forward)"},
    {.name = "micro-batches",
     .kind = TDM_FLAG_INT,
     .off = offsetof(plan_opts, micro),
     .lo = 1,
     .hi = 1e6,
     .def = "1",
     .metavar = "N",
     .help = "practice: micro-batches per step on a rank"},
    {.name = "dp",
     .kind = TDM_FLAG_INT,
     .off = offsetof(plan_opts, dp),
     .lo = 1,
     .hi = 65536,
     .def = "8",
     .metavar = "N",
     .help = "practice: data-parallel size"},
    {.name = "out",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(plan_opts, out),
     .def = "plan-report",
     .metavar = "DIR",
     .help = "write plan.md, plan.json and timeline.svg there"},
};

static const tdm_positional POS[] = {
    {.metavar = "RUN_OR_TRACE",
     .off = offsetof(plan_opts, trace),
     .help = "a profiled tandem run: its trace.json or the folder holding it (the profile config's save_path); "
             "without --model, a PyTorch DDP profiler trace (Kineto JSON)"},
};

static const tdm_flags P = {
    .command = "tandem plan",
    .usage = "tandem plan RUN_OR_TRACE --model DIR [--freeze-...] [--candidate \"FLAGS\"...] [--suggest]\n"
             "       tandem plan PYTORCH_TRACE [--candidate \"FLAGS\"...]\n"
             "       tandem plan --practice [--tflops X] [--link-gbps X] [--link-latency-us X]",
    .about = "Builds a model of one step from a profiled baseline run (per-layer compute, when each bucket's\n"
             "gradients are ready, the collectives and a link fitted to them) and predicts, by simulating the\n"
             "schedule tandem runs, the step time of other settings: overlap flags, bucket size or count, dp size,\n"
             "link rate; with hidden and exposed communication per collective.",
    .flags = FLAGS,
    .n_flags = (int)(sizeof FLAGS / sizeof *FLAGS),
    .pos = POS,
    .n_pos = 1,
    .min_pos = 0,
    .epilog = "docs/plan.md describes the model, its limits and the practice's prediction.\n",
};

/* ---- the parameter table from the model config ----------------------------------------------- */

typedef struct table {
    tdm_plan_param *params;
    int n_params;
    char **unit_names;
    int n_units;
    int64_t *unit_numel; /* every parameter a unit reads, trainable or not (FLOPs) */
    int *unit_trains;    /* the unit has a backward: it or a unit before it trains */
} table;

static void table_free(table *t) {
    free(t->params);
    for (int u = 0; u < t->n_units; u++) free(t->unit_names[u]);
    free(t->unit_names);
    free(t->unit_numel);
    free(t->unit_trains);
    memset(t, 0, sizeof *t);
}

static int load_table(const char *dir, const tdm_freeze *fz, table *t, tdm_model_config *cfg, tdm_error *err) {
    memset(t, 0, sizeof *t);
    if (tdm_model_config_load(dir, cfg, err)) return -1;
    tdm_model *m = tdm_model_create(cfg, fz, err);
    if (!m) return -1;
    const tdm_param_table *pt = tdm_model_params(m);
    t->n_params = pt->n;
    t->params = tdm_xcalloc((size_t)pt->n + 1, sizeof *t->params);
    t->n_units = tdm_model_n_units(m);
    t->unit_names = tdm_xcalloc((size_t)t->n_units + 1, sizeof *t->unit_names);
    t->unit_numel = tdm_xcalloc((size_t)t->n_units + 1, sizeof *t->unit_numel);
    t->unit_trains = tdm_xcalloc((size_t)t->n_units + 1, sizeof *t->unit_trains);
    for (int u = 0; u < t->n_units; u++) t->unit_names[u] = tdm_xstrdup(tdm_model_unit_name(m, u));
    int first_trained = t->n_units;
    for (int i = 0; i < pt->n; i++) {
        const tdm_param *p = &pt->p[i];
        t->params[i] = (tdm_plan_param){p->numel, p->unit, p->trainable};
        if (p->unit >= 0 && p->unit < t->n_units) {
            t->unit_numel[p->unit] += p->numel;
            if (p->trainable && p->unit < first_trained) first_trained = p->unit;
        }
    }
    for (int u = first_trained; u < t->n_units; u++) t->unit_trains[u] = 1;
    tdm_model_free(m);
    return 0;
}

/* ---- output ------------------------------------------------------------------------------------ */

typedef struct row {
    char name[160];
    tdm_plan_config c;
    tdm_plan_result r;
} row;

static void per_kind(const tdm_plan_result *r, int kind, double *comm, double *hidden) {
    *comm = *hidden = 0;
    for (int k = 0; k < r->n_colls; k++)
        if (r->colls[k].kind == kind)
            *comm += r->colls[k].end_us - r->colls[k].start_us, *hidden += r->colls[k].hidden_us;
}

static void table_text(tdm_strbuf *sb, const row *rows, int n, double measured) {
    tdm_sb_printf(sb, "%-44s %7s %10s %8s %9s %9s %9s\n", "setting", "buckets", "step ms", "change", "comm ms",
                  "hidden", "exposed");
    if (isfinite(measured))
        tdm_sb_printf(sb, "%-44s %7s %10.3f\n", "measured baseline (mean step)", "", measured / 1e3);
    for (int i = 0; i < n; i++) {
        const tdm_plan_result *r = &rows[i].r;
        double ch = (r->step_us / rows[0].r.step_us - 1) * 100;
        tdm_sb_printf(sb, "%-44.44s %7d %10.3f %+7.2f%% %9.3f %9.3f %9.3f\n", rows[i].name, r->n_buckets,
                      r->step_us / 1e3, ch, r->comm_us / 1e3, r->hidden_us / 1e3, r->exposed_us / 1e3);
        for (int k = 0; k < TDM_PLAN_KINDS; k++) {
            double cm, hd;
            per_kind(r, k, &cm, &hd);
            if (cm > 0)
                tdm_sb_printf(sb, "  %-42s %7s %10s %8s %9.3f %9.3f %9.3f\n", tdm_plan_kind_name(k), "", "", "",
                              cm / 1e3, hd / 1e3, (cm - hd) / 1e3);
        }
        if (r->rank_wait_us >= 0.0005) /* of the step, where the ranks meet (tdm_plan_rank_wait_us) */
            tdm_sb_printf(sb, "  %-42s %7s %10.3f\n", "of it, waits for the slowest rank", "", r->rank_wait_us / 1e3);
    }
}

static void json_config(tdm_strbuf *sb, const tdm_plan_config *c) {
    tdm_sb_printf(sb,
                  "{\"dp\": %d, \"distributed_optimizer\": %s, \"overlap_grad_reduce\": %s, \"overlap_param_gather\": "
                  "%s, \"bucket_size\": %lld, \"num_buckets\": %d, \"bf16_params\": %s, \"link_gbps\": %.9g, "
                  "\"link_latency_us\": %.9g, \"link_algo\": \"%s\"}",
                  c->dp, c->distributed ? "true" : "false", c->overlap_grad ? "true" : "false",
                  c->overlap_param ? "true" : "false", (long long)c->bucket_size, c->num_buckets,
                  c->bf16_params ? "true" : "false", c->link.gbps, c->link.alpha_us, c->link.tree ? "tree" : "ring");
}

static void json_num(tdm_strbuf *sb, double v) {
    if (isfinite(v)) tdm_sb_printf(sb, "%.9g", v);
    else tdm_sb_puts(sb, "null");
}

static void write_json(tdm_strbuf *sb, const tdm_plan_model *m, const row *rows, int n, const char *notes,
                       const row *best, int keep, double calib_ms, double factor, const double *lo, const double *hi,
                       int resamples) {
    tdm_sb_puts(sb, "{\"model\": {\"units\": ");
    tdm_sb_printf(
        sb,
        "%d, \"micro_batches\": %d, \"head_us\": %.9g, \"fb_other_us\": %.9g, \"sync_us\": %.9g, "
        "\"agree_us\": %.9g, \"optimizer_us\": %.9g, \"cpu_us_per_mb\": %.9g, \"lost_share\": %.9g, \"speed_beside\": ",
        m->n_units, m->n_micro, m->head_us, m->fb_other_us, m->sync_us, m->agree_us, m->opt_us, m->cpu_us_per_mb,
        m->lost_share > 0 ? m->lost_share : 0);
    json_num(sb, m->speed_beside > 0 ? m->speed_beside : NAN);
    tdm_sb_puts(sb, ", \"grad_together\": ");
    json_num(sb, m->grad_together > 1 ? m->grad_together : NAN);
    tdm_sb_puts(sb, ", \"measured_step_us\": ");
    json_num(sb, m->measured_step_us);
    tdm_sb_printf(sb, ", \"measured_steps\": %d, \"calibrated_step_us\": ", m->n_steps_measured);
    json_num(sb, calib_ms > 0 ? calib_ms * 1e3 : NAN);
    tdm_sb_printf(sb, ", \"compute_scale\": %.9g, \"traced_steps\": %d, \"resamples\": %d, \"baseline\": ", factor,
                  m->n_traced_steps, resamples);
    json_config(sb, &m->baseline);
    tdm_sb_puts(sb, "},\n \"notes\": ");
    tdm_sb_json_string(sb, notes, strlen(notes));
    tdm_sb_puts(sb, ",\n \"predictions\": [");
    for (int i = 0; i < n; i++) {
        const tdm_plan_result *r = &rows[i].r;
        tdm_sb_puts(sb, i ? ",\n  {\"name\": " : "\n  {\"name\": ");
        tdm_sb_json_string(sb, rows[i].name, strlen(rows[i].name));
        tdm_sb_puts(sb, ", \"config\": ");
        json_config(sb, &rows[i].c);
        tdm_sb_printf(sb,
                      ", \"buckets\": %d, \"step_us\": %.9g, \"change_pct\": %.9g, \"compute_us\": %.9g, \"comm_us\": "
                      "%.9g, \"hidden_us\": %.9g, \"exposed_us\": %.9g, \"cpu_taken_us\": %.9g, \"rank_wait_us\": "
                      "%.9g, \"collectives\": [",
                      r->n_buckets, r->step_us, (r->step_us / rows[0].r.step_us - 1) * 100, r->compute_us, r->comm_us,
                      r->hidden_us, r->exposed_us, r->cpu_taken_us, r->rank_wait_us);
        for (int k = 0; k < r->n_colls; k++) {
            const tdm_plan_coll *c = &r->colls[k];
            tdm_sb_printf(sb,
                          "%s{\"kind\": \"%s\", \"bucket\": %d, \"bytes\": %.0f, \"post_us\": %.9g, \"start_us\": "
                          "%.9g, \"end_us\": %.9g, \"hidden_us\": %.9g, \"exposed_us\": %.9g}",
                          k ? ", " : "", tdm_plan_kind_name(c->kind), c->bucket, c->bytes, c->post_us, c->start_us,
                          c->end_us, c->hidden_us, c->end_us - c->start_us - c->hidden_us);
        }
        tdm_sb_puts(sb, "], \"change_interval_pct\": ");
        if (i > 0 && lo && isfinite(lo[i])) tdm_sb_printf(sb, "[%.9g, %.9g]}", lo[i], hi[i]);
        else tdm_sb_puts(sb, "null}");
    }
    tdm_sb_puts(sb, "]");
    if (best) {
        tdm_sb_puts(sb, ",\n \"suggestion\": {\"name\": ");
        tdm_sb_json_string(sb, best->name, strlen(best->name));
        tdm_sb_printf(sb,
                      ", \"step_us\": %.9g, \"gain_pct\": %.9g, \"keep_baseline\": %s, \"config\": ", best->r.step_us,
                      (1 - best->r.step_us / rows[0].r.step_us) * 100, keep ? "true" : "false");
        json_config(sb, &best->c);
        tdm_sb_puts(sb, "}");
    }
    tdm_sb_puts(sb, "}\n");
}

static int write_out(const char *dir, const char *name, const tdm_strbuf *sb, tdm_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return tdm_write_file_atomic(path, sb->data ? sb->data : "", sb->len, err);
}

/* ---- the practice: compute from FLOPs ----------------------------------------------------------- */

/* Fills m from the table: a unit's forward is 2 x its parameters x its tokens FLOPs (vision
 * units: patches), its backward twice that when it or an earlier unit trains (the input
 * gradient is needed from the first trained unit on), at `tflops`; nothing else costs time. */
static void practice_model(const table *t, const plan_opts *o, double tflops, double tokens_scale, tdm_plan_model *m) {
    memset(m, 0, sizeof *m);
    m->n_units = t->n_units;
    m->units = tdm_xcalloc((size_t)t->n_units + 1, sizeof *m->units);
    for (int u = 0; u < t->n_units; u++) {
        int vision = !strncmp(t->unit_names[u], "vision.", 7);
        double toks = (vision ? (double)o->patches : (double)o->tokens) * tokens_scale;
        double fwd = 2.0 * (double)t->unit_numel[u] * toks / (tflops * 1e6); /* TFLOP/s = 1e6 FLOP/us */
        snprintf(m->units[u].name, sizeof m->units[u].name, "%s", t->unit_names[u]);
        m->units[u].fwd_us = fwd;
        m->units[u].bwd_us = t->unit_trains[u] ? 2 * fwd : 0;
    }
    m->n_params = t->n_params;
    m->params = tdm_xmalloc((size_t)(t->n_params + 1) * sizeof *m->params);
    memcpy(m->params, t->params, (size_t)t->n_params * sizeof *m->params);
    m->n_micro = o->micro;
    m->cpu_us_per_mb = o->cpu_us_per_mb;
    m->lost_share = o->lost_share > 0 ? o->lost_share : 0;
    m->speed_beside = o->speed_beside > 0 ? o->speed_beside : 0;
    m->measured_step_us = NAN;
}

static int run_practice(const plan_opts *o, const table *t, tdm_strbuf *text, tdm_strbuf *md) {
    tdm_plan_config base = {.dp = o->dp, .distributed = 1, .link = {o->link_latency_us, o->link_gbps}};
    tdm_error err;
    typedef struct move {
        const char *what;
        double tflops, tokens, gbps, alpha, cpu, micro, share;
    } move;
    move s[15];
    int ns = 0;
    s[ns++] = (move){"as given", 1, 1, 1, 1, 1, 1, 1};
    s[ns++] = (move){"TFLOP/s x0.5", 0.5, 1, 1, 1, 1, 1, 1};
    s[ns++] = (move){"TFLOP/s x2", 2, 1, 1, 1, 1, 1, 1};
    s[ns++] = (move){"tokens x0.5", 1, 0.5, 1, 1, 1, 1, 1};
    s[ns++] = (move){"tokens x2", 1, 2, 1, 1, 1, 1, 1};
    s[ns++] = (move){"link bandwidth x0.5", 1, 1, 0.5, 1, 1, 1, 1};
    s[ns++] = (move){"link bandwidth x2", 1, 1, 2, 1, 1, 1, 1};
    s[ns++] = (move){"link latency x0.5", 1, 1, 1, 0.5, 1, 1, 1};
    s[ns++] = (move){"link latency x2", 1, 1, 1, 2, 1, 1, 1};
    s[ns++] = (move){"micro-batches x2", 1, 1, 1, 1, 1, 2, 1};
    if (o->micro >= 2) s[ns++] = (move){"micro-batches x0.5", 1, 1, 1, 1, 1, 0.5, 1};
    if (o->cpu_us_per_mb > 0) {
        s[ns++] = (move){"comm CPU per MB x0.5", 1, 1, 1, 1, 0.5, 1, 1};
        s[ns++] = (move){"comm CPU per MB x2", 1, 1, 1, 1, 2, 1, 1};
    }
    if (o->lost_share > 0) { /* x2 at most 0.95 of the compute's time */
        s[ns++] = (move){"comm lost share x0.5", 1, 1, 1, 1, 1, 1, 0.5};
        s[ns++] = (move){"comm lost share x2", 1, 1, 1, 1, 1, 1, 2};
    }
    tdm_sb_printf(
        md, "| assumption moved | baseline step ms | with --overlap-grad-reduce ms | change |\n|---|---|---|---|\n");
    int64_t *padded = NULL;
    for (int i = 0; i < ns; i++) {
        tdm_plan_model m;
        practice_model(t, o, o->tflops * s[i].tflops, s[i].tokens, &m);
        m.cpu_us_per_mb = o->cpu_us_per_mb * s[i].cpu;
        if (m.lost_share > 0) m.lost_share = fmin(0.95, m.lost_share * s[i].share);
        m.n_micro = (int)lround(o->micro * s[i].micro);
        tdm_plan_config a = base, b = base;
        a.link.gbps = b.link.gbps = o->link_gbps * s[i].gbps;
        a.link.alpha_us = b.link.alpha_us = o->link_latency_us * s[i].alpha;
        b.overlap_grad = 1;
        tdm_plan_result ra, rb;
        if (tdm_plan_simulate(&m, &a, &ra, &err) || tdm_plan_simulate(&m, &b, &rb, &err)) {
            fprintf(stderr, "tandem plan: %s\n", err.msg);
            tdm_plan_model_free(&m);
            return 1;
        }
        if (i == 0) {
            free(padded);
            int nb = tdm_plan_buckets(&m, &a, &padded, NULL, &err);
            const int64_t tr = tdm_plan_trainable(&m);
            double comp = 0;
            for (int u = 0; u < m.n_units; u++) comp += m.units[u].fwd_us + m.units[u].bwd_us;
            char cost[160] = "nothing else costs time"; /* what driving a collective costs, where given */
            if (m.lost_share > 0)
                snprintf(cost, sizeof cost, "compute loses %.3g of its time while a collective is in flight",
                         m.lost_share);
            else if (m.cpu_us_per_mb > 0)
                snprintf(cost, sizeof cost, "a collective takes %.4g us of compute per MB it moves beside it",
                         m.cpu_us_per_mb);
            if (m.speed_beside > 0 && m.speed_beside < 1) {
                const size_t n = strlen(cost);
                snprintf(cost + n, sizeof cost - n, "; it moves at %.3g of its speed there", m.speed_beside);
            }
            tdm_sb_printf(
                text,
                "practice: Qwen3-VL-8B, %d ranks, vision and projector frozen, distributed optimizer\n"
                "assumptions: %.4g TFLOP/s sustained, %lld tokens and %lld patches per micro-batch, %d "
                "micro-batch(es) a step,\n  link %.4g Gbit/s and %.4g us per ring step, fp32 gradients and parameters "
                "on the wire "
                "(bf16 halves the bytes: as link bandwidth x2), "
                "%lld trainable parameters in %d buckets (default size),\n  compute = 2 x parameters x tokens "
                "forward, twice that backward (%.1f ms a micro-batch); %s\n\n",
                o->dp, o->tflops, (long long)o->tokens, (long long)o->patches, o->micro, o->link_gbps,
                o->link_latency_us, (long long)tr, nb, comp / 1e3, cost);
            tdm_sb_printf(
                md,
                "Assumptions: %.4g TFLOP/s, %lld tokens and %lld patches per micro-batch, %d micro-batch(es), "
                "%.4g Gbit/s, %.4g us per ring step, fp32 gradients and parameters on the wire, %lld trainable "
                "parameters in %d buckets.\n\n",
                o->tflops, (long long)o->tokens, (long long)o->patches, o->micro, o->link_gbps, o->link_latency_us,
                (long long)tr, nb);
            tdm_sb_printf(text, "%-26s %14s %16s %9s\n", "assumption moved", "baseline ms", "overlap-grad ms",
                          "change");
        }
        double ch = (rb.step_us / ra.step_us - 1) * 100;
        tdm_sb_printf(text, "%-26s %14.2f %16.2f %+8.2f%%\n", s[i].what, ra.step_us / 1e3, rb.step_us / 1e3, ch);
        tdm_sb_printf(md, "| %s | %.2f | %.2f | %+.2f%% |\n", s[i].what, ra.step_us / 1e3, rb.step_us / 1e3, ch);
        tdm_plan_result_free(&ra);
        tdm_plan_result_free(&rb);
        tdm_plan_model_free(&m);
    }
    free(padded);
    tdm_sb_puts(text, "\nthe practice measured -9.24% with --overlap-grad-reduce on its cluster\n");
    return 0;
}

/* ---- calibration from a log -------------------------------------------------------------------- */

/* Adds to *sum_ms and *iters the step times of the log at `path` (each logged line weighted by the
 * iterations it covers) over the window: `window` ("A:B"), or tandem ab's default for logs
 * (tdm_ab_default_window: the practice's 21:200 clipped to what the log holds, else after the
 * warm-up the log names or its first 10%); says which in what[cap]. */
static int log_steps(const char *path, const char *window, double *sum_ms, int64_t *n_iters, char *what, size_t cap,
                     tdm_error *err) {
    int64_t lo = 21, hi = 200;
    if (window && tdm_ab_parse_window(window, &lo, &hi, err) != 0) return -1;
    tdm_run_log run;
    if (tdm_run_log_read(path, &run, err) != 0) {
        tdm_run_log_free(&run);
        return -1;
    }
    int64_t first = 0, last = 0;
    for (int64_t i = 0; i < run.n_iters; i++)
        if (isfinite(run.iters[i].elapsed_ms)) {
            if (!first) first = run.iters[i].iteration - run.iters[i].interval + 1;
            last = run.iters[i].iteration;
        }
    if (!window && first > 0) tdm_ab_default_window(first, last, run.warm_up, &lo, &hi);
    double sum = 0;
    int64_t iters = 0, lines = 0;
    for (int64_t i = 0; i < run.n_iters; i++) {
        const tdm_run_iter *x = &run.iters[i];
        if (!isfinite(x->elapsed_ms) || x->iteration - x->interval + 1 < lo || x->iteration > hi) continue;
        sum += x->elapsed_ms * x->interval;
        iters += x->interval;
        lines++;
    }
    tdm_run_log_free(&run);
    if (iters == 0)
        return tdm_errorf(err,
                          "%s: no logged step time in iterations %lld:%lld (the log's step times cover %lld:%lld); "
                          "expected a log of the traced setting, or --window A:B",
                          path, (long long)lo, (long long)hi, (long long)first, (long long)last);
    *sum_ms += sum;
    *n_iters += iters;
    snprintf(what, cap, "%s, iterations %lld:%lld (%lld logged line%s)", path, (long long)lo, (long long)hi,
             (long long)lines, lines == 1 ? "" : "s");
    return 0;
}

/* The mean step of the logs, pooled over their windows (log_steps); what[cap] names them. */
static int logs_mean_step(const char *const *paths, int n, const char *window, double *mean_ms, char *what, size_t cap,
                          tdm_error *err) {
    double sum = 0;
    int64_t iters = 0;
    size_t len = 0;
    what[0] = '\0';
    for (int i = 0; i < n; i++) {
        char one[1200];
        if (log_steps(paths[i], window, &sum, &iters, one, sizeof one, err) != 0) return -1;
        if (len < cap) len += (size_t)snprintf(what + len, cap - len, "%s%s", i ? "; " : "", one);
    }
    *mean_ms = sum / (double)iters;
    return 0;
}

/* ---- the command ------------------------------------------------------------------------------- */

/* The `tandem ab` command that confirms a suggestion (tdm_plan_confirm_flags). */
static void confirm_line(tdm_strbuf *sb, const tdm_plan_model *m, const tdm_plan_config *best) {
    char base[128], cand[512];
    tdm_plan_confirm_flags(m, best, base, sizeof base, cand, sizeof cand);
    if (!base[0] && !cand[0]) {
        tdm_sb_puts(sb, "nothing to confirm: the suggestion is the baseline's settings\n");
        return;
    }
    tdm_sb_printf(sb,
                  "confirm with: mpirun -np %d tandem ab --baseline \"%s\" --candidate \"%s\" <the run's train "
                  "flags%s%s>\n",
                  m->baseline.dp, base, cand, base[0] ? " without " : "", base);
}

/* What was taken from tandem doctor's report, and where the report was measured otherwise than the traced run:
 * appended to the notes. */
static void doctor_notes(const plan_opts *o, const tdm_plan_doctor *d, const tdm_plan_run_info *run,
                         const tdm_plan_model *m, char *notes, int cap) {
    const char *why = o->comm_progress[0]     ? "--comm-progress"
                      : run->comm_progress[0] ? "the traced run's progress mode"
                                              : "the trace does not say its progress mode: tandem train's default";
    char cost[96];
    if (!strcmp(d->mode, "thread") && isfinite(d->lost_share)) /* a thread's cost by its time in flight */
        snprintf(cost, sizeof cost, "--comm-lost-share %.3f%s", d->lost_share,
                 m->lost_share != d->lost_share ? " (not used: given)" : "");
    else
        snprintf(cost, sizeof cost, "--comm-cpu-us-per-mb %.0f%s", d->cpu_us_per_mb,
                 m->cpu_us_per_mb != d->cpu_us_per_mb ? " (not used: given)" : "");
    tdm_plan_note(notes, cap, "tandem doctor's beside compute (%s), the %s line (%s): %s --comm-speed-beside %.3f%s",
                  o->doctor, d->mode, why, cost, d->speed, m->speed_beside != d->speed ? " (not used: given)" : "");
    if (!strcmp(d->mode, "thread") && !isfinite(d->lost_share))
        tdm_plan_note(notes, cap,
                      "the report does not say the compute's time beside the collectives (an older tandem doctor): "
                      "the thread's cost is charged per MB moved, not by the time its collectives are in flight");
    if (d->ranks > 0 && d->ranks != m->baseline.dp)
        tdm_plan_note(notes, cap, "the doctor ran %d ranks, the traced run dp %d", d->ranks, m->baseline.dp);
    if (d->shared_memory >= 0 && run->shared_memory >= 0 && d->shared_memory != run->shared_memory)
        tdm_plan_note(notes, cap, "the doctor's collectives went through %s, the traced run's through %s",
                      d->transport[0]    ? d->transport
                      : d->shared_memory ? "shared memory"
                                         : "a network",
                      run->transport[0]    ? run->transport
                      : run->shared_memory ? "shared memory"
                                           : "a network");
    if (!strcmp(d->mode, "thread") && d->comm_thread_nice >= 0 && d->comm_thread_nice != o->comm_nice)
        tdm_plan_note(notes, cap,
                      "the doctor's communication thread ran at nice %d, the traced run's at %d (--comm-thread-nice)",
                      d->comm_thread_nice, o->comm_nice);
    int64_t *padded = NULL;
    const int nb = tdm_plan_buckets(m, &m->baseline, &padded, NULL, &(tdm_error){{0}});
    if (nb > 0 && isfinite(d->mb)) {
        double sum = 0;
        for (int b = 0; b < nb; b++) sum += (double)padded[b];
        const double bucket_mb = sum / nb * 4 / 1e6;
        if (bucket_mb > 4 * d->mb || bucket_mb < d->mb / 4)
            tdm_plan_note(notes, cap,
                          "the doctor's collectives moved %.2f MB each, the baseline's buckets %.2f MB on average: a "
                          "collective's speed beside compute depends on its size (tandem doctor --beside-mb %.2f)",
                          d->mb, bucket_mb, bucket_mb);
    }
    free(padded);
}

static int simulate_row(const tdm_plan_model *m, row *r, tdm_error *err) {
    return tdm_plan_simulate(m, &r->c, &r->r, err);
}

/* What the flags set in a model built from a trace. */
static void model_flags(tdm_plan_model *m, const plan_opts *o) {
    m->cores = o->cores;
    if (o->speed_beside > 0) m->speed_beside = o->speed_beside; /* a PyTorch trace's model too */
    if (o->lost_share > 0) m->lost_share = o->lost_share;
}

/* The candidates predicted: those given, else the overlap flags (one of them without the distributed optimizer). */
static int n_candidates(const tdm_plan_model *m, const plan_opts *o) {
    return o->n_candidates ? o->n_candidates : m->baseline.distributed ? 2 : 1;
}

/* rows[0] the baseline's replay, then each candidate (relative to the baseline; by default the overlap flags, or
 * a baseline's own overlap turned off), into *n_rows as they are simulated. 0, else the exit code with one
 * sentence printed unless quiet. */
static int build_rows(const tdm_plan_model *m, const plan_opts *o, row *rows, int *n_rows, int quiet) {
    static const char *const defaults[2] = {"--overlap-grad-reduce", "--overlap-grad-reduce --overlap-param-gather"};
    const int n_cand = n_candidates(m, o);
    tdm_error err;
    *n_rows = 0;
    snprintf(rows[0].name, sizeof rows[0].name, "baseline (replay)");
    rows[0].c = m->baseline;
    if (simulate_row(m, &rows[0], &err) != 0) {
        if (!quiet) fprintf(stderr, "tandem plan: %s\n", err.msg);
        return 1;
    }
    *n_rows = 1;
    for (int i = 0; i < n_cand; i++) {
        const char *f = o->n_candidates ? o->candidates[i] : defaults[i];
        row *r = &rows[*n_rows];
        r->c = m->baseline;
        if (tdm_plan_parse_flags(f, &r->c, &err) != 0) {
            if (!quiet) fprintf(stderr, "tandem plan: --candidate \"%s\": %s\n", f, err.msg);
            return 2;
        }
        if (o->n_candidates == 0 && i == 0 && m->baseline.overlap_grad) {
            r->c.overlap_grad = r->c.overlap_param = 0; /* a baseline with the overlap: the candidate without it */
            snprintf(r->name, sizeof r->name, "%s",
                     m->baseline.distributed ? "--no-overlap-grad-reduce --no-overlap-param-gather"
                                             : "--no-overlap-grad-reduce");
        } else {
            snprintf(r->name, sizeof r->name, "%s", f);
        }
        if (simulate_row(m, r, &err) != 0) {
            if (!quiet) fprintf(stderr, "tandem plan: --candidate \"%s\": %s\n", f, err.msg);
            return 2;
        }
        (*n_rows)++;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Each prediction's change (rows 1..n_rows-1) over o->resamples resamples of the traced steps, drawn with
 * replacement, the model rebuilt from each (calibrated as the baseline was): its 2.5th and 97.5th percentiles
 * into lo[i], hi[i]. Returns the resamples that gave a model (0: none, lo and hi NaN). */
static int change_interval(const tdm_plan_trace_in *in0, int steps, const plan_opts *o, double calib_ms, int n_rows,
                           double *lo, double *hi) {
    const int B = o->resamples;
    int *w = tdm_xcalloc((size_t)steps, sizeof *w), good = 0;
    double *ch = tdm_xcalloc((size_t)n_rows * (size_t)B + 1, sizeof *ch);
    row *rs = tdm_xcalloc((size_t)n_rows + 1, sizeof *rs);
    for (int b = 0; b < B; b++) {
        memset(w, 0, (size_t)steps * sizeof *w);
        for (int j = 0; j < steps; j++) w[tdm_rng_u64(INTERVAL_SEED, (uint64_t)b, (uint64_t)j) % (uint64_t)steps]++;
        tdm_plan_trace_in in = *in0;
        in.step_weight = w, in.n_step_weight = steps;
        tdm_plan_model mb;
        tdm_error err;
        double factor;
        if (tdm_plan_from_trace(&in, &mb, NULL, 0, &err) != 0) continue;
        model_flags(&mb, o);
        int nr = 0;
        memset(rs, 0, ((size_t)n_rows + 1) * sizeof *rs);
        if ((calib_ms <= 0 || tdm_plan_calibrate(&mb, calib_ms * 1e3, &factor, &err) == 0) &&
            build_rows(&mb, o, rs, &nr, 1) == 0 && nr == n_rows) {
            for (int i = 1; i < n_rows; i++)
                ch[(size_t)i * (size_t)B + (size_t)good] = (rs[i].r.step_us / rs[0].r.step_us - 1) * 100;
            good++;
        }
        for (int i = 0; i <= nr && i < n_rows; i++) tdm_plan_result_free(&rs[i].r);
        tdm_plan_model_free(&mb);
    }
    for (int i = 0; i < n_rows; i++) {
        lo[i] = hi[i] = NAN;
        if (i == 0 || good == 0) continue;
        double *v = ch + (size_t)i * (size_t)B;
        qsort(v, (size_t)good, sizeof *v, cmp_double);
        lo[i] = tdm_stats_quantile_sorted(v, good, 0.025);
        hi[i] = tdm_stats_quantile_sorted(v, good, 0.975);
    }
    free(w);
    free(ch);
    free(rs);
    return good;
}

/* Longer than most: the inputs' checks, the model, the rows, the suggestion and the files, with one cleanup. */
int cmd_plan(int argc, char **argv) {
    plan_opts o;
    memset(&o, 0, sizeof o);
    tdm_flags_defaults(&P, &o);
    o.link_gbps = o.link_latency_us = o.cpu_us_per_mb = o.lost_share = -1;
    int done = tdm_cli_parse(&P, &o, argc, argv, NULL, NULL);
    if (done >= 0) return done;
    const tdm_freeze fz = {o.freeze_vision || o.practice, o.freeze_projector || o.practice, o.freeze_llm,
                           o.freeze_lm_head};
    if (!o.practice && !o.trace) {
        fprintf(stderr, "tandem plan: expected a profiled run's trace (RUN_OR_TRACE) or --practice\n");
        return 2;
    }
    if (o.practice && (o.trace || o.suggest || o.n_candidates || o.baseline)) {
        fprintf(stderr, "tandem plan: --practice builds its step from FLOPs: expected no trace, --candidate, "
                        "--baseline or --suggest with it\n");
        return 2;
    }
    if (o.practice && (o.n_baseline_runs || o.baseline_step_ms > 0)) {
        fprintf(stderr, "tandem plan: --practice has no traced baseline to calibrate: expected --baseline-run and "
                        "--baseline-step-ms only with a trace\n");
        return 2;
    }
    if (o.n_baseline_runs && o.baseline_step_ms > 0) {
        fprintf(stderr, "tandem plan: --baseline-run and --baseline-step-ms both give the measured baseline step: "
                        "expected one of them\n");
        return 2;
    }
    if (o.practice && o.doctor) {
        fprintf(stderr, "tandem plan: --practice models devices whose collectives take no compute: expected --doctor "
                        "only with a traced run\n");
        return 2;
    }
    if (o.practice && !strcmp(o.link_algo, "tree")) {
        fprintf(stderr, "tandem plan: --link-algo tree: the practice's step moves its gradients by reduce-scatter and "
                        "all-gather, which run as rings; expected --link-algo tree only with a traced run\n");
        return 2;
    }
    if (o.comm_progress[0] && o.practice) {
        fprintf(stderr,
                "tandem plan: --comm-progress %s: the traced run's progress mode; --practice models devices whose "
                "collectives need no progress calls: expected it with a traced run\n",
                o.comm_progress);
        return 2;
    }
    if (o.window && !o.n_baseline_runs) {
        fprintf(stderr, "tandem plan: --window %s: expected it with --baseline-run (the log's iterations)\n", o.window);
        return 2;
    }
    const int torch = !o.practice && !o.model; /* a PyTorch trace, or tandem's asking for --model */
    if (torch && o.baseline) {
        fprintf(stderr, "tandem plan: --baseline without --model: a PyTorch trace's settings are read from it (DDP, "
                        "its group size and buckets); expected --baseline only with tandem's trace and --model\n");
        return 2;
    }
    tdm_error err;
    tdm_model_config cfg;
    table t;
    memset(&t, 0, sizeof t);
    if (!torch && load_table(o.model ? o.model : "configs/qwen3-vl-8b", &fz, &t, &cfg, &err) != 0) {
        fprintf(stderr, "tandem plan: %s\n", err.msg);
        return 1;
    }
    if (tdm_mkdirs(o.out, &err) != 0) {
        fprintf(stderr, "tandem plan: %s\n", err.msg);
        table_free(&t);
        return 1;
    }
    tdm_strbuf text, md, js, svg;
    tdm_sb_init(&text);
    tdm_sb_init(&md);
    tdm_sb_init(&js);
    tdm_sb_init(&svg);
    int rc = 0;
    tdm_prof_trace pt; /* tandem's trace, read once for the model and its resamples */
    memset(&pt, 0, sizeof pt);
    if (o.practice) {
        if (o.cpu_us_per_mb < 0) o.cpu_us_per_mb = 0;
        if (o.link_gbps < 0) o.link_gbps = 800;
        if (o.link_latency_us < 0) o.link_latency_us = 10;
        tdm_sb_puts(&md, "# tandem plan: the practice\n\n");
        rc = run_practice(&o, &t, &text, &md);
        if (rc == 0) {
            fputs(text.data, stdout);
            if (write_out(o.out, "plan.md", &md, &err) != 0) {
                fprintf(stderr, "tandem plan: %s\n", err.msg);
                rc = 1;
            }
        }
        goto out_practice;
    }

    tdm_plan_doctor doc;
    tdm_plan_run_info run; /* what analysis.json says of the run: its thread's niceness, the doctor's line */
    double traced_comm_cpu_ms = NAN;
    tdm_plan_run_info_init(&run); /* a PyTorch trace has no analysis.json of tandem's */
    if (!torch && tdm_plan_run_info_read(o.trace, &run, &traced_comm_cpu_ms, &err) != 0) {
        fprintf(stderr, "tandem plan: %s\n", err.msg);
        rc = 1;
        goto out_practice;
    }
    if (o.comm_nice < 0) o.comm_nice = run.comm_thread_nice >= 0 ? run.comm_thread_nice : TDM_DDP_COMM_THREAD_NICE;
    if (o.doctor) {
        const char *mode = o.comm_progress[0] ? o.comm_progress : run.comm_progress[0] ? run.comm_progress : "thread";
        if (tdm_plan_doctor_load(o.doctor, mode, &doc, &err) != 0) {
            fprintf(stderr, "tandem plan: --doctor: %s\n", err.msg);
            rc = 1;
            goto out_practice;
        }
        /* a communication thread's cost follows its collectives' time in flight (its polls and wake-ups), inline
         * progress's the bytes it moves; a flag given wins */
        if (!strcmp(doc.mode, "thread") && o.lost_share < 0 && o.cpu_us_per_mb < 0 && isfinite(doc.lost_share))
            o.lost_share = doc.lost_share;
        if (o.cpu_us_per_mb < 0) o.cpu_us_per_mb = doc.cpu_us_per_mb;
        if (!(o.speed_beside > 0)) o.speed_beside = doc.speed;
    }
    tdm_plan_trace_in in = {.path = o.trace,
                            .unit_names = (const char *const *)t.unit_names,
                            .n_units = t.n_units,
                            .params = t.params,
                            .n_params = t.n_params,
                            .baseline_flags = o.baseline,
                            .comm_thread_nice = o.comm_nice,
                            .link = {o.link_latency_us, o.link_gbps, !strcmp(o.link_algo, "tree")},
                            .cpu_us_per_mb = o.cpu_us_per_mb,
                            .speed_beside = o.speed_beside,
                            .lost_share = o.lost_share,
                            .comm_progress = o.comm_progress,
                            .trace = &pt,
                            .run = torch ? NULL : &run,
                            .run_comm_cpu_ms = traced_comm_cpu_ms};
    char notes[4096];
    tdm_plan_model m;
    if (torch ? tdm_plan_from_torch(o.trace, in.link, o.cpu_us_per_mb, &m, notes, sizeof notes, &err)
              : tdm_plan_trace_read(o.trace, &pt, &err) || tdm_plan_from_trace(&in, &m, notes, sizeof notes, &err)) {
        fprintf(stderr, "tandem plan: %s\n", err.msg);
        rc = strstr(err.msg, "--model DIR is required") ? 2 : 1;
        goto out_practice;
    }
    model_flags(&m, &o);
    if (o.doctor) doctor_notes(&o, &doc, &run, &m, notes, (int)sizeof notes);
    else if (!torch && !m.baseline.overlap_grad && !m.baseline.overlap_param && o.speed_beside <= 0 &&
             m.baseline.dp > 1)
        tdm_plan_note(
            notes, (int)sizeof notes,
            "the baseline overlaps no collective with compute, so its trace cannot show what one costs "
            "there: mpirun -np %d tandem doctor --json FILE, where the run ran, measures it for --doctor FILE",
            m.baseline.dp);
    double calib_ms = o.baseline_step_ms, factor = 1;
    char calib_from[4096] = "";
    if (o.n_baseline_runs &&
        logs_mean_step(o.baseline_runs, o.n_baseline_runs, o.window, &calib_ms, calib_from, sizeof calib_from, &err)) {
        fprintf(stderr, "tandem plan: --baseline-run %s\n", err.msg);
        rc = 1;
        tdm_plan_model_free(&m);
        goto out_practice;
    }
    if (!o.n_baseline_runs && calib_ms > 0) snprintf(calib_from, sizeof calib_from, "--baseline-step-ms");
    if (calib_ms > 0 && tdm_plan_calibrate(&m, calib_ms * 1e3, &factor, &err) != 0) {
        fprintf(stderr, "tandem plan: %s: %s\n", calib_from, err.msg);
        rc = 1;
        tdm_plan_model_free(&m);
        goto out_practice;
    }
    const int n_cand = n_candidates(&m, &o);
    row *rows = tdm_xcalloc((size_t)n_cand + 2, sizeof *rows);
    double *lo = tdm_xcalloc((size_t)n_cand + 2, sizeof *lo), *hi = tdm_xcalloc((size_t)n_cand + 2, sizeof *hi);
    int n_rows = 0, resampled = 0;
    if ((rc = build_rows(&m, &o, rows, &n_rows, 0)) != 0) goto out_rows;
    if (!torch && o.resamples > 0 && m.n_traced_steps >= 3)
        resampled = change_interval(&in, m.n_traced_steps, &o, calib_ms, n_rows, lo, hi);
    else if (!torch && o.resamples > 0)
        tdm_plan_note(notes, (int)sizeof notes,
                      "%d step(s) traced on every rank: no interval of the changes (from 3; tandem ab --profile-steps)",
                      m.n_traced_steps);

    row best;
    memset(&best, 0, sizeof best);
    int have_best = 0;
    if (o.suggest) {
        int64_t trainable_params = 0;
        for (int i = 0; i < m.n_params; i++) trainable_params += m.params[i].trainable;
        int max_b = trainable_params < 64 ? (int)trainable_params : 64;
        for (int og = 0; og < 2; og++)
            for (int op = 0; op < (m.baseline.distributed ? 2 : 1); op++)
                for (int nb = 1; nb <= max_b; nb++) {
                    row r;
                    memset(&r, 0, sizeof r);
                    r.c = m.baseline;
                    r.c.overlap_grad = og, r.c.overlap_param = op, r.c.num_buckets = nb, r.c.bucket_size = 0;
                    r.c.given_cut = 0;
                    if (simulate_row(&m, &r, &err) != 0) continue;
                    /* ties (within 0.1%) go to fewer flags and fewer buckets: what was searched first */
                    if (!have_best || r.r.step_us < best.r.step_us * 0.999) {
                        if (have_best) tdm_plan_result_free(&best.r);
                        best = r;
                        have_best = 1;
                    } else {
                        tdm_plan_result_free(&r.r);
                    }
                }
        if (have_best) {
            tdm_plan_config_flags(&best.c, &m.baseline, best.name, sizeof best.name);
            if (!best.name[0]) snprintf(best.name, sizeof best.name, "(the baseline's settings)");
        }
    }

    table_text(&text, rows, n_rows, m.measured_step_us);
    if (resampled > 0 && n_rows > 1) {
        tdm_sb_printf(&text,
                      "95%% interval of each change: the model rebuilt from %d resamples of the %d traced steps\n",
                      resampled, m.n_traced_steps);
        for (int i = 1; i < n_rows; i++)
            tdm_sb_printf(&text, "  %-42.42s %+.2f%% .. %+.2f%%\n", rows[i].name, lo[i], hi[i]);
    }
    if (calib_ms > 0)
        tdm_sb_printf(&text,
                      "calibrated: compute x%.4f so that the replay takes the measured baseline's %.3f ms (%s)%s\n",
                      factor, calib_ms, calib_from,
                      isfinite(m.measured_step_us) ? "; the profiled steps above took the trace's time" : "");
    else if (isfinite(m.measured_step_us))
        tdm_sb_printf(&text, "replay: predicted %.3f ms, measured %.3f ms (%+.2f%%) over %d step(s)\n",
                      rows[0].r.step_us / 1e3, m.measured_step_us / 1e3,
                      (rows[0].r.step_us / m.measured_step_us - 1) * 100, m.n_steps_measured);
    const int keep = have_best && (1 - best.r.step_us / rows[0].r.step_us) * 100 < o.min_gain;
    if (keep)
        tdm_sb_printf(&text,
                      "\nsuggestion: keep the baseline's settings: none is predicted %.4g%% faster (--min-gain); the "
                      "best, %s, by %.2f%%\n",
                      o.min_gain, best.name, (1 - best.r.step_us / rows[0].r.step_us) * 100);
    else if (have_best) {
        tdm_sb_printf(&text, "\nsuggestion: %s: predicted %.3f ms, %.2f%% below the baseline's %.3f ms\n", best.name,
                      best.r.step_us / 1e3, (1 - best.r.step_us / rows[0].r.step_us) * 100, rows[0].r.step_us / 1e3);
        int64_t largest = 0;
        for (int b = 0; b < best.r.n_buckets; b++)
            if (best.r.bucket_padded[b] > largest) largest = best.r.bucket_padded[b];
        tdm_sb_printf(&text, "  %d bucket(s), the largest %lld elements (%.1f MB of fp32 gradients)\n",
                      best.r.n_buckets, (long long)largest, largest * 4.0 / 1e6);
        if (m.n_given_buckets > 0) /* a PyTorch trace: DDP's own setting */
            tdm_sb_printf(&text, "in PyTorch: DistributedDataParallel(..., bucket_cap_mb=%.4g)%s\n",
                          largest * 4.0 / 1048576, best.c.overlap_grad ? "" : ", the all-reduces after the backward");
        else confirm_line(&text, &m, &best.c);
    }
    tdm_sb_printf(&text, "\nnotes:\n%s", notes);
    fputs(text.data, stdout);

    tdm_sb_puts(&md, "# tandem plan\n\n```\n");
    tdm_sb_puts(&md, text.data);
    tdm_sb_puts(&md, "```\n\n![timeline](timeline.svg)\n");
    write_json(&js, &m, rows, n_rows, notes, have_best ? &best : NULL, keep, calib_ms, factor, resampled ? lo : NULL,
               hi, resampled);
    {
        const char *names[MAX_CANDIDATES + 3];
        tdm_plan_result res[MAX_CANDIDATES + 3];
        int k = 0;
        for (int i = 0; i < n_rows; i++) names[k] = rows[i].name, res[k++] = rows[i].r;
        if (have_best) names[k] = "suggestion", res[k++] = best.r;
        tdm_plan_svg(&svg, &m, res, names, k);
    }
    if (write_out(o.out, "plan.md", &md, &err) || write_out(o.out, "plan.json", &js, &err) ||
        write_out(o.out, "timeline.svg", &svg, &err)) {
        fprintf(stderr, "tandem plan: %s\n", err.msg);
        rc = 1;
    } else {
        printf("report: %s/plan.md, plan.json, timeline.svg\n", o.out);
    }
    if (have_best) tdm_plan_result_free(&best.r);
out_rows:
    for (int i = 0; i <= n_rows && i < n_cand + 2; i++) tdm_plan_result_free(&rows[i].r);
    free(rows);
    free(lo);
    free(hi);
    tdm_plan_model_free(&m);
out_practice:
    tdm_prof_trace_free(&pt);
    tdm_sb_free(&text);
    tdm_sb_free(&md);
    tdm_sb_free(&js);
    tdm_sb_free(&svg);
    table_free(&t);
    return rc;
}
