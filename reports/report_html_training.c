/* report_html_training.c — the HTML report's Training section (report_html_internal.h): line charts over the
 * steps, one series per arm: training loss, validation top-1, throughput, the speedup over the reference
 * (median step times per window of steps after the warm-up) and the loss scale with each arm's skipped steps
 * (only arms whose loss scaler ran; the others are named under the chart). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "html_writer.h"
#include "report_html_internal.h"
#include "svg_chart.h"

static int step_chart(FILE *f, const fp_summary_t *s, const char *id, const char *title, const char *ylabel,
                      int which, int logy)
{
    size_t maxn = 0;
    for (size_t i = 0; i < s->narms; i++)
        maxn = s->arms[i].nsteps > maxn ? s->arms[i].nsteps : maxn;
    fp_rh_xy_t *v = fp_rh_xy_alloc(s->narms, maxn);
    fp_svg_series_t *ser = calloc(s->narms ? s->narms : 1, sizeof *ser);
    if (!v || !ser) {
        fp_rh_xy_free(v, s->narms);
        free(ser);
        return fp_fail(FP_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        for (size_t k = 0; k < a->nsteps; k++) {
            const fp_step_row_t *st = &a->steps[k];
            v[i].x[k] = (double)st->step;
            double y = NAN;
            if (which == 0)
                y = st->loss;
            else if (which == 1)
                y = isfinite(st->samples_per_s) ? st->samples_per_s
                    : (st->wall_ns > 0 && a->run.batch_size > 0 ? a->run.batch_size * 1e9 / (double)st->wall_ns : NAN);
            else
                y = st->loss_scale;
            v[i].y[k] = y;
        }
        ser[i] = (fp_svg_series_t){fp_rh_arm_label(a), v[i].x, v[i].y, a->nsteps, fp_svg_color(i), 0};
    }
    fp_svg_opts_t o = {id, title, "step", ylabel, 0, 0, logy, NAN};
    if (which != 2) {
        fp_svg_line_chart(f, &o, ser, s->narms);
    } else {   /* loss scale plus skipped-step markers */
        fp_svg_series_t *all = calloc(2 * s->narms, sizeof *all);
        fp_rh_xy_t *mk = fp_rh_xy_alloc(s->narms, maxn);
        if (!all || !mk) {
            free(all);
            fp_rh_xy_free(mk, s->narms);
            fp_rh_xy_free(v, s->narms);
            free(ser);
            return fp_fail(FP_ENOMEM, "out of memory");
        }
        size_t n = 0;
        char names[16][64];
        for (size_t i = 0; i < s->narms; i++) {
            const fp_arm_t *a = &s->arms[i];
            size_t m = 0;
            double last = NAN;
            for (size_t k = 0; k < a->nsteps; k++) {
                if (isfinite(a->steps[k].loss_scale))
                    last = a->steps[k].loss_scale;
                if (a->steps[k].skipped) {
                    mk[i].x[m] = (double)a->steps[k].step;
                    mk[i].y[m++] = isfinite(last) ? last : 1.0;
                }
            }
            /* only arms whose loss scaler ran: the trainer stores 1 for the others (a flat line that
             * would read as a scale of 1) */
            if (!a->has_scaler)
                continue;
            all[n++] = ser[i];
            if (m > 0) {
                snprintf(names[i % 16], sizeof names[0], "%s skipped", fp_rh_arm_label(a));
                all[n++] = (fp_svg_series_t){names[i % 16], mk[i].x, mk[i].y, m, fp_svg_color(i + 4), 1};
            }
        }
        fp_svg_line_chart(f, &o, all, n);
        int none = 0;
        for (size_t i = 0; i < s->narms; i++)
            if (!s->arms[i].has_scaler) {
                fputs(none++ ? ", " : "<p class=\"muted\" id=\"loss-scale-note\">Not drawn (no loss scaler): ", f);
                fp_html_text(f, fp_rh_arm_label(&s->arms[i]));
            }
        if (none)
            fputs(".</p>\n", f);
        free(all);
        fp_rh_xy_free(mk, s->narms);
    }
    fp_rh_xy_free(v, s->narms);
    free(ser);
    return FP_OK;
}

static int accuracy_chart(FILE *f, const fp_summary_t *s)
{
    fp_rh_xy_t *v = calloc(s->narms ? s->narms : 1, sizeof *v);
    fp_svg_series_t *ser = calloc(s->narms ? s->narms : 1, sizeof *ser);
    int rc = v && ser ? FP_OK : fp_fail(FP_ENOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        v[i].x = malloc((a->nevals + 1) * sizeof(double));
        v[i].y = malloc((a->nevals + 1) * sizeof(double));
        if (!v[i].x || !v[i].y) {
            rc = fp_fail(FP_ENOMEM, "out of memory");
            break;
        }
        size_t m = 0;
        for (size_t k = 0; k < a->nevals; k++)
            if (strcmp(a->evals[k].split, "val") == 0) {
                v[i].x[m] = (double)a->evals[k].step;
                v[i].y[m++] = 100.0 * a->evals[k].top1;
            }
        if (m > 0)
            ser[n++] = (fp_svg_series_t){fp_rh_arm_label(a), v[i].x, v[i].y, m, fp_svg_color(i), m == 1};
    }
    if (rc == FP_OK) {
        fp_svg_opts_t o = {"chart-accuracy", "Validation top-1 accuracy", "step", "top-1 (%)", 0, 0, 0, NAN};
        fp_svg_line_chart(f, &o, ser, n);
    }
    fp_rh_xy_free(v, s->narms);
    free(ser);
    return rc;
}

/* Median step time of the reference over the median of each arm, in buckets of steps. */
static int speedup_chart(FILE *f, const fp_summary_t *s)
{
    enum { BUCKETS = 100 };
    const fp_arm_t *R = &s->arms[s->ref];
    fp_rh_xy_t *v = fp_rh_xy_alloc(s->narms, BUCKETS);
    fp_svg_series_t *ser = calloc(s->narms ? s->narms : 1, sizeof *ser);
    size_t maxn = 0;
    for (size_t i = 0; i < s->narms; i++)
        maxn = s->arms[i].nsteps > maxn ? s->arms[i].nsteps : maxn;
    double *ra = malloc((maxn + 1) * sizeof *ra), *aa = malloc((maxn + 1) * sizeof *aa);
    int rc = v && ser && ra && aa ? FP_OK : fp_fail(FP_ENOMEM, "out of memory");
    size_t n = 0;
    if (rc == FP_OK && R->nsteps > R->warmup) {
        int64_t lo = R->steps[R->warmup].step, hi = R->steps[R->nsteps - 1].step + 1;
        int64_t span = hi - lo, nb = span < BUCKETS ? span : BUCKETS;
        for (size_t i = 0; i < s->narms; i++) {
            const fp_arm_t *a = &s->arms[i];
            if (a->is_ref)
                continue;
            size_t m = 0, pr = R->warmup, pa = a->warmup;
            for (int64_t b = 0; b < nb; b++) {
                int64_t b0 = lo + span * b / nb, b1 = lo + span * (b + 1) / nb;
                size_t nr = 0, na = 0;
                for (; pr < R->nsteps && R->steps[pr].step < b1; pr++)
                    if (R->steps[pr].step >= b0 && !R->steps[pr].skipped && R->steps[pr].wall_ns > 0)
                        ra[nr++] = (double)R->steps[pr].wall_ns;
                for (; pa < a->nsteps && a->steps[pa].step < b1; pa++)
                    if (a->steps[pa].step >= b0 && !a->steps[pa].skipped && a->steps[pa].wall_ns > 0)
                        aa[na++] = (double)a->steps[pa].wall_ns;
                if (nr && na) {
                    v[i].x[m] = (double)(b0 + b1) / 2;
                    v[i].y[m++] = fp_median(ra, nr) / fp_median(aa, na);
                }
            }
            if (m)
                ser[n++] = (fp_svg_series_t){fp_rh_arm_label(a), v[i].x, v[i].y, m, fp_svg_color(i), 0};
        }
    }
    if (rc == FP_OK) {
        fp_svg_opts_t o = {"chart-speedup", "Speedup over the reference (median step time per window)", "step",
                           "speedup (x)", 0, 0, 0, 1.0};
        fp_svg_line_chart(f, &o, ser, n);
    }
    fp_rh_xy_free(v, s->narms);
    free(ser);
    free(ra);
    free(aa);
    return rc;
}

int fp_rh_training(FILE *f, const fp_summary_t *s)
{
    int rc = step_chart(f, s, "chart-loss", "Training loss", "loss", 0, 0);
    if (rc == FP_OK)
        rc = accuracy_chart(f, s);
    if (rc == FP_OK)
        rc = step_chart(f, s, "chart-throughput", "Throughput", "samples/s", 1, 0);
    if (rc == FP_OK)
        rc = speedup_chart(f, s);
    if (rc == FP_OK)
        rc = step_chart(f, s, "chart-loss-scale", "Loss scale and skipped steps", "loss scale", 2, 2);
    return rc;
}
