/* test_ckpt_io.c - checkpoint I/O reads and writes every byte once, and still refuses every
 * corrupted, truncated or grown file, naming it, before its values can be used.
 *
 * Bytes read are counted by the kernel (/proc/self/io "rchar": every read and pread of this
 * process), so the counts cover every path the checkpoint code could take. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "harness.h"
#include "train/checkpoint.h"

static char g_dir[256], g_iter[320], g_config[320];

#define COLS 4096 /* 3 x 4096 + 2 x 8192 floats: ~112 KiB of weights, 2 x that of Adam state */

static float weight(int i, int64_t k) { return (float)(i * 7 + k % 1000) * 0.125f - 9.0f; }

static void make_table(tdm_param_table *t, float **data, float **grad) {
    memset(t, 0, sizeof *t);
    int64_t s1[2] = {3, COLS}, s2[1] = {2 * COLS}, s3[1] = {2 * COLS};
    tdm_param_table_add(t, "model.language_model.layers.0.mlp.up_proj.weight", 2, s1, 1, 0);
    tdm_param_table_add(t, "model.language_model.layers.0.input_layernorm.weight", 1, s2, 1, 0);
    tdm_param_table_add(t, "model.language_model.norm.weight", 1, s3, 1, 1);
    tdm_error err;
    CHECK(tdm_param_table_alloc(t, data, grad, &err) == 0, "%s", err.msg);
    for (int i = 0; i < t->n; i++)
        for (int64_t k = 0; k < t->p[i].numel; k++) t->p[i].data[k] = weight(i, k);
}

static void free_table(tdm_param_table *t, float *data, float *grad) {
    tdm_param_table_free(t);
    tdm_free_big(data);
    tdm_free_big(grad);
}

static float adam_m(int i, int64_t k) { return (float)(i + 1) * 0.5f + (float)(k % 97); }
static float adam_v(int i, int64_t k) { return (float)(i + 1) * 0.25f + (float)(k % 89); }

static int save(const tdm_param_table *t, tdm_error *err) {
    float *m[3] = {0}, *v[3] = {0};
    for (int i = 0; i < t->n; i++) {
        m[i] = tdm_xmalloc(sizeof(float) * (size_t)t->p[i].numel);
        v[i] = tdm_xmalloc(sizeof(float) * (size_t)t->p[i].numel);
        for (int64_t k = 0; k < t->p[i].numel; k++) m[i][k] = adam_m(i, k), v[i][k] = adam_v(i, k);
    }
    tdm_ckpt_state st = {.iteration = 5,
                         .consumed_samples = 40,
                         .scheduler_num_steps = 40,
                         .lr = 1e-3,
                         .seed = 9,
                         .adam_step = 5,
                         .dp = 2,
                         .distributed_optimizer = 1};
    strcpy(st.lr_decay_style, "cosine");
    tdm_ckpt_save_spec spec = {.config_json_path = g_config,
                               .params = t,
                               .exp_avg = (const float *const *)m,
                               .exp_avg_sq = (const float *const *)v,
                               .state = &st};
    int rc = tdm_ckpt_save(g_dir, &spec, NULL, 0, err);
    for (int i = 0; i < 3; i++) free(m[i]), free(v[i]);
    return rc;
}

/* Bytes this process has read so far (reads and preads, from any file). */
static long long bytes_read(void) {
    FILE *f = fopen("/proc/self/io", "r");
    if (!f) return -1;
    char key[64];
    long long v, r = -1;
    while (fscanf(f, "%63s %lld", key, &v) == 2)
        if (!strcmp(key, "rchar:")) r = v;
    fclose(f);
    return r;
}

static long long file_size(const char *name) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s", g_iter, name);
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static char *slurp(const char *name, size_t *len) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s", g_iter, name);
    tdm_error err;
    char *d = tdm_read_file(path, (size_t)64 << 20, len, &err);
    CHECK(d != NULL, "%s", err.msg);
    return d;
}

static void put_back(const char *name, const char *data, size_t len) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s", g_iter, name);
    tdm_error err;
    CHECK(tdm_write_file_atomic(path, data, len, &err) == 0, "%s", err.msg);
}

/* Everything a resume reads: the weights, every Adam tensor (reverse: in reverse table order,
 * else in table order; skip: parameter `skip` left out, as when it is frozen now), and the end
 * of the optimizer file. Returns the stage that failed (1 open, 2 weights, 3 Adam tensor, 4
 * finish), 0 when all passed; check_clean_load checks the values. */
static int load_all(tdm_param_table *t, int reverse, int skip, tdm_error *err) {
    tdm_ckpt ck;
    if (tdm_ckpt_open(g_dir, &ck, err) != 0) return 1;
    int stage = 0;
    if (tdm_ckpt_load_weights(&ck, t, err) != 0) stage = 2;
    float *m = tdm_xmalloc(sizeof(float) * 3 * COLS), *v = tdm_xmalloc(sizeof(float) * 3 * COLS);
    for (int k = 0; stage == 0 && k < t->n; k++) {
        int i = reverse ? t->n - 1 - k : k;
        if (i == skip) continue;
        if (tdm_ckpt_read_optimizer(&ck, t, i, m, v, err) != 0) stage = 3;
    }
    if (stage == 0 && tdm_ckpt_finish_optimizer(&ck, err) != 0) stage = 4;
    free(m);
    free(v);
    tdm_ckpt_close(&ck);
    return stage;
}

/* The values a clean load must give: the table's weights as saved, and the Adam state. */
static void check_clean_load(tdm_param_table *t, int reverse, int skip) {
    for (int i = 0; i < t->n; i++) memset(t->p[i].data, 0, sizeof(float) * (size_t)t->p[i].numel);
    tdm_error err = {{0}};
    tdm_ckpt ck;
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) == 0, "%s", err.msg);
    CHECK(tdm_ckpt_load_weights(&ck, t, &err) == 0, "%s", err.msg);
    int64_t bad = -1, at = 0;
    for (int i = 0; i < t->n; i++)
        for (int64_t k = 0; k < t->p[i].numel; k++, at++)
            if (bad < 0 && t->p[i].data[k] != weight(i, k)) bad = at;
    CHECK(bad < 0, "weights differ at %lld", (long long)bad);
    float *m = tdm_xmalloc(sizeof(float) * 3 * COLS), *v = tdm_xmalloc(sizeof(float) * 3 * COLS);
    for (int k = 0; k < t->n; k++) {
        int i = reverse ? t->n - 1 - k : k;
        if (i == skip) continue;
        CHECK(tdm_ckpt_read_optimizer(&ck, t, i, m, v, &err) == 0, "%s", err.msg);
        int64_t bad = -1;
        for (int64_t j = 0; j < t->p[i].numel && bad < 0; j++)
            if (m[j] != adam_m(i, j) || v[j] != adam_v(i, j)) bad = j;
        CHECK(bad < 0, "parameter %d: Adam state differs at %lld", i, (long long)bad);
    }
    CHECK(tdm_ckpt_finish_optimizer(&ck, &err) == 0, "%s", err.msg);
    tdm_ckpt_close(&ck);
    free(m);
    free(v);
}

/* The save computes each checksum as it writes: it reads nothing back (the config copy, a few
 * hundred bytes, is read once to be copied), and what it records is the XXH3 of the file. */
static void test_save_reads_nothing_back(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad);
    tdm_error err = {{0}};
    long long r0 = bytes_read();
    CHECK(save(&t, &err) == 0, "%s", err.msg);
    long long got = bytes_read() - r0, model = file_size("model.safetensors");
    CHECK(r0 >= 0 && got < 16384, "the save read %lld bytes (model.safetensors alone is %lld)", got, model);
    size_t len;
    char *state = slurp("trainer_state.json", &len);
    tdm_json_doc *doc = state ? tdm_json_parse(state, len, "trainer_state.json", &err) : NULL;
    CHECK(doc != NULL, "%s", err.msg);
    const char *const names[] = {"model.safetensors", "optimizer.safetensors", "config.json"};
    for (int k = 0; doc && k < 3; k++) {
        const tdm_json *f = tdm_json_get(tdm_json_get(tdm_json_root(doc), "files"), names[k]);
        CHECK(f != NULL, "%s not listed", names[k]);
        if (!f) continue;
        double bytes = 0;
        const char *hex = tdm_json_get_str(f, "xxh3", &err);
        CHECK(tdm_json_get_num(f, "bytes", &bytes, &err) == 0 && hex, "%s", err.msg);
        size_t n;
        char *d = slurp(names[k], &n);
        char want[32];
        snprintf(want, sizeof want, "%016" PRIx64, d ? XXH3_64bits(d, n) : 0);
        CHECK((size_t)bytes == n, "%s: recorded %.0f bytes, the file has %zu", names[k], bytes, n);
        CHECK(hex && !strcmp(hex, want), "%s: recorded xxh3 %s, the file's is %s", names[k], hex ? hex : "-", want);
        free(d);
    }
    tdm_json_free(doc);
    free(state);
    free_table(&t, data, grad);
}

/* The files are byte for byte what tdm_safetensors_write makes of the same tensors: checkpoints
 * of the code before hashing while writing load here, and these load there. */
static void test_format_unchanged(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad);
    tdm_error err = {{0}};
    char path[400];
    snprintf(path, sizeof path, "%s/plain.safetensors", g_dir);
    const char *meta[] = {"format", "pt", "iteration", "5"};
    CHECK(tdm_safetensors_save_params(path, &t, TDM_ST_F32, meta, 2, &err) == 0, "%s", err.msg);
    size_t a, b;
    char *mine = slurp("model.safetensors", &a);
    char *plain = tdm_read_file(path, (size_t)64 << 20, &b, &err);
    CHECK(mine && plain && a == b && !memcmp(mine, plain, a), "model.safetensors differs from the plain writer's");
    unlink(path);
    free(mine);
    free(plain);
    free_table(&t, data, grad);
}

/* A resume reads each byte of the checkpoint once: the tensor files once (their headers, a
 * few hundred bytes here, twice: parsed, then hashed), the JSON files once. Before, every
 * file was read twice: hashed whole at open, then loaded. */
static void test_load_reads_each_byte_once(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad);
    tdm_error err = {{0}};
    long long files = file_size("model.safetensors") + file_size("optimizer.safetensors") + file_size("config.json") +
                      file_size("trainer_state.json");
    long long r0 = bytes_read();
    CHECK(load_all(&t, 0, -1, &err) == 0, "%s", err.msg);
    long long got = bytes_read() - r0;
    CHECK(got >= files - 8192 && got <= files + 8192, "a load read %lld bytes of a %lld-byte checkpoint", got, files);
    check_clean_load(&t, 0, -1);
    /* out of file order and with a parameter left out: still verified, each byte still read once
     * or, out of order, twice at worst */
    r0 = bytes_read();
    CHECK(load_all(&t, 1, -1, &err) == 0, "reverse: %s", err.msg);
    got = bytes_read() - r0;
    CHECK(got <= 2 * files, "a load out of order read %lld bytes of a %lld-byte checkpoint", got, files);
    check_clean_load(&t, 1, -1);
    r0 = bytes_read();
    CHECK(load_all(&t, 0, 1, &err) == 0, "skip: %s", err.msg);
    got = bytes_read() - r0;
    CHECK(got <= files + 8192, "a load that skips a parameter read %lld bytes of a %lld-byte checkpoint", got, files);
    check_clean_load(&t, 0, 1);
    free_table(&t, data, grad);
}

/* One damaged copy of `name` at a time (a byte flipped at `off`, or the file cut or grown to
 * `size` bytes): every load is refused, with a sentence naming the file and the mismatch, at a
 * stage that comes before the values are vouched for. */
static void expect_refused(tdm_param_table *t, const char *name, const char *what, int reverse, int skip) {
    tdm_error err = {{0}};
    for (int i = 0; i < t->n; i++)
        for (int64_t k = 0; k < t->p[i].numel; k++) t->p[i].data[k] = 1.0f;
    int stage = load_all(t, reverse, skip, &err);
    CHECK(stage != 0, "%s %s: loaded", name, what);
    CHECK(strstr(err.msg, name) != NULL, "%s %s: the message does not name the file: %s", name, what, err.msg);
    CHECK(strstr(err.msg, "corrupted") || strstr(err.msg, "truncated") || strstr(err.msg, "changed"),
          "%s %s: the message does not say what is wrong: %s", name, what, err.msg);
    if (stage == 2) { /* the weights were refused: the table is as it was (refused before any
                         * tensor was read) or zero, nothing read from the file is left in it */
        int64_t zero = 0, as_was = 0, n = 0;
        for (int i = 0; i < t->n; i++)
            for (int64_t k = 0; k < t->p[i].numel; k++, n++)
                zero += t->p[i].data[k] == 0.0f, as_was += t->p[i].data[k] == 1.0f;
        CHECK(zero == n || as_was == n, "%s %s: values from the file left in the table after the refusal", name, what);
    }
    if (!strcmp(name, "optimizer.safetensors"))
        CHECK(stage != 2, "%s %s: the weights were refused (stage %d): %s", name, what, stage, err.msg);
}

static void damage_each_way(tdm_param_table *t, const char *name, int reverse, int skip) {
    size_t len;
    char *good = slurp(name, &len);
    if (!good) return;
    uint64_t hlen = 0;
    memcpy(&hlen, good, 8); /* a safetensors file's header length (little-endian) */
    int tensors = strstr(name, ".safetensors") != NULL;
    struct {
        const char *what;
        size_t off;
    } flips[] = {{"flipped in the header", tensors ? 8 + hlen / 2 : len / 2},
                 {"flipped at the first data byte", tensors ? 8 + hlen : 0},
                 {"flipped in the middle", len / 2 + 1},
                 {"flipped at the last byte", len - 1}};
    char *bad = tdm_xmalloc(len + 1);
    for (size_t k = 0; k < sizeof flips / sizeof *flips; k++) {
        memcpy(bad, good, len);
        bad[flips[k].off] ^= 0x40;
        put_back(name, bad, len);
        expect_refused(t, name, flips[k].what, reverse, skip);
    }
    memcpy(bad, good, len);
    put_back(name, bad, len - 1);
    expect_refused(t, name, "cut by one byte", reverse, skip);
    put_back(name, bad, len / 2);
    expect_refused(t, name, "cut in half", reverse, skip);
    bad[len] = 0;
    put_back(name, bad, len + 1);
    expect_refused(t, name, "grown by one byte", reverse, skip);
    put_back(name, good, len);
    free(bad);
    free(good);
}

static void test_damage_refused(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad);
    damage_each_way(&t, "model.safetensors", 0, -1);
    damage_each_way(&t, "optimizer.safetensors", 0, -1);
    damage_each_way(&t, "optimizer.safetensors", 1, -1);
    damage_each_way(&t, "config.json", 0, -1);
    check_clean_load(&t, 0, -1);
    free_table(&t, data, grad);
}

/* Bytes nobody loads are checked too: a flip inside the Adam state of a parameter that is not
 * read (frozen now) fails the finish. */
static void test_damage_in_skipped_tensor(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad);
    tdm_error err = {{0}};
    size_t len;
    char *good = slurp("optimizer.safetensors", &len);
    tdm_ckpt ck;
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) == 0, "%s", err.msg);
    char name[160];
    snprintf(name, sizeof name, "exp_avg_sq.%s", t.p[1].name);
    const tdm_st_tensor *x = ck.optimizer ? tdm_safetensors_find(ck.optimizer, name) : NULL;
    CHECK(x != NULL, "%s", name);
    size_t off = x ? (size_t)(x->file_offset + x->nbytes / 2) : len / 2;
    tdm_ckpt_close(&ck);
    if (good) {
        good[off] ^= 0x01;
        put_back("optimizer.safetensors", good, len);
        CHECK(load_all(&t, 0, 1, &err) == 4 && strstr(err.msg, "corrupted"), "%s", err.msg);
        good[off] ^= 0x01;
        put_back("optimizer.safetensors", good, len);
        CHECK(load_all(&t, 0, 1, &err) == 0, "%s", err.msg);
    }
    free(good);
    free_table(&t, data, grad);
}

/* A damaged header that renames an Adam tensor (the header still parses) is said as the damage
 * it is, not as the state of a parameter frozen at the save. */
static void test_renamed_adam_tensor(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad);
    tdm_error err = {{0}};
    size_t len;
    char *good = slurp("optimizer.safetensors", &len);
    char *at = good ? memmem(good, len, "exp_avg_sq.model.language_model.norm", 36) : NULL;
    CHECK(at != NULL, "no such tensor name in the header");
    if (at) {
        at[11] ^= 0x20; /* "model" -> "Model": same length, the header parses */
        put_back("optimizer.safetensors", good, len);
        /* refused at open (the header's blocks are checked before it is parsed) or, in a checkpoint
         * without block checksums, when the tensor is looked up */
        int stage = load_all(&t, 0, -1, &err);
        CHECK((stage == 1 || stage == 3) && strstr(err.msg, "corrupted") && !strstr(err.msg, "frozen"), "stage %d: %s",
              stage, err.msg);
        at[11] ^= 0x20;
        put_back("optimizer.safetensors", good, len);
        CHECK(load_all(&t, 0, -1, &err) == 0, "%s", err.msg);
    }
    free(good);
    free_table(&t, data, grad);
}

/* A hand-made checkpoint with BF16 weights (tandem writes F32) loads through the same stream:
 * converted, and checksummed. */
static void test_bf16_weights(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad);
    tdm_error err = {{0}};
    char path[400];
    snprintf(path, sizeof path, "%s/model.safetensors", g_iter);
    size_t old_len;
    char *old = slurp("model.safetensors", &old_len);
    size_t slen;
    char *state = slurp("trainer_state.json", &slen);
    CHECK(tdm_safetensors_save_params(path, &t, TDM_ST_BF16, NULL, 0, &err) == 0, "%s", err.msg);
    size_t len;
    char *bf = slurp("model.safetensors", &len);
    if (old && state && bf) {
        char from[96], to[96];
        snprintf(from, sizeof from, "\"model.safetensors\": {\"bytes\": %zu, \"xxh3\": \"%016" PRIx64 "\"}", old_len,
                 XXH3_64bits(old, old_len));
        snprintf(to, sizeof to, "\"model.safetensors\": {\"bytes\": %zu, \"xxh3\": \"%016" PRIx64 "\"}", len,
                 XXH3_64bits(bf, len));
        char *at = strstr(state, from);
        CHECK(at != NULL, "%s not in trainer_state.json", from);
        if (at) {
            tdm_strbuf sb;
            tdm_sb_init(&sb);
            tdm_sb_printf(&sb, "%.*s%s%s", (int)(at - state), state, to, at + strlen(from));
            put_back("trainer_state.json", sb.data, sb.len);
            tdm_sb_free(&sb);
            float want = tdm_bf16_to_f32(tdm_f32_to_bf16(t.p[2].data[777]));
            tdm_ckpt ck;
            CHECK(tdm_ckpt_open_weights(g_dir, &ck, &err) == 0, "%s", err.msg);
            CHECK(tdm_ckpt_load_weights(&ck, &t, &err) == 0, "%s", err.msg);
            CHECK(t.p[2].data[777] == want, "bf16: %g, expected %g", t.p[2].data[777], want);
            tdm_ckpt_close(&ck);
            bf[len - 2] ^= 0x10;
            put_back("model.safetensors", bf, len);
            CHECK(tdm_ckpt_open_weights(g_dir, &ck, &err) == 0, "%s", err.msg);
            CHECK(tdm_ckpt_load_weights(&ck, &t, &err) != 0 && strstr(err.msg, "corrupted"), "bf16: %s", err.msg);
            tdm_ckpt_close(&ck);
        }
        put_back("trainer_state.json", state, slen);
        put_back("model.safetensors", old, old_len);
    }
    free(old);
    free(state);
    free(bf);
    free_table(&t, data, grad);
}

/* The per-block checksums of optimizer.safetensors: recorded for every block (checked here
 * against XXH3 of the file's own blocks), a shard read reads the blocks holding it and no
 * others, and ranks that split the blocks nobody read between them catch a flip anywhere. */
static int hex_blocks(uint64_t *block, char **hex) {
    size_t slen;
    char *state = slurp("trainer_state.json", &slen);
    tdm_error err;
    tdm_json_doc *doc = state ? tdm_json_parse(state, slen, "trainer_state.json", &err) : NULL;
    const tdm_json *f = doc ? tdm_json_get(tdm_json_get(tdm_json_root(doc), "files"), "optimizer.safetensors") : NULL;
    double b = 0;
    const char *h = f ? tdm_json_get_str(f, "block_xxh3", &err) : NULL;
    int ok = f && h && tdm_json_get_num(f, "block_bytes", &b, &err) == 0;
    *block = (uint64_t)b;
    *hex = ok ? tdm_xstrdup(h) : NULL;
    tdm_json_free(doc);
    free(state);
    return ok;
}

/* Opens the checkpoint as one of `dp` ranks that owns elements [lo, hi) x numel of each
 * parameter, reads that shard, splits the unread blocks with the other ranks as the trainer
 * does (`others`: which blocks the other ranks' reads verified) and finishes. Returns the
 * stage that failed (1 open, 3 read, 4 finish) or 0; *verified gets this rank's verified blocks. */
static int load_shard(tdm_param_table *t, double lo, double hi, int rank, int dp, const unsigned char *others,
                      unsigned char *verified, long long *read, tdm_error *err) {
    tdm_ckpt ck;
    if (tdm_ckpt_open(g_dir, &ck, err) != 0) return 1;
    float *m = tdm_xmalloc(sizeof(float) * 3 * COLS), *v = tdm_xmalloc(sizeof(float) * 3 * COLS);
    int stage = 0;
    for (int i = 0; i < t->n && stage == 0; i++) {
        int64_t a = (int64_t)(lo * (double)t->p[i].numel), b = (int64_t)(hi * (double)t->p[i].numel);
        if (tdm_ckpt_read_optimizer_range(&ck, t, i, a, b - a, m, v, err) != 0) {
            stage = 3;
            break;
        }
        int64_t bad = -1;
        for (int64_t j = a; j < b && bad < 0; j++)
            if (m[j - a] != adam_m(i, j) || v[j - a] != adam_v(i, j)) bad = j;
        CHECK(bad < 0, "parameter %d: the shard's Adam state differs at %lld", i, (long long)bad);
    }
    const unsigned char *mine;
    int64_t nb = tdm_ckpt_optimizer_blocks(&ck, &mine);
    if (verified) memcpy(verified, mine, (size_t)nb);
    unsigned char *want = tdm_xcalloc((size_t)nb + 1, 1);
    for (int64_t j = 0; j < nb; j++) want[j] = !mine[j] && !(others && others[j]) && j % dp == rank;
    if (stage == 0 && tdm_ckpt_finish_optimizer_part(&ck, want, err) != 0) stage = 4;
    uint64_t got, size;
    tdm_ckpt_optimizer_io(&ck, &got, &size);
    *read = (long long)got;
    free(want);
    free(m);
    free(v);
    tdm_ckpt_close(&ck);
    return stage;
}

static void test_block_checksums(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad);
    tdm_error err = {{0}};
    CHECK(save(&t, &err) == 0, "%s", err.msg);
    size_t len;
    char *file = slurp("optimizer.safetensors", &len);
    uint64_t block = 0;
    char *hex = NULL;
    CHECK(hex_blocks(&block, &hex), "trainer_state.json records no block checksums of optimizer.safetensors");
    if (!file || !hex || !block) {
        free(file), free(hex), free_table(&t, data, grad);
        return;
    }
    int64_t nb = (int64_t)((len + block - 1) / block);
    CHECK(strlen(hex) == 16 * (size_t)nb, "%zu hex digits for %lld blocks", strlen(hex), (long long)nb);
    CHECK(nb >= 16, "%lld blocks of %llu bytes: too few to test a shard's read", (long long)nb,
          (unsigned long long)block);
    for (int64_t j = 0; j < nb && 16 * (size_t)j < strlen(hex); j++) {
        size_t n = (uint64_t)(j + 1) * block <= len ? block : len - (uint64_t)j * block;
        char want[17];
        snprintf(want, sizeof want, "%016" PRIx64, XXH3_64bits(file + (uint64_t)j * block, n));
        CHECK(!strncmp(hex + 16 * j, want, 16), "block %lld: recorded %.16s, the file's is %s", (long long)j,
              hex + 16 * j, want);
    }
    /* two ranks, each a half of every parameter: each reads about half the file (its shard, the
     * header's blocks, a block at each end of each piece), and both pass */
    unsigned char *v0 = tdm_xcalloc((size_t)nb, 1), *v1 = tdm_xcalloc((size_t)nb, 1);
    long long r0, r1;
    /* (a first pass of rank 1 learns which blocks its reads verify: the trainer's all-reduce) */
    CHECK(load_shard(&t, 0.5, 1.0, 1, 2, NULL, v1, &r1, &err) == 0, "rank 1: %s", err.msg);
    CHECK(load_shard(&t, 0.0, 0.5, 0, 2, v1, v0, &r0, &err) == 0, "rank 0: %s", err.msg);
    CHECK(load_shard(&t, 0.5, 1.0, 1, 2, v0, v1, &r1, &err) == 0, "rank 1: %s", err.msg);
    long long slack = (long long)block * 8 + 8192; /* header blocks, the pieces' end blocks */
    CHECK(r0 <= (long long)len / 2 + slack && r1 <= (long long)len / 2 + slack,
          "the shards read %lld and %lld bytes of a %zu-byte file (blocks of %llu)", r0, r1, len,
          (unsigned long long)block);
    int64_t any = 0;
    for (int64_t j = 0; j < nb; j++) any += v0[j] || v1[j];
    CHECK(any == nb, "the two shards verified %lld of %lld blocks", (long long)any, (long long)nb);
    /* one rank reads one parameter, the other nothing: the rest of the file is split by block
     * index, and a flip in any block fails exactly the rank that verifies it */
    double lo = 0.25, hi = 0.5; /* of every parameter: both ranks read only this */
    size_t flips[3] = {len / 3, len / 2 + 5, len - 3};
    char *bad = tdm_xmalloc(len);
    for (int f = 0; f < 3; f++) {
        memcpy(bad, file, len);
        bad[flips[f]] ^= 0x08;
        put_back("optimizer.safetensors", bad, len);
        int64_t j = (int64_t)(flips[f] / block);
        tdm_error e0 = {{0}}, e1 = {{0}};
        int s0 = load_shard(&t, lo, hi, 0, 2, NULL, v0, &r0, &e0);
        int s1 = load_shard(&t, lo, hi, 1, 2, v0, v1, &r1, &e1);
        CHECK(s0 != 0 || s1 != 0, "a flip at byte %zu (block %lld) passed both ranks", flips[f], (long long)j);
        const char *msg = s0 ? e0.msg : e1.msg;
        CHECK(strstr(msg, "optimizer.safetensors") && strstr(msg, "corrupted"), "flip at %zu: %s", flips[f], msg);
        CHECK(v0[j] || v1[j] || (s0 != 0) == (j % 2 == 0), "flip in block %lld: rank 0 %s, rank 1 %s", (long long)j,
              s0 ? "failed" : "passed", s1 ? "failed" : "passed");
    }
    put_back("optimizer.safetensors", file, len);
    free(bad);
    free(v0);
    free(v1);
    free(file);
    free(hex);
    free_table(&t, data, grad);
}

/* A checkpoint written before the block checksums (no block_bytes in trainer_state.json) loads
 * and is verified whole, and a shard read of it still refuses a damaged file. */
static void test_checkpoint_without_blocks(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad);
    tdm_error err = {{0}};
    CHECK(save(&t, &err) == 0, "%s", err.msg);
    size_t slen, len;
    char *state = slurp("trainer_state.json", &slen), *file = slurp("optimizer.safetensors", &len);
    char *at = state ? strstr(state, ",\n      \"block_bytes\"") : NULL;
    char *end = at ? strchr(strstr(at, "block_xxh3\": \"") + 14, '"') : NULL;
    CHECK(at && end, "no block fields in trainer_state.json");
    if (at && end && file) {
        tdm_strbuf sb;
        tdm_sb_init(&sb);
        tdm_sb_printf(&sb, "%.*s%s", (int)(at - state), state, end + 1);
        tdm_ckpt ck;
        /* a hand-edited block size: refused at open, naming trainer_state.json */
        const char *sizes[] = {"\"block_bytes\": 1e15", "\"block_bytes\": 0", "\"block_bytes\": 8192"};
        for (int k = 0; k < 3; k++) {
            char *bb = strstr(state, "\"block_bytes\": ");
            char *comma = bb ? strchr(bb, ',') : NULL;
            if (!comma) break;
            tdm_strbuf e;
            tdm_sb_init(&e);
            tdm_sb_printf(&e, "%.*s%s%s", (int)(bb - state), state, sizes[k], comma);
            put_back("trainer_state.json", e.data, e.len);
            tdm_sb_free(&e);
            int rc = tdm_ckpt_open(g_dir, &ck, &err);
            if (rc == 0) tdm_ckpt_close(&ck);
            CHECK(rc != 0 && strstr(err.msg, "trainer_state.json") && strstr(err.msg, "block"), "%s: %s", sizes[k],
                  rc ? err.msg : "opened");
        }
        put_back("trainer_state.json", sb.data, sb.len);
        tdm_sb_free(&sb);
        CHECK(tdm_ckpt_open(g_dir, &ck, &err) == 0, "%s", err.msg);
        CHECK(tdm_ckpt_optimizer_blocks(&ck, NULL) == 0, "blocks found in a checkpoint without them");
        tdm_ckpt_close(&ck);
        check_clean_load(&t, 0, -1);
        long long r;
        CHECK(load_shard(&t, 0.25, 0.5, 1, 2, NULL, NULL, &r, &err) == 0, "%s", err.msg);
        CHECK(r >= (long long)len, "a shard of a checkpoint without block checksums read %lld of %zu bytes", r, len);
        file[len - 3] ^= 0x08;
        put_back("optimizer.safetensors", file, len);
        CHECK(load_shard(&t, 0.25, 0.5, 1, 2, NULL, NULL, &r, &err) == 4 && strstr(err.msg, "corrupted"), "%s",
              err.msg);
        file[len - 3] ^= 0x08;
        put_back("optimizer.safetensors", file, len);
        put_back("trainer_state.json", state, slen);
    }
    free(state);
    free(file);
    free_table(&t, data, grad);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/tdm_test_ckpt_io_%d", (int)getpid());
    snprintf(g_iter, sizeof g_iter, "%s/iter_0000005", g_dir);
    snprintf(g_config, sizeof g_config, "%s.config.json", g_dir);
    tdm_error err;
    const char *cfg = "{\"model_type\": \"qwen3_vl\", \"text_config\": {\"hidden_size\": 8}}\n";
    CHECK(tdm_write_file_atomic(g_config, cfg, strlen(cfg), &err) == 0, "%s", err.msg);
    RUN(test_save_reads_nothing_back);
    RUN(test_block_checksums);
    RUN(test_checkpoint_without_blocks);
    RUN(test_format_unchanged);
    RUN(test_load_reads_each_byte_once);
    RUN(test_damage_refused);
    RUN(test_damage_in_skipped_tensor);
    RUN(test_renamed_adam_tensor);
    RUN(test_bf16_weights);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    unlink(g_config);
    return TEST_SUMMARY();
}
