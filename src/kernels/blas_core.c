/* blas_core.c - OpenBLAS's kernel set, when the library does not know the CPU.
 *
 * A DYNAMIC_ARCH OpenBLAS picks its kernels once, when it is loaded, from the CPU's family
 * and model number. A CPU newer than the library gets its generic set: Debian 12's 0.3.21
 * on an Intel family 6 model 207 Xeon (AVX-512) runs its Prescott (SSE3) kernels, and
 * tandem's matrix products run 3-6x slower than the CPU allows (bench/bench_gemm). The only
 * way to choose is the OPENBLAS_CORETYPE variable, read at load time, so tandem sets it and
 * runs itself again before anything else happens (before MPI_Init). A variable the user set
 * is never touched. scripts/blas-core.sh makes the same choice for benchmarks, which pin
 * one set for both programs they compare.
 */
#include "kernels/kernels.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Kernel sets at least as fast as the ones chosen below on the CPUs that run them. */
static int good_core(const char *core) {
    static const char *const good[] = {"Haswell", "SkylakeX",  "Cooperlake", "SapphireRapids",
                                       "Zen",     "Excavator", "Steamroller"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (!strncmp(core, good[i], strlen(good[i]))) return 1;
    return 0;
}

const char *tdm_blas_better_core(void) {
    const char *core = openblas_get_corename();
    if (!core || good_core(core)) return NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    return NULL;
}

void tdm_blas_select_core(char **argv) {
    const char *want;
    if (getenv("OPENBLAS_CORETYPE") || getenv("TANDEM_BLAS_CORE_FROM") || !(want = tdm_blas_better_core())) return;
    /* TANDEM_BLAS_CORE_FROM: what OpenBLAS chose by itself, for the log line, and the
     * guard against a second run should the library ignore the variable */
    setenv("TANDEM_BLAS_CORE_FROM", openblas_get_corename(), 1);
    setenv("OPENBLAS_CORETYPE", want, 1);
    execv("/proc/self/exe", argv);
    /* could not run again: go on with the slow kernels, say so */
    fprintf(stderr,
            "tandem: OpenBLAS runs its generic %s kernels on this CPU, which has %s; running again with "
            "OPENBLAS_CORETYPE=%s failed, so matrix products will be slow\n",
            getenv("TANDEM_BLAS_CORE_FROM"), want, want);
    unsetenv("OPENBLAS_CORETYPE");
}

int tdm_blas_core_note(char *buf, size_t n) {
    const char *from = getenv("TANDEM_BLAS_CORE_FROM"), *core = openblas_get_corename();
    if (!from || !core) return 0;
    snprintf(buf, n,
             "OpenBLAS: its %s kernels (OPENBLAS_CORETYPE set by tandem: the library does not know this CPU "
             "and chose its generic %s set; set OPENBLAS_CORETYPE yourself to choose)",
             core, from);
    return 1;
}

void tdm_blas_describe(char *buf, size_t n) {
    const char *core = openblas_get_corename(), *from = getenv("TANDEM_BLAS_CORE_FROM"),
               *env = getenv("OPENBLAS_CORETYPE");
    if (!core) core = "unknown";
    if (from) snprintf(buf, n, "%s (set by tandem; OpenBLAS chose %s)", core, from);
    else if (env) snprintf(buf, n, "%s (OPENBLAS_CORETYPE=%s)", core, env);
    else snprintf(buf, n, "%s (OpenBLAS's choice)", core);
}

double tdm_blas_sgemm_gflops(int n, double seconds) {
    if (n < 16) n = 16;
    const size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        return 0;
    }
    for (size_t i = 0; i < nn; i++) a[i] = (float)(i % 13) * 0.01f, b[i] = (float)(i % 7) * 0.02f, c[i] = 0;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n); /* warm-up */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double el = 0, best = 0;
    int calls = 0;
    do {
        struct timespec s0, s1;
        clock_gettime(CLOCK_MONOTONIC, &s0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        clock_gettime(CLOCK_MONOTONIC, &s1);
        double dt = (double)(s1.tv_sec - s0.tv_sec) + (double)(s1.tv_nsec - s0.tv_nsec) * 1e-9;
        double g = dt > 0 ? 2.0 * (double)n * (double)n * (double)n / dt * 1e-9 : 0;
        if (g > best) best = g; /* the ceiling: the best call, not the mean a busy machine drags down */
        calls++;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        el = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    } while (el < seconds || calls < 3);
    free(a), free(b), free(c);
    return best;
}
