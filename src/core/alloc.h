/* alloc.h - allocation helpers.
 *
 * Big buffers (parameters, gradients, activations, communication buffers) come from
 * tdm_alloc_big: 64-byte aligned, zeroed, and every page touched once at creation,
 * because a first touch costs ~2 us per 4 KiB page on these machines and must not
 * land inside a timed step. Allocate them once at start-up; never per step.
 *
 * Small bookkeeping allocations use tdm_xmalloc/tdm_xcalloc/tdm_xrealloc/tdm_xstrdup,
 * which abort with a message if the system is out of memory: sizes that an input
 * controls must be bounded by the caller before they get here.
 */
#ifndef TDM_ALLOC_H
#define TDM_ALLOC_H

#include <stddef.h>

#include "core/error.h"

void *tdm_alloc_big(size_t bytes, tdm_error *err);
void tdm_free_big(void *p);

void *tdm_xmalloc(size_t bytes);
void *tdm_xcalloc(size_t n, size_t size);
void *tdm_xrealloc(void *p, size_t bytes);
char *tdm_xstrdup(const char *s);

#endif
