/* libFuzzer target: analysis.json beside a tandem trace as tandem plan reads it (tdm_plan_run_info_parse) must be
 * accepted or refused with one sentence, without crashing; what is accepted is in the range the profiler writes
 * (a niceness from 0 to 19 or none, a known progress mode or none, the threads' CPU 0 or more, or none).
 * fuzz-modules: plan runs prof core */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tdm_plan_run_info ri;
    tdm_error err;
    double cpu_ms;
    if (tdm_plan_run_info_parse((const char *)data, size, "analysis.json", &ri, &cpu_ms, &err) != 0) {
        if (!err.msg[0] || strchr(err.msg, '\n')) abort(); /* one sentence */
        return 0;
    }
    if (ri.comm_thread_nice < -1 || ri.comm_thread_nice > 19 || ri.shared_memory < -1 || ri.shared_memory > 1) abort();
    if (ri.comm_progress[0] && strcmp(ri.comm_progress, "thread") && strcmp(ri.comm_progress, "inline")) abort();
    if (!(isnan(cpu_ms) || (isfinite(cpu_ms) && cpu_ms >= 0))) abort();
    return 0;
}
