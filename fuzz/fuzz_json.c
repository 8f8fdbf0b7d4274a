/* libFuzzer target: the JSON reader must reject or accept any byte string without
 * crashing, and what it accepts must be walkable. The array reader (one element at a time)
 * must agree with the whole parse on every input that starts as an array: the same
 * elements, or the same error message.
 * fuzz-modules: core */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"

static size_t walk(const tdm_json *v, int depth) {
    size_t n = 1;
    if (v->type == TDM_JSON_ARRAY || v->type == TDM_JSON_OBJECT)
        for (size_t i = 0; i < v->len; i++) n += walk(v->items[i], depth + 1);
    if (v->type == TDM_JSON_OBJECT && v->len) (void)tdm_json_get(v, v->keys[0]);
    return n;
}

static void array_reader_agrees(const char *text, size_t size, const tdm_json_doc *whole, const tdm_error *werr) {
    tdm_json_array_reader r;
    tdm_error err;
    if (tdm_json_array_begin(&r, text, size, "fuzz.json", &err) != 0) return; /* not an array */
    const tdm_json *root = whole ? tdm_json_root(whole) : NULL;
    if (root && root->type != TDM_JSON_ARRAY) abort(); /* begin took a non-array the whole parse read */
    size_t i = 0;
    tdm_json_doc *doc;
    int got;
    char path[64];
    while ((got = tdm_json_array_next(&r, &doc, &err)) == 1) {
        path[0] = 0; /* tdm_json_first_difference appends to a path the caller starts as "" */
        if (root &&
            (i >= root->len || tdm_json_first_difference(tdm_json_root(doc), root->items[i], path, sizeof path)))
            abort();
        tdm_json_free(doc);
        i++;
    }
    if (root ? got != 0 || i != root->len : got == 0 || strcmp(err.msg, werr->msg) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tdm_error err;
    tdm_json_doc *d = tdm_json_parse((const char *)data, size, "fuzz.json", &err);
    if (d) walk(tdm_json_root(d), 0);
    array_reader_agrees((const char *)data, size, d, &err);
    tdm_json_free(d);
    return 0;
}
