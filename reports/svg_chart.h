/* svg_chart.h — charts as inline SVG for the HTML report: line charts (long series downsampled to a
 * min/max pair per pixel column, so a 50,000-step curve costs about 2 x width points), horizontal bar
 * charts and layer x binade heatmaps with format limits drawn. Colours are SVG presentation
 * attributes (no CSS, no script); every label is escaped. Each chart is <figure id=ID class="chart">
 * holding one <svg>, drawn even without data ("no data"), so a reader always finds it. */
#ifndef FP_REPORTS_SVG_CHART_H
#define FP_REPORTS_SVG_CHART_H

#include <stddef.h>
#include <stdio.h>

#define FP_SVG_MAX_MARKERS 2000

typedef struct {
    const char *name;        /* legend text */
    const double *x, *y;     /* x ascending; NaN y breaks the line */
    size_t n;
    const char *color;       /* "#rrggbb" */
    int markers;             /* 1: points only (at most FP_SVG_MAX_MARKERS, evenly thinned) */
} fp_svg_series_t;

typedef struct {
    const char *id;          /* element id */
    const char *title, *xlabel, *ylabel;
    int width, height;       /* 0: 900 x 280 */
    int logy;                /* 0 linear; 2 or 10: logarithmic value axis */
    double ref;              /* NaN: none; else a dashed reference line at this value */
} fp_svg_opts_t;

/* The colour of series i (a fixed, colour-blind-safe palette). */
const char *fp_svg_color(size_t i);

void fp_svg_line_chart(FILE *f, const fp_svg_opts_t *o, const fp_svg_series_t *s, size_t ns);
/* One bar per label, value axis horizontal (o->ref: e.g. speedup 1.0); NaN values draw no bar. */
void fp_svg_hbar_chart(FILE *f, const fp_svg_opts_t *o, const char *const *labels, const double *v, size_t n);

typedef struct {
    double at;               /* column coordinate (log2 |x|) of the line */
    const char *label;       /* "fp16 max" */
    const char *color;
} fp_svg_mark_t;
/* rows x ncols cells, cell (r, c) = frac[r * ncols + c] in [0, 1] (share of the row), column c is
 * binade col_lo + c; 0 or NaN cells stay blank. A colour scale (<g class="colour-scale">: one swatch per
 * level with the smallest share it stands for) runs under the axis. Marks are dashed lines with
 * horizontal labels (class "mark-label") in as many lanes above the cells as keep them apart (and below
 * the title); marks outside the columns are listed in the caption. */
void fp_svg_heatmap(FILE *f, const fp_svg_opts_t *o, const char *const *rows, size_t nrows, int col_lo, int ncols,
                    const double *frac, const fp_svg_mark_t *marks, size_t nmarks);

#endif
