/* stats.c - means, medians and the bootstrap interval of a relative change. */
#include "train/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/rng.h"

double tdm_stats_mean(const double *x, int64_t n) {
    if (n <= 0) return NAN;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    return s / (double)n;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double tdm_stats_quantile_sorted(const double *s, int64_t n, double q) {
    if (n <= 0) return NAN;
    double pos = q * (double)(n - 1);
    int64_t i = (int64_t)floor(pos);
    if (i >= n - 1) return s[n - 1];
    if (i < 0) return s[0];
    double f = pos - (double)i;
    return s[i] + f * (s[i + 1] - s[i]);
}

double tdm_stats_median(const double *x, int64_t n) {
    if (n <= 0) return NAN;
    double *c = tdm_xmalloc((size_t)n * sizeof *c);
    memcpy(c, x, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double m = tdm_stats_quantile_sorted(c, n, 0.5);
    free(c);
    return m;
}

double tdm_stats_stddev(const double *x, int64_t n) {
    if (n < 2) return NAN;
    double m = tdm_stats_mean(x, n), s = 0;
    for (int64_t i = 0; i < n; i++) s += (x[i] - m) * (x[i] - m);
    return sqrt(s / (double)(n - 1));
}

double tdm_stats_rel_change_pct(double baseline, double candidate) {
    return 100.0 * (candidate - baseline) / baseline;
}

/* The mean of n draws with replacement from x; draw k uses generator index base + k. */
static double resample_mean(const double *x, int64_t n, uint64_t seed, uint64_t stream, uint64_t base) {
    double s = 0;
    for (int64_t k = 0; k < n; k++) s += x[tdm_rng_u64(seed, stream, base + (uint64_t)k) % (uint64_t)n];
    return s / (double)n;
}

int tdm_stats_bootstrap_rel_change(const double *a, int64_t na, const double *b, int64_t nb, int resamples,
                                   uint64_t seed, tdm_stats_ci *ci) {
    memset(ci, 0, sizeof *ci);
    double ma = tdm_stats_mean(a, na), mb = tdm_stats_mean(b, nb);
    if (na <= 0 || nb <= 0 || !(ma > 0) || resamples < 10) return -1;
    ci->change_pct = tdm_stats_rel_change_pct(ma, mb);
    ci->resamples = resamples;
    double *r = tdm_xmalloc((size_t)resamples * sizeof *r);
    uint64_t sa = tdm_rng_stream_of("bootstrap baseline"), sb = tdm_rng_stream_of("bootstrap candidate");
    for (int i = 0; i < resamples; i++) {
        double xa = resample_mean(a, na, seed, sa, (uint64_t)i * (uint64_t)na);
        double xb = resample_mean(b, nb, seed, sb, (uint64_t)i * (uint64_t)nb);
        r[i] = tdm_stats_rel_change_pct(xa, xb);
    }
    qsort(r, (size_t)resamples, sizeof *r, cmp_double);
    ci->lo_pct = tdm_stats_quantile_sorted(r, resamples, 0.025);
    ci->hi_pct = tdm_stats_quantile_sorted(r, resamples, 0.975);
    free(r);
    return 0;
}

void tdm_stats_noise_sentence(const tdm_stats_ci *ci, const char *what, char *out, size_t cap) {
    if (ci->lo_pct <= 0 && ci->hi_pct >= 0)
        snprintf(out, cap,
                 "The difference is inside the noise: the 95%% interval of the change in %s [%+.2f%%, %+.2f%%] "
                 "contains 0; repeat with more steps or repeats before drawing a conclusion.",
                 what, ci->lo_pct, ci->hi_pct);
    else
        snprintf(out, cap, "The %s is %s by %.2f%% (95%% interval [%+.2f%%, %+.2f%%]); the interval excludes 0.", what,
                 ci->change_pct < 0 ? "lower" : "higher", fabs(ci->change_pct), ci->lo_pct, ci->hi_pct);
}
