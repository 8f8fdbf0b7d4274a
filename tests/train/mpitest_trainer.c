/* mpitest_trainer.c - tdm_train_run called several times in one MPI job, as the A/B driver
 * does: the same flags twice give bitwise the same step records (determinism, nothing
 * left over between calls); --overlap-grad-reduce and --overlap-param-gather change no bit;
 * the input fingerprints of every step agree. Runs under mpirun -np 2 (scripts/test.sh). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/params.h"
#include "core/strbuf.h"
#include "data/synth.h"
#include "distributed/agree.h"
#include "harness.h"
#include "tokenizer/bpe_train.h"
#include "tokenizer/tokenizer.h"
#include "train/trainer.h"

static char g_dir[256];
static int g_rank;

/* Replaces the integer after "key": in json (in place, the buffer has room). */
static void set_int_key(char *json, size_t cap, const char *key, int value) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    char *p = strstr(json, pat);
    if (!p) return;
    p += strlen(pat);
    while (*p == ' ') p++;
    char *e = p;
    while (*e >= '0' && *e <= '9') e++;
    char num[32];
    int n = snprintf(num, sizeof num, "%d", value);
    size_t tail = strlen(e);
    if ((size_t)(p - json) + (size_t)n + tail + 1 > cap) return;
    memmove(p + n, e, tail + 1);
    memcpy(p, num, (size_t)n);
}

/* rank 0: data, a tokenizer the corpus supports, and the tiny config pointed at its ids */
static int make_inputs(tdm_error *err) {
    char path[512];
    snprintf(path, sizeof path, "%s/data", g_dir);
    tdm_synth_options so = {.out_dir = path, .n_train = 48, .n_test = 4, .seed = 3, .min_size = 64, .max_size = 96};
    if (tdm_synth_generate(&so, err) != 0) return -1;
    tdm_bpe_trainer *tr = tdm_bpe_trainer_create(err);
    if (!tr) return -1;
    snprintf(path, sizeof path, "%s/data/train.json", g_dir);
    if (tdm_bpe_trainer_add_dataset(tr, path, err) != 0) return -1;
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    int ok = 0;
    /* the full 1024 ids when the corpus supports them, else fewer */
    for (int v = 1024; v >= 300 && !ok; v -= 16) {
        tdm_sb_clear(&sb);
        ok = tdm_bpe_trainer_train(tr, v, &sb, NULL, err) == 0;
    }
    tdm_bpe_trainer_free(tr);
    if (!ok) return -1;
    snprintf(path, sizeof path, "%s/tok.json", g_dir);
    if (tdm_write_file_atomic(path, sb.data, sb.len, err) != 0) return -1;
    tdm_tokenizer *tok = tdm_tokenizer_parse(sb.data, sb.len, "tok.json", err);
    tdm_sb_free(&sb);
    if (!tok) return -1;
    size_t len;
    char *cfg = tdm_read_file("configs/tiny/config.json", 1 << 20, &len, err);
    if (!cfg) return -1;
    cfg = realloc(cfg, len + 256);
    set_int_key(cfg, len + 256, "image_token_id", tdm_tokenizer_token_id(tok, "<|image_pad|>"));
    set_int_key(cfg, len + 256, "video_token_id", tdm_tokenizer_token_id(tok, "<|video_pad|>"));
    set_int_key(cfg, len + 256, "vision_start_token_id", tdm_tokenizer_token_id(tok, "<|vision_start|>"));
    set_int_key(cfg, len + 256, "vision_end_token_id", tdm_tokenizer_token_id(tok, "<|vision_end|>"));
    tdm_tokenizer_free(tok);
    snprintf(path, sizeof path, "%s/model", g_dir);
    if (tdm_mkdirs(path, err) != 0) return -1;
    snprintf(path, sizeof path, "%s/model/config.json", g_dir);
    int rc = tdm_write_file_atomic(path, cfg, strlen(cfg), err);
    free(cfg);
    return rc;
}

static int run(const char *extra, tdm_train_result *res) {
    tdm_train_args a;
    tdm_train_args_defaults(&a);
    char flags[2048];
    snprintf(flags, sizeof flags,
             "--model %s/model --tokenizer %s/tok.json --data %s/data/train.json --preprocessor "
             "configs/tiny/preprocessor_config.json --micro-batch-size 2 --global-batch-size 8 --train-iters 3 "
             "--lr 1e-3 --lr-warmup-iters 1 --seq-length 512 --audit-fingerprints --ddp-bucket-size 300000 %s",
             g_dir, g_dir, g_dir, extra);
    tdm_error err = {{0}};
    if (tdm_train_args_parse_string(&a, flags, &err) != 0) {
        fprintf(stderr, "flags: %s\n", err.msg);
        return -1;
    }
    int rc = tdm_train_run(&a, MPI_COMM_WORLD, res, &err);
    if (rc != 0) fprintf(stderr, "[rank %d] %s\n", g_rank, err.msg);
    return rc;
}

static int same_records(const tdm_train_result *x, const tdm_train_result *y) {
    if (x->n_steps != y->n_steps || x->n_steps == 0) return 0;
    for (int i = 0; i < x->n_steps; i++) {
        const tdm_step_record *a = &x->records[i], *b = &y->records[i];
        if (memcmp(&a->loss, &b->loss, sizeof a->loss) || memcmp(&a->grad_norm, &b->grad_norm, sizeof a->grad_norm) ||
            a->lr != b->lr || a->consumed_samples != b->consumed_samples || a->fingerprint != b->fingerprint ||
            a->tokens != b->tokens)
            return 0;
    }
    return x->params_checksum == y->params_checksum;
}

static tdm_train_result base, again, overlap, gather;

static void test_same_flags_twice_are_bitwise_equal(void) {
    CHECK(run("", &base) == 0, "first run");
    CHECK(run("", &again) == 0, "second run");
    CHECK(base.n_steps == 3, "%d steps", base.n_steps);
    CHECK(same_records(&base, &again), "records differ between two identical runs");
    CHECK(base.records[0].fingerprint != 0 && base.records[0].fingerprint != base.records[1].fingerprint,
          "fingerprints recorded per step");
    CHECK(base.records[2].consumed_samples == 24 && base.records[0].global_batch_size == 8, "consumed");
    CHECK(strstr(base.ddp_config_line, "overlap_grad_reduce=False"), "%s", base.ddp_config_line);
    CHECK(base.n_buckets >= 2, "%d buckets", base.n_buckets);
}

static void test_overlap_changes_no_bit(void) {
    CHECK(run("--use-distributed-optimizer", &overlap) == 0, "distributed");
    CHECK(run("--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather", &gather) == 0, "overlap");
    CHECK(strstr(gather.ddp_config_line, "overlap_grad_reduce=True"), "%s", gather.ddp_config_line);
    CHECK(same_records(&overlap, &gather), "overlap changed the numbers");
    /* the distributed optimizer against the plain one: same math, same shard sums here */
    for (int i = 0; i < 3 && i < overlap.n_steps; i++)
        CHECK_NEAR(overlap.records[i].loss, base.records[i].loss, 1e-5 * base.records[i].loss);
}

/* --check-weight-hash-across-dp-replicas-interval's comparison: equal tables agree; one bit flipped in one
 * tensor on one rank is found, and named by its index, on every rank. */
static void test_weight_hashes(void) {
    tdm_param_table pt = {0};
    const int64_t shape_a[2] = {3, 5}, shape_b[1] = {7};
    tdm_param_table_add(&pt, "a.weight", 2, shape_a, 1, 0);
    tdm_param_table_add(&pt, "b.weight", 1, shape_b, 0, 0);
    tdm_param_table_add(&pt, "c.weight", 2, shape_a, 1, 1);
    float *data = NULL, *grad = NULL;
    tdm_error err;
    CHECK(tdm_param_table_alloc(&pt, &data, &grad, &err) == 0, "%s", err.msg);
    for (int64_t i = 0; i < 15 + 7 + 15; i++) data[i] = 0.25f * (float)i - 3.0f;
    CHECK(tdm_first_differing_param(&pt, MPI_COMM_WORLD, 0) == -1, "identical tables disagree");
    if (g_rank == 1) {
        uint32_t bits;
        memcpy(&bits, &pt.p[2].data[4], sizeof bits);
        bits ^= 1u; /* one ulp of one element */
        memcpy(&pt.p[2].data[4], &bits, sizeof bits);
    }
    int first = tdm_first_differing_param(&pt, MPI_COMM_WORLD, 0);
    CHECK(first == 2 && !strcmp(pt.p[first].name, "c.weight"), "first differing parameter %d", first);
    tdm_free_big(data);
    tdm_free_big(grad);
    tdm_param_table_free(&pt);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int world;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    tdm_log_set_rank(g_rank, world);
    tdm_log_set_quiet(1);
    int pid = (int)getpid();
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    snprintf(g_dir, sizeof g_dir, "/tmp/tdm_mpitest_trainer_%d", pid);
    int ok = 1;
    tdm_error err = {{0}};
    if (g_rank == 0) ok = make_inputs(&err) == 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok) {
        if (g_rank == 0) fprintf(stderr, "inputs: %s\n", err.msg);
        RUN(test_same_flags_twice_are_bitwise_equal); /* fails visibly */
    } else {
        RUN(test_same_flags_twice_are_bitwise_equal);
        RUN(test_overlap_changes_no_bit);
    }
    RUN(test_weight_hashes);
    tdm_train_result_free(&base);
    tdm_train_result_free(&again);
    tdm_train_result_free(&overlap);
    tdm_train_result_free(&gather);
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    }
    int failed = t_failed, any;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    if (g_rank != 0) return any ? 1 : 0;
    return TEST_SUMMARY();
}
