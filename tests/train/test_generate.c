/* Unit tests for the greedy choice of src/train/generate.c (tdm_generate_pick): the largest logit, the
 * lowest index on ties, NaN and banned ids (the vision placeholders) skipped, -1 when nothing is left. */
#include <math.h>

#include "harness.h"
#include "train/generate.h"

static void test_pick(void) {
    float l[6] = {0.5f, 2.0f, 2.0f, -1.0f, 9.0f, 1.0f};
    CHECK(tdm_generate_pick(l, 6, NULL, 0) == 4, "the largest");
    int32_t ban[2] = {4, 1};
    CHECK(tdm_generate_pick(l, 6, ban, 1) == 1, "banned top: the next best, lowest index of the tie");
    CHECK(tdm_generate_pick(l, 6, ban, 2) == 2, "both banned: the other of the tie");
    l[2] = NAN;
    CHECK(tdm_generate_pick(l, 6, ban, 2) == 5, "NaN skipped");
    float nan3[3] = {NAN, NAN, 7.0f};
    int32_t ban2 = 2;
    CHECK(tdm_generate_pick(nan3, 3, &ban2, 1) == -1, "nothing left");
    float neg[2] = {-INFINITY, -INFINITY};
    CHECK(tdm_generate_pick(neg, 2, NULL, 0) == 0, "all -inf: the first");
}

int main(void) {
    RUN(test_pick);
    return TEST_SUMMARY();
}
