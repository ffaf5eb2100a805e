/* report_html_common.c — the small helpers the HTML report's section writers share
 * (report_html_internal.h): an arm's label, numeric cells, the format an arm's numerics refer to, a
 * layer's row and label, chart series buffers. Promise: no output but the cell asked for; no state. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "formats.h"
#include "html_writer.h"
#include "report_html_internal.h"
#include "units.h"

const char *fp_rh_arm_label(const fp_arm_t *a)
{
    return a->run.arm[0] ? a->run.arm : a->run.policy;
}

void fp_rh_td_num(FILE *f, const char *s)
{
    fp_html_td(f, s, 1);
}

void fp_rh_td_num_or_na(FILE *f, const char *fmt, double x)
{
    char b[FP_UNIT_BUF];
    snprintf(b, sizeof b, fmt, x);
    fp_rh_td_num(f, isnan(x) ? "n/a" : b);
}

char *fp_rh_format_shown(char *buf, size_t size, const fp_arm_t *a)
{
    snprintf(buf, size, "%s%s", fp_format_info((fp_format)a->fmt_shown)->name, a->fmt < 0 ? " (would be)" : "");
    return buf;
}

const fp_layer_row_t *fp_rh_find_layer(const fp_summary_t *s, int l)
{
    const fp_layer_row_t *L = fp_arm_layer(&s->arms[s->ref], l);
    for (size_t i = 0; !L && i < s->narms; i++)
        L = fp_arm_layer(&s->arms[i], l);
    return L;
}

const char *fp_rh_layer_label(char *buf, int l, const fp_layer_row_t *L)
{
    snprintf(buf, FP_RH_LAYER_LABEL, "%d %s", l, L ? L->name : "");
    return buf;
}

void fp_rh_xy_free(fp_rh_xy_t *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        free(v[i].x);
        free(v[i].y);
    }
    free(v);
}

fp_rh_xy_t *fp_rh_xy_alloc(size_t n, size_t len)
{
    fp_rh_xy_t *v = calloc(n ? n : 1, sizeof *v);
    for (size_t i = 0; v && i < n; i++) {
        v[i].x = malloc((len ? len : 1) * sizeof(double));
        v[i].y = malloc((len ? len : 1) * sizeof(double));
        if (!v[i].x || !v[i].y) {
            fp_rh_xy_free(v, n);
            return NULL;
        }
    }
    return v;
}
