/* analyze_report.c - the table, report.md, analysis.json and plots of `tandem analyze`. */
#include "ab/analyze_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ab/svg.h"
#include "core/alloc.h"
#include "core/fs.h"
#include "prof/analysis.h"

static const char *const hta_setting[4] = {
    "HTA default (last profiled step dropped, float timestamps rounded)",
    "last step kept (timestamps rounded)",
    "last step dropped, timestamps not rounded",
    "last step kept, timestamps not rounded",
};
static const char *const hta_key[4] = {"default", "last_step_kept", "default_no_rounding",
                                       "last_step_kept_no_rounding"};
static const char *const diag_key[TDM_RUNS_DIAG_COUNT] = {"nothing_hidden", "grads_after_backward", "allgather_order",
                                                          "rank_late", "slow_rank"};

static const char *format_name(tdm_runs_format f) {
    switch (f) {
    case TDM_RUNS_FMT_KINETO: return "PyTorch profiler (Kineto)";
    case TDM_RUNS_FMT_LEGACY: return "PyTorch legacy profiler";
    case TDM_RUNS_FMT_ASCEND_TIMELINE: return "Ascend trace_view.json";
    case TDM_RUNS_FMT_ASCEND_STEPS: return "Ascend step_trace_time";
    case TDM_RUNS_FMT_TANDEM: return "tandem";
    }
    return "?";
}

/* ms with 3 decimals, "-" for NaN */
static const char *ms(char *b, double us) {
    if (!isfinite(us)) return "-";
    snprintf(b, 32, "%.3f", us / 1e3);
    return b;
}

static const char *pct(char *b, double v) {
    if (!isfinite(v)) return "-";
    snprintf(b, 32, "%.2f", v);
    return b;
}

static const char *bytes_h(char *b, double v) {
    if (!isfinite(v) || v < 0) return "-";
    if (v >= 1e9) snprintf(b, 32, "%.2f GB", v / 1e9);
    else if (v >= 1e6) snprintf(b, 32, "%.2f MB", v / 1e6);
    else if (v >= 1e3) snprintf(b, 32, "%.1f kB", v / 1e3);
    else snprintf(b, 32, "%.0f B", v);
    return b;
}

static const char *last_name(const tdm_runs_trace *t, const tdm_runs_step_stats *s, char *b, size_t cap) {
    if (s->last_coll < 0) return "-";
    const tdm_runs_coll *c = &t->colls[s->last_coll];
    char sz[32];
    snprintf(b, cap, "%s %s", tdm_runs_coll_kind_name(c->kind), c->bytes >= 0 ? bytes_h(sz, (double)c->bytes) : "");
    size_t n = strlen(b);
    while (n && b[n - 1] == ' ') b[--n] = '\0';
    return b;
}

static int any_hta(const tdm_runs_analysis *a) {
    for (int i = 0; i < a->n_ranks; i++)
        if (a->ranks[i].hta[0].applicable) return 1;
    return 0;
}

static int has_steps(const tdm_runs_rank_stats *r) { return r->n_steps > 0; }

/* ---- terminal table -------------------------------------------------------------------- */

/* Longer than most: the table's rows in the order they print, one after the other. */
void tdm_analyze_table(tdm_strbuf *sb, const tdm_analyze_run *runs, int n) {
    char b[12][32];
    for (int ri = 0; ri < n; ri++) {
        const tdm_runs_analysis *a = runs[ri].analysis;
        const tdm_runs_set *s = runs[ri].set;
        tdm_sb_printf(sb, "%s%s: %d rank%s", ri ? "\n" : "", runs[ri].name, a->n_ranks, a->n_ranks == 1 ? "" : "s");
        if (a->n_ranks > 0) tdm_sb_printf(sb, " (%s)", format_name(a->ranks[0].trace->format));
        tdm_sb_puts(sb, "\n");
        if (a->n_ranks > 0) {
            tdm_sb_printf(sb, "  %-10s %5s %10s %10s %10s %10s %10s %10s %8s  %s\n", "", "steps", "step ms", "compute",
                          "comm", "hidden", "exposed", "idle", "overlap%", "last collective: ms, exposed ms");
            for (int i = 0; i < a->n_ranks; i++) {
                const tdm_runs_rank_stats *r = &a->ranks[i];
                const tdm_runs_step_stats *m = &r->mean;
                char ln[96];
                const char *lname = "-";
                if (r->n_steps > 0 && isfinite(m->last_us)) {
                    const tdm_runs_step_stats *st = &r->steps[r->n_steps - 1];
                    lname = last_name(r->trace, st, ln, sizeof ln);
                }
                tdm_sb_printf(sb, "  %-10.10s %5lld %10s %10s %10s %10s %10s %10s %8s  %s%s%s%s%s\n", r->trace->label,
                              (long long)r->n_steps, ms(b[0], m->step_us), ms(b[1], m->compute_us),
                              ms(b[2], m->comm_us), ms(b[3], m->hidden_us), ms(b[4], m->exposed_us),
                              ms(b[5], m->idle_us), pct(b[6], m->overlap_pct), isfinite(m->last_us) ? lname : "",
                              isfinite(m->last_us) ? ": " : "-", isfinite(m->last_us) ? ms(b[7], m->last_us) : "",
                              isfinite(m->last_exposed_us) ? ", " : "",
                              isfinite(m->last_exposed_us) ? ms(b[8], m->last_exposed_us) : "");
            }
            tdm_sb_puts(sb, "  (means over each rank's steps, in ms; overlap = hidden / comm)\n");
        }
        if (any_hta(a)) {
            tdm_sb_printf(sb, "  whole trace, HTA's definitions: %12s %12s %8s %8s %12s\n", "overlap%", "last kept",
                          "idle%", "compute%", "non-compute%");
            for (int i = 0; i < a->n_ranks; i++) {
                const tdm_runs_hta *h = a->ranks[i].hta;
                if (!h[0].applicable) continue;
                tdm_sb_printf(sb, "  %-31.31s %12s %12s %8s %8s %12s\n", a->ranks[i].trace->label,
                              pct(b[0], h[0].overlap_pct), pct(b[1], h[1].overlap_pct), pct(b[2], h[0].idle_pct),
                              pct(b[3], h[0].compute_pct), pct(b[4], h[0].non_compute_pct));
            }
            tdm_sb_printf(sb, "  (%s; \"last kept\": the last step kept too)\n", hta_setting[0]);
        }
        if (a->slowest >= 0 && isfinite(a->spread))
            tdm_sb_printf(sb,
                          "  slowest rank: %s; spread (max-min)/mean of the ranks' step times %.2f%% (msprof's "
                          "slow-rank rule: above 5%%)\n",
                          a->ranks[a->slowest].trace->label, 100 * a->spread);
        int any_coll = 0;
        for (int i = 0; i < a->n_ranks; i++) any_coll |= a->ranks[i].n_kinds > 0;
        if (any_coll) {
            tdm_sb_printf(sb, "  collectives %-16s %7s %12s %12s %10s %10s\n", "", "count", "total size", "mean ms",
                          "algbw GB/s", "busbw GB/s");
            for (int i = 0; i < a->n_ranks; i++)
                for (int k = 0; k < a->ranks[i].n_kinds; k++) {
                    const tdm_runs_kind_stats *ks = &a->ranks[i].kinds[k];
                    char bw[2][32];
                    snprintf(bw[0], 32, isfinite(ks->algbw_gbs) ? "%.2f" : "-", ks->algbw_gbs);
                    snprintf(bw[1], 32, isfinite(ks->busbw_gbs) ? "%.2f" : "-", ks->busbw_gbs);
                    tdm_sb_printf(sb, "  %-10.10s %-17s %7lld %12s %12s %10s %10s\n", a->ranks[i].trace->label,
                                  tdm_runs_coll_kind_name(ks->kind), (long long)ks->count,
                                  ks->count_sized ? bytes_h(b[0], ks->total_bytes) : "-",
                                  ms(b[1], ks->total_us / (double)ks->count), bw[0], bw[1]);
                }
        }
        if (s->n_acomm > 0) {
            tdm_sb_puts(sb,
                        "  Ascend communication operators: rank, operators, elapse ms, wait ms (share), transit MB\n");
            for (int64_t i = 0, done = 0; i < s->n_acomm && done < 64; i++) {
                int64_t rank = s->acomm[i].rank;
                int seen = 0;
                for (int64_t j = 0; j < i; j++) seen |= s->acomm[j].rank == rank;
                if (seen) continue;
                double el = 0, w = 0, mb = 0;
                int64_t cnt = 0;
                for (int64_t j = i; j < s->n_acomm; j++)
                    if (s->acomm[j].rank == rank) {
                        cnt++;
                        if (isfinite(s->acomm[j].elapse_ms)) el += s->acomm[j].elapse_ms;
                        if (isfinite(s->acomm[j].wait_ms)) w += s->acomm[j].wait_ms;
                        mb += s->acomm[j].size_mb;
                    }
                tdm_sb_printf(sb, "    rank %-4lld %5lld %12.3f %12.3f (%5.1f%%) %10.3f\n", (long long)rank,
                              (long long)cnt, el, w, el > 0 ? 100 * w / el : 0.0, mb);
                done++;
            }
        }
        int fired = 0;
        for (int d = 0; d < TDM_RUNS_DIAG_COUNT; d++)
            if (a->fired[d]) {
                if (!fired++) tdm_sb_puts(sb, "  diagnostics:\n");
                tdm_sb_printf(sb, "  - %s\n", a->diag[d]);
            }
        int notes = 0;
        for (int i = 0; i < s->n; i++)
            for (int k = 0; k < s->traces[i]->n_notes; k++) {
                if (!notes++) tdm_sb_puts(sb, "  notes:\n");
                if (notes <= 12) tdm_sb_printf(sb, "  - %s\n", s->traces[i]->notes[k]);
            }
        if (notes > 12) tdm_sb_printf(sb, "  - ... %d more in report.md\n", notes - 12);
    }
}

/* ---- analysis.json --------------------------------------------------------------------- */

static void jnum(tdm_strbuf *sb, const char *key, double v, int first) {
    if (!first) tdm_sb_putc(sb, ',');
    if (isfinite(v)) tdm_sb_printf(sb, "\"%s\":%.10g", key, v);
    else tdm_sb_printf(sb, "\"%s\":null", key);
}

static void jstr(tdm_strbuf *sb, const char *key, const char *v, int first) {
    if (!first) tdm_sb_putc(sb, ',');
    tdm_sb_printf(sb, "\"%s\":", key);
    tdm_sb_json_string(sb, v, strlen(v));
}

static void json_step(tdm_strbuf *sb, const tdm_runs_trace *t, const tdm_runs_step_stats *s) {
    tdm_sb_putc(sb, '{');
    if (s->number >= 0) tdm_sb_printf(sb, "\"step\":%lld,", (long long)s->number);
    jnum(sb, "step_ms", s->step_us / 1e3, 1);
    jnum(sb, "compute_ms", s->compute_us / 1e3, 0);
    jnum(sb, "comm_ms", s->comm_us / 1e3, 0);
    jnum(sb, "hidden_comm_ms", s->hidden_us / 1e3, 0);
    jnum(sb, "exposed_comm_ms", s->exposed_us / 1e3, 0);
    jnum(sb, "idle_ms", s->idle_us / 1e3, 0);
    jnum(sb, "overlap_pct", s->overlap_pct, 0);
    jnum(sb, "last_collective_ms", s->last_us / 1e3, 0);
    jnum(sb, "last_collective_exposed_ms", s->last_exposed_us / 1e3, 0);
    if (s->last_coll >= 0 && t) {
        const tdm_runs_coll *c = &t->colls[s->last_coll];
        jstr(sb, "last_collective", tdm_runs_coll_kind_name(c->kind), 0);
        jnum(sb, "last_collective_bytes", c->bytes >= 0 ? (double)c->bytes : NAN, 0);
    }
    tdm_sb_printf(sb, ",\"collectives\":%lld}", (long long)s->n_colls);
}

static void json_hta(tdm_strbuf *sb, const tdm_runs_trace *t, const tdm_runs_hta *h) {
    tdm_sb_putc(sb, '{');
    jnum(sb, "comp_comm_overlap_pctg", h->overlap_pct, 1);
    jnum(sb, "overlap_us", h->overlap_us, 0);
    jnum(sb, "comm_union_us", h->comm_us, 0);
    jnum(sb, "idle_time_pctg", h->idle_pct, 0);
    jnum(sb, "compute_time_pctg", h->compute_pct, 0);
    jnum(sb, "non_compute_time_pctg", h->non_compute_pct, 0);
    jnum(sb, "idle_time_us", h->idle_us, 0);
    jnum(sb, "compute_time_us", h->compute_us, 0);
    jnum(sb, "non_compute_time_us", h->non_compute_us, 0);
    jnum(sb, "kernel_time_us", h->span_us, 0);
    tdm_sb_printf(sb,
                  ",\"num_steps_analysed\":%lld,\"kernel_count\":%lld,\"comm_kernel_count\":%lld,"
                  "\"filtered_by_steps\":%s,\"comm_kernels_by_name\":{",
                  (long long)h->n_steps, (long long)h->n_kernels, (long long)h->n_comm_kernels,
                  h->filtered ? "true" : "false");
    for (int k = 0; k < h->n_comm_names; k++) {
        if (k) tdm_sb_putc(sb, ',');
        const char *nm = t->names[h->comm_name[k]];
        tdm_sb_json_string(sb, nm, strlen(nm));
        tdm_sb_printf(sb, ":%lld", (long long)h->comm_name_count[k]);
    }
    tdm_sb_puts(sb, "}}");
}

void tdm_analyze_json(tdm_strbuf *sb, const tdm_analyze_run *runs, int n) {
    tdm_sb_puts(sb, "{\"units\":\"ms unless named otherwise; HTA's figures in µs and percent\",\"runs\":[");
    for (int ri = 0; ri < n; ri++) {
        const tdm_runs_analysis *a = runs[ri].analysis;
        const tdm_runs_set *s = runs[ri].set;
        tdm_sb_puts(sb, ri ? ",\n{" : "\n{");
        jstr(sb, "run", runs[ri].name, 1);
        tdm_sb_puts(sb, ",\"ranks\":[");
        for (int i = 0; i < a->n_ranks; i++) {
            const tdm_runs_rank_stats *r = &a->ranks[i];
            const tdm_runs_trace *t = r->trace;
            tdm_sb_puts(sb, i ? ",\n {" : "\n {");
            jstr(sb, "label", t->label, 1);
            jstr(sb, "file", t->path, 0);
            jstr(sb, "format", format_name(t->format), 0);
            jnum(sb, "rank", t->rank >= 0 ? (double)t->rank : NAN, 0);
            jnum(sb, "world_size", t->world_size >= 0 ? (double)t->world_size : NAN, 0);
            tdm_sb_printf(sb, ",\"whole_trace_step\":%s,\"steps\":[", t->whole_trace_step ? "true" : "false");
            for (int64_t k = 0; k < r->n_steps; k++) {
                if (k) tdm_sb_putc(sb, ',');
                json_step(sb, t, &r->steps[k]);
            }
            tdm_sb_puts(sb, "],\"mean\":");
            json_step(sb, NULL, &r->mean);
            if (r->hta[0].applicable) {
                tdm_sb_puts(sb, ",\"hta\":{");
                for (int h = 0; h < 4; h++) {
                    tdm_sb_printf(sb, "%s\"%s\":", h ? "," : "", hta_key[h]);
                    json_hta(sb, t, &r->hta[h]);
                }
                tdm_sb_putc(sb, '}');
            }
            tdm_sb_puts(sb, ",\"collectives\":[");
            for (int k = 0; k < r->n_kinds; k++) {
                const tdm_runs_kind_stats *ks = &r->kinds[k];
                tdm_sb_puts(sb, k ? ",{" : "{");
                jstr(sb, "kind", tdm_runs_coll_kind_name(ks->kind), 1);
                tdm_sb_printf(sb, ",\"count\":%lld,\"count_sized\":%lld", (long long)ks->count,
                              (long long)ks->count_sized);
                jnum(sb, "total_ms", ks->total_us / 1e3, 0);
                jnum(sb, "total_bytes", ks->count_sized ? ks->total_bytes : NAN, 0);
                jnum(sb, "group_size", ks->group_size > 0 ? ks->group_size : NAN, 0);
                jnum(sb, "algbw_gbs", ks->algbw_gbs, 0);
                jnum(sb, "busbw_gbs", ks->busbw_gbs, 0);
                tdm_sb_putc(sb, '}');
            }
            tdm_sb_puts(sb, "],\"notes\":[");
            for (int k = 0; k < t->n_notes; k++) {
                if (k) tdm_sb_putc(sb, ',');
                tdm_sb_json_string(sb, t->notes[k], strlen(t->notes[k]));
            }
            tdm_sb_puts(sb, "]}");
        }
        tdm_sb_puts(sb, "],\n");
        if (a->slowest >= 0) jstr(sb, "slowest_rank", a->ranks[a->slowest].trace->label, 1);
        else tdm_sb_puts(sb, "\"slowest_rank\":null");
        jnum(sb, "spread", a->spread, 0);
        tdm_sb_printf(sb, ",\"slow_rank_rule\":%.2f,\"diagnostics\":[", TDM_RUNS_SLOW_RANK_SPREAD);
        int first = 1;
        for (int d = 0; d < TDM_RUNS_DIAG_COUNT; d++) {
            if (!a->fired[d]) continue;
            tdm_sb_puts(sb, first ? "{" : ",{");
            first = 0;
            jstr(sb, "id", diag_key[d], 1);
            jstr(sb, "text", a->diag[d], 0);
            tdm_sb_putc(sb, '}');
        }
        tdm_sb_puts(sb, "]");
        if (s->n_acomm > 0) {
            tdm_sb_puts(sb, ",\"ascend_communication\":[");
            for (int64_t i = 0; i < s->n_acomm; i++) {
                const tdm_runs_acomm *c = &s->acomm[i];
                tdm_sb_puts(sb, i ? ",{" : "{");
                jnum(sb, "rank", c->rank >= 0 ? (double)c->rank : NAN, 1);
                jstr(sb, "step", c->step, 0);
                jstr(sb, "op", c->op, 0);
                jnum(sb, "elapse_ms", c->elapse_ms, 0);
                jnum(sb, "transit_ms", c->transit_ms, 0);
                jnum(sb, "wait_ms", c->wait_ms, 0);
                jnum(sb, "synchronization_ms", c->sync_ms, 0);
                jnum(sb, "idle_ms", c->idle_ms, 0);
                jnum(sb, "transit_mb", c->size_mb, 0);
                tdm_sb_putc(sb, '}');
            }
            tdm_sb_putc(sb, ']');
        }
        tdm_sb_putc(sb, '}');
    }
    tdm_sb_puts(sb, "\n]}\n");
}

/* ---- report.md ------------------------------------------------------------------------- */

static void md_text(tdm_strbuf *sb, const char *s) {
    for (; *s; s++) {
        if (*s == '|' || *s == '*' || *s == '_' || *s == '`' || *s == '<') tdm_sb_putc(sb, '\\');
        tdm_sb_putc(sb, *s);
    }
}

/* Longer than most: report.md's sections in the order they print. */
void tdm_analyze_markdown(tdm_strbuf *sb, const tdm_analyze_run *runs, int n) {
    char b[12][32];
    tdm_sb_puts(sb, "# tandem analyze\n\nTimes in ms. Definitions: docs/analyze.md.\n");
    for (int ri = 0; ri < n; ri++) {
        const tdm_runs_analysis *a = runs[ri].analysis;
        const tdm_runs_set *s = runs[ri].set;
        tdm_sb_puts(sb, "\n## ");
        md_text(sb, runs[ri].name);
        tdm_sb_printf(sb, "\n\n%d rank%s", a->n_ranks, a->n_ranks == 1 ? "" : "s");
        if (a->n_ranks) tdm_sb_printf(sb, ", %s", format_name(a->ranks[0].trace->format));
        tdm_sb_puts(sb, ".\n\n| rank | steps | step | compute | comm | hidden | exposed | idle | overlap % | last "
                        "collective | its exposed part |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (int i = 0; i < a->n_ranks; i++) {
            const tdm_runs_rank_stats *r = &a->ranks[i];
            const tdm_runs_step_stats *m = &r->mean;
            tdm_sb_puts(sb, "| ");
            md_text(sb, r->trace->label);
            tdm_sb_printf(sb, " | %lld | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", (long long)r->n_steps,
                          ms(b[0], m->step_us), ms(b[1], m->compute_us), ms(b[2], m->comm_us), ms(b[3], m->hidden_us),
                          ms(b[4], m->exposed_us), ms(b[5], m->idle_us), pct(b[6], m->overlap_pct),
                          ms(b[7], m->last_us), ms(b[8], m->last_exposed_us));
        }
        tdm_sb_puts(sb, "\nMeans over each rank's steps; overlap = hidden / comm over the steps.\n");
        if (any_hta(a)) {
            tdm_sb_puts(sb, "\n### Whole trace, Holistic Trace Analysis' definitions\n\n| rank | setting | overlap % | "
                            "idle % | compute % | non-compute % | steps | communication kernels |\n"
                            "|---|---|---|---|---|---|---|---|\n");
            for (int i = 0; i < a->n_ranks; i++)
                for (int h = 0; h < 4; h++) {
                    const tdm_runs_hta *x = &a->ranks[i].hta[h];
                    if (!x->applicable) continue;
                    tdm_sb_puts(sb, "| ");
                    md_text(sb, a->ranks[i].trace->label);
                    tdm_sb_printf(sb, " | %s | %s | %s | %s | %s | %lld | %lld |\n", hta_setting[h],
                                  pct(b[0], x->overlap_pct), pct(b[1], x->idle_pct), pct(b[2], x->compute_pct),
                                  pct(b[3], x->non_compute_pct), (long long)x->n_steps, (long long)x->n_comm_kernels);
                }
            tdm_sb_puts(sb, "\nHTA's overlap: computation during communication over communication, every kernel of "
                            "the trace kept. Its default drops the last profiled step and rounds float timestamps "
                            "(start up, end down).\n");
        }
        if (a->slowest >= 0 && isfinite(a->spread))
            tdm_sb_printf(sb,
                          "\nSlowest rank: %s. Spread of the ranks' mean step times, (max - min) / mean: %.2f%% "
                          "(msprof-analyze flags a slow rank above 5%%).\n",
                          a->ranks[a->slowest].trace->label, 100 * a->spread);
        int any_coll = 0;
        for (int i = 0; i < a->n_ranks; i++) any_coll |= a->ranks[i].n_kinds > 0;
        if (any_coll) {
            tdm_sb_puts(sb, "\n### Collectives\n\n| rank | kind | count | with size | total size | mean | algbw GB/s | "
                            "busbw GB/s | group |\n|---|---|---|---|---|---|---|---|---|\n");
            for (int i = 0; i < a->n_ranks; i++)
                for (int k = 0; k < a->ranks[i].n_kinds; k++) {
                    const tdm_runs_kind_stats *ks = &a->ranks[i].kinds[k];
                    tdm_sb_puts(sb, "| ");
                    md_text(sb, a->ranks[i].trace->label);
                    char bw[2][32], g[16];
                    snprintf(bw[0], 32, isfinite(ks->algbw_gbs) ? "%.2f" : "-", ks->algbw_gbs);
                    snprintf(bw[1], 32, isfinite(ks->busbw_gbs) ? "%.2f" : "-", ks->busbw_gbs);
                    snprintf(g, sizeof g, ks->group_size > 0 ? "%d" : "-", ks->group_size);
                    tdm_sb_printf(sb, " | %s | %lld | %lld | %s | %s | %s | %s | %s |\n",
                                  tdm_runs_coll_kind_name(ks->kind), (long long)ks->count, (long long)ks->count_sized,
                                  ks->count_sized ? bytes_h(b[0], ks->total_bytes) : "-",
                                  ms(b[1], ks->total_us / (double)ks->count), bw[0], bw[1], g);
                }
            tdm_sb_puts(sb, "\nBandwidths are bytes over the kernels' durations, waits for other ranks included; bus "
                            "bandwidth as NCCL's tests count it (all-reduce 2(n-1)/n, all-gather, reduce-scatter and "
                            "all-to-all (n-1)/n).\n");
        }
        if (s->n_acomm > 0) {
            tdm_sb_puts(sb,
                        "\n### Ascend communication operators\n\n| rank | step | operator | elapse | transit | wait "
                        "| synchronisation | idle | transit MB |\n|---|---|---|---|---|---|---|---|---|\n");
            for (int64_t i = 0; i < s->n_acomm && i < 500; i++) {
                const tdm_runs_acomm *c = &s->acomm[i];
                tdm_sb_printf(sb, "| %lld | ", (long long)c->rank);
                md_text(sb, c->step);
                tdm_sb_puts(sb, " | ");
                md_text(sb, c->op);
                tdm_sb_printf(sb, " | %.3f | %.3f | %.3f | %.3f | %.3f | %.6f |\n", c->elapse_ms, c->transit_ms,
                              c->wait_ms, c->sync_ms, c->idle_ms, c->size_mb);
            }
        }
        tdm_sb_puts(sb, "\n### Diagnostics\n\n");
        int fired = 0;
        for (int d = 0; d < TDM_RUNS_DIAG_COUNT; d++)
            if (a->fired[d]) {
                fired++;
                tdm_sb_puts(sb, "- ");
                md_text(sb, a->diag[d]);
                tdm_sb_puts(sb, "\n");
            }
        if (!fired) tdm_sb_puts(sb, "None fired.\n");
        tdm_sb_puts(sb, "\n### Per step\n");
        for (int i = 0; i < a->n_ranks; i++) {
            const tdm_runs_rank_stats *r = &a->ranks[i];
            tdm_sb_puts(sb, "\n");
            md_text(sb, r->trace->label);
            tdm_sb_puts(sb, " (");
            md_text(sb, r->trace->path);
            tdm_sb_puts(sb, ")\n\n| step | step | compute | comm | hidden | exposed | idle | overlap % | last "
                            "collective | ms | exposed |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
            for (int64_t k = 0; k < r->n_steps; k++) {
                const tdm_runs_step_stats *st = &r->steps[k];
                char ln[96];
                tdm_sb_printf(sb, "| %lld | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", (long long)st->number,
                              ms(b[0], st->step_us), ms(b[1], st->compute_us), ms(b[2], st->comm_us),
                              ms(b[3], st->hidden_us), ms(b[4], st->exposed_us), ms(b[5], st->idle_us),
                              pct(b[6], st->overlap_pct), last_name(r->trace, st, ln, sizeof ln), ms(b[7], st->last_us),
                              ms(b[8], st->last_exposed_us));
            }
            if (!has_steps(r)) tdm_sb_puts(sb, "| - | | | | | | | | | | |\n");
        }
        int notes = 0;
        for (int i = 0; i < s->n; i++)
            for (int k = 0; k < s->traces[i]->n_notes; k++) {
                if (!notes++) tdm_sb_puts(sb, "\n### Notes from the readers\n\n");
                tdm_sb_puts(sb, "- ");
                md_text(sb, s->traces[i]->notes[k]);
                tdm_sb_puts(sb, "\n");
            }
        tdm_sb_printf(sb,
                      "\nPlots: timeline_run%d.svg (one step per rank), steps_run%d.svg (hidden and exposed "
                      "communication per step).\n",
                      ri + 1, ri + 1);
    }
}

/* ---- plots ----------------------------------------------------------------------------- */

/* The step to draw: the median-length step of the first rank (not the first, often a warm-up). */
static int64_t pick_step(const tdm_runs_rank_stats *r) {
    if (r->n_steps == 0) return -1;
    double *d = tdm_xmalloc((size_t)r->n_steps * sizeof *d);
    for (int64_t k = 0; k < r->n_steps; k++) d[k] = r->steps[k].step_us;
    int64_t best = 0;
    /* the step whose length has as many shorter as longer ones */
    for (int64_t k = 0; k < r->n_steps; k++) {
        int64_t lo = 0, hi = 0;
        for (int64_t j = 0; j < r->n_steps; j++) lo += d[j]<d[k], hi += d[j]> d[k];
        if (llabs((long long)(lo - hi)) <= 1) {
            best = k;
            break;
        }
    }
    free(d);
    return r->steps[best].number;
}

static void timeline_svg(tdm_strbuf *sb, const tdm_analyze_run *run) {
    const tdm_runs_analysis *a = run->analysis;
    int64_t number = a->n_ranks ? pick_step(&a->ranks[0]) : -1;
    int n_rows = 0;
    const char **labels = tdm_xmalloc(sizeof *labels * (size_t)(2 * a->n_ranks + 1));
    char(*lb)[64] = tdm_xmalloc(sizeof *lb * (size_t)(2 * a->n_ranks + 1));
    tdm_svg_bar *bars = NULL;
    int64_t nb = 0, capb = 0;
    double t_hi = 1;
    for (int i = 0; i < a->n_ranks && i < 32; i++) {
        const tdm_runs_trace *t = a->ranks[i].trace;
        int64_t k;
        for (k = 0; k < t->n_steps && t->steps[k].number != number; k++) continue;
        if (k == t->n_steps) continue;
        double t0 = t->steps[k].ts;
        /* unions of compute and of communication: a step can hold tens of thousands of kernels */
        tdm_prof_interval *iv[2];
        int64_t niv[2] = {0, 0};
        iv[0] = tdm_xmalloc((size_t)(t->n_spans + 1) * sizeof **iv);
        iv[1] = tdm_xmalloc((size_t)(t->n_spans + 1) * sizeof **iv);
        for (int64_t j = 0; j < t->n_spans; j++) {
            const tdm_runs_span *s = &t->spans[j];
            if (s->step != k || s->dur <= 0) continue;
            if (t->has_device != !!(s->flags & TDM_RUNS_F_DEVICE)) continue;
            int c = s->kind == TDM_RUNS_COMPUTE ? 0 : s->kind == TDM_RUNS_COMM || s->coll >= 0 ? 1 : -1;
            if (!t->has_device && c == 1 && s->coll < 0) continue;
            if (c < 0) continue;
            iv[c][niv[c]++] = (tdm_prof_interval){(s->ts - t0) / 1e3, (s->ts + s->dur - t0) / 1e3};
        }
        for (int c = 0; c < 2; c++) {
            niv[c] = tdm_prof_intervals_union(iv[c], niv[c]);
            snprintf(lb[n_rows], 64, "%.40s %s", t->label, c ? "comm" : "compute");
            labels[n_rows] = lb[n_rows];
            for (int64_t j = 0; j < niv[c]; j++) {
                if (nb == capb) bars = tdm_xrealloc(bars, (size_t)(capb = capb ? capb * 2 : 256) * sizeof *bars);
                bars[nb++] = (tdm_svg_bar){
                    .row = n_rows, .t0 = iv[c][j].t0, .t1 = iv[c][j].t1, .kind = c ? TDM_SVG_COMM : TDM_SVG_COMPUTE};
                if (iv[c][j].t1 > t_hi) t_hi = iv[c][j].t1;
            }
            n_rows++;
        }
        if (t->steps[k].dur / 1e3 > t_hi) t_hi = t->steps[k].dur / 1e3;
        free(iv[0]);
        free(iv[1]);
    }
    char title[200];
    snprintf(title, sizeof title, "%.120s: step %lld per rank (from its start)", run->name, (long long)number);
    tdm_svg_timeline(sb, title, labels, n_rows, bars, nb, 0, t_hi);
    free(bars);
    free(labels);
    free(lb);
}

static void steps_svg(tdm_strbuf *sb, const tdm_analyze_run *run) {
    const tdm_runs_analysis *a = run->analysis;
    /* per step number, the mean over the ranks that hold it */
    const tdm_runs_rank_stats *r0 = a->n_ranks ? &a->ranks[0] : NULL;
    int64_t n = r0 ? r0->n_steps : 0;
    double *x = tdm_xcalloc((size_t)n + 1, sizeof *x), *h = tdm_xcalloc((size_t)n + 1, sizeof *h),
           *e = tdm_xcalloc((size_t)n + 1, sizeof *e), *c = tdm_xcalloc((size_t)n + 1, sizeof *c);
    for (int64_t k = 0; k < n; k++) {
        x[k] = (double)r0->steps[k].number;
        int cnt = 0;
        for (int i = 0; i < a->n_ranks; i++)
            for (int64_t j = 0; j < a->ranks[i].n_steps; j++)
                if (a->ranks[i].steps[j].number == r0->steps[k].number) {
                    h[k] += a->ranks[i].steps[j].hidden_us / 1e3;
                    e[k] += a->ranks[i].steps[j].exposed_us / 1e3;
                    c[k] += a->ranks[i].steps[j].compute_us / 1e3;
                    cnt++;
                }
        if (cnt) h[k] /= cnt, e[k] /= cnt, c[k] /= cnt;
    }
    tdm_svg_series s[3] = {{"hidden communication", x, h, n, "#59a14f"},
                           {"exposed communication", x, e, n, "#e15759"},
                           {"compute", x, c, n, "#4e79a7"}};
    char title[200];
    snprintf(title, sizeof title, "%.120s: per step, mean over ranks", run->name);
    tdm_svg_line_plot(sb, title, "step", "ms", s, 3);
    free(x), free(h), free(e), free(c);
}

int tdm_analyze_write(const tdm_analyze_run *runs, int n, const char *dir, tdm_error *err) {
    if (tdm_mkdirs(dir, err) != 0) return -1;
    char path[4200];
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    int rc = 0;
    tdm_analyze_markdown(&sb, runs, n);
    snprintf(path, sizeof path, "%s/report.md", dir);
    rc = tdm_write_file_atomic(path, sb.data, sb.len, err);
    if (rc == 0) {
        tdm_sb_clear(&sb);
        tdm_analyze_json(&sb, runs, n);
        snprintf(path, sizeof path, "%s/analysis.json", dir);
        rc = tdm_write_file_atomic(path, sb.data, sb.len, err);
    }
    for (int i = 0; i < n && rc == 0; i++) {
        tdm_sb_clear(&sb);
        timeline_svg(&sb, &runs[i]);
        snprintf(path, sizeof path, "%s/timeline_run%d.svg", dir, i + 1);
        rc = tdm_write_file_atomic(path, sb.data, sb.len, err);
        if (rc) break;
        tdm_sb_clear(&sb);
        steps_svg(&sb, &runs[i]);
        snprintf(path, sizeof path, "%s/steps_run%d.svg", dir, i + 1);
        rc = tdm_write_file_atomic(path, sb.data, sb.len, err);
    }
    tdm_sb_free(&sb);
    return rc;
}
