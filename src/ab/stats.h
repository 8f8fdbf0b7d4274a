/* stats.h - the statistics of the A/B report: means, medians, a bootstrap confidence
 * interval of the relative change, and the plain sentence that goes with it.
 * Pure functions, no allocation visible to the caller, deterministic (core/rng.h). */
#ifndef TDM_TRAIN_STATS_H
#define TDM_TRAIN_STATS_H

#include <stddef.h>
#include <stdint.h>

double tdm_stats_mean(const double *x, int64_t n);   /* NaN for n == 0 */
double tdm_stats_median(const double *x, int64_t n); /* NaN for n == 0; x is not modified */
double tdm_stats_stddev(const double *x, int64_t n); /* sample (n - 1) standard deviation */
/* Quantile q in [0, 1] of sorted data, linear interpolation between order statistics. */
double tdm_stats_quantile_sorted(const double *sorted, int64_t n, double q);

/* (candidate - baseline) / baseline, in percent. */
double tdm_stats_rel_change_pct(double baseline, double candidate);

typedef struct tdm_stats_ci {
    double change_pct; /* relative change of the means, % */
    double lo_pct, hi_pct;
    int resamples;
} tdm_stats_ci;

/* 95% percentile-bootstrap interval of the relative change of the mean of b (the
 * candidate) against the mean of a (the baseline): each resample draws na values of a
 * and nb of b with replacement, `resamples` times, from the counter-based generator
 * under `seed`, so the same inputs always give the same interval. Returns -1 when a
 * side is empty or the baseline mean is not positive. */
int tdm_stats_bootstrap_rel_change(const double *a, int64_t na, const double *b, int64_t nb, int resamples,
                                   uint64_t seed, tdm_stats_ci *ci);

/* The same interval for step times that come in runs, where neighbouring steps are not independent (a slow
 * period of the machine slows several in a row): a moving-block bootstrap stratified by run. Each side's
 * values are its runs one after the other, run r holding run_len[r] of them; each resample rebuilds every
 * run from blocks of consecutive steps of that run (start drawn uniformly, the last block cut to the run's
 * length), so a resample keeps each run's share of steps and the short-range dependence within blocks.
 * block <= 0 picks ceil(n^(1/3)) per run of n steps (the usual order of the variance-optimal length), at
 * most n/2; block = 1 with one run per side is the plain bootstrap above, draw for draw. Returns -1 as
 * above, or when a side's runs are empty or have nothing to resample (no run with two places a block can
 * start, e.g. one step per run: the interval would be a point). */
int tdm_stats_block_bootstrap_rel_change(const double *a, const int64_t *a_run_len, int a_runs, const double *b,
                                         const int64_t *b_run_len, int b_runs, int block, int resamples, uint64_t seed,
                                         tdm_stats_ci *ci);

/* Paired: a and b have the same runs (run r of b ran the same iterations, on the same data, as run r of a), and
 * each resample draws the same blocks for both sides, so what the two sides share at an iteration (the batch's
 * size, a slow period hitting both interleaved runs alike) cancels in the change instead of widening its
 * interval. Returns -1 as above. */
int tdm_stats_paired_block_bootstrap_rel_change(const double *a, const double *b, const int64_t *run_len, int runs,
                                                int block, int resamples, uint64_t seed, tdm_stats_ci *ci);

/* The block length tdm_stats_block_bootstrap_rel_change uses for a run of n steps when block <= 0:
 * ceil(n^(1/3)), at most n/2, at least 1. */
int tdm_stats_auto_block(int64_t n);

/* The 0.975 quantile of Student's t distribution with df degrees of freedom (df >= 1): the
 * tabulated values up to 30, a Cornish-Fisher expansion beyond (within 1e-3 of the exact value). */
double tdm_stats_t975(int df);

/* The change between whole runs, for interleaved runs in pairs (baseline run r, then candidate run r): the
 * mean over pairs of 100 (b[r] / a[r] - 1), where a[r] and b[r] are the runs' mean step times, and its 95%
 * Student t interval over the n pairs. The steps' bootstrap sees the noise within runs only; this one sees how
 * much whole runs differ (a host that slows for a minute), at the price of n - 1 degrees of freedom. Returns -1
 * for n < 2 or a value that is not finite or, for a, not positive. */
int tdm_stats_paired_runs_rel_change(const double *a, const double *b, int n, tdm_stats_ci *ci);

/* 1 when the interval holds 0: the change could be noise (0 for an interval of NaNs). */
static inline int tdm_stats_ci_contains_zero(const tdm_stats_ci *ci) { return ci->lo_pct <= 0 && ci->hi_pct >= 0; }

/* One sentence about the interval, e.g. "The difference is inside the noise: the 95%
 * interval [-1.2%, +0.8%] contains 0." or "The mean step time is lower by 9.2% (95% interval
 * [-10.1%, -8.3%]): the interval excludes 0." `what` names the quantity in lower case ("mean step time").
 * Writes at most cap bytes. */
void tdm_stats_noise_sentence(const tdm_stats_ci *ci, const char *what, char *out, size_t cap);

#endif
