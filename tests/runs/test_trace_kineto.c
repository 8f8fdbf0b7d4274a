/* test_trace_kineto.c - the streaming JSON reader (tokens, escapes, numbers, windows, errors,
 * gzip, truncation) and the trace readers on hand-made traces: steps and launches, HTA's
 * classification, the legacy format, Ascend-style string timestamps, a trace without steps,
 * tandem's own format, and bad input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/strbuf.h"
#include "harness.h"
#include "runs/analyze.h"
#include "runs/json_stream.h"
#include "runs/trace.h"

static tdm_js_tok next(tdm_js *js) { return tdm_js_next(js); }

static void test_tokens(void) {
    const char *doc = " {\"a\": [1, -2.5e3, true, false, null, \"x\\n\\u00e9\\ud83d\\ude00\"], \"b\": {}, \"c\": []} ";
    tdm_js *js = tdm_js_open_mem(doc, strlen(doc), "t.json");
    CHECK(next(js) == TDM_JS_OBJECT, "object");
    CHECK(next(js) == TDM_JS_KEY && !strcmp(tdm_js_text(js, NULL), "a"), "key a");
    CHECK(next(js) == TDM_JS_ARRAY, "array");
    CHECK(next(js) == TDM_JS_NUMBER && tdm_js_number(js) == 1 && tdm_js_number_is_int(js), "1");
    CHECK(next(js) == TDM_JS_NUMBER && tdm_js_number(js) == -2500 && !tdm_js_number_is_int(js), "-2.5e3");
    CHECK(next(js) == TDM_JS_TRUE && next(js) == TDM_JS_FALSE && next(js) == TDM_JS_NULL, "literals");
    size_t n;
    CHECK(next(js) == TDM_JS_STRING, "string");
    const char *s = tdm_js_text(js, &n);
    CHECK(n == 8 && !memcmp(s, "x\n\xc3\xa9\xf0\x9f\x98\x80", 8), "escapes decoded: %zu bytes", n);
    CHECK(next(js) == TDM_JS_ARRAY_END, "]");
    CHECK(next(js) == TDM_JS_KEY && tdm_js_skip_value(js) == 0, "skip {}");
    CHECK(next(js) == TDM_JS_KEY && tdm_js_skip_value(js) == 0, "skip []");
    CHECK(next(js) == TDM_JS_OBJECT_END && next(js) == TDM_JS_EOF, "end");
    tdm_js_close(js);
}

static void test_numbers_round_like_strtod(void) {
    const char *cases[] = {"4458676522690.655",
                           "1704161511422904.204",
                           "0.1",
                           "1e-7",
                           "123456789012345678901",
                           "-0.0",
                           "9007199254740993",
                           "2.5E+2",
                           "1661203463042907"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        double v;
        CHECK(tdm_js_parse_number(cases[i], strlen(cases[i]), &v) == 0, "%s", cases[i]);
        CHECK(v == strtod(cases[i], NULL), "%s: %.17g vs %.17g", cases[i], v, strtod(cases[i], NULL));
    }
    const char *bad[] = {"01", "1.", ".5", "-", "1e", "+1", "1.2.3", "0x10", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        double v;
        CHECK(tdm_js_parse_number(bad[i], strlen(bad[i]), &v) != 0, "'%s' accepted", bad[i]);
    }
}

/* JSON sets no length on a number: a 1,000-digit one (longer than the reader's window of a small input, so it
 * spans refills) reads as strtod reads it, its text intact */
static void test_long_number(void) {
    char doc[1100];
    size_t n = 0;
    doc[n++] = '[';
    for (int i = 0; i < 600; i++) doc[n++] = (char)('1' + i % 9);
    doc[n++] = '.';
    for (int i = 0; i < 400; i++) doc[n++] = (char)('0' + i % 10);
    const size_t num_len = n - 1;
    doc[n++] = ']';
    doc[n] = '\0';
    tdm_js *js = tdm_js_open_mem(doc, n, "long.json");
    CHECK(next(js) == TDM_JS_ARRAY, "[");
    CHECK(next(js) == TDM_JS_NUMBER, "number: %s", tdm_js_error(js));
    size_t len;
    const char *text = tdm_js_text(js, &len);
    CHECK(len == num_len && !memcmp(text, doc + 1, len), "text: %zu of %zu characters", len, num_len);
    const double want = strtod(doc + 1, NULL); /* it stops at the ']' */
    CHECK(tdm_js_number(js) == want && !tdm_js_number_is_int(js), "value %.17g, strtod %.17g", tdm_js_number(js), want);
    CHECK(next(js) == TDM_JS_ARRAY_END && next(js) == TDM_JS_EOF, "end: %s", tdm_js_error(js));
    tdm_js_close(js);
}

static void expect_error(const char *doc, const char *want) {
    tdm_js *js = tdm_js_open_mem(doc, strlen(doc), "bad.json");
    tdm_js_tok t;
    int guard = 0;
    while ((t = tdm_js_next(js)) != TDM_JS_ERROR && t != TDM_JS_EOF && guard++ < 1000) continue;
    CHECK(strstr(tdm_js_error(js), want) && strstr(tdm_js_error(js), "bad.json: byte "), "%s: '%s', want '%s'", doc,
          tdm_js_error(js), want);
    tdm_js_close(js);
}

static void test_errors(void) {
    expect_error("", "empty input");
    expect_error("{\"a\" 1}", "expected ':'");
    expect_error("{\"a\": 1,}", "expected a member name");
    expect_error("[1 2]", "expected ',' or ']'");
    expect_error("[1,]", "expected a value");
    expect_error("{\"a\": tru}", "expected 'true'");
    expect_error("\"abc", "unexpected end of file inside a string");
    expect_error("{\"a\": {\"b\": [}]}", "unexpected '}'");
    expect_error("{\"a\": \"\\q\"}", "invalid escape");
    expect_error("[1] 2", "after the end of the JSON value");
    expect_error("{\"a\": -}", "is not a JSON number");
    /* a skipped value is only checked for closed strings and balanced brackets */
    const char *lenient = "{\"a\": tru, \"b\": [\"\\q\", -], \"c\": 1}";
    tdm_js *js = tdm_js_open_mem(lenient, strlen(lenient), "lenient.json");
    int keys = 0;
    tdm_js_tok t = tdm_js_next(js);
    while ((t = tdm_js_next(js)) == TDM_JS_KEY) keys += tdm_js_skip_value(js) == 0;
    CHECK(keys == 3 && t == TDM_JS_OBJECT_END && tdm_js_next(js) == TDM_JS_EOF, "skipping: %s", tdm_js_error(js));
    tdm_js_close(js);
    const char *unbalanced = "{\"a\": {\"b\": [}]}";
    js = tdm_js_open_mem(unbalanced, strlen(unbalanced), "bad.json");
    CHECK(tdm_js_next(js) == TDM_JS_OBJECT && tdm_js_next(js) == TDM_JS_KEY && tdm_js_skip_value(js) != 0 &&
              strstr(tdm_js_error(js), "'}' closes a '['"),
          "%s", tdm_js_error(js));
    tdm_js_close(js);
    char deep[600];
    memset(deep, '[', 300);
    deep[300] = '\0';
    expect_error(deep, "nested deeper than 256");
}

/* Strings and numbers across the 1 MiB window, a string longer than the window, and a long
 * skipped value full of escapes. */
static void test_window_boundaries(void) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_sb_puts(&sb, "[");
    for (int i = 0; i < 200000; i++) tdm_sb_printf(&sb, "%s\"k%d\\\"\", %d.25", i ? "," : "", i, i);
    tdm_sb_puts(&sb, ", \"");
    for (int i = 0; i < 3000000; i++) tdm_sb_putc(&sb, 'a' + i % 26);
    tdm_sb_puts(&sb, "\", {\"skip\": \"");
    for (int i = 0; i < 1000000; i++) tdm_sb_puts(&sb, "\\n");
    tdm_sb_puts(&sb, "\"}]");
    tdm_js *js = tdm_js_open_mem(sb.data, sb.len, "big.json");
    CHECK(next(js) == TDM_JS_ARRAY, "[");
    int ok = 1;
    for (int i = 0; i < 200000 && ok; i++) {
        char want[32];
        snprintf(want, sizeof want, "k%d\"", i);
        ok = next(js) == TDM_JS_STRING && !strcmp(tdm_js_text(js, NULL), want);
        ok = ok && next(js) == TDM_JS_NUMBER && tdm_js_number(js) == i + 0.25;
    }
    CHECK(ok, "tokens across windows");
    size_t n;
    CHECK(next(js) == TDM_JS_STRING, "long string");
    const char *s = tdm_js_text(js, &n);
    CHECK(n == 3000000 && s[0] == 'a' && s[2999999] == 'a' + 2999999 % 26, "long string: %zu bytes", n);
    CHECK(next(js) == TDM_JS_OBJECT && next(js) == TDM_JS_KEY && tdm_js_skip_value(js) == 0, "skip escapes");
    CHECK(next(js) == TDM_JS_OBJECT_END && next(js) == TDM_JS_ARRAY_END && next(js) == TDM_JS_EOF, "end: %s",
          tdm_js_error(js));
    CHECK(tdm_js_offset(js) == sb.len, "offset %llu of %zu", (unsigned long long)tdm_js_offset(js), sb.len);
    tdm_js_close(js);
    tdm_sb_free(&sb);
}

static char tmpdir[64];

static void write_gz(const char *path, const char *data, size_t len) {
    gzFile g = gzopen(path, "wb");
    gzwrite(g, data, (unsigned)len);
    gzclose(g);
}

static void test_gzip_and_truncation(void) {
    const char *doc =
        "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"ts\": 1, \"dur\": 2, "
        "\"pid\": 0, \"tid\": 7, \"args\": {\"stream\": 7, \"correlation\": 5}}]}";
    char path[128];
    snprintf(path, sizeof path, "%s/a.json.gz", tmpdir);
    write_gz(path, doc, strlen(doc));
    tdm_runs_set s;
    tdm_runs_set_init(&s);
    tdm_error err;
    CHECK(tdm_runs_read(&s, path, &err) == 0 && s.n == 1, "%s", err.msg);
    CHECK(s.n == 1 && s.traces[0]->n_spans == 1 && s.traces[0]->has_device, "one kernel");
    /* cut in the middle of the compressed stream */
    FILE *f = fopen(path, "rb");
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/cut.json.gz", tmpdir);
    f = fopen(path, "wb");
    fwrite(buf, 1, n - 12, f);
    fclose(f);
    CHECK(tdm_runs_read(&s, path, &err) != 0 && strstr(err.msg, "truncated .gz") && strstr(err.msg, "cut.json.gz"),
          "%s", err.msg);
    CHECK(s.n == 1, "a failed read added a trace");
    tdm_runs_set_free(&s);
}

static tdm_runs_set read_doc(const char *doc, const char *name, int want_ok) {
    tdm_runs_set s;
    tdm_runs_set_init(&s);
    tdm_error err;
    int rc = tdm_runs_read_json_mem(&s, doc, strlen(doc), name, &err);
    CHECK((rc == 0) == want_ok, "%s: rc %d: %s", name, rc, rc ? err.msg : "");
    return s;
}

/* Two steps; kernels launched in step 1 run in step 2's window (the GPU lags); HTA's classes. */
static void test_steps_launches_and_classes(void) {
    const char *doc =
        "{\"distributedInfo\": {\"rank\": 3, \"world_size\": 8, \"backend\": \"nccl\"}, \"traceEvents\": ["
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#7\",\"ts\":100,\"dur\":100,\"pid\":1,"
        "\"tid\":1},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#8\",\"ts\":200,\"dur\":100,\"pid\":1,"
        "\"tid\":1},"
        "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":150,\"dur\":2,\"pid\":1,\"tid\":1,"
        "\"args\":{\"correlation\":11}},"
        "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":160,\"dur\":2,\"pid\":1,\"tid\":1,"
        "\"args\":{\"correlation\":12}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"sm80_gemm\",\"ts\":210,\"dur\":40,\"pid\":0,\"tid\":7,"
        "\"args\":{\"stream\":7,\"correlation\":11}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllGather_RING_LL(ncclDevComm*)\",\"ts\":230,"
        "\"dur\":40,"
        "\"pid\":0,\"tid\":9,\"args\":{\"stream\":9,\"correlation\":12,\"Collective name\":\"_allgather_base\","
        "\"In msg nelems\":100,\"Out msg nelems\":800,\"dtype\":\"BFloat16\",\"Group size\":8}},"
        "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy HtoD (Pageable -> Device)\",\"ts\":280,\"dur\":5,"
        "\"pid\":0,\"tid\":7,\"args\":{\"stream\":7,\"correlation\":99}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void at::native::elementwise_kernel\",\"ts\":290,\"dur\":1,"
        "\"pid\":0,\"tid\":7,\"args\":{\"stream\":7}},"
        "{\"ph\":\"f\",\"id\":11,\"pid\":0,\"tid\":7,\"ts\":210,\"cat\":\"ac2g\",\"name\":\"ac2g\",\"bp\":\"e\"}]}";
    tdm_runs_set s = read_doc(doc, "steps.json", 1);
    if (s.n != 1) goto out;
    const tdm_runs_trace *t = s.traces[0];
    CHECK(t->rank == 3 && t->world_size == 8 && !strcmp(t->backend, "nccl"), "distributedInfo");
    CHECK(t->n_steps == 2 && t->steps[0].number == 7 && t->steps[1].number == 8, "steps");
    CHECK(t->n_colls == 1, "%lld collectives", (long long)t->n_colls);
    if (t->n_colls == 1) {
        const tdm_runs_coll *c = &t->colls[0];
        CHECK(c->kind == TDM_RUNS_ALL_GATHER && c->bytes == 1600 && c->group_size == 8, "all-gather of 800 bf16");
        CHECK(c->step == 0 && c->launch_ts == 160, "attributed to step 7 by its launch: step %d", c->step);
    }
    int kinds[4] = {0};
    for (int64_t i = 0; i < t->n_spans; i++)
        if (t->spans[i].flags & TDM_RUNS_F_DEVICE) kinds[t->spans[i].kind]++;
    CHECK(kinds[TDM_RUNS_COMPUTE] == 2 && kinds[TDM_RUNS_COMM] == 1 && kinds[TDM_RUNS_MEMORY] == 1, "classes %d %d %d",
          kinds[0], kinds[1], kinds[2]);
    tdm_runs_analysis a;
    tdm_runs_analyze(&s, &a);
    const tdm_runs_step_stats *st = &a.ranks[0].steps[0];
    CHECK_NEAR(st->compute_us, 40, 1e-9);
    CHECK_NEAR(st->comm_us, 40, 1e-9);
    CHECK_NEAR(st->hidden_us, 20, 1e-9);
    CHECK_NEAR(st->exposed_us, 20, 1e-9);
    CHECK_NEAR(st->last_us, 40, 1e-9);
    CHECK_NEAR(st->last_exposed_us, 20, 1e-9);
    CHECK_NEAR(a.ranks[0].kinds[0].busbw_gbs, 1600.0 / 40 / 1e3 * 7 / 8, 1e-12);
    /* HTA: the last step (#8) starts at 200; both launches come before it */
    CHECK(a.ranks[0].hta[0].applicable && a.ranks[0].hta[0].n_comm_kernels == 1, "HTA keeps the all-gather");
    /* the memcpy's launch is not in the trace; the kernel without a correlation id is filed with
     * the CPU events, which HTA keeps only before the last step (it starts at 290) */
    CHECK(a.ranks[0].hta[0].n_kernels == 2, "HTA default keeps %lld kernels", (long long)a.ranks[0].hta[0].n_kernels);
    CHECK(a.ranks[0].hta[1].n_kernels == 3, "last step kept: %lld kernels", (long long)a.ranks[0].hta[1].n_kernels);
    tdm_runs_analysis_free(&a);
out:
    tdm_runs_set_free(&s);
}

static void test_no_steps_and_legacy(void) {
    const char *doc =
        "[{\"name\":\"aten::mm\",\"ph\":\"X\",\"ts\":10,\"dur\":50,\"tid\":1,\"pid\":\"CPU functions\"},"
        "{\"name\":\"gloo:all_reduce\",\"ph\":\"X\",\"ts\":40,\"dur\":30,\"tid\":2,\"pid\":\"CPU functions\"},"
        "{\"name\":\"c10d::allreduce_\",\"ph\":\"X\",\"ts\":39,\"dur\":1,\"tid\":1,\"pid\":\"CPU functions\"}]";
    tdm_runs_set s = read_doc(doc, "legacy_rank_5.json", 1);
    if (s.n == 1) {
        const tdm_runs_trace *t = s.traces[0];
        CHECK(t->format == TDM_RUNS_FMT_LEGACY && t->rank == 5 && t->whole_trace_step && t->n_steps == 1, "legacy");
        int noted = 0;
        for (int i = 0; i < t->n_notes; i++) noted |= strstr(t->notes[i], "analysed as one step") != NULL;
        CHECK(noted, "no note on the missing steps");
        CHECK(t->n_colls == 1 && t->colls[0].launch_ts == 39, "gloo's transfer and its c10d launch");
        tdm_runs_analysis a;
        tdm_runs_analyze(&s, &a);
        CHECK_NEAR(a.ranks[0].steps[0].compute_us, 50, 1e-9);
        CHECK_NEAR(a.ranks[0].steps[0].hidden_us, 20, 1e-9);
        CHECK_NEAR(a.ranks[0].steps[0].exposed_us, 10, 1e-9);
        CHECK(!a.ranks[0].hta[0].applicable, "HTA on a CPU trace");
        tdm_runs_analysis_free(&a);
    }
    tdm_runs_set_free(&s);
}

/* Ascend writes ts as 19-digit strings: kept to the nanosecond. */
static void test_string_timestamps(void) {
    const char *doc = "[{\"ph\":\"X\",\"name\":\"ProfilerStep#1\",\"cat\":\"cpu_op\",\"pid\":1,\"tid\":1,"
                      "\"ts\":\"1704161511420289.011\",\"dur\":100},"
                      "{\"ph\":\"X\",\"name\":\"aten::add\",\"cat\":\"cpu_op\",\"pid\":1,\"tid\":1,"
                      "\"ts\":\"1704161511420290.204\",\"dur\":1.5}]";
    tdm_runs_set s = read_doc(doc, "view.json", 1);
    if (s.n == 1) {
        const tdm_runs_trace *t = s.traces[0];
        CHECK(t->ts_base == 1704161511420289, "base %lld", (long long)t->ts_base);
        CHECK(t->n_spans == 2 && fabs(t->spans[1].ts - t->spans[0].ts - 1.193) < 1e-9, "%.9f",
              t->spans[1].ts - t->spans[0].ts);
    }
    tdm_runs_set_free(&s);
}

static void test_bad_traces(void) {
    const char *docs[] = {"{\"traceEvents\": 3}",
                          "{\"traceEvents\": [1]}",
                          "{\"x\": 1}",
                          "\"text\"",
                          "{\"traceEvents\": [{\"ph\": \"M\", \"name\": \"process_name\"}]}",
                          "{\"traceEvents\": ["};
    const char *want[] = {"\"traceEvents\" must be an array", "traceEvents[0]: expected an event object",
                          "expected a profiler trace",        "expected a profiler trace",
                          "no complete (\"X\") events",       "unexpected end of file"};
    for (int i = 0; i < 6; i++) {
        tdm_runs_set s;
        tdm_runs_set_init(&s);
        tdm_error err;
        int rc = tdm_runs_read_json_mem(&s, docs[i], strlen(docs[i]), "bad.json", &err);
        CHECK(rc != 0 && strstr(err.msg, want[i]) && strstr(err.msg, "bad.json"), "%s: %s", docs[i], err.msg);
        CHECK(s.n == 0, "a bad trace was added");
        tdm_runs_set_free(&s);
    }
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tdm_test_kineto.XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    RUN(test_tokens);
    RUN(test_numbers_round_like_strtod);
    RUN(test_long_number);
    RUN(test_errors);
    RUN(test_window_boundaries);
    RUN(test_gzip_and_truncation);
    RUN(test_steps_launches_and_classes);
    RUN(test_no_steps_and_legacy);
    RUN(test_string_timestamps);
    RUN(test_bad_traces);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return TEST_SUMMARY();
}
