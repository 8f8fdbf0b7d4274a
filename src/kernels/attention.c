/* attention.c - flash-style scaled dot-product attention over packed segments.
 *
 * Work unit: one segment, one kv head, and a block of up to TQ query positions. The
 * G = nh/nkv query heads that share the kv head are packed together, so a block holds
 * M = G * mq query rows (row r = position r / G, head r % G of the group) and every
 * key/value tile read is used by all G heads at once (GQA costs no extra K/V traffic,
 * and the small sgemms get G times taller).
 *
 * The forward walks the key tiles of TK rows, computes the score tile
 * S = scale Q K^T [M, TK] with one sgemm straight from the strided k array, and folds
 * it into a running row maximum m, row sum l and unnormalised output acc (the online
 * softmax):
 *   m' = max(m, max_j S_rj);  P_rj = e^{S_rj - m'};  l = l e^{m - m'} + sum_j P_rj;
 *   acc = acc e^{m - m'} + P V.
 * At the end out = acc / l and lse = m + log l. Only one M x TK tile exists at a time.
 *
 * The backward recomputes P = e^{S - lse} tile by tile and applies
 *   dV += P^T dO;  dP = dO V^T;  dS = P (dP - D) with D_r = sum_c dO_rc O_rc;
 *   dQ += scale dS K;  dK += scale dS^T Q,
 * dK and dV accumulating straight into the strided dk, dv arrays (beta = 1 sgemms),
 * dQ into a packed block that is written out once at the end.
 * Causal masking: position i sees keys j <= i of its segment, so key tiles past the
 * block's last position are never visited and a tile crossing the diagonal masks the
 * keys each row may not see.
 */
#include "kernels/kernels.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/vec.h"

/* Query positions and keys per tile. A score tile is G*TQ x TK floats (32 KB to 128 KB
 * for G = 1..4), which stays in the L2 cache along with its dP twin in the backward. */
#ifndef TDM_ATT_TQ
#define TDM_ATT_TQ 64
#define TDM_ATT_TK 128
#endif
enum { TQ = TDM_ATT_TQ, TK = TDM_ATT_TK };

/* forward: S [M,TK], acc [M,hd], Q [M,hd], m [M], l [M]
 * backward: P [M,TK], dP [M,TK], Q, dO, dQ [M,hd] each, D [M], lse [M] */
int64_t tdm_attention_workspace_floats(int n, int nh, int nkv, int hd) {
    (void)n;
    int64_t m = (int64_t)(nh / nkv) * TQ;
    return 2 * m * TK + 3 * m * hd + 2 * m;
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

/* Number of keys of the tile [k0, k0 + mk) that position qi may see. */
static int visible_keys(int causal, int qi, int k0, int mk) {
    if (!causal) return mk;
    int c = qi - k0 + 1;
    return c < 0 ? 0 : (c > mk ? mk : c);
}

/* A block: positions [q0, q0 + mq) of segment [kb, ke), kv head kvh with its G query
 * heads. Packed row r is position q0 + r / G, query head kvh * G + r % G. */
typedef struct {
    int q0, mq, kb, ke, kvh, G, nh, nkv, hd, causal;
    float scale;
} block;

/* dst[r] = src row of packed row r, for arrays laid out [n, nh, hd] */
static void pack_rows(float *dst, const float *src, const block *b) {
    size_t bytes = sizeof(float) * (size_t)b->G * b->hd;
    for (int i = 0; i < b->mq; i++)
        memcpy(dst + (int64_t)i * b->G * b->hd, src + ((int64_t)(b->q0 + i) * b->nh + b->kvh * b->G) * b->hd, bytes);
}

static void unpack_rows(float *dst, const float *src, const block *b) {
    size_t bytes = sizeof(float) * (size_t)b->G * b->hd;
    for (int i = 0; i < b->mq; i++)
        memcpy(dst + ((int64_t)(b->q0 + i) * b->nh + b->kvh * b->G) * b->hd, src + (int64_t)i * b->G * b->hd, bytes);
}

/* last key (exclusive) the block needs */
static int block_key_end(const block *b) {
    if (!b->causal) return b->ke;
    return b->q0 + b->mq < b->ke ? b->q0 + b->mq : b->ke;
}

static void forward_block(float *out, float *lse, const float *q, const float *k, const float *v, const block *b,
                          float *ws) {
    int M = b->G * b->mq, hd = b->hd, ldk = b->nkv * hd;
    float *s = ws;                 /* [M, TK] scores, then probabilities */
    float *acc = s + (int64_t)M * TK; /* [M, hd] unnormalised output */
    float *qp = acc + (int64_t)M * hd; /* [M, hd] packed queries */
    float *m = qp + (int64_t)M * hd;   /* [M] running max */
    float *l = m + M;                  /* [M] running sum */
    pack_rows(qp, q, b);
    memset(acc, 0, sizeof(float) * (size_t)M * hd);
    for (int r = 0; r < M; r++) m[r] = -INFINITY, l[r] = 0.0f;
    int kend = block_key_end(b);
    for (int k0 = b->kb; k0 < kend; k0 += TK) {
        int mk = kend - k0 < TK ? kend - k0 : TK;
        const float *kp = k + ((int64_t)k0 * b->nkv + b->kvh) * hd;
        const float *vp = v + ((int64_t)k0 * b->nkv + b->kvh) * hd;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, mk, hd, b->scale, qp, hd, kp, ldk, 0.0f, s, TK);
        for (int r = 0; r < M; r++) {
            float *row = s + (int64_t)r * TK;
            int ncol = visible_keys(b->causal, b->q0 + r / b->G, k0, mk);
            if (ncol == 0) {
                memset(row, 0, sizeof(float) * (size_t)mk);
                continue;
            }
            float mnew = max_row(row, ncol);
            if (m[r] > mnew) mnew = m[r];
            float alpha = expf(m[r] - mnew); /* 0 on the first visited tile (m = -inf) */
            float sum = exp_row(row, ncol, mk, mnew);
            l[r] = l[r] * alpha + sum;
            m[r] = mnew;
            if (alpha != 1.0f) {
                float *a = acc + (int64_t)r * hd;
                for (int c = 0; c < hd; c++) a[c] *= alpha;
            }
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, hd, mk, 1.0f, s, TK, vp, ldk, 1.0f, acc, hd);
    }
    for (int r = 0; r < M; r++) {
        float *a = acc + (int64_t)r * hd;
        float inv = 1.0f / l[r];
        for (int c = 0; c < hd; c++) a[c] *= inv;
        if (lse) lse[(int64_t)(b->q0 + r / b->G) * b->nh + b->kvh * b->G + r % b->G] = m[r] + logf(l[r]);
    }
    unpack_rows(out, acc, b);
}

void tdm_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                           const int32_t *cu_seqlens, int nseg, int nh, int nkv, int hd, int causal, float scale,
                           float *workspace) {
    for (int sg = 0; sg < nseg; sg++) {
        int kb = cu_seqlens[sg], ke = cu_seqlens[sg + 1];
        for (int kvh = 0; kvh < nkv; kvh++)
            for (int q0 = kb; q0 < ke; q0 += TQ) {
                block b = {q0, ke - q0 < TQ ? ke - q0 : TQ, kb, ke, kvh, nh / nkv, nh, nkv, hd, causal, scale};
                forward_block(out, lse, q, k, v, &b, workspace);
            }
    }
}

static void backward_block(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                           const float *v, const float *out, const float *lse, const block *b, float *ws) {
    int M = b->G * b->mq, hd = b->hd, ldk = b->nkv * hd, G = b->G;
    float *p = ws;                      /* [M, TK] probabilities */
    float *dp = p + (int64_t)M * TK;    /* [M, TK] dP, then dS */
    float *qp = dp + (int64_t)M * TK;   /* [M, hd] packed q */
    float *dop = qp + (int64_t)M * hd;  /* [M, hd] packed dout */
    float *dqp = dop + (int64_t)M * hd; /* [M, hd] packed dq accumulator */
    float *dd = dqp + (int64_t)M * hd;  /* [M] D = rowsum(dO O) */
    float *lr = dd + M;                 /* [M] lse */
    pack_rows(qp, q, b);
    pack_rows(dop, dout, b);
    memset(dqp, 0, sizeof(float) * (size_t)M * hd);
    for (int r = 0; r < M; r++) {
        int64_t row = (int64_t)(b->q0 + r / G) * b->nh + b->kvh * G + r % G;
        const float *o = out + row * hd, *g = dop + (int64_t)r * hd;
        float t = 0.0f;
        for (int c = 0; c < hd; c++) t += g[c] * o[c];
        dd[r] = t;
        lr[r] = lse[row];
    }
    int kend = block_key_end(b);
    for (int k0 = b->kb; k0 < kend; k0 += TK) {
        int mk = kend - k0 < TK ? kend - k0 : TK;
        int64_t koff = ((int64_t)k0 * b->nkv + b->kvh) * hd;
        const float *kp = k + koff, *vp = v + koff;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, mk, hd, b->scale, qp, hd, kp, ldk, 0.0f, p, TK);
        for (int r = 0; r < M; r++)
            exp_row(p + (int64_t)r * TK, visible_keys(b->causal, b->q0 + r / G, k0, mk), mk, lr[r]);
        if (dv)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, mk, hd, M, 1.0f, p, TK, dop, hd, 1.0f, dv + koff, ldk);
        if (!dq && !dk) continue;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, mk, hd, 1.0f, dop, hd, vp, ldk, 0.0f, dp, TK);
        for (int r = 0; r < M; r++) {
            float *pr = p + (int64_t)r * TK, *dr = dp + (int64_t)r * TK;
            float di = dd[r];
            for (int j = 0; j < mk; j++) dr[j] = pr[j] * (dr[j] - di);
        }
        if (dq) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, hd, mk, b->scale, dp, TK, kp, ldk, 1.0f, dqp, hd);
        if (dk)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, mk, hd, M, b->scale, dp, TK, qp, hd, 1.0f, dk + koff,
                        ldk);
    }
    if (dq) unpack_rows(dq, dqp, b);
}

void tdm_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                            const float *v, const float *out, const float *lse, const int32_t *cu_seqlens,
                            int nseg, int nh, int nkv, int hd, int causal, float scale, float *workspace) {
    if (nseg <= 0) return;
    int r0 = cu_seqlens[0], r1 = cu_seqlens[nseg];
    /* dk and dv are sums over query blocks: start from zero on every row the segments
     * cover. dq is written block by block. */
    if (dk) memset(dk + (int64_t)r0 * nkv * hd, 0, sizeof(float) * (size_t)(r1 - r0) * nkv * hd);
    if (dv) memset(dv + (int64_t)r0 * nkv * hd, 0, sizeof(float) * (size_t)(r1 - r0) * nkv * hd);
    for (int sg = 0; sg < nseg; sg++) {
        int kb = cu_seqlens[sg], ke = cu_seqlens[sg + 1];
        for (int kvh = 0; kvh < nkv; kvh++)
            for (int q0 = kb; q0 < ke; q0 += TQ) {
                block b = {q0, ke - q0 < TQ ? ke - q0 : TQ, kb, ke, kvh, nh / nkv, nh, nkv, hd, causal, scale};
                backward_block(dq, dk, dv, dout, q, k, v, out, lse, &b, workspace);
            }
    }
}
