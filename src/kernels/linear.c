/* linear.c - the fully connected layer through CBLAS sgemm. */
#include "kernels/kernels.h"

#include <cblas.h>
#include <string.h>

/* y[n,out] = x[n,in] W[out,in]^T (+ b). The bias is written first so that one sgemm
 * with beta = 1 adds the product onto it. */
void tdm_linear_forward(float *y, const float *x, const float *w, const float *b, int n, int in, int out) {
    if (n <= 0 || out <= 0) return;
    if (in <= 0) { /* empty product: y is the bias (or zero) */
        for (int i = 0; i < n; i++) {
            if (b) memcpy(y + (int64_t)i * out, b, sizeof(float) * out);
            else memset(y + (int64_t)i * out, 0, sizeof(float) * out);
        }
        return;
    }
    float beta = 0.0f;
    if (b) {
        for (int i = 0; i < n; i++) memcpy(y + (int64_t)i * out, b, sizeof(float) * out);
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, beta, y, out);
}

/* dx = dy W (overwrite), dw += dy^T x, db += column sums of dy; NULL pointers skip
 * their product. */
void tdm_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, int n,
                         int in, int out) {
    if (n <= 0) return;
    if (dx) {
        if (out <= 0) memset(dx, 0, sizeof(float) * (size_t)n * (size_t)(in > 0 ? in : 0));
        else if (in > 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
    }
    if (dw && in > 0 && out > 0)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in, 1.0f, dw, in);
    if (db) {
        /* Row by row: each pass a contiguous add over out (tdm_add_into: GCC 12 -O2 left the
         * plain loop scalar). */
        for (int i = 0; i < n; i++) tdm_add_into(db, dy + (int64_t)i * out, out);
    }
}
