/* tile_matmul.c - see tile_matmul.h. */
#include "kernels/tile_matmul.h"

#include <math.h>

#include "kernels/vec.h"

/* One block of R rows (R <= 6) by 8*NV columns (NV = 1 or 2). R and NV are constants at
 * every call site, so after inlining the loops unroll and c[][] lives in registers
 * (the pragmas ask GCC for the unrolling it skips at -O2). */
static inline __attribute__((always_inline)) void block(int R, int NV, int k, float alpha, const float *a,
                                                        int64_t a_row, int64_t a_col, const float *b, int64_t ldb,
                                                        int accumulate, float *c, int64_t ldc) {
    tdm_v8 acc[6][2];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) acc[r][v] = tdm_v8_set1(0.0f);
    for (int kk = 0; kk < k; kk++) {
        tdm_v8 bv[2];
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) bv[v] = tdm_v8_load(b + kk * ldb + 8 * v);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            tdm_v8 av = tdm_v8_set1(a[r * a_row + kk * a_col]);
#pragma GCC unroll 2
            for (int v = 0; v < NV; v++) acc[r][v] = tdm_v8_fma(av, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) {
            float *cp = c + r * ldc + 8 * v;
            tdm_v8 t = acc[r][v] * alpha;
            if (accumulate) t += tdm_v8_load(cp);
            tdm_v8_store(cp, t);
        }
}

#define BLOCK(R, NV)                                                                                                   \
    block(R, NV, k, alpha, a + i0 * a_row, a_row, a_col, b + j0, ldb, accumulate, c + i0 * ldc + j0, ldc)

/* All R = 1..6 for one NV, so every combination is compiled with constant sizes. */
#define ROW_BLOCKS(NV)                                                                                                 \
    for (int i0 = 0; i0 < m; i0 += 6) {                                                                                \
        switch (m - i0 < 6 ? m - i0 : 6) {                                                                             \
        case 6: BLOCK(6, NV); break;                                                                                   \
        case 5: BLOCK(5, NV); break;                                                                                   \
        case 4: BLOCK(4, NV); break;                                                                                   \
        case 3: BLOCK(3, NV); break;                                                                                   \
        case 2: BLOCK(2, NV); break;                                                                                   \
        default: BLOCK(1, NV); break;                                                                                  \
        }                                                                                                              \
    }

void tdm_tile_matmul(int m, int n, int k, float alpha, const float *a, int64_t a_row, int64_t a_col, const float *b,
                     int64_t ldb, int accumulate, float *c, int64_t ldc) {
    /* Column panels outermost: a k x 16 panel of B stays in L1 while every row block
     * of A streams past it. */
    int j0 = 0;
    for (; j0 + 16 <= n; j0 += 16) ROW_BLOCKS(2)
    for (; j0 + 8 <= n; j0 += 8) ROW_BLOCKS(1)
    for (; j0 < n; j0++)
        for (int i = 0; i < m; i++) {
            float s = 0.0f;
            /* the vector path's operations, one lane of them */
            for (int kk = 0; kk < k; kk++) s = fmaf(a[i * a_row + kk * a_col], b[kk * ldb + j0], s);
            float t = s * alpha;
            c[i * ldc + j0] = accumulate ? t + c[i * ldc + j0] : t;
        }
}
