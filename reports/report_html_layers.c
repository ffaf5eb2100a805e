/* report_html_layers.c — the HTML report's Layers section (report_html_internal.h), collapsed in <details>:
 * one row per layer with each arm's time (the sum over forward, backward-data and backward-weights of the
 * median time per step after the warm-up), each low-precision arm's speedup over the reference, each arm's
 * share of its summed layer times, each low-precision arm's overflow / underflow / non-finite counts; then
 * one bar chart of the per-layer speedups per low-precision arm. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "error.h"
#include "html_writer.h"
#include "report_html_internal.h"
#include "store.h"
#include "svg_chart.h"
#include "units.h"

typedef struct {
    double *time;      /* per layer: sum over phases of the median time per step (ns); NaN: none */
    double total;
    int nl;
} layer_times_t;

static int arm_layer_times(fp_reader_t *r, const fp_arm_t *a, int nl, layer_times_t *t)
{
    t->nl = nl;
    t->total = 0;
    t->time = malloc((size_t)(nl > 0 ? nl : 1) * sizeof *t->time);
    if (!t->time)
        return fp_fail(FP_ENOMEM, "out of memory");
    for (int l = 0; l < nl; l++)
        t->time[l] = NAN;
    if (a->nsteps == 0 || a->warmup >= a->nsteps)
        return FP_OK;
    fp_layer_sum_t *rows;
    size_t n;
    int rc = fp_reader_layer_summary(r, a->run.id, a->steps[a->warmup].step, INT64_MAX, &rows, &n);
    if (rc != FP_OK)
        return rc;
    for (size_t i = 0; i < n; i++) {
        int l = rows[i].layer;
        if (l < 0 || l >= nl)
            continue;
        t->time[l] = (isnan(t->time[l]) ? 0 : t->time[l]) + rows[i].median_ns;
        t->total += rows[i].median_ns;
    }
    free(rows);
    return FP_OK;
}

static const fp_layer_numerics_t *find_numerics(const fp_arm_t *a, int layer, int role)
{
    for (size_t i = 0; i < a->nnumerics; i++)
        if (a->numerics[i].layer == layer && a->numerics[i].role == role)
            return &a->numerics[i];
    return NULL;
}

int fp_rh_layers(FILE *f, fp_reader_t *r, const fp_summary_t *s)
{
    int nl = fp_summary_layer_count(s);
    layer_times_t *lt = calloc(s->narms ? s->narms : 1, sizeof *lt);
    int rc = lt ? FP_OK : fp_fail(FP_ENOMEM, "out of memory");
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++)
        rc = arm_layer_times(r, &s->arms[i], nl, &lt[i]);
    if (rc == FP_OK) {
        fputs("<p class=\"muted\">Time per layer: the sum over forward, backward-data and backward-weights of the "
              "median time per step after warm-up. Share: of the arm's summed layer times. Numerics: values that "
              "overflow / underflow the arm's format, and NaN/Inf, summed over every sampled histogram.</p>\n", f);
        fprintf(f, "<details class=\"detail\" id=\"layer-detail\"><summary>Per-layer times, speedups and numerics "
                   "(%d layers, %zu arms)</summary>\n<div class=\"scroll\">", nl, s->narms);
        fputs("<table id=\"layer-table\"><thead><tr><th>#</th><th>layer</th><th>type</th>", f);
        for (size_t i = 0; i < s->narms; i++) {
            fputs("<th>", f);
            fp_html_textf(f, "time %s", fp_rh_arm_label(&s->arms[i]));
            fputs("</th>", f);
        }
        for (size_t i = 0; i < s->narms; i++)
            if (!s->arms[i].is_ref) {
                fputs("<th>", f);
                fp_html_textf(f, "speedup %s", fp_rh_arm_label(&s->arms[i]));
                fputs("</th>", f);
            }
        for (size_t i = 0; i < s->narms; i++) {
            fputs("<th>", f);
            fp_html_textf(f, "share %s", fp_rh_arm_label(&s->arms[i]));
            fputs("</th>", f);
        }
        for (size_t i = 0; i < s->narms; i++)
            if (!s->arms[i].is_ref) {
                fputs("<th>", f);
                fp_html_textf(f, "numerics %s (overflow / underflow / non-finite)", fp_rh_arm_label(&s->arms[i]));
                fputs("</th>", f);
            }
        fputs("</tr></thead><tbody>\n", f);
        const layer_times_t *R = &lt[s->ref];
        char b[FP_UNIT_BUF];
        for (int l = 0; l < nl; l++) {
            const fp_layer_row_t *L = fp_rh_find_layer(s, l);
            fprintf(f, "<tr><td class=\"n\">%d</td>", l);
            fp_html_td(f, L ? L->name : "", 0);
            fp_html_td(f, L ? L->type : "", 0);
            for (size_t i = 0; i < s->narms; i++)
                fp_rh_td_num(f, fp_fmt_ns(b, lt[i].time[l]));
            for (size_t i = 0; i < s->narms; i++)
                if (!s->arms[i].is_ref)
                    fp_rh_td_num(f, fp_fmt_ratio(b, R->time[l] / lt[i].time[l]));
            for (size_t i = 0; i < s->narms; i++)
                fp_rh_td_num(f, fp_fmt_pct(b, lt[i].total > 0 ? lt[i].time[l] / lt[i].total : NAN));
            for (size_t i = 0; i < s->narms; i++) {
                const fp_arm_t *a = &s->arms[i];
                if (a->is_ref)
                    continue;
                int64_t over = 0, under = 0, nf = 0, seen = 0;
                for (int role = 0; role < FP_ROLE_COUNT; role++) {
                    const fp_layer_numerics_t *x = find_numerics(a, l, role);
                    if (!x)
                        continue;
                    seen = 1;
                    over += x->overflow[a->fmt_shown];
                    under += x->underflow[a->fmt_shown];
                    nf += x->nan + x->inf;
                }
                if (seen)
                    snprintf(b, sizeof b, "%lld / %lld / %lld", (long long)over, (long long)under, (long long)nf);
                else
                    snprintf(b, sizeof b, "n/a");
                fp_rh_td_num(f, b);
            }
            fputs("</tr>\n", f);
        }
        fputs("</tbody></table></div>\n", f);
        /* speedup bars, one chart per low-precision arm */
        const char **labels = malloc((size_t)(nl > 0 ? nl : 1) * sizeof *labels);
        double *v = malloc((size_t)(nl > 0 ? nl : 1) * sizeof *v);
        char (*names)[FP_RH_LAYER_LABEL] = malloc((size_t)(nl > 0 ? nl : 1) * sizeof *names);
        if (!labels || !v || !names)
            rc = fp_fail(FP_ENOMEM, "out of memory");
        for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
            if (s->arms[i].is_ref)
                continue;
            for (int l = 0; l < nl; l++) {
                labels[l] = fp_rh_layer_label(names[l], l, fp_rh_find_layer(s, l));
                v[l] = R->time[l] / lt[i].time[l];
            }
            char id[48], title[160];
            snprintf(id, sizeof id, "chart-layer-speedup-%zu", i);
            snprintf(title, sizeof title, "Per-layer speedup of %s over %s", fp_rh_arm_label(&s->arms[i]),
                     fp_rh_arm_label(&s->arms[s->ref]));
            fp_svg_opts_t o = {id, title, "speedup (x)", NULL, 0, 0, 0, 1.0};
            fp_svg_hbar_chart(f, &o, labels, v, (size_t)nl);
        }
        free(labels);
        free(v);
        free(names);
        fputs("</details>\n", f);
    }
    for (size_t i = 0; lt && i < s->narms; i++)
        free(lt[i].time);
    free(lt);
    return rc;
}
