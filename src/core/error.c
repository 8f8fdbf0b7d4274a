#include "core/error.h"

#include <stdio.h>
#include <string.h>

int tdm_errorf(tdm_error *err, const char *fmt, ...) {
    if (!err) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int tdm_error_prefix(tdm_error *err, const char *fmt, ...) {
    if (!err) return -1;
    char prefix[512], old[sizeof err->msg], joined[sizeof prefix + sizeof old + 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(joined, sizeof joined, "%s: %s", prefix, old);
    snprintf(err->msg, sizeof err->msg, "%.*s", (int)sizeof err->msg - 1, joined);
    return -1;
}
