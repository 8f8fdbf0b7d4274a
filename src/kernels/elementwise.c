/* elementwise.c - plain elementwise array arithmetic (residual adds, bfloat16 rounding). */
#include "kernels/kernels.h"

#include <string.h>

#include "kernels/vec.h"

/* GCC 12 at -O2 leaves a plain `y[i] += x[i]` loop with a runtime length scalar (vec.h);
 * eight lanes at a time it is the same additions, so the same bits. */
void tdm_add_into(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        tdm_v8 a = tdm_v8_load(y + i) + tdm_v8_load(x + i), b = tdm_v8_load(y + i + 8) + tdm_v8_load(x + i + 8);
        tdm_v8_store(y + i, a);
        tdm_v8_store(y + i + 8, b);
    }
    for (; i + 8 <= n; i += 8) tdm_v8_store(y + i, tdm_v8_load(y + i) + tdm_v8_load(x + i));
    for (; i < n; i++) y[i] += x[i];
}

typedef uint16_t v8u16 __attribute__((vector_size(16))); /* eight bfloat16 bit patterns */

/* The bfloat16 of x is the upper half of its fp32 bits once the lower half is rounded into it:
 * adding 0x7fff, plus 1 when the kept part is odd, carries exactly when the dropped half is above
 * one half of the last kept bit, or equal to it with an odd kept part (ties to even); a carry out
 * of the largest finite value reaches the infinity pattern. A NaN keeps its upper half, made quiet. */
static inline tdm_v8u round8(tdm_v8u u) {
    const tdm_v8u nan_bits = (u | 0x00400000u) & 0xffff0000u;
    const tdm_v8u num_bits = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    const tdm_v8u is_nan = (tdm_v8u)((u & 0x7fffffffu) > 0x7f800000u); /* all-ones lanes */
    return (nan_bits & is_nan) | (num_bits & ~is_nan);
}

/* Rounds the m <= 8 values at x into y and bits (either may be NULL). Inlined with m = 8 for the
 * body, so that the copies are single vector moves; the tail goes through the same lanes, zero-padded. */
static inline void round_some(float *y, uint16_t *bits, const float *x, int m) {
    tdm_v8u u = {0};
    memcpy(&u, x, (size_t)m * 4);
    u = round8(u);
    if (bits) {
        const v8u16 h = __builtin_convertvector(u >> 16, v8u16);
        memcpy(bits, &h, (size_t)m * 2);
    }
    if (y) memcpy(y, &u, (size_t)m * 4);
}

/* Eight lanes at a time, the NaN case as a lane select. GCC 12 at -O2 leaves an element-at-a-time
 * loop scalar (vec.h), and the optimizer rounds every owned element once per step. */
void tdm_round_to_bf16(float *y, uint16_t *bits, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) round_some(y ? y + i : NULL, bits ? bits + i : NULL, x + i, 8);
    if (i < n) round_some(y ? y + i : NULL, bits ? bits + i : NULL, x + i, (int)(n - i));
}

/* A bfloat16 is the upper half of its fp32: widening is a shift. Eight lanes at a time, for the
 * same reason as above; this runs on every parameter after each 16-bit all-gather, and on every
 * BF16 tensor read from a file. */
void tdm_widen_bf16(float *y, const uint16_t *bits, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8u16 h;
        memcpy(&h, bits + i, sizeof h);
        const tdm_v8u u = __builtin_convertvector(h, tdm_v8u) << 16;
        memcpy(y + i, &u, sizeof u);
    }
    for (; i < n; i++) {
        const uint32_t u = (uint32_t)bits[i] << 16;
        memcpy(&y[i], &u, 4);
    }
}
