/* libFuzzer target: `tandem plan`'s candidate flags (tdm_plan_parse_flags) must accept or refuse any text
 * without crashing; what is accepted is a usable setting (dp >= 1, a link with bandwidth, bucket settings
 * not negative) that the simulator runs on a small hand-built step.
 * fuzz-modules: plan runs prof core */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char text[2048];
    if (size >= sizeof text) size = sizeof text - 1;
    memcpy(text, data, size);
    text[size] = '\0';
    tdm_plan_config c = {.dp = 2, .distributed = 1, .num_buckets = 2, .link = {1, 1}};
    tdm_error err;
    if (tdm_plan_parse_flags(text, &c, &err) != 0) {
        if (!err.msg[0] || strchr(err.msg, '\n')) abort(); /* one sentence */
        return 0;
    }
    if (c.dp < 1 || !(c.link.gbps > 0) || c.link.alpha_us < 0 || c.bucket_size < 0 || c.num_buckets < 0) abort();
    if (c.dp > 4096) return 0; /* a large ring is fine, but keeps each run short */
    tdm_plan_param p[] = {{1000, 0, 1}, {3000, 1, 1}, {500, 2, 0}};
    tdm_plan_unit u[] = {{"a", 10, 20}, {"b", 30, 60}, {"c", 5, 0}};
    tdm_plan_model m = {.units = u, .n_units = 3, .params = p, .n_params = 3, .n_micro = 2, .cpu_us_per_mb = 1};
    tdm_plan_result r;
    if (tdm_plan_simulate(&m, &c, &r, &err) == 0) {
        if (!(r.step_us >= 0) || r.hidden_us > r.comm_us + 1e-6 * (1 + r.comm_us)) abort();
        tdm_plan_result_free(&r);
    }
    return 0;
}
