/* bench_gemm.c - where a matrix product of the trainer's shapes loses time against the FMA peak.
 *
 * At width 512 (bench/peer_torch/configs/small) tandem and the PyTorch peer both spend most of a step in
 * OpenBLAS's single-threaded sgemm, on products whose M is the tokens of one micro-batch (53-173, mean 94).
 * This probe asks whether a GEMM of our own could beat OpenBLAS there, and what it would need. It measures,
 * in one run, on the decoder's shapes with cold weights (12 sets rotated, 6-40 MB of weights and as much again
 * of activations and gradients, so that a call finds its weight out of cache, as in a step):
 *
 *   peak      an FMA loop on registers (2 x 8-lane FMA per cycle): the ceiling;
 *   OpenBLAS  cblas_sgemm, as src/kernels/linear.c calls it (forward NT, dX NN, dW TN);
 *   packed    a BLIS-style product written here: a 6 x 16 register tile (twelve 8-lane accumulators), A packed
 *             into 6-row micro-panels and B into 16-column micro-panels of KC = 256, each B panel packed just
 *             before use (8 x 8 transposes when B is the transposed weight);
 *   prepack   the same, reading B's panels from a copy of the weight kept in the kernel's layout (what a
 *             trainer could repack once per optimizer step and reuse), still cold in memory;
 *   noPackB   the same with B's packing skipped (the kernel reads a stale, cached panel): the bound when
 *             the weight costs nothing to bring in;
 *   kernel    the micro-kernel alone on packed, cached operands.
 *
 * Ratios are against OpenBLAS measured in the same run; the last column compares the packed products'
 * results with OpenBLAS's. Read-out on this machine (docs/benchmarks.md, "Could a GEMM of our own do
 * better?"): the kernel runs at 93-98% of peak; the packed product only matches OpenBLAS (0.87-1.09x);
 * a prepacked weight gains 1.03-1.16x on the forward and dX products and nothing on dW (whose weight is the
 * output), about 5% of a step's matrix time; the bound (noPackB) is 1.07-1.26x.
 *
 *   build/bench/bench_gemm [M ...]        (default M = 94 163; OPENBLAS_NUM_THREADS=1 is set here)
 */
#include <cblas.h>

#include "kernels/kernels.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "bench_platform.h"

typedef float v8 __attribute__((vector_size(32)));
static inline v8 ld(const float *p) {
    v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void st(float *p, v8 v) { memcpy(p, &v, sizeof v); }
static inline v8 bcast(float a) { return (v8){a, a, a, a, a, a, a, a}; }

enum { MR = 6, NR = 16, KC = 256, MC = 240, NW = 12 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* acc[2r], acc[2r+1] += sum_p ap[p*6 + r] * bp[p*16 + 0..15] */
static inline __attribute__((always_inline)) void kernel(int kc, const float *restrict ap, const float *restrict bp,
                                                         v8 acc[12]) {
    v8 c0 = acc[0], c1 = acc[1], c2 = acc[2], c3 = acc[3], c4 = acc[4], c5 = acc[5];
    v8 c6 = acc[6], c7 = acc[7], c8 = acc[8], c9 = acc[9], c10 = acc[10], c11 = acc[11];
#pragma GCC unroll 4
    for (int p = 0; p < kc; p++) {
        v8 b0 = ld(bp), b1 = ld(bp + 8), a;
        a = bcast(ap[0]), c0 += a * b0, c1 += a * b1;
        a = bcast(ap[1]), c2 += a * b0, c3 += a * b1;
        a = bcast(ap[2]), c4 += a * b0, c5 += a * b1;
        a = bcast(ap[3]), c6 += a * b0, c7 += a * b1;
        a = bcast(ap[4]), c8 += a * b0, c9 += a * b1;
        a = bcast(ap[5]), c10 += a * b0, c11 += a * b1;
        ap += MR, bp += NR;
    }
    acc[0] = c0, acc[1] = c1, acc[2] = c2, acc[3] = c3, acc[4] = c4, acc[5] = c5;
    acc[6] = c6, acc[7] = c7, acc[8] = c8, acc[9] = c9, acc[10] = c10, acc[11] = c11;
}

/* C tile (mr x nr of 6 x 16) = or += the kernel's product */
static void tile(int kc, const float *ap, const float *bp, float *c, int64_t ldc, int mr, int nr, int accumulate) {
    v8 acc[12];
    for (int i = 0; i < 12; i++) acc[i] = bcast(0.0f);
    for (int r = 0; r < mr; r++) __builtin_prefetch(c + r * ldc, 1, 3), __builtin_prefetch(c + r * ldc + nr - 1, 1, 3);
    kernel(kc, ap, bp, acc);
    if (mr == MR && nr == NR) {
        for (int r = 0; r < MR; r++) {
            float *cr = c + r * ldc;
            v8 t0 = acc[2 * r], t1 = acc[2 * r + 1];
            if (accumulate) t0 += ld(cr), t1 += ld(cr + 8);
            st(cr, t0), st(cr + 8, t1);
        }
        return;
    }
    float t[MR * NR];
    for (int r = 0; r < MR; r++) st(t + NR * r, acc[2 * r]), st(t + NR * r + 8, acc[2 * r + 1]);
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < nr; j++) c[r * ldc + j] = t[NR * r + j] + (accumulate ? c[r * ldc + j] : 0.0f);
}

static inline void transpose8(v8 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++)
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20), r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
}

/* A(i,p) = a[i*ars + p*acs], rows 0..mc, columns 0..kc -> 6-row micro-panels, k-major, zero-padded */
static void pack_a(int mc, int kc, const float *a, int64_t ars, int64_t acs, float *ap) {
    for (int i = 0; i < mc; i += MR, ap += MR * kc) {
        int mr = mc - i < MR ? mc - i : MR;
        if (ars == 1 && mr == MR) { /* A = dy^T: six consecutive floats per p */
            for (int p = 0; p < kc; p++) memcpy(ap + p * MR, a + i + p * acs, sizeof(float) * MR);
            continue;
        }
        for (int p = 0; p < kc; p++)
            for (int r = 0; r < MR; r++) ap[p * MR + r] = r < mr ? a[(i + r) * ars + p * acs] : 0.0f;
    }
}

/* B(p,j) = b[p*brs + j*bcs], columns 0..nr (<= 16), rows 0..kc -> one k-major micro-panel, zero-padded */
static void pack_b(int kc, int nr, const float *b, int64_t brs, int64_t bcs, float *bp) {
    int p = 0;
    if (bcs == 1 && nr == NR) {
        for (; p < kc; p++) st(bp + p * NR, ld(b + p * brs)), st(bp + p * NR + 8, ld(b + p * brs + 8));
    } else if (brs == 1 && nr == NR) { /* B = W^T: 16 rows of W, transposed 8 x 8 at a time */
        for (; p + 8 <= kc; p += 8)
            for (int h = 0; h < 2; h++) {
                v8 r[8];
                for (int q = 0; q < 8; q++) r[q] = ld(b + (8 * h + q) * bcs + p);
                transpose8(r);
                for (int q = 0; q < 8; q++) st(bp + (p + q) * NR + 8 * h, r[q]);
            }
    }
    for (; p < kc; p++)
        for (int q = 0; q < NR; q++) bp[p * NR + q] = q < nr ? b[p * brs + q * bcs] : 0.0f;
}

static float abuf[MC * KC] __attribute__((aligned(64)));
static float bbuf[KC * 4096] __attribute__((aligned(64)));
static int skip_pack_b;

static int round_up(int n, int to) { return (n + to - 1) / to * to; }

/* All of B in the kernel's layout: for each KC block of rows, its 16-column micro-panels one after the other
 * (what a weight kept "prepacked" between optimizer steps would look like). */
static float *prepack_b(int k, int n, const float *b, int64_t brs, int64_t bcs) {
    float *bp = aligned_alloc(64, sizeof(float) * (size_t)k * (size_t)round_up(n, NR)), *q = bp;
    for (int pc = 0; pc < k; pc += KC) {
        int kc = k - pc < KC ? k - pc : KC;
        for (int jr = 0; jr < n; jr += NR, q += kc * NR)
            pack_b(kc, n - jr < NR ? n - jr : NR, b + pc * brs + jr * bcs, brs, bcs, q);
    }
    return bp;
}

/* C[m,n] (+)= A B with A(i,p) = a[i*ars + p*acs], B(p,j) = b[p*brs + j*bcs], C row-major; with `pre`
 * (prepack_b's layout of B) the kernel reads B's panels from it and b is not read. */
static void packed_gemm(int m, int n, int k, const float *a, int64_t ars, int64_t acs, const float *b, int64_t brs,
                        int64_t bcs, const float *pre, int accumulate, float *c, int64_t ldc) {
    for (int pc = 0; pc < k; pc += KC) {
        int kc = k - pc < KC ? k - pc : KC, acc = accumulate || pc > 0;
        if (pre) {
            pack_a(m <= MC ? m : MC, kc, a + pc * acs, ars, acs, abuf);
            for (int ic = 0; ic < m; ic += MC) {
                int mc = m - ic < MC ? m - ic : MC;
                if (ic) pack_a(mc, kc, a + ic * ars + pc * acs, ars, acs, abuf);
                for (int jr = 0; jr < n; jr += NR)
                    for (int ir = 0; ir < mc; ir += MR)
                        tile(kc, abuf + ir * kc, pre + (int64_t)pc * round_up(n, NR) + jr * kc,
                             c + (ic + ir) * ldc + jr, ldc, mc - ir < MR ? mc - ir : MR, n - jr < NR ? n - jr : NR,
                             acc);
            }
            continue;
        }
        /* one block of A: each B panel packed just before use; several: all of B's panels first */
        int one = m <= MC;
        if (!one && !skip_pack_b)
            for (int jr = 0; jr < n; jr += NR)
                pack_b(kc, n - jr < NR ? n - jr : NR, b + pc * brs + jr * bcs, brs, bcs, bbuf + jr * kc);
        for (int ic = 0; ic < m; ic += MC) {
            int mc = m - ic < MC ? m - ic : MC;
            pack_a(mc, kc, a + ic * ars + pc * acs, ars, acs, abuf);
            for (int jr = 0; jr < n; jr += NR) {
                int nr = n - jr < NR ? n - jr : NR;
                const float *bp = one ? bbuf : bbuf + jr * kc;
                if (one && !skip_pack_b) pack_b(kc, nr, b + pc * brs + jr * bcs, brs, bcs, bbuf);
                for (int ir = 0; ir < mc; ir += MR)
                    tile(kc, abuf + ir * kc, bp, c + (ic + ir) * ldc + jr, ldc, mc - ir < MR ? mc - ir : MR, nr, acc);
            }
        }
    }
}

static double fma_peak_gflops(void) {
    v8 c[12], a = bcast(1e-9f), b = a;
    for (int i = 0; i < 12; i++) c[i] = bcast(0.0f);
    const long n = 50000000;
    double t = now();
    for (long i = 0; i < n; i++) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; j++) c[j] = c[j] * a + b;
        __asm__ volatile("" : "+x"(a));
    }
    t = now() - t;
    float s = 0;
    for (int i = 0; i < 12; i++) s += c[i][0];
    if (s < 0) printf("%g\n", s); /* keeps the loop */
    return (double)n * 12 * 16 / t * 1e-9;
}

static double kernel_gflops(void) {
    enum { M = 96, N = 512 };
    float *ap = aligned_alloc(64, sizeof(float) * M * KC), *bp = aligned_alloc(64, sizeof(float) * N * KC);
    float *c = aligned_alloc(64, sizeof(float) * M * N);
    for (int i = 0; i < M * KC; i++) ap[i] = 1e-3f;
    for (int i = 0; i < N * KC; i++) bp[i] = 1e-3f;
    memset(c, 0, sizeof(float) * M * N);
    double best = INFINITY;
    for (int rep = 0; rep < 10; rep++) {
        double t = now();
        for (int it = 0; it < 20; it++)
            for (int jr = 0; jr < N; jr += NR)
                for (int ir = 0; ir < M; ir += MR) tile(KC, ap + ir * KC, bp + jr * KC, c + ir * N + jr, N, MR, NR, 1);
        best = fmin(best, now() - t);
    }
    free(ap), free(bp), free(c);
    return 20.0 * 2 * M * N * KC / best * 1e-9;
}

enum { FWD, DX, DW };
static const char *op_name[] = {"forward NT  y = x W^T", "dX NN      dx = dy W", "dW TN     dW += dy^T x"};

/* one product of kind `op`; impl 0 = OpenBLAS, 1 = packed (pre: the weight prepacked for this op, or NULL) */
static void run_op(int op, int impl, int M, int in, int out, const float *w, const float *pre, const float *x,
                   const float *dy, float *y, float *dx, float *dw) {
    if (op == FWD) {
        if (!impl) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
        else packed_gemm(M, out, in, x, in, 1, w, 1, in, pre, 0, y, out);
    } else if (op == DX) {
        if (!impl)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
        else packed_gemm(M, in, out, dy, out, 1, w, in, 1, pre, 0, dx, in);
    } else {
        if (!impl) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, M, 1.0f, dy, out, x, in, 1.0f, dw, in);
        else packed_gemm(out, in, M, dy, 1, out, x, in, 1, NULL, 1, dw, in);
    }
}

static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*s >> 40) & 0xffff) / 65536.0f - 0.5f;
}

int main(int argc, char **argv) {
    tdm_blas_select_core(argv); /* OpenBLAS's kernels for this CPU (kernels/blas_core.c) */
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    openblas_set_num_threads(1);
    bench_print_platform(stdout);
    printf("OpenBLAS %s\n", openblas_get_config());
    int ms[8] = {94, 163}, nm = 2;
    if (argc > 1) {
        nm = 0;
        for (int i = 1; i < argc && nm < 8; i++) {
            ms[nm] = atoi(argv[i]);
            if (ms[nm] < 1 || ms[nm] > 4096) {
                fprintf(stderr, "bench_gemm: M '%s': expected an integer in [1, 4096]\n", argv[i]);
                return 2;
            }
            nm++;
        }
    }
    double peak = fma_peak_gflops(), kern = kernel_gflops();
    printf("FMA peak (registers only): %.1f GFLOP/s; micro-kernel on packed cached operands: %.1f GFLOP/s (%.0f%%)\n",
           peak, kern, 100.0 * kern / peak);
    printf("decoder shapes of bench/peer_torch/configs/small, %d weight sets rotated (cold), best of 3 x 24 calls;\n"
           "GFLOP/s and ratio to OpenBLAS\n\n",
           NW);
    printf("%-24s %5s %5s %5s  %8s  %8s %6s  %8s %6s  %8s %6s  %9s\n", "product", "M", "in", "out", "OpenBLAS",
           "packed", "ratio", "prepack", "ratio", "noPackB", "ratio", "max rel err");
    static const int shapes[][2] = {{512, 512}, {512, 1536}, {1536, 512}, {512, 256}}; /* in, out */
    uint64_t seed = 1;
    for (int mi = 0; mi < nm; mi++) {
        int M = ms[mi];
        for (int s = 0; s < 4; s++) {
            int in = shapes[s][0], out = shapes[s][1], big = in > out ? in : out;
            float *w[NW], *x[NW], *dy[NW], *y = malloc(sizeof(float) * M * big), *dx = malloc(sizeof(float) * M * big);
            float *dw[NW], *ref = malloc(sizeof(float) * (size_t)big * big), *pre[2][NW];
            for (int r = 0; r < NW; r++) {
                w[r] = malloc(sizeof(float) * in * out), dw[r] = calloc((size_t)in * out, sizeof(float));
                x[r] = malloc(sizeof(float) * M * in), dy[r] = malloc(sizeof(float) * M * out);
                for (int i = 0; i < in * out; i++) w[r][i] = frand(&seed);
                for (int i = 0; i < M * in; i++) x[r][i] = frand(&seed);
                for (int i = 0; i < M * out; i++) dy[r][i] = frand(&seed);
                pre[FWD][r] = prepack_b(in, out, w[r], 1, in); /* B = W^T */
                pre[DX][r] = prepack_b(out, in, w[r], in, 1);  /* B = W */
            }
            double flops = 2.0 * M * in * out;
            for (int op = 0; op < 3; op++) {
                /* OpenBLAS, packed, packed from the prepacked weight (cold), packed without B packing */
                double best[4] = {INFINITY, INFINITY, INFINITY, INFINITY};
                for (int rep = 0; rep < 3; rep++)
                    for (int v = 0; v < 4; v++) {
                        if (v == 2 && op == DW) continue; /* dW's weight is C, not B */
                        skip_pack_b = v == 3;
                        double t = now();
                        for (int it = 0; it < 24; it++) {
                            int r = it % NW;
                            run_op(op, v > 0, M, in, out, w[r], v == 2 ? pre[op][r] : NULL, x[r], dy[r], y, dx, dw[r]);
                        }
                        best[v] = fmin(best[v], now() - t);
                    }
                skip_pack_b = 0;
                /* the packed product against OpenBLAS's on weight set 0 (dW: from zero) */
                size_t nc = op == FWD ? (size_t)M * out : op == DX ? (size_t)M * in : (size_t)in * out;
                float *got = op == FWD ? y : op == DX ? dx : dw[0];
                if (op == DW) memset(dw[0], 0, sizeof(float) * nc);
                double err = 0, scale = 0;
                for (int v = 1; v < 3; v++) { /* packed, and packed from the prepacked weight */
                    if (op == DW) memset(dw[0], 0, sizeof(float) * nc);
                    run_op(op, 1, M, in, out, w[0], v == 2 && op != DW ? pre[op][0] : NULL, x[0], dy[0], y, dx, dw[0]);
                    memcpy(ref, got, sizeof(float) * nc);
                    if (op == DW) memset(dw[0], 0, sizeof(float) * nc);
                    run_op(op, 0, M, in, out, w[0], NULL, x[0], dy[0], y, dx, dw[0]);
                    for (size_t i = 0; i < nc; i++)
                        err = fmax(err, fabs(ref[i] - got[i])), scale = fmax(scale, fabs(got[i]));
                }
                double g[4];
                for (int v = 0; v < 4; v++) g[v] = 24 * flops / best[v] * 1e-9;
                char pre_col[32]; /* written whole either way (an initialised array printed garbage past
                                   * its string with gcc 12 -O2 -march=native on an AVX-512 Xeon) */
                if (op != DW) snprintf(pre_col, sizeof pre_col, "%8.1f %5.2fx", g[2], g[2] / g[0]);
                else snprintf(pre_col, sizeof pre_col, "%8s %6s", "-", "-");
                printf("%-24s %5d %5d %5d  %8.1f  %8.1f %5.2fx  %s  %8.1f %5.2fx  %9.1e\n", op_name[op], M, in, out,
                       g[0], g[1], g[1] / g[0], pre_col, g[3], g[3] / g[0], err / scale);
            }
            for (int r = 0; r < NW; r++)
                free(w[r]), free(dw[r]), free(x[r]), free(dy[r]), free(pre[FWD][r]), free(pre[DX][r]);
            free(y), free(dx), free(ref);
        }
    }
    return 0;
}
#else
int main(void) {
    printf("bench_gemm: needs AVX2 and FMA (built without them); nothing measured\n");
    return 0;
}
#endif
