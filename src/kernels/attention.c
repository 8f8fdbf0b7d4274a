/* attention.c - flash-style scaled dot-product attention over packed segments.
 *
 * Work unit: one segment, one kv head, and a block of up to tq query positions. The
 * G = nh/nkv query heads that share the kv head are packed together, so a block holds
 * M = G * mq query rows (row r = position r / G, head r % G of the group) and every
 * key/value tile read is used by all G heads at once (GQA costs no extra K/V traffic).
 *
 * The forward walks the key tiles of TK rows, computes the score tile
 * S = scale Q K^T [M, TK] and folds it into a running row maximum m, row sum l and
 * unnormalised output acc (the online softmax):
 *   m' = max(m, max_j S_rj);  P_rj = e^{S_rj - m'};  l = l e^{m - m'} + sum_j P_rj;
 *   acc = acc e^{m - m'} + P V.
 * At the end out = acc / l and lse = m + log l. Only one M x TK tile exists at a time.
 *
 * The backward recomputes P = e^{S - lse} tile by tile and applies
 *   dV += P^T dO;  dP = dO V^T;  dS = P (dP - D) with D_r = sum_c dO_rc O_rc;
 *   dQ += scale dS K;  dK += scale dS^T Q,
 * dK and dV accumulating straight into the strided dk, dv arrays, dQ into a packed
 * block that is written out once at the end.
 * Every product is a tdm_tile_matmul (tile_matmul.h) rather than an sgemm: at these
 * sizes sgemm's packing and call costs were a third of the time. The keys and values of
 * a (segment, kv head) are packed once into the workspace, as contiguous rows and
 * transposed (Kt [hd, len]), and shared by all its query blocks, so every product reads
 * its B operand row by row; products with a transposed A (dV = P^T dO, dK = dS^T Q)
 * read A with swapped strides.
 * Causal masking: position i sees keys j <= i of its segment, so key tiles past the
 * block's last position are never visited and a tile crossing the diagonal masks the
 * keys each row may not see.
 *
 * Query subsets (the _rows entry points): the queries may be a sorted subset of the key
 * rows, packed densely, query i standing at key row q_pos[i] and segment s owning queries
 * cu_q[s] .. cu_q[s+1]-1. Only the position changes: blocks are runs of packed queries,
 * the causal bound of a row is its q_pos, and a block reads keys up to its last q_pos.
 * The full entry points are the identity map.
 */
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

#include "kernels/tile_matmul.h"
#include "kernels/vec.h"

/* Tile sizes. A block packs ROWS query rows (ROWS / G positions of each of the G
 * heads, at least 16 positions), whatever the GQA ratio; key tiles hold TK keys. A
 * score tile is ROWS x TK floats (64 KB), which stays in the L2 cache along with its dP
 * twin in the backward. Measured on Zen3: 128 x 128 is as fast as 256 x 128 or
 * 128 x 256 (within noise) and wastes less of the diagonal tiles in causal attention. */
#ifndef TDM_ATT_ROWS
#define TDM_ATT_ROWS 128
#define TDM_ATT_TK   128
#endif
enum { ROWS = TDM_ATT_ROWS, TK = TDM_ATT_TK };

/* Leading dimensions of the scratch arrays, padded so that consecutive rows never sit a
 * multiple of 4 KB apart: with a power-of-two stride (hd = 64 or 128, a 1024-key pack)
 * every row of a tile lands in the same few L1 sets and the products thrash the cache.
 *   LDS        score, probability and dP tiles [M, LDS]
 *   ldh(hd)    packed q, dout, dq, acc, and the k and v rows
 *   ldt(len)   the transposed k and v packs [hd, ldt] */
enum { LDS = TK + 16 };
static int ldh(int hd) { return ((hd + 7) & ~7) + 8; }
static int ldt(int len) { return ((len + 7) & ~7) + 16; }

/* query positions per block for G query heads per kv head */
static int block_positions(int G) {
    int tq = ROWS / G;
    return tq < 16 ? 16 : tq;
}

/* Workspace: the packed keys and values of one (segment, kv head), then the block
 * scratch. kv pack: K and V rows [n, ldh] and transposed [hd, ldt(n)] each;
 * forward block: S [M,LDS], acc, Q [M,ldh] each, m [M], l [M];
 * backward block: P, dP [M,LDS] each, Q, dO, dQ [M,ldh] each, D [M], lse [M];
 * with M = G * block_positions(G) rows. */
static int64_t kv_pack_floats(int n, int hd) { return 2 * (int64_t)n * ldh(hd) + 2 * (int64_t)hd * ldt(n); }

int64_t tdm_attention_workspace_floats(int n, int nh, int nkv, int hd) {
    int G = nh / nkv;
    int64_t m = (int64_t)G * block_positions(G);
    return kv_pack_floats(n, hd) + 2 * m * LDS + 3 * m * ldh(hd) + 2 * m;
}

/* One segment's keys and values for one kv head, in the two layouts the products read,
 * packed once and shared by all the segment's query blocks:
 *   kr, vr [len, ld]:  contiguous rows (the originals are nkv*hd floats apart);
 *   kt, vt [hd, ldt]:  transposed, columns len .. round_up(len, 8) - 1 zero so the score
 *                      products run whole vectors past the last key.
 * Key j of the pack is row kb + j of the segment. */
typedef struct {
    float *kr, *kt, *vr, *vt;
    int len, ld, ldt;
} kv_pack;

static void transpose_rows(float *t, int ld_t, const float *rows, int ld, int len, int hd) {
    /* 8 keys at a time: eight sequential read streams, one 32-byte write per c */
    for (int j0 = 0; j0 < len; j0 += 8) {
        int w = len - j0 < 8 ? len - j0 : 8;
        for (int c = 0; c < hd; c++) {
            float *dst = t + (int64_t)c * ld_t + j0;
            for (int j = 0; j < 8; j++) dst[j] = j < w ? rows[(int64_t)(j0 + j) * ld + c] : 0.0f;
        }
    }
}

/* Packs rows kb..ke-1 of kv head kvh from k and v ([n, nkv, hd]); v is transposed only
 * when the caller needs vt (the backward's dP = dO V^T). */
static kv_pack pack_kv(float *ws, int n, const float *k, const float *v, int kb, int ke, int kvh, int nkv, int hd,
                       int want_vt) {
    kv_pack p;
    p.len = ke - kb, p.ld = ldh(hd), p.ldt = ldt(p.len);
    int64_t rows = (int64_t)n * p.ld, cols = (int64_t)hd * ldt(n);
    p.kr = ws, p.vr = ws + rows, p.kt = ws + 2 * rows, p.vt = ws + 2 * rows + cols;
    for (int j = 0; j < p.len; j++) {
        int64_t src = ((int64_t)(kb + j) * nkv + kvh) * hd;
        memcpy(p.kr + (int64_t)j * p.ld, k + src, sizeof(float) * (size_t)hd);
        memcpy(p.vr + (int64_t)j * p.ld, v + src, sizeof(float) * (size_t)hd);
    }
    transpose_rows(p.kt, p.ldt, p.kr, p.ld, p.len, hd);
    if (want_vt) transpose_rows(p.vt, p.ldt, p.vr, p.ld, p.len, hd);
    return p;
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

/* a[c] *= f for c < n (eight lanes at a time: GCC 12 at -O2 leaves the plain loop scalar) */
static void scale_row(float *a, int n, float f) {
    int c = 0;
    for (; c + 8 <= n; c += 8) tdm_v8_store(a + c, tdm_v8_load(a + c) * f);
    for (; c < n; c++) a[c] *= f;
}

/* Number of keys of the tile [k0, k0 + mk) that position qi may see. */
static int visible_keys(int causal, int qi, int k0, int mk) {
    if (!causal) return mk;
    int c = qi - k0 + 1;
    return c < 0 ? 0 : (c > mk ? mk : c);
}

/* A block: queries [q0, q0 + mq) of segment [kb, ke), kv head kvh with its G query
 * heads. Packed row r is query q0 + r / G, query head kvh * G + r % G; query i stands
 * at key row pos[i] (i itself when pos is NULL). */
typedef struct {
    int q0, mq, kb, ke, kvh, G, nh, nkv, hd, causal;
    float scale;
    const int32_t *pos;
} block;

static int query_pos(const block *b, int i) { return b->pos ? b->pos[i] : i; }

/* dst row r (stride ld) = the q/dout/out row of packed row r, from arrays [n, nh, hd] */
static void pack_rows(float *dst, int ld, const float *src, const block *b) {
    for (int r = 0; r < b->G * b->mq; r++)
        memcpy(dst + (int64_t)r * ld, src + ((int64_t)(b->q0 + r / b->G) * b->nh + b->kvh * b->G + r % b->G) * b->hd,
               sizeof(float) * (size_t)b->hd);
}

static void unpack_rows(float *dst, const float *src, int ld, const block *b) {
    for (int r = 0; r < b->G * b->mq; r++)
        memcpy(dst + ((int64_t)(b->q0 + r / b->G) * b->nh + b->kvh * b->G + r % b->G) * b->hd, src + (int64_t)r * ld,
               sizeof(float) * (size_t)b->hd);
}

/* last key (exclusive) the block needs */
static int block_key_end(const block *b) {
    if (!b->causal) return b->ke;
    int last = query_pos(b, b->q0 + b->mq - 1) + 1;
    return last < b->ke ? last : b->ke;
}

static void forward_block(float *out, float *lse, const float *q, const kv_pack *kv, const block *b, float *ws) {
    int M = b->G * b->mq, hd = b->hd, lh = ldh(hd);
    float *s = ws;                     /* [M, LDS] scores, then probabilities */
    float *acc = s + (int64_t)M * LDS; /* [M, lh] unnormalised output */
    float *qp = acc + (int64_t)M * lh; /* [M, lh] packed queries */
    float *m = qp + (int64_t)M * lh;   /* [M] running max */
    float *l = m + M;                  /* [M] running sum */
    pack_rows(qp, lh, q, b);
    memset(acc, 0, sizeof(float) * (size_t)M * lh);
    for (int r = 0; r < M; r++) m[r] = -INFINITY, l[r] = 0.0f;
    int kend = block_key_end(b);
    for (int k0 = b->kb; k0 < kend; k0 += TK) {
        int mk = kend - k0 < TK ? kend - k0 : TK, j0 = k0 - b->kb;
        tdm_tile_matmul(M, (mk + 7) & ~7, hd, b->scale, qp, lh, 1, kv->kt + j0, kv->ldt, 0, s, LDS);
        for (int r = 0; r < M; r++) {
            float *row = s + (int64_t)r * LDS;
            int ncol = visible_keys(b->causal, query_pos(b, b->q0 + r / b->G), k0, mk);
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
            if (alpha != 1.0f) scale_row(acc + (int64_t)r * lh, hd, alpha);
        }
        tdm_tile_matmul(M, hd, mk, 1.0f, s, LDS, 1, kv->vr + (int64_t)j0 * kv->ld, kv->ld, 1, acc, lh);
    }
    for (int r = 0; r < M; r++) {
        float *a = acc + (int64_t)r * lh;
        scale_row(a, hd, 1.0f / l[r]);
        if (lse) lse[(int64_t)(b->q0 + r / b->G) * b->nh + b->kvh * b->G + r % b->G] = m[r] + logf(l[r]);
    }
    unpack_rows(out, acc, lh, b);
}

void tdm_attention_forward_rows(float *out, float *lse, const float *q, const float *k, const float *v,
                                const int32_t *cu_seqlens, const int32_t *cu_q, const int32_t *q_pos, int nseg, int nh,
                                int nkv, int hd, int causal, float scale, float *workspace) {
    int tq = block_positions(nh / nkv), n = nseg > 0 ? cu_seqlens[nseg] : 0;
    float *scratch = workspace + kv_pack_floats(n, hd);
    for (int sg = 0; sg < nseg; sg++) {
        int kb = cu_seqlens[sg], ke = cu_seqlens[sg + 1], qb = cu_q[sg], qe = cu_q[sg + 1];
        if (ke <= kb || qe <= qb) continue;
        for (int kvh = 0; kvh < nkv; kvh++) {
            kv_pack kv = pack_kv(workspace, n, k, v, kb, ke, kvh, nkv, hd, 0);
            for (int q0 = qb; q0 < qe; q0 += tq) {
                block b = {q0, qe - q0 < tq ? qe - q0 : tq, kb, ke, kvh, nh / nkv, nh, nkv, hd, causal, scale, q_pos};
                forward_block(out, lse, q, &kv, &b, scratch);
            }
        }
    }
}

void tdm_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                           const int32_t *cu_seqlens, int nseg, int nh, int nkv, int hd, int causal, float scale,
                           float *workspace) {
    tdm_attention_forward_rows(out, lse, q, k, v, cu_seqlens, cu_seqlens, NULL, nseg, nh, nkv, hd, causal, scale,
                               workspace);
}

static void backward_block(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *out,
                           const float *lse, const kv_pack *kv, const block *b, float *ws) {
    int M = b->G * b->mq, hd = b->hd, lh = ldh(hd), ldk = b->nkv * hd, G = b->G;
    float *p = ws;                      /* [M, LDS] probabilities */
    float *dp = p + (int64_t)M * LDS;   /* [M, LDS] dP, then dS */
    float *qp = dp + (int64_t)M * LDS;  /* [M, lh] packed q */
    float *dop = qp + (int64_t)M * lh;  /* [M, lh] packed dout */
    float *dqp = dop + (int64_t)M * lh; /* [M, lh] packed dq accumulator */
    float *dd = dqp + (int64_t)M * lh;  /* [M] D = rowsum(dO O) */
    float *lr = dd + M;                 /* [M] lse */
    pack_rows(qp, lh, q, b);
    pack_rows(dop, lh, dout, b);
    memset(dqp, 0, sizeof(float) * (size_t)M * lh);
    for (int r = 0; r < M; r++) {
        int64_t row = (int64_t)(b->q0 + r / G) * b->nh + b->kvh * G + r % G;
        const float *o = out + row * hd, *g = dop + (int64_t)r * lh;
        float t = 0.0f;
        for (int c = 0; c < hd; c++) t += g[c] * o[c];
        dd[r] = t;
        lr[r] = lse[row];
    }
    int kend = block_key_end(b);
    for (int k0 = b->kb; k0 < kend; k0 += TK) {
        int mk = kend - k0 < TK ? kend - k0 : TK, npad = (mk + 7) & ~7, j0 = k0 - b->kb;
        int64_t koff = ((int64_t)k0 * b->nkv + b->kvh) * hd;
        tdm_tile_matmul(M, npad, hd, b->scale, qp, lh, 1, kv->kt + j0, kv->ldt, 0, p, LDS);
        for (int r = 0; r < M; r++)
            exp_row(p + (int64_t)r * LDS, visible_keys(b->causal, query_pos(b, b->q0 + r / G), k0, mk), mk, lr[r]);
        if (dv) tdm_tile_matmul(mk, hd, M, 1.0f, p, 1, LDS, dop, lh, 1, dv + koff, ldk);
        if (!dq && !dk) continue;
        tdm_tile_matmul(M, npad, hd, 1.0f, dop, lh, 1, kv->vt + j0, kv->ldt, 0, dp, LDS);
        for (int r = 0; r < M; r++) {
            float *pr = p + (int64_t)r * LDS, *dr = dp + (int64_t)r * LDS;
            float di = dd[r];
            int j = 0;
            for (; j + 8 <= mk; j += 8) tdm_v8_store(dr + j, tdm_v8_load(pr + j) * (tdm_v8_load(dr + j) - di));
            for (; j < mk; j++) dr[j] = pr[j] * (dr[j] - di);
        }
        if (dq) tdm_tile_matmul(M, hd, mk, b->scale, dp, LDS, 1, kv->kr + (int64_t)j0 * kv->ld, kv->ld, 1, dqp, lh);
        if (dk) tdm_tile_matmul(mk, hd, M, b->scale, dp, 1, LDS, qp, lh, 1, dk + koff, ldk);
    }
    if (dq) unpack_rows(dq, dqp, lh, b);
}

void tdm_attention_backward_rows(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                                 const float *v, const float *out, const float *lse, const int32_t *cu_seqlens,
                                 const int32_t *cu_q, const int32_t *q_pos, int nseg, int nh, int nkv, int hd,
                                 int causal, float scale, float *workspace) {
    if (nseg <= 0) return;
    int r0 = cu_seqlens[0], r1 = cu_seqlens[nseg];
    /* dk and dv are sums over query blocks: start from zero on every key row the segments
     * cover (also rows no query sees). dq is written block by block. */
    if (dk) memset(dk + (int64_t)r0 * nkv * hd, 0, sizeof(float) * (size_t)(r1 - r0) * nkv * hd);
    if (dv) memset(dv + (int64_t)r0 * nkv * hd, 0, sizeof(float) * (size_t)(r1 - r0) * nkv * hd);
    int tq = block_positions(nh / nkv), n = cu_seqlens[nseg];
    float *scratch = workspace + kv_pack_floats(n, hd);
    for (int sg = 0; sg < nseg; sg++) {
        int kb = cu_seqlens[sg], ke = cu_seqlens[sg + 1], qb = cu_q[sg], qe = cu_q[sg + 1];
        if (ke <= kb || qe <= qb) continue;
        for (int kvh = 0; kvh < nkv; kvh++) {
            kv_pack kv = pack_kv(workspace, n, k, v, kb, ke, kvh, nkv, hd, dq || dk);
            for (int q0 = qb; q0 < qe; q0 += tq) {
                block b = {q0, qe - q0 < tq ? qe - q0 : tq, kb, ke, kvh, nh / nkv, nh, nkv, hd, causal, scale, q_pos};
                backward_block(dq, dk, dv, dout, q, out, lse, &kv, &b, scratch);
            }
        }
    }
}

void tdm_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                            const float *v, const float *out, const float *lse, const int32_t *cu_seqlens, int nseg,
                            int nh, int nkv, int hd, int causal, float scale, float *workspace) {
    tdm_attention_backward_rows(dq, dk, dv, dout, q, k, v, out, lse, cu_seqlens, cu_seqlens, NULL, nseg, nh, nkv, hd,
                                causal, scale, workspace);
}
