/* bench_kernels.c - how close each kernel runs to the machine's ceiling, on one thread.
 *
 * Ceilings are measured in the same run: cblas_sgemm on transformer shapes (NN, NT, TN)
 * for compute-bound kernels, and memcpy of a buffer larger than the last-level cache
 * for memory-bound ones. Each kernel's rate is printed as a fraction of its ceiling:
 *   compute-bound: useful FLOP/s / best sgemm FLOP/s
 *   memory-bound:  (bytes the kernel must read + write) / s  /  memcpy (read + write) bytes / s
 * Flash attention is also timed against a naive version that materialises the n x n
 * score matrix per head (sgemm for the products, the same vector exp), as a peer.
 * Every time is the best of repeated calls (at least min_seconds of calls), measured as
 * CPU time of the calling thread: OpenBLAS runs on that thread (one thread), so on an
 * idle machine this is the wall time, and on a shared machine other processes do not
 * inflate it (they still cost cache and memory bandwidth, so noise only ever adds).
 *
 *   build/bench/bench_kernels [--quick]
 */
#include "kernels/kernels.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "kernels/vec.h"
#include "bench_platform.h"

static double min_seconds = 0.3;

/* Best time of one execution of stmt, in seconds (after one warm-up run). */
#define BEST_TIME(best, stmt)                                                                                          \
    do {                                                                                                               \
        stmt;                                                                                                          \
        double total_ = 0.0;                                                                                           \
        int reps_ = 0;                                                                                                 \
        (best) = 1e30;                                                                                                 \
        while (total_ < min_seconds || reps_ < 3) {                                                                    \
            uint64_t t0_ = tdm_thread_cpu_ns();                                                                        \
            stmt;                                                                                                      \
            double dt_ = (double)(tdm_thread_cpu_ns() - t0_) * 1e-9;                                                   \
            total_ += dt_;                                                                                             \
            reps_++;                                                                                                   \
            if (dt_ < (best)) (best) = dt_;                                                                            \
        }                                                                                                              \
    } while (0)

static float *randf(int64_t n, float scale) {
    float *a = malloc(sizeof(float) * (size_t)n);
    uint64_t s = 0x2545f4914f6cdd1dull + (uint64_t)n;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        a[i] = scale * ((float)(s >> 40) / 8388608.0f - 1.0f);
    }
    return a;
}

static void row(const char *name, const char *shape, double seconds, double rate, const char *unit, double ceiling) {
    printf("%-24s %-30s %9.3f ms %9.2f %-6s %6.2f\n", name, shape, seconds * 1e3, rate, unit, rate / ceiling);
}

/* ---- ceilings ----------------------------------------------------------------------- */

static double sgemm_gflops(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const char *name) {
    float *a = randf((int64_t)m * k, 1), *b = randf((int64_t)k * n, 1), *c = randf((int64_t)m * n, 1);
    int lda = ta == CblasNoTrans ? k : m, ldb = tb == CblasNoTrans ? n : k;
    double t;
    BEST_TIME(t, cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n));
    double gf = 2.0 * m * n * k / t * 1e-9;
    char shape[64];
    snprintf(shape, sizeof shape, "M=%d N=%d K=%d", m, n, k);
    printf("%-24s %-30s %9.3f ms %9.2f GFLOP/s\n", name, shape, t * 1e3, gf);
    free(a), free(b), free(c);
    return gf;
}

static double memcpy_gbs(int64_t floats) {
    float *a = randf(floats, 1), *b = randf(floats, 1);
    double t;
    BEST_TIME(t, memcpy(b, a, sizeof(float) * (size_t)floats));
    double gbs = 2.0 * 4.0 * (double)floats / t * 1e-9; /* read + write */
    char shape[64];
    snprintf(shape, sizeof shape, "%lld MB", (long long)(floats * 4 >> 20));
    printf("%-24s %-30s %9.3f ms %9.2f GB/s (read + write)\n", "memcpy", shape, t * 1e3, gbs);
    /* The simplest streaming kernel, for reading the ratios below: glibc's memcpy writes
     * large buffers with non-temporal stores, while a loop's ordinary stores first read
     * each destination line (read for ownership), so y = f(x) kernels move 3 bytes for
     * every 2 counted and top out near this loop's ratio, not 1.0. */
    BEST_TIME(t, for (int64_t i = 0; i < floats; i++) b[i] = 2.0f * a[i]);
    printf("%-24s %-30s %9.3f ms %9.2f GB/s (read + write)  %.2f of memcpy\n", "stream y = 2x (loop)", shape, t * 1e3,
           8.0 * (double)floats / t * 1e-9, 8.0 * (double)floats / t * 1e-9 / gbs);
    free(a), free(b);
    return gbs;
}

/* ---- naive attention: the full score matrix per head (the peer) ------------------- */

static void naive_softmax_rows(float *s, int n, int causal, float *lse) {
    for (int i = 0; i < n; i++) {
        float *r = s + (int64_t)i * n;
        int nj = causal ? i + 1 : n;
        float m = -INFINITY;
        for (int j = 0; j < nj; j++) m = r[j] > m ? r[j] : m;
        tdm_v8 acc = tdm_v8_set1(0.0f);
        int j = 0;
        for (; j + 8 <= nj; j += 8) {
            tdm_v8 e = tdm_v8_exp(tdm_v8_load(r + j) - m);
            tdm_v8_store(r + j, e);
            acc += e;
        }
        float sum = tdm_v8_sum(acc);
        for (; j < nj; j++) sum += r[j] = tdm_expf(r[j] - m);
        for (j = nj; j < n; j++) r[j] = 0.0f;
        float inv = 1.0f / sum;
        for (j = 0; j < nj; j++) r[j] *= inv;
        lse[i] = m + logf(sum);
    }
}

/* One segment of n rows; p and dp are n x n scratch. */
static void naive_attention(float *out, float *dq, float *dk, float *dv, const float *dout, const float *q,
                            const float *k, const float *v, int n, int nh, int nkv, int hd, int causal, float scale,
                            float *p, float *dp, float *lse, int backward) {
    int ldq = nh * hd, ldk = nkv * hd;
    if (backward) {
        memset(dk, 0, sizeof(float) * (size_t)n * ldk);
        memset(dv, 0, sizeof(float) * (size_t)n * ldk);
    }
    for (int h = 0; h < nh; h++) {
        int kvh = h / (nh / nkv);
        const float *qp = q + h * hd, *kp = k + kvh * hd, *vp = v + kvh * hd;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, hd, scale, qp, ldq, kp, ldk, 0.0f, p, n);
        naive_softmax_rows(p, n, causal, lse);
        if (!backward) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, hd, n, 1.0f, p, n, vp, ldk, 0.0f, out + h * hd,
                        ldq);
            continue;
        }
        const float *dop = dout + h * hd, *op = out + h * hd;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, hd, n, 1.0f, p, n, dop, ldq, 1.0f, dv + kvh * hd, ldk);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, hd, 1.0f, dop, ldq, vp, ldk, 0.0f, dp, n);
        for (int i = 0; i < n; i++) {
            float di = 0.0f;
            for (int c = 0; c < hd; c++) di += dop[(int64_t)i * ldq + c] * op[(int64_t)i * ldq + c];
            float *pr = p + (int64_t)i * n, *dr = dp + (int64_t)i * n;
            for (int j = 0; j < n; j++) dr[j] = pr[j] * (dr[j] - di);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, hd, n, scale, dp, n, kp, ldk, 0.0f, dq + h * hd, ldq);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, hd, n, scale, dp, n, qp, ldq, 1.0f, dk + kvh * hd, ldk);
    }
}

static void bench_attention(int n, int nh, int nkv, int hd, int causal, double gemm_ceiling) {
    int64_t nq = (int64_t)n * nh * hd, nk = (int64_t)n * nkv * hd;
    float *q = randf(nq, 1), *k = randf(nk, 1), *v = randf(nk, 1), *dout = randf(nq, 1), *out = randf(nq, 1);
    float *dq = randf(nq, 1), *dk = randf(nk, 1), *dv = randf(nk, 1), *lse = randf((int64_t)n * nh, 1);
    float *ws = randf(tdm_attention_workspace_floats(n, nh, nkv, hd), 1);
    int32_t cu[2] = {0, n};
    float scale = 1.0f / sqrtf((float)hd);
    double pairs = causal ? 0.5 * n * (n + 1.0) : (double)n * n;        /* visible (query, key) pairs per head */
    double ffwd = 4.0 * hd * pairs * nh, fbwd = 10.0 * hd * pairs * nh; /* bwd: recompute S, dP, dV, dQ, dK */
    double tf, tb;
    BEST_TIME(tf, tdm_attention_forward(out, lse, q, k, v, cu, 1, nh, nkv, hd, causal, scale, ws));
    BEST_TIME(tb, tdm_attention_backward(dq, dk, dv, dout, q, k, v, out, lse, cu, 1, nh, nkv, hd, causal, scale, ws));
    char shape[64];
    snprintf(shape, sizeof shape, "n=%d h=%d/%d hd=%d %s", n, nh, nkv, hd, causal ? "causal" : "bidir");
    row("attention fwd", shape, tf, ffwd / tf * 1e-9, "GFLOP/s", gemm_ceiling);
    row("attention bwd", shape, tb, fbwd / tb * 1e-9, "GFLOP/s", gemm_ceiling);

    float *p = randf((int64_t)n * n, 1), *dp = randf((int64_t)n * n, 1);
    double nf, nb;
    BEST_TIME(nf, naive_attention(out, dq, dk, dv, dout, q, k, v, n, nh, nkv, hd, causal, scale, p, dp, lse, 0));
    BEST_TIME(nb, naive_attention(out, dq, dk, dv, dout, q, k, v, n, nh, nkv, hd, causal, scale, p, dp, lse, 1));
    /* the naive backward recomputes S and the softmax, as the flash backward does */
    printf("%-24s %-30s %9.3f ms  flash/naive time: fwd %.2f, bwd %.2f, fwd+bwd %.2f (naive: %.0f MB of scores)\n",
           "attention naive (peer)", shape, (nf + nb) * 1e3, tf / nf, tb / nb, (tf + tb) / (nf + nb),
           2.0 * n * n * 4 / 1048576.0);
    free(q), free(k), free(v), free(dout), free(out), free(dq), free(dk), free(dv), free(lse), free(ws), free(p);
    free(dp);
}

int main(int argc, char **argv) {
    tdm_blas_select_core(argv); /* OpenBLAS's kernels for this CPU (kernels/blas_core.c) */
    if (argc > 1 && strcmp(argv[1], "--quick") == 0) min_seconds = 0.1;
    openblas_set_num_threads(1);
    bench_print_platform(stdout);
    printf("%-24s %-30s %12s %9s %-6s %6s\n", "kernel", "shape", "time", "rate", "unit", "ratio");

    /* ---- ceilings ---- */
    double g = 0.0, t;
    g = fmax(g, sgemm_gflops(CblasNoTrans, CblasNoTrans, 512, 3072, 768, "sgemm NN"));
    g = fmax(g, sgemm_gflops(CblasNoTrans, CblasTrans, 512, 3072, 768, "sgemm NT"));
    g = fmax(g, sgemm_gflops(CblasTrans, CblasNoTrans, 3072, 768, 512, "sgemm TN"));
    g = fmax(g, sgemm_gflops(CblasNoTrans, CblasNoTrans, 1024, 1024, 1024, "sgemm NN"));
    const int64_t big = 8 << 20; /* 8 M floats = 32 MB per array: past the L3 */
    double bw = memcpy_gbs(big);
    printf("ceilings: sgemm %.1f GFLOP/s, memory %.1f GB/s; ratio = rate / ceiling\n\n", g, bw);

    /* ---- compute-bound ---- */
    {
        int n = 512, in = 768, out = 3072;
        float *x = randf((int64_t)n * in, 1), *w = randf((int64_t)out * in, 1), *b = randf(out, 1);
        float *y = randf((int64_t)n * out, 1), *dx = randf((int64_t)n * in, 1), *dw = randf((int64_t)out * in, 1);
        float *db = randf(out, 1);
        double f = 2.0 * n * in * out;
        BEST_TIME(t, tdm_linear_forward(y, x, w, b, n, in, out));
        row("linear fwd", "n=512 in=768 out=3072", t, f / t * 1e-9, "GFLOP/s", g);
        BEST_TIME(t, tdm_linear_backward(dx, dw, db, y, x, w, n, in, out));
        row("linear bwd", "n=512 in=768 out=3072", t, 2 * f / t * 1e-9, "GFLOP/s", g);
        free(x), free(w), free(b), free(y), free(dx), free(dw), free(db);
    }
    bench_attention(1024, 8, 2, 64, 1, g);
    bench_attention(1024, 8, 8, 64, 0, g);
    bench_attention(1024, 4, 4, 128, 1, g);
    for (int chunk = 64; chunk <= 256; chunk *= 4) {
        int n = 256, d = 512, v = 32000;
        float *h = randf((int64_t)n * d, 1), *w = randf((int64_t)v * d, 0.1f), *dh = randf((int64_t)n * d, 1);
        float *dw = randf((int64_t)v * d, 1), *ws = randf(tdm_xent_workspace_floats(chunk, v, d), 1);
        int32_t *tg = malloc(sizeof(int32_t) * n);
        for (int i = 0; i < n; i++) tg[i] = (i * 7919) % v;
        int64_t cnt;
        double f = 2.0 * n * d * v;
        char shape[64];
        snprintf(shape, sizeof shape, "n=256 d=512 V=32000 chunk=%d", chunk);
        BEST_TIME(t, tdm_xent_fused(NULL, NULL, h, w, tg, n, d, v, 1.0f, chunk, ws, &cnt));
        row("xent fwd", shape, t, f / t * 1e-9, "GFLOP/s", g);
        BEST_TIME(t, tdm_xent_fused(dh, dw, h, w, tg, n, d, v, 1.0f / n, chunk, ws, &cnt));
        row("xent fwd+bwd", shape, t, 3 * f / t * 1e-9, "GFLOP/s", g);
        free(h), free(w), free(dh), free(dw), free(ws), free(tg);
    }
    printf("\n");

    /* ---- memory-bound: rates count the arrays each kernel must stream ---- */
    {
        int n = 8192, d = 1024; /* 32 MB per activation array */
        int64_t t64 = (int64_t)n * d;
        float *x = randf(t64, 1), *y = randf(t64, 1), *dy = randf(t64, 1), *dx = randf(t64, 1);
        float *w = randf(d, 1), *b = randf(d, 1), *dw = randf(d, 1), *db = randf(d, 1);
        float *mean = randf(n, 1), *rstd = randf(n, 1);
        double a = 4.0 * (double)t64; /* bytes per array */
        const char *shape = "n=8192 d=1024";
        BEST_TIME(t, tdm_layernorm_forward(y, mean, rstd, x, w, b, n, d, 1e-6f));
        row("layernorm fwd", shape, t, 2 * a / t * 1e-9, "GB/s", bw);
        BEST_TIME(t, tdm_layernorm_backward(dx, dw, db, dy, x, mean, rstd, w, n, d));
        row("layernorm bwd", shape, t, 3 * a / t * 1e-9, "GB/s", bw);
        BEST_TIME(t, tdm_rmsnorm_forward(y, rstd, x, w, n, d, 1e-6f));
        row("rmsnorm fwd", shape, t, 2 * a / t * 1e-9, "GB/s", bw);
        BEST_TIME(t, tdm_rmsnorm_backward(dx, dw, dy, x, rstd, w, n, d));
        row("rmsnorm bwd", shape, t, 3 * a / t * 1e-9, "GB/s", bw);
        int nq = n * 8, hdq = 128; /* q_norm: rows = tokens * heads */
        float *rstd2 = randf(nq, 1);
        BEST_TIME(t, tdm_rmsnorm_forward(y, rstd2, x, w, nq, hdq, 1e-6f));
        row("rmsnorm fwd per head", "n=65536 d=128", t, 2 * a / t * 1e-9, "GB/s", bw);
        BEST_TIME(t, tdm_rmsnorm_backward(dx, dw, dy, x, rstd2, w, nq, hdq));
        row("rmsnorm bwd per head", "n=65536 d=128", t, 3 * a / t * 1e-9, "GB/s", bw);
        free(rstd2);
        shape = "8M values";
        BEST_TIME(t, tdm_gelu_tanh_forward(y, x, t64));
        row("gelu tanh fwd", shape, t, 2 * a / t * 1e-9, "GB/s", bw);
        BEST_TIME(t, tdm_gelu_tanh_backward(dx, dy, x, t64));
        row("gelu tanh bwd", shape, t, 3 * a / t * 1e-9, "GB/s", bw);
        BEST_TIME(t, tdm_gelu_erf_forward(y, x, t64));
        row("gelu erf fwd", shape, t, 2 * a / t * 1e-9, "GB/s", bw);
        BEST_TIME(t, tdm_gelu_erf_backward(dx, dy, x, t64));
        row("gelu erf bwd", shape, t, 3 * a / t * 1e-9, "GB/s", bw);
        BEST_TIME(t, tdm_swiglu_forward(y, x, dy, n, d));
        row("swiglu fwd", shape, t, 3 * a / t * 1e-9, "GB/s", bw);
        float *d2 = randf(t64, 1);
        BEST_TIME(t, tdm_swiglu_backward(dx, d2, dy, x, y, n, d));
        row("swiglu bwd", shape, t, 5 * a / t * 1e-9, "GB/s", bw);
        free(d2);
        int heads = 8, hd = 128; /* n tokens x 8 heads x 128 = 8M values */
        float *cs = randf((int64_t)n * hd / 2, 1), *sn = randf((int64_t)n * hd / 2, 1);
        BEST_TIME(t, tdm_rope_forward(x, cs, sn, n, heads, hd));
        row("rope fwd", "n=8192 h=8 hd=128", t, (2 * a + 2.0 * n * hd / 2 * 4) / t * 1e-9, "GB/s", bw);
        BEST_TIME(t, tdm_rope_backward(x, cs, sn, n, heads, hd));
        row("rope bwd", "n=8192 h=8 hd=128", t, (2 * a + 2.0 * n * hd / 2 * 4) / t * 1e-9, "GB/s", bw);
        free(cs), free(sn);
        int vocab = 32000;
        float *table = randf((int64_t)vocab * d, 1);
        int32_t *ids = malloc(sizeof(int32_t) * n);
        for (int i = 0; i < n; i++) ids[i] = (int32_t)(((int64_t)i * 104729) % vocab);
        BEST_TIME(t, tdm_embedding_forward(y, table, ids, n, d));
        row("embedding fwd", "n=8192 d=1024 V=32000", t, 2 * a / t * 1e-9, "GB/s", bw);
        BEST_TIME(t, tdm_embedding_backward(table, dy, ids, n, d));
        row("embedding bwd", "n=8192 d=1024 V=32000", t, 3 * a / t * 1e-9, "GB/s", bw);
        free(table), free(ids);
        float *m = randf(t64, 0.1f), *v2 = randf(t64, 0.1f);
        for (int64_t i = 0; i < t64; i++) v2[i] = fabsf(v2[i]);
        int64_t step = 1;
        BEST_TIME(t, tdm_adamw_step(x, dy, m, v2, t64, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, step++, 1.0f));
        row("adamw", shape, t, 7 * a / t * 1e-9, "GB/s", bw);
        free(m), free(v2);
        /* --bf16: the optimizer rounds what it updated (read 4 bytes, write 4 + 2), and every 16-bit all-gather
         * widens what the peers sent (read 2, write 4); the element-at-a-time loop is what the widening was */
        uint16_t *bits = malloc(sizeof(uint16_t) * (size_t)t64);
        BEST_TIME(t, tdm_round_to_bf16(y, bits, x, t64));
        row("round to bf16", shape, t, 10.0 * (double)t64 / t * 1e-9, "GB/s", bw);
        BEST_TIME(t, tdm_widen_bf16(y, bits, t64));
        row("widen bf16", shape, t, 6.0 * (double)t64 / t * 1e-9, "GB/s", bw);
        BEST_TIME(
            t, for (int64_t i = 0; i < t64; i++) {
                uint32_t u = (uint32_t)bits[i] << 16;
                memcpy(&y[i], &u, 4);
            });
        row("widen bf16 (scalar loop)", shape, t, 6.0 * (double)t64 / t * 1e-9, "GB/s", bw);
        free(bits);
        free(x), free(y), free(dy), free(dx), free(w), free(b), free(dw), free(db), free(mean), free(rstd);
    }
    return 0;
}
