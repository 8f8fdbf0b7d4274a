/* libFuzzer target: `tandem trace-summary` reads a trace the user names, and `--profile-config`
 * a tools.json; neither may crash on any byte string. An accepted trace is summarised both
 * ways (text and JSON; the JSON must parse back), an accepted profiler config must be
 * within the bounds the session checks.
 * fuzz-modules: prof core */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/json.h"
#include "core/strbuf.h"
#include "prof/profiler.h"
#include "prof/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tdm_error err;
    tdm_prof_trace t;
    if (tdm_prof_trace_parse((const char *)data, size, "fuzz/trace.json", &t, &err) == 0) {
        tdm_strbuf text, json;
        tdm_sb_init(&text);
        tdm_sb_init(&json);
        tdm_prof_trace_summarize(&t, &text, &json);
        tdm_json_doc *d = tdm_json_parse(json.data ? json.data : "", json.len, "analysis", &err);
        if (!d) abort(); /* the analysis JSON we write must read back */
        tdm_json_free(d);
        tdm_sb_free(&text);
        tdm_sb_free(&json);
        tdm_prof_trace_free(&t);
    }
    tdm_prof_config cfg;
    if (tdm_prof_config_parse((const char *)data, size, "fuzz/tools.json", &cfg, &err) == 0) {
        if (cfg.level < 0 || cfg.level > 2 || cfg.start_step < 1 || cfg.end_step < cfg.start_step) abort();
        if (cfg.capacity < 16 || (!cfg.all_ranks && (cfg.n_ranks < 1 || cfg.n_ranks > TDM_PROF_MAX_RANKS_LISTED)))
            abort();
    }
    return 0;
}
