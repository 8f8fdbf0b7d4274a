/* peer_flops.c - the model FLOPs of each global step of an exported run, counted by
 * tandem's own tdm_model_flops, so that tandem and the PyTorch peer are credited the same
 * work for the same batches.
 *
 *   peer_flops MODEL_DIR BATCH_DIR [--freeze-vision] [--freeze-projector] [--freeze-llm] [--freeze-lm-head]
 *
 * BATCH_DIR is what `tandem export-batches` wrote (index.json plus one .bin per rank,
 * step and micro-batch). For every step it sums tdm_model_flops over all ranks'
 * micro-batches and prints one JSON line {"step": k, "flops": F, "flops_rank0": F0,
 * "tokens": T, "patches": P} (F in FLOP for one forward+backward of the whole global batch,
 * F0 for rank 0's micro-batches; the optimizer and elementwise work are not counted). Built and run by run_peer_bench.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "core/json.h"
#include "data/batch.h"
#include "model/config.h"
#include "model/qwen3vl.h"

#define MAX_FILE ((size_t)1 << 30)

/* Fills the parts of b that tdm_model_flops reads (counts, cu_seqlens, targets, grids)
 * from one exported file; the layout is in src/tools/cmd_export_batches.c. */
static int read_batch(const char *path, const tdm_json *e, tdm_batch *b, tdm_error *err) {
    int64_t n, s, ni, np, pd;
    if (tdm_json_get_int(e, "n_tokens", &n, err) || tdm_json_get_int(e, "n_seqs", &s, err) ||
        tdm_json_get_int(e, "n_images", &ni, err) || tdm_json_get_int(e, "n_patches", &np, err) ||
        tdm_json_get_int(e, "patch_dim", &pd, err))
        return -1;
    size_t len;
    char *raw = tdm_read_file(path, MAX_FILE, &len, err);
    if (!raw) return -1;
    size_t ints = (size_t)(s + 1 + 6 * n + 3 * ni);
    if (len != 4 * ints + 4 * (size_t)np * (size_t)pd) {
        free(raw);
        return tdm_errorf(err, "%s: %zu bytes, index.json's counts say %zu", path, len,
                          4 * ints + 4 * (size_t)np * (size_t)pd);
    }
    tdm_batch_reserve(b, (int)n, (int)s, (int)ni, 0, (int)pd);
    const int32_t *a = (const int32_t *)raw;
    b->n_tokens = (int)n;
    b->n_seqs = (int)s;
    b->n_images = (int)ni;
    b->n_patches = (int)np;
    memcpy(b->cu_seqlens, a, 4 * (size_t)(s + 1));
    memcpy(b->targets, a + s + 1 + 2 * n, 4 * (size_t)n);
    memcpy(b->image_grid_thw, a + s + 1 + 6 * n, 12 * (size_t)ni);
    free(raw);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: peer_flops MODEL_DIR BATCH_DIR [--freeze-vision] [--freeze-projector] "
                        "[--freeze-llm] [--freeze-lm-head]\n");
        return 2;
    }
    tdm_freeze fz = {0};
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--freeze-vision")) fz.vision = 1;
        else if (!strcmp(argv[i], "--freeze-projector")) fz.projector = 1;
        else if (!strcmp(argv[i], "--freeze-llm")) fz.llm = 1;
        else if (!strcmp(argv[i], "--freeze-lm-head")) fz.lm_head = 1;
        else {
            fprintf(stderr,
                    "peer_flops: unknown flag '%s' (expected --freeze-vision, --freeze-projector, "
                    "--freeze-llm or --freeze-lm-head)\n",
                    argv[i]);
            return 2;
        }
    }
    tdm_error err;
    tdm_model_config cfg;
    if (tdm_model_config_load(argv[1], &cfg, &err) != 0) {
        fprintf(stderr, "peer_flops: %s\n", err.msg);
        return 1;
    }
    tdm_model *m = tdm_model_create(&cfg, &fz, &err);
    if (!m) {
        fprintf(stderr, "peer_flops: %s\n", err.msg);
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/index.json", argv[2]);
    size_t len;
    char *text = tdm_read_file(path, MAX_FILE, &len, &err);
    tdm_json_doc *doc = text ? tdm_json_parse(text, len, path, &err) : NULL;
    free(text);
    int64_t steps = 0;
    const tdm_json *list = doc ? tdm_json_get(tdm_json_root(doc), "batches") : NULL;
    if (!doc || tdm_json_get_int(tdm_json_root(doc), "steps", &steps, &err) != 0 || !list || steps < 1 ||
        steps > 1000000) {
        fprintf(stderr, "peer_flops: %s\n",
                doc ? "index.json: expected 'steps' (1..1e6) and a 'batches' list" : err.msg);
        tdm_json_free(doc);
        tdm_model_free(m);
        return 1;
    }
    double *flops = calloc((size_t)steps, sizeof(double)), *flops0 = calloc((size_t)steps, sizeof(double));
    int64_t *tokens = calloc((size_t)steps, sizeof(int64_t)), *patches = calloc((size_t)steps, sizeof(int64_t));
    tdm_batch b;
    tdm_batch_init(&b);
    int rc = 0;
    for (size_t i = 0; i < list->len && rc == 0; i++) {
        const tdm_json *e = tdm_json_at(list, i);
        int64_t step, rank;
        const char *file = tdm_json_get_str(e, "file", &err);
        if (!file || tdm_json_get_int(e, "step", &step, &err) != 0 || tdm_json_get_int(e, "rank", &rank, &err) != 0 ||
            step < 0 || step >= steps) {
            fprintf(stderr, "peer_flops: %s: batch %zu: expected 'file', 'rank' and a 'step' below %lld\n", path, i,
                    (long long)steps);
            rc = 1;
            break;
        }
        char bin[8192];
        snprintf(bin, sizeof bin, "%s/%s", argv[2], file);
        if (read_batch(bin, e, &b, &err) != 0) {
            fprintf(stderr, "peer_flops: %s\n", err.msg);
            rc = 1;
            break;
        }
        double f = tdm_model_flops(m, &b);
        flops[step] += f;
        if (rank == 0) flops0[step] += f;
        tokens[step] += b.n_tokens;
        patches[step] += b.n_patches;
    }
    for (int64_t k = 0; k < steps && rc == 0; k++)
        printf("{\"step\": %lld, \"flops\": %.0f, \"flops_rank0\": %.0f, \"tokens\": %lld, \"patches\": %lld}\n",
               (long long)k, flops[k], flops0[k], (long long)tokens[k], (long long)patches[k]);
    tdm_batch_free(&b);
    free(flops);
    free(flops0);
    free(tokens);
    free(patches);
    tdm_json_free(doc);
    tdm_model_free(m);
    return rc;
}
