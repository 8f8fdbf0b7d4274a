/* platform.c - see platform.h. */
#include "core/platform.h"

#include <stdio.h>
#include <string.h>

/* TDM_BUILD_TARGET comes from the Makefile (what -march named); a build without it says so. */
#ifndef TDM_BUILD_TARGET
#define TDM_BUILD_TARGET "unknown (built outside the Makefile)"
#endif

/* The value after "key\t: " of the first line that starts with key, trimmed. */
static int cpuinfo_value(const char *key, char *out, size_t cap) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[512];
    size_t kl = strlen(key);
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, key, kl) || !colon || strspn(line + kl, " \t") != (size_t)(colon - line - (long)kl)) continue;
        char *v = colon + 1 + strspn(colon + 1, " \t");
        v[strcspn(v, "\n")] = 0;
        snprintf(out, cap, "%s", v);
        found = 1;
    }
    fclose(f);
    return found;
}

static void describe_isa(char *out, size_t cap) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        /* the extensions the fleet's AVX-512 processors differ by (__builtin_cpu_supports takes literals) */
        snprintf(out, cap, "avx512%s%s%s", __builtin_cpu_supports("avx512bf16") ? " bf16" : "",
                 __builtin_cpu_supports("avx512vnni") ? " vnni" : "",
                 __builtin_cpu_supports("avx512vbmi") ? " vbmi" : "");
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        snprintf(out, cap, "avx2 fma");
    } else if (__builtin_cpu_supports("avx")) {
        snprintf(out, cap, "avx");
    } else if (__builtin_cpu_supports("sse4.2")) {
        snprintf(out, cap, "sse4.2");
    } else {
        snprintf(out, cap, "sse2");
    }
}

void tdm_platform_read(tdm_platform *p) {
    char name[96] = "unknown processor", family[16] = "", model[16] = "";
    cpuinfo_value("model name", name, sizeof name);
    if (cpuinfo_value("cpu family", family, sizeof family) && cpuinfo_value("model", model, sizeof model))
        snprintf(p->cpu, sizeof p->cpu, "%s (family %s model %s)", name, family, model);
    else snprintf(p->cpu, sizeof p->cpu, "%s", name);
    describe_isa(p->isa, sizeof p->isa);
    snprintf(p->build_target, sizeof p->build_target, "%s", TDM_BUILD_TARGET);
}
