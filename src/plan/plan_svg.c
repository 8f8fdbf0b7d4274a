/* plan_svg.c - the timeline of a measured step beside predicted ones (see plan.h). */
#include <stdio.h>

#include "core/strbuf.h"
#include "plan/plan.h"

static const char *fill_of(const tdm_plan_seg *g) {
    if (g->backward == 2) return "#d62728";     /* a collective */
    if (g->unit < 0) return "#aaaaaa";          /* head, loss, sync, optimizer */
    return g->backward ? "#2ca02c" : "#1f77b4"; /* backward, forward */
}

static void row(tdm_strbuf *sb, const tdm_plan_seg *g, int n, int only_comm, double y, double scale, double x0) {
    for (int i = 0; i < n; i++) {
        if ((g[i].backward == 2) != only_comm || g[i].unit == TDM_PLAN_SEG_RANKS) continue; /* a wait: a gap */
        double w = (g[i].t1_us - g[i].t0_us) * scale;
        if (w <= 0) continue;
        tdm_sb_printf(sb, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"14\" fill=\"%s\"/>\n",
                      x0 + g[i].t0_us * scale, y, w < 0.3 ? 0.3 : w, fill_of(&g[i]));
    }
}

void tdm_plan_svg(tdm_strbuf *sb, const tdm_plan_model *m, const tdm_plan_result *res, const char *const *names,
                  int n) {
    double tmax = m->n_measured > 0 ? m->measured_one_us : 0;
    for (int i = 0; i < n; i++)
        if (res[i].step_us > tmax) tmax = res[i].step_us;
    if (!(tmax > 0)) tmax = 1;
    const double x0 = 220, width = 900, scale = width / tmax;
    int rows = n + (m->n_measured > 0);
    tdm_sb_printf(sb,
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%d\" font-family=\"sans-serif\" "
                  "font-size=\"11\">\n",
                  x0 + width + 20, 60 + rows * 44);
    tdm_sb_printf(sb,
                  "<text x=\"10\" y=\"16\">one step, 0 to %.1f ms: forward (blue), backward (green), other compute "
                  "(grey), collectives (red)</text>\n",
                  tmax / 1e3);
    double y = 30;
    if (m->n_measured > 0) {
        tdm_sb_printf(sb, "<text x=\"10\" y=\"%.1f\">measured (rank 0, last traced step)</text>\n", y + 11);
        row(sb, m->measured, m->n_measured, 0, y, scale, x0);
        row(sb, m->measured, m->n_measured, 1, y + 16, scale, x0);
        y += 44;
    }
    for (int i = 0; i < n; i++) {
        tdm_sb_printf(sb, "<text x=\"10\" y=\"%.1f\">predicted: ", y + 11);
        for (const char *p = names[i]; *p; p++) {
            if (*p == '<') tdm_sb_puts(sb, "&lt;");
            else if (*p == '&') tdm_sb_puts(sb, "&amp;");
            else if (*p == '>') tdm_sb_puts(sb, "&gt;");
            else tdm_sb_putc(sb, *p);
        }
        tdm_sb_puts(sb, "</text>\n");
        row(sb, res[i].segs, res[i].n_segs, 0, y, scale, x0);
        for (int k = 0; k < res[i].n_colls; k++) {
            const tdm_plan_coll *c = &res[i].colls[k];
            double w = (c->end_us - c->start_us) * scale;
            tdm_sb_printf(sb,
                          "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"14\" fill=\"%s\" stroke=\"white\" "
                          "stroke-width=\"0.5\"/>\n",
                          x0 + c->start_us * scale, y + 16, w < 0.3 ? 0.3 : w,
                          c->kind == TDM_PLAN_ALL_GATHER ? "#ff7f0e" : "#d62728");
        }
        y += 44;
    }
    tdm_sb_puts(sb, "</svg>\n");
}
