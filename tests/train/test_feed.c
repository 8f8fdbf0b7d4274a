/* Unit tests for tdm_feed_check_preprocessor (src/train/feed.c): the image preprocessor must cut
 * patches the way the model's vision config expects (patch_size, temporal_patch_size, merge_size,
 * 3 channels), and a mismatch is refused at start-up in one sentence that names both files and the
 * keys, instead of a "batch: patch_dim ..." or "image-pad tokens" error at the first image. */
#include <string.h>

#include "data/preprocess.h"
#include "harness.h"
#include "model/model_configs.h"
#include "train/feed.h"

static void test_matching(void) {
    tdm_model_config c;
    cfg_2b(&c);
    tdm_preproc_config pp;
    tdm_preproc_config_default(&pp);
    tdm_error err = {{0}};
    CHECK(tdm_feed_check_preprocessor(&pp, "m/preprocessor_config.json", &c, &err) == 0, "%s", err.msg);
    CHECK(tdm_feed_check_preprocessor(&pp, NULL, &c, &err) == 0, "defaults: %s", err.msg);
}

typedef struct mismatch {
    const char *what;
    int pp_patch, pp_temporal, pp_merge, in_channels;
    const char *pp_key, *cfg_key; /* both must be named */
} mismatch;

static void test_mismatches(void) {
    static const mismatch cases[] = {
        {"Qwen2.5-VL's patch_size 14", 14, 2, 2, 3, "patch_size", "vision_config.patch_size"},
        {"temporal_patch_size 1", 16, 1, 2, 3, "temporal_patch_size", "vision_config.temporal_patch_size"},
        {"merge_size 1", 16, 2, 1, 3, "merge_size", "vision_config.spatial_merge_size"},
        {"merge_size 4", 16, 2, 4, 3, "merge_size", "vision_config.spatial_merge_size"},
        {"one channel", 16, 2, 2, 1, "3", "vision_config.in_channels"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const mismatch *k = &cases[i];
        tdm_model_config c;
        cfg_2b(&c);
        snprintf(c.path, sizeof c.path, "m/config.json");
        c.vision.in_channels = k->in_channels;
        tdm_preproc_config pp;
        tdm_preproc_config_default(&pp);
        pp.patch_size = k->pp_patch;
        pp.temporal_patch_size = k->pp_temporal;
        pp.merge_size = k->pp_merge;
        tdm_error err = {{0}};
        int rc = tdm_feed_check_preprocessor(&pp, "p/preprocessor_config.json", &c, &err);
        CHECK(rc != 0, "%s: accepted", k->what);
        CHECK(strstr(err.msg, "p/preprocessor_config.json") && strstr(err.msg, "m/config.json"),
              "%s: both files named: %s", k->what, err.msg);
        CHECK(strstr(err.msg, k->pp_key) && strstr(err.msg, k->cfg_key), "%s: keys named: %s", k->what, err.msg);
        /* the built-in defaults are named as such */
        rc = tdm_feed_check_preprocessor(&pp, NULL, &c, &err);
        CHECK(rc != 0 && strstr(err.msg, "built-in") && strstr(err.msg, "m/config.json"), "%s: defaults: %s", k->what,
              err.msg);
    }
}

int main(void) {
    RUN(test_matching);
    RUN(test_mismatches);
    return TEST_SUMMARY();
}
