/* commands.h - the subcommands of build/tandem. Each lives in its own cmd_*.c file,
 * parses its own flags, and returns the process exit status. This front end is the
 * only place that prints errors and decides to exit. */
#ifndef TDM_COMMANDS_H
#define TDM_COMMANDS_H

typedef int (*tdm_cmd_fn)(int argc, char **argv);

/* Declared weak so each command's file can be added on its own; main() lists only the
 * commands that were linked in. */
#define TDM_COMMAND(fn) int fn(int argc, char **argv) __attribute__((weak))
TDM_COMMAND(cmd_train);
TDM_COMMAND(cmd_ab);
TDM_COMMAND(cmd_inspect);
TDM_COMMAND(cmd_dump_grads);
TDM_COMMAND(cmd_tokenize);
TDM_COMMAND(cmd_train_tokenizer);
TDM_COMMAND(cmd_gen_data);
TDM_COMMAND(cmd_generate);
TDM_COMMAND(cmd_evaluate);
TDM_COMMAND(cmd_export_batches);
TDM_COMMAND(cmd_trace_summary);
TDM_COMMAND(cmd_analyze);
TDM_COMMAND(cmd_plan);
TDM_COMMAND(cmd_doctor);

/* `tandem ab --baseline-run ... --candidate-run ...` (cmd_ab_runs.c): cmd_ab hands over when
 * cmd_ab_runs_wanted sees either flag. */
int cmd_ab_runs_wanted(int argc, char **argv);
int cmd_ab_runs(int argc, char **argv);

#endif
