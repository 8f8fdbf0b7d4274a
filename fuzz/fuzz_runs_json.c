/* libFuzzer target: the streaming JSON reader (runs/json_stream.h) must read or reject any byte
 * string without crashing, and agree with the strict DOM reader (core/json.h): a document that
 * one accepts the other walks to the end with the same number of values, token by token and
 * with containers skipped.
 * fuzz-modules: runs prof core */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/json.h"
#include "runs/json_stream.h"

static size_t count(const tdm_json *v, int *depth, int d) {
    size_t n = 1;
    if (d > *depth) *depth = d;
    if (v->type == TDM_JSON_ARRAY || v->type == TDM_JSON_OBJECT)
        for (size_t i = 0; i < v->len; i++) n += count(v->items[i], depth, d + 1);
    return n;
}

/* Values read token by token; -1 on an error. With skip, every object member's value is skipped. */
static long walk(const uint8_t *data, size_t size, int skip) {
    tdm_js *js = tdm_js_open_mem(data, size, "fuzz.json");
    long n = 0;
    tdm_js_tok t;
    while ((t = tdm_js_next(js)) != TDM_JS_EOF) {
        if (t == TDM_JS_ERROR) {
            if (!tdm_js_error(js)[0]) abort(); /* an error always says what */
            n = -1;
            break;
        }
        if (t == TDM_JS_KEY && skip) {
            if (tdm_js_skip_value(js) != 0) {
                n = -1;
                break;
            }
            continue;
        }
        if (t == TDM_JS_STRING) (void)tdm_js_number(js);
        if (t != TDM_JS_KEY && t != TDM_JS_OBJECT_END && t != TDM_JS_ARRAY_END) n++;
    }
    tdm_js_close(js);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tdm_error err;
    tdm_json_doc *d = tdm_json_parse((const char *)data, size, "fuzz.json", &err);
    long a = walk(data, size, 0), b = walk(data, size, 1);
    if (a >= 0 && b < 0) abort(); /* skipping checks less, never more */
    if (d) {
        int depth = 0;
        size_t n = count(tdm_json_root(d), &depth, 1);
        if (depth < 200 && (a < 0 || (size_t)a != n)) abort(); /* strict accepts: the stream reads the same values */
        if (depth < 200 && b < 0) abort();
        tdm_json_free(d);
    }
    return 0;
}
