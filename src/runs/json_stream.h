/* json_stream.h - a JSON document read as a stream of tokens, in bounded memory.
 *
 *   tdm_error err;
 *   tdm_js *js = tdm_js_open_file("rank0.json.gz", &err);   // gzip or plain, by its bytes
 *   if (!js) { ... err.msg ... }
 *   tdm_js_tok t = tdm_js_next(js);                          // TDM_JS_OBJECT
 *   while ((t = tdm_js_next(js)) == TDM_JS_KEY) {
 *       if (!strcmp(tdm_js_text(js, NULL), "traceEvents")) { ...read the array... }
 *       else if (tdm_js_skip_value(js) != 0) break;           // a member we do not need
 *   }
 *   if (t == TDM_JS_ERROR) { ... tdm_js_error(js) ... }
 *   tdm_js_close(js);
 *
 * A profiler trace of 500 MB is one JSON object; this reader holds a window of it (1 MiB,
 * more only while one string or number is longer than half the window, up to
 * TDM_JS_MAX_TOKEN) and never the document. The grammar is checked as tokens are read
 * (commas, colons, brackets, literals, numbers); values skipped with tdm_js_skip_value are
 * checked for closed strings and balanced brackets only, which is what makes skipping fast.
 * Strings are returned with their escapes decoded (\uXXXX to UTF-8, invalid surrogates to
 * U+FFFD) but their bytes are not checked as UTF-8: a reader that prints them sanitises.
 * Errors name the input and the byte offset (of the decompressed text).
 */
#ifndef TDM_RUNS_JSON_STREAM_H
#define TDM_RUNS_JSON_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define TDM_JS_MAX_DEPTH 256
#define TDM_JS_MAX_TOKEN ((size_t)64 << 20)

typedef enum tdm_js_tok {
    TDM_JS_EOF = 0,    /* the top-level value ended and only blanks follow */
    TDM_JS_ERROR,      /* tdm_js_error says what; every later call returns TDM_JS_ERROR */
    TDM_JS_OBJECT,     /* '{' */
    TDM_JS_OBJECT_END, /* '}' */
    TDM_JS_ARRAY,      /* '[' */
    TDM_JS_ARRAY_END,  /* ']' */
    TDM_JS_KEY,        /* a member name; its value comes next */
    TDM_JS_STRING,
    TDM_JS_NUMBER,
    TDM_JS_TRUE,
    TDM_JS_FALSE,
    TDM_JS_NULL,
} tdm_js_tok;

typedef struct tdm_js tdm_js;

/* Opens a file, gzip-compressed (any name) or plain; NULL with a message naming it. */
tdm_js *tdm_js_open_file(const char *path, tdm_error *err);
/* Reads data[0..len) (copied window by window: data is never modified); `name` prefixes errors. */
tdm_js *tdm_js_open_mem(const void *data, size_t len, const char *name);
void tdm_js_close(tdm_js *js);

tdm_js_tok tdm_js_next(tdm_js *js);
/* The current KEY or STRING, decoded and NUL-terminated (it may contain NUL: use *len), or
 * the text of the current NUMBER. Valid until the next call on js. */
const char *tdm_js_text(const tdm_js *js, size_t *len);
/* The current NUMBER's value, correctly rounded like strtod; for a STRING, its value when
 * the whole string is a JSON number ("1704161511422904.204"), else NaN. */
double tdm_js_number(const tdm_js *js);
/* 1 when the current NUMBER has neither fraction nor exponent. */
int tdm_js_number_is_int(const tdm_js *js);
/* Skips the value that comes next (call it after a KEY, or where an array element is due):
 * a scalar, or a whole object or array. 0, or -1 on an error (tdm_js_error). */
int tdm_js_skip_value(tdm_js *js);
/* Skips to the end of the object or array the last token opened or is inside, consuming its
 * closing bracket. 0, or -1 on an error. */
int tdm_js_skip_rest(tdm_js *js);
/* Nesting depth after the last token (1 inside the top-level object or array). */
int tdm_js_depth(const tdm_js *js);
/* Decompressed bytes consumed so far. */
uint64_t tdm_js_offset(const tdm_js *js);
/* The message of the last TDM_JS_ERROR ("rank0.json.gz: byte 1234: expected ',' or '}'"). */
const char *tdm_js_error(const tdm_js *js);

/* Parses a whole JSON number text[0..len) the way tdm_js_number does: 0, or -1 when it is
 * not exactly one JSON number. */
int tdm_js_parse_number(const char *text, size_t len, double *out);

#endif
