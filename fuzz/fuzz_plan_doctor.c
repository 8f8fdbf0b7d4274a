/* libFuzzer target: tandem doctor's JSON report as tandem plan --doctor reads it (tdm_plan_doctor_parse) must be
 * accepted or refused with one sentence for either progress mode, without crashing; what is accepted is in the
 * range the plan's flags take (a loss of 0 or more, a speed from 0.001 to 1).
 * fuzz-modules: plan runs prof core */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const modes[] = {"thread", "inline"};
    for (int i = 0; i < 2; i++) {
        tdm_plan_doctor d;
        tdm_error err;
        if (tdm_plan_doctor_parse((const char *)data, size, "doctor.json", modes[i], &d, &err) != 0) {
            if (!err.msg[0] || strchr(err.msg, '\n')) abort(); /* one sentence */
            continue;
        }
        if (!(d.cpu_us_per_mb >= 0) || !isfinite(d.cpu_us_per_mb) || !(d.speed >= 0.001 && d.speed <= 1)) abort();
        if (strcmp(d.mode, modes[i]) || !(isnan(d.mb) || d.mb > 0) || d.comm_thread_nice > 19) abort();
    }
    return 0;
}
