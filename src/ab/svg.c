/* svg.c - minimal SVG plots for the A/B report. */
#include "ab/svg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

enum { W = 720, H = 380, ML = 70, MR = 20, MT = 40, MB = 50 };

static void xml_text(tdm_strbuf *sb, const char *s) {
    for (; *s; s++) {
        if (*s == '<') tdm_sb_puts(sb, "&lt;");
        else if (*s == '>') tdm_sb_puts(sb, "&gt;");
        else if (*s == '&') tdm_sb_puts(sb, "&amp;");
        else if (*s == '"') tdm_sb_puts(sb, "&quot;");
        else tdm_sb_putc(sb, *s);
    }
}

static void header(tdm_strbuf *sb, const char *title, int w, int h) {
    tdm_sb_printf(
        sb,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
        "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
        "<text x=\"%d\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">",
        w, h, w, h, w / 2);
    xml_text(sb, title);
    tdm_sb_puts(sb, "</text>\n");
}

typedef struct frame {
    double x0, x1, y0, y1; /* data range */
} frame;

static double px(const frame *f, double x) { return ML + (x - f->x0) / (f->x1 - f->x0) * (W - ML - MR); }
static double py(const frame *f, double y) { return H - MB - (y - f->y0) / (f->y1 - f->y0) * (H - MT - MB); }

/* A tick step of 1, 2 or 5 times a power of ten near range / 4; at least 1 for integer data (iterations). */
static double nice_step(double range, int integer) {
    double raw = range / 4.0;
    if (!(raw > 0)) return 1;
    double p = pow(10.0, floor(log10(raw))), m = raw / p;
    double st = (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
    return integer && st < 1 ? 1 : st;
}

/* integer_x: the x values are integers (iterations): ticks at integers, a multiple of a nice step. */
static void axes(tdm_strbuf *sb, const frame *f, const char *xlabel, const char *ylabel, int integer_x) {
    tdm_sb_printf(sb, "<g stroke=\"#888\" fill=\"none\"><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/></g>\n", ML,
                  MT, W - ML - MR, H - MT - MB);
    if (integer_x) {
        const double st = nice_step(f->x1 - f->x0, 1);
        for (double xv = ceil(f->x0 / st) * st; xv <= f->x1 + 1e-9; xv += st)
            tdm_sb_printf(sb, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.0f</text>\n", px(f, xv), H - MB + 16,
                          xv);
    }
    for (int i = 0; i <= 4; i++) {
        double xv = f->x0 + (f->x1 - f->x0) * i / 4.0, yv = f->y0 + (f->y1 - f->y0) * i / 4.0;
        if (!integer_x)
            tdm_sb_printf(sb, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.4g</text>\n", px(f, xv), H - MB + 16,
                          xv);
        tdm_sb_printf(sb, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", ML - 6, py(f, yv) + 4, yv);
        tdm_sb_printf(sb, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", ML + 1, W - MR - 1,
                      py(f, yv), py(f, yv));
    }
    tdm_sb_printf(sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", (ML + W - MR) / 2, H - 12);
    xml_text(sb, xlabel);
    tdm_sb_printf(sb, "</text>\n<text transform=\"translate(16,%d) rotate(-90)\" text-anchor=\"middle\">",
                  (MT + H - MB) / 2);
    xml_text(sb, ylabel);
    tdm_sb_puts(sb, "</text>\n");
}

static void legend(tdm_strbuf *sb, const tdm_svg_series *s, int n) {
    for (int i = 0; i < n; i++) {
        int y = MT + 14 + 16 * i;
        tdm_sb_printf(sb, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">",
                      W - MR - 170, y - 9, s[i].color, W - MR - 153, y);
        xml_text(sb, s[i].name);
        tdm_sb_puts(sb, "</text>\n");
    }
}

static void pad_range(double *lo, double *hi) {
    if (!isfinite(*lo) || !isfinite(*hi)) *lo = 0, *hi = 1;
    if (*hi <= *lo) {
        double c = *lo;
        *lo = c - (fabs(c) > 0 ? fabs(c) * 0.05 : 1);
        *hi = c + (fabs(c) > 0 ? fabs(c) * 0.05 : 1);
    }
}

void tdm_svg_line_plot(tdm_strbuf *sb, const char *title, const char *xlabel, const char *ylabel,
                       const tdm_svg_series *s, int ns) {
    tdm_svg_line_plot_window(sb, title, xlabel, ylabel, s, ns, NAN, NAN);
}

void tdm_svg_line_plot_window(tdm_strbuf *sb, const char *title, const char *xlabel, const char *ylabel,
                              const tdm_svg_series *s, int ns, double win_lo, double win_hi) {
    int integer_x = 1;
    frame f = {INFINITY, -INFINITY, INFINITY, -INFINITY};
    for (int k = 0; k < ns; k++)
        for (int64_t i = 0; i < s[k].n; i++) {
            double x = s[k].x ? s[k].x[i] : (double)(i + 1), y = s[k].y[i];
            if (!isfinite(x) || !isfinite(y)) continue;
            if (x != floor(x)) integer_x = 0;
            if (x < f.x0) f.x0 = x;
            if (x > f.x1) f.x1 = x;
            if (y < f.y0) f.y0 = y;
            if (y > f.y1) f.y1 = y;
        }
    pad_range(&f.x0, &f.x1);
    pad_range(&f.y0, &f.y1);
    double pad = (f.y1 - f.y0) * 0.05;
    f.y0 -= pad, f.y1 += pad;
    header(sb, title, W, H);
    if (isfinite(win_lo) && isfinite(win_hi) && win_hi >= win_lo) { /* the statistics window, behind the lines */
        double a = px(&f, win_lo < f.x0 ? f.x0 : win_lo), z = px(&f, win_hi > f.x1 ? f.x1 : win_hi);
        tdm_sb_printf(sb,
                      "<rect class=\"window\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#59a14f\" "
                      "fill-opacity=\"0.12\"/>\n<text x=\"%.1f\" y=\"%d\" fill=\"#3b7a33\">statistics window "
                      "%.0f-%.0f</text>\n",
                      a, MT, z - a > 1 ? z - a : 1, H - MT - MB, a + 4 < W - MR - 180 ? a + 4 : W - MR - 180,
                      H - MB - 6, win_lo, win_hi);
    }
    axes(sb, &f, xlabel, ylabel, integer_x);
    for (int k = 0; k < ns; k++) {
        /* earlier series drawn wider, so identical curves stay visible under later ones */
        tdm_sb_printf(sb, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" stroke-opacity=\"0.85\" d=\"",
                      s[k].color, 1.5 + 2.0 * (ns - 1 - k));
        int pen = 0;
        for (int64_t i = 0; i < s[k].n; i++) {
            double x = s[k].x ? s[k].x[i] : (double)(i + 1), y = s[k].y[i];
            if (!isfinite(x) || !isfinite(y)) {
                pen = 0;
                continue;
            }
            tdm_sb_printf(sb, "%c%.1f %.1f ", pen ? 'L' : 'M', px(&f, x), py(&f, y));
            pen = 1;
        }
        tdm_sb_puts(sb, "\"/>\n");
    }
    legend(sb, s, ns);
    tdm_sb_puts(sb, "</svg>\n");
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void tdm_svg_histogram(tdm_strbuf *sb, const char *title, const char *xlabel, const tdm_svg_series *s, int ns,
                       int bins) {
    if (bins < 1) bins = 1;
    if (bins > 200) bins = 200;
    frame f = {INFINITY, -INFINITY, 0, 1};
    for (int k = 0; k < ns; k++)
        for (int64_t i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].y[i])) continue;
            if (s[k].y[i] < f.x0) f.x0 = s[k].y[i];
            if (s[k].y[i] > f.x1) f.x1 = s[k].y[i];
        }
    pad_range(&f.x0, &f.x1);
    int64_t *cnt = tdm_xcalloc((size_t)(ns > 0 ? ns : 1) * (size_t)bins, sizeof *cnt);
    double bw = (f.x1 - f.x0) / bins;
    int64_t top = 1;
    for (int k = 0; k < ns; k++)
        for (int64_t i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].y[i])) continue;
            int b = (int)((s[k].y[i] - f.x0) / bw);
            if (b >= bins) b = bins - 1;
            if (b < 0) b = 0;
            if (++cnt[k * bins + b] > top) top = cnt[k * bins + b];
        }
    f.y1 = (double)top * 1.1;
    header(sb, title, W, H);
    axes(sb, &f, xlabel, "steps", 0);
    for (int k = 0; k < ns; k++) {
        for (int b = 0; b < bins; b++) {
            int64_t c = cnt[k * bins + b];
            if (!c) continue;
            double x0 = px(&f, f.x0 + b * bw), x1 = px(&f, f.x0 + (b + 1) * bw), y = py(&f, (double)c);
            tdm_sb_printf(sb,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
                          "fill-opacity=\"0.45\"/>\n",
                          x0, y, x1 - x0 > 1 ? x1 - x0 - 0.5 : 0.5, (double)(H - MB) - y, s[k].color);
        }
        if (s[k].n > 0) { /* median marker */
            double *c = tdm_xmalloc((size_t)s[k].n * sizeof *c);
            memcpy(c, s[k].y, (size_t)s[k].n * sizeof *c);
            qsort(c, (size_t)s[k].n, sizeof *c, cmp_double);
            double med = s[k].n % 2 ? c[s[k].n / 2] : 0.5 * (c[s[k].n / 2 - 1] + c[s[k].n / 2]);
            free(c);
            if (isfinite(med))
                tdm_sb_printf(sb,
                              "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\" "
                              "stroke-dasharray=\"4 3\"/>\n",
                              px(&f, med), px(&f, med), MT, H - MB, s[k].color);
        }
    }
    legend(sb, s, ns);
    tdm_sb_puts(sb, "<text x=\"72\" y=\"36\" fill=\"#555\">dashed: median</text>\n</svg>\n");
    free(cnt);
}

static const char *const kind_color[] = {"#4e79a7", "#e15759", "#bab0ac", "#f28e2b"};
static const char *const kind_name[] = {"compute", "communication", "wait", "data"};

void tdm_svg_timeline(tdm_strbuf *sb, const char *title, const char *const *row_labels, int n_rows,
                      const tdm_svg_bar *bars, int64_t n, double t_lo, double t_hi) {
    const int row_h = 26, left = 130, right = 20, top = 50;
    int h = top + row_h * (n_rows > 0 ? n_rows : 1) + 50;
    if (!(t_hi > t_lo)) t_hi = t_lo + 1;
    double scale = (W - left - right) / (t_hi - t_lo);
    header(sb, title, W, h);
    for (int r = 0; r < n_rows; r++) {
        tdm_sb_printf(sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", left - 6, top + r * row_h + 17);
        xml_text(sb, row_labels[r]);
        tdm_sb_printf(sb, "</text><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f7f7f7\"/>\n", left,
                      top + r * row_h + 2, W - left - right, row_h - 4);
    }
    for (int64_t i = 0; i < n; i++) {
        const tdm_svg_bar *b = &bars[i];
        if (b->row < 0 || b->row >= n_rows || b->t1 < t_lo || b->t0 > t_hi) continue;
        double a = b->t0 < t_lo ? t_lo : b->t0, z = b->t1 > t_hi ? t_hi : b->t1;
        int d = b->depth < 3 ? b->depth : 3;
        double y = top + b->row * row_h + 2 + d * 3, hh = row_h - 4 - d * 6;
        int k = b->kind >= 0 && b->kind < 4 ? b->kind : 0;
        tdm_sb_printf(
            sb, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\" fill-opacity=\"%.2f\"/>\n",
            left + (a - t_lo) * scale, y, (z - a) * scale > 0.3 ? (z - a) * scale : 0.3, hh, kind_color[k],
            d == 0 ? 0.55 : 0.9);
    }
    for (int i = 0; i <= 4; i++) { /* the last label ends at the axis' end: centred there it was clipped */
        double t = t_lo + (t_hi - t_lo) * i / 4.0;
        tdm_sb_printf(sb, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"%s\">%.4g ms</text>\n", left + (t - t_lo) * scale,
                      top + n_rows * row_h + 16, i == 4 ? "end" : "middle", t);
    }
    for (int k = 0; k < 4; k++)
        tdm_sb_printf(
            sb, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
            left + 140 * k, h - 18, kind_color[k], left + 140 * k + 16, h - 9, kind_name[k]);
    tdm_sb_puts(sb, "</svg>\n");
}
