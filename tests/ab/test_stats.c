/* Unit tests for src/ab/stats.c: exact values on small inputs, a deterministic
 * bootstrap whose interval covers the true change on synthetic data (the data are
 * drawn from known distributions with core/rng.h), and the noise sentence. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "harness.h"
#include "ab/stats.h"

static void test_basic(void) {
    double x[] = {3, 1, 2, 10};
    CHECK_NEAR(tdm_stats_mean(x, 4), 4.0, 1e-12);
    CHECK_NEAR(tdm_stats_median(x, 4), 2.5, 1e-12);
    CHECK(x[0] == 3 && x[3] == 10, "median leaves the input alone");
    CHECK_NEAR(tdm_stats_median(x, 3), 2.0, 1e-12);
    CHECK(isnan(tdm_stats_mean(x, 0)) && isnan(tdm_stats_median(x, 0)), "empty is NaN");
    double s[] = {1, 2, 3, 4, 5};
    CHECK_NEAR(tdm_stats_quantile_sorted(s, 5, 0.25), 2.0, 1e-12);
    CHECK_NEAR(tdm_stats_quantile_sorted(s, 5, 0.1), 1.4, 1e-12);
    CHECK_NEAR(tdm_stats_stddev(s, 5), sqrt(2.5), 1e-12);
    CHECK_NEAR(tdm_stats_rel_change_pct(100, 90.76), -9.24, 1e-9);
}

/* n step times around `mean` with relative noise `rel` (normal). */
static void synth(double *x, int n, double mean, double rel, uint64_t stream) {
    for (int i = 0; i < n; i++) x[i] = mean * (1.0 + rel * tdm_rng_normal(99, stream, (uint64_t)i));
}

static void test_bootstrap_covers_truth(void) {
    enum { N = 180 };
    double a[N], b[N];
    int covered = 0, trials = 20;
    for (int t = 0; t < trials; t++) {
        synth(a, N, 100.0, 0.05, 2 * (uint64_t)t);
        synth(b, N, 90.0, 0.05, 2 * (uint64_t)t + 1); /* true change -10% */
        tdm_stats_ci ci;
        CHECK(tdm_stats_bootstrap_rel_change(a, N, b, N, 1000, 7, &ci) == 0, "bootstrap");
        CHECK(ci.lo_pct <= ci.change_pct && ci.change_pct <= ci.hi_pct, "point inside its interval");
        CHECK(ci.hi_pct - ci.lo_pct < 3.0, "width %.2f%% for 5%% noise over 180 steps", ci.hi_pct - ci.lo_pct);
        if (ci.lo_pct <= -10.0 && -10.0 <= ci.hi_pct) covered++;
    }
    /* nominal 95%: 20 trials missing more than 4 times has probability < 2% */
    CHECK(covered >= 16, "covered the true -10%% in %d of %d trials", covered, trials);
}

static void test_bootstrap_deterministic(void) {
    double a[50], b[50];
    synth(a, 50, 10, 0.1, 100);
    synth(b, 50, 10, 0.1, 101);
    tdm_stats_ci c1, c2, c3;
    tdm_stats_bootstrap_rel_change(a, 50, b, 50, 500, 1, &c1);
    tdm_stats_bootstrap_rel_change(a, 50, b, 50, 500, 1, &c2);
    tdm_stats_bootstrap_rel_change(a, 50, b, 50, 500, 2, &c3);
    CHECK(c1.lo_pct == c2.lo_pct && c1.hi_pct == c2.hi_pct, "same seed, same interval");
    CHECK(c1.lo_pct != c3.lo_pct || c1.hi_pct != c3.hi_pct, "another seed, another interval");
    CHECK(tdm_stats_bootstrap_rel_change(a, 0, b, 50, 500, 1, &c1) != 0, "empty side refused");
    double z[3] = {0, 0, 0};
    CHECK(tdm_stats_bootstrap_rel_change(z, 3, b, 50, 500, 1, &c1) != 0, "zero baseline refused");
}

/* Step times with a slow-period component: per run, an AR(1) series around the mean (lag-1 correlation phi,
 * variance 1, started from its stationary distribution), the way a noisy machine slows several steps in a
 * row. Real A/B runs of this project show phi 0.18 (median) to 0.40 (upper quartile) over 174 runs. */
static void synth_ar1(double *x, int n, double mean, double rel, double phi, uint64_t stream) {
    double e = tdm_rng_normal(77, stream, 1000000);
    for (int i = 0; i < n; i++) {
        if (i) e = phi * e + sqrt(1 - phi * phi) * tdm_rng_normal(77, stream, (uint64_t)i);
        x[i] = mean * (1.0 + rel * e);
    }
}

/* The plain bootstrap treats autocorrelated steps as independent and its interval is too narrow; the
 * block bootstrap's must cover the truth far more often. Both sides have the same mean (true change 0),
 * 2 runs of 20 steps each (the link bench's protocol), phi = 0.5. The data and the resamples are
 * deterministic, so the counts are fixed numbers. */
static void test_block_bootstrap_coverage(void) {
    enum { RUNS = 2, STEPS = 20, N = RUNS * STEPS, TRIALS = 200 };
    int64_t len[RUNS] = {STEPS, STEPS};
    int iid = 0, blk = 0;
    double w_iid = 0, w_blk = 0;
    for (int t = 0; t < TRIALS; t++) {
        double a[N], b[N];
        for (int r = 0; r < RUNS; r++) {
            synth_ar1(a + r * STEPS, STEPS, 100.0, 0.05, 0.5, 1000 + 4 * (uint64_t)t + (uint64_t)r);
            synth_ar1(b + r * STEPS, STEPS, 100.0, 0.05, 0.5, 1000 + 4 * (uint64_t)t + 2 + (uint64_t)r);
        }
        tdm_stats_ci ci, cb;
        CHECK(tdm_stats_bootstrap_rel_change(a, N, b, N, 400, 5, &ci) == 0, "plain bootstrap");
        CHECK(tdm_stats_block_bootstrap_rel_change(a, len, RUNS, b, len, RUNS, 0, 400, 5, &cb) == 0, "block");
        iid += ci.lo_pct <= 0 && 0 <= ci.hi_pct;
        blk += cb.lo_pct <= 0 && 0 <= cb.hi_pct;
        w_iid += ci.hi_pct - ci.lo_pct;
        w_blk += cb.hi_pct - cb.lo_pct;
    }
    CHECK(blk >= iid + TRIALS / 20, "block bootstrap covered 0 in %d of %d trials, plain in %d", blk, TRIALS, iid);
    CHECK(w_blk > 1.2 * w_iid, "mean widths: block %.2f%%, plain %.2f%%", w_blk / TRIALS, w_iid / TRIALS);
    printf("# AR(1) phi 0.5, 2 x 20 steps: coverage of the true change, block %d/%d (mean width %.2f%%), "
           "plain %d/%d (%.2f%%)\n",
           blk, TRIALS, w_blk / TRIALS, iid, TRIALS, w_iid / TRIALS);
}

/* Paired: step times that share a per-iteration component (the batch's size: 10%) beside independent noise
 * (1%); true change -5%. The unpaired interval carries the shared spread, the paired one cancels it; both
 * must hold the truth about as often as they promise. */
static void test_paired_bootstrap(void) {
    enum { RUNS = 2, STEPS = 30, N = RUNS * STEPS, TRIALS = 100 };
    int64_t len[RUNS] = {STEPS, STEPS};
    int cov_p = 0, cov_u = 0;
    double w_p = 0, w_u = 0;
    for (int t = 0; t < TRIALS; t++) {
        double a[N], b[N];
        for (int i = 0; i < N; i++) {
            double batch = 1.0 + 0.10 * tdm_rng_normal(31, 3 * (uint64_t)t, (uint64_t)i);
            a[i] = 100.0 * batch * (1.0 + 0.01 * tdm_rng_normal(31, 3 * (uint64_t)t + 1, (uint64_t)i));
            b[i] = 95.0 * batch * (1.0 + 0.01 * tdm_rng_normal(31, 3 * (uint64_t)t + 2, (uint64_t)i));
        }
        tdm_stats_ci p, u;
        CHECK(tdm_stats_paired_block_bootstrap_rel_change(a, b, len, RUNS, 0, 400, 11, &p) == 0, "paired");
        CHECK(tdm_stats_block_bootstrap_rel_change(a, len, RUNS, b, len, RUNS, 0, 400, 11, &u) == 0, "unpaired");
        CHECK_NEAR(p.change_pct, u.change_pct, 1e-12);
        cov_p += p.lo_pct <= -5.0 && -5.0 <= p.hi_pct;
        cov_u += u.lo_pct <= -5.0 && -5.0 <= u.hi_pct;
        w_p += p.hi_pct - p.lo_pct;
        w_u += u.hi_pct - u.lo_pct;
    }
    CHECK(cov_p >= 85 && cov_u >= 85, "coverage of the true -5%%: paired %d, unpaired %d of %d", cov_p, cov_u, TRIALS);
    CHECK(w_p < 0.25 * w_u, "mean widths: paired %.2f%%, unpaired %.2f%%", w_p / TRIALS, w_u / TRIALS);
    printf("# shared 10%% + own 1%% noise, 2 x 30 steps, change -5%%: paired width %.2f%% (covers %d/%d), "
           "unpaired %.2f%% (%d/%d)\n",
           w_p / TRIALS, cov_p, TRIALS, w_u / TRIALS, cov_u, TRIALS);
}

/* Block 1 with one run is the plain bootstrap, draw for draw; the automatic block length; bad run lengths. */
static void test_block_bootstrap_cases(void) {
    double a[60], b[60];
    synth(a, 60, 10, 0.1, 200);
    synth(b, 60, 9, 0.1, 201);
    int64_t n = 60, two[2] = {25, 35}, bad[2] = {30, -1}, zero[2] = {0, 0};
    tdm_stats_ci p, q, r;
    tdm_stats_bootstrap_rel_change(a, 60, b, 60, 300, 9, &p);
    tdm_stats_block_bootstrap_rel_change(a, &n, 1, b, &n, 1, 1, 300, 9, &q);
    CHECK(p.lo_pct == q.lo_pct && p.hi_pct == q.hi_pct, "block 1, one run = the plain bootstrap");
    CHECK(tdm_stats_block_bootstrap_rel_change(a, two, 2, b, two, 2, 0, 300, 9, &r) == 0, "two runs");
    CHECK_NEAR(r.change_pct, p.change_pct, 1e-12);
    CHECK(r.lo_pct <= r.change_pct && r.change_pct <= r.hi_pct, "point inside [%g, %g]", r.lo_pct, r.hi_pct);
    CHECK(tdm_stats_block_bootstrap_rel_change(a, bad, 2, b, two, 2, 0, 300, 9, &r) != 0, "negative run refused");
    CHECK(tdm_stats_block_bootstrap_rel_change(a, zero, 2, b, two, 2, 0, 300, 9, &r) != 0, "empty side refused");
    /* nothing to resample: a block as long as its run, or runs of one step (the old plain bootstrap gave a
     * zero-width "interval" that excluded 0 for a one-step window) */
    int64_t thirty[2] = {30, 30}, ones[2] = {1, 1}, mixed[2] = {1, 3};
    CHECK(tdm_stats_block_bootstrap_rel_change(a, thirty, 2, b, thirty, 2, 1000, 300, 9, &r) != 0, "long block");
    CHECK(tdm_stats_block_bootstrap_rel_change(a, thirty, 2, b, thirty, 2, 30, 300, 9, &r) != 0, "block = run");
    CHECK(tdm_stats_paired_block_bootstrap_rel_change(a, b, ones, 2, 0, 300, 9, &r) != 0, "one step per run");
    CHECK(tdm_stats_paired_block_bootstrap_rel_change(a, b, mixed, 2, 0, 300, 9, &r) == 0, "one run can vary");
    CHECK(r.hi_pct > r.lo_pct, "a real interval [%g, %g]", r.lo_pct, r.hi_pct);
    CHECK(tdm_stats_auto_block(1) == 1 && tdm_stats_auto_block(2) == 1 && tdm_stats_auto_block(3) == 1 &&
              tdm_stats_auto_block(4) == 2 && tdm_stats_auto_block(8) == 2 && tdm_stats_auto_block(20) == 3 &&
              tdm_stats_auto_block(27) == 3 && tdm_stats_auto_block(28) == 4,
          "ceil(n^(1/3)), at most n/2");
}

static void test_noise_sentence(void) {
    double a[100], b[100];
    synth(a, 100, 100, 0.05, 5);
    synth(b, 100, 100, 0.05, 6); /* same distribution */
    tdm_stats_ci ci;
    tdm_stats_bootstrap_rel_change(a, 100, b, 100, 1000, 3, &ci);
    char s[512];
    tdm_stats_noise_sentence(&ci, "mean step time", s, sizeof s);
    CHECK(ci.lo_pct < 0 && ci.hi_pct > 0, "interval [%g, %g] should contain 0", ci.lo_pct, ci.hi_pct);
    CHECK(strstr(s, "inside the noise") != NULL, "%s", s);
    tdm_stats_ci clear = {.change_pct = -9.24, .lo_pct = -10.1, .hi_pct = -8.3};
    tdm_stats_noise_sentence(&clear, "mean step time", s, sizeof s);
    CHECK(strstr(s, "lower by 9.24%") && !strstr(s, "noise"), "%s", s);
}

static void test_t_quantile(void) {
    /* Student t 0.975 quantiles from the standard tables (and, beyond 30, their 4-digit values) */
    const struct {
        int df;
        double t;
    } ref[] = {{1, 12.706},  {2, 4.303},   {3, 3.182},   {5, 2.571},    {10, 2.228},   {30, 2.042},
               {31, 2.0395}, {40, 2.0211}, {60, 2.0003}, {120, 1.9799}, {1000, 1.9623}};
    for (size_t i = 0; i < sizeof ref / sizeof *ref; i++)
        CHECK(fabs(tdm_stats_t975(ref[i].df) - ref[i].t) < 1e-3, "t(0.975, %d) = %.4f, expected %.4f", ref[i].df,
              tdm_stats_t975(ref[i].df), ref[i].t);
    CHECK(isnan(tdm_stats_t975(0)), "no quantile for 0 degrees of freedom");
}

static void test_paired_runs(void) {
    /* hand-checked (Python's statistics.stdev): changes -5, -9.0909, -2.2222 %; mean -5.4377, t(2) = 4.303 */
    const double a[] = {100, 110, 90}, b[] = {95, 100, 88};
    tdm_stats_ci ci;
    CHECK(tdm_stats_paired_runs_rel_change(a, b, 3, &ci) == 0, "three pairs");
    CHECK_NEAR(ci.change_pct, -5.437710437710441, 1e-9);
    CHECK_NEAR(ci.lo_pct, -14.021596032781725, 1e-9);
    CHECK_NEAR(ci.hi_pct, 3.146175157360842, 1e-9);
    CHECK(tdm_stats_paired_runs_rel_change(a, b, 1, &ci) != 0, "one pair has no spread");
    const double bad[] = {100, 0, 90};
    CHECK(tdm_stats_paired_runs_rel_change(bad, b, 3, &ci) != 0, "a baseline run of 0 ms");
    /* Coverage: 4 pairs per trial, every run slowed or sped by a drift shared within its pair (the
     * host), the candidate 8% faster with 2% noise of its own. The t interval must cover -8% in about
     * 95% of trials, drift or not. */
    int covered = 0, trials = 4000;
    for (int t = 0; t < trials; t++) {
        double x[4], y[4];
        for (int r = 0; r < 4; r++) {
            double drift = 1.0 + 0.15 * tdm_rng_normal(11, (uint64_t)t, (uint64_t)r);
            x[r] = 200.0 * drift;
            y[r] = x[r] * (0.92 + 0.02 * tdm_rng_normal(12, (uint64_t)t, (uint64_t)r));
        }
        if (tdm_stats_paired_runs_rel_change(x, y, 4, &ci) == 0 && ci.lo_pct <= -8.0 && ci.hi_pct >= -8.0) covered++;
    }
    double cover = (double)covered / trials;
    CHECK(cover > 0.935 && cover < 0.965, "t interval coverage %.3f, expected 0.95", cover);
}

int main(void) {
    RUN(test_basic);
    RUN(test_bootstrap_covers_truth);
    RUN(test_bootstrap_deterministic);
    RUN(test_block_bootstrap_coverage);
    RUN(test_block_bootstrap_cases);
    RUN(test_paired_bootstrap);
    RUN(test_noise_sentence);
    RUN(test_t_quantile);
    RUN(test_paired_runs);
    return TEST_SUMMARY();
}
