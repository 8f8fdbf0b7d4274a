/* norm.c - LayerNorm (with bias) and RMSNorm, forward and backward, one row at a time.
 *
 * Row sums use eight float partial sums (one vector register), which keeps the
 * rounding error of a 4096-wide row near 1e-6 relative without going to double.
 * dx may be the same array as dy: each element of dy is read before dx overwrites it.
 */
#include "kernels/kernels.h"

#include <math.h>

#include "kernels/vec.h"

/* sum_j a[j]. Two accumulators, so the loop is not bound by the latency of one chain
 * of vector adds. */
static float row_sum(const float *a, int d) {
    tdm_v8 acc0 = tdm_v8_set1(0.0f), acc1 = acc0;
    int j = 0;
    for (; j + 16 <= d; j += 16) {
        acc0 += tdm_v8_load(a + j);
        acc1 += tdm_v8_load(a + j + 8);
    }
    for (; j + 8 <= d; j += 8) acc0 += tdm_v8_load(a + j);
    if (j < d) acc1 += tdm_v8_load_part(a + j, d - j, 0.0f);
    return tdm_v8_sum(acc0 + acc1);
}

/* sum_j (a[j] - c)^2 */
static float row_sumsq(const float *a, float c, int d) {
    tdm_v8 acc0 = tdm_v8_set1(0.0f), acc1 = acc0;
    int j = 0;
    for (; j + 16 <= d; j += 16) {
        tdm_v8 t0 = tdm_v8_load(a + j) - c, t1 = tdm_v8_load(a + j + 8) - c;
        acc0 += t0 * t0;
        acc1 += t1 * t1;
    }
    for (; j + 8 <= d; j += 8) {
        tdm_v8 t = tdm_v8_load(a + j) - c;
        acc0 += t * t;
    }
    if (j < d) {
        tdm_v8 t = tdm_v8_load_part(a + j, d - j, c) - c;
        acc1 += t * t;
    }
    return tdm_v8_sum(acc0 + acc1);
}

void tdm_layernorm_forward(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b, int n,
                           int d, float eps) {
    for (int i = 0; i < n; i++) {
        const float *xr = x + (int64_t)i * d;
        float *yr = y + (int64_t)i * d;
        float mu = row_sum(xr, d) / (float)d;
        float r = 1.0f / sqrtf(row_sumsq(xr, mu, d) / (float)d + eps);
        int j = 0;
        for (; j + 8 <= d; j += 8) {
            tdm_v8 t = (tdm_v8_load(xr + j) - mu) * r * tdm_v8_load(w + j);
            tdm_v8_store(yr + j, b ? t + tdm_v8_load(b + j) : t);
        }
        for (; j < d; j++) yr[j] = (xr[j] - mu) * r * w[j] + (b ? b[j] : 0.0f);
        if (mean) mean[i] = mu;
        if (rstd) rstd[i] = r;
    }
}

/* With xhat = (x - mean) rstd and u = dy w:
 *   dx = rstd (u - mean(u) - xhat mean(u xhat)),  dw += dy xhat,  db += dy. */
void tdm_layernorm_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *mean,
                            const float *rstd, const float *w, int n, int d) {
    for (int i = 0; i < n; i++) {
        const float *xr = x + (int64_t)i * d;
        const float *g = dy + (int64_t)i * d;
        float mu = mean[i], r = rstd[i];
        tdm_v8 su = tdm_v8_set1(0.0f), sux = tdm_v8_set1(0.0f);
        int j = 0;
        for (; j + 8 <= d; j += 8) {
            tdm_v8 xh = (tdm_v8_load(xr + j) - mu) * r;
            tdm_v8 u = tdm_v8_load(g + j) * tdm_v8_load(w + j);
            su += u;
            sux += u * xh;
        }
        float sum_u = tdm_v8_sum(su), sum_ux = tdm_v8_sum(sux);
        for (; j < d; j++) {
            float xh = (xr[j] - mu) * r, u = g[j] * w[j];
            sum_u += u;
            sum_ux += u * xh;
        }
        float mean_u = sum_u / (float)d, mean_ux = sum_ux / (float)d;
        float *dxr = dx ? dx + (int64_t)i * d : NULL;
        for (j = 0; j + 8 <= d; j += 8) {
            tdm_v8 gj = tdm_v8_load(g + j), xh = (tdm_v8_load(xr + j) - mu) * r;
            if (dw) tdm_v8_store(dw + j, tdm_v8_load(dw + j) + gj * xh);
            if (db) tdm_v8_store(db + j, tdm_v8_load(db + j) + gj);
            if (dxr) tdm_v8_store(dxr + j, r * (gj * tdm_v8_load(w + j) - mean_u - xh * mean_ux));
        }
        for (; j < d; j++) {
            float gj = g[j], xh = (xr[j] - mu) * r;
            if (dw) dw[j] += gj * xh;
            if (db) db[j] += gj;
            if (dxr) dxr[j] = r * (gj * w[j] - mean_u - xh * mean_ux);
        }
    }
}

void tdm_rmsnorm_forward(float *y, float *rstd, const float *x, const float *w, int n, int d, float eps) {
    for (int i = 0; i < n; i++) {
        const float *xr = x + (int64_t)i * d;
        float *yr = y + (int64_t)i * d;
        float r = 1.0f / sqrtf(row_sumsq(xr, 0.0f, d) / (float)d + eps);
        int j = 0;
        for (; j + 8 <= d; j += 8) tdm_v8_store(yr + j, tdm_v8_load(xr + j) * r * tdm_v8_load(w + j));
        for (; j < d; j++) yr[j] = xr[j] * r * w[j];
        if (rstd) rstd[i] = r;
    }
}

/* With xhat = x rstd and u = dy w:  dx = rstd (u - xhat mean(u xhat)),  dw += dy xhat. */
void tdm_rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *rstd, const float *w,
                          int n, int d) {
    for (int i = 0; i < n; i++) {
        const float *xr = x + (int64_t)i * d;
        const float *g = dy + (int64_t)i * d;
        float r = rstd[i];
        tdm_v8 sux = tdm_v8_set1(0.0f);
        int j = 0;
        for (; j + 8 <= d; j += 8) sux += tdm_v8_load(g + j) * tdm_v8_load(w + j) * tdm_v8_load(xr + j);
        float sum_ux = tdm_v8_sum(sux);
        for (; j < d; j++) sum_ux += g[j] * w[j] * xr[j];
        float mean_ux = sum_ux * r / (float)d; /* mean(u xhat) */
        float *dxr = dx ? dx + (int64_t)i * d : NULL;
        for (j = 0; j + 8 <= d; j += 8) {
            tdm_v8 gj = tdm_v8_load(g + j), xh = tdm_v8_load(xr + j) * r;
            if (dw) tdm_v8_store(dw + j, tdm_v8_load(dw + j) + gj * xh);
            if (dxr) tdm_v8_store(dxr + j, r * (gj * tdm_v8_load(w + j) - xh * mean_ux));
        }
        for (; j < d; j++) {
            float gj = g[j], xh = xr[j] * r;
            if (dw) dw[j] += gj * xh;
            if (dxr) dxr[j] = r * (gj * w[j] - xh * mean_ux);
        }
    }
}
