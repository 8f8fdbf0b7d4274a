/* test_checkpoint.c - checkpoint round trip, atomicity after a simulated crash, and refusals. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/strbuf.h"
#include "harness.h"
#include "train/checkpoint.h"

static char g_dir[256];

/* A small table: one matrix, one frozen vector, one trainable vector. */
static void make_table(tdm_param_table *t, float **data, float **grad, int cols) {
    memset(t, 0, sizeof *t);
    int64_t s1[2] = {3, cols}, s2[1] = {5}, s3[1] = {4};
    tdm_param_table_add(t, "model.language_model.layers.0.mlp.up_proj.weight", 2, s1, 1, 0);
    tdm_param_table_add(t, "model.visual.blocks.0.norm1.weight", 1, s2, 0, 0);
    tdm_param_table_add(t, "model.language_model.norm.weight", 1, s3, 1, 1);
    tdm_error err;
    CHECK(tdm_param_table_alloc(t, data, grad, &err) == 0, "%s", err.msg);
    for (int i = 0; i < t->n; i++)
        for (int64_t k = 0; k < t->p[i].numel; k++) t->p[i].data[k] = (float)(i * 100 + k) * 0.25f - 3.0f;
}

static int save(const tdm_param_table *t, int64_t iteration, float scale, tdm_error *err) {
    float *m[3] = {0}, *v[3] = {0};
    for (int i = 0; i < t->n; i++) {
        if (!t->p[i].trainable) continue;
        m[i] = tdm_xmalloc(sizeof(float) * (size_t)t->p[i].numel);
        v[i] = tdm_xmalloc(sizeof(float) * (size_t)t->p[i].numel);
        for (int64_t k = 0; k < t->p[i].numel; k++) m[i][k] = scale * (float)k, v[i][k] = scale * (float)(k * k);
    }
    tdm_ckpt_state st = {.iteration = iteration,
                         .consumed_samples = iteration * 8,
                         .scheduler_num_steps = iteration * 8,
                         .lr = 1e-3,
                         .seed = 1234,
                         .adam_step = iteration,
                         .dp = 2,
                         .distributed_optimizer = 1,
                         .args_fingerprint = 0x1234};
    strcpy(st.lr_decay_style, "cosine");
    tdm_ckpt_save_spec spec = {.config_json_path = NULL,
                               .params = t,
                               .exp_avg = (const float *const *)m,
                               .exp_avg_sq = (const float *const *)v,
                               .state = &st};
    int rc = tdm_ckpt_save(g_dir, &spec, NULL, 0, err);
    for (int i = 0; i < 3; i++) free(m[i]), free(v[i]);
    return rc;
}

static void test_round_trip(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad, 6);
    tdm_error err = {{0}};
    CHECK(save(&t, 10, 1.0f, &err) == 0, "%s", err.msg);
    float want = t.p[0].data[7];
    for (int i = 0; i < t.n; i++) memset(t.p[i].data, 0, sizeof(float) * (size_t)t.p[i].numel);
    tdm_ckpt ck;
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) == 0, "%s", err.msg);
    CHECK(ck.state.iteration == 10 && ck.state.consumed_samples == 80 && ck.state.seed == 1234, "state");
    CHECK(ck.state.dp == 2 && ck.state.distributed_optimizer == 1 && ck.state.has_optimizer == 1, "kind");
    CHECK(!strcmp(ck.state.lr_decay_style, "cosine") && ck.state.args_fingerprint == 0x1234, "schedule");
    CHECK(ck.state.model_fingerprint == tdm_ckpt_model_fingerprint(&t), "model fingerprint");
    CHECK(tdm_ckpt_load_weights(&ck, &t, &err) == 0, "%s", err.msg);
    CHECK(t.p[0].data[7] == want, "weights bitwise: %g vs %g", t.p[0].data[7], want);
    CHECK(t.p[1].data[4] == 100 * 0.25f + 4 * 0.25f - 3.0f, "frozen tensor saved too");
    float m[18], v[18];
    CHECK(tdm_ckpt_read_optimizer(&ck, &t, 0, m, v, &err) == 0, "%s", err.msg);
    CHECK(m[17] == 17.0f && v[17] == 289.0f, "adam state %g %g", m[17], v[17]);
    CHECK(tdm_ckpt_read_optimizer(&ck, &t, 1, m, v, &err) != 0 && strstr(err.msg, "frozen when it was saved?") &&
              strstr(err.msg, "--no-load-optim") && !strstr(err.msg, "corrupted"),
          "frozen tensor has no Adam state: %s", err.msg);
    tdm_ckpt_close(&ck);
    /* the iteration directory itself is accepted too */
    char it[512];
    snprintf(it, sizeof it, "%s/iter_0000010", g_dir);
    CHECK(tdm_ckpt_open(it, &ck, &err) == 0, "%s", err.msg);
    tdm_ckpt_close(&ck);
    tdm_param_table_free(&t);
    tdm_free_big(data);
    tdm_free_big(grad);
}

static void test_crash_leaves_previous_checkpoint(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad, 6);
    tdm_error err = {{0}};
    /* a crash during the save of iteration 20: a half-written temporary directory and a
       half-written tracker temp file; the tracker itself still names 10 */
    char path[512];
    snprintf(path, sizeof path, "%s/iter_0000020.tmp.99999", g_dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/iter_0000020.tmp.99999/model.safetensors", g_dir);
    tdm_write_file_atomic(path, "garbage", 7, &err);
    snprintf(path, sizeof path, "%s/%s.tmp.99999", g_dir, TDM_CKPT_TRACKER);
    tdm_write_file_atomic(path, "2", 1, &err);
    tdm_ckpt ck;
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) == 0, "%s", err.msg);
    CHECK(ck.state.iteration == 10, "loads the previous checkpoint: %lld", (long long)ck.state.iteration);
    CHECK(tdm_ckpt_load_weights(&ck, &t, &err) == 0, "%s", err.msg);
    tdm_ckpt_close(&ck);
    /* a complete save afterwards moves the tracker, and removes what the killed one left */
    CHECK(save(&t, 20, 2.0f, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/iter_0000020.tmp.99999", g_dir);
    CHECK(!tdm_file_exists(path), "%s (a killed save of the same iteration) was left on the disk", path);
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) == 0 && ck.state.iteration == 20, "%s", err.msg);
    tdm_ckpt_close(&ck);
    /* re-saving the tracked iteration replaces it */
    CHECK(save(&t, 20, 3.0f, &err) == 0, "%s", err.msg);
    float m[18], v[18];
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) == 0, "%s", err.msg);
    CHECK(tdm_ckpt_read_optimizer(&ck, &t, 0, m, v, &err) == 0 && m[1] == 3.0f, "replaced: m[1] = %g", m[1]);
    tdm_ckpt_close(&ck);
    tdm_param_table_free(&t);
    tdm_free_big(data);
    tdm_free_big(grad);
}

/* A crash in the middle of publishing a checkpoint: this program's rename() and renameat2()
 * (linked before libc's) do what libc's do, and once g_die_after is set they end the process
 * right after the first call that moves that path. */
static const char *g_die_after;

static int do_rename(int from_fd, const char *from, int to_fd, const char *to, unsigned int flags) {
    int rc = (int)syscall(SYS_renameat2, from_fd, from, to_fd, to, flags);
    if (g_die_after && (!strcmp(from, g_die_after) || !strcmp(to, g_die_after))) _exit(0);
    return rc;
}

int rename(const char *from, const char *to) { return do_rename(AT_FDCWD, from, AT_FDCWD, to, 0); }

int renameat2(int from_fd, const char *from, int to_fd, const char *to, unsigned int flags) {
    return do_rename(from_fd, from, to_fd, to, flags);
}

/* Saving the iteration the tracker names again replaces its directory: a crash at that moment
 * must leave a complete checkpoint under the tracker's name (it moved the old one aside first,
 * and a crash before the new one took its place left the tracker naming a missing directory). */
static void test_crash_while_replacing_the_tracked_checkpoint(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad, 6);
    tdm_error err = {{0}};
    CHECK(save(&t, 30, 4.0f, &err) == 0, "%s", err.msg);
    char final_dir[512];
    snprintf(final_dir, sizeof final_dir, "%s/iter_0000030", g_dir);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        g_die_after = final_dir;
        save(&t, 30, 5.0f, &err);
        _exit(1); /* the save never moved iter_0000030 */
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the save did not die while moving %s", final_dir);
    tdm_ckpt ck;
    int opened = tdm_ckpt_open(g_dir, &ck, &err) == 0;
    CHECK(opened, "after a crash while replacing iteration 30: %s", err.msg);
    float m[18], v[18];
    if (opened) {
        CHECK(ck.state.iteration == 30, "iteration %lld", (long long)ck.state.iteration);
        CHECK(tdm_ckpt_read_optimizer(&ck, &t, 0, m, v, &err) == 0 && (m[1] == 4.0f || m[1] == 5.0f),
              "the old or the new checkpoint: m[1] = %g", m[1]);
        tdm_ckpt_close(&ck);
    }
    /* and a save that does not crash replaces it, leaving no temporary directory */
    CHECK(save(&t, 30, 6.0f, &err) == 0, "%s", err.msg);
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) == 0, "%s", err.msg);
    CHECK(tdm_ckpt_read_optimizer(&ck, &t, 0, m, v, &err) == 0 && m[1] == 6.0f, "replaced: m[1] = %g", m[1]);
    tdm_ckpt_close(&ck);
    char path[600];
    snprintf(path, sizeof path, "%s.tmp.%d", final_dir, (int)pid);
    CHECK(!tdm_file_exists(path), "%s (the killed save's) was left behind", path);
    snprintf(path, sizeof path, "%s.tmp.%d", final_dir, (int)getpid());
    CHECK(!tdm_file_exists(path), "%s was left behind", path);
    tdm_param_table_free(&t);
    tdm_free_big(data);
    tdm_free_big(grad);
}

/* trainer_state.json is not checksummed: a negative count in it (hand-edited) is refused, not
 * used (a negative iteration trained "iteration -2", a negative consumed_samples failed in the
 * sampler without naming the file) */
static void test_negative_counts_refused(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad, 6);
    tdm_error err = {{0}};
    CHECK(save(&t, 40, 1.0f, &err) == 0, "%s", err.msg);
    char path[512];
    snprintf(path, sizeof path, "%s/iter_0000040/trainer_state.json", g_dir);
    size_t len;
    char *good = tdm_read_file(path, 1 << 20, &len, &err);
    CHECK(good != NULL, "%s", err.msg);
    const char *const edits[][2] = {{"\"iteration\": 40,", "\"iteration\": -40,"},
                                    {"\"consumed_samples\": 320,", "\"consumed_samples\": -8,"},
                                    {"\"adam_step\": 40,", "\"adam_step\": -1,"},
                                    {"\"data_parallel_size\": 2,", "\"data_parallel_size\": 0,"}};
    const char *const want[] = {"iteration is -40, expected at least 0", "consumed_samples is -8, expected at least 0",
                                "adam_step is -1, expected at least 0", "data_parallel_size is 0, expected at least 1"};
    for (int k = 0; good && k < 4; k++) {
        char *at = strstr(good, edits[k][0]);
        CHECK(at != NULL, "%s not in %s", edits[k][0], path);
        if (!at) continue;
        tdm_strbuf sb;
        tdm_sb_init(&sb);
        tdm_sb_printf(&sb, "%.*s%s%s", (int)(at - good), good, edits[k][1], at + strlen(edits[k][0]));
        CHECK(tdm_write_file_atomic(path, sb.data, sb.len, &err) == 0, "%s", err.msg);
        tdm_sb_free(&sb);
        tdm_ckpt ck;
        int rc = tdm_ckpt_open(g_dir, &ck, &err);
        CHECK(rc != 0 && strstr(err.msg, want[k]) && strstr(err.msg, path), "edit %d: %s", k, rc ? err.msg : "opened");
        if (rc == 0) tdm_ckpt_close(&ck);
    }
    if (good) CHECK(tdm_write_file_atomic(path, good, len, &err) == 0, "%s", err.msg);
    tdm_ckpt ck;
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) == 0, "restored: %s", err.msg);
    tdm_ckpt_close(&ck);
    free(good);
    tdm_param_table_free(&t);
    tdm_free_big(data);
    tdm_free_big(grad);
}

/* a trainer_state.json whose iteration is not its folder's (copied from another checkpoint) is
 * refused naming both, whether --load names the save folder or the iteration folder */
static void test_iteration_matches_folder(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad, 6);
    tdm_error err = {{0}};
    CHECK(save(&t, 10, 1.0f, &err) == 0, "%s", err.msg);
    char path[600], dir[512];
    snprintf(dir, sizeof dir, "%s/iter_0000010", g_dir);
    snprintf(path, sizeof path, "%s/trainer_state.json", dir);
    size_t len;
    char *good = tdm_read_file(path, 1 << 20, &len, &err);
    CHECK(good != NULL, "%s", err.msg);
    char *at = good ? strstr(good, "\"iteration\": 10,") : NULL;
    CHECK(at != NULL, "no iteration 10 in %s", path);
    if (at) {
        tdm_strbuf sb;
        tdm_sb_init(&sb);
        tdm_sb_printf(&sb, "%.*s\"iteration\": 20,%s", (int)(at - good), good, at + strlen("\"iteration\": 10,"));
        CHECK(tdm_write_file_atomic(path, sb.data, sb.len, &err) == 0, "%s", err.msg);
        tdm_sb_free(&sb);
        const char *const loads[] = {g_dir, dir};
        for (int k = 0; k < 2; k++) {
            tdm_ckpt ck;
            int rc = tdm_ckpt_read_state(loads[k], &ck, &err);
            CHECK(rc != 0 && strstr(err.msg, path) && strstr(err.msg, "iteration 20") &&
                      strstr(err.msg, "iter_0000010 is named for iteration 10"),
                  "--load %s: %s", loads[k], rc ? err.msg : "read");
        }
        CHECK(tdm_write_file_atomic(path, good, len, &err) == 0, "%s", err.msg);
    }
    tdm_ckpt ck;
    CHECK(tdm_ckpt_read_state(dir, &ck, &err) == 0 && ck.state.iteration == 10, "restored: %s", err.msg);
    free(good);
    tdm_param_table_free(&t);
    tdm_free_big(data);
    tdm_free_big(grad);
}

/* weights that are not finite, with checksums that match them: refused naming the file and the
 * tensor, and wiped (a checksum vouches for the bytes, not for the numbers) */
static void test_nonfinite_weights_refused(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad, 6);
    t.p[0].data[5] = NAN;
    tdm_error err = {{0}};
    CHECK(save(&t, 50, 1.0f, &err) == 0, "%s", err.msg);
    tdm_ckpt ck;
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) == 0, "%s", err.msg);
    int rc = tdm_ckpt_load_weights(&ck, &t, &err);
    CHECK(rc != 0 && strstr(err.msg, "iter_0000050/model.safetensors") && strstr(err.msg, t.p[0].name) &&
              strstr(err.msg, "element 5 is NaN"),
          "%s", rc ? err.msg : "loaded");
    CHECK(t.p[0].data[5] == 0 && t.p[0].data[1] == 0, "the weights were not wiped");
    tdm_ckpt_close(&ck);
    tdm_param_table_free(&t);
    tdm_free_big(data);
    tdm_free_big(grad);
}

static void flip_byte(const char *path, long off) {
    int fd = open(path, O_RDWR);
    unsigned char c;
    CHECK(pread(fd, &c, 1, off) == 1, "read");
    c ^= 0x40;
    CHECK(pwrite(fd, &c, 1, off) == 1, "write");
    close(fd);
}

static void test_refusals(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad, 6);
    tdm_error err = {{0}};
    tdm_ckpt ck;
    char path[512];
    /* another model shape */
    tdm_param_table t2;
    float *d2, *g2;
    make_table(&t2, &d2, &g2, 7);
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) == 0, "%s", err.msg);
    CHECK(tdm_ckpt_load_weights(&ck, &t2, &err) != 0, "other shape accepted");
    CHECK(strstr(err.msg, "another model shape") && strstr(err.msg, "[3, 6] there, [3, 7]"), "%s", err.msg);
    tdm_ckpt_close(&ck);

    /* corrupted weights: one flipped bit in the data section, found as the weights are loaded
     * (tests/train/test_ckpt_io.c has the other places and files) */
    snprintf(path, sizeof path, "%s/iter_0000020/model.safetensors", g_dir);
    struct stat st;
    stat(path, &st);
    flip_byte(path, (long)st.st_size - 3);
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) == 0, "%s", err.msg);
    CHECK(tdm_ckpt_load_weights(&ck, &t, &err) != 0 && strstr(err.msg, "corrupted"), "%s", err.msg);
    tdm_ckpt_close(&ck);
    flip_byte(path, (long)st.st_size - 3);
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) == 0, "restored: %s", err.msg);
    CHECK(tdm_ckpt_load_weights(&ck, &t, &err) == 0, "restored: %s", err.msg);
    tdm_ckpt_close(&ck);

    /* truncated optimizer file */
    snprintf(path, sizeof path, "%s/iter_0000020/optimizer.safetensors", g_dir);
    stat(path, &st);
    CHECK(truncate(path, st.st_size - 10) == 0, "truncate");
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) != 0 && strstr(err.msg, "truncated"), "%s", err.msg);

    /* a tracker that is not a number, then no tracker */
    snprintf(path, sizeof path, "%s/%s", g_dir, TDM_CKPT_TRACKER);
    tdm_write_file_atomic(path, "release\n", 8, &err);
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) != 0 && strstr(err.msg, "expected an iteration number"), "%s", err.msg);
    unlink(path);
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) != 0 && strstr(err.msg, "no latest_checkpointed_iteration.txt"), "%s",
          err.msg);
    CHECK(tdm_ckpt_open("/nonexistent/ckpt", &ck, &err) != 0 && strstr(err.msg, "not a directory"), "%s", err.msg);
    tdm_param_table_free(&t);
    tdm_param_table_free(&t2);
    tdm_free_big(data);
    tdm_free_big(grad);
    tdm_free_big(d2);
    tdm_free_big(g2);
}

/* --bf16: the weights (bfloat16 values) are written as BF16 and load back bit for bit; the fp32 main
 * parameters sit beside m and v as "fp32_param.<name>" and read back whole or in part; a float32
 * checkpoint has none, and says so; array mode refuses bfloat16 parameters without their main copy. */
static void test_bf16_params(void) {
    tdm_param_table t;
    float *data, *grad;
    make_table(&t, &data, &grad, 6);
    for (int i = 0; i < t.n; i++)
        for (int64_t k = 0; k < t.p[i].numel; k++) t.p[i].data[k] = (float)k * 0.0625f - 1.5f; /* bfloat16 values */
    float *m[3] = {0}, *v[3] = {0}, *w[3] = {0};
    for (int i = 0; i < t.n; i++) {
        if (!t.p[i].trainable) continue;
        size_t n = sizeof(float) * (size_t)t.p[i].numel;
        m[i] = tdm_xmalloc(n), v[i] = tdm_xmalloc(n), w[i] = tdm_xmalloc(n);
        for (int64_t k = 0; k < t.p[i].numel; k++)
            m[i][k] = (float)k, v[i][k] = (float)(k * k), w[i][k] = t.p[i].data[k] + 0x1p-12f; /* finer than bf16 */
    }
    tdm_ckpt_state st = {.iteration = 20,
                         .consumed_samples = 160,
                         .lr = 1e-3,
                         .seed = 1,
                         .adam_step = 20,
                         .dp = 2,
                         .distributed_optimizer = 1,
                         .params_bf16 = 1};
    strcpy(st.lr_decay_style, "cosine");
    tdm_ckpt_save_spec spec = {.params = &t,
                               .exp_avg = (const float *const *)m,
                               .exp_avg_sq = (const float *const *)v,
                               .params_bf16 = 1,
                               .state = &st};
    tdm_error err = {{0}};
    CHECK(tdm_ckpt_save(g_dir, &spec, NULL, 0, &err) != 0 && strstr(err.msg, "fp32 main copy"),
          "saved bfloat16 parameters without their main copy: %s", err.msg);
    spec.fp32_param = (const float *const *)w;
    CHECK(tdm_ckpt_save(g_dir, &spec, NULL, 0, &err) == 0, "%s", err.msg);
    float want = t.p[0].data[17];
    for (int i = 0; i < t.n; i++) memset(t.p[i].data, 0, sizeof(float) * (size_t)t.p[i].numel);
    tdm_ckpt ck;
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) == 0 && ck.state.params_bf16 == 1, "%s", err.msg);
    const tdm_st_tensor *x = tdm_safetensors_find(ck.model, t.p[0].name);
    CHECK(x && x->dtype == TDM_ST_BF16, "weights written as %s", x ? tdm_st_dtype_name(x->dtype) : "nothing");
    CHECK(tdm_ckpt_load_weights(&ck, &t, &err) == 0 && t.p[0].data[17] == want, "%s", err.msg);
    float mm[18], vv[18], ww[18];
    CHECK(tdm_ckpt_read_optimizer_range(&ck, &t, 0, 5, 9, mm, vv, &err) == 0 && mm[0] == 5.0f, "%s", err.msg);
    CHECK(tdm_ckpt_read_main_params_range(&ck, &t, 0, 5, 9, ww, &err) == 0 && ww[8] == w[0][13], "%s", err.msg);
    CHECK(tdm_ckpt_read_main_params_range(&ck, &t, 2, 0, 4, ww, &err) == 0 && ww[3] == w[2][3], "%s", err.msg);
    CHECK(tdm_ckpt_finish_optimizer(&ck, &err) == 0, "%s", err.msg);
    tdm_ckpt_close(&ck);
    /* a float32 checkpoint has no main copy */
    spec.params_bf16 = 0, st.params_bf16 = 0, st.iteration = 21;
    CHECK(tdm_ckpt_save(g_dir, &spec, NULL, 0, &err) == 0, "%s", err.msg);
    CHECK(tdm_ckpt_open(g_dir, &ck, &err) == 0 && ck.state.params_bf16 == 0, "%s", err.msg);
    CHECK(tdm_ckpt_read_main_params_range(&ck, &t, 0, 0, 18, ww, &err) != 0 &&
              strstr(err.msg, "saved with float32 parameters"),
          "%s", err.msg);
    tdm_ckpt_close(&ck);
    for (int i = 0; i < 3; i++) free(m[i]), free(v[i]), free(w[i]);
    tdm_param_table_free(&t);
    tdm_free_big(data);
    tdm_free_big(grad);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/tdm_test_ckpt_%d", (int)getpid());
    RUN(test_round_trip);
    RUN(test_crash_leaves_previous_checkpoint);
    RUN(test_refusals);
    RUN(test_crash_while_replacing_the_tracked_checkpoint);
    RUN(test_negative_counts_refused);
    RUN(test_iteration_matches_folder);
    RUN(test_nonfinite_weights_refused);
    RUN(test_bf16_params);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return TEST_SUMMARY();
}
