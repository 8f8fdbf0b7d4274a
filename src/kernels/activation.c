/* activation.c - GELU (tanh and erf forms) and fused SwiGLU, forward and backward.
 *
 * The exp-based ones run eight lanes at a time through tdm_v8_exp; the tail of a
 * row goes through the same vector code on a padded copy, so every element is
 * rounded identically. dx may be the same array as dy (elementwise, read first).
 */
#include "kernels/kernels.h"

#include "kernels/vec.h"

#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

/* tanh(u) = 1 - 2 / (e^{2u} + 1): saturates cleanly to +-1 at both ends. */
static inline tdm_v8 v8_tanh(tdm_v8 u) { return 1.0f - 2.0f / (tdm_v8_exp(2.0f * u) + 1.0f); }

/* sqrt(2/pi) (x + a x^3), the argument of tanh */
static inline tdm_v8 gelu_tanh_arg(tdm_v8 x) { return GELU_C * tdm_v8_fma(GELU_A * x * x, x, x); }

static inline tdm_v8 gelu_tanh_fwd8(tdm_v8 x) {
    tdm_v8 t = v8_tanh(gelu_tanh_arg(x));
    return 0.5f * x * (1.0f + t);
}

static inline tdm_v8 gelu_tanh_bwd8(tdm_v8 g, tdm_v8 x) {
    tdm_v8 t = v8_tanh(gelu_tanh_arg(x));
    tdm_v8 dydx = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * GELU_A * x * x);
    return g * dydx;
}

void tdm_gelu_tanh_forward(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) tdm_v8_store(y + i, gelu_tanh_fwd8(tdm_v8_load(x + i)));
    if (i < n) tdm_v8_store_part(y + i, gelu_tanh_fwd8(tdm_v8_load_part(x + i, (int)(n - i), 0.0f)), (int)(n - i));
}

void tdm_gelu_tanh_backward(float *dx, const float *dy, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) tdm_v8_store(dx + i, gelu_tanh_bwd8(tdm_v8_load(dy + i), tdm_v8_load(x + i)));
    if (i < n) {
        int r = (int)(n - i);
        tdm_v8_store_part(dx + i, gelu_tanh_bwd8(tdm_v8_load_part(dy + i, r, 0.0f), tdm_v8_load_part(x + i, r, 0.0f)),
                          r);
    }
}

/* GELU-erf: y = x Phi(x) with Phi(x) = (1 + erf(x / sqrt 2)) / 2; dy/dx = Phi(x) + x phi(x). */
static inline tdm_v8 gelu_erf_fwd8(tdm_v8 x) { return 0.5f * x * (1.0f + tdm_v8_erf(x * 0.70710678118654752f)); }

static inline tdm_v8 gelu_erf_bwd8(tdm_v8 g, tdm_v8 x) {
    tdm_v8 cdf = 0.5f * (1.0f + tdm_v8_erf(x * 0.70710678118654752f));
    tdm_v8 pdf = 0.3989422804014327f * tdm_v8_exp(-0.5f * x * x);
    return g * (cdf + x * pdf);
}

void tdm_gelu_erf_forward(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) tdm_v8_store(y + i, gelu_erf_fwd8(tdm_v8_load(x + i)));
    if (i < n) tdm_v8_store_part(y + i, gelu_erf_fwd8(tdm_v8_load_part(x + i, (int)(n - i), 0.0f)), (int)(n - i));
}

void tdm_gelu_erf_backward(float *dx, const float *dy, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) tdm_v8_store(dx + i, gelu_erf_bwd8(tdm_v8_load(dy + i), tdm_v8_load(x + i)));
    if (i < n) {
        int r = (int)(n - i);
        tdm_v8_store_part(dx + i, gelu_erf_bwd8(tdm_v8_load_part(dy + i, r, 0.0f), tdm_v8_load_part(x + i, r, 0.0f)),
                          r);
    }
}

/* silu(a) = a s with s = sigmoid(a) = 1 / (1 + e^-a) */
static inline tdm_v8 v8_sigmoid(tdm_v8 a) { return 1.0f / (1.0f + tdm_v8_exp(-a)); }

void tdm_swiglu_forward(float *out, const float *gate, const float *up, int n, int d) {
    int64_t total = (int64_t)n * d, i = 0;
    for (; i + 8 <= total; i += 8) {
        tdm_v8 a = tdm_v8_load(gate + i);
        tdm_v8_store(out + i, a * v8_sigmoid(a) * tdm_v8_load(up + i));
    }
    if (i < total) {
        int r = (int)(total - i);
        tdm_v8 a = tdm_v8_load_part(gate + i, r, 0.0f);
        tdm_v8_store_part(out + i, a * v8_sigmoid(a) * tdm_v8_load_part(up + i, r, 0.0f), r);
    }
}

/* silu'(a) = s (1 + a (1 - s)) */
static inline void swiglu_bwd8(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int r) {
    tdm_v8 g, a, b;
    if (r == 8) {
        g = tdm_v8_load(dout), a = tdm_v8_load(gate), b = tdm_v8_load(up);
    } else {
        g = tdm_v8_load_part(dout, r, 0.0f), a = tdm_v8_load_part(gate, r, 0.0f), b = tdm_v8_load_part(up, r, 0.0f);
    }
    tdm_v8 s = v8_sigmoid(a);
    tdm_v8 dg = g * b * s * (1.0f + a * (1.0f - s));
    tdm_v8 du = g * a * s;
    if (r == 8) {
        if (dgate) tdm_v8_store(dgate, dg);
        if (dup) tdm_v8_store(dup, du);
    } else {
        if (dgate) tdm_v8_store_part(dgate, dg, r);
        if (dup) tdm_v8_store_part(dup, du, r);
    }
}

void tdm_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int n,
                         int d) {
    int64_t total = (int64_t)n * d, i = 0;
    for (; i + 8 <= total; i += 8)
        swiglu_bwd8(dgate ? dgate + i : NULL, dup ? dup + i : NULL, dout + i, gate + i, up + i, 8);
    if (i < total)
        swiglu_bwd8(dgate ? dgate + i : NULL, dup ? dup + i : NULL, dout + i, gate + i, up + i, (int)(total - i));
}
