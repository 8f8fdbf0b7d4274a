/* clock.h - a monotonic nanosecond clock (CLOCK_MONOTONIC), for timers and traces. */
#ifndef TDM_CLOCK_H
#define TDM_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t tdm_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU time consumed by the calling thread, in ns (for "the comm thread must not burn a core"). */
static inline uint64_t tdm_thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU time consumed by the whole process (every thread), in ns. */
static inline uint64_t tdm_process_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
