/* report_html_internal.h — what the HTML report's section writers share, internal to reports/report_html*.c:
 * the small helpers (report_html_common.c) and one writer per section of the page, each in a file of its own;
 * report_html.c puts them in order (report.h fp_report_html). Every writer writes to an open stream (the
 * caller checks ferror) and escapes every string from the database; those that read the database or allocate
 * return FP_OK or an fp_fail code. */
#ifndef FP_REPORTS_REPORT_HTML_INTERNAL_H
#define FP_REPORTS_REPORT_HTML_INTERNAL_H

#include <stddef.h>
#include <stdio.h>
#include "dist_report.h"
#include "store_reader.h"
#include "summary.h"

/* ---------------------------------------------------------------- shared helpers (report_html_common.c) */
/* The arm's name as the report shows it: its arm name, else its policy. */
const char *fp_rh_arm_label(const fp_arm_t *a);
/* A right-aligned cell of escaped text. */
void fp_rh_td_num(FILE *f, const char *s);
/* A right-aligned cell of x printed with fmt (one double conversion, e.g. "%.3g"); "n/a" when x is NaN. */
void fp_rh_td_num_or_na(FILE *f, const char *fmt, double x);
/* The format the arm's numerics refer to, " (would be)" after it for an fp32 / tf32 arm; returns buf. */
char *fp_rh_format_shown(char *buf, size_t size, const fp_arm_t *a);
/* The layer's row in the reference arm, else in the first arm that has it; NULL: none has it. */
const fp_layer_row_t *fp_rh_find_layer(const fp_summary_t *s, int l);
/* A layer's label in charts, "INDEX NAME" (L may be NULL: no name), into buf of FP_RH_LAYER_LABEL bytes. */
#define FP_RH_LAYER_LABEL 80
const char *fp_rh_layer_label(char *buf, int l, const fp_layer_row_t *L);

/* One chart series' points per arm. */
typedef struct {
    double *x, *y;
} fp_rh_xy_t;
/* n series with room for len points each (at least one); NULL when out of memory. */
fp_rh_xy_t *fp_rh_xy_alloc(size_t n, size_t len);
/* Frees v and each of its n series (v may be NULL: nothing to free). */
void fp_rh_xy_free(fp_rh_xy_t *v, size_t n);

/* ---------------------------------------------------------------- the sections, in the page's order */
/* Summary: the verdict per arm, the summary table, the layers with the most overflow / underflow
 * (report_html_summary.c). */
void fp_rh_summary(FILE *f, const fp_summary_t *s);
/* Training: loss, validation top-1, throughput, speedup over the reference per window, loss scale with the
 * skipped steps (report_html_training.c). */
int fp_rh_training(FILE *f, const fp_summary_t *s);
/* Data parallel: per-arm figures, 16-bit vs fp32 all-reduce, step time per rank; and, in the precision
 * section, the all-reduce's own rounding (report_html_dist.c). */
void fp_rh_dist(FILE *f, const fp_summary_t *s, const fp_dist_summary_t *d);
void fp_rh_allreduce_rounding(FILE *f, const fp_summary_t *s, const fp_dist_summary_t *d);
/* Layers: per-layer times, speedups, shares and numerics, per-layer speedup bars (report_html_layers.c). */
int fp_rh_layers(FILE *f, fp_reader_t *r, const fp_summary_t *s);
/* Numerics: values out of each arm's format per role, layer x binade heatmaps (report_html_numerics.c). */
int fp_rh_numerics(FILE *f, fp_reader_t *r, const fp_summary_t *s);
/* Precision error: per-layer rounding error against the reference, chart and table (report_html_precision.c). */
int fp_rh_precision(FILE *f, fp_reader_t *r, const fp_summary_t *s);
/* Kernels: each arm's top kernels (report_html_kernels.c). */
int fp_rh_kernels(FILE *f, fp_reader_t *r, const fp_summary_t *s);
/* Events: every arm's events, at most the first 200 of each listed (report_html_events.c). */
int fp_rh_events(FILE *f, fp_reader_t *r, const fp_summary_t *s);
/* Environment: each arm's run and machine, the session's configuration (report_html_env.c). */
int fp_rh_environment(FILE *f, fp_reader_t *r, const fp_summary_t *s);

#endif
