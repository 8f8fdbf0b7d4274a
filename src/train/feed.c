/* feed.c - tokenizer + preprocessor + datasets + loader, as the trainer needs them. */
#include "train/feed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "data/loader.h"
#include "data/pipeline.h"
#include "data/preprocess.h"
#include "tokenizer/tokenizer.h"

struct tdm_feed {
    tdm_feed_options o;
    tdm_tokenizer *tok; /* owned unless o.like lent it */
    tdm_preproc_config pp;
    tdm_data *data;
    tdm_loader *loader;
    char summary[1536];
};

const tdm_tokenizer *tdm_feed_tokenizer(const tdm_feed *f) { return f->tok; }

const char *tdm_feed_preprocessor_path(const char *flag_path, const char *model_path, char *buf, size_t cap) {
    if (flag_path && flag_path[0]) return snprintf(buf, cap, "%s", flag_path), buf;
    char dir[2048];
    struct stat st;
    if (model_path && stat(model_path, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(dir, sizeof dir, "%s", model_path);
    else tdm_dirname(model_path ? model_path : ".", dir, sizeof dir);
    snprintf(buf, cap, "%s/preprocessor_config.json", dir);
    return tdm_file_exists(buf) ? buf : NULL;
}

int tdm_feed_load_preprocessor(const char *flag_path, const char *model_path, tdm_preproc_config *pp, tdm_error *err) {
    char path[2200];
    if (tdm_feed_preprocessor_path(flag_path, model_path, path, sizeof path))
        return tdm_preproc_config_load(path, pp, err);
    tdm_preproc_config_default(pp);
    return 0;
}

int tdm_feed_check_tokenizer(const tdm_tokenizer *tok, const char *tok_path, const tdm_model_config *cfg,
                             tdm_error *err) {
    if (tdm_tokenizer_vocab_size(tok) > cfg->text.vocab_size)
        return tdm_errorf(err, "--tokenizer %s: %d token ids, more than the model's vocab_size %d (%s)", tok_path,
                          tdm_tokenizer_vocab_size(tok), cfg->text.vocab_size, cfg->path);
    int32_t pad = tdm_tokenizer_token_id(tok, "<|image_pad|>");
    if (pad != cfg->image_token_id) {
        if (pad < 0)
            return tdm_errorf(err, "--tokenizer %s: no <|image_pad|> token, but %s expects it as image_token_id %d",
                              tok_path, cfg->path, cfg->image_token_id);
        return tdm_errorf(err,
                          "--tokenizer %s: <|image_pad|> is id %d, but %s expects image_token_id %d (a tokenizer "
                          "made for another model?)",
                          tok_path, (int)pad, cfg->path, cfg->image_token_id);
    }
    return 0;
}

int tdm_feed_check_preprocessor(const tdm_preproc_config *pp, const char *pp_path, const tdm_model_config *cfg,
                                tdm_error *err) {
    const tdm_vision_config *v = &cfg->vision;
    const struct {
        const char *pp_key, *cfg_key;
        int pp_val, cfg_val;
    } pairs[] = {
        {"patch_size", "patch_size", pp->patch_size, v->patch_size},
        {"temporal_patch_size", "temporal_patch_size", pp->temporal_patch_size, v->temporal_patch_size},
        {"merge_size", "spatial_merge_size", pp->merge_size, v->spatial_merge_size},
    };
    char src[1200];
    if (pp_path) snprintf(src, sizeof src, "%s", pp_path);
    else snprintf(src, sizeof src, "the built-in preprocessor settings (no preprocessor_config.json found)");
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++)
        if (pairs[i].pp_val != pairs[i].cfg_val)
            return tdm_errorf(err, "%s: %s %d, but %s has vision_config.%s %d (%s)", src, pairs[i].pp_key,
                              pairs[i].pp_val, cfg->path, pairs[i].cfg_key, pairs[i].cfg_val,
                              pp_path ? "a preprocessor made for another model?"
                                      : "put the model's preprocessor_config.json next to its config.json");
    if (v->in_channels != 3)
        return tdm_errorf(err, "%s: vision_config.in_channels %d, but %s gives images as 3 RGB channels", cfg->path,
                          v->in_channels, src);
    return 0;
}

tdm_feed *tdm_feed_create(const tdm_feed_options *o, tdm_error *err) {
    const tdm_train_args *a = o->args;
    tdm_feed *f = tdm_xcalloc(1, sizeof *f);
    f->o = *o;
    if (o->like) { /* the validation set's feed: the training feed's tokenizer and preprocessor */
        f->tok = o->like->tok;
        f->pp = o->like->pp;
    } else {
        f->tok = tdm_tokenizer_load(a->tokenizer, err);
        if (!f->tok) goto fail;
        if (o->config && tdm_feed_check_tokenizer(f->tok, a->tokenizer, o->config, err) != 0) goto fail;
        if (tdm_feed_load_preprocessor(a->preprocessor, a->model, &f->pp, err) != 0) goto fail;
        char pp_buf[2200]; /* the file it read, to name in the check's message */
        const char *pp_path = tdm_feed_preprocessor_path(a->preprocessor, a->model, pp_buf, sizeof pp_buf);
        if (o->config && tdm_feed_check_preprocessor(&f->pp, pp_path, o->config, err) != 0) goto fail;
        if (tdm_preproc_set_bounds(&f->pp, a->image_max_pixels, a->image_min_pixels, err) != 0) goto fail;
    }
    const char *files[TDM_ARGS_MAX_DATA];
    for (int i = 0; i < a->n_data; i++) files[i] = a->data[i];
    tdm_data_options d = {.files = files,
                          .n_files = a->n_data,
                          .image_root = a->image_root[0] ? a->image_root : NULL,
                          .skip_bad_samples = a->skip_bad_samples,
                          .seq_length = a->seq_length};
    f->data = tdm_data_open(&d, f->tok, &f->pp, err);
    if (!f->data) goto fail;
    const tdm_data_stats *s = tdm_data_get_stats(f->data);
    if (s->n_samples < a->global_batch_size) {
        tdm_errorf(err, "%s: %lld usable samples, fewer than --global-batch-size %d", o->flag ? o->flag : "--data",
                   (long long)s->n_samples, a->global_batch_size);
        goto fail;
    }
    snprintf(f->summary, sizeof f->summary,
             "data: %lld samples (%lld images, %lld tokens, %lld loss tokens); %lld skipped as bad, %lld longer than "
             "--seq-length %d dropped%s%s",
             (long long)s->n_samples, (long long)s->n_images, (long long)s->total_tokens,
             (long long)s->total_target_tokens, (long long)s->n_skipped_bad, (long long)s->n_dropped_long,
             a->seq_length, s->first_problem[0] ? "; first: " : "", s->first_problem);
    return f;
fail:
    tdm_feed_free(f);
    return NULL;
}

void tdm_feed_free(tdm_feed *f) {
    if (!f) return;
    tdm_loader_free(f->loader);
    tdm_data_free(f->data);
    if (!f->o.like) tdm_tokenizer_free(f->tok);
    free(f);
}

void tdm_feed_limits(const tdm_feed *f, tdm_model_limits *out) {
    tdm_batch_limits bl;
    tdm_data_batch_limits(f->data, f->o.args->micro_batch_size, &bl);
    out->max_tokens = bl.tokens;
    out->max_seqs = bl.samples;
    out->max_patches = bl.patches;
    out->max_images = bl.images;
}

int tdm_feed_start(tdm_feed *f, int64_t consumed_samples, tdm_error *err) {
    const tdm_train_args *a = f->o.args;
    tdm_loader_options lo = {.sampler = {.seed = a->seed,
                                         .shuffle = 1,
                                         .global_batch_size = a->global_batch_size,
                                         .micro_batch_size = a->micro_batch_size,
                                         .dp_rank = f->o.dp_rank,
                                         .dp_size = f->o.dp_size},
                             .start_consumed = consumed_samples,
                             .ring = 0};
    f->loader = tdm_loader_create(f->data, &lo, err);
    return f->loader ? 0 : -1;
}

int tdm_feed_next(tdm_feed *f, const tdm_batch **b, uint64_t *wait_ns, tdm_error *err) {
    return tdm_loader_next(f->loader, b, wait_ns, err);
}

int64_t tdm_feed_n_samples(const tdm_feed *f) { return tdm_data_n_samples(f->data); }
const char *tdm_feed_summary(const tdm_feed *f) { return f->summary; }
