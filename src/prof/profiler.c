/* profiler.c - tool-config parsing, sessions, step hooks, and writing the outputs. */
#include "prof/profiler.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "prof/prof_internal.h"
#include "prof/trace.h"

#define PROF_MAX_CAPACITY (64ll << 20) /* events per thread: 64M x 48 B = 3 GiB, the most we allow */

void tdm_prof_config_default(tdm_prof_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->all_ranks = 1;
    cfg->start_step = 1;
    cfg->end_step = 1;
    cfg->level = 0;
    snprintf(cfg->save_path, sizeof cfg->save_path, "./profiling");
    cfg->capacity = 1 << 20;
    cfg->shared_memory = -1;
    cfg->comm_thread_nice = -1;
}

/* Keys a profile section may hold. tandem's own layout puts the schedule in the section
 * itself; MindSpeed-MM's tools.json puts it in "static_param" (with its torch_npu options,
 * which have no meaning here and are accepted and ignored). */
static const char *const section_keys[] = {"enable",    "ranks",    "start_step",   "end_step",     "level",
                                           "save_path", "capacity", "profile_type", "static_param", "dynamic_param"};
static const char *const static_keys[] = {"level",    "start_step",          "end_step",        "save_path",
                                          "capacity", "with_stack",          "with_memory",     "record_shapes",
                                          "with_cpu", "data_simplification", "aic_metrics_type"};
static const char *const schedule_keys[] = {"start_step", "end_step", "level", "save_path", "capacity"};

/* Refuses a key of obj that is not in keys[n] (a misspelt key would otherwise be a default). */
static int check_keys(const tdm_json *obj, const char *const *keys, size_t n, const char *name, const char *where,
                      tdm_error *err) {
    for (size_t i = 0; i < obj->len; i++) {
        size_t k = 0;
        while (k < n && strcmp(obj->keys[i], keys[k]) != 0) k++;
        if (k < n) continue;
        char list[512] = "";
        for (k = 0; k < n; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "", keys[k]);
        return tdm_errorf(err, "%s: %s%s: unknown key (expected one of: %s)", name, where, obj->keys[i], list);
    }
    return 0;
}

/* Longer than most: one validation per key of both accepted layouts (tandem's section and
 * MindSpeed-MM's static_param), each with its own message, sharing one cleanup. */
int tdm_prof_config_parse(const char *text, size_t len, const char *name, tdm_prof_config *cfg, tdm_error *err) {
    tdm_prof_config_default(cfg);
    tdm_json_doc *doc = tdm_json_parse(text, len, name, err);
    if (!doc) return -1;
    const tdm_json *root = tdm_json_root(doc);
    const tdm_json *p = tdm_json_get(root, "profile");
    const char *pre = "profile.";
    if (!p) { /* the section's object at top level */
        p = root;
        pre = "";
    }
    if (p->type != TDM_JSON_OBJECT) {
        tdm_json_free(doc);
        return tdm_errorf(err, "%s: %s: expected an object", name, *pre ? "profile" : "top level");
    }
    if (check_keys(p, section_keys, sizeof section_keys / sizeof *section_keys, name, pre, err) != 0) goto fail;
    const tdm_json *v;
    if ((v = tdm_json_get(p, "profile_type")) && (v->type != TDM_JSON_STRING || strcmp(v->str, "static") != 0)) {
        tdm_errorf(err, "%s: %sprofile_type: expected \"static\" (the step range below; %s)", name, pre,
                   v->type == TDM_JSON_STRING && !strcmp(v->str, "dynamic")
                       ? "torch_npu's dynamic profiling has no counterpart here"
                       : "the only kind tandem records");
        goto fail;
    }
    /* Where the schedule is: MindSpeed-MM's static_param, or the section itself. */
    const tdm_json *s = p;
    char spre[64];
    snprintf(spre, sizeof spre, "%s", pre);
    const tdm_json *sp = tdm_json_get(p, "static_param");
    int mindspeed = sp != NULL;
    if (mindspeed) {
        if (sp->type != TDM_JSON_OBJECT) {
            tdm_errorf(err, "%s: %sstatic_param: expected an object", name, pre);
            goto fail;
        }
        for (size_t k = 0; k < sizeof schedule_keys / sizeof *schedule_keys; k++)
            if (tdm_json_get(p, schedule_keys[k])) {
                tdm_errorf(err, "%s: %s%s: give the schedule either in %sstatic_param or beside it, not in both", name,
                           pre, schedule_keys[k], pre);
                goto fail;
            }
        snprintf(spre, sizeof spre, "%sstatic_param.", pre);
        if (check_keys(sp, static_keys, sizeof static_keys / sizeof *static_keys, name, spre, err) != 0) goto fail;
        s = sp;
    }
    if ((v = tdm_json_get(p, "enable"))) {
        if (v->type != TDM_JSON_TRUE && v->type != TDM_JSON_FALSE) goto bad_enable;
        cfg->enable = v->type == TDM_JSON_TRUE;
    }
    if ((v = tdm_json_get(p, "ranks"))) {
        if (v->type != TDM_JSON_ARRAY || v->len == 0 || v->len > TDM_PROF_MAX_RANKS_LISTED) goto bad_ranks;
        cfg->all_ranks = 0;
        for (size_t i = 0; i < v->len; i++) {
            const tdm_json *r = v->items[i];
            if (r->type != TDM_JSON_NUMBER || !r->is_int || r->i64 < -1 || r->i64 > 1000000) goto bad_ranks;
            if (r->i64 == -1) cfg->all_ranks = 1;
            else cfg->ranks[cfg->n_ranks++] = (int)r->i64;
        }
    }
    /* tandem's steps are 1-based iterations, both ends recorded. MindSpeed-MM hands them to
     * torch's schedule as skip_first = start_step, active = end_step - start_step: the
     * iterations after start_step up to end_step. */
    const int64_t first_lo = mindspeed ? 0 : 1;
    struct {
        const char *key;
        int64_t *dst;
        int64_t lo, hi;
    } ints[] = {{"start_step", &cfg->start_step, first_lo, INT64_MAX / 2},
                {"end_step", &cfg->end_step, 1, INT64_MAX / 2},
                {"capacity", &cfg->capacity, 16, PROF_MAX_CAPACITY}};
    if (mindspeed) { /* MindSpeed-MM's code has no defaults for these */
        cfg->start_step = 0;
        cfg->end_step = 1;
    }
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        if (!(v = tdm_json_get(s, ints[i].key))) continue;
        if (v->type != TDM_JSON_NUMBER || !v->is_int || v->i64 < ints[i].lo || v->i64 > ints[i].hi) {
            tdm_errorf(err, "%s: %s%s: expected an integer in [%lld, %lld]", name, spre, ints[i].key,
                       (long long)ints[i].lo, (long long)ints[i].hi);
            goto fail;
        }
        *ints[i].dst = v->i64;
    }
    if (mindspeed) {
        if (cfg->end_step <= cfg->start_step) {
            tdm_errorf(err,
                       "%s: %send_step: %lld must be after start_step %lld (MindSpeed-MM records the "
                       "iterations after start_step up to end_step)",
                       name, spre, (long long)cfg->end_step, (long long)cfg->start_step);
            goto fail;
        }
        cfg->start_step += 1;
    } else if (cfg->end_step < cfg->start_step) {
        tdm_errorf(err, "%s: %send_step: %lld is before start_step %lld", name, spre, (long long)cfg->end_step,
                   (long long)cfg->start_step);
        goto fail;
    }
    if ((v = tdm_json_get(s, "level"))) {
        int ok = v->type == TDM_JSON_NUMBER && v->is_int && v->i64 >= 0 && v->i64 <= 2;
        if (ok) cfg->level = (int)v->i64;
        if (v->type == TDM_JSON_STRING && !strncmp(v->str, "level", 5) && v->str[5] >= '0' && v->str[5] <= '2' &&
            v->str[6] == '\0') {
            ok = 1;
            cfg->level = v->str[5] - '0';
        }
        if (!ok) {
            tdm_errorf(err, "%s: %slevel: expected 0, 1 or 2 (or \"level0\", \"level1\", \"level2\")", name, spre);
            goto fail;
        }
    }
    if ((v = tdm_json_get(s, "save_path"))) {
        if (v->type != TDM_JSON_STRING || v->len == 0 || v->len >= sizeof cfg->save_path || strlen(v->str) != v->len) {
            tdm_errorf(err, "%s: %ssave_path: expected a non-empty path string", name, spre);
            goto fail;
        }
        memcpy(cfg->save_path, v->str, v->len + 1);
    }
    tdm_json_free(doc);
    return 0;
bad_enable:
    tdm_errorf(err, "%s: %senable: expected true or false", name, pre);
    goto fail;
bad_ranks:
    tdm_errorf(err, "%s: %sranks: expected a non-empty list of rank numbers ([-1] = all ranks)", name, pre);
fail:
    tdm_json_free(doc);
    return -1;
}

int tdm_prof_config_load(const char *path, tdm_prof_config *cfg, tdm_error *err) {
    size_t len;
    char *text = tdm_read_file(path, 1 << 20, &len, err);
    if (!text) return -1;
    int rc = tdm_prof_config_parse(text, len, path, cfg, err);
    free(text);
    return rc;
}

/* ---- session ---- */

static struct {
    int active;   /* inside a session */
    int selected; /* this rank records */
    int recording;
    tdm_prof_config cfg;
    uint64_t origin_ns;
    uint64_t step_t0;
    int64_t open_step; /* -1 when no envelope is open */
    int rank, world;
} S;

int tdm_prof_session_start(const tdm_prof_config *cfg, MPI_Comm comm, tdm_error *err) {
    if (cfg->level < 0 || cfg->level > 2 || cfg->end_step < cfg->start_step || cfg->capacity < 16 ||
        cfg->capacity > PROF_MAX_CAPACITY)
        return tdm_errorf(err, "profiler config: level, step range or capacity out of range");
    memset(&S, 0, sizeof S);
    S.cfg = *cfg;
    MPI_Comm_rank(comm, &S.rank);
    MPI_Comm_size(comm, &S.world);
    S.selected = cfg->enable && cfg->all_ranks;
    for (int i = 0; cfg->enable && i < cfg->n_ranks; i++)
        if (cfg->ranks[i] == S.rank) S.selected = 1;
    if (!prof_thread_is_named()) tdm_prof_thread_name("compute");
    tdm_error local = {{0}};
    int bad = S.selected && tdm_mkdirs(cfg->save_path, &local) != 0, any_bad = 0;
    /* The reduction doubles as the barrier that defines time zero: every rank leaves
     * it within its skew, so the local reading right after it is a common origin
     * (exact on one host, where CLOCK_MONOTONIC is shared). */
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, comm);
    S.origin_ns = tdm_now_ns();
    S.open_step = -1;
    if (any_bad) {
        if (bad) return tdm_errorf(err, "profiler save_path: %s", local.msg);
        return tdm_errorf(err, "profiler save_path: another rank could not create it");
    }
    S.active = 1;
    return 0;
}

void tdm_prof_step_begin(int64_t step) {
    if (!S.active || !S.selected) return;
    if (!S.recording && step >= S.cfg.start_step && step <= S.cfg.end_step) {
        tdm_prof_record_start(S.cfg.level, S.cfg.capacity);
        S.recording = 1;
    }
    if (S.recording) {
        S.open_step = step;
        S.step_t0 = tdm_now_ns();
    }
}

void tdm_prof_step_end(int64_t step) {
    if (!S.active || !S.selected || !S.recording) return;
    if (S.open_step == step) tdm_prof_complete(TDM_PROF_PHASE, 0, "step", S.step_t0, tdm_now_ns(), step);
    S.open_step = -1;
    if (step >= S.cfg.end_step) {
        tdm_prof_record_stop();
        S.recording = 0;
    }
}

/* Gathers every rank's text to rank 0 (lengths first, then bytes). */
static char *gather_text(const tdm_strbuf *mine, MPI_Comm comm, int rank, int world, size_t *total) {
    long long len = (long long)mine->len;
    long long *lens = rank == 0 ? tdm_xcalloc((size_t)world, sizeof *lens) : NULL;
    MPI_Gather(&len, 1, MPI_LONG_LONG, lens, 1, MPI_LONG_LONG, 0, comm);
    int *counts = NULL, *displs = NULL;
    char *all = NULL;
    if (rank == 0) {
        counts = tdm_xcalloc((size_t)world, sizeof *counts);
        displs = tdm_xcalloc((size_t)world, sizeof *displs);
        long long off = 0;
        for (int r = 0; r < world; r++) {
            counts[r] = (int)lens[r]; /* each rank's trace is bounded by its buffer capacity */
            displs[r] = (int)off;
            off += lens[r];
        }
        all = tdm_xmalloc((size_t)off + 1);
        all[off] = 0;
        *total = (size_t)off;
    }
    MPI_Gatherv(mine->data ? mine->data : "", (int)mine->len, MPI_CHAR, all, counts, displs, MPI_CHAR, 0, comm);
    free(lens);
    free(counts);
    free(displs);
    return all;
}

static int write_text(const char *dir, const char *file, const char *data, size_t len, tdm_error *err) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return tdm_write_file_atomic(path, data, len, err);
}

/* This rank's part: collects its events, writes save_path/trace_rank<r>.json, and leaves
 * in *items its trace events and in *cpu its thread table rows (JSON, each ending in the
 * ",\n" that separates it from the next rank's in the merge). */
static int write_rank_outputs(tdm_strbuf *items, tdm_strbuf *cpu, tdm_error *err) {
    int rc = 0;
    tdm_prof_collection c;
    tdm_prof_collect(&c);
    c.origin_ns = S.origin_ns;
    int64_t n;
    tdm_prof_rec *recs = tdm_prof_recs_from_collection(&c, S.rank, &n);
    int first = 1;
    tdm_prof_trace_append_rank(items, S.rank, c.threads, c.n_threads, recs, n, &first);
    tdm_strbuf one;
    tdm_sb_init(&one);
    tdm_prof_trace_open(&one);
    tdm_sb_append(&one, items->data, items->len);
    tdm_prof_trace_close(&one);
    char file[64];
    snprintf(file, sizeof file, "trace_rank%d.json", S.rank);
    if (tdm_mkdirs(S.cfg.save_path, err) != 0 || write_text(S.cfg.save_path, file, one.data, one.len, err) != 0)
        rc = -1;
    tdm_sb_free(&one);
    tdm_sb_puts(items, ",\n");
    for (int i = 0; i < c.n_threads; i++) {
        const tdm_prof_thread *t = &c.threads[i];
        if (!t->present) continue;
        tdm_sb_printf(cpu, "%s{\"rank\":%d,\"tid\":%d,\"os_tid\":%lld,\"name\":", cpu->len ? ",\n" : "", S.rank, t->tid,
                      (long long)t->os_tid);
        tdm_sb_json_string(cpu, t->name, strlen(t->name));
        if (t->cpu.valid)
            tdm_sb_printf(cpu,
                          ",\"user_ms\":%.1f,\"system_ms\":%.1f,\"run_ms\":%.3f,\"voluntary_switches\":%lld,"
                          "\"involuntary_switches\":%lld,\"minor_faults\":%lld,\"major_faults\":%lld,"
                          "\"wait_poll_ms\":%.3f",
                          t->cpu.user_ms, t->cpu.system_ms, t->cpu.run_ms, (long long)t->cpu.voluntary_switches,
                          (long long)t->cpu.involuntary_switches, (long long)t->cpu.minor_faults,
                          (long long)t->cpu.major_faults, t->cpu.wait_poll_ms);
        tdm_sb_printf(cpu, ",\"dropped_events\":%lld}", (long long)t->dropped);
        if (t->dropped) /* what the loss does to the analysis, and what to change */
            fprintf(stderr,
                    "profiler: rank %d, thread %s: %lld events dropped (capacity %lld per thread): %s; raise "
                    "profile.capacity or shorten the step range\n",
                    S.rank, t->name, (long long)t->dropped, (long long)S.cfg.capacity,
                    /* the compute thread records the step envelopes: a step without one is not analysed */
                    strcmp(t->name, "compute") == 0
                        ? "the analysis leaves out the steps whose events were lost"
                        : "the steps they belong to are analysed without them (their communication or data waits "
                          "are missing)");
    }
    if (cpu->len) tdm_sb_puts(cpu, ",\n");
    free(recs);
    tdm_prof_collection_free(&c);
    return rc;
}

/* Rank 0's part: from every rank's gathered items and thread rows, writes trace.json,
 * analysis.json (the summary's object plus the thread table) and summary.txt. */
static int write_merged_outputs(const char *all, size_t n_all, const char *cpu_all, size_t n_cpu, tdm_error *err) {
    /* drop the trailing ",\n" separators left by the last contributing rank */
    while (n_all > 0 && (all[n_all - 1] == '\n' || all[n_all - 1] == ',')) n_all--;
    while (n_cpu > 0 && (cpu_all[n_cpu - 1] == '\n' || cpu_all[n_cpu - 1] == ',')) n_cpu--;
    int rc = 0;
    tdm_strbuf merged, text, json;
    tdm_sb_init(&merged);
    tdm_sb_init(&text);
    tdm_sb_init(&json);
    tdm_prof_trace_open(&merged);
    tdm_sb_append(&merged, all, n_all);
    tdm_prof_trace_close(&merged);
    tdm_prof_trace t;
    /* rank 0 may not record itself (ranks: [1]), and then never created save_path on its host */
    if (tdm_mkdirs(S.cfg.save_path, err) != 0 ||
        write_text(S.cfg.save_path, "trace.json", merged.data, merged.len, err) != 0)
        rc = -1;
    if (rc == 0 && tdm_prof_trace_parse(merged.data, merged.len, "trace.json", &t, err) != 0) rc = -1;
    if (rc == 0) {
        tdm_prof_trace_summarize(&t, &text, &json);
        tdm_prof_trace_free(&t);
        json.len--; /* drop the closing brace */
        if (S.cfg.transport[0]) {
            tdm_sb_puts(&json, ",\n\"transport\": ");
            tdm_sb_json_string(&json, S.cfg.transport, strlen(S.cfg.transport));
        }
        if (S.cfg.shared_memory >= 0)
            tdm_sb_printf(&json, ",\n\"shared_memory\": %s", S.cfg.shared_memory ? "true" : "false");
        if (S.cfg.comm_progress[0]) {
            tdm_sb_puts(&json, ",\n\"comm_progress\": ");
            tdm_sb_json_string(&json, S.cfg.comm_progress, strlen(S.cfg.comm_progress));
        }
        if (!strcmp(S.cfg.comm_progress, "thread") && S.cfg.comm_thread_nice >= 0)
            tdm_sb_printf(&json, ",\n\"comm_thread_nice\": %d", S.cfg.comm_thread_nice);
        tdm_sb_puts(&json, ",\n\"threads\":[");
        tdm_sb_append(&json, cpu_all, n_cpu);
        tdm_sb_puts(&json, "]}\n");
        /* summary.txt is what trace-summary prints: the thread table too */
        tdm_json_doc *d = tdm_json_parse(json.data, json.len, "analysis.json", NULL);
        if (d) tdm_prof_format_threads(&text, tdm_json_get(tdm_json_root(d), "threads"));
        tdm_json_free(d);
        if (write_text(S.cfg.save_path, "analysis.json", json.data, json.len, err) != 0 ||
            write_text(S.cfg.save_path, "summary.txt", text.data, text.len, err) != 0)
            rc = -1;
    }
    tdm_sb_free(&merged);
    tdm_sb_free(&text);
    tdm_sb_free(&json);
    return rc;
}

int tdm_prof_session_finish(MPI_Comm comm, tdm_error *err) {
    if (!S.active) return 0;
    if (S.recording) {
        tdm_prof_record_stop();
        S.recording = 0;
    }
    S.active = 0;
    int any = 0;
    MPI_Allreduce(&S.selected, &any, 1, MPI_INT, MPI_MAX, comm);
    if (!any) return 0;

    int rc = 0;
    tdm_strbuf items, cpu;
    tdm_sb_init(&items);
    tdm_sb_init(&cpu);
    if (S.selected) rc = write_rank_outputs(&items, &cpu, err);
    /* MPI counts are ints: a merged trace past 2 GiB is refused (the per-rank files are
     * already written); lower the capacity or the step range. */
    long long mine = (long long)(items.len + cpu.len), total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, comm);
    if (total >= INT_MAX) {
        tdm_sb_free(&items);
        tdm_sb_free(&cpu);
        return tdm_errorf(err,
                          "%s: the merged trace would be %lld bytes, more than 2 GiB; profile fewer steps or a "
                          "lower level (per-rank traces were written)",
                          S.cfg.save_path, total);
    }
    size_t n_all = 0, n_cpu = 0;
    char *all = gather_text(&items, comm, S.rank, S.world, &n_all);
    char *cpu_all = gather_text(&cpu, comm, S.rank, S.world, &n_cpu);
    if (S.rank == 0 && rc == 0) rc = write_merged_outputs(all, n_all, cpu_all, n_cpu, err);
    free(all);
    free(cpu_all);
    tdm_sb_free(&items);
    tdm_sb_free(&cpu);
    /* every rank learns whether the outputs were written */
    int bad = rc != 0, any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, comm);
    if (any_bad && rc == 0) rc = tdm_errorf(err, "profiler: another rank failed to write its outputs");
    return rc;
}
