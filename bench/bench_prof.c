/* bench_prof.c - what recording costs: ns per profiler event, off and at level 1,
 * against the floor of one clock read (an interval needs two; an instant one) measured
 * in the same run. Not a test: it prints numbers for docs/profiling.md.
 *   build/bench/bench_prof [events]
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/clock.h"
#include "prof/profiler.h"
#include "bench_platform.h"

static volatile uint64_t sink;

static double ns_per(uint64_t t0, uint64_t t1, long n) { return (double)(t1 - t0) / (double)n; }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    if (n < 1000) n = 1000;
    bench_print_platform(stdout);
    tdm_prof_thread_name("compute");
    uint64_t t0 = tdm_now_ns();
    for (long i = 0; i < n; i++) sink += tdm_now_ns();
    double clock_ns = ns_per(t0, tdm_now_ns(), n);

    t0 = tdm_now_ns();
    for (long i = 0; i < n; i++) {
        tdm_prof_begin(TDM_PROF_LAYER, 1, "layer", i);
        tdm_prof_end(TDM_PROF_LAYER, 1);
    }
    double off_ns = ns_per(t0, tdm_now_ns(), n);

    tdm_prof_record_start(1, n + 16);
    t0 = tdm_now_ns();
    for (long i = 0; i < n; i++) {
        tdm_prof_begin(TDM_PROF_LAYER, 1, "layer", i);
        tdm_prof_end(TDM_PROF_LAYER, 1);
    }
    double pair_ns = ns_per(t0, tdm_now_ns(), n);
    tdm_prof_record_stop();

    tdm_prof_record_start(1, n + 16);
    t0 = tdm_now_ns();
    for (long i = 0; i < n; i++) {
        uint64_t a = tdm_prof_on(1) ? tdm_now_ns() : 0;
        tdm_prof_complete(TDM_PROF_COMM, 1, "bucket", a, tdm_now_ns(), i);
    }
    double complete_ns = ns_per(t0, tdm_now_ns(), n);
    tdm_prof_record_stop();

    tdm_prof_record_start(1, n + 16);
    t0 = tdm_now_ns();
    for (long i = 0; i < n; i++) tdm_prof_instant(TDM_PROF_MARK, 1, "posted", i);
    double instant_ns = ns_per(t0, tdm_now_ns(), n);
    tdm_prof_record_stop();

    printf("profiler recording cost, %ld events each (one thread)\n", n);
    printf("  clock read (CLOCK_MONOTONIC)       %7.1f ns   (floor: an interval needs 2, an instant 1)\n", clock_ns);
    printf("  begin+end, profiling off           %7.1f ns   (%.2fx a clock read)\n", off_ns, off_ns / clock_ns);
    printf("  begin+end at level 1               %7.1f ns   (%.2fx two clock reads)\n", pair_ns,
           pair_ns / (2 * clock_ns));
    printf("  complete (2 clock reads + record)  %7.1f ns   (%.2fx two clock reads)\n", complete_ns,
           complete_ns / (2 * clock_ns));
    printf("  instant                            %7.1f ns   (%.2fx one clock read)\n", instant_ns,
           instant_ns / clock_ns);
    return 0;
}
