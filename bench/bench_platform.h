/* bench_platform.h - the line every benchmark prints first: speeds depend on the processor,
 * the compiler's target and OpenBLAS's kernel set, so a figure is read with them. */
#ifndef TDM_BENCH_PLATFORM_H
#define TDM_BENCH_PLATFORM_H

#include <stdio.h>

#include "core/platform.h"
#include "kernels/kernels.h"

static inline void bench_print_platform(FILE *f) {
    tdm_platform p;
    tdm_platform_read(&p);
    char blas[128];
    tdm_blas_describe(blas, sizeof blas);
    fprintf(f, "platform: %s; %s; built for %s; OpenBLAS kernels %s\n", p.cpu, p.isa, p.build_target, blas);
}

#endif
