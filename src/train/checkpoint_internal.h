/* checkpoint_internal.h - what the checkpoint's files share (checkpoint.h is the public header):
 * checkpoint_save.c writes a checkpoint, checkpoint_load.c reads its tensor files through the
 * checksummed stream, checkpoint_state.c writes and parses trainer_state.json. */
#ifndef TDM_TRAIN_CHECKPOINT_INTERNAL_H
#define TDM_TRAIN_CHECKPOINT_INTERNAL_H

#include <stdint.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "train/checkpoint.h"

#define PATH_CAP 4096
/* the files whose size and checksum trainer_state.json records */
static const char *const CKPT_FILES[] = {"model.safetensors", "optimizer.safetensors", "config.json",
                                         "preprocessor_config.json"};
#define N_CKPT_FILES 4

/* optimizer.safetensors holds, per trainable parameter, its exp_avg, exp_avg_sq and (--bf16)
 * fp32_param: entry k is kind k % kinds of parameter param[k / kinds], asked of spec->optim_state. */
static const char *const OPTIM_KIND[3] = {"exp_avg", "exp_avg_sq", "fp32_param"};

/* Per-block checksums of optimizer.safetensors (checkpoints of before 2026-11-30 have none:
 * block == 0, the file is verified whole). */
typedef struct block_sums {
    uint64_t block;
    int64_t n;
    uint64_t *hash;
} block_sums;

/* trainer_state.json's text for state s and the files written: present[i] says whether
 * CKPT_FILES[i] was, hashes[i] and sizes[i] are its XXH3 and bytes; opt_block > 0 adds
 * optimizer.safetensors' per-block checksums. */
void tdm_ckpt__state_json(tdm_strbuf *sb, const tdm_ckpt_state *s, const uint64_t *hashes, const int64_t *sizes,
                          const int *present, uint64_t opt_block, const uint64_t *opt_blocks, int64_t n_opt_blocks);

/* Resolves `load` into ck->dir and reads its trainer_state.json into ck->state and ck->state_hash,
 * with each listed file's checksum and size (and, ob != NULL, optimizer.safetensors' block checksums). */
int tdm_ckpt__read_state(const char *load, tdm_ckpt *ck, uint64_t *hashes, int64_t *sizes, int *present, block_sums *ob,
                         tdm_error *err);

#endif
