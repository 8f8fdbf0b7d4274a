/* Unit tests for src/core: JSON reader, random generator, string buffer, files. */
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/rng.h"
#include "core/strbuf.h"
#include "harness.h"

static tdm_json_doc *parse(const char *s, tdm_error *err) { return tdm_json_parse(s, strlen(s), "t.json", err); }

static void test_json_values(void) {
    tdm_error err;
    tdm_json_doc *d = parse("{\"a\": 1, \"b\": [true, false, null, -2.5e3, \"x\\u00e9\\ud83d\\ude00\"], \"a\": 7,"
                            " \"big\": 12345678901234}",
                            &err);
    CHECK(d != NULL, "parse failed: %s", err.msg);
    if (!d) return;
    const tdm_json *r = tdm_json_root(d);
    int64_t a;
    CHECK(tdm_json_get_int(r, "a", &a, &err) == 0 && a == 7, "duplicate key keeps the last value");
    const tdm_json *b = tdm_json_get(r, "b");
    CHECK(b && b->type == TDM_JSON_ARRAY && b->len == 5, "array of 5");
    CHECK(tdm_json_at(b, 0)->type == TDM_JSON_TRUE, "true");
    CHECK(tdm_json_at(b, 3)->num == -2500.0 && !tdm_json_at(b, 3)->is_int, "number");
    const tdm_json *s = tdm_json_at(b, 4);
    CHECK(s->len == 7 && memcmp(s->str, "x\xc3\xa9\xf0\x9f\x98\x80", 7) == 0, "escapes decode to UTF-8");
    CHECK(tdm_json_at(b, 5) == NULL, "out of range is NULL");
    int64_t big;
    CHECK(tdm_json_get_int(r, "big", &big, &err) == 0 && big == 12345678901234LL, "int64");
    CHECK(tdm_json_get_int(r, "missing", &big, &err) != 0 && strstr(err.msg, "missing"), "missing key");
    tdm_json_free(d);
}

static void test_json_errors(void) {
    const char *bad[] = {"",           "{",     "[1,]",    "{\"a\" 1}", "\"abc",        "01",          "1.",
                         "1e",         "[1] x", "\"\\x\"", "\"\x80\"",  "\"\xc0\xaf\"", "\"\\ud800\"", "1e400",
                         "{\"a\":1,}", "tru",   "\"\x01\""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tdm_error err;
        tdm_json_doc *d = parse(bad[i], &err);
        CHECK(d == NULL, "accepted bad input #%zu", i);
        if (d) tdm_json_free(d);
        else CHECK(strncmp(err.msg, "t.json:", 7) == 0, "error names the file: %s", err.msg);
    }
    /* line and column */
    tdm_error err;
    CHECK(parse("{\n  \"a\": 1\n  \"b\": 2}", &err) == NULL, "missing comma");
    CHECK(strstr(err.msg, "t.json:3:3") != NULL, "line:col in %s", err.msg);
    /* a Git LFS pointer where the file should be (tokenizer.json of an HF clone made without git-lfs) */
    CHECK(parse("version https://git-lfs.github.com/spec/v1\noid sha256:00ff\nsize 11422654\n", &err) == NULL &&
              strstr(err.msg, "t.json: a Git LFS pointer") && strstr(err.msg, "git lfs pull"),
          "LFS pointer: %s", err.msg);
    /* depth bound */
    char deep[1200];
    memset(deep, '[', 600);
    memset(deep + 600, ']', 600);
    deep[1199] = 0;
    deep[1198] = ']';
    CHECK(tdm_json_parse(deep, 1200 - 1, "d", &err) == NULL && strstr(err.msg, "deeper"), "deep nesting: %s", err.msg);
    /* value-count bound (the mechanism, with a small bound): 1001 values */
    char many[2200];
    size_t len = 0;
    many[len++] = '[';
    for (int i = 0; i < 1000; i++) {
        many[len++] = '0';
        many[len++] = i + 1 < 1000 ? ',' : ']';
    }
    tdm_json_doc *ok = tdm_json_parse_bounded(many, len, "m", 1001, &err);
    CHECK(ok != NULL, "1001 values within a bound of 1001: %s", err.msg);
    tdm_json_free(ok);
    CHECK(tdm_json_parse_bounded(many, len, "m", 1000, &err) == NULL && strstr(err.msg, "values"), "value bound: %s",
          err.msg);
}

/* The array reader against parsing the whole text: the same elements (values and line:col)
 * for valid arrays, the same message for broken ones. */
static void check_reader(const char *text) {
    tdm_error e1, e2;
    tdm_json_doc *whole = tdm_json_parse(text, strlen(text), "f.json", &e1);
    const tdm_json *root = whole ? tdm_json_root(whole) : NULL;
    if (whole && root->type != TDM_JSON_ARRAY) { /* not an array: begin refuses it */
        tdm_json_array_reader r;
        CHECK(tdm_json_array_begin(&r, text, strlen(text), "f.json", &e2) != 0, "reader took a %s: %s",
              tdm_json_type_name(root->type), text);
        tdm_json_free(whole);
        return;
    }
    tdm_json_array_reader r;
    int rc = tdm_json_array_begin(&r, text, strlen(text), "f.json", &e2);
    const char *first = text + (strncmp(text, "\xEF\xBB\xBF", 3) ? 0 : 3);
    first += strspn(first, " \t\r\n");
    if (*first != '[') { /* the dataset reads such files another way; begin refuses them */
        CHECK(rc != 0 && strstr(e2.msg, "expected '[' (a JSON array)"), "%s: begin rc %d", text, rc);
        tdm_json_free(whole);
        return;
    }
    size_t i = 0;
    tdm_json_doc *doc;
    while (rc == 0) {
        int got = tdm_json_array_next(&r, &doc, &e2);
        if (got <= 0) {
            rc = got;
            break;
        }
        const tdm_json *a = tdm_json_root(doc), *b = whole && i < root->len ? root->items[i] : NULL;
        char path[128] = "";
        if (whole) /* a broken array's elements before the break have no whole-parse twin */
            CHECK(b && !tdm_json_first_difference(a, b, path, sizeof path) && a->line == b->line && a->col == b->col,
                  "%s: element %zu differs at '%s' or at its position", text, i, path);
        tdm_json_free(doc);
        i++;
    }
    if (whole) {
        CHECK(rc == 0 && i == root->len, "%s: reader gave %zu elements (rc %d), whole parse %zu", text, i, rc,
              root->len);
    } else {
        CHECK(rc != 0 && !strcmp(e1.msg, e2.msg), "%s: whole parse says '%s', the reader '%s'", text, e1.msg,
              rc ? e2.msg : "(nothing)");
    }
    tdm_json_free(whole);
}

static void test_json_array_reader(void) {
    static const char *const ok[] = {
        "[]",
        " [ ] \n",
        "\xEF\xBB\xBF[1]",
        "[1, \"two\", {\"a\": [3, 4]},\n  [5, [6]], null, true, false, -7.5e3]",
        "\xEF\xBB\xBF [\n {\"conversations\": [{\"from\": \"human\", \"value\": \"<image>hi\"}],\n  \"images\": "
        "[\"a.png\"]},\n"
        " {\"messages\": []}\n]\n",
        "{\"not\": \"an array\"}",
        "3",
    };
    static const char *const bad[] = {
        "",      "[",     "[1",   "[1,",           "[1,]",      "[,1]",
        "[1 2]", "[1] x", "[1]]", "[{\"a\": 1,}]", "[\"\\x\"]", "[1,\n  {\"a\":\n   tru}]",
        "x[1]",
    };
    for (size_t k = 0; k < sizeof ok / sizeof *ok; k++) check_reader(ok[k]);
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) check_reader(bad[k]);
    /* three million elements, each its own small document */
    size_t n = 3 * 1000 * 1000;
    char *big = malloc(2 * n + 3);
    big[0] = '[';
    for (size_t i = 0; i < n; i++) big[1 + 2 * i] = '0', big[2 + 2 * i] = ',';
    big[2 * n] = ']';
    big[2 * n + 1] = 0;
    tdm_error e;
    tdm_json_array_reader r;
    size_t count = 0;
    tdm_json_doc *doc;
    CHECK(tdm_json_array_begin(&r, big, 2 * n + 1, "big.json", &e) == 0, "begin: %s", e.msg);
    while (tdm_json_array_next(&r, &doc, &e) == 1) count++, tdm_json_free(doc);
    CHECK(count == n, "reader: %zu of %zu elements", count, n);
    free(big);
}

/* A one-line array past 2 GiB (json.dump writes no newline; files up to 64 GiB are read): the
 * column of an error is the byte's, not an int's wrap-around. The 2050 MiB of text are one
 * page-cache MiB of blanks mapped 2048 times between a first and a last MiB. */
static void test_json_column_past_2gib(void) {
    const size_t mib = (size_t)1 << 20, n = 2050 * mib;
    int fd = memfd_create("json_columns", 0);
    char *chunk = malloc(mib);
    int ok = fd >= 0 && chunk != NULL;
    for (int k = 0; ok && k < 3; k++) {
        memset(chunk, ' ', mib);
        if (k == 0) chunk[0] = '[';
        if (k == 2) chunk[mib - 1] = 'x';
        ok = pwrite(fd, chunk, mib, (off_t)(k * mib)) == (ssize_t)mib;
    }
    free(chunk);
    char *text = ok ? mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    for (size_t s = 0; text != MAP_FAILED && s < 2050; s++) {
        off_t off = (off_t)(s == 0 ? 0 : s == 2049 ? 2 * mib : mib);
        if (mmap(text + s * mib, mib, PROT_READ, MAP_SHARED | MAP_FIXED, fd, off) == MAP_FAILED) ok = 0;
    }
    CHECK(ok && text != MAP_FAILED, "setting up 2050 MiB of text");
    if (ok && text != MAP_FAILED) {
        tdm_error err;
        tdm_json_array_reader r;
        tdm_json_doc *doc;
        int rc = tdm_json_array_begin(&r, text, n, "one_line.json", &err);
        if (rc == 0) rc = tdm_json_array_next(&r, &doc, &err);
        CHECK(rc < 0 && strstr(err.msg, "one_line.json:1:2149580800: unexpected character"), "reader: %s",
              rc < 0 ? err.msg : "no error");
    }
    if (text != MAP_FAILED) munmap(text, n);
    if (fd >= 0) close(fd);
}

static void test_json_difference(void) {
    tdm_error err;
    const char *base = "{\"a\": 1, \"t\": {\"rope_theta\": 5000000, \"m\": [1, 2, {\"x\": \"s\"}]}, \"n\": null}";
    struct {
        const char *other;
        int differs;
        const char *path;
    } cases[] = {
        {"{\"n\": null, \"t\": {\"m\": [1, 2.0, {\"x\": \"s\"}], \"rope_theta\": 5e6}, \"a\": 1}", 0, ""},
        {"{\"a\": 1, \"t\": {\"rope_theta\": 10000, \"m\": [1, 2, {\"x\": \"s\"}]}, \"n\": null}", 1, "t.rope_theta"},
        {"{\"a\": 1, \"t\": {\"rope_theta\": 5000000, \"m\": [1, 2, {\"x\": \"S\"}]}, \"n\": null}", 1, "t.m[2].x"},
        {"{\"a\": 1, \"t\": {\"rope_theta\": 5000000, \"m\": [1, 2]}, \"n\": null}", 1, "t.m"},
        {"{\"a\": 1, \"t\": {\"rope_theta\": 5000000, \"m\": [1, 2, {\"x\": \"s\"}]}}", 1, "n"},
        {"{\"a\": 1, \"t\": {\"rope_theta\": 5000000, \"m\": [1, 2, {\"x\": \"s\"}]}, \"n\": null, \"z\": 0}", 1, "z"},
        {"{\"a\": \"1\", \"t\": {}, \"n\": null}", 1, "a"},
    };
    tdm_json_doc *a = parse(base, &err);
    CHECK(a != NULL, "%s", err.msg);
    for (size_t i = 0; a && i < sizeof cases / sizeof *cases; i++) {
        tdm_json_doc *b = parse(cases[i].other, &err);
        CHECK(b != NULL, "case %zu: %s", i, err.msg);
        if (!b) continue;
        char path[64] = "";
        int d = tdm_json_first_difference(tdm_json_root(a), tdm_json_root(b), path, sizeof path);
        CHECK(d == cases[i].differs && !strcmp(path, cases[i].path), "case %zu: %d at '%s'", i, d, path);
        tdm_json_free(b);
    }
    tdm_json_free(a);
}

static void test_rng(void) {
    /* Philox4x32-10 known-answer test (Random123 kat_vectors: ctr=0, key=0). */
    uint32_t o[4];
    tdm_philox4x32(0, 0, 0, o);
    CHECK(o[0] == 0x6627e8d5u && o[1] == 0xe169c58du && o[2] == 0xbc57ac4cu && o[3] == 0x9b00dbd8u,
          "philox kat: %08x %08x %08x %08x", o[0], o[1], o[2], o[3]);
    /* normal samples: mean ~0, var ~1 */
    double s = 0, s2 = 0;
    int n = 200000;
    for (int i = 0; i < n; i++) {
        double x = tdm_rng_normal(42, 7, (uint64_t)i);
        s += x;
        s2 += x * x;
    }
    CHECK(fabs(s / n) < 0.01, "mean %g", s / n);
    CHECK(fabs(s2 / n - 1.0) < 0.02, "var %g", s2 / n);
    CHECK(tdm_rng_normal(1, 2, 3) == tdm_rng_normal(1, 2, 3), "pure function");
    CHECK(tdm_rng_normal(1, 2, 3) != tdm_rng_normal(2, 2, 3), "seed matters");
}

static void test_strbuf(void) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    for (int i = 0; i < 1000; i++) tdm_sb_printf(&sb, "%d,", i);
    CHECK(sb.len == strlen(sb.data), "length");
    tdm_sb_clear(&sb);
    tdm_sb_json_string(&sb, "a\"b\\\n\x01", 6);
    CHECK(strcmp(sb.data, "\"a\\\"b\\\\\\n\\u0001\"") == 0, "json escape: %s", sb.data);
    tdm_sb_free(&sb);
}

static void test_files(void) {
    char dir[] = "/tmp/tdm_core_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    snprintf(path, sizeof path, "%s/sub/dir/f.txt", dir);
    tdm_error err;
    char sub[256];
    tdm_dirname(path, sub, sizeof sub);
    CHECK(tdm_mkdirs(sub, &err) == 0, "mkdirs: %s", err.msg);
    CHECK(tdm_write_file_atomic(path, "hello", 5, &err) == 0, "write: %s", err.msg);
    size_t n;
    char *s = tdm_read_file(path, 100, &n, &err);
    CHECK(s && n == 5 && strcmp(s, "hello") == 0, "read back");
    free(s);
    CHECK(tdm_read_file(path, 4, &n, &err) == NULL && strstr(err.msg, "limit"), "size bound: %s", err.msg);
    CHECK(tdm_read_file("/nonexistent/x", 4, &n, &err) == NULL && strstr(err.msg, "/nonexistent/x"),
          "missing file named");
    /* A path too long for "PATH.tmp.<pid>" to fit beside it: the temporary name was cut
     * short (at 4095 bytes it is PATH itself, truncated in place), so refuse instead. */
    char deep[4200];
    int at = snprintf(deep, sizeof deep, "%s", dir);
    for (int k = 0; k < 19; k++) at += snprintf(deep + at, sizeof deep - (size_t)at, "/%0200d", k);
    CHECK(tdm_mkdirs(deep, &err) == 0, "deep mkdirs: %s", err.msg);
    deep[at++] = '/';
    while (at < 4090) deep[at++] = 'f'; /* a 250-byte file name: 4090 bytes in all */
    deep[at] = 0;
    CHECK(tdm_write_file_atomic(deep, "x", 1, &err) != 0 && strstr(err.msg, "too long"), "a %d-byte path: %s", at,
          err.msg);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
}

/* A mapped file cut short under the reader: SIGBUS inside a guard returns through sigsetjmp;
 * outside every guard it still ends the process (the guard's handler only takes its own). */
static void test_map_guard(void) {
    char path[] = "/tmp/tdm_map_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    const long page = sysconf(_SC_PAGESIZE);
    char *buf = tdm_xmalloc((size_t)page * 3);
    memset(buf, 'a', (size_t)page * 3);
    tdm_error err;
    CHECK(tdm_write_all(fd, buf, (size_t)page * 3, path, &err) == 0, "write");
    free(buf);
    size_t len;
    const char *p = tdm_map_file(path, 1 << 20, &len, &err);
    CHECK(p && len == (size_t)page * 3, "map: %s", err.msg);
    CHECK(ftruncate(fd, 100) == 0, "truncate");
    close(fd);
    volatile int jumped = 0, got = 0;
    tdm_map_guard g;
    tdm_map_guard_arm(&g, p, len);
    if (sigsetjmp(g.jb, 1) == 0) {
        got += ((const volatile char *)p)[50];           /* still in the file */
        got += ((const volatile char *)p)[2 * page + 1]; /* past its new end: SIGBUS */
        tdm_map_guard_leave(&g);
    } else {
        jumped = 1;
    }
    CHECK(jumped && got == 'a', "guarded read past the end: jumped %d, read %d", jumped, got);
    /* the guard is off after the jump: the same read now ends a child process */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY); /* a sanitizer's report of the expected crash */
        if (null >= 0) dup2(null, 2);
        got += ((const volatile char *)p)[2 * page + 1];
        _exit(0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/wait");
    CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) || (WIFEXITED(status) && WEXITSTATUS(status) != 0),
          "an unguarded SIGBUS was swallowed (status %d)", status);
    tdm_unmap_file(p, len);
    unlink(path);
}

static void test_alloc(void) {
    tdm_error err;
    float *p = tdm_alloc_big(1000 * sizeof(float), &err);
    CHECK(p && ((uintptr_t)p % 64) == 0, "aligned");
    CHECK(p[999] == 0.0f, "zeroed");
    tdm_free_big(p);
}

int main(void) {
    RUN(test_json_values);
    RUN(test_json_errors);
    RUN(test_json_difference);
    RUN(test_json_array_reader);
    RUN(test_json_column_past_2gib);
    RUN(test_rng);
    RUN(test_strbuf);
    RUN(test_files);
    RUN(test_map_guard);
    RUN(test_alloc);
    return TEST_SUMMARY();
}
