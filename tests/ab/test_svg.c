/* Tests of the A/B report's plots (src/ab/svg.c) as SVG text: every label lies inside the
 * viewBox (its x, anchor and an estimated width of 0.6 em per character), the iteration
 * axis has integer ticks, and the step-time plot marks the statistics window; and as images:
 * rendered by librsvg's rsvg-convert (scripts/setup.sh installs it), nothing is drawn on the
 * picture's outermost pixels, where a clipped label or bar would show. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ab/svg.h"
#include "data/image.h"

static int g_have_renderer = -1;

/* Renders svg to PNG and checks that its border (2 pixels wide) holds only background: every channel at
 * least 200 (white and the plots' light grey lanes; text, axes and bars are darker). */
static void rendered_inside(const char *svg, const char *what) {
    if (g_have_renderer < 0) {
        g_have_renderer = system("command -v rsvg-convert >/dev/null 2>&1") == 0;
        if (!g_have_renderer) printf("skipped: rendering the plots (rsvg-convert is not installed)\n");
    }
    if (!g_have_renderer) return;
    char dir[] = "/tmp/tdm_svg.XXXXXX", in[64], out[64], cmd[256];
    if (!mkdtemp(dir)) {
        CHECK(0, "%s: a temp folder", what);
        return;
    }
    snprintf(in, sizeof in, "%s/plot.svg", dir);
    snprintf(out, sizeof out, "%s/plot.png", dir);
    FILE *f = fopen(in, "w");
    const int written = f && fputs(svg, f) >= 0;
    CHECK(f && fclose(f) == 0 && written, "%s: writing the SVG", what);
    snprintf(cmd, sizeof cmd, "rsvg-convert -b white -o %s %s", out, in);
    CHECK(system(cmd) == 0, "%s: rsvg-convert renders it", what);
    tdm_image img = {0};
    tdm_error err = {0};
    const int loaded = tdm_image_load(out, TDM_IMAGE_MAX_PIXELS, &img, &err) == 0;
    CHECK(loaded, "%s: the PNG loads: %s", what, err.msg);
    if (loaded) {
        int ink = 0, first_x = -1, first_y = -1;
        for (int y = 0; y < img.height; y++)
            for (int x = 0; x < img.width; x++) {
                if (x >= 2 && x < img.width - 2 && y >= 2 && y < img.height - 2) continue;
                const uint8_t *px = img.rgb + ((size_t)y * (size_t)img.width + (size_t)x) * 3;
                if (px[0] < 200 || px[1] < 200 || px[2] < 200) {
                    if (!ink++) first_x = x, first_y = y;
                }
            }
        CHECK(ink == 0, "%s: %d drawn pixels on the %dx%d picture's border (first at %d,%d): something is clipped",
              what, ink, img.width, img.height, first_x, first_y);
        CHECK(img.width >= 300 && img.height >= 100, "%s: rendered %dx%d", what, img.width, img.height);
        tdm_image_free(&img);
    }
    unlink(in);
    unlink(out);
    rmdir(dir);
}

/* Checks every <text> without a transform: left >= 0 and right <= the viewBox width. Returns the count. */
static int labels_inside(const char *svg, const char *what) {
    double vw = 0, vh = 0;
    const char *vb = strstr(svg, "viewBox=\"0 0 ");
    CHECK(vb && sscanf(vb, "viewBox=\"0 0 %lf %lf", &vw, &vh) == 2, "%s: a viewBox", what);
    int n = 0;
    for (const char *p = strstr(svg, "<text "); p; p = strstr(p + 1, "<text ")) {
        const char *end = strchr(p, '>'), *close = strstr(p, "</text>");
        if (!end || !close) break;
        char tag[512];
        snprintf(tag, sizeof tag, "%.*s", (int)(end - p), p);
        if (strstr(tag, "transform")) continue; /* the rotated y label */
        const char *xs = strstr(tag, " x=\"");
        if (!xs) continue;
        double x = atof(xs + 4), size = 12;
        const char *fs = strstr(tag, "font-size=\"");
        if (fs) size = atof(fs + 11);
        const int len = (int)(close - end - 1);
        const double w = 0.6 * size * len;
        const double left = strstr(tag, "text-anchor=\"end\"")      ? x - w
                            : strstr(tag, "text-anchor=\"middle\"") ? x - w / 2
                                                                    : x;
        CHECK(left >= 0 && left + w <= vw, "%s: label '%.*s' spans %.1f..%.1f, outside 0..%.0f", what, len, end + 1,
              left, left + w, vw);
        n++;
    }
    return n;
}

static void test_timeline_last_label_inside(void) {
    const char *rows[] = {"rank 0 compute", "rank 0 comm"};
    tdm_svg_bar bars[] = {{0, 0, 600, TDM_SVG_COMPUTE, 0}, {1, 500, 815.7, TDM_SVG_COMM, 0}};
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_svg_timeline(&sb, "baseline: step 7 timeline", rows, 2, bars, 2, 0, 815.7);
    CHECK(strstr(sb.data, ">815.7 ms</text>") != NULL, "the last tick is the step's end");
    CHECK(labels_inside(sb.data, "timeline") >= 7, "labels found");
    rendered_inside(sb.data, "timeline");
    tdm_sb_free(&sb);
}

static void test_step_time_plot_ticks_and_window(void) {
    enum { N = 40 };
    double a[N], b[N];
    for (int i = 0; i < N; i++) a[i] = 500 + 10 * sin(i), b[i] = 480 + 10 * cos(i);
    tdm_svg_series s[2] = {{"baseline", NULL, a, N, "#4e79a7"}, {"candidate", NULL, b, N, "#e15759"}};
    for (int n = 3; n <= N; n += 37) { /* 3 steps: 1..3, ticks 1, 2, 3 (not 1.5, 2.5); 40: 10, 20, ... */
        s[0].n = s[1].n = n;
        tdm_strbuf sb;
        tdm_sb_init(&sb);
        tdm_svg_line_plot_window(&sb, "Step time per step (mean over repeats; slowest rank)", "iteration", "ms", s, 2,
                                 2, n);
        labels_inside(sb.data, "step time");
        rendered_inside(sb.data, "step time");
        /* the x tick labels sit on the line under the plot: y = H - MB + 16 = 346 */
        int ticks = 0;
        for (const char *p = strstr(sb.data, "y=\"346\""); p; p = strstr(p + 1, "y=\"346\"")) {
            const char *t = strchr(p, '>');
            char lab[32];
            snprintf(lab, sizeof lab, "%.*s", (int)(strchr(t, '<') - t - 1), t + 1);
            CHECK(!strchr(lab, '.') && !strchr(lab, 'e'), "%d steps: an iteration tick '%s' is not an integer", n, lab);
            ticks++;
        }
        CHECK(ticks >= 3, "%d steps: %d ticks", n, ticks);
        char want[64];
        snprintf(want, sizeof want, "statistics window 2-%d", n);
        CHECK(strstr(sb.data, "class=\"window\"") && strstr(sb.data, want), "%d steps: the window is marked", n);
        tdm_sb_free(&sb);
    }
    /* without a window: no marker */
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_svg_line_plot(&sb, "Loss", "iteration", "loss", s, 2);
    CHECK(!strstr(sb.data, "class=\"window\""), "no window, no marker");
    labels_inside(sb.data, "loss");
    rendered_inside(sb.data, "loss");
    tdm_sb_free(&sb);
}

int main(void) {
    RUN(test_timeline_last_label_inside);
    RUN(test_step_time_plot_ticks_and_window);
    return TEST_SUMMARY();
}
