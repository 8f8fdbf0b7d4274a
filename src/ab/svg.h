/* svg.h - the A/B report's plots as standalone SVG text (no dependencies):
 * line plots (loss curves, step time per step), overlaid histograms (step-time
 * distribution) and a timeline (one step, a row per rank/thread, compute vs
 * communication vs wait colours). Each call appends one complete <svg> document. */
#ifndef TDM_TRAIN_SVG_H
#define TDM_TRAIN_SVG_H

#include <stdint.h>

#include "core/strbuf.h"

typedef struct tdm_svg_series {
    const char *name; /* legend */
    const double *x;  /* NULL: 1, 2, 3, ... (line plots); unused by histograms */
    const double *y;
    int64_t n;
    const char *color; /* CSS colour */
} tdm_svg_series;

/* Lines through (x, y) per series; non-finite points break the line. */
void tdm_svg_line_plot(tdm_strbuf *sb, const char *title, const char *xlabel, const char *ylabel,
                       const tdm_svg_series *s, int n_series);

/* The same, with the x range [win_lo, win_hi] shaded and labelled "statistics window" (NaN: none). Integer x
 * values (iterations) get integer ticks. */
void tdm_svg_line_plot_window(tdm_strbuf *sb, const char *title, const char *xlabel, const char *ylabel,
                              const tdm_svg_series *s, int n_series, double win_lo, double win_hi);

/* Histograms of each series' y values over a shared range, `bins` bins, drawn as
 * translucent overlaid bars, with each series' median marked. */
void tdm_svg_histogram(tdm_strbuf *sb, const char *title, const char *xlabel, const tdm_svg_series *s, int n_series,
                       int bins);

typedef enum tdm_svg_kind {
    TDM_SVG_COMPUTE = 0,
    TDM_SVG_COMM = 1,
    TDM_SVG_WAIT = 2,
    TDM_SVG_DATA = 3,
} tdm_svg_kind;

typedef struct tdm_svg_bar {
    int row;
    double t0, t1; /* ms */
    int kind;      /* tdm_svg_kind */
    int depth;     /* nesting depth: deeper bars are drawn thinner */
} tdm_svg_bar;

/* A timeline over [t_lo, t_hi] ms: one row per label, bars coloured by kind, a legend. */
void tdm_svg_timeline(tdm_strbuf *sb, const char *title, const char *const *row_labels, int n_rows,
                      const tdm_svg_bar *bars, int64_t n, double t_lo, double t_hi);

#endif
