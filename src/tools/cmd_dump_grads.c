/* cmd_dump_grads.c - `tandem dump-grads`: one forward and backward over every sample of a
 * data file, packed as one micro-batch, and every trainable tensor's gradient written
 * under its Hugging Face name. The loss is the mean over counted tokens (grad_scale =
 * 1/tokens), as HF computes it, so the file compares directly with a PyTorch
 * `loss.backward()` on the same weights and batch. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "data/pipeline.h"
#include "model/config.h"
#include "model/qwen3vl.h"
#include "model/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "tools/commands.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tandem dump-grads --model DIR --tokenizer FILE --data FILE.json --out FILE.safetensors [flags]\n"
            "  One forward and backward over all samples of the data file as one packed batch; prints\n"
            "  'loss <mean over counted tokens> tokens <count>' and writes the gradient of that mean loss\n"
            "  for every trainable tensor (F32, Hugging Face names).\n"
            "  --model DIR          directory with config.json (and preprocessor_config.json, else Qwen defaults)\n"
            "  --tokenizer FILE     tokenizer.json\n"
            "  --data FILE.json     dataset file (messages or conversations layout)\n"
            "  --image-root DIR     resolve image paths against DIR (default: the data file's folder)\n"
            "  --out FILE           output .safetensors\n"
            "  --seed S             initial weights from seed S (default 1234)\n"
            "  --load WEIGHTS       load weights from a .safetensors file or checkpoint directory instead\n"
            "  --freeze-vision --freeze-projector --freeze-llm --freeze-lm-head   as in `tandem train`\n");
}

static int fail(const char *msg) {
    fprintf(stderr, "tandem dump-grads: %s\n", msg);
    return 1;
}

int cmd_dump_grads(int argc, char **argv) {
    const char *model_dir = NULL, *tok_path = NULL, *data_path = NULL, *image_root = NULL, *out = NULL,
               *load = NULL;
    uint64_t seed = 1234;
    tdm_freeze freeze = {0, 0, 0, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int v = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--model") && v) model_dir = argv[++i];
        else if (!strcmp(a, "--tokenizer") && v) tok_path = argv[++i];
        else if (!strcmp(a, "--data") && v) data_path = argv[++i];
        else if (!strcmp(a, "--image-root") && v) image_root = argv[++i];
        else if (!strcmp(a, "--out") && v) out = argv[++i];
        else if (!strcmp(a, "--load") && v) load = argv[++i];
        else if (!strcmp(a, "--seed") && v) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(argv[++i], &end, 10);
            if (end == argv[i] || *end || errno || argv[i][0] == '-') {
                fprintf(stderr, "tandem dump-grads: --seed expects a non-negative integer, got '%s'\n", argv[i]);
                return 2;
            }
            seed = s;
        } else if (!strcmp(a, "--freeze-vision")) freeze.vision = 1;
        else if (!strcmp(a, "--freeze-projector")) freeze.projector = 1;
        else if (!strcmp(a, "--freeze-llm")) freeze.llm = 1;
        else if (!strcmp(a, "--freeze-lm-head")) freeze.lm_head = 1;
        else {
            fprintf(stderr, "tandem dump-grads: unknown flag or missing value '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (!model_dir || !tok_path || !data_path || !out) {
        fprintf(stderr, "tandem dump-grads: --model, --tokenizer, --data and --out are required (see --help)\n");
        return 2;
    }

    int rc = 1;
    tdm_error err;
    tdm_tokenizer *tok = NULL;
    tdm_data *data = NULL;
    tdm_model *m = NULL;
    float *wdata = NULL, *wgrad = NULL;
    int64_t *idx = NULL;
    tdm_batch b;
    tdm_batch_init(&b);
    tdm_model_config cfg;
    tdm_preproc_config pp;
    char pp_path[1200];

    if (tdm_model_config_load(model_dir, &cfg, &err)) { rc = fail(err.msg); goto done; }
    snprintf(pp_path, sizeof pp_path, "%s/preprocessor_config.json", model_dir);
    if (tdm_file_exists(pp_path)) {
        if (tdm_preproc_config_load(pp_path, &pp, &err)) { rc = fail(err.msg); goto done; }
    } else {
        tdm_preproc_config_default(&pp);
    }
    tok = tdm_tokenizer_load(tok_path, &err);
    if (!tok) { rc = fail(err.msg); goto done; }
    const char *files[1] = {data_path};
    tdm_data_options dopt = {.files = files, .n_files = 1, .image_root = image_root};
    data = tdm_data_open(&dopt, tok, &pp, &err);
    if (!data) { rc = fail(err.msg); goto done; }
    int64_t n = tdm_data_n_samples(data);
    if (n <= 0 || n > (1 << 20)) {
        fprintf(stderr, "tandem dump-grads: %s: expected between 1 and %d usable samples, found %lld\n", data_path,
                1 << 20, (long long)n);
        goto done;
    }
    idx = tdm_xmalloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    if (tdm_data_build_batch(data, idx, (int)n, &b, &err)) { rc = fail(err.msg); goto done; }
    if (b.n_target_tokens <= 0) {
        fprintf(stderr, "tandem dump-grads: %s: no trained tokens (every label is -100)\n", data_path);
        goto done;
    }

    m = tdm_model_create(&cfg, &freeze, &err);
    if (!m) { rc = fail(err.msg); goto done; }
    tdm_param_table *t = tdm_model_params(m);
    if (tdm_param_table_alloc(t, &wdata, &wgrad, &err)) { rc = fail(err.msg); goto done; }
    if (load) {
        tdm_safetensors *st = tdm_safetensors_open(load, &err);
        if (!st) { rc = fail(err.msg); goto done; }
        int lrc = tdm_safetensors_load_params(st, t, cfg.tie_word_embeddings ? TDM_ST_TIED_LM_HEAD : 0, NULL, &err);
        tdm_safetensors_close(st);
        if (lrc) { rc = fail(err.msg); goto done; }
    } else {
        tdm_model_init_weights(m, seed);
    }
    tdm_model_limits lim = {b.n_tokens, b.n_seqs, b.n_patches, b.n_images};
    if (tdm_model_reserve(m, &lim, &err)) { rc = fail(err.msg); goto done; }
    tdm_fb_result res;
    if (tdm_model_forward_backward(m, &b, (float)(1.0 / (double)b.n_target_tokens), &res, &err)) {
        rc = fail(err.msg);
        goto done;
    }
    printf("loss %.9g tokens %lld\n", res.loss_sum / (double)res.n_tokens, (long long)res.n_tokens);

    tdm_st_entry *ent = tdm_xcalloc((size_t)t->n, sizeof *ent);
    int k = 0;
    for (int i = 0; i < t->n; i++)
        if (t->p[i].trainable)
            ent[k++] = (tdm_st_entry){t->p[i].name, t->p[i].ndim, t->p[i].shape, t->p[i].grad};
    const char *meta[4] = {"format", "pt", "content", "gradients of the mean loss"};
    int wrc = tdm_safetensors_write(out, ent, k, TDM_ST_F32, meta, 2, &err);
    free(ent);
    if (wrc) { rc = fail(err.msg); goto done; }
    rc = 0;
done:
    free(idx);
    tdm_batch_free(&b);
    tdm_model_free(m);
    tdm_free_big(wdata);
    tdm_free_big(wgrad);
    tdm_data_free(data);
    tdm_tokenizer_free(tok);
    return rc;
}
