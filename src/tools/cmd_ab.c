/* cmd_ab.c - `tandem ab`: the A/B protocol in one command (train/ab.h).
 *
 *   mpirun -np N tandem ab --baseline "FLAGS" --candidate "FLAGS" [common train flags]
 *                          --steps 200 --window 21:200 --repeats R --out DIR
 *
 * Flags of its own are listed in usage(); every other flag is a `tandem train` flag
 * shared by both sides. Prints the result table on rank 0; the report directory holds
 * the rest. Errors: one sentence; all ranks exit non-zero (MPI_Abort when a run failed
 * on some ranks only, since the others may be blocked in a collective).
 */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/strbuf.h"
#include "tools/commands.h"
#include "tools/mpi_setup.h"
#include "ab/ab.h"
#include "train/trainer.h"
#include "ab/demo.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: mpirun -np N tandem ab --baseline \"FLAGS\" --candidate \"FLAGS\" [train flags] [ab flags]\n"
            "  Runs the A/B protocol: the two sides (common train flags + each side's FLAGS) diffed, interleaved\n"
            "  timing runs from the same weights and data order, a fingerprint audit run and a short profiled run\n"
            "  per side; prints the result table and writes a report directory.\n"
            "  --baseline \"FLAGS\"      flags only the baseline gets (may be \"\")\n"
            "  --candidate \"FLAGS\"     flags only the candidate gets, e.g. \"--overlap-grad-reduce\"\n"
            "  --steps N               optimizer steps per timing run (default 200)\n"
            "  --window A:B            steps used for statistics, inclusive (default 21:N for --steps N of\n"
            "                          200 or more, else N/10+1:N, rounded down: the first 10%% are warm-up)\n"
            "  --repeats R             timing runs per side, interleaved A B A B (default 1)\n"
            "  --audit-steps N         steps of the fingerprint audit runs (default --steps; 0 skips the audit)\n"
            "  --profile-steps N       steps profiled per side, from the window's start (default 3; 0: none)\n"
            "  --profile-level L       profiler level 1 or 2 (default 1; 0 records no communication)\n"
            "  --bootstrap-seed S      seed of the bootstrap interval (default 20261129)\n"
            "  --out DIR               report directory (default ab-report)\n"
            "  every other flag is a `tandem train` flag (see tandem train --help), given to both sides,\n"
            "  except those the protocol sets itself, which are refused, saying what sets them:\n"
            "   ");
    size_t col = 3; /* the list is tdm_ab_protocol_flags, wrapped under 100 columns */
    for (int k = 0; tdm_ab_protocol_flags[k][0]; k++) {
        const size_t n = strlen(tdm_ab_protocol_flags[k][0]) + 1;
        if (col + n > 100) fprintf(f, "\n   "), col = 3;
        fprintf(f, " %s", tdm_ab_protocol_flags[k][0]);
        col += n;
    }
    fprintf(f,
            "\n"
            "  With no arguments at all it runs the built-in demo: a short protocol on the tiny configuration\n"
            "  (configs/tiny) and the built-in synthetic data, prepared in ./tandem-demo (or $TANDEM_DEMO_DIR);\n"
            "  scripts/demo.sh does exactly that on 2 ranks.\n"
            "  docs/ab-protocol.md explains the table and the report.\n"
            "  On runs that already finished (logs, golden values): tandem ab --baseline-run A --candidate-run B\n"
            "  (tandem ab --baseline-run --help; docs/ab-runs.md).\n");
}

static int parse_i64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out, char *msg, size_t cap) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) {
        snprintf(msg, cap, "%s expects an integer in [%lld, %lld], got '%s'", flag, (long long)lo, (long long)hi, s);
        return -1;
    }
    *out = v;
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

int cmd_ab(int argc, char **argv) {
    if (cmd_ab_runs_wanted(argc, argv)) return cmd_ab_runs(argc, argv); /* finished runs: no MPI, no training */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    int rank, world;
    tdm_tool_mpi_init(&argc, &argv, &rank, &world);

    if (argc == 1) {
        /* The built-in demo: rank 0 prepares the data and tokenizer, every rank then
         * runs the short protocol with the demo's flags. */
        const char *dir = getenv("TANDEM_DEMO_DIR") ? getenv("TANDEM_DEMO_DIR") : "tandem-demo";
        const char *model = getenv("TANDEM_DEMO_MODEL") ? getenv("TANDEM_DEMO_MODEL") : "configs/tiny";
        tdm_error e = {{0}};
        int failed = 0;
        if (rank == 0) {
            printf("tandem ab: no arguments, running the built-in demo (data and tokenizer in %s/)\n", dir);
            fflush(stdout);
            failed = tdm_demo_prepare(dir, &e) != 0;
        }
        MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (failed) {
            if (rank == 0) fprintf(stderr, "tandem ab: preparing the demo: %s\n", e.msg);
            MPI_Finalize();
            return 1;
        }
        argc = tdm_demo_ab_args(dir, model, &argv);
    }

    tdm_ab_options o;
    tdm_ab_options_default(&o);
    char **common = calloc((size_t)argc + 1, sizeof *common);
    int n_common = 0, have_window = 0;
    char msg[1200] = "";
    for (int i = 1; i < argc && !msg[0]; i++) {
        char *a = argv[i], *val = NULL;
        char name[64];
        /* --flag=value or --flag value, for the ab flags */
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        snprintf(name, sizeof name, "%.*s", (int)(nl < 63 ? nl : 63), a);
        static const char *const own[] = {"--baseline", "--candidate", "--steps", "--window", "--repeats", "--out",
                                          "--audit-steps", "--profile-steps", "--profile-level", "--bootstrap-seed"};
        /* by the flag it sets: "--train_iters" and Megatron's "--mm-tool" (--profile-config) too */
        const char *flag = strncmp(name, "--", 2) ? NULL : tdm_train_args_flag(name + 2, strlen(name + 2));
        for (size_t k = 0; flag && tdm_ab_protocol_flags[k][0] && !msg[0]; k++)
            if (!strcmp(flag, tdm_ab_protocol_flags[k][0] + 2)) {
                if (!strcmp(name + 2, flag))
                    snprintf(msg, sizeof msg, "%s is not used by ab: %s", name, tdm_ab_protocol_flags[k][1]);
                else
                    snprintf(msg, sizeof msg, "%s sets --%s, which is not used by ab: %s", name, flag,
                             tdm_ab_protocol_flags[k][1]);
            }
        if (msg[0]) break;
        int is_own = 0;
        for (size_t k = 0; k < sizeof own / sizeof *own; k++)
            if (!strcmp(name, own[k])) is_own = 1;
        if (!is_own) {
            common[n_common++] = a;
            continue;
        }
        if (eq) val = (char *)eq + 1;
        else if (i + 1 < argc) val = argv[++i];
        else {
            snprintf(msg, sizeof msg, "%s expects a value", name);
            break;
        }
        int64_t v;
        if (!strcmp(name, "--baseline")) o.baseline_flags = val;
        else if (!strcmp(name, "--candidate")) o.candidate_flags = val;
        else if (!strcmp(name, "--out")) {
            if (!*val || strlen(val) >= sizeof o.out - 64) snprintf(msg, sizeof msg, "--out expects a directory path");
            else snprintf(o.out, sizeof o.out, "%s", val);
        } else if (!strcmp(name, "--window")) {
            tdm_error e;
            if (tdm_ab_parse_window(val, &o.window_lo, &o.window_hi, &e) != 0) snprintf(msg, sizeof msg, "%s", e.msg);
            have_window = 1;
        } else if (!strcmp(name, "--steps")) {
            if (parse_i64(name, val, 1, 100000000, &o.steps, msg, sizeof msg) == 0 && !have_window) {
                /* the practice's window: skip the first 10% (none below 10 steps, 20 from 200 on), keep the rest */
                o.window_lo = o.steps >= 200 ? 21 : o.steps / 10 + 1;
                o.window_hi = o.steps;
            }
        } else if (!strcmp(name, "--repeats")) {
            if (parse_i64(name, val, 1, 1000, &v, msg, sizeof msg) == 0) o.repeats = (int)v;
        } else if (!strcmp(name, "--audit-steps")) {
            parse_i64(name, val, 0, 100000000, &o.audit_steps, msg, sizeof msg);
        } else if (!strcmp(name, "--profile-steps")) {
            if (parse_i64(name, val, 0, 1000, &v, msg, sizeof msg) == 0) o.profile_steps = (int)v;
        } else if (!strcmp(name, "--profile-level")) {
            if (parse_i64(name, val, 0, 2, &v, msg, sizeof msg) == 0) o.profile_level = (int)v;
            if (!msg[0] && v == 0) /* level 0 records phases only: no collective to analyse */
                snprintf(msg, sizeof msg, "--profile-level 0: the communication analysis needs level 1 or 2");
        } else if (!strcmp(name, "--bootstrap-seed")) {
            if (parse_i64(name, val, 0, INT64_MAX, &v, msg, sizeof msg) == 0) o.bootstrap_seed = (uint64_t)v;
        }
    }
    /* one command line refuses its flags on every rank alike; an MPMD launch may refuse some
     * ranks' only: all agree before anything collective, the lowest refused rank says why */
    int n_bad;
    const int first_bad = tdm_first_failed_rank(!msg[0], MPI_COMM_WORLD, &n_bad);
    if (first_bad < world) {
        tdm_tool_report_refusal("ab", rank, first_bad, n_bad == world, msg);
        free(common);
        MPI_Finalize();
        return 2;
    }
    o.common_argc = n_common;
    o.common_argv = common;
    tdm_strbuf cl, table;
    tdm_sb_init(&cl);
    tdm_sb_init(&table);
    command_line(&cl, world, argc, argv);
    o.command_line = cl.data;

    tdm_ab_result r;
    tdm_error err = {{0}};
    int rc = tdm_ab_run(&o, MPI_COMM_WORLD, &r, &table, &err);
    if (rc != 0) {
        if (r.setup_failed) {
            tdm_tool_report_refusal("ab", rank, r.setup_failed_rank, r.setup_failed_everywhere, err.msg);
            tdm_ab_result_free(&r);
            MPI_Finalize();
            return 2;
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
    MPI_Finalize();
    return 0;
}
