/* preprocess.h - the Qwen2-VL / Qwen3-VL image processor: smart_resize, bicubic resize,
 * normalisation and patch flattening (spec qwen3vl.md section 2).
 *
 *   tdm_preproc_config pp;
 *   tdm_preproc_config_load("configs/tiny", &pp, &err);       // preprocessor_config.json
 *   int32_t grid[3];
 *   tdm_preproc_grid(&pp, img.height, img.width, grid, &err);  // (1, gh, gw) in patches
 *   float *pix = malloc(sizeof(float) * grid[0]*grid[1]*grid[2] * tdm_preproc_patch_dim(&pp));
 *   tdm_preproc_image(&pp, &img, pix, grid, &err);
 *
 * Patch layout (one row per patch, patch_dim = 3 * T * P * P columns):
 *   rows:    for bh < gh/m, bw < gw/m, mh < m, mw < m: patch (2D) row = m*bh + mh, col = m*bw + mw,
 *            so each m x m merge block is m^2 consecutive rows;
 *   columns: c*T*P*P + t*P*P + py*P + px, pixel (y, x) = (P*row + py, P*col + px); the T
 *            temporal copies of a still image are identical.
 */
#ifndef TDM_PREPROCESS_H
#define TDM_PREPROCESS_H

#include <stdint.h>

#include "core/error.h"
#include "data/image.h"

typedef struct tdm_preproc_config {
    int patch_size;          /* P, 16 */
    int temporal_patch_size; /* T, 2 */
    int merge_size;          /* m, 2 */
    int64_t min_pixels;      /* size.shortest_edge: a pixel count, not an edge */
    int64_t max_pixels;      /* size.longest_edge */
    double image_mean[3];
    double image_std[3];
    /* LLaMA-Factory's image_max_pixels / image_min_pixels (0: none): before the processor, a picture
     * of more (fewer) pixels is scaled by sqrt(bound / (w*h)), each side truncated, with PIL's bicubic
     * Image.resize, as its mm_plugin does; then smart_resize as usual */
    int64_t pre_max_pixels, pre_min_pixels;
} tdm_preproc_config;

/* The Qwen3-VL values: P 16, T 2, m 2, min 65536, max 16777216, mean = std = 0.5. */
void tdm_preproc_config_default(tdm_preproc_config *c);
/* LLaMA-Factory's --image-max-pixels / --image-min-pixels (0: none); a minimum above the maximum is
 * refused, naming both flags. */
int tdm_preproc_set_bounds(tdm_preproc_config *c, int64_t max_pixels, int64_t min_pixels, tdm_error *err);

/* Reads a Hugging Face preprocessor_config.json (path of the file or of its folder).
 * Keys: patch_size, temporal_patch_size, merge_size, image_mean, image_std, and
 * size.shortest_edge / size.longest_edge or min_pixels / max_pixels (the latter win).
 * Missing keys keep the defaults above; wrong types and impossible values are errors
 * naming the file and the key. Bounds: patch_size 1..64, temporal_patch_size 1..16,
 * merge_size 1..8, pixel counts 1..TDM_IMAGE_MAX_PIXELS. */
int tdm_preproc_config_load(const char *path, tdm_preproc_config *c, tdm_error *err);

/* Qwen's smart_resize: the size (*out_h, *out_w) the image is resized to, multiples of
 * factor, with min_pixels <= area <= max_pixels (except where one side hits `factor`).
 * Error when max(h,w)/min(h,w) > 200. Rounds half to even like Python's round(). */
int tdm_smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels, int *out_h, int *out_w,
                     tdm_error *err);

/* Columns of one patch row: 3 * T * P * P (1536 for Qwen3-VL). */
int tdm_preproc_patch_dim(const tdm_preproc_config *c);

/* grid_thw = (1, resized_h / P, resized_w / P) of an image of the given size (pixels).
 * Needs only the size, so it can be computed from the file header. */
int tdm_preproc_grid(const tdm_preproc_config *c, int height, int width, int32_t grid_thw[3], tdm_error *err);

/* Resizes (bicubic, PIL-compatible) to the smart_resize size, maps x -> (x/255 - mean)/std
 * and writes grid_thw[0]*grid_thw[1]*grid_thw[2] rows of patch_dim floats into `out`
 * (which the caller sized from tdm_preproc_grid). Fills grid_thw. */
int tdm_preproc_image(const tdm_preproc_config *c, const tdm_image *img, float *out, int32_t grid_thw[3],
                      tdm_error *err);

/* Patch flattening alone, for an image already at its final size (h, w multiples of
 * P*m): rgb [h, w, 3] uint8 -> out [(h/P)*(w/P), patch_dim]. */
void tdm_preproc_patchify(const tdm_preproc_config *c, const uint8_t *rgb, int height, int width, float *out);

#endif
