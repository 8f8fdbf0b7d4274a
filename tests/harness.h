/* harness.h - the test harness every C test program uses.
 *
 *   static void test_parses_numbers(void) {
 *       CHECK(x == 3, "x = %d", x);
 *       CHECK_NEAR(a, b, 1e-6);
 *   }
 *   int main(void) {
 *       RUN(test_parses_numbers);
 *       return TEST_SUMMARY();   // prints "N passed, N failed", non-zero on failure
 *   }
 *
 * A test case passes when none of its checks failed. A failed check prints where and
 * why and lets the case continue, so one run reports every broken assertion.
 */
#ifndef TDM_TEST_HARNESS_H
#define TDM_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int t_passed, t_failed, t_case_failures;
static const char *t_case_name = "";

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            t_case_failures++;                                                                                         \
            fprintf(stderr, "  FAIL %s (%s:%d): %s: ", t_case_name, __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
        }                                                                                                              \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                                          \
    do {                                                                                                               \
        double ca_ = (double)(a), cb_ = (double)(b);                                                                   \
        CHECK(fabs(ca_ - cb_) <= (tol), "%s = %.9g, %s = %.9g, tol %.3g", #a, ca_, #b, cb_, (double)(tol));            \
    } while (0)

#define RUN(fn)                                                                                                        \
    do {                                                                                                               \
        t_case_name = #fn;                                                                                             \
        t_case_failures = 0;                                                                                           \
        fn();                                                                                                          \
        if (t_case_failures) {                                                                                         \
            t_failed++;                                                                                                \
            fprintf(stderr, "FAILED %s\n", #fn);                                                                       \
        } else {                                                                                                       \
            t_passed++;                                                                                                \
        }                                                                                                              \
    } while (0)

#define TEST_SUMMARY() (printf("%d passed, %d failed\n", t_passed, t_failed), fflush(stdout), t_failed ? 1 : 0)

#endif
