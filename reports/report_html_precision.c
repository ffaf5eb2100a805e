/* report_html_precision.c — the HTML report's Precision error section (report_html_internal.h): each
 * low-precision arm's rounding error against the reference per layer, as stored by the riding comparison
 * (docs/design.md, "Rounding error against the fp32 arm"): a chart of the activations' mean relative L2 per
 * layer, and in <details> the table of every layer and role (samples, mean / max rel. L2, max |difference|,
 * min cosine; n/a where not measured). The all-reduce's rounding follows it (report_html_dist.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "error.h"
#include "html_writer.h"
#include "report_html_internal.h"
#include "store.h"
#include "svg_chart.h"

int fp_rh_precision(FILE *f, fp_reader_t *r, const fp_summary_t *s)
{
    int rc = FP_OK;
    fp_rh_xy_t *v = calloc(s->narms ? s->narms : 1, sizeof *v);
    fp_svg_series_t *ser = calloc(s->narms ? s->narms : 1, sizeof *ser);
    fp_precision_sum_t **rows = calloc(s->narms ? s->narms : 1, sizeof *rows);
    size_t *nrows = calloc(s->narms ? s->narms : 1, sizeof *nrows);
    if (!v || !ser || !rows || !nrows)
        rc = fp_fail(FP_ENOMEM, "out of memory");
    size_t ns = 0;
    char names[16][80];
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
        if ((rc = fp_reader_precision_summary(r, s->arms[i].run.id, &rows[i], &nrows[i])) != FP_OK)
            break;
        if (nrows[i] == 0)
            continue;
        v[i].x = malloc(nrows[i] * sizeof(double));
        v[i].y = malloc(nrows[i] * sizeof(double));
        if (!v[i].x || !v[i].y) {
            rc = fp_fail(FP_ENOMEM, "out of memory");
            break;
        }
        size_t m = 0;
        for (size_t k = 0; k < nrows[i]; k++)
            if (rows[i][k].role == FP_ROLE_ACTIVATION) {
                v[i].x[m] = rows[i][k].layer;
                v[i].y[m++] = rows[i][k].mean_rel_l2;
            }
        snprintf(names[i % 16], sizeof names[0], "%s activation rel. L2", fp_rh_arm_label(&s->arms[i]));
        if (m)
            ser[ns++] = (fp_svg_series_t){names[i % 16], v[i].x, v[i].y, m, fp_svg_color(i), m < 3};
    }
    if (rc == FP_OK) {
        fp_svg_opts_t o = {"chart-precision-error", "Precision error per layer (mean relative L2 vs the reference)",
                           "layer", "relative L2 error", 0, 0, 10, NAN};
        fp_svg_line_chart(f, &o, ser, ns);
        size_t total = 0;
        for (size_t i = 0; i < s->narms; i++)
            total += nrows[i];
        fprintf(f, "<details class=\"detail\" id=\"precision-detail\"><summary>Per-layer precision error (%zu rows)"
                   "</summary>\n", total);
        fputs("<table id=\"precision-table\"><thead><tr><th>arm</th><th>#</th><th>layer</th><th>role</th>"
              "<th>samples</th><th>mean rel. L2</th><th>max rel. L2</th><th>max abs error</th><th>min cosine</th>"
              "</tr></thead><tbody>\n", f);
        for (size_t i = 0; i < s->narms; i++)
            for (size_t k = 0; k < nrows[i]; k++) {
                const fp_precision_sum_t *p = &rows[i][k];
                const fp_layer_row_t *L = fp_rh_find_layer(s, p->layer);
                fputs("<tr>", f);
                fp_html_td(f, fp_rh_arm_label(&s->arms[i]), 0);
                fprintf(f, "<td class=\"n\">%d</td>", p->layer);
                fp_html_td(f, L ? L->name : "", 0);
                fp_html_td(f, fp_tensor_role_name((fp_tensor_role)p->role), 0);
                fprintf(f, "<td class=\"n\">%lld</td>", (long long)p->samples);
                fp_rh_td_num_or_na(f, "%.3g", p->mean_rel_l2);
                fp_rh_td_num_or_na(f, "%.3g", p->max_rel_l2);
                fp_rh_td_num_or_na(f, "%.3g", p->max_abs);
                fp_rh_td_num_or_na(f, "%.6f", p->min_cosine);
                fputs("</tr>\n", f);
            }
        fputs("</tbody></table>\n</details>\n", f);
    }
    for (size_t i = 0; rows && i < s->narms; i++)
        free(rows[i]);
    free(rows);
    free(nrows);
    fp_rh_xy_free(v, s->narms);
    free(ser);
    return rc;
}
