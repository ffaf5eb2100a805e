/* report_html_numerics.c — the HTML report's Numerics section (report_html_internal.h): per arm and tensor
 * role, the values out of the arm's format over every sampled step and the layer with the most; then, per
 * arm in <details>, one layer x binade heatmap per tensor role of each layer's latest sampled histogram, with
 * the smallest subnormal, smallest normal and largest finite value of fp16, bf16, E4M3 and E5M2 marked. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "error.h"
#include "formats.h"
#include "hist.h"
#include "html_writer.h"
#include "report_html_internal.h"
#include "store.h"
#include "svg_chart.h"
#include "units.h"

static double log2_of(float x)
{
    return log2((double)x);
}

/* Per arm and tensor role: the values out of the arm's format over every sampled step, and the layer
 * with the most; the heatmaps below hold the per-layer detail. */
static void numerics_table(FILE *f, const fp_summary_t *s)
{
    fputs("<table id=\"numerics-table\"><thead><tr><th>arm</th><th>format</th><th>sampled steps</th>"
          "<th>role</th><th>overflow</th><th>most overflow</th><th>underflow</th><th>most underflow</th>"
          "</tr></thead><tbody>\n", f);
    for (size_t i = 0; i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        if (a->nnumerics == 0)
            continue;
        for (int role = 0; role < FP_SUMMARY_ROLES; role++) {
            char b[FP_UNIT_BUF * 4];
            fputs("<tr>", f);
            fp_html_td(f, fp_rh_arm_label(a), 0);
            fp_html_td(f, fp_rh_format_shown(b, sizeof b, a), 0);
            snprintf(b, sizeof b, "%lld", (long long)a->hist_steps);
            fp_rh_td_num(f, b);
            snprintf(b, sizeof b, "%s%s", fp_tensor_role_name((fp_tensor_role)role),
                     fp_summary_role_matters(a, role, 0) || fp_summary_role_matters(a, role, 1) ? ""
                                                                                                 : " (not in the headline)");
            fp_html_td(f, b, 0);
            snprintf(b, sizeof b, "%lld", (long long)a->over_role[role]);
            fp_rh_td_num(f, b);
            fp_html_td(f, a->ntop_over_role[role] ? a->top_over_role[role][0].name : "", 0);
            if (a->flushed_role[role])
                snprintf(b, sizeof b, "%lld (%lld flushed to zero)", (long long)a->under_role[role],
                         (long long)a->flushed_role[role]);
            else
                snprintf(b, sizeof b, "%lld", (long long)a->under_role[role]);
            fp_rh_td_num(f, b);
            fp_html_td(f, a->ntop_under_role[role] ? a->top_under_role[role][0].name : "", 0);
            fputs("</tr>\n", f);
        }
    }
    fputs("</tbody></table>\n", f);
}

int fp_rh_numerics(FILE *f, fp_reader_t *r, const fp_summary_t *s)
{
    const fp_format_info_t *fi[4];
    for (int k = 0; k < 4; k++)
        fi[k] = fp_format_info((fp_format)k);
    static const char *const mcol[4] = {"#d55e00", "#009e73", "#cc79a7", "#e69f00"};
    fp_svg_mark_t marks[12];
    char mlabel[12][40];
    for (int k = 0; k < 4; k++) {
        snprintf(mlabel[3 * k], 40, "%s min subnormal", fi[k]->name);
        snprintf(mlabel[3 * k + 1], 40, "%s min normal", fi[k]->name);
        snprintf(mlabel[3 * k + 2], 40, "%s max", fi[k]->name);
        marks[3 * k] = (fp_svg_mark_t){log2_of(fi[k]->min_subnormal), mlabel[3 * k], mcol[k]};
        marks[3 * k + 1] = (fp_svg_mark_t){log2_of(fi[k]->min_normal), mlabel[3 * k + 1], mcol[k]};
        marks[3 * k + 2] = (fp_svg_mark_t){log2_of(fi[k]->max_finite), mlabel[3 * k + 2], mcol[k]};
    }
    fputs("<p class=\"muted\">Heatmaps (open one arm below): rows: layers; columns: binades (2^e &le; |x| &lt; 2^(e+1)) of each layer's latest "
          "sampled histogram; colour: the share of the layer's finite nonzero values (log scale). Dashed lines: the "
          "smallest subnormal, smallest normal and largest finite value of fp16, bf16, E4M3 and E5M2; the colour "
          "scale is under each heatmap.</p>\n", f);
    numerics_table(f, s);
    int rc = FP_OK;
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        fprintf(f, "<details class=\"detail\" id=\"heatmaps-%zu\"><summary>", i);
        fp_html_textf(f, "%s (run %lld): layer x binade heatmaps per tensor role", fp_rh_arm_label(a),
                      (long long)a->run.id);
        fputs("</summary>\n", f);
        for (int role = 0; rc == FP_OK && role < FP_ROLE_COUNT; role++) {
            fp_hist_row_t *h;
            size_t n;
            if ((rc = fp_reader_histograms_role(r, a->run.id, role, -1, &h, &n)) != FP_OK)
                break;
            if (n == 0) {
                free(h);
                continue;
            }
            int lo = FP_HIST_BINADES, hi = -1;
            for (size_t k = 0; k < n; k++)
                for (int b = 0; b < FP_HIST_BINADES; b++)
                    if (h[k].hist.binade[b]) {
                        lo = b < lo ? b : lo;
                        hi = b > hi ? b : hi;
                    }
            int elo = (hi < 0 ? -25 : lo + FP_HIST_EXP_MIN), ehi = (hi < 0 ? 17 : hi + FP_HIST_EXP_MIN);
            elo = elo > -25 ? -25 : elo - 1;
            ehi = ehi < 17 ? 17 : ehi + 1;
            int ncols = ehi - elo + 1;
            double *frac = calloc(n * (size_t)ncols, sizeof *frac);
            const char **rows = malloc(n * sizeof *rows);
            char (*names)[FP_RH_LAYER_LABEL] = malloc(n * sizeof *names);
            if (!frac || !rows || !names) {
                rc = fp_fail(FP_ENOMEM, "out of memory");
            } else {
                for (size_t k = 0; k < n; k++) {
                    rows[k] = fp_rh_layer_label(names[k], h[k].layer, fp_arm_layer(a, h[k].layer));
                    uint64_t tot = fp_hist_finite_nonzero(&h[k].hist);
                    for (int c = 0; c < ncols && tot; c++) {
                        int b = elo + c - FP_HIST_EXP_MIN;
                        if (b >= 0 && b < FP_HIST_BINADES)
                            frac[k * (size_t)ncols + (size_t)c] = (double)h[k].hist.binade[b] / (double)tot;
                    }
                }
                char id[48], title[160];
                snprintf(id, sizeof id, "heatmap-%zu-%s", i, fp_tensor_role_name((fp_tensor_role)role));
                snprintf(title, sizeof title, "%s: %s, layers x binades (step %lld)", fp_rh_arm_label(a),
                         fp_tensor_role_name((fp_tensor_role)role), (long long)h[0].step);
                fp_svg_opts_t o = {id, title, "log2 |x|", NULL, 0, 0, 0, NAN};
                fp_svg_heatmap(f, &o, rows, n, elo, ncols, frac, marks, 12);
            }
            free(frac);
            free(rows);
            free(names);
            free(h);
        }
        fputs("</details>\n", f);
    }
    return rc;
}
