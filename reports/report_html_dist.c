/* report_html_dist.c — the HTML report's data-parallel figures (dist_report.h, report_html_internal.h): the
 * Data parallel section (per arm: ranks, global batch, images/s and step of the job, exposed and all-reduce
 * shares, bytes and times per step, the straggler, the scaling efficiency; a 16-bit all-reduce beside an fp32
 * one; step time per rank, the straggler's row marked) and, under Precision error, the all-reduce's own
 * rounding: the 16-bit reduction against the same gradients reduced in fp32. */
#include <math.h>
#include <stdio.h>
#include "html_writer.h"
#include "report_html_internal.h"
#include "units.h"

void fp_rh_dist(FILE *f, const fp_summary_t *s, const fp_dist_summary_t *d)
{
    char b[FP_UNIT_BUF], eff[200];
    fputs("<p class=\"muted\">Steps after the warm-up, not skipped. Job step: the slowest rank's step, per step; "
          "images/s: global batch / mean job step. Shares: exposed (not overlapped) all-reduce time and the "
          "all-reduce's whole time, over the wall time of every rank's steps. Straggler: the slowest rank's mean "
          "step / the fastest rank's.</p>\n", f);
    fputs("<table id=\"dist-table\"><thead><tr><th>arm</th><th>ranks</th><th>global batch</th><th>images/s (job)</th>"
          "<th>job step</th><th>exposed share</th><th>all-reduce share</th><th>all-reduce</th><th>bytes/step per rank"
          "</th><th>all-reduce time/step</th><th>exposed/step</th><th>straggler</th><th>scaling efficiency</th>"
          "</tr></thead><tbody>\n", f);
    for (size_t i = 0; i < d->narms; i++) {
        const fp_dist_arm_t *a = &d->arms[i];
        fputs("<tr>", f);
        fp_html_td(f, fp_rh_arm_label(&s->arms[i]), 0);
        if (!a->ranks) {
            fputs("<td class=\"n\">1</td><td colspan=\"11\">trained alone</td></tr>\n", f);
            continue;
        }
        fprintf(f, "<td class=\"n\">%d</td><td class=\"n\">%lld</td>", a->ranks, (long long)a->global_batch);
        fp_rh_td_num(f, fp_fmt_num(b, a->images_per_s, 1));
        fp_rh_td_num(f, fp_fmt_ns(b, a->job_step_ns));
        fp_rh_td_num(f, fp_fmt_pct(b, a->exposed_share));
        fp_rh_td_num(f, fp_fmt_pct(b, a->comm_share));
        fp_html_td(f, a->allreduce, 0);
        fp_rh_td_num(f, fp_fmt_bytes(b, a->bytes));
        fp_rh_td_num(f, fp_fmt_ns(b, a->comm_ns));
        fp_rh_td_num(f, fp_fmt_ns(b, a->exposed_ns));
        if (a->slowest >= 0) {
            char r[FP_UNIT_BUF];
            fprintf(f, "<td class=\"n\">rank %d: ", a->slowest);
            fp_html_text(f, fp_fmt_ratio(r, a->straggler));
            fputs("</td>", f);
        } else {
            fp_rh_td_num(f, "n/a");
        }
        fp_dist_fmt_efficiency(eff, sizeof eff, a);
        fp_html_td(f, eff, 0);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
    int i16 = fp_dist_arm_with(d, "16"), i32 = fp_dist_arm_with(d, "fp32");
    if (i16 >= 0 && i32 >= 0) {
        const fp_dist_arm_t *h = &d->arms[i16], *w = &d->arms[i32];
        char x[FP_UNIT_BUF], y[FP_UNIT_BUF];
        fputs("<h3>All-reduce: 16-bit vs fp32</h3>\n<table id=\"dist-wire-table\"><thead><tr><th></th>", f);
        fputs("<th>", f);
        fp_html_textf(f, "%s (%s)", h->allreduce, fp_rh_arm_label(&s->arms[i16]));
        fputs("</th><th>", f);
        fp_html_textf(f, "fp32 (%s)", fp_rh_arm_label(&s->arms[i32]));
        fputs("</th><th>ratio</th></tr></thead><tbody>\n", f);
        const char *what[3] = {"bytes/step per rank", "all-reduce time/step", "exposed/step"};
        const double hv[3] = {h->bytes, h->comm_ns, h->exposed_ns}, wv[3] = {w->bytes, w->comm_ns, w->exposed_ns};
        for (int k = 0; k < 3; k++) {
            fputs("<tr>", f);
            fp_html_td(f, what[k], 0);
            fp_rh_td_num(f, k ? fp_fmt_ns(x, hv[k]) : fp_fmt_bytes(x, hv[k]));
            fp_rh_td_num(f, k ? fp_fmt_ns(y, wv[k]) : fp_fmt_bytes(y, wv[k]));
            fp_rh_td_num(f, fp_fmt_ratio(b, hv[k] / wv[k]));
            fputs("</tr>\n", f);
        }
        fputs("</tbody></table>\n", f);
    }
    fputs("<h3>Step time per rank</h3>\n<table id=\"dist-ranks-table\"><thead><tr><th>arm</th><th>rank</th>"
          "<th>steps</th><th>mean step</th><th>mean compute</th><th>mean all-reduce</th><th>mean exposed</th>"
          "<th>slowest step</th><th>vs the fastest rank</th></tr></thead><tbody>\n", f);
    for (size_t i = 0; i < d->narms; i++)
        for (size_t k = 0; k < d->arms[i].nranks_rows; k++) {
            const fp_dist_rank_row_t *q = &d->arms[i].ranks_rows[k];
            fprintf(f, "<tr%s>", q->rank == d->arms[i].slowest ? " class=\"straggler\"" : "");
            fp_html_td(f, fp_rh_arm_label(&s->arms[i]), 0);
            fprintf(f, "<td class=\"n\">%d</td><td class=\"n\">%lld</td>", q->rank, (long long)q->steps);
            fp_rh_td_num(f, fp_fmt_ns(b, q->mean_wall_ns));
            fp_rh_td_num(f, fp_fmt_ns(b, q->mean_compute_ns));
            fp_rh_td_num(f, fp_fmt_ns(b, q->mean_comm_ns));
            fp_rh_td_num(f, fp_fmt_ns(b, q->mean_exposed_ns));
            fp_rh_td_num(f, fp_fmt_ns(b, q->max_wall_ns >= 0 ? (double)q->max_wall_ns : NAN));
            fp_rh_td_num(f, fp_fmt_ratio(b, q->vs_fastest));
            fputs("</tr>\n", f);
        }
    fputs("</tbody></table>\n", f);
}

/* The all-reduce's own rounding beside the other precision errors. */
void fp_rh_allreduce_rounding(FILE *f, const fp_summary_t *s, const fp_dist_summary_t *d)
{
    char b[FP_UNIT_BUF];
    fputs("<h3>All-reduce rounding</h3>\n<p class=\"muted\">The gradients reduced in the 16-bit wire format "
          "against the same gradients reduced in fp32, at the sampled steps: rel. L2 of the whole gradient, the "
          "layer with the largest mean rel. L2, and the summed values that overflowed to Inf or flushed to zero "
          "(totals).</p>\n<table id=\"allreduce-error-table\"><thead><tr><th>arm</th><th>wire</th>"
          "<th>sampled steps</th><th>mean rel. L2</th><th>max rel. L2</th><th>worst layer</th>"
          "<th>its mean rel. L2</th><th>overflowed</th><th>underflowed</th></tr></thead><tbody>\n", f);
    for (size_t i = 0; i < d->narms; i++) {
        const fp_dist_arm_t *a = &d->arms[i];
        if (!a->ranks)
            continue;
        fputs("<tr>", f);
        fp_html_td(f, fp_rh_arm_label(&s->arms[i]), 0);
        if (!a->wire[0]) {
            fputs("<td colspan=\"8\">", f);
            fp_html_textf(f, "none: reduced in %s", a->allreduce);
            fputs("</td></tr>\n", f);
            continue;
        }
        fp_html_td(f, a->wire, 0);
        fprintf(f, "<td class=\"n\">%lld</td>", (long long)a->err_steps);
        fp_rh_td_num_or_na(f, "%.3g", a->rel_l2_mean);
        fp_rh_td_num_or_na(f, "%.3g", a->rel_l2_max);
        if (a->worst_layer >= 0) {
            fputs("<td>", f);
            fp_html_textf(f, "%d %s", a->worst_layer, a->worst_layer_name);
            fputs("</td>", f);
            snprintf(b, sizeof b, "%.3g", a->worst_layer_rel_l2);
            fp_rh_td_num(f, b);
        } else {
            fputs("<td>n/a</td><td class=\"n\">n/a</td>", f);
        }
        snprintf(b, sizeof b, "%lld", (long long)a->overflow);
        fp_rh_td_num(f, a->overflow < 0 ? "n/a" : b);
        snprintf(b, sizeof b, "%lld", (long long)a->underflow);
        fp_rh_td_num(f, a->underflow < 0 ? "n/a" : b);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}
