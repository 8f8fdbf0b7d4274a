/* test_layout.c - bucket layout (no MPI communication): hand-computed cases, the
 * Megatron rules checked as invariants over several models, bucket sizes and dp 1..8,
 * independence from the overlap flags, and the start-up text. */
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/config.h"
#include "distributed/layout.h"
#include "distributed/timers.h"
#include "harness.h"
#include "core/params.h"

static void add(tdm_param_table *t, const char *name, int64_t rows, int64_t cols, int trainable) {
    int64_t shape[2] = {rows, cols};
    tdm_param_table_add(t, name, cols ? 2 : 1, shape, trainable, t->n);
}

/* a(10) b(100) c(7, frozen) d(50) e(3), registered in that order. */
static void small_table(tdm_param_table *t) {
    memset(t, 0, sizeof *t);
    add(t, "a", 10, 0, 1);
    add(t, "b", 10, 10, 1);
    add(t, "c", 7, 0, 0);
    add(t, "d", 5, 10, 1);
    add(t, "e", 3, 0, 1);
}

static tdm_ddp_config cfg_of(int dist, int64_t bucket_size) {
    tdm_ddp_config c;
    tdm_ddp_config_default(&c);
    c.use_distributed_optimizer = dist;
    c.bucket_size = bucket_size;
    return c;
}

/* A bucket larger than an MPI count (a single 2^31-element tensor; no data is allocated) is refused with a
 * message naming its size, which is read before the half-built layout is freed (under ASan a read after the
 * free was a heap-use-after-free). */
static void test_bucket_beyond_mpi_count(void) {
    tdm_param_table t;
    memset(&t, 0, sizeof t);
    add(&t, "huge", (int64_t)1 << 16, (int64_t)1 << 15, 1);
    tdm_ddp_config c = cfg_of(1, 1000);
    tdm_ddp_layout l;
    tdm_error err;
    CHECK(tdm_ddp_layout_build(&l, &t, 2, &c, &err) != 0, "a 2^31-element bucket was accepted");
    CHECK(strstr(err.msg, "bucket 1: 2147483648 elements exceed what one MPI collective can count") != NULL, "%s",
          err.msg);
    tdm_param_table_free(&t);
}

static void test_hand_computed_plain(void) {
    tdm_param_table t;
    small_table(&t);
    tdm_ddp_config c = cfg_of(0, 60);
    tdm_ddp_layout l;
    tdm_error err;
    CHECK(tdm_ddp_layout_build(&l, &t, 4, &c, &err) == 0, "%s", err.msg);
    /* reverse order e, d, b | a: e+d = 53 < 60, +b = 153 closes bucket 0 */
    CHECK(l.n_buckets == 2, "%d buckets", l.n_buckets);
    CHECK(l.n_trainable == 4, "%d", l.n_trainable);
    int want_order[4] = {4, 3, 1, 0};
    for (int k = 0; k < 4; k++) CHECK(l.order[k] == want_order[k], "order[%d] = %d", k, l.order[k]);
    CHECK(l.offset[4] == 0 && l.offset[3] == 3 && l.offset[1] == 53 && l.offset[0] == 153, "offsets");
    CHECK(l.offset[2] == -1 && l.bucket_of[2] == -1, "frozen c is outside the buffers");
    CHECK(l.buckets[0].numel == 153 && l.buckets[0].padded == 153 && l.buckets[0].count == 3, "bucket 0");
    CHECK(l.buckets[1].offset == 153 && l.buckets[1].numel == 10 && l.buckets[1].padded == 10, "bucket 1");
    CHECK(l.total == 163, "total %lld", (long long)l.total);
    int64_t s, e;
    tdm_ddp_layout_shard(&l, 1, 3, &s, &e);
    CHECK(s == 153 && e == 163, "plain: every rank owns the whole bucket, got [%lld, %lld)", (long long)s,
          (long long)e);
    tdm_ddp_layout_free(&l);
    tdm_param_table_free(&t);
}

static void test_hand_computed_distributed(void) {
    tdm_param_table t;
    small_table(&t);
    tdm_ddp_config c = cfg_of(1, 60);
    tdm_ddp_layout l;
    tdm_error err;
    CHECK(tdm_ddp_layout_build(&l, &t, 2, &c, &err) == 0, "%s", err.msg);
    /* e at 0 (3); d aligned to 64, ends at 114 >= 60: bucket 0 padded to 128.
     * b at 128, 100 >= 60: bucket 1 [128, 256). a at 256: bucket 2 [256, 384). */
    CHECK(l.n_buckets == 3, "%d buckets", l.n_buckets);
    CHECK(l.offset[4] == 0 && l.offset[3] == 64 && l.offset[1] == 128 && l.offset[0] == 256,
          "offsets %lld %lld %lld %lld", (long long)l.offset[4], (long long)l.offset[3], (long long)l.offset[1],
          (long long)l.offset[0]);
    CHECK(l.buckets[0].numel == 53 && l.buckets[0].padded == 128 && l.buckets[0].shard == 64, "bucket 0");
    CHECK(l.buckets[1].numel == 100 && l.buckets[1].padded == 128, "bucket 1");
    CHECK(l.buckets[2].numel == 10 && l.buckets[2].padded == 128, "bucket 2");
    CHECK(l.total == 384, "total %lld", (long long)l.total);
    int64_t s, e;
    tdm_ddp_layout_shard(&l, 1, 1, &s, &e);
    CHECK(s == 192 && e == 256, "rank 1 of bucket 1: [%lld, %lld)", (long long)s, (long long)e);
    tdm_ddp_layout_free(&l);
    /* dp = 3: buckets pad to lcm(3, 128) = 384 */
    CHECK(tdm_ddp_layout_build(&l, &t, 3, &c, &err) == 0, "%s", err.msg);
    CHECK(l.buckets[0].padded == 384 && l.buckets[0].shard == 128, "dp 3 padding %lld", (long long)l.buckets[0].padded);
    tdm_ddp_layout_free(&l);
    tdm_param_table_free(&t);
}

/* A model shaped like a small Qwen3-VL: vision blocks, merger, embedding, decoder
 * layers, norm, lm_head; odd sizes; some frozen parts. */
static void model_table(tdm_param_table *t, int variant) {
    memset(t, 0, sizeof *t);
    int vision_frozen = variant == 1, n_layers = 2 + variant;
    int64_t d = 24 + 7 * variant, v = 101 + 13 * variant;
    add(t, "model.visual.patch_embed.proj.weight", d, 3 * 2 * 2 * 2, !vision_frozen);
    add(t, "model.visual.patch_embed.proj.bias", d, 0, !vision_frozen);
    for (int l = 0; l < 2; l++) {
        char n[96];
        snprintf(n, sizeof n, "model.visual.blocks.%d.attn.qkv.weight", l);
        add(t, n, 3 * d, d, !vision_frozen);
        snprintf(n, sizeof n, "model.visual.blocks.%d.norm1.weight", l);
        add(t, n, d, 0, !vision_frozen);
    }
    add(t, "model.visual.merger.linear_fc1.weight", 4 * d, 4 * d, 1);
    add(t, "model.language_model.embed_tokens.weight", v, d, variant != 2);
    for (int l = 0; l < n_layers; l++) {
        char n[96];
        snprintf(n, sizeof n, "model.language_model.layers.%d.input_layernorm.weight", l);
        add(t, n, d, 0, 1);
        snprintf(n, sizeof n, "model.language_model.layers.%d.self_attn.q_proj.weight", l);
        add(t, n, d, d, 1);
        snprintf(n, sizeof n, "model.language_model.layers.%d.mlp.down_proj.weight", l);
        add(t, n, d, 3 * d + 1, 1);
    }
    add(t, "model.language_model.norm.weight", d, 0, 1);
    add(t, "lm_head.weight", v, d, 1);
}

static int64_t lcm_128(int dp) {
    int64_t a = dp, b = 128;
    while (b) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return (int64_t)dp / a * 128;
}

/* Checks every rule of layout.h on one layout. */
static void check_invariants(const tdm_ddp_layout *l, const tdm_param_table *t, int dp, int dist, int64_t bs) {
    int k_prev = INT_MAX, n_tr = 0;
    for (int i = 0; i < t->n; i++) n_tr += t->p[i].trainable;
    CHECK(l->n_trainable == n_tr, "%d trainable, layout has %d", n_tr, l->n_trainable);
    for (int k = 0; k < l->n_trainable; k++) {
        CHECK(l->order[k] < k_prev, "order not reverse registration at %d", k);
        k_prev = l->order[k];
    }
    int64_t end = 0;
    int seen = 0;
    for (int b = 0; b < l->n_buckets; b++) {
        const tdm_ddp_bucket *bk = &l->buckets[b];
        CHECK(bk->offset == end, "bucket %d starts at %lld, previous ended at %lld", b, (long long)bk->offset,
              (long long)end);
        CHECK(bk->first == seen && bk->count >= 1, "bucket %d params", b);
        int64_t numel = 0, pos = bk->offset, last_end = 0, before_last_end = 0;
        for (int k = bk->first; k < bk->first + bk->count; k++) {
            int i = l->order[k];
            CHECK(l->bucket_of[i] == b, "param %d bucket %d", i, l->bucket_of[i]);
            CHECK(l->offset[i] >= pos, "param %d overlaps", i);
            if (dist) CHECK(l->offset[i] % 64 == 0, "param %d at %lld not 64-aligned", i, (long long)l->offset[i]);
            else CHECK(l->offset[i] == pos, "plain layout has a gap before param %d", i);
            pos = l->offset[i] + t->p[i].numel;
            before_last_end = last_end;
            last_end = pos - bk->offset;
            numel += t->p[i].numel;
        }
        CHECK(numel == bk->numel, "bucket %d numel", b);
        CHECK(pos <= bk->offset + bk->padded, "bucket %d overflows its padding", b);
        if (b < l->n_buckets - 1) {
            CHECK(last_end >= bs, "bucket %d closed early (%lld < %lld)", b, (long long)last_end, (long long)bs);
            CHECK(bk->count == 1 || before_last_end < bs, "bucket %d closed late", b);
        } else {
            CHECK(bk->count == 1 || before_last_end < bs, "last bucket closed late");
        }
        if (dist) {
            CHECK(bk->padded % lcm_128(dp) == 0, "bucket %d padded %lld, not a multiple of lcm(%d,128)", b,
                  (long long)bk->padded, dp);
            CHECK(bk->shard * dp == bk->padded, "bucket %d shard", b);
            for (int r = 0; r < dp; r++) {
                int64_t s, e;
                tdm_ddp_layout_shard(l, b, r, &s, &e);
                CHECK(s == bk->offset + r * bk->padded / dp && e == bk->offset + (r + 1) * bk->padded / dp,
                      "bucket %d rank %d shard", b, r);
            }
        } else {
            CHECK(bk->padded == bk->numel, "plain bucket %d padded", b);
        }
        end = bk->offset + bk->padded;
        seen += bk->count;
    }
    CHECK(seen == l->n_trainable && end == l->total, "buckets cover the buffer");
    for (int i = 0; i < t->n; i++)
        if (!t->p[i].trainable) CHECK(l->offset[i] == -1 && l->bucket_of[i] == -1, "frozen %d in the buffer", i);
}

static int same_layout(const tdm_ddp_layout *a, const tdm_ddp_layout *b) {
    return a->n_buckets == b->n_buckets && a->total == b->total && a->bucket_size == b->bucket_size &&
           memcmp(a->offset, b->offset, (size_t)a->n_params * sizeof *a->offset) == 0 &&
           memcmp(a->order, b->order, (size_t)a->n_trainable * sizeof *a->order) == 0 &&
           memcmp(a->buckets, b->buckets, (size_t)a->n_buckets * sizeof *a->buckets) == 0;
}

static void test_rules_over_models_sizes_and_dp(void) {
    const int64_t sizes[] = {1, 100, 1000, 5000, 40000, 0 /* default: one bucket */};
    int n_checked = 0;
    for (int variant = 0; variant < 3; variant++) {
        tdm_param_table t;
        model_table(&t, variant);
        for (int dp = 1; dp <= 8; dp++)
            for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
                for (int dist = 0; dist <= 1; dist++) {
                    tdm_ddp_config c = cfg_of(dist, sizes[s]);
                    tdm_ddp_layout l;
                    tdm_error err;
                    if (tdm_ddp_layout_build(&l, &t, dp, &c, &err) != 0) {
                        CHECK(0, "%s", err.msg);
                        continue;
                    }
                    check_invariants(&l, &t, dp, dist, l.bucket_size);
                    if (sizes[s] == 0) CHECK(l.n_buckets == 1, "default bucket size: %d buckets", l.n_buckets);
                    if (sizes[s] == 1) CHECK(l.n_buckets == l.n_trainable, "size 1: one bucket per param");
                    /* the overlap flags and the progress mode never change the layout */
                    for (int f = 1; f < 8; f++) {
                        tdm_ddp_config c2 = c;
                        c2.overlap_grad_reduce = f & 1;
                        c2.overlap_param_gather = (f & 2) && dist && (f & 1);
                        c2.progress = (f & 4) ? TDM_DDP_PROGRESS_INLINE : TDM_DDP_PROGRESS_THREAD;
                        tdm_ddp_layout l2;
                        CHECK(tdm_ddp_layout_build(&l2, &t, dp, &c2, &err) == 0, "%s", err.msg);
                        CHECK(same_layout(&l, &l2), "flags %d changed the layout (dp %d, size %lld)", f, dp,
                              (long long)sizes[s]);
                        tdm_ddp_layout_free(&l2);
                    }
                    tdm_ddp_layout_free(&l);
                    n_checked++;
                }
        tdm_param_table_free(&t);
    }
    CHECK(n_checked == 3 * 8 * 6 * 2, "%d layouts checked", n_checked);
}

static void test_bucket_size_defaults_and_num_buckets(void) {
    tdm_ddp_config c = cfg_of(0, 0);
    CHECK(tdm_ddp_config_bucket_size(&c, 8, 1000) == 40000000, "Megatron default for small dp");
    CHECK(tdm_ddp_config_bucket_size(&c, 64, 1000) == 64000000, "1e6 x dp above 40");
    c.num_buckets = 3;
    CHECK(tdm_ddp_config_bucket_size(&c, 2, 1000) == 334, "ceil(1000/3)");
    tdm_param_table t;
    model_table(&t, 0);
    tdm_ddp_layout l;
    tdm_error err;
    for (int nbk = 1; nbk <= 6; nbk++) {
        c.num_buckets = nbk;
        CHECK(tdm_ddp_layout_build(&l, &t, 2, &c, &err) == 0, "%s", err.msg);
        CHECK(l.n_buckets >= 1 && l.n_buckets <= nbk, "num_buckets %d gave %d", nbk, l.n_buckets);
        tdm_ddp_layout_free(&l);
    }
    tdm_param_table_free(&t);
}

static void test_config_checks(void) {
    tdm_error err;
    tdm_ddp_config c = cfg_of(0, 0);
    CHECK(tdm_ddp_config_check(&c, &err) == 0, "defaults are valid");
    c.overlap_param_gather = 1;
    CHECK(tdm_ddp_config_check(&c, &err) != 0 && strstr(err.msg, "--overlap-param-gather"), "%s", err.msg);
    c.use_distributed_optimizer = c.overlap_grad_reduce = 1;
    CHECK(tdm_ddp_config_check(&c, &err) == 0, "%s", err.msg);
    c.bucket_size = 10;
    c.num_buckets = 2;
    CHECK(tdm_ddp_config_check(&c, &err) != 0, "both bucket flags rejected");
    tdm_param_table t = {0};
    add(&t, "x", 4, 0, 0);
    tdm_ddp_layout l;
    c = cfg_of(0, 0);
    CHECK(tdm_ddp_layout_build(&l, &t, 2, &c, &err) != 0 && strstr(err.msg, "no trainable"), "%s", err.msg);
    CHECK(tdm_ddp_layout_build(&l, &t, 0, &c, &err) != 0, "dp 0 rejected");
    tdm_param_table_free(&t);
    tdm_ddp_progress p;
    CHECK(tdm_ddp_progress_parse("inline", &p, &err) == 0 && p == TDM_DDP_PROGRESS_INLINE, "parse inline");
    CHECK(tdm_ddp_progress_parse("async", &p, &err) != 0 && strstr(err.msg, "async"), "%s", err.msg);
}

static void test_thread_level_fallback(void) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    CHECK(tdm_ddp_progress_for_thread_level(MPI_THREAD_MULTIPLE, TDM_DDP_PROGRESS_THREAD, &sb) ==
                  TDM_DDP_PROGRESS_THREAD &&
              sb.len == 0,
          "MULTIPLE keeps the thread");
    CHECK(tdm_ddp_progress_for_thread_level(MPI_THREAD_SERIALIZED, TDM_DDP_PROGRESS_THREAD, &sb) ==
              TDM_DDP_PROGRESS_INLINE,
          "SERIALIZED falls back");
    CHECK(sb.data && strstr(sb.data, "MPI_THREAD_SERIALIZED") && strstr(sb.data, "inline"), "log: %s",
          sb.data ? sb.data : "");
    tdm_sb_free(&sb);
}

static void test_startup_text(void) {
    tdm_param_table t;
    small_table(&t);
    tdm_ddp_config c = cfg_of(1, 60);
    c.overlap_grad_reduce = 1;
    tdm_ddp_layout l;
    tdm_error err;
    CHECK(tdm_ddp_layout_build(&l, &t, 2, &c, &err) == 0, "%s", err.msg);
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_ddp_config_describe(&c, l.bucket_size, &sb);
    CHECK(strcmp(sb.data, "Setting up DistributedDataParallel with config DistributedDataParallelConfig("
                          "grad_reduce_in_fp32=True, overlap_grad_reduce=True, overlap_param_gather=False, "
                          "use_distributed_optimizer=True, check_for_nan_in_grad=True, bucket_size=60, "
                          "average_in_collective=False)") == 0,
          "%s", sb.data);
    tdm_sb_clear(&sb);
    tdm_ddp_layout_describe(&l, &t, &sb);
    const char *want = "Number of buckets for gradient all-reduce / reduce-scatter: 3\n"
                       "Params for bucket 1 (53 elements, 128 padded size):\n\te\n\td\n"
                       "Params for bucket 2 (100 elements, 128 padded size):\n\tb\n"
                       "Params for bucket 3 (10 elements, 128 padded size):\n\ta\n";
    CHECK(strcmp(sb.data, want) == 0, "got:\n%s", sb.data);
    tdm_sb_free(&sb);
    tdm_ddp_layout_free(&l);
    tdm_param_table_free(&t);
}

static void test_timing_format(void) {
    tdm_timing tm = {0};
    tm.valid[TDM_TIMER_FORWARD_BACKWARD] = 1;
    tm.min_ms[TDM_TIMER_FORWARD_BACKWARD] = 123.454;
    tm.max_ms[TDM_TIMER_FORWARD_BACKWARD] = 124.556;
    tm.valid[TDM_TIMER_OPTIMIZER] = 1;
    tm.min_ms[TDM_TIMER_OPTIMIZER] = 1;
    tm.max_ms[TDM_TIMER_OPTIMIZER] = 2;
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_timing_format(&tm, &sb);
    const char *want = "(min, max) time across ranks (ms):\n"
                       "    forward-backward ...............................: (123.45, 124.56)\n"
                       "    optimizer ......................................: (1.00, 2.00)\n";
    CHECK(strcmp(sb.data, want) == 0, "got:\n%s", sb.data);
    /* Megatron's other --timing-log-option layouts (megatron/core/timers.py) */
    tdm_sb_clear(&sb);
    tdm_timing_format_option(&tm, TDM_TIMING_MAX, &sb);
    want = "max time across ranks (ms):\n"
           "    forward-backward ...............................: 124.56\n"
           "    optimizer ......................................: 2.00\n";
    CHECK(strcmp(sb.data, want) == 0, "got:\n%s", sb.data);
    tm.n_ranks = 2;
    tm.rank_ms[0][TDM_TIMER_FORWARD_BACKWARD] = 123.454, tm.rank_ms[1][TDM_TIMER_FORWARD_BACKWARD] = 124.556;
    tm.rank_ms[0][TDM_TIMER_OPTIMIZER] = -1, tm.rank_ms[1][TDM_TIMER_OPTIMIZER] = 2; /* rank 0 did not use it */
    tdm_sb_clear(&sb);
    tdm_timing_format_option(&tm, TDM_TIMING_ALL, &sb);
    want = "times across ranks (ms):\n"
           "  forward-backward:\n"
           "     rank  0: 123.45\n"
           "     rank  1: 124.56\n"
           "  optimizer:\n"
           "     rank  1: 2.00\n";
    CHECK(strcmp(sb.data, want) == 0, "got:\n%s", sb.data);
    tdm_sb_free(&sb);
    tdm_timers tt;
    tdm_timers_reset(&tt);
    tdm_timers_start(&tt, TDM_TIMER_OPTIMIZER);
    tdm_timers_stop(&tt, TDM_TIMER_OPTIMIZER);
    CHECK(tt.used[TDM_TIMER_OPTIMIZER] && !tt.used[TDM_TIMER_ALL_GRADS_SYNC], "used flags");
}

int main(void) {
    RUN(test_hand_computed_plain);
    RUN(test_hand_computed_distributed);
    RUN(test_rules_over_models_sizes_and_dp);
    RUN(test_bucket_size_defaults_and_num_buckets);
    RUN(test_bucket_beyond_mpi_count);
    RUN(test_config_checks);
    RUN(test_thread_level_fallback);
    RUN(test_startup_text);
    RUN(test_timing_format);
    return TEST_SUMMARY();
}
