/* ab.c - the A/B protocol driver: configurations, interleaved timing runs, audit and
 * profiled runs. Window statistics, the step-by-step precision check and the verdict are
 * ab_compute.c's; the report files are written by report.c. */
#include "ab/ab.h"
#include "train/checkpoint.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "distributed/agree.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"

void tdm_ab_options_default(tdm_ab_options *o) {
    memset(o, 0, sizeof *o);
    o->baseline_flags = "";
    o->candidate_flags = "";
    o->steps = 200;
    o->window_lo = 21;
    o->window_hi = 200;
    o->repeats = 1;
    o->audit_steps = -1; /* = steps */
    o->profile_steps = 15;
    o->profile_level = 1;
    o->bootstrap_seed = 20261129;
    o->bootstrap_resamples = 2000;
    snprintf(o->out, sizeof o->out, "ab-report");
}

int tdm_ab_parse_window(const char *s, int64_t *lo, int64_t *hi, tdm_error *err) {
    char *end;
    long long a = strtoll(s, &end, 10);
    if (end == s || *end != ':') return tdm_errorf(err, "--window '%s': expected FIRST:LAST, e.g. 21:200", s);
    const char *p = end + 1;
    long long b = strtoll(p, &end, 10);
    if (end == p || *end) return tdm_errorf(err, "--window '%s': expected FIRST:LAST, e.g. 21:200", s);
    if (a < 1 || b < a) return tdm_errorf(err, "--window '%s': expected 1 <= FIRST <= LAST", s);
    *lo = a;
    *hi = b;
    return 0;
}

tdm_ab_window_rule tdm_ab_default_window(int64_t held_lo, int64_t held_hi, int64_t warm_up, int64_t *lo, int64_t *hi) {
    *lo = held_lo > 21 ? held_lo : 21;
    *hi = held_hi < 200 ? held_hi : 200;
    if (*lo <= *hi) return TDM_AB_WINDOW_PRACTICE;
    *hi = held_hi;
    if (warm_up > 0) {
        *lo = warm_up + 1 > held_lo ? warm_up + 1 : held_lo;
        if (*lo > *hi) *lo = *hi;
        return TDM_AB_WINDOW_WARM_UP;
    }
    *lo = held_lo + (held_hi - held_lo + 1) / 10;
    return TDM_AB_WINDOW_TENTH;
}

const char *const tdm_ab_protocol_flags[][2] = {
    {"--train-iters", "the length of each run is --steps"},
    {"--train-samples", "the length of each run is --steps"},
    {"--tensorboard-dir", "the report goes to --out"},
    {"--save", "measured runs save no checkpoint"},
    {"--save-interval", "measured runs save no checkpoint"},
    {"--exit-interval", "every run trains --steps steps"},
    {"--profile-config", "the profiled runs are set by --profile-steps and --profile-level"},
    {"--audit-fingerprints", "the audit run is set by --audit-steps"},
    {"--run-dir", "the report goes to --out"},
    {"--valid-data-path", "measured runs do not evaluate (an evaluation between steps changes the time of the step "
                          "after it: with --overlap-param-gather it waits for the all-gather that step would overlap)"},
    {NULL, NULL}};

/* The index in tdm_ab_protocol_flags of the first protocol flag whose value differs
 * between a and b, or -1. */
static int protocol_flag_changed(const tdm_train_args *a, const tdm_train_args *b) {
    char va[2048], vb[2048], attr[64];
    for (int k = 0; tdm_ab_protocol_flags[k][0]; k++) {
        snprintf(attr, sizeof attr, "%s", tdm_ab_protocol_flags[k][0] + 2); /* "--save-interval" -> "save_interval" */
        for (char *c = attr; *c; c++)
            if (*c == '-') *c = '_';
        for (int i = 0; i < tdm_train_args_count(); i++) {
            if (strcmp(tdm_train_args_name(i), attr) != 0) continue;
            tdm_train_args_value(a, i, va, sizeof va);
            tdm_train_args_value(b, i, vb, sizeof vb);
            if (strcmp(va, vb) != 0) return k;
        }
    }
    return -1;
}

static int side_args(const tdm_ab_options *o, const char *flags, const char *label, tdm_train_args *a, tdm_error *err) {
    tdm_train_args_defaults(a);
    if (tdm_train_args_parse(a, o->common_argc, o->common_argv, err) != 0) return -1;
    tdm_train_args common = *a, defaults;
    /* cmd_ab.c refuses them on the command line; a --config file among the common flags may set them too */
    tdm_train_args_defaults(&defaults);
    int in_common = protocol_flag_changed(&common, &defaults);
    if (in_common >= 0)
        return tdm_errorf(err, "the common flags (a --config file) set %s, which is not used by ab: %s",
                          tdm_ab_protocol_flags[in_common][0], tdm_ab_protocol_flags[in_common][1]);
    if (tdm_train_args_parse_string(a, flags, err) != 0) return tdm_error_prefix(err, "--%s", label);
    /* refused among the common flags (cmd_ab.c); in one side's flags just as silently overridden */
    int set = protocol_flag_changed(a, &common);
    if (set >= 0)
        return tdm_errorf(err, "--%s: %s is not used by ab: %s", label, tdm_ab_protocol_flags[set][0],
                          tdm_ab_protocol_flags[set][1]);
    a->train_iters = o->steps;
    return 0;
}

/* Lists the arguments that differ ("name: base -> cand") and those that do not. */
static void diff_args(const tdm_train_args *a, const tdm_train_args *b, tdm_ab_result *r) {
    int n = tdm_train_args_count();
    r->diff_lines = tdm_xcalloc((size_t)n + 1, sizeof *r->diff_lines);
    r->same_lines = tdm_xcalloc((size_t)n + 1, sizeof *r->same_lines);
    for (int i = 0; i < n; i++) {
        char va[2048], vb[2048], line[4200];
        tdm_train_args_value(a, i, va, sizeof va);
        tdm_train_args_value(b, i, vb, sizeof vb);
        if (strcmp(va, vb)) {
            snprintf(line, sizeof line, "%s: %s -> %s", tdm_train_args_name(i), va, vb);
            r->diff_lines[r->n_diff++] = tdm_xstrdup(line);
        } else {
            snprintf(line, sizeof line, "%s = %s", tdm_train_args_name(i), va);
            r->same_lines[r->n_same++] = tdm_xstrdup(line);
        }
    }
}

/* Whether any rank was asked to stop (a signal between two runs reaches the ranks at different times):
 * every rank gets the same answer. */
static int stop_agreed(MPI_Comm comm) {
    int sig = tdm_train_stop_signal();
    MPI_Allreduce(MPI_IN_PLACE, &sig, 1, MPI_INT, MPI_MAX, comm);
    return sig;
}

typedef enum run_kind { RUN_TIMING, RUN_AUDIT, RUN_PROFILE } run_kind;

/* The iteration a side's runs start from: its --load checkpoint's (the iteration its
 * trainer_state.json records, where the trainer resumes; the directory's name does not matter:
 * "ck/iter_0000003/" or a copy in "best/" were refused), 0 without one or with --finetune. */
static int start_iteration(const tdm_train_args *a, int64_t *out, tdm_error *err) {
    *out = 0;
    if (!a->load[0] || a->finetune) return 0;
    tdm_ckpt ck;
    if (tdm_ckpt_read_state(a->load, &ck, err) != 0) return -1;
    *out = ck.state.iteration;
    return 0;
}

/* One inner training run with the protocol's settings for its kind: `iters` steps from
 * the side's start iteration. On success res holds the records, counted from 1 (the
 * iteration after the start), with step_ms replaced by the slowest rank's. */
static int run_once(const tdm_ab_side *side, run_kind kind, int64_t iters, const char *profile_config, MPI_Comm comm,
                    tdm_train_result *res, tdm_error *err) {
    const tdm_train_args *base = &side->args;
    tdm_train_args a = *base;
    a.train_iters = side->start_iteration + iters;
    a.save[0] = 0; /* no checkpoint saving inside measured runs */
    a.save_interval = 0;
    a.run_dir[0] = 0; /* no metrics file I/O either */
    a.exit_interval = 0;
    a.exit_duration_in_mins = 0;
    a.audit_fingerprints = kind == RUN_AUDIT;
    a.profile_config[0] = 0;
    if (kind == RUN_PROFILE) snprintf(a.profile_config, sizeof a.profile_config, "%s", profile_config);
    tdm_log_set_quiet(1);
    int rc = tdm_train_run(&a, comm, res, err);
    tdm_log_set_quiet(0);
    if (rc != 0) { /* a signal may end a run in an error (a picture's decoding given up): it was a stop */
        if (res->all_ranks_failed) return stop_agreed(comm) ? 1 : -1;
        return tdm_train_stop_signal() ? 2 : -1; /* this rank alone: the others may wait in a collective */
    }
    if (res->interrupted && tdm_train_stop_signal()) return 1; /* a signal: the caller writes what finished */
    if (res->n_steps != iters) /* not an assert: a checkpoint rewritten between runs would do this */
        return tdm_errorf(err, "expected %lld steps after iteration %lld, the run made %d", (long long)iters,
                          (long long)side->start_iteration, res->n_steps);
    for (int i = 0; i < res->n_steps; i++) res->records[i].iteration -= side->start_iteration;
    double *t = tdm_xmalloc((size_t)(res->n_steps + 1) * sizeof *t);
    for (int i = 0; i < res->n_steps; i++) t[i] = res->records[i].step_ms;
    MPI_Allreduce(MPI_IN_PLACE, t, res->n_steps, MPI_DOUBLE, MPI_MAX, comm);
    for (int i = 0; i < res->n_steps; i++) res->records[i].step_ms = t[i];
    free(t);
    /* the CPU times become the mean over ranks: what one rank's threads burn per step */
    int world = 1;
    MPI_Comm_size(comm, &world);
    double *c = tdm_xmalloc((size_t)(3 * res->n_steps + 1) * sizeof *c);
    for (int i = 0; i < res->n_steps; i++) {
        const tdm_step_record *x = &res->records[i];
        c[3 * i] = x->cpu_ms, c[3 * i + 1] = x->compute_cpu_ms, c[3 * i + 2] = x->comm_thread_cpu_ms;
    }
    MPI_Allreduce(MPI_IN_PLACE, c, 3 * res->n_steps, MPI_DOUBLE, MPI_SUM, comm);
    for (int i = 0; i < res->n_steps; i++) {
        tdm_step_record *x = &res->records[i];
        x->cpu_ms = c[3 * i] / world, x->compute_cpu_ms = c[3 * i + 1] / world;
        x->comm_thread_cpu_ms = c[3 * i + 2] / world;
    }
    free(c);
    return 0;
}

void tdm_ab_host_sample_read(const char *loadavg_path, const char *stat_path, tdm_ab_host_sample *s) {
    memset(s, 0, sizeof *s);
    s->load1 = NAN;
    FILE *f = fopen(loadavg_path, "r");
    if (f) {
        double v;
        if (fscanf(f, "%lf", &v) == 1 && isfinite(v) && v >= 0) s->load1 = v;
        fclose(f);
    }
    f = fopen(stat_path, "r");
    if (!f) return;
    char line[512];
    if (fgets(line, sizeof line, f) && !strncmp(line, "cpu ", 4)) {
        /* user nice system idle iowait irq softirq steal (guest and guest_nice are inside user and nice) */
        unsigned long long v[8] = {0};
        int n = sscanf(line + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                       &v[6], &v[7]);
        if (n >= 4) {
            for (int i = 0; i < n; i++) s->total += v[i];
            s->busy = v[0] + v[1] + v[2];
            s->steal = n == 8 ? v[7] : 0;
            s->have_stat = 1;
        }
    }
    fclose(f);
}

void tdm_ab_load_judge(const tdm_ab_host_sample *before, const tdm_ab_host_sample *after, double job_cpu_s,
                       double ticks_per_s, tdm_ab_load *out) {
    out->load_before = before->load1;
    out->load_after = after->load1;
    out->others_pct = out->steal_pct = NAN;
    const int have = before->have_stat && after->have_stat && after->total > before->total;
    if (have && after->steal >= before->steal)
        out->steal_pct = 100.0 * (double)(after->steal - before->steal) / (double)(after->total - before->total);
    if (have && after->busy >= before->busy && isfinite(job_cpu_s) && job_cpu_s >= 0 && ticks_per_s > 0) {
        /* the ticks are sampled: a few either way, so a share below zero is none */
        const double others = (double)(after->busy - before->busy) - job_cpu_s * ticks_per_s;
        out->others_pct = fmax(0.0, 100.0 * others / (double)(after->total - before->total));
    }
    out->under_load = (isfinite(out->others_pct) && out->others_pct > TDM_AB_OTHERS_PCT) ||
                      (isfinite(out->steal_pct) && out->steal_pct > TDM_AB_STEAL_PCT);
}

/* Whether this rank shares rank 0's kernel, whose /proc/stat rank 0 reads: the same boot id (ranks in other
 * network namespaces or containers on one machine share it, where MPI may count them as other hosts), else,
 * where it cannot be read, the same processor name. */
static int on_rank0_kernel(MPI_Comm comm) {
    char id[MPI_MAX_PROCESSOR_NAME + 8] = {0};
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f || !fgets(id, sizeof id, f) || !id[0]) {
        int len = 0;
        memcpy(id, "host:", 5);
        MPI_Get_processor_name(id + 5, &len);
    }
    if (f) fclose(f);
    char ref[sizeof id];
    memcpy(ref, id, sizeof id);
    MPI_Bcast(ref, (int)sizeof ref, MPI_CHAR, 0, comm);
    return !strcmp(ref, id);
}

static double process_cpu_s(void) {
    struct timespec t;
    return clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) ? NAN : (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void finished(tdm_ab_result *r, const char *side, const char *what, int k) {
    char name[96];
    if (k > 0) snprintf(name, sizeof name, "%s %s %d", side, what, k);
    else snprintf(name, sizeof name, "%s %s", side, what);
    r->finished = tdm_xrealloc(r->finished, sizeof *r->finished * (size_t)(r->n_finished + 1));
    r->finished[r->n_finished++] = tdm_xstrdup(name);
}

/* The profiled run's figures: NaN until read_profile finds them. */
static void clear_profile(tdm_ab_side *s) {
    s->comm_ms = s->hidden_comm_ms = s->exposed_comm_ms = s->compute_ms = NAN;
    s->data_wait_ms = s->ideal_step_ms = s->prof_step_ms = s->overlap_efficiency = s->last_bucket_comm_ms = NAN;
    s->sched_ideal_step_ms = s->sched_overlap_efficiency = NAN;
}

/* Removes what an earlier ab run into the same --out left of this side's profile (rank 0):
 * its timeline and traces/<side>/ (a trace_rank3.json of a 4-rank run would otherwise sit
 * beside this 2-rank run's files, and a run without profiling would list the old ones). */
static void remove_old_profile(const tdm_ab_options *o, const tdm_ab_side *s) {
    char path[1600], dir[1200];
    snprintf(path, sizeof path, "%s/timeline_%s.svg", o->out, s->label);
    (void)unlink(path);
    snprintf(dir, sizeof dir, "%s/traces/%s", o->out, s->label);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        const char *n = e->d_name;
        int ours = !strcmp(n, "trace.json") || !strcmp(n, "analysis.json") || !strcmp(n, "summary.txt") ||
                   !strcmp(n, "tools.json") || (!strncmp(n, "trace_rank", 10) && strstr(n, ".json"));
        if (!ours) continue;
        snprintf(path, sizeof path, "%s/%s", dir, n);
        (void)unlink(path);
    }
    closedir(d);
    (void)rmdir(dir); /* only when nothing else is in it */
    snprintf(dir, sizeof dir, "%s/traces", o->out);
    (void)rmdir(dir);
}

/* Reads the profiled run's analysis.json means into the side (rank 0). */
static void read_profile(tdm_ab_side *s) {
    clear_profile(s);
    char path[1200];
    snprintf(path, sizeof path, "%s/analysis.json", s->trace_dir);
    size_t len;
    char *text = tdm_read_file(path, 1 << 28, &len, NULL);
    if (!text) return;
    tdm_json_doc *d = tdm_json_parse(text, len, path, NULL);
    free(text);
    if (!d) return;
    const tdm_json *m = tdm_json_get(tdm_json_root(d), "mean");
    struct {
        const char *key;
        double *dst;
    } f[] = {{"comm_ms", &s->comm_ms},
             {"hidden_comm_ms", &s->hidden_comm_ms},
             {"exposed_comm_ms", &s->exposed_comm_ms},
             {"compute_ms", &s->compute_ms},
             {"data_wait_ms", &s->data_wait_ms},
             {"ideal_step_ms", &s->ideal_step_ms},
             {"step_ms", &s->prof_step_ms},
             {"overlap_efficiency", &s->overlap_efficiency},
             {"last_bucket_comm_ms", &s->last_bucket_comm_ms},
             {"sched_ideal_step_ms", &s->sched_ideal_step_ms},
             {"sched_overlap_efficiency", &s->sched_overlap_efficiency}};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        const tdm_json *v = tdm_json_get(m, f[i].key);
        if (v && v->type == TDM_JSON_NUMBER) *f[i].dst = v->num;
    }
    tdm_json_free(d);
}

static int write_profile_config(const tdm_ab_options *o, tdm_ab_side *s, int64_t first, int64_t last, int rank,
                                MPI_Comm comm, char *cfg_path, size_t cap, tdm_error *err) {
    snprintf(s->trace_dir, sizeof s->trace_dir, "%s/traces/%s", o->out, s->label);
    snprintf(cfg_path, cap, "%s/tools.json", s->trace_dir);
    int bad = 0;
    if (rank == 0) {
        tdm_strbuf text; /* the path as a JSON string: --out may hold a quote or a backslash */
        tdm_sb_init(&text);
        tdm_sb_printf(&text,
                      "{\"profile\": {\"enable\": true, \"ranks\": [-1], \"start_step\": %lld, \"end_step\": %lld, "
                      "\"level\": %d, \"capacity\": 262144, \"save_path\": ",
                      (long long)first, (long long)last, o->profile_level);
        tdm_sb_json_string(&text, s->trace_dir, strlen(s->trace_dir));
        tdm_sb_puts(&text, "}}\n");
        bad = tdm_mkdirs(s->trace_dir, err) != 0 || tdm_write_file_atomic(cfg_path, text.data, text.len, err) != 0;
        tdm_sb_free(&text);
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, comm);
    if (bad && rank != 0) tdm_errorf(err, "%s: rank 0 could not write the profiler config", cfg_path);
    return bad ? -1 : 0;
}

static void append_records(tdm_ab_side *s, int repeat, const tdm_train_result *res) {
    for (int64_t i = 0; i < s->steps; i++) {
        tdm_step_record *dst = &s->records[repeat * s->steps + i];
        if (i < res->n_steps) *dst = res->records[i];
        else memset(dst, 0, sizeof *dst), dst->iteration = i + 1, dst->loss = NAN, dst->step_ms = NAN;
    }
}

/* Every input a side's runs read, before the first run: the model configuration, the tokenizer, the data
 * files (a wrong one was found only at the first timing run, after the report path was announced). */
static int check_inputs(const tdm_train_args *a, tdm_error *err) {
    const char *model = a->model[0] ? a->model : a->pretrained;
    if (model[0]) {
        tdm_model_config cfg;
        if (tdm_model_config_load(model, &cfg, err) != 0) return tdm_error_prefix(err, "--model");
    }
    if (a->tokenizer[0]) {
        tdm_tokenizer *t = tdm_tokenizer_load(a->tokenizer, err);
        if (!t) return tdm_error_prefix(err, "--tokenizer");
        tdm_tokenizer_free(t);
    }
    for (int i = 0; i < a->n_data; i++) {
        uint64_t size;
        int fd = tdm_open_regular(a->data[i], &size, err);
        if (fd < 0) return tdm_error_prefix(err, "--data");
        close(fd);
    }
    return 0;
}

/* The report directory, created and written to once (rank 0), before any run. */
static int check_out(const tdm_ab_options *o, tdm_error *err) {
    if (tdm_mkdirs(o->out, err) != 0) return tdm_error_prefix(err, "--out");
    char probe[1200];
    snprintf(probe, sizeof probe, "%s/.tandem-ab-probe", o->out);
    if (tdm_write_file_atomic(probe, "", 0, err) != 0)
        return tdm_errorf(err, "--out %s: the report directory is not writable", o->out);
    (void)unlink(probe);
    return 0;
}

/* The options and both sides' flags (no MPI); the inputs, and --out on rank 0. */
static int setup_sides(const tdm_ab_options *o, int world, int rank, tdm_ab_result *r, tdm_error *err) {
    if (o->steps < 1 || o->repeats < 1 || o->repeats > 1000)
        return tdm_errorf(err, "--steps must be >= 1 and --repeats in [1, 1000]");
    if (o->profile_level < 0 || o->profile_level > 2) return tdm_errorf(err, "--profile-level: expected 0, 1 or 2");

    tdm_ab_side *A = &r->side[0], *B = &r->side[1];
    A->label = "baseline";
    B->label = "candidate";
    if (side_args(o, o->baseline_flags, "baseline", &A->args, err) != 0) return -1;
    if (side_args(o, o->candidate_flags, "candidate", &B->args, err) != 0) return -1;
    tdm_train_args_resolve(&A->args, world);
    tdm_train_args_resolve(&B->args, world);
    for (int s = 0; s < 2; s++) {
        tdm_ab_side *side = s ? B : A;
        if (tdm_train_args_validate(&side->args, world, err) == 0) continue;
        /* ab sets --train-iters from --steps: a rule that names it is about --steps here */
        if (strstr(err->msg, "--train-iters") && strlen(err->msg) + 48 < sizeof err->msg)
            strcat(err->msg, " (in ab, --train-iters is --steps)");
        return tdm_error_prefix(err, "%s", side->label);
    }
    if (o->window_lo < 1 || o->window_hi > o->steps || o->window_lo > o->window_hi) {
        if (!o->window_given && o->steps == 1)
            return tdm_errorf(err, "--steps 1: the statistics leave out step 1 (the cold first step), so nothing "
                                   "is left; use --steps 2 or more, or --window 1:1 to measure that step anyway");
        return tdm_errorf(err, "--window %lld:%lld: expected 1 <= FIRST <= LAST <= --steps %lld",
                          (long long)o->window_lo, (long long)o->window_hi, (long long)o->steps);
    }
    if (o->window_lo == 1 && !o->window_given) /* the defaults never start at 1; a caller's options might */
        return tdm_errorf(err,
                          "the window starts at step 1, the cold first step (allocations, cold caches): "
                          "give --window 1:%lld to include it on purpose",
                          (long long)o->window_hi);
    if (check_inputs(&A->args, err) != 0) return -1;
    if (check_inputs(&B->args, err) != 0) return tdm_error_prefix(err, "candidate");
    if (rank == 0 && check_out(o, err) != 0) return -1;
    return 0;
}

/* Longer than most: the protocol's numbered steps in order, sharing the runs' state. */
int tdm_ab_run(const tdm_ab_options *o, MPI_Comm comm, tdm_ab_result *r, tdm_strbuf *table, tdm_error *err) {
    memset(r, 0, sizeof *r);
    uint64_t t_start = tdm_now_ns();
    int rank, world;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &world);
    r->world = world;
    r->cores_online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    tdm_hosts_describe(comm, &r->hosts);
    r->fingerprints_equal = -1;
    r->setup_failed = 1; /* until the first run */
    /* With one command line the flags fail alike on every rank; an MPMD launch can refuse some
     * ranks' only, and those must not leave the others waiting in a collective: agree first. */
    const int ok = setup_sides(o, world, rank, r, err) == 0;
    int n_bad;
    const int first_bad = tdm_first_failed_rank(ok, comm, &n_bad);
    if (first_bad < world) {
        r->setup_failed_rank = first_bad;
        r->setup_failed_everywhere = n_bad == world;
        if (ok) tdm_errorf(err, "rank %d refused its flags (its message is printed there)", first_bad);
        return -1;
    }
    r->setup_failed_everywhere = 1; /* what can fail before the first run from here fails on every rank */
    tdm_ab_side *A = &r->side[0], *B = &r->side[1];
    diff_args(&A->args, &B->args, r);
    if (r->n_diff == 0 && !o->aa) { /* every rank diffed the same flags */
        tdm_errorf(err,
                   "the two sides are identical (%s): that is an A/A run, which measures only the machine's "
                   "noise; give --candidate \"FLAGS\" (and --baseline) to compare, or --aa to run A/A on purpose",
                   o->baseline_flags[0] || o->candidate_flags[0] ? "no argument differs between --baseline and "
                                                                   "--candidate"
                                                                 : "no --baseline or --candidate");
        return -1;
    }
    if (o->window_lo == 1)
        tdm_log_info("A/B: warning: --window %lld:%lld includes step 1, the cold first step (allocations, cold "
                     "caches): its time is not the steady state",
                     (long long)o->window_lo, (long long)o->window_hi);
    if (r->n_diff == 0) /* --aa: an A/A run measures the noise of the machine */
        tdm_log_info("A/B: A/A run (--aa): both sides run the same flags, so any change is the machine's noise");
    else tdm_log_info("A/B: %d argument(s) differ between baseline and candidate:", r->n_diff);
    for (int i = 0; i < r->n_diff; i++) tdm_log_info("  %s", r->diff_lines[i]);
    tdm_log_info("A/B: %d other arguments are identical (listed in %s/report.md)", r->n_same, o->out);
    if (rank == 0 && tdm_mkdirs(o->out, err) != 0) {
        int bad = 1;
        MPI_Bcast(&bad, 1, MPI_INT, 0, comm);
        return -1;
    } else {
        int bad = 0;
        MPI_Bcast(&bad, 1, MPI_INT, 0, comm);
        if (bad) return tdm_errorf(err, "%s: rank 0 could not create the report directory", o->out);
    }

    for (int s = 0; s < 2; s++) {
        if (start_iteration(&r->side[s].args, &r->side[s].start_iteration, err) != 0)
            return tdm_error_prefix(err, "%s", r->side[s].label);
        if (r->side[s].start_iteration > 0)
            tdm_log_info("A/B: %s: every run trains %lld steps from the checkpoint's iteration %lld (steps below "
                         "count from there)",
                         r->side[s].label, (long long)o->steps, (long long)r->side[s].start_iteration);
    }
    r->setup_failed = 0;
    int local_stop = 0; /* a run ended by the signal on this rank alone (an error there, not the agreed stop) */
    int said_transport = 0, warned = 0; /* the first timing run's transport line and data-parallel warning, once */
    for (int s = 0; s < 2; s++) {
        r->side[s].repeats = o->repeats;
        r->side[s].steps = o->steps;
        r->side[s].records = tdm_xcalloc((size_t)(o->repeats * o->steps), sizeof(tdm_step_record));
    }
    r->load = tdm_xcalloc((size_t)(2 * o->repeats), sizeof *r->load);
    clear_profile(A), clear_profile(B); /* a partial report may come before the profiled runs */
    const int on_kernel = on_rank0_kernel(comm);
    MPI_Allreduce(&on_kernel, &r->local_ranks, 1, MPI_INT, MPI_SUM, comm);
    const double ticks_per_s = (double)sysconf(_SC_CLK_TCK);
    /* 2. timing runs, interleaved so drift of the machine hits both sides */
    for (int k = 0; k < o->repeats; k++) {
        for (int s = 0; s < 2; s++) {
            tdm_ab_side *side = &r->side[s];
            if (stop_agreed(comm)) goto stopped;
            tdm_log_info("A/B: timing run %d/%d, %s (%lld steps)...", k + 1, o->repeats, side->label,
                         (long long)o->steps);
            tdm_train_result res;
            tdm_ab_host_sample before, after;
            if (rank == 0) tdm_ab_host_sample_read("/proc/loadavg", "/proc/stat", &before);
            const double cpu0 = process_cpu_s();
            uint64_t t0 = tdm_now_ns();
            const int once = run_once(side, RUN_TIMING, o->steps, NULL, comm, &res, err);
            if (once != 0) {
                tdm_train_result_free(&res);
                local_stop = once == 2;
                if (once > 0) goto stopped;
                r->run_failed_together = res.all_ranks_failed, r->run_failed_rank = res.failed_rank;
                return tdm_error_prefix(err, "%s timing run %d", side->label, k + 1);
            }
            append_records(side, k, &res);
            /* the job's CPU on rank 0's kernel over the run, every thread of its ranks there (NaN: unknown) */
            const double mine = on_kernel ? process_cpu_s() - cpu0 : 0.0;
            double job_cpu_s = 0.0;
            MPI_Reduce(&mine, &job_cpu_s, 1, MPI_DOUBLE, MPI_SUM, 0, comm);
            if (rank == 0) {
                tdm_ab_host_sample_read("/proc/loadavg", "/proc/stat", &after);
                tdm_ab_load_judge(&before, &after, job_cpu_s, ticks_per_s, &r->load[r->n_load]);
            }
            r->n_load++;
            finished(r, side->label, "timing", k + 1);
            if (k == 0) snprintf(side->ddp_config_line, sizeof side->ddp_config_line, "%s", res.ddp_config_line);
            if (k == 0 && !said_transport) tdm_log_info("A/B: %s", res.transport_line), said_transport = 1;
            if (k == 0 && res.dp_warning[0] && !warned)
                tdm_log_warn("A/B: %s: %s", side->label, res.dp_warning), warned = 1;
            tdm_train_result_free(&res);
            tdm_log_info("A/B:   done in %.1f s", (double)(tdm_now_ns() - t0) / 1e9);
        }
    }
    for (int s = 0; s < 2; s++) tdm_log_info("A/B: %s: %s", r->side[s].label, r->side[s].ddp_config_line);

    /* 3. input fingerprint audit */
    int64_t audit = o->audit_steps < 0 ? o->steps : o->audit_steps;
    if (audit > 0) {
        for (int s = 0; s < 2; s++) {
            tdm_ab_side *side = &r->side[s];
            if (stop_agreed(comm)) goto stopped;
            tdm_log_info("A/B: fingerprint audit run, %s (%lld steps)...", side->label, (long long)audit);
            tdm_train_result res;
            const int once = run_once(side, RUN_AUDIT, audit, NULL, comm, &res, err);
            if (once != 0) {
                tdm_train_result_free(&res);
                local_stop = once == 2;
                if (once > 0) goto stopped;
                r->run_failed_together = res.all_ranks_failed, r->run_failed_rank = res.failed_rank;
                return tdm_error_prefix(err, "%s audit run", side->label);
            }
            finished(r, side->label, "audit", 0);
            side->audit_steps = res.n_steps;
            side->audit_fingerprints = tdm_xcalloc((size_t)res.n_steps + 1, sizeof(uint64_t));
            for (int i = 0; i < res.n_steps; i++) side->audit_fingerprints[i] = res.records[i].fingerprint;
            tdm_train_result_free(&res);
        }
        r->fingerprints_equal = A->audit_steps == B->audit_steps && A->audit_steps > 0;
        for (int64_t i = 0; i < A->audit_steps && i < B->audit_steps; i++)
            if (A->audit_fingerprints[i] != B->audit_fingerprints[i]) {
                if (r->fingerprints_equal) r->first_fingerprint_diff_step = i + 1;
                r->fingerprints_equal = 0;
            }
        tdm_log_info("A/B: input fingerprints %s at every step", r->fingerprints_equal ? "identical" : "DIFFER");
    }

    /* 4. profiled runs: a few steps after the warm-up */
    for (int s = 0; s < 2; s++) {
        tdm_ab_side *side = &r->side[s];
        clear_profile(side);
        if (rank == 0) remove_old_profile(o, side);
        if (o->profile_steps <= 0) continue;
        int64_t first = o->window_lo, last = o->window_lo + o->profile_steps - 1;
        if (last > o->steps) {
            last = o->steps, first = last - o->profile_steps + 1 < 1 ? 1 : last - o->profile_steps + 1;
            if (s == 0)
                tdm_log_info("A/B: --profile-steps %d from the window's first step %lld would pass step %lld: "
                             "profiling steps %lld-%lld instead",
                             o->profile_steps, (long long)o->window_lo, (long long)o->steps, (long long)first,
                             (long long)last);
        }
        r->profile_first = first, r->profile_last = last;
        char cfg[1300];
        const int64_t at = side->start_iteration; /* the profiler counts the trainer's iterations */
        if (write_profile_config(o, side, at + first, at + last, rank, comm, cfg, sizeof cfg, err) != 0) return -1;
        if (stop_agreed(comm)) goto stopped;
        tdm_log_info("A/B: profiled run, %s (steps %lld-%lld at level %d)...", side->label, (long long)first,
                     (long long)last, o->profile_level);
        tdm_train_result res;
        const int once = run_once(side, RUN_PROFILE, last, cfg, comm, &res, err);
        if (once != 0) {
            tdm_train_result_free(&res);
            local_stop = once == 2;
            if (once > 0) goto stopped;
            r->run_failed_together = res.all_ranks_failed, r->run_failed_rank = res.failed_rank;
            return tdm_error_prefix(err, "%s profiled run", side->label);
        }
        tdm_train_result_free(&res);
        finished(r, side->label, "profiled", 0);
        if (rank == 0) read_profile(side);
    }

    /* 5. statistics and precision */
    tdm_ab_compute(o, r);
    r->wall_s = (double)(tdm_now_ns() - t_start) / 1e9;

    int bad = 0;
    if (rank == 0) bad = tdm_ab_write_report(o, r, err) != 0;
    MPI_Bcast(&bad, 1, MPI_INT, 0, comm);
    if (bad) return rank == 0 ? -1 : tdm_errorf(err, "%s: rank 0 could not write the report", o->out);
    if (table) tdm_ab_format_table(o, r, table);
    return 0;

stopped:
    /* a signal: keep the runs that finished (timing runs ran baseline, candidate, baseline, ...) */
    r->partial = 1;
    r->stop_signal = local_stop ? tdm_train_stop_signal() : stop_agreed(comm);
    if (!r->stop_signal) r->stop_signal = SIGTERM;
    A->repeats = (r->n_load + 1) / 2;
    B->repeats = r->n_load / 2;
    if (r->fingerprints_equal < 0) A->audit_steps = B->audit_steps = 0; /* the audit did not finish on both */
    if (A->repeats > 0 && B->repeats > 0) tdm_ab_compute(o, r);
    else { /* nothing to compare: every figure unknown */
        for (int s = 0; s < 2; s++) {
            tdm_ab_side *x = &r->side[s];
            x->mean_step_ms = x->median_step_ms = x->stddev_step_ms = x->samples_per_s = NAN;
            x->model_gflops_per_rank = x->cpu_ms = x->compute_cpu_ms = x->comm_cpu_ms = x->cores_busy = NAN;
        }
        r->step_time_change_pct = r->median_change_pct = r->throughput_change_pct = NAN;
        r->step_time_ci.change_pct = r->step_time_ci.lo_pct = r->step_time_ci.hi_pct = NAN;
        r->runs_ci.change_pct = r->runs_ci.lo_pct = r->runs_ci.hi_pct = NAN;
        r->max_rel_loss_dev = r->max_rel_grad_norm_dev = NAN;
    }
    if (!(A->repeats > 0 && B->repeats > 0))
        snprintf(r->noise_sentence, sizeof r->noise_sentence, "No comparison: %s has no finished timing run.",
                 A->repeats ? "the candidate" : "neither side");
    r->wall_s = (double)(tdm_now_ns() - t_start) / 1e9;
    bad = 0;
    if (rank == 0) bad = tdm_ab_write_report(o, r, err) != 0;
    if (table) tdm_ab_format_table(o, r, table);
    if (local_stop) { /* no collective: another rank may be blocked in one */
        r->stopped_alone = 1;
        return bad ? -1 : 1;
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, comm);
    if (bad) return rank == 0 ? -1 : tdm_errorf(err, "%s: rank 0 could not write the partial report", o->out);
    return 1;
}

void tdm_ab_result_free(tdm_ab_result *r) {
    for (int s = 0; s < 2; s++) {
        free(r->side[s].records);
        free(r->side[s].audit_fingerprints);
        free(r->side[s].repeat_mean_ms);
    }
    free(r->load);
    for (int i = 0; i < r->n_finished; i++) free(r->finished[i]);
    free(r->finished);
    for (int i = 0; i < r->n_diff; i++) free(r->diff_lines[i]);
    for (int i = 0; i < r->n_same; i++) free(r->same_lines[i]);
    free(r->diff_lines);
    free(r->same_lines);
    tdm_hosts_free(&r->hosts);
    memset(r, 0, sizeof *r);
}
