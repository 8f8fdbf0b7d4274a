/* checkpoint.h - Megatron-style checkpoint directories, written atomically.
 *
 *   <save>/latest_checkpointed_iteration.txt   "10\n": the last COMPLETE checkpoint
 *   <save>/iter_0000010/
 *       config.json             copy of the model's config.json
 *       model.safetensors       every parameter, fp32 (BF16 with --bf16), Hugging Face names
 *                               (frozen ones too), loadable by any safetensors reader and by
 *                               `tandem ... --load`
 *       optimizer.safetensors   Adam state in parameter shape: "exp_avg.<name>" and
 *                               "exp_avg_sq.<name>" for every trainable parameter (and, with
 *                               --bf16, the fp32 main parameters "fp32_param.<name>"), gathered
 *                               from the shards, so it loads at any dp with or without the
 *                               distributed optimizer (absent when saved without optimizer)
 *       preprocessor_config.json, tokenizer.json, tokenizer_config.json, generation_config.json
 *                               as a Hugging Face model folder has them (train/hf_export.h);
 *                               loading does not read them
 *       trainer_state.json      iteration, consumed samples, scheduler, seed, Adam step,
 *                               dp and optimizer kind at save time, argument and model
 *                               fingerprints, and an XXH3 checksum and size of each file;
 *                               for optimizer.safetensors also an XXH3 of each block
 *                               (block_bytes, block_xxh3: 16 hex digits per block), so that
 *                               a rank can load and check its shard alone
 *
 * Atomicity: everything is written into <save>/iter_0000010.tmp.<pid>/ (each file
 * fsynced), the directory is fsynced and renamed to iter_0000010, <save> is fsynced,
 * and only then is the tracker replaced atomically (core/fs.h). An existing directory of
 * the same iteration is swapped with the new one in one step (renameat2 RENAME_EXCHANGE;
 * moved aside first only where the file system cannot swap). A crash at any point leaves
 * the previous checkpoint complete and the tracker pointing at it; leftover *.tmp.*
 * directories are ignored by loading and removed by the next save of their iteration.
 *
 * Loading checks the tracker, the files' sizes and checksums and the model's tensor names and
 * shapes. Every byte of a file is read once: the two safetensors files are hashed as their
 * tensors are loaded (a wrong size is refused when they are opened, a wrong checksum when the
 * load reaches the file's end), and what was read is vouched for only once that checksum
 * matched: tdm_ckpt_load_weights returns 0 only then (and wipes the table otherwise), and Adam
 * state read with tdm_ckpt_read_optimizer must not be used before tdm_ckpt_finish_optimizer
 * returned 0. With block checksums, optimizer.safetensors is instead checked block by block:
 * its header's blocks when it is opened, every other block the first time a read touches it,
 * and the blocks no read touched by the finish (or, shared between ranks, by
 * tdm_ckpt_finish_optimizer_part on the rank that was given them). Saving hashes each file
 * (and each block) as it is written, without reading it back.
 */
#ifndef TDM_CHECKPOINT_H
#define TDM_CHECKPOINT_H

#include <stdint.h>

#include "core/error.h"
#include "core/params.h"
#include "model/safetensors.h"

#define TDM_CKPT_TRACKER        "latest_checkpointed_iteration.txt"
#define TDM_CKPT_FORMAT_VERSION 1

/* The trainer's state, trainer_state.json. */
typedef struct tdm_ckpt_state {
    int64_t iteration;
    int64_t consumed_samples;
    int64_t scheduler_num_steps; /* samples the LR scheduler has counted */
    double lr, min_lr;           /* the schedule's peak and floor at save time */
    char lr_decay_style[24];
    double lr_warmup_init;  /* and its start, warm-up and decay span (samples), for */
    double lr_warmup_steps; /* --use-checkpoint-opt_param-scheduler; has_schedule = 0 */
    int64_t lr_decay_steps; /* in checkpoints written before they were saved */
    int has_schedule;
    double start_wd, end_wd; /* the weight-decay schedule (Megatron's state keeps it too); */
    int64_t wd_incr_steps;   /* has_wd_schedule = 0 in checkpoints written before */
    char wd_incr_style[16];  /* it was saved (2026-11-30) */
    int has_wd_schedule;
    uint64_t seed;
    int64_t adam_step;          /* Adam's bias-correction step count */
    int dp;                     /* data-parallel size at save time */
    int distributed_optimizer;  /* optimizer kind at save time */
    int params_bf16;            /* "params_dtype": "bfloat16" (--bf16); absent in older checkpoints: float32 */
    int has_optimizer;          /* optimizer.safetensors present */
    uint64_t args_fingerprint;  /* tdm_train_args_fingerprint */
    char numeric_args[8192];    /* its "key=value" lines (tdm_train_args_numeric_values); "": not saved */
    uint64_t model_fingerprint; /* tdm_ckpt_model_fingerprint of the table */
} tdm_ckpt_state;

/* What to save. The optimizer state, in parameter shape, comes either from two arrays held
 * whole in memory or from optim_state, asked for one tensor at a time as the file is written
 * (the trainer gathers each parameter's state from the ranks' shards only when its turn
 * comes, so rank 0 never holds more than one parameter's m and v). */
typedef struct tdm_ckpt_save_spec {
    const char *config_json_path;       /* copied into the checkpoint (may be NULL) */
    const char *preprocessor_json_path; /* likewise; NULL when the preprocessor is Qwen3-VL's defaults */
    const char *tokenizer_json_path;    /* copied as tokenizer.json (may be NULL) */
    const char *tokenizer_config_json;  /* text written as tokenizer_config.json (may be NULL) */
    const char *generation_config_json; /* text written as generation_config.json (may be NULL) */
    const tdm_param_table *params;      /* weights: every tensor's data */
    const float *const *exp_avg;        /* [params->n]: m in parameter shape, NULL for frozen; NULL = no optimizer */
    const float *const *exp_avg_sq;     /* [params->n]: v likewise */
    const float *const *fp32_param;     /* [params->n]: with params_bf16, the fp32 main parameters likewise */
    int params_bf16;                    /* --bf16: the weights are bfloat16 values, written as BF16, and the
                                      optimizer file holds the fp32 main parameters too */
    /* Used instead of the arrays when not NULL: m (which = 0), v (which = 1) or, with
     * params_bf16, the fp32 main parameters (which = 2) of parameter `param`, [numel] floats valid
     * until the next call, or NULL after setting *err (the save fails). Asked for exactly the
     * trainable parameters, in table order, in that order within each, each once; possibly not
     * to the end when a write fails first. */
    const float *(*optim_state)(void *ctx, int param, int which, tdm_error *err);
    void *optim_ctx;
    const tdm_ckpt_state *state;
} tdm_ckpt_save_spec;

/* Writes <save_dir>/iter_XXXXXXX atomically and then the tracker (see above); the
 * directory's path is written to out_dir[cap] when out_dir != NULL. Saving the
 * iteration the tracker already names replaces that checkpoint. Not collective:
 * rank 0 calls it. */
int tdm_ckpt_save(const char *save_dir, const tdm_ckpt_save_spec *spec, char *out_dir, size_t cap, tdm_error *err);

/* Creates save_dir if needed and checks that a checkpoint can be written there (a
 * directory is created in it and removed), so that a read-only or foreign folder is
 * refused when the run starts, not at its first save. Errors name --save. */
int tdm_ckpt_check_save_dir(const char *save_dir, tdm_error *err);

/* One job per --save folder: <save>/.tandem.lock, flock()ed for the job's life, names its
 * holder (host, pid, start, command). Creates save_dir if needed; *fd is the lock (-1 on error).
 * A second job is refused with the holder's name. The kernel drops the lock when the holder's
 * process ends, however it ends (SIGKILL too): a lock file left behind is taken over. */
#define TDM_CKPT_LOCK ".tandem.lock"
int tdm_ckpt_lock_save_dir(const char *save_dir, int *fd, tdm_error *err);
void tdm_ckpt_unlock_save_dir(int fd);
/* 1 when save_dir holds checkpoints: a tracker, or an iter_XXXXXXX folder. */
int tdm_ckpt_dir_has_checkpoints(const char *save_dir);

/* The iteration directory `load` stands for: `load` itself when it holds a
 * trainer_state.json, else <load>/iter_XXXXXXX named by its tracker. Errors: no
 * tracker, a tracker that does not hold an iteration number, a missing directory. */
int tdm_ckpt_resolve(const char *load, char *iter_dir, size_t cap, tdm_error *err);

/* An opened checkpoint: state read, sizes checked; the tensor files' checksums are checked as
 * they are loaded. */
typedef struct tdm_ckpt {
    char dir[4096];
    tdm_ckpt_state state;
    uint64_t state_hash;                             /* XXH3 of trainer_state.json (it holds every file's checksum) */
    tdm_safetensors *model;                          /* model.safetensors: its header (tensor names, shapes, offsets) */
    tdm_safetensors *optimizer;                      /* optimizer.safetensors, NULL when has_optimizer == 0 */
    struct tdm_ckpt_stream *model_in, *optimizer_in; /* private: each file read once, hashed on the way */
} tdm_ckpt;

/* Resolves, reads trainer_state.json, checks every file's size, verifies the checksums of
 * the small JSON copies, opens the safetensors files (headers parsed, no tensor read). A
 * safetensors header that does not parse is reported as the checksum mismatch it is when
 * the file's checksum does not match. */
int tdm_ckpt_open(const char *load, tdm_ckpt *ck, tdm_error *err);
/* The same for a use of the weights alone (generate, evaluate, --finetune, --no-load-optim):
 * optimizer.safetensors is neither read nor required (ck->optimizer stays NULL). */
int tdm_ckpt_open_weights(const char *load, tdm_ckpt *ck, tdm_error *err);
/* Resolves and reads trainer_state.json alone (ck->dir, ck->state, ck->state_hash), no file is
 * verified or opened: what a checkpoint is (its iteration) without reading its tensors. Needs
 * no tdm_ckpt_close. */
int tdm_ckpt_read_state(const char *load, tdm_ckpt *ck, tdm_error *err);
void tdm_ckpt_close(tdm_ckpt *ck);

/* Loads the weights into the table (data bound), reading model.safetensors once in file order
 * and checking its checksum on the way. Refuses a checkpoint of another model shape with a
 * sentence naming the first tensor that differs (before reading any tensor), and a corrupted
 * file with one naming it and both checksums (also when a damaged header made the tensors
 * look like another model's); after a failure once tensors were read, every tensor of the
 * table is zero, so that nothing the checksum did not vouch for survives. */
int tdm_ckpt_load_weights(tdm_ckpt *ck, tdm_param_table *t, tdm_error *err);

/* Reads the Adam state of trainable parameter `i` of the table into m[numel], v[numel],
 * hashing optimizer.safetensors on the way (cheapest in table order, the order it is saved
 * in; any order works). The values are unverified until tdm_ckpt_finish_optimizer. */
int tdm_ckpt_read_optimizer(tdm_ckpt *ck, const tdm_param_table *t, int i, float *m, float *v, tdm_error *err);

/* Elements [offset, offset + count) of parameter i's Adam state into m[count], v[count]: a
 * rank's shard. In a checkpoint with per-block checksums (written since 2026-11-30) only the
 * blocks holding them are read and verified; in an older one the file is hashed up to there. */
int tdm_ckpt_read_optimizer_range(tdm_ckpt *ck, const tdm_param_table *t, int i, int64_t offset, int64_t count,
                                  float *m, float *v, tdm_error *err);

/* With --bf16: elements [offset, offset + count) of parameter i's fp32 main copy ("fp32_param.<name>")
 * into out[count], read and verified as the Adam state is. Fails when the checkpoint has none
 * (saved without --bf16). */
int tdm_ckpt_read_main_params_range(tdm_ckpt *ck, const tdm_param_table *t, int i, int64_t offset, int64_t count,
                                    float *out, tdm_error *err);

/* Per-block checksums: the number of blocks of optimizer.safetensors (0 in an older checkpoint,
 * or without optimizer state) and, in *verified, which of them the reads so far verified. */
int64_t tdm_ckpt_optimizer_blocks(const tdm_ckpt *ck, const unsigned char **verified);
/* Bytes of optimizer.safetensors read so far, and its size. */
void tdm_ckpt_optimizer_io(const tdm_ckpt *ck, uint64_t *bytes_read, uint64_t *file_bytes);
/* tdm_ckpt_finish_optimizer for a load shared by ranks: verifies only the blocks with
 * blocks[j] set (not yet verified), so that ranks which each read their shard can split the
 * rest of the file between them; the state read is vouched for once every rank's part passed.
 * blocks == NULL, or an older checkpoint: the whole file, as tdm_ckpt_finish_optimizer. */
int tdm_ckpt_finish_optimizer_part(tdm_ckpt *ck, const unsigned char *blocks, tdm_error *err);

/* Reads what the tdm_ckpt_read_optimizer calls left out to the end of optimizer.safetensors
 * (state of parameters that are frozen now) and compares the file's size and checksum with
 * trainer_state.json. Call it after the last tdm_ckpt_read_optimizer and before the state
 * they read is used: a corrupted file is refused here, with one sentence naming it. */
int tdm_ckpt_finish_optimizer(tdm_ckpt *ck, tdm_error *err);

/* A hash of the table's tensor names and shapes, in order (not of trainability). */
uint64_t tdm_ckpt_model_fingerprint(const tdm_param_table *t);

/* "iter_0000010" style name of an iteration (Megatron's 7 digits). */
void tdm_ckpt_iter_name(int64_t iteration, char *out, size_t cap);

#endif
