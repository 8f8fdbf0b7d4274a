/* cmd_dump_grads.c - `tandem dump-grads`: one forward and backward over every sample of a
 * data file, packed as one micro-batch, and every trainable tensor's gradient written
 * under its Hugging Face name. The loss is the mean over counted tokens (grad_scale =
 * 1/tokens), as HF computes it, so the file compares directly with a PyTorch
 * `loss.backward()` on the same weights and batch. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "data/pipeline.h"
#include "model/config.h"
#include "model/qwen3vl.h"
#include "model/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"
#include "train/feed.h"
#include "tools/cli.h"
#include "tools/commands.h"

typedef struct dump_grads_opts {
    const char *model, *tokenizer, *data, *image_root, *out, *load, *save_inputs;
    uint64_t seed;
    tdm_freeze freeze;
} dump_grads_opts;

#define OPT(field) offsetof(dump_grads_opts, field)
static const tdm_flag FLAGS[] = {
    {.name = "model",
     .kind = TDM_FLAG_PATH,
     .off = OPT(model),
     .metavar = "DIR",
     .help = "directory with config.json (and preprocessor_config.json, else Qwen defaults)"},
    {.name = "tokenizer", .kind = TDM_FLAG_PATH, .off = OPT(tokenizer), .metavar = "FILE", .help = "tokenizer.json"},
    {.name = "data",
     .kind = TDM_FLAG_PATH,
     .off = OPT(data),
     .metavar = "FILE.json",
     .help = "dataset file (messages or conversations layout)"},
    {.name = "image-root",
     .kind = TDM_FLAG_PATH,
     .off = OPT(image_root),
     .metavar = "DIR",
     .help = "resolve image paths against DIR (default: the data file's folder)"},
    {.name = "out", .kind = TDM_FLAG_PATH, .off = OPT(out), .metavar = "FILE", .help = "output .safetensors"},
    {.name = "seed",
     .kind = TDM_FLAG_U64,
     .off = OPT(seed),
     .def = "1234",
     .metavar = "S",
     .help = "initial weights from seed S"},
    {.name = "load",
     .kind = TDM_FLAG_PATH,
     .off = OPT(load),
     .metavar = "WEIGHTS",
     .help = "load weights from a .safetensors file or a checkpoint (a --save folder or one iter_XXXXXXX "
             "directory, checksums verified) instead"},
    {.name = "freeze-vision", .kind = TDM_FLAG_BOOL, .off = OPT(freeze.vision), .help = "as in `tandem train`"},
    {.name = "freeze-projector", .kind = TDM_FLAG_BOOL, .off = OPT(freeze.projector), .help = "as in `tandem train`"},
    {.name = "freeze-llm", .kind = TDM_FLAG_BOOL, .off = OPT(freeze.llm), .help = "as in `tandem train`"},
    {.name = "freeze-lm-head", .kind = TDM_FLAG_BOOL, .off = OPT(freeze.lm_head), .help = "as in `tandem train`"},
    {.name = "save-inputs",
     .kind = TDM_FLAG_PATH,
     .off = OPT(save_inputs),
     .metavar = "DIR",
     .help = "also write what a reference implementation needs to redo the step (config.json, case.json, "
             "weights, batch, loss; tests/model/cli_dump_grads.sh)"},
};
#undef OPT

static const tdm_flags P = {
    .command = "tandem dump-grads",
    .usage = "tandem dump-grads --model DIR --tokenizer FILE --data FILE.json --out FILE.safetensors [flags]",
    .about = "One forward and backward over all samples of the data file as one packed batch; prints\n"
             "'loss <mean over counted tokens> tokens <count>' and writes the gradient of that mean loss\n"
             "for every trainable tensor (F32, Hugging Face names).",
    .flags = FLAGS,
    .n_flags = (int)(sizeof FLAGS / sizeof *FLAGS),
};

/* Writes DIR/config.json (a copy of the model's), DIR/case.json (freeze flags),
 * DIR/weights.safetensors, DIR/batch.safetensors (integer arrays stored as F32: every id
 * and position is below 2^24, so exact) and DIR/out.safetensors (loss_sum, tokens and
 * "grad.<name>"), the layout tests/model/ref_qwen3vl.py reads. */
static int save_reference_inputs(const char *dir, const tdm_model_config *cfg, const tdm_freeze *fz,
                                 const tdm_param_table *t, const tdm_batch *b, const tdm_fb_result *res,
                                 tdm_error *err) {
    char path[1200];
    size_t len;
    if (tdm_mkdirs(dir, err)) return -1;
    char *text = tdm_read_file(cfg->path, 1 << 20, &len, err);
    if (!text) return -1;
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = tdm_write_file_atomic(path, text, len, err);
    free(text);
    if (rc) return -1;
    char cj[256];
    int n = snprintf(cj, sizeof cj,
                     "{\"name\": \"dump-grads\", \"freeze_vision\": %d, \"freeze_projector\": %d, "
                     "\"freeze_llm\": %d, \"freeze_lm_head\": %d}\n",
                     fz->vision, fz->projector, fz->llm, fz->lm_head);
    snprintf(path, sizeof path, "%s/case.json", dir);
    if (tdm_write_file_atomic(path, cj, (size_t)n, err)) return -1;
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    if (tdm_safetensors_save_params(path, t, TDM_ST_F32, NULL, 0, err)) return -1;

    int64_t T = b->n_tokens, S1 = b->n_seqs + 1, NI = b->n_images, NP = b->n_patches;
    int64_t ni = NI > 0 ? NI : 0;
    float *f = tdm_xmalloc(sizeof(float) * (size_t)(3 * T + 3 * T + S1 + 3 * ni + 1));
    float *ids = f, *labels = ids + T, *targets = labels + T, *pos = targets + T, *cu = pos + 3 * T, *grid = cu + S1;
    for (int64_t i = 0; i < T; i++) {
        ids[i] = (float)b->input_ids[i];
        labels[i] = (float)b->labels[i];
        targets[i] = (float)b->targets[i];
    }
    for (int64_t i = 0; i < 3 * T; i++) pos[i] = (float)b->position_ids[i];
    for (int64_t i = 0; i < S1; i++) cu[i] = (float)b->cu_seqlens[i];
    for (int64_t i = 0; i < 3 * ni; i++) grid[i] = (float)b->image_grid_thw[i];
    int64_t sh_pos[2] = {3, T}, sh_grid[2] = {ni, 3}, sh_pix[2] = {NP, b->patch_dim};
    tdm_st_entry be[7] = {
        {"input_ids", 1, &T, ids},
        {"labels", 1, &T, labels},
        {"targets", 1, &T, targets},
        {"cu_seqlens", 1, &S1, cu},
        {"position_ids", 2, sh_pos, pos},
        {"image_grid_thw", 2, sh_grid, grid},
        {"pixel_values", 2, sh_pix, b->pixel_values},
    };
    snprintf(path, sizeof path, "%s/batch.safetensors", dir);
    rc = tdm_safetensors_write(path, be, NP > 0 ? 7 : 5, TDM_ST_F32, NULL, 0, err);
    free(f);
    if (rc) return -1;

    tdm_st_entry *oe = tdm_xcalloc((size_t)t->n + 2, sizeof *oe);
    char(*names)[TDM_PARAM_NAME_MAX + 8] = tdm_xcalloc((size_t)t->n + 1, sizeof *names);
    float loss = (float)res->loss_sum, tokens = (float)res->n_tokens;
    int64_t one = 1;
    int k = 0;
    oe[k++] = (tdm_st_entry){"loss_sum", 1, &one, &loss};
    oe[k++] = (tdm_st_entry){"tokens", 1, &one, &tokens};
    for (int i = 0; i < t->n; i++) {
        if (!t->p[i].trainable) continue;
        snprintf(names[i], sizeof names[i], "grad.%s", t->p[i].name);
        oe[k++] = (tdm_st_entry){names[i], t->p[i].ndim, t->p[i].shape, t->p[i].grad};
    }
    snprintf(path, sizeof path, "%s/out.safetensors", dir);
    rc = tdm_safetensors_write(path, oe, k, TDM_ST_F32, NULL, 0, err);
    free(oe);
    free(names);
    return rc;
}

static int fail(const char *msg) {
    fprintf(stderr, "tandem dump-grads: %s\n", msg);
    return 1;
}

/* Longer than most: load, check, one forward and backward, write; each stage's failure shares one cleanup. */
int cmd_dump_grads(int argc, char **argv) {
    dump_grads_opts o = {0};
    tdm_flags_defaults(&P, &o);
    int done = tdm_cli_parse(&P, &o, argc, argv, NULL, NULL);
    if (done >= 0) return done;
    const char *model_dir = o.model, *tok_path = o.tokenizer, *data_path = o.data, *image_root = o.image_root,
               *out = o.out, *load = o.load, *save_inputs = o.save_inputs;
    const uint64_t seed = o.seed;
    tdm_freeze freeze = o.freeze;
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

    if (tdm_model_config_load(model_dir, &cfg, &err)) {
        rc = fail(err.msg);
        goto done;
    }
    snprintf(pp_path, sizeof pp_path, "%s/preprocessor_config.json", model_dir);
    if (tdm_file_exists(pp_path)) {
        if (tdm_preproc_config_load(pp_path, &pp, &err)) {
            rc = fail(err.msg);
            goto done;
        }
    } else {
        tdm_preproc_config_default(&pp);
    }
    tok = tdm_tokenizer_load(tok_path, &err);
    if (!tok) {
        rc = fail(err.msg);
        goto done;
    }
    /* the ids the tokenizer gives must be the ones the model was configured with */
    if (tdm_feed_check_tokenizer(tok, tok_path, &cfg, &err) != 0) {
        rc = fail(err.msg);
        goto done;
    }
    if (tdm_feed_check_preprocessor(&pp, tdm_file_exists(pp_path) ? pp_path : NULL, &cfg, &err) != 0) {
        rc = fail(err.msg);
        goto done;
    }
    const char *files[1] = {data_path};
    tdm_data_options dopt = {.files = files, .n_files = 1, .image_root = image_root};
    data = tdm_data_open(&dopt, tok, &pp, &err);
    if (!data) {
        rc = fail(err.msg);
        goto done;
    }
    int64_t n = tdm_data_n_samples(data);
    if (n <= 0 || n > (1 << 20)) {
        fprintf(stderr, "tandem dump-grads: %s: expected between 1 and %d usable samples, found %lld\n", data_path,
                1 << 20, (long long)n);
        goto done;
    }
    /* All samples form one batch: refuse one whose activations cannot fit in this
     * machine's memory before anything is allocated for it. */
    tdm_batch_limits bl;
    tdm_data_batch_limits(data, (int)n, &bl);
    tdm_model_limits need = {bl.tokens, bl.samples, bl.patches, bl.images};
    double act_gib = (double)tdm_model_activation_bytes_for(&cfg, &need, NULL, &freeze) / (1024.0 * 1024.0 * 1024.0);
    double mem_gib = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0 * 1024.0);
    if (act_gib > mem_gib) {
        fprintf(stderr,
                "tandem dump-grads: %s: its %lld samples as one batch (%d tokens, %d patches) need %.1f GiB of "
                "activations, more than this machine's %.1f GiB; use fewer or shorter samples\n",
                data_path, (long long)n, bl.tokens, bl.patches, act_gib, mem_gib);
        goto done;
    }
    idx = tdm_xmalloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    if (tdm_data_build_batch(data, idx, (int)n, &b, &err)) {
        rc = fail(err.msg);
        goto done;
    }
    if (b.n_target_tokens <= 0) {
        fprintf(stderr, "tandem dump-grads: %s: no trained tokens (every label is -100)\n", data_path);
        goto done;
    }

    m = tdm_model_create(&cfg, &freeze, &err);
    if (!m) {
        rc = fail(err.msg);
        goto done;
    }
    tdm_param_table *t = tdm_model_params(m);
    if (tdm_param_table_alloc(t, &wdata, &wgrad, &err)) {
        rc = fail(err.msg);
        goto done;
    }
    struct stat lst;
    if (load && stat(load, &lst) == 0 && S_ISDIR(lst.st_mode)) {
        /* a checkpoint: a --save folder (its tracker picks the iteration) or one iter_XXXXXXX, its files'
         * checksums verified, as train --load and generate --load read it */
        tdm_ckpt ck;
        if (tdm_ckpt_open_weights(load, &ck, &err) != 0) {
            rc = fail(err.msg);
            goto done;
        }
        int lrc = tdm_ckpt_load_weights(&ck, t, &err);
        tdm_ckpt_close(&ck);
        if (lrc) {
            rc = fail(err.msg);
            goto done;
        }
    } else if (load) {
        tdm_safetensors *st = tdm_safetensors_open(load, &err);
        if (!st) {
            rc = fail(err.msg);
            goto done;
        }
        int lrc = tdm_safetensors_load_params(st, t, cfg.tie_word_embeddings ? TDM_ST_TIED_LM_HEAD : 0, NULL, &err);
        tdm_safetensors_close(st);
        if (lrc) {
            rc = fail(err.msg);
            goto done;
        }
    } else {
        tdm_model_init_weights(m, seed);
    }
    tdm_model_limits lim = {b.n_tokens, b.n_seqs, b.n_patches, b.n_images};
    if (tdm_model_reserve(m, &lim, &err)) {
        rc = fail(err.msg);
        goto done;
    }
    tdm_fb_result res;
    if (tdm_model_forward_backward(m, &b, (float)(1.0 / (double)b.n_target_tokens), &res, &err)) {
        rc = fail(err.msg);
        goto done;
    }
    printf("loss %.9g tokens %lld\n", res.loss_sum / (double)res.n_tokens, (long long)res.n_tokens);

    tdm_st_entry *ent = tdm_xcalloc((size_t)t->n, sizeof *ent);
    int k = 0;
    for (int i = 0; i < t->n; i++)
        if (t->p[i].trainable) ent[k++] = (tdm_st_entry){t->p[i].name, t->p[i].ndim, t->p[i].shape, t->p[i].grad};
    const char *meta[4] = {"format", "pt", "content", "gradients of the mean loss"};
    int wrc = tdm_safetensors_write(out, ent, k, TDM_ST_F32, meta, 2, &err);
    free(ent);
    if (wrc) {
        rc = fail(err.msg);
        goto done;
    }
    if (save_inputs && save_reference_inputs(save_inputs, &cfg, &freeze, t, &b, &res, &err)) {
        rc = fail(err.msg);
        goto done;
    }
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
