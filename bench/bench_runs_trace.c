/* bench_runs_trace.c - how fast `tandem analyze` reads a PyTorch profiler trace, and in how
 * much memory: writes a Kineto-like trace of a given size (CPU operators, runtime launches with
 * correlation ids, kernels with their usual arguments, flow events, ProfilerStep annotations,
 * float µs with a nanosecond fraction), as .json and .json.gz, then reads each through
 * tdm_runs_read and the analysis on one thread. Prints MB/s of JSON text against the target of
 * 200 MB/s, and the process's peak resident memory. Not a test: docs/benchmarks.md quotes it.
 *   build/bench/bench_runs_trace [MB] [dir]     (default 256 MB in $TMPDIR or /tmp)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "bench_platform.h"
#include "runs/analyze.h"
#include "runs/trace.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *const ops[] = {"aten::linear",
                                  "aten::addmm",
                                  "aten::empty",
                                  "aten::copy_",
                                  "aten::layer_norm",
                                  "aten::scaled_dot_product_attention",
                                  "autograd::engine::evaluate_function: "
                                  "AddmmBackward0"};
static const char *const kernels[] = {
    "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>(Params)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
    "(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "Memcpy DtoD (Device -> Device)"};

/* One step's worth of events into f; returns bytes written. */
static size_t write_step(FILE *f, int step, double *t, long *corr, long *ext) {
    size_t n = 0;
    double t0 = *t;
    for (int k = 0; k < 400; k++) {
        double ts = *t + 0.137;
        long c = (*corr)++;
        const char *op = ops[k % 7];
        n += (size_t)fprintf(f,
                             ",\n  {\n    \"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"%s\", \"pid\": 2910249, "
                             "\"tid\": 2910249,\n    \"ts\": %.3f, \"dur\": %.3f,\n    \"args\": {\n      \"External "
                             "id\": %ld,\"Sequence number\": %d, \"Fwd thread id\": 0, \"Record function id\": 0, "
                             "\"Ev Idx\": %ld\n    }\n  }",
                             op, ts, 9.871, *ext, k, *ext + 1);
        (*ext)++;
        n += (size_t)fprintf(f,
                             ",\n  {\n    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", "
                             "\"pid\": 2910249, \"tid\": 2910249,\n    \"ts\": %.3f, \"dur\": %.3f,\n    \"args\": {\n "
                             "     \"External id\": %ld,\n      \"cbid\": 211, \"correlation\": %ld\n    }\n  }",
                             ts + 2.5, 4.125, *ext, c);
        int kk = k % 50 == 49 ? 2 : k % 23 == 0 ? 3 : k % 2;
        n += (size_t)fprintf(
            f,
            ",\n  {\n    \"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": 0, \"tid\": %d,\n    \"ts\": "
            "%.3f, \"dur\": %.3f,\n    \"args\": {\n      \"External id\": %ld,\n      \"queued\": 0, \"device\": 0, "
            "\"context\": 1,\n      \"stream\": %d, \"correlation\": %ld,\n      \"registers per thread\": 96,\n      "
            "\"shared memory\": 87568,\n      \"blocks per SM\": 0.074074,\n      \"warps per SM\": 1.259259,\n      "
            "\"grid\": [8, 1, 1],\n      \"block\": [544, 1, 1],\n      \"est. achieved occupancy %%\": 0\n    }\n  }",
            kk == 3 ? "gpu_memcpy" : "kernel", kernels[kk], kk == 2 ? 40 : 7, ts + 20.75, kk == 2 ? 300.5 : 11.25, *ext,
            kk == 2 ? 40 : 7, c);
        n += (size_t)fprintf(f,
                             ",\n  {\n    \"ph\": \"s\", \"id\": %ld, \"pid\": 2910249, \"tid\": 2910249, \"ts\": "
                             "%.3f,\n    \"cat\": \"ac2g\", \"name\": \"ac2g\"\n  }",
                             c, ts + 2.5);
        *t += 25.0;
    }
    n += (size_t)fprintf(
        f,
        ",\n  {\n    \"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#%d\", \"pid\": "
        "2910249, \"tid\": 2910249,\n    \"ts\": %.3f, \"dur\": %.3f,\n    \"args\": {\n      "
        "\"External id\": %ld\n    }\n  }",
        step, t0, *t - t0, (*ext)++);
    return n;
}

static size_t write_trace(const char *path, size_t mb) {
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    size_t n =
        (size_t)fprintf(f, "{\n  \"schemaVersion\": 1,\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": "
                           "0, \"world_size\": 8},\n  \"displayTimeUnit\": \"ms\",\n  \"traceEvents\": [\n  {\"ph\": "
                           "\"M\", \"name\": \"process_name\", \"pid\": 0, \"tid\": 0, \"args\": {\"name\": "
                           "\"python3\"}}");
    double t = 4458676416788.066;
    long corr = 1, ext = 1;
    for (int step = 1; n < mb << 20; step++) n += write_step(f, step, &t, &corr, &ext);
    n += (size_t)fprintf(f, "\n]}\n");
    fclose(f);
    return n;
}

static int gzip_file(const char *src, const char *dst) {
    FILE *in = fopen(src, "rb");
    gzFile out = gzopen(dst, "wb6");
    if (!in || !out) return -1;
    static char buf[1 << 20];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) gzwrite(out, buf, (unsigned)n);
    fclose(in);
    return gzclose(out) == Z_OK ? 0 : -1;
}

static long rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

/* Returns the wall time; *cpu the CPU time of the process (the same on an idle machine; on a
 * shared one the reader's own cost). */
static double read_once(const char *path, int64_t *spans, int64_t *steps, double *cpu) {
    tdm_runs_set s;
    tdm_runs_set_init(&s);
    tdm_error err;
    double c0 = cpu_s();
    double t0 = now_s();
    if (tdm_runs_read(&s, path, &err) != 0) {
        fprintf(stderr, "bench_runs_trace: %s\n", err.msg);
        exit(1);
    }
    double dt = now_s() - t0;
    *cpu = cpu_s() - c0;
    *spans = s.traces[0]->n_spans;
    *steps = s.traces[0]->n_steps;
    tdm_runs_set_free(&s);
    return dt;
}

int main(int argc, char **argv) {
    size_t mb = argc > 1 ? (size_t)atol(argv[1]) : 256;
    const char *dir = argc > 2 ? argv[2] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (mb < 1) mb = 1;
    bench_print_platform(stdout);
    char json[4096], gz[4200];
    snprintf(json, sizeof json, "%s/bench_runs_trace.%d.json", dir, (int)getpid());
    snprintf(gz, sizeof gz, "%s.gz", json);
    double t0 = now_s();
    size_t bytes = write_trace(json, mb);
    if (!bytes || gzip_file(json, gz) != 0) {
        fprintf(stderr, "bench_runs_trace: cannot write %s\n", json);
        return 1;
    }
    struct stat st;
    stat(gz, &st);
    printf("trace: %.1f MB of JSON, %.1f MB gzipped (written in %.1f s)\n", bytes / 1e6, st.st_size / 1e6,
           now_s() - t0);
    long rss0 = rss_mb();
    const char *paths[2] = {json, gz};
    const char *names[2] = {".json   ", ".json.gz"};
    for (int i = 0; i < 2; i++) {
        int64_t spans = 0, steps = 0;
        double best = 1e30, best_cpu = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            double cpu, dt = read_once(paths[i], &spans, &steps, &cpu);
            if (dt < best) best = dt;
            if (cpu < best_cpu) best_cpu = cpu;
        }
        double rate = bytes / 1e6 / best_cpu;
        printf("  read %s %6.2f s CPU (%6.2f s wall)  %7.1f MB/s of JSON per CPU second (%.2fx the 200 MB/s target)  "
               "%lld intervals kept, %lld steps\n",
               names[i], best_cpu, best, rate, rate / 200.0, (long long)spans, (long long)steps);
    }
    /* the analysis of the same trace, once */
    tdm_runs_set s;
    tdm_runs_set_init(&s);
    tdm_error err;
    tdm_runs_read(&s, json, &err);
    double ta = now_s();
    tdm_runs_analysis a;
    tdm_runs_analyze(&s, &a);
    printf("  analysis (per step, HTA's four settings, collectives): %.2f s\n", now_s() - ta);
    tdm_runs_analysis_free(&a);
    tdm_runs_set_free(&s);
    printf("  peak resident memory: %ld MB (%ld MB before reading; the window is 1 MiB, each kept interval 48 bytes)\n",
           rss_mb(), rss0);
    unlink(json);
    unlink(gz);
    return 0;
}
