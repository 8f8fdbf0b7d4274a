/* bench_runs_log.c - how fast the training-log reader (src/runs/megatron_log.c) reads: MB/s on
 * one core over a generated Megatron log of --log-interval 1 (iteration lines with timestamps,
 * a timers block every 100 iterations, other output between), against the floor of finding its
 * lines (memchr for '\n') measured in the same run; then the same log from a file (page cache)
 * through the entry point that detects the format. Not a test: it prints numbers for
 * docs/benchmarks.md. The figure is bytes per second of the reading thread's CPU time (user and
 * system), the cost on one core whatever else the machine runs; wall-clock figures beside it.
 *   build/bench/bench_runs_log [MB]     (default 256)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_platform.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/strbuf.h"
#include "runs/megatron_log.h"
#include "runs/run.h"

static void generate(tdm_strbuf *sb, size_t bytes, int64_t *iterations) {
    tdm_sb_puts(sb, "------------------------ arguments ------------------------\n");
    for (int i = 0; i < 300; i++) tdm_sb_printf(sb, "  argument_%03d ................................... %d\n", i, i);
    tdm_sb_puts(sb, "-------------------- end of arguments ---------------------\n"
                    "Setting up DistributedDataParallel with config DistributedDataParallelConfig("
                    "grad_reduce_in_fp32=False, overlap_grad_reduce=True, bucket_size=40000000)\n");
    int64_t it = 0;
    const int64_t of = 100000000;
    while (sb->len < bytes) {
        it++;
        double ms = 380.0 + 10.0 * sin((double)it * 0.01), loss = 11.0 * exp(-(double)it * 1e-6);
        tdm_sb_printf(sb,
                      " [2024-09-14 19:44:%02d] iteration %8lld/%8lld | consumed samples: %12lld | elapsed time per "
                      "iteration (ms): %.1f | throughput per GPU (TFLOP/s/GPU): %.1f | learning rate: %.6E | global "
                      "batch size: %5d | lm loss: %.6E | loss scale: 1.0 | grad norm: %.3f | number of skipped "
                      "iterations:   0 | number of nan iterations:   0 |\n",
                      (int)(it % 60), (long long)it, (long long)of, (long long)(it * 16), ms, 180.0 + ms / 100,
                      1.5e-4 * (double)(it % 1000) / 1000.0, 16, loss, 1.0 + 1.0 / (double)it);
        if (it % 100 == 0)
            tdm_sb_puts(sb,
                        "(min, max) time across ranks (ms):\n"
                        "    forward-backward ...............................: (351.12, 352.80)\n"
                        "    optimizer ......................................: (12.10, 12.31)\n"
                        "[Rank 0] (after 100 iterations) memory (MB) | allocated: 1786.6 | max allocated: 4673.7\n");
    }
    *iterations = it;
}

static double mbps(size_t bytes, uint64_t ns) { return (double)bytes / 1e6 / ((double)ns / 1e9); }

int main(int argc, char **argv) {
    size_t mb = argc > 1 ? (size_t)atol(argv[1]) : 256;
    if (mb < 1) mb = 1;
    bench_print_platform(stdout);
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    int64_t iterations;
    generate(&sb, mb << 20, &iterations);
    printf("training-log reader, one core: a generated log of %.1f MB, %lld iteration lines\n", (double)sb.len / 1e6,
           (long long)iterations);

    /* the floor: finding the lines */
    uint64_t best_scan = UINT64_MAX;
    volatile int64_t lines = 0;
    for (int rep = 0; rep < 3; rep++) {
        uint64_t t0 = tdm_thread_cpu_ns();
        int64_t n = 0;
        for (const char *p = sb.data, *end = sb.data + sb.len; p < end; n++) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            p = nl ? nl + 1 : end;
        }
        uint64_t dt = tdm_thread_cpu_ns() - t0;
        lines = n;
        if (dt < best_scan) best_scan = dt;
    }

    uint64_t best = UINT64_MAX, best_wall = UINT64_MAX;
    tdm_run_log run;
    tdm_error err;
    for (int rep = 0; rep < 5; rep++) {
        uint64_t t0 = tdm_now_ns(), c0 = tdm_thread_cpu_ns();
        int rc = tdm_megatron_log_read_mem(sb.data, sb.len, "generated.log", &run, &err);
        uint64_t dc = tdm_thread_cpu_ns() - c0, dt = tdm_now_ns() - t0;
        if (rc != 0 || run.n_iters != iterations) {
            fprintf(stderr, "bench_runs_log: the reader failed: %s (%lld of %lld iterations)\n", rc ? err.msg : "",
                    (long long)run.n_iters, (long long)iterations);
            return 1;
        }
        if (rep < 4) tdm_run_log_free(&run);
        if (dc < best) best = dc;
        if (dt < best_wall) best_wall = dt;
    }
    printf("  finding the lines (memchr)          %8.0f MB/s  (%lld lines; the floor, CPU time)\n",
           mbps(sb.len, best_scan), (long long)lines);
    printf("  reading the log from memory         %8.0f MB/s  of CPU time (target 200), %.0f MB/s wall; %.1fx the "
           "floor's time\n",
           mbps(sb.len, best), mbps(sb.len, best_wall), (double)best / (double)best_scan);
    printf("  kept: %lld records of %zu bytes (%.1f MB), %lld timer lines; line buffer %d KiB\n",
           (long long)run.n_iters, sizeof(tdm_run_iter), (double)run.n_iters * sizeof(tdm_run_iter) / 1e6,
           (long long)run.n_timers, TDM_RUN_LINE_MAX / 1024);
    tdm_run_log_free(&run);

    /* from a file: 1 MiB reads through the detecting entry point */
    char path[] = "/tmp/bench_runs_log_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || tdm_write_all(fd, sb.data, sb.len, path, &err) != 0) {
        fprintf(stderr, "bench_runs_log: %s\n", fd < 0 ? "cannot create a temporary file" : err.msg);
        return 1;
    }
    close(fd);
    best = best_wall = UINT64_MAX;
    for (int rep = 0; rep < 3; rep++) {
        uint64_t t0 = tdm_now_ns(), c0 = tdm_thread_cpu_ns();
        int rc = tdm_run_log_read(path, &run, &err);
        uint64_t dc = tdm_thread_cpu_ns() - c0, dt = tdm_now_ns() - t0;
        tdm_run_log_free(&run);
        if (rc != 0) {
            fprintf(stderr, "bench_runs_log: %s\n", err.msg);
            unlink(path);
            return 1;
        }
        if (dc < best) best = dc;
        if (dt < best_wall) best_wall = dt;
    }
    unlink(path);
    printf("  reading the log from a file         %8.0f MB/s  of CPU time, %.0f MB/s wall (page cache, 1 MiB reads)\n",
           mbps(sb.len, best), mbps(sb.len, best_wall));
    tdm_sb_free(&sb);
    return 0;
}
