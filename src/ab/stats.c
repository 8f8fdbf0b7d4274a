/* stats.c - means, medians and the bootstrap interval of a relative change. */
#include "ab/stats.h"

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

double tdm_stats_rel_change_pct(double baseline, double candidate) { return 100.0 * (candidate - baseline) / baseline; }

int tdm_stats_auto_block(int64_t n) {
    int b = (int)ceil(cbrt((double)n) - 1e-9);
    if (b > n / 2) b = (int)(n / 2); /* at least two block positions in a run of two or more */
    return b < 1 ? 1 : b;
}

/* The sum of one resample of the runs x (run r: len[r] values): each run rebuilt from blocks of `block`
 * consecutive values (or tdm_stats_auto_block's); draw k of this resample uses generator index *ctr + k.
 * With block 1 a block is one value drawn uniformly from its run. */
static double resample_sum(const double *x, const int64_t *len, int runs, int block, uint64_t seed, uint64_t stream,
                           uint64_t *ctr) {
    double s = 0;
    const double *run = x;
    for (int r = 0; r < runs; run += len[r], r++) {
        int64_t n = len[r], L = block > 0 ? block : tdm_stats_auto_block(n);
        if (n <= 0) continue;
        if (L > n) L = n;
        uint64_t starts = (uint64_t)(n - L + 1);
        for (int64_t filled = 0; filled < n;) {
            int64_t st = (int64_t)(tdm_rng_u64(seed, stream, (*ctr)++) % starts);
            for (int64_t j = 0; j < L && filled < n; j++, filled++) s += run[st + j];
        }
    }
    return s;
}

static int64_t total_len(const int64_t *len, int runs) {
    int64_t n = 0;
    for (int r = 0; r < runs; r++) {
        if (len[r] < 0) return -1;
        n += len[r];
    }
    return n;
}

/* Whether some run has two or more places a block can start: otherwise every resample equals the data
 * and the "interval" would be a point that claims a certainty nothing measured. */
static int can_vary(const int64_t *len, int runs, int block) {
    for (int r = 0; r < runs; r++) {
        int64_t L = block > 0 ? block : tdm_stats_auto_block(len[r]);
        if (len[r] - L + 1 >= 2) return 1;
    }
    return 0;
}

/* paired: b's resamples reuse a's generator stream and indices, i.e. the same blocks */
static int block_bootstrap(const double *a, const int64_t *a_run_len, int a_runs, const double *b,
                           const int64_t *b_run_len, int b_runs, int paired, int block, int resamples, uint64_t seed,
                           tdm_stats_ci *ci) {
    memset(ci, 0, sizeof *ci);
    int64_t na = total_len(a_run_len, a_runs), nb = total_len(b_run_len, b_runs);
    if (na <= 0 || nb <= 0 || resamples < 10) return -1;
    if (!can_vary(a_run_len, a_runs, block) || !can_vary(b_run_len, b_runs, block)) return -1;
    double ma = tdm_stats_mean(a, na), mb = tdm_stats_mean(b, nb);
    if (!(ma > 0)) return -1;
    ci->change_pct = tdm_stats_rel_change_pct(ma, mb);
    ci->resamples = resamples;
    double *r = tdm_xmalloc((size_t)resamples * sizeof *r);
    uint64_t sa = tdm_rng_stream_of("bootstrap baseline");
    uint64_t sb = paired ? sa : tdm_rng_stream_of("bootstrap candidate");
    for (int i = 0; i < resamples; i++) {
        /* resample i starts at index i * n: with blocks of 1 it draws exactly n values */
        uint64_t ca = (uint64_t)i * (uint64_t)na, cb = paired ? ca : (uint64_t)i * (uint64_t)nb;
        double xa = resample_sum(a, a_run_len, a_runs, block, seed, sa, &ca) / (double)na;
        double xb = resample_sum(b, b_run_len, b_runs, block, seed, sb, &cb) / (double)nb;
        r[i] = tdm_stats_rel_change_pct(xa, xb);
    }
    qsort(r, (size_t)resamples, sizeof *r, cmp_double);
    ci->lo_pct = tdm_stats_quantile_sorted(r, resamples, 0.025);
    ci->hi_pct = tdm_stats_quantile_sorted(r, resamples, 0.975);
    free(r);
    return 0;
}

int tdm_stats_block_bootstrap_rel_change(const double *a, const int64_t *a_run_len, int a_runs, const double *b,
                                         const int64_t *b_run_len, int b_runs, int block, int resamples, uint64_t seed,
                                         tdm_stats_ci *ci) {
    return block_bootstrap(a, a_run_len, a_runs, b, b_run_len, b_runs, 0, block, resamples, seed, ci);
}

int tdm_stats_paired_block_bootstrap_rel_change(const double *a, const double *b, const int64_t *run_len, int runs,
                                                int block, int resamples, uint64_t seed, tdm_stats_ci *ci) {
    return block_bootstrap(a, run_len, runs, b, run_len, runs, 1, block, resamples, seed, ci);
}

int tdm_stats_bootstrap_rel_change(const double *a, int64_t na, const double *b, int64_t nb, int resamples,
                                   uint64_t seed, tdm_stats_ci *ci) {
    if (na <= 0 || nb <= 0) {
        memset(ci, 0, sizeof *ci);
        return -1;
    }
    return tdm_stats_block_bootstrap_rel_change(a, &na, 1, b, &nb, 1, 1, resamples, seed, ci);
}

double tdm_stats_t975(int df) {
    static const double table[31] = {NAN,   12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                     2.201, 2.179,  2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080,
                                     2.074, 2.069,  2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
    if (df < 1) return NAN;
    if (df <= 30) return table[df];
    const double z = 1.959963984540054, n = (double)df; /* the normal quantile, then the 1/n and 1/n^2 terms */
    const double z3 = z * z * z, z5 = z3 * z * z;
    return z + (z3 + z) / (4 * n) + (5 * z5 + 16 * z3 + 3 * z) / (96 * n * n);
}

int tdm_stats_paired_runs_rel_change(const double *a, const double *b, int n, tdm_stats_ci *ci) {
    if (n < 2) return -1;
    double sum = 0;
    for (int r = 0; r < n; r++) {
        if (!(a[r] > 0) || !isfinite(a[r]) || !isfinite(b[r])) return -1;
        sum += 100.0 * (b[r] / a[r] - 1.0);
    }
    double mean = sum / n, ss = 0;
    for (int r = 0; r < n; r++) {
        double d = 100.0 * (b[r] / a[r] - 1.0) - mean;
        ss += d * d;
    }
    double half = tdm_stats_t975(n - 1) * sqrt(ss / (n - 1)) / sqrt((double)n);
    ci->change_pct = mean;
    ci->lo_pct = mean - half;
    ci->hi_pct = mean + half;
    ci->resamples = 0;
    return 0;
}

void tdm_stats_noise_sentence(const tdm_stats_ci *ci, const char *what, char *out, size_t cap) {
    if (tdm_stats_ci_contains_zero(ci))
        snprintf(out, cap,
                 "The difference is inside the noise: the 95%% interval of the change in %s [%+.2f%%, %+.2f%%] "
                 "contains 0; repeat with more steps or repeats before drawing a conclusion.",
                 what, ci->lo_pct, ci->hi_pct);
    else
        snprintf(out, cap, "The %s is %s by %.2f%% (95%% interval [%+.2f%%, %+.2f%%]); the interval excludes 0.", what,
                 ci->change_pct < 0 ? "lower" : "higher", fabs(ci->change_pct), ci->lo_pct, ci->hi_pct);
}
