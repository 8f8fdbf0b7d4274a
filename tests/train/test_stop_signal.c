/* test_stop_signal.c - the trainer's stop signals (src/train/trainer.c): a stop signal only sets a flag; the same
 * signal again within 2 s is the same stop (one Ctrl-C that reaches a rank from the terminal and from a launcher),
 * and one that comes later ends the process at once with the signal's default action. Each case runs in a child
 * process, so that the default action ends the child, not the test. */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "train/trainer.h"

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) continue;
}

/* The child's wait status after body() runs in it; body's return value is its exit code. */
static int in_child(int (*body)(void)) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(body());
    int st = -1;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) continue;
    return st;
}

static int one_stop(void) {
    tdm_train_install_signal_handlers();
    if (tdm_train_stop_signal() != 0) return 2;
    raise(SIGINT);
    return tdm_train_stop_signal() == SIGINT ? 0 : 3;
}

static int repeated_at_once(void) {
    tdm_train_install_signal_handlers();
    raise(SIGINT);
    raise(SIGINT); /* a launcher's copy of the same Ctrl-C */
    raise(SIGTERM);
    return tdm_train_stop_signal() == SIGINT ? 0 : 3;
}

static int repeated_later(void) {
    tdm_train_install_signal_handlers();
    raise(SIGTERM);
    sleep_s(2.2); /* the user waited, then asked again */
    raise(SIGTERM);
    return 4; /* not reached: the second SIGTERM ends the process */
}

static void test_a_stop_signal_sets_the_flag(void) {
    const int st = in_child(one_stop);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
}

static void test_a_repeat_within_the_grace_is_the_same_stop(void) {
    const int st = in_child(repeated_at_once);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the process %s (status 0x%x)",
          WIFSIGNALED(st) ? "was ended by the repeat" : "exited", st);
}

static void test_a_later_repeat_ends_the_process(void) {
    const int st = in_child(repeated_later);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "status 0x%x: expected the end by SIGTERM", st);
}

int main(void) {
    RUN(test_a_stop_signal_sets_the_flag);
    RUN(test_a_repeat_within_the_grace_is_the_same_stop);
    RUN(test_a_later_repeat_ends_the_process);
    return TEST_SUMMARY();
}
