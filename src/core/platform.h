/* platform.h - what a run's speed, and for BLAS its last bits, depend on beyond its flags:
 * the processor, the target the compiler built tandem for, and (kernels/kernels.h,
 * tdm_blas_describe) OpenBLAS's kernel set. Printed in the arguments block, in tandem ab's
 * summary.json and report, and by every benchmark.
 *
 *   tdm_platform p; tdm_platform_read(&p);
 *   printf("%s, %s, built for %s\n", p.cpu, p.isa, p.build_target);
 */
#ifndef TDM_PLATFORM_H
#define TDM_PLATFORM_H

typedef struct tdm_platform {
    char cpu[160];         /* "AMD EPYC 9B45 (family 26 model 2)": /proc/cpuinfo's model name and numbers */
    char isa[64];          /* the widest vector extensions the processor has: "avx512 bf16 vnni", "avx2 fma" */
    char build_target[96]; /* the compiler's target: "native (znver3)" or "x86-64-v3 (portable)" */
} tdm_platform;

void tdm_platform_read(tdm_platform *p);

#endif
