#include "core/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *tdm_alloc_big(size_t bytes, tdm_error *err) {
    if (bytes == 0) bytes = 64;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    void *p = NULL;
    if (posix_memalign(&p, 64, rounded) != 0 || !p) {
        tdm_errorf(err, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    memset(p, 0, rounded); /* the first touch happens here, not in a timed step */
    return p;
}

void tdm_free_big(void *p) { free(p); }

static void oom(size_t bytes) {
    fprintf(stderr, "error: out of memory allocating %zu bytes\n", bytes);
    abort();
}

void *tdm_xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) oom(bytes);
    return p;
}

void *tdm_xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) oom(n * size);
    return p;
}

void *tdm_xrealloc(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) oom(bytes);
    return q;
}

char *tdm_xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = tdm_xmalloc(n);
    memcpy(p, s, n);
    return p;
}
