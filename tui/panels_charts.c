/* panels_charts.c — the time-series panels: loss of every arm overlaid (with validation accuracy),
 * throughput and speedup over time, memory and energy side by side ("n/a" where not measured), and
 * the loss-scale timeline with skipped steps marked. Promise: O(width x height) per panel. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "step_time.h"
#include "tui_internal.h"

static uint16_t arm_attr(int i)
{
    return (uint16_t)(FP_C_ARM0 + (i % 4));
}

/* Legend after the title on the top border: "─ fp32 ─ fp16". */
static void legend(fp_draw_t *d, fp_rect_t r, int x)
{
    for (int i = 0; i < d->m->narms && x < r.x + r.w - 2; i++) {
        x = fp_grid_text(d->g, x, r.y, r.x + r.w - 1, arm_attr(i), d->ascii ? " * " : " ● ");
        x = fp_grid_text(d->g, x, r.y, r.x + r.w - 1, arm_attr(i), d->m->arm[i].run.policy);
    }
}

static int title_end(fp_rect_t r, const char *title)
{
    return r.x + 1 + fp_utf8_len(title) + 2;
}

/* A chart with a y-axis label column of width lw on its left. */
static void chart_axes(fp_draw_t *d, int x, int y, int w, int h, const fp_chart_series_t *s, int ns, double lo,
                       double hi, const char *fmt)
{
    int lw = 7;
    if (w <= lw + 2 || h <= 0)
        return;
    double a, b;
    fp_chart_draw(d->g, x + lw, y, w - lw, h, d->chart, s, ns, lo, hi, &a, &b);
    if (isnan(a) || isnan(b)) {
        fp_grid_text(d->g, x + lw, y + h / 2, x + w, FP_C_DIM, "no data yet");
        return;
    }
    char la[32], lb[32];
    if (fmt) {
        snprintf(la, sizeof la, fmt, a);
        snprintf(lb, sizeof lb, fmt, b);
    } else {   /* compact: 32000 -> 32.0k */
        fp_tui_fmt_count(la, sizeof la, a);
        fp_tui_fmt_count(lb, sizeof lb, b);
    }
    fp_grid_printf(d->g, x, y, x + lw - 1, FP_C_DIM, "%*s", lw - 1, lb);
    if (h > 1)
        fp_grid_printf(d->g, x, y + h - 1, x + lw - 1, FP_C_DIM, "%*s", lw - 1, la);
}

void fp_panel_loss(fp_draw_t *d, fp_rect_t r)
{
    if (r.w == 0)
        return;
    const fp_tui_model_t *m = d->m;
    const char *title = "loss";
    fp_grid_box(d->g, r.x, r.y, r.w, r.h, 0, title, 0);
    legend(d, r, title_end(r, title));
    int ix = r.x + 1, iy = r.y + 1, iw = r.w - 2, ih = r.h - 2;
    fp_chart_series_t s[FP_TUI_MAX_ARMS];
    for (int i = 0; i < m->narms; i++)
        s[i] = (fp_chart_series_t){&m->arm[i].loss, arm_attr(i)};
    chart_axes(d, ix, iy, iw, ih - 1, s, m->narms, NAN, NAN, "%.3g");
    int x = ix, y = iy + ih - 1;
    for (int i = 0; i < m->narms; i++) {
        const fp_tui_arm_t *a = &m->arm[i];
        x = fp_grid_text(d->g, x, y, ix + iw, arm_attr(i), a->run.policy);
        if (!isnan(a->val_top1))
            x = fp_grid_printf(d->g, x, y, ix + iw, 0, " %.4g val %.1f%% ", a->last_loss,
                               a->val_top1 <= 1.0 ? a->val_top1 * 100 : a->val_top1);
        else
            x = fp_grid_printf(d->g, x, y, ix + iw, 0, " %.4g val n/a ", a->last_loss);
    }
}

void fp_panel_thr(fp_draw_t *d, fp_rect_t r)
{
    if (r.w == 0)
        return;
    const fp_tui_model_t *m = d->m;
    int low = fp_tui_model_low(m);
    double sp = NAN;
    if (low >= 0 && low != m->ref)
        sp = fp_step_speedup(fp_tui_arm_median_wall(&m->arm[m->ref]), fp_tui_arm_median_wall(&m->arm[low]));
    char title[96];
    if (!isnan(sp))
        snprintf(title, sizeof title, "throughput img/s  speedup %.2fx", sp);
    else
        snprintf(title, sizeof title, "throughput img/s");
    fp_grid_box(d->g, r.x, r.y, r.w, r.h, 0, title, 0);
    int ix = r.x + 1, iy = r.y + 1, iw = r.w - 2, ih = r.h - 2;
    fp_chart_series_t s[FP_TUI_MAX_ARMS];
    for (int i = 0; i < m->narms; i++)
        s[i] = (fp_chart_series_t){&m->arm[i].thr, arm_attr(i)};
    int ch = ih - 1;
    if (ih >= 9 && low >= 0 && low != m->ref) {   /* room for the speedup over time */
        int sh = ch / 2;
        chart_axes(d, ix, iy, iw, ch - sh, s, m->narms, 0, NAN, NULL);
        fp_chart_series_t sps = {&m->arm[low].speedup, arm_attr(low)};
        fp_grid_text(d->g, ix + 8, iy + ch - sh, ix + iw, FP_C_DIM, "speedup over time");
        chart_axes(d, ix, iy + ch - sh + 1, iw, sh - 1, &sps, 1, NAN, NAN, "%.2fx");
    } else {
        chart_axes(d, ix, iy, iw, ch, s, m->narms, 0, NAN, NULL);
    }
    int x = ix, y = iy + ih - 1;
    for (int i = 0; i < m->narms; i++) {
        char w[32];
        fp_tui_fmt_ns(w, sizeof w, fp_tui_arm_median_wall(&m->arm[i]));
        x = fp_grid_text(d->g, x, y, ix + iw, arm_attr(i), m->arm[i].run.policy);
        x = fp_grid_printf(d->g, x, y, ix + iw, 0, " %.0f/s %s/step  ", m->arm[i].last_thr, w);
    }
}

void fp_panel_mem(fp_draw_t *d, fp_rect_t r)
{
    if (r.w == 0)
        return;
    const fp_tui_model_t *m = d->m;
    fp_grid_box(d->g, r.x, r.y, r.w, r.h, 0, "memory / energy", 0);
    int ix = r.x + 1, iy = r.y + 1, iw = r.w - 2, ih = r.h - 2;
    int line = 0;
    for (int i = 0; i < m->narms && line < ih; i++, line++) {
        const fp_tui_arm_t *a = &m->arm[i];
        char cur[16], peak[16], e[24] = "n/a", p[24] = "n/a";
        fp_tui_fmt_bytes(cur, sizeof cur, a->mem_cur);
        fp_tui_fmt_bytes(peak, sizeof peak, a->mem_peak);
        if (a->energy_steps > 0)
            snprintf(e, sizeof e, "%.3gJ", a->energy_sum / (double)a->energy_steps);
        if (!isnan(a->power_last))
            snprintf(p, sizeof p, "%.4gW", a->power_last);
        int x = fp_grid_text(d->g, ix, iy + line, ix + iw, arm_attr(i), a->run.policy);
        if (iw >= 50)
            fp_grid_printf(d->g, x, iy + line, ix + iw, 0, " mem %s peak %s E/step %s P %s", cur, peak, e, p);
        else
            fp_grid_printf(d->g, x, iy + line, ix + iw, 0, " %s pk %s E %s P %s", cur, peak, e, p);
    }
    int low = fp_tui_model_low(m);
    if (line < ih && low >= 0 && low != m->ref) {
        const fp_tui_arm_t *a = &m->arm[m->ref], *b = &m->arm[low];
        char pr[24] = "n/a", er[24] = "n/a";
        if (!isnan(a->mem_peak) && !isnan(b->mem_peak) && a->mem_peak > 0)
            snprintf(pr, sizeof pr, "%.2fx", b->mem_peak / a->mem_peak);
        if (a->energy_steps > 0 && b->energy_steps > 0 && a->energy_sum > 0)
            snprintf(er, sizeof er, "%.2fx", (b->energy_sum / (double)b->energy_steps) /
                                                 (a->energy_sum / (double)a->energy_steps));
        fp_grid_printf(d->g, ix, iy + line, ix + iw, FP_C_DIM, "%s/%s peak mem %s  energy/step %s",
                       b->run.policy, a->run.policy, pr, er);
    }
}

void fp_panel_scale(fp_draw_t *d, fp_rect_t r)
{
    if (r.w == 0)
        return;
    const fp_tui_model_t *m = d->m;
    int low = fp_tui_model_low(m);
    const fp_tui_arm_t *a = low >= 0 ? &m->arm[low] : NULL;
    char title[128];
    snprintf(title, sizeof title, "loss scale %s  skipped %lld  changes %lld", a ? a->run.policy : "",
             a ? (long long)a->skipped_total : 0LL, a ? (long long)a->scale_changes : 0LL);
    fp_grid_box(d->g, r.x, r.y, r.w, r.h, 0, title, 0);
    int ix = r.x + 1, iy = r.y + 1, iw = r.w - 2, ih = r.h - 2;
    if (!a || a->scale.nb == 0 || isnan(a->last_scale)) {
        fp_grid_text(d->g, ix + 1, iy, ix + iw, FP_C_DIM, "no loss scaling in this session");
        if (a && a->skipped_total > 0)
            fp_chart_marks(d->g, ix + 7, iy + ih - 1, iw - 7, &a->skipped, a->skipped.total, FP_C_BAD | FP_A_BOLD,
                           d->ascii ? "x" : "✕");
        return;
    }
    fp_chart_series_t s = {&a->scale, arm_attr(low)};
    int lw = 7, ch = ih > 1 ? ih - 1 : 1;
    double lo, hi;
    fp_chart_draw(d->g, ix + lw, iy, iw - lw, ch, d->chart, &s, 1, NAN, NAN, &lo, &hi);
    fp_grid_printf(d->g, ix, iy, ix + lw - 1, FP_C_DIM, "2^%.0f", hi);
    if (ch > 1)
        fp_grid_printf(d->g, ix, iy + ch - 1, ix + lw - 1, FP_C_DIM, "2^%.0f", lo);
    if (ih > 1) {
        fp_grid_text(d->g, ix, iy + ih - 1, ix + lw, FP_C_DIM, "skip");
        fp_chart_marks(d->g, ix + lw, iy + ih - 1, iw - lw, &a->skipped, a->skipped.total, FP_C_BAD | FP_A_BOLD,
                       d->ascii ? "x" : "✕");
    }
    if (fp_utf8_len(title) + 20 < r.w)
        fp_grid_printf(d->g, r.x + r.w - 13, r.y, r.x + r.w - 1, FP_C_DIM, " now 2^%.0f ", log2(a->last_scale));
}
