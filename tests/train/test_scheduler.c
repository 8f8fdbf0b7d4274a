/* test_scheduler.c - Megatron's learning-rate schedule against closed-form values written out here. */
#include <math.h>

#include "harness.h"
#include "train/scheduler.h"

static const double PI = 3.14159265358979323846;

/* warmup 2 iterations, decay over 10, global batch 4 -> warmup 8 samples, decay 40 samples */
static void setup(tdm_lr_scheduler *s, tdm_lr_style style) {
    tdm_error err;
    int rc = tdm_lr_scheduler_init(s, 1e-3, 1e-5, 0.0, style, 2, -1, 10, 10, 4, &err);
    CHECK(rc == 0, "%s", err.msg);
}

static void test_warmup_is_linear_from_init(void) {
    tdm_lr_scheduler s;
    setup(&s, TDM_LR_COSINE);
    CHECK(s.warmup_steps == 8 && s.decay_steps == 40, "%lld %lld", (long long)s.warmup_steps, (long long)s.decay_steps);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 0), 0.0, 0);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 4), 0.5e-3, 1e-18);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 8), 1e-3, 1e-18);
    tdm_error err;
    tdm_lr_scheduler w;
    tdm_lr_scheduler_init(&w, 1e-3, 0, 1e-4, TDM_LR_CONSTANT, 4, -1, 0, 100, 2, &err);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&w, 2), 1e-4 + 0.9e-3 * 2.0 / 8.0, 1e-18);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&w, 100), 1e-3, 0);
}

static void test_decay_styles(void) {
    tdm_lr_scheduler s;
    /* n = 24: r = (24 - 8) / 32 = 0.5 */
    setup(&s, TDM_LR_LINEAR);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 24), 1e-5 + 0.5 * (1e-3 - 1e-5), 1e-18);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 40), 1e-5, 1e-18);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 44), 1e-5, 0);
    setup(&s, TDM_LR_COSINE);
    /* n = 16: r = 0.25, coeff = (cos(pi/4) + 1) / 2 */
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 16), 1e-5 + (sqrt(0.5) + 1) / 2 * (1e-3 - 1e-5), 1e-18);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 24), 1e-5 + 0.5 * (1e-3 - 1e-5), 1e-17);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 40), 1e-5, 1e-18);
    (void)PI;
    setup(&s, TDM_LR_CONSTANT);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 24), 1e-3, 0);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 400), 1e-3, 0);
    setup(&s, TDM_LR_INVERSE_SQRT);
    /* max * sqrt(8) / sqrt(32) = max / 2 */
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 32), 0.5e-3, 1e-18);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 41), 1e-5, 0);
}

static void test_fraction_and_stepping(void) {
    tdm_lr_scheduler s;
    tdm_error err;
    /* fraction 0.1 of 20 iterations x 8 samples = 16 samples of warmup */
    CHECK(tdm_lr_scheduler_init(&s, 2e-3, 0, 0, TDM_LR_LINEAR, 0, 0.1, 0, 20, 8, &err) == 0, "%s", err.msg);
    CHECK(s.warmup_steps == 16 && s.decay_steps == 160, "%lld %lld", (long long)s.warmup_steps,
          (long long)s.decay_steps);
    CHECK_NEAR(tdm_lr_scheduler_lr(&s), 0, 0);
    tdm_lr_scheduler_step(&s, 8);
    CHECK_NEAR(tdm_lr_scheduler_lr(&s), 1e-3, 1e-18);
    tdm_lr_scheduler_step(&s, 8);
    CHECK_NEAR(tdm_lr_scheduler_lr(&s), 2e-3, 1e-18);
    tdm_lr_scheduler_step(&s, 72);
    CHECK_NEAR(tdm_lr_scheduler_lr(&s), 2e-3 * (1 - 72.0 / 144.0), 1e-18);
}

/* Megatron keeps lr_warmup_fraction x decay_steps as a float: 0.15 x (10 x 3) = 4.5 samples of
 * warmup, not 4; and 0.01 x 80 = 0.8 samples still warms up (the first step at init) */
static void test_fractional_warmup_is_not_truncated(void) {
    tdm_lr_scheduler s;
    tdm_error err;
    CHECK(tdm_lr_scheduler_init(&s, 1e-3, 0, 0, TDM_LR_LINEAR, 0, 0.15, 0, 10, 3, &err) == 0, "%s", err.msg);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 3), 1e-3 * 3.0 / 4.5, 1e-18);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 6), 1e-3 * (1.0 - 1.5 / 25.5), 1e-18);
    CHECK(tdm_lr_scheduler_init(&s, 1e-3, 0, 0, TDM_LR_LINEAR, 0, 0.01, 0, 10, 8, &err) == 0, "%s", err.msg);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 0), 0.0, 0);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 8), 1e-3 * (1.0 - 7.2 / 79.2), 1e-18);
    CHECK(tdm_lr_scheduler_init(&s, 1e-3, 0, 0, TDM_LR_INVERSE_SQRT, 0, 0.15, 0, 10, 3, &err) == 0, "%s", err.msg);
    CHECK_NEAR(tdm_lr_scheduler_lr_at(&s, 9), 1e-3 * sqrt(4.5 / 9.0), 1e-18);
}

static void test_rejects_bad_setups(void) {
    tdm_lr_scheduler s;
    tdm_error err;
    CHECK(tdm_lr_scheduler_init(&s, 1e-4, 1e-3, 0, TDM_LR_LINEAR, 0, -1, 0, 10, 1, &err) != 0, "min > max");
    CHECK(tdm_lr_scheduler_init(&s, 1e-3, 0, 0, TDM_LR_LINEAR, 11, -1, 0, 10, 1, &err) != 0, "warmup > decay");
    /* Megatron asserts lr_warmup_steps < lr_decay_steps: a warmup that ends with the decay is refused too */
    CHECK(tdm_lr_scheduler_init(&s, 1e-3, 0, 0, TDM_LR_LINEAR, 10, -1, 0, 10, 1, &err) != 0, "warmup == decay");
    CHECK(tdm_lr_scheduler_init(&s, 1e-3, 0, 0, TDM_LR_LINEAR, 0, 1.0, 0, 10, 1, &err) != 0, "fraction 1");
    CHECK(tdm_lr_scheduler_init(&s, 1e-3, 0, 0, TDM_LR_LINEAR, 9, -1, 0, 10, 1, &err) == 0, "warmup < decay");
    CHECK(tdm_lr_scheduler_init(&s, 1e-4, 0, 1e-3, TDM_LR_LINEAR, 2, -1, 0, 10, 1, &err) != 0, "init > max");
    CHECK(tdm_lr_scheduler_init(&s, 1e-3, 0, 0, TDM_LR_LINEAR, 0, -1, 0, 10, 0, &err) != 0, "zero batch");
    tdm_lr_style st;
    CHECK(tdm_lr_style_parse("inverse-square-root", &st) == 0 && st == TDM_LR_INVERSE_SQRT, "parse");
    CHECK(tdm_lr_style_parse("cosin", &st) != 0, "bad name");
}

/* A checkpoint's schedule (--use-checkpoint-opt_param-scheduler) bypasses init: the same rules,
 * checked apart (a hand-edited decay_steps 0 resumed at min_lr, a NaN rate trained NaN) */
static void test_check_of_a_loaded_schedule(void) {
    tdm_lr_scheduler s;
    tdm_error err;
    setup(&s, TDM_LR_COSINE);
    CHECK(tdm_lr_scheduler_check(&s, &err) == 0, "init's schedule: %s", err.msg);
    struct {
        const char *what;
        tdm_lr_scheduler s;
        const char *want;
    } bad[] = {
        {"decay 0", s, "decay_steps is 0, expected at least 1"},
        {"warmup == decay", s, "warmup_steps is 40, expected 0 or more and fewer than decay_steps 40"},
        {"negative warmup", s, "warmup_steps is -1"},
        {"NaN warmup", s, "warmup_steps is nan"},
        {"min > max", s, "0 <= min_lr <= max_lr"},
        {"NaN lr", s, "max_lr nan"},
        {"init > max", s, "0 <= warmup_init <= max_lr"},
    };
    bad[0].s.decay_steps = 0;
    bad[1].s.warmup_steps = 40;
    bad[2].s.warmup_steps = -1;
    bad[3].s.warmup_steps = NAN;
    bad[4].s.min_lr = 1;
    bad[5].s.max_lr = NAN;
    bad[6].s.init_lr = 1;
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        int rc = tdm_lr_scheduler_check(&bad[k].s, &err);
        CHECK(rc != 0 && strstr(err.msg, bad[k].want), "%s: %s", bad[k].what, rc ? err.msg : "accepted");
    }
}

int main(void) {
    RUN(test_warmup_is_linear_from_init);
    RUN(test_decay_styles);
    RUN(test_fraction_and_stepping);
    RUN(test_fractional_warmup_is_not_truncated);
    RUN(test_rejects_bad_setups);
    RUN(test_check_of_a_loaded_schedule);
    return TEST_SUMMARY();
}
