/* svg_chart.c — line charts, horizontal bar charts and heatmaps as inline SVG (svg_chart.h).
 * Promise: output size is bounded by the chart's pixels, not by the data (min/max per pixel column,
 * thinned markers, one rect per run of equal-coloured cells); all text goes through fp_html_text. */
#include "svg_chart.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "html_writer.h"

enum { ML = 64, MR = 16, MT = 30, MB = 42 };

const char *fp_svg_color(size_t i)
{
    static const char *const pal[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#7f7f7f",
                                      "#000000"};
    return pal[i % (sizeof pal / sizeof pal[0])];
}

static void dims(const fp_svg_opts_t *o, int *w, int *h)
{
    *w = o->width > 0 ? o->width : 900;
    *h = o->height > 0 ? o->height : 280;
}

static void open_figure(FILE *f, const fp_svg_opts_t *o, int w, int h)
{
    fputs("<figure class=\"chart\" id=\"", f);
    fp_html_text(f, o->id);
    fprintf(f, "\">\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\""
               " role=\"img\" font-family=\"sans-serif\" font-size=\"11\"><title>", w, h, w, h);
    fp_html_text(f, o->title);
    fprintf(f, "</title>\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", w, h);
    fputs("<text x=\"8\" y=\"16\" font-size=\"13\" font-weight=\"bold\" fill=\"#1b1f24\">", f);
    fp_html_text(f, o->title);
    fputs("</text>\n", f);
}

static void close_figure(FILE *f, const fp_svg_opts_t *o, const char *extra)
{
    fputs("</svg>\n<figcaption>", f);
    fp_html_text(f, o->title);
    if (extra && *extra) {
        fputs(" — ", f);
        fp_html_text(f, extra);
    }
    fputs("</figcaption>\n</figure>\n", f);
}

static void no_data(FILE *f, int w, int h)
{
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#57606a\">no data</text>\n", w / 2, h / 2);
}

/* ---------------------------------------------------------------- axes */

typedef struct {
    double lo, hi;     /* in axis units (log of value when logarithmic) */
    int log;           /* 0, 2, 10 */
    double p0, p1;     /* pixel of lo, hi */
} axis_t;

static double ax_unit(const axis_t *a, double v)
{
    return a->log ? log(v) / log((double)a->log) : v;
}

static double ax_px(const axis_t *a, double v)
{
    double u = ax_unit(a, v);
    double t = a->hi > a->lo ? (u - a->lo) / (a->hi - a->lo) : 0.5;
    return a->p0 + t * (a->p1 - a->p0);
}

static double nice_step(double span, int want)
{
    double raw = span / (want > 0 ? want : 1);
    double mag = pow(10, floor(log10(raw)));
    double r = raw / mag;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

static void tick_label(char *buf, size_t cap, const axis_t *a, double u)
{
    if (a->log == 2)
        snprintf(buf, cap, "2^%.0f", u);
    else if (a->log == 10)
        snprintf(buf, cap, "1e%.0f", u);
    else if (u != 0 && (fabs(u) >= 1e6 || fabs(u) < 1e-3))
        snprintf(buf, cap, "%.2g", u);
    else
        snprintf(buf, cap, "%.6g", u);
}

/* Grid lines and labels; vertical: 1 for the y axis (labels left), 0 for x (labels below). */
static void draw_ticks(FILE *f, const axis_t *a, int vertical, double other0, double other1)
{
    if (!(a->hi > a->lo))
        return;
    double step = a->log ? fmax(1, round(nice_step(a->hi - a->lo, 6))) : nice_step(a->hi - a->lo, vertical ? 5 : 8);
    for (double u = ceil(a->lo / step - 1e-9) * step; u <= a->hi + step * 1e-9; u += step) {
        double t = (u - a->lo) / (a->hi - a->lo);
        double p = a->p0 + t * (a->p1 - a->p0);
        char lab[32];
        tick_label(lab, sizeof lab, a, fabs(u) < step * 1e-9 ? 0 : u);
        if (vertical) {
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eaeef2\"/>"
                       "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#57606a\">%s</text>\n",
                    other0, p, other1, p, other0 - 4, p + 4, lab);
        } else {
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eaeef2\"/>"
                       "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#57606a\">%s</text>\n",
                    p, other0, p, other1, p, other1 + 14, lab);
        }
    }
}

static void axis_labels(FILE *f, const fp_svg_opts_t *o, int w, int h)
{
    if (o->xlabel) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#1b1f24\">", ML + (w - ML - MR) / 2, h - 6);
        fp_html_text(f, o->xlabel);
        fputs("</text>\n", f);
    }
    if (o->ylabel) {
        fprintf(f, "<text x=\"12\" y=\"%d\" text-anchor=\"middle\" fill=\"#1b1f24\" transform=\"rotate(-90 12 %d)\">",
                MT + (h - MT - MB) / 2, MT + (h - MT - MB) / 2);
        fp_html_text(f, o->ylabel);
        fputs("</text>\n", f);
    }
}

static int usable(double v, int logy)
{
    return isfinite(v) && (!logy || v > 0);
}

/* ---------------------------------------------------------------- line chart */

static void emit_point(FILE *f, const axis_t *ax, const axis_t *ay, double x, double y, int *pen_down)
{
    fprintf(f, "%c%.1f %.1f", *pen_down ? 'L' : 'M', ax_px(ax, x), ax_px(ay, y));
    *pen_down = 1;
}

static void line_path(FILE *f, const fp_svg_series_t *s, const axis_t *ax, const axis_t *ay, int logy)
{
    fprintf(f, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" stroke-linejoin=\"round\" d=\"", s->color);
    int pen = 0;
    double width = fabs(ax->p1 - ax->p0);
    int thin = (double)s->n > 4 * width;
    long bucket = -1;
    size_t imin = 0, imax = 0;
    int have = 0;
    for (size_t i = 0; i <= s->n; i++) {
        double x = i < s->n ? (s->x ? s->x[i] : (double)i) : NAN;
        double y = i < s->n ? s->y[i] : NAN;
        if (!thin) {
            if (i == s->n)
                break;
            if (!usable(y, logy) || !isfinite(x))
                pen = 0;
            else
                emit_point(f, ax, ay, x, y, &pen);
            continue;
        }
        long b = i < s->n && isfinite(x) ? (long)floor(ax_px(ax, x) - ax->p0) : -2;
        if (i == s->n || b != bucket || !usable(y, logy)) {
            if (have) {   /* flush the bucket: its min and max in the order they occurred */
                size_t a = imin < imax ? imin : imax, c = imin < imax ? imax : imin;
                emit_point(f, ax, ay, s->x ? s->x[a] : (double)a, s->y[a], &pen);
                if (c != a)
                    emit_point(f, ax, ay, s->x ? s->x[c] : (double)c, s->y[c], &pen);
                have = 0;
            }
            if (i == s->n)
                break;
            if (!usable(y, logy)) {
                pen = 0;
                continue;
            }
            bucket = b;
        }
        if (!have || y < s->y[imin])
            imin = i;
        if (!have || y > s->y[imax])
            imax = i;
        have = 1;
    }
    fputs("\"/>\n", f);
}

static void markers(FILE *f, const fp_svg_series_t *s, const axis_t *ax, const axis_t *ay, int logy)
{
    size_t usable_n = 0;
    for (size_t i = 0; i < s->n; i++)
        usable_n += usable(s->y[i], logy) && isfinite(s->x ? s->x[i] : 0);
    size_t every = usable_n > FP_SVG_MAX_MARKERS ? (usable_n + FP_SVG_MAX_MARKERS - 1) / FP_SVG_MAX_MARKERS : 1;
    fprintf(f, "<g fill=\"%s\">", s->color);
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        double x = s->x ? s->x[i] : (double)i;
        if (!usable(s->y[i], logy) || !isfinite(x))
            continue;
        if (k++ % every)
            continue;
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\"/>", ax_px(ax, x), ax_px(ay, s->y[i]));
    }
    fputs("</g>\n", f);
}

static void legend(FILE *f, const fp_svg_series_t *s, size_t ns, int w)
{
    double x = w - MR;
    for (size_t i = ns; i-- > 0;) {
        size_t len = s[i].name ? strlen(s[i].name) : 0;
        x -= 24 + 6.5 * (double)(len > 40 ? 40 : len);
        fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"12\" height=\"4\" fill=\"%s\"/>"
                   "<text x=\"%.1f\" y=\"%d\" fill=\"#1b1f24\">", x, MT - 14, s[i].color, x + 16, MT - 9);
        fp_html_text(f, s[i].name);
        fputs("</text>\n", f);
    }
}

void fp_svg_line_chart(FILE *f, const fp_svg_opts_t *o, const fp_svg_series_t *s, size_t ns)
{
    int w, h;
    dims(o, &w, &h);
    open_figure(f, o, w, h);
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    size_t points = 0;
    for (size_t k = 0; k < ns; k++)
        for (size_t i = 0; i < s[k].n; i++) {
            double x = s[k].x ? s[k].x[i] : (double)i, y = s[k].y[i];
            if (!isfinite(x) || !usable(y, o->logy))
                continue;
            xlo = fmin(xlo, x), xhi = fmax(xhi, x);
            double u = o->logy ? log(y) / log((double)o->logy) : y;
            ylo = fmin(ylo, u), yhi = fmax(yhi, u);
            points++;
        }
    if (points == 0) {
        no_data(f, w, h);
        close_figure(f, o, "no data");
        return;
    }
    if (usable(o->ref, o->logy)) {
        double u = o->logy ? log(o->ref) / log((double)o->logy) : o->ref;
        ylo = fmin(ylo, u), yhi = fmax(yhi, u);
    }
    if (xhi <= xlo)
        xlo -= 1, xhi += 1;
    if (yhi <= ylo) {
        double d = o->logy ? 1 : (fabs(ylo) > 0 ? fabs(ylo) * 0.1 : 1);
        ylo -= d, yhi += d;
    } else if (!o->logy) {
        double pad = (yhi - ylo) * 0.05;
        ylo -= pad, yhi += pad;
    } else {
        ylo = floor(ylo), yhi = ceil(yhi);
        if (yhi <= ylo)
            yhi = ylo + 1;
    }
    axis_t ax = {xlo, xhi, 0, ML, w - MR}, ay = {ylo, yhi, o->logy, h - MB, MT};
    draw_ticks(f, &ay, 1, ML, w - MR);
    draw_ticks(f, &ax, 0, MT, h - MB);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#8c959f\"/>\n", ML, MT,
            w - ML - MR, h - MT - MB);
    if (usable(o->ref, o->logy)) {
        double p = ax_px(&ay, o->ref);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#57606a\" stroke-dasharray=\"4 3\"/>\n",
                ML, p, w - MR, p);
    }
    for (size_t k = 0; k < ns; k++) {
        if (s[k].markers)
            markers(f, &s[k], &ax, &ay, o->logy);
        else
            line_path(f, &s[k], &ax, &ay, o->logy);
    }
    legend(f, s, ns, w);
    axis_labels(f, o, w, h);
    close_figure(f, o, NULL);
}

/* ---------------------------------------------------------------- horizontal bars */

void fp_svg_hbar_chart(FILE *f, const fp_svg_opts_t *o, const char *const *labels, const double *v, size_t n)
{
    enum { LABEL_W = 170, ROW = 12 };
    int w = o->width > 0 ? o->width : 900;
    int h = MT + MB + (int)(n ? n : 1) * ROW;
    open_figure(f, o, w, h);
    double lo = 0, hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i]))
            lo = fmin(lo, v[i]), hi = fmax(hi, v[i]);
    if (!isfinite(hi)) {
        no_data(f, w, h);
        close_figure(f, o, "no data");
        return;
    }
    if (isfinite(o->ref))
        hi = fmax(hi, o->ref), lo = fmin(lo, o->ref);
    if (hi <= lo)
        hi = lo + 1;
    hi += (hi - lo) * 0.05;
    int x0 = ML + LABEL_W - 60;
    axis_t ax = {lo, hi, 0, x0, w - MR};
    draw_ticks(f, &ax, 0, MT, h - MB);
    for (size_t i = 0; i < n; i++) {
        double y = MT + (double)i * ROW;
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"9\" fill=\"#1b1f24\">", x0 - 4,
                y + ROW - 3);
        fp_html_text(f, labels[i]);
        fputs("</text>", f);
        if (isfinite(v[i])) {
            double a = ax_px(&ax, fmin(0, v[i])), b = ax_px(&ax, fmax(0, v[i]));
            int below = isfinite(o->ref) && v[i] < o->ref;
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>", a, y + 1,
                    fmax(b - a, 0.5), ROW - 2, below ? "#d55e00" : "#0072b2");
            fp_html_text(f, labels[i]);
            fprintf(f, ": %.3g</title></rect>", v[i]);
        }
        fputs("\n", f);
    }
    if (isfinite(o->ref)) {
        double p = ax_px(&ax, o->ref);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#1b1f24\" stroke-dasharray=\"4 3\"/>\n",
                p, MT, p, h - MB);
    }
    axis_labels(f, o, w, h);
    close_figure(f, o, NULL);
}

/* ---------------------------------------------------------------- heatmap */

/* A sequential palette (light to dark); level 0 is "blank". */
static const char *const heat[] = {"#ffffff", "#e8f1fa", "#c6dbef", "#9ecae1", "#6baed6",
                                   "#4292c6", "#2171b5", "#08519c", "#08306b"};
enum { HEAT_LEVELS = 8 };

static int level_of(double frac)
{
    if (!(frac > 0))
        return 0;
    /* log10 share: 1e-6 and below -> 1, 1 -> 8 */
    double l = log10(frac);
    int k = 1 + (int)floor((l + 6.0) / 6.0 * (HEAT_LEVELS - 1) + 0.5);
    return k < 1 ? 1 : k > HEAT_LEVELS ? HEAT_LEVELS : k;
}

/* The smallest share level_of puts at level k (2..HEAT_LEVELS): the inverse of its rounding. */
static double level_floor(int k)
{
    return pow(10.0, ((double)(k - 1) - 0.5) * 6.0 / (HEAT_LEVELS - 1) - 6.0);
}

/* "2.7e-6", "0.052", "0.37": a share as a legend shows it. */
static void share_label(char *buf, size_t cap, double v)
{
    if (v >= 0.01) {
        snprintf(buf, cap, "%.2g", v);
        return;
    }
    char m[32];
    snprintf(m, sizeof m, "%.1e", v);   /* "2.7e-06" */
    char *e = strchr(m, 'e');
    if (!e) {
        snprintf(buf, cap, "%s", m);
        return;
    }
    int ex = atoi(e + 1);
    *e = 0;
    size_t len = strlen(m);
    if (len > 2 && m[len - 1] == '0' && m[len - 2] == '.')   /* "1.0" -> "1" */
        m[len - 2] = 0;
    snprintf(buf, cap, "%se%d", m, ex);
}

/* Text widths are estimated, not measured (SVG has no layout here): 0.62 em per character is wider
 * than the common sans-serif faces (DejaVu Sans averages about 0.55 em on these labels), so labels
 * placed apart by the estimate are apart on the page. */
static double text_w(const char *s, double font_px)
{
    return 0.62 * font_px * (double)(s ? strlen(s) : 0);
}

enum { MARK_FONT = 8, MARK_LANE = 10, SCALE_ROW = 22, MAX_LANES = 16 };

/* The colour scale under a heatmap: one swatch per level with the smallest share it stands for. */
static void colour_scale(FILE *f, int x, int baseline)
{
    static const char lead[] = "colour: share of the layer's finite nonzero values, at least";
    fprintf(f, "<g class=\"colour-scale\" font-size=\"9\"><text x=\"%d\" y=\"%d\" fill=\"#57606a\">", x, baseline);
    fp_html_text(f, lead);
    fputs("</text>", f);
    double cx = x + text_w(lead, 9) + 8;
    for (int k = 1; k <= HEAT_LEVELS; k++) {
        char lab[32], lo[32], hi[32];
        if (k == 1)
            snprintf(lab, sizeof lab, "> 0");
        else
            share_label(lab, sizeof lab, level_floor(k));
        if (k == 1)
            snprintf(lo, sizeof lo, "0");
        else
            share_label(lo, sizeof lo, level_floor(k));
        if (k < HEAT_LEVELS)
            share_label(hi, sizeof hi, level_floor(k + 1));
        else
            snprintf(hi, sizeof hi, "1");
        fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"14\" height=\"10\" fill=\"%s\" stroke=\"#8c959f\""
                   " stroke-width=\"0.5\"><title>share %s%s to %s%s</title></rect>"
                   "<text x=\"%.1f\" y=\"%d\" fill=\"#1b1f24\">",
                cx, baseline - 9, heat[k], k == 1 ? "above " : "", lo, hi, k < HEAT_LEVELS ? " (excluded)" : "",
                cx + 17, baseline);
        fp_html_text(f, lab);
        fputs("</text>", f);
        cx += 17 + text_w(lab, 9) + 10;
    }
    fputs("</g>\n", f);
}

typedef struct {
    double p;          /* pixel column of the line */
    size_t m;          /* index into marks */
} mark_pos_t;

static int cmp_mark_pos(const void *a, const void *b)
{
    double x = ((const mark_pos_t *)a)->p, y = ((const mark_pos_t *)b)->p;
    return x < y ? -1 : x > y;
}

void fp_svg_heatmap(FILE *f, const fp_svg_opts_t *o, const char *const *rows, size_t nrows, int col_lo, int ncols,
                    const double *frac, const fp_svg_mark_t *marks, size_t nmarks)
{
    enum { LABEL_W = 150 };
    int w = o->width > 0 ? o->width : 900;
    double rh = nrows <= 40 ? 10 : nrows <= 100 ? 6 : 4;
    int x0 = ML + LABEL_W - 60;
    axis_t ax = {col_lo, col_lo + ncols, 0, x0, w - MR};
    /* Threshold labels: horizontal, each in the first lane above the cells where it clears the labels
     * already there (and the title row above the lanes), so none overlaps another or the title. */
    mark_pos_t pos[64];
    size_t npos = 0;
    for (size_t m = 0; m < nmarks && npos < sizeof pos / sizeof pos[0]; m++)
        if (ncols > 0 && !(marks[m].at < col_lo || marks[m].at > col_lo + ncols))
            pos[npos++] = (mark_pos_t){ax_px(&ax, marks[m].at), m};
    qsort(pos, npos, sizeof pos[0], cmp_mark_pos);
    double lane_end[MAX_LANES];
    int lane_of[64], nlanes = 0;
    double lx[64];
    int anchor_end[64];
    for (size_t i = 0; i < npos; i++) {
        double tw = text_w(marks[pos[i].m].label, MARK_FONT);
        double start = pos[i].p + 3;
        anchor_end[i] = start + tw > w - MR;
        if (anchor_end[i])
            start = pos[i].p - 3 - tw;
        int l = 0;
        while (l < nlanes && lane_end[l] + 6 > start)
            l++;
        if (l == MAX_LANES)
            l = MAX_LANES - 1;
        if (l == nlanes)
            nlanes++;
        lane_end[l] = start + tw;
        lane_of[i] = l;
        lx[i] = anchor_end[i] ? pos[i].p - 3 : pos[i].p + 3;
    }
    int y0 = MT + 6 + MARK_LANE * (nlanes > 1 ? nlanes : 1);
    int hbase = y0 + MB + (int)ceil(rh * (double)(nrows ? nrows : 1));
    int h = hbase + SCALE_ROW;
    open_figure(f, o, w, h);
    if (nrows == 0 || ncols <= 0) {
        no_data(f, w, h);
        close_figure(f, o, "no data");
        return;
    }
    double cw = (double)(w - MR - x0) / ncols;
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%.1f\" fill=\"#fafbfc\" stroke=\"#8c959f\"/>\n", x0, y0,
            w - MR - x0, rh * (double)nrows);
    int label_every = (int)ceil(9.0 / rh);
    for (size_t r = 0; r < nrows; r++) {
        double y = y0 + rh * (double)r;
        if (r % (size_t)label_every == 0) {
            fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"8\" fill=\"#1b1f24\">", x0 - 4,
                    y + fmin(rh, 9) - 1);
            fp_html_text(f, rows[r]);
            fputs("</text>", f);
        }
        for (int c = 0; c < ncols;) {   /* one rect per run of equal levels */
            int lv = level_of(frac[r * (size_t)ncols + (size_t)c]), e = c + 1;
            while (e < ncols && level_of(frac[r * (size_t)ncols + (size_t)e]) == lv)
                e++;
            if (lv > 0)
                fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>", x0 + cw * c, y,
                        cw * (e - c), rh, heat[lv]);
            c = e;
        }
        fputs("\n", f);
    }
    /* binade axis */
    for (int c = 0; c <= ncols; c++) {
        int e = col_lo + c;
        if (e % 8 != 0)
            continue;
        double p = ax_px(&ax, e);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#8c959f\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#57606a\">2^%d</text>\n",
                p, y0 + rh * (double)nrows, p, y0 + rh * (double)nrows + 4, p, y0 + rh * (double)nrows + 15, e);
    }
    char outside[512] = "";
    size_t olen = 0;
    for (size_t m = 0; m < nmarks; m++) {
        if (marks[m].at < col_lo || marks[m].at > col_lo + ncols) {
            olen += (size_t)snprintf(outside + olen, olen < sizeof outside ? sizeof outside - olen : 0, "%s%s (2^%.1f)",
                                     olen ? ", " : "beyond the plotted range: ", marks[m].label, marks[m].at);
            if (olen >= sizeof outside)
                olen = sizeof outside - 1;
        }
    }
    /* the lines first, then the labels over them on a white halo: a line running down from a label in
     * an upper lane does not strike through a label below it */
    for (size_t i = 0; i < npos; i++) {
        const fp_svg_mark_t *mk = &marks[pos[i].m];
        int base = MT + 6 + MARK_LANE * lane_of[i];
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.5\""
                   " stroke-dasharray=\"3 2\"><title>", pos[i].p, base + 2, pos[i].p, y0 + rh * (double)nrows, mk->color);
        fp_html_text(f, mk->label);
        fputs("</title></line>\n", f);
    }
    for (size_t i = 0; i < npos; i++) {
        const fp_svg_mark_t *mk = &marks[pos[i].m];
        fprintf(f, "<text class=\"mark-label\" x=\"%.1f\" y=\"%d\" font-size=\"%d\" fill=\"%s\" stroke=\"#ffffff\""
                   " stroke-width=\"3\" paint-order=\"stroke\"%s>",
                lx[i], MT + 6 + MARK_LANE * lane_of[i], MARK_FONT, mk->color, anchor_end[i] ? " text-anchor=\"end\"" : "");
        fp_html_text(f, mk->label);
        fputs("</text>\n", f);
    }
    axis_labels(f, o, w, hbase);
    colour_scale(f, 8, h - 8);
    close_figure(f, o, outside);
}
