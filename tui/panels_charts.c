/* panels_charts.c — the time-series panels: loss of every arm overlaid (with validation accuracy),
 * throughput and the compared arm's speedup over time, memory and energy of every arm ("n/a" where not
 * measured), and the loss scale of every arm with one ("-" without) with skipped steps marked. Promise:
 * O(width x height) per panel; every arm is listed in each, shortened rather than cut. */
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

/* The per-arm line under a chart: the fullest of nlv levels at which every arm's item fits on one line of
 * width w (each item as item(d, arm, level, buf) writes it after the arm's name), else the arms on two
 * lines at the last level: never cut. Returns the lines needed (1 or 2); *lv gets the level. */
typedef void (*arm_item_fn)(const fp_draw_t *d, int arm, int level, char *buf, size_t cap);

static int arm_items_len(const fp_draw_t *d, int from, int to, int lv, arm_item_fn item)
{
    char buf[128];
    int n = 0;
    for (int i = from; i < to; i++) {
        item(d, i, lv, buf, sizeof buf);
        n += (i > from ? 2 : 0) + (int)strlen(d->m->arm[i].run.policy) + fp_utf8_len(buf);
    }
    return n;
}

static int arm_line_fit(const fp_draw_t *d, int w, int nlv, arm_item_fn item, int *lv)
{
    for (*lv = 0; *lv < nlv; (*lv)++)
        if (arm_items_len(d, 0, d->m->narms, *lv, item) <= w)
            return 1;
    int half = (d->m->narms + 1) / 2;
    for (*lv = 0; *lv < nlv - 1; (*lv)++)
        if (arm_items_len(d, 0, half, *lv, item) <= w && arm_items_len(d, half, d->m->narms, *lv, item) <= w)
            break;
    return 2;
}

/* Draw the line(s) arm_line_fit chose, the last at y. */
static void arm_line(fp_draw_t *d, int x0, int y, int xe, int lv, int rows, arm_item_fn item)
{
    const fp_tui_model_t *m = d->m;
    char buf[128];
    int half = rows == 2 ? (m->narms + 1) / 2 : m->narms, x = x0;
    for (int i = 0; i < m->narms; i++) {
        int yy = rows == 2 && i < half ? y - 1 : y;
        if (i == half)
            x = x0;
        else if (i)
            x = fp_grid_text(d->g, x, yy, xe, 0, "  ");
        x = fp_grid_text(d->g, x, yy, xe, arm_attr(i), m->arm[i].run.policy);
        item(d, i, lv, buf, sizeof buf);
        x = fp_grid_text(d->g, x, yy, xe, 0, buf);
    }
}

static void loss_item(const fp_draw_t *d, int i, int lv, char *buf, size_t cap)
{
    const fp_tui_arm_t *a = &d->m->arm[i];
    double v = a->val_top1 <= 1.0 ? a->val_top1 * 100 : a->val_top1;
    if (lv == 0)
        isnan(v) ? snprintf(buf, cap, " %.4g val n/a", a->last_loss) : snprintf(buf, cap, " %.4g val %.1f%%", a->last_loss, v);
    else if (lv == 1)
        isnan(v) ? snprintf(buf, cap, " %.3g", a->last_loss) : snprintf(buf, cap, " %.3g val %.0f%%", a->last_loss, v);
    else   /* the tightest: "v" for validation top-1, never dropped (the arms go on two lines first) */
        isnan(v) ? snprintf(buf, cap, " %.3g", a->last_loss) : snprintf(buf, cap, " %.3g v%.0f%%", a->last_loss, v);
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
    int lv, rows = arm_line_fit(d, iw, 3, loss_item, &lv);
    chart_axes(d, ix, iy, iw, ih - rows, s, m->narms, NAN, NAN, "%.3g");
    arm_line(d, ix, iy + ih - 1, ix + iw, lv, rows, loss_item);
}

/* An arm's rate and step time: one figure (fp_tui_arm_thr is batch / the step time). */
static void thr_item(const fp_draw_t *d, int i, int lv, char *buf, size_t cap)
{
    const fp_tui_arm_t *a = &d->m->arm[i];
    char w[32];
    fp_tui_fmt_ns(w, sizeof w, fp_tui_arm_median_wall(a));
    double t = fp_tui_arm_thr(a);
    if (lv == 0)
        isnan(t) ? snprintf(buf, cap, " -/s %s/step", w) : snprintf(buf, cap, " %.0f/s %s/step", t, w);
    else if (lv == 1)
        isnan(t) ? snprintf(buf, cap, " %s", w) : snprintf(buf, cap, " %.0f/s %s", t, w);
    else if (lv == 2)
        snprintf(buf, cap, " %s", w);
    else if (isnan(fp_tui_arm_median_wall(a)))
        snprintf(buf, cap, " -");
    else   /* 3 digits */
        snprintf(buf, cap, " %.3g%s", fp_tui_arm_median_wall(a) >= 1e6 ? fp_tui_arm_median_wall(a) / 1e6 : fp_tui_arm_median_wall(a) / 1e3,
                 fp_tui_arm_median_wall(a) >= 1e6 ? "ms" : "us");
}

void fp_panel_thr(fp_draw_t *d, fp_rect_t r)
{
    if (r.w == 0)
        return;
    const fp_tui_model_t *m = d->m;
    int low = fp_tui_cmp_arm(m, d->ui);
    double sp = NAN;
    if (low >= 0 && low != m->ref)
        sp = fp_step_speedup(fp_tui_arm_median_wall(&m->arm[m->ref]), fp_tui_arm_median_wall(&m->arm[low]));
    char title[128];
    for (int v = 0; v < 3; v++) {   /* the speedup names its arm; '*': emulated on the CPU (the header says so) */
        const char *star = !isnan(sp) && fp_tui_arm_emulated(&m->arm[low]) ? "*" : "";
        if (isnan(sp))
            snprintf(title, sizeof title, "throughput img/s");
        else if (v == 0)
            snprintf(title, sizeof title, "throughput img/s  %s speedup %.2fx%s", m->arm[low].run.policy, sp, star);
        else if (v == 1)
            snprintf(title, sizeof title, "throughput  %s speedup %.2fx%s", m->arm[low].run.policy, sp, star);
        else
            snprintf(title, sizeof title, "img/s  %s %.2fx%s", m->arm[low].run.policy, sp, star);
        if (fp_utf8_len(title) + 4 <= r.w)
            break;
    }
    fp_grid_box(d->g, r.x, r.y, r.w, r.h, 0, title, 0);
    int ix = r.x + 1, iy = r.y + 1, iw = r.w - 2, ih = r.h - 2;
    fp_chart_series_t s[FP_TUI_MAX_ARMS];
    for (int i = 0; i < m->narms; i++)
        s[i] = (fp_chart_series_t){&m->arm[i].thr, arm_attr(i)};
    int lv, rows = arm_line_fit(d, iw, 4, thr_item, &lv);
    int ch = ih - rows;
    if (ih >= 9 && low >= 0 && low != m->ref) {   /* room for the speedup over time */
        int sh = ch / 2;
        chart_axes(d, ix, iy, iw, ch - sh, s, m->narms, 0, NAN, NULL);
        fp_chart_series_t sps = {&m->arm[low].speedup, arm_attr(low)};
        fp_grid_printf(d->g, ix + 8, iy + ch - sh, ix + iw, FP_C_DIM, "%s speedup over time", m->arm[low].run.policy);
        chart_axes(d, ix, iy + ch - sh + 1, iw, sh - 1, &sps, 1, NAN, NAN, "%.2fx");
    } else {
        chart_axes(d, ix, iy, iw, ch, s, m->narms, 0, NAN, NULL);
    }
    arm_line(d, ix, iy + ih - 1, ix + iw, lv, rows, thr_item);
}

void fp_panel_mem(fp_draw_t *d, fp_rect_t r)
{
    if (r.w == 0)
        return;
    const fp_tui_model_t *m = d->m;
    fp_grid_box(d->g, r.x, r.y, r.w, r.h, 0, "memory / energy", 0);
    int ix = r.x + 1, iy = r.y + 1, iw = r.w - 2, ih = r.h - 2;
    if (ih <= 0)
        return;
    const fp_tui_arm_t *R = &m->arm[m->ref];
    double re = R->energy_steps > 0 ? R->energy_sum / (double)R->energy_steps : NAN;
    /* one arm a line when all fit, else side by side in columns (every arm is listed), all at one level */
    int cols = (m->narms + ih - 1) / ih, colw = iw / (cols > 0 ? cols : 1);
    char line[FP_TUI_MAX_ARMS][4][160];
    int lv = 0;
    for (int i = 0; i < m->narms; i++) {
        const fp_tui_arm_t *a = &m->arm[i];
        char cur[16], peak[16], e[24] = "n/a", p[24] = "n/a", mr[24] = "", er[24] = "";
        fp_tui_fmt_bytes(cur, sizeof cur, a->mem_cur);
        fp_tui_fmt_bytes(peak, sizeof peak, a->mem_peak);
        double ae = a->energy_steps > 0 ? a->energy_sum / (double)a->energy_steps : NAN;
        if (!isnan(ae))
            snprintf(e, sizeof e, "%.3gJ", ae);
        if (!isnan(a->power_last))
            snprintf(p, sizeof p, "%.4gW", a->power_last);
        if (i != m->ref && !isnan(a->mem_peak) && R->mem_peak > 0)
            snprintf(mr, sizeof mr, " %.2fx", a->mem_peak / R->mem_peak);
        if (i != m->ref && !isnan(ae) && re > 0)
            snprintf(er, sizeof er, " %.2fx", ae / re);
        snprintf(line[i][0], sizeof line[i][0], " mem %s peak %s%s E/step %s%s P %s", cur, peak, mr, e, er, p);
        snprintf(line[i][1], sizeof line[i][1], " %s pk %s E %s P %s", cur, peak, e, p);
        snprintf(line[i][2], sizeof line[i][2], " pk %s%s%s%s", peak, mr, isnan(ae) ? "" : " E ", isnan(ae) ? "" : e);
        snprintf(line[i][3], sizeof line[i][3], " %s%s", peak, mr);
        int room = (cols > 1 ? colw - 1 : iw) - (int)strlen(a->run.policy);
        while (lv < 3 && fp_utf8_len(line[i][lv]) > room)
            lv++;
    }
    for (int i = 0; i < m->narms; i++) {
        int x0 = ix + (i / ih) * colw, y = iy + i % ih, xe = cols > 1 ? x0 + colw - 1 : ix + iw;
        int x = fp_grid_text(d->g, x0, y, xe, arm_attr(i), m->arm[i].run.policy);
        fp_grid_text(d->g, x, y, xe, 0, line[i][lv]);
    }
}

/* An arm's loss scale now: "-" without a loss scaler (never 1). */
static void scale_item(const fp_draw_t *d, int i, int lv, char *buf, size_t cap)
{
    const fp_tui_arm_t *a = &d->m->arm[i];
    if (!a->has_scaler || isnan(a->last_scale))
        snprintf(buf, cap, " -");
    else if (lv == 0 && a->skipped_total > 0)
        snprintf(buf, cap, " %g (skipped %lld)", a->last_scale, (long long)a->skipped_total);
    else
        snprintf(buf, cap, " %g", a->last_scale);
}

void fp_panel_scale(fp_draw_t *d, fp_rect_t r)
{
    if (r.w == 0)
        return;
    const fp_tui_model_t *m = d->m;
    int low = fp_tui_cmp_arm(m, d->ui), shown = -1, nsc = 0;
    fp_chart_series_t s[FP_TUI_MAX_ARMS];
    for (int i = 0; i < m->narms; i++)
        if (m->arm[i].has_scaler && m->arm[i].scale.nb > 0)
            s[nsc++] = (fp_chart_series_t){&m->arm[i].scale, arm_attr(i)};
    /* the title's arm: the compared one when it has a loss scaler, else the first that has one */
    if (low >= 0 && m->arm[low].has_scaler)
        shown = low;
    for (int i = 0; i < m->narms && shown < 0; i++)
        if (m->arm[i].has_scaler)
            shown = i;
    int marks = shown >= 0 ? shown : low;   /* skipped steps: of that arm */
    const fp_tui_arm_t *a = shown >= 0 ? &m->arm[shown] : NULL;
    char title[128];
    if (a)
        snprintf(title, sizeof title, "loss scale %s  skipped %lld  changes %lld", a->run.policy,
                 (long long)a->skipped_total, (long long)a->scale_changes);
    else
        snprintf(title, sizeof title, "loss scale");
    fp_grid_box(d->g, r.x, r.y, r.w, r.h, 0, title, 0);
    int ix = r.x + 1, iy = r.y + 1, iw = r.w - 2, ih = r.h - 2;
    if (ih <= 0)
        return;
    int lv, rows = arm_line_fit(d, iw, 2, scale_item, &lv);   /* every arm's scale, "-" without a scaler */
    if (rows > ih)
        rows = 1;
    arm_line(d, ix, iy + ih - 1, ix + iw, lv, rows, scale_item);
    int ch = ih - rows;
    const fp_tui_arm_t *k = marks >= 0 ? &m->arm[marks] : NULL;
    if (ch >= 2 && k && k->skipped_total > 0) {   /* a row of skip marks above the arms' line */
        ch--;
        fp_grid_text(d->g, ix, iy + ch, ix + 7, FP_C_DIM, "skip");
        fp_chart_marks(d->g, ix + 7, iy + ch, iw - 7, &k->skipped, k->skipped.total, FP_C_BAD | FP_A_BOLD,
                       d->ascii ? "x" : "✕");
    }
    if (ch < 1)
        return;
    if (nsc == 0) {
        fp_grid_text(d->g, ix + 1, iy, ix + iw, FP_C_DIM, "no loss scaling in this session");
        return;
    }
    int lw = 7;
    double lo, hi;
    fp_chart_draw(d->g, ix + lw, iy, iw - lw, ch, d->chart, s, nsc, NAN, NAN, &lo, &hi);
    fp_grid_printf(d->g, ix, iy, ix + lw - 1, FP_C_DIM, "2^%.0f", hi);
    if (ch > 1)
        fp_grid_printf(d->g, ix, iy + ch - 1, ix + lw - 1, FP_C_DIM, "2^%.0f", lo);
}
