/* libFuzzer target: the training-log reader (runs/megatron_log.h) must accept or refuse any byte
 * string without crashing, give the same run however the input is split into pieces (the first
 * byte picks the piece size), and keep its promises: iterations ascending and unique, each line
 * covering at least one iteration, bounded warnings.
 * fuzz-modules: runs prof core */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runs/megatron_log.h"

static void check(const tdm_run_log *r) {
    for (int64_t i = 0; i < r->n_iters; i++) {
        if (r->iters[i].interval < 1 || r->iters[i].iteration < 1) abort();
        if (i && r->iters[i].iteration <= r->iters[i - 1].iteration) abort();
        if (r->iters[i].pass < 1 || r->iters[i].pass > (uint32_t)r->passes) abort();
    }
    if (r->n_warnings > TDM_RUN_MAX_WARNINGS || r->n_loss_names > TDM_RUN_MAX_LOSSES) abort();
    for (int64_t i = 0; i < r->n_timers; i++)
        if (r->timers[i].name < 0 || r->timers[i].name >= r->n_timer_names) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tdm_run_log whole, parts;
    tdm_error e1, e2;
    int rc1 = tdm_megatron_log_read_mem((const char *)data, size, "fuzz.log", &whole, &e1);
    if (rc1 == 0 && whole.n_iters == 0) abort(); /* success means an iteration was found */
    if (rc1 == 0) check(&whole);
    size_t piece = size ? (size_t)data[0] % 17 + 1 : 1;
    tdm_run_log_init(&parts);
    snprintf(parts.path, sizeof parts.path, "fuzz.log");
    tdm_megatron_parser *p = tdm_megatron_parser_new(&parts);
    for (size_t i = 0; i < size; i += piece)
        tdm_megatron_parser_feed(p, (const char *)data + i, size - i < piece ? size - i : piece);
    int rc2 = tdm_megatron_parser_finish(p, &e2);
    if (rc1 != rc2 || whole.n_iters != parts.n_iters || whole.lines != parts.lines || whole.passes != parts.passes ||
        whole.n_args != parts.n_args || whole.n_timers != parts.n_timers || whole.n_valid != parts.n_valid ||
        whole.n_warnings != parts.n_warnings)
        abort();
    if (rc1 != 0 && strcmp(e1.msg, e2.msg) != 0) abort();
    for (int64_t i = 0; i < whole.n_iters; i++)
        if (whole.iters[i].iteration != parts.iters[i].iteration || whole.iters[i].interval != parts.iters[i].interval)
            abort();
    tdm_run_log_free(&whole);
    tdm_run_log_free(&parts);
    return 0;
}
