/* kcheck.h - helpers shared by the kernel tests: random inputs, NaN poisoning, the
 * normalised error used by every comparison, and central finite differences in double.
 *
 * Error measure: err(a, b) = max_i |a_i - b_i| / max(1, max_i |b_i|), where b is the
 * double-precision reference. A NaN anywhere in a (an element the kernel never wrote,
 * since outputs are filled with NaN before each call) makes err infinite.
 */
#ifndef TDM_TESTS_KCHECK_H
#define TDM_TESTS_KCHECK_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t kc_state = 0x9e3779b97f4a7c15ull;

/* uniform in [-1, 1) (splitmix64) */
static inline double kc_uniform(void) {
    uint64_t z = (kc_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static inline float *kc_randf(int64_t n, double scale) {
    float *a = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) a[i] = (float)(scale * kc_uniform());
    return a;
}

static inline float *kc_nanf(int64_t n) {
    float *a = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) a[i] = NAN;
    return a;
}

static inline float *kc_zerof(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

static inline double *kc_todouble(const float *a, int64_t n) {
    double *d = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) d[i] = a[i];
    return d;
}

static inline double *kc_zerod(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }

/* max|a - k b| / max(1, max|k b|) for a float result against k times a double reference */
static inline double kc_err_scaled(const float *a, const double *b, int64_t n, double k) {
    double md = 0.0, mb = 1.0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        double d = fabs((double)a[i] - k * b[i]);
        if (d > md) md = d;
        if (fabs(k * b[i]) > mb) mb = fabs(k * b[i]);
    }
    return md / mb;
}

static inline double kc_err(const float *a, const double *b, int64_t n) { return kc_err_scaled(a, b, n, 1.0); }

/* max|a - b| / max|b|: for small-valued arrays (optimizer moments) where the floor of 1 hides errors */
static inline double kc_relerr(const float *a, const double *b, int64_t n) {
    double md = 0.0, mb = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        double d = fabs((double)a[i] - b[i]);
        if (d > md) md = d;
        if (fabs(b[i]) > mb) mb = fabs(b[i]);
    }
    return md / mb;
}

/* A scalar loss of double inputs, evaluated by a test's double reference. */
typedef double (*kc_loss_fn)(void *ctx);

/* grad[i] = (L(x + h e_i) - L(x - h e_i)) / 2h for every element of x (in place, restored). */
static inline void kc_fd_grad(double *grad, double *x, int64_t n, kc_loss_fn loss, void *ctx) {
    const double h = 1e-5;
    for (int64_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + h;
        double lp = loss(ctx);
        x[i] = x0 - h;
        double lm = loss(ctx);
        x[i] = x0;
        grad[i] = (lp - lm) / (2.0 * h);
    }
}

#endif
