/* test_plan_layout.c - the buckets tandem plan simulates are the buckets src/distributed cuts:
 * tdm_plan_buckets against tdm_ddp_layout_build on the tiny and 2B models' parameter tables, at
 * several dp sizes, bucket sizes and counts, with and without the distributed optimizer. */
#include <stdlib.h>
#include <string.h>

#include "distributed/config.h"
#include "distributed/layout.h"
#include "harness.h"
#include "model/config.h"
#include "model/qwen3vl.h"
#include "plan/plan.h"

static void compare(const char *dir, const tdm_freeze *fz) {
    tdm_error err;
    tdm_model_config cfg;
    if (tdm_model_config_load(dir, &cfg, &err)) {
        CHECK(0, "%s", err.msg);
        return;
    }
    tdm_model *mod = tdm_model_create(&cfg, fz, &err);
    CHECK(mod != NULL, "%s", err.msg);
    if (!mod) return;
    const tdm_param_table *t = tdm_model_params(mod);
    tdm_plan_param *pp = calloc((size_t)t->n, sizeof *pp);
    for (int i = 0; i < t->n; i++) pp[i] = (tdm_plan_param){t->p[i].numel, t->p[i].unit, t->p[i].trainable};
    tdm_plan_model m = {.params = pp, .n_params = t->n, .n_micro = 1};
    const int64_t sizes[] = {0, 1, 1000, 123457, 1000000, 40000000};
    const int counts[] = {1, 2, 3, 7, 64};
    for (int dist = 0; dist < 2; dist++)
        for (int dp = 1; dp <= 4; dp++)
            for (int k = 0; k < 11; k++) {
                tdm_ddp_config dc;
                tdm_ddp_config_default(&dc);
                dc.use_distributed_optimizer = dist;
                tdm_plan_config pc = {.dp = dp, .distributed = dist};
                if (k < 6) dc.bucket_size = pc.bucket_size = sizes[k];
                else dc.num_buckets = pc.num_buckets = counts[k - 6];
                tdm_ddp_layout L;
                if (tdm_ddp_layout_build(&L, t, dp, &dc, &err) != 0) {
                    CHECK(0, "%s", err.msg);
                    continue;
                }
                int64_t *pad = NULL;
                int *bo = NULL;
                int nb = tdm_plan_buckets(&m, &pc, &pad, &bo, &err);
                int same = nb == L.n_buckets;
                for (int b = 0; same && b < nb; b++) same = pad[b] == L.buckets[b].padded;
                for (int i = 0; same && i < t->n; i++) same = bo[i] == L.bucket_of[i];
                CHECK(same, "%s dist %d dp %d case %d: plan %d buckets, layout %d", dir, dist, dp, k, nb, L.n_buckets);
                free(pad);
                free(bo);
                tdm_ddp_layout_free(&L);
            }
    free(pp);
    tdm_model_free(mod);
}

static void test_tiny_frozen_vision(void) {
    tdm_freeze fz = {1, 1, 0, 0};
    compare("configs/tiny", &fz);
}

static void test_tiny_all_trained(void) {
    tdm_freeze fz = {0, 0, 0, 0};
    compare("configs/tiny", &fz);
}

static void test_2b(void) {
    tdm_freeze fz = {1, 1, 0, 0};
    compare("configs/qwen3-vl-2b", &fz);
}

int main(void) {
    RUN(test_tiny_frozen_vision);
    RUN(test_tiny_all_trained);
    RUN(test_2b);
    return TEST_SUMMARY();
}
