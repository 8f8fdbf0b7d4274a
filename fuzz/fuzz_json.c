/* libFuzzer target: the JSON reader must reject or accept any byte string without
 * crashing, and what it accepts must be walkable.
 * fuzz-modules: core */
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"

static size_t walk(const tdm_json *v, int depth) {
    size_t n = 1;
    if (v->type == TDM_JSON_ARRAY || v->type == TDM_JSON_OBJECT)
        for (size_t i = 0; i < v->len; i++) n += walk(v->items[i], depth + 1);
    if (v->type == TDM_JSON_OBJECT && v->len) (void)tdm_json_get(v, v->keys[0]);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tdm_error err;
    tdm_json_doc *d = tdm_json_parse((const char *)data, size, "fuzz.json", &err);
    if (d) {
        walk(tdm_json_root(d), 0);
        tdm_json_free(d);
    }
    return 0;
}
