/* panels_hist.c — the histogram of the selected layer and tensor role: binades along x, counts as
 * log-scaled bars, and the chosen format's limits drawn as markers (O overflow, N min normal,
 * S min subnormal, U underflow). Promise: a limit outside the shown range is named at the edge. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "tui_internal.h"

/* Binade index (e) of a positive value. */
static int binade(double v)
{
    return (int)floor(log2(v));
}

void fp_panel_hist(fp_draw_t *d, fp_rect_t r)
{
    if (r.w == 0)
        return;
    const fp_tui_model_t *m = d->m;
    fp_tui_ui_t *ui = d->ui;
    int l = fp_tui_selected_layer(ui);
    int arm = -1;
    const fp_hist_t *h = NULL;
    int64_t step = -1;
    int low = fp_tui_cmp_arm(m, ui), cand[2] = {low, m->ref};
    for (int k = 0; k < 2 && !h && l >= 0; k++)
        if (cand[k] >= 0 && m->arm[cand[k]].hist && m->arm[cand[k]].hist[l].step >= 0) {
            arm = cand[k];
            h = &m->arm[arm].hist[l].hist;
            step = m->arm[arm].hist[l].step;
        }
    char title[160];
    snprintf(title, sizeof title, "%s %s %s%s%s%s", l >= 0 ? m->layers[l].name : "-", fp_tui_role_short(ui->role),
             fp_tui_fmt_label(ui->fmt), arm >= 0 ? " (arm " : "", arm >= 0 ? m->arm[arm].run.policy : "", arm >= 0 ? ")" : "");
    if (fp_utf8_len(title) + 4 > r.w)   /* the arm's name when there is room, else what the table has */
        snprintf(title, sizeof title, "%s %s %s", l >= 0 ? m->layers[l].name : "-", fp_tui_role_short(ui->role),
                 fp_tui_fmt_label(ui->fmt));
    fp_grid_box(d->g, r.x, r.y, r.w, r.h, 0, title, ui->focus == FP_FOCUS_HIST);
    int ix = r.x + 1, iy = r.y + 1, iw = r.w - 2, ih = r.h - 2;
    if (!h) {
        fp_grid_text(d->g, ix + 1, iy, ix + iw, FP_C_DIM, "no histogram for this layer/role");
        return;
    }
    const fp_format_info_t *fi = fp_format_info((fp_format)ui->fmt);
    int eo = binade(fi->overflow_at), en = binade(fi->min_normal), es = binade(fi->min_subnormal), eu = es - 1;
    /* the x range: the data, widened to show the fp16-like limits when they are near */
    int lo = 1000, hi = -1000;
    for (int e = 0; e < FP_HIST_BINADES; e++)
        if (h->binade[e]) {
            int v = e + FP_HIST_EXP_MIN;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
    if (lo > hi)
        lo = hi = 0;
    int marks[4] = {eu, es, en, eo};
    for (int k = 0; k < 4; k++) {   /* include a limit when it is within 24 binades of the data */
        if (marks[k] < lo && lo - marks[k] <= 24)
            lo = marks[k];
        if (marks[k] > hi && marks[k] - hi <= 24)
            hi = marks[k];
    }
    lo -= 1;
    hi += 1;
    int nbins = hi - lo + 1;
    int per = (nbins + iw - 1) / iw;
    if (per < 1)
        per = 1;
    int ncol = (nbins + per - 1) / per;
    int bars = ih - 2 > 1 ? ih - 2 : 1;
    uint64_t colv[512] = {0}, maxv = 0;
    if (ncol > 512)
        ncol = 512;
    for (int c = 0; c < ncol; c++) {
        for (int k = 0; k < per; k++) {
            int e = lo + c * per + k;
            if (e >= FP_HIST_EXP_MIN && e <= FP_HIST_EXP_MAX)
                colv[c] += h->binade[e - FP_HIST_EXP_MIN];
        }
        maxv = colv[c] > maxv ? colv[c] : maxv;
    }
    static const char *const eighths[9] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    int xo = ix + (iw - ncol) / 2;
    for (int c = 0; c < ncol; c++) {
        int e0 = lo + c * per, e1 = e0 + per - 1;
        uint16_t attr = FP_C_ARM0 + arm;
        if (e1 >= eo)
            attr = FP_C_BAD;
        else if (e0 <= eu)
            attr = FP_C_BAD;
        else if (e0 < en)
            attr = FP_C_WARN;
        /* marker columns */
        const char *mk = NULL;
        for (int k = 0; k < 4; k++)
            if (marks[k] >= e0 && marks[k] <= e1)
                mk = k == 0 ? "U" : k == 1 ? "S" : k == 2 ? "N" : "O";
        double frac = colv[c] && maxv ? log1p((double)colv[c]) / log1p((double)maxv) : 0;
        int units = (int)lround(frac * bars * 8);
        if (colv[c] && units == 0)
            units = 1;
        for (int row = 0; row < bars; row++) {
            int y = iy + bars - 1 - row, u = units - row * 8;
            if (u > 0)
                fp_grid_put(d->g, xo + c, y, attr, d->ascii ? "#" : eighths[u >= 8 ? 8 : u]);
            else if (mk)
                fp_grid_put(d->g, xo + c, y, FP_C_MARK, d->ascii ? ":" : "┊");
        }
        if (mk)
            fp_grid_put(d->g, xo + c, iy + bars, FP_C_MARK | FP_A_BOLD, mk);
        else
            fp_grid_put(d->g, xo + c, iy + bars, FP_C_DIM, d->ascii ? "-" : "─");
    }
    /* limits that fall outside the range, named at the edges */
    for (int k = 0; k < 4; k++) {
        const char *nm = k == 0 ? "U" : k == 1 ? "S" : k == 2 ? "N" : "O";
        if (marks[k] < lo)
            fp_grid_printf(d->g, ix, iy, ix + 3, FP_C_MARK, "<%s", nm);
        else if (marks[k] > hi)
            fp_grid_printf(d->g, ix + iw - 2, iy, ix + iw, FP_C_MARK, "%s>", nm);
    }
    char ovf[16], sub[16], unf[16];
    fp_tui_fmt_count(ovf, sizeof ovf, (double)(h->cls[ui->fmt][FP_CLASS_OVERFLOW] + h->pos_inf + h->neg_inf));
    fp_tui_fmt_count(sub, sizeof sub, (double)h->cls[ui->fmt][FP_CLASS_SUBNORMAL]);
    fp_tui_fmt_count(unf, sizeof unf, (double)h->cls[ui->fmt][FP_CLASS_UNDERFLOW]);
    fp_grid_printf(d->g, ix, iy + ih - 1, ix + iw, 0, "2^%d..2^%d ovf %s sub %s unf %s @%lld", lo, hi, ovf, sub, unf,
                   (long long)step);
}
