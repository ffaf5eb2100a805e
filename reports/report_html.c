/* report_html.c — the sections of the HTML report (report.h): verdict and summary, training curves,
 * per-layer table and speedup bars, layer x binade heatmaps per tensor role with the fp16 / bf16 /
 * E4M3 / E5M2 limits, precision error, top kernels (nsys cuda_gpu_kern_sum columns + tensor cores),
 * events and the environment. Per-layer detail (the layer table and bars, the heatmaps, the precision
 * table, a long event list, each arm's environment) is collapsed in <details>, so the summary,
 * training and numerics come first. Promise: every string from the database is escaped; no script. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "dist_report.h"
#include "error.h"
#include "formats.h"
#include "html_writer.h"
#include "report.h"
#include "store.h"
#include "svg_chart.h"
#include "units.h"

#define TOP_KERNELS 20
#define MAX_EVENTS 200

static const char *arm_label(const fp_arm_t *a)
{
    return a->run.arm[0] ? a->run.arm : a->run.policy;
}

static void td_num(FILE *f, const char *s)
{
    fp_html_td(f, s, 1);
}

/* ---------------------------------------------------------------- summary */

static void verdict(FILE *f, const fp_summary_t *s)
{
    const fp_arm_t *R = &s->arms[s->ref];
    char b[9][FP_UNIT_BUF];
    for (size_t i = 0; i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        if (a->is_ref)
            continue;
        fputs("<p class=\"verdict\">", f);
        fp_html_textf(f, "%s vs %s: ", arm_label(a), arm_label(R));
        if (isfinite(a->speedup))
            fp_html_textf(f, "%s %s (median step %s vs %s), throughput %s", fp_fmt_ratio(b[0], a->speedup),
                          a->speedup >= 1 ? "faster" : "the speed", fp_fmt_ns(b[1], a->median_ns),
                          fp_fmt_ns(b[2], R->median_ns), fp_fmt_ratio(b[3], a->samples_per_s / R->samples_per_s));
        if (isfinite(a->speedup) && a->emulated)
            fp_html_textf(f, " (%s)", fp_summary_speed_note(a));
        else
            fp_html_text(f, "speedup n/a (no step times)");
        fp_html_textf(f, "; peak memory %s; energy per step %s; final loss %s vs %s (%s); val top-1 %s (%s); "
                         "%lld skipped steps (%s), final loss scale %s.",
                      fp_fmt_ratio(b[0], a->mem_ratio), fp_fmt_ratio(b[1], a->energy_ratio),
                      fp_fmt_num(b[2], a->final_loss, 4), fp_fmt_num(b[3], R->final_loss, 4),
                      fp_fmt_signed(b[4], a->loss_gap, 4, NULL), fp_fmt_pct(b[5], a->val_top1),
                      fp_fmt_signed(b[6], a->top1_gap, 2, "pt"), (long long)a->skipped, fp_fmt_pct(b[7], a->skip_rate),
                      fp_summary_fmt_loss_scale(b[8], a));
        if (a->lost_samples)
            fp_html_textf(f, " Lost updates: %.4g%% of the weights with a nonzero gradient (mean over %d sampled steps).",
                          a->lost_pct, a->lost_samples);
        if (a->top1_gap_within)
            fp_html_text(f, " The top-1 gap is within its 95% uncertainty: no difference shown.");
        fputs("</p>\n", f);
    }
    if (s->narms == 1)
        fputs("<p class=\"verdict\">One arm only: no comparison.</p>\n", f);
}

typedef void (*cell_fn)(FILE *f, const fp_arm_t *a, char *buf);

static void c_policy(FILE *f, const fp_arm_t *a, char *b) { (void)b; fp_html_td(f, a->run.policy, 0); }
static void c_status(FILE *f, const fp_arm_t *a, char *b)
{
    snprintf(b, FP_UNIT_BUF * 8, "%s%s%.300s", a->run.status, a->run.failure[0] ? ": " : "", a->run.failure);
    fp_html_td(f, b, 0);
}
static void c_steps(FILE *f, const fp_arm_t *a, char *b)
{
    snprintf(b, FP_UNIT_BUF, "%zu (warm-up %zu)", a->nsteps, a->warmup);
    td_num(f, b);
}
static void c_median(FILE *f, const fp_arm_t *a, char *b) { td_num(f, fp_fmt_ns(b, a->median_ns)); }
static void c_speedup(FILE *f, const fp_arm_t *a, char *b)
{
    char r[FP_UNIT_BUF];
    fp_fmt_ratio(r, a->speedup);
    if (a->emulated && isfinite(a->speedup))
        snprintf(b, FP_UNIT_BUF * 8, "%s (%s)", r, fp_summary_speed_note(a));
    else
        snprintf(b, FP_UNIT_BUF * 8, "%s", r);
    td_num(f, b);
}
static void c_tput(FILE *f, const fp_arm_t *a, char *b) { td_num(f, fp_fmt_num(b, a->samples_per_s, 1)); }
static void c_mem(FILE *f, const fp_arm_t *a, char *b) { td_num(f, fp_fmt_bytes(b, a->mem_peak)); }
static void c_memr(FILE *f, const fp_arm_t *a, char *b) { td_num(f, fp_fmt_ratio(b, a->mem_ratio)); }
static void c_energy(FILE *f, const fp_arm_t *a, char *b)
{
    if (isnan(a->energy_per_step))
        snprintf(b, FP_UNIT_BUF * 8, "n/a%s%.150s%s", a->energy_why[0] ? " (" : "", a->energy_why,
                 a->energy_why[0] ? ")" : "");
    else
        snprintf(b, FP_UNIT_BUF, "%.4g J", a->energy_per_step);
    td_num(f, b);
}
static void c_energyr(FILE *f, const fp_arm_t *a, char *b) { td_num(f, fp_fmt_ratio(b, a->energy_ratio)); }
static void c_host_cpu(FILE *f, const fp_arm_t *a, char *b)
{
    char v[FP_UNIT_BUF];
    fp_summary_fmt_host_cpu(v, a);
    if (a->nhost_cpu)
        snprintf(b, FP_UNIT_BUF * 8, "%s; %s", v, fp_summary_host_cpu_note(a));
    else
        snprintf(b, FP_UNIT_BUF * 8, "%s", v);
    td_num(f, b);
}
static void c_loss(FILE *f, const fp_arm_t *a, char *b) { td_num(f, fp_fmt_num(b, a->final_loss, 4)); }
static void c_lossgap(FILE *f, const fp_arm_t *a, char *b) { td_num(f, fp_fmt_signed(b, a->loss_gap, 4, NULL)); }
static void c_top1(FILE *f, const fp_arm_t *a, char *b)
{
    char p[FP_UNIT_BUF];
    fp_fmt_pct(p, a->val_top1);
    if (a->val_images > 0 && isfinite(a->val_top1_lo))
        snprintf(b, FP_UNIT_BUF * 8, "%s (95%% CI %.2f..%.2f%%, n=%lld)", p, 100 * a->val_top1_lo, 100 * a->val_top1_hi,
                 (long long)a->val_images);
    else
        snprintf(b, FP_UNIT_BUF * 8, "%s", p);
    td_num(f, b);
}
static void c_top1gap(FILE *f, const fp_arm_t *a, char *b)
{
    char g[FP_UNIT_BUF];
    fp_fmt_signed(g, a->top1_gap, 2, "pt");
    snprintf(b, FP_UNIT_BUF * 8, "%s%s", g, a->top1_gap_within ? " (within the uncertainty)" : "");
    td_num(f, b);
}
static void c_lost(FILE *f, const fp_arm_t *a, char *b)
{
    if (a->lost_samples)
        snprintf(b, FP_UNIT_BUF * 8, "%.4g%% (max %.4g%%, %d sampled steps)", a->lost_pct, a->lost_max, a->lost_samples);
    else
        snprintf(b, FP_UNIT_BUF * 8, "n/a");
    td_num(f, b);
}
static void c_under(FILE *f, const fp_arm_t *a, char *b)
{
    long long u = 0, fl = 0;
    for (int role = 0; role < FP_SUMMARY_ROLES; role++)
        if (fp_summary_role_matters(a, role, 0))
            u += a->under_role[role], fl += a->flushed_role[role];
    char fls[FP_UNIT_BUF * 2] = "";
    if (fl)
        snprintf(fls, sizeof fls, " (%lld flushed to zero)", fl);
    if (a->nnumerics == 0)
        snprintf(b, FP_UNIT_BUF * 8, "n/a");
    else
        snprintf(b, FP_UNIT_BUF * 8, "%lld over %lld sampled steps%s%s", u, (long long)a->hist_steps, fls,
                 a->fmt < 0 ? " (would be)" : "");
    td_num(f, b);
}
static void c_skipped(FILE *f, const fp_arm_t *a, char *b)
{
    char p[FP_UNIT_BUF];
    snprintf(b, FP_UNIT_BUF * 2, "%lld (%s)", (long long)a->skipped, fp_fmt_pct(p, a->skip_rate));
    td_num(f, b);
}
static void c_scale(FILE *f, const fp_arm_t *a, char *b) { td_num(f, fp_summary_fmt_loss_scale(b, a)); }

static void summary_table(FILE *f, const fp_summary_t *s)
{
    static const struct {
        const char *name;
        cell_fn fn;
    } rows[] = {
        {"policy", c_policy}, {"status", c_status}, {"steps", c_steps}, {"median step time (after warm-up)", c_median},
        {"speedup vs reference", c_speedup}, {"throughput (samples/s)", c_tput}, {"peak memory", c_mem},
        {"memory ratio", c_memr}, {"energy per step", c_energy}, {"energy ratio", c_energyr},
        {"host CPU / step (training thread)", c_host_cpu},
        {"final train loss", c_loss}, {"loss gap to reference", c_lossgap}, {"validation top-1", c_top1},
        {"top-1 gap", c_top1gap}, {"skipped steps", c_skipped}, {"final loss scale", c_scale},
        {"lost updates", c_lost}, {"underflow (roles that matter)", c_under},
    };
    fputs("<div class=\"scroll\"><table id=\"summary-table\"><thead><tr><th></th>", f);
    for (size_t i = 0; i < s->narms; i++) {
        fputs("<th>", f);
        fp_html_textf(f, "%s (run %lld)%s", arm_label(&s->arms[i]), (long long)s->arms[i].run.id,
                      s->arms[i].is_ref ? ", reference" : "");
        fputs("</th>", f);
    }
    fputs("</tr></thead><tbody>\n", f);
    char buf[FP_UNIT_BUF * 8];
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        fputs("<tr>", f);
        fp_html_th(f, rows[r].name);
        for (size_t i = 0; i < s->narms; i++)
            rows[r].fn(f, &s->arms[i], buf);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table></div>\n", f);
    for (size_t i = 0; i < s->narms; i++)
        if (s->arms[i].nhost_cpu) {   /* what the host CPU row holds, once (summary.h) */
            fputs("<p class=\"muted\">", f);
            fp_html_textf(f, "%s.", FP_SUMMARY_HOST_CPU_MEANING);
            fputs("</p>\n", f);
            break;
        }
}

static void top_table(FILE *f, const fp_summary_t *s)
{
    int64_t hs = 0;
    for (size_t i = 0; i < s->narms; i++)
        hs = s->arms[i].hist_steps > hs ? s->arms[i].hist_steps : hs;
    fprintf(f, "<h3>Layers with the most overflow and underflow</h3>\n<p class=\"muted\">Sums over %lld sampled steps, "
               "of activation gradients and weight gradients (and for overflow of activations), and of weights and updates for arms without "
               "fp32 master weights (half). A low-precision arm's underflow includes the values it flushed to zero: "
               "its zeros beyond the reference arm's in the same layer and role. %s.</p>\n", (long long)hs,
            FP_SUMMARY_LOSS_MEANING);
    fputs("<table id=\"top-layers\"><thead><tr>"
          "<th>arm</th><th>format</th><th>most overflow</th><th>most underflow</th></tr></thead><tbody>\n", f);
    for (size_t i = 0; i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        fputs("<tr>", f);
        fp_html_td(f, arm_label(a), 0);
        fputs("<td>", f);
        fp_html_textf(f, "%s%s", fp_format_info((fp_format)a->fmt_shown)->name, a->fmt < 0 ? " (would be)" : "");
        fputs("</td>", f);
        for (int k = 0; k < 2; k++) {
            const fp_top_layer_t *t = k ? a->top_under : a->top_over;
            int n = k ? a->ntop_under : a->ntop_over;
            fputs("<td>", f);
            if (n == 0)
                fputs("<span class=\"muted\">none</span>", f);
            for (int j = 0; j < n; j++) {
                fp_html_textf(f, "%s%s (%lld)", j ? ", " : "", t[j].name[0] ? t[j].name : "?", (long long)t[j].count);
            }
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

/* ---------------------------------------------------------------- training curves */

typedef struct {
    double *x, *y;
} xy_t;

static void xy_free(xy_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].x);
        free(v[i].y);
    }
    free(v);
}

static xy_t *xy_alloc(size_t n, size_t len)
{
    xy_t *v = calloc(n ? n : 1, sizeof *v);
    for (size_t i = 0; v && i < n; i++) {
        v[i].x = malloc((len ? len : 1) * sizeof(double));
        v[i].y = malloc((len ? len : 1) * sizeof(double));
        if (!v[i].x || !v[i].y) {
            xy_free(v, n);
            return NULL;
        }
    }
    return v;
}

static int step_chart(FILE *f, const fp_summary_t *s, const char *id, const char *title, const char *ylabel,
                      int which, int logy)
{
    size_t maxn = 0;
    for (size_t i = 0; i < s->narms; i++)
        maxn = s->arms[i].nsteps > maxn ? s->arms[i].nsteps : maxn;
    xy_t *v = xy_alloc(s->narms, maxn);
    fp_svg_series_t *ser = calloc(s->narms ? s->narms : 1, sizeof *ser);
    if (!v || !ser) {
        xy_free(v, s->narms);
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
        ser[i] = (fp_svg_series_t){arm_label(a), v[i].x, v[i].y, a->nsteps, fp_svg_color(i), 0};
    }
    fp_svg_opts_t o = {id, title, "step", ylabel, 0, 0, logy, NAN};
    if (which != 2) {
        fp_svg_line_chart(f, &o, ser, s->narms);
    } else {   /* loss scale plus skipped-step markers */
        fp_svg_series_t *all = calloc(2 * s->narms, sizeof *all);
        xy_t *mk = xy_alloc(s->narms, maxn);
        if (!all || !mk) {
            free(all);
            xy_free(mk, s->narms);
            xy_free(v, s->narms);
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
                snprintf(names[i % 16], sizeof names[0], "%s skipped", arm_label(a));
                all[n++] = (fp_svg_series_t){names[i % 16], mk[i].x, mk[i].y, m, fp_svg_color(i + 4), 1};
            }
        }
        fp_svg_line_chart(f, &o, all, n);
        int none = 0;
        for (size_t i = 0; i < s->narms; i++)
            if (!s->arms[i].has_scaler) {
                fputs(none++ ? ", " : "<p class=\"muted\" id=\"loss-scale-note\">Not drawn (no loss scaler): ", f);
                fp_html_text(f, arm_label(&s->arms[i]));
            }
        if (none)
            fputs(".</p>\n", f);
        free(all);
        xy_free(mk, s->narms);
    }
    xy_free(v, s->narms);
    free(ser);
    return FP_OK;
}

static int accuracy_chart(FILE *f, const fp_summary_t *s)
{
    xy_t *v = calloc(s->narms ? s->narms : 1, sizeof *v);
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
            ser[n++] = (fp_svg_series_t){arm_label(a), v[i].x, v[i].y, m, fp_svg_color(i), m == 1};
    }
    if (rc == FP_OK) {
        fp_svg_opts_t o = {"chart-accuracy", "Validation top-1 accuracy", "step", "top-1 (%)", 0, 0, 0, NAN};
        fp_svg_line_chart(f, &o, ser, n);
    }
    xy_free(v, s->narms);
    free(ser);
    return rc;
}

/* Median step time of the reference over the median of each arm, in buckets of steps. */
static int speedup_chart(FILE *f, const fp_summary_t *s)
{
    enum { BUCKETS = 100 };
    const fp_arm_t *R = &s->arms[s->ref];
    xy_t *v = xy_alloc(s->narms, BUCKETS);
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
                ser[n++] = (fp_svg_series_t){arm_label(a), v[i].x, v[i].y, m, fp_svg_color(i), 0};
        }
    }
    if (rc == FP_OK) {
        fp_svg_opts_t o = {"chart-speedup", "Speedup over the reference (median step time per window)", "step",
                           "speedup (x)", 0, 0, 0, 1.0};
        fp_svg_line_chart(f, &o, ser, n);
    }
    xy_free(v, s->narms);
    free(ser);
    free(ra);
    free(aa);
    return rc;
}

/* ---------------------------------------------------------------- layers */

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

/* The layer's row in the reference arm, else in the first arm that has it. */
static const fp_layer_row_t *find_layer(const fp_summary_t *s, int l)
{
    const fp_layer_row_t *L = fp_arm_layer(&s->arms[s->ref], l);
    for (size_t i = 0; !L && i < s->narms; i++)
        L = fp_arm_layer(&s->arms[i], l);
    return L;
}

static int layers_section(FILE *f, fp_reader_t *r, const fp_summary_t *s)
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
            fp_html_textf(f, "time %s", arm_label(&s->arms[i]));
            fputs("</th>", f);
        }
        for (size_t i = 0; i < s->narms; i++)
            if (!s->arms[i].is_ref) {
                fputs("<th>", f);
                fp_html_textf(f, "speedup %s", arm_label(&s->arms[i]));
                fputs("</th>", f);
            }
        for (size_t i = 0; i < s->narms; i++) {
            fputs("<th>", f);
            fp_html_textf(f, "share %s", arm_label(&s->arms[i]));
            fputs("</th>", f);
        }
        for (size_t i = 0; i < s->narms; i++)
            if (!s->arms[i].is_ref) {
                fputs("<th>", f);
                fp_html_textf(f, "numerics %s (overflow / underflow / non-finite)", arm_label(&s->arms[i]));
                fputs("</th>", f);
            }
        fputs("</tr></thead><tbody>\n", f);
        const layer_times_t *R = &lt[s->ref];
        char b[FP_UNIT_BUF];
        for (int l = 0; l < nl; l++) {
            const fp_layer_row_t *L = find_layer(s, l);
            fprintf(f, "<tr><td class=\"n\">%d</td>", l);
            fp_html_td(f, L ? L->name : "", 0);
            fp_html_td(f, L ? L->type : "", 0);
            for (size_t i = 0; i < s->narms; i++)
                td_num(f, fp_fmt_ns(b, lt[i].time[l]));
            for (size_t i = 0; i < s->narms; i++)
                if (!s->arms[i].is_ref)
                    td_num(f, fp_fmt_ratio(b, R->time[l] / lt[i].time[l]));
            for (size_t i = 0; i < s->narms; i++)
                td_num(f, fp_fmt_pct(b, lt[i].total > 0 ? lt[i].time[l] / lt[i].total : NAN));
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
                td_num(f, b);
            }
            fputs("</tr>\n", f);
        }
        fputs("</tbody></table></div>\n", f);
        /* speedup bars, one chart per low-precision arm */
        const char **labels = malloc((size_t)(nl > 0 ? nl : 1) * sizeof *labels);
        double *v = malloc((size_t)(nl > 0 ? nl : 1) * sizeof *v);
        char (*names)[80] = malloc((size_t)(nl > 0 ? nl : 1) * sizeof *names);
        if (!labels || !v || !names)
            rc = fp_fail(FP_ENOMEM, "out of memory");
        for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
            if (s->arms[i].is_ref)
                continue;
            for (int l = 0; l < nl; l++) {
                const fp_layer_row_t *L = find_layer(s, l);
                snprintf(names[l], sizeof names[l], "%d %s", l, L ? L->name : "");
                labels[l] = names[l];
                v[l] = R->time[l] / lt[i].time[l];
            }
            char id[48], title[160];
            snprintf(id, sizeof id, "chart-layer-speedup-%zu", i);
            snprintf(title, sizeof title, "Per-layer speedup of %s over %s", arm_label(&s->arms[i]),
                     arm_label(&s->arms[s->ref]));
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

/* ---------------------------------------------------------------- heatmaps */

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
            fp_html_td(f, arm_label(a), 0);
            snprintf(b, sizeof b, "%s%s", fp_format_info((fp_format)a->fmt_shown)->name, a->fmt < 0 ? " (would be)" : "");
            fp_html_td(f, b, 0);
            snprintf(b, sizeof b, "%lld", (long long)a->hist_steps);
            td_num(f, b);
            snprintf(b, sizeof b, "%s%s", fp_tensor_role_name((fp_tensor_role)role),
                     fp_summary_role_matters(a, role, 0) || fp_summary_role_matters(a, role, 1) ? ""
                                                                                                 : " (not in the headline)");
            fp_html_td(f, b, 0);
            snprintf(b, sizeof b, "%lld", (long long)a->over_role[role]);
            td_num(f, b);
            fp_html_td(f, a->ntop_over_role[role] ? a->top_over_role[role][0].name : "", 0);
            if (a->flushed_role[role])
                snprintf(b, sizeof b, "%lld (%lld flushed to zero)", (long long)a->under_role[role],
                         (long long)a->flushed_role[role]);
            else
                snprintf(b, sizeof b, "%lld", (long long)a->under_role[role]);
            td_num(f, b);
            fp_html_td(f, a->ntop_under_role[role] ? a->top_under_role[role][0].name : "", 0);
            fputs("</tr>\n", f);
        }
    }
    fputs("</tbody></table>\n", f);
}

static int heatmaps_section(FILE *f, fp_reader_t *r, const fp_summary_t *s)
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
        fp_html_textf(f, "%s (run %lld): layer x binade heatmaps per tensor role", arm_label(a), (long long)a->run.id);
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
            char (*names)[80] = malloc(n * sizeof *names);
            if (!frac || !rows || !names) {
                rc = fp_fail(FP_ENOMEM, "out of memory");
            } else {
                for (size_t k = 0; k < n; k++) {
                    const fp_layer_row_t *L = fp_arm_layer(a, h[k].layer);
                    snprintf(names[k], sizeof names[k], "%d %s", h[k].layer, L ? L->name : "");
                    rows[k] = names[k];
                    uint64_t tot = fp_hist_finite_nonzero(&h[k].hist);
                    for (int c = 0; c < ncols && tot; c++) {
                        int b = elo + c - FP_HIST_EXP_MIN;
                        if (b >= 0 && b < FP_HIST_BINADES)
                            frac[k * (size_t)ncols + (size_t)c] = (double)h[k].hist.binade[b] / (double)tot;
                    }
                }
                char id[48], title[160];
                snprintf(id, sizeof id, "heatmap-%zu-%s", i, fp_tensor_role_name((fp_tensor_role)role));
                snprintf(title, sizeof title, "%s: %s, layers x binades (step %lld)", arm_label(a),
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

/* ---------------------------------------------------------------- precision error */

static int precision_section(FILE *f, fp_reader_t *r, const fp_summary_t *s)
{
    int rc = FP_OK;
    xy_t *v = calloc(s->narms ? s->narms : 1, sizeof *v);
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
        snprintf(names[i % 16], sizeof names[0], "%s activation rel. L2", arm_label(&s->arms[i]));
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
        char b[FP_UNIT_BUF];
        for (size_t i = 0; i < s->narms; i++)
            for (size_t k = 0; k < nrows[i]; k++) {
                const fp_precision_sum_t *p = &rows[i][k];
                const fp_layer_row_t *L = find_layer(s, p->layer);
                fputs("<tr>", f);
                fp_html_td(f, arm_label(&s->arms[i]), 0);
                fprintf(f, "<td class=\"n\">%d</td>", p->layer);
                fp_html_td(f, L ? L->name : "", 0);
                fp_html_td(f, fp_tensor_role_name((fp_tensor_role)p->role), 0);
                fprintf(f, "<td class=\"n\">%lld</td>", (long long)p->samples);
                snprintf(b, sizeof b, "%.3g", p->mean_rel_l2);
                td_num(f, isnan(p->mean_rel_l2) ? "n/a" : b);
                snprintf(b, sizeof b, "%.3g", p->max_rel_l2);
                td_num(f, isnan(p->max_rel_l2) ? "n/a" : b);
                snprintf(b, sizeof b, "%.3g", p->max_abs);
                td_num(f, isnan(p->max_abs) ? "n/a" : b);
                snprintf(b, sizeof b, "%.6f", p->min_cosine);
                td_num(f, isnan(p->min_cosine) ? "n/a" : b);
                fputs("</tr>\n", f);
            }
        fputs("</tbody></table>\n</details>\n", f);
    }
    for (size_t i = 0; rows && i < s->narms; i++)
        free(rows[i]);
    free(rows);
    free(nrows);
    xy_free(v, s->narms);
    free(ser);
    return rc;
}

/* ---------------------------------------------------------------- kernels, events, environment */

static int kernels_section(FILE *f, fp_reader_t *r, const fp_summary_t *s)
{
    int rc = FP_OK;
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        fp_kernel_sum_t *k;
        fp_kernel_flag_t *fl;
        size_t n, nf;
        rc = fp_summary_run_kernels(r, a->run.id, &k, &n, &fl, &nf);
        if (rc == FP_OK) {
            fputs("<h3>", f);
            fp_html_textf(f, "%s (run %lld): top kernels", arm_label(a), (long long)a->run.id);
            fputs("</h3>\n", f);
            if (n == 0) {
                fputs("<p class=\"muted\">No kernel records (kernels are recorded on sampled steps of GPU runs).</p>\n",
                      f);
            } else {
                fprintf(f, "<table class=\"kernels\" id=\"kernels-%zu\"><thead><tr><th>Time (%%)</th>"
                           "<th>Total Time (ns)</th><th>Instances</th><th>Avg (ns)</th><th>Med (ns)</th>"
                           "<th>Min (ns)</th><th>Max (ns)</th><th>StdDev (ns)</th><th>Tensor cores</th><th>Name</th>"
                           "</tr></thead><tbody>\n", i);
                for (size_t j = 0; j < n && j < TOP_KERNELS; j++) {
                    int tc = fp_kernel_flag_of(fl, nf, k[j].name);
                    fprintf(f, "<tr><td class=\"n\">%.1f</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td>"
                               "<td class=\"n\">%.1f</td><td class=\"n\">%.1f</td><td class=\"n\">%lld</td>"
                               "<td class=\"n\">%lld</td><td class=\"n\">%.1f</td><td>%s</td>",
                            k[j].time_pct, (long long)k[j].total_ns, (long long)k[j].instances, k[j].avg_ns,
                            k[j].med_ns, (long long)k[j].min_ns, (long long)k[j].max_ns, k[j].stddev_ns,
                            tc > 0 ? "yes" : tc == 0 ? "no" : "n/a");
                    fp_html_td(f, k[j].name, 0);
                    fputs("</tr>\n", f);
                }
                fputs("</tbody></table>\n", f);
                if (n > TOP_KERNELS)
                    fprintf(f, "<p class=\"muted\">%zu more kernels in kernels.csv.</p>\n", n - TOP_KERNELS);
            }
        }
        free(k);
        free(fl);
    }
    return rc;
}

static int events_section(FILE *f, fp_reader_t *r, const fp_summary_t *s)
{
    int rc = FP_OK;
    size_t kinds[FP_EVENT_INFO + 1] = {0}, total = 0;
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
        fp_event_row_t *e;
        size_t n;
        if ((rc = fp_reader_events(r, s->arms[i].run.id, -1, MAX_EVENTS + 1, &e, &n)) != FP_OK)
            return rc;
        for (size_t k = 0; k < n && k < MAX_EVENTS; k++, total++)
            kinds[(unsigned)e[k].kind <= FP_EVENT_INFO ? e[k].kind : FP_EVENT_INFO]++;
        free(e);
    }
    /* a few events stay open; a long list is one click away, its counts by kind in the summary line */
    fprintf(f, "<details class=\"detail\" id=\"events-detail\"%s><summary>%zu events", total <= 20 ? " open" : "",
            total);
    for (int k = 0, first = 1; k <= FP_EVENT_INFO; k++)
        if (kinds[k]) {
            fprintf(f, "%s%zu %s", first ? ": " : ", ", kinds[k], fp_event_kind_name((fp_event_kind)k));
            first = 0;
        }
    fputs("</summary>\n<table id=\"events-table\"><thead><tr><th>arm</th><th>step</th><th>kind</th><th>layer</th><th>text</th>"
          "</tr></thead><tbody>\n", f);
    size_t more = 0;
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
        fp_event_row_t *e;
        size_t n;
        if ((rc = fp_reader_events(r, s->arms[i].run.id, -1, MAX_EVENTS + 1, &e, &n)) != FP_OK)
            break;
        if (n > MAX_EVENTS)
            more++, n = MAX_EVENTS;
        for (size_t k = 0; k < n; k++) {
            const fp_layer_row_t *L = e[k].layer >= 0 ? find_layer(s, e[k].layer) : NULL;
            fputs("<tr>", f);
            fp_html_td(f, arm_label(&s->arms[i]), 0);
            if (e[k].step >= 0)
                fprintf(f, "<td class=\"n\">%lld</td>", (long long)e[k].step);
            else
                fputs("<td></td>", f);
            fp_html_td(f, fp_event_kind_name((fp_event_kind)e[k].kind), 0);
            fp_html_td(f, L ? L->name : "", 0);
            fp_html_td(f, e[k].text, 0);
            fputs("</tr>\n", f);
        }
        free(e);
    }
    fputs("</tbody></table>\n</details>\n", f);
    if (more)
        fprintf(f, "<p class=\"muted\">Only the first %d events of each arm are listed; "
                   "`fp16probe export --table events` has them all.</p>\n", MAX_EVENTS);
    return rc;
}

static void env_row(FILE *f, const char *name, const char *value)
{
    fputs("<tr>", f);
    fp_html_th(f, name);
    fp_html_td(f, value && *value ? value : "n/a", 0);
    fputs("</tr>\n", f);
}

static int environment_section(FILE *f, fp_reader_t *r, const fp_summary_t *s)
{
    int rc = FP_OK;
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        fp_run_env_t *env = malloc(sizeof *env);
        if (!env)
            return fp_fail(FP_ENOMEM, "out of memory");
        if ((rc = fp_reader_run_env(r, a->run.id, env)) != FP_OK) {
            free(env);
            break;
        }
        char b[64];
        fputs("<details class=\"detail\"><summary>", f);
        fp_html_textf(f, "%s (run %lld): %s, %s", arm_label(a), (long long)a->run.id, a->run.model,
                      a->run.device[0] ? a->run.device : "device n/a");
        fprintf(f, "</summary>\n<table class=\"env\" id=\"env-%zu\"><tbody>\n", i);
        env_row(f, "model", a->run.model);
        env_row(f, "policy", a->run.policy);
        env_row(f, "device", a->run.device);
        env_row(f, "driver", env->driver_version);
        env_row(f, "CUDA", env->cuda_version);
        env_row(f, "cuDNN", env->cudnn_version);
        env_row(f, "CUPTI", env->cupti_version);
        env_row(f, "BLAS", env->blas);
        env_row(f, "host", a->run.host);
        snprintf(b, sizeof b, "%lld", (long long)a->run.batch_size);
        env_row(f, "batch size", a->run.batch_size >= 0 ? b : NULL);
        snprintf(b, sizeof b, "%lld", (long long)a->run.image_size);
        env_row(f, "image size", a->run.image_size >= 0 ? b : NULL);
        env_row(f, "dataset", a->run.dataset);
        snprintf(b, sizeof b, "%lld", (long long)a->run.seed);
        env_row(f, "seed", b);
        env_row(f, "optimizer", a->run.optimizer);
        env_row(f, "optimizer settings", env->optimizer_config);
        env_row(f, "fp16probe version", env->fp16probe_version);
        env_row(f, "status", a->run.status);
        env_row(f, "failure", a->run.failure);
        fputs("<tr><th>configuration</th><td><pre>", f);
        fp_html_text(f, env->config[0] ? env->config : "n/a");
        fputs("</pre></td></tr>\n</tbody></table>\n</details>\n", f);
        free(env);
    }
    char *cfg = NULL;
    if (rc == FP_OK && (rc = fp_reader_session_config(r, s->session.id, &cfg)) == FP_OK) {
        fputs("<h3>Session configuration</h3>\n<pre id=\"session-config\">", f);
        fp_html_text(f, cfg[0] ? cfg : "n/a");
        fputs("</pre>\n", f);
    }
    free(cfg);
    return rc;
}

/* ---------------------------------------------------------------- data parallel (dist_report.h) */

static void dist_section(FILE *f, const fp_summary_t *s, const fp_dist_summary_t *d)
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
        fp_html_td(f, arm_label(&s->arms[i]), 0);
        if (!a->ranks) {
            fputs("<td class=\"n\">1</td><td colspan=\"11\">trained alone</td></tr>\n", f);
            continue;
        }
        fprintf(f, "<td class=\"n\">%d</td><td class=\"n\">%lld</td>", a->ranks, (long long)a->global_batch);
        td_num(f, fp_fmt_num(b, a->images_per_s, 1));
        td_num(f, fp_fmt_ns(b, a->job_step_ns));
        td_num(f, fp_fmt_pct(b, a->exposed_share));
        td_num(f, fp_fmt_pct(b, a->comm_share));
        fp_html_td(f, a->allreduce, 0);
        td_num(f, fp_fmt_bytes(b, a->bytes));
        td_num(f, fp_fmt_ns(b, a->comm_ns));
        td_num(f, fp_fmt_ns(b, a->exposed_ns));
        if (a->slowest >= 0) {
            char r[FP_UNIT_BUF];
            fprintf(f, "<td class=\"n\">rank %d: ", a->slowest);
            fp_html_text(f, fp_fmt_ratio(r, a->straggler));
            fputs("</td>", f);
        } else {
            td_num(f, "n/a");
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
        fp_html_textf(f, "%s (%s)", h->allreduce, arm_label(&s->arms[i16]));
        fputs("</th><th>", f);
        fp_html_textf(f, "fp32 (%s)", arm_label(&s->arms[i32]));
        fputs("</th><th>ratio</th></tr></thead><tbody>\n", f);
        const char *what[3] = {"bytes/step per rank", "all-reduce time/step", "exposed/step"};
        const double hv[3] = {h->bytes, h->comm_ns, h->exposed_ns}, wv[3] = {w->bytes, w->comm_ns, w->exposed_ns};
        for (int k = 0; k < 3; k++) {
            fputs("<tr>", f);
            fp_html_td(f, what[k], 0);
            td_num(f, k ? fp_fmt_ns(x, hv[k]) : fp_fmt_bytes(x, hv[k]));
            td_num(f, k ? fp_fmt_ns(y, wv[k]) : fp_fmt_bytes(y, wv[k]));
            td_num(f, fp_fmt_ratio(b, hv[k] / wv[k]));
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
            fp_html_td(f, arm_label(&s->arms[i]), 0);
            fprintf(f, "<td class=\"n\">%d</td><td class=\"n\">%lld</td>", q->rank, (long long)q->steps);
            td_num(f, fp_fmt_ns(b, q->mean_wall_ns));
            td_num(f, fp_fmt_ns(b, q->mean_compute_ns));
            td_num(f, fp_fmt_ns(b, q->mean_comm_ns));
            td_num(f, fp_fmt_ns(b, q->mean_exposed_ns));
            td_num(f, fp_fmt_ns(b, q->max_wall_ns >= 0 ? (double)q->max_wall_ns : NAN));
            td_num(f, fp_fmt_ratio(b, q->vs_fastest));
            fputs("</tr>\n", f);
        }
    fputs("</tbody></table>\n", f);
}

/* The all-reduce's own rounding beside the other precision errors. */
static void allreduce_rounding(FILE *f, const fp_summary_t *s, const fp_dist_summary_t *d)
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
        fp_html_td(f, arm_label(&s->arms[i]), 0);
        if (!a->wire[0]) {
            fputs("<td colspan=\"8\">", f);
            fp_html_textf(f, "none: reduced in %s", a->allreduce);
            fputs("</td></tr>\n", f);
            continue;
        }
        fp_html_td(f, a->wire, 0);
        fprintf(f, "<td class=\"n\">%lld</td>", (long long)a->err_steps);
        snprintf(b, sizeof b, "%.3g", a->rel_l2_mean);
        td_num(f, isnan(a->rel_l2_mean) ? "n/a" : b);
        snprintf(b, sizeof b, "%.3g", a->rel_l2_max);
        td_num(f, isnan(a->rel_l2_max) ? "n/a" : b);
        if (a->worst_layer >= 0) {
            fputs("<td>", f);
            fp_html_textf(f, "%d %s", a->worst_layer, a->worst_layer_name);
            fputs("</td>", f);
            snprintf(b, sizeof b, "%.3g", a->worst_layer_rel_l2);
            td_num(f, b);
        } else {
            fputs("<td>n/a</td><td class=\"n\">n/a</td>", f);
        }
        snprintf(b, sizeof b, "%lld", (long long)a->overflow);
        td_num(f, a->overflow < 0 ? "n/a" : b);
        snprintf(b, sizeof b, "%lld", (long long)a->underflow);
        td_num(f, a->underflow < 0 ? "n/a" : b);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

/* ---------------------------------------------------------------- the document */

int fp_report_html(FILE *f, fp_reader_t *r, const fp_summary_t *s, const char *db_label)
{
    char title[256];
    snprintf(title, sizeof title, "fp16probe report: %s, session %lld", s->model, (long long)s->session.id);
    fp_dist_summary_t ds;
    int rc = fp_dist_summary_load(r, s, &ds);
    if (rc != FP_OK)
        return rc;
    fp_html_begin(f, title);
    fputs("<h1>", f);
    fp_html_text(f, title);
    fputs("</h1>\n<p class=\"muted\">", f);
    char when[64] = "n/a";
    if (s->session.start > 0) {
        time_t t = (time_t)(s->session.start / 1000000000LL);
        struct tm tm;
        if (gmtime_r(&t, &tm))
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    }
    fp_html_textf(f, "session \"%s\" on %s, started %s; database %s; %zu arms; warm-up and definitions as in the "
                     "README's CI gate section.", s->session.name, s->session.host[0] ? s->session.host : "n/a", when,
                  db_label ? db_label : "", s->narms);
    fprintf(f, "</p>\n<nav><a href=\"#summary\">Summary</a><a href=\"#training\">Training</a>%s"
          "<a href=\"#layers\">Layers</a><a href=\"#numerics\">Numerics</a><a href=\"#precision\">Precision error</a>"
          "<a href=\"#kernels\">Kernels</a><a href=\"#events\">Events</a><a href=\"#environment\">Environment</a></nav>\n",
            ds.any ? "<a href=\"#data-parallel\">Data parallel</a>" : "");

    fputs("<section id=\"summary\"><h2>Summary</h2>\n", f);
    verdict(f, s);
    summary_table(f, s);
    top_table(f, s);
    fputs("</section>\n<section id=\"training\"><h2>Training</h2>\n", f);
    rc = step_chart(f, s, "chart-loss", "Training loss", "loss", 0, 0);
    if (rc == FP_OK)
        rc = accuracy_chart(f, s);
    if (rc == FP_OK)
        rc = step_chart(f, s, "chart-throughput", "Throughput", "samples/s", 1, 0);
    if (rc == FP_OK)
        rc = speedup_chart(f, s);
    if (rc == FP_OK)
        rc = step_chart(f, s, "chart-loss-scale", "Loss scale and skipped steps", "loss scale", 2, 2);
    if (rc == FP_OK && ds.any) {
        fputs("</section>\n<section id=\"data-parallel\"><h2>Data parallel</h2>\n", f);
        dist_section(f, s, &ds);
    }
    if (rc == FP_OK) {
        fputs("</section>\n<section id=\"layers\"><h2>Layers</h2>\n", f);
        rc = layers_section(f, r, s);
    }
    if (rc == FP_OK) {
        fputs("</section>\n<section id=\"numerics\"><h2>Numerics: value ranges per layer</h2>\n", f);
        rc = heatmaps_section(f, r, s);
    }
    if (rc == FP_OK) {
        fputs("</section>\n<section id=\"precision\"><h2>Precision error</h2>\n", f);
        rc = precision_section(f, r, s);
        if (rc == FP_OK && ds.any)
            allreduce_rounding(f, s, &ds);
    }
    if (rc == FP_OK) {
        fputs("</section>\n<section id=\"kernels\"><h2>Kernels</h2>\n", f);
        rc = kernels_section(f, r, s);
    }
    if (rc == FP_OK) {
        fputs("</section>\n<section id=\"events\"><h2>Events</h2>\n", f);
        rc = events_section(f, r, s);
    }
    if (rc == FP_OK) {
        fputs("</section>\n<section id=\"environment\"><h2>Environment</h2>\n", f);
        rc = environment_section(f, r, s);
    }
    fputs("</section>\n", f);
    fp_html_end(f);
    fp_dist_summary_free(&ds);
    return rc;
}
