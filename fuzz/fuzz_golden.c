/* libFuzzer target: the JSON run readers (runs/golden.h: Megatron-LM golden values, MindSpeed-MM
 * baselines) and the model_config.yaml reader must accept or refuse any byte string without
 * crashing; what they accept keeps the run's promises (iterations ascending and unique, positive).
 * fuzz-modules: runs prof core */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "runs/golden.h"

static void check(const tdm_run_log *r) {
    for (int64_t i = 0; i < r->n_iters; i++) {
        if (r->iters[i].iteration < 1 || r->iters[i].interval < 1) abort();
        if (i && r->iters[i].iteration <= r->iters[i - 1].iteration) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tdm_run_log r;
    tdm_error err;
    int rc = tdm_run_json_read_mem((const char *)data, size, "fuzz.json", &r, &err);
    if (rc == 0 && r.n_iters == 0) abort();
    if (rc == 0) check(&r); /* after a refusal the run holds whatever was read: only freeing it is defined */
    /* the same bytes as a model_config.yaml for the run just read (or an empty one) */
    if (rc != 0) {
        tdm_run_log_free(&r);
        tdm_run_log_init(&r);
    }
    if (tdm_run_model_config_read_mem((const char *)data, size, "fuzz.yaml", &r, &err) == 0) check(&r);
    tdm_run_log_free(&r);
    return 0;
}
