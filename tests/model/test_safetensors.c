/* test_safetensors.c - the safetensors reader and writer: round trips (F32, BF16), BF16
 * rounding against an independent nearest-even reference, F16 loading, sharded
 * checkpoints, the exact bytes of a small file, and broken files (written here by hand
 * into a temp directory) refused with messages naming the file and the tensor. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "harness.h"
#include "model/safetensors.h"

static char tmpdir[256];

static void tpath(char *out, const char *name) { snprintf(out, 512, "%s/%s", tmpdir, name); }

/* A safetensors file written byte by byte: u64 header length, header, data. */
static void write_raw(const char *path, const char *header, const void *data, size_t dlen) {
    FILE *f = fopen(path, "wb");
    uint64_t n = strlen(header);
    unsigned char lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (unsigned char)(n >> (8 * i));
    fwrite(lb, 1, 8, f);
    fwrite(header, 1, n, f);
    if (dlen) fwrite(data, 1, dlen, f);
    fclose(f);
}

static char *slurp(const char *path, size_t *len) {
    tdm_error err;
    char *b = tdm_read_file(path, 1 << 26, len, &err);
    if (!b) fprintf(stderr, "  %s\n", err.msg);
    return b;
}

static int same_file(const char *a, const char *b) {
    size_t la = 0, lb = 0;
    char *x = slurp(a, &la), *y = slurp(b, &lb);
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd32(void) { /* xorshift64*, for test inputs only */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}

/* Independent reference: choose between the two bf16 neighbours of x by distance in
 * double, ties to the even one; the neighbour past the largest finite bf16 is inf. */
static uint16_t ref_bf16(float x) {
    uint32_t u = bits(x);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    if ((u & 0xffff) == 0) return lo;
    double dx = fabs((double)x), dlo = fabs((double)from_bits((uint32_t)lo << 16));
    double dhi = (hi & 0x7fff) == 0x7f80 ? ldexp(1.0, 128) : fabs((double)from_bits((uint32_t)hi << 16));
    double a = dx - dlo, b = dhi - dx;
    if (a < b) return lo;
    if (b < a) return hi;
    return (lo & 1) ? hi : lo;
}

static void test_roundtrip_f32(void) {
    char path[512];
    tpath(path, "rt.safetensors");
    float a[6] = {1.5f, -2.25f, 3e-38f, 1e-45f, -0.0f, 65504.0f};
    float b[4] = {INFINITY, -INFINITY, 0.1f, -7.0f};
    float c[1] = {42.0f};
    int64_t sa[2] = {2, 3}, sb[1] = {4}, sz[2] = {0, 3};
    tdm_st_entry e[4] = {{"w.a", 2, sa, a}, {"w.b", 1, sb, b}, {"scalar", 0, NULL, c}, {"empty", 2, sz, NULL}};
    const char *meta[] = {"format", "pt", "step", "12"};
    tdm_error err = {{0}};
    CHECK(tdm_safetensors_write(path, e, 4, TDM_ST_F32, meta, 2, &err) == 0, "%s", err.msg);
    tdm_safetensors *st = tdm_safetensors_open(path, &err);
    CHECK(st != NULL, "%s", err.msg);
    if (!st) return;
    CHECK(tdm_safetensors_count(st) == 4, "count %d", tdm_safetensors_count(st));
    const tdm_st_tensor *t = tdm_safetensors_find(st, "w.a");
    CHECK(t && t->dtype == TDM_ST_F32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 && t->numel == 6, "w.a");
    t = tdm_safetensors_find(st, "empty");
    CHECK(t && t->numel == 0 && t->ndim == 2, "empty");
    t = tdm_safetensors_find(st, "scalar");
    CHECK(t && t->numel == 1 && t->ndim == 0, "scalar");
    CHECK(tdm_safetensors_find(st, "nope") == NULL, "found a missing tensor");
    const char *fmt = tdm_safetensors_metadata(st, "format"), *step = tdm_safetensors_metadata(st, "step");
    CHECK(fmt && !strcmp(fmt, "pt") && step && !strcmp(step, "12"), "metadata");
    float ra[6], rb[4], rc[1];
    CHECK(tdm_safetensors_read_f32(st, "w.a", ra, 6, &err) == 0, "%s", err.msg);
    CHECK(tdm_safetensors_read_f32(st, "w.b", rb, 4, &err) == 0, "%s", err.msg);
    CHECK(tdm_safetensors_read_f32(st, "scalar", rc, 1, &err) == 0, "%s", err.msg);
    CHECK(memcmp(ra, a, sizeof a) == 0 && memcmp(rb, b, sizeof b) == 0 && rc[0] == 42.0f, "values differ");
    CHECK(tdm_safetensors_read_f32(st, "w.a", ra, 5, &err) == -1 && strstr(err.msg, "w.a"), "count mismatch: %s",
          err.msg);
    CHECK(tdm_safetensors_read_f32(st, "nope", ra, 6, &err) == -1 && strstr(err.msg, "nope") && strstr(err.msg, path),
          "missing: %s", err.msg);
    tdm_safetensors_close(st);
}

/* The bytes of a tiny file, against the format written out by hand. */
static void test_exact_bytes(void) {
    char path[512];
    tpath(path, "exact.safetensors");
    float v[2] = {1.0f, -2.0f};
    int64_t s[1] = {2};
    tdm_st_entry e = {"a", 1, s, v};
    const char *meta[] = {"format", "pt"};
    tdm_error err;
    CHECK(tdm_safetensors_write(path, &e, 1, TDM_ST_BF16, meta, 1, &err) == 0, "%s", err.msg);
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"BF16\",\"shape\":[2],"
                      "\"data_offsets\":[0,4]}}";
    size_t hl = strlen(hdr), padded = (hl + 8 + 7) / 8 * 8 - 8;
    unsigned char want[256];
    memset(want, ' ', sizeof want);
    for (int i = 0; i < 8; i++) want[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(want + 8, hdr, hl);
    const unsigned char data[4] = {0x80, 0x3f, 0x00, 0xc0}; /* bf16 1.0 = 0x3f80, -2.0 = 0xc000, little-endian */
    memcpy(want + 8 + padded, data, 4);
    size_t len = 0;
    char *got = slurp(path, &len);
    CHECK(got && len == 8 + padded + 4, "file is %zu bytes, expected %zu", len, 8 + padded + 4);
    CHECK(got && len == 8 + padded + 4 && memcmp(got, want, len) == 0, "bytes differ from the hand-written file");
    CHECK((8 + padded) % 8 == 0, "data not 8-aligned");
    free(got);
}

static void test_bf16_rounding(void) {
    /* Ties: 1 + 2^-8 lies halfway between 1 (even) and 1 + 2^-7 (odd) -> 1;
     * 1 + 3*2^-8 lies between 1 + 2^-7 (odd) and 1 + 2^-6 (even) -> 1 + 2^-6. */
    CHECK(tdm_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80, "tie to even down: %04x", tdm_f32_to_bf16(1.0f + 0x1p-8f));
    CHECK(tdm_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82, "tie to even up: %04x", tdm_f32_to_bf16(1.0f + 3 * 0x1p-8f));
    CHECK(tdm_f32_to_bf16(-(1.0f + 3 * 0x1p-8f)) == 0xbf82, "negative tie");
    CHECK(tdm_f32_to_bf16(from_bits(0x7f7fffff)) == 0x7f80, "FLT_MAX rounds to inf");
    CHECK(tdm_f32_to_bf16(INFINITY) == 0x7f80 && tdm_f32_to_bf16(-INFINITY) == 0xff80, "inf");
    uint16_t qn = tdm_f32_to_bf16(from_bits(0x7f800001)); /* a NaN whose payload lives in the low bits */
    CHECK((qn & 0x7f80) == 0x7f80 && (qn & 0x7f), "NaN became %04x", qn);
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        uint32_t u = rnd32();
        if ((u & 0x7f800000u) == 0x7f800000u) continue; /* inf/NaN handled above */
        float x = from_bits(u);
        if (tdm_f32_to_bf16(x) != ref_bf16(x) && bad++ < 5)
            CHECK(0, "x = %a (%08x): %04x, reference %04x", x, u, tdm_f32_to_bf16(x), ref_bf16(x));
    }
    CHECK(bad == 0, "%d mismatches", bad);

    /* Through a file: written as BF16, read back as the reference's values. */
    enum { N = 4096 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    for (int i = 0; i < N; i++) x[i] = from_bits((rnd32() & 0x3fffffffu) | (i & 1 ? 0x80000000u : 0)); /* finite */
    x[0] = 1.0f + 0x1p-8f;
    char path[512];
    tpath(path, "bf16.safetensors");
    int64_t s[2] = {64, 64};
    tdm_st_entry e = {"x", 2, s, x};
    tdm_error err;
    CHECK(tdm_safetensors_write(path, &e, 1, TDM_ST_BF16, NULL, 0, &err) == 0, "%s", err.msg);
    tdm_safetensors *st = tdm_safetensors_open(path, &err);
    CHECK(st != NULL, "%s", err.msg);
    if (st) {
        CHECK(tdm_safetensors_find(st, "x")->dtype == TDM_ST_BF16, "dtype");
        CHECK(tdm_safetensors_read_f32(st, "x", y, N, &err) == 0, "%s", err.msg);
        int wrong = 0;
        for (int i = 0; i < N; i++) wrong += bits(y[i]) != (uint32_t)ref_bf16(x[i]) << 16;
        CHECK(wrong == 0, "%d values differ from the reference rounding", wrong);
        tdm_safetensors_close(st);
    }
    free(x);
    free(y);
}

static void test_f16_load(void) {
    const uint16_t h[10] = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x03ff, 0x7c00, 0x8000, 0x3555, 0x7e00};
    const float want[9] = {
        1.0f, -2.0f, 0.5f, 65504.0f, 0x1p-24f, 1023 * 0x1p-24f, INFINITY, -0.0f, (float)ldexp(1 + 0x155 / 1024.0, -2)};
    char path[512];
    tpath(path, "f16.safetensors");
    write_raw(path, "{\"h\":{\"dtype\":\"F16\",\"shape\":[2,5],\"data_offsets\":[0,20]}}    ", h, sizeof h);
    tdm_error err;
    tdm_safetensors *st = tdm_safetensors_open(path, &err);
    CHECK(st != NULL, "%s", err.msg);
    if (!st) return;
    float y[10];
    CHECK(tdm_safetensors_read_f32(st, "h", y, 10, &err) == 0, "%s", err.msg);
    for (int i = 0; i < 9; i++) CHECK(bits(y[i]) == bits(want[i]), "h[%d] = %a, expected %a", i, y[i], want[i]);
    CHECK(isnan(y[9]), "NaN lost: %g", y[9]);
    tdm_safetensors_close(st);
}

static void test_sharded(void) {
    char dir[512], p1[600], p2[600], idx[600];
    tpath(dir, "sharded");
    tdm_error err;
    CHECK(tdm_mkdirs(dir, &err) == 0, "%s", err.msg);
    snprintf(p1, sizeof p1, "%s/model-00001-of-00002.safetensors", dir);
    snprintf(p2, sizeof p2, "%s/model-00002-of-00002.safetensors", dir);
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    float a[3] = {1, 2, 3}, b[2] = {4, 5}, c[1] = {6};
    int64_t s3[1] = {3}, s2[1] = {2}, s1[1] = {1};
    tdm_st_entry e1[2] = {{"a", 1, s3, a}, {"b", 1, s2, b}}, e2[1] = {{"c", 1, s1, c}};
    CHECK(tdm_safetensors_write(p1, e1, 2, TDM_ST_F32, NULL, 0, &err) == 0, "%s", err.msg);
    CHECK(tdm_safetensors_write(p2, e2, 1, TDM_ST_BF16, NULL, 0, &err) == 0, "%s", err.msg);
    const char *good =
        "{\"metadata\": {\"total_size\": 22}, \"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\","
        " \"b\": \"model-00001-of-00002.safetensors\", \"c\": \"model-00002-of-00002.safetensors\"}}";
    CHECK(tdm_write_file_atomic(idx, good, strlen(good), &err) == 0, "%s", err.msg);
    const char *opens[2] = {dir, idx};
    for (int k = 0; k < 2; k++) {
        tdm_safetensors *st = tdm_safetensors_open(opens[k], &err);
        CHECK(st != NULL, "%s", err.msg);
        if (!st) continue;
        CHECK(tdm_safetensors_count(st) == 3, "count");
        float y[3];
        CHECK(tdm_safetensors_read_f32(st, "a", y, 3, &err) == 0 && y[2] == 3, "a: %s", err.msg);
        CHECK(tdm_safetensors_read_f32(st, "c", y, 1, &err) == 0 && y[0] == 6, "c: %s", err.msg);
        CHECK(strstr(tdm_safetensors_file(st, tdm_safetensors_find(st, "c")), "00002") != NULL, "file of c");
        tdm_safetensors_close(st);
    }
    /* Broken indexes. */
    const struct {
        const char *json, *needle;
    } bad[] = {
        {"{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", \"b\": \"model-00002-of-00002.safetensors\","
         " \"c\": \"model-00002-of-00002.safetensors\"}}",
         "\"b\""},
        {"{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", \"c\": \"model-00002-of-00002.safetensors\"}}",
         "\"b\""},
        {"{\"weight_map\": {\"a\": \"../x.safetensors\"}}", "plain file name"},
        {"{\"weight_map\": {\"a\": \"model-00009-of-00009.safetensors\"}}", "model-00009-of-00009.safetensors"},
        {"{\"weight_map\": [1]}", "weight_map"},
        {"{\"weight_map\": {}}", "lists no tensors"},
        {"{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\"", "index.json"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(tdm_write_file_atomic(idx, bad[i].json, strlen(bad[i].json), &err) == 0, "%s", err.msg);
        err.msg[0] = 0;
        tdm_safetensors *st = tdm_safetensors_open(dir, &err);
        CHECK(st == NULL, "bad index %zu accepted", i);
        tdm_safetensors_close(st);
        CHECK(strstr(err.msg, bad[i].needle) != NULL, "bad index %zu: '%s' not in: %s", i, bad[i].needle, err.msg);
        if (getenv("TDM_TEST_VERBOSE")) printf("  index %zu: %s\n", i, err.msg);
    }
}

typedef struct broken {
    const char *name, *header;
    size_t data_len;
    const char *needle; /* must appear in the message besides the file name */
} broken;

static void test_broken_files(void) {
    const broken cases[] = {
        {"lying_offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "\"a\""},
        {"span_vs_shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "\"a\""},
        {"reversed", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8, "\"a\""},
        {"overlap",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         12, "overlaps"},
        {"gap",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
         12, "\"b\""},
        {"trailing", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "cover"},
        {"bad_dtype", "{\"a\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,1]}}", 1, "\"a\""},
        {"dtype_not_string", "{\"a\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "\"a\""},
        {"shape_overflow", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", 8,
         "overflow"},
        {"bytes_overflow", "{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,8]}}", 8,
         "overflow"},
        {"negative_dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "\"a\""},
        {"no_offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "data_offsets"},
        {"too_many_dims", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
         "\"a\""},
        {"duplicate",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         8, "twice"},
        /* the same entry written twice (a tool that appended instead of replacing) */
        {"duplicate_same_entry",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
         4, "\"a\" appears twice"},
        {"not_json", "this is not json at all", 0, "safetensors header"},
        {"not_object", "[1, 2, 3]", 0, "object"},
        {"metadata_not_strings", "{\"__metadata__\":{\"step\":3}}", 0, "__metadata__"},
    };
    unsigned char data[64] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[512], name[128];
        snprintf(name, sizeof name, "%s.safetensors", cases[i].name);
        tpath(path, name);
        write_raw(path, cases[i].header, data, cases[i].data_len);
        tdm_error err = {{0}};
        tdm_safetensors *st = tdm_safetensors_open(path, &err);
        CHECK(st == NULL, "%s: accepted", cases[i].name);
        tdm_safetensors_close(st);
        CHECK(strstr(err.msg, path) != NULL, "%s: file not named: %s", cases[i].name, err.msg);
        CHECK(strstr(err.msg, cases[i].needle) != NULL, "%s: '%s' not in: %s", cases[i].name, cases[i].needle, err.msg);
        if (getenv("TDM_TEST_VERBOSE")) printf("  %-20s %s\n", cases[i].name, err.msg + strlen(tmpdir) + 1);
    }

    /* Header-length problems: a huge length, a header longer than the file, a stub. */
    char path[512];
    tdm_error err;
    tpath(path, "huge_header.safetensors");
    unsigned char huge[16] = {0, 0, 0, 0, 0, 1, 0, 0, '{', '}'}; /* 2^40 */
    FILE *f = fopen(path, "wb");
    fwrite(huge, 1, sizeof huge, f);
    fclose(f);
    CHECK(tdm_safetensors_open(path, &err) == NULL && strstr(err.msg, path) && strstr(err.msg, "limit"), "huge: %s",
          err.msg);
    tpath(path, "short_header.safetensors");
    unsigned char sh[12] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
    f = fopen(path, "wb");
    fwrite(sh, 1, sizeof sh, f);
    fclose(f);
    CHECK(tdm_safetensors_open(path, &err) == NULL && strstr(err.msg, path) && strstr(err.msg, "truncated"),
          "short header: %s", err.msg);
    tpath(path, "stub.safetensors");
    f = fopen(path, "wb");
    fwrite("abc", 1, 3, f);
    fclose(f);
    CHECK(tdm_safetensors_open(path, &err) == NULL && strstr(err.msg, path), "stub: %s", err.msg);
    tpath(path, "does_not_exist.safetensors");
    CHECK(tdm_safetensors_open(path, &err) == NULL && strstr(err.msg, path), "missing: %s", err.msg);
    /* A Hugging Face clone made without git-lfs holds pointer files where the weights should be. */
    tpath(path, "lfs_pointer.safetensors");
    f = fopen(path, "wb");
    fputs("version https://git-lfs.github.com/spec/v1\n"
          "oid sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\nsize 4902257696\n",
          f);
    fclose(f);
    CHECK(tdm_safetensors_open(path, &err) == NULL && strstr(err.msg, path) && strstr(err.msg, "Git LFS pointer") &&
              strstr(err.msg, "git lfs pull"),
          "LFS pointer: %s", err.msg);

    /* A good file cut short: its last tensor no longer fits. */
    tpath(path, "truncated.safetensors");
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t s[1] = {4};
    tdm_st_entry e[2] = {{"first", 1, s, v}, {"last", 1, s, v + 4}};
    CHECK(tdm_safetensors_write(path, e, 2, TDM_ST_F32, NULL, 0, &err) == 0, "%s", err.msg);
    size_t len = 0;
    free(slurp(path, &len));
    CHECK(truncate(path, (off_t)len - 3) == 0, "truncate");
    CHECK(tdm_safetensors_open(path, &err) == NULL && strstr(err.msg, path) && strstr(err.msg, "\"last\""),
          "truncated: %s", err.msg);

    /* A dtype the header may use but fp32 loading refuses. */
    tpath(path, "i32.safetensors");
    write_raw(path, "{\"n\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8);
    tdm_safetensors *st = tdm_safetensors_open(path, &err);
    CHECK(st != NULL, "%s", err.msg);
    float y[2];
    CHECK(st && tdm_safetensors_read_f32(st, "n", y, 2, &err) == -1 && strstr(err.msg, "\"n\"") &&
              strstr(err.msg, "I32") && strstr(err.msg, path),
          "I32: %s", err.msg);
    tdm_safetensors_close(st);
}

/* A parameter table like a model's, with storage. */
static void make_table(tdm_param_table *t, float **data, float **grad, int with_head) {
    memset(t, 0, sizeof *t);
    int64_t emb[2] = {8, 4}, w[2] = {2, 3}, n[1] = {4};
    tdm_param_table_add(t, "model.language_model.embed_tokens.weight", 2, emb, 1, 0);
    tdm_param_table_add(t, "model.layers.0.w", 2, w, 1, 1);
    tdm_param_table_add(t, "model.language_model.norm.weight", 1, n, 1, 2);
    if (with_head) tdm_param_table_add(t, "lm_head.weight", 2, emb, 1, 3);
    tdm_error err;
    if (tdm_param_table_alloc(t, data, grad, &err)) fprintf(stderr, "%s\n", err.msg);
}

static void fill(tdm_param_table *t, int salt) {
    for (int i = 0; i < t->n; i++)
        for (int64_t j = 0; j < t->p[i].numel; j++) t->p[i].data[j] = (float)(salt + i) + 0.013f * (float)j - 0.4f;
}

static void test_load_params(void) {
    tdm_param_table a, b;
    float *da, *ga, *db, *gb;
    make_table(&a, &da, &ga, 1);
    make_table(&b, &db, &gb, 1);
    fill(&a, 1);
    char path[512];
    tpath(path, "params.safetensors");
    tdm_error err;
    CHECK(tdm_safetensors_save_params(path, &a, TDM_ST_F32, NULL, 0, &err) == 0, "%s", err.msg);
    tdm_safetensors *st = tdm_safetensors_open(path, &err);
    CHECK(st != NULL, "%s", err.msg);
    tdm_st_load_report rep;
    CHECK(st && tdm_safetensors_load_params(st, &b, TDM_ST_STRICT, &rep, &err) == 0, "%s", err.msg);
    CHECK(rep.n_loaded == 4 && rep.n_extra == 0 && !rep.lm_head_from_embedding, "report");
    CHECK(memcmp(da, db, (size_t)tdm_param_table_numel(&a, 0) * 4) == 0, "values differ");
    tdm_safetensors_close(st);

    /* Tied: the file has no lm_head; the table asks for one. */
    tdm_param_table tied;
    float *dt, *gt;
    make_table(&tied, &dt, &gt, 0);
    fill(&tied, 5);
    tpath(path, "tied.safetensors");
    CHECK(tdm_safetensors_save_params(path, &tied, TDM_ST_F32, NULL, 0, &err) == 0, "%s", err.msg);
    st = tdm_safetensors_open(path, &err);
    CHECK(st && tdm_safetensors_load_params(st, &b, 0, &rep, &err) == -1 && strstr(err.msg, "\"lm_head.weight\"") &&
              strstr(err.msg, path),
          "untied load of a tied file: %s", err.msg);
    CHECK(st && tdm_safetensors_load_params(st, &b, TDM_ST_TIED_LM_HEAD, &rep, &err) == 0, "%s", err.msg);
    CHECK(rep.lm_head_from_embedding == 1, "fallback not reported");
    int hi = tdm_param_table_find(&b, "lm_head.weight");
    CHECK(hi >= 0 && memcmp(b.p[hi].data, tied.p[0].data, 32 * 4) == 0, "lm_head is not the embedding");
    tdm_safetensors_close(st);

    /* Extra tensors: counted, or refused with STRICT; a tied copy of lm_head is not extra. */
    tpath(path, "params.safetensors");
    st = tdm_safetensors_open(path, &err);
    CHECK(st && tdm_safetensors_load_params(st, &tied, 0, &rep, &err) == 0, "%s", err.msg);
    CHECK(rep.n_extra == 1 && !strcmp(rep.first_extra, "lm_head.weight"), "extra %d '%s'", rep.n_extra,
          rep.first_extra);
    CHECK(st && tdm_safetensors_load_params(st, &tied, TDM_ST_TIED_LM_HEAD, &rep, &err) == 0 && rep.n_extra == 0,
          "tied copy counted as extra");
    CHECK(st && tdm_safetensors_load_params(st, &tied, TDM_ST_STRICT, &rep, &err) == -1 &&
              strstr(err.msg, "lm_head.weight") && strstr(err.msg, path),
          "strict: %s", err.msg);
    tdm_safetensors_close(st);

    /* Shape mismatch: the file's w is [3, 2], the model's [2, 3]. */
    tpath(path, "shape.safetensors");
    float v[32] = {0};
    int64_t se[2] = {8, 4}, sw[2] = {3, 2}, sn[1] = {4};
    tdm_st_entry e[3] = {{"model.language_model.embed_tokens.weight", 2, se, v},
                         {"model.layers.0.w", 2, sw, v},
                         {"model.language_model.norm.weight", 1, sn, v}};
    CHECK(tdm_safetensors_write(path, e, 3, TDM_ST_BF16, NULL, 0, &err) == 0, "%s", err.msg);
    st = tdm_safetensors_open(path, &err);
    CHECK(st && tdm_safetensors_load_params(st, &tied, 0, &rep, &err) == -1 &&
              strstr(err.msg, "\"model.layers.0.w\"") && strstr(err.msg, "[3, 2]") && strstr(err.msg, "[2, 3]") &&
              strstr(err.msg, path),
          "shape: %s", err.msg);
    tdm_safetensors_close(st);

    /* Missing tensor. */
    tpath(path, "missing.safetensors");
    CHECK(tdm_safetensors_write(path, e, 1, TDM_ST_F32, NULL, 0, &err) == 0, "%s", err.msg);
    st = tdm_safetensors_open(path, &err);
    CHECK(st && tdm_safetensors_load_params(st, &tied, 0, &rep, &err) == -1 &&
              strstr(err.msg, "\"model.layers.0.w\"") && strstr(err.msg, "missing") && strstr(err.msg, path),
          "missing: %s", err.msg);
    tdm_safetensors_close(st);

    /* Unsupported dtype in a parameter's place. */
    tpath(path, "dtype.safetensors");
    unsigned char raw[8 * 4 * 4] = {0};
    write_raw(
        path,
        "{\"model.language_model.embed_tokens.weight\":{\"dtype\":\"I32\",\"shape\":[8,4],\"data_offsets\":[0,128]}}",
        raw, sizeof raw);
    st = tdm_safetensors_open(path, &err);
    CHECK(st && tdm_safetensors_load_params(st, &tied, 0, &rep, &err) == -1 && strstr(err.msg, "embed_tokens") &&
              strstr(err.msg, "I32"),
          "dtype: %s", err.msg);
    tdm_safetensors_close(st);

    /* Weights that are not finite: refused naming the file, the tensor and the first bad value (they
     * were trained on, and the first error blamed lm_head's gradient). */
    static const struct {
        uint32_t bits;
        const char *name;
    } nonfinite[] = {{0x7fc00000u, "NaN"}, {0x7f800000u, "inf"}, {0xff800000u, "-inf"}};
    for (int k = 0; k < 3; k++) {
        fill(&a, 1);
        int wi = tdm_param_table_find(&a, "model.layers.0.w");
        a.p[wi].data[4] = from_bits(nonfinite[k].bits);
        tpath(path, "nonfinite.safetensors");
        CHECK(tdm_safetensors_save_params(path, &a, TDM_ST_F32, NULL, 0, &err) == 0, "%s", err.msg);
        st = tdm_safetensors_open(path, &err);
        char want[96];
        snprintf(want, sizeof want, "1 of its 6 values are not finite (element 4 is %s)", nonfinite[k].name);
        CHECK(st && tdm_safetensors_load_params(st, &b, 0, &rep, &err) == -1 && strstr(err.msg, path) &&
                  strstr(err.msg, "tensor \"model.layers.0.w\"") && strstr(err.msg, want),
              "%s: %s", nonfinite[k].name, err.msg);
        tdm_safetensors_close(st);
    }
    /* past the vector loop's first blocks */
    float *big = calloc(10000, sizeof *big);
    big[9000] = from_bits(0x7fc00000u);
    CHECK(tdm_st_check_finite(big, 10000, "f", "x", &err) == -1 && strstr(err.msg, "element 9000 is NaN"), "%s",
          err.msg);
    big[9000] = 0;
    CHECK(tdm_st_check_finite(big, 10000, "f", "x", &err) == 0, "finite values refused: %s", err.msg);
    free(big);

    tdm_free_big(da), tdm_free_big(ga), tdm_free_big(db), tdm_free_big(gb), tdm_free_big(dt), tdm_free_big(gt);
    tdm_param_table_free(&a), tdm_param_table_free(&b), tdm_param_table_free(&tied);
}

/* save -> load -> save gives the same bytes (F32 and BF16), and saving is deterministic. */
static void test_save_load_save(void) {
    const tdm_st_dtype kinds[2] = {TDM_ST_F32, TDM_ST_BF16};
    for (int k = 0; k < 2; k++) {
        tdm_param_table a, b;
        float *da, *ga, *db, *gb;
        make_table(&a, &da, &ga, 1);
        make_table(&b, &db, &gb, 1);
        for (int64_t i = 0; i < tdm_param_table_numel(&a, 0); i++) da[i] = from_bits(rnd32() & 0xbfffffffu);
        char p1[512], p2[512], p3[512];
        tpath(p1, k ? "sls1.bf16" : "sls1.f32");
        tpath(p2, k ? "sls2.bf16" : "sls2.f32");
        tpath(p3, k ? "sls3.bf16" : "sls3.f32");
        const char *meta[] = {"format", "pt", "iteration", "7"};
        tdm_error err;
        CHECK(tdm_safetensors_save_params(p1, &a, kinds[k], meta, 2, &err) == 0, "%s", err.msg);
        CHECK(tdm_safetensors_save_params(p3, &a, kinds[k], meta, 2, &err) == 0, "%s", err.msg);
        tdm_safetensors *st = tdm_safetensors_open(p1, &err);
        CHECK(st && tdm_safetensors_load_params(st, &b, TDM_ST_STRICT, NULL, &err) == 0, "%s", err.msg);
        tdm_safetensors_close(st);
        CHECK(tdm_safetensors_save_params(p2, &b, kinds[k], meta, 2, &err) == 0, "%s", err.msg);
        CHECK(same_file(p1, p2), "%s: save -> load -> save changed the bytes", tdm_st_dtype_name(kinds[k]));
        CHECK(same_file(p1, p3), "%s: two saves of the same table differ", tdm_st_dtype_name(kinds[k]));
        tdm_free_big(da), tdm_free_big(ga), tdm_free_big(db), tdm_free_big(gb);
        tdm_param_table_free(&a), tdm_param_table_free(&b);
    }
}

static void test_writer_refuses(void) {
    char path[512];
    tpath(path, "refused.safetensors");
    float v[2] = {1, 2};
    int64_t s[1] = {2};
    tdm_st_entry dup[2] = {{"x", 1, s, v}, {"x", 1, s, v}};
    tdm_error err;
    CHECK(tdm_safetensors_write(path, dup, 2, TDM_ST_F32, NULL, 0, &err) == -1 && strstr(err.msg, "\"x\""), "dup: %s",
          err.msg);
    CHECK(tdm_safetensors_write(path, dup, 1, TDM_ST_F16, NULL, 0, &err) == -1 && strstr(err.msg, "F16"), "f16: %s",
          err.msg);
    tdm_st_entry meta_name = {"__metadata__", 1, s, v};
    CHECK(tdm_safetensors_write(path, &meta_name, 1, TDM_ST_F32, NULL, 0, &err) == -1, "metadata name accepted");
    CHECK(!tdm_file_exists(path), "a refused write left a file");
}

/* tdm_safetensors_write_stream: values asked for in file order, only for entries without
 * data, the same bytes as a write from memory (F32 and BF16); a provider failure stops the
 * write with its message and leaves an existing file as it was. */
typedef struct provider_log {
    const float *values[4];
    int asked[8], n_asked;
    int fail_at; /* index whose request fails, -1 none */
} provider_log;

static const float *provide(void *ctx, int index, tdm_error *err) {
    provider_log *l = ctx;
    l->asked[l->n_asked++] = index;
    if (index == l->fail_at) {
        tdm_errorf(err, "no values for %d", index);
        return NULL;
    }
    return l->values[index];
}

static void test_write_stream(void) {
    char p1[512], p2[512];
    tpath(p1, "mem.safetensors");
    tpath(p2, "stream.safetensors");
    float a[6] = {1.5f, -2.25f, 3e-38f, 0.1f, -0.0f, 65504.0f}, b[2] = {7.0f, -1e-3f}, c[3] = {1, 2, 3};
    int64_t sa[2] = {2, 3}, sb[1] = {2}, sc[1] = {3}, sz[1] = {0};
    tdm_st_dtype kinds[2] = {TDM_ST_F32, TDM_ST_BF16};
    for (int k = 0; k < 2; k++) {
        tdm_st_entry mem[4] = {{"a", 2, sa, a}, {"b", 1, sb, b}, {"empty", 1, sz, NULL}, {"c", 1, sc, c}};
        tdm_st_entry lazy[4] = {{"a", 2, sa, NULL}, {"b", 1, sb, b}, {"empty", 1, sz, NULL}, {"c", 1, sc, NULL}};
        provider_log l = {.values = {a, NULL, NULL, c}, .fail_at = -1};
        tdm_error err = {{0}};
        CHECK(tdm_safetensors_write(p1, mem, 4, kinds[k], NULL, 0, &err) == 0, "%s", err.msg);
        CHECK(tdm_safetensors_write_stream(p2, lazy, 4, kinds[k], NULL, 0, provide, &l, NULL, NULL, &err) == 0, "%s",
              err.msg);
        CHECK(same_file(p1, p2), "%s: the streamed file differs from the one written from memory",
              tdm_st_dtype_name(kinds[k]));
        CHECK(l.n_asked == 2 && l.asked[0] == 0 && l.asked[1] == 3, "asked %d times (first %d)", l.n_asked, l.asked[0]);
        /* a failing provider: the earlier file stays, the error names the file and the tensor */
        provider_log f = {.values = {a, NULL, NULL, c}, .fail_at = 3};
        CHECK(tdm_safetensors_write_stream(p2, lazy, 4, kinds[k], NULL, 0, provide, &f, NULL, NULL, &err) == -1 &&
                  strstr(err.msg, "no values for 3") && strstr(err.msg, "\"c\"") && strstr(err.msg, p2),
              "provider failure: %s", err.msg);
        CHECK(same_file(p1, p2), "a failed streamed write changed the file");
    }
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tdm_test_st_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_roundtrip_f32);
    RUN(test_exact_bytes);
    RUN(test_bf16_rounding);
    RUN(test_f16_load);
    RUN(test_sharded);
    RUN(test_broken_files);
    RUN(test_load_params);
    RUN(test_save_load_save);
    RUN(test_writer_refuses);
    RUN(test_write_stream);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return TEST_SUMMARY();
}
