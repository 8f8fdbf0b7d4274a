/* ab_runs_traces.c - the profiler traces given with finished runs (ab_runs.h): where a RUN
 * argument's log and traces are, and the side's hidden/exposed figures from runs/analyze.h. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ab/ab_runs.h"
#include "core/alloc.h"
#include "runs/run.h"
#include "runs/analyze.h"
#include "runs/trace.h"

static int ends(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A folder that is a run: no golden values in it (a Megatron test case), one *.log or *.log.gz.
 * 1 with the log in log[cap], 0 when the folder is something else, -1 with err. */
static int run_folder(const char *dir, char *log, size_t cap, tdm_error *err) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int n_logs = 0, golden = 0;
    char first[2][512] = {"", ""};
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (!strncmp(e->d_name, "golden_values", 13)) golden = 1;
        if (ends(e->d_name, ".log") || ends(e->d_name, ".log.gz")) {
            if (n_logs < 2) snprintf(first[n_logs], sizeof first[n_logs], "%s", e->d_name);
            n_logs++;
        }
    }
    closedir(d);
    if (golden || n_logs == 0) return 0;
    if (n_logs > 1)
        return tdm_errorf(err, "%s: the folder holds %d logs (%s, %s%s): expected one; give the run as LOG,TRACES", dir,
                          n_logs, first[0], first[1], n_logs > 2 ? ", ..." : "");
    snprintf(log, cap, "%s/%s", dir, first[0]);
    return 1;
}

int tdm_ab_runs_split(const char *arg, char *log, size_t log_cap, char *traces, size_t traces_cap, int *traces_required,
                      tdm_error *err) {
    struct stat st;
    traces[0] = 0;
    *traces_required = 0;
    if (stat(arg, &st) != 0) {
        const char *comma = strrchr(arg, ',');
        if (comma && comma > arg && comma[1]) {
            snprintf(log, log_cap, "%.*s", (int)(comma - arg), arg);
            snprintf(traces, traces_cap, "%s", comma + 1);
            *traces_required = 1;
            if (stat(log, &st) != 0)
                return tdm_errorf(err, "%s: no such file or directory (the log of '%s', given as LOG,TRACES)", log,
                                  arg);
            if (stat(traces, &st) != 0)
                return tdm_errorf(err, "%s: no such file or directory (the traces of '%s', given as LOG,TRACES)",
                                  traces, arg);
            return 0;
        }
    }
    snprintf(log, log_cap, "%s", arg);
    if (is_dir(arg)) {
        int rc = run_folder(arg, log, log_cap, err);
        if (rc < 0) return -1;
        if (rc == 1) snprintf(traces, traces_cap, "%s", arg);
    }
    return 0;
}

/* A reader's note without the file's path in front (the same note of every rank once). */
static void add_note(tdm_ab_runs_side *s, const char *file, const char *text) {
    size_t n = strlen(file);
    if (!strncmp(text, file, n) && !strncmp(text + n, ": ", 2)) text += n + 2;
    for (int i = 0; i < s->n_trace_notes; i++)
        if (!strcmp(s->trace_notes[i], text)) return;
    enum { MAX_NOTES = 16 };
    if (s->n_trace_notes >= MAX_NOTES) return;
    s->trace_notes = tdm_xrealloc(s->trace_notes, (size_t)(s->n_trace_notes + 1) * sizeof *s->trace_notes);
    s->trace_notes[s->n_trace_notes++] = tdm_xstrdup(text);
}

int tdm_ab_runs_read_traces(tdm_ab_runs_side *s, int k, const char *path, int required, tdm_error *err) {
    tdm_runs_set set;
    tdm_runs_set_init(&set);
    tdm_error e = {{0}};
    if (tdm_runs_read(&set, path, &e) != 0 || (set.n == 0 && set.n_acomm == 0)) {
        tdm_runs_set_free(&set);
        if (!required && !e.msg[0]) return 0;
        if (!required && strstr(e.msg, "no trace found")) return 0; /* a run folder with a log only */
        if (!e.msg[0]) snprintf(e.msg, sizeof e.msg, "%s: no trace read", path);
        return tdm_errorf(err, "%s", e.msg);
    }
    tdm_runs_analysis an;
    tdm_runs_analyze(&set, &an);
    /* sums over every rank of every traced run so far: the means are taken at the end (finish) */
    for (int i = 0; i < an.n_ranks; i++) {
        const tdm_runs_rank_stats *r = &an.ranks[i];
        if (r->n_steps == 0) continue;
        s->trace_ranks++;
        s->trace_steps += r->n_steps;
        s->trace_step_ms += r->mean.step_us / 1e3;
        s->trace_compute_ms += r->mean.compute_us / 1e3;
        s->trace_comm_ms += r->mean.comm_us / 1e3;
        s->trace_hidden_ms += r->mean.hidden_us / 1e3;
        s->trace_exposed_ms += r->mean.exposed_us / 1e3;
        if (isfinite(r->mean.last_us)) s->trace_last_ms += r->mean.last_us / 1e3;
        else s->trace_last_ms = NAN;
        int64_t ws = r->trace->world_size;
        if (ws < 0) continue;
        if (s->trace_world_size == -1) s->trace_world_size = ws;
        else if (ws != s->trace_world_size) s->trace_world_size = 0;
    }
    for (int i = 0; i < set.n; i++)
        for (int j = 0; j < set.traces[i]->n_notes; j++) add_note(s, set.traces[i]->path, set.traces[i]->notes[j]);
    if (s->trace_paths) s->trace_paths[k] = tdm_xstrdup(path);
    s->traced_runs++;
    tdm_runs_analysis_free(&an);
    tdm_runs_set_free(&set);
    return 0;
}

void tdm_ab_runs_finish_traces(tdm_ab_runs_side *s) {
    if (s->trace_ranks == 0) {
        s->trace_step_ms = s->trace_compute_ms = s->trace_comm_ms = s->trace_hidden_ms = s->trace_exposed_ms =
            s->trace_last_ms = s->trace_overlap_pct = NAN;
        return;
    }
    double n = s->trace_ranks;
    s->trace_step_ms /= n, s->trace_compute_ms /= n, s->trace_comm_ms /= n;
    s->trace_hidden_ms /= n, s->trace_exposed_ms /= n, s->trace_last_ms /= n;
    s->trace_overlap_pct = s->trace_comm_ms > 0 ? 100.0 * s->trace_hidden_ms / s->trace_comm_ms : NAN;
}

typedef struct step_time {
    int64_t number;
    double us;
} step_time;

static int by_number(const void *a, const void *b) {
    const step_time *x = a, *y = b;
    return x->number < y->number ? -1 : x->number > y->number;
}

int tdm_ab_runs_log_from_traces(const char *path, tdm_run_log *run) {
    tdm_run_log_init(run);
    tdm_runs_set set;
    tdm_runs_set_init(&set);
    tdm_error e;
    if (tdm_runs_read(&set, path, &e) != 0 || set.n == 0) {
        tdm_runs_set_free(&set);
        return 0;
    }
    tdm_runs_analysis an;
    tdm_runs_analyze(&set, &an);
    int64_t n = 0, world = -1;
    for (int i = 0; i < an.n_ranks; i++) n += an.ranks[i].n_steps;
    step_time *st = tdm_xcalloc((size_t)n + 1, sizeof *st);
    n = 0;
    for (int i = 0; i < an.n_ranks; i++) {
        for (int64_t k = 0; k < an.ranks[i].n_steps; k++)
            if (an.ranks[i].steps[k].number >= 0 && isfinite(an.ranks[i].steps[k].step_us))
                st[n++] = (step_time){an.ranks[i].steps[k].number, an.ranks[i].steps[k].step_us};
        if (an.ranks[i].trace->world_size > 0) world = an.ranks[i].trace->world_size;
    }
    qsort(st, (size_t)n, sizeof *st, by_number);
    int64_t steps = 0;
    int ok = 1;
    for (int64_t i = 0; i < n && ok;) {
        int64_t j = i;
        double slowest = 0;
        for (; j < n && st[j].number == st[i].number; j++) slowest = st[j].us > slowest ? st[j].us : slowest;
        tdm_run_iter it = tdm_run_iter_empty(st[i].number);
        it.interval = 1;
        it.elapsed_ms = slowest / 1e3;
        ok = tdm_run_append_iter(run, &it, &e) == 0;
        steps++;
        i = j;
    }
    free(st);
    if (!ok || steps == 0) {
        tdm_runs_analysis_free(&an);
        tdm_runs_set_free(&set);
        tdm_run_log_free(run);
        tdm_run_log_init(run);
        return 0;
    }
    run->format = TDM_RUN_PROFILER_TRACES;
    snprintf(run->path, sizeof run->path, "%s", path);
    snprintf(run->source, sizeof run->source, "profiler traces (%d rank%s, %lld steps; step time: the slowest rank's)",
             an.n_ranks, an.n_ranks == 1 ? "" : "s", (long long)steps);
    if (world > 0) {
        char v[32];
        int len = snprintf(v, sizeof v, "%lld", (long long)world);
        tdm_run_add_kv(&run->args, &run->n_args, "world_size", 10, v, (size_t)len);
    }
    tdm_runs_analysis_free(&an);
    tdm_runs_set_free(&set);
    return 1;
}
