/* args.c - the flag table of `tandem train` and everything derived from it: parsing (core/flags.h), the
 * --config file, the arguments block, the (name, value) listing and the fingerprint. The checks across
 * flags are in args_validate.c. Longer than most files: about 300 of its lines are the flag table, data
 * that reads best in one place. */
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

/* Printing of "unset" values as Python's None (a flag's tag). */
enum { NONE_NEVER = 0, NONE_IF_ZERO = 1, NONE_IF_NEG = 2 };

#define BIG 9.0e15

/* One flag: its name as typed, Megatron's attribute name (as the arguments block prints it), kind, field,
 * range, None rule, default (parsed as a typed value), choices, metavar and help. */
#define ARG(flag, attr, kind_, field, lo_, hi_, none, def_, choices_, meta, help_)                                     \
    .name = flag, .key = attr, .kind = kind_, .off = offsetof(tdm_train_args, field),                                  \
    .cap = sizeof(((tdm_train_args *)0)->field), .lo = lo_, .hi = hi_, .tag = none, .def = def_, .choices = choices_,  \
    .metavar = meta, .help = help_
/* A repeatable list of dataset files and its count. */
#define LIST(flag, attr, field, count, meta, help_)                                                                    \
    .name = flag, .key = attr, .kind = TDM_FLAG_LIST, .off = offsetof(tdm_train_args, field),                          \
    .cap = TDM_ARGS_PATH_MAX, .count_off = offsetof(tdm_train_args, count), .max = TDM_ARGS_MAX_DATA, .metavar = meta, \
    .help = help_

static int set_inject(const tdm_flag *f, void *target, const char *val, const char *what, tdm_error *err);

static const tdm_flag ARGS[] = {
    /* model, weights, tokenizer, data */
    {ARG("model", "model", TDM_FLAG_PATH, model, 0, 0, NONE_NEVER, NULL, NULL, "DIR",
         "model directory (or file) holding a Hugging Face config.json"),
     .group = "model and data"},
    {ARG("pretrained", "pretrained", TDM_FLAG_PATH, pretrained, 0, 0, NONE_NEVER, NULL, NULL, "DIR",
         "initial weights: a Hugging Face directory of *.safetensors")},
    {ARG("hf-weights", "hf_weights", TDM_FLAG_PATH, hf_weights, 0, 0, NONE_NEVER, NULL, NULL, "FILE",
         "initial weights: one .safetensors file")},
    {ARG("tokenizer", "tokenizer", TDM_FLAG_PATH, tokenizer, 0, 0, NONE_NEVER, NULL, NULL, "FILE",
         "tokenizer.json (Hugging Face byte-level BPE), or a directory holding one")},
    {ARG("preprocessor", "preprocessor", TDM_FLAG_PATH, preprocessor, 0, 0, NONE_NEVER, NULL, NULL, "FILE",
         "preprocessor_config.json (default: the model directory's, else the built-in one)")},
    {LIST("data", "data", data, n_data, "FILE", "dataset JSON / JSON Lines (repeatable)")},
    {LIST("valid-data-path", "valid_data_path", valid_data, n_valid_data, "FILE",
          "validation dataset (repeatable): its loss is printed every --eval-interval iterations")},
    {ARG("image-root", "image_root", TDM_FLAG_PATH, image_root, 0, 0, NONE_NEVER, NULL, NULL, "DIR",
         "directory image paths resolve against (default: each dataset file's folder)")},
    {ARG("image-max-pixels", "image_max_pixels", TDM_FLAG_I64, image_max_pixels, 1, BIG, NONE_IF_ZERO, NULL, NULL, "N",
         "LLaMA-Factory's bound: scale a larger picture down to about N pixels before the processor (default: none)")},
    {ARG("image-min-pixels", "image_min_pixels", TDM_FLAG_I64, image_min_pixels, 1, BIG, NONE_IF_ZERO, NULL, NULL, "N",
         "LLaMA-Factory's bound: scale a smaller picture up to about N pixels before the processor (default: none)")},
    {ARG("skip-bad-samples", "skip_bad_samples", TDM_FLAG_BOOL, skip_bad_samples, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "skip and count malformed samples instead of stopping")},

    /* batch and length */
    {ARG("micro-batch-size", "micro_batch_size", TDM_FLAG_INT, micro_batch_size, 1, 1 << 20, NONE_NEVER, "1", NULL, "N",
         "samples per micro-batch per rank"),
     .group = "batch"},
    {ARG("global-batch-size", "global_batch_size", TDM_FLAG_INT, global_batch_size, 1, 1 << 24, NONE_IF_ZERO, NULL,
         NULL, "N", "samples per optimizer step over all ranks (default: --micro-batch-size x data-parallel size)")},
    {ARG("train-iters", "train_iters", TDM_FLAG_I64, train_iters, 1, BIG, NONE_IF_ZERO, NULL, NULL, "N",
         "optimizer steps to run (total, counting a resumed checkpoint's; default 100, or from --train-samples)")},
    {ARG("train-samples", "train_samples", TDM_FLAG_I64, train_samples, 1, BIG, NONE_IF_ZERO, NULL, NULL, "N",
         "samples to train on instead of --train-iters: --train-samples / --global-batch-size iterations, and the "
         "learning-rate schedule in samples (--lr-warmup-samples, --lr-decay-samples)")},
    {ARG("seq-length", "seq_length", TDM_FLAG_INT, seq_length, 8, 1 << 24, NONE_NEVER, "1024", NULL, "N",
         "maximum tokens of one sample")},

    /* learning rate */
    {ARG("lr", "lr", TDM_FLAG_DOUBLE, lr, 0, 10, NONE_NEVER, "0.0001", NULL, "LR", "peak learning rate"),
     .group = "learning rate"},
    {ARG("min-lr", "min_lr", TDM_FLAG_DOUBLE, min_lr, 0, 10, NONE_NEVER, "0.0", NULL, "LR",
         "learning rate at the end of the decay")},
    {ARG("lr-decay-style", "lr_decay_style", TDM_FLAG_CHOICE, lr_decay_style, 0, 0, NONE_NEVER, "linear",
         "constant|linear|cosine|inverse-square-root|WSD", "STYLE",
         "decay after warmup: constant, linear, cosine, inverse-square-root or WSD (warmup-stable-decay)")},
    {ARG("lr-warmup-iters", "lr_warmup_iters", TDM_FLAG_I64, lr_warmup_iters, 0, BIG, NONE_NEVER, "0", NULL, "N",
         "iterations of linear warmup")},
    {ARG("lr-warmup-fraction", "lr_warmup_fraction", TDM_FLAG_DOUBLE, lr_warmup_fraction, 0, 1, NONE_IF_NEG, "-1", NULL,
         "F", "warmup as a fraction of the decay span (instead of --lr-warmup-iters)")},
    {ARG("lr-warmup-init", "lr_warmup_init", TDM_FLAG_DOUBLE, lr_warmup_init, 0, 10, NONE_NEVER, "0.0", NULL, "LR",
         "learning rate at the start of warmup")},
    {ARG("lr-warmup-samples", "lr_warmup_samples", TDM_FLAG_I64, lr_warmup_samples, 0, BIG, NONE_NEVER, "0", NULL, "N",
         "with --train-samples: samples of linear warmup")},
    {ARG("lr-decay-samples", "lr_decay_samples", TDM_FLAG_I64, lr_decay_samples, 1, BIG, NONE_IF_ZERO, NULL, NULL, "N",
         "with --train-samples: samples over which to decay (default --train-samples)")},
    {ARG("lr-decay-iters", "lr_decay_iters", TDM_FLAG_I64, lr_decay_iters, 1, BIG, NONE_IF_ZERO, NULL, NULL, "N",
         "iterations over which to decay (default: --train-iters)")},
    {ARG("lr-wsd-decay-style", "lr_wsd_decay_style", TDM_FLAG_CHOICE, lr_wsd_decay_style, 0, 0, NONE_NEVER,
         "exponential", "exponential|linear|cosine|minus_sqrt", "STYLE", "WSD: the shape of the final decay")},
    {ARG("lr-wsd-decay-iters", "lr_wsd_decay_iters", TDM_FLAG_I64, lr_wsd_decay_iters, 1, BIG, NONE_IF_ZERO, NULL, NULL,
         "N", "WSD: iterations of the final decay, at the end of the decay span")},
    {ARG("lr-wsd-decay-samples", "lr_wsd_decay_samples", TDM_FLAG_I64, lr_wsd_decay_samples, 1, BIG, NONE_IF_ZERO, NULL,
         NULL, "N", "WSD with --train-samples: samples of the final decay")},

    /* optimizer */
    {ARG("weight-decay", "weight_decay", TDM_FLAG_DOUBLE, weight_decay, 0, 10, NONE_NEVER, "0.01", NULL, "WD",
         "AdamW decoupled weight decay (not applied to biases and norms)"),
     .group = "optimizer"},
    {ARG("start-weight-decay", "start_weight_decay", TDM_FLAG_DOUBLE, start_weight_decay, 0, 10, NONE_IF_NEG, "-1",
         NULL, "WD", "with --weight-decay-incr-style linear|cosine: the weight decay at the start")},
    {ARG("end-weight-decay", "end_weight_decay", TDM_FLAG_DOUBLE, end_weight_decay, 0, 10, NONE_IF_NEG, "-1", NULL,
         "WD", "with --weight-decay-incr-style linear|cosine: the weight decay at the last iteration")},
    {ARG("weight-decay-incr-style", "weight_decay_incr_style", TDM_FLAG_CHOICE, weight_decay_incr_style, 0, 0,
         NONE_NEVER, "constant", "constant|linear|cosine", "STYLE",
         "constant (--weight-decay throughout), or linear / cosine from --start- to --end-weight-decay over the run")},
    {ARG("adam-beta1", "adam_beta1", TDM_FLAG_DOUBLE, adam_beta1, 0, 0.999999, NONE_NEVER, "0.9", NULL, "B",
         "Adam beta1")},
    {ARG("adam-beta2", "adam_beta2", TDM_FLAG_DOUBLE, adam_beta2, 0, 0.999999999, NONE_NEVER, "0.999", NULL, "B",
         "Adam beta2")},
    {ARG("adam-eps", "adam_eps", TDM_FLAG_DOUBLE, adam_eps, 1e-30, 1, NONE_NEVER, "1e-08", NULL, "EPS",
         "Adam epsilon")},
    {ARG("clip-grad", "clip_grad", TDM_FLAG_DOUBLE, clip_grad, 0, 1e9, NONE_NEVER, "1.0", NULL, "C",
         "clip the global gradient norm to C (0 disables)")},
    {ARG("seed", "seed", TDM_FLAG_U64, seed, 0, 0, NONE_NEVER, "1234", NULL, "S",
         "seed of the initial weights and the sample order")},

    /* validation */
    {ARG("eval-interval", "eval_interval", TDM_FLAG_I64, eval_interval, 1, BIG, NONE_NEVER, "1000", NULL, "N",
         "iterations between validation-loss evaluations (with --valid-data-path; also at the end)"),
     .group = "validation"},
    {ARG("eval-iters", "eval_iters", TDM_FLAG_I64, eval_iters, 0, BIG, NONE_NEVER, "100", NULL, "N",
         "global batches of the validation set per evaluation (0: no validation)")},

    /* logging */
    {ARG("log-interval", "log_interval", TDM_FLAG_INT, log_interval, 1, 1 << 30, NONE_NEVER, "1", NULL, "N",
         "print the iteration line every N steps"),
     .group = "logging"},
    {ARG("timing-log-level", "timing_log_level", TDM_FLAG_INT, timing_log_level, 0, 2, NONE_NEVER, "0", NULL, "L",
         "0: none; 1: Megatron's step timers (min, max) across ranks (2: accepted, as 1)")},
    {ARG("timing-log-option", "timing_log_option", TDM_FLAG_CHOICE, timing_log_option, 0, 0, NONE_NEVER, "minmax",
         "max|minmax|all", "OPT",
         "with --timing-log-level 1: each timer's (min, max) across ranks, its max, or every rank's value")},
    {ARG("run-dir", "run_dir", TDM_FLAG_PATH, run_dir, 0, 0, NONE_NEVER, NULL, NULL, "DIR",
         "write metrics.jsonl here (with each step's fingerprint under --audit-fingerprints), and valid.jsonl")},
    {ARG("audit-fingerprints", "audit_fingerprints", TDM_FLAG_BOOL, audit_fingerprints, 0, 0, NONE_NEVER, NULL, NULL,
         NULL, "record each step's input fingerprint (hash of every rank's micro-batches)")},
    {ARG("tensorboard-dir", "tensorboard_dir", TDM_FLAG_PATH, tensorboard_dir, 0, 0, NONE_NEVER, NULL, NULL, "DIR",
         "write TensorBoard event files here (Megatron's scalars and tags; rank 0)")},
    {ARG("tensorboard-log-interval", "tensorboard_log_interval", TDM_FLAG_INT, tensorboard_log_interval, 1, 1 << 30,
         NONE_NEVER, "1", NULL, "N", "TensorBoard scalars every N iterations")},
    {ARG("log-timers-to-tensorboard", "log_timers_to_tensorboard", TDM_FLAG_BOOL, log_timers_to_tensorboard, 0, 0,
         NONE_NEVER, NULL, NULL, NULL,
         "also each step timer's max across ranks as 'NAME-time' (s per iteration) and 'iteration-time' (s)")},
    {ARG("log-validation-ppl-to-tensorboard", "log_validation_ppl_to_tensorboard", TDM_FLAG_BOOL,
         log_validation_ppl_to_tensorboard, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "also 'lm loss validation ppl' at every evaluation")},
    {ARG("no-log-loss-scale-to-tensorboard", "log_loss_scale_to_tensorboard", TDM_FLAG_BOOL,
         log_loss_scale_to_tensorboard, 0, 0, NONE_NEVER, NULL, NULL, NULL, "do not write 'loss-scale'"),
     .opts = TDM_FLAG_NEGATE},
    {ARG("no-log-learning-rate-to-tensorboard", "log_learning_rate_to_tensorboard", TDM_FLAG_BOOL,
         log_learning_rate_to_tensorboard, 0, 0, NONE_NEVER, NULL, NULL, NULL, "do not write 'learning-rate'"),
     .opts = TDM_FLAG_NEGATE},
    {ARG("log-world-size-to-tensorboard", "log_world_size_to_tensorboard", TDM_FLAG_BOOL, log_world_size_to_tensorboard,
         0, 0, NONE_NEVER, NULL, NULL, NULL, "also 'world-size'")},
    {ARG("log-throughput", "log_throughput", TDM_FLAG_BOOL, log_throughput, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "add the model FLOP/s per rank to the iteration line ('throughput' in TensorBoard with "
         "--log-timers-to-tensorboard)")},
    {ARG("log-params-norm", "log_params_norm", TDM_FLAG_BOOL, log_params_norm, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "add the L2 norm of the trained parameters after each step to the iteration line ('params-norm')")},
    {ARG("log-num-zeros-in-grad", "log_num_zeros_in_grad", TDM_FLAG_BOOL, log_num_zeros_in_grad, 0, 0, NONE_NEVER, NULL,
         NULL, NULL, "add the count of gradient elements equal to zero to the iteration line ('num-zeros')")},
    {ARG("profile-config", "profile_config", TDM_FLAG_PATH, profile_config, 0, 0, NONE_NEVER, NULL, NULL, "FILE",
         "profiler tool config (MindSpeed-MM tools.json 'profile' section)"),
     .aliases = "mm-tool"},

    /* checkpoints */
    {ARG("save", "save", TDM_FLAG_PATH, save, 0, 0, NONE_NEVER, NULL, NULL, "DIR", "checkpoint directory to write"),
     .group = "checkpoints"},
    {ARG("save-interval", "save_interval", TDM_FLAG_I64, save_interval, 0, BIG, NONE_IF_ZERO, NULL, NULL, "N",
         "save every N iterations (and at the end)")},
    {ARG("load", "load", TDM_FLAG_PATH, load, 0, 0, NONE_NEVER, NULL, NULL, "DIR",
         "checkpoint to resume from: a --save directory (its latest_checkpointed_iteration.txt) or one iter_XXXXXXX")},
    {ARG("no-load-optim", "no_load_optim", TDM_FLAG_BOOL, no_load_optim, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "with --load: do not load the optimizer state")},
    {ARG("finetune", "finetune", TDM_FLAG_BOOL, finetune, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "with --load: load the weights only and start at iteration 0")},
    {ARG("no-save-optim", "no_save_optim", TDM_FLAG_BOOL, no_save_optim, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "save weights without the optimizer state (resuming them needs --no-load-optim)")},
    {ARG("overwrite-save", "overwrite_save", TDM_FLAG_BOOL, overwrite_save, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "write into a --save folder that holds checkpoints this run does not --load (they are replaced as it saves)")},
    {ARG("no-save-rng", "no_save_rng", TDM_FLAG_BOOL, no_save_rng, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "accepted: a tandem checkpoint holds no RNG state (everything random follows --seed and the samples "
         "consumed)")},
    {ARG("no-load-rng", "no_load_rng", TDM_FLAG_BOOL, no_load_rng, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "accepted: a tandem checkpoint holds no RNG state to load")},
    {ARG("exit-signal-handler", "exit_signal_handler", TDM_FLAG_BOOL, exit_signal_handler, 0, 0, NONE_NEVER, NULL, NULL,
         NULL, "accepted: SIGTERM and SIGINT always save (with --save) and exit at the end of the step")},
    {ARG("override-opt-param-scheduler", "override_opt_param_scheduler", TDM_FLAG_BOOL, override_opt_param_scheduler, 0,
         0, NONE_NEVER, NULL, NULL, NULL,
         "with --load: the learning-rate schedule of these flags, not the checkpoint's (tandem's default too)")},
    {ARG("use-checkpoint-opt-param-scheduler", "use_checkpoint_opt_param_scheduler", TDM_FLAG_BOOL,
         use_checkpoint_opt_param_scheduler, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "with --load: the checkpoint's learning-rate schedule (peak, floor, warm-up, decay span and style)")},
    {ARG("exit-interval", "exit_interval", TDM_FLAG_I64, exit_interval, 0, BIG, NONE_IF_ZERO, NULL, NULL, "N",
         "stop (saving with --save) when the iteration is a multiple of N")},
    {ARG("check-weight-hash-across-dp-replicas-interval", "check_weight_hash_across_dp_replicas_interval", TDM_FLAG_I64,
         check_weight_hash_across_dp_replicas_interval, 1, BIG, NONE_IF_ZERO, NULL, NULL, "N",
         "every N iterations, check that every rank holds bitwise the same weights (stops naming the first tensor that "
         "differs)")},
    {ARG("exit-duration-in-mins", "exit_duration_in_mins", TDM_FLAG_DOUBLE, exit_duration_in_mins, 0, 1e9, NONE_IF_ZERO,
         NULL, NULL, "M", "stop (saving with --save) at the end of the first step after M minutes of running")},
    {ARG("exit-signal-file", "exit_signal_file", TDM_FLAG_PATH, exit_signal_file, 0, 0, NONE_NEVER, NULL, NULL, "PATH",
         "stop (saving with --save) at the end of the step, or the validation batch, in which PATH appears (it is then "
         "removed); works under every launcher")},

    /* precision */
    {ARG("bf16", "bf16", TDM_FLAG_BOOL, bf16, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "bfloat16 parameters, as Megatron's --bf16 keeps them: AdamW updates fp32 main parameters and rounds them to "
         "bfloat16, the weights are stored in 16 bits (widened to fp32 a layer at a time), gradients accumulate and "
         "reduce in fp32, the distributed optimizer all-gathers 16 bits per parameter; activations and matmuls stay "
         "float32"),
     .group = "precision"},

    /* data parallel */
    {ARG("use-distributed-optimizer", "use_distributed_optimizer", TDM_FLAG_BOOL, use_distributed_optimizer, 0, 0,
         NONE_NEVER, NULL, NULL, NULL, "shard the optimizer state over the data-parallel ranks (ZeRO-1)"),
     .group = "data parallel"},
    {ARG("overlap-grad-reduce", "overlap_grad_reduce", TDM_FLAG_BOOL, overlap_grad_reduce, 0, 0, NONE_NEVER, NULL, NULL,
         NULL, "start each bucket's gradient collective as soon as it is ready")},
    {ARG("overlap-param-gather", "overlap_param_gather", TDM_FLAG_BOOL, overlap_param_gather, 0, 0, NONE_NEVER, NULL,
         NULL, NULL, "all-gather parameters in the background of the next forward")},
    {ARG("ddp-bucket-size", "ddp_bucket_size", TDM_FLAG_I64, ddp_bucket_size, 1, BIG, NONE_IF_ZERO, NULL, NULL, "N",
         "bucket size in elements (default max(40M, 1M x dp))")},
    {ARG("ddp-num-buckets", "ddp_num_buckets", TDM_FLAG_INT, ddp_num_buckets, 1, 1 << 20, NONE_IF_ZERO, NULL, NULL, "N",
         "split the gradient buffer into about N buckets (instead of --ddp-bucket-size)")},
    {ARG("no-check-for-nan-in-grad", "check_for_nan_in_grad", TDM_FLAG_BOOL, check_for_nan_in_grad, 0, 0, NONE_NEVER,
         NULL, NULL, NULL,
         "do not check each bucket's gradients for NaN/Inf (Megatron's spelling: --no-check-for-nan-in-loss-and-grad)"),
     .opts = TDM_FLAG_NEGATE, .aliases = "no-check-for-nan-in-loss-and-grad"},
    {ARG("comm-progress", "comm_progress", TDM_FLAG_CHOICE, comm_progress, 0, 0, NONE_NEVER, "thread", "thread|inline",
         "MODE", "who progresses MPI: thread (a communication thread) or inline (the compute thread, between layers)")},
    {ARG("comm-thread-nice", "comm_thread_nice", TDM_FLAG_INT, comm_thread_nice, 0, 19, NONE_NEVER, "10", NULL, "N",
         "scheduling niceness of the communication thread (0-19; above 0 it yields busy cores to compute)")},
    {ARG("distributed-timeout-minutes", "distributed_timeout_minutes", TDM_FLAG_DOUBLE, distributed_timeout_minutes, 0,
         1e6, NONE_NEVER, "10", NULL, "M",
         "end the job when a collective (gradient buckets, parameter all-gathers, the step's sums, the start-up, "
         "validation and audit agreements; not rank 0's checkpoint save) waits longer than M minutes for a stuck rank "
         "(0: never)")},

    /* activation recomputation */
    {ARG("recompute-granularity", "recompute_granularity", TDM_FLAG_CHOICE, recompute_granularity, 0, 0, NONE_NEVER,
         NULL, "full|selective", "G",
         "full: run layers' forward again in the backward instead of keeping their activations; selective: the core "
         "attention only (flash attention keeps no scores: nothing to do)"),
     .group = "activation recomputation", .aliases = "recompute-activations=selective"},
    {ARG("recompute-method", "recompute_method", TDM_FLAG_CHOICE, recompute_method, 0, 0, NONE_NEVER, NULL,
         "uniform|block", "M",
         "with full: uniform = every layer, in groups of --recompute-num-layers keeping one input each; block = the "
         "first --recompute-num-layers layers")},
    {ARG("recompute-num-layers", "recompute_num_layers", TDM_FLAG_INT, recompute_num_layers, 1, 1 << 20, NONE_IF_ZERO,
         NULL, NULL, "N", "layers per recomputed group (uniform) or recomputed layers (block), per tower")},

    {ARG("no-prune-last-layer", "prune_last_layer", TDM_FLAG_BOOL, prune_last_layer, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "run the last decoder layer on every token, as PyTorch models do (by default it runs on the tokens whose "
         "target "
         "counts only: keys and values on every token; the same loss and gradients, for less work)"),
     .opts = TDM_FLAG_NEGATE, .group = "the last layer"},

    /* freezing */
    {ARG("freeze-vision", "freeze_vision", TDM_FLAG_BOOL, freeze_vision, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "freeze the vision tower (patch embedding, position table, blocks)"),
     .group = "freezing"},
    {ARG("freeze-projector", "freeze_projector", TDM_FLAG_BOOL, freeze_projector, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "freeze the merger and the DeepStack mergers")},
    {ARG("freeze-llm", "freeze_llm", TDM_FLAG_BOOL, freeze_llm, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "freeze the language model (and a tied lm_head)")},
    {ARG("freeze-lm-head", "freeze_lm_head", TDM_FLAG_BOOL, freeze_lm_head, 0, 0, NONE_NEVER, NULL, NULL, NULL,
         "freeze an untied lm_head (a tied one trains with the language model)")},

    {ARG("vision-lr-mult", "vision_lr_mult", TDM_FLAG_DOUBLE, vision_lr_mult, 0, 1000, NONE_NEVER, "1.0", NULL, "X",
         "the vision tower's learning rate is the schedule's times X (patch embedding, position table, blocks)"),
     .group = "per-part learning rate"},

    /* testing */
    {.name = "inject-nan-at",
     .key = "inject_nan_at",
     .kind = TDM_FLAG_CUSTOM,
     .set = set_inject,
     .metavar = "ITER[:RANK]",
     .help = "testing: poison one gradient at this iteration (on RANK, or all ranks)",
     .group = "testing"},
};
#define N_ARGS ((int)(sizeof ARGS / sizeof *ARGS))

/* --config FILE: applied before the other flags (tdm_train_args_parse), skipped where it stands. */
static int config_applied(const tdm_flag *f, void *target, const char *val, const char *what, tdm_error *err) {
    (void)f, (void)target, (void)val, (void)what, (void)err;
    return 0;
}

static const tdm_flag CONFIG[] = {
    {.name = "config",
     .kind = TDM_FLAG_CUSTOM,
     .set = config_applied,
     .metavar = "FILE",
     .help = "JSON file of flags (keys = flag names); the command line wins"},
};

/* Megatron / MindSpeed-MM flags that tandem does not take, and why: a launch script that passes them gets the
 * reason, not "unknown flag". Then the Megatron flags that ask for what tandem does anyway, accepted so that
 * launch scripts run as they are: switches, and sizes or rates accepted at the one value tandem has. */
#define NOT_TAKEN(flag, why)                                                                                           \
    { .name = flag, .kind = TDM_FLAG_REFUSED, .help = "not a tandem flag; " why }
#define ALREADY(flag, why)                                                                                             \
    { .name = flag, .kind = TDM_FLAG_FIXED, .help = why }
#define ONLY(flag, value, why)                                                                                         \
    { .name = flag, .kind = TDM_FLAG_FIXED, .def = value, .help = why }
static const tdm_flag COMPAT[] = {
    NOT_TAKEN("fp16",
              "tandem trains in float32, or with bfloat16 parameters (--bf16); fp16 needs loss scaling, which it "
              "does not have: drop it or use --bf16"),
    NOT_TAKEN("sequence-parallel", "tandem has data parallelism only: drop it"),
    NOT_TAKEN("num-layers", "the architecture comes from --model's config.json: drop it"),
    NOT_TAKEN("hidden-size", "the architecture comes from --model's config.json: drop it"),
    NOT_TAKEN("ffn-hidden-size", "the architecture comes from --model's config.json: drop it"),
    NOT_TAKEN("num-attention-heads", "the architecture comes from --model's config.json: drop it"),
    NOT_TAKEN("num-query-groups", "the architecture comes from --model's config.json: drop it"),
    NOT_TAKEN("group-query-attention", "the architecture comes from --model's config.json: drop it"),
    NOT_TAKEN("max-position-embeddings", "the architecture comes from --model's config.json: drop it"),
    NOT_TAKEN("position-embedding-type", "the architecture comes from --model's config.json: drop it"),
    NOT_TAKEN("rotary-base", "the architecture comes from --model's config.json: drop it"),
    NOT_TAKEN("normalization", "the architecture comes from --model's config.json: drop it"),
    NOT_TAKEN("norm-epsilon", "the architecture comes from --model's config.json: drop it"),
    NOT_TAKEN("swiglu", "the architecture comes from --model's config.json: drop it"),
    NOT_TAKEN("untie-embeddings-and-output-weights",
              "the architecture comes from --model's config.json (tie_word_embeddings): drop it"),
    NOT_TAKEN("disable-bias-linear", "the architecture comes from --model's config.json: drop it"),
    NOT_TAKEN("make-vocab-size-divisible-by", "the vocabulary size comes from --model's config.json: drop it"),
    NOT_TAKEN("tokenizer-type", "give --tokenizer FILE (a Hugging Face tokenizer.json)"),
    NOT_TAKEN("tokenizer-model", "give --tokenizer FILE (a Hugging Face tokenizer.json)"),
    NOT_TAKEN("mm-data",
              "MindSpeed-MM's data.json: give its dataset files with --data and the preprocessor with --preprocessor"),
    NOT_TAKEN("mm-model",
              "MindSpeed-MM's model.json: give the Hugging Face model directory with --model, and the freezing with "
              "--freeze-vision / --freeze-projector / --freeze-llm"),
    NOT_TAKEN("num-workers",
              "tandem reads and decodes data in one loader thread per rank, ahead of the steps: drop it"),
    NOT_TAKEN("ckpt-format", "tandem writes one format (Megatron-style directories of safetensors): drop it"),
    NOT_TAKEN("tensorboard-queue-size", "every TensorBoard event is flushed as it is written (no queue): drop it"),
    NOT_TAKEN("distributed-backend", "tandem's distributed engine is MPI (launch it with mpirun): drop it"),
    NOT_TAKEN("reuse-fp32-param",
              "tandem keeps --bf16's fp32 main parameters apart from the 16-bit weights, without sharing their "
              "memory as MindSpeed does: drop it"),
    NOT_TAKEN("swap-attention",
              "activations stay in host memory already; --recompute-granularity full trades compute for their "
              "memory: drop it"),
    NOT_TAKEN("padded-vocab-size", "the vocabulary size comes from --model's config.json: drop it"),
    NOT_TAKEN("rotary-percent", "the architecture comes from --model's config.json: drop it"),
    NOT_TAKEN("use-rotary-position-embeddings", "the architecture comes from --model's config.json: drop it"),
    ONLY("tensor-model-parallel-size", "1", "tandem has data parallelism only"),
    ONLY("pipeline-model-parallel-size", "1", "tandem has data parallelism only"),
    ONLY("context-parallel-size", "1", "tandem has data parallelism only"),
    ONLY("expert-model-parallel-size", "1", "tandem has data parallelism only"),
    ONLY("attention-dropout", "0",
         "tandem trains without dropout (a config.json attention_dropout above 0 is refused)"),
    ONLY("hidden-dropout", "0", "tandem trains without dropout"),
    ALREADY("use-mcore-models", "one implementation of the model"),
    ALREADY("use-flash-attn", "the attention is always flash-style"),
    ALREADY("use-fused-rmsnorm", "always fused"),
    ALREADY("use-fused-swiglu", "always fused"),
    ALREADY("no-gradient-accumulation-fusion", "CUDA fusions: nothing to turn off"),
    ALREADY("no-masked-softmax-fusion", "CUDA fusions: nothing to turn off"),
    ALREADY("no-bias-swiglu-fusion", "CUDA fusions: nothing to turn off"),
    ALREADY("no-rope-fusion", "CUDA fusions: nothing to turn off"),
    ALREADY("attention-softmax-in-fp32", "every activation is float32"),
    ALREADY("accumulate-allreduce-grads-in-fp32", "the gradient buffer is fp32, with --bf16 too"),
    ALREADY("variable-seq-lengths", "samples of any length are packed"),
    ALREADY("calculate-per-token-loss", "the loss is summed over the global batch's tokens / their count"),
    ALREADY("use-fused-rotary-pos-emb", "RoPE is applied in one pass"),
    ALREADY("trust-remote-code", "config.json is read as data; no code is run"),
    ALREADY("no-create-attention-mask-in-dataloader", "packed samples need no mask tensor"),
    ONLY("init-method-std", "0.02",
         "initial weights are drawn with std 0.02 (Qwen3-VL's initializer_range; the vision position table at 0.02 x "
         "sqrt(patch size), docs/learning.md)"),
};

static const tdm_flag_table MORE[] = {{ARGS, N_ARGS}, {COMPAT, (int)(sizeof COMPAT / sizeof *COMPAT)}};
static const tdm_flags TRAIN = {
    .command = "tandem train",
    .usage = "mpirun -np N tandem train --model DIR --tokenizer FILE --data FILE [flags]",
    .about = "Megatron-LM's flag names; --flag VALUE or --flag=VALUE; --config FILE reads flags from JSON.",
    .flags = CONFIG,
    .n_flags = 1,
    .more = MORE,
    .n_more = 2,
};

const tdm_flags *tdm_train_args_parser(void) { return &TRAIN; }

const tdm_flag *tdm_train_args_spec(const char *name) {
    return tdm_flag_lookup(ARGS, N_ARGS, name, strlen(name), NULL);
}

/* --inject-nan-at ITER[:RANK] */
static int set_inject(const tdm_flag *f, void *target, const char *val, const char *what, tdm_error *err) {
    (void)f;
    tdm_train_args *a = target;
    char buf[64];
    if (strlen(val) >= sizeof buf) return tdm_errorf(err, "%s: expected ITER[:RANK], got '%s'", what, val);
    strcpy(buf, val);
    char *colon = strchr(buf, ':');
    int64_t it, rank = -1;
    if (colon) *colon = 0;
    if (tdm_flag_parse_int(buf, &it) != 0 || it < 1 ||
        (colon && (tdm_flag_parse_int(colon + 1, &rank) != 0 || rank < 0 || rank > 1 << 20)))
        return tdm_errorf(err, "%s: expected ITER[:RANK] with ITER >= 1, got '%s'", what, val);
    a->inject_nan_iter = it;
    a->inject_nan_rank = (int)rank;
    return 0;
}

void tdm_train_args_defaults(tdm_train_args *a) {
    memset(a, 0, sizeof *a);
    a->check_for_nan_in_grad = 1;
    a->prune_last_layer = 1;
    a->log_loss_scale_to_tensorboard = 1;
    a->log_learning_rate_to_tensorboard = 1;
    a->inject_nan_rank = -1;
    tdm_flags_defaults(&TRAIN, a);
}

/* ------------------------------------------------------------------ command line */

static int is_switch(const tdm_flag *d) { return d->kind == TDM_FLAG_BOOL || (d->kind == TDM_FLAG_FIXED && !d->def); }

int tdm_train_args_parse(tdm_train_args *a, int argc, char **argv, tdm_error *err) {
    /* the config file first, so the command line wins */
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (strncmp(s, "--", 2) != 0) continue;
        const char *name = s + 2;
        const char *eq = strchr(name, '=');
        size_t n = eq ? (size_t)(eq - name) : strlen(name);
        if (!tdm_flag_lookup(CONFIG, 1, name, n, NULL)) continue;
        const char *path = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
        if (!path) return tdm_errorf(err, "--config: expected a file name after it");
        if (tdm_train_args_load_config(a, path, err) != 0) return -1;
    }
    int rc = tdm_flags_parse(&TRAIN, a, argc, argv, NULL, NULL, err);
    if (rc > 0) /* the command answers --help and --version before it reads flags */
        return tdm_errorf(err, "unexpected '%s' among the flags (tandem train --help lists them)",
                          rc == TDM_FLAGS_HELP ? "--help" : "--version");
    return rc;
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
        size_t n = strlen(name);
        if (tdm_flag_lookup(CONFIG, 1, name, n, NULL)) {
            tdm_errorf(err, "%s: a config file cannot name another config file (--config files do not nest)", what);
            goto out;
        }
        const char *implied; /* Megatron's --recompute-activations: --recompute-granularity selective */
        const tdm_flag *d = tdm_flags_find(&TRAIN, name, n, &implied);
        if (!d || d->kind == TDM_FLAG_REFUSED) {
            char where[1100];
            snprintf(where, sizeof where, "%s: ", path);
            tdm_flags_unknown(&TRAIN, name, n, where, err);
            goto out;
        }
        if (implied) { /* as on the command line: a switch */
            if (v->type != TDM_JSON_TRUE && v->type != TDM_JSON_FALSE && v->type != TDM_JSON_NULL) {
                tdm_errorf(err, "%s: expected true or false", what);
                goto out;
            }
            if (v->type == TDM_JSON_TRUE && tdm_flag_set(d, a, implied, what, err) != 0) goto out;
            continue;
        }
        char num[64];
        const char *val = NULL;
        if (d->kind == TDM_FLAG_LIST) { /* a string or an array of them; replaces the list */
            *(int *)(void *)((char *)a + d->count_off) = 0;
            if (v->type == TDM_JSON_STRING) {
                if (tdm_flag_set(d, a, v->str, what, err) != 0) goto out;
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
                if (tdm_flag_set(d, a, v->items[j]->str, what, err) != 0) goto out;
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
        if (tdm_flag_set(d, a, val, what, err) != 0) goto out;
    }
    rc = 0;
out:
    tdm_json_free(doc);
    return rc;
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

const char *tdm_train_args_name(int i) { return i >= 0 && i < N_ARGS ? ARGS[i].key : NULL; }

const char *tdm_train_args_flag(const char *typed, size_t n) {
    const tdm_flag *d = tdm_flag_lookup(ARGS, N_ARGS, typed, n, NULL);
    return d ? d->name : NULL;
}

static int is_none(const tdm_flag *d, double v) {
    return (d->tag == NONE_IF_ZERO && v == 0) || (d->tag == NONE_IF_NEG && v < 0);
}

void tdm_train_args_value(const tdm_train_args *a, int i, char *out, size_t cap) {
    if (cap == 0) return;
    out[0] = 0;
    if (i < 0 || i >= N_ARGS) return;
    const tdm_flag *d = &ARGS[i];
    const char *base = (const char *)a + d->off;
    switch (d->kind) {
    case TDM_FLAG_INT: {
        int v = *(const int *)base;
        if (is_none(d, v)) snprintf(out, cap, "None");
        else snprintf(out, cap, "%d", v);
        break;
    }
    case TDM_FLAG_I64: {
        int64_t v = *(const int64_t *)base;
        if (is_none(d, (double)v)) snprintf(out, cap, "None");
        else snprintf(out, cap, "%lld", (long long)v);
        break;
    }
    case TDM_FLAG_U64: snprintf(out, cap, "%llu", (unsigned long long)*(const uint64_t *)base); break;
    case TDM_FLAG_DOUBLE: {
        double v = *(const double *)base;
        if (is_none(d, v)) snprintf(out, cap, "None");
        else py_float(v, out, cap);
        break;
    }
    case TDM_FLAG_STRING:
    case TDM_FLAG_PATH:
    case TDM_FLAG_CHOICE: snprintf(out, cap, "%s", base[0] ? base : "None"); break;
    case TDM_FLAG_BOOL: snprintf(out, cap, "%s", *(const int *)base ? "True" : "False"); break;
    case TDM_FLAG_LIST: {
        const int count = *(const int *)(const void *)((const char *)a + d->count_off);
        if (count == 0) {
            snprintf(out, cap, "None");
            break;
        }
        size_t o = 0;
        o += (size_t)snprintf(out + o, cap - o, "[");
        for (int k = 0; k < count && o < cap; k++)
            o += (size_t)snprintf(out + o, cap - o, "%s'%s'", k ? ", " : "", base + (size_t)k * d->cap);
        if (o < cap) snprintf(out + o, cap - o, "]");
        break;
    }
    case TDM_FLAG_CUSTOM: /* --inject-nan-at */
        if (a->inject_nan_iter <= 0) snprintf(out, cap, "None");
        else if (a->inject_nan_rank < 0) snprintf(out, cap, "%lld", (long long)a->inject_nan_iter);
        else snprintf(out, cap, "%lld:%d", (long long)a->inject_nan_iter, a->inject_nan_rank);
        break;
    case TDM_FLAG_FIXED:
    case TDM_FLAG_REFUSED: break; /* not in ARGS */
    }
}

typedef struct block_line {
    const char *name;
    int arg;           /* index into ARGS, or -1 for an extra */
    const char *value; /* an extra's value */
} block_line;

static int cmp_line(const void *x, const void *y) {
    return strcasecmp(((const block_line *)x)->name, ((const block_line *)y)->name);
}

void tdm_train_args_format_block(const tdm_train_args *a, const tdm_args_extra *extra, int n_extra, tdm_strbuf *sb) {
    block_line *lines = tdm_xcalloc((size_t)(N_ARGS + n_extra), sizeof *lines);
    for (int i = 0; i < N_ARGS; i++) lines[i] = (block_line){ARGS[i].key, i, NULL};
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

void tdm_train_args_format_help(tdm_strbuf *sb) { tdm_flags_format_flags(&TRAIN, sb); }

/* ------------------------------------------------------------------ fingerprint */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* The "key=value" lines behind the last fingerprints this process computed (a checkpoint stores them
 * beside the fingerprint, so that a resume can name what differs). */
enum { N_REMEMBERED = 4 };
static struct {
    uint64_t fingerprint;
    char *values;
} remembered[N_REMEMBERED];
static int remembered_next;

const char *tdm_train_args_numeric_values(uint64_t fingerprint) {
    for (int k = 0; k < N_REMEMBERED; k++)
        if (remembered[k].values && remembered[k].fingerprint == fingerprint) return remembered[k].values;
    return NULL;
}

static void remember(uint64_t fingerprint, tdm_strbuf *values) {
    if (tdm_train_args_numeric_values(fingerprint)) {
        tdm_sb_free(values);
        return;
    }
    free(remembered[remembered_next].values);
    remembered[remembered_next].fingerprint = fingerprint;
    remembered[remembered_next].values = values->data; /* taken over */
    remembered_next = (remembered_next + 1) % N_REMEMBERED;
}

/* The flag of a fingerprint key ("lr" -> "--lr"); the schedule's spans by what sets them. */
static const char *flag_of_key(const char *key) {
    if (!strcmp(key, "lr_decay_span")) return "the learning-rate decay span (--lr-decay-iters, else --train-iters)";
    if (!strcmp(key, "wd_incr_span")) return "the weight-decay span (--train-iters or --train-samples)";
    for (int i = 0; i < N_ARGS; i++)
        if (!strcmp(ARGS[i].key, key)) return ARGS[i].name;
    return key;
}

/* The value of key in "key=value" lines, or NULL; its length in *n. */
static const char *line_value(const char *lines, const char *key, size_t *n) {
    size_t kl = strlen(key);
    for (const char *p = lines; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len > kl && !strncmp(p, key, kl) && p[kl] == '=') {
            *n = len - kl - 1;
            return p + kl + 1;
        }
        p = nl ? nl + 1 : NULL;
    }
    return NULL;
}

/* Appends "--flag SAVED -> NOW" for each key whose value differs between two sets of lines
 * ("(default)" for a key one side leaves out), separated by "; ". */
static void diff_lines(const char *saved, const char *now, const char *walk, int walk_is_saved, tdm_strbuf *out) {
    for (const char *p = walk; p && *p;) {
        const char *nl = strchr(p, '\n'), *eq = strchr(p, '=');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (eq && eq < p + len) {
            char key[96];
            snprintf(key, sizeof key, "%.*s", (int)(eq - p), p);
            size_t na = 0, nb = 0;
            const char *va = line_value(saved, key, &na), *vb = line_value(now, key, &nb);
            int seen_before = !walk_is_saved && va; /* listed while walking the saved lines */
            if (!seen_before && (!va || !vb || na != nb || memcmp(va, vb, na) != 0)) {
                if (out->len) tdm_sb_puts(out, "; ");
                tdm_sb_printf(out, "%s %.*s -> %.*s", flag_of_key(key), va ? (int)na : 9, va ? va : "(default)",
                              vb ? (int)nb : 9, vb ? vb : "(default)");
            }
        }
        p = nl ? nl + 1 : NULL;
    }
}

void tdm_train_args_numeric_diff(const char *saved, const char *now, tdm_strbuf *out) {
    diff_lines(saved, now, saved, 1, out);
    diff_lines(saved, now, now, 0, out);
}

uint64_t tdm_train_args_fingerprint(const tdm_train_args *a) {
    /* attributes that change the numbers of a run; paths are compared by name only */
    tdm_strbuf lines;
    tdm_sb_init(&lines);
    static const char *const numeric[] = {
        "micro_batch_size",
        "global_batch_size",
        "seq_length",
        "lr",
        "min_lr",
        "lr_decay_style",
        "lr_warmup_iters",
        "lr_warmup_fraction",
        "lr_warmup_init",
        "lr_decay_iters",
        "lr_warmup_samples",
        "weight_decay",
        "adam_beta1",
        "adam_beta2",
        "adam_eps",
        "clip_grad",
        "seed",
        "freeze_vision",
        "freeze_projector",
        "freeze_llm",
        "freeze_lm_head",
        "vision_lr_mult",
        "data",
        "skip_bad_samples",
        "image_max_pixels",
        "image_min_pixels",
    };
    uint64_t h = 1469598103934665603ull;
    char value[TDM_ARGS_PATH_MAX * TDM_ARGS_MAX_DATA + 64];
    for (size_t k = 0; k < sizeof numeric / sizeof *numeric; k++) {
        for (int i = 0; i < N_ARGS; i++) {
            if (strcmp(ARGS[i].key, numeric[k]) != 0) continue;
            tdm_train_args_value(a, i, value, sizeof value);
            h = fnv1a(h, ARGS[i].key, strlen(ARGS[i].key) + 1);
            h = fnv1a(h, value, strlen(value) + 1);
            tdm_sb_printf(&lines, "%s=%s\n", ARGS[i].key, value);
        }
    }
    /* later flags, hashed only away from their defaults: checkpoints written before they existed keep their
     * fingerprint */
    static tdm_train_args defaults_store; /* large: not on the stack */
    static int have_defaults;
    if (!have_defaults) tdm_train_args_defaults(&defaults_store), have_defaults = 1;
    const tdm_train_args *defaults = &defaults_store;
    static const char *const later[] = {"lr_wsd_decay_style",
                                        "lr_wsd_decay_iters",
                                        "lr_wsd_decay_samples",
                                        "start_weight_decay",
                                        "end_weight_decay",
                                        "weight_decay_incr_style",
                                        "bf16"};
    for (size_t k = 0; k < sizeof later / sizeof *later; k++) {
        for (int i = 0; i < N_ARGS; i++) {
            if (strcmp(ARGS[i].key, later[k]) != 0) continue;
            tdm_train_args_value(a, i, value, sizeof value);
            char dflt[64];
            tdm_train_args_value(defaults, i, dflt, sizeof dflt);
            if (!strcmp(value, dflt)) continue;
            h = fnv1a(h, ARGS[i].key, strlen(ARGS[i].key) + 1);
            h = fnv1a(h, value, strlen(value) + 1);
            tdm_sb_printf(&lines, "%s=%s\n", ARGS[i].key, value);
        }
    }
    /* the schedule's span: without --lr-decay-iters it is --train-iters, so raising
     * --train-iters to train on changes every learning rate after the warm-up */
    int64_t span = a->train_samples > 0 ? (a->lr_decay_samples > 0 ? a->lr_decay_samples : a->train_samples)
                                        : (a->lr_decay_iters > 0 ? a->lr_decay_iters : a->train_iters);
    h = fnv1a(h, "lr_decay_span", sizeof "lr_decay_span");
    h = fnv1a(h, &span, sizeof span);
    tdm_sb_printf(&lines, "lr_decay_span=%lld\n", (long long)span);
    /* an increasing weight decay spans the whole run (--train-iters x global batch, or --train-samples),
     * whatever --lr-decay-iters says: raising --train-iters changes every later weight decay (hashed only
     * with a non-constant style, so that other checkpoints keep their fingerprint) */
    if (strcmp(a->weight_decay_incr_style, "constant") != 0) {
        int64_t wd_span = a->train_samples > 0 ? a->train_samples : a->train_iters;
        h = fnv1a(h, "wd_incr_span", sizeof "wd_incr_span");
        h = fnv1a(h, &wd_span, sizeof wd_span);
        tdm_sb_printf(&lines, "wd_incr_span=%lld\n", (long long)wd_span);
    }
    remember(h, &lines);
    return h;
}
