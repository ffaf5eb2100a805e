/* report_html_summary.c — the HTML report's Summary section (report_html_internal.h): one verdict line per
 * low-precision arm against the reference (speedup, memory, energy, loss and top-1 gaps, skipped steps, loss
 * scale, lost updates), the summary table (one column per arm, one row per figure of summary.h, each cell
 * written by its own function) and the layers with the most overflow and underflow per arm. Every figure
 * comes from summary.h, so the report never disagrees with `report --summary` or the gate. */
#include <math.h>
#include <stdio.h>
#include "html_writer.h"
#include "report_html_internal.h"
#include "units.h"

static void verdict(FILE *f, const fp_summary_t *s)
{
    const fp_arm_t *R = &s->arms[s->ref];
    char b[9][FP_UNIT_BUF];
    for (size_t i = 0; i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        if (a->is_ref)
            continue;
        fputs("<p class=\"verdict\">", f);
        fp_html_textf(f, "%s vs %s: ", fp_rh_arm_label(a), fp_rh_arm_label(R));
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
    fp_rh_td_num(f, b);
}
static void c_median(FILE *f, const fp_arm_t *a, char *b) { fp_rh_td_num(f, fp_fmt_ns(b, a->median_ns)); }
static void c_speedup(FILE *f, const fp_arm_t *a, char *b)
{
    char r[FP_UNIT_BUF];
    fp_fmt_ratio(r, a->speedup);
    if (a->emulated && isfinite(a->speedup))
        snprintf(b, FP_UNIT_BUF * 8, "%s (%s)", r, fp_summary_speed_note(a));
    else
        snprintf(b, FP_UNIT_BUF * 8, "%s", r);
    fp_rh_td_num(f, b);
}
static void c_tput(FILE *f, const fp_arm_t *a, char *b) { fp_rh_td_num(f, fp_fmt_num(b, a->samples_per_s, 1)); }
static void c_mem(FILE *f, const fp_arm_t *a, char *b) { fp_rh_td_num(f, fp_fmt_bytes(b, a->mem_peak)); }
static void c_memr(FILE *f, const fp_arm_t *a, char *b) { fp_rh_td_num(f, fp_fmt_ratio(b, a->mem_ratio)); }
static void c_energy(FILE *f, const fp_arm_t *a, char *b)
{
    if (isnan(a->energy_per_step))
        snprintf(b, FP_UNIT_BUF * 8, "n/a%s%.150s%s", a->energy_why[0] ? " (" : "", a->energy_why,
                 a->energy_why[0] ? ")" : "");
    else
        snprintf(b, FP_UNIT_BUF, "%.4g J", a->energy_per_step);
    fp_rh_td_num(f, b);
}
static void c_energyr(FILE *f, const fp_arm_t *a, char *b) { fp_rh_td_num(f, fp_fmt_ratio(b, a->energy_ratio)); }
static void c_host_cpu(FILE *f, const fp_arm_t *a, char *b)
{
    char v[FP_UNIT_BUF];
    fp_summary_fmt_host_cpu(v, a);
    if (a->nhost_cpu)
        snprintf(b, FP_UNIT_BUF * 8, "%s; %s", v, fp_summary_host_cpu_note(a));
    else
        snprintf(b, FP_UNIT_BUF * 8, "%s", v);
    fp_rh_td_num(f, b);
}
static void c_loss(FILE *f, const fp_arm_t *a, char *b) { fp_rh_td_num(f, fp_fmt_num(b, a->final_loss, 4)); }
static void c_lossgap(FILE *f, const fp_arm_t *a, char *b) { fp_rh_td_num(f, fp_fmt_signed(b, a->loss_gap, 4, NULL)); }
static void c_top1(FILE *f, const fp_arm_t *a, char *b)
{
    char p[FP_UNIT_BUF];
    fp_fmt_pct(p, a->val_top1);
    if (a->val_images > 0 && isfinite(a->val_top1_lo))
        snprintf(b, FP_UNIT_BUF * 8, "%s (95%% CI %.2f..%.2f%%, n=%lld)", p, 100 * a->val_top1_lo, 100 * a->val_top1_hi,
                 (long long)a->val_images);
    else
        snprintf(b, FP_UNIT_BUF * 8, "%s", p);
    fp_rh_td_num(f, b);
}
static void c_top1gap(FILE *f, const fp_arm_t *a, char *b)
{
    char g[FP_UNIT_BUF];
    fp_fmt_signed(g, a->top1_gap, 2, "pt");
    snprintf(b, FP_UNIT_BUF * 8, "%s%s", g, a->top1_gap_within ? " (within the uncertainty)" : "");
    fp_rh_td_num(f, b);
}
static void c_lost(FILE *f, const fp_arm_t *a, char *b)
{
    if (a->lost_samples)
        snprintf(b, FP_UNIT_BUF * 8, "%.4g%% (max %.4g%%, %d sampled steps)", a->lost_pct, a->lost_max, a->lost_samples);
    else
        snprintf(b, FP_UNIT_BUF * 8, "n/a");
    fp_rh_td_num(f, b);
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
    fp_rh_td_num(f, b);
}
static void c_skipped(FILE *f, const fp_arm_t *a, char *b)
{
    char p[FP_UNIT_BUF];
    snprintf(b, FP_UNIT_BUF * 2, "%lld (%s)", (long long)a->skipped, fp_fmt_pct(p, a->skip_rate));
    fp_rh_td_num(f, b);
}
static void c_scale(FILE *f, const fp_arm_t *a, char *b) { fp_rh_td_num(f, fp_summary_fmt_loss_scale(b, a)); }

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
        fp_html_textf(f, "%s (run %lld)%s", fp_rh_arm_label(&s->arms[i]), (long long)s->arms[i].run.id,
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
    char fmt[FP_UNIT_BUF];
    for (size_t i = 0; i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        fputs("<tr>", f);
        fp_html_td(f, fp_rh_arm_label(a), 0);
        fp_html_td(f, fp_rh_format_shown(fmt, sizeof fmt, a), 0);
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

void fp_rh_summary(FILE *f, const fp_summary_t *s)
{
    verdict(f, s);
    summary_table(f, s);
    top_table(f, s);
}
