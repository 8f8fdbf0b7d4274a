/* resize.c - PIL-compatible bicubic resize (see resize.h for the algorithm).
 *
 * The weights are computed in double exactly as PIL computes them, then rounded to
 * fixed point; a one-ulp difference in a weight could flip a rounding, so nothing here
 * may fuse a multiply-add (PIL's Debian build has no FMA; the build's -ffp-contract=off
 * sees to that).
 */
#include "data/resize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

#define PRECISION_BITS (32 - 8 - 2) /* fixed-point fraction bits: leaves room for 255 * sum|w| */

/* Keys' cubic convolution kernel with a = -0.5 (PIL's "bicubic_filter"), support 2. */
static double cubic(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

/* For each output index: the first input index (bounds[2i]), the number of inputs
 * (bounds[2i+1]) and ksize fixed-point weights (kk[i*ksize ...]). Returns ksize. */
static int precompute(int in_size, int out_size, int **bounds_out, int32_t **kk_out) {
    double scale = (double)in_size / out_size;
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 2.0 * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    double *w = tdm_xmalloc(sizeof(double) * (size_t)ksize);
    int *bounds = tdm_xmalloc(sizeof(int) * 2 * (size_t)out_size);
    int32_t *kk = tdm_xcalloc((size_t)out_size * ksize, sizeof(int32_t));
    for (int xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale;
        double ss = 1.0 / filterscale;
        /* (int) truncates toward zero, as in PIL; negative values are clamped below anyway */
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        double ww = 0.0;
        for (int x = 0; x < xmax; x++) {
            w[x] = cubic((x + xmin - center + 0.5) * ss);
            ww += w[x];
        }
        for (int x = 0; x < xmax; x++) {
            double v = ww != 0.0 ? w[x] / ww : w[x];
            kk[xx * ksize + x] =
                v < 0 ? (int32_t)(-0.5 + v * (1 << PRECISION_BITS)) : (int32_t)(0.5 + v * (1 << PRECISION_BITS));
        }
        bounds[2 * xx] = xmin;
        bounds[2 * xx + 1] = xmax;
    }
    free(w);
    *bounds_out = bounds;
    *kk_out = kk;
    return ksize;
}

static inline uint8_t clip8(int32_t acc) {
    if (acc <= 0) return 0;
    acc >>= PRECISION_BITS;
    return acc > 255 ? 255 : (uint8_t)acc;
}

int tdm_resize_bicubic_u8(const uint8_t *src, int sw, int sh, int channels, uint8_t *dst, int dw, int dh,
                          tdm_error *err) {
    if (sw < 1 || sh < 1 || dw < 1 || dh < 1 || channels < 1 || channels > 4)
        return tdm_errorf(err, "resize: bad sizes %dx%dx%d -> %dx%d", sw, sh, channels, dw, dh);
    const int C = channels;
    /* Horizontal pass: src [sh, sw] -> tmp [sh, dw]. PIL skips a pass whose size does not
     * change; with scale 1 the kernel is the identity anyway, so skipping is exact. */
    const uint8_t *mid = src;
    uint8_t *tmp = NULL;
    if (dw != sw) {
        int *b;
        int32_t *kk;
        int ks = precompute(sw, dw, &b, &kk);
        tmp = tdm_xmalloc((size_t)sh * dw * C);
        for (int y = 0; y < sh; y++) {
            const uint8_t *row = src + (size_t)y * sw * C;
            uint8_t *o = tmp + (size_t)y * dw * C;
            for (int x = 0; x < dw; x++) {
                const int32_t *k = kk + (size_t)x * ks;
                int xmin = b[2 * x], n = b[2 * x + 1];
                for (int c = 0; c < C; c++) {
                    int32_t acc = 1 << (PRECISION_BITS - 1);
                    for (int i = 0; i < n; i++) acc += row[(xmin + i) * C + c] * k[i];
                    o[x * C + c] = clip8(acc);
                }
            }
        }
        free(b);
        free(kk);
        mid = tmp;
    }
    /* Vertical pass: mid [sh, dw] -> dst [dh, dw]. Rows are accumulated whole (integer sums,
     * so the order of the terms does not change the result) to keep the inner loop contiguous. */
    if (dh != sh) {
        int *b;
        int32_t *kk;
        int ks = precompute(sh, dh, &b, &kk);
        size_t stride = (size_t)dw * C;
        int32_t *acc = tdm_xmalloc(sizeof(int32_t) * stride);
        for (int y = 0; y < dh; y++) {
            const int32_t *k = kk + (size_t)y * ks;
            int ymin = b[2 * y], n = b[2 * y + 1];
            for (size_t xc = 0; xc < stride; xc++) acc[xc] = 1 << (PRECISION_BITS - 1);
            for (int i = 0; i < n; i++) {
                const uint8_t *row = mid + (size_t)(ymin + i) * stride;
                const int32_t w = k[i];
                for (size_t xc = 0; xc < stride; xc++) acc[xc] += row[xc] * w;
            }
            uint8_t *o = dst + (size_t)y * stride;
            for (size_t xc = 0; xc < stride; xc++) o[xc] = clip8(acc[xc]);
        }
        free(acc);
        free(b);
        free(kk);
    } else {
        memcpy(dst, mid, (size_t)dh * dw * C);
    }
    free(tmp);
    return 0;
}
