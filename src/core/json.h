/* json.h - a strict RFC 8259 JSON reader (DOM) with bounded resources.
 *
 *   tdm_error err;
 *   tdm_json_doc *doc = tdm_json_parse(text, len, "config.json", &err);
 *   if (!doc) { ... err.msg says "config.json:3:14: expected ',' or '}'" ... }
 *   const tdm_json *v = tdm_json_get(tdm_json_root(doc), "text_config");
 *   int64_t h;
 *   if (tdm_json_get_int(v, "hidden_size", &h) != 0) ...
 *   tdm_json_free(doc);
 *
 * Everything lives in the document: values, keys and strings are freed with it.
 * Strings are validated UTF-8 (escapes decoded, surrogate pairs joined); a string may
 * contain NUL bytes (\u0000), so use ->len. Objects keep key order; duplicate keys
 * keep the last value for tdm_json_get. Nesting deeper than TDM_JSON_MAX_DEPTH,
 * invalid UTF-8, trailing garbage, and numbers out of double range are errors.
 */
#ifndef TDM_JSON_H
#define TDM_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define TDM_JSON_MAX_DEPTH  256
/* At most this many values per document (~100 bytes of tree each: under 2 GiB). */
#define TDM_JSON_MAX_VALUES ((int64_t)1 << 24)

typedef enum tdm_json_type {
    TDM_JSON_NULL,
    TDM_JSON_FALSE,
    TDM_JSON_TRUE,
    TDM_JSON_NUMBER,
    TDM_JSON_STRING,
    TDM_JSON_ARRAY,
    TDM_JSON_OBJECT,
} tdm_json_type;

typedef struct tdm_json tdm_json;
struct tdm_json {
    tdm_json_type type;
    int line, col;     /* where the value starts, 1-based, for error messages */
    double num;        /* NUMBER */
    int is_int;        /* NUMBER written without fraction or exponent, fits int64 */
    int64_t i64;       /* NUMBER when is_int */
    const char *str;   /* STRING: NUL-terminated UTF-8 */
    size_t len;        /* STRING: bytes; ARRAY/OBJECT: number of items */
    tdm_json **items;  /* ARRAY/OBJECT: values */
    const char **keys; /* OBJECT: keys (NUL-terminated) */
};

typedef struct tdm_json_doc tdm_json_doc;

/* `name` (a file name) prefixes every error message. */
tdm_json_doc *tdm_json_parse(const char *text, size_t len, const char *name, tdm_error *err);
/* The same with another bound on the number of values (tests). */
tdm_json_doc *tdm_json_parse_bounded(const char *text, size_t len, const char *name, int64_t max_values,
                                     tdm_error *err);
void tdm_json_free(tdm_json_doc *doc);

/* The elements of a top-level JSON array, one document each, so that a large array (a
 * dataset file) never holds more than one element's tree; the value bound applies per
 * element. Positions and messages are those of parsing the whole text (line:col of the
 * file). The text must outlive the reader. */
typedef struct tdm_json_array_reader {
    const char *text, *end, *p, *line_start, *name;
    int line;
    int state; /* 0: an element comes next; 1: after an element; 3: after ']'; 2: done */
} tdm_json_array_reader;
/* Positions r at the array's first element; fails when the text (after an optional UTF-8
 * byte order mark and blanks) does not start with '['. */
int tdm_json_array_begin(tdm_json_array_reader *r, const char *text, size_t len, const char *name, tdm_error *err);
/* 1 with *doc the next element (free it with tdm_json_free), 0 after the closing bracket
 * when only blanks follow it, -1 with a message on any error. */
int tdm_json_array_next(tdm_json_array_reader *r, tdm_json_doc **doc, tdm_error *err);
const tdm_json *tdm_json_root(const tdm_json_doc *doc);

/* Object member by key, or NULL (also when v is NULL or not an object). */
const tdm_json *tdm_json_get(const tdm_json *v, const char *key);
/* Array element, or NULL when out of range or not an array. */
const tdm_json *tdm_json_at(const tdm_json *v, size_t i);

const char *tdm_json_type_name(tdm_json_type t);

/* 1 when a and b differ as JSON values (objects compared by key, in any order; duplicate
 * keys by their last value, as tdm_json_get reads them; numbers by value), with the path of
 * the first difference ("text_config.rope_theta", "a[2]") appended to path[cap], which the
 * caller starts as ""; 0 when equal. */
int tdm_json_first_difference(const tdm_json *a, const tdm_json *b, char *path, size_t cap);

/* Typed getters for object members: 0 on success; -1 with a message naming the key
 * when it is missing or has the wrong type. */
int tdm_json_get_int(const tdm_json *obj, const char *key, int64_t *out, tdm_error *err);
int tdm_json_get_num(const tdm_json *obj, const char *key, double *out, tdm_error *err);
int tdm_json_get_bool(const tdm_json *obj, const char *key, int *out, tdm_error *err);
const char *tdm_json_get_str(const tdm_json *obj, const char *key, tdm_error *err);

#endif
