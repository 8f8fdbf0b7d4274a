/* Unit tests for src/prof/analysis.c: interval arithmetic and the per-step overlap
 * analysis on hand-made event sets, whose answers are worked out by hand below. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "prof/analysis.h"
#include "prof/prof.h"

#define IV(a, b) ((tdm_prof_interval){(a), (b)})

static void test_union(void) {
    tdm_prof_interval v[] = {IV(5, 7), IV(0, 2), IV(1, 3), IV(3, 4), IV(6, 6), IV(10, 12), IV(11, 11.5)};
    int64_t n = tdm_prof_intervals_union(v, 7);
    CHECK(n == 3, "n = %lld", (long long)n);
    CHECK(v[0].t0 == 0 && v[0].t1 == 4, "touching intervals merge: [%g,%g)", v[0].t0, v[0].t1);
    CHECK(v[1].t0 == 5 && v[1].t1 == 7, "[%g,%g)", v[1].t0, v[1].t1);
    CHECK(v[2].t0 == 10 && v[2].t1 == 12, "nested interval absorbed");
    CHECK_NEAR(tdm_prof_intervals_length(v, n), 4 + 2 + 2, 1e-12);
    CHECK(tdm_prof_intervals_union(v, 0) == 0, "empty union");
}

static void test_intersect_subtract(void) {
    tdm_prof_interval a[] = {IV(0, 10), IV(20, 30)};
    tdm_prof_interval b[] = {IV(5, 25), IV(28, 40)};
    CHECK_NEAR(tdm_prof_intervals_intersect_length(a, 2, b, 2), 5 + 5 + 2, 1e-12);
    tdm_prof_interval out[4];
    int64_t n = tdm_prof_intervals_subtract(a, 2, b, 2, out);
    CHECK(n == 2, "n = %lld", (long long)n);
    CHECK(out[0].t0 == 0 && out[0].t1 == 5, "[%g,%g)", out[0].t0, out[0].t1);
    CHECK(out[1].t0 == 25 && out[1].t1 == 28, "[%g,%g)", out[1].t0, out[1].t1);
    /* a hole in the middle splits an interval */
    tdm_prof_interval c[] = {IV(0, 10)}, d[] = {IV(2, 3), IV(4, 5)};
    n = tdm_prof_intervals_subtract(c, 1, d, 2, out);
    CHECK(n == 3 && out[1].t0 == 3 && out[1].t1 == 4 && out[2].t0 == 5 && out[2].t1 == 10, "n = %lld", (long long)n);
    CHECK(tdm_prof_intervals_subtract(c, 1, NULL, 0, out) == 1 && out[0].t1 == 10, "minus nothing");
    CHECK(tdm_prof_intervals_subtract(NULL, 0, d, 2, out) == 0, "nothing minus something");
    CHECK_NEAR(tdm_prof_intervals_intersect_length(c, 1, NULL, 0), 0, 0);
    tdm_prof_interval e[] = {IV(-5, 3), IV(8, 20)};
    n = tdm_prof_intervals_clip(e, 2, 0, 10);
    CHECK(n == 2 && e[0].t0 == 0 && e[1].t1 == 10, "clip");
}

/* A record on rank 0; times in µs. */
static tdm_prof_rec R(int cat, int kind, const char *name, double t0, double t1) {
    return (tdm_prof_rec){.name = name,
                          .t0_us = t0,
                          .t1_us = t1,
                          .arg = -1,
                          .rank = 0,
                          .tid = kind,
                          .cat = (uint8_t)cat,
                          .thread_kind = (uint8_t)kind};
}

static void test_step_hidden_exposed(void) {
    /* One 100 µs step: forward 0-30, backward 30-70 with two layers, optimizer 80-95.
     * The compute thread waits for the last bucket 70-80 (inside "grad sync" phase 70-80).
     * Comm thread: bucket 0 reduce 40-60 (hidden), bucket 1 reduce 65-80 (5 hidden, 10 exposed).
     * Data wait 95-100 on the compute thread, and the loader works 0-100 (not compute). */
    enum { C = TDM_PROF_THREAD_COMPUTE, M = TDM_PROF_THREAD_COMM, L = TDM_PROF_THREAD_LOADER };
    tdm_prof_rec r[] = {
        R(TDM_PROF_PHASE, C, "step", 0, 100),
        R(TDM_PROF_PHASE, C, "forward", 0, 30),
        R(TDM_PROF_PHASE, C, "backward", 30, 70),
        R(TDM_PROF_LAYER, C, "layer 1", 30, 50), /* nested inside backward */
        R(TDM_PROF_LAYER, C, "layer 0", 50, 70),
        R(TDM_PROF_PHASE, C, "grad sync", 70, 80),
        R(TDM_PROF_WAIT, C, "wait bucket", 70, 80),
        R(TDM_PROF_PHASE, C, "optimizer", 80, 95),
        R(TDM_PROF_DATA, C, "data wait", 95, 100),
        R(TDM_PROF_COMM, M, "reduce_scatter", 40, 60),
        R(TDM_PROF_COMM, M, "reduce_scatter", 65, 80),
        R(TDM_PROF_WAIT, M, "comm idle", 0, 40), /* waits of other threads are not compute waits */
        R(TDM_PROF_DATA, L, "decode", 0, 100),
    };
    r[0].arg = 7;
    tdm_prof_step_stats s[2];
    int64_t n = tdm_prof_analyze_rank(r, sizeof r / sizeof *r, 0, s, 2);
    CHECK(n == 1, "steps = %lld", (long long)n);
    CHECK(s[0].step == 7, "step id from the envelope's arg");
    CHECK_NEAR(s[0].step_ms, 0.100, 1e-12);
    CHECK_NEAR(s[0].compute_ms, 0.085, 1e-12); /* 0-70 and 80-95 */
    CHECK_NEAR(s[0].comm_ms, 0.035, 1e-12);
    CHECK_NEAR(s[0].hidden_ms, 0.025, 1e-12);  /* 40-60 and 65-70 */
    CHECK_NEAR(s[0].exposed_ms, 0.010, 1e-12); /* 70-80 */
    /* the last collective (65-80) cannot overlap: 35 - 15 = 20 hideable, but 5 of the last
     * one did hide, so hideable = hidden = 25 and nothing more could have been gained */
    CHECK_NEAR(s[0].last_comm_ms, 0.015, 1e-12);
    CHECK_NEAR(s[0].hideable_ms, 0.025, 1e-12);
    CHECK_NEAR(s[0].ideal_step_ms, 0.100, 1e-12);
    CHECK_NEAR(s[0].data_wait_ms, 0.005, 1e-12);
    CHECK_NEAR(s[0].wait_ms, 0.010, 1e-12);
    CHECK_NEAR(s[0].overlap_efficiency, 1.0, 1e-12);
    /* other ranks' records are ignored */
    CHECK(tdm_prof_analyze_rank(r, sizeof r / sizeof *r, 1, s, 2) == 0, "rank 1 has no steps");
}

static void test_inline_progress_comm_on_compute_thread(void) {
    /* Inline progress: the compute thread itself posts and completes the collectives, so
     * their in-flight records sit on the compute thread, spanning layers it computes
     * meanwhile. Same step as above but with both reduce-scatters recorded on C: bucket 0
     * in flight 40-60 during layer computation (hidden), bucket 1 65-80 with the thread
     * waiting 70-80 (exposed). The answers must equal the threaded case's. */
    enum { C = TDM_PROF_THREAD_COMPUTE };
    tdm_prof_rec r[] = {
        R(TDM_PROF_PHASE, C, "step", 0, 100),          R(TDM_PROF_PHASE, C, "forward", 0, 30),
        R(TDM_PROF_PHASE, C, "backward", 30, 70),      R(TDM_PROF_LAYER, C, "layer 1", 30, 50),
        R(TDM_PROF_LAYER, C, "layer 0", 50, 70),       R(TDM_PROF_COMM, C, "reduce_scatter", 40, 60),
        R(TDM_PROF_COMM, C, "reduce_scatter", 65, 80), R(TDM_PROF_PHASE, C, "grad sync", 70, 80),
        R(TDM_PROF_WAIT, C, "wait bucket", 70, 80),    R(TDM_PROF_PHASE, C, "optimizer", 80, 95),
    };
    tdm_prof_step_stats s[1];
    CHECK(tdm_prof_analyze_rank(r, sizeof r / sizeof *r, 0, s, 1) == 1, "one step");
    CHECK_NEAR(s[0].compute_ms, 0.085, 1e-12);
    CHECK_NEAR(s[0].comm_ms, 0.035, 1e-12);
    CHECK_NEAR(s[0].hidden_ms, 0.025, 1e-12);
    CHECK_NEAR(s[0].exposed_ms, 0.010, 1e-12);
    CHECK_NEAR(s[0].overlap_efficiency, 1.0, 1e-12);
}

static void test_last_bucket_cannot_hide(void) {
    /* Forward 0-30, backward 30-60, waiting for the gradients 60-90, optimizer 90-100.
     * Bucket 1 reduce-scatter 35-70 (25 hidden, 10 exposed), bucket 0 (the first layers,
     * posted when the backward ends) 70-90, all exposed; a parameter all-gather 92-96 during
     * the optimizer starts later but is not a gradient collective. compute 70, comm 59,
     * hidden 29, last 20: hideable = min(59 - 20, 70) = 39, efficiency 29 / 39, ideal 100 -
     * (39 - 29) = 90 (the old bound, min(comm, compute) = 59, would have said 29 / 59). */
    enum { C = TDM_PROF_THREAD_COMPUTE, M = TDM_PROF_THREAD_COMM };
    tdm_prof_rec r[] = {
        R(TDM_PROF_PHASE, C, "step", 0, 100),
        R(TDM_PROF_PHASE, C, "forward", 0, 30),
        R(TDM_PROF_PHASE, C, "backward", 30, 60),
        R(TDM_PROF_WAIT, C, "wait grads", 60, 90),
        R(TDM_PROF_PHASE, C, "optimizer", 90, 100),
        R(TDM_PROF_COMM, M, "grad reduce-scatter", 35, 70),
        R(TDM_PROF_COMM, M, "grad reduce-scatter", 70, 90),
        R(TDM_PROF_COMM, M, "param all-gather", 92, 96),
    };
    tdm_prof_step_stats s;
    CHECK(tdm_prof_analyze_rank(r, sizeof r / sizeof *r, 0, &s, 1) == 1, "one step");
    CHECK_NEAR(s.compute_ms * 1e3, 70, 1e-9);
    CHECK_NEAR(s.comm_ms * 1e3, 59, 1e-9);
    CHECK_NEAR(s.hidden_ms * 1e3, 29, 1e-9);
    CHECK_NEAR(s.last_comm_ms * 1e3, 20, 1e-9);
    CHECK_NEAR(s.hideable_ms * 1e3, 39, 1e-9);
    CHECK_NEAR(s.ideal_step_ms * 1e3, 90, 1e-9);
    CHECK_NEAR(s.overlap_efficiency, 29.0 / 39.0, 1e-12);
}

static void test_last_bucket_own_transfer_only(void) {
    enum { C = TDM_PROF_THREAD_COMPUTE, M = TDM_PROF_THREAD_COMM };
    tdm_prof_step_stats s;
    /* No overlap: all three buckets posted when the backward ends at 60 and all in flight
     * from then on, seen to finish at 70, 80 and 90 while the compute thread waits. The last
     * one's record (60-90) shares the link with two others for 10 and with one for 10: its
     * own transfer is 10/3 + 10/2 + 10 = 18.33. compute 60, comm 30, hidden 0: hideable
     * min(30 - 18.33, 60) = 11.67, efficiency 0, ideal 100 - 11.67. (Its whole record as
     * the last bucket gave hideable 0: an ideal equal to the step and no efficiency.) */
    tdm_prof_rec a[] = {
        R(TDM_PROF_PHASE, C, "step", 0, 100),
        R(TDM_PROF_PHASE, C, "forward", 0, 30),
        R(TDM_PROF_PHASE, C, "backward", 30, 60),
        R(TDM_PROF_WAIT, C, "wait grads", 60, 90),
        R(TDM_PROF_PHASE, C, "optimizer", 90, 100),
        R(TDM_PROF_COMM, M, "grad all-reduce", 60, 90), /* started with the others, ended last */
        R(TDM_PROF_COMM, M, "grad all-reduce", 60, 70),
        R(TDM_PROF_COMM, M, "grad all-reduce", 60, 80),
    };
    const double own = 10.0 / 3 + 10.0 / 2 + 10;
    CHECK(tdm_prof_analyze_rank(a, sizeof a / sizeof *a, 0, &s, 1) == 1, "one step");
    CHECK_NEAR(s.comm_ms * 1e3, 30, 1e-9);
    CHECK_NEAR(s.hidden_ms * 1e3, 0, 1e-9);
    CHECK_NEAR(s.last_comm_ms * 1e3, own, 1e-9);
    CHECK_NEAR(s.hideable_ms * 1e3, 30 - own, 1e-9);
    CHECK_NEAR(s.ideal_step_ms * 1e3, 100 - (30 - own), 1e-9);
    CHECK_NEAR(s.overlap_efficiency, 0, 1e-12);

    /* Overlap onto a backlog: bucket 1 posted at 50 and in flight 50-68, bucket 0 posted when
     * the backward ends at 60 and in flight 60-75: shared 60-68 (4 of its own), alone 68-75
     * (7). compute 70 (0-60, 75-85), comm 25, hidden 10, last 11: hideable min(25 - 11, 70)
     * = 14, efficiency 10 / 14, ideal 85 - 4 = 81. */
    tdm_prof_rec b[] = {
        R(TDM_PROF_PHASE, C, "step", 0, 85),
        R(TDM_PROF_PHASE, C, "forward", 0, 30),
        R(TDM_PROF_PHASE, C, "backward", 30, 60),
        R(TDM_PROF_WAIT, C, "wait grads", 60, 75),
        R(TDM_PROF_PHASE, C, "optimizer", 75, 85),
        R(TDM_PROF_COMM, M, "grad reduce-scatter", 50, 68),
        R(TDM_PROF_COMM, M, "grad reduce-scatter", 60, 75),
    };
    CHECK(tdm_prof_analyze_rank(b, sizeof b / sizeof *b, 0, &s, 1) == 1, "one step");
    CHECK_NEAR(s.comm_ms * 1e3, 25, 1e-9);
    CHECK_NEAR(s.hidden_ms * 1e3, 10, 1e-9);
    CHECK_NEAR(s.last_comm_ms * 1e3, 11, 1e-9);
    CHECK_NEAR(s.hideable_ms * 1e3, 14, 1e-9);
    CHECK_NEAR(s.ideal_step_ms * 1e3, 81, 1e-9);
    CHECK_NEAR(s.overlap_efficiency, 10.0 / 14.0, 1e-12);

    /* The last one in flight 60-80 wholly beside an earlier one (50-90): half of its record
     * is its own, 10; the step clips nothing. compute 60, comm 40: hideable 30. */
    tdm_prof_rec c[] = {
        R(TDM_PROF_PHASE, C, "step", 0, 100),           R(TDM_PROF_PHASE, C, "backward", 0, 60),
        R(TDM_PROF_WAIT, C, "wait grads", 60, 90),      R(TDM_PROF_COMM, M, "grad all-reduce", 50, 90),
        R(TDM_PROF_COMM, M, "grad all-reduce", 60, 80),
    };
    CHECK(tdm_prof_analyze_rank(c, sizeof c / sizeof *c, 0, &s, 1) == 1, "one step");
    CHECK_NEAR(s.last_comm_ms * 1e3, 10, 1e-9);
    CHECK_NEAR(s.hideable_ms * 1e3, 30, 1e-9);
}

static void test_nothing_hideable_has_no_efficiency(void) {
    /* One bucket: the only gradient collective (55-90) is the last one, so nothing could hide
     * apart from it; 5 of it (55-60) happened to overlap the backward. hideable is raised to
     * hidden = 5, and hidden / hideable would read 100% for a run that could hide nothing:
     * the efficiency is undefined (NaN), on the step and on the mean. */
    enum { C = TDM_PROF_THREAD_COMPUTE, M = TDM_PROF_THREAD_COMM };
    tdm_prof_rec r[] = {
        R(TDM_PROF_PHASE, C, "step", 0, 100),           R(TDM_PROF_PHASE, C, "backward", 0, 60),
        R(TDM_PROF_WAIT, C, "wait grads", 60, 90),      R(TDM_PROF_PHASE, C, "optimizer", 90, 100),
        R(TDM_PROF_COMM, M, "grad all-reduce", 55, 90),
    };
    tdm_prof_step_stats s, m;
    CHECK(tdm_prof_analyze_rank(r, sizeof r / sizeof *r, 0, &s, 1) == 1, "one step");
    CHECK_NEAR(s.comm_ms * 1e3, 35, 1e-9);
    CHECK_NEAR(s.hidden_ms * 1e3, 5, 1e-9);
    CHECK_NEAR(s.last_comm_ms * 1e3, 35, 1e-9);
    CHECK_NEAR(s.free_hideable_ms * 1e3, 0, 1e-9);
    CHECK(isnan(s.overlap_efficiency), "efficiency with nothing hideable: %g, expected NaN", s.overlap_efficiency);
    tdm_prof_step_stats_mean(&s, 1, &m);
    CHECK(isnan(m.overlap_efficiency), "mean efficiency with nothing hideable: %g", m.overlap_efficiency);
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_prof_format_steps(&sb, &s, 1);
    CHECK(strstr(sb.data, "n/a") != NULL, "the table prints n/a:\n%s", sb.data);
    tdm_sb_free(&sb);
    /* no communication at all: undefined too */
    tdm_prof_rec q[] = {R(TDM_PROF_PHASE, C, "step", 0, 100), R(TDM_PROF_PHASE, C, "backward", 0, 100)};
    CHECK(tdm_prof_analyze_rank(q, 2, 0, &s, 1) == 1, "one step");
    CHECK(isnan(s.overlap_efficiency), "efficiency without communication: %g", s.overlap_efficiency);
}

/* An instant (MARK) on the compute thread at t µs. */
static tdm_prof_rec MARK(const char *name, double t) {
    tdm_prof_rec r = R(TDM_PROF_MARK, TDM_PROF_THREAD_COMPUTE, name, t, t);
    r.instant = 1;
    return r;
}

static void test_schedule_bound(void) {
    enum { C = TDM_PROF_THREAD_COMPUTE, M = TDM_PROF_THREAD_COMM };
    tdm_prof_step_stats s;
    /* --overlap-grad-reduce alone. Forward 0-30, backward 30-60; bucket 1 posted at 45 and
     * reduced 45-70, bucket 0 (the last) posted at 60 and reduced 70-80 while the compute
     * thread waits 60-80; optimizer 80-90, then both all-gathers posted at 90 and waited
     * for, 90-100. compute 70, comm 35 + 10 = 45, hidden 45-60 = 15, last 10.
     * The pooled bound counts everything: min(45 - 10, 70) = 35, efficiency 15 / 35.
     * The schedule's: gradients only behind the compute between the first and the last
     * post (45-60: 15), the all-gathers behind none: 15, efficiency 1, ideal = the step. */
    tdm_prof_rec g[] = {
        R(TDM_PROF_PHASE, C, "step", 0, 100),
        R(TDM_PROF_PHASE, C, "forward", 0, 30),
        R(TDM_PROF_PHASE, C, "backward", 30, 60),
        MARK("grad bucket posted", 45),
        MARK("grad bucket posted", 60),
        R(TDM_PROF_WAIT, C, "wait grads", 60, 80),
        R(TDM_PROF_PHASE, C, "optimizer", 80, 90),
        MARK("param all-gather posted", 90),
        MARK("param all-gather posted", 90),
        R(TDM_PROF_WAIT, C, "wait params", 90, 100),
        R(TDM_PROF_COMM, M, "grad reduce-scatter", 45, 70),
        R(TDM_PROF_COMM, M, "grad reduce-scatter", 70, 80),
        R(TDM_PROF_COMM, M, "param all-gather", 90, 95),
        R(TDM_PROF_COMM, M, "param all-gather", 95, 100),
    };
    CHECK(tdm_prof_analyze_rank(g, sizeof g / sizeof *g, 0, &s, 1) == 1, "one step");
    CHECK_NEAR(s.compute_ms * 1e3, 70, 1e-9);
    CHECK_NEAR(s.comm_ms * 1e3, 45, 1e-9);
    CHECK_NEAR(s.hidden_ms * 1e3, 15, 1e-9);
    CHECK_NEAR(s.last_comm_ms * 1e3, 10, 1e-9);
    CHECK_NEAR(s.hideable_ms * 1e3, 35, 1e-9);
    CHECK_NEAR(s.overlap_efficiency, 15.0 / 35.0, 1e-12);
    CHECK_NEAR(s.sched_hideable_ms * 1e3, 15, 1e-9);
    CHECK_NEAR(s.sched_ideal_step_ms * 1e3, 100, 1e-9);
    CHECK_NEAR(s.sched_overlap_efficiency, 1.0, 1e-12);

    /* Both flags. An all-gather posted in the previous step is in flight at the step's
     * start (-5..10), the forward posts the next at 10 (10-25); forward 0-30, backward
     * 30-60, buckets posted at 45 and 60, reduced 45-62 and 62-70 (the last), waited for
     * 60-70; optimizer 70-80. compute 70, comm 25 + 25 = 50, hidden 25 + 15 = 40, last 8.
     * Pooled: min(50 - 8, 70) = 42. Schedule: gradients min(25 - 8, 45-60: 15) = 15,
     * parameters min(25, 0-25: 25) = 25; 40 = hidden, efficiency 1. */
    tdm_prof_rec b[] = {
        R(TDM_PROF_PHASE, C, "step", 0, 80),
        R(TDM_PROF_PHASE, C, "forward", 0, 30),
        MARK("param all-gather posted", 10),
        R(TDM_PROF_PHASE, C, "backward", 30, 60),
        MARK("grad bucket posted", 45),
        MARK("grad bucket posted", 60),
        R(TDM_PROF_WAIT, C, "wait grads", 60, 70),
        R(TDM_PROF_PHASE, C, "optimizer", 70, 80),
        R(TDM_PROF_COMM, M, "param all-gather", -5, 10),
        R(TDM_PROF_COMM, M, "param all-gather", 10, 25),
        R(TDM_PROF_COMM, M, "grad reduce-scatter", 45, 62),
        R(TDM_PROF_COMM, M, "grad reduce-scatter", 62, 70),
    };
    tdm_prof_step_stats both;
    CHECK(tdm_prof_analyze_rank(b, sizeof b / sizeof *b, 0, &both, 1) == 1, "one step");
    CHECK_NEAR(both.hidden_ms * 1e3, 40, 1e-9);
    CHECK_NEAR(both.hideable_ms * 1e3, 42, 1e-9);
    CHECK_NEAR(both.sched_hideable_ms * 1e3, 40, 1e-9);
    CHECK_NEAR(both.sched_overlap_efficiency, 1.0, 1e-12);
    CHECK_NEAR(both.sched_ideal_step_ms * 1e3, 80, 1e-9);

    /* No overlap: every bucket posted after the backward (60), all-gathers after the
     * optimizer. The pooled bound still says 20 could hide (efficiency 0); the schedule
     * allows none (efficiency undefined, ideal = the step). */
    tdm_prof_rec n[] = {
        R(TDM_PROF_PHASE, C, "step", 0, 100),
        R(TDM_PROF_PHASE, C, "forward", 0, 30),
        R(TDM_PROF_PHASE, C, "backward", 30, 60),
        MARK("grad bucket posted", 60),
        MARK("grad bucket posted", 60),
        R(TDM_PROF_WAIT, C, "wait grads", 60, 80),
        R(TDM_PROF_PHASE, C, "optimizer", 80, 90),
        MARK("param all-gather posted", 90),
        R(TDM_PROF_WAIT, C, "wait params", 90, 100),
        R(TDM_PROF_COMM, M, "grad reduce-scatter", 60, 70),
        R(TDM_PROF_COMM, M, "grad reduce-scatter", 70, 80),
        R(TDM_PROF_COMM, M, "param all-gather", 90, 100),
    };
    tdm_prof_step_stats none;
    CHECK(tdm_prof_analyze_rank(n, sizeof n / sizeof *n, 0, &none, 1) == 1, "one step");
    CHECK_NEAR(none.hideable_ms * 1e3, 20, 1e-9);
    CHECK_NEAR(none.overlap_efficiency, 0.0, 1e-12);
    CHECK_NEAR(none.sched_hideable_ms, 0, 1e-12);
    CHECK(isnan(none.sched_overlap_efficiency), "nothing hideable in this schedule: efficiency undefined");
    CHECK_NEAR(none.sched_ideal_step_ms * 1e3, 100, 1e-9);
    /* the same with a NaN check of bucket 1 computed between the two posts (60-63): the
     * schedule lets 3 of a 100 step overlap, under 5%, so still no efficiency */
    n[4].t0_us = n[4].t1_us = 63;
    n[5].t0_us = 63;
    tdm_prof_rec with_check[sizeof n / sizeof *n + 1];
    memcpy(with_check, n, sizeof n);
    with_check[sizeof n / sizeof *n] = R(TDM_PROF_PHASE, C, "grad sync", 60, 63);
    CHECK(tdm_prof_analyze_rank(with_check, sizeof with_check / sizeof *with_check, 0, &none, 1) == 1, "one step");
    CHECK_NEAR(none.sched_hideable_ms * 1e3, 3, 1e-9);
    CHECK(isnan(none.sched_overlap_efficiency), "3%% of the step hideable: efficiency undefined");

    /* Without MARK instants (an older trace) the COMM records' starts stand for the posts:
     * the gradient window becomes 45-70 (the last bucket started at 70), with the same
     * 15 of compute in it (the thread waits from 60). */
    tdm_prof_rec old[sizeof g / sizeof *g];
    int k = 0;
    for (size_t i = 0; i < sizeof g / sizeof *g; i++)
        if (!g[i].instant) old[k++] = g[i];
    CHECK(tdm_prof_analyze_rank(old, k, 0, &s, 1) == 1, "one step");
    CHECK_NEAR(s.sched_hideable_ms * 1e3, 15, 1e-9);

    /* the mean pools hidden and hideable over steps: (15 + 40) / (15 + 40) */
    tdm_prof_step_stats two[2] = {s, both}, m;
    tdm_prof_step_stats_mean(two, 2, &m);
    CHECK_NEAR(m.sched_overlap_efficiency, 1.0, 1e-12);
    CHECK_NEAR(m.overlap_efficiency, 55.0 / 77.0, 1e-12);
    CHECK_NEAR(m.sched_ideal_step_ms * 1e3, 90, 1e-9);
}

static void test_overlapping_waits_and_threads(void) {
    /* Two compute threads (tid 0 and 1) with overlapping compute, overlapping waits on
     * both, and two comm threads whose transfers overlap each other: unions, not sums. */
    enum { C = TDM_PROF_THREAD_COMPUTE, M = TDM_PROF_THREAD_COMM };
    tdm_prof_rec r[] = {
        R(TDM_PROF_PHASE, C, "step", 0, 50),
        R(TDM_PROF_LAYER, C, "a", 0, 30),
        R(TDM_PROF_LAYER, C, "b", 20, 40),
        R(TDM_PROF_WAIT, C, "w1", 10, 15),
        R(TDM_PROF_WAIT, C, "w2", 12, 18), /* overlaps w1: the union is 10-18 */
        R(TDM_PROF_COMM, M, "x", 5, 25),
        R(TDM_PROF_COMM, M, "y", 15, 45),                /* overlaps x: comm busy 5-45 = 40 */
        R(TDM_PROF_COMM, C, "inline allreduce", 45, 48), /* a collective on the compute thread */
    };
    r[2].tid = 1;
    r[6].tid = 3;
    tdm_prof_step_stats s;
    CHECK(tdm_prof_analyze_rank(r, sizeof r / sizeof *r, 0, &s, 1) == 1, "one step");
    /* compute: 0-40 minus waits 10-18 = 32 */
    CHECK_NEAR(s.compute_ms * 1e3, 32, 1e-9);
    /* comm: 5-45 and 45-48 touch: 43 */
    CHECK_NEAR(s.comm_ms * 1e3, 43, 1e-9);
    /* hidden: comm ∩ compute = 5-10, 18-40 = 27 */
    CHECK_NEAR(s.hidden_ms * 1e3, 27, 1e-9);
    CHECK_NEAR(s.exposed_ms * 1e3, 16, 1e-9);
    CHECK_NEAR(s.wait_ms * 1e3, 8, 1e-9);
    CHECK_NEAR(s.hideable_ms * 1e3, 32, 1e-9);
    CHECK_NEAR(s.ideal_step_ms * 1e3, 50 - 5, 1e-9);
}

static void test_clipped_to_step_and_empty(void) {
    enum { C = TDM_PROF_THREAD_COMPUTE, M = TDM_PROF_THREAD_COMM };
    tdm_prof_rec r[] = {
        R(TDM_PROF_PHASE, C, "step", 0, 10), R(TDM_PROF_PHASE, C, "step", 10, 20),
        R(TDM_PROF_PHASE, C, "forward", 5, 15), /* spans both steps */
        R(TDM_PROF_COMM, M, "late", 18, 30),    /* runs past the step's end */
    };
    r[0].arg = 1, r[1].arg = 2;
    tdm_prof_step_stats s[2];
    CHECK(tdm_prof_analyze_rank(r, 4, 0, s, 2) == 2, "two steps");
    CHECK_NEAR(s[0].compute_ms * 1e3, 5, 1e-9);
    CHECK_NEAR(s[1].compute_ms * 1e3, 5, 1e-9);
    CHECK_NEAR(s[1].comm_ms * 1e3, 2, 1e-9);
    CHECK_NEAR(s[1].exposed_ms * 1e3, 2, 1e-9);
    CHECK(isnan(s[0].overlap_efficiency), "no comm: efficiency undefined");
    CHECK(isnan(s[1].overlap_efficiency), "only the last collective: nothing hideable, efficiency undefined");
    tdm_prof_step_stats m;
    tdm_prof_step_stats_mean(s, 2, &m);
    CHECK_NEAR(m.compute_ms * 1e3, 5, 1e-9);
    CHECK_NEAR(m.comm_ms * 1e3, 1, 1e-9);
    /* empty sets */
    CHECK(tdm_prof_analyze_rank(NULL, 0, 0, s, 2) == 0, "no records, no steps");
    tdm_prof_step_stats_mean(s, 0, &m);
    CHECK(isnan(m.step_ms) && isnan(m.comm_ms) && isnan(m.exposed_ms) && isnan(m.ideal_step_ms) &&
              isnan(m.sched_ideal_step_ms) && isnan(m.overlap_efficiency),
          "mean of nothing: unknown, not 0 ms (ab's table would show a step without communication)");
    /* a step with nothing inside */
    tdm_prof_rec only = R(TDM_PROF_PHASE, C, "step", 0, 10);
    CHECK(tdm_prof_analyze_rank(&only, 1, 0, s, 1) == 1 && s[0].compute_ms == 0 && s[0].comm_ms == 0 &&
              s[0].ideal_step_ms * 1e3 == 10,
          "empty step");
}

static void test_op_summary(void) {
    enum { C = TDM_PROF_THREAD_COMPUTE, M = TDM_PROF_THREAD_COMM };
    tdm_prof_rec r[] = {
        R(TDM_PROF_PHASE, C, "step", 0, 100), R(TDM_PROF_LAYER, C, "mlp", 0, 10),
        R(TDM_PROF_LAYER, C, "mlp", 10, 40),  R(TDM_PROF_WAIT, C, "mlp", 40, 41), /* same name, other cat */
        R(TDM_PROF_COMM, M, "reduce", 0, 50), R(TDM_PROF_MARK, C, "posted", 5, 5),
    };
    r[5].instant = 1;
    tdm_prof_op_row rows[6];
    int64_t n = tdm_prof_op_summary(r, 6, rows);
    CHECK(n == 3, "rows = %lld (step envelope and instants excluded)", (long long)n);
    CHECK(!strcmp(rows[0].name, "reduce") && rows[0].count == 1, "sorted by total");
    CHECK(!strcmp(rows[1].name, "mlp") && rows[1].cat == TDM_PROF_LAYER && rows[1].count == 2, "mlp layer");
    CHECK_NEAR(rows[1].total_ms, 0.040, 1e-12);
    CHECK_NEAR(rows[1].mean_ms, 0.020, 1e-12);
    CHECK_NEAR(rows[1].max_ms, 0.030, 1e-12);
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    const int r0[] = {0}, r1[] = {1}, r13[] = {1, 3};
    tdm_prof_format_op_summary(&sb, rows, n, r0, 1);
    CHECK(strstr(sb.data, "cannot be added up into a step time") != NULL, "warning printed");
    CHECK(strstr(sb.data, "(all 1 rank together)") != NULL, "rank 0 alone is the whole job: %s", sb.data);
    tdm_sb_free(&sb);
    /* one rank's file (trace_rank1.json), or a run that profiled some ranks */
    tdm_sb_init(&sb);
    tdm_prof_format_op_summary(&sb, rows, n, r1, 1);
    CHECK(strstr(sb.data, "Operator summary (rank 1)\n") != NULL, "one rank named: %s", sb.data);
    tdm_sb_free(&sb);
    tdm_sb_init(&sb);
    tdm_prof_format_op_summary(&sb, rows, n, r13, 2);
    CHECK(strstr(sb.data, "Operator summary (ranks 1, 3 together)\n") != NULL, "ranks named: %s", sb.data);
    tdm_sb_free(&sb);
}

static void test_thread_kinds(void) {
    CHECK(tdm_prof_thread_kind_of("comm") == TDM_PROF_THREAD_COMM, "comm");
    CHECK(tdm_prof_thread_kind_of("loader 1") == TDM_PROF_THREAD_LOADER, "loader");
    CHECK(tdm_prof_thread_kind_of("compute") == TDM_PROF_THREAD_COMPUTE, "compute");
    CHECK(tdm_prof_thread_kind_of("thread 3") == TDM_PROF_THREAD_COMPUTE, "unnamed counts as compute");
    CHECK(tdm_prof_cat_from_name(tdm_prof_cat_name(TDM_PROF_WAIT)) == TDM_PROF_WAIT, "cat names round-trip");
}

int main(void) {
    RUN(test_union);
    RUN(test_intersect_subtract);
    RUN(test_step_hidden_exposed);
    RUN(test_inline_progress_comm_on_compute_thread);
    RUN(test_last_bucket_cannot_hide);
    RUN(test_last_bucket_own_transfer_only);
    RUN(test_schedule_bound);
    RUN(test_nothing_hideable_has_no_efficiency);
    RUN(test_overlapping_waits_and_threads);
    RUN(test_clipped_to_step_and_empty);
    RUN(test_op_summary);
    RUN(test_thread_kinds);
    return TEST_SUMMARY();
}
