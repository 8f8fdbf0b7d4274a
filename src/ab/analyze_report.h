/* analyze_report.h - `tandem analyze`'s outputs for runs read by src/runs: the terminal
 * table, report.md, analysis.json and the SVG plots (one step's timeline per rank, hidden and
 * exposed communication per step). docs/analyze.md shows and explains them.
 *
 *   tdm_analyze_run runs[2] = {{"prof/", &set_a, &analysis_a}, ...};
 *   tdm_strbuf table;
 *   tdm_analyze_table(&table, runs, 2);                   // what the terminal shows
 *   if (tdm_analyze_write(runs, 2, "analysis-out", &err) != 0) ...;
 */
#ifndef TDM_AB_ANALYZE_REPORT_H
#define TDM_AB_ANALYZE_REPORT_H

#include "core/error.h"
#include "core/strbuf.h"
#include "runs/analyze.h"
#include "runs/trace.h"

typedef struct tdm_analyze_run {
    const char *name; /* as given on the command line */
    const tdm_runs_set *set;
    const tdm_runs_analysis *analysis;
} tdm_analyze_run;

/* The summary table, per run: a row per rank (mean over its steps), HTA's whole-trace figures,
 * the slowest rank and the spread, collectives by kind, diagnostics and the readers' notes. */
void tdm_analyze_table(tdm_strbuf *sb, const tdm_analyze_run *runs, int n);
/* analysis.json: everything the table and the report hold, per step too. */
void tdm_analyze_json(tdm_strbuf *sb, const tdm_analyze_run *runs, int n);
/* report.md (the table's content and every step of every rank). */
void tdm_analyze_markdown(tdm_strbuf *sb, const tdm_analyze_run *runs, int n);
/* Writes report.md, analysis.json, timeline_run<i>.svg and steps_run<i>.svg into dir
 * (created when missing). */
int tdm_analyze_write(const tdm_analyze_run *runs, int n, const char *dir, tdm_error *err);

#endif
