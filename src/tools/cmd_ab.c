/* cmd_ab.c - `tandem ab`: the A/B protocol in one command (train/ab.h).
 *
 *   mpirun -np N tandem ab --baseline "FLAGS" --candidate "FLAGS" [common train flags]
 *                          --steps 200 --window 21:200 --repeats R --out DIR
 *
 * Flags of its own are in FLAGS (its --help); every other flag is a `tandem train` flag
 * shared by both sides, handed on by the parser (tdm_flags.pass). Prints the result table on rank 0; the report directory holds
 * the rest. Errors: one sentence; all ranks exit non-zero (MPI_Abort when a run failed
 * on some ranks only, since the others may be blocked in a collective).
 */
#include <stddef.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/strbuf.h"
#include "distributed/agree.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/mpi_setup.h"
#include "ab/ab.h"
#include "ab/demo.h"
#include "train/args.h"
#include "train/trainer.h"

typedef struct ab_cli {
    tdm_ab_options o;
    int have_window; /* --window given: --steps leaves it */
} ab_cli;

static int set_window(const tdm_flag *f, void *target, const char *val, const char *what, tdm_error *err) {
    (void)f, (void)what;
    ab_cli *c = target;
    c->have_window = 1;
    c->o.window_given = 1;
    return tdm_ab_parse_window(val, &c->o.window_lo, &c->o.window_hi, err);
}

#define OPT(field) offsetof(ab_cli, o) + offsetof(tdm_ab_options, field)
static const tdm_flag FLAGS[] = {
    {.name = "baseline",
     .kind = TDM_FLAG_STRING,
     .off = OPT(baseline_flags),
     .opts = TDM_FLAG_DASHES,
     .metavar = "\"FLAGS\"",
     .help = "flags only the baseline gets (may be \"\")"},
    {.name = "candidate",
     .kind = TDM_FLAG_STRING,
     .off = OPT(candidate_flags),
     .opts = TDM_FLAG_DASHES,
     .metavar = "\"FLAGS\"",
     .help = "flags only the candidate gets, e.g. \"--overlap-grad-reduce\""},
    {.name = "aa",
     .kind = TDM_FLAG_BOOL,
     .off = OPT(aa),
     .help = "compare identical sides on purpose (an A/A run: measures the machine's noise); refused without it"},
    {.name = "steps",
     .kind = TDM_FLAG_I64,
     .off = OPT(steps),
     .lo = 1,
     .hi = 1e8,
     .metavar = "N",
     .help = "optimizer steps per timing run (default 200)"},
    {.name = "window",
     .kind = TDM_FLAG_CUSTOM,
     .set = set_window,
     .metavar = "A:B",
     .help = "steps used for statistics, inclusive (default 21:N for --steps N of 200 or more, else N/10+1:N, "
             "rounded down: the first 10% are warm-up)"},
    {.name = "repeats",
     .kind = TDM_FLAG_INT,
     .off = OPT(repeats),
     .lo = 1,
     .hi = 1000,
     .metavar = "R",
     .help = "timing runs per side, interleaved A B A B (default 1)"},
    {.name = "audit-steps",
     .kind = TDM_FLAG_I64,
     .off = OPT(audit_steps),
     .lo = 0,
     .hi = 1e8,
     .metavar = "N",
     .help = "steps of the fingerprint audit runs (default --steps; 0 skips the audit)"},
    {.name = "profile-steps",
     .kind = TDM_FLAG_INT,
     .off = OPT(profile_steps),
     .lo = 0,
     .hi = 1000,
     .metavar = "N",
     .help = "steps profiled per side, from the window's start (default 15; 0: none)"},
    {.name = "profile-level",
     .kind = TDM_FLAG_INT,
     .off = OPT(profile_level),
     .lo = 0,
     .hi = 2,
     .metavar = "L",
     .help = "profiler level 1 or 2 (default 1; 0 records no communication)"},
    {.name = "bootstrap-seed",
     .kind = TDM_FLAG_U64,
     .off = OPT(bootstrap_seed),
     .metavar = "S",
     .help = "seed of the bootstrap interval (default 20261129)"},
    {.name = "out",
     .kind = TDM_FLAG_PATH,
     .off = OPT(out),
     .cap = sizeof(((tdm_ab_options *)0)->out) - 64,
     .metavar = "DIR",
     .help = "report directory (default ab-report)"},
};
#undef OPT

/* The parser: ab's flags; every other `tandem train` flag is handed on to both sides. The epilog lists the train
 * flags the protocol sets itself (tdm_ab_protocol_flags), wrapped under 100 columns. */
static void parser(tdm_flags *p, tdm_strbuf *epilog) {
    tdm_sb_puts(epilog, "Every other flag is a `tandem train` flag (see tandem train --help), given to both sides,\n"
                        "except those the protocol sets itself, which are refused, saying what sets them:\n   ");
    size_t col = 3;
    for (int k = 0; tdm_ab_protocol_flags[k][0]; k++) {
        const size_t n = strlen(tdm_ab_protocol_flags[k][0]) + 1;
        if (col + n > 100) tdm_sb_puts(epilog, "\n   "), col = 3;
        tdm_sb_printf(epilog, " %s", tdm_ab_protocol_flags[k][0]);
        col += n;
    }
    tdm_sb_puts(epilog,
                "\n\n"
                "With no arguments at all it runs the built-in demo: a short protocol on the tiny configuration\n"
                "(configs/tiny) and the built-in synthetic data, prepared in ./tandem-demo (or $TANDEM_DEMO_DIR);\n"
                "scripts/demo.sh does exactly that on 2 ranks.\n"
                "docs/ab-protocol.md explains the table and the report.\n"
                "On runs that already finished (logs, golden values): tandem ab --baseline-run A --candidate-run B\n"
                "(tandem ab --baseline-run --help; docs/ab-runs.md).\n");
    *p = (tdm_flags){
        .command = "tandem ab",
        .usage = "mpirun -np N tandem ab --baseline \"FLAGS\" --candidate \"FLAGS\" [train flags] [ab flags]",
        .about = "Runs the A/B protocol: the two sides (common train flags + each side's FLAGS) diffed, interleaved\n"
                 "timing runs from the same weights and data order, a fingerprint audit run and a short profiled run\n"
                 "per side; prints the result table and writes a report directory.",
        .flags = FLAGS,
        .n_flags = (int)(sizeof FLAGS / sizeof *FLAGS),
        .pass = tdm_train_args_parser(),
        .epilog = epilog->data,
    };
}

/* The flags of both sides (train's, handed on): one the protocol sets itself is refused, by the flag it sets
 * ("--train_iters" and Megatron's "--mm-tool", for --profile-config, too). */
static int refuse_protocol_flags(char **common, int n_common, char *msg, size_t cap) {
    for (int i = 0; i < n_common; i++) {
        if (strncmp(common[i], "--", 2) != 0) continue; /* a value: values never start with -- here */
        const char *name = common[i] + 2, *eq = strchr(name, '=');
        const size_t n = eq ? (size_t)(eq - name) : strlen(name);
        const char *flag = tdm_train_args_flag(name, n);
        for (size_t k = 0; flag && tdm_ab_protocol_flags[k][0]; k++) {
            if (strcmp(flag, tdm_ab_protocol_flags[k][0] + 2) != 0) continue;
            if (strlen(flag) == n && !strncmp(name, flag, n))
                snprintf(msg, cap, "--%s is not used by ab: %s", flag, tdm_ab_protocol_flags[k][1]);
            else
                snprintf(msg, cap, "--%.*s sets --%s, which is not used by ab: %s", (int)n, name, flag,
                         tdm_ab_protocol_flags[k][1]);
            return -1;
        }
    }
    return 0;
}

/* The command as typed (quoted where needed), for the report's "reproduce" section. */
static void command_line(tdm_strbuf *sb, int world, int argc, char **argv) {
    static const char plain[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./:=,+@%";
    tdm_sb_printf(sb, "mpirun -np %d build/tandem ab", world);
    for (int i = 1; i < argc; i++) {
        tdm_sb_putc(sb, ' ');
        const char *a = argv[i];
        if (a[0] && strspn(a, plain) == strlen(a)) {
            tdm_sb_puts(sb, a);
        } else { /* in double quotes a shell still expands $ and `...`, and \ escapes */
            tdm_sb_putc(sb, '"');
            for (const char *p = a; *p; p++) {
                if (*p == '"' || *p == '\\' || *p == '$' || *p == '`') tdm_sb_putc(sb, '\\');
                tdm_sb_putc(sb, *p);
            }
            tdm_sb_putc(sb, '"');
        }
    }
}

/* Longer than most: the command from flags to exit, with the refusal and signal paths every rank must take alike. */
int cmd_ab(int argc, char **argv) {
    if (cmd_ab_runs_wanted(argc, argv)) return cmd_ab_runs(argc, argv); /* finished runs: no MPI, no training */
    tdm_flags P;
    tdm_strbuf epilog;
    tdm_sb_init(&epilog);
    parser(&P, &epilog);
    int early = tdm_cli_early(&P, argc, argv); /* --help, --version: before MPI */
    if (early >= 0) {
        tdm_sb_free(&epilog);
        return early;
    }
    int rank, world;
    tdm_tool_mpi_init(&argc, &argv, &rank, &world);

    if (argc == 1) {
        /* The built-in demo: rank 0 prepares the data and tokenizer, every rank then
         * runs the short protocol with the demo's flags. */
        const char *dir = getenv("TANDEM_DEMO_DIR") ? getenv("TANDEM_DEMO_DIR") : "tandem-demo";
        static char model[1200];
        tdm_error e = {{0}};
        int failed = 0;
        if (getenv("TANDEM_DEMO_MODEL")) snprintf(model, sizeof model, "%s", getenv("TANDEM_DEMO_MODEL"));
        else if (tdm_demo_find_model(model, sizeof model, &e) != 0) failed = 2; /* before any data is made */
        if (rank == 0 && !failed) {
            printf("tandem ab: no arguments, running the built-in demo (data and tokenizer in %s/, model %s)\n", dir,
                   model);
            fflush(stdout);
            failed = tdm_demo_prepare(dir, &e) != 0;
        }
        MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (failed) {
            if (rank == 0) fprintf(stderr, "tandem ab: %s%s\n", failed == 2 ? "" : "preparing the demo: ", e.msg);
            tdm_sb_free(&epilog);
            MPI_Finalize();
            return 1;
        }
        argc = tdm_demo_ab_args(dir, model, &argv);
    }

    ab_cli c = {0};
    tdm_ab_options_default(&c.o);
    tdm_ab_options *o = &c.o;
    char **common = calloc((size_t)argc + 1, sizeof *common);
    int n_common = 0;
    char msg[1200] = "";
    tdm_error perr = {{0}};
    if (tdm_flags_parse(&P, &c, argc - 1, argv + 1, common, &n_common, &perr) < 0)
        snprintf(msg, sizeof msg, "%s", perr.msg);
    else if (refuse_protocol_flags(common, n_common, msg, sizeof msg) == 0 && o->profile_level == 0)
        /* level 0 records phases only: no collective to analyse */
        snprintf(msg, sizeof msg, "--profile-level 0: the communication analysis needs level 1 or 2");
    if (!c.have_window) { /* the practice's window: skip the first 10%, and always step 1; 20 from 200 on */
        o->window_lo = o->steps >= 200 ? 21 : o->steps / 10 + 1 > 2 ? o->steps / 10 + 1 : 2;
        o->window_hi = o->steps;
    }
    /* one command line refuses its flags on every rank alike; an MPMD launch may refuse some
     * ranks' only: all agree before anything collective, the lowest refused rank says why */
    int n_bad;
    const int first_bad = tdm_first_failed_rank(!msg[0], MPI_COMM_WORLD, &n_bad);
    if (first_bad < world) {
        tdm_tool_report_refusal("ab", rank, first_bad, n_bad == world, msg);
        free(common);
        tdm_sb_free(&epilog);
        MPI_Finalize();
        return 2;
    }
    o->common_argc = n_common;
    o->common_argv = common;
    tdm_strbuf cl, table;
    tdm_sb_init(&cl);
    tdm_sb_init(&table);
    command_line(&cl, world, argc, argv);
    o->command_line = cl.data;

    tdm_ab_result r;
    tdm_error err = {{0}};
    /* Ctrl-C / SIGTERM: the run in progress stops at the end of its step and what finished is reported */
    tdm_train_install_signal_handlers();
    int rc = tdm_ab_run(o, MPI_COMM_WORLD, &r, &table, &err);
    if (rc > 0) {
        const int sig = r.stop_signal;
        if (rank == 0) {
            fputs(table.data, stdout);
            fflush(stdout);
            fprintf(stderr, "tandem ab: stopped by %s after %d of %d timing runs: partial report in %s/report.md\n",
                    sig == SIGINT    ? "SIGINT"
                    : sig == SIGTERM ? "SIGTERM"
                                     : "a signal",
                    r.n_load, 2 * o->repeats, o->out);
            fflush(stderr);
        }
        const int code = 128 + (sig > 0 ? sig : SIGINT), alone = r.stopped_alone;
        tdm_ab_result_free(&r);
        tdm_sb_free(&cl);
        tdm_sb_free(&table);
        free(common);
        tdm_sb_free(&epilog);
        if (alone && world > 1) MPI_Abort(MPI_COMM_WORLD, code); /* the others may wait in a collective */
        MPI_Finalize();
        return code;
    }
    if (rc != 0) {
        if (r.setup_failed) {
            tdm_tool_report_refusal("ab", rank, r.setup_failed_rank, r.setup_failed_everywhere, err.msg);
            tdm_ab_result_free(&r);
            tdm_sb_free(&cl);
            tdm_sb_free(&table);
            free(common);
            tdm_sb_free(&epilog);
            MPI_Finalize();
            return 2;
        }
        if (r.run_failed_together) { /* every rank is here: one message, a clean exit */
            tdm_tool_report_refusal("ab", rank, r.run_failed_rank, 0, err.msg);
            tdm_ab_result_free(&r);
            tdm_sb_free(&cl);
            tdm_sb_free(&table);
            free(common);
            tdm_sb_free(&epilog);
            MPI_Finalize();
            return 1;
        }
        fprintf(stderr, "tandem ab: rank %d: %s\n", rank, err.msg);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    if (rank == 0) {
        fputs(table.data, stdout);
        fflush(stdout);
    }
    tdm_ab_result_free(&r);
    tdm_sb_free(&cl);
    tdm_sb_free(&table);
    free(common);
    tdm_sb_free(&epilog);
    MPI_Finalize();
    return 0;
}
