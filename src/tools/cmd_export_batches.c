/* cmd_export_batches.c - `tandem export-batches`: write the micro-batches the trainer would
 * consume, so that a peer (PyTorch) can replay exactly the same inputs.
 *
 * Takes the training flags (--data, --tokenizer, --preprocessor, --image-root,
 * --global-batch-size, --micro-batch-size, --seq-length, --seed, --skip-bad-samples, ...)
 * plus --out DIR, --steps N and --dp N, and writes, for every rank r < dp and step < N:
 *   DIR/rank{r}/step{k}_micro{m}.bin: little-endian arrays, back to back:
 *     cu_seqlens int32[n_seqs+1], input_ids int32[n], labels int32[n], targets int32[n],
 *     position_ids int32[3, n], image_grid_thw int32[n_images, 3], pixel_values float32[n_patches, patch_dim]
 *   DIR/index.json: the list of files with their counts and input fingerprints.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "core/strbuf.h"
#include "data/batch.h"
#include "model/config.h"
#include "train/args.h"
#include "train/feed.h"
#include "tools/commands.h"

static void usage(FILE *f) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_train_args_format_help(&sb);
    fprintf(f,
            "usage: tandem export-batches --out DIR [--steps N] [--dp N] --data FILE --tokenizer FILE [training flags]\n"
            "  Writes the micro-batches `tandem train` would consume on each of N data-parallel ranks for the\n"
            "  first --steps steps (default 2, --dp default 1) as raw arrays plus DIR/index.json (layout in\n"
            "  src/tools/cmd_export_batches.c). Training flags select the data, batch sizes and seed:\n%s",
            sb.data ? sb.data : "");
    tdm_sb_free(&sb);
}

static int parse_count(const char *flag, const char *s, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < 1 || v > hi) {
        fprintf(stderr, "tandem export-batches: %s expects an integer in [1, %lld], got '%s'\n", flag, (long long)hi, s);
        return -1;
    }
    *out = v;
    return 0;
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
    const char *out = NULL;
    int64_t steps = 2, dp = 1;
    char **rest = calloc((size_t)argc + 1, sizeof(char *));
    int n_rest = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            free(rest);
            return 0;
        }
        int own = !strcmp(argv[i], "--out") || !strcmp(argv[i], "--steps") || !strcmp(argv[i], "--dp");
        if (own && i + 1 >= argc) {
            fprintf(stderr, "tandem export-batches: %s needs a value\n", argv[i]);
            free(rest);
            return 2;
        }
        int bad = 0;
        if (!strcmp(argv[i], "--out"))
            out = argv[++i];
        else if (!strcmp(argv[i], "--steps"))
            bad = parse_count("--steps", argv[++i], 1000000, &steps);
        else if (!strcmp(argv[i], "--dp"))
            bad = parse_count("--dp", argv[++i], 1024, &dp);
        else
            rest[n_rest++] = argv[i];
        if (bad) {
            free(rest);
            return 2;
        }
    }
    tdm_train_args a;
    tdm_train_args_defaults(&a);
    tdm_error err;
    int rc = tdm_train_args_parse(&a, n_rest, rest, &err);
    free(rest);
    if (rc != 0) {
        fprintf(stderr, "tandem export-batches: %s\n", err.msg);
        return 2;
    }
    if (!out || a.n_data == 0 || !a.tokenizer[0]) {
        fprintf(stderr, "tandem export-batches: --out DIR, --data FILE and --tokenizer FILE are required "
                        "(tandem export-batches --help)\n");
        return 2;
    }
    tdm_train_args_resolve(&a, (int)dp);
    if (a.global_batch_size % (a.micro_batch_size * (int)dp) != 0) {
        fprintf(stderr, "tandem export-batches: --global-batch-size %d is not a multiple of --micro-batch-size %d x --dp %lld\n",
                a.global_batch_size, a.micro_batch_size, (long long)dp);
        return 2;
    }
    tdm_model_config cfg; /* with --model, the tokenizer is checked against it as in train */
    if (a.model[0] && tdm_model_config_load(a.model, &cfg, &err) != 0) {
        fprintf(stderr, "tandem export-batches: %s\n", err.msg);
        return 1;
    }
    tdm_strbuf idx;
    tdm_sb_init(&idx);
    rc = 0;
    for (int r = 0; r < dp && rc == 0; r++) {
        tdm_feed_options fo = {.args = &a, .dp_rank = r, .dp_size = (int)dp, .config = a.model[0] ? &cfg : NULL};
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
        int mps = a.global_batch_size / (a.micro_batch_size * (int)dp);
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
        tdm_sb_printf(&js, "{\"dp\": %lld, \"steps\": %lld, \"global_batch_size\": %d, \"micro_batch_size\": %d, "
                           "\"batches\": [%s\n]}\n",
                      (long long)dp, (long long)steps, a.global_batch_size, a.micro_batch_size, idx.data ? idx.data : "");
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
