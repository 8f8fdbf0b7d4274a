/* libFuzzer target: `tandem analyze` reads trace files users bring (PyTorch profiler JSON,
 * Ascend's trace_view.json, step CSVs and communication JSON); no byte string may crash a reader
 * or the analysis, and what is read must analyse to figures that hold together; a PyTorch trace
 * that `tandem plan` models must simulate to a finite step that no overlap never shortens.
 * fuzz-modules: plan runs prof core */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "plan/plan.h"
#include "runs/analyze.h"
#include "runs/trace.h"

static void plan(const tdm_runs_set *s) {
    tdm_plan_model m;
    tdm_error err;
    tdm_plan_link none = {.alpha_us = -1, .gbps = -1};
    if (tdm_plan_from_runs(s, "fuzz.json", none, -1, &m, NULL, 0, &err) != 0) {
        if (!err.msg[0]) abort(); /* a refusal always says why */
        return;
    }
    tdm_plan_result a, b;
    tdm_plan_config c = m.baseline;
    int ra = tdm_plan_simulate(&m, &c, &a, &err);
    c.overlap_grad = 0;
    int rb = tdm_plan_simulate(&m, &c, &b, &err);
    if (ra == 0 && rb == 0 && isfinite(a.step_us) && isfinite(b.step_us) &&
        b.step_us < a.step_us - 1e-6 * (1 + fabs(a.step_us)))
        abort();
    if (ra == 0) tdm_plan_result_free(&a);
    if (rb == 0) tdm_plan_result_free(&b);
    tdm_plan_model_free(&m);
}

static void check(const tdm_runs_set *s) {
    tdm_runs_analysis a;
    tdm_runs_analyze(s, &a);
    for (int i = 0; i < a.n_ranks; i++) {
        const tdm_runs_rank_stats *r = &a.ranks[i];
        for (int64_t k = 0; k < r->n_steps; k++) {
            const tdm_runs_step_stats *st = &r->steps[k];
            if (r->trace->n_given) continue; /* a format's own figures are reported as given */
            if (st->hidden_us > st->comm_us + 1e-6 * (1 + fabs(st->comm_us)) || st->idle_us < 0) abort();
        }
        for (int h = 0; h < 4; h++)
            if (r->hta[h].applicable && r->hta[h].n_comm_kernels > r->hta[h].n_kernels) abort();
    }
    tdm_runs_analysis_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tdm_error err;
    tdm_runs_set s;
    tdm_runs_set_init(&s);
    if (tdm_runs_read_json_mem(&s, data, size, "fuzz.json", &err) == 0) check(&s), plan(&s);
    tdm_runs_set_free(&s);
    tdm_runs_set_init(&s);
    if (tdm_runs_read_ascend_csv_mem(&s, (const char *)data, size, "fuzz/rank_1/step_trace_time.csv", &err) == 0)
        check(&s);
    tdm_runs_set_free(&s);
    tdm_runs_set_init(&s);
    if (tdm_runs_read_ascend_comm_mem(&s, data, size, "fuzz/communication.json", &err) == 0 && s.n_acomm == 0) abort();
    tdm_runs_set_free(&s);
    return 0;
}
