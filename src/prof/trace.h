/* trace.h - Chrome trace JSON: writing a rank's events, merging ranks, reading back.
 *
 * The format (chrome://tracing, Perfetto's JSON importer):
 *   {"displayTimeUnit": "ms", "traceEvents": [
 *     {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "rank 0"}},
 *     {"ph": "M", "name": "thread_name",  "pid": 0, "tid": 1, "args": {"name": "comm"}},
 *     {"ph": "X", "name": "backward", "cat": "phase", "ts": 1234.567, "dur": 89.012,
 *      "pid": 0, "tid": 0, "args": {"arg": -1, "level": 0}},
 *     {"ph": "i", "s": "t", "name": "bucket posted", "cat": "mark", "ts": ..., ...}, ...]}
 * pid = rank, tid = the thread's index on that rank; ts and dur in µs from the session's
 * time zero (the clock origin agreed at session start), so ranks line up.
 */
#ifndef TDM_PROF_TRACE_H
#define TDM_PROF_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "prof/analysis.h"
#include "prof/profiler.h"

/* Converts a collection (one rank) into records in µs from origin_ns. free() the result. */
tdm_prof_rec *tdm_prof_recs_from_collection(const tdm_prof_collection *c, int32_t rank, int64_t *n);

/* Appends one rank's metadata and events as JSON array items, each preceded by ",\n"
 * except the very first item of the array when *first is set (then cleared). The events of a
 * thread must nest in the format; one that overlaps another without nesting (collectives in
 * flight together) goes to an extra track of its thread, tid + k * TDM_PROF_TRACE_LANE_TID,
 * named after it with " (k+1)" ("comm (2)"), so that it is classified like its thread. */
#define TDM_PROF_TRACE_LANE_TID 65536
void tdm_prof_trace_append_rank(tdm_strbuf *sb, int32_t rank, const tdm_prof_thread *threads, int n_threads,
                                const tdm_prof_rec *recs, int64_t n, int *first);

/* Wraps array items into a complete trace document. */
void tdm_prof_trace_open(tdm_strbuf *sb);
void tdm_prof_trace_close(tdm_strbuf *sb);

/* A trace read back from JSON; record names point into doc. */
typedef struct tdm_prof_trace {
    tdm_json_doc *doc;
    tdm_prof_rec *recs; /* sorted by (rank, t0) */
    int64_t n;
    int n_ranks; /* how many ranks (pids) the trace holds */
    int *ranks;  /* [n_ranks] those pids, ascending */
} tdm_prof_trace;

/* Parses a Chrome trace produced by tandem (or any trace using "X" and "i" events;
 * other phases are skipped). Errors name the file and event index. At most
 * `max_bytes` are read. */
int tdm_prof_trace_load(const char *path, size_t max_bytes, tdm_prof_trace *t, tdm_error *err);
int tdm_prof_trace_parse(const char *text, size_t len, const char *name, tdm_prof_trace *t, tdm_error *err);
void tdm_prof_trace_free(tdm_prof_trace *t);

/* The operator summary and the per-step analysis of every rank as text (what
 * `tandem trace-summary` prints), and as JSON ({"steps": [...], "mean": {...}}). */
void tdm_prof_trace_summarize(const tdm_prof_trace *t, tdm_strbuf *text, tdm_strbuf *json);

/* The per-thread CPU table (analysis.json's "threads" array) as text; nothing when the
 * array is missing or empty. summary.txt and `trace-summary` end with it. */
struct tdm_json;
void tdm_prof_format_threads(tdm_strbuf *sb, const struct tdm_json *threads);
/* The same, only the rows of ranks[0..n_ranks) (ranks NULL: all); nothing when none is listed. */
void tdm_prof_format_threads_of(tdm_strbuf *sb, const struct tdm_json *threads, const int *ranks, int n_ranks);

#endif
