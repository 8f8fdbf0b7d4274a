/* main.c - build/tandem: one binary, several subcommands. */
#include <stdio.h>
#include <string.h>

#include "kernels/kernels.h"
#include "tools/cli.h"
#include "tools/commands.h"

typedef struct command {
    const char *name;
    tdm_cmd_fn fn;
    const char *help;
} command;

static int usage(FILE *f, const command *cmds, int n) {
    fprintf(f, "usage: tandem <command> [flags]    (tandem <command> --help for its flags)\n"
               "       tandem --version\n\ncommands:\n");
    for (int i = 0; i < n; i++)
        if (cmds[i].fn) fprintf(f, "  %-16s %s\n", cmds[i].name, cmds[i].help);
    return f == stderr ? 2 : 0;
}

/* `tandem version`: as `tandem --version`. */
static int cmd_version(int argc, char **argv) {
    static const tdm_flags P = {.command = "tandem version",
                                .usage = "tandem version   (or tandem --version)",
                                .about = "Prints the version (git describe of the tree it was built from) and the "
                                         "compiler's target."};
    int rc = tdm_cli_parse(&P, NULL, argc, argv, NULL, NULL);
    return rc >= 0 ? rc : tdm_cli_print_version();
}

int main(int argc, char **argv) {
    const command cmds[] = {
        {"train", cmd_train, "train a Qwen3-VL model (Megatron flags; run under mpirun -np N)"},
        {"ab", cmd_ab, "run the A/B protocol: baseline vs candidate flags, table and report"},
        {"inspect", cmd_inspect, "parameter counts and memory plan of a model config"},
        {"dump-grads", cmd_dump_grads, "one forward/backward over a data file; write every gradient"},
        {"tokenize", cmd_tokenize, "encode (or --decode) lines on stdin with a tokenizer.json"},
        {"train-tokenizer", cmd_train_tokenizer, "train a byte-level BPE tokenizer.json on a dataset"},
        {"gen-data", cmd_gen_data, "write the built-in synthetic image-text dataset"},
        {"generate", cmd_generate, "greedy decoding from an image and a prompt"},
        {"evaluate", cmd_evaluate, "answer accuracy on a held-out split"},
        {"export-batches", cmd_export_batches, "write the pre-tokenized batches a peer can replay"},
        {"trace-summary", cmd_trace_summary, "summarise a profiler trace directory"},
        {"version", cmd_version, "print the version (also tandem --version)"},
        {"analyze", cmd_analyze, "overlap analysis of any run's profiler traces (PyTorch, Ascend, tandem)"},
        {"plan", cmd_plan, "predict the step time of overlap flags, bucket sizes, dp sizes, link rates from a trace"},
        {"doctor", cmd_doctor,
         "measure what data parallelism costs here (run under mpirun -np 2) and say what tandem uses"},
    };
    tdm_blas_select_core(argv); /* may run tandem again with OPENBLAS_CORETYPE set (blas_core.c) */
    int n = (int)(sizeof cmds / sizeof *cmds);
    if (argc < 2) return usage(stderr, cmds, n);
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) return usage(stdout, cmds, n);
    if (!strcmp(argv[1], "--version")) return tdm_cli_print_version();
    const char *names[sizeof cmds / sizeof *cmds];
    int n_names = 0;
    for (int i = 0; i < n; i++) {
        if (!cmds[i].fn) continue;
        if (!strcmp(argv[1], cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
        names[n_names++] = cmds[i].name;
    }
    const char *close = tdm_closest_word(argv[1], names, n_names);
    if (close)
        fprintf(stderr, "tandem: unknown command '%s'; did you mean '%s'? (tandem --help lists the commands)\n",
                argv[1], close);
    else fprintf(stderr, "tandem: unknown command '%s' (tandem --help lists the commands)\n", argv[1]);
    return 2;
}
