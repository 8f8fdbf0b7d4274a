/* cli.h - what every subcommand does with its command line, the same way: --help (generated from the
 * flag table, core/flags.h) on stdout with exit 0, --version, and a refused flag as one sentence
 * "tandem CMD: ..." on stderr with exit 2.
 *
 *   int rc = tdm_cli_parse(&P, &opts, argc, argv, NULL, NULL);
 *   if (rc >= 0) return rc;    // --help, --version or a refused flag: nothing more to do
 */
#ifndef TDM_TOOLS_CLI_H
#define TDM_TOOLS_CLI_H

#include <stdio.h>

#include "core/flags.h"

/* Parses argv[1..argc) (argv[0] is the command's name) into target; rest and n_rest as in
 * tdm_flags_parse. Returns -1 when the command goes on, else the exit status after printing: 0 for
 * --help and --version, 2 for a refused flag. */
int tdm_cli_parse(const tdm_flags *p, void *target, int argc, char **argv, char **rest, int *n_rest);

/* --help or --version among argv[1..argc): prints it and returns 0; else -1 (nothing printed). For the
 * commands that answer them before MPI starts, and parse later. */
int tdm_cli_early(const tdm_flags *p, int argc, char **argv);

/* The --help text of p. */
void tdm_cli_help(const tdm_flags *p, FILE *f);

/* `git describe` of the tree the binary was built from ("unknown" outside git). */
const char *tdm_version(void);

/* "tandem VERSION" and "built for TARGET" (the compiler's target) on stdout; returns 0. */
int tdm_cli_print_version(void);

/* The flags generate and evaluate share (model, weights, tokenizer, image bounds, KV cache): offsets
 * into tdm_generator_options (train/generate.h), the first member of either command's options. */
#define TDM_CLI_N_GENERATOR_FLAGS 8
extern const tdm_flag tdm_cli_generator_flags[TDM_CLI_N_GENERATOR_FLAGS];

#endif
