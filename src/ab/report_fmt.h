/* report_fmt.h - the pieces both A/B reports (report.c for tandem's own runs, ab_runs_report.c for
 * finished runs) write with: a figure or "n/a", a baseline/candidate table row, a JSON number or null,
 * and a report file written atomically. */
#ifndef TDM_AB_REPORT_FMT_H
#define TDM_AB_REPORT_FMT_H

#include <math.h>
#include <stdio.h>

#include "core/error.h"
#include "core/fs.h"
#include "core/strbuf.h"

/* v with 3 decimals, or "n/a" when it is not a number. */
static inline void tdm_ab_fmt3(char *b, size_t cap, double v) {
    if (isfinite(v)) snprintf(b, cap, "%.3f", v);
    else snprintf(b, cap, "n/a");
}

/* One row of the table: name, baseline, candidate, the change in words. */
static inline void tdm_ab_row3(tdm_strbuf *sb, const char *name, double a, double b, const char *change) {
    char x[32], y[32];
    tdm_ab_fmt3(x, sizeof x, a);
    tdm_ab_fmt3(y, sizeof y, b);
    tdm_sb_printf(sb, "  %-40s %12s %12s   %s\n", name, x, y, change ? change : "");
}

/* "key": v, or "key": null when v is not a number. */
static inline void tdm_ab_json_num(tdm_strbuf *sb, const char *key, double v) {
    if (isfinite(v)) tdm_sb_printf(sb, "\"%s\": %.10g", key, v);
    else tdm_sb_printf(sb, "\"%s\": null", key);
}

/* dir/file holds sb's text, written atomically. */
static inline int tdm_ab_write_sb(const char *dir, const char *file, const tdm_strbuf *sb, tdm_error *err) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return tdm_write_file_atomic(path, sb->data ? sb->data : "", sb->len, err);
}

#endif
