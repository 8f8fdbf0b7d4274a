/* cmd_trace_summary.c - `tandem trace-summary DIR|FILE`: reprints the operator summary
 * and the per-step analysis of a saved profile (the merged trace.json a profiled run
 * wrote), and the per-thread CPU statistics from analysis.json when present. On an A/B
 * report folder (tandem ab --out) it summarizes traces/baseline and traces/candidate. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "prof/trace.h"
#include "tools/cli.h"
#include "tools/commands.h"

typedef struct trace_summary_opts {
    int json;
    const char *path;
} trace_summary_opts;

static const tdm_flag FLAGS[] = {
    {.name = "json",
     .kind = TDM_FLAG_BOOL,
     .off = offsetof(trace_summary_opts, json),
     .help = "print the analysis as JSON instead (per-step statistics, their mean, the operator summary: the "
             "analysis.json of a profiled run without its thread table), recomputed from the trace by this build, "
             "e.g. to re-read old traces after the analysis changed"},
};

static const tdm_positional POS[] = {
    {.metavar = "DIR|TRACE.json",
     .off = offsetof(trace_summary_opts, path),
     .help = "a profiler save_path (it holds trace.json, written by a run with --profile-config), the trace, or "
             "a tandem ab report folder (its traces/<side>/, each in turn)"},
};

static const tdm_flags P = {
    .command = "tandem trace-summary",
    .usage = "tandem trace-summary [--json] DIR|TRACE.json",
    .about = "Prints the operator summary (count, total, mean, max per name; waits included), the per-step\n"
             "analysis (compute, communication, hidden, exposed, data wait, ideal step, overlap efficiency)\n"
             "and the per-thread CPU statistics of the profiled steps.",
    .flags = FLAGS,
    .n_flags = (int)(sizeof FLAGS / sizeof *FLAGS),
    .pos = POS,
    .n_pos = 1,
    .min_pos = 1,
};

/* analysis.json's thread table (every rank of the run), the rows of the trace's ranks only: a
 * trace_rank1.json shows rank 1's threads. 1 with the error printed when the file is there but unreadable. */
static int print_threads(const char *dir, const tdm_prof_trace *tr) {
    char path[4200];
    snprintf(path, sizeof path, "%s/analysis.json", dir);
    size_t len;
    struct stat st;
    if (stat(path, &st) != 0) return 0; /* a trace without it: no thread table */
    tdm_error err;
    char *text = tdm_read_file(path, 1 << 28, &len, &err);
    tdm_json_doc *d = text ? tdm_json_parse(text, len, path, &err) : NULL;
    free(text);
    if (!d) { /* the summary stands without it; say why the table is missing */
        fprintf(stderr,
                "tandem trace-summary: %s (expected the analysis.json that tandem train's profiler writes); the "
                "thread table is left out\n",
                err.msg);
        return 1;
    }
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_prof_format_threads_of(&sb, tdm_json_get(tdm_json_root(d), "threads"), tr->ranks, tr->n_ranks);
    fputs(sb.data ? sb.data : "", stdout);
    tdm_sb_free(&sb);
    tdm_json_free(d);
    return 0;
}

/* One trace: its summary (text or JSON) on stdout; 1 with the error printed when it cannot be read. */
static int summarize(const char *path, const char *dir, int as_json) {
    tdm_prof_trace t;
    tdm_error err;
    if (tdm_prof_trace_load(path, (size_t)4 << 30, &t, &err) != 0) {
        fprintf(stderr, "tandem trace-summary: %s\n", err.msg);
        return 1;
    }
    tdm_strbuf text, json;
    tdm_sb_init(&text);
    tdm_sb_init(&json);
    tdm_prof_trace_summarize(&t, &text, as_json ? &json : NULL);
    if (as_json) printf("%s\n", json.data ? json.data : "{}");
    else fputs(text.data ? text.data : "", stdout);
    tdm_sb_free(&text);
    tdm_sb_free(&json);
    const int rc = as_json ? 0 : print_threads(dir, &t);
    tdm_prof_trace_free(&t);
    return rc;
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int cmd_trace_summary(int argc, char **argv) {
    trace_summary_opts o = {0};
    int done = tdm_cli_parse(&P, &o, argc, argv, NULL, NULL);
    if (done >= 0) return done;
    const int as_json = o.json;
    char dir[4096], path[4200];
    struct stat st;
    if (stat(o.path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(dir, sizeof dir, "%s", o.path);
        snprintf(path, sizeof path, "%s/trace.json", o.path);
        /* an A/B report folder (tandem ab --out): its traces are in traces/<side>/ */
        static const char *const sides[] = {"baseline", "candidate"};
        char side_dir[2][4200], side_trace[2][4300];
        int found = 0;
        for (int k = 0; k < 2; k++) {
            snprintf(side_dir[k], sizeof side_dir[k], "%.4000s/traces/%s", o.path, sides[k]);
            snprintf(side_trace[k], sizeof side_trace[k], "%.4100s/trace.json", side_dir[k]);
            found += is_file(side_trace[k]);
        }
        if (!is_file(path) && found) {
            if (as_json) {
                fprintf(stderr,
                        "tandem trace-summary: %s is an A/B report folder: its traces are in %s and %s; "
                        "give one of them for --json\n",
                        o.path, side_dir[0], side_dir[1]);
                return 1;
            }
            int rc = 0;
            for (int k = 0; k < 2; k++) {
                if (!is_file(side_trace[k])) {
                    printf("== %s: no trace (%s: the profiled run left none)\n\n", sides[k], side_trace[k]);
                    continue;
                }
                printf("== %s (%s)\n", sides[k], side_dir[k]);
                fflush(stdout);
                rc |= summarize(side_trace[k], side_dir[k], 0);
                printf("\n");
            }
            return rc;
        }
    } else {
        snprintf(path, sizeof path, "%s", o.path);
        tdm_dirname(o.path, dir, sizeof dir);
    }
    return summarize(path, dir, as_json);
}
