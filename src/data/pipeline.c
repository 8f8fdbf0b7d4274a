/* pipeline.c - scanning a dataset once, then packing micro-batches (see pipeline.h). */
#include "data/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/alloc.h"
#include "data/chat.h"
#include "data/image.h"
#include "data/rope_index.h"

struct tdm_data {
    tdm_dataset *ds;
    tdm_preproc_config pp;
    tdm_chat chat;
    int64_t max_pixels;
    tdm_data_stats stats;
    /* per usable sample i: */
    int64_t n;
    int64_t *src;     /* [n] dataset index */
    int64_t *tok_off; /* [n+1] into ids/labels: the compact tokens (one pad per image) */
    int32_t *ids, *labels;
    int64_t *img_off; /* [n+1] into grids (in images) */
    int32_t *grids;   /* [n_images, 3] */
    int *n_tokens;    /* [n] images expanded */
    int *n_patches;   /* [n] */
};

void tdm_data_free(tdm_data *d) {
    if (!d) return;
    tdm_dataset_free(d->ds);
    free(d->src);
    free(d->tok_off);
    free(d->ids);
    free(d->labels);
    free(d->img_off);
    free(d->grids);
    free(d->n_tokens);
    free(d->n_patches);
    free(d);
}

int64_t tdm_data_n_samples(const tdm_data *d) { return d->n; }
const tdm_data_stats *tdm_data_get_stats(const tdm_data *d) { return &d->stats; }
const tdm_dataset *tdm_data_dataset(const tdm_data *d) { return d->ds; }
int64_t tdm_data_source_index(const tdm_data *d, int64_t i) { return d->src[i]; }
int tdm_data_patch_dim(const tdm_data *d) { return tdm_preproc_patch_dim(&d->pp); }
int tdm_data_sample_tokens(const tdm_data *d, int64_t i) { return d->n_tokens[i]; }
int tdm_data_sample_patches(const tdm_data *d, int64_t i) { return d->n_patches[i]; }

/* Grids and tokens of dataset sample j, appended to the arrays when usable.
 * Returns 0 (kept), 1 (dropped: too long), -1 (bad: err says why, without prefix). */
static int scan_sample(tdm_data *d, int64_t j, int seq_length, tdm_ids *ids, tdm_ids *labels, tdm_ids *grids,
                       int64_t *n_tok, int64_t *n_patch, tdm_error *err) {
    const tdm_sample *s = &d->ds->samples[j];
    size_t g0 = grids->len, t0 = ids->len;
    *n_patch = 0;
    for (int k = 0; k < s->n_images; k++) {
        int w, h;
        int32_t g[3];
        if (tdm_image_probe(s->images[k], &w, &h, err) != 0) goto bad;
        if ((int64_t)w * h > d->max_pixels) {
            tdm_errorf(err, "%s: image is %dx%d, more than the limit of %lld pixels", s->images[k], w, h,
                       (long long)d->max_pixels);
            goto bad;
        }
        if (tdm_preproc_grid(&d->pp, h, w, g, err) != 0) {
            tdm_error_prefix(err, "%s", s->images[k]);
            goto bad;
        }
        for (int a = 0; a < 3; a++) tdm_ids_push(grids, g[a]);
        *n_patch += (int64_t)g[0] * g[1] * g[2];
    }
    if (tdm_chat_encode(&d->chat, s, ids, labels, err) != 0) goto bad;
    *n_tok = tdm_rope_expanded_len(ids->data + t0, (int64_t)(ids->len - t0), d->chat.image_pad, grids->data + g0,
                                   s->n_images, d->pp.merge_size);
    if (*n_tok < 0) {
        tdm_errorf(err, "image tokens do not match the images");
        goto bad;
    }
    if ((seq_length > 0 && *n_tok > seq_length) || *n_tok > INT32_MAX / 4 || *n_patch > INT32_MAX / 4) {
        if (seq_length > 0 && *n_tok > seq_length)
            tdm_errorf(err, "%lld tokens, more than the sequence length %d", (long long)*n_tok, seq_length);
        else
            tdm_errorf(err, "%lld tokens and %lld image patches, more than one micro-batch can index",
                       (long long)*n_tok, (long long)*n_patch);
        ids->len = labels->len = t0;
        grids->len = g0;
        return 1;
    }
    return 0;
bad:
    ids->len = labels->len = t0; /* both had t0 entries before this sample */
    grids->len = g0;
    return -1;
}

tdm_data *tdm_data_open(const tdm_data_options *o, const tdm_tokenizer *tok, const tdm_preproc_config *pp,
                        tdm_error *err) {
    tdm_dataset_options dopt = {.image_root = o->image_root, .skip_bad_samples = o->skip_bad_samples};
    tdm_dataset *ds = tdm_dataset_load(o->files, o->n_files, &dopt, err);
    if (!ds) return NULL;
    tdm_data *d = tdm_xcalloc(1, sizeof *d);
    d->ds = ds;
    d->pp = *pp;
    d->max_pixels = o->max_image_pixels > 0 ? o->max_image_pixels : TDM_IMAGE_MAX_PIXELS;
    d->stats.n_skipped_bad = ds->n_skipped;
    snprintf(d->stats.first_problem, sizeof d->stats.first_problem, "%s", ds->first_skip);
    if (tdm_chat_init(&d->chat, tok, err) != 0) goto fail;
    int64_t N = ds->n_samples;
    d->src = tdm_xmalloc(sizeof(int64_t) * (size_t)(N + 1));
    d->tok_off = tdm_xmalloc(sizeof(int64_t) * (size_t)(N + 1));
    d->img_off = tdm_xmalloc(sizeof(int64_t) * (size_t)(N + 1));
    d->n_tokens = tdm_xmalloc(sizeof(int) * (size_t)(N + 1));
    d->n_patches = tdm_xmalloc(sizeof(int) * (size_t)(N + 1));
    tdm_ids ids = {0}, labels = {0}, grids = {0};
    int scan_problem_seen = 0;
    d->tok_off[0] = d->img_off[0] = 0;
    for (int64_t j = 0; j < N; j++) {
        int64_t nt, np;
        tdm_error e;
        int rc = scan_sample(d, j, o->seq_length, &ids, &labels, &grids, &nt, &np, &e);
        if (rc != 0) {
            char where[1200];
            tdm_dataset_where(ds, j, where, sizeof where);
            if (rc < 0 && !o->skip_bad_samples) {
                tdm_errorf(err, "%s: %s", where, e.msg);
                tdm_ids_free(&ids);
                tdm_ids_free(&labels);
                tdm_ids_free(&grids);
                goto fail;
            }
            if (rc < 0) d->stats.n_skipped_bad++;
            else d->stats.n_dropped_long++;
            /* the first in file order: one the dataset skipped while parsing may come after this one */
            const tdm_sample *sj = &ds->samples[j];
            int earlier = !ds->n_skipped || sj->file < ds->first_skip_file ||
                          (sj->file == ds->first_skip_file && sj->index < ds->first_skip_index);
            if (!scan_problem_seen++ && earlier) { /* a long path cuts the reason's end, not the sample's place */
                tdm_error first;
                tdm_errorf(&first, "%s: %s", where, e.msg);
                snprintf(d->stats.first_problem, sizeof d->stats.first_problem, "%s", first.msg);
            }
            continue;
        }
        int64_t i = d->n++;
        d->src[i] = j;
        d->tok_off[i + 1] = (int64_t)ids.len;
        d->img_off[i + 1] = (int64_t)grids.len / 3;
        d->n_tokens[i] = (int)nt;
        d->n_patches[i] = (int)np;
        int n_img = ds->samples[j].n_images;
        d->stats.n_images += n_img;
        d->stats.total_tokens += nt;
        for (int64_t k = d->tok_off[i]; k < d->tok_off[i + 1]; k++)
            d->stats.total_target_tokens += labels.data[k] != TDM_IGNORE_INDEX;
        if (nt > d->stats.max_tokens) d->stats.max_tokens = (int)nt;
        if (np > d->stats.max_patches) d->stats.max_patches = (int)np;
        if (n_img > d->stats.max_images) d->stats.max_images = n_img;
    }
    d->ids = ids.data;
    d->labels = labels.data;
    d->grids = grids.data;
    d->stats.n_samples = d->n;
    if (d->n == 0) { /* the first problem may be in another file than the first */
        char also[64] = "";
        if (ds->n_files > 1)
            snprintf(also, sizeof also, " (and %d more dataset file%s)", ds->n_files - 1, ds->n_files > 2 ? "s" : "");
        tdm_errorf(err, "%s%s: no usable sample (first problem: %s)", ds->files[0], also,
                   d->stats.first_problem[0] ? d->stats.first_problem
                   : ds->n_files > 1         ? "the files hold no sample"
                                             : "the file holds no sample");
        goto fail;
    }
    return d;
fail:
    tdm_data_free(d);
    return NULL;
}

static int cmp_desc(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

static int sum_top(const tdm_data *d, int k, int (*get)(const tdm_data *, int64_t)) {
    int *v = tdm_xmalloc(sizeof(int) * (size_t)d->n);
    for (int64_t i = 0; i < d->n; i++) v[i] = get(d, i);
    qsort(v, (size_t)d->n, sizeof(int), cmp_desc);
    int64_t s = 0;
    for (int64_t i = 0; i < k && i < d->n; i++) s += v[i];
    free(v);
    return s > INT32_MAX ? INT32_MAX : (int)s;
}

static int images_of(const tdm_data *d, int64_t i) { return (int)(d->img_off[i + 1] - d->img_off[i]); }

void tdm_data_batch_limits(const tdm_data *d, int k, tdm_batch_limits *out) {
    out->tokens = sum_top(d, k, tdm_data_sample_tokens);
    out->patches = sum_top(d, k, tdm_data_sample_patches);
    out->images = sum_top(d, k, images_of);
    out->samples = k;
}

uint64_t tdm_batch_fingerprint(const tdm_batch *b) {
    XXH3_state_t *st = XXH3_createState();
    XXH3_64bits_reset(st);
    size_t nt = (size_t)b->n_tokens;
    XXH3_64bits_update(st, b->input_ids, sizeof(int32_t) * nt);
    XXH3_64bits_update(st, b->labels, sizeof(int32_t) * nt);
    XXH3_64bits_update(st, b->position_ids, sizeof(int32_t) * 3 * nt);
    XXH3_64bits_update(st, b->cu_seqlens, sizeof(int32_t) * ((size_t)b->n_seqs + 1));
    XXH3_64bits_update(st, b->image_grid_thw, sizeof(int32_t) * 3 * (size_t)b->n_images);
    XXH3_64bits_update(st, b->pixel_values, sizeof(float) * (size_t)b->n_patches * (size_t)b->patch_dim);
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

/* Decodes picture `path` and writes its patches to `out`, which the caller sized for
 * grid `want` (found when the file header was read). The file may have been replaced
 * since, so its grid is checked before a single patch is written. Errors name the path. */
static int load_patches(const tdm_preproc_config *pp, const char *path, int64_t max_pixels, const int32_t want[3],
                        float *out, tdm_error *err) {
    tdm_image im;
    int32_t g[3];
    if (tdm_image_load(path, max_pixels, &im, err) != 0) return -1;
    int rc = tdm_preproc_grid(pp, im.height, im.width, g, err);
    if (rc != 0) tdm_error_prefix(err, "%s", path);
    else if (g[0] != want[0] || g[1] != want[1] || g[2] != want[2])
        rc = tdm_errorf(err, "%s: image size changed since the dataset was opened (now %dx%d pixels)", path, im.width,
                        im.height);
    else if ((rc = tdm_preproc_image(pp, &im, out, g, err)) != 0) tdm_error_prefix(err, "%s", path);
    tdm_image_free(&im);
    return rc;
}

int tdm_data_build_batch(const tdm_data *d, const int64_t *idx, int n, tdm_batch *b, tdm_error *err) {
    int64_t tokens = 0, patches = 0, images = 0;
    for (int s = 0; s < n; s++) {
        if (idx[s] < 0 || idx[s] >= d->n)
            return tdm_errorf(err, "sample index %lld out of range [0, %lld)", (long long)idx[s], (long long)d->n);
        tokens += d->n_tokens[idx[s]];
        patches += d->n_patches[idx[s]];
        images += d->img_off[idx[s] + 1] - d->img_off[idx[s]];
    }
    if (tokens > INT32_MAX / 4 || patches > INT32_MAX / 4)
        return tdm_errorf(err, "micro-batch of %d samples is too large (%lld tokens)", n, (long long)tokens);
    const int D = tdm_preproc_patch_dim(&d->pp), m = d->pp.merge_size;
    tdm_batch_reserve(b, (int)tokens, n, (int)images, (int)patches, D);
    b->n_tokens = (int)tokens;
    b->n_seqs = b->n_samples = n;
    b->n_images = (int)images;
    b->n_patches = (int)patches;
    b->step = -1;
    b->micro = 0;
    b->first_sample = -1;
    b->n_target_tokens = 0;
    int64_t off = 0, img = 0, poff = 0;
    b->cu_seqlens[0] = 0;
    for (int s = 0; s < n; s++) {
        int64_t i = idx[s];
        const int64_t t0 = d->tok_off[i], nt = d->tok_off[i + 1] - t0, len = d->n_tokens[i];
        const int n_img = (int)(d->img_off[i + 1] - d->img_off[i]);
        const int32_t *grids = d->grids + 3 * d->img_off[i];
        const tdm_sample *smp = &d->ds->samples[d->src[i]];
        char where[1200];
        tdm_dataset_where(d->ds, d->src[i], where, sizeof where);
        if (tdm_rope_expand_pads(d->ids + t0, d->labels + t0, nt, d->chat.image_pad, grids, n_img, m,
                                 b->input_ids + off, b->labels + off, err) != 0 ||
            tdm_rope_index(b->input_ids + off, len, d->chat.image_pad, grids, n_img, m, b->position_ids + off, tokens,
                           err) < 0)
            return tdm_error_prefix(err, "%s", where);
        for (int64_t k = 0; k < len; k++) {
            int32_t t = k + 1 < len ? b->labels[off + k + 1] : TDM_IGNORE_INDEX;
            b->targets[off + k] = t;
            b->n_target_tokens += t != TDM_IGNORE_INDEX;
        }
        for (int k = 0; k < n_img; k++, img++) {
            const int32_t *g = grids + 3 * k;
            if (load_patches(&d->pp, smp->images[k], d->max_pixels, g, b->pixel_values + poff * D, err) != 0)
                return tdm_error_prefix(err, "%s", where);
            memcpy(b->image_grid_thw + 3 * img, g, 3 * sizeof *g);
            poff += (int64_t)g[0] * g[1] * g[2];
        }
        off += len;
        b->cu_seqlens[s + 1] = (int32_t)off;
    }
    b->fingerprint = tdm_batch_fingerprint(b);
    return 0;
}

int tdm_data_build_prompt(const tdm_tokenizer *tok, const tdm_preproc_config *pp, const tdm_turn *turns, int n_turns,
                          const char *const *images, int n_images, tdm_batch *b, int64_t *next_pos, tdm_error *err) {
    tdm_chat chat;
    if (tdm_chat_init(&chat, tok, err) != 0) return -1;
    if (n_images < 0 || n_images > TDM_DATASET_MAX_IMAGES_PER_SAMPLE)
        return tdm_errorf(err, "%d images in one prompt, more than the limit of %d", n_images,
                          TDM_DATASET_MAX_IMAGES_PER_SAMPLE);
    int32_t grids[3 * TDM_DATASET_MAX_IMAGES_PER_SAMPLE];
    int64_t patches = 0;
    for (int k = 0; k < n_images; k++) {
        int w, h;
        if (tdm_image_probe(images[k], &w, &h, err) != 0) return -1;
        if (tdm_preproc_grid(pp, h, w, grids + 3 * k, err) != 0) return tdm_error_prefix(err, "%s", images[k]);
        patches += (int64_t)grids[3 * k] * grids[3 * k + 1] * grids[3 * k + 2];
    }
    tdm_ids ids = {0};
    int rc = -1;
    if (tdm_chat_encode_prompt(&chat, turns, n_turns, &ids, err) != 0) goto done;
    int64_t n = tdm_rope_expanded_len(ids.data, (int64_t)ids.len, chat.image_pad, grids, n_images, pp->merge_size);
    if (n < 0) {
        tdm_errorf(err, "the prompt has a different number of <image> tags than the %d images given", n_images);
        goto done;
    }
    if (n > INT32_MAX / 4 || patches > INT32_MAX / 4) {
        tdm_errorf(err, "the prompt is too long (%lld tokens)", (long long)n);
        goto done;
    }
    const int D = tdm_preproc_patch_dim(pp);
    tdm_batch_reserve(b, (int)n, 1, n_images, (int)patches, D);
    b->n_tokens = (int)n;
    b->n_seqs = b->n_samples = 1;
    b->cu_seqlens[0] = 0;
    b->cu_seqlens[1] = (int)n;
    b->n_images = n_images;
    b->n_patches = (int)patches;
    b->step = -1;
    b->micro = 0;
    b->first_sample = -1;
    b->n_target_tokens = 0;
    if (tdm_rope_expand_pads(ids.data, NULL, (int64_t)ids.len, chat.image_pad, grids, n_images, pp->merge_size,
                             b->input_ids, NULL, err) != 0)
        goto done;
    int64_t next =
        tdm_rope_index(b->input_ids, n, chat.image_pad, grids, n_images, pp->merge_size, b->position_ids, n, err);
    if (next < 0) goto done;
    if (next_pos) *next_pos = next;
    for (int64_t i = 0; i < n; i++) b->labels[i] = b->targets[i] = TDM_IGNORE_INDEX;
    int64_t poff = 0;
    for (int k = 0; k < n_images; k++) {
        const int32_t *g = grids + 3 * k;
        if (load_patches(pp, images[k], TDM_IMAGE_MAX_PIXELS, g, b->pixel_values + poff * D, err) != 0) goto done;
        memcpy(b->image_grid_thw + 3 * k, g, 3 * sizeof *g);
        poff += (int64_t)g[0] * g[1] * g[2];
    }
    b->fingerprint = tdm_batch_fingerprint(b);
    rc = 0;
done:
    tdm_ids_free(&ids);
    return rc;
}
