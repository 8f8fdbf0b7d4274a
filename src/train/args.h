/* args.h - `tandem train` flags with Megatron-LM's names, parsed into one struct.
 *
 *   tdm_train_args a;
 *   tdm_train_args_defaults(&a);
 *   if (tdm_train_args_parse(&a, argc - 1, argv + 1, &err) != 0) ...   // --config FILE, then the command line
 *   tdm_train_args_resolve(&a, dp);                                    // defaults that depend on the dp size
 *   if (tdm_train_args_validate(&a, dp, &err) != 0) ...               // cross-flag rules, needs the dp size
 *   tdm_strbuf sb; tdm_sb_init(&sb); tdm_train_args_format_block(&a, &sb);  // Megatron's arguments block
 *
 * One table (args.c) describes every flag: its name, type, range, default and help, read by the
 * parser every command uses (core/flags.h). Parsing, the --config JSON file, --help, the arguments
 * block and the (name, value) listing that the A/B driver diffs all come from that table, so they
 * cannot disagree.
 *
 * Values are given as `--flag VALUE` or `--flag=VALUE`; switches take no value (or
 * `--switch=true|false`). In a --config file the keys are the flag names without the
 * leading dashes, with '-' or '_' ("micro_batch_size" or "micro-batch-size"); switches
 * are JSON booleans, `data` may be a string or an array of strings. The command line
 * wins over the file. Parsing applies flags ON TOP of the struct's current values, so
 * a caller can parse common flags first and then one side's flags (the A/B driver).
 */
#ifndef TDM_TRAIN_ARGS_H
#define TDM_TRAIN_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/flags.h"
#include "core/strbuf.h"

#define TDM_ARGS_PATH_MAX 1024
#define TDM_ARGS_MAX_DATA 16

typedef struct tdm_train_args {
    /* model, weights, tokenizer, data */
    char model[TDM_ARGS_PATH_MAX];        /* directory (or file) with config.json */
    char pretrained[TDM_ARGS_PATH_MAX];   /* HF directory with *.safetensors: initial weights */
    char hf_weights[TDM_ARGS_PATH_MAX];   /* one .safetensors file: initial weights */
    char tokenizer[TDM_ARGS_PATH_MAX];    /* tokenizer.json */
    char preprocessor[TDM_ARGS_PATH_MAX]; /* preprocessor_config.json ("" = model dir's, else built-in) */
    char data[TDM_ARGS_MAX_DATA][TDM_ARGS_PATH_MAX];
    int n_data;
    char valid_data[TDM_ARGS_MAX_DATA][TDM_ARGS_PATH_MAX]; /* --valid-data-path: the validation set */
    int n_valid_data;
    char image_root[TDM_ARGS_PATH_MAX]; /* "" = each dataset file's folder */
    int skip_bad_samples;
    int64_t image_max_pixels, image_min_pixels; /* LLaMA-Factory's pre-processor bounds; 0 = none */

    /* batch and length */
    int micro_batch_size;         /* samples per micro-batch per rank */
    int global_batch_size;        /* samples per optimizer step, all ranks; 0: micro x dp */
    int64_t train_iters;          /* 0 until resolved: 100, or from --train-samples */
    int64_t train_samples;        /* --train-samples; 0 = iteration-based */
    int train_iters_from_samples; /* set by tdm_train_args_resolve (not a flag) */
    int seq_length;               /* token cap per sample */

    /* learning rate (Megatron's OptimizerParamScheduler) */
    double lr, min_lr;
    char lr_decay_style[24]; /* constant | linear | cosine | inverse-square-root | WSD */
    int64_t lr_warmup_iters;
    double lr_warmup_fraction; /* < 0: not given */
    double lr_warmup_init;
    int64_t lr_decay_iters;                           /* 0: = train_iters */
    char lr_wsd_decay_style[32];                      /* WSD's final decay: exponential|linear|cosine|minus_sqrt */
    int64_t lr_wsd_decay_iters, lr_wsd_decay_samples; /* its length; 0: unset */
    double start_weight_decay, end_weight_decay;      /* < 0: unset (both --weight-decay) */
    char weight_decay_incr_style[16];                 /* constant|linear|cosine */
    int64_t lr_warmup_samples, lr_decay_samples;      /* with --train-samples (decay 0: = train_samples) */

    /* AdamW and clipping */
    double weight_decay, adam_beta1, adam_beta2, adam_eps, clip_grad;
    double vision_lr_mult; /* --vision-lr-mult: learning-rate multiplier of the vision tower */
    uint64_t seed;

    /* validation (with --valid-data-path) */
    int64_t eval_interval; /* evaluate every N iterations */
    int64_t eval_iters;    /* global batches per evaluation; 0 = none */

    /* logging */
    int log_interval;
    int timing_log_level;
    char timing_log_option[8];       /* minmax | max | all (Megatron's --timing-log-option) */
    char run_dir[TDM_ARGS_PATH_MAX]; /* metrics.jsonl goes here ("" = none) */
    int audit_fingerprints;
    char profile_config[TDM_ARGS_PATH_MAX];
    char tensorboard_dir[TDM_ARGS_PATH_MAX]; /* "" = no event files */
    int tensorboard_log_interval;
    int log_timers_to_tensorboard, log_validation_ppl_to_tensorboard, log_loss_scale_to_tensorboard;
    int log_world_size_to_tensorboard;
    int log_learning_rate_to_tensorboard; /* 'learning-rate' (Megatron's default; --no-log-learning-rate-...) */
    int log_throughput;                   /* "throughput per GPU (TFLOP/s/GPU)" in the iteration line */
    int log_params_norm;                  /* "params norm" (trained parameters, after the step) */
    int log_num_zeros_in_grad;            /* "num zeros" (gradient elements equal to 0, before clipping) */

    /* checkpoints */
    char save[TDM_ARGS_PATH_MAX];
    int64_t save_interval; /* 0: only at the end / on a signal */
    char load[TDM_ARGS_PATH_MAX];
    int no_load_optim;
    int finetune;                                          /* load weights only; start at iteration 0 */
    int64_t exit_interval;                                 /* stop (saving) when iteration % exit_interval == 0 */
    char exit_signal_file[TDM_ARGS_PATH_MAX];              /* stop (saving) once this file exists; "" = none */
    double exit_duration_in_mins;                          /* stop (saving) once a rank has run this long; 0 = never */
    int64_t check_weight_hash_across_dp_replicas_interval; /* compare the weights of all ranks every N; 0: never */
    int no_save_optim;                                     /* checkpoints without optimizer.safetensors */
    int overwrite_save;                                    /* --save may hold checkpoints this run did not --load */
    int override_opt_param_scheduler;                      /* with --load: these flags' schedule (the default here) */
    int use_checkpoint_opt_param_scheduler;                /* with --load: the checkpoint's schedule */
    int no_save_rng, no_load_rng, exit_signal_handler;     /* Megatron's; what tandem does anyway */

    /* precision */
    int bf16; /* bfloat16 parameters, fp32 main parameters and gradients */

    /* data parallel */
    int use_distributed_optimizer;
    int overlap_grad_reduce;
    int overlap_param_gather;
    int64_t ddp_bucket_size; /* elements; 0 = Megatron's default */
    int ddp_num_buckets;     /* 0 = not given */
    int check_for_nan_in_grad;
    char comm_progress[16];             /* thread | inline */
    int comm_thread_nice;               /* 0-19 */
    double distributed_timeout_minutes; /* 0: wait forever */

    /* activation recomputation (Megatron's; "" = none) */
    char recompute_granularity[16]; /* full | selective */
    char recompute_method[16];      /* uniform | block (with full) */
    int recompute_num_layers;       /* with full; 0 = not given */
    int prune_last_layer;           /* the last decoder layer on the loss's rows only (default 1) */

    /* freezing */
    int freeze_vision, freeze_projector, freeze_llm, freeze_lm_head;

    /* testing */
    int64_t inject_nan_iter; /* 0 = off */
    int inject_nan_rank;     /* -1 = every rank */
} tdm_train_args;

/* Every field to its default (the table in args.c; Megatron's defaults where Megatron has one). */
void tdm_train_args_defaults(tdm_train_args *a);

/* Parses argv[0..argc) (flags only, no program name). A `--config FILE` anywhere in
 * argv is applied first, then the other flags in order. Errors name the flag and what
 * was expected; an unknown flag suggests the closest known name. `--help` and `--version`
 * are not flags here: the command answers them first (tdm_flags_wants on the parser). */
int tdm_train_args_parse(tdm_train_args *a, int argc, char **argv, tdm_error *err);

/* Splits a shell-like string ("--lr 1e-3 --overlap-grad-reduce", single and double
 * quotes group words) and parses it like tdm_train_args_parse. */
int tdm_train_args_parse_string(tdm_train_args *a, const char *flags, tdm_error *err);

/* The words of such a string (quotes group, and are removed), as tdm_train_args_parse_string
 * reads them: *words is one allocation (free(*words)). */
int tdm_train_args_split(const char *flags, char ***words, int *n_words, tdm_error *err);

/* Applies a JSON config file (keys = flag names; a "config" key is refused: files do not nest). */
int tdm_train_args_load_config(tdm_train_args *a, const char *path, tdm_error *err);

/* The defaults that depend on the job's `dp` ranks, as Megatron sets them: an unset
 * --global-batch-size becomes --micro-batch-size x dp (one micro-batch per rank per step).
 * Call before printing the arguments block; tdm_train_run resolves its own copy. */
void tdm_train_args_resolve(tdm_train_args *a, int dp);

/* Cross-flag rules and required flags, for a job of `dp` ranks: --model, --data and
 * --tokenizer given; global batch divisible by micro batch x dp; --overlap-param-gather
 * only with --use-distributed-optimizer and --overlap-grad-reduce; warmup within the
 * decay span; min-lr <= lr. */
int tdm_train_args_validate(const tdm_train_args *a, int dp, tdm_error *err);

/* The (name, value) view used by the arguments block and by the A/B driver's diff.
 * Names are Megatron's attribute names (underscores), in table order; values are
 * printed the way Python prints them (True/False, None for unset paths, 0.0001,
 * 1e-08, a list for data). */
int tdm_train_args_count(void);
const char *tdm_train_args_name(int i);
void tdm_train_args_value(const tdm_train_args *a, int i, char *out, size_t cap);
/* The flag (without its dashes) that a name as typed sets: "train_iters" -> "train-iters",
 * Megatron's "mm-tool" -> "profile-config"; NULL when no flag has that name. */
const char *tdm_train_args_flag(const char *typed, size_t n);

/* A line of the block that is not a flag: what else the run's numbers depend on
 * (host_cpu, build_target, openblas_kernels). */
typedef struct tdm_args_extra {
    const char *name, *value;
} tdm_args_extra;

/* The Megatron block: a header line, one "  name ..... value" line per argument and per
 * extra sorted by name, a footer line; each line ends with '\n'. */
void tdm_train_args_format_block(const tdm_train_args *a, const tdm_args_extra *extra, int n_extra, tdm_strbuf *sb);

/* Flag help for --help, one line per flag: "  --name VALUE   help (default: x)". */
void tdm_train_args_format_help(tdm_strbuf *sb);

/* A 64-bit hash of the arguments that change the numerics of a run (model, data,
 * batch sizes, schedule, optimizer, seed, freezing): stored in checkpoints, so a
 * resume with different numerics is reported. Logging, saving and overlap flags are
 * not included (overlap does not change the numbers). */
uint64_t tdm_train_args_fingerprint(const tdm_train_args *a);
/* The "key=value" lines (one per hashed attribute, Megatron's attribute names) behind a fingerprint this
 * process computed recently, or NULL. */
const char *tdm_train_args_numeric_values(uint64_t fingerprint);
/* Appends, "; "-separated, "--flag SAVED -> NOW" for every attribute whose value differs between two such
 * sets of lines ("(default)" where one leaves an attribute out). */
void tdm_train_args_numeric_diff(const char *saved, const char *now, tdm_strbuf *out);

/* The parser of `tandem train` (its usage, flags and --help), on a tdm_train_args target: for
 * commands that answer its --help, or hand its flags on (ab, tdm_flags.pass). */
const tdm_flags *tdm_train_args_parser(void);

/* The table entry of one train flag by name ("bf16"), for commands that take some of train's flags
 * into a tdm_train_args of their own (inspect, export-batches): the same spelling, range and
 * help. NULL when train has no such flag. */
const tdm_flag *tdm_train_args_spec(const char *name);

#endif
