/* cmd_inspect.c - `tandem inspect`: parameter counts and the per-rank memory plan of a
 * model config, without allocating the model. The flags that change the plan are train's own
 * (its table's entries), so a training command line's flags work here as they are. The counts come from the model's parameter
 * table (tdm_model_create registers it without storage); the buffer sizes and buckets
 * from the data-parallel layout the trainer itself would build; the activation bytes
 * from the model's own reservation arithmetic. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "distributed/layout.h"
#include "model/config.h"
#include "model/inspect.h"
#include "model/qwen3vl.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "train/args.h"

typedef struct inspect_opts {
    tdm_train_args train; /* first: train's table entries address it at their own offsets */
    int64_t dp, tokens, patches;
} inspect_opts;

static const tdm_flag OWN[] = {
    {.name = "dp",
     .kind = TDM_FLAG_I64,
     .off = offsetof(inspect_opts, dp),
     .lo = 1,
     .hi = 1 << 20,
     .def = "1",
     .metavar = "N",
     .help = "data-parallel ranks"},
    {.name = "micro-batch-tokens",
     .kind = TDM_FLAG_I64,
     .off = offsetof(inspect_opts, tokens),
     .lo = 1,
     .hi = 1 << 24,
     .metavar = "T",
     .help = "tokens in one packed micro-batch (for the activation row)"},
    {.name = "micro-batch-patches",
     .kind = TDM_FLAG_I64,
     .off = offsetof(inspect_opts, patches),
     .lo = 0,
     .hi = 1 << 24,
     .def = "0",
     .metavar = "P",
     .help = "vision patches in one micro-batch, before merging"},
};

/* `tandem train`'s flags that change the plan, taken from its table: the same spelling, range and values; the
 * help says what each changes here. */
static const char *const FROM_TRAIN[][2] = {
    {"model", "a directory holding config.json, or the config.json itself"},
    {"freeze-vision", NULL},
    {"freeze-projector", NULL},
    {"freeze-llm", NULL},
    {"freeze-lm-head", NULL},
    {"use-distributed-optimizer", "say that the distributed optimizer's column is this run's (both are printed)"},
    {"bf16", "bfloat16 parameters as train --bf16 keeps them: 2-byte weights, the fp32 main copy and one layer's "
             "fp32 scratch"},
    {"ddp-bucket-size", "bucket size in elements (default Megatron's max(40M, 1M x dp))"},
    {"ddp-num-buckets", NULL},
    {"recompute-granularity", "full or selective: the activation row under recomputation, as train computes it"},
    {"recompute-method", NULL},
    {"recompute-num-layers", NULL},
};
#define N_FROM_TRAIN ((int)(sizeof FROM_TRAIN / sizeof *FROM_TRAIN))

/* A train flag that does not change the plan: said so, rather than "unknown". */
static int not_for_the_plan(const char *name, size_t n, tdm_error *err) {
    const char *f = tdm_train_args_flag(name, n);
    if (!f) return 0;
    return tdm_errorf(err,
                      "--%s is a `tandem train` flag that does not change the memory plan; inspect does not "
                      "take it (tandem inspect --help lists its flags)",
                      f);
}

/* The parser: inspect's own flags, then train's (copied from its table into `picked`). */
static void parser(tdm_flags *p, tdm_flag_table *more, tdm_flag *picked) {
    for (int k = 0; k < N_FROM_TRAIN; k++) {
        picked[k] = *tdm_train_args_spec(FROM_TRAIN[k][0]);
        picked[k].group = k == 0 ? "`tandem train`'s flags that change the plan" : NULL;
        if (FROM_TRAIN[k][1]) picked[k].help = FROM_TRAIN[k][1];
    }
    *more = (tdm_flag_table){picked, N_FROM_TRAIN};
    *p = (tdm_flags){
        .command = "tandem inspect",
        .usage = "tandem inspect --model DIR [flags]",
        .about = "Prints parameter counts per component (vision encoder, mergers, language model, lm_head),\n"
                 "trainable vs frozen, and the memory each rank needs for weights, gradients, Adam state\n"
                 "(with and without the distributed optimizer) and activations.",
        .flags = OWN,
        .n_flags = (int)(sizeof OWN / sizeof *OWN),
        .more = more,
        .n_more = 1,
        .unknown = not_for_the_plan,
    };
}

/* Longer than most: the flags' checks, then the plan filled from the model and the layout, each failure with
 * its own message and one cleanup. */
int cmd_inspect(int argc, char **argv) {
    tdm_flags P;
    tdm_flag_table more;
    tdm_flag picked[N_FROM_TRAIN];
    parser(&P, &more, picked);
    inspect_opts o = {0};
    tdm_train_args_defaults(&o.train);
    tdm_flags_defaults(&P, &o);
    int done = tdm_cli_parse(&P, &o, argc, argv, NULL, NULL);
    if (done >= 0) return done;
    const tdm_train_args *a = &o.train;
    const char *model_path = a->model[0] ? a->model : NULL;
    const tdm_freeze freeze = {a->freeze_vision, a->freeze_projector, a->freeze_llm, a->freeze_lm_head};
    const int64_t dp = o.dp, tokens = o.tokens, patches = o.patches, bucket_size = a->ddp_bucket_size,
                  num_buckets = a->ddp_num_buckets;
    if (!model_path) {
        fprintf(stderr, "tandem inspect: --model DIR is required (a directory holding config.json)\n");
        return 2;
    }
    if (patches > 0 && tokens == 0) {
        fprintf(stderr, "tandem inspect: --micro-batch-patches needs --micro-batch-tokens too\n");
        return 2;
    }
    if (bucket_size > 0 && num_buckets > 0) {
        fprintf(stderr, "tandem inspect: give --ddp-bucket-size or --ddp-num-buckets, not both\n");
        return 2;
    }

    tdm_error err;
    tdm_model_config cfg;
    if (tdm_model_config_load(model_path, &cfg, &err)) {
        fprintf(stderr, "tandem inspect: %s\n", err.msg);
        return 1;
    }
    tdm_recompute recompute;
    if (tdm_recompute_from_flags(a->recompute_granularity, a->recompute_method, a->recompute_num_layers, &cfg,
                                 &recompute, &err) != 0) {
        fprintf(stderr, "tandem inspect: %s\n", err.msg);
        return 2;
    }
    int merge = cfg.vision.spatial_merge_size * cfg.vision.spatial_merge_size;
    if (patches % merge) {
        fprintf(stderr, "tandem inspect: --micro-batch-patches %lld is not a multiple of %d (2x2 merge groups)\n",
                (long long)patches, merge);
        return 2;
    }
    tdm_model *m = tdm_model_create(&cfg, &freeze, &err);
    if (!m) {
        fprintf(stderr, "tandem inspect: %s\n", err.msg);
        return 1;
    }
    tdm_param_table *t = tdm_model_params(m);
    tdm_param_counts counts;
    int rc = 1;
    tdm_ddp_layout L[2];
    memset(L, 0, sizeof L);
    tdm_strbuf out;
    tdm_sb_init(&out);
    if (tdm_inspect_count(t, &cfg, &counts, &err)) {
        fprintf(stderr, "tandem inspect: %s\n", err.msg);
        goto done;
    }

    tdm_memory_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.dp = (int)dp;
    plan.bf16_params = a->bf16;
    if (a->bf16) plan.wide_scratch_bytes = tdm_model_wide_scratch_bytes(t, 0);
    tdm_ddp_config dc;
    tdm_ddp_config_default(&dc);
    dc.bucket_size = bucket_size;
    dc.num_buckets = (int)num_buckets;
    plan.bucket_size = tdm_ddp_config_bucket_size(&dc, (int)dp, counts.trainable > 0 ? counts.trainable : 1);
    if (counts.trainable > 0) { /* with everything frozen there are no buffers and no buckets */
        for (int d = 0; d < 2; d++) {
            dc.use_distributed_optimizer = d;
            if (tdm_ddp_layout_build(&L[d], t, (int)dp, &dc, &err)) {
                fprintf(stderr, "tandem inspect: %s\n", err.msg);
                goto done;
            }
        }
        plan.n_buckets_ddp = L[0].n_buckets;
        plan.n_buckets_dist = L[1].n_buckets;
        plan.buffer_ddp = L[0].total;
        plan.buffer_dist = L[1].total;
    }
    plan.activation_bytes = -1;
    if (tokens > 0) {
        tdm_model_limits lim = {(int)tokens, 1, (int)patches, patches > 0 ? (int)(patches / merge) : 0};
        plan.micro_batch_tokens = tokens;
        plan.micro_batch_patches = patches;
        plan.activation_bytes = tdm_model_activation_bytes_for(&cfg, &lim, &recompute, &freeze);
    }
    tdm_inspect_format(&cfg, &counts, &plan, &out);
    if (a->use_distributed_optimizer)
        tdm_sb_puts(&out, "  this run (--use-distributed-optimizer): the distributed optimizer's column\n");
    fputs(out.data, stdout);
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    tdm_sb_free(&out);
    tdm_ddp_layout_free(&L[0]);
    tdm_ddp_layout_free(&L[1]);
    tdm_model_free(m);
    return rc;
}
