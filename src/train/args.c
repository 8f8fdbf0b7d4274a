/* args.c - the flag table of `tandem train` and everything derived from it. */
#include "train/args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/json.h"
#include "model/qwen3vl.h"

typedef enum arg_type {
    ARG_INT,    /* int, range-checked */
    ARG_I64,    /* int64_t, range-checked */
    ARG_U64,    /* uint64_t */
    ARG_DBL,    /* double, range-checked, finite */
    ARG_PATH,   /* char[TDM_ARGS_PATH_MAX]; "" prints as None */
    ARG_CHOICE, /* char[] holding one of `choices` ("a|b|c") */
    ARG_SWITCH, /* int set to 1 by the flag */
    ARG_NSWITCH,/* int set to 0 by the flag (--no-X controls attribute X) */
    ARG_DATA,   /* a repeatable list of dataset files: --data, --valid-data-path */
    ARG_INJECT, /* ITER[:RANK] */
} arg_type;

/* Printing of "unset" values as Python's None. */
enum { NONE_NEVER = 0, NONE_IF_ZERO = 1, NONE_IF_NEG = 2 };

typedef struct arg_def {
    const char *flag;  /* without dashes, as typed: "micro-batch-size" */
    const char *attr;  /* Megatron's attribute name, as printed: "micro_batch_size" */
    arg_type type;
    size_t off;
    size_t cap;        /* bytes, for string fields */
    double lo, hi;     /* inclusive range for numbers */
    int none_rule;
    const char *def;   /* default, parsed by the same code as a flag value (NULL: zero/empty) */
    const char *choices;
    const char *meta;
    const char *help;
} arg_def;

#define F(field) offsetof(tdm_train_args, field), sizeof(((tdm_train_args *)0)->field)
#define BIG 9.0e15

static const arg_def ARGS[] = {
    /* model, weights, tokenizer, data */
    {"model", "model", ARG_PATH, F(model), 0, 0, NONE_NEVER, NULL, NULL, "DIR",
     "model directory (or file) holding a Hugging Face config.json"},
    {"pretrained", "pretrained", ARG_PATH, F(pretrained), 0, 0, NONE_NEVER, NULL, NULL, "DIR",
     "initial weights: a Hugging Face directory of *.safetensors"},
    {"hf-weights", "hf_weights", ARG_PATH, F(hf_weights), 0, 0, NONE_NEVER, NULL, NULL, "FILE",
     "initial weights: one .safetensors file"},
    {"tokenizer", "tokenizer", ARG_PATH, F(tokenizer), 0, 0, NONE_NEVER, NULL, NULL, "FILE",
     "tokenizer.json (Hugging Face byte-level BPE), or a directory holding one"},
    {"preprocessor", "preprocessor", ARG_PATH, F(preprocessor), 0, 0, NONE_NEVER, NULL, NULL, "FILE",
     "preprocessor_config.json (default: the model directory's, else the built-in one)"},
    {"data", "data", ARG_DATA, offsetof(tdm_train_args, data), 0, 0, 0, NONE_NEVER, NULL, NULL, "FILE",
     "dataset JSON / JSON Lines (repeatable)"},
    {"valid-data-path", "valid_data_path", ARG_DATA, offsetof(tdm_train_args, valid_data), 0, 0, 0, NONE_NEVER, NULL,
     NULL, "FILE", "validation dataset (repeatable): its loss is printed every --eval-interval iterations"},
    {"image-root", "image_root", ARG_PATH, F(image_root), 0, 0, NONE_NEVER, NULL, NULL, "DIR",
     "directory image paths resolve against (default: each dataset file's folder)"},
    {"image-max-pixels", "image_max_pixels", ARG_I64, F(image_max_pixels), 1, BIG, NONE_IF_ZERO, NULL, NULL, "N",
     "LLaMA-Factory's bound: scale a larger picture down to about N pixels before the processor (default: none)"},
    {"image-min-pixels", "image_min_pixels", ARG_I64, F(image_min_pixels), 1, BIG, NONE_IF_ZERO, NULL, NULL, "N",
     "LLaMA-Factory's bound: scale a smaller picture up to about N pixels before the processor (default: none)"},
    {"skip-bad-samples", "skip_bad_samples", ARG_SWITCH, F(skip_bad_samples), 0, 0, NONE_NEVER, NULL, NULL, NULL,
     "skip and count malformed samples instead of stopping"},

    /* batch and length */
    {"micro-batch-size", "micro_batch_size", ARG_INT, F(micro_batch_size), 1, 1 << 20, NONE_NEVER, "1", NULL, "N",
     "samples per micro-batch per rank"},
    {"global-batch-size", "global_batch_size", ARG_INT, F(global_batch_size), 1, 1 << 24, NONE_IF_ZERO, NULL, NULL,
     "N", "samples per optimizer step over all ranks (default: --micro-batch-size x data-parallel size)"},
    {"train-iters", "train_iters", ARG_I64, F(train_iters), 1, BIG, NONE_IF_ZERO, NULL, NULL, "N",
     "optimizer steps to run (total, counting a resumed checkpoint's; default 100, or from --train-samples)"},
    {"train-samples", "train_samples", ARG_I64, F(train_samples), 1, BIG, NONE_IF_ZERO, NULL, NULL, "N",
     "samples to train on instead of --train-iters: --train-samples / --global-batch-size iterations, and the "
     "learning-rate schedule in samples (--lr-warmup-samples, --lr-decay-samples)"},
    {"seq-length", "seq_length", ARG_INT, F(seq_length), 8, 1 << 24, NONE_NEVER, "1024", NULL, "N",
     "maximum tokens of one sample"},

    /* learning rate */
    {"lr", "lr", ARG_DBL, F(lr), 0, 10, NONE_NEVER, "0.0001", NULL, "LR", "peak learning rate"},
    {"min-lr", "min_lr", ARG_DBL, F(min_lr), 0, 10, NONE_NEVER, "0.0", NULL, "LR",
     "learning rate at the end of the decay"},
    {"lr-decay-style", "lr_decay_style", ARG_CHOICE, F(lr_decay_style), 0, 0, NONE_NEVER, "linear",
     "constant|linear|cosine|inverse-square-root|WSD", "STYLE",
     "decay after warmup: constant, linear, cosine, inverse-square-root or WSD (warmup-stable-decay)"},
    {"lr-warmup-iters", "lr_warmup_iters", ARG_I64, F(lr_warmup_iters), 0, BIG, NONE_NEVER, "0", NULL, "N",
     "iterations of linear warmup"},
    {"lr-warmup-fraction", "lr_warmup_fraction", ARG_DBL, F(lr_warmup_fraction), 0, 1, NONE_IF_NEG, "-1", NULL,
     "F", "warmup as a fraction of the decay span (instead of --lr-warmup-iters)"},
    {"lr-warmup-init", "lr_warmup_init", ARG_DBL, F(lr_warmup_init), 0, 10, NONE_NEVER, "0.0", NULL, "LR",
     "learning rate at the start of warmup"},
    {"lr-warmup-samples", "lr_warmup_samples", ARG_I64, F(lr_warmup_samples), 0, BIG, NONE_NEVER, "0", NULL, "N",
     "with --train-samples: samples of linear warmup"},
    {"lr-decay-samples", "lr_decay_samples", ARG_I64, F(lr_decay_samples), 1, BIG, NONE_IF_ZERO, NULL, NULL, "N",
     "with --train-samples: samples over which to decay (default --train-samples)"},
    {"lr-decay-iters", "lr_decay_iters", ARG_I64, F(lr_decay_iters), 1, BIG, NONE_IF_ZERO, NULL, NULL, "N",
     "iterations over which to decay (default: --train-iters)"},
    {"lr-wsd-decay-style", "lr_wsd_decay_style", ARG_CHOICE, F(lr_wsd_decay_style), 0, 0, NONE_NEVER, "exponential",
     "exponential|linear|cosine|minus_sqrt", "STYLE", "WSD: the shape of the final decay"},
    {"lr-wsd-decay-iters", "lr_wsd_decay_iters", ARG_I64, F(lr_wsd_decay_iters), 1, BIG, NONE_IF_ZERO, NULL, NULL,
     "N", "WSD: iterations of the final decay, at the end of the decay span"},
    {"lr-wsd-decay-samples", "lr_wsd_decay_samples", ARG_I64, F(lr_wsd_decay_samples), 1, BIG, NONE_IF_ZERO, NULL,
     NULL, "N", "WSD with --train-samples: samples of the final decay"},

    /* optimizer */
    {"weight-decay", "weight_decay", ARG_DBL, F(weight_decay), 0, 10, NONE_NEVER, "0.01", NULL, "WD",
     "AdamW decoupled weight decay (not applied to biases and norms)"},
    {"start-weight-decay", "start_weight_decay", ARG_DBL, F(start_weight_decay), 0, 10, NONE_IF_NEG, "-1", NULL,
     "WD", "with --weight-decay-incr-style linear|cosine: the weight decay at the start"},
    {"end-weight-decay", "end_weight_decay", ARG_DBL, F(end_weight_decay), 0, 10, NONE_IF_NEG, "-1", NULL, "WD",
     "with --weight-decay-incr-style linear|cosine: the weight decay at the last iteration"},
    {"weight-decay-incr-style", "weight_decay_incr_style", ARG_CHOICE, F(weight_decay_incr_style), 0, 0, NONE_NEVER,
     "constant", "constant|linear|cosine", "STYLE",
     "constant (--weight-decay throughout), or linear / cosine from --start- to --end-weight-decay over the run"},
    {"adam-beta1", "adam_beta1", ARG_DBL, F(adam_beta1), 0, 0.999999, NONE_NEVER, "0.9", NULL, "B", "Adam beta1"},
    {"adam-beta2", "adam_beta2", ARG_DBL, F(adam_beta2), 0, 0.999999999, NONE_NEVER, "0.999", NULL, "B",
     "Adam beta2"},
    {"adam-eps", "adam_eps", ARG_DBL, F(adam_eps), 1e-30, 1, NONE_NEVER, "1e-08", NULL, "EPS", "Adam epsilon"},
    {"clip-grad", "clip_grad", ARG_DBL, F(clip_grad), 0, 1e9, NONE_NEVER, "1.0", NULL, "C",
     "clip the global gradient norm to C (0 disables)"},
    {"seed", "seed", ARG_U64, F(seed), 0, 0, NONE_NEVER, "1234", NULL, "S",
     "seed of the initial weights and the sample order"},

    /* validation */
    {"eval-interval", "eval_interval", ARG_I64, F(eval_interval), 1, BIG, NONE_NEVER, "1000", NULL, "N",
     "iterations between validation-loss evaluations (with --valid-data-path; also at the end)"},
    {"eval-iters", "eval_iters", ARG_I64, F(eval_iters), 0, BIG, NONE_NEVER, "100", NULL, "N",
     "global batches of the validation set per evaluation (0: no validation)"},

    /* logging */
    {"log-interval", "log_interval", ARG_INT, F(log_interval), 1, 1 << 30, NONE_NEVER, "1", NULL, "N",
     "print the iteration line every N steps"},
    {"timing-log-level", "timing_log_level", ARG_INT, F(timing_log_level), 0, 2, NONE_NEVER, "0", NULL, "L",
     "0: none; 1: Megatron's step timers (min, max) across ranks (2: accepted, as 1)"},
    {"timing-log-option", "timing_log_option", ARG_CHOICE, F(timing_log_option), 0, 0, NONE_NEVER, "minmax",
     "max|minmax|all", "OPT", "with --timing-log-level 1: each timer's (min, max) across ranks, its max, or every "
     "rank's value"},
    {"run-dir", "run_dir", ARG_PATH, F(run_dir), 0, 0, NONE_NEVER, NULL, NULL, "DIR",
     "write metrics.jsonl here (with each step's fingerprint under --audit-fingerprints), and valid.jsonl"},
    {"audit-fingerprints", "audit_fingerprints", ARG_SWITCH, F(audit_fingerprints), 0, 0, NONE_NEVER, NULL, NULL,
     NULL, "record each step's input fingerprint (hash of every rank's micro-batches)"},
    {"tensorboard-dir", "tensorboard_dir", ARG_PATH, F(tensorboard_dir), 0, 0, NONE_NEVER, NULL, NULL, "DIR",
     "write TensorBoard event files here (Megatron's scalars and tags; rank 0)"},
    {"tensorboard-log-interval", "tensorboard_log_interval", ARG_INT, F(tensorboard_log_interval), 1, 1 << 30,
     NONE_NEVER, "1", NULL, "N", "TensorBoard scalars every N iterations"},
    {"log-timers-to-tensorboard", "log_timers_to_tensorboard", ARG_SWITCH, F(log_timers_to_tensorboard), 0, 0,
     NONE_NEVER, NULL, NULL, NULL,
     "also each step timer's max across ranks as 'NAME-time' (s per iteration) and 'iteration-time' (s)"},
    {"log-validation-ppl-to-tensorboard", "log_validation_ppl_to_tensorboard", ARG_SWITCH,
     F(log_validation_ppl_to_tensorboard), 0, 0, NONE_NEVER, NULL, NULL, NULL,
     "also 'lm loss validation ppl' at every evaluation"},
    {"no-log-loss-scale-to-tensorboard", "log_loss_scale_to_tensorboard", ARG_NSWITCH,
     F(log_loss_scale_to_tensorboard), 0, 0, NONE_NEVER, NULL, NULL, NULL, "do not write 'loss-scale'"},
    {"no-log-learning-rate-to-tensorboard", "log_learning_rate_to_tensorboard", ARG_NSWITCH,
     F(log_learning_rate_to_tensorboard), 0, 0, NONE_NEVER, NULL, NULL, NULL, "do not write 'learning-rate'"},
    {"log-world-size-to-tensorboard", "log_world_size_to_tensorboard", ARG_SWITCH, F(log_world_size_to_tensorboard),
     0, 0, NONE_NEVER, NULL, NULL, NULL, "also 'world-size'"},
    {"log-throughput", "log_throughput", ARG_SWITCH, F(log_throughput), 0, 0, NONE_NEVER, NULL, NULL, NULL,
     "add the model FLOP/s per rank to the iteration line ('throughput' in TensorBoard with "
     "--log-timers-to-tensorboard)"},
    {"log-params-norm", "log_params_norm", ARG_SWITCH, F(log_params_norm), 0, 0, NONE_NEVER, NULL, NULL, NULL,
     "add the L2 norm of the trained parameters after each step to the iteration line ('params-norm')"},
    {"log-num-zeros-in-grad", "log_num_zeros_in_grad", ARG_SWITCH, F(log_num_zeros_in_grad), 0, 0, NONE_NEVER, NULL,
     NULL, NULL, "add the count of gradient elements equal to zero to the iteration line ('num-zeros')"},
    {"profile-config", "profile_config", ARG_PATH, F(profile_config), 0, 0, NONE_NEVER, NULL, NULL, "FILE",
     "profiler tool config (MindSpeed-MM tools.json 'profile' section)"},

    /* checkpoints */
    {"save", "save", ARG_PATH, F(save), 0, 0, NONE_NEVER, NULL, NULL, "DIR", "checkpoint directory to write"},
    {"save-interval", "save_interval", ARG_I64, F(save_interval), 0, BIG, NONE_IF_ZERO, NULL, NULL, "N",
     "save every N iterations (and at the end)"},
    {"load", "load", ARG_PATH, F(load), 0, 0, NONE_NEVER, NULL, NULL, "DIR",
     "checkpoint to resume from: a --save directory (its latest_checkpointed_iteration.txt) or one iter_XXXXXXX"},
    {"no-load-optim", "no_load_optim", ARG_SWITCH, F(no_load_optim), 0, 0, NONE_NEVER, NULL, NULL, NULL,
     "with --load: do not load the optimizer state"},
    {"finetune", "finetune", ARG_SWITCH, F(finetune), 0, 0, NONE_NEVER, NULL, NULL, NULL,
     "with --load: load the weights only and start at iteration 0"},
    {"no-save-optim", "no_save_optim", ARG_SWITCH, F(no_save_optim), 0, 0, NONE_NEVER, NULL, NULL, NULL,
     "save weights without the optimizer state (resuming them needs --no-load-optim)"},
    {"no-save-rng", "no_save_rng", ARG_SWITCH, F(no_save_rng), 0, 0, NONE_NEVER, NULL, NULL, NULL,
     "accepted: a tandem checkpoint holds no RNG state (everything random follows --seed and the samples consumed)"},
    {"no-load-rng", "no_load_rng", ARG_SWITCH, F(no_load_rng), 0, 0, NONE_NEVER, NULL, NULL, NULL,
     "accepted: a tandem checkpoint holds no RNG state to load"},
    {"exit-signal-handler", "exit_signal_handler", ARG_SWITCH, F(exit_signal_handler), 0, 0, NONE_NEVER, NULL, NULL,
     NULL, "accepted: SIGTERM and SIGINT always save (with --save) and exit at the end of the step"},
    {"override-opt-param-scheduler", "override_opt_param_scheduler", ARG_SWITCH, F(override_opt_param_scheduler), 0,
     0, NONE_NEVER, NULL, NULL, NULL,
     "with --load: the learning-rate schedule of these flags, not the checkpoint's (tandem's default too)"},
    {"use-checkpoint-opt-param-scheduler", "use_checkpoint_opt_param_scheduler", ARG_SWITCH,
     F(use_checkpoint_opt_param_scheduler), 0, 0, NONE_NEVER, NULL, NULL, NULL,
     "with --load: the checkpoint's learning-rate schedule (peak, floor, warm-up, decay span and style)"},
    {"exit-interval", "exit_interval", ARG_I64, F(exit_interval), 0, BIG, NONE_IF_ZERO, NULL, NULL, "N",
     "stop (saving with --save) when the iteration is a multiple of N"},
    {"check-weight-hash-across-dp-replicas-interval", "check_weight_hash_across_dp_replicas_interval", ARG_I64,
     F(check_weight_hash_across_dp_replicas_interval), 1, BIG, NONE_IF_ZERO, NULL, NULL, "N",
     "every N iterations, check that every rank holds bitwise the same weights (stops naming the first tensor "
     "that differs)"},
    {"exit-duration-in-mins", "exit_duration_in_mins", ARG_DBL, F(exit_duration_in_mins), 0, 1e9, NONE_IF_ZERO,
     NULL, NULL, "M", "stop (saving with --save) at the end of the first step after M minutes of running"},

    /* precision */
    {"bf16", "bf16", ARG_SWITCH, F(bf16), 0, 0, NONE_NEVER, NULL, NULL, NULL,
     "bfloat16 parameters, as Megatron's --bf16 keeps them: AdamW updates fp32 main parameters and rounds them to "
     "bfloat16, gradients accumulate and reduce in fp32, the distributed optimizer all-gathers 16 bits per "
     "parameter; activations and matmuls stay float32"},

    /* data parallel */
    {"use-distributed-optimizer", "use_distributed_optimizer", ARG_SWITCH, F(use_distributed_optimizer), 0, 0,
     NONE_NEVER, NULL, NULL, NULL, "shard the optimizer state over the data-parallel ranks (ZeRO-1)"},
    {"overlap-grad-reduce", "overlap_grad_reduce", ARG_SWITCH, F(overlap_grad_reduce), 0, 0, NONE_NEVER, NULL, NULL,
     NULL, "start each bucket's gradient collective as soon as it is ready"},
    {"overlap-param-gather", "overlap_param_gather", ARG_SWITCH, F(overlap_param_gather), 0, 0, NONE_NEVER, NULL,
     NULL, NULL, "all-gather parameters in the background of the next forward"},
    {"ddp-bucket-size", "ddp_bucket_size", ARG_I64, F(ddp_bucket_size), 1, BIG, NONE_IF_ZERO, NULL, NULL, "N",
     "bucket size in elements (default max(40M, 1M x dp))"},
    {"ddp-num-buckets", "ddp_num_buckets", ARG_INT, F(ddp_num_buckets), 1, 1 << 20, NONE_IF_ZERO, NULL, NULL, "N",
     "split the gradient buffer into about N buckets (instead of --ddp-bucket-size)"},
    {"no-check-for-nan-in-grad", "check_for_nan_in_grad", ARG_NSWITCH, F(check_for_nan_in_grad), 0, 0, NONE_NEVER,
     NULL, NULL, NULL, "do not check each bucket's gradients for NaN/Inf (Megatron's spelling: "
     "--no-check-for-nan-in-loss-and-grad)"},
    {"comm-progress", "comm_progress", ARG_CHOICE, F(comm_progress), 0, 0, NONE_NEVER, "thread", "thread|inline",
     "MODE", "who progresses MPI: thread (a communication thread) or inline (the compute thread, between layers)"},
    {"comm-thread-nice", "comm_thread_nice", ARG_INT, F(comm_thread_nice), 0, 19, NONE_NEVER, "10", NULL, "N",
     "scheduling niceness of the communication thread (0-19; above 0 it yields busy cores to compute)"},
    {"distributed-timeout-minutes", "distributed_timeout_minutes", ARG_DBL, F(distributed_timeout_minutes), 0, 1e6,
     NONE_NEVER, "10", NULL, "M",
     "end the job when a collective (gradient buckets, parameter all-gathers, the step's sums, the start-up, "
     "validation and audit agreements; not rank 0's checkpoint save) waits longer than M minutes for a stuck rank "
     "(0: never)"},

    /* activation recomputation */
    {"recompute-granularity", "recompute_granularity", ARG_CHOICE, F(recompute_granularity), 0, 0, NONE_NEVER, NULL,
     "full|selective", "G",
     "full: run layers' forward again in the backward instead of keeping their activations; selective: the core "
     "attention only (flash attention keeps no scores: nothing to do)"},
    {"recompute-method", "recompute_method", ARG_CHOICE, F(recompute_method), 0, 0, NONE_NEVER, NULL,
     "uniform|block", "M",
     "with full: uniform = every layer, in groups of --recompute-num-layers keeping one input each; block = the "
     "first --recompute-num-layers layers"},
    {"recompute-num-layers", "recompute_num_layers", ARG_INT, F(recompute_num_layers), 1, 1 << 20, NONE_IF_ZERO, NULL,
     NULL, "N", "layers per recomputed group (uniform) or recomputed layers (block), per tower"},

    {"no-prune-last-layer", "prune_last_layer", ARG_NSWITCH, F(prune_last_layer), 0, 0, NONE_NEVER, NULL, NULL,
     NULL, "run the last decoder layer on every token, as PyTorch models do (by default it runs on the tokens whose "
     "target counts only: keys and values on every token; the same loss and gradients, for less work)"},

    /* freezing */
    {"freeze-vision", "freeze_vision", ARG_SWITCH, F(freeze_vision), 0, 0, NONE_NEVER, NULL, NULL, NULL,
     "freeze the vision tower (patch embedding, position table, blocks)"},
    {"freeze-projector", "freeze_projector", ARG_SWITCH, F(freeze_projector), 0, 0, NONE_NEVER, NULL, NULL, NULL,
     "freeze the merger and the DeepStack mergers"},
    {"freeze-llm", "freeze_llm", ARG_SWITCH, F(freeze_llm), 0, 0, NONE_NEVER, NULL, NULL, NULL,
     "freeze the language model (and a tied lm_head)"},
    {"freeze-lm-head", "freeze_lm_head", ARG_SWITCH, F(freeze_lm_head), 0, 0, NONE_NEVER, NULL, NULL, NULL,
     "freeze an untied lm_head (a tied one trains with the language model)"},

    {"vision-lr-mult", "vision_lr_mult", ARG_DBL, F(vision_lr_mult), 0, 1000, NONE_NEVER, "1.0", NULL, "X",
     "the vision tower's learning rate is the schedule's times X (patch embedding, position table, blocks)"},

    /* testing */
    {"inject-nan-at", "inject_nan_at", ARG_INJECT, offsetof(tdm_train_args, inject_nan_iter), 0, 0, 0,
     NONE_NEVER, NULL, NULL, "ITER[:RANK]", "testing: poison one gradient at this iteration (on RANK, or all ranks)"},
};
#define N_ARGS ((int)(sizeof ARGS / sizeof *ARGS))

/* The list an ARG_DATA flag fills: --data or --valid-data-path. */
static char (*list_paths(tdm_train_args *a, const arg_def *d, int **n))[TDM_ARGS_PATH_MAX] {
    if (d->off == offsetof(tdm_train_args, valid_data)) {
        *n = &a->n_valid_data;
        return a->valid_data;
    }
    *n = &a->n_data;
    return a->data;
}

/* ------------------------------------------------------------------ lookup */

/* Compares a typed name with a flag name, '-' and '_' being the same. */
static int name_eq(const char *typed, size_t n, const char *flag) {
    size_t i = 0;
    for (; i < n && flag[i]; i++) {
        char a = typed[i] == '_' ? '-' : typed[i];
        if (a != flag[i]) return 0;
    }
    return i == n && flag[i] == 0;
}

/* Megatron's spellings of flags named otherwise here: its launch scripts run unchanged. */
static const char *const ALIASES[][2] = {
    /* Megatron's switch also stops checking the loss; here a NaN/Inf loss always stops the job */
    {"no-check-for-nan-in-loss-and-grad", "no-check-for-nan-in-grad"},
    {"mm-tool", "profile-config"}, /* MindSpeed-MM's: the same tools.json */
};

static const arg_def *find_arg(const char *name, size_t n) {
    for (int i = 0; i < N_ARGS; i++)
        if (name_eq(name, n, ARGS[i].flag)) return &ARGS[i];
    for (size_t k = 0; k < sizeof ALIASES / sizeof *ALIASES; k++)
        if (name_eq(name, n, ALIASES[k][0])) return find_arg(ALIASES[k][1], strlen(ALIASES[k][1]));
    return NULL;
}

/* find_arg, and Megatron's --recompute-activations: a switch meaning --recompute-granularity
 * selective (*fixed: the value it implies; NULL for every other flag). */
static const arg_def *find_flag(const char *name, size_t n, const char **fixed) {
    *fixed = NULL;
    if (name_eq(name, n, "recompute-activations")) {
        *fixed = "selective";
        return find_arg("recompute-granularity", strlen("recompute-granularity"));
    }
    return find_arg(name, n);
}

int tdm_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 128 || lb > 128) return (int)(la > lb ? la : lb);
    int row[129];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            int best = diag + cost;
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* The known flag closest to `name` (NULL when nothing is reasonably close). */
static const char *closest_flag(const char *name, size_t n) {
    char buf[129];
    if (n > 128) n = 128;
    for (size_t i = 0; i < n; i++) buf[i] = name[i] == '_' ? '-' : name[i];
    buf[n] = 0;
    const char *best = NULL;
    int best_d = 1 << 30;
    for (int i = 0; i < N_ARGS; i++) {
        int d = tdm_edit_distance(buf, ARGS[i].flag);
        if (d < best_d) best_d = d, best = ARGS[i].flag;
    }
    /* "config" is handled outside the table but is a known name too */
    if (tdm_edit_distance(buf, "config") < best_d) best_d = tdm_edit_distance(buf, "config"), best = "config";
    int limit = (int)n / 2 > 3 ? (int)n / 2 : 3;
    return best_d <= limit ? best : NULL;
}

/* Megatron / MindSpeed-MM flags that tandem does not take, and why: a launch script that
 * passes them gets the reason, not "unknown flag". */
static const char *const NOT_TAKEN[][2] = {
    {"fp16", "tandem trains in float32, or with bfloat16 parameters (--bf16); fp16 needs loss scaling, which it "
             "does not have: drop it or use --bf16"},
    {"sequence-parallel", "tandem has data parallelism only: drop it"},
    {"num-layers", "the architecture comes from --model's config.json: drop it"},
    {"hidden-size", "the architecture comes from --model's config.json: drop it"},
    {"ffn-hidden-size", "the architecture comes from --model's config.json: drop it"},
    {"num-attention-heads", "the architecture comes from --model's config.json: drop it"},
    {"num-query-groups", "the architecture comes from --model's config.json: drop it"},
    {"group-query-attention", "the architecture comes from --model's config.json: drop it"},
    {"max-position-embeddings", "the architecture comes from --model's config.json: drop it"},
    {"position-embedding-type", "the architecture comes from --model's config.json: drop it"},
    {"rotary-base", "the architecture comes from --model's config.json: drop it"},
    {"normalization", "the architecture comes from --model's config.json: drop it"},
    {"norm-epsilon", "the architecture comes from --model's config.json: drop it"},
    {"swiglu", "the architecture comes from --model's config.json: drop it"},
    {"untie-embeddings-and-output-weights", "the architecture comes from --model's config.json "
                                            "(tie_word_embeddings): drop it"},
    {"disable-bias-linear", "the architecture comes from --model's config.json: drop it"},
    {"make-vocab-size-divisible-by", "the vocabulary size comes from --model's config.json: drop it"},
    {"tokenizer-type", "give --tokenizer FILE (a Hugging Face tokenizer.json)"},
    {"tokenizer-model", "give --tokenizer FILE (a Hugging Face tokenizer.json)"},
    {"mm-data", "MindSpeed-MM's data.json: give its dataset files with --data and the preprocessor with "
                "--preprocessor"},
    {"mm-model", "MindSpeed-MM's model.json: give the Hugging Face model directory with --model, and the freezing "
                 "with --freeze-vision / --freeze-projector / --freeze-llm"},
    {"num-workers", "tandem reads and decodes data in one loader thread per rank, ahead of the steps: drop it"},
    {"ckpt-format", "tandem writes one format (Megatron-style directories of safetensors): drop it"},
    {"tensorboard-queue-size", "every TensorBoard event is flushed as it is written (no queue): drop it"},
    {"distributed-backend", "tandem's distributed engine is MPI (launch it with mpirun): drop it"},
    {"reuse-fp32-param", "tandem's parameters keep float32 storage (with --bf16 too, holding bfloat16 values), so "
                         "there is no 16-bit copy to share memory with: drop it"},
    {"swap-attention", "activations stay in host memory already; --recompute-granularity full trades compute for "
                       "their memory: drop it"},
    {"padded-vocab-size", "the vocabulary size comes from --model's config.json: drop it"},
    {"rotary-percent", "the architecture comes from --model's config.json: drop it"},
    {"use-rotary-position-embeddings", "the architecture comes from --model's config.json: drop it"},
    {NULL, NULL}};

static int parse_bool(const char *s, int *out);

/* Megatron flags that ask for what tandem does anyway, accepted so that launch scripts run as they
 * are: switches (value NULL), and sizes or rates accepted at the one value tandem has. */
static const char *const ALREADY_SO[][3] = {
    {"tensor-model-parallel-size", "1", "tandem has data parallelism only"},
    {"pipeline-model-parallel-size", "1", "tandem has data parallelism only"},
    {"context-parallel-size", "1", "tandem has data parallelism only"},
    {"expert-model-parallel-size", "1", "tandem has data parallelism only"},
    {"attention-dropout", "0", "tandem trains without dropout (a config.json attention_dropout above 0 is refused)"},
    {"hidden-dropout", "0", "tandem trains without dropout"},
    {"use-mcore-models", NULL, NULL},          /* one implementation of the model */
    {"use-flash-attn", NULL, NULL},            /* the attention is always flash-style */
    {"use-fused-rmsnorm", NULL, NULL},         /* always fused */
    {"use-fused-swiglu", NULL, NULL},          /* always fused */
    {"no-gradient-accumulation-fusion", NULL, NULL}, /* CUDA fusions: nothing to turn off */
    {"no-masked-softmax-fusion", NULL, NULL},
    {"no-bias-swiglu-fusion", NULL, NULL},
    {"no-rope-fusion", NULL, NULL},
    {"attention-softmax-in-fp32", NULL, NULL}, /* every activation is float32 */
    {"accumulate-allreduce-grads-in-fp32", NULL, NULL}, /* the gradient buffer is fp32, with --bf16 too */
    {"variable-seq-lengths", NULL, NULL},      /* samples of any length are packed */
    {"calculate-per-token-loss", NULL, NULL},  /* the loss is summed over the global batch's tokens / their count */
    {"use-fused-rotary-pos-emb", NULL, NULL},  /* RoPE is applied in one pass */
    {"trust-remote-code", NULL, NULL},         /* config.json is read as data; no code is run */
    {"no-create-attention-mask-in-dataloader", NULL, NULL}, /* packed samples need no mask tensor */
    {"init-method-std", "0.02", "initial weights are drawn with std 0.02 (Qwen3-VL's initializer_range; the vision "
                                "position table at 0.02 x sqrt(patch size), docs/learning.md)"},
    {NULL, NULL, NULL}};

/* The ALREADY_SO entry of argv[*i] (consuming its value), 1 when accepted, 0 when not such a flag,
 * -1 with a message when its value is not the one tandem has. */
static int already_so(const char *name, size_t n, const char *eq, int argc, char **argv, int *i, tdm_error *err) {
    for (int k = 0; ALREADY_SO[k][0]; k++) {
        if (!name_eq(name, n, ALREADY_SO[k][0])) continue;
        const char *want = ALREADY_SO[k][1];
        if (!want) {
            int b = 1;
            if (eq && parse_bool(eq + 1, &b) != 0)
                return tdm_errorf(err, "--%s: a switch, expected true or false, got '%s'", ALREADY_SO[k][0], eq + 1);
            if (!b) return tdm_errorf(err, "--%s=false: tandem has no other way to run", ALREADY_SO[k][0]);
            return 1;
        }
        const char *val = eq ? eq + 1 : (*i + 1 < argc ? argv[++*i] : NULL);
        char *end;
        double v = val ? strtod(val, &end) : 1.0;
        if (!val || end == val || *end || v != strtod(want, NULL))
            return tdm_errorf(err, "--%s %s: %s; only %s is accepted", ALREADY_SO[k][0], val ? val : "(no value)",
                              ALREADY_SO[k][2], want);
        return 1;
    }
    return 0;
}

static int unknown_flag(const char *name, size_t n, const char *where, tdm_error *err) {
    for (int k = 0; NOT_TAKEN[k][0]; k++)
        if (name_eq(name, n, NOT_TAKEN[k][0]))
            return tdm_errorf(err, "%s--%s: not a tandem flag; %s", where, NOT_TAKEN[k][0], NOT_TAKEN[k][1]);
    const char *s = closest_flag(name, n);
    if (s)
        return tdm_errorf(err, "%sunknown flag '--%.*s'; did you mean '--%s'?", where, (int)n, name, s);
    return tdm_errorf(err, "%sunknown flag '--%.*s' (tandem train --help lists the flags)", where, (int)n, name);
}

/* ------------------------------------------------------------------ setting values */

/* A decimal integer, or an integral value in exponent form (1e6); not hex (strtod would
 * read "0x10" as 16), not leading blanks. */
static int parse_i64(const char *s, int64_t *out) {
    if (!*s || isspace((unsigned char)*s) || strpbrk(s, "xX")) return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) {
        /* accept integral values in exponent form, e.g. 1e6 */
        double d = strtod(s, &end);
        if (*end || !isfinite(d) || d != floor(d) || fabs(d) > BIG) return -1;
        v = (long long)d;
    }
    *out = v;
    return 0;
}

static int parse_bool(const char *s, int *out) {
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "1")) return *out = 1, 0;
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "0")) return *out = 0, 0;
    return -1;
}

/* Sets one argument from its text value. `what` names the source for errors
 * ("--lr" or "cfg.json: key 'lr'"). */
static int set_value(tdm_train_args *a, const arg_def *d, const char *val, const char *what, tdm_error *err) {
    char *base = (char *)a + d->off;
    switch (d->type) {
    case ARG_INT:
    case ARG_I64: {
        int64_t v;
        if (parse_i64(val, &v) != 0) return tdm_errorf(err, "%s: expected an integer, got '%s'", what, val);
        if ((double)v < d->lo || (double)v > d->hi)
            return tdm_errorf(err, "%s: %lld is out of range [%.0f, %.0f]", what, (long long)v, d->lo, d->hi);
        if (d->type == ARG_INT) *(int *)base = (int)v;
        else *(int64_t *)base = v;
        return 0;
    }
    case ARG_U64: {
        errno = 0;
        char *end;
        if (!*val || *val == '-' || isspace((unsigned char)*val) || strpbrk(val, "xX"))
            return tdm_errorf(err, "%s: expected a non-negative integer, got '%s'", what, val);
        unsigned long long v = strtoull(val, &end, 10);
        if (errno || *end) { /* an integral value in exponent form (1e3), as the other integer flags take */
            double d = strtod(val, &end);
            if (*end || !isfinite(d) || d != floor(d) || d < 0 || d > BIG)
                return tdm_errorf(err, "%s: expected a non-negative integer, got '%s'", what, val);
            v = (unsigned long long)d;
        }
        *(uint64_t *)base = v;
        return 0;
    }
    case ARG_DBL: {
        errno = 0;
        char *end;
        double v = strtod(val, &end);
        if (!*val || *end || errno == ERANGE || !isfinite(v))
            return tdm_errorf(err, "%s: expected a number, got '%s'", what, val);
        /* negative "unset" defaults (lr_warmup_fraction) are allowed only as defaults */
        if (v < d->lo || v > d->hi) {
            if (!(d->none_rule == NONE_IF_NEG && v < 0 && !strcmp(what, "default")))
                return tdm_errorf(err, "%s: %s is out of range [%g, %g]", what, val, d->lo, d->hi);
        }
        *(double *)base = v;
        return 0;
    }
    case ARG_PATH:
    case ARG_CHOICE: {
        size_t n = strlen(val);
        if (n >= d->cap) return tdm_errorf(err, "%s: value is %zu bytes, longer than %zu", what, n, d->cap - 1);
        if (d->type == ARG_PATH && n == 0) return tdm_errorf(err, "%s: expected a path, got an empty string", what);
        if (d->type == ARG_CHOICE) {
            const char *c = d->choices;
            int ok = 0;
            while (*c) {
                size_t len = strcspn(c, "|");
                if (len == n && !strncmp(c, val, n)) ok = 1;
                c += len;
                if (*c == '|') c++;
            }
            if (!ok) return tdm_errorf(err, "%s: expected one of %s, got '%s'", what, d->choices, val);
        }
        memcpy(base, val, n + 1);
        return 0;
    }
    case ARG_SWITCH:
    case ARG_NSWITCH: {
        int b;
        if (parse_bool(val, &b) != 0) return tdm_errorf(err, "%s: expected true or false, got '%s'", what, val);
        *(int *)base = d->type == ARG_SWITCH ? b : !b;
        return 0;
    }
    case ARG_DATA: {
        size_t n = strlen(val);
        if (n == 0) return tdm_errorf(err, "%s: expected a path, got an empty string", what);
        if (n >= TDM_ARGS_PATH_MAX) return tdm_errorf(err, "%s: path is longer than %d bytes", what, TDM_ARGS_PATH_MAX - 1);
        int *count;
        char(*paths)[TDM_ARGS_PATH_MAX] = list_paths(a, d, &count);
        if (*count >= TDM_ARGS_MAX_DATA) return tdm_errorf(err, "%s: more than %d data files", what, TDM_ARGS_MAX_DATA);
        memcpy(paths[(*count)++], val, n + 1);
        return 0;
    }
    case ARG_INJECT: {
        char buf[64];
        if (strlen(val) >= sizeof buf) return tdm_errorf(err, "%s: expected ITER[:RANK], got '%s'", what, val);
        strcpy(buf, val);
        char *colon = strchr(buf, ':');
        int64_t it, rank = -1;
        if (colon) *colon = 0;
        if (parse_i64(buf, &it) != 0 || it < 1 || (colon && (parse_i64(colon + 1, &rank) != 0 || rank < 0 || rank > 1 << 20)))
            return tdm_errorf(err, "%s: expected ITER[:RANK] with ITER >= 1, got '%s'", what, val);
        a->inject_nan_iter = it;
        a->inject_nan_rank = (int)rank;
        return 0;
    }
    }
    return tdm_errorf(err, "%s: internal error: unknown argument type", what);
}

void tdm_train_args_defaults(tdm_train_args *a) {
    memset(a, 0, sizeof *a);
    a->check_for_nan_in_grad = 1;
    a->prune_last_layer = 1;
    a->log_loss_scale_to_tensorboard = 1;
    a->log_learning_rate_to_tensorboard = 1;
    a->inject_nan_rank = -1;
    for (int i = 0; i < N_ARGS; i++)
        if (ARGS[i].def) set_value(a, &ARGS[i], ARGS[i].def, "default", NULL);
}

/* ------------------------------------------------------------------ command line */

static int is_switch(const arg_def *d) { return d->type == ARG_SWITCH || d->type == ARG_NSWITCH; }

/* Applies argv's flags in order; --config FILE is skipped (tdm_train_args_parse applied it first). */
static int parse_argv(tdm_train_args *a, int argc, char **argv, tdm_error *err) {
    unsigned lists_from_cli = 0; /* bit 0: --data, bit 1: --valid-data-path */
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (strncmp(s, "--", 2) != 0 || s[2] == 0)
            return tdm_errorf(err, "unexpected argument '%s' (flags start with --)", s);
        const char *name = s + 2;
        const char *eq = strchr(name, '=');
        size_t n = eq ? (size_t)(eq - name) : strlen(name);
        if (name_eq(name, n, "config")) {
            if (!eq) i++;
            if (!eq && i >= argc) return tdm_errorf(err, "--config: expected a file name after it");
            continue;
        }
        /* Megatron's and MindSpeed-MM's other names for a flag (find_arg's ALIASES, find_flag) */
        const char *fixed; /* a value the name implies */
        const arg_def *d = find_flag(name, n, &fixed);
        if (fixed && eq) return tdm_errorf(err, "--%.*s: a switch, it takes no value", (int)n, name);
        if (!d) {
            int so = already_so(name, n, eq, argc, argv, &i, err);
            if (so < 0) return -1;
            if (so > 0) continue;
            return unknown_flag(name, n, "", err);
        }
        char what[96];
        snprintf(what, sizeof what, "--%s", d->flag);
        const char *val;
        if (fixed) {
            val = fixed;
        } else if (eq) {
            val = eq + 1;
        } else if (is_switch(d)) {
            val = "true";
        } else {
            if (i + 1 >= argc) return tdm_errorf(err, "%s: expected a value (%s) after it", what, d->meta);
            val = argv[++i];
            if (strncmp(val, "--", 2) == 0)
                return tdm_errorf(err, "%s: expected a value (%s), got the flag '%s'", what, d->meta, val);
        }
        if (d->type == ARG_DATA) {
            int *count;
            (void)list_paths(a, d, &count);
            unsigned bit = count == &a->n_data ? 1u : 2u;
            if (!(lists_from_cli & bit)) *count = 0; /* the command line replaces a config file's list */
            lists_from_cli |= bit;
        }
        if (set_value(a, d, val, what, err) != 0) return -1;
    }
    return 0;
}

int tdm_train_args_parse(tdm_train_args *a, int argc, char **argv, tdm_error *err) {
    /* the config file first, so the command line wins */
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (strncmp(s, "--", 2) != 0) continue;
        const char *name = s + 2;
        const char *eq = strchr(name, '=');
        size_t n = eq ? (size_t)(eq - name) : strlen(name);
        if (!name_eq(name, n, "config")) continue;
        const char *path = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
        if (!path) return tdm_errorf(err, "--config: expected a file name after it");
        if (tdm_train_args_load_config(a, path, err) != 0) return -1;
    }
    return parse_argv(a, argc, argv, err);
}

int tdm_train_args_split(const char *flags, char ***words, int *n_words, tdm_error *err) {
    size_t n = strlen(flags);
    if (n > 65536) return tdm_errorf(err, "flags string: %zu bytes, more than 65536", n);
    /* one block: the word pointers, then the words (NUL-terminated) */
    size_t cap_words = n / 2 + 2;
    char **w = tdm_xmalloc(sizeof(char *) * cap_words + n + 1);
    char *buf = (char *)(w + cap_words);
    int nw = 0;
    size_t o = 0;
    const char *p = flags;
    while (*p) {
        while (*p && isspace((unsigned char)*p)) p++;
        if (!*p) break;
        w[nw++] = buf + o;
        char quote = 0;
        while (*p && (quote || !isspace((unsigned char)*p))) {
            if (!quote && (*p == '\'' || *p == '"')) quote = *p;
            else if (quote && *p == quote) quote = 0;
            else buf[o++] = *p;
            p++;
        }
        buf[o++] = 0;
        if (quote) {
            free(w);
            return tdm_errorf(err, "flags string '%s': unterminated quote", flags);
        }
    }
    *words = w;
    *n_words = nw;
    return 0;
}

int tdm_train_args_parse_string(tdm_train_args *a, const char *flags, tdm_error *err) {
    char **words;
    int nw;
    if (tdm_train_args_split(flags, &words, &nw, err) != 0) return -1;
    int rc = tdm_train_args_parse(a, nw, words, err);
    free(words);
    return rc;
}

/* ------------------------------------------------------------------ config file */

int tdm_train_args_load_config(tdm_train_args *a, const char *path, tdm_error *err) {
    size_t len;
    char *text = tdm_read_file(path, 1 << 20, &len, err);
    if (!text) return -1;
    tdm_json_doc *doc = tdm_json_parse(text, len, path, err);
    free(text);
    if (!doc) return -1;
    int rc = -1;
    const tdm_json *root = tdm_json_root(doc);
    if (root->type != TDM_JSON_OBJECT) {
        tdm_errorf(err, "%s: expected a JSON object of flag names and values", path);
        goto out;
    }
    for (size_t k = 0; k < root->len; k++) {
        const char *key = root->keys[k];
        const tdm_json *v = root->items[k];
        char what[1200];
        snprintf(what, sizeof what, "%s: key '%s'", path, key);
        const char *name = key;
        while (*name == '-') name++;
        if (name_eq(name, strlen(name), "recompute-activations")) { /* as on the command line: selective */
            if (v->type != TDM_JSON_TRUE && v->type != TDM_JSON_FALSE && v->type != TDM_JSON_NULL) {
                tdm_errorf(err, "%s: expected true or false", what);
                goto out;
            }
            if (v->type == TDM_JSON_TRUE &&
                set_value(a, find_arg("recompute-granularity", strlen("recompute-granularity")), "selective", what,
                          err) != 0)
                goto out;
            continue;
        }
        const arg_def *d = find_arg(name, strlen(name));
        if (!d) {
            char where[1100];
            snprintf(where, sizeof where, "%s: ", path);
            unknown_flag(name, strlen(name), where, err);
            goto out;
        }
        char num[64];
        const char *val = NULL;
        if (d->type == ARG_DATA) {
            int *count;
            (void)list_paths(a, d, &count);
            *count = 0;
            if (v->type == TDM_JSON_STRING) {
                if (set_value(a, d, v->str, what, err) != 0) goto out;
                continue;
            }
            if (v->type != TDM_JSON_ARRAY) {
                tdm_errorf(err, "%s: expected a string or an array of strings", what);
                goto out;
            }
            for (size_t j = 0; j < v->len; j++) {
                if (v->items[j]->type != TDM_JSON_STRING) {
                    tdm_errorf(err, "%s: item %zu: expected a string", what, j);
                    goto out;
                }
                if (set_value(a, d, v->items[j]->str, what, err) != 0) goto out;
            }
            continue;
        }
        switch (v->type) {
        case TDM_JSON_TRUE: val = "true"; break;
        case TDM_JSON_FALSE: val = "false"; break;
        case TDM_JSON_STRING: val = v->str; break;
        case TDM_JSON_NUMBER:
            if (v->is_int) snprintf(num, sizeof num, "%lld", (long long)v->i64);
            else snprintf(num, sizeof num, "%.17g", v->num);
            val = num;
            break;
        case TDM_JSON_NULL: continue; /* null = leave the default */
        default:
            tdm_errorf(err, "%s: expected a number, string or boolean, got %s", what, tdm_json_type_name(v->type));
            goto out;
        }
        if (is_switch(d) && v->type != TDM_JSON_TRUE && v->type != TDM_JSON_FALSE) {
            tdm_errorf(err, "%s: expected true or false", what);
            goto out;
        }
        if (set_value(a, d, val, what, err) != 0) goto out;
    }
    rc = 0;
out:
    tdm_json_free(doc);
    return rc;
}

/* ------------------------------------------------------------------ validation */

void tdm_train_args_resolve(tdm_train_args *a, int dp) {
    if (a->global_batch_size == 0 && dp >= 1) a->global_batch_size = a->micro_batch_size * dp;
    /* Megatron's update_train_iters: sample-based training runs train_samples // global batch
     * iterations (validate refuses both flags given: this one was derived, or not) */
    if (a->train_samples > 0 && (a->train_iters == 0 || a->train_iters_from_samples) && a->global_batch_size > 0) {
        a->train_iters = a->train_samples / a->global_batch_size;
        a->train_iters_from_samples = 1;
    }
    if (a->train_iters == 0 && a->train_samples == 0) a->train_iters = 100;
}

int tdm_train_args_validate(const tdm_train_args *unresolved, int dp, tdm_error *err) {
    tdm_train_args resolved = *unresolved; /* the rules read the dp-dependent defaults */
    tdm_train_args_resolve(&resolved, dp);
    const tdm_train_args *a = &resolved;
    if (!a->model[0]) return tdm_errorf(err, "--model: required (a directory holding config.json)");
    if (!a->tokenizer[0]) return tdm_errorf(err, "--tokenizer: required (a tokenizer.json)");
    if (a->n_data == 0) return tdm_errorf(err, "--data: required (a dataset JSON file)");
    if (dp < 1) return tdm_errorf(err, "data-parallel size %d: expected at least 1", dp);
    int64_t per_step = (int64_t)a->micro_batch_size * dp;
    /* unset (0) is micro x dp once resolved: divisible */
    if (a->global_batch_size % per_step != 0)
        return tdm_errorf(err,
                          "--global-batch-size %d: must be divisible by --micro-batch-size x data-parallel size = "
                          "%d x %d = %lld",
                          a->global_batch_size, a->micro_batch_size, dp, (long long)per_step);
    if (a->overlap_param_gather && !a->use_distributed_optimizer)
        return tdm_errorf(err, "--overlap-param-gather: requires --use-distributed-optimizer");
    if (a->overlap_param_gather && !a->overlap_grad_reduce)
        return tdm_errorf(err, "--overlap-param-gather: requires --overlap-grad-reduce (as in Megatron)");
    if (a->ddp_bucket_size > 0 && a->ddp_num_buckets > 0)
        return tdm_errorf(err, "--ddp-bucket-size and --ddp-num-buckets: give at most one of them");
    if (a->min_lr > a->lr) return tdm_errorf(err, "--min-lr %g: must not exceed --lr %g", a->min_lr, a->lr);
    if (a->lr_warmup_init > a->lr)
        return tdm_errorf(err, "--lr-warmup-init %g: must not exceed --lr %g (the warm-up rises to --lr)",
                          a->lr_warmup_init, a->lr);
    if (a->lr_warmup_fraction >= 0 && (a->lr_warmup_iters > 0 || a->lr_warmup_samples > 0))
        return tdm_errorf(err, "--lr-warmup-fraction and --lr-warmup-%s: give at most one of them",
                          a->lr_warmup_iters > 0 ? "iters" : "samples");
    /* Megatron: iteration-based or sample-based training, each with its own schedule flags */
    if (a->train_samples > 0) {
        if (!a->train_iters_from_samples)
            return tdm_errorf(err, "--train-iters and --train-samples: give one of them (iteration-based or "
                                   "sample-based training)");
        if (a->lr_decay_iters > 0 || a->lr_warmup_iters > 0)
            return tdm_errorf(err, "--lr-%s-iters: with --train-samples the schedule is in samples (--lr-%s-samples)",
                              a->lr_decay_iters > 0 ? "decay" : "warmup", a->lr_decay_iters > 0 ? "decay" : "warmup");
        if (a->train_iters < 1)
            return tdm_errorf(err, "--train-samples %lld: fewer than one global batch of %d", (long long)a->train_samples,
                              a->global_batch_size);
        int64_t decay = a->lr_decay_samples > 0 ? a->lr_decay_samples : a->train_samples;
        if (a->lr_warmup_samples > 0 && a->lr_warmup_samples >= decay)
            return tdm_errorf(err, "--lr-warmup-samples %lld: must be fewer than the decay span of %lld samples "
                              "(--lr-decay-samples, else --train-samples)", (long long)a->lr_warmup_samples,
                              (long long)decay);
    } else {
        if (a->lr_decay_samples > 0 || a->lr_warmup_samples > 0)
            return tdm_errorf(err, "--lr-%s-samples: only with --train-samples (with --train-iters the schedule is in "
                                   "iterations: --lr-%s-iters)",
                              a->lr_decay_samples > 0 ? "decay" : "warmup", a->lr_decay_samples > 0 ? "decay" : "warmup");
        int64_t decay = a->lr_decay_iters > 0 ? a->lr_decay_iters : a->train_iters;
        if (a->lr_warmup_iters > 0 && a->lr_warmup_iters >= decay) /* Megatron asserts warmup < decay */
            return tdm_errorf(err, "--lr-warmup-iters %lld: must be shorter than the decay span of %lld iterations "
                              "(--lr-decay-iters, else --train-iters)", (long long)a->lr_warmup_iters,
                              (long long)decay);
    }
    /* WSD's final decay, in the unit of the schedule (Megatron's assertion, as a sentence) */
    if (a->train_samples > 0 ? a->lr_wsd_decay_iters > 0 : a->lr_wsd_decay_samples > 0)
        return tdm_errorf(err, a->train_samples > 0 ? "--lr-wsd-decay-iters: with --train-samples the schedule is in "
                                                      "samples (--lr-wsd-decay-samples)"
                                                    : "--lr-wsd-decay-samples: only with --train-samples (with "
                                                      "--train-iters: --lr-wsd-decay-iters)");
    if (!strcmp(a->lr_decay_style, "WSD") && a->lr_wsd_decay_iters <= 0 && a->lr_wsd_decay_samples <= 0)
        return tdm_errorf(err, "--lr-decay-style WSD: requires the length of its final decay (--lr-wsd-decay-%s N)",
                          a->train_samples > 0 ? "samples" : "iters");
    /* Megatron's weight-decay increment: both ends with linear / cosine, neither with constant */
    const int wd_const = !strcmp(a->weight_decay_incr_style, "constant");
    if (wd_const && (a->start_weight_decay >= 0 || a->end_weight_decay >= 0))
        return tdm_errorf(err, "--%s-weight-decay: only with --weight-decay-incr-style linear or cosine (constant "
                               "uses --weight-decay)", a->start_weight_decay >= 0 ? "start" : "end");
    if (!wd_const && (a->start_weight_decay < 0 || a->end_weight_decay < 0))
        return tdm_errorf(err, "--weight-decay-incr-style %s: requires --start-weight-decay and --end-weight-decay",
                          a->weight_decay_incr_style);
    if (!wd_const && a->end_weight_decay < a->start_weight_decay)
        return tdm_errorf(err, "--end-weight-decay %g: below --start-weight-decay %g (the weight decay only increases)",
                          a->end_weight_decay, a->start_weight_decay);
    if (a->lr_warmup_fraction >= 1)
        return tdm_errorf(err, "--lr-warmup-fraction %g: must be below 1 (the warmup must end before the decay span)",
                          a->lr_warmup_fraction);
    if (a->override_opt_param_scheduler && a->use_checkpoint_opt_param_scheduler)
        return tdm_errorf(err, "--override-opt_param-scheduler and --use-checkpoint-opt_param-scheduler: give at most "
                               "one of them");
    if (a->use_checkpoint_opt_param_scheduler && (!a->load[0] || a->finetune))
        return tdm_errorf(err, "--use-checkpoint-opt_param-scheduler: requires --load DIR (without --finetune)");
    if (a->save_interval > 0 && !a->save[0]) return tdm_errorf(err, "--save-interval: requires --save DIR");
    if ((a->finetune || a->no_load_optim) && !a->load[0])
        return tdm_errorf(err, "--finetune / --no-load-optim: require --load DIR");
    if (a->pretrained[0] && a->hf_weights[0])
        return tdm_errorf(err, "--pretrained and --hf-weights: give at most one of them");
    if (a->inject_nan_rank >= dp)
        return tdm_errorf(err, "--inject-nan-at: rank %d does not exist in a job of %d ranks", a->inject_nan_rank, dp);
    if (a->inject_nan_iter > a->train_iters)
        return tdm_errorf(err, "--inject-nan-at %lld: after the last iteration (--train-iters %lld), it would never fire",
                          (long long)a->inject_nan_iter, (long long)a->train_iters);
    /* Megatron's recompute rules, before anything is loaded (ab's sides too); the layer count once the
     * config is read (trainer) */
    tdm_recompute rc;
    if (tdm_recompute_from_flags(a->recompute_granularity, a->recompute_method, a->recompute_num_layers, NULL, &rc,
                                 err) != 0)
        return -1;
    if (a->freeze_vision && a->freeze_projector && a->freeze_llm && a->freeze_lm_head)
        return tdm_errorf(err, "freeze flags: every part is frozen, nothing would train");
    return 0;
}

/* ------------------------------------------------------------------ printing */

/* A double the way Python's repr() prints it: the shortest digits that read back to
 * the same value; fixed notation for exponents in [-4, 16) with at least one decimal,
 * else "1e-08" style. */
static void py_float(double v, char *out, size_t cap) {
    if (v == 0) {
        snprintf(out, cap, signbit(v) ? "-0.0" : "0.0");
        return;
    }
    char tmp[64];
    int p = 1;
    for (; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, v);
        if (strtod(tmp, NULL) == v) break;
    }
    int exp10 = atoi(strchr(tmp, 'e') + 1);
    if (exp10 >= -4 && exp10 < 16) {
        int dec = p - 1 - exp10;
        if (dec < 1) dec = 1;
        snprintf(out, cap, "%.*f", dec, v);
        /* trim zeros beyond the shortest digits, keeping one decimal */
        char *dot = strchr(out, '.');
        char *e = out + strlen(out) - 1;
        while (e > dot + 1 && *e == '0') *e-- = 0;
    } else {
        snprintf(out, cap, "%.*e", p - 1, v);
    }
}

int tdm_train_args_count(void) { return N_ARGS; }

const char *tdm_train_args_name(int i) { return i >= 0 && i < N_ARGS ? ARGS[i].attr : NULL; }

const char *tdm_train_args_flag(const char *typed, size_t n) {
    const char *fixed;
    const arg_def *d = find_flag(typed, n, &fixed);
    return d ? d->flag : NULL;
}

void tdm_train_args_value(const tdm_train_args *a, int i, char *out, size_t cap) {
    if (cap == 0) return;
    out[0] = 0;
    if (i < 0 || i >= N_ARGS) return;
    const arg_def *d = &ARGS[i];
    const char *base = (const char *)a + d->off;
    switch (d->type) {
    case ARG_INT: {
        int v = *(const int *)base;
        if ((d->none_rule == NONE_IF_ZERO && v == 0) || (d->none_rule == NONE_IF_NEG && v < 0)) snprintf(out, cap, "None");
        else snprintf(out, cap, "%d", v);
        break;
    }
    case ARG_I64: {
        int64_t v = *(const int64_t *)base;
        if ((d->none_rule == NONE_IF_ZERO && v == 0) || (d->none_rule == NONE_IF_NEG && v < 0)) snprintf(out, cap, "None");
        else snprintf(out, cap, "%lld", (long long)v);
        break;
    }
    case ARG_U64: snprintf(out, cap, "%llu", (unsigned long long)*(const uint64_t *)base); break;
    case ARG_DBL: {
        double v = *(const double *)base;
        if ((d->none_rule == NONE_IF_ZERO && v == 0) || (d->none_rule == NONE_IF_NEG && v < 0)) snprintf(out, cap, "None");
        else py_float(v, out, cap);
        break;
    }
    case ARG_PATH: snprintf(out, cap, "%s", base[0] ? base : "None"); break;
    case ARG_CHOICE: snprintf(out, cap, "%s", base[0] ? base : "None"); break;
    case ARG_SWITCH:
    case ARG_NSWITCH: snprintf(out, cap, "%s", *(const int *)base ? "True" : "False"); break;
    case ARG_DATA: {
        const int valid = d->off == offsetof(tdm_train_args, valid_data);
        const int count = valid ? a->n_valid_data : a->n_data;
        if (count == 0) {
            snprintf(out, cap, "None");
            break;
        }
        size_t o = 0;
        o += (size_t)snprintf(out + o, cap - o, "[");
        for (int k = 0; k < count && o < cap; k++)
            o += (size_t)snprintf(out + o, cap - o, "%s'%s'", k ? ", " : "", valid ? a->valid_data[k] : a->data[k]);
        if (o < cap) snprintf(out + o, cap - o, "]");
        break;
    }
    case ARG_INJECT:
        if (a->inject_nan_iter <= 0) snprintf(out, cap, "None");
        else if (a->inject_nan_rank < 0) snprintf(out, cap, "%lld", (long long)a->inject_nan_iter);
        else snprintf(out, cap, "%lld:%d", (long long)a->inject_nan_iter, a->inject_nan_rank);
        break;
    }
}

typedef struct block_line {
    const char *name;
    int arg;            /* index into ARGS, or -1 for an extra */
    const char *value;  /* an extra's value */
} block_line;

static int cmp_line(const void *x, const void *y) {
    return strcasecmp(((const block_line *)x)->name, ((const block_line *)y)->name);
}

void tdm_train_args_format_block(const tdm_train_args *a, const tdm_args_extra *extra, int n_extra,
                                 tdm_strbuf *sb) {
    block_line *lines = tdm_xcalloc((size_t)(N_ARGS + n_extra), sizeof *lines);
    for (int i = 0; i < N_ARGS; i++) lines[i] = (block_line){ARGS[i].attr, i, NULL};
    for (int i = 0; i < n_extra; i++) lines[N_ARGS + i] = (block_line){extra[i].name, -1, extra[i].value};
    qsort(lines, (size_t)(N_ARGS + n_extra), sizeof *lines, cmp_line);
    tdm_sb_puts(sb, "------------------------ arguments ------------------------\n");
    char value[TDM_ARGS_PATH_MAX * TDM_ARGS_MAX_DATA + 64];
    for (int i = 0; i < N_ARGS + n_extra; i++) {
        if (lines[i].arg >= 0) tdm_train_args_value(a, lines[i].arg, value, sizeof value);
        /* Megatron: '.' * (48 - len(name)) */
        int dots = 48 - (int)strlen(lines[i].name);
        tdm_sb_printf(sb, "  %s ", lines[i].name);
        for (int k = 0; k < dots; k++) tdm_sb_putc(sb, '.');
        tdm_sb_printf(sb, " %s\n", lines[i].arg >= 0 ? value : lines[i].value);
    }
    tdm_sb_puts(sb, "-------------------- end of arguments ---------------------\n");
    free(lines);
}

void tdm_train_args_format_help(tdm_strbuf *sb) {
    tdm_sb_puts(sb, "  --config FILE                        JSON file of flags (keys = flag names); the command line wins\n");
    for (int i = 0; i < N_ARGS; i++) {
        const arg_def *d = &ARGS[i];
        char left[96];
        snprintf(left, sizeof left, "--%s%s%s", d->flag, d->meta ? " " : "", d->meta ? d->meta : "");
        tdm_sb_printf(sb, "  %-36s %s", left, d->help);
        if (d->def && !is_switch(d) && !(d->none_rule == NONE_IF_NEG && d->def[0] == '-'))
            tdm_sb_printf(sb, " (default %s)", d->def);
        tdm_sb_putc(sb, '\n');
    }
}

/* ------------------------------------------------------------------ fingerprint */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t tdm_train_args_fingerprint(const tdm_train_args *a) {
    /* attributes that change the numbers of a run; paths are compared by name only */
    static const char *const numeric[] = {
        "micro_batch_size", "global_batch_size", "seq_length", "lr", "min_lr", "lr_decay_style",
        "lr_warmup_iters", "lr_warmup_fraction", "lr_warmup_init", "lr_decay_iters", "lr_warmup_samples",
        "weight_decay",
        "adam_beta1", "adam_beta2", "adam_eps", "clip_grad", "seed", "freeze_vision", "freeze_projector",
        "freeze_llm", "freeze_lm_head", "vision_lr_mult", "data", "skip_bad_samples", "image_max_pixels",
        "image_min_pixels",
    };
    uint64_t h = 1469598103934665603ull;
    char value[TDM_ARGS_PATH_MAX * TDM_ARGS_MAX_DATA + 64];
    for (size_t k = 0; k < sizeof numeric / sizeof *numeric; k++) {
        for (int i = 0; i < N_ARGS; i++) {
            if (strcmp(ARGS[i].attr, numeric[k]) != 0) continue;
            tdm_train_args_value(a, i, value, sizeof value);
            h = fnv1a(h, ARGS[i].attr, strlen(ARGS[i].attr) + 1);
            h = fnv1a(h, value, strlen(value) + 1);
        }
    }
    /* later flags, hashed only away from their defaults: checkpoints written before they existed keep their
     * fingerprint */
    static tdm_train_args defaults_store; /* large: not on the stack */
    static int have_defaults;
    if (!have_defaults) tdm_train_args_defaults(&defaults_store), have_defaults = 1;
    const tdm_train_args *defaults = &defaults_store;
    static const char *const later[] = {"lr_wsd_decay_style", "lr_wsd_decay_iters", "lr_wsd_decay_samples",
                                        "start_weight_decay", "end_weight_decay", "weight_decay_incr_style",
                                        "bf16"};
    for (size_t k = 0; k < sizeof later / sizeof *later; k++) {
        for (int i = 0; i < N_ARGS; i++) {
            if (strcmp(ARGS[i].attr, later[k]) != 0) continue;
            tdm_train_args_value(a, i, value, sizeof value);
            char dflt[64];
            tdm_train_args_value(defaults, i, dflt, sizeof dflt);
            if (!strcmp(value, dflt)) continue;
            h = fnv1a(h, ARGS[i].attr, strlen(ARGS[i].attr) + 1);
            h = fnv1a(h, value, strlen(value) + 1);
        }
    }
    /* the schedule's span: without --lr-decay-iters it is --train-iters, so raising
     * --train-iters to train on changes every learning rate after the warm-up */
    int64_t span = a->train_samples > 0 ? (a->lr_decay_samples > 0 ? a->lr_decay_samples : a->train_samples)
                                        : (a->lr_decay_iters > 0 ? a->lr_decay_iters : a->train_iters);
    h = fnv1a(h, "lr_decay_span", sizeof "lr_decay_span");
    h = fnv1a(h, &span, sizeof span);
    /* an increasing weight decay spans the whole run (--train-iters x global batch, or --train-samples),
     * whatever --lr-decay-iters says: raising --train-iters changes every later weight decay (hashed only
     * with a non-constant style, so that other checkpoints keep their fingerprint) */
    if (strcmp(a->weight_decay_incr_style, "constant") != 0) {
        int64_t wd_span = a->train_samples > 0 ? a->train_samples : a->train_iters;
        h = fnv1a(h, "wd_incr_span", sizeof "wd_incr_span");
        h = fnv1a(h, &wd_span, sizeof wd_span);
    }
    return h;
}
