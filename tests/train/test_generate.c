/* Unit tests for src/train/generate.c's token choice:
 *   - greedy (tdm_generate_pick): the largest logit, the lowest index on ties, NaN and banned ids (the
 *     vision placeholders) skipped, -1 when nothing is left;
 *   - sampling (tdm_generate_sample) on hand-made logits: the distributions after temperature, top-k and
 *     top-p against values computed here by hand (Hugging Face's order and tie rules), banned ids never
 *     drawn, draws that follow the distribution, and the same seed and draw index giving the same token. */
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

static double softmax_of(const float *l, const int *keep, int n, int i, double t) {
    double z = 0;
    for (int j = 0; j < n; j++)
        if (keep[j]) z += exp(l[j] / t);
    return keep[i] ? exp(l[i] / t) / z : 0;
}

static int close_to(const float *p, const float *l, const int *keep, int n, double t) {
    for (int i = 0; i < n; i++)
        if (fabs(p[i] - softmax_of(l, keep, n, i, t)) > 1e-6) return 0;
    return 1;
}

static void test_sample_filters(void) {
    float l[5] = {1.0f, 3.0f, 2.0f, 0.0f, 2.0f};
    float p[5];
    int32_t ord[5];
    int all[5] = {1, 1, 1, 1, 1};
    tdm_sampling s = {.do_sample = 1, .temperature = 1, .top_k = 0, .top_p = 1, .seed = 3};
    CHECK(tdm_generate_sample(l, 5, NULL, 0, &s, 0, p, ord) >= 0 && close_to(p, l, all, 5, 1), "plain softmax");
    s.temperature = 0.5;
    tdm_generate_sample(l, 5, NULL, 0, &s, 0, p, ord);
    CHECK(close_to(p, l, all, 5, 0.5), "temperature 0.5: softmax(l / 0.5)");
    s.temperature = 2;
    tdm_generate_sample(l, 5, NULL, 0, &s, 0, p, ord);
    CHECK(close_to(p, l, all, 5, 2), "temperature 2: flatter");
    s.temperature = 1, s.top_k = 1;
    CHECK(tdm_generate_sample(l, 5, NULL, 0, &s, 0, p, ord) == 1 && p[1] == 1.0f, "top-k 1: the largest, surely");
    s.top_k = 2; /* the 2nd largest is 2.0, tied at 2 and 4: both kept (a threshold) */
    int k2[5] = {0, 1, 1, 0, 1};
    tdm_generate_sample(l, 5, NULL, 0, &s, 0, p, ord);
    CHECK(close_to(p, l, k2, 5, 1), "top-k 2 keeps the ties with the 2nd largest");
    s.top_k = 4;
    int k4[5] = {1, 1, 1, 0, 1};
    tdm_generate_sample(l, 5, NULL, 0, &s, 0, p, ord);
    CHECK(close_to(p, l, k4, 5, 1), "top-k 4");
    /* top-p on probabilities 0.5, 0.3, 0.15, 0.05 */
    float q[4] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
    float pq[4];
    int32_t oq[4];
    s.top_k = 0, s.top_p = 0.5;
    int p1[4] = {0, 1, 0, 0};
    tdm_generate_sample(q, 4, NULL, 0, &s, 0, pq, oq);
    CHECK(close_to(pq, q, p1, 4, 1), "top-p 0.5: the one token of 0.5 suffices");
    s.top_p = 0.6;
    int p2[4] = {0, 1, 0, 1};
    tdm_generate_sample(q, 4, NULL, 0, &s, 0, pq, oq);
    CHECK(close_to(pq, q, p2, 4, 1), "top-p 0.6: 0.5 + 0.3");
    s.top_p = 0.9;
    int p3[4] = {1, 1, 0, 1};
    tdm_generate_sample(q, 4, NULL, 0, &s, 0, pq, oq);
    CHECK(close_to(pq, q, p3, 4, 1), "top-p 0.9: 0.5 + 0.3 + 0.15");
    s.top_p = 0.01;
    CHECK(tdm_generate_sample(q, 4, NULL, 0, &s, 0, pq, oq) == 1 && pq[1] == 1.0f, "top-p tiny: at least one");
    /* top-k then top-p: k 3 leaves 0.5, 0.3, 0.15 renormalised (/0.95); p 0.8 needs 0.5/0.95 + 0.3/0.95 */
    s.top_k = 3, s.top_p = 0.8;
    tdm_generate_sample(q, 4, NULL, 0, &s, 0, pq, oq);
    CHECK(close_to(pq, q, p2, 4, 1), "top-k 3 then top-p 0.8 on the renormalised mass");
    s.top_p = 0.86; /* 0.8 / 0.95 = 0.842 < 0.86: a third token */
    tdm_generate_sample(q, 4, NULL, 0, &s, 0, pq, oq);
    CHECK(close_to(pq, q, p3, 4, 1), "top-p on the mass left by top-k");
    /* temperature before top-p: at T 0.5 the probabilities sharpen to 0.5^2, 0.3^2 ... /sum */
    s.top_k = 0, s.top_p = 0.6, s.temperature = 0.5;
    tdm_generate_sample(q, 4, NULL, 0, &s, 0, pq, oq);
    CHECK(pq[1] == 1.0f && pq[3] == 0.0f, "temperature applies before top-p (0.25 / 0.365 >= 0.6 > 0.5)");
    /* banned and NaN never drawn */
    float b[3] = {5.0f, NAN, 1.0f};
    int32_t ban = 0;
    s = (tdm_sampling){.do_sample = 1, .temperature = 1, .top_k = 0, .top_p = 1};
    int bad = 0;
    for (uint64_t d = 0; d < 200; d++) bad += tdm_generate_sample(b, 3, &ban, 1, &s, d, pq, oq) != 2;
    CHECK(bad == 0 && pq[2] == 1.0f, "banned and NaN ids are never drawn");
    float inf[3] = {1.0f, INFINITY, INFINITY};
    CHECK(tdm_generate_sample(inf, 3, NULL, 0, &s, 0, pq, oq) == 1 && pq[1] == 1.0f, "+inf logits: the first, surely");
    s.temperature = 1e-39; /* 3 / 1e-39 overflows a float */
    CHECK(tdm_generate_sample(l, 5, NULL, 0, &s, 0, p, ord) == 1, "a tiny temperature (overflow): the largest");
    s.temperature = 1;
    /* greedy: no --do-sample, or temperature 0 */
    s.do_sample = 0;
    CHECK(tdm_generate_sample(l, 5, NULL, 0, &s, 9, p, ord) == 1 && p[1] == 1.0f && p[0] == 0.0f, "greedy");
    s.do_sample = 1, s.temperature = 0;
    CHECK(tdm_generate_sample(l, 5, NULL, 0, &s, 9, p, ord) == 1, "temperature 0: greedy");
}

static void test_sample_draws(void) {
    float q[4] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
    float p[4];
    int32_t o[4];
    tdm_sampling s = {.do_sample = 1, .temperature = 1, .top_k = 0, .top_p = 1, .seed = 11};
    int count[4] = {0};
    const int n = 20000;
    for (int d = 0; d < n; d++) count[tdm_generate_sample(q, 4, NULL, 0, &s, (uint64_t)d, p, o)]++;
    const double want[4] = {0.15, 0.5, 0.05, 0.3};
    int fits = 1; /* 5 standard deviations: sqrt(0.25 / 20000) = 0.0035 at most */
    for (int i = 0; i < 4; i++) fits &= fabs(count[i] / (double)n - want[i]) < 0.018;
    CHECK(fits, "20000 draws follow the distribution (%d %d %d %d)", count[0], count[1], count[2], count[3]);
    int same = 1, differ = 0;
    tdm_sampling s2 = s;
    s2.seed = 12;
    for (int d = 0; d < 64; d++) {
        int a = tdm_generate_sample(q, 4, NULL, 0, &s, (uint64_t)d, p, o);
        same &= a == tdm_generate_sample(q, 4, NULL, 0, &s, (uint64_t)d, p, o);
        differ += a != tdm_generate_sample(q, 4, NULL, 0, &s2, (uint64_t)d, p, o);
    }
    CHECK(same, "the same seed and draw: the same token");
    CHECK(differ > 0, "another seed: other tokens (%d of 64 differ)", differ);
}

int main(void) {
    RUN(test_pick);
    RUN(test_sample_filters);
    RUN(test_sample_draws);
    return TEST_SUMMARY();
}
