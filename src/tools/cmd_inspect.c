/* cmd_inspect.c - `tandem inspect`: parameter counts and the per-rank memory plan of a
 * model config, without allocating the model. The counts come from the model's parameter
 * table (tdm_model_create registers it without storage); the buffer sizes and buckets
 * from the data-parallel layout the trainer itself would build; the activation bytes
 * from the model's own reservation arithmetic. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "distributed/layout.h"
#include "model/config.h"
#include "model/inspect.h"
#include "model/qwen3vl.h"
#include "tools/commands.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tandem inspect --model DIR [flags]\n"
            "  Prints parameter counts per component (vision encoder, mergers, language model, lm_head),\n"
            "  trainable vs frozen, and the memory each rank needs for weights, gradients, Adam state\n"
            "  (with and without the distributed optimizer) and activations.\n"
            "  --model DIR                 a directory holding config.json, or the config.json itself\n"
            "  --freeze-vision             freeze patch_embed, pos_embed and the ViT blocks\n"
            "  --freeze-projector          freeze the merger and the DeepStack mergers\n"
            "  --freeze-llm                freeze the language model (and a tied lm_head)\n"
            "  --freeze-lm-head            freeze an untied lm_head\n"
            "  --dp N                      data-parallel ranks (default 1)\n"
            "  --micro-batch-tokens T      tokens in one packed micro-batch (for the activation row)\n"
            "  --micro-batch-patches P     vision patches in one micro-batch, before merging (default 0)\n"
            "  --ddp-bucket-size N         bucket size in elements (default Megatron's max(40M, 1M x dp))\n"
            "  --ddp-num-buckets N         cut the trainable parameters into about N buckets instead\n"
            "  --recompute-granularity full --recompute-method uniform|block --recompute-num-layers N\n"
            "                              the activation row under recomputation, as `tandem train`\n"
            "  --bf16                      bfloat16 parameters as train --bf16 keeps them: adds the fp32 main\n"
            "                              copy and the 16-bit all-gather buffer\n");
}

/* A whole decimal integer in [lo, hi], or -1 with a message naming the flag. */
static int parse_int(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "tandem inspect: %s expects an integer in [%lld, %lld], got '%s'\n", flag, (long long)lo,
                (long long)hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

int cmd_inspect(int argc, char **argv) {
    const char *model_path = NULL;
    tdm_freeze freeze = {0, 0, 0, 0};
    int64_t dp = 1, tokens = 0, patches = 0, bucket_size = 0, num_buckets = 0, rc_layers = 0;
    const char *granularity = NULL, *method = NULL;
    int bf16 = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--model") && has_val) {
            model_path = argv[++i];
        } else if (!strcmp(a, "--freeze-vision")) {
            freeze.vision = 1;
        } else if (!strcmp(a, "--freeze-projector")) {
            freeze.projector = 1;
        } else if (!strcmp(a, "--freeze-llm")) {
            freeze.llm = 1;
        } else if (!strcmp(a, "--freeze-lm-head")) {
            freeze.lm_head = 1;
        } else if (!strcmp(a, "--bf16")) {
            bf16 = 1;
        } else if (!strcmp(a, "--dp") && has_val) {
            if (parse_int(a, argv[++i], 1, 1 << 20, &dp)) return 2;
        } else if (!strcmp(a, "--micro-batch-tokens") && has_val) {
            if (parse_int(a, argv[++i], 1, 1 << 24, &tokens)) return 2;
        } else if (!strcmp(a, "--micro-batch-patches") && has_val) {
            if (parse_int(a, argv[++i], 0, 1 << 24, &patches)) return 2;
        } else if (!strcmp(a, "--ddp-bucket-size") && has_val) {
            if (parse_int(a, argv[++i], 1, INT64_C(1) << 40, &bucket_size)) return 2;
        } else if (!strcmp(a, "--ddp-num-buckets") && has_val) {
            if (parse_int(a, argv[++i], 1, 1 << 20, &num_buckets)) return 2;
        } else if (!strcmp(a, "--recompute-granularity") && has_val) {
            granularity = argv[++i];
        } else if (!strcmp(a, "--recompute-activations")) { /* Megatron's name for selective, as in train */
            granularity = "selective";
        } else if (!strcmp(a, "--recompute-method") && has_val) {
            method = argv[++i];
        } else if (!strcmp(a, "--recompute-num-layers") && has_val) {
            if (parse_int(a, argv[++i], 1, 1 << 20, &rc_layers)) return 2;
        } else {
            fprintf(stderr, "tandem inspect: unexpected argument '%s' (tandem inspect --help)\n", a);
            return 2;
        }
    }
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
    if (tdm_recompute_from_flags(granularity, method, (int)rc_layers, &cfg, &recompute, &err) != 0) {
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
    plan.bf16_params = bf16;
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
    fputs(out.data, stdout);
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    tdm_sb_free(&out);
    tdm_ddp_layout_free(&L[0]);
    tdm_ddp_layout_free(&L[1]);
    tdm_model_free(m);
    return rc;
}
