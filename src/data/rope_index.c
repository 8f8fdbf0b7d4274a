/* rope_index.c - image-pad expansion and 3D positions (see rope_index.h). */
#include "data/rope_index.h"

static int64_t pads_of(const int32_t *g, int merge) {
    if (g[0] < 1 || g[1] < 1 || g[2] < 1 || g[1] % merge || g[2] % merge) return -1;
    return (int64_t)g[0] * (g[1] / merge) * (g[2] / merge);
}

int64_t tdm_rope_expanded_len(const int32_t *ids, int64_t n, int32_t image_pad, const int32_t *grids, int n_images,
                              int merge) {
    int64_t len = 0;
    int img = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] != image_pad) {
            len++;
            continue;
        }
        if (img >= n_images) return -1;
        int64_t k = pads_of(grids + 3 * img++, merge);
        if (k < 0) return -1;
        len += k;
    }
    return img == n_images ? len : -1;
}

int tdm_rope_expand_pads(const int32_t *ids, const int32_t *labels, int64_t n, int32_t image_pad, const int32_t *grids,
                         int n_images, int merge, int32_t *out_ids, int32_t *out_labels, tdm_error *err) {
    int64_t o = 0;
    int img = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t k = 1;
        if (ids[i] == image_pad) {
            if (img >= n_images) return tdm_errorf(err, "more <|image_pad|> tokens than the %d images", n_images);
            k = pads_of(grids + 3 * img++, merge);
            if (k < 0) return tdm_errorf(err, "image %d: grid not divisible by merge size %d", img - 1, merge);
        }
        for (int64_t j = 0; j < k; j++, o++) {
            out_ids[o] = ids[i];
            if (labels && out_labels) out_labels[o] = labels[i];
        }
    }
    if (img != n_images) return tdm_errorf(err, "%d <|image_pad|> tokens for %d images", img, n_images);
    return 0;
}

int64_t tdm_rope_index(const int32_t *ids, int64_t n, int32_t image_pad, const int32_t *grids, int n_images, int merge,
                       int32_t *pos, int64_t stride, tdm_error *err) {
    int64_t p = 0;
    int img = 0;
    int64_t i = 0;
    while (i < n) {
        if (ids[i] != image_pad) {
            pos[i] = pos[stride + i] = pos[2 * stride + i] = (int32_t)p;
            p++;
            i++;
            continue;
        }
        if (img >= n_images) return tdm_errorf(err, "more image-token runs than the %d images", n_images);
        const int32_t *g = grids + 3 * img++;
        int64_t T = g[0], H = g[1] / merge, W = g[2] / merge;
        if (i + T * H * W > n) return tdm_errorf(err, "image %d: its token run is cut short", img - 1);
        for (int64_t t = 0; t < T; t++)
            for (int64_t r = 0; r < H; r++)
                for (int64_t c = 0; c < W; c++, i++) {
                    if (ids[i] != image_pad) return tdm_errorf(err, "image %d: its token run is cut short", img - 1);
                    pos[i] = (int32_t)(p + t);
                    pos[stride + i] = (int32_t)(p + r);
                    pos[2 * stride + i] = (int32_t)(p + c);
                }
        int64_t m = T > H ? T : H;
        p += m > W ? m : W;
    }
    if (img != n_images) return tdm_errorf(err, "%d image-token runs for %d images", img, n_images);
    return p;
}
