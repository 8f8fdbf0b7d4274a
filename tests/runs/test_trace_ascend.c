/* test_trace_ascend.c - Ascend profiler and msprof-analyze outputs: the real 8-rank
 * cluster_step_trace_time.csv (identities per rank, hidden share, msprof's slow-rank rule),
 * cluster_communication.json, and trace_view.json's "Overlap Analysis" lanes (a single card:
 * no communication); plus the per-rank CSV layouts other versions write, made here. */
#include <math.h>
#include <string.h>

#include "core/fs.h"
#include "core/json.h"
#include "fixtures.h"
#include "harness.h"
#include "runs/analyze.h"
#include "runs/trace.h"

static int have_fixtures;
static tdm_json_doc *expected;

static double exnum(const tdm_json *b, const char *key) {
    const tdm_json *v = tdm_json_get(b, key);
    return v && v->type == TDM_JSON_NUMBER ? v->num : NAN;
}

static void test_cluster_step_trace_time(void) {
    if (!have_fixtures) return;
    char path[1024];
    fixture_path(path, sizeof path, "ascend/cluster_analysis_output/cluster_step_trace_time.csv");
    tdm_runs_set s;
    tdm_runs_set_init(&s);
    tdm_error err;
    int rc = tdm_runs_read(&s, path, &err);
    CHECK(rc == 0, "%s", err.msg);
    CHECK(s.n == 8, "%d ranks (the stage row is not a rank)", s.n);
    const tdm_json *ranks = tdm_json_get(tdm_json_get(tdm_json_root(expected), "ascend"), "ranks");
    double sum_over = 0, sum_comm = 0;
    for (int i = 0; i < s.n; i++) {
        const tdm_runs_trace *t = s.traces[i];
        CHECK(t->rank == i && t->n_given == 1, "trace %d: rank %lld, %lld steps", i, (long long)t->rank,
              (long long)t->n_given);
        if (t->n_given != 1) continue;
        const tdm_runs_given_step *g = &t->given[0];
        CHECK(fabs(g->compute + g->exposed + g->idle - g->step) <= 1.0, "rank %d: C+N+F-Stage = %.3f µs", i,
              g->compute + g->exposed + g->idle - g->step);
        char key[16];
        snprintf(key, sizeof key, "%d", i);
        const tdm_json *e = tdm_json_get(ranks, key);
        CHECK_NEAR(g->step, exnum(e, "Stage"), 1e-6);
        CHECK_NEAR(g->hidden / g->comm, exnum(e, "hidden_share"), 1e-8);
        CHECK_NEAR(g->comm - g->exposed - g->hidden, 0, 1e-6);
        sum_over += g->hidden, sum_comm += g->comm;
    }
    CHECK_NEAR(sum_over / sum_comm,
               exnum(tdm_json_get(tdm_json_root(expected), "ascend"),
                     "hidden_share_overall_sum_overlapped_over_sum_communication"),
               1e-8);
    tdm_runs_analysis a;
    tdm_runs_analyze(&s, &a);
    CHECK(a.slowest == 0, "slowest is %d", a.slowest);
    CHECK_NEAR(a.spread, exnum(tdm_json_get(tdm_json_root(expected), "ascend"), "stage_spread_max_minus_min_over_mean"),
               1e-8);
    CHECK(!a.fired[TDM_RUNS_DIAG_SLOW_RANK], "4.24%% is under msprof's 5%% rule: %s", a.diag[TDM_RUNS_DIAG_SLOW_RANK]);
    CHECK(a.fired[TDM_RUNS_DIAG_NOTHING_HIDDEN], "0.06-0.95%% hidden should say nothing is hidden");
    for (int i = 0; i < a.n_ranks; i++)
        CHECK(a.ranks[i].mean.overlap_pct < 1, "rank %d hides %.2f%%", i, a.ranks[i].mean.overlap_pct);
    tdm_runs_analysis_free(&a);
    tdm_runs_set_free(&s);
}

static void test_cluster_communication(void) {
    if (!have_fixtures) return;
    char path[1024];
    fixture_path(path, sizeof path, "ascend/cluster_analysis_output/cluster_communication.json");
    tdm_runs_set s;
    tdm_runs_set_init(&s);
    tdm_error err;
    int rc = tdm_runs_read(&s, path, &err);
    CHECK(rc == 0, "%s", err.msg);
    CHECK(s.n_acomm == 4, "%lld operator records (2 broadcasts x 2 ranks)", (long long)s.n_acomm);
    int found = 0;
    for (int64_t i = 0; i < s.n_acomm; i++) {
        const tdm_runs_acomm *c = &s.acomm[i];
        CHECK(!strcmp(c->step, "step"), "step %s", c->step);
        if (c->rank == 0 && !strcmp(c->op, "hcom_broadcast__501_0@6297232067196334501")) {
            found++;
            CHECK_NEAR(c->wait_ms, 115.96064153125, 1e-9);
            CHECK_NEAR(c->elapse_ms, 121.73694384375, 1e-9);
            CHECK_NEAR(c->size_mb, 0.06393599999999998 + 0.021376 + 0.08531199999999997, 1e-12);
        }
        if (c->rank == 1 && !strcmp(c->op, "hcom_broadcast__501_0@6297232067196334501")) {
            found++;
            CHECK_NEAR(c->wait_ms, 0.00015, 1e-12);
        }
    }
    CHECK(found == 2, "the first broadcast of ranks 0 and 1: %d", found);
    tdm_runs_set_free(&s);
}

static void test_trace_view_lanes(void) {
    if (!have_fixtures) return;
    char path[1024];
    fixture_path(path, sizeof path, "ascend/timeline_advice/trace_view.json");
    tdm_runs_set s;
    tdm_runs_set_init(&s);
    tdm_error err;
    int rc = tdm_runs_read(&s, path, &err);
    CHECK(rc == 0, "%s", err.msg);
    if (rc != 0 || s.n != 1) {
        tdm_runs_set_free(&s);
        return;
    }
    const tdm_runs_trace *t = s.traces[0];
    CHECK(t->format == TDM_RUNS_FMT_ASCEND_TIMELINE && t->has_lanes, "format %d", t->format);
    CHECK_NEAR(t->lane_computing, 1788.2505, 1e-6);
    CHECK_NEAR(t->lane_free, 9481.6670, 1e-6);
    CHECK_NEAR(t->lane_comm, 0, 0);
    CHECK_NEAR(t->lane_comm_not_overlapped, 0, 0);
    CHECK_NEAR(t->lane_computing + t->lane_free, t->lane_span, 1e-3);
    CHECK(t->n_steps == 1 && t->steps[0].number == 1, "%lld steps", (long long)t->n_steps);
    CHECK_NEAR(t->steps[0].dur, 14091.97, 1e-6);
    int noted = 0;
    for (int i = 0; i < t->n_notes; i++) noted |= strstr(t->notes[i], "no communication") != NULL;
    CHECK(noted, "no note that there was no communication");
    tdm_runs_analysis a;
    tdm_runs_analyze(&s, &a);
    const tdm_runs_step_stats *st = &a.ranks[0].steps[0];
    CHECK(st->hidden_us == 0 && st->exposed_us == 0 && st->comm_us == 0, "hidden %g exposed %g", st->hidden_us,
          st->exposed_us);
    CHECK_NEAR(st->compute_us, 1788.2505, 1e-3);
    CHECK_NEAR(st->idle_us, 9481.6670, 1e-3);
    CHECK(!a.fired[TDM_RUNS_DIAG_NOTHING_HIDDEN], "nothing to hide is not 'nothing hidden'");
    CHECK(!a.ranks[0].hta[0].applicable, "HTA's figures do not apply to Ascend lanes");
    tdm_runs_analysis_free(&a);
    tdm_runs_set_free(&s);
}

/* Per-rank step_trace_time.csv in the layouts other versions write: columns by name. */
static void test_step_csv_layouts(void) {
    const char *old = "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
                      "Communication(Not Overlapped and Exclude Receive)\n"
                      "1,100.5,20,5,25,10,130.5,0,20\r\n2,110,30,10,40,0,140,0,30\n";
    const char *newer = "Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,"
                        "Bubble,Communication(Not Overlapped and Exclude Receive),Preparing\n"
                        "3,7,100,0,50,50,0,100,0,0,12\n";
    tdm_runs_set s;
    tdm_runs_set_init(&s);
    tdm_error err;
    CHECK(tdm_runs_read_ascend_csv_mem(&s, old, strlen(old), "rank_2/ASCEND_PROFILER_OUTPUT/step_trace_time.csv",
                                       &err) == 0,
          "%s", err.msg);
    CHECK(tdm_runs_read_ascend_csv_mem(&s, newer, strlen(newer), "x/step_trace_time.csv", &err) == 0, "%s", err.msg);
    CHECK(s.n == 2, "%d traces", s.n);
    if (s.n == 2) {
        CHECK(s.traces[0]->rank == 2 && s.traces[0]->n_given == 2, "rank %lld", (long long)s.traces[0]->rank);
        CHECK(s.traces[0]->given[1].number == 2 && s.traces[0]->given[1].hidden == 10, "step 2");
        CHECK(s.traces[1]->rank == 3 && s.traces[1]->given[0].number == 7, "Device_id 3, step 7");
    }
    const char *bad[] = {"Step,Computing\n1,2\n",
                         "Step,Computing,Communication(Not Overlapped),Overlapped,"
                         "Communication,Free,Stage\n1,x,0,0,0,0,0\n",
                         ""};
    const char *why[] = {"expected an Ascend step_trace_time CSV", "column Computing: expected a number", "empty file"};
    for (int i = 0; i < 3; i++) {
        int rc = tdm_runs_read_ascend_csv_mem(&s, bad[i], strlen(bad[i]), "bad.csv", &err);
        CHECK(rc != 0 && strstr(err.msg, why[i]) && strstr(err.msg, "bad.csv"), "case %d: %s", i, rc ? err.msg : "ok");
    }
    CHECK(s.n == 2, "a bad file added traces");
    tdm_runs_set_free(&s);
}

/* A rank's own communication.json: {step: {"collective"|"p2p": {op: info}}}, rank from its folder. */
static void test_rank_communication_json(void) {
    const char *doc = "{\"step1\": {\"collective\": {\"hcom_allReduce__123_0_1@456\": {\"Communication Time Info\": "
                      "{\"Start Timestamp(us)\": 1.5, \"Elapse Time(ms)\": 2.0, \"Transit Time(ms)\": 1.25, "
                      "\"Wait Time(ms)\": 0.5, \"Synchronization Time(ms)\": 0.25, \"Idle Time(ms)\": 0.25}, "
                      "\"Communication Bandwidth Info\": {\"HCCS\": {\"Transit Size(MB)\": 4.0, \"Size Distribution\": "
                      "{\"4.0\": [1, 1.25]}}, \"RDMA\": {\"Transit Size(MB)\": 1.0}}}}, \"p2p\": {}}}";
    tdm_runs_set s;
    tdm_runs_set_init(&s);
    tdm_error err;
    int rc = tdm_runs_read_ascend_comm_mem(&s, doc, strlen(doc),
                                           "node/rank_5/ASCEND_PROFILER_OUTPUT/communication.json", &err);
    CHECK(rc == 0 && s.n_acomm == 1, "%s", rc ? err.msg : "count");
    if (s.n_acomm == 1) {
        const tdm_runs_acomm *c = &s.acomm[0];
        CHECK(c->rank == 5 && !strcmp(c->step, "step1") && !strcmp(c->op, "hcom_allReduce__123_0_1@456"), "%lld %s %s",
              (long long)c->rank, c->step, c->op);
        CHECK(c->elapse_ms == 2.0 && c->wait_ms == 0.5 && c->size_mb == 5.0, "figures");
    }
    const char *none = "{\"step1\": {\"collective\": {}}}";
    CHECK(tdm_runs_read_ascend_comm_mem(&s, none, strlen(none), "empty.json", &err) != 0 &&
              strstr(err.msg, "no operator with \"Communication Time Info\""),
          "%s", err.msg);
    tdm_runs_set_free(&s);
}

int main(void) {
    char path[1024];
    have_fixtures = fixture_path(path, sizeof path, "expected.json");
    if (have_fixtures) {
        size_t len;
        tdm_error err;
        char *text = tdm_read_file(path, 1 << 24, &len, &err);
        expected = text ? tdm_json_parse(text, len, path, &err) : NULL;
        free(text);
        if (!expected) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
    } else {
        printf("skipped: the Ascend fixture checks (%s not found; the real-world fixtures are read in place)\n", path);
    }
    RUN(test_cluster_step_trace_time);
    RUN(test_cluster_communication);
    RUN(test_trace_view_lanes);
    RUN(test_step_csv_layouts);
    RUN(test_rank_communication_json);
    if (expected) tdm_json_free(expected);
    return TEST_SUMMARY();
}
