/* cmd_ab_runs.c - `tandem ab --baseline-run A [A2 ...] --candidate-run B [B2 ...]`: the A/B
 * protocol's analysis on finished runs (ab/ab_runs.h), without MPI and without training.
 * cmd_ab hands over here when it sees --baseline-run or --candidate-run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ab/ab.h"
#include "ab/ab_runs.h"
#include "core/strbuf.h"
#include "tools/commands.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tandem ab --baseline-run RUN [RUN ...] --candidate-run RUN [RUN ...] [--window A:B] [--out DIR]\n"
            "  The A/B protocol's table and report on runs that already finished, read from what they left:\n"
            "  a RUN is the stdout log of the rank that logs (Megatron-LM, MindSpeed, tandem train), a Megatron\n"
            "  golden_values_*.json (with the model_config.yaml beside it), a Megatron test-case directory, or a\n"
            "  MindSpeed-MM baseline JSON. Several runs on a side are repeats of that side.\n"
            "  --baseline-run RUN ...   the baseline's runs\n"
            "  --candidate-run RUN ...  the candidate's runs\n"
            "  --window A:B             iterations used for the statistics, inclusive (default the practice's\n"
            "                           21:200, clipped to what every run holds; the report says how)\n"
            "  --bootstrap-seed S       seed of the bootstrap interval (default 20261129)\n"
            "  --out DIR                report directory (default ab-report)\n"
            "  docs/ab-runs.md explains the table, the report and what logs cannot establish.\n");
}

int cmd_ab_runs_wanted(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--baseline-run", 14) || !strncmp(argv[i], "--candidate-run", 15)) return 1;
    return 0;
}

/* A flag's name without "=value". */
static int flag_is(const char *arg, const char *name) {
    size_t n = strlen(name);
    return !strncmp(arg, name, n) && (arg[n] == 0 || arg[n] == '=');
}

int cmd_ab_runs(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    tdm_ab_runs_options o;
    tdm_ab_runs_options_default(&o);
    const char **runs[2];
    runs[0] = calloc((size_t)argc + 1, sizeof *runs[0]);
    runs[1] = calloc((size_t)argc + 1, sizeof *runs[1]);
    char msg[1200] = "";
    int side = -1;
    for (int i = 1; i < argc && !msg[0]; i++) {
        const char *a = argv[i], *eq = strchr(a, '='), *val = NULL;
        if (strncmp(a, "--", 2) != 0) {
            if (side < 0) snprintf(msg, sizeof msg, "'%s': expected a flag (runs follow --baseline-run or --candidate-run)", a);
            else runs[side][o.n_runs[side]++] = a;
            continue;
        }
        side = -1;
        if (flag_is(a, "--baseline-run") || flag_is(a, "--candidate-run")) {
            side = a[2] == 'c';
            if (eq) runs[side][o.n_runs[side]++] = eq + 1;
            continue;
        }
        int own = flag_is(a, "--window") || flag_is(a, "--out") || flag_is(a, "--bootstrap-seed");
        if (!own) {
            snprintf(msg, sizeof msg, "%.*s is not a flag of ab on finished runs (--baseline-run, --candidate-run, "
                                      "--window, --bootstrap-seed, --out); training flags belong to ab without runs",
                     (int)(eq ? eq - a : (long)strlen(a)), a);
            break;
        }
        if (eq) val = eq + 1;
        else if (i + 1 < argc) val = argv[++i];
        else {
            snprintf(msg, sizeof msg, "%s expects a value", a);
            break;
        }
        if (flag_is(a, "--window")) {
            tdm_error e;
            if (tdm_ab_parse_window(val, &o.window_lo, &o.window_hi, &e) != 0) snprintf(msg, sizeof msg, "%s", e.msg);
            o.window_given = 1;
        } else if (flag_is(a, "--out")) {
            if (!*val || strlen(val) >= sizeof o.out - 64) snprintf(msg, sizeof msg, "--out expects a directory path");
            else snprintf(o.out, sizeof o.out, "%s", val);
        } else {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(val, &end, 10);
            if (end == val || *end || errno || val[0] == '-')
                snprintf(msg, sizeof msg, "--bootstrap-seed expects a non-negative integer, got '%s'", val);
            o.bootstrap_seed = s;
        }
    }
    if (!msg[0] && (o.n_runs[0] == 0 || o.n_runs[1] == 0))
        snprintf(msg, sizeof msg, "--%s-run: expected one or more runs (a log, a golden_values_*.json, a test-case "
                                  "directory or a MindSpeed baseline JSON)",
                 o.n_runs[0] == 0 ? "baseline" : "candidate");
    if (msg[0]) {
        fprintf(stderr, "tandem ab: %s\n", msg);
        free(runs[0]), free(runs[1]);
        return 2;
    }
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
    free(runs[0]), free(runs[1]);
    return rc ? 1 : 0;
}
