/* trace_read.c - a path to traces: one file of any format, or a directory walked for them. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "runs/trace.h"

static int ends(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static const char *base_of(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* File kinds by name, for directories (a file named on the command line is read whatever its name). */
enum { K_SKIP, K_JSON, K_STEP_CSV, K_COMM_JSON };

static int kind_in_dir(const char *name) {
    if (!strcmp(name, "step_trace_time.csv") || !strcmp(name, "cluster_step_trace_time.csv")) return K_STEP_CSV;
    if (!strcmp(name, "communication.json") || !strcmp(name, "cluster_communication.json")) return K_COMM_JSON;
    if (!ends(name, ".json") && !ends(name, ".json.gz")) return K_SKIP;
    /* tandem's and tandem analyze's own outputs, Ascend's non-trace JSON */
    static const char *const skip[] = {"analysis.json",     "summary.json",         "profiler_info",
                                       "profiler_metadata", "communication_matrix", "cluster_communication_matrix",
                                       "config.json",       "tokenizer.json"};
    for (size_t i = 0; i < sizeof skip / sizeof *skip; i++)
        if (!strncmp(name, skip[i], strlen(skip[i]))) return K_SKIP;
    return K_JSON;
}

static int read_file(tdm_runs_set *s, const char *path, int kind, tdm_error *err) {
    if (kind == K_STEP_CSV) return tdm_runs_read_ascend_csv(s, path, err);
    if (kind == K_COMM_JSON) return tdm_runs_read_ascend_comm(s, path, err);
    return tdm_runs_read_json(s, path, err);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int read_dir(tdm_runs_set *s, const char *dir, int depth, int *found, tdm_error *err) {
    DIR *d = opendir(dir);
    if (!d) return tdm_errorf(err, "%s: cannot read the directory", dir);
    char **names = NULL;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        names = tdm_xrealloc(names, (size_t)(n + 1) * sizeof *names);
        names[n++] = tdm_xstrdup(de->d_name);
    }
    closedir(d);
    if (n > 1) qsort(names, (size_t)n, sizeof *names, cmp_str);
    /* tandem writes trace.json (every rank) beside trace_rank<r>.json (one each): read one of them;
     * an Ascend rank folder's trace_view.json supersedes its step_trace_time.csv */
    int has_merged = 0, has_view = 0;
    for (int i = 0; i < n; i++) {
        has_merged |= !strcmp(names[i], "trace.json");
        has_view |= !strcmp(names[i], "trace_view.json");
    }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            if (depth < 4) rc = read_dir(s, path, depth + 1, found, err);
            continue;
        }
        int k = kind_in_dir(names[i]);
        if (k == K_SKIP) continue;
        if (has_merged && !strncmp(names[i], "trace_rank", 10)) continue;
        if (has_view && !strcmp(names[i], "step_trace_time.csv")) continue;
        rc = read_file(s, path, k, err);
        if (rc == TDM_RUNS_NOT_A_TRACE) { /* some other JSON beside the traces */
            rc = 0;
            continue;
        }
        (*found)++;
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

int tdm_runs_read(tdm_runs_set *s, const char *path, tdm_error *err) {
    struct stat st;
    if (stat(path, &st) != 0)
        return tdm_errorf(err, "%s: no such file or directory; expected a trace file or a folder of traces", path);
    if (S_ISDIR(st.st_mode)) {
        int found = 0;
        if (read_dir(s, path, 0, &found, err) != 0) return -1;
        if (!found)
            return tdm_errorf(err,
                              "%s: no trace found in the folder; expected PyTorch profiler traces (*.json, "
                              "*.json.gz), Ascend profiler output or tandem's trace.json",
                              path);
        return 0;
    }
    const char *b = base_of(path);
    int k = ends(b, ".csv")                                                                  ? K_STEP_CSV
            : (!strcmp(b, "communication.json") || !strcmp(b, "cluster_communication.json")) ? K_COMM_JSON
                                                                                             : K_JSON;
    int rc = read_file(s, path, k, err);
    return rc == 0 ? 0 : -1;
}
