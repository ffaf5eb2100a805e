/* report.h — what `fp16probe report` and `fp16probe export --chrome-trace` produce from a session of
 * the run store: one self-contained HTML file, one RFC 4180 CSV per view, a Chrome Trace Event JSON.
 * Promise: every output file is written atomically (a temporary file beside it, renamed at the end);
 * on any error no output file is created or replaced. Errors are one line (fp_error_message()). */
#ifndef FP_REPORTS_REPORT_H
#define FP_REPORTS_REPORT_H

#include <stdint.h>
#include <stdio.h>
#include "json_min.h"
#include "store_reader.h"
#include "summary.h"

typedef struct {
    const char *db_label;    /* the database as the report names it */
    int64_t session;         /* <= 0: the latest */
    int64_t warmup;          /* < 0: the default rule (summary.h) */
    const char *html;        /* output file, or NULL */
    const char *csv_dir;     /* output directory (created when missing, parent must exist), or NULL */
} fp_report_opts_t;

/* Load the session and write what o asks for; all outputs or none. */
int fp_report_write(fp_reader_t *r, const fp_report_opts_t *o);

/* The pieces (report_html.c, report_csv.c); write to open streams, the caller checks ferror. */
int fp_report_html(FILE *f, fp_reader_t *r, const fp_summary_t *s, const char *db_label);
/* The CSV views, in this order: summary, steps, layers, histograms, kernels, ranks (".csv" appended; ranks:
 * data parallel, per arm and rank, only a header for a session trained alone). */
#define FP_REPORT_CSV_VIEWS 6
const char *fp_report_csv_view(int i);
int fp_report_csv(FILE *f, int view, fp_reader_t *r, const fp_summary_t *s);
/* One CSV field per RFC 4180: quoted (quotes doubled) when it holds a comma, quote, CR or LF. */
void fp_csv_field(FILE *f, const char *s);

/* ---- Chrome Trace Event JSON (trace_chrome.c) ---- */
typedef struct {
    int64_t session;         /* <= 0: the latest */
    size_t max_steps;        /* sampled steps traced per arm (0: 20), the latest ones */
    size_t max_counter_points;   /* per counter series (0: 5000), evenly thinned */
} fp_trace_opts_t;
int fp_trace_chrome(FILE *f, fp_reader_t *r, const fp_summary_t *s, const fp_trace_opts_t *o);
/* Load the session and write the trace to path atomically. */
int fp_trace_chrome_write(fp_reader_t *r, const fp_trace_opts_t *o, const char *path);
/* JSON string literals: fp_json_string / fp_json_escape in lib/json_min.h (included above). */

#endif
