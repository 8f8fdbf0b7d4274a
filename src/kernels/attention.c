/* attention.c - flash-style scaled dot-product attention over packed segments.
 *
 * For each segment, query head and block of TQ query rows, the forward walks the key
 * blocks of TK rows, computes the score tile S = scale Q K^T [TQ, TK] with one small
 * sgemm straight from the strided q and k arrays (no packing), and folds it into a
 * running row maximum m, row sum l and unnormalised output acc (the online softmax):
 *   m' = max(m, max_j S_ij);  P_ij = e^{S_ij - m'};  l = l e^{m - m'} + sum_j P_ij;
 *   acc = acc e^{m - m'} + P V.
 * At the end out = acc / l and lse = m + log l. Only one TQ x TK tile exists at a time.
 *
 * The backward recomputes P = e^{S - lse} tile by tile and applies
 *   dV += P^T dO;  dP = dO V^T;  dS = P (dP - D) with D_i = sum_c dO_ic O_ic;
 *   dQ += scale dS K;  dK += scale dS^T Q,
 * accumulating straight into the strided dq, dk, dv arrays with beta = 1 sgemms.
 * Causal masking: query row i sees keys j <= i of its segment, so key blocks past the
 * diagonal are never visited and the diagonal tile masks its upper triangle.
 */
#include "kernels/kernels.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/vec.h"

enum { TQ = 64, TK = 64 };

int64_t tdm_attention_workspace_floats(int n, int nh, int nkv, int hd) {
    (void)n, (void)nh, (void)nkv;
    return 2 * (int64_t)TQ * TK + (int64_t)TQ * hd + 2 * TQ;
}

/* p[j] = e^{p[j] - m} for j < ncol and 0 for ncol <= j < width; returns sum_j p[j]. */
static float exp_row(float *p, int ncol, int width, float m) {
    tdm_v8 acc = tdm_v8_set1(0.0f);
    int j = 0;
    for (; j + 8 <= ncol; j += 8) {
        tdm_v8 e = tdm_v8_exp(tdm_v8_load(p + j) - m);
        tdm_v8_store(p + j, e);
        acc += e;
    }
    if (j < ncol) {
        /* padding lanes hold -inf - m, whose exp is exactly 0 */
        tdm_v8 e = tdm_v8_exp(tdm_v8_load_part(p + j, ncol - j, -INFINITY) - m);
        tdm_v8_store_part(p + j, e, ncol - j);
        acc += e;
        j = ncol;
    }
    for (; j < width; j++) p[j] = 0.0f;
    return tdm_v8_sum(acc);
}

static float max_row(const float *p, int ncol) {
    tdm_v8 mx = tdm_v8_set1(-INFINITY);
    int j = 0;
    for (; j + 8 <= ncol; j += 8) mx = tdm_v8_max(mx, tdm_v8_load(p + j));
    if (j < ncol) mx = tdm_v8_max(mx, tdm_v8_load_part(p + j, ncol - j, -INFINITY));
    return tdm_v8_hmax(mx);
}

/* Number of keys of the tile starting at key k0 that query row qi may see. */
static int visible_keys(int causal, int qi, int k0, int mk) {
    if (!causal) return mk;
    int c = qi - k0 + 1;
    return c < 0 ? 0 : (c > mk ? mk : c);
}

/* One block of mq <= TQ query rows of one head against keys [kb, ke). */
static void forward_block(float *out, float *lse, const float *q, const float *k, const float *v, int q0, int mq,
                          int kb, int ke, int h, int kvh, int nh, int nkv, int hd, int causal, float scale,
                          float *ws) {
    float *s = ws;                  /* [TQ, TK] scores, then probabilities */
    float *acc = s + TQ * TK;       /* [TQ, hd] unnormalised output */
    float *m = acc + TQ * hd;       /* [TQ] running max */
    float *l = m + TQ;              /* [TQ] running sum */
    int ldq = nh * hd, ldk = nkv * hd;
    const float *qp = q + ((int64_t)q0 * nh + h) * hd;
    memset(acc, 0, sizeof(float) * (size_t)mq * hd);
    for (int i = 0; i < mq; i++) m[i] = -INFINITY, l[i] = 0.0f;
    int kend = causal ? (q0 + mq < ke ? q0 + mq : ke) : ke;
    for (int k0 = kb; k0 < kend; k0 += TK) {
        int mk = kend - k0 < TK ? kend - k0 : TK;
        const float *kp = k + ((int64_t)k0 * nkv + kvh) * hd;
        const float *vp = v + ((int64_t)k0 * nkv + kvh) * hd;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mq, mk, hd, scale, qp, ldq, kp, ldk, 0.0f, s, TK);
        for (int i = 0; i < mq; i++) {
            float *row = s + i * TK;
            int ncol = visible_keys(causal, q0 + i, k0, mk);
            if (ncol == 0) {
                memset(row, 0, sizeof(float) * (size_t)mk);
                continue;
            }
            float mnew = max_row(row, ncol);
            if (m[i] > mnew) mnew = m[i];
            float alpha = expf(m[i] - mnew); /* 0 on the first visited tile (m = -inf) */
            float sum = exp_row(row, ncol, mk, mnew);
            l[i] = l[i] * alpha + sum;
            m[i] = mnew;
            if (alpha != 1.0f) {
                float *a = acc + (int64_t)i * hd;
                for (int c = 0; c < hd; c++) a[c] *= alpha;
            }
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mq, hd, mk, 1.0f, s, TK, vp, ldk, 1.0f, acc, hd);
    }
    for (int i = 0; i < mq; i++) {
        float *o = out + ((int64_t)(q0 + i) * nh + h) * hd;
        const float *a = acc + (int64_t)i * hd;
        float inv = 1.0f / l[i];
        for (int c = 0; c < hd; c++) o[c] = a[c] * inv;
        lse[(int64_t)(q0 + i) * nh + h] = m[i] + logf(l[i]);
    }
}

void tdm_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                           const int32_t *cu_seqlens, int nseg, int nh, int nkv, int hd, int causal, float scale,
                           float *workspace) {
    int group = nh / nkv;
    for (int sg = 0; sg < nseg; sg++) {
        int b = cu_seqlens[sg], e = cu_seqlens[sg + 1];
        for (int h = 0; h < nh; h++)
            for (int q0 = b; q0 < e; q0 += TQ) {
                int mq = e - q0 < TQ ? e - q0 : TQ;
                forward_block(out, lse, q, k, v, q0, mq, b, e, h, h / group, nh, nkv, hd, causal, scale, workspace);
            }
    }
}

/* One block of query rows of one head: recompute P per key tile and accumulate. */
static void backward_block(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                           const float *v, const float *out, const float *lse, int q0, int mq, int kb, int ke, int h,
                           int kvh, int nh, int nkv, int hd, int causal, float scale, float *ws) {
    float *p = ws;             /* [TQ, TK] probabilities */
    float *dp = p + TQ * TK;   /* [TQ, TK] dP, then dS */
    float *dd = dp + TQ * TK;  /* [TQ] D_i = rowsum(dO O) */
    float *lr = dd + TQ;       /* [TQ] lse of the block's rows */
    int ldq = nh * hd, ldk = nkv * hd;
    int64_t qoff = ((int64_t)q0 * nh + h) * hd;
    const float *qp = q + qoff, *dop = dout + qoff;
    for (int i = 0; i < mq; i++) {
        const float *o = out + qoff + (int64_t)i * ldq, *g = dop + (int64_t)i * ldq;
        float t = 0.0f;
        for (int c = 0; c < hd; c++) t += g[c] * o[c];
        dd[i] = t;
        lr[i] = lse[(int64_t)(q0 + i) * nh + h];
    }
    int kend = causal ? (q0 + mq < ke ? q0 + mq : ke) : ke;
    for (int k0 = kb; k0 < kend; k0 += TK) {
        int mk = kend - k0 < TK ? kend - k0 : TK;
        int64_t koff = ((int64_t)k0 * nkv + kvh) * hd;
        const float *kp = k + koff, *vp = v + koff;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mq, mk, hd, scale, qp, ldq, kp, ldk, 0.0f, p, TK);
        for (int i = 0; i < mq; i++) exp_row(p + i * TK, visible_keys(causal, q0 + i, k0, mk), mk, lr[i]);
        if (dv)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, mk, hd, mq, 1.0f, p, TK, dop, ldq, 1.0f, dv + koff,
                        ldk);
        if (!dq && !dk) continue;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mq, mk, hd, 1.0f, dop, ldq, vp, ldk, 0.0f, dp, TK);
        for (int i = 0; i < mq; i++) {
            float *pr = p + i * TK, *dr = dp + i * TK;
            float di = dd[i];
            for (int j = 0; j < mk; j++) dr[j] = pr[j] * (dr[j] - di);
        }
        if (dq)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mq, hd, mk, scale, dp, TK, kp, ldk, 1.0f, dq + qoff,
                        ldq);
        if (dk)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, mk, hd, mq, scale, dp, TK, qp, ldq, 1.0f, dk + koff,
                        ldk);
    }
}

void tdm_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                            const float *v, const float *out, const float *lse, const int32_t *cu_seqlens,
                            int nseg, int nh, int nkv, int hd, int causal, float scale, float *workspace) {
    if (nseg <= 0) return;
    int group = nh / nkv;
    int r0 = cu_seqlens[0], r1 = cu_seqlens[nseg];
    /* The gradients are sums over tiles: start from zero on every row the segments cover. */
    if (dq) memset(dq + (int64_t)r0 * nh * hd, 0, sizeof(float) * (size_t)(r1 - r0) * nh * hd);
    if (dk) memset(dk + (int64_t)r0 * nkv * hd, 0, sizeof(float) * (size_t)(r1 - r0) * nkv * hd);
    if (dv) memset(dv + (int64_t)r0 * nkv * hd, 0, sizeof(float) * (size_t)(r1 - r0) * nkv * hd);
    for (int sg = 0; sg < nseg; sg++) {
        int b = cu_seqlens[sg], e = cu_seqlens[sg + 1];
        for (int h = 0; h < nh; h++)
            for (int q0 = b; q0 < e; q0 += TQ) {
                int mq = e - q0 < TQ ? e - q0 : TQ;
                backward_block(dq, dk, dv, dout, q, k, v, out, lse, q0, mq, b, e, h, h / group, nh, nkv, hd, causal,
                               scale, workspace);
            }
    }
}
