/* cpustat.c - per-thread CPU statistics from /proc.
 *
 * getrusage(RUSAGE_THREAD) answers only for the calling thread, and the profiler must
 * read the communication and loader threads from the training thread, so it reads the
 * same kernel counters from /proc/self/task/<tid>: utime/stime and page faults from
 * `stat`, context switches from `status`, ns-resolution run time from `schedstat`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof/prof_internal.h"

static int read_small(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return 0;
}

void prof_read_cpu(int64_t os_tid, prof_cpu_raw *raw) {
    memset(raw, 0, sizeof *raw);
    char path[96], buf[4096];
    snprintf(path, sizeof path, "/proc/self/task/%lld/stat", (long long)os_tid);
    if (read_small(path, buf, sizeof buf) != 0) return;
    /* Fields after the parenthesised command name (which may contain spaces). */
    char *p = strrchr(buf, ')');
    if (!p) return;
    p += 2; /* now at field 3 (state) */
    long long v[20] = {0};
    int field = 3;
    char *save = NULL;
    for (char *tok = strtok_r(p, " ", &save); tok && field <= 15; tok = strtok_r(NULL, " ", &save), field++)
        if (field >= 3) v[field - 3 < 20 ? field - 3 : 19] = strtoll(tok, NULL, 10);
    raw->minflt = v[10 - 3];
    raw->majflt = v[12 - 3];
    raw->utime_ticks = v[14 - 3];
    raw->stime_ticks = v[15 - 3];
    snprintf(path, sizeof path, "/proc/self/task/%lld/status", (long long)os_tid);
    if (read_small(path, buf, sizeof buf) == 0) {
        char *q = strstr(buf, "voluntary_ctxt_switches:");
        if (q && q > buf && q[-1] == '\n') raw->vol_switches = strtoll(q + 24, NULL, 10);
        q = strstr(buf, "nonvoluntary_ctxt_switches:");
        if (q) raw->invol_switches = strtoll(q + 27, NULL, 10);
    }
    snprintf(path, sizeof path, "/proc/self/task/%lld/schedstat", (long long)os_tid);
    if (read_small(path, buf, sizeof buf) == 0) raw->run_ns = strtoll(buf, NULL, 10);
    raw->valid = 1;
}

void prof_cpu_delta(const prof_cpu_raw *start, const prof_cpu_raw *end, tdm_prof_cpu_stats *out) {
    memset(out, 0, sizeof *out);
    if (!start->valid || !end->valid) return;
    double tick_ms = 1000.0 / (double)sysconf(_SC_CLK_TCK);
    out->user_ms = (double)(end->utime_ticks - start->utime_ticks) * tick_ms;
    out->system_ms = (double)(end->stime_ticks - start->stime_ticks) * tick_ms;
    out->run_ms = (double)(end->run_ns - start->run_ns) / 1e6;
    out->wait_poll_ms = (double)(end->wait_poll_ns - start->wait_poll_ns) / 1e6;
    out->voluntary_switches = end->vol_switches - start->vol_switches;
    out->involuntary_switches = end->invol_switches - start->invol_switches;
    out->minor_faults = end->minflt - start->minflt;
    out->major_faults = end->majflt - start->majflt;
    out->valid = 1;
}
