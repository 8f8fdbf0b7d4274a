/* cmd_ab_runs.c - `tandem ab --baseline-run A [A2 ...] --candidate-run B [B2 ...]`: the A/B
 * protocol's analysis on finished runs (ab/ab_runs.h), without MPI and without training.
 * cmd_ab hands over here when it sees --baseline-run or --candidate-run. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ab/ab.h"
#include "ab/ab_runs.h"
#include "core/strbuf.h"
#include "tools/cli.h"
#include "tools/commands.h"

enum { MAX_RUNS = 64 }; /* runs per side */

typedef struct ab_runs_cli {
    const char *runs[2][MAX_RUNS];
    int n_runs[2];
    const char *window;
    uint64_t seed;
    const char *out;
} ab_runs_cli;

static const tdm_flag FLAGS[] = {
    {.name = "baseline-run",
     .kind = TDM_FLAG_LIST,
     .off = offsetof(ab_runs_cli, runs[0]),
     .count_off = offsetof(ab_runs_cli, n_runs[0]),
     .max = MAX_RUNS,
     .opts = TDM_FLAG_MANY,
     .metavar = "RUN...",
     .help = "the baseline's runs (several: repeats of the side)"},
    {.name = "candidate-run",
     .kind = TDM_FLAG_LIST,
     .off = offsetof(ab_runs_cli, runs[1]),
     .count_off = offsetof(ab_runs_cli, n_runs[1]),
     .max = MAX_RUNS,
     .opts = TDM_FLAG_MANY,
     .metavar = "RUN...",
     .help = "the candidate's runs"},
    {.name = "window",
     .kind = TDM_FLAG_STRING,
     .off = offsetof(ab_runs_cli, window),
     .metavar = "A:B",
     .help = "iterations used for the statistics, inclusive (default the practice's 21:200, clipped to what "
             "every run holds; the report says how)"},
    {.name = "bootstrap-seed",
     .kind = TDM_FLAG_U64,
     .off = offsetof(ab_runs_cli, seed),
     .def = "20261129",
     .metavar = "S",
     .help = "seed of the bootstrap interval"},
    {.name = "out",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(ab_runs_cli, out),
     .def = "ab-report",
     .metavar = "DIR",
     .help = "report directory"},
};

static const tdm_flags P;

/* A flag not close to one of ours: most likely a training flag, which belongs to ab without runs. */
static int unknown_flag(const char *name, size_t n, tdm_error *err) {
    if (tdm_flags_suggest(&P, name, n)) return 0; /* a typo of ours: the did-you-mean */
    return tdm_errorf(err,
                      "--%.*s is not a flag of ab on finished runs (--baseline-run, --candidate-run, --window, "
                      "--bootstrap-seed, --out); training flags belong to ab without runs",
                      (int)n, name);
}

static const tdm_flags P = {
    .command = "tandem ab",
    .usage = "tandem ab --baseline-run RUN [RUN ...] --candidate-run RUN [RUN ...] [--window A:B] [--out DIR]",
    .about = "The A/B protocol's table and report on runs that already finished, read from what they left. A RUN\n"
             "is the stdout log of the rank that logs (Megatron-LM, MindSpeed, tandem train; .gz too), a Megatron\n"
             "golden_values_*.json (with the model_config.yaml beside it), a Megatron test-case directory, or a\n"
             "MindSpeed-MM baseline JSON. LOG,TRACES adds the run's profiler traces (a trace file or a folder of\n"
             "rank traces), and so does a folder holding one *.log and the traces: the report then has the\n"
             "hidden/exposed communication rows. Several runs on a side are repeats of that side.",
    .flags = FLAGS,
    .n_flags = (int)(sizeof FLAGS / sizeof *FLAGS),
    .epilog = "docs/analyze.md says what to collect; docs/ab-runs.md explains the table, the report and what logs\n"
              "cannot establish.",
    .unknown = unknown_flag,
};

int cmd_ab_runs_wanted(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--baseline-run", 14) || !strncmp(argv[i], "--candidate-run", 15)) return 1;
    return 0;
}

int cmd_ab_runs(int argc, char **argv) {
    ab_runs_cli c;
    memset(&c, 0, sizeof c);
    tdm_flags_defaults(&P, &c);
    int done = tdm_cli_parse(&P, &c, argc, argv, NULL, NULL);
    if (done >= 0) return done;
    tdm_ab_runs_options o;
    tdm_ab_runs_options_default(&o);
    char msg[1200] = "";
    tdm_error e;
    if (c.window) {
        if (tdm_ab_parse_window(c.window, &o.window_lo, &o.window_hi, &e) != 0) snprintf(msg, sizeof msg, "%s", e.msg);
        o.window_given = 1;
    }
    if (strlen(c.out) >= sizeof o.out - 64) snprintf(msg, sizeof msg, "--out: expected a shorter directory path");
    else snprintf(o.out, sizeof o.out, "%s", c.out);
    o.bootstrap_seed = c.seed;
    for (int s = 0; s < 2; s++) o.n_runs[s] = c.n_runs[s];
    if (!msg[0] && (o.n_runs[0] == 0 || o.n_runs[1] == 0))
        snprintf(msg, sizeof msg,
                 "--%s-run: expected one or more runs (a log, a golden_values_*.json, a test-case "
                 "directory or a MindSpeed baseline JSON)",
                 o.n_runs[0] == 0 ? "baseline" : "candidate");
    if (msg[0]) {
        fprintf(stderr, "tandem ab: %s\n", msg);
        return 2;
    }
    const char **runs[2] = {c.runs[0], c.runs[1]};
    o.runs[0] = runs[0];
    o.runs[1] = runs[1];
    tdm_strbuf cl, table;
    tdm_sb_init(&cl);
    tdm_sb_init(&table);
    tdm_sb_puts(&cl, "tandem ab");
    for (int i = 1; i < argc; i++) { /* single quotes: a shell reads them back as they were */
        tdm_sb_puts(&cl, " '");
        for (const char *p = argv[i]; *p; p++)
            if (*p == '\'') tdm_sb_puts(&cl, "'\\''");
            else tdm_sb_putc(&cl, *p);
        tdm_sb_putc(&cl, '\'');
    }
    o.command_line = cl.data;
    tdm_ab_runs_result r;
    tdm_error err = {{0}};
    int rc = tdm_ab_runs(&o, &r, &table, &err);
    if (rc != 0) fprintf(stderr, "tandem ab: %s\n", err.msg);
    else fputs(table.data, stdout);
    tdm_ab_runs_result_free(&r);
    tdm_sb_free(&cl);
    tdm_sb_free(&table);
    return rc ? 1 : 0;
}
