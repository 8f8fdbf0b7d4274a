/* cmd_analyze.c - `tandem analyze RUN...`: overlap analysis of runs tandem did not train (or
 * did), from their profiler traces (src/runs), with a table, report.md, analysis.json and plots
 * (ab/analyze_report.h). docs/analyze.md says what to collect and how to read the output. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ab/analyze_report.h"
#include "core/alloc.h"
#include "core/strbuf.h"
#include "runs/analyze.h"
#include "runs/trace.h"
#include "tools/cli.h"
#include "tools/commands.h"

typedef struct analyze_opts {
    const char *out;
    int json;
    const char **runs; /* room for argc words */
    int n_runs;
} analyze_opts;

static const tdm_flag FLAGS[] = {
    {.name = "out",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(analyze_opts, out),
     .metavar = "DIR",
     .help = "write report.md, analysis.json, timeline_run<i>.svg, steps_run<i>.svg there (default: analyze-report)"},
    {.name = "json",
     .kind = TDM_FLAG_BOOL,
     .off = offsetof(analyze_opts, json),
     .help = "print analysis.json instead of the table"},
};

static const tdm_positional POS[] = {
    {.metavar = "RUN...",
     .off = offsetof(analyze_opts, runs),
     .many = 1,
     .count_off = offsetof(analyze_opts, n_runs),
     .help = "a trace file or a folder of them (one run; every rank's file): PyTorch profiler traces (*.json, "
             "*.json.gz; Kineto or PyTorch 1.13's legacy format), Ascend profiler output (trace_view.json, "
             "step_trace_time.csv, communication.json, msprof-analyze's cluster_step_trace_time.csv and "
             "cluster_communication.json), tandem's own profiler output (trace.json)"},
};

static const tdm_flags P = {
    .command = "tandem analyze",
    .usage = "tandem analyze [--out DIR] [--json] RUN...",
    .about = "Reads each RUN's profiler traces and reports, per rank and per step, step time, compute,\n"
             "communication, hidden and exposed communication, idle time and the last collective; the\n"
             "whole-trace overlap as Holistic Trace Analysis computes it; the slowest rank and the spread;\n"
             "collectives by kind with sizes and bus bandwidth; and diagnostics that name a cause.",
    .flags = FLAGS,
    .n_flags = (int)(sizeof FLAGS / sizeof *FLAGS),
    .pos = POS,
    .n_pos = 1,
    .min_pos = 1,
    .epilog = "docs/analyze.md says what to collect on Megatron-LM, MindSpeed-MM, plain PyTorch and Ascend.\n",
};

int cmd_analyze(int argc, char **argv) {
    analyze_opts o = {.out = "analyze-report"};
    o.runs = tdm_xcalloc((size_t)argc + 1, sizeof *o.runs);
    int done = tdm_cli_parse(&P, &o, argc, argv, NULL, NULL);
    if (done >= 0) {
        free(o.runs);
        return done;
    }
    const char *out = o.out, **paths = o.runs;
    const int as_json = o.json, n = o.n_runs;
    tdm_runs_set *sets = tdm_xcalloc((size_t)n, sizeof *sets);
    tdm_runs_analysis *an = tdm_xcalloc((size_t)n, sizeof *an);
    tdm_analyze_run *runs = tdm_xcalloc((size_t)n, sizeof *runs);
    int rc = 0, read = 0;
    tdm_error err;
    for (int i = 0; i < n && rc == 0; i++) {
        tdm_runs_set_init(&sets[i]);
        read = i + 1;
        if (tdm_runs_read(&sets[i], paths[i], &err) != 0) {
            fprintf(stderr, "tandem analyze: %s\n", err.msg);
            rc = 1;
            break;
        }
        if (sets[i].n == 0 && sets[i].n_acomm == 0) {
            fprintf(stderr, "tandem analyze: %s: no trace read\n", paths[i]);
            rc = 1;
            break;
        }
        tdm_runs_analyze(&sets[i], &an[i]);
        runs[i] = (tdm_analyze_run){paths[i], &sets[i], &an[i]};
    }
    if (rc == 0) {
        tdm_strbuf sb;
        tdm_sb_init(&sb);
        if (as_json) tdm_analyze_json(&sb, runs, n);
        else tdm_analyze_table(&sb, runs, n);
        fputs(sb.data ? sb.data : "", stdout);
        tdm_sb_free(&sb);
        if (tdm_analyze_write(runs, n, out, &err) != 0) {
            fprintf(stderr, "tandem analyze: %s\n", err.msg);
            rc = 1;
        } else if (!as_json) {
            printf("report: %s/report.md, analysis.json, timeline_run*.svg, steps_run*.svg\n", out);
        }
    }
    for (int i = 0; i < read; i++) {
        tdm_runs_analysis_free(&an[i]);
        tdm_runs_set_free(&sets[i]);
    }
    free(sets);
    free(an);
    free(runs);
    free(paths);
    return rc;
}
