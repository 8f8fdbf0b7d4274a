#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

static int g_rank = 0, g_world = 1, g_quiet = 0;

void tdm_log_set_rank(int rank, int world) {
    g_rank = rank;
    g_world = world;
}
int tdm_log_rank(void) { return g_rank; }
int tdm_log_world(void) { return g_world; }
void tdm_log_set_quiet(int quiet) { g_quiet = quiet; }
int tdm_log_quiet(void) { return g_quiet; }

void tdm_log_info(const char *fmt, ...) {
    if (g_rank != 0 || g_quiet) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}

void tdm_log_all(const char *fmt, ...) {
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stdout, "[rank %d] %s\n", g_rank, line);
    fflush(stdout);
}

static void log_stderr(const char *level, const char *fmt, va_list ap) {
    char line[4096];
    vsnprintf(line, sizeof line, fmt, ap);
    if (g_world > 1) fprintf(stderr, "[rank %d] %s: %s\n", g_rank, level, line);
    else fprintf(stderr, "%s: %s\n", level, line);
    fflush(stderr);
}

void tdm_log_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    log_stderr("warning", fmt, ap);
    va_end(ap);
}

void tdm_log_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    log_stderr("error", fmt, ap);
    va_end(ap);
}
