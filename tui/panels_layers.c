/* panels_layers.c — the layer table (forward / backward time per arm over the last window, speedup,
 * share of the step, overflow / underflow / subnormal counts for the chosen format and role, relative
 * error), sortable by any column, worst values highlighted; and the selected layer's detail overlay.
 * Promise: columns that do not fit collapse by priority; the layer name always shows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "store.h"
#include "tui_internal.h"

/* The histogram the numerics columns use: the low arm's (what did happen), else the reference's. */
static const fp_hist_t *layer_hist(const fp_tui_model_t *m, const fp_tui_ui_t *ui, int l, int *arm, int64_t *step)
{
    int low = fp_tui_cmp_arm(m, ui);
    int cand[2] = {low, m->ref};
    for (int k = 0; k < 2; k++) {
        int i = cand[k];
        if (i >= 0 && i < m->narms && m->arm[i].hist && l < m->nlayers && m->arm[i].hist[l].step >= 0) {
            if (arm)
                *arm = i;
            if (step)
                *step = m->arm[i].hist[l].step;
            return &m->arm[i].hist[l].hist;
        }
    }
    return NULL;
}

static double bwd_ns(const fp_tui_arm_t *a, int l)
{
    double x = fp_tui_layer_ns(a, l, FP_PHASE_BACKWARD_DATA), y = fp_tui_layer_ns(a, l, FP_PHASE_BACKWARD_WEIGHTS);
    if (isnan(x))
        return y;
    return isnan(y) ? x : x + y;
}

static double total_ns(const fp_tui_arm_t *a, int l)
{
    double f = fp_tui_layer_ns(a, l, FP_PHASE_FORWARD), b = bwd_ns(a, l);
    if (isnan(f))
        return b;
    return isnan(b) ? f : f + b;
}

double fp_tui_col_value(const fp_tui_model_t *m, const fp_tui_ui_t *ui, int l, int col)
{
    int low = fp_tui_cmp_arm(m, ui);
    const fp_tui_arm_t *ref = &m->arm[m->ref], *lo = &m->arm[low < 0 ? m->ref : low];
    const fp_hist_t *h;
    switch (col) {
    case FP_COL_INDEX:
        return l;
    case FP_COL_FWD_REF:
        return fp_tui_layer_ns(ref, l, FP_PHASE_FORWARD);
    case FP_COL_FWD_LOW:
        return fp_tui_layer_ns(lo, l, FP_PHASE_FORWARD);
    case FP_COL_BWD_REF:
        return bwd_ns(ref, l);
    case FP_COL_BWD_LOW:
        return bwd_ns(lo, l);
    case FP_COL_SPEEDUP: {
        double a = total_ns(ref, l), b = total_ns(lo, l);
        return (isnan(a) || isnan(b) || b <= 0 || lo == ref) ? NAN : a / b;
    }
    case FP_COL_SHARE: {
        double sum = 0;
        for (int k = 0; k < m->nlayers; k++) {
            double t = total_ns(lo, k);
            if (!isnan(t))
                sum += t;
        }
        double t = total_ns(lo, l);
        return isnan(t) || sum <= 0 ? NAN : 100.0 * t / sum;
    }
    case FP_COL_OVF:
        h = layer_hist(m, ui, l, NULL, NULL);
        return h ? (double)(h->cls[ui->fmt][FP_CLASS_OVERFLOW] + h->pos_inf + h->neg_inf) : NAN;
    case FP_COL_UNF:
        h = layer_hist(m, ui, l, NULL, NULL);
        return h ? (double)h->cls[ui->fmt][FP_CLASS_UNDERFLOW] : NAN;
    case FP_COL_SUB:
        h = layer_hist(m, ui, l, NULL, NULL);
        return h ? (double)h->cls[ui->fmt][FP_CLASS_SUBNORMAL] : NAN;
    case FP_COL_RELERR:
        return lo->relerr && l < m->nlayers ? lo->relerr[l] : NAN;
    default:
        return NAN;
    }
}

static const fp_tui_model_t *sort_m;
static const fp_tui_ui_t *sort_ui;
static double *sort_v;

static int cmp_rows(const void *pa, const void *pb)
{
    int a = *(const int *)pa, b = *(const int *)pb;
    int c = 0;
    if (sort_ui->sort_col == FP_COL_NAME) {
        c = strcmp(sort_m->layers[a].name, sort_m->layers[b].name);
    } else {
        double x = sort_v[a], y = sort_v[b];
        if (isnan(x) != isnan(y))
            return isnan(x) ? 1 : -1;   /* unknown values last, either way */
        c = isnan(x) ? 0 : (x > y) - (x < y);
    }
    if (sort_ui->sort_desc)
        c = -c;
    return c ? c : (a > b) - (a < b);
}

void fp_tui_sort_layers(const fp_tui_model_t *m, fp_tui_ui_t *ui)
{
    int n = m->nlayers < 4096 ? m->nlayers : 4096;
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) {
        ui->norder = 0;
        return;
    }
    for (int l = 0; l < n; l++) {
        ui->order[l] = l;
        v[l] = ui->sort_col == FP_COL_NAME ? 0 : fp_tui_col_value(m, ui, l, ui->sort_col);
    }
    sort_m = m;
    sort_ui = ui;
    sort_v = v;
    qsort(ui->order, (size_t)n, sizeof ui->order[0], cmp_rows);
    free(v);
    ui->norder = n;
    if (ui->sel >= n)
        ui->sel = n > 0 ? n - 1 : 0;
}

typedef struct {
    int col, width, prio;
} col_spec_t;

static const col_spec_t cols[FP_COL_COUNT] = {
    {FP_COL_INDEX, 3, 11},  {FP_COL_NAME, 16, 0},   {FP_COL_FWD_REF, 8, 4}, {FP_COL_FWD_LOW, 8, 5},
    {FP_COL_BWD_REF, 8, 9}, {FP_COL_BWD_LOW, 8, 10}, {FP_COL_SPEEDUP, 7, 1}, {FP_COL_SHARE, 6, 7},
    {FP_COL_OVF, 7, 2},     {FP_COL_UNF, 7, 3},     {FP_COL_SUB, 7, 8},     {FP_COL_RELERR, 8, 6},
};

static void header_label(const fp_tui_model_t *m, const fp_tui_ui_t *ui, int col, char *buf, size_t cap)
{
    int low = fp_tui_cmp_arm(m, ui);
    const char *rp = m->arm[m->ref].run.policy, *lp = low >= 0 ? m->arm[low].run.policy : "";
    switch (col) {
    case FP_COL_INDEX: snprintf(buf, cap, "#"); break;
    case FP_COL_NAME: snprintf(buf, cap, "layer"); break;
    case FP_COL_FWD_REF: snprintf(buf, cap, "F %s", rp); break;
    case FP_COL_FWD_LOW: snprintf(buf, cap, "F %s", lp); break;
    case FP_COL_BWD_REF: snprintf(buf, cap, "B %s", rp); break;
    case FP_COL_BWD_LOW: snprintf(buf, cap, "B %s", lp); break;
    case FP_COL_SPEEDUP: snprintf(buf, cap, "speed"); break;
    case FP_COL_SHARE: snprintf(buf, cap, "share"); break;
    case FP_COL_OVF: snprintf(buf, cap, "ovf"); break;
    case FP_COL_UNF: snprintf(buf, cap, "unf"); break;
    case FP_COL_SUB: snprintf(buf, cap, "sub"); break;
    case FP_COL_RELERR: snprintf(buf, cap, "relerr"); break;
    default: buf[0] = 0;
    }
}

static void cell_text(const fp_tui_model_t *m, const fp_tui_ui_t *ui, int l, int col, char *buf, size_t cap,
                      uint16_t *attr)
{
    double v = fp_tui_col_value(m, ui, l, col);
    *attr = 0;
    switch (col) {
    case FP_COL_INDEX: snprintf(buf, cap, "%d", l); break;
    case FP_COL_NAME: snprintf(buf, cap, "%s", m->layers[l].name); break;
    case FP_COL_FWD_REF: case FP_COL_FWD_LOW: case FP_COL_BWD_REF: case FP_COL_BWD_LOW:
        fp_tui_fmt_ns(buf, cap, v);
        break;
    case FP_COL_SPEEDUP:
        if (isnan(v))
            snprintf(buf, cap, "-");
        else
            snprintf(buf, cap, "%.2fx", v);
        if (!isnan(v) && v < 1.0)
            *attr = FP_C_BAD | FP_A_BOLD;
        else if (!isnan(v) && v >= 1.5)
            *attr = FP_C_GOOD;
        break;
    case FP_COL_SHARE:
        if (isnan(v))
            snprintf(buf, cap, "-");
        else
            snprintf(buf, cap, "%.1f%%", v);
        break;
    case FP_COL_OVF: case FP_COL_UNF: case FP_COL_SUB:
        fp_tui_fmt_count(buf, cap, v);
        if (!isnan(v) && v > 0)
            *attr = col == FP_COL_OVF ? FP_C_BAD | FP_A_BOLD : FP_C_WARN;
        break;
    case FP_COL_RELERR:
        if (isnan(v))
            snprintf(buf, cap, "-");
        else
            snprintf(buf, cap, "%.1e", v);
        if (!isnan(v) && v > 1e-2)
            *attr = FP_C_BAD | FP_A_BOLD;
        break;
    default: buf[0] = 0;
    }
}

void fp_panel_layers(fp_draw_t *d, fp_rect_t r)
{
    if (r.w == 0)
        return;
    const fp_tui_model_t *m = d->m;
    fp_tui_ui_t *ui = d->ui;
    /* the title says which arm is compared ('a' cycles it) and that the counts are one sampled step's */
    int low = fp_tui_cmp_arm(m, ui);
    int64_t cstep = -1;
    for (int l = 0; l < m->nlayers && cstep < 0; l++)
        layer_hist(m, ui, l, NULL, &cstep);
    char cnt[48] = "", title[200];
    if (cstep >= 0)
        snprintf(cnt, sizeof cnt, "counts: step %lld", (long long)cstep);
    const char *dir = ui->sort_desc ? (d->ascii ? "v" : "▼") : (d->ascii ? "^" : "▲");
    for (int v = 0; v < 4; v++) {   /* the fullest that fits */
        const char *lp = m->arm[low].run.policy, *rp = m->arm[m->ref].run.policy;
        if (v == 0)
            snprintf(title, sizeof title, "layers %s vs %s  time: last %d steps  %s %s %s  sort %s%s", lp, rp,
                     FP_TUI_WINDOW, cnt, fp_tui_fmt_label(ui->fmt), fp_tui_role_short(ui->role),
                     fp_tui_col_name(ui->sort_col), dir);
        else if (v == 1)
            snprintf(title, sizeof title, "layers %s vs %s  %s %s %s  sort %s%s", lp, rp, cnt,
                     fp_tui_fmt_label(ui->fmt), fp_tui_role_short(ui->role), fp_tui_col_name(ui->sort_col), dir);
        else if (v == 2)
            snprintf(title, sizeof title, "layers %s vs %s  %s", lp, rp, cnt);
        else
            snprintf(title, sizeof title, "%s vs %s %s", lp, rp, cnt);
        if (fp_utf8_len(title) + 4 <= r.w)
            break;
    }
    fp_grid_box(d->g, r.x, r.y, r.w, r.h, 0, title, ui->focus == FP_FOCUS_LAYERS);
    int ix = r.x + 1, iy = r.y + 1, iw = r.w - 2, ih = r.h - 2;
    /* choose columns by priority until the width is used */
    int use[FP_COL_COUNT] = {0}, width = 0;
    for (int p = 0; p < FP_COL_COUNT; p++)
        for (int c = 0; c < FP_COL_COUNT; c++)
            if (cols[c].prio == p && width + cols[c].width + 1 <= iw) {
                use[c] = 1;
                width += cols[c].width + 1;
            }
    int name_w = cols[FP_COL_NAME].width + (iw - width);   /* the name takes what is left */
    if (name_w > 28)
        name_w = 28;
    ui->table_rows = ih - 1 > 1 ? ih - 1 : 1;
    /* header */
    int x = ix;
    for (int c = 0; c < FP_COL_COUNT; c++) {
        if (!use[c])
            continue;
        int cw = c == FP_COL_NAME ? name_w : cols[c].width;
        char lab[32];
        header_label(m, ui, c, lab, sizeof lab);
        uint16_t a = (uint16_t)(FP_A_BOLD | (c == ui->sort_col ? FP_A_REV : 0));
        if (c == FP_COL_NAME)
            fp_grid_printf(d->g, x, iy, x + cw, a, "%-*s", cw, lab);
        else
            fp_grid_printf(d->g, x, iy, x + cw, a, "%*s", cw, lab);
        x += cw + 1;
    }
    if (m->nlayers == 0) {
        fp_grid_text(d->g, ix + 1, iy + 1, ix + iw, FP_C_DIM, "no layers recorded yet");
        return;
    }
    if (ui->sel < ui->top)
        ui->top = ui->sel;
    if (ui->sel >= ui->top + ui->table_rows)
        ui->top = ui->sel - ui->table_rows + 1;
    for (int row = 0; row < ui->table_rows && ui->top + row < ui->norder; row++) {
        int k = ui->top + row, l = ui->order[k];
        int sel = k == ui->sel;
        uint16_t base = sel ? (uint16_t)(ui->focus == FP_FOCUS_LAYERS ? FP_A_REV : FP_A_BOLD) : 0;
        if (sel)
            for (int i = ix; i < ix + iw; i++)
                fp_grid_put(d->g, i, iy + 1 + row, base, " ");
        x = ix;
        for (int c = 0; c < FP_COL_COUNT; c++) {
            if (!use[c])
                continue;
            int cw = c == FP_COL_NAME ? name_w : cols[c].width;
            char txt[96];
            uint16_t a;
            cell_text(m, ui, l, c, txt, sizeof txt, &a);
            a = (uint16_t)(a | base);
            if (c == FP_COL_NAME)
                fp_grid_printf(d->g, x, iy + 1 + row, x + cw, a, "%-*s", cw, txt);
            else
                fp_grid_printf(d->g, x, iy + 1 + row, x + cw, a, "%*s", cw, txt);
            x += cw + 1;
        }
    }
}

int fp_tui_selected_layer(const fp_tui_ui_t *ui)
{
    return ui->norder > 0 && ui->sel >= 0 && ui->sel < ui->norder ? ui->order[ui->sel] : -1;
}

void fp_panel_detail(fp_draw_t *d, int w, int h)
{
    const fp_tui_model_t *m = d->m;
    int l = fp_tui_selected_layer(d->ui);
    if (l < 0)
        return;
    int bw = w - 8 < 76 ? w - 8 : 76, bh = h - 4 < 20 ? h - 4 : 20;
    int bx = (w - bw) / 2, by = (h - bh) / 2;
    fp_grid_fill(d->g, bx, by, bw, bh);
    char title[128];
    snprintf(title, sizeof title, "layer %d: %s  (Enter/Esc closes)", l, m->layers[l].name);
    fp_grid_box(d->g, bx, by, bw, bh, 0, title, 1);
    int x = bx + 2, y = by + 1, xe = bx + bw - 2;
    const fp_layer_row_t *L = &m->layers[l];
    fp_grid_printf(d->g, x, y++, xe, 0, "type %s  in %s  out %s", L->type[0] ? L->type : "?",
                   L->input_shape[0] ? L->input_shape : "?", L->output_shape[0] ? L->output_shape : "?");
    char params[24], ff[24], bf[24];
    fp_tui_fmt_count(params, sizeof params, L->params < 0 ? NAN : (double)L->params);
    fp_tui_fmt_count(ff, sizeof ff, L->fwd_flops < 0 ? NAN : (double)L->fwd_flops);
    fp_tui_fmt_count(bf, sizeof bf, L->bwd_flops < 0 ? NAN : (double)L->bwd_flops);
    fp_grid_printf(d->g, x, y++, xe, 0, "params %s  FLOPs fwd %s bwd %s", params, ff, bf);
    y++;
    fp_grid_printf(d->g, x, y++, xe, FP_A_BOLD, "%-8s %10s %10s %10s %8s", "arm", "forward", "bwd data",
                   "bwd weight", "rel err");
    for (int i = 0; i < m->narms && y < by + bh - 1; i++) {
        const fp_tui_arm_t *a = &m->arm[i];
        char f[16], bd[16], bwt[16], re[16] = "-";
        fp_tui_fmt_ns(f, sizeof f, fp_tui_layer_ns(a, l, FP_PHASE_FORWARD));
        fp_tui_fmt_ns(bd, sizeof bd, fp_tui_layer_ns(a, l, FP_PHASE_BACKWARD_DATA));
        fp_tui_fmt_ns(bwt, sizeof bwt, fp_tui_layer_ns(a, l, FP_PHASE_BACKWARD_WEIGHTS));
        if (a->relerr && !isnan(a->relerr[l]))
            snprintf(re, sizeof re, "%.2e", a->relerr[l]);
        fp_grid_printf(d->g, x, y++, xe, (uint16_t)(FP_C_ARM0 + i), "%-8s %10s %10s %10s %8s", a->run.policy, f, bd,
                       bwt, re);
    }
    double sp = fp_tui_col_value(m, d->ui, l, FP_COL_SPEEDUP);
    if (!isnan(sp))
        fp_grid_printf(d->g, x, y++, xe, 0, "speedup %.2fx", sp);
    y++;
    int arm = -1;
    int64_t step = -1;
    const fp_hist_t *hh = layer_hist(m, d->ui, l, &arm, &step);
    if (!hh) {
        fp_grid_printf(d->g, x, y++, xe, FP_C_DIM, "no histogram of %s recorded", fp_tui_role_short(d->ui->role));
        return;
    }
    fp_grid_printf(d->g, x, y++, xe, 0, "%s of %s at step %lld: %llu values, amax %.4g, zero %llu, nan %llu, inf %llu",
                   fp_tui_role_short(d->ui->role), m->arm[arm].run.policy, (long long)step,
                   (unsigned long long)hh->count, (double)hh->amax, (unsigned long long)hh->zero,
                   (unsigned long long)hh->nan, (unsigned long long)(hh->pos_inf + hh->neg_inf));
    fp_grid_printf(d->g, x, y++, xe, FP_A_BOLD, "%-6s %10s %10s %10s %10s", "format", "overflow", "to max",
                   "subnormal", "underflow");
    for (int f = 0; f < FP_FMT_COUNT && y < by + bh - 1; f++) {
        char o[16], t[16], s[16], u[16];
        fp_tui_fmt_count(o, sizeof o, (double)hh->cls[f][FP_CLASS_OVERFLOW]);
        fp_tui_fmt_count(t, sizeof t, (double)hh->cls[f][FP_CLASS_ROUND_TO_MAX]);
        fp_tui_fmt_count(s, sizeof s, (double)hh->cls[f][FP_CLASS_SUBNORMAL]);
        fp_tui_fmt_count(u, sizeof u, (double)hh->cls[f][FP_CLASS_UNDERFLOW]);
        fp_grid_printf(d->g, x, y++, xe, f == d->ui->fmt ? FP_A_BOLD : 0, "%-6s %10s %10s %10s %10s",
                       fp_tui_fmt_label(f), o, t, s, u);
    }
}
