/* xent.c - cross-entropy fused with the output projection.
 *
 * The rows are walked in runs of consecutive counted rows (target >= 0), each run cut
 * into pieces of at most `chunk` rows. For a piece of r rows starting at row i0:
 *   L = h[i0:i0+r] W^T            one sgemm into workspace [r, v]
 *   per row: lse = log sum e^L, loss += lse - L[target],
 *            L <- grad_scale (softmax(L) - onehot(target))   (in place)
 *   dW += L^T h[i0:i0+r]          sgemm, beta = 1
 *   dh[i0:i0+r] = L W             sgemm, beta = 0
 * h and dh rows of a run are contiguous, so no row is packed or copied; ignored rows
 * cost nothing but a memset of their dh row.
 */
#include "kernels/kernels.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/vec.h"

int64_t tdm_xent_workspace_floats(int chunk, int v) { return (int64_t)chunk * v; }

/* Returns log sum_j e^{l[j]} over the row of length v. */
static double row_logsumexp(const float *l, int v) {
    tdm_v8 mx = tdm_v8_set1(-INFINITY);
    int j = 0;
    for (; j + 8 <= v; j += 8) mx = tdm_v8_max(mx, tdm_v8_load(l + j));
    float m = tdm_v8_hmax(mx);
    for (; j < v; j++) m = l[j] > m ? l[j] : m;
    tdm_v8 acc = tdm_v8_set1(0.0f);
    for (j = 0; j + 8 <= v; j += 8) acc += tdm_v8_exp(tdm_v8_load(l + j) - m);
    if (j < v) acc += tdm_v8_exp(tdm_v8_load_part(l + j, v - j, -INFINITY) - m);
    return (double)m + log((double)tdm_v8_sum(acc));
}

/* l <- grad_scale (e^{l - lse} - onehot(target)) */
static void row_dlogits(float *l, int v, int target, float lse, float grad_scale) {
    int j = 0;
    for (; j + 8 <= v; j += 8) tdm_v8_store(l + j, grad_scale * tdm_v8_exp(tdm_v8_load(l + j) - lse));
    if (j < v) tdm_v8_store_part(l + j, grad_scale * tdm_v8_exp(tdm_v8_load_part(l + j, v - j, 0.0f) - lse), v - j);
    l[target] -= grad_scale;
}

double tdm_xent_fused(float *dh, float *dw, const float *h, const float *w, const int32_t *targets, int n, int d,
                      int v, float grad_scale, int chunk, float *workspace, int64_t *count) {
    double loss = 0.0;
    int64_t counted = 0;
    int backward = dh != NULL || dw != NULL;
    if (chunk < 1) chunk = 1;
    int i = 0;
    while (i < n) {
        if (targets[i] < 0) { /* ignored row: no logits, zero gradient */
            if (dh) memset(dh + (int64_t)i * d, 0, sizeof(float) * (size_t)d);
            i++;
            continue;
        }
        int r = 0; /* the piece: up to chunk consecutive counted rows */
        while (i + r < n && r < chunk && targets[i + r] >= 0) r++;
        const float *hp = h + (int64_t)i * d;
        float *lg = workspace; /* [r, v] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, v, d, 1.0f, hp, d, w, d, 0.0f, lg, v);
        for (int a = 0; a < r; a++) {
            float *row = lg + (int64_t)a * v;
            int t = targets[i + a];
            double lse = row_logsumexp(row, v);
            loss += lse - (double)row[t];
            if (backward) row_dlogits(row, v, t, (float)lse, grad_scale);
        }
        counted += r;
        if (dw) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, v, d, r, 1.0f, lg, v, hp, d, 1.0f, dw, d);
        if (dh)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, d, v, 1.0f, lg, v, w, d, 0.0f, dh + (int64_t)i * d,
                        d);
        i += r;
    }
    if (count) *count = counted;
    return loss;
}
