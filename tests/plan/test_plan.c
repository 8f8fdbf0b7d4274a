/* test_plan.c - the step model (src/plan): ring costs against hand-computed values, the
 * bucketing of layout.c, and the simulated schedule on hand-built steps with known answers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "plan/plan.h"
#include "prof/trace.h"

static void test_ring_formulas(void) {
    tdm_plan_link l = {.alpha_us = 5, .gbps = 8}; /* 8 Gbit/s = 1000 bytes/us */
    CHECK_NEAR(tdm_plan_coll_us(TDM_PLAN_REDUCE_SCATTER, 1e6, 4, &l), 3 * 5 + 0.75 * 1000, 1e-9);
    CHECK_NEAR(tdm_plan_coll_us(TDM_PLAN_ALL_GATHER, 1e6, 4, &l), 765, 1e-9);
    CHECK_NEAR(tdm_plan_coll_us(TDM_PLAN_ALL_REDUCE, 1e6, 4, &l), 2 * 3 * 5 + 2 * 0.75 * 1000, 1e-9);
    CHECK_NEAR(tdm_plan_coll_us(TDM_PLAN_ALL_REDUCE, 1e6, 2, &l), 2 * 5 + 1000, 1e-9);
    CHECK_NEAR(tdm_plan_coll_us(TDM_PLAN_REDUCE_SCATTER, 1e6, 1, &l), 0, 0);
    tdm_plan_link l2 = {.alpha_us = 0, .gbps = 1}; /* 125 bytes/us */
    CHECK_NEAR(tdm_plan_coll_us(TDM_PLAN_ALL_GATHER, 8e6, 8, &l2), 7.0 / 8 * 8e6 / 125, 1e-9);
    /* tree all-reduce: 2 ceil(log2 p) latencies and 2 n on the wire; reduce-scatter and all-gather stay rings */
    tdm_plan_link t = {.alpha_us = 5, .gbps = 8, .tree = 1};
    CHECK_NEAR(tdm_plan_coll_us(TDM_PLAN_ALL_REDUCE, 1e6, 8, &t), 2 * 3 * 5 + 2 * 1000, 1e-9);
    CHECK_NEAR(tdm_plan_coll_us(TDM_PLAN_ALL_REDUCE, 1e6, 5, &t), 2 * 3 * 5 + 2 * 1000, 1e-9);
    CHECK_NEAR(tdm_plan_coll_us(TDM_PLAN_ALL_REDUCE, 1e6, 2, &t), 2 * 1 * 5 + 2 * 1000, 1e-9);
    CHECK_NEAR(tdm_plan_coll_us(TDM_PLAN_ALL_REDUCE, 1e6, 1, &t), 0, 0);
    CHECK_NEAR(tdm_plan_coll_us(TDM_PLAN_REDUCE_SCATTER, 1e6, 4, &t),
               tdm_plan_coll_us(TDM_PLAN_REDUCE_SCATTER, 1e6, 4, &l), 0);
    /* at 1024 ranks the tree's 20 latencies against the ring's 2046: a small all-reduce is latency-bound */
    tdm_plan_link r1 = {.alpha_us = 10, .gbps = 100}, t1 = {.alpha_us = 10, .gbps = 100, .tree = 1};
    CHECK(tdm_plan_coll_us(TDM_PLAN_ALL_REDUCE, 1e5, 1024, &t1) <
                  tdm_plan_coll_us(TDM_PLAN_ALL_REDUCE, 1e5, 1024, &r1) &&
              tdm_plan_coll_us(TDM_PLAN_ALL_REDUCE, 1e9, 8, &t1) > tdm_plan_coll_us(TDM_PLAN_ALL_REDUCE, 1e9, 8, &r1),
          "tree against ring");
}

/* units 0..3, one parameter each of 100, 200, 300, 400 elements */
static tdm_plan_param P4[] = {{100, 0, 1}, {200, 1, 1}, {300, 2, 1}, {400, 3, 1}};
static tdm_plan_unit U4[] = {{"a", 1, 1}, {"b", 1, 1}, {"c", 1, 1}, {"d", 1, 1}};

static void test_buckets_as_layout(void) {
    tdm_plan_model m = {.units = U4, .n_units = 4, .params = P4, .n_params = 4, .n_micro = 1};
    tdm_plan_config c = {.dp = 2, .bucket_size = 500};
    int64_t *pad = NULL;
    int *bo = NULL;
    tdm_error err;
    int nb = tdm_plan_buckets(&m, &c, &pad, &bo, &err);
    CHECK(nb == 2, "%d buckets", nb);
    if (nb == 2) {
        CHECK(pad[0] == 700 && pad[1] == 300, "%lld %lld", (long long)pad[0], (long long)pad[1]);
        CHECK(bo[3] == 0 && bo[2] == 0 && bo[1] == 1 && bo[0] == 1, "bucket_of %d %d %d %d", bo[0], bo[1], bo[2],
              bo[3]);
    }
    free(pad);
    free(bo);
    c.distributed = 1; /* parameters 64-aligned, buckets a multiple of lcm(2, 128) = 128 */
    nb = tdm_plan_buckets(&m, &c, &pad, NULL, &err);
    CHECK(nb == 2 && pad[0] == 768 && pad[1] == 384, "%d: %lld %lld", nb, (long long)pad[0], (long long)pad[1]);
    free(pad);
    c.bucket_size = 0, c.num_buckets = 1;
    nb = tdm_plan_buckets(&m, &c, &pad, NULL, &err);
    CHECK(nb == 1 && pad[0] == 1152, "%d: %lld", nb, (long long)pad[0]);
    free(pad);
    tdm_plan_param frozen[] = {{100, 0, 0}};
    tdm_plan_model f = {.units = U4, .n_units = 1, .params = frozen, .n_params = 1, .n_micro = 1};
    CHECK(tdm_plan_buckets(&f, &c, &pad, NULL, &err) < 0 && strstr(err.msg, "no trainable"), "%s", err.msg);
}

/* The run's cut from each bucket's elements (tdm_plan_match_cut). Parameters of 1000, 10, 10, 10 elements
 * (bucketed last first): --ddp-bucket-size 15 cuts 10+10, 10+1000; no --ddp-num-buckets up to 4 x 2 + 8 does
 * (their sizes, 1030 / N, close nothing before the 1000): 20 does (the first bucket's content; any from 11
 * cuts them alike). With the distributed optimizer at dp 2 (parameters 64-aligned, buckets 128) size 100 cuts
 * 10, 10, 10 (at 10, 74, 138: 256 padded) and 1000 (1024): --ddp-num-buckets 8 (size 129) does too. */
static void test_match_cut(void) {
    tdm_plan_param p[] = {{1000, 0, 1}, {10, 1, 1}, {10, 1, 1}, {10, 1, 1}};
    tdm_plan_model m = {.units = U4, .n_units = 2, .params = p, .n_params = 4, .n_micro = 1};
    tdm_plan_config c = {.dp = 2, .num_buckets = 3};
    const int64_t plain[] = {20, 1010}, dist[] = {256, 1024}, other[] = {25, 1005};
    int64_t range[2] = {0, 0};
    CHECK(tdm_plan_match_cut(&m, &c, plain, 2, range) == 2 && c.bucket_size == 20 && c.num_buckets == 0 &&
              range[0] == 11 && range[1] == 20,
          "%lld %d %lld..%lld", (long long)c.bucket_size, c.num_buckets, (long long)range[0], (long long)range[1]);
    /* a run of --ddp-bucket-size 1000 over 50000, 500, 549: any size from 550 to 1049 cuts 1049 + 50000, and 1000 is
     * the roundest (no count up to 12 closes a bucket before the 50000) */
    tdm_plan_param q[] = {{50000, 0, 1}, {500, 1, 1}, {549, 1, 1}};
    tdm_plan_model mq = {.units = U4, .n_units = 2, .params = q, .n_params = 3, .n_micro = 1};
    const int64_t qb[] = {1049, 50000};
    c = (tdm_plan_config){.dp = 2};
    CHECK(tdm_plan_match_cut(&mq, &c, qb, 2, range) == 2 && c.bucket_size == 1000 && range[0] == 550 &&
              range[1] == 1049,
          "%lld %lld..%lld", (long long)c.bucket_size, (long long)range[0], (long long)range[1]);
    c = (tdm_plan_config){.dp = 2, .distributed = 1};
    CHECK(tdm_plan_match_cut(&m, &c, dist, 2, NULL) == 1 && c.num_buckets == 8 && c.bucket_size == 0, "%d",
          c.num_buckets);
    int64_t *pad = NULL;
    tdm_error err;
    int nb = tdm_plan_buckets(&m, &c, &pad, NULL, &err);
    CHECK(nb == 2 && pad[0] == 256 && pad[1] == 1024, "%d", nb);
    free(pad);
    /* no size or count cuts 25 + 1005 (a bucket of tens holds 10, 20 or 30) */
    c = (tdm_plan_config){.dp = 2, .num_buckets = 5};
    CHECK(tdm_plan_match_cut(&m, &c, other, 2, range) == 0 && c.num_buckets == 5 && c.bucket_size == 0, "unchanged");
    /* without sizes: the least count that cuts as many (one bucket: 1; two: none up to 4 x 2 + 8, said above) */
    CHECK(tdm_plan_match_cut(&m, &c, NULL, 1, NULL) == 1 && c.num_buckets == 1, "one bucket: %d", c.num_buckets);
    CHECK(tdm_plan_match_cut(&m, &c, NULL, 2, NULL) == 0 && c.num_buckets == 1, "two buckets by count");
    nb = tdm_plan_buckets(&m, &c, &pad, NULL, &err);
    CHECK(nb == 1, "%d buckets with --ddp-num-buckets %d", nb, c.num_buckets);
    free(pad);
}

/* The tandem ab sides of a suggestion: a flag turned off goes to the baseline's side (train has no --no- form), the
 * rest to the candidate's; a count for a run of --ddp-bucket-size as a size (P4: 1000 trainable, 3 buckets: 334). */
static void test_confirm_flags(void) {
    tdm_plan_model m = {.units = U4, .n_units = 4, .params = P4, .n_params = 4, .n_micro = 1};
    m.baseline = (tdm_plan_config){.dp = 2, .distributed = 1, .overlap_grad = 1, .overlap_param = 1, .num_buckets = 2};
    tdm_plan_config best = m.baseline;
    char base[128], cand[256];
    best.overlap_grad = best.overlap_param = 0, best.num_buckets = 1;
    tdm_plan_confirm_flags(&m, &best, base, sizeof base, cand, sizeof cand);
    CHECK(!strcmp(base, "--overlap-grad-reduce --overlap-param-gather") && !strcmp(cand, "--ddp-num-buckets 1"),
          "'%s' '%s'", base, cand);
    m.baseline.bucket_size = 600, m.baseline.num_buckets = 0, m.baseline.overlap_param = 0;
    best = m.baseline, best.num_buckets = 3, best.bucket_size = 0, best.overlap_param = 1;
    tdm_plan_confirm_flags(&m, &best, base, sizeof base, cand, sizeof cand);
    CHECK(!strcmp(base, "") && !strcmp(cand, "--overlap-param-gather --ddp-bucket-size 334"), "'%s' '%s'", base, cand);
    tdm_plan_confirm_flags(&m, &m.baseline, base, sizeof base, cand, sizeof cand);
    CHECK(!base[0] && !cand[0], "the baseline's own settings: '%s' '%s'", base, cand);
}

/* Two units; unit 1 holds a 1 MB parameter (all-reduce of 1000 us on 2 ranks at 8 Gbit/s), unit 0 a
 * tiny one (1 us) and a 2000 us backward to hide behind. */
static tdm_plan_param P2[] = {{250, 0, 1}, {250000, 1, 1}};
static tdm_plan_unit U2[] = {{"u0", 10, 2000}, {"u1", 10, 10}};

static void test_fully_hidden_and_exposed(void) {
    tdm_plan_model m = {.units = U2, .n_units = 2, .params = P2, .n_params = 2, .n_micro = 1};
    tdm_plan_config c = {.dp = 2, .bucket_size = 1000, .link = {0, 8}};
    tdm_plan_result r;
    tdm_error err;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK(r.n_buckets == 2, "%d", r.n_buckets);
    CHECK_NEAR(r.step_us, 10 + 10 + 10 + 2000 + 1000 + 1, 1e-6); /* everything after the backward */
    CHECK_NEAR(r.hidden_us, 0, 1e-9);
    CHECK_NEAR(r.exposed_us, 1001, 1e-6);
    tdm_plan_result_free(&r);
    c.overlap_grad = 1;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK_NEAR(r.step_us, 10 + 10 + 10 + 2000 + 1, 1e-6); /* bucket 0 behind unit 0's backward */
    CHECK_NEAR(r.hidden_us, 1000, 1e-6);
    CHECK_NEAR(r.exposed_us, 1, 1e-6);
    CHECK(r.n_colls == 2 && r.colls[0].post_us == 30, "bucket 0 posted at %g", r.n_colls ? r.colls[0].post_us : -1);
    tdm_plan_result_free(&r);
    /* one bucket: ready only when the backward ends, nothing can hide */
    c.bucket_size = 0, c.num_buckets = 1;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK_NEAR(r.hidden_us, 0, 1e-9);
    CHECK_NEAR(r.step_us, 2030 + tdm_plan_coll_us(TDM_PLAN_ALL_REDUCE, 250250 * 4.0, 2, &c.link), 1e-6);
    tdm_plan_result_free(&r);
    /* 4 ranks on 2 cores, measured with 2: compute twice as long */
    m.cores = 2, m.baseline.dp = 2, c.dp = 4, c.num_buckets = 0, c.bucket_size = 1000, c.overlap_grad = 0;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK_NEAR(r.compute_us, 2 * 2030, 1e-6);
    tdm_plan_result_free(&r);
}

/* Gradient collectives posted at one instant take grad_together times as long in all: without overlap both
 * reduce-scatters go out at the backward's end (1.5 x their time together, the second carrying the first's share);
 * with overlap bucket 0 goes out after unit 1's backward, bucket 1 at the end, each alone at its own time. */
static void test_grads_posted_together(void) {
    tdm_plan_model m = {.units = U2, .n_units = 2, .params = P2, .n_params = 2, .n_micro = 1};
    tdm_plan_config c = {.dp = 2, .distributed = 1, .bucket_size = 1000, .link = {0, 8}};
    tdm_plan_result r[2];
    tdm_error err;
    /* padded to 128 elements: 250112 and 256, half of each on the wire at 1000 bytes/us */
    const double d0 = 250112 * 4.0 / 2 / 1000, d1 = 256 * 4.0 / 2 / 1000;
    for (int k = 0; k < 2; k++) {
        m.grad_together = k ? 1.5 : 0;
        CHECK(tdm_plan_simulate(&m, &c, &r[k], &err) == 0, "%s", err.msg);
    }
    CHECK_NEAR(r[0].step_us, 2030 + 2 * (d0 + d1), 1e-6);
    CHECK_NEAR(r[1].step_us, 2030 + 2.5 * (d0 + d1), 1e-6); /* the all-gathers, after the optimizer, as before */
    CHECK(r[1].n_colls == 4, "%d collectives", r[1].n_colls);
    if (r[1].n_colls == 4) {
        CHECK_NEAR(r[1].colls[0].end_us, 2030 + d0, 1e-6);
        CHECK_NEAR(r[1].colls[1].end_us, 2030 + 1.5 * (d0 + d1), 1e-6);
    }
    for (int k = 0; k < 2; k++) tdm_plan_result_free(&r[k]);
    c.overlap_grad = 1;
    for (int k = 0; k < 2; k++) {
        m.grad_together = k ? 1.5 : 0;
        CHECK(tdm_plan_simulate(&m, &c, &r[k], &err) == 0, "%s", err.msg);
    }
    CHECK_NEAR(r[0].step_us, 2030 + d1 + d0 + d1, 1e-6);
    CHECK_NEAR(r[1].step_us, r[0].step_us, 1e-9);
    for (int k = 0; k < 2; k++) tdm_plan_result_free(&r[k]);
}

static void test_cpu_taken_from_overlapped_compute(void) {
    tdm_plan_model m = {.units = U2, .n_units = 2, .params = P2, .n_params = 2, .n_micro = 1, .cpu_us_per_mb = 100};
    tdm_plan_config c = {.dp = 2, .bucket_size = 1000, .overlap_grad = 1, .link = {0, 8}};
    tdm_plan_result r;
    tdm_error err;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    /* 1 MB in flight behind unit 0's backward: 100 us of its CPU; the 1 us bucket after it barely */
    CHECK_NEAR(r.step_us, 2031 + 100, 0.01);
    CHECK_NEAR(r.cpu_taken_us, 100, 0.01);
    tdm_plan_result_free(&r);
    /* by time in flight (lost_share, the CPU per MB then unused): 0.2 of the 1000 us the bucket flies beside unit
     * 0's backward */
    m.lost_share = 0.2;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK_NEAR(r.step_us, 2031 + 200, 0.01);
    CHECK_NEAR(r.cpu_taken_us, 200, 0.01);
    tdm_plan_result_free(&r);
    c.overlap_grad = 0; /* nothing overlaps compute: nothing taken */
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK_NEAR(r.step_us, 3031, 1e-6);
    CHECK_NEAR(r.cpu_taken_us, 0, 1e-9);
    tdm_plan_result_free(&r);
}

/* lost_share counts the time any collective is in flight once, from its post (a collective queued behind another
 * is in flight too). Both parameters are unit 1's: a unit's gradients come in reverse registration order, each
 * ready at its share of the unit's elements, so the 1 MB one (registered last) is ready at 250000 / 250250 of unit
 * 1's 10 us backward, r0, and flies 1000 us; the tiny one is posted when that backward ends (at 30, later by a
 * tenth of the time of its last part, which the first flies beside: (30 - r0) x 0.1 / 0.9), queued until r0 + 1000
 * and flies 1 us. Charged: 0.1 of 1001 us, not of 2001 (1000 + 1001) or of 1000 + 1. */
static void test_lost_share_in_flight_once(void) {
    tdm_plan_param p[] = {{250, 1, 1}, {250000, 1, 1}}; /* both of unit 1 */
    tdm_plan_model m = {.units = U2, .n_units = 2, .params = p, .n_params = 2, .n_micro = 1, .lost_share = 0.1};
    tdm_plan_config c = {.dp = 2, .bucket_size = 1000, .overlap_grad = 1, .link = {0, 8}};
    tdm_plan_result r;
    tdm_error err;
    const double r0 = 20 + 10 * 250000.0 / 250250;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK(r.n_colls == 2 && fabs(r.colls[0].post_us - r0) < 1e-9 &&
              fabs(r.colls[1].post_us - (30 + (30 - r0) * 0.1 / 0.9)) < 1e-6 &&
              fabs(r.colls[1].start_us - (r0 + 1000)) < 1e-6,
          "posted at %g and %g, the second started at %g", r.n_colls ? r.colls[0].post_us : -1,
          r.n_colls > 1 ? r.colls[1].post_us : -1, r.n_colls > 1 ? r.colls[1].start_us : -1);
    CHECK_NEAR(r.cpu_taken_us, 0.1 * 1001, 1e-6);
    CHECK_NEAR(r.step_us, 2030 + 100.1, 1e-6); /* the step ends with the backward */
    tdm_plan_result_free(&r);
    /* without the overlap both wait for the backward's end, and the unit's backward is one segment */
    c.overlap_grad = 0;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK(r.n_colls == 2 && r.colls[0].post_us == 2030, "posted at %g", r.n_colls ? r.colls[0].post_us : -1);
    tdm_plan_result_free(&r);
}

/* A communication thread without a core of its own (comm_share): a collective that needs CPU for
 * half its alone-time (rho 0.5) runs at 1 / (0.5 + 0.5 / share) of its speed beside compute and
 * takes rho times that speed of the core. Hand-solved, for bucket 0 (1000 us alone) behind unit 0's
 * backward: with 2000 us of it the collective hides either way, but ends later; with 600 us the
 * backward ends at 930 (600 + 1/3 of its overlap), the collective at 930 + (1000 - 2/3 x 900). */
static void test_comm_thread_share(void) {
    tdm_plan_unit u[2];
    memcpy(u, U2, sizeof u);
    tdm_plan_model m = {.units = u, .n_units = 2, .params = P2, .n_params = 2, .n_micro = 1, .cpu_us_per_mb = 500};
    tdm_plan_config c = {.dp = 2, .bucket_size = 1000, .overlap_grad = 1, .link = {0, 8}};
    tdm_plan_result r;
    tdm_error err;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg); /* the thread runs first: 1000 us of flight */
    CHECK(r.n_colls == 2 && fabs(r.colls[0].end_us - 1030) < 0.01, "end %g", r.n_colls ? r.colls[0].end_us : -1);
    CHECK_NEAR(r.step_us, 2531, 0.01);
    tdm_plan_result_free(&r);
    m.comm_share = 0.5;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK(r.n_colls == 2 && fabs(r.colls[0].end_us - 1530) < 0.01, "end %g", r.n_colls ? r.colls[0].end_us : -1);
    CHECK_NEAR(r.step_us, 2531, 0.01);
    CHECK_NEAR(r.cpu_taken_us, 500, 0.01); /* beside unit 0; bucket 1 runs after the backward, beside nothing */
    tdm_plan_result_free(&r);
    u[0].bwd_us = 600;
    m.comm_share = 0;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK_NEAR(r.step_us, 1131, 0.01);
    tdm_plan_result_free(&r);
    m.comm_share = 0.5;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    /* segments: head, forward 0 and 1, loss, backward 1 and 0 */
    CHECK(r.n_segs > 5 && r.segs[5].unit == 0 && r.segs[5].backward && fabs(r.segs[5].t1_us - 930) < 0.01,
          "unit 0's backward ends at %g", r.n_segs > 5 ? r.segs[5].t1_us : -1);
    CHECK(r.n_colls == 2 && fabs(r.colls[0].end_us - 1330) < 0.01, "end %g", r.n_colls ? r.colls[0].end_us : -1);
    CHECK_NEAR(r.step_us, 1331, 0.01);
    tdm_plan_result_free(&r);
    /* and back: 1500 us of wall with all of it beside compute is 1000 us alone */
    CHECK_NEAR(tdm_plan_alone_us(&m, 1e6, 1500, 1), 1000, 1e-6);
    CHECK_NEAR(tdm_plan_alone_us(&m, 1e6, 1000, 0), 1000, 1e-9);
    CHECK_NEAR(tdm_plan_nice_share(0), 0.5, 1e-12);
    CHECK_NEAR(tdm_plan_nice_share(10), 110.0 / 1134.0, 5e-4); /* the kernel's weights: 110 at nice 10, 1024 at 0 */
}

/* A measured speed beside compute (tandem doctor's, speed_beside) in place of the thread's share: bucket 0
 * (1000 us alone, 1 MB) posted at 30 behind unit 0's 2000 us backward. At 0.5 it just ends with the backward;
 * at 0.25 it has done 500 us by then and ends at 2530. With 100 us of CPU per MB (rho 0.1) the backward B takes
 * 0.1 x 0.25 of a core while beside it: B = 2000 + 0.025 B, 0.25 B done beside it, the rest alone after. */
static void test_speed_beside(void) {
    tdm_plan_model m = {.units = U2, .n_units = 2, .params = P2, .n_params = 2, .n_micro = 1, .speed_beside = 0.5};
    tdm_plan_config c = {.dp = 2, .bucket_size = 1000, .overlap_grad = 1, .link = {0, 8}};
    tdm_plan_result r;
    tdm_error err;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK(r.n_colls == 2 && fabs(r.colls[0].end_us - 2030) < 0.01, "end %g", r.n_colls ? r.colls[0].end_us : -1);
    CHECK_NEAR(r.step_us, 2031, 0.01);
    CHECK_NEAR(r.cpu_taken_us, 0, 1e-9);
    tdm_plan_result_free(&r);
    m.speed_beside = 0.25;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK(r.n_colls == 2 && fabs(r.colls[0].end_us - 2530) < 0.01, "end %g", r.n_colls ? r.colls[0].end_us : -1);
    CHECK_NEAR(r.step_us, 2531, 0.01);
    CHECK_NEAR(r.hidden_us, 2000, 0.01);
    tdm_plan_result_free(&r);
    m.cpu_us_per_mb = 100;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    const double b = 2000 / (1 - 0.025);
    CHECK_NEAR(r.cpu_taken_us, 0.025 * b, 0.01);
    CHECK(r.n_colls == 2 && fabs(r.colls[0].end_us - (30 + b + 1000 - 0.25 * b)) < 0.01, "end %g",
          r.n_colls ? r.colls[0].end_us : -1);
    tdm_plan_result_free(&r);
    /* it outranks the thread's share, and a speed of 1 slows nothing */
    m.cpu_us_per_mb = 0, m.comm_share = 0.5, m.speed_beside = 1;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK_NEAR(r.step_us, 2031, 0.01);
    tdm_plan_result_free(&r);
    /* and back: 2000 us of wall beside compute at 0.25 is 500 us alone */
    m.speed_beside = 0.25;
    CHECK_NEAR(tdm_plan_alone_us(&m, 1e6, 2000, 1), 500, 1e-6);
    CHECK_NEAR(tdm_plan_alone_us(&m, 1e6, 2000, 0.5), 1250, 1e-6);
}

/* Calibration scales compute alone: without overlap the 1001 us of communication stay, so a
 * measured 5061 us doubles the 2030 us of compute; with it, bucket 0 hides behind unit 0's
 * backward at any factor above 0.5. */
static void test_calibrate(void) {
    tdm_plan_unit u[2];
    memcpy(u, U2, sizeof u);
    tdm_plan_model m = {.units = u, .n_units = 2, .params = P2, .n_params = 2, .n_micro = 1, .head_us = 0};
    m.baseline = (tdm_plan_config){.dp = 2, .bucket_size = 1000, .link = {0, 8}};
    double f = 0;
    tdm_error err;
    CHECK(tdm_plan_calibrate(&m, 5061, &f, &err) == 0, "%s", err.msg);
    CHECK_NEAR(f, 2, 1e-6);
    CHECK_NEAR(m.units[0].bwd_us, 4000, 1e-3);
    tdm_plan_result r;
    CHECK(tdm_plan_simulate(&m, &m.baseline, &r, &err) == 0, "%s", err.msg);
    CHECK_NEAR(r.step_us, 5061, 1e-3);
    CHECK_NEAR(r.comm_us, 1001, 1e-6);
    tdm_plan_result_free(&r);
    memcpy(u, U2, sizeof u);
    m.baseline.overlap_grad = 1;
    CHECK(tdm_plan_calibrate(&m, 1015 + 1, &f, &err) == 0, "%s", err.msg); /* 2030 x 0.5 + bucket 1 */
    CHECK_NEAR(f, 0.5, 1e-6);
    /* shorter than the communication alone: refused, the model as it was */
    memcpy(u, U2, sizeof u);
    m.baseline.overlap_grad = 0;
    CHECK(tdm_plan_calibrate(&m, 1000, &f, &err) != 0 && strstr(err.msg, "1.000 ms") &&
              strstr(err.msg, "expected a run of the traced setting"),
          "%s", err.msg);
    CHECK(m.units[0].bwd_us == 2000 && m.units[1].fwd_us == 10, "model changed: %g %g", m.units[0].bwd_us,
          m.units[1].fwd_us);
    CHECK(tdm_plan_calibrate(&m, NAN, &f, &err) != 0 && strstr(err.msg, "expected a time above 0"), "%s", err.msg);
}

/* A frozen unit first (5000 us forward) hides the parameter all-gather of unit 1's bucket. */
static void test_param_gather_overlap(void) {
    tdm_plan_param p[] = {{10, 0, 0}, {250000, 1, 1}};
    tdm_plan_unit u[] = {{"frozen", 5000, 0}, {"trained", 100, 100}};
    tdm_plan_model m = {.units = u, .n_units = 2, .params = p, .n_params = 2, .n_micro = 1, .opt_us = 50};
    tdm_plan_config c = {.dp = 2, .distributed = 1, .link = {0, 8}};
    const double one = 0.5 * 250112 * 4 / 1000.0; /* padded to 128 elements; RS and AG alike */
    tdm_plan_result r;
    tdm_error err;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK_NEAR(r.step_us, 5000 + 100 + 100 + one + 50 + one, 1e-6);
    CHECK(r.n_colls == 2 && r.colls[1].kind == TDM_PLAN_ALL_GATHER, "%d collectives", r.n_colls);
    tdm_plan_result_free(&r);
    c.overlap_param = c.overlap_grad = 1; /* one bucket, ready when the backward ends: nothing else changes */
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK_NEAR(r.step_us, 5000 + 100 + 100 + one + 50, 1e-6);
    CHECK(r.n_colls == 2 && r.colls[0].kind == TDM_PLAN_ALL_GATHER && r.colls[0].post_us == 0, "gather first");
    CHECK_NEAR(r.hidden_us, one, 1e-6);
    tdm_plan_result_free(&r);
    /* micro-batches: the gradient collectives only after the last one's backward */
    m.n_micro = 3, c.overlap_param = c.overlap_grad = 0;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK_NEAR(r.step_us, 3 * 5200 + one + 50 + one, 1e-6);
    tdm_plan_result_free(&r);
}

/* The ranks apart: two traced steps of two ranks, each rank's compute from the step's start to unit 0's and unit 1's
 * first forward and to the backward's end (hand-made). Where the ranks meet, the step waits for the slowest rank of
 * each stretch between meeting points, beyond the model's rank (apart_ref):
 *   step 0 (ref rank 0): r0 10, 110, 400; r1 30, 150, 380     step 1 (ref rank 1): r0 0, 100, 300; r1 0, 150, 320
 *   start..u0: 20 and 0; u0..u1: max(100, 120) - 100 = 20 and max(100, 150) - 150 = 0; u1..end: 0 and
 *   max(200, 170) - 170 = 30; the whole step: 0 and 0. Means: 10, 10, 15, 0. */
static void test_ranks_apart_wait(void) {
    double at[] = {10, 110, 400, 30, 150, 380, 0, 100, 300, 0, 150, 320};
    double weight[] = {1, 1};
    int ref[] = {0, 1};
    tdm_plan_param p[] = {{250000, 0, 1}, {250000, 1, 1}};
    tdm_plan_unit u[] = {{"u0", 100, 100}, {"u1", 100, 100}};
    tdm_plan_model m = {.units = u,
                        .n_units = 2,
                        .params = p,
                        .n_params = 2,
                        .n_micro = 1,
                        .apart_steps = 2,
                        .apart_ranks = 2,
                        .apart_at = at,
                        .apart_weight = weight,
                        .apart_ref = ref};
    CHECK_NEAR(tdm_plan_rank_wait_us(&m, -1, 0), 10, 1e-9);
    CHECK_NEAR(tdm_plan_rank_wait_us(&m, 0, 1), 10, 1e-9);
    CHECK_NEAR(tdm_plan_rank_wait_us(&m, 1, 2), 15, 1e-9);
    CHECK_NEAR(tdm_plan_rank_wait_us(&m, -1, 2), 0, 1e-9);
    CHECK_NEAR(tdm_plan_rank_wait_us(&m, 1, 1), 0, 1e-9);
    m.apart_scale = 2; /* calibrated compute: the waits follow it */
    CHECK_NEAR(tdm_plan_rank_wait_us(&m, 1, 2), 30, 1e-9);
    m.apart_scale = 0;
    weight[1] = 0; /* a resample without step 1 */
    CHECK_NEAR(tdm_plan_rank_wait_us(&m, -1, 0), 20, 1e-9);
    CHECK_NEAR(tdm_plan_rank_wait_us(&m, 0, 1), 20, 1e-9);
    CHECK_NEAR(tdm_plan_rank_wait_us(&m, 1, 2), 0, 1e-9);
    weight[1] = 1;

    /* Both overlap flags, two buckets (unit 1's parameters, then unit 0's), all-gathers that barely move beside
     * compute: neither is done when the forward reaches its unit, so the ranks meet at unit 0, unit 1 and the
     * backward's end, and the step waits 10 + 10 + 15 us more than without the ranks apart. */
    tdm_plan_config c = {
        .dp = 2, .distributed = 1, .overlap_grad = 1, .overlap_param = 1, .bucket_size = 250000, .link = {0, 8}};
    m.speed_beside = 0.001;
    tdm_plan_result r, alone;
    tdm_error err;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK(r.n_buckets == 2, "%d buckets", r.n_buckets);
    CHECK_NEAR(r.rank_wait_us, 35, 1e-6);
    m.apart_steps = 0;
    CHECK(tdm_plan_simulate(&m, &c, &alone, &err) == 0, "%s", err.msg);
    CHECK_NEAR(alone.rank_wait_us, 0, 1e-12);
    CHECK_NEAR(r.step_us - alone.step_us, 35, 0.05);  /* the collectives in flight move at 0.001 during the waits */
    CHECK_NEAR(r.compute_us, alone.compute_us, 1e-6); /* a wait, not compute */
    tdm_plan_result_free(&r);
    tdm_plan_result_free(&alone);
    m.apart_steps = 2;
    /* one rank: nobody to wait for */
    c.dp = 1;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK_NEAR(r.rank_wait_us, 0, 1e-12);
    tdm_plan_result_free(&r);
    /* the all-gathers done before the forward needs them (a head of 5 ms at full speed): the ranks meet only
     * at the backward's end, as without the overlap */
    c.dp = 2, m.speed_beside = 0, m.head_us = 5000;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK_NEAR(r.rank_wait_us, tdm_plan_rank_wait_us(&m, -1, 2), 1e-9);
    tdm_plan_result_free(&r);
    c.overlap_param = 0;
    CHECK(tdm_plan_simulate(&m, &c, &r, &err) == 0, "%s", err.msg);
    CHECK_NEAR(r.rank_wait_us, 0, 1e-12);
    tdm_plan_result_free(&r);
}

static void test_flags_and_bad_input(void) {
    tdm_plan_config c = {.dp = 2, .num_buckets = 3, .link = {1, 1}};
    tdm_error err;
    CHECK(tdm_plan_parse_flags("--overlap-grad-reduce --ddp-bucket-size 2e6 --dp=4 --link-gbps 0.5", &c, &err) == 0,
          "%s", err.msg);
    CHECK(c.overlap_grad == 1 && c.bucket_size == 2000000 && c.num_buckets == 0 && c.dp == 4 && c.link.gbps == 0.5,
          "parsed");
    char out[256];
    tdm_plan_config b = {.dp = 2, .num_buckets = 3, .link = {1, 1}};
    tdm_plan_config_flags(&c, &b, out, sizeof out);
    CHECK(!strcmp(out, "--overlap-grad-reduce --ddp-bucket-size 2000000 --dp 4 --link-gbps 0.5"), "%s", out);
    /* --link-scale: the bandwidth so far times X (the fitted link's, or one given before it) */
    tdm_plan_config k = {.dp = 2, .link = {3, 0.8}};
    CHECK(tdm_plan_parse_flags("--link-scale 2.5", &k, &err) == 0 && k.link.gbps == 2.0 && k.link.alpha_us == 3,
          "%g %s", k.link.gbps, err.msg);
    CHECK(tdm_plan_parse_flags("--link-gbps 4 --link-scale=0.25", &k, &err) == 0 && k.link.gbps == 1.0, "%g",
          k.link.gbps);
    CHECK(tdm_plan_parse_flags("--link-scale 0", &k, &err) != 0 && strstr(err.msg, "--link-scale 0: expected"), "%s",
          err.msg);
    CHECK(tdm_plan_parse_flags("--link-algo tree", &k, &err) == 0 && k.link.tree == 1, "%s", err.msg);
    tdm_plan_config ring = k;
    ring.link.tree = 0;
    tdm_plan_config_flags(&k, &ring, out, sizeof out);
    CHECK(!strcmp(out, "--link-algo tree"), "%s", out);
    CHECK(tdm_plan_parse_flags("--link-algo=ring", &k, &err) == 0 && k.link.tree == 0, "%s", err.msg);
    CHECK(tdm_plan_parse_flags("--link-algo butterfly", &k, &err) != 0 && strstr(err.msg, "expected ring or tree"),
          "%s", err.msg);
    CHECK(tdm_plan_parse_flags("--frobnicate", &c, &err) != 0 && strstr(err.msg, "'--frobnicate'"), "%s", err.msg);
    CHECK(tdm_plan_parse_flags("--ddp-bucket-size abc", &c, &err) != 0 && strstr(err.msg, "expected a number"), "%s",
          err.msg);
    CHECK(tdm_plan_parse_flags("--dp 0", &c, &err) != 0, "dp 0 accepted");
    CHECK(tdm_plan_parse_flags("--dp", &c, &err) != 0 && strstr(err.msg, "(missing)"), "%s", err.msg);
    tdm_plan_model m = {.units = U2, .n_units = 2, .params = P2, .n_params = 2, .n_micro = 1};
    tdm_plan_config z = {.dp = 2, .link = {0, 0}};
    tdm_plan_result r;
    CHECK(tdm_plan_simulate(&m, &z, &r, &err) != 0 && strstr(err.msg, "bandwidth"), "%s", err.msg);
    z.link.gbps = 1, z.overlap_param = 1;
    CHECK(tdm_plan_simulate(&m, &z, &r, &err) != 0 && strstr(err.msg, "requires --overlap-grad-reduce"), "%s", err.msg);
    z.overlap_param = 0, z.dp = 0;
    CHECK(tdm_plan_simulate(&m, &z, &r, &err) != 0 && strstr(err.msg, "dp size 0"), "%s", err.msg);
}

static void test_trace_bad_input(void) {
    tdm_plan_trace_in in = {.path = "/nonexistent/trace.json"};
    tdm_plan_model m;
    tdm_error err;
    CHECK(tdm_plan_from_trace(&in, &m, NULL, 0, &err) != 0 && strstr(err.msg, "no such file"), "%s", err.msg);
    in.path = "/proc"; /* a folder without trace.json */
    CHECK(tdm_plan_from_trace(&in, &m, NULL, 0, &err) != 0 && strstr(err.msg, "no trace.json"), "%s", err.msg);
}

/* A trace written by a test: trace_begin makes a folder and opens its trace.json; trace_rank writes a
 * rank's thread names and a 100-us step whose one micro-batch runs u0 and u1 forward (10 us each), u1
 * backward (10 us) and u0 backward (u0_bwd us); trace_ev adds a record of that rank; trace_end
 * closes the file, trace_remove deletes it and the folder. */
typedef struct test_trace {
    char dir[64], path[96];
    FILE *f;
    int rank;
    char notes[2048]; /* the model's notes (trace_model) */
} test_trace;

static int trace_begin(test_trace *t) {
    snprintf(t->dir, sizeof t->dir, "/tmp/tdm_plan_traceXXXXXX");
    t->f = NULL;
    CHECK(mkdtemp(t->dir) != NULL, "mkdtemp");
    snprintf(t->path, sizeof t->path, "%s/trace.json", t->dir);
    t->f = fopen(t->path, "w");
    CHECK(t->f != NULL, "open %s", t->path);
    if (t->f) fputs("{\"traceEvents\": [\n", t->f);
    return t->f ? 0 : -1;
}

static void trace_ev(test_trace *t, const char *name, const char *cat, int tid, double t0, double dur, int arg) {
    fprintf(t->f,
            "{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %g, \"dur\": %g, \"pid\": %d, \"tid\": %d, "
            "\"args\": {\"arg\": %d, \"level\": 1}},\n",
            name, cat, t0, dur, t->rank, tid, arg);
}

/* A collective's record (on the communication thread) with the bytes it moved, as tandem's trace says them. */
static void trace_coll(test_trace *t, const char *name, double t0, double dur, int arg, long long bytes) {
    fprintf(t->f,
            "{\"name\": \"%s\", \"cat\": \"comm\", \"ph\": \"X\", \"ts\": %g, \"dur\": %g, \"pid\": %d, \"tid\": 0, "
            "\"args\": {\"arg\": %d, \"level\": 1, \"bytes\": %lld}},\n",
            name, t0, dur, t->rank, arg, bytes);
}

/* The compute thread's mark that it posted gradient bucket `bucket` at t0 (an overlapped run's). */
static void trace_posted(test_trace *t, double t0, int bucket) {
    fprintf(t->f,
            "{\"name\": \"grad bucket posted\", \"cat\": \"mark\", \"ph\": \"i\", \"s\": \"t\", \"ts\": %g, "
            "\"pid\": %d, \"tid\": 2, \"args\": {\"arg\": %d, \"level\": 1}},\n",
            t0, t->rank, bucket);
}

/* Starts rank `rank`'s records: its thread names (tid 0 comm, 2 compute). */
static void trace_threads(test_trace *t, int rank) {
    t->rank = rank;
    static const char *const threads[2] = {"comm", "compute"};
    for (int k = 0; k < 2; k++)
        fprintf(t->f,
                "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}},\n",
                rank, 2 * k, threads[k]);
}

static void trace_rank(test_trace *t, int rank, double u0_bwd) {
    trace_threads(t, rank);
    trace_ev(t, "step", "phase", 2, 0, 100, 1);
    trace_ev(t, "forward-backward", "phase", 2, 0, 30 + u0_bwd, 0);
    trace_ev(t, "u0", "layer", 2, 0, 10, 0);
    trace_ev(t, "u1", "layer", 2, 10, 10, 0);
    trace_ev(t, "u1", "layer", 2, 20, 10, 1);
    trace_ev(t, "u0", "layer", 2, 30, u0_bwd, 1);
}

static void trace_end(test_trace *t) {
    fputs("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, \"tid\": 0, \"args\": {\"name\": \"rank 0\"}}]}\n",
          t->f);
    fclose(t->f);
}

/* Writes analysis.json beside the trace: `{` json `}` (what tandem's analysis says of the run). */
static void trace_analysis(const test_trace *t, const char *json) {
    char path[4200];
    snprintf(path, sizeof path, "%s/analysis.json", t->dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "open %s", path);
    if (f) fprintf(f, "{%s}\n", json), fclose(f);
}

static void trace_remove(const test_trace *t) {
    char path[4200];
    snprintf(path, sizeof path, "%s/analysis.json", t->dir);
    unlink(path); /* where trace_analysis wrote one */
    unlink(t->path);
    rmdir(t->dir);
}

/* The model's input for the written trace: two units (u0, u1), parameter table p[n], the link fitted. */
static tdm_plan_trace_in trace_in(const test_trace *t, const tdm_plan_param *p, int n) {
    static const char *names[] = {"u0", "u1"};
    return (tdm_plan_trace_in){.path = t->dir,
                               .unit_names = names,
                               .n_units = 2,
                               .params = p,
                               .n_params = n,
                               .link = {-1, -1},
                               .cpu_us_per_mb = -1};
}

/* Ends the written trace and builds its model (trace_in), the notes in t->notes. 1 when built (its checks
 * counted). */
static int trace_model(test_trace *t, const tdm_plan_param *p, int n, tdm_plan_model *m) {
    trace_end(t);
    const tdm_plan_trace_in in = trace_in(t, p, n);
    tdm_error err;
    int rc = tdm_plan_from_trace(&in, m, t->notes, sizeof t->notes, &err);
    CHECK(rc == 0, "%s", err.msg);
    CHECK(rc != 0 || m->n_units == 2, "%d units", m->n_units);
    return rc == 0 && m->n_units == 2;
}

/* A two-rank trace written here: rank 1's backward of unit 0 is 40 us, rank 0's 20 us, so rank 0
 * waits 20 us in the gradient all-reduce that takes rank 1 (the last to post it) 19 us. The model
 * takes the step's compute from rank 1 and the link from its 19 us. */
static void test_trace_slowest_rank(void) {
    test_trace t;
    if (trace_begin(&t) != 0) return;
    for (int rk = 0; rk < 2; rk++) {
        const double b = rk ? 40 : 20, fb = 30 + b;
        trace_rank(&t, rk, b);
        trace_ev(&t, "grad sync", "phase", 2, fb + 1, 89 - fb, 0);
        trace_ev(&t, "grad all-reduce", "wait", 2, fb + 1, 89 - fb, 0);
        trace_ev(&t, "grad all-reduce", "comm", 0, fb + 1, 89 - fb, 0);
        trace_ev(&t, "optimizer", "phase", 2, 90, 10, 0);
    }
    tdm_plan_param p[] = {{250, 0, 1}, {250, 1, 1}};
    tdm_plan_model m;
    tdm_error err;
    if (trace_model(&t, p, 2, &m)) {
        CHECK_NEAR(m.units[0].bwd_us, 40, 1e-9); /* rank 1's */
        CHECK_NEAR(m.units[0].fwd_us, 10, 1e-9);
        CHECK_NEAR(m.measured_step_us, 100, 1e-9);
        /* 2000 bytes all-reduced on 2 ranks: 2000 bytes on the wire in 19 us, one point (no latency) */
        CHECK_NEAR(m.baseline.link.gbps, 2000.0 / 19 / 125, 1e-9);
        CHECK_NEAR(m.baseline.link.alpha_us, 0, 1e-12);
        tdm_plan_result r;
        CHECK(tdm_plan_simulate(&m, &m.baseline, &r, &err) == 0, "%s", err.msg);
        CHECK_NEAR(r.step_us, 100, 1e-6); /* rank 1's compute, the transfer, the optimizer, 1 us between */
        tdm_plan_result_free(&r);
        tdm_plan_model_free(&m);
    }
    trace_remove(&t);
}

/* Each rank's compute to the units' first forwards and the backward's end, from a two-rank trace written here: rank 0
 * starts unit 0 at 5 us, waits 3 us for an all-gather, runs unit 1 from 18 us and reaches the gradient sync at 65 us;
 * rank 1 starts at 2, 12 and 75 us with no wait. Rank 1 has the most layer time: the model's rank. */
static void test_trace_ranks_apart(void) {
    test_trace t;
    if (trace_begin(&t) != 0) return;
    /* per rank: forward-backward start and length, unit 0's forward start, unit 1's forward start and length, the
     * backward's start and unit 0's backward, the gradient sync's start and length */
    static const double at[2][9] = {{5, 58, 5, 18, 15, 33, 20, 65, 25}, {2, 70, 2, 12, 10, 22, 40, 75, 15}};
    for (int rk = 0; rk < 2; rk++) {
        const double *a = at[rk];
        trace_threads(&t, rk);
        trace_ev(&t, "step", "phase", 2, 0, 100, 1);
        trace_ev(&t, "forward-backward", "phase", 2, a[0], a[1], 0);
        trace_ev(&t, "u0", "layer", 2, a[2], 10, 0);
        if (rk == 0) trace_ev(&t, "param all-gather", "wait", 2, 15, 3, 0);
        trace_ev(&t, "u1", "layer", 2, a[3], a[4], 0);
        trace_ev(&t, "u1", "layer", 2, a[5], 10, 1);
        trace_ev(&t, "u0", "layer", 2, a[5] + 10, a[6], 1);
        trace_ev(&t, "grad sync", "phase", 2, a[7], a[8], 0);
        trace_ev(&t, "optimizer", "phase", 2, 90, 10, 0);
    }
    tdm_plan_param p[] = {{250, 0, 1}, {250, 1, 1}};
    tdm_plan_model m;
    if (trace_model(&t, p, 2, &m)) {
        CHECK(m.apart_steps == 1 && m.apart_ranks == 2, "%d steps, %d ranks", m.apart_steps, m.apart_ranks);
        if (m.apart_steps == 1 && m.apart_ranks == 2) {
            const double want[6] = {5, 15, 62, 2, 12, 75};
            for (int i = 0; i < 6; i++) CHECK_NEAR(m.apart_at[i], want[i], 1e-9);
            CHECK(m.apart_ref[0] == 1, "the model's rank %d", m.apart_ref[0]);
            CHECK_NEAR(m.apart_weight[0], 1, 1e-12);
            CHECK_NEAR(tdm_plan_rank_wait_us(&m, -1, 0), 3, 1e-9); /* rank 0 reaches unit 0 3 us after rank 1 */
            CHECK_NEAR(tdm_plan_rank_wait_us(&m, -1, 2), 0, 1e-9);
        }
        tdm_plan_model_free(&m);
    }
    trace_remove(&t);
}

/* The last rank's gradient collectives: two steps a rank, each rank waiting in the gradient sync's agreement
 * (3 and 1 us on rank 0, 5 and 0 on rank 1). The model takes the longest wait of each step, 5 and 1, their mean 3
 * (5 with the first step drawn twice, the second not), and the simulated step waits that long after its gradient
 * collectives when dp > 1: the step and rank_wait_us 3 us longer than without it, the same with dp 1. */
static void test_trace_last_rank_agree(void) {
    test_trace t;
    if (trace_begin(&t) != 0) return;
    static const double agree[2][2] = {{3, 1}, {5, 0}};
    for (int rk = 0; rk < 2; rk++) {
        trace_threads(&t, rk);
        for (int k = 0; k < 2; k++) {
            const double s = 100.0 * k;
            trace_ev(&t, "step", "phase", 2, s, 100, 1);
            trace_ev(&t, "forward-backward", "phase", 2, s, 50, 0);
            trace_ev(&t, "u0", "layer", 2, s, 10, 0);
            trace_ev(&t, "u1", "layer", 2, s + 10, 10, 0);
            trace_ev(&t, "u1", "layer", 2, s + 20, 10, 1);
            trace_ev(&t, "u0", "layer", 2, s + 30, 20, 1);
            trace_ev(&t, "grad sync", "phase", 2, s + 51, 30, 0);
            trace_ev(&t, "grad all-reduce", "wait", 2, s + 51, 10, 0);
            trace_ev(&t, "grad all-reduce", "comm", 0, s + 51, 10, 0);
            if (agree[rk][k] > 0) trace_ev(&t, "grad sync: ranks agree", "wait", 2, s + 62, agree[rk][k], 0);
            trace_ev(&t, "optimizer", "phase", 2, s + 90, 10, 0);
        }
    }
    tdm_plan_param p[] = {{250, 0, 1}, {250, 1, 1}};
    tdm_plan_model m;
    if (!trace_model(&t, p, 2, &m)) {
        trace_remove(&t);
        return;
    }
    CHECK_NEAR(m.agree_us, 3, 1e-9);
    CHECK_NEAR(m.sync_us, 30 - 10 - (3 + 1) / 2.0, 1e-9); /* the model's rank's (0: as much layer time), waits out */
    for (int dp = 1; dp <= 2; dp++) {
        tdm_plan_config c = m.baseline;
        c.dp = dp;
        tdm_plan_model none = m;
        none.agree_us = 0;
        tdm_plan_result with, without;
        tdm_error err;
        if (tdm_plan_simulate(&m, &c, &with, &err) != 0 || tdm_plan_simulate(&none, &c, &without, &err) != 0) {
            CHECK(0, "%s", err.msg);
            continue;
        }
        CHECK_NEAR(with.step_us - without.step_us, dp > 1 ? 3 : 0, 1e-9);
        CHECK_NEAR(with.rank_wait_us - without.rank_wait_us, dp > 1 ? 3 : 0, 1e-9);
        tdm_plan_result_free(&with);
        tdm_plan_result_free(&without);
    }
    tdm_plan_model_free(&m);
    tdm_plan_trace_in in = trace_in(&t, p, 2);
    const int weight[2] = {2, 0};
    in.step_weight = weight, in.n_step_weight = 2;
    tdm_error err;
    if (tdm_plan_from_trace(&in, &m, t.notes, sizeof t.notes, &err) == 0) {
        CHECK_NEAR(m.agree_us, 5, 1e-9);
        tdm_plan_model_free(&m);
    } else {
        CHECK(0, "%s", err.msg);
    }
    trace_remove(&t);
}

/* The communication threads' CPU per MB moved, from analysis.json beside the trace: their polls while compute
 * waited on them (wait_poll_ms) took no core from compute and are left out: (3 + 1 - 2.5) of 3 + 1 ms a rank. */
static void test_trace_cpu_leaves_out_wait_polls(void) {
    double per_mb[2] = {NAN, NAN};
    for (int k = 0; k < 2; k++) {
        test_trace t;
        if (trace_begin(&t) != 0) return;
        for (int rk = 0; rk < 2; rk++) {
            trace_rank(&t, rk, 20);
            trace_ev(&t, "grad all-reduce", "wait", 2, 51, 38, 0);
            trace_ev(&t, "grad all-reduce", "comm", 0, 51, 38, 0);
            trace_ev(&t, "optimizer", "phase", 2, 90, 10, 0);
        }
        const char *poll = k ? ", \"wait_poll_ms\": 2.5" : "";
        char json[512];
        snprintf(json, sizeof json,
                 "\"shared_memory\": true, \"threads\": ["
                 "{\"rank\": 0, \"name\": \"comm\", \"user_ms\": 3.0, \"system_ms\": 1.0%s}, "
                 "{\"rank\": 1, \"name\": \"comm\", \"user_ms\": 3.0, \"system_ms\": 1.0%s}, "
                 "{\"rank\": 0, \"name\": \"compute\", \"user_ms\": 50.0, \"system_ms\": 0.0}]",
                 poll, poll);
        trace_analysis(&t, json);
        tdm_plan_param p[] = {{250, 0, 1}, {250, 1, 1}};
        tdm_plan_model m;
        if (trace_model(&t, p, 2, &m)) {
            per_mb[k] = m.measured_cpu_us_per_mb;
            tdm_plan_model_free(&m);
        }
        trace_remove(&t);
    }
    CHECK(per_mb[0] > 0, "CPU per MB %g", per_mb[0]);
    CHECK_NEAR(per_mb[1] / per_mb[0], 1.5 / 4.0, 1e-9);
}

/* Two buckets' all-reduces, one after the other, in a written two-rank trace: the fast rank 0 posts
 * at 51 and its buckets take 5 and 30 us; the slow rank 1 posts at 71 and sees 15 and 2. The least
 * per collective (5 + 2) would come from different ranks and add up to less than either rank saw;
 * the link is fitted to the rank with the least in all, rank 1: 1000 bytes on the wire per bucket,
 * 15 and 2 us, so g = (1000 x 15 + 1000 x 2) / (2 x 1000^2) us per byte. */
static void test_trace_one_rank_per_side(void) {
    test_trace t;
    if (trace_begin(&t) != 0) return;
    static const double comm[2][2][2] = {{{51, 56}, {56, 86}}, {{71, 86}, {86, 88}}}; /* [rank][bucket] t0, t1 */
    for (int rk = 0; rk < 2; rk++) {
        const double fb = rk ? 70 : 50;
        trace_rank(&t, rk, fb - 30);
        trace_ev(&t, "grad sync", "phase", 2, fb + 1, 88 - fb, 0);
        for (int b = 0; b < 2; b++)
            trace_ev(&t, "grad all-reduce", "comm", 0, comm[rk][b][0], comm[rk][b][1] - comm[rk][b][0], b);
        trace_ev(&t, "optimizer", "phase", 2, 90, 10, 0);
    }
    tdm_plan_param p[] = {{250, 0, 1}, {250, 1, 1}};
    tdm_plan_model m;
    tdm_error err;
    if (trace_model(&t, p, 2, &m)) {
        int64_t *padded = NULL;
        int nb = tdm_plan_buckets(&m, &m.baseline, &padded, NULL, &err);
        CHECK(nb == 2 && padded[0] == 250 && padded[1] == 250, "two buckets of 250: %d", nb);
        free(padded);
        CHECK_NEAR(m.baseline.link.gbps, 2000.0 / 17 / 125, 1e-9);
        CHECK_NEAR(m.baseline.link.alpha_us, 0, 1e-12);
        tdm_plan_model_free(&m);
    }
    trace_remove(&t);
}

/* A trace's bucket count is read as the least --ddp-num-buckets that cuts as many: parameters of
 * 300, 50, 50, 50, 50 elements (bucketed last first) make 3 buckets with --ddp-num-buckets 5
 * (size 100: 50+50, 50+50, 300), 2 with 3 or 4. Their all-reduces fly one after the other on 2
 * ranks, 400, 400 and 1200 bytes on the wire in 14, 14 and 22 us: alone, in two sizes, so the
 * latency is fitted too, exactly 5 us per ring step (2 steps) and 0.01 us per byte (0.8 Gbit/s). */
static void test_trace_bucket_count(void) {
    test_trace t;
    if (trace_begin(&t) != 0) return;
    for (int rk = 0; rk < 2; rk++) {
        trace_rank(&t, rk, 10);
        trace_ev(&t, "grad sync", "phase", 2, 41, 50, 0);
        trace_ev(&t, "grad all-reduce", "comm", 0, 41, 14, 0);
        trace_ev(&t, "grad all-reduce", "comm", 0, 55, 14, 1);
        trace_ev(&t, "grad all-reduce", "comm", 0, 69, 22, 2);
        trace_ev(&t, "optimizer", "phase", 2, 92, 8, 0);
    }
    tdm_plan_param p[] = {{300, 0, 1}, {50, 1, 1}, {50, 1, 1}, {50, 1, 1}, {50, 1, 1}};
    tdm_plan_model m;
    tdm_error err;
    if (trace_model(&t, p, 5, &m)) {
        CHECK(m.baseline.num_buckets == 5, "--ddp-num-buckets %d, expected 5", m.baseline.num_buckets);
        CHECK(strstr(t.notes, "3 bucket(s) (as --ddp-num-buckets 5 cuts them)") != NULL, "%s", t.notes);
        int64_t *padded = NULL;
        int nb = tdm_plan_buckets(&m, &m.baseline, &padded, NULL, &err);
        CHECK(nb == 3 && padded[0] == 100 && padded[1] == 100 && padded[2] == 300, "buckets %d", nb);
        free(padded);
        CHECK_NEAR(m.baseline.link.alpha_us, 5, 1e-9);
        CHECK_NEAR(m.baseline.link.gbps, 0.8, 1e-9);
        tdm_plan_model_free(&m);
    }
    trace_remove(&t);
}

/* A run of --ddp-bucket-size 15 with the parameters of test_match_cut: its trace says each bucket's bytes (80,
 * 4040), which no bucket count cuts; the baseline takes a size that does, 20 elements (or 11 to 19). Bytes that no
 * setting cuts leave the count and a note. */
static void test_trace_bucket_size(void) {
    for (int k = 0; k < 2; k++) {
        test_trace t;
        if (trace_begin(&t) != 0) return;
        for (int rk = 0; rk < 2; rk++) {
            trace_rank(&t, rk, 10);
            trace_ev(&t, "grad sync", "phase", 2, 41, 50, 0);
            trace_coll(&t, "grad all-reduce", 41, 14, 0, k ? 100 : 80);
            trace_coll(&t, "grad all-reduce", 55, 22, 1, k ? 4020 : 4040);
            trace_ev(&t, "optimizer", "phase", 2, 92, 8, 0);
        }
        tdm_plan_param p[] = {{1000, 0, 1}, {10, 1, 1}, {10, 1, 1}, {10, 1, 1}};
        tdm_plan_model m;
        if (trace_model(&t, p, 4, &m)) {
            if (k == 0) {
                CHECK(m.baseline.bucket_size == 20 && m.baseline.num_buckets == 0, "%lld %d",
                      (long long)m.baseline.bucket_size, m.baseline.num_buckets);
                CHECK(
                    strstr(t.notes,
                           "2 bucket(s) (as --ddp-bucket-size 20 cuts them, or any from 11 to 20: from their bytes)") !=
                            NULL &&
                        strstr(t.notes, "otherwise") == NULL,
                    "%s", t.notes);
            } else {
                CHECK(strstr(t.notes, "cut its buckets otherwise than these settings do (bucket 0 moved 100 bytes") !=
                          NULL,
                      "%s", t.notes);
            }
            tdm_plan_model_free(&m);
        }
        trace_remove(&t);
    }
}

/* tandem doctor's report: each mode's line as the printed flags take it (a loss below 0 as 0, a speed above
 * 1 as 1, below 0.001 as 0.001), where it was measured, and one sentence for what is not a usable report. */
/* Two traced steps that differ (unit 0's backward 20 and 40 us, the gradient all-reduce after it 39 and 19 us)
 * on two alike ranks, built at step weights: each once gives their means, {1, 0} the first step's, {0, 2} the
 * second's, {2, 1} the first counted twice; the trace is read once (tdm_plan_trace_read) for every build. */
static void test_trace_step_weights(void) {
    test_trace t;
    if (trace_begin(&t) != 0) return;
    for (int rk = 0; rk < 2; rk++) {
        trace_threads(&t, rk);
        for (int k = 0; k < 2; k++) {
            const double s = 200 * k, b = k ? 40 : 20, fb = 30 + b;
            trace_ev(&t, "step", "phase", 2, s, 100, 1);
            trace_ev(&t, "forward-backward", "phase", 2, s, fb, 0);
            trace_ev(&t, "u0", "layer", 2, s, 10, 0);
            trace_ev(&t, "u1", "layer", 2, s + 10, 10, 0);
            trace_ev(&t, "u1", "layer", 2, s + 20, 10, 1);
            trace_ev(&t, "u0", "layer", 2, s + 30, b, 1);
            trace_ev(&t, "grad sync", "phase", 2, s + fb + 1, 89 - fb, 0);
            trace_ev(&t, "grad all-reduce", "wait", 2, s + fb + 1, 89 - fb, 0);
            trace_ev(&t, "grad all-reduce", "comm", 0, s + fb + 1, 89 - fb, 0);
            trace_ev(&t, "optimizer", "phase", 2, s + 90, 10, 0);
        }
    }
    trace_end(&t);
    tdm_prof_trace pt;
    tdm_error err;
    if (tdm_plan_trace_read(t.dir, &pt, &err) != 0) {
        CHECK(0, "%s", err.msg);
        trace_remove(&t);
        return;
    }
    static const int weights[3][2] = {{1, 0}, {0, 2}, {2, 1}};
    tdm_plan_param p[] = {{250, 0, 1}, {250, 1, 1}};
    for (int c = 0; c < 4; c++) {
        const double w0 = c < 3 ? weights[c][0] : 1, w1 = c < 3 ? weights[c][1] : 1;
        tdm_plan_trace_in in = trace_in(&t, p, 2);
        in.trace = &pt, in.step_weight = c < 3 ? weights[c] : NULL, in.n_step_weight = 2;
        tdm_plan_model m;
        if (tdm_plan_from_trace(&in, &m, NULL, 0, &err) != 0) {
            CHECK(0, "weights %g %g: %s", w0, w1, err.msg);
            continue;
        }
        CHECK(m.n_traced_steps == 2, "%d traced steps", m.n_traced_steps);
        CHECK_NEAR(m.units[0].bwd_us, (20 * w0 + 40 * w1) / (w0 + w1), 1e-9);
        CHECK_NEAR(m.units[1].bwd_us, 10, 1e-9);
        CHECK_NEAR(m.measured_step_us, 100, 1e-9);
        /* one collective of 2000 bytes on the wire, its own time the steps' weighted mean */
        const double tau = (39 * w0 + 19 * w1) / (w0 + w1);
        CHECK_NEAR(m.baseline.link.gbps, 2000.0 / tau / 125, 1e-9);
        tdm_plan_model_free(&m);
    }
    CHECK(pt.n > 0, "the caller's trace was freed by a build");
    tdm_prof_trace_free(&pt);
    trace_remove(&t);
}

/* An overlapped baseline (two alike ranks): bucket 0 (unit 1's gradients) is posted when unit 1's backward ends,
 * at 30, and flies 30 us beside unit 0's 40 us backward; bucket 1 is posted after the backward, at 71, and flies
 * 10 us with no compute beside it. The second measures the link (1000 bytes on the wire in 10 us), the first how
 * fast a collective moves beside compute: its 10 us alone took 30, a third of its speed. Given a speed, the link
 * is fitted to both as before. */
static void test_trace_speed_from_overlap(void) {
    for (int given = 0; given < 2; given++) {
        test_trace t;
        if (trace_begin(&t) != 0) return;
        for (int rk = 0; rk < 2; rk++) {
            trace_rank(&t, rk, 40);
            trace_posted(&t, 30, 0);
            trace_ev(&t, "grad all-reduce", "comm", 0, 30, 30, 0);
            trace_ev(&t, "grad sync", "phase", 2, 71, 11, 0);
            trace_ev(&t, "grad all-reduce", "wait", 2, 71, 10, 1);
            trace_ev(&t, "grad all-reduce", "comm", 0, 71, 10, 1);
            trace_ev(&t, "optimizer", "phase", 2, 90, 10, 0);
        }
        trace_end(&t);
        tdm_plan_param p[] = {{250, 0, 1}, {250, 1, 1}};
        tdm_plan_trace_in in = trace_in(&t, p, 2);
        in.speed_beside = given ? 0.5 : 0;
        tdm_plan_model m;
        tdm_error err;
        if (tdm_plan_from_trace(&in, &m, t.notes, sizeof t.notes, &err) != 0) {
            CHECK(0, "%s", err.msg);
            trace_remove(&t);
            continue;
        }
        CHECK(m.baseline.overlap_grad == 1 && m.baseline.dp == 2, "overlap %d dp %d", m.baseline.overlap_grad,
              m.baseline.dp);
        if (!given) {
            CHECK_NEAR(m.baseline.link.gbps, 1000.0 / 10 / 125, 1e-9);
            CHECK_NEAR(m.speed_beside, 10.0 / 30, 1e-9);
            CHECK(strstr(t.notes, "the 1 collective(s) that flew with no compute beside them fit the link") != NULL,
                  "%s", t.notes);
        } else { /* 30 us beside at 0.5 is 15 alone; with 10: 25 us for 2000 bytes */
            CHECK_NEAR(m.speed_beside, 0.5, 1e-12);
            CHECK_NEAR(m.baseline.link.gbps, 2000.0 / 25 / 125, 1e-9);
        }
        tdm_plan_model_free(&m);
        trace_remove(&t);
    }
}

/* Two overlapped gradient collectives in flight together: bucket 0's from 30 to 70 us beside the backward (which
 * ends at 60), bucket 1's posted at 60 and done at 85. Over a network the link serves a rank's collectives in the order
 * posted: bucket 0 had it alone (40 us), bucket 1 from 70 (15 us), and bucket 1, the one with no compute beside
 * it, measures the link. On shared memory the 10 us they shared are split: 35 and 20, the link 4/3 slower. */
static void test_trace_network_in_order(void) {
    double gbps[2] = {0, 0}, speed[2] = {0, 0};
    for (int shm = 0; shm < 2; shm++) {
        test_trace t;
        if (trace_begin(&t) != 0) return;
        for (int rk = 0; rk < 2; rk++) {
            trace_rank(&t, rk, 30);
            for (int b = 0; b < 2; b++) trace_posted(&t, b ? 60 : 30, b);
            trace_ev(&t, "grad reduce-scatter", "comm", 0, 30, 40, 0);
            trace_ev(&t, "grad reduce-scatter", "comm", 0, 60, 25, 1);
            trace_ev(&t, "grad sync", "phase", 2, 60, 26, 0);
            trace_ev(&t, "grad reduce-scatter", "wait", 2, 60, 25, 1);
            trace_ev(&t, "optimizer", "phase", 2, 86, 10, 0);
        }
        trace_analysis(&t, shm ? "\"shared_memory\": true" : "\"shared_memory\": false");
        tdm_plan_param p[] = {{250, 0, 1}, {250, 1, 1}};
        tdm_plan_model m;
        if (trace_model(&t, p, 2, &m)) {
            CHECK(m.baseline.overlap_grad, "overlap-grad-reduce %d", m.baseline.overlap_grad);
            gbps[shm] = m.baseline.link.gbps, speed[shm] = m.speed_beside;
            tdm_plan_model_free(&m);
        }
        trace_remove(&t);
    }
    /* bucket 0 alone takes what bucket 1 took (the same size): 15 us over a network, of its 40 the 10 without
     * compute beside it are at full speed, so the 30 beside did the other 5: 1/6; on shared memory 20 alone, 35
     * own: (20 - 35 x 0.25) / (35 x 0.75) = 3/7 */
    CHECK_NEAR(gbps[0] / gbps[1], 20.0 / 15, 1e-9);
    CHECK_NEAR(speed[0], 1.0 / 6, 1e-9);
    CHECK_NEAR(speed[1], 3.0 / 7, 1e-9);
}

/* An overlapped run over a network, distributed optimizer: bucket 0's reduce-scatter is posted at 30 beside unit 0's
 * backward (to 70), bucket 1's at 70; the library moves both as it goes and completes bucket 0 at 75, bucket 1 at
 * 82. Taken in the order posted, bucket 1 had the link for 7 us, less than its 10 alone: per collective the link
 * comes out too fast and the speed beside compute too slow. By sides: the all-gathers, posted at once after the
 * optimizer with no compute beside them, kept the link busy 20 us for their 1024 bytes on the wire; the
 * reduce-scatters moved as many in 52 us in flight, 40 of them beside compute: 20 = 12 + 40 v, v = 0.2. On shared
 * memory the per-collective fit stays. */
static void test_trace_network_sides(void) {
    for (int shm = 0; shm < 2; shm++) {
        test_trace t;
        if (trace_begin(&t) != 0) return;
        for (int rk = 0; rk < 2; rk++) {
            trace_threads(&t, rk);
            trace_ev(&t, "step", "phase", 2, 0, 120, 1);
            trace_ev(&t, "forward-backward", "phase", 2, 0, 70, 0);
            trace_ev(&t, "u0", "layer", 2, 0, 10, 0);
            trace_ev(&t, "u1", "layer", 2, 10, 10, 0);
            trace_ev(&t, "u1", "layer", 2, 20, 10, 1);
            trace_ev(&t, "u0", "layer", 2, 30, 40, 1);
            trace_posted(&t, 30, 0);
            trace_posted(&t, 70, 1);
            trace_coll(&t, "grad reduce-scatter", 30, 45, 0, 1024);
            trace_coll(&t, "grad reduce-scatter", 70, 12, 1, 1024);
            trace_ev(&t, "grad sync", "phase", 2, 70, 13, 0);
            trace_ev(&t, "grad reduce-scatter", "wait", 2, 70, 12, 1);
            trace_ev(&t, "optimizer", "phase", 2, 84, 27, 0);
            trace_coll(&t, "param all-gather", 90, 10, 0, 1024);
            trace_coll(&t, "param all-gather", 90, 20, 1, 1024);
            trace_ev(&t, "param all-gather", "wait", 2, 90, 20, 1);
        }
        trace_analysis(&t, shm ? "\"shared_memory\": true" : "\"shared_memory\": false");
        tdm_plan_param p[] = {{250, 0, 1}, {250, 1, 1}};
        tdm_plan_model m;
        if (trace_model(&t, p, 2, &m)) {
            CHECK(m.baseline.distributed && m.baseline.overlap_grad && !m.baseline.overlap_param,
                  "distributed %d, overlap-grad-reduce %d, overlap-param-gather %d", m.baseline.distributed,
                  m.baseline.overlap_grad, m.baseline.overlap_param);
            const int by_sides = strstr(t.notes, "fitted to each side's") != NULL;
            if (!shm) {
                CHECK(by_sides, "%s", t.notes);
                CHECK_NEAR(m.baseline.link.gbps, 1024.0 / 20 / 125, 1e-9);
                CHECK_NEAR(m.speed_beside, 0.2, 1e-9);
            } else {
                CHECK(!by_sides && strstr(t.notes, "flew with no compute beside them fit the link") != NULL, "%s",
                      t.notes);
            }
            tdm_plan_model_free(&m);
        }
        trace_remove(&t);
    }
}

/* An overlapped all-gather, posted by both ranks at 0 and done at 50 us when the later of them reaches its wait:
 * rank 0 computes 10 us and waits 40, rank 1 computes 45 and waits 5. Rank 1 waited least: its record is the
 * transfer's (rank 0's adds the wait for rank 1). The reduce-scatter after the backward flew with no compute beside
 * it: 1024 bytes on the wire in 20 us, the link; the all-gather moves as many, 20 us alone = 5 + 45 x speed: 1/3. */
static void test_trace_gather_waited_last(void) {
    test_trace t;
    if (trace_begin(&t) != 0) return;
    for (int rk = 0; rk < 2; rk++) {
        const double fwd0 = rk ? 45 : 10;
        trace_threads(&t, rk);
        trace_ev(&t, "step", "phase", 2, 0, 200, 1);
        trace_ev(&t, "forward-backward", "phase", 2, 0, 150, 0);
        trace_coll(&t, "param all-gather", 0, 50, 0, 2048);
        trace_ev(&t, "u0", "layer", 2, 0, fwd0, 0);
        trace_ev(&t, "param all-gather", "wait", 2, fwd0, 50 - fwd0, 0);
        trace_ev(&t, "u1", "layer", 2, 50, 10, 0);
        trace_ev(&t, "u1", "layer", 2, 60, 10, 1);
        trace_ev(&t, "u0", "layer", 2, 70, 10, 1);
        trace_ev(&t, "grad sync", "phase", 2, 151, 21, 0);
        trace_ev(&t, "grad reduce-scatter", "wait", 2, 151, 20, 0);
        trace_coll(&t, "grad reduce-scatter", 151, 20, 0, 2048);
        trace_ev(&t, "optimizer", "phase", 2, 175, 15, 0);
    }
    tdm_plan_param p[] = {{250, 0, 1}, {250, 1, 1}};
    tdm_plan_model m;
    if (trace_model(&t, p, 2, &m)) {
        CHECK(m.baseline.distributed && m.baseline.overlap_param, "distributed %d, overlap-param-gather %d",
              m.baseline.distributed, m.baseline.overlap_param);
        CHECK_NEAR(m.baseline.link.gbps, 1024.0 / 20 / 125, 1e-9);
        CHECK_NEAR(m.speed_beside, 1.0 / 3, 1e-9);
        tdm_plan_model_free(&m);
    }
    trace_remove(&t);
}

/* Two steps of two buckets with both overlap flags: each step's optimizer posts bucket 1's all-gather inside the step's
 * record and bucket 0's just after it ends, before the next step begins (as a run's records may fall). Both count
 * to the step that posted them: their bytes add up to the model's buckets. */
static void test_trace_gather_between_steps(void) {
    test_trace t;
    if (trace_begin(&t) != 0) return;
    for (int rk = 0; rk < 2; rk++) {
        trace_threads(&t, rk);
        for (int k = 0; k < 2; k++) {
            const double s = 101.0 * k;
            trace_ev(&t, "step", "phase", 2, s, 100, k + 1);
            trace_ev(&t, "forward-backward", "phase", 2, s, 60, 0);
            if (k) trace_ev(&t, "param all-gather", "wait", 2, s, 1, 1);
            trace_ev(&t, "u0", "layer", 2, s + 1, 9, 0);
            trace_ev(&t, "u1", "layer", 2, s + 10, 10, 0);
            trace_ev(&t, "u1", "layer", 2, s + 20, 10, 1);
            trace_coll(&t, "grad reduce-scatter", s + 30, 10, 0, 1024);
            trace_ev(&t, "u0", "layer", 2, s + 30, 30, 1);
            trace_ev(&t, "grad sync", "phase", 2, s + 61, 19, 0);
            trace_ev(&t, "grad reduce-scatter", "wait", 2, s + 61, 10, 1);
            trace_coll(&t, "grad reduce-scatter", s + 61, 10, 1, 1024);
            trace_ev(&t, "optimizer", "phase", 2, s + 80, 20, 0);
            trace_coll(&t, "param all-gather", s + 99, 2, 1, 1024);
            trace_coll(&t, "param all-gather", s + 100.5, 10, 0, 1024);
        }
    }
    tdm_plan_param p[] = {{250, 0, 1}, {250, 1, 1}};
    tdm_plan_model m;
    if (trace_model(&t, p, 2, &m)) {
        CHECK(m.baseline.distributed && m.baseline.overlap_param && m.baseline.num_buckets == 2,
              "distributed %d, overlap-param-gather %d, %d buckets", m.baseline.distributed, m.baseline.overlap_param,
              m.baseline.num_buckets);
        CHECK(strstr(t.notes, "bytes too") != NULL, "the buckets' bytes read: %s", t.notes);
        tdm_plan_model_free(&m);
    }
    trace_remove(&t);
}

/* A distributed baseline without overlap over a network, inline progress: two reduce-scatters posted together after
 * the backward take 25 us, two all-gathers of the same bytes after the optimizer 20: posted together they ran 1.25
 * times as long, and the link is the all-gathers' (1024 bytes on the wire in 20 us). On shared memory (where a
 * reduce-scatter also sums), or with a communication thread, nothing is read from the difference. */
static void test_trace_grads_together(void) {
    static const char *const info[4] = {"\"shared_memory\": false, \"comm_progress\": \"inline\"",
                                        "\"shared_memory\": true, \"comm_progress\": \"inline\"",
                                        "\"shared_memory\": false, \"comm_progress\": \"thread\"",
                                        "\"shared_memory\": false"}; /* the last: --comm-progress inline */
    for (int shm = 0; shm < 4; shm++) {
        test_trace t;
        if (trace_begin(&t) != 0) return;
        for (int rk = 0; rk < 2; rk++) {
            trace_rank(&t, rk, 20);
            trace_ev(&t, "grad sync", "phase", 2, 51, 26, 0);
            for (int b = 0; b < 2; b++) trace_coll(&t, "grad reduce-scatter", 51, 25, b, 1024);
            trace_ev(&t, "optimizer", "phase", 2, 77, 2, 0);
            for (int b = 0; b < 2; b++) trace_coll(&t, "param all-gather", 79, 20, b, 1024);
        }
        trace_end(&t);
        trace_analysis(&t, info[shm]);
        tdm_plan_param p[] = {{250, 0, 1}, {250, 1, 1}};
        tdm_plan_trace_in in = trace_in(&t, p, 2);
        in.comm_progress = shm == 3 ? "inline" : NULL;
        tdm_plan_model m;
        tdm_error err;
        if (tdm_plan_from_trace(&in, &m, t.notes, sizeof t.notes, &err) != 0) {
            CHECK(0, "%s", err.msg);
        } else {
            CHECK(m.baseline.distributed && !m.baseline.overlap_grad, "distributed %d", m.baseline.distributed);
            if (shm == 0 || shm == 3) {
                CHECK_NEAR(m.grad_together, 1.25, 1e-9);
                CHECK_NEAR(m.baseline.link.gbps, 1024.0 / 20 / 125, 1e-9);
                CHECK(strstr(t.notes, "the 2 reduce-scatters, posted together after the backward, took 1.250 times") !=
                          NULL,
                      "%s", t.notes);
                tdm_plan_result r;
                CHECK(tdm_plan_simulate(&m, &m.baseline, &r, &err) == 0, "%s", err.msg);
                CHECK(r.n_colls == 4 && fabs(r.colls[1].end_us - r.colls[0].start_us - 25) < 1e-6,
                      "the replay's reduce-scatters take %g us",
                      r.n_colls ? r.colls[1].end_us - r.colls[0].start_us : 0);
                tdm_plan_result_free(&r);
            } else {
                CHECK(m.grad_together == 0, "%g with %s", m.grad_together, info[shm]);
                CHECK_NEAR(m.baseline.link.gbps, 2048.0 / 45 / 125, 1e-9);
            }
            tdm_plan_model_free(&m);
        }
        trace_remove(&t);
    }
}

static void test_doctor_report(void) {
    const char *good = "{\"tandem_doctor\": 1, \"ranks\": 2, \"shared_memory\": false, \"transport\": \"tcp\",\n"
                       " \"beside_compute\": {\"mb\": 2.5, \"compute_ms\": 300, \"comm_thread_nice\": 10,\n"
                       "  \"thread\": {\"compute_lost_us_per_mb\": 852.3, \"speed\": 0.875, \"moved_mb\": 68},\n"
                       "  \"inline\": {\"compute_lost_us_per_mb\": -12, \"speed\": 1.046, \"moved_mb\": 39}}}";
    tdm_plan_doctor d;
    tdm_error err;
    CHECK(tdm_plan_doctor_parse(good, strlen(good), "d.json", "thread", &d, &err) == 0, "%s", err.msg);
    CHECK(d.cpu_us_per_mb == 852.3 && d.speed == 0.875 && d.mb == 2.5 && d.comm_thread_nice == 10 && d.ranks == 2 &&
              d.shared_memory == 0 && !strcmp(d.transport, "tcp") && !strcmp(d.mode, "thread"),
          "%g %g %g %d %d %d %s", d.cpu_us_per_mb, d.speed, d.mb, d.comm_thread_nice, d.ranks, d.shared_memory,
          d.transport);
    /* 852.3 us x 68 MB lost beside 300 ms of compute alone: 57.96 of 357.96 ms */
    CHECK_NEAR(d.lost_share, 852.3 * 68 / 1e3 / (300 + 852.3 * 68 / 1e3), 1e-12);
    CHECK(tdm_plan_doctor_parse(good, strlen(good), "d.json", "inline", &d, &err) == 0, "%s", err.msg);
    CHECK(d.cpu_us_per_mb == 0 && d.speed == 1 && d.lost_share == 0, "inline %g %g %g", d.cpu_us_per_mb, d.speed,
          d.lost_share);
    const char *slow = "{\"tandem_doctor\": 1, \"beside_compute\": {\"thread\": {\"compute_lost_us_per_mb\": 5, "
                       "\"speed\": 0.0002}}}";
    CHECK(tdm_plan_doctor_parse(slow, strlen(slow), "s.json", "thread", &d, &err) == 0 && d.speed == 0.001 &&
              isnan(d.mb) && isnan(d.lost_share) && d.comm_thread_nice == -1 && d.ranks == 0 && d.shared_memory == -1,
          "%g %g %d", d.speed, d.mb, d.comm_thread_nice);
    static const struct {
        const char *text, *mode, *says;
    } bad[] = {
        {"{\"ranks\": 2}", "thread", "b.json: no \"tandem_doctor\" version"},
        {"{\"tandem_doctor\": 2}", "thread", "tandem_doctor 2: expected version 1"},
        {"{\"tandem_doctor\": 1, \"ranks\": 1}", "thread", "no beside_compute figures"},
        {"{\"tandem_doctor\": 1, \"beside_compute\": {\"thread\": {}}}", "inline", "has no \"inline\" figures"},
        {"{\"tandem_doctor\": 1, \"beside_compute\": {\"thread\": {\"speed\": 0.5}}}", "thread",
         "thread.compute_lost_us_per_mb: expected a number"},
        {"{\"tandem_doctor\": 1, \"beside_compute\": {\"thread\": {\"compute_lost_us_per_mb\": 1, \"speed\": null}}}",
         "thread", "not measured (fewer than 3 collectives"},
        {"{\"tandem_doctor\": 1, \"beside_compute\": {\"thread\": {\"compute_lost_us_per_mb\": 1, \"speed\": -1}}}",
         "thread", "expected a number above 0"},
        {"{\"tandem_doctor\": 1,", "thread", "expected tandem doctor's JSON report"},
        {"{\"tandem_doctor\": 1}", "polling", "progress mode 'polling': expected thread or inline"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = tdm_plan_doctor_parse(bad[i].text, strlen(bad[i].text), "b.json", bad[i].mode, &d, &err);
        CHECK(rc != 0 && strstr(err.msg, bad[i].says) && !strchr(err.msg, '\n'), "%zu: %s", i, err.msg);
    }
}

/* What analysis.json beside a trace says of the run, from the folder or the trace file; -1 and "" without it;
 * a file that does not parse, or holds a field of its own the profiler never writes, refused with one sentence. */
static void test_run_info(void) {
    char dir[] = "/tmp/tdm_test_run_info.XXXXXX", path[4200], trace[4200];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    tdm_plan_run_info ri;
    tdm_error err;
    double cpu_ms = 0;
    CHECK(tdm_plan_run_info_read(dir, &ri, &cpu_ms, &err) == 0, "no file: %s", err.msg);
    CHECK(ri.shared_memory == -1 && !ri.transport[0] && !ri.comm_progress[0] && ri.comm_thread_nice == -1 &&
              isnan(cpu_ms),
          "no file: %d %g", ri.shared_memory, cpu_ms);
    snprintf(path, sizeof path, "%s/analysis.json", dir);
    snprintf(trace, sizeof trace, "%s/trace.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "open %s", path);
    if (!f) return;
    fputs("{\"transport\": \"shared memory (btl vader)\", \"shared_memory\": true, \"comm_progress\": \"inline\", "
          "\"threads\": [{\"name\": \"compute\", \"user_ms\": 90}, {\"name\": \"comm0\", \"user_ms\": 20, "
          "\"system_ms\": 10.5, \"wait_poll_ms\": 4}, {\"name\": \"data\"}]}",
          f);
    fclose(f);
    CHECK(tdm_plan_run_info_read(dir, &ri, &cpu_ms, &err) == 0, "%s", err.msg);
    CHECK(ri.shared_memory == 1 && !strcmp(ri.transport, "shared memory (btl vader)") &&
              !strcmp(ri.comm_progress, "inline"),
          "%d %s %s", ri.shared_memory, ri.transport, ri.comm_progress);
    CHECK(fabs(cpu_ms - 26.5) < 1e-9, "the comm threads' CPU less their waiting polls: %g", cpu_ms);
    /* the trace file need not exist: its folder's analysis.json */
    CHECK(tdm_plan_run_info_read(trace, &ri, &cpu_ms, &err) == 0 && !strcmp(ri.comm_progress, "inline"),
          "from the trace's path: %s", ri.comm_progress);
    /* the communication thread's niceness: 0 to 19, whole */
    static const struct {
        const char *json;
        int nice;
    } nices[] = {{"{\"comm_progress\": \"thread\", \"comm_thread_nice\": 0}", 0}, {"{\"comm_thread_nice\": 19}", 19}};
    for (size_t i = 0; i < sizeof nices / sizeof nices[0]; i++) {
        f = fopen(path, "w");
        if (f) fputs(nices[i].json, f), fclose(f);
        CHECK(tdm_plan_run_info_read(dir, &ri, &cpu_ms, &err) == 0 && ri.comm_thread_nice == nices[i].nice, "%s: %d",
              nices[i].json, ri.comm_thread_nice);
    }
    static const struct {
        const char *json, *says;
    } bad[] = {
        {"{\"comm_progress\": \"thread\",", "expected a string key"},
        {"[1, 2]", "is not a JSON object"},
        {"{\"comm_progress\": \"sometimes\"}", "\"comm_progress\" other than"},
        {"{\"comm_progress\": 5}", "\"comm_progress\" other than"},
        {"{\"shared_memory\": \"yes\"}", "\"shared_memory\" that is not true or false"},
        {"{\"transport\": 3}", "\"transport\" that is not a string"},
        {"{\"comm_thread_nice\": 20}", "\"comm_thread_nice\" that is not a whole number"},
        {"{\"comm_thread_nice\": -1}", "\"comm_thread_nice\" that is not a whole number"},
        {"{\"comm_thread_nice\": 2.5}", "\"comm_thread_nice\" that is not a whole number"},
        {"{\"comm_thread_nice\": \"10\"}", "\"comm_thread_nice\" that is not a whole number"},
        {"{\"threads\": {}}", "\"threads\" that is not an array"},
        {"{\"threads\": [3]}", "a thread that is not an object"},
        {"{\"threads\": [{\"user_ms\": 1}]}", "a thread that is not an object with a \"name\""},
        {"{\"threads\": [{\"name\": \"comm0\", \"user_ms\": -1}]}", "not a number of 0 or more"},
        {"{\"threads\": [{\"name\": \"comm0\", \"system_ms\": \"1\"}]}", "not a number of 0 or more"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        f = fopen(path, "w");
        if (f) fputs(bad[i].json, f), fclose(f);
        const int rc = tdm_plan_run_info_read(dir, &ri, &cpu_ms, &err);
        CHECK(rc != 0 && strstr(err.msg, bad[i].says) && strstr(err.msg, "analysis.json") && !strchr(err.msg, '\n'),
              "%s: %d %s", bad[i].json, rc, rc ? err.msg : "");
    }
    unlink(path);
    rmdir(dir);
}

int main(void) {
    RUN(test_ring_formulas);
    RUN(test_buckets_as_layout);
    RUN(test_match_cut);
    RUN(test_confirm_flags);
    RUN(test_fully_hidden_and_exposed);
    RUN(test_grads_posted_together);
    RUN(test_cpu_taken_from_overlapped_compute);
    RUN(test_lost_share_in_flight_once);
    RUN(test_comm_thread_share);
    RUN(test_speed_beside);
    RUN(test_calibrate);
    RUN(test_param_gather_overlap);
    RUN(test_ranks_apart_wait);
    RUN(test_flags_and_bad_input);
    RUN(test_trace_bad_input);
    RUN(test_trace_slowest_rank);
    RUN(test_trace_cpu_leaves_out_wait_polls);
    RUN(test_trace_one_rank_per_side);
    RUN(test_trace_bucket_count);
    RUN(test_trace_bucket_size);
    RUN(test_trace_step_weights);
    RUN(test_trace_speed_from_overlap);
    RUN(test_trace_network_in_order);
    RUN(test_trace_network_sides);
    RUN(test_trace_grads_together);
    RUN(test_trace_ranks_apart);
    RUN(test_trace_last_rank_agree);
    RUN(test_trace_gather_waited_last);
    RUN(test_trace_gather_between_steps);
    RUN(test_doctor_report);
    RUN(test_run_info);
    return TEST_SUMMARY();
}
