/* test_attention.c - flash attention against a naive materialised reference in double.
 *
 * The reference builds each segment's full score matrix per head, so it is independent
 * of the kernel's tiling and online softmax. It is itself checked against central
 * finite differences (test_reference_matches_finite_differences), and the kernel's
 * backward is checked against finite differences directly on a small case.
 * Layouts: one segment, three uneven segments longer than a 64-row tile, length-1
 * segments, a mix; GQA ratios 1, 2, 4; head dims 16, 32, 72; causal and bidirectional.
 * out, lse, dq, dk, dv and the workspace are NaN-filled before each call.
 *
 * Tolerances (normalised error, kcheck.h):
 *   FWD_TOL 1e-5  out and lse against the double reference
 *   BWD_TOL 2e-5  dq, dk, dv against the double reference / finite differences
 * (float accumulation over rows of up to 140 keys; observed errors are below 1e-6)
 */
#include "kernels/kernels.h"

#include <stdio.h>

#include "harness.h"
#include "kcheck.h"
#include "kernels/tile_matmul.h"

#define FWD_TOL 1e-5
#define BWD_TOL 2e-5

#define CHECK_ERR(err, tol, what)                                                                                      \
    CHECK((err) < (tol), "%s: normalised error %.3g (tolerance %.1g) [%s]", what, (double)(err), (double)(tol), label)

typedef struct {
    const int32_t *cu;
    int nseg, nh, nkv, hd, causal;
    double scale;
    double *q, *k, *v, *r; /* r: upstream gradient for the finite-difference loss */
} att_ctx;

/* out [n, nh, hd], lse [n, nh]; when dout != NULL also dq, dk, dv (overwritten). */
static void att_ref(const att_ctx *c, double *out, double *lse, const double *dout, double *dq, double *dk,
                    double *dv) {
    int nh = c->nh, nkv = c->nkv, hd = c->hd, n = c->cu[c->nseg];
    if (dout) {
        memset(dq, 0, sizeof(double) * (size_t)n * nh * hd);
        memset(dk, 0, sizeof(double) * (size_t)n * nkv * hd);
        memset(dv, 0, sizeof(double) * (size_t)n * nkv * hd);
    }
    for (int s = 0; s < c->nseg; s++) {
        int b = c->cu[s], len = c->cu[s + 1] - b;
        if (len <= 0) continue;
        double *p = kc_zerod((int64_t)len * len), *dp = kc_zerod((int64_t)len * len);
        for (int h = 0; h < nh; h++) {
            int kvh = h / (nh / nkv);
#define Q(i) (c->q + ((int64_t)(b + (i)) * nh + h) * hd)
#define K(j) (c->k + ((int64_t)(b + (j)) * nkv + kvh) * hd)
#define V(j) (c->v + ((int64_t)(b + (j)) * nkv + kvh) * hd)
            for (int i = 0; i < len; i++) {
                int nj = c->causal ? i + 1 : len;
                double m = -INFINITY, sum = 0.0;
                for (int j = 0; j < nj; j++) {
                    double sc = 0.0;
                    for (int e = 0; e < hd; e++) sc += Q(i)[e] * K(j)[e];
                    p[i * len + j] = sc * c->scale;
                    if (p[i * len + j] > m) m = p[i * len + j];
                }
                for (int j = 0; j < nj; j++) sum += exp(p[i * len + j] - m);
                for (int j = 0; j < len; j++) p[i * len + j] = j < nj ? exp(p[i * len + j] - m) / sum : 0.0;
                double *o = out + ((int64_t)(b + i) * nh + h) * hd;
                for (int e = 0; e < hd; e++) {
                    double t = 0.0;
                    for (int j = 0; j < nj; j++) t += p[i * len + j] * V(j)[e];
                    o[e] = t;
                }
                lse[(int64_t)(b + i) * nh + h] = m + log(sum);
            }
            if (!dout) continue;
            for (int i = 0; i < len; i++) {
                const double *g = dout + ((int64_t)(b + i) * nh + h) * hd;
                double di = 0.0;
                for (int j = 0; j < len; j++) {
                    double t = 0.0;
                    for (int e = 0; e < hd; e++) t += g[e] * V(j)[e];
                    dp[i * len + j] = t;
                    di += p[i * len + j] * t;
                }
                for (int j = 0; j < len; j++) {
                    double pij = p[i * len + j], ds = pij * (dp[i * len + j] - di);
                    double *dvj = dv + ((int64_t)(b + j) * nkv + kvh) * hd;
                    double *dkj = dk + ((int64_t)(b + j) * nkv + kvh) * hd;
                    double *dqi = dq + ((int64_t)(b + i) * nh + h) * hd;
                    for (int e = 0; e < hd; e++) {
                        dvj[e] += pij * g[e];
                        dqi[e] += c->scale * ds * K(j)[e];
                        dkj[e] += c->scale * ds * Q(i)[e];
                    }
                }
            }
#undef Q
#undef K
#undef V
        }
        free(p), free(dp);
    }
}

static double att_loss(void *p) {
    att_ctx *c = p;
    int64_t n = c->cu[c->nseg], no = n * c->nh * c->hd;
    double *out = kc_zerod(no), *lse = kc_zerod(n * c->nh), l = 0.0;
    att_ref(c, out, lse, NULL, NULL, NULL, NULL);
    for (int64_t i = 0; i < no; i++) l += c->r[i] * out[i];
    free(out), free(lse);
    return l;
}

typedef struct {
    float *q, *k, *v, *dout;
    att_ctx c;
    int64_t n, nq, nk;
} att_case;

static att_case make_case(const int32_t *cu, int nseg, int nh, int nkv, int hd, int causal) {
    att_case a;
    a.n = cu[nseg];
    a.nq = a.n * nh * hd, a.nk = a.n * nkv * hd;
    a.q = kc_randf(a.nq, 1.5), a.k = kc_randf(a.nk, 1.5), a.v = kc_randf(a.nk, 1), a.dout = kc_randf(a.nq, 1);
    att_ctx c = {cu,
                 nseg,
                 nh,
                 nkv,
                 hd,
                 causal,
                 1.0 / sqrt((double)hd),
                 kc_todouble(a.q, a.nq),
                 kc_todouble(a.k, a.nk),
                 kc_todouble(a.v, a.nk),
                 kc_todouble(a.dout, a.nq)};
    a.c = c;
    return a;
}

static void free_case(att_case *a) {
    free(a->q), free(a->k), free(a->v), free(a->dout), free(a->c.q), free(a->c.k), free(a->c.v), free(a->c.r);
}

/* Runs the kernel forward and backward on one case and compares with the reference. */
static void check_case(const int32_t *cu, int nseg, int nh, int nkv, int hd, int causal, const char *label) {
    att_case a = make_case(cu, nseg, nh, nkv, hd, causal);
    int64_t n = a.n;
    double *oref = kc_zerod(a.nq), *lref = kc_zerod(n * nh), *dqr = kc_zerod(a.nq), *dkr = kc_zerod(a.nk),
           *dvr = kc_zerod(a.nk);
    att_ref(&a.c, oref, lref, a.c.r, dqr, dkr, dvr);

    int64_t wsn = tdm_attention_workspace_floats((int)n, nh, nkv, hd);
    float *ws = kc_nanf(wsn), *out = kc_nanf(a.nq), *lse = kc_nanf(n * nh);
    float scale = (float)a.c.scale;
    tdm_attention_forward(out, lse, a.q, a.k, a.v, cu, nseg, nh, nkv, hd, causal, scale, ws);
    CHECK_ERR(kc_err(out, oref, a.nq), FWD_TOL, "out");
    CHECK_ERR(kc_err(lse, lref, n * nh), FWD_TOL, "lse");

    float *dq = kc_nanf(a.nq), *dk = kc_nanf(a.nk), *dv = kc_nanf(a.nk);
    for (int64_t i = 0; i < wsn; i++) ws[i] = NAN;
    tdm_attention_backward(dq, dk, dv, a.dout, a.q, a.k, a.v, out, lse, cu, nseg, nh, nkv, hd, causal, scale, ws);
    CHECK_ERR(kc_err(dq, dqr, a.nq), BWD_TOL, "dq");
    CHECK_ERR(kc_err(dk, dkr, a.nk), BWD_TOL, "dk");
    CHECK_ERR(kc_err(dv, dvr, a.nk), BWD_TOL, "dv");

    free_case(&a);
    free(oref), free(lref), free(dqr), free(dkr), free(dvr), free(ws), free(out), free(lse), free(dq), free(dk);
    free(dv);
}

static const int32_t cu_one[] = {0, 37};
static const int32_t cu_uneven[] = {0, 5, 75, 215};   /* 5, 70, 140 rows: 1, 2 and 3 tiles of 64 */
static const int32_t cu_ones[] = {0, 1, 2, 3, 4};     /* length-1 segments */
static const int32_t cu_mixed[] = {0, 1, 67, 68, 69}; /* 1, 66, 1, 1 */

static void run_layout(const int32_t *cu, int nseg, const char *name) {
    const int ratios[] = {1, 2, 4}, hds[] = {16, 32, 72};
    for (int ri = 0; ri < 3; ri++)
        for (int hi = 0; hi < 3; hi++)
            for (int causal = 0; causal <= 1; causal++) {
                char label[128];
                snprintf(label, sizeof label, "%s, gqa %d, hd %d, %s", name, ratios[ri], hds[hi],
                         causal ? "causal" : "bidirectional");
                check_case(cu, nseg, 4, 4 / ratios[ri], hds[hi], causal, label);
            }
}

static void test_one_segment(void) { run_layout(cu_one, 1, "1 segment of 37"); }
static void test_uneven_segments(void) { run_layout(cu_uneven, 3, "segments 5/70/140"); }
static void test_length_one_segments(void) { run_layout(cu_ones, 4, "4 segments of 1"); }
static void test_mixed_segments(void) { run_layout(cu_mixed, 4, "segments 1/66/1/1"); }

/* Query subsets (tdm_attention_*_rows): the kept rows of every layout, packed, against the
 * double reference restricted to them. The reference's backward runs with dout zero on the
 * rows left out, which is what a subset means for dk and dv (those rows add nothing). The
 * forward must also equal the full kernel's rows bit for bit: a row's tiles, keys and
 * order of operations do not depend on which other rows share its block. */
static void check_subset(const int32_t *cu, int nseg, int nh, int nkv, int hd, int causal, int every,
                         const char *label) {
    att_case a = make_case(cu, nseg, nh, nkv, hd, causal);
    int64_t n = a.n, rq = (int64_t)nh * hd, rk = (int64_t)nkv * hd;
    /* kept rows: every `every`-th row plus each segment's last; segment 1 keeps nothing */
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n), cuq[8] = {0};
    int nq = 0;
    for (int s = 0; s < nseg; s++) {
        for (int i = cu[s]; i < cu[s + 1]; i++)
            if (s != 1 && (i % every == 0 || i == cu[s + 1] - 1)) pos[nq++] = i;
        cuq[s + 1] = nq;
    }
    for (int64_t i = 0; i < n; i++) {
        int kept = 0;
        for (int j = 0; j < nq; j++) kept |= pos[j] == i;
        if (!kept)
            for (int64_t e = 0; e < rq; e++) a.c.r[i * rq + e] = 0.0;
    }
    double *oref = kc_zerod(a.nq), *lref = kc_zerod(n * nh), *dqr = kc_zerod(a.nq), *dkr = kc_zerod(a.nk),
           *dvr = kc_zerod(a.nk);
    att_ref(&a.c, oref, lref, a.c.r, dqr, dkr, dvr);
    /* packed inputs and references */
    float *qc = kc_nanf(nq * rq + 1), *doc = kc_nanf(nq * rq + 1);
    double *ocr = kc_zerod(nq * rq + 1), *lcr = kc_zerod((int64_t)nq * nh + 1), *dqcr = kc_zerod(nq * rq + 1);
    for (int j = 0; j < nq; j++) {
        memcpy(qc + j * rq, a.q + pos[j] * rq, sizeof(float) * (size_t)rq);
        memcpy(doc + j * rq, a.dout + pos[j] * rq, sizeof(float) * (size_t)rq);
        memcpy(ocr + j * rq, oref + pos[j] * rq, sizeof(double) * (size_t)rq);
        memcpy(lcr + (int64_t)j * nh, lref + (int64_t)pos[j] * nh, sizeof(double) * (size_t)nh);
        memcpy(dqcr + j * rq, dqr + pos[j] * rq, sizeof(double) * (size_t)rq);
    }
    int64_t wsn = tdm_attention_workspace_floats((int)n, nh, nkv, hd);
    float *ws = kc_nanf(wsn), *out = kc_nanf(nq * rq + 1), *lse = kc_nanf((int64_t)nq * nh + 1);
    float *fout = kc_nanf(a.nq), *flse = kc_nanf(n * nh), scale = (float)a.c.scale;
    tdm_attention_forward_rows(out, lse, qc, a.k, a.v, cu, cuq, pos, nseg, nh, nkv, hd, causal, scale, ws);
    CHECK_ERR(kc_err(out, ocr, nq * rq), FWD_TOL, "subset out");
    CHECK_ERR(kc_err(lse, lcr, (int64_t)nq * nh), FWD_TOL, "subset lse");
    tdm_attention_forward(fout, flse, a.q, a.k, a.v, cu, nseg, nh, nkv, hd, causal, scale, ws);
    int same = 1;
    for (int j = 0; j < nq; j++)
        same &= !memcmp(out + j * rq, fout + pos[j] * rq, sizeof(float) * (size_t)rq) &&
                !memcmp(lse + (int64_t)j * nh, flse + (int64_t)pos[j] * nh, sizeof(float) * (size_t)nh);
    CHECK(same, "subset forward differs from the full kernel's rows [%s]", label);

    float *dq = kc_nanf(nq * rq + 1), *dk = kc_nanf(a.nk), *dv = kc_nanf(a.nk);
    tdm_attention_backward_rows(dq, dk, dv, doc, qc, a.k, a.v, out, lse, cu, cuq, pos, nseg, nh, nkv, hd, causal, scale,
                                ws);
    CHECK_ERR(kc_err(dq, dqcr, nq * rq), BWD_TOL, "subset dq");
    CHECK_ERR(kc_err(dk, dkr, a.nk), BWD_TOL, "subset dk");
    CHECK_ERR(kc_err(dv, dvr, a.nk), BWD_TOL, "subset dv");
    if (nseg > 1) { /* segment 1 has no query: its key rows get exact zeros */
        int zero = 1;
        for (int64_t i = cu[1] * rk; i < cu[2] * rk; i++) zero &= dk[i] == 0.0f && dv[i] == 0.0f;
        CHECK(zero, "a segment without queries has nonzero dk or dv [%s]", label);
    }
    free_case(&a);
    free(pos), free(qc), free(doc), free(ocr), free(lcr), free(dqcr), free(oref), free(lref), free(dqr), free(dkr);
    free(dvr), free(ws), free(out), free(lse), free(fout), free(flse), free(dq), free(dk), free(dv);
}

static void test_query_subsets(void) {
    static const struct {
        const int32_t *cu;
        int nseg;
        const char *name;
    } layouts[] = {
        {cu_one, 1, "1 segment of 37"}, {cu_uneven, 3, "segments 5/70/140"}, {cu_mixed, 4, "segments 1/66/1/1"}};
    const int ratios[] = {1, 4}, every[] = {1, 3, 17};
    for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++)
        for (int ri = 0; ri < 2; ri++)
            for (int ei = 0; ei < 3; ei++)
                for (int causal = 0; causal <= 1; causal++) {
                    char label[160];
                    snprintf(label, sizeof label, "%s, gqa %d, every %d rows, %s", layouts[li].name, ratios[ri],
                             every[ei], causal ? "causal" : "bidirectional");
                    check_subset(layouts[li].cu, layouts[li].nseg, 4, 4 / ratios[ri], 32, causal, every[ei], label);
                }
}

/* The reference backward and the kernel backward both agree with finite differences of
 * the reference forward, so the reference cannot share a mistake with the kernel. */
static void test_reference_matches_finite_differences(void) {
    static const int32_t cu[] = {0, 3, 11};
    for (int causal = 0; causal <= 1; causal++) {
        const char *label = causal ? "causal" : "bidirectional";
        att_case a = make_case(cu, 2, 4, 2, 6, causal);
        double *o = kc_zerod(a.nq), *l = kc_zerod(a.n * 4), *dqr = kc_zerod(a.nq), *dkr = kc_zerod(a.nk),
               *dvr = kc_zerod(a.nk), *gq = kc_zerod(a.nq), *gk = kc_zerod(a.nk), *gv = kc_zerod(a.nk);
        att_ref(&a.c, o, l, a.c.r, dqr, dkr, dvr);
        kc_fd_grad(gq, a.c.q, a.nq, att_loss, &a.c);
        kc_fd_grad(gk, a.c.k, a.nk, att_loss, &a.c);
        kc_fd_grad(gv, a.c.v, a.nk, att_loss, &a.c);
        /* reference analytic vs finite differences: both double, so a tight bound */
        double e = 0.0;
        for (int64_t i = 0; i < a.nq; i++) e = fmax(e, fabs(dqr[i] - gq[i]));
        for (int64_t i = 0; i < a.nk; i++) e = fmax(e, fmax(fabs(dkr[i] - gk[i]), fabs(dvr[i] - gv[i])));
        CHECK(e < 1e-7, "reference backward vs finite differences: %.3g [%s]", e, label);

        float *ws = kc_nanf(tdm_attention_workspace_floats((int)a.n, 4, 2, 6)), *out = kc_nanf(a.nq),
              *lse = kc_nanf(a.n * 4), *dq = kc_nanf(a.nq), *dk = kc_nanf(a.nk), *dv = kc_nanf(a.nk);
        float scale = (float)a.c.scale;
        tdm_attention_forward(out, lse, a.q, a.k, a.v, cu, 2, 4, 2, 6, causal, scale, ws);
        tdm_attention_backward(dq, dk, dv, a.dout, a.q, a.k, a.v, out, lse, cu, 2, 4, 2, 6, causal, scale, ws);
        CHECK_ERR(kc_err(dq, gq, a.nq), BWD_TOL, "dq vs finite differences");
        CHECK_ERR(kc_err(dk, gk, a.nk), BWD_TOL, "dk vs finite differences");
        CHECK_ERR(kc_err(dv, gv, a.nk), BWD_TOL, "dv vs finite differences");

        /* input gradients nobody needs may be NULL; the others stay right */
        for (int64_t i = 0; i < a.nq; i++) dq[i] = NAN;
        for (int64_t i = 0; i < a.nk; i++) dk[i] = dv[i] = NAN;
        tdm_attention_backward(dq, NULL, NULL, a.dout, a.q, a.k, a.v, out, lse, cu, 2, 4, 2, 6, causal, scale, ws);
        CHECK_ERR(kc_err(dq, gq, a.nq), BWD_TOL, "dq alone");
        tdm_attention_backward(NULL, dk, NULL, a.dout, a.q, a.k, a.v, out, lse, cu, 2, 4, 2, 6, causal, scale, ws);
        CHECK_ERR(kc_err(dk, gk, a.nk), BWD_TOL, "dk alone");
        tdm_attention_backward(NULL, NULL, dv, a.dout, a.q, a.k, a.v, out, lse, cu, 2, 4, 2, 6, causal, scale, ws);
        CHECK_ERR(kc_err(dv, gv, a.nk), BWD_TOL, "dv alone");

        free_case(&a);
        free(o), free(l), free(dqr), free(dkr), free(dvr), free(gq), free(gk), free(gv);
        free(ws), free(out), free(lse), free(dq), free(dk), free(dv);
    }
}

/* Segments are independent: changing one segment's k and v leaves the others' output
 * bit-identical. */
static void test_segments_isolated(void) {
    const char *label = "isolation";
    static const int32_t cu[] = {0, 30, 100};
    int nh = 2, nkv = 1, hd = 16;
    att_case a = make_case(cu, 2, nh, nkv, hd, 0);
    int64_t wsn = tdm_attention_workspace_floats(100, nh, nkv, hd);
    float *ws = kc_nanf(wsn), *o1 = kc_nanf(a.nq), *o2 = kc_nanf(a.nq), *lse = kc_nanf(100 * nh);
    tdm_attention_forward(o1, lse, a.q, a.k, a.v, cu, 2, nh, nkv, hd, 0, 0.25f, ws);
    for (int64_t i = 30 * nkv * hd; i < a.nk; i++) a.k[i] += 1.0f, a.v[i] -= 2.0f;
    tdm_attention_forward(o2, lse, a.q, a.k, a.v, cu, 2, nh, nkv, hd, 0, 0.25f, ws);
    CHECK(memcmp(o1, o2, sizeof(float) * 30 * nh * hd) == 0, "segment 0 changed with segment 1's keys [%s]", label);
    CHECK(memcmp(o1 + 30 * nh * hd, o2 + 30 * nh * hd, sizeof(float) * 70 * nh * hd) != 0,
          "segment 1 did not change [%s]", label);
    /* lse = NULL (generation): the same output */
    for (int64_t i = 0; i < a.nq; i++) o1[i] = NAN;
    tdm_attention_forward(o1, NULL, a.q, a.k, a.v, cu, 2, nh, nkv, hd, 0, 0.25f, ws);
    CHECK(memcmp(o1, o2, sizeof(float) * a.nq) == 0, "output without lse differs [%s]", label);
    free_case(&a);
    free(ws), free(o1), free(o2), free(lse);
}

/* The tile product inside the attention, directly: every row-block height (1..6), both
 * column-panel widths and the scalar column tail, A read plain and transposed,
 * overwrite and accumulate, against a double reference. */
static void test_tile_matmul(void) {
    const char *label = "tile matmul";
    const int shapes[][3] = {{1, 1, 1}, {5, 7, 3}, {6, 16, 8}, {13, 37, 29}, {128, 72, 64}, {17, 24, 130}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int trans = 0; trans <= 1; trans++)
            for (int accumulate = 0; accumulate <= 1; accumulate++) {
                int m = shapes[si][0], n = shapes[si][1], k = shapes[si][2], ldb = n + 3, ldc = n + 5;
                float *a = kc_randf((int64_t)m * k, 1), *b = kc_randf((int64_t)k * ldb, 1);
                float *c = accumulate ? kc_randf((int64_t)m * ldc, 1) : kc_nanf((int64_t)m * ldc);
                double *ref = kc_zerod((int64_t)m * n);
                /* A is stored m x k (plain) or k x m (read transposed) */
                int64_t a_row = trans ? 1 : k, a_col = trans ? m : 1;
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < n; j++) {
                        double t = 0.0;
                        for (int kk = 0; kk < k; kk++) t += (double)a[i * a_row + kk * a_col] * b[kk * ldb + j];
                        ref[i * n + j] = 0.5 * t + (accumulate ? c[i * ldc + j] : 0.0);
                    }
                tdm_tile_matmul(m, n, k, 0.5f, a, a_row, a_col, b, ldb, accumulate, c, ldc);
                float *got = kc_nanf((int64_t)m * n);
                for (int i = 0; i < m; i++) memcpy(got + i * n, c + i * ldc, sizeof(float) * n);
                CHECK_ERR(kc_err(got, ref, (int64_t)m * n), FWD_TOL, "C");
                free(a), free(b), free(c), free(ref), free(got);
            }
}

int main(void) {
    RUN(test_tile_matmul);
    RUN(test_reference_matches_finite_differences);
    RUN(test_one_segment);
    RUN(test_uneven_segments);
    RUN(test_length_one_segments);
    RUN(test_mixed_segments);
    RUN(test_segments_isolated);
    RUN(test_query_subsets);
    return TEST_SUMMARY();
}
