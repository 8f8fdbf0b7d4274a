/* vec.h - eight-lane float vectors for the kernels (internal to src/kernels).
 *
 * GCC 12 at -O2 uses the "very cheap" vectoriser, which leaves loops with a runtime
 * trip count and any loop that calls expf scalar. The hot elementwise loops are
 * therefore written with GCC/Clang vector extensions: plain C arithmetic on an
 * 8 x float type that compiles to one AVX register here (and to pairs of SSE
 * registers, or scalars, elsewhere), with no ISA-specific intrinsics.
 *
 * Rounding is fixed by the source, not by the target: the build turns floating-point
 * contraction off (Makefile), so a * b + c is two roundings everywhere, and a fused
 * multiply-add is written as tdm_v8_fma where one is wanted. With contraction left to
 * the compiler, whether a product fused depended on the target's tuning and on the
 * shape of the surrounding loop, so the same row of a product could round differently
 * in two call sites, or in the same call site on two processors.
 *
 * tdm_v8_exp is our own exp: round x/ln2 to an integer k, reduce r = x - k ln2 with a
 * two-part ln2, evaluate the degree-6 Taylor polynomial of e^r on |r| <= ln2/2
 * (truncation error r^7/7! < 1.3e-7 relative) and scale by 2^k through the exponent
 * bits. Results agree with expf to about 2 ulp for x in [-86, 88]; below -86 it
 * returns 0 (true value < 5e-38) and above 88 it returns e^88.
 */
#ifndef TDM_KERNELS_VEC_H
#define TDM_KERNELS_VEC_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__AVX__) || defined(__FMA__)
#include <immintrin.h>
#endif

typedef float tdm_v8 __attribute__((vector_size(32)));
typedef int32_t tdm_v8i __attribute__((vector_size(32)));
typedef uint32_t tdm_v8u __attribute__((vector_size(32)));

static inline tdm_v8 tdm_v8_set1(float a) { return (tdm_v8){a, a, a, a, a, a, a, a}; }

static inline tdm_v8 tdm_v8_load(const float *p) {
    tdm_v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void tdm_v8_store(float *p, tdm_v8 v) { memcpy(p, &v, sizeof v); }

/* The first n (< 8) floats of p, the other lanes set to `fill`. */
static inline tdm_v8 tdm_v8_load_part(const float *p, int n, float fill) {
    float t[8];
    for (int i = 0; i < 8; i++) t[i] = i < n ? p[i] : fill;
    return tdm_v8_load(t);
}

static inline void tdm_v8_store_part(float *p, tdm_v8 v, int n) {
    float t[8];
    tdm_v8_store(t, v);
    for (int i = 0; i < n; i++) p[i] = t[i];
}

/* a * b + c with one rounding in every lane: the FMA instruction where the target has
 * it, else the C library's correctly rounded fmaf (slow, but the same result), so that
 * a build for any x86-64 level computes the same bits. */
static inline tdm_v8 tdm_v8_fma(tdm_v8 a, tdm_v8 b, tdm_v8 c) {
#if defined(__FMA__)
    return (tdm_v8)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
    for (int i = 0; i < 8; i++) c[i] = fmaf(a[i], b[i], c[i]);
    return c;
#endif
}

static inline float tdm_v8_sum(tdm_v8 v) { return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7])); }

/* Lane-wise select: mask lanes are all-ones (take a) or zero (take b). */
static inline tdm_v8 tdm_v8_select(tdm_v8i mask, tdm_v8 a, tdm_v8 b) {
    return (tdm_v8)(((tdm_v8i)a & mask) | ((tdm_v8i)b & ~mask));
}

static inline tdm_v8 tdm_v8_max(tdm_v8 a, tdm_v8 b) { return tdm_v8_select(a > b, a, b); }

static inline float tdm_v8_hmax(tdm_v8 v) {
    float m = v[0];
    for (int i = 1; i < 8; i++) m = v[i] > m ? v[i] : m;
    return m;
}

static inline tdm_v8 tdm_v8_exp(tdm_v8 x) {
    const tdm_v8 lo = tdm_v8_set1(-86.0f), hi = tdm_v8_set1(88.0f);
    const tdm_v8 shifter = tdm_v8_set1(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
    tdm_v8i underflow = x < lo;
    tdm_v8 xc = tdm_v8_select(underflow, lo, x);
    xc = tdm_v8_select(xc > hi, hi, xc);
    tdm_v8 t = xc * 1.44269504088896341f + shifter;
    tdm_v8 kf = t - shifter;
    tdm_v8i k = (tdm_v8i)t - (tdm_v8i)shifter;                   /* the integer in the low mantissa bits */
    tdm_v8 r = xc - kf * 0.693145751953125f;                     /* ln2 high part: exact product for |k| < 2^11 */
    r = tdm_v8_fma(-kf, tdm_v8_set1(1.428606765330187e-06f), r); /* ln2 low part */
    tdm_v8 p = tdm_v8_set1(1.0f / 720.0f);
    p = tdm_v8_fma(p, r, tdm_v8_set1(1.0f / 120.0f));
    p = tdm_v8_fma(p, r, tdm_v8_set1(1.0f / 24.0f));
    p = tdm_v8_fma(p, r, tdm_v8_set1(1.0f / 6.0f));
    p = tdm_v8_fma(p, r, tdm_v8_set1(0.5f));
    p = tdm_v8_fma(p, r, tdm_v8_set1(1.0f));
    p = tdm_v8_fma(p, r, tdm_v8_set1(1.0f));
    tdm_v8i bits = (tdm_v8i)p + (tdm_v8i)((tdm_v8u)k << 23); /* unsigned: k may be negative */
    return (tdm_v8)(bits & ~underflow);
}

/* Correctly rounded square root (the same result as sqrtf in every lane). */
static inline tdm_v8 tdm_v8_sqrt(tdm_v8 x) {
#if defined(__AVX__)
    return (tdm_v8)_mm256_sqrt_ps((__m256)x);
#else
    for (int i = 0; i < 8; i++) x[i] = sqrtf(x[i]);
    return x;
#endif
}

/* erf by Abramowitz and Stegun 7.1.26: for a = |x|, t = 1 / (1 + p a),
 * erf(a) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^{-a^2}, absolute error
 * below 1.5e-7 (about one float ulp of 1), odd in x. Enough for GELU, where erf is
 * added to 1; not a general-purpose erf near 0. */
static inline tdm_v8 tdm_v8_erf(tdm_v8 x) {
    const tdm_v8i sign_bit = (tdm_v8i){0, 0, 0, 0, 0, 0, 0, 0} | (int32_t)0x80000000;
    tdm_v8i sign = (tdm_v8i)x & sign_bit;
    tdm_v8 a = (tdm_v8)((tdm_v8i)x & ~sign_bit);
    tdm_v8 t = 1.0f / tdm_v8_fma(tdm_v8_set1(0.3275911f), a, tdm_v8_set1(1.0f));
    tdm_v8 poly = tdm_v8_fma(t, tdm_v8_set1(1.061405429f), tdm_v8_set1(-1.453152027f));
    poly = tdm_v8_fma(t, poly, tdm_v8_set1(1.421413741f));
    poly = tdm_v8_fma(t, poly, tdm_v8_set1(-0.284496736f));
    poly = tdm_v8_fma(t, poly, tdm_v8_set1(0.254829592f));
    tdm_v8 y = tdm_v8_fma(-(t * poly), tdm_v8_exp(-a * a), tdm_v8_set1(1.0f));
    return (tdm_v8)((tdm_v8i)y | sign);
}

/* Scalar exp with the same rounding as tdm_v8_exp, for tails that must match. */
static inline float tdm_expf(float x) { return tdm_v8_exp(tdm_v8_set1(x))[0]; }

#endif
