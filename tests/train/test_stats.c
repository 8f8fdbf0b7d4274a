/* Unit tests for src/train/stats.c: exact values on small inputs, a deterministic
 * bootstrap whose interval covers the true change on synthetic data (the data are
 * drawn from known distributions with core/rng.h), and the noise sentence. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "harness.h"
#include "train/stats.h"

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

int main(void) {
    RUN(test_basic);
    RUN(test_bootstrap_covers_truth);
    RUN(test_bootstrap_deterministic);
    RUN(test_noise_sentence);
    return TEST_SUMMARY();
}
