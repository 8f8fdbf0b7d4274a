/* tile_matmul.h - the small matrix product inside flash attention (internal to src/kernels).
 *
 * Attention multiplies tiles of at most a few hundred rows by a head dimension of
 * 16..128. At those sizes cblas_sgemm spends a large share of its time packing its
 * operands and zeroing its output; this product does neither. It keeps a 6 x 16 block
 * of C in twelve vector registers and streams A as broadcast scalars and B as rows,
 * which reaches 80-90% of the sgemm ceiling on tiles of 128 x 128 x 64 (bench/).
 */
#ifndef TDM_KERNELS_TILE_MATMUL_H
#define TDM_KERNELS_TILE_MATMUL_H

#include <stdint.h>

/* C[m,n] = alpha A B (accumulate = 0) or C[m,n] += alpha A B (accumulate = 1), where
 *   A(i,k) = a[i*a_row + k*a_col]   (any strides: a_row = 1, a_col = lda reads A^T),
 *   B(k,j) = b[k*ldb + j]           (row-major, rows may be strided),
 *   C(i,j) = c[i*ldc + j].
 * Columns past the last multiple of 8 take a scalar path: pad n to a multiple of 8
 * where the caller can. */
void tdm_tile_matmul(int m, int n, int k, float alpha, const float *a, int64_t a_row, int64_t a_col, const float *b,
                     int64_t ldb, int accumulate, float *c, int64_t ldc);

#endif
