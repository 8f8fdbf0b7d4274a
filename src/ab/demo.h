/* demo.h - the built-in demonstration: `tandem ab` with no arguments.
 *
 * Prepares the built-in synthetic data and a tokenizer trained on it in a directory
 * (default "tandem-demo"; reused when already there), and supplies the flags of the
 * short A/B protocol on the tiny configuration: vision encoder and projector frozen,
 * language model trained, distributed optimizer, several buckets, baseline vs
 * --overlap-grad-reduce. scripts/demo.sh is nothing more than this command on 2 ranks.
 */
#ifndef TDM_TRAIN_DEMO_H
#define TDM_TRAIN_DEMO_H

#include <stddef.h>

#include "core/error.h"

/* Writes DIR/data/{train,test}.json (+ images) and DIR/tokenizer.json if missing.
 * Called on one rank only; the others wait for it. */
int tdm_demo_prepare(const char *dir, tdm_error *err);

/* The tiny configuration's folder: configs/tiny under the working directory, else beside the binary
 * (BIN/../configs/tiny, BIN/../share/tandem/configs/tiny); -1 with a sentence naming where it looked. */
int tdm_demo_find_model(char *out, size_t cap, tdm_error *err);

/* The `tandem ab` arguments of the demo (argv[0] = "ab"), pointing into dir and
 * model_dir (configs/tiny). Strings live in a static buffer: one call per process. */
int tdm_demo_ab_args(const char *dir, const char *model_dir, char ***argv_out);

#endif
