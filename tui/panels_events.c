/* panels_events.c — the events list (skipped steps with their first non-finite layer, loss-scale
 * changes, NaN, warnings), newest first and scrollable, and the help overlay listing every key.
 * Promise: event text is shown as stored, one line each, clipped to the panel. */
#include <stdio.h>
#include <string.h>
#include "store.h"
#include "tui_internal.h"

void fp_panel_events(fp_draw_t *d, fp_rect_t r)
{
    if (r.w == 0)
        return;
    const fp_tui_model_t *m = d->m;
    fp_tui_ui_t *ui = d->ui;
    char title[64];
    snprintf(title, sizeof title, "events (%lld)", (long long)m->nev);
    fp_grid_box(d->g, r.x, r.y, r.w, r.h, 0, title, ui->focus == FP_FOCUS_EVENTS);
    int ix = r.x + 1, iy = r.y + 1, iw = r.w - 2, ih = r.h - 2;
    int64_t avail = m->nev < FP_TUI_EVENTS ? m->nev : FP_TUI_EVENTS;
    if (ui->ev_scroll > avail - 1)
        ui->ev_scroll = avail > 0 ? (int)avail - 1 : 0;
    if (avail == 0) {
        fp_grid_text(d->g, ix + 1, iy, ix + iw, FP_C_DIM, "no events");
        return;
    }
    static const char *const kind[] = {"scale", "SKIP", "NaN", "warn", "info"};
    for (int row = 0; row < ih; row++) {
        int64_t k = (int64_t)row + ui->ev_scroll;
        if (k >= avail)
            break;
        const fp_tui_ev_t *e = &m->events[(m->nev - 1 - k) % FP_TUI_EVENTS];
        uint16_t a = e->kind == FP_EVENT_SKIPPED_STEP || e->kind == FP_EVENT_NAN ? FP_C_BAD | FP_A_BOLD
                     : e->kind == FP_EVENT_WARNING                              ? FP_C_WARN
                                                                                : 0;
        int x = fp_grid_text(d->g, ix, iy + row, ix + iw, (uint16_t)(FP_C_ARM0 + e->arm), m->arm[e->arm].run.policy);
        if (e->step >= 0)
            x = fp_grid_printf(d->g, x, iy + row, ix + iw, FP_C_DIM, " %lld", (long long)e->step);
        x = fp_grid_printf(d->g, x, iy + row, ix + iw, a, " %s", kind[e->kind >= 0 && e->kind <= 4 ? e->kind : 4]);
        if (e->layer >= 0 && e->layer < m->nlayers && !strstr(e->text, m->layers[e->layer].name))
            x = fp_grid_printf(d->g, x, iy + row, ix + iw, 0, " %s", m->layers[e->layer].name);
        fp_grid_printf(d->g, x, iy + row, ix + iw, 0, " %s", e->text);
    }
}

void fp_panel_help(fp_draw_t *d, int w, int h)
{
    static const char *const lines[] = {
        "arrows, j/k     select a layer (events: scroll)",
        "PgUp/PgDn g/G   page, first, last",
        "Tab, Shift-Tab  next / previous panel",
        "s / S           sort column / reverse the order",
        "a / A           the compared arm (every panel compares it with fp32)",
        "r / R           tensor role (activation, grads, weight, update)",
        "f / F           format: fp16, bf16, E4M3, E5M2",
        "left/right      role, in the histogram panel",
        "Enter           the selected layer's detail",
        "Ctrl-L          redraw the screen and re-read the file",
        "?               this help (any key closes it)",
        "q               quit (asks first if this dashboard",
        "                started a training that still runs)",
        "",
        "histogram markers: O overflow  N min normal",
        "                   S min subnormal  U underflow",
    };
    int n = (int)(sizeof lines / sizeof lines[0]);
    int bw = w - 4 < 70 ? w - 4 : 70, bh = h - 2 < n + 2 ? h - 2 : n + 2;
    int bx = (w - bw) / 2, by = (h - bh) / 2;
    fp_grid_fill(d->g, bx, by, bw, bh);
    fp_grid_box(d->g, bx, by, bw, bh, 0, "keys", 1);
    for (int i = 0; i < n && i < bh - 2; i++)
        fp_grid_text(d->g, bx + 2, by + 1 + i, bx + bw - 1, 0, lines[i]);
}
