/* megatron_log.h - the stdout of the rank that logs a Megatron-LM, MindSpeed or tandem training
 * job, read line by line into a tdm_run_log (run.h), in bounded memory besides the iterations.
 *
 *   tdm_megatron_parser *p = tdm_megatron_parser_new(&run);   // run: tdm_run_log_init'ed, path set
 *   while ((n = read(fd, buf, sizeof buf)) > 0) tdm_megatron_parser_feed(p, buf, n);
 *   int rc = tdm_megatron_parser_finish(p, &err);              // frees p
 *
 * Read from each line (found anywhere in it, so timestamps and "[default0]:" prefixes do not matter):
 *   - " iteration N/ M | key: value | ... |": consumed samples, elapsed time per iteration (ms),
 *     throughput per GPU, learning rate, global batch size, lm loss and any other "... loss",
 *     loss scale, grad norm, num zeros, params norm, number of skipped / nan iterations;
 *   - the arguments block ("------ arguments ------" ... "---- end of arguments ----");
 *   - the "DistributedDataParallelConfig(...)" line;
 *   - "(min, max) time across ranks (ms):" and "max time across ranks (ms):" blocks;
 *   - " validation loss at iteration N [on validation set|on test set] | lm loss value: ... |";
 *   - a Python traceback after the last iteration line: the job failed (run->crashed).
 * Tolerated: other output between and inside lines (two ranks' lines glued together: the last
 * iteration pattern of a line is used), ANSI colour codes, carriage returns (each piece between
 * them is a line), CRLF, lines longer than TDM_RUN_LINE_MAX (cut there), several runs appended
 * to one file (an iteration that goes back, or a new arguments block after iterations, starts a
 * pass: the later pass's line wins for each iteration, and a warning says so), and a last line
 * cut short (an iteration line without its closing "|" fields is not used, and a warning says so).
 */
#ifndef TDM_RUNS_MEGATRON_LOG_H
#define TDM_RUNS_MEGATRON_LOG_H

#include <stddef.h>

#include "core/error.h"
#include "runs/run.h"

typedef struct tdm_megatron_parser tdm_megatron_parser;

tdm_megatron_parser *tdm_megatron_parser_new(tdm_run_log *run);
/* Any split of the input into pieces gives the same result. */
void tdm_megatron_parser_feed(tdm_megatron_parser *p, const char *data, size_t n);
/* Ends the input (a last line without a newline is read now), writes run->source and the
 * warnings, and frees p. Fails, with one sentence naming run->path, when no iteration line
 * was found or an earlier feed hit a bound. */
int tdm_megatron_parser_finish(tdm_megatron_parser *p, tdm_error *err);

/* The whole of a file, or of a buffer, through the parser. run is initialised here. */
int tdm_megatron_log_read_file(const char *path, tdm_run_log *run, tdm_error *err);
int tdm_megatron_log_read_mem(const char *data, size_t n, const char *name, tdm_run_log *run, tdm_error *err);

#endif
