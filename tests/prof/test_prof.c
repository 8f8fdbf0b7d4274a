/* Unit tests for the profiler's recording side, tool config and Chrome traces:
 * events land in per-thread buffers only while recording, nesting is kept, a full
 * buffer counts drops, and the trace written for them parses back (core/json.h) into
 * the same events with every interval closed. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/strbuf.h"
#include "harness.h"
#include "prof/profiler.h"
#include "prof/trace.h"

static void test_off_records_nothing(void) {
    tdm_prof_record_start(1, 64);
    tdm_prof_record_stop();
    CHECK(!tdm_prof_on(0), "off after stop");
    tdm_prof_begin(TDM_PROF_PHASE, 0, "forward", -1);
    tdm_prof_end(TDM_PROF_PHASE, 0);
    tdm_prof_instant(TDM_PROF_MARK, 0, "x", 1);
    tdm_prof_collection c;
    tdm_prof_collect(&c);
    CHECK(c.n_events == 0, "events = %lld", (long long)c.n_events);
    tdm_prof_collection_free(&c);
}

static void test_levels_and_nesting(void) {
    tdm_prof_thread_name("compute");
    tdm_prof_record_start(1, 64);
    tdm_prof_begin(TDM_PROF_PHASE, 0, "backward", 3);
    tdm_prof_begin(TDM_PROF_LAYER, 1, "layer 0", 0);
    tdm_prof_begin(TDM_PROF_KERNEL, 2, "matmul", -1); /* above the level: not recorded */
    tdm_prof_end(TDM_PROF_KERNEL, 2);
    tdm_prof_end(TDM_PROF_LAYER, 1);
    tdm_prof_instant(TDM_PROF_MARK, 1, "bucket posted", 5);
    tdm_prof_end(TDM_PROF_PHASE, 0);
    tdm_prof_end(TDM_PROF_PHASE, 0); /* unbalanced extra end: ignored */
    tdm_prof_complete(TDM_PROF_COMM, 1, "reduce", 10, 20, 2);
    tdm_prof_record_stop();
    tdm_prof_collection c;
    tdm_prof_collect(&c);
    CHECK(c.n_events == 4, "events = %lld", (long long)c.n_events);
    const tdm_prof_event *bw = NULL, *l0 = NULL, *mk = NULL;
    for (int64_t i = 0; i < c.n_events; i++) {
        if (!strcmp(c.events[i].name, "backward")) bw = &c.events[i];
        if (!strcmp(c.events[i].name, "layer 0")) l0 = &c.events[i];
        if (!strcmp(c.events[i].name, "bucket posted")) mk = &c.events[i];
        CHECK(strcmp(c.events[i].name, "matmul") != 0, "level 2 event recorded at level 1");
    }
    CHECK(bw && l0 && mk, "all present");
    if (bw && l0 && mk) {
        CHECK(bw->t0_ns <= l0->t0_ns && l0->t1_ns <= bw->t1_ns, "layer nested inside backward");
        CHECK(bw->arg == 3 && l0->cat == TDM_PROF_LAYER && mk->instant && mk->arg == 5, "fields kept");
        CHECK(!strcmp(c.threads[bw->tid].name, "compute"), "thread name");
    }
    CHECK(c.events[0].t0_ns == 10, "sorted by start: the complete event at t=10 ns comes first");
    tdm_prof_collection_free(&c);
}

static void test_buffer_full_counts_drops(void) {
    tdm_prof_record_start(0, 16);
    for (int i = 0; i < 100; i++) tdm_prof_instant(TDM_PROF_MARK, 0, "tick", i);
    tdm_prof_record_stop();
    tdm_prof_collection c;
    tdm_prof_collect(&c);
    CHECK(c.n_events == 16, "kept %lld", (long long)c.n_events);
    int64_t dropped = 0;
    for (int i = 0; i < c.n_threads; i++) dropped += c.threads[i].dropped;
    CHECK(dropped == 84, "dropped %lld", (long long)dropped);
    tdm_prof_collection_free(&c);
    /* a new recording starts empty, with the new capacity */
    tdm_prof_record_start(0, 1000);
    for (int i = 0; i < 100; i++) tdm_prof_instant(TDM_PROF_MARK, 0, "tick", i);
    tdm_prof_record_stop();
    tdm_prof_collect(&c);
    CHECK(c.n_events == 100, "kept %lld", (long long)c.n_events);
    tdm_prof_collection_free(&c);
}

static void *comm_thread(void *p) {
    (void)p;
    tdm_prof_thread_name("comm");
    for (int i = 0; i < 50; i++) {
        tdm_prof_begin(TDM_PROF_COMM, 1, "reduce_scatter", i);
        tdm_prof_end(TDM_PROF_COMM, 1);
    }
    return NULL;
}

/* A thread records without pause while the controller starts and stops recordings of
 * changing capacity: the level flag, the generation and the spare buffers are handed
 * between threads (run this under ThreadSanitizer: make SAN=thread). */
static atomic_int busy_stop;
static void *busy_recorder(void *p) {
    (void)p;
    tdm_prof_thread_name("loader");
    while (!atomic_load(&busy_stop)) tdm_prof_instant(TDM_PROF_MARK, 0, "tick", -1);
    return NULL;
}

static void test_recording_toggled_while_threads_record(void) {
    atomic_store(&busy_stop, 0);
    pthread_t th;
    pthread_create(&th, NULL, busy_recorder, NULL);
    for (int k = 0; k < 300; k++) {
        tdm_prof_record_start(0, 16 + 16 * (k % 3));
        for (int i = 0; i < 10; i++) tdm_prof_instant(TDM_PROF_MARK, 0, "main", i);
        tdm_prof_record_stop();
    }
    atomic_store(&busy_stop, 1);
    pthread_join(th, NULL);
    tdm_prof_collection c;
    tdm_prof_collect(&c);
    int64_t mine = 0;
    for (int64_t i = 0; i < c.n_events; i++) mine += !strcmp(c.events[i].name, "main");
    CHECK(mine == 10, "the last recording kept this thread's 10 events, got %lld", (long long)mine);
    CHECK(c.n_events <= 2 * 48, "at most one buffer of 48 per thread: %lld", (long long)c.n_events);
    tdm_prof_collection_free(&c);
}

static void test_threads_and_trace_roundtrip(void) {
    tdm_prof_record_start(1, 1 << 12);
    uint64_t t0 = tdm_now_ns();
    pthread_t th;
    pthread_create(&th, NULL, comm_thread, NULL);
    for (int i = 0; i < 50; i++) {
        tdm_prof_begin(TDM_PROF_LAYER, 1, "layer \"q\"\n", i); /* a name that needs escaping */
        tdm_prof_end(TDM_PROF_LAYER, 1);
    }
    pthread_join(th, NULL);
    tdm_prof_complete(TDM_PROF_PHASE, 0, "step", t0, tdm_now_ns(), 1);
    tdm_prof_record_stop();
    tdm_prof_collection c;
    tdm_prof_collect(&c);
    c.origin_ns = t0;
    CHECK(c.n_events == 101, "events = %lld", (long long)c.n_events);
    int64_t n;
    tdm_prof_rec *recs = tdm_prof_recs_from_collection(&c, 3, &n);
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_prof_trace_open(&sb);
    int first = 1;
    tdm_prof_trace_append_rank(&sb, 3, c.threads, c.n_threads, recs, n, &first);
    tdm_prof_trace_close(&sb);
    tdm_prof_trace t;
    tdm_error err;
    int rc = tdm_prof_trace_parse(sb.data, sb.len, "trace.json", &t, &err);
    CHECK(rc == 0, "trace is valid JSON: %s", err.msg);
    if (rc == 0) {
        CHECK(t.n == n, "all %lld events read back (%lld)", (long long)n, (long long)t.n);
        CHECK(t.n_ranks == 1 && t.ranks[0] == 3, "pid = rank: the one rank 3");
        int comm = 0, layers = 0, balanced = 1;
        for (int64_t i = 0; i < t.n; i++) {
            if (t.recs[i].t1_us < t.recs[i].t0_us) balanced = 0;
            if (t.recs[i].thread_kind == TDM_PROF_THREAD_COMM && t.recs[i].cat == TDM_PROF_COMM) comm++;
            if (!strcmp(t.recs[i].name, "layer \"q\"\n")) layers++;
        }
        CHECK(comm == 50 && layers == 50, "comm %d on the comm track, layers %d", comm, layers);
        CHECK(balanced, "every event has dur >= 0");
        tdm_strbuf text, json;
        tdm_sb_init(&text);
        tdm_sb_init(&json);
        tdm_prof_trace_summarize(&t, &text, &json);
        CHECK(strstr(text.data, "reduce_scatter") != NULL, "summary lists the collective");
        tdm_json_doc *d = tdm_json_parse(json.data, json.len, "analysis", &err);
        CHECK(d != NULL, "analysis JSON parses: %s", err.msg);
        if (d) {
            const tdm_json *steps = tdm_json_get(tdm_json_root(d), "steps");
            CHECK(steps && steps->len == 1, "one step analysed");
            tdm_json_free(d);
        }
        tdm_sb_free(&text);
        tdm_sb_free(&json);
        tdm_prof_trace_free(&t);
    }
    /* balanced "B"/"E" style is not produced: only complete "X" events */
    CHECK(strstr(sb.data, "\"ph\":\"B\"") == NULL, "complete events only");
    tdm_sb_free(&sb);
    free(recs);
    tdm_prof_collection_free(&c);
}

/* A thread that ended keeps its events for the collector, and is forgotten (its buffer
 * freed) when the next recording starts. */
static void test_exited_threads_forgotten(void) {
    tdm_prof_record_start(1, 256);
    pthread_t th;
    pthread_create(&th, NULL, comm_thread, NULL);
    pthread_join(th, NULL);
    tdm_prof_record_stop();
    tdm_prof_collection c;
    tdm_prof_collect(&c);
    CHECK(c.n_events == 50, "the ended thread's events are kept: %lld", (long long)c.n_events);
    tdm_prof_collection_free(&c);
    tdm_prof_record_start(1, 256);
    tdm_prof_instant(TDM_PROF_MARK, 1, "x", 0);
    tdm_prof_record_stop();
    tdm_prof_collect(&c);
    int comm_present = 0;
    for (int i = 0; i < c.n_threads; i++) comm_present += c.threads[i].present && !strcmp(c.threads[i].name, "comm");
    CHECK(comm_present == 0 && c.n_events == 1, "ended threads gone: %d present", comm_present);
    tdm_prof_collection_free(&c);
}

static void test_trace_errors(void) {
    tdm_prof_trace t;
    tdm_error err;
    const char *bad[] = {
        "{\"traceEvents\": 3}", "{\"traceEvents\": [{\"ph\":\"X\",\"name\":\"a\"}]}", "{\"traceEvents\": [1]}",
        "{\"traceEvents\": [{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,"
        "\"dur\":-1,\"pid\":0,\"tid\":0}]}",
        "[{",
        /* numbers outside the integer types they are converted to */
        "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1,\"pid\":0,\"tid\":1e30}]",
        "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1,\"pid\":0,\"tid\":0,\"args\":{\"arg\":1e300}}]",
        "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1,\"pid\":0,\"tid\":0,\"args\":{\"level\":1e10}}]",
        "[{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":-1e20,\"args\":{\"name\":\"x\"}}]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(tdm_prof_trace_parse(bad[i], strlen(bad[i]), "x.json", &t, &err) != 0, "accepted %s", bad[i]);
        CHECK(strstr(err.msg, "x.json") != NULL, "error names the file: %s", err.msg);
    }
}

/* Steps are analysed per rank present, however sparse the pids (each rank reads only its
 * own records; a pid of 1e6 once meant a million passes over every record). */
static void test_sparse_ranks_summarized(void) {
    const char *text = "[{\"ph\":\"X\",\"name\":\"step\",\"cat\":\"phase\",\"ts\":0,\"dur\":10,\"pid\":1000000,"
                       "\"tid\":0,\"args\":{\"arg\":7}},"
                       "{\"ph\":\"X\",\"name\":\"fwd\",\"cat\":\"layer\",\"ts\":1,\"dur\":4,\"pid\":1000000,\"tid\":0},"
                       "{\"ph\":\"X\",\"name\":\"step\",\"cat\":\"phase\",\"ts\":0,\"dur\":20,\"pid\":0,\"tid\":0,"
                       "\"args\":{\"arg\":7}}]";
    tdm_prof_trace t;
    tdm_error err;
    int rc = tdm_prof_trace_parse(text, strlen(text), "sparse.json", &t, &err);
    CHECK(rc == 0 && t.n_ranks == 2 && t.ranks[0] == 0 && t.ranks[1] == 1000000, "%s", rc ? err.msg : "n_ranks");
    if (rc != 0) return;
    tdm_strbuf json;
    tdm_sb_init(&json);
    tdm_prof_trace_summarize(&t, NULL, &json);
    tdm_json_doc *d = tdm_json_parse(json.data, json.len, "analysis", &err);
    const tdm_json *steps = tdm_json_get(tdm_json_root(d), "steps");
    CHECK(steps && steps->len == 2, "one step on each of the two ranks");
    if (steps && steps->len == 2) {
        int64_t r0, r1;
        double c1;
        CHECK(tdm_json_get_int(steps->items[0], "rank", &r0, &err) == 0 && r0 == 0, "rank order");
        CHECK(tdm_json_get_int(steps->items[1], "rank", &r1, &err) == 0 && r1 == 1000000, "rank order");
        CHECK(tdm_json_get_num(steps->items[1], "compute_ms", &c1, &err) == 0 && c1 == 0.004, "compute %g", c1);
    }
    tdm_json_free(d);
    tdm_sb_free(&json);
    tdm_prof_trace_free(&t);
}

/* Whether the complete events of each (pid, tid) of a parsed trace nest (the Chrome trace format's rule; t.recs
 * are sorted by rank, then start, enclosing first). */
static int events_nest_per_thread(const tdm_prof_trace *t) {
    for (int64_t i = 0; i < t->n; i++) {
        const tdm_prof_rec *a = &t->recs[i];
        if (a->instant) continue;
        for (int64_t j = i + 1; j < t->n && t->recs[j].rank == a->rank; j++) {
            const tdm_prof_rec *b = &t->recs[j]; /* starts at or after a */
            if (b->instant || b->tid != a->tid || b->t0_us >= a->t1_us) continue;
            if (b->t1_us > a->t1_us) return 0; /* starts inside a, ends after it */
        }
    }
    return 1;
}

/* Collectives in flight together overlap on the comm thread (and an inline-progress COMM record spans the
 * compute thread's layers): in the trace each thread's events must still nest, the ones that do not on extra
 * tracks of that thread, named after it so that the analysis classifies them alike and gives the same numbers. */
static void test_overlapping_events_get_their_own_tracks(void) {
    tdm_prof_thread th[2] = {{.name = "compute", .tid = 0, .present = 1}, {.name = "comm", .tid = 1, .present = 1}};
    tdm_prof_rec r[] = {
        {.name = "param all-gather", .t0_us = -5, .t1_us = 20, .tid = 0, .cat = TDM_PROF_COMM}, /* in flight */
        {.name = "step", .t0_us = 0, .t1_us = 100, .tid = 0, .cat = TDM_PROF_PHASE, .arg = 1},
        {.name = "layer.0", .t0_us = 10, .t1_us = 40, .tid = 0, .cat = TDM_PROF_LAYER},
        {.name = "grad reduce-scatter", .t0_us = 30, .t1_us = 60, .tid = 0, .cat = TDM_PROF_COMM}, /* inline */
        {.name = "layer.1", .t0_us = 40, .t1_us = 70, .tid = 0, .cat = TDM_PROF_LAYER},
        {.name = "param all-gather", .t0_us = 70, .t1_us = 90, .tid = 1, .cat = TDM_PROF_COMM, .thread_kind = 1},
        {.name = "param all-gather",
         .t0_us = 71,
         .t1_us = 95,
         .tid = 1,
         .cat = TDM_PROF_COMM,
         .thread_kind = 1,
         .bytes = 3 << 20},
        {.name = "param all-gather", .t0_us = 72, .t1_us = 80, .tid = 1, .cat = TDM_PROF_COMM, .thread_kind = 1},
        {.name = "param all-gather", .t0_us = 73, .t1_us = 99, .tid = 1, .cat = TDM_PROF_COMM, .thread_kind = 1},
        {.name = "param all-gather posted", .t0_us = 70, .t1_us = 70, .tid = 0, .cat = TDM_PROF_MARK, .instant = 1},
    };
    const int64_t n = sizeof r / sizeof *r;
    tdm_prof_step_stats direct, read;
    CHECK(tdm_prof_analyze_rank(r, n, 0, &direct, 1) == 1, "one step in the records");
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_prof_trace_open(&sb);
    int first = 1;
    tdm_prof_trace_append_rank(&sb, 0, th, 2, r, n, &first);
    tdm_prof_trace_close(&sb);
    tdm_prof_trace t;
    tdm_error err;
    int rc = tdm_prof_trace_parse(sb.data, sb.len, "lanes.json", &t, &err);
    CHECK(rc == 0 && t.n == n, "%s", rc ? err.msg : "every event read back");
    if (rc == 0) {
        CHECK(events_nest_per_thread(&t), "the events of every track nest");
        int comm_tracks = 0, compute_tracks = 0;
        int64_t seen[8] = {0};
        for (int64_t i = 0; i < t.n; i++) {
            int k = 0;
            while (k < 8 && seen[k] && seen[k] != t.recs[i].tid + 1) k++;
            if (k == 8 || seen[k]) continue;
            seen[k] = t.recs[i].tid + 1;
            if (t.recs[i].thread_kind == TDM_PROF_THREAD_COMM) comm_tracks++;
            else compute_tracks++;
        }
        /* all-gathers [70,90) [71,95) [72,80) [73,99): two nest, three tracks; the inline ones: a second */
        CHECK(comm_tracks == 3 && compute_tracks == 2, "comm tracks %d, compute tracks %d", comm_tracks,
              compute_tracks);
        CHECK(strstr(sb.data, "\"name\":\"comm (3)\"") && !strstr(sb.data, "comm (4)") &&
                  strstr(sb.data, "\"name\":\"compute (2)\""),
              "extra tracks named after their thread");
        for (int64_t i = 0; i < t.n; i++) /* the thread's own work stays on its own track */
            if (t.recs[i].cat != TDM_PROF_COMM)
                CHECK(t.recs[i].tid == 0 || t.recs[i].tid == 1, "%s on track %d", t.recs[i].name, t.recs[i].tid);
        CHECK(tdm_prof_analyze_rank(t.recs, t.n, 0, &read, 1) == 1, "one step read back");
        CHECK_NEAR(read.comm_ms, direct.comm_ms, 1e-12);
        CHECK_NEAR(read.compute_ms, direct.compute_ms, 1e-12);
        CHECK_NEAR(read.hidden_ms, direct.hidden_ms, 1e-12);
        CHECK_NEAR(read.last_comm_ms, direct.last_comm_ms, 1e-12);
        CHECK_NEAR(read.sched_hideable_ms, direct.sched_hideable_ms, 1e-12);
        int sized = 0; /* a collective's bytes travel as args.bytes (the other records here hold 0) */
        for (int64_t i = 0; i < t.n; i++) {
            sized += t.recs[i].bytes == 3 << 20 && t.recs[i].t0_us == 71;
            CHECK(t.recs[i].bytes == (t.recs[i].t0_us == 71 ? 3 << 20 : 0), "%s at %g: bytes %lld", t.recs[i].name,
                  t.recs[i].t0_us, (long long)t.recs[i].bytes);
        }
        CHECK(sized == 1, "the sized all-gather read back %d time(s)", sized);
        tdm_prof_trace_free(&t);
    }
    tdm_sb_free(&sb);
}

/* A profile that kept no complete step (its buffer filled up in the first one) has no mean: analysis.json says
 * null, which `tandem ab` reads as n/a, not a step of 0 ms without any communication. */
static void test_no_step_mean_is_null(void) {
    const char *text = "[{\"ph\":\"X\",\"name\":\"grad reduce-scatter\",\"cat\":\"comm\",\"ts\":1,\"dur\":4,\"pid\":0,"
                       "\"tid\":1}]";
    tdm_prof_trace t;
    tdm_error err;
    int rc = tdm_prof_trace_parse(text, strlen(text), "nostep.json", &t, &err);
    CHECK(rc == 0, "%s", rc ? err.msg : "");
    if (rc != 0) return;
    tdm_strbuf json;
    tdm_sb_init(&json);
    tdm_prof_trace_summarize(&t, NULL, &json);
    tdm_json_doc *d = tdm_json_parse(json.data, json.len, "analysis", &err);
    const tdm_json *m = d ? tdm_json_get(tdm_json_root(d), "mean") : NULL;
    const char *keys[] = {"step_ms", "comm_ms", "exposed_comm_ms", "hidden_comm_ms", "ideal_step_ms"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const tdm_json *v = tdm_json_get(m, keys[i]);
        CHECK(v && v->type == TDM_JSON_NULL, "mean.%s of no step is null", keys[i]);
    }
    tdm_json_free(d);
    tdm_sb_free(&json);
    tdm_prof_trace_free(&t);
}

/* Thread names are looked up by (pid, tid), the last one given winning, wherever they
 * stand in the file (now by binary search: a trace may name as many threads as events). */
static void test_thread_names_looked_up(void) {
    const char *text = "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1,\"pid\":0,\"tid\":1},"
                       "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":1,\"args\":{\"name\":\"comm\"}},"
                       "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":2,\"args\":{\"name\":\"loader\"}},"
                       "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":1,\"args\":{\"name\":\"loader\"}},"
                       "{\"ph\":\"X\",\"name\":\"b\",\"ts\":2,\"dur\":1,\"pid\":1,\"tid\":2},"
                       "{\"ph\":\"X\",\"name\":\"c\",\"ts\":3,\"dur\":1,\"pid\":1,\"tid\":1}]";
    tdm_prof_trace t;
    tdm_error err;
    int rc = tdm_prof_trace_parse(text, strlen(text), "names.json", &t, &err);
    CHECK(rc == 0 && t.n == 3, "%s", rc ? err.msg : "three events");
    if (rc != 0) return;
    for (int64_t i = 0; i < t.n; i++) {
        int want = !strcmp(t.recs[i].name, "c") ? TDM_PROF_THREAD_COMPUTE : TDM_PROF_THREAD_LOADER;
        CHECK(t.recs[i].thread_kind == want, "event %s on thread kind %d", t.recs[i].name, t.recs[i].thread_kind);
    }
    tdm_prof_trace_free(&t);
}

static void test_config(void) {
    tdm_prof_config cfg;
    tdm_error err;
    const char *ok = "{\"profile\": {\"enable\": true, \"ranks\": [-1], \"start_step\": 3, \"end_step\": 5,"
                     " \"level\": 1, \"save_path\": \"./prof_out\"}, \"other_tool\": {}}";
    CHECK(tdm_prof_config_parse(ok, strlen(ok), "tools.json", &cfg, &err) == 0, "%s", err.msg);
    CHECK(cfg.enable && cfg.all_ranks && cfg.start_step == 3 && cfg.end_step == 5 && cfg.level == 1 &&
              !strcmp(cfg.save_path, "./prof_out"),
          "fields");
    const char *top = "{\"enable\": true, \"ranks\": [0, 1], \"level\": 2}";
    CHECK(tdm_prof_config_parse(top, strlen(top), "t.json", &cfg, &err) == 0, "%s", err.msg);
    CHECK(!cfg.all_ranks && cfg.n_ranks == 2 && cfg.ranks[1] == 1 && cfg.level == 2, "top-level object");
    /* MindSpeed-MM's own tools.json: the schedule in static_param, torch_npu options beside it,
     * other tools' sections beside the profile one; iterations after start_step up to end_step. */
    const char *ms = "{\"profile\": {\"enable\": true, \"profile_type\": \"static\", \"ranks\": [0, 1],"
                     " \"static_param\": {\"level\": \"level1\", \"with_stack\": false, \"with_memory\": false,"
                     " \"record_shapes\": false, \"with_cpu\": true, \"save_path\": \"./npu_profiling\","
                     " \"start_step\": 10, \"end_step\": 12, \"data_simplification\": false,"
                     " \"aic_metrics_type\": \"PipeUtilization\"}, \"dynamic_param\": {\"config_path\": \"x\"}},"
                     " \"memory_profile\": {\"enable\": false}, \"sorafeature\": {\"save_path\": \"./f\"}}";
    CHECK(tdm_prof_config_parse(ms, strlen(ms), "tools.json", &cfg, &err) == 0, "%s", err.msg);
    CHECK(cfg.enable && !cfg.all_ranks && cfg.n_ranks == 2 && cfg.start_step == 11 && cfg.end_step == 12 &&
              cfg.level == 1 && !strcmp(cfg.save_path, "./npu_profiling"),
          "MindSpeed-MM layout: steps %lld..%lld level %d", (long long)cfg.start_step, (long long)cfg.end_step,
          cfg.level);
    const char *ms0 = "{\"profile\": {\"enable\": true, \"static_param\": {\"start_step\": 0, \"end_step\": 1}}}";
    CHECK(tdm_prof_config_parse(ms0, strlen(ms0), "tools.json", &cfg, &err) == 0 && cfg.start_step == 1 &&
              cfg.end_step == 1 && cfg.level == 0,
          "MindSpeed-MM start_step 0 records iteration 1");
    const char *lvl = "{\"profile\": {\"level\": \"level2\"}}";
    CHECK(tdm_prof_config_parse(lvl, strlen(lvl), "tools.json", &cfg, &err) == 0 && cfg.level == 2, "level string");
    struct {
        const char *text, *field;
    } bad[] = {
        {"{\"profile\": {\"levle\": 1}}", "profile.levle: unknown key"},
        {"{\"enable\": true, \"strat_step\": 2}", "strat_step: unknown key"},
        {"{\"profile\": {\"static_param\": {\"start_stpe\": 1}}}", "profile.static_param.start_stpe"},
        {"{\"profile\": {\"static_param\": 1}}", "profile.static_param"},
        {"{\"profile\": {\"profile_type\": \"dynamic\"}}", "profile.profile_type"},
        {"{\"profile\": {\"level\": 1, \"static_param\": {\"level\": 1}}}", "profile.level"},
        {"{\"profile\": {\"static_param\": {\"start_step\": 4, \"end_step\": 4}}}", "profile.static_param.end_step"},
        {"{\"profile\": {\"static_param\": {\"level\": \"level3\"}}}", "profile.static_param.level"},
        {"{\"profile\": {\"level\": 3}}", "profile.level"},
        {"{\"profile\": {\"enable\": 1}}", "profile.enable"},
        {"{\"profile\": {\"ranks\": []}}", "profile.ranks"},
        {"{\"profile\": {\"ranks\": [\"a\"]}}", "profile.ranks"},
        {"{\"profile\": {\"start_step\": 5, \"end_step\": 3}}", "profile.end_step"},
        {"{\"profile\": {\"start_step\": 0}}", "profile.start_step"},
        {"{\"profile\": {\"save_path\": \"\"}}", "profile.save_path"},
        {"{\"level\": -1}", "level"},
        {"{\"profile\": 3}", "profile"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = tdm_prof_config_parse(bad[i].text, strlen(bad[i].text), "tools.json", &cfg, &err);
        CHECK(rc != 0, "accepted %s", bad[i].text);
        CHECK(rc != 0 && strstr(err.msg, "tools.json") && strstr(err.msg, bad[i].field), "message '%s' lacks %s",
              err.msg, bad[i].field);
    }
    CHECK(tdm_prof_config_load("/nonexistent/tools.json", &cfg, &err) != 0 && strstr(err.msg, "/nonexistent"),
          "missing file named");
}

int main(void) {
    RUN(test_off_records_nothing);
    RUN(test_levels_and_nesting);
    RUN(test_buffer_full_counts_drops);
    RUN(test_threads_and_trace_roundtrip);
    RUN(test_recording_toggled_while_threads_record);
    RUN(test_exited_threads_forgotten);
    RUN(test_trace_errors);
    RUN(test_sparse_ranks_summarized);
    RUN(test_thread_names_looked_up);
    RUN(test_no_step_mean_is_null);
    RUN(test_overlapping_events_get_their_own_tracks);
    RUN(test_config);
    return TEST_SUMMARY();
}
