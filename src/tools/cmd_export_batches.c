/* cmd_export_batches.c - `tandem export-batches`: write the micro-batches the trainer would
 * consume, so that a peer (PyTorch) can replay exactly the same inputs.
 *
 * Takes the training flags that select the batches (--model, --data, --tokenizer, --preprocessor,
 * --image-root, --global-batch-size, --micro-batch-size, --seq-length, --seed, --skip-bad-samples, ...;
 * any other train flag is refused) plus --out DIR, --steps N and --dp N, and writes, for every rank
 * r < dp and step < N:
 *   DIR/rank{r}/step{k}_micro{m}.bin: little-endian arrays, back to back:
 *     cu_seqlens int32[n_seqs+1], input_ids int32[n], labels int32[n], targets int32[n],
 *     position_ids int32[3, n], image_grid_thw int32[n_images, 3], pixel_values float32[n_patches, patch_dim]
 *   DIR/index.json: the list of files with their counts and input fingerprints.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "core/strbuf.h"
#include "data/batch.h"
#include "model/config.h"
#include "train/args.h"
#include "train/feed.h"
#include "tools/cli.h"
#include "tools/commands.h"

typedef struct export_opts {
    tdm_train_args train; /* first: train's table entries address it at their own offsets */
    const char *out;
    int64_t steps, dp;
} export_opts;

static const tdm_flag OWN[] = {
    {.name = "out",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(export_opts, out),
     .metavar = "DIR",
     .help = "where to write rank{r}/step{k}_micro{m}.bin and index.json"},
    {.name = "steps",
     .kind = TDM_FLAG_I64,
     .off = offsetof(export_opts, steps),
     .lo = 1,
     .hi = 1000000,
     .def = "2",
     .metavar = "N",
     .help = "optimizer steps to write"},
    {.name = "dp",
     .kind = TDM_FLAG_I64,
     .off = offsetof(export_opts, dp),
     .lo = 1,
     .hi = 1024,
     .def = "1",
     .metavar = "N",
     .help = "data-parallel ranks to write the micro-batches of"},
};

/* The `tandem train` flags that select what the trainer consumes, from its table: the same spelling, range and
 * help. */
static const char *const FROM_TRAIN[] = {"model",
                                         "tokenizer",
                                         "preprocessor",
                                         "data",
                                         "image-root",
                                         "image-max-pixels",
                                         "image-min-pixels",
                                         "skip-bad-samples",
                                         "micro-batch-size",
                                         "global-batch-size",
                                         "seq-length",
                                         "seed"};
#define N_FROM_TRAIN ((int)(sizeof FROM_TRAIN / sizeof *FROM_TRAIN))

/* A train flag that does not change the batches (--save, --lr, ...): said so, rather than taken and ignored. */
static int not_for_batches(const char *name, size_t n, tdm_error *err) {
    const char *f = tdm_train_args_flag(name, n);
    if (!f) return 0;
    return tdm_errorf(err,
                      "--%s is a `tandem train` flag that does not change the batches; export-batches does "
                      "not take it (tandem export-batches --help lists its flags)",
                      f);
}

static void parser(tdm_flags *p, tdm_flag_table *more, tdm_flag *picked) {
    for (int k = 0; k < N_FROM_TRAIN; k++) {
        picked[k] = *tdm_train_args_spec(FROM_TRAIN[k]);
        picked[k].group = k == 0 ? "`tandem train`'s flags that select the batches" : NULL;
    }
    *more = (tdm_flag_table){picked, N_FROM_TRAIN};
    *p = (tdm_flags){
        .command = "tandem export-batches",
        .usage = "tandem export-batches --out DIR [--steps N] [--dp N] --model DIR --data FILE --tokenizer FILE "
                 "[flags]",
        .about = "Writes the micro-batches `tandem train` would consume on each of N data-parallel ranks for the\n"
                 "first --steps steps as raw arrays plus DIR/index.json (layout in src/tools/cmd_export_batches.c).\n"
                 "--model is required, as in train: its preprocessor_config.json and token ids are the ones used.",
        .flags = OWN,
        .n_flags = (int)(sizeof OWN / sizeof *OWN),
        .more = more,
        .n_more = 1,
        .unknown = not_for_batches,
    };
}

static int write_batch(const char *path, const tdm_batch *b, tdm_error *err) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    size_t n = (size_t)b->n_tokens;
    tdm_sb_append(&sb, (const char *)b->cu_seqlens, 4 * ((size_t)b->n_seqs + 1));
    tdm_sb_append(&sb, (const char *)b->input_ids, 4 * n);
    tdm_sb_append(&sb, (const char *)b->labels, 4 * n);
    tdm_sb_append(&sb, (const char *)b->targets, 4 * n);
    tdm_sb_append(&sb, (const char *)b->position_ids, 12 * n);
    tdm_sb_append(&sb, (const char *)b->image_grid_thw, 12 * (size_t)b->n_images);
    tdm_sb_append(&sb, (const char *)b->pixel_values, 4 * (size_t)b->n_patches * (size_t)b->patch_dim);
    int rc = tdm_write_file_atomic(path, sb.data ? sb.data : "", sb.len, err);
    tdm_sb_free(&sb);
    return rc;
}

int cmd_export_batches(int argc, char **argv) {
    tdm_flags P;
    tdm_flag_table more;
    tdm_flag picked[N_FROM_TRAIN];
    parser(&P, &more, picked);
    export_opts o = {0};
    tdm_train_args_defaults(&o.train);
    tdm_flags_defaults(&P, &o);
    int rc = tdm_cli_parse(&P, &o, argc, argv, NULL, NULL);
    if (rc >= 0) return rc;
    const char *out = o.out;
    const int64_t steps = o.steps, dp = o.dp;
    tdm_train_args *a = &o.train;
    tdm_error err;
    if (!out || !a->model[0] || a->n_data == 0 || !a->tokenizer[0]) {
        fprintf(stderr, "tandem export-batches: --out DIR, --model DIR, --data FILE and --tokenizer FILE are "
                        "required, as train requires them (tandem export-batches --help)\n");
        return 2;
    }
    tdm_train_args_resolve(a, (int)dp);
    if (a->global_batch_size % (a->micro_batch_size * (int)dp) != 0) {
        fprintf(
            stderr,
            "tandem export-batches: --global-batch-size %d is not a multiple of --micro-batch-size %d x --dp %lld\n",
            a->global_batch_size, a->micro_batch_size, (long long)dp);
        return 2;
    }
    tdm_model_config cfg; /* the tokenizer and the preprocessor are checked against it as in train */
    if (tdm_model_config_load(a->model, &cfg, &err) != 0) {
        fprintf(stderr, "tandem export-batches: %s\n", err.msg);
        return 1;
    }
    tdm_strbuf idx;
    tdm_sb_init(&idx);
    rc = 0;
    for (int r = 0; r < dp && rc == 0; r++) {
        tdm_feed_options fo = {.args = a, .dp_rank = r, .dp_size = (int)dp, .config = &cfg};
        tdm_feed *f = tdm_feed_create(&fo, &err);
        if (!f || tdm_feed_start(f, 0, &err) != 0) {
            fprintf(stderr, "tandem export-batches: %s\n", err.msg);
            tdm_feed_free(f);
            rc = 1;
            break;
        }
        if (r == 0) printf("%s\n", tdm_feed_summary(f)); /* what was skipped or dropped, as train logs it */
        char dir[1200];
        snprintf(dir, sizeof dir, "%s/rank%d", out, r);
        if (tdm_mkdirs(dir, &err) != 0) {
            fprintf(stderr, "tandem export-batches: %s\n", err.msg);
            tdm_feed_free(f);
            rc = 1;
            break;
        }
        int mps = a->global_batch_size / (a->micro_batch_size * (int)dp);
        for (int64_t k = 0; k < steps && rc == 0; k++)
            for (int m = 0; m < mps && rc == 0; m++) {
                const tdm_batch *b;
                uint64_t wait;
                char rel[64], path[1300];
                snprintf(rel, sizeof rel, "rank%d/step%06lld_micro%d.bin", r, (long long)k, m);
                snprintf(path, sizeof path, "%s/%s", out, rel);
                if (tdm_feed_next(f, &b, &wait, &err) != 0 || write_batch(path, b, &err) != 0) {
                    fprintf(stderr, "tandem export-batches: %s\n", err.msg);
                    rc = 1;
                    break;
                }
                tdm_sb_printf(&idx,
                              "%s\n  {\"rank\": %d, \"step\": %lld, \"micro\": %d, \"file\": \"%s\", \"n_tokens\": %d, "
                              "\"n_seqs\": %d, \"n_images\": %d, \"n_patches\": %d, \"patch_dim\": %d, "
                              "\"n_target_tokens\": %lld, \"first_sample\": %lld, \"fingerprint\": \"%016llx\"}",
                              idx.len ? "," : "", r, (long long)b->step, b->micro, rel, b->n_tokens, b->n_seqs,
                              b->n_images, b->n_patches, b->patch_dim, (long long)b->n_target_tokens,
                              (long long)b->first_sample, (unsigned long long)b->fingerprint);
            }
        tdm_feed_free(f);
    }
    if (rc == 0) {
        tdm_strbuf js;
        tdm_sb_init(&js);
        tdm_sb_printf(&js,
                      "{\"dp\": %lld, \"steps\": %lld, \"global_batch_size\": %d, \"micro_batch_size\": %d, "
                      "\"batches\": [%s\n]}\n",
                      (long long)dp, (long long)steps, a->global_batch_size, a->micro_batch_size,
                      idx.data ? idx.data : "");
        char path[1200];
        snprintf(path, sizeof path, "%s/index.json", out);
        if (tdm_write_file_atomic(path, js.data, js.len, &err) != 0) {
            fprintf(stderr, "tandem export-batches: %s\n", err.msg);
            rc = 1;
        } else {
            printf("wrote %lld steps x %lld ranks of micro-batches to %s\n", (long long)steps, (long long)dp, out);
        }
        tdm_sb_free(&js);
    }
    tdm_sb_free(&idx);
    return rc;
}
