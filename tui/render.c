/* render.c — one frame of the dashboard into the cell grid: the layout's panels, the header and
 * footer, the overlays (detail, help, stop confirmation), or a clear message when the terminal is
 * too small or there is nothing to show yet. Promise: the same code draws the terminal and the
 * headless text screens; nothing here reads the database (the model holds what was read). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "store.h"
#include "tui_internal.h"

void fp_tui_fmt_ns(char *buf, size_t cap, double ns)
{
    if (isnan(ns) || ns < 0)
        snprintf(buf, cap, "-");
    else if (ns < 1e3)
        snprintf(buf, cap, "%.0fns", ns);
    else if (ns < 1e6)
        snprintf(buf, cap, "%.1fus", ns / 1e3);
    else if (ns < 1e9)
        snprintf(buf, cap, "%.2fms", ns / 1e6);
    else
        snprintf(buf, cap, "%.2fs", ns / 1e9);
}

void fp_tui_fmt_bytes(char *buf, size_t cap, double b)
{
    if (isnan(b) || b < 0)
        snprintf(buf, cap, "n/a");
    else if (b < 1024)
        snprintf(buf, cap, "%.0fB", b);
    else if (b < 1024.0 * 1024)
        snprintf(buf, cap, "%.1fK", b / 1024);
    else if (b < 1024.0 * 1024 * 1024)
        snprintf(buf, cap, "%.1fM", b / 1024 / 1024);
    else
        snprintf(buf, cap, "%.2fG", b / 1024 / 1024 / 1024);
}

void fp_tui_fmt_count(char *buf, size_t cap, double v)
{
    if (isnan(v))
        snprintf(buf, cap, "-");
    else if (v < 1e4)
        snprintf(buf, cap, "%.0f", v);
    else if (v < 1e6)
        snprintf(buf, cap, "%.1fk", v / 1e3);
    else if (v < 1e9)
        snprintf(buf, cap, "%.1fM", v / 1e6);
    else
        snprintf(buf, cap, "%.1fG", v / 1e9);
}

void fp_tui_fmt_dur(char *buf, size_t cap, double s)
{
    if (isnan(s) || s < 0 || s > 1e8) {
        snprintf(buf, cap, "--");
        return;
    }
    long t = (long)(s + 0.5);
    snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

const char *fp_tui_role_short(int role)
{
    static const char *const n[FP_ROLE_COUNT] = {"activation", "act grad", "weight", "weight grad", "update"};
    return role >= 0 && role < FP_ROLE_COUNT ? n[role] : "?";
}

const char *fp_tui_fmt_label(int fmt)
{
    static const char *const n[FP_FMT_COUNT] = {"fp16", "bf16", "E4M3", "E5M2"};
    return fmt >= 0 && fmt < FP_FMT_COUNT ? n[fmt] : "?";
}

/* ---------------------------------------------------------------- header and footer */

static const char *arm_state(const fp_tui_arm_t *a, char *buf, size_t cap)
{
    const char *st = a->status.status[0] ? a->status.status : a->run.status;
    if (a->status.stale && strcmp(st, "running") == 0)
        snprintf(buf, cap, "running (stale)");
    else
        snprintf(buf, cap, "%s", st);
    return buf;
}

void fp_panel_header(fp_draw_t *d, fp_rect_t r)
{
    const fp_tui_model_t *m = d->m;
    fp_grid_t *g = d->g;
    int xe = r.x + r.w;
    int x = fp_grid_text(g, r.x, r.y, xe, FP_C_TITLE | FP_A_BOLD, "fp16probe");
    if (m->narms == 0) {
        fp_grid_text(g, x, r.y, xe, 0, d->ascii ? " | dashboard" : " │ dashboard");
        return;
    }
    const fp_run_row_t *r0 = &m->arm[m->ref].run;
    const char *sep = d->ascii ? " | " : " │ ";
    x = fp_grid_printf(g, x, r.y, xe, FP_A_BOLD, "%s%s ", sep, r0->model);
    for (int i = 0; i < m->narms; i++) {
        if (i)
            x = fp_grid_text(g, x, r.y, xe, 0, " vs ");
        x = fp_grid_text(g, x, r.y, xe, (uint16_t)((FP_C_ARM0 + i) | FP_A_BOLD), m->arm[i].run.policy);
    }
    x = fp_grid_printf(g, x, r.y, xe, 0, "%ssession %lld", sep, (long long)m->session);
    if (m->session_name[0])
        x = fp_grid_printf(g, x, r.y, xe, FP_C_DIM, " \"%s\"", m->session_name);
    x = fp_grid_printf(g, x, r.y, xe, 0, "%s%s", sep, r0->device[0] ? r0->device : "?");
    if (r0->batch_size > 0)
        x = fp_grid_printf(g, x, r.y, xe, 0, ", batch %lld", (long long)r0->batch_size);
    if (r0->image_size > 0)
        x = fp_grid_printf(g, x, r.y, xe, 0, ", %lldpx", (long long)r0->image_size);
    /* line 2: each arm's step and status, elapsed and ETA */
    x = r.x;
    int64_t first = -1, last = -1, done_steps = 0;
    int running = 0;
    for (int i = 0; i < m->narms; i++) {
        const fp_tui_arm_t *a = &m->arm[i];
        char st[32], tot[32] = "";
        if (m->total_steps > 0)
            snprintf(tot, sizeof tot, "/%lld", (long long)m->total_steps);
        arm_state(a, st, sizeof st);
        int bad = strcmp(st, "failed") == 0 || strcmp(st, "interrupted") == 0 || a->status.stale;
        x = fp_grid_text(g, x, r.y + 1, xe, (uint16_t)((FP_C_ARM0 + i) | FP_A_BOLD), a->run.arm[0] ? a->run.arm : a->run.policy);
        x = fp_grid_printf(g, x, r.y + 1, xe, 0, " step %lld%s ", (long long)a->last_step, tot);   /* steps are 1-based: the number done */
        x = fp_grid_text(g, x, r.y + 1, xe, bad ? FP_C_BAD | FP_A_BOLD : strcmp(st, "finished") == 0 ? FP_C_GOOD : FP_C_WARN, st);
        if (strcmp(st, "failed") == 0 && a->status.failure[0])
            x = fp_grid_printf(g, x, r.y + 1, xe, FP_C_BAD, " (%s)", a->status.failure);
        x = fp_grid_text(g, x, r.y + 1, xe, 0, "  ");
        if (a->first_start >= 0 && (first < 0 || a->first_start < first))
            first = a->first_start;
        if (a->last_end > last)
            last = a->last_end;
        if (a->last_step > done_steps)
            done_steps = a->last_step;
        running |= strcmp(st, "running") == 0;
    }
    char el[32], eta[32] = "--";
    double elapsed = first >= 0 && last >= first ? (double)(last - first) / 1e9 : NAN;
    fp_tui_fmt_dur(el, sizeof el, elapsed);
    if (!running)
        snprintf(eta, sizeof eta, "ended");
    else if (m->total_steps > 0 && done_steps > 0 && !isnan(elapsed))
        fp_tui_fmt_dur(eta, sizeof eta, elapsed / (double)done_steps * (double)(m->total_steps - done_steps));
    fp_grid_printf(g, x, r.y + 1, xe, FP_C_DIM, "elapsed %s  ETA %s", el, eta);
}

void fp_panel_footer(fp_draw_t *d, fp_rect_t r)
{
    fp_grid_t *g = d->g;
    fp_tui_ui_t *ui = d->ui;
    int xe = r.x + r.w;
    for (int i = r.x; i < xe; i++)
        fp_grid_put(g, i, r.y, FP_A_REV, " ");
    if (ui->confirm) {
        fp_grid_text(g, r.x, r.y, xe, FP_C_BAD | FP_A_REV | FP_A_BOLD,
                     " Stop the training? The session is flushed and marked interrupted. (y/n) ");
        return;
    }
    static const char *const focus[FP_FOCUS_COUNT] = {"layers", "histogram", "events"};
    const char *dn = d->ascii ? "v" : "▼", *up = d->ascii ? "^" : "▲";
    fp_grid_printf(g, r.x, r.y, xe, FP_A_REV,
                   " q quit  ? help  Tab:%s  s sort:%s%s  r role:%s  f fmt:%s  Enter detail", focus[ui->focus],
                   fp_tui_col_name(ui->sort_col), ui->sort_desc ? dn : up, fp_tui_role_short(ui->role),
                   fp_tui_fmt_label(ui->fmt));
}

/* ---------------------------------------------------------------- the frame */

static void centered(fp_grid_t *g, int y, uint16_t attr, const char *s)
{
    int n = fp_utf8_len(s);
    int x = (g->w - n) / 2;
    fp_grid_text(g, x < 0 ? 0 : x, y, g->w, attr, s);
}

void fp_tui_render(fp_grid_t *g, const fp_tui_model_t *m, fp_tui_ui_t *ui, const fp_layout_t *l, int chart,
                   int ascii)
{
    fp_grid_clear(g);
    fp_draw_t d = {.g = g, .m = m, .ui = ui, .chart = chart, .ascii = ascii};
    if (l->too_small) {   /* a clear message, short lines, centred, never garbage */
        char a[64], b[64];
        snprintf(a, sizeof a, "terminal too small: %dx%d", l->w, l->h);
        snprintf(b, sizeof b, "need %dx%d", FP_TUI_MIN_W, FP_TUI_MIN_H);
        int y = g->h / 2 - 1;
        centered(g, y < 0 ? 0 : y, FP_C_WARN | FP_A_BOLD, a);
        centered(g, y + 1, 0, b);
        centered(g, y + 2, FP_C_DIM, "enlarge it, or q");
        return;
    }
    fp_panel_header(&d, l->p[FP_P_HEADER]);
    fp_panel_footer(&d, l->p[FP_P_FOOTER]);
    if (m->note[0] || m->narms == 0) {
        centered(g, g->h / 2 - 1, FP_C_WARN | FP_A_BOLD, m->note[0] ? m->note : "waiting for data");
        centered(g, g->h / 2 + 1, FP_C_DIM, "the dashboard follows the file; q quits");
        return;
    }
    fp_tui_sort_layers(m, ui);
    fp_panel_loss(&d, l->p[FP_P_LOSS]);
    fp_panel_thr(&d, l->p[FP_P_THR]);
    fp_panel_mem(&d, l->p[FP_P_MEM]);
    fp_panel_scale(&d, l->p[FP_P_SCALE]);
    fp_panel_layers(&d, l->p[FP_P_LAYERS]);
    fp_panel_hist(&d, l->p[FP_P_HIST]);
    fp_panel_events(&d, l->p[FP_P_EVENTS]);
    if (ui->detail)
        fp_panel_detail(&d, g->w, g->h);
    if (ui->help)
        fp_panel_help(&d, g->w, g->h);
}
