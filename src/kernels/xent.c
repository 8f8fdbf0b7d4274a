/* xent.c - cross-entropy fused with the output projection.
 *
 * Counted rows (target >= 0) are gathered, in order, into pieces of at most
 * min(chunk, 256) rows, whatever ignored rows lie between them: in supervised fine-tuning prompts are
 * ignored and answers counted, so counted rows come in short runs, and cutting a piece
 * at every ignored row would stream all of W and dW (V x d each) once per run. For a
 * piece of r rows, packed into hp [r, d]:
 *   L = hp W^T                    one sgemm into the logits workspace [r, v]
 *   per row: lse = log sum e^L, loss += lse - L[target],
 *            L <- grad_scale (softmax(L) - onehot(target))   (in place)
 *   dW += L^T hp                  sgemm, beta = 1
 *   dhp = L W                     sgemm, then scattered back to the rows' dh
 * Ignored rows cost nothing but a memset of their dh row.
 * Workspace: [chunk, v] logits, then [chunk, d] packed h, then [chunk, d] packed dh.
 */
#include "kernels/kernels.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/vec.h"

int64_t tdm_xent_workspace_floats(int chunk, int v, int d) { return (int64_t)chunk * v + 2 * (int64_t)chunk * d; }

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

double tdm_xent_fused(float *dh, float *dw, const float *h, const float *w, const int32_t *targets, int n, int d, int v,
                      float grad_scale, int chunk, float *workspace, int64_t *count) {
    double loss = 0.0;
    int64_t counted = 0;
    int backward = dh != NULL || dw != NULL;
    if (chunk < 1) chunk = 1;
    float *lg = workspace;                /* [chunk, v] */
    float *hp = lg + (int64_t)chunk * v;  /* [chunk, d] */
    float *dhp = hp + (int64_t)chunk * d; /* [chunk, d] */
    int rows[256];                        /* row index of each packed row (chunk <= 256 per piece) */
    int piece = chunk < 256 ? chunk : 256;
    int i = 0;
    while (i < n) {
        int r = 0; /* gather the next piece of counted rows */
        for (; i < n && r < piece; i++) {
            if (targets[i] < 0) {
                if (dh) memset(dh + (int64_t)i * d, 0, sizeof(float) * (size_t)d);
                continue;
            }
            rows[r] = i;
            memcpy(hp + (int64_t)r * d, h + (int64_t)i * d, sizeof(float) * (size_t)d);
            r++;
        }
        if (r == 0) break;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, v, d, 1.0f, hp, d, w, d, 0.0f, lg, v);
        for (int a = 0; a < r; a++) {
            float *row = lg + (int64_t)a * v;
            int t = targets[rows[a]];
            double lse = row_logsumexp(row, v);
            loss += lse - (double)row[t];
            if (backward) row_dlogits(row, v, t, (float)lse, grad_scale);
        }
        counted += r;
        if (dw) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, v, d, r, 1.0f, lg, v, hp, d, 1.0f, dw, d);
        if (dh) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, d, v, 1.0f, lg, v, w, d, 0.0f, dhp, d);
            for (int a = 0; a < r; a++)
                memcpy(dh + (int64_t)rows[a] * d, dhp + (int64_t)a * d, sizeof(float) * (size_t)d);
        }
    }
    if (count) *count = counted;
    return loss;
}
