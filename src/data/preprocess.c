/* preprocess.c - smart_resize, normalisation and Qwen's patch order (see preprocess.h). */
#include "data/preprocess.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/json.h"
#include "data/resize.h"

void tdm_preproc_config_default(tdm_preproc_config *c) {
    memset(c, 0, sizeof *c);
    c->patch_size = 16;
    c->temporal_patch_size = 2;
    c->merge_size = 2;
    c->min_pixels = 65536;
    c->max_pixels = 16777216;
    for (int i = 0; i < 3; i++) {
        c->image_mean[i] = 0.5;
        c->image_std[i] = 0.5;
    }
}

/* An optional positive integer member; keeps *out when absent. */
static int opt_int(const tdm_json *obj, const char *key, int64_t lo, int64_t hi, int64_t *out, const char *file,
                   tdm_error *err) {
    const tdm_json *v = tdm_json_get(obj, key);
    if (!v) return 0;
    if (v->type != TDM_JSON_NUMBER || !v->is_int || v->i64 < lo || v->i64 > hi)
        return tdm_errorf(err, "%s: \"%s\" must be an integer in [%lld, %lld]", file, key, (long long)lo,
                          (long long)hi);
    *out = v->i64;
    return 0;
}

/* A pixel bound (min_pixels, max_pixels, size's shortest_edge, longest_edge): null is absent, as
 * Hugging Face's processor skips a None bound (Qwen3-VL configs ship "max_pixels": null). */
static const tdm_json *bound(const tdm_json *obj, const char *key) {
    const tdm_json *v = tdm_json_get(obj, key);
    return v && v->type != TDM_JSON_NULL ? v : NULL;
}

static int opt_bound(const tdm_json *obj, const char *key, int64_t hi, int64_t *out, const char *file, tdm_error *err) {
    return bound(obj, key) ? opt_int(obj, key, 1, hi, out, file, err) : 0;
}

static int opt_triple(const tdm_json *obj, const char *key, int positive, double out[3], const char *file,
                      tdm_error *err) {
    const tdm_json *v = tdm_json_get(obj, key);
    if (!v) return 0;
    if (v->type == TDM_JSON_NUMBER) { /* HF also accepts one number for all channels */
        for (int i = 0; i < 3; i++) out[i] = v->num;
    } else if (v->type == TDM_JSON_ARRAY && v->len == 3) {
        for (int i = 0; i < 3; i++) {
            if (v->items[i]->type != TDM_JSON_NUMBER)
                return tdm_errorf(err, "%s: \"%s\" must hold 3 numbers", file, key);
            out[i] = v->items[i]->num;
        }
    } else {
        return tdm_errorf(err, "%s: \"%s\" must be a number or a list of 3 numbers", file, key);
    }
    for (int i = 0; i < 3; i++)
        if (positive && !(out[i] > 0)) return tdm_errorf(err, "%s: \"%s\" must be positive", file, key);
    return 0;
}

/* The processor's switches and settings that tandem implements one way only: a config that
 * asks for another way is refused, not silently preprocessed the usual way. */
static int check_fixed_steps(const tdm_json *root, const char *file, tdm_error *err) {
    static const char *const must_be_true[] = {"do_resize", "do_rescale", "do_normalize", "do_convert_rgb"};
    for (size_t i = 0; i < sizeof must_be_true / sizeof *must_be_true; i++) {
        const tdm_json *v = tdm_json_get(root, must_be_true[i]);
        if (v && v->type != TDM_JSON_TRUE)
            return tdm_errorf(err,
                              "%s: \"%s\": expected true (tandem always resizes with smart_resize, rescales "
                              "by 1/255, normalizes with image_mean/image_std and converts to RGB)",
                              file, must_be_true[i]);
    }
    const tdm_json *v = tdm_json_get(root, "rescale_factor");
    if (v && (v->type != TDM_JSON_NUMBER || fabs(v->num * 255.0 - 1.0) > 1e-9))
        return tdm_errorf(err,
                          "%s: \"rescale_factor\": expected 1/255 = 0.00392156862745098 (pixels are scaled "
                          "from 0..255 to 0..1)",
                          file);
    v = tdm_json_get(root, "resample");
    if (v && (v->type != TDM_JSON_NUMBER || !v->is_int || v->i64 != 3))
        return tdm_errorf(err, "%s: \"resample\": expected 3 (PIL's bicubic, the only resampling tandem implements)",
                          file);
    return 0;
}

int tdm_preproc_config_load(const char *path, tdm_preproc_config *c, tdm_error *err) {
    tdm_preproc_config_default(c);
    char file[1100];
    size_t n = strlen(path);
    if (n >= 5 && !strcmp(path + n - 5, ".json")) snprintf(file, sizeof file, "%s", path);
    else snprintf(file, sizeof file, "%s/preprocessor_config.json", path);
    size_t len;
    char *text = tdm_read_file(file, 1 << 20, &len, err);
    if (!text) return -1;
    tdm_json_doc *doc = tdm_json_parse(text, len, file, err);
    free(text);
    if (!doc) return -1;
    const tdm_json *root = tdm_json_root(doc);
    int rc = -1;
    int64_t P = c->patch_size, T = c->temporal_patch_size, m = c->merge_size;
    int64_t lo = c->min_pixels, hi = c->max_pixels;
    if (root->type != TDM_JSON_OBJECT) {
        tdm_errorf(err, "%s: expected a JSON object", file);
        goto done;
    }
    /* The bounds are the model config's (patch 1..64, merge 1..8) and the decoder's pixel
     * limit: every resized image, and so every patch buffer, stays bounded by them. */
    const int64_t max_px = TDM_IMAGE_MAX_PIXELS;
    if (check_fixed_steps(root, file, err) != 0) goto done;
    if (opt_int(root, "patch_size", 1, 64, &P, file, err) ||
        opt_int(root, "temporal_patch_size", 1, 16, &T, file, err) || opt_int(root, "merge_size", 1, 8, &m, file, err))
        goto done;
    /* Hugging Face's processor refuses a "size" without both pixel bounds once min_pixels and
     * max_pixels are applied; it must not fall back to the defaults here ({"height", "width"}
     * is another processor's size) */
    const tdm_json *size = tdm_json_get(root, "size");
    if (size && size->type != TDM_JSON_NULL) {
        static const char *const edge[2] = {"shortest_edge", "longest_edge"};
        static const char *const px[2] = {"min_pixels", "max_pixels"};
        if (size->type != TDM_JSON_OBJECT) {
            tdm_errorf(err,
                       "%s: \"size\" must be an object with \"shortest_edge\" and \"longest_edge\" (pixel "
                       "counts)",
                       file);
            goto done;
        }
        for (int k = 0; k < 2; k++)
            if (!bound(size, edge[k]) && !bound(root, px[k])) {
                tdm_errorf(err,
                           "%s: \"size\" has no \"%s\" (and there is no \"%s\"): expected the pixel bounds "
                           "\"shortest_edge\" and \"longest_edge\", as Qwen's image processor does",
                           file, edge[k], px[k]);
                goto done;
            }
        if (opt_bound(size, "shortest_edge", max_px, &lo, file, err) ||
            opt_bound(size, "longest_edge", max_px, &hi, file, err))
            goto done;
    }
    if (opt_bound(root, "min_pixels", max_px, &lo, file, err) || opt_bound(root, "max_pixels", max_px, &hi, file, err))
        goto done;
    if (lo > hi) {
        tdm_errorf(err, "%s: min_pixels %lld is larger than max_pixels %lld", file, (long long)lo, (long long)hi);
        goto done;
    }
    if (opt_triple(root, "image_mean", 0, c->image_mean, file, err) ||
        opt_triple(root, "image_std", 1, c->image_std, file, err))
        goto done;
    c->patch_size = (int)P;
    c->temporal_patch_size = (int)T;
    c->merge_size = (int)m;
    c->min_pixels = lo;
    c->max_pixels = hi;
    rc = 0;
done:
    tdm_json_free(doc);
    return rc;
}

int tdm_smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels, int *out_h, int *out_w,
                     tdm_error *err) {
    if (height < 1 || width < 1) return tdm_errorf(err, "image size %dx%d is empty", width, height);
    double h = height, w = width, f = factor;
    if ((h > w ? h : w) / (h < w ? h : w) > 200)
        return tdm_errorf(err, "image of %dx%d pixels: aspect ratio must be at most 200, got %.1f", width, height,
                          (h > w ? h / w : w / h));
    /* rint: Python's round() rounds half to even */
    double hb = rint(h / f) * f, wb = rint(w / f) * f;
    if (hb * wb > (double)max_pixels) {
        double beta = sqrt(h * w / (double)max_pixels);
        hb = fmax(f, floor(h / beta / f) * f);
        wb = fmax(f, floor(w / beta / f) * f);
    } else if (hb * wb < (double)min_pixels) {
        double beta = sqrt((double)min_pixels / (h * w));
        hb = ceil(h * beta / f) * f;
        wb = ceil(w * beta / f) * f;
    }
    if (hb < f || wb < f || hb > 1e6 || wb > 1e6)
        return tdm_errorf(err, "image of %dx%d pixels: smart_resize gives an unusable size %.0fx%.0f", width, height,
                          wb, hb);
    *out_h = (int)hb;
    *out_w = (int)wb;
    return 0;
}

int tdm_preproc_patch_dim(const tdm_preproc_config *c) {
    return 3 * c->temporal_patch_size * c->patch_size * c->patch_size;
}

int tdm_preproc_set_bounds(tdm_preproc_config *c, int64_t max_pixels, int64_t min_pixels, tdm_error *err) {
    if (max_pixels < 0 || min_pixels < 0 || (max_pixels > 0 && min_pixels > max_pixels))
        return tdm_errorf(err, "--image-min-pixels %lld: larger than --image-max-pixels %lld", (long long)min_pixels,
                          (long long)max_pixels);
    c->pre_max_pixels = max_pixels;
    c->pre_min_pixels = min_pixels;
    return 0;
}

/* LLaMA-Factory's _preprocess_image bounds: the size the picture has when the processor gets it
 * (Python: int(w * sqrt(bound / (w * h))), in doubles as here), and in *mid_h x *mid_w (NULL:
 * not wanted) the size after the max bound alone: when the min bound then changes it again,
 * PIL resizes twice. */
static int prescaled(const tdm_preproc_config *c, int height, int width, int *out_h, int *out_w, int *mid_h, int *mid_w,
                     tdm_error *err) {
    double w = width, h = height;
    if (c->pre_max_pixels > 0 && w * h > (double)c->pre_max_pixels) {
        double f = sqrt((double)c->pre_max_pixels / (w * h));
        w = (double)(int64_t)(w * f), h = (double)(int64_t)(h * f);
    }
    if (mid_h) *mid_h = (int)h, *mid_w = (int)w; /* checked with the final size below */
    /* a side the max bound truncated to 0 (a 10000x1 strip) is refused below: the min bound's
     * factor would be sqrt(N / 0), and converting infinity to an integer is undefined */
    if (c->pre_min_pixels > 0 && w >= 1 && h >= 1 && w * h < (double)c->pre_min_pixels) {
        double f = sqrt((double)c->pre_min_pixels / (w * h));
        w = (double)(int64_t)(w * f), h = (double)(int64_t)(h * f);
    }
    if (w < 1 || h < 1 || w > 65535 || h > 65535)
        return tdm_errorf(err, "image of %dx%d pixels: --image-max-pixels / --image-min-pixels scale it to %.0fx%.0f",
                          width, height, w, h);
    *out_w = (int)w;
    *out_h = (int)h;
    return 0;
}

int tdm_preproc_grid(const tdm_preproc_config *c, int height, int width, int32_t grid_thw[3], tdm_error *err) {
    int rh, rw;
    if (prescaled(c, height, width, &height, &width, NULL, NULL, err) != 0) return -1;
    if (tdm_smart_resize(height, width, c->patch_size * c->merge_size, c->min_pixels, c->max_pixels, &rh, &rw, err) !=
        0)
        return -1;
    grid_thw[0] = 1; /* a still image is one temporal patch (T identical frames) */
    grid_thw[1] = rh / c->patch_size;
    grid_thw[2] = rw / c->patch_size;
    return 0;
}

void tdm_preproc_patchify(const tdm_preproc_config *c, const uint8_t *rgb, int height, int width, float *out) {
    const int P = c->patch_size, T = c->temporal_patch_size, m = c->merge_size;
    const int gh = height / P, gw = width / P, D = tdm_preproc_patch_dim(c);
    float lut[3][256]; /* (x/255 - mean)/std, computed in double and rounded once */
    for (int ch = 0; ch < 3; ch++)
        for (int x = 0; x < 256; x++) lut[ch][x] = (float)((x / 255.0 - c->image_mean[ch]) / c->image_std[ch]);
    float *o = out;
    for (int bh = 0; bh < gh / m; bh++)
        for (int bw = 0; bw < gw / m; bw++)
            for (int mh = 0; mh < m; mh++)
                for (int mw = 0; mw < m; mw++) {
                    int prow = bh * m + mh, pcol = bw * m + mw;
                    for (int ch = 0; ch < 3; ch++)
                        for (int py = 0; py < P; py++) {
                            const uint8_t *src = rgb + ((size_t)(prow * P + py) * width + (size_t)pcol * P) * 3 + ch;
                            float *dst = o + (size_t)ch * T * P * P + (size_t)py * P;
                            for (int px = 0; px < P; px++) dst[px] = lut[ch][src[3 * px]];
                            for (int t = 1; t < T; t++) /* temporal copies of the still frame */
                                memcpy(dst + (size_t)t * P * P, dst, sizeof(float) * P);
                        }
                    o += D;
                }
}

int tdm_preproc_image(const tdm_preproc_config *c, const tdm_image *img, float *out, int32_t grid_thw[3],
                      tdm_error *err) {
    if (tdm_preproc_grid(c, img->height, img->width, grid_thw, err) != 0) return -1;
    /* the sizes in turn: the picture, LLaMA-Factory's max bound, its min bound (each its own
     * PIL resize), the processor's smart_resize */
    int hs[4] = {img->height, 0, 0, grid_thw[1] * c->patch_size};
    int ws[4] = {img->width, 0, 0, grid_thw[2] * c->patch_size};
    if (prescaled(c, img->height, img->width, &hs[2], &ws[2], &hs[1], &ws[1], err) != 0) return -1;
    const uint8_t *rgb = img->rgb;
    uint8_t *owned = NULL;
    int rc = 0, k = 0; /* rgb is hs[k] x ws[k] */
    for (int s = 1; s < 4 && rc == 0; s++) {
        if (hs[s] == hs[k] && ws[s] == ws[k]) continue; /* PIL returns a copy for the same size */
        uint8_t *next = tdm_xmalloc((size_t)hs[s] * ws[s] * 3);
        rc = tdm_resize_bicubic_u8(rgb, ws[k], hs[k], 3, next, ws[s], hs[s], err);
        free(owned);
        rgb = owned = next;
        k = s;
    }
    if (rc == 0) tdm_preproc_patchify(c, rgb, hs[3], ws[3], out);
    free(owned);
    return rc;
}
