/* golden.h - runs written as JSON (run.h):
 *   - Megatron-LM functional-test golden values, golden_values_*.json:
 *       {"lm loss": {"start_step": 1, "end_step": 50, "step_interval": 5, "values": {"1": 10.79, ...}}, ...}
 *     "lm loss" and any other "... loss" metric, "iteration-time" (seconds, one step each), "num-zeros"
 *     (the string "nan" for steps it did not count). Memory metrics are not kept. The model_config.yaml
 *     of the same test case, when beside the file, gives the arguments (MODEL_ARGS), the environment
 *     (ENV_VARS), the global batch size and the iterations (model_config.c).
 *   - MindSpeed-MM CI baselines: {"loss": [...], "time": [ms, ...], "warm_up": N, "memo info": [...]},
 *     steps 1, 2, ...; warm_up becomes run->warm_up.
 * A value's printed precision is the shortest decimal that gives it back: golden values are
 * compared at the most decimals any value of the metric has, baselines at the most significant
 * digits. */
#ifndef TDM_RUNS_GOLDEN_H
#define TDM_RUNS_GOLDEN_H

#include <stddef.h>

#include "core/error.h"
#include "runs/run.h"

/* Reads path (golden values or a baseline, told apart by their keys); run initialised here.
 * Golden values read the model_config.yaml beside them, if there is one. */
int tdm_run_json_read_file(const char *path, tdm_run_log *run, tdm_error *err);
/* The same on a buffer named `name`, without looking for a model_config.yaml. */
int tdm_run_json_read_mem(const char *text, size_t len, const char *name, tdm_run_log *run, tdm_error *err);

/* model_config.c: a Megatron test case's model_config.yaml (the two-level mapping it uses:
 * MODEL_ARGS and ENV_VARS, "  key: value  # comment") into run->args and run->env; the
 * global batch and train iterations of the iterations already read are filled from it. */
int tdm_run_model_config_read_mem(const char *text, size_t len, const char *name, tdm_run_log *run, tdm_error *err);

#endif
