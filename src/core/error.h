/* error.h - errors returned to callers.
 *
 * Library functions never print and never exit. A function that can fail takes a
 * `tdm_error *err` as its last argument, returns 0 (or a non-NULL pointer) on
 * success and -1 (or NULL) on failure, after writing one sentence into err->msg
 * that names the input and what was expected, e.g.
 *   "data/train.json: sample 12: 2 <image> tags but 1 image listed".
 * Only the command-line front end (src/tools) decides to print and exit.
 * `err` may be NULL when the caller does not care about the message.
 */
#ifndef TDM_ERROR_H
#define TDM_ERROR_H

#include <stdarg.h>

typedef struct tdm_error {
    char msg[1024];
} tdm_error;

/* Formats the message into err (if non-NULL) and returns -1, so that
 * `return tdm_errorf(err, "...")` is the idiomatic failure path. */
int tdm_errorf(tdm_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepends "prefix: " to an existing message (adds context on the way up). */
int tdm_error_prefix(tdm_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
