/* test_tui_units.c — the dashboard's parts alone: downsampling keeps min/max in O(buckets), layouts
 * stay inside the screen without overlaps from 80x24 up and say too_small below, charts draw only
 * inside their area, and the keys change the UI state as documented (incl. the stop question). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tap.h"
#include "tui/tui_internal.h"

static int overlap(fp_rect_t a, fp_rect_t b)
{
    return a.w && b.w && a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

int main(void)
{
    tap_plan(17);
    fp_ds_t *d = malloc(sizeof *d);
    fp_ds_init(d);
    for (int i = 0; i < 100000; i++)
        fp_ds_push(d, i == 5000 ? -7.0 : i == 77777 ? 1e6 : (double)(i % 10));
    double mn = INFINITY, mx = -INFINITY;
    for (int b = 0; b < d->nb; b++) {
        mn = fmin(mn, d->mn[b]);
        mx = fmax(mx, d->mx[b]);
    }
    tap_ok(d->nb <= FP_DS_BUCKETS && d->total == 100000, "100000 samples in %d buckets of %lld", d->nb,
           (long long)d->per);
    tap_ok(mn == -7.0 && mx == 1e6, "downsampling keeps the extremes (min %g max %g)", mn, mx);

    int bad = 0, small = 0;
    for (int w = 80; w <= 300; w += 11)
        for (int h = 24; h <= 100; h += 7) {
            fp_layout_t l;
            fp_tui_layout(&l, w, h);
            for (int p = 0; p < FP_P_COUNT; p++) {
                fp_rect_t r = l.p[p];
                if (r.w && (r.x < 0 || r.y < 0 || r.x + r.w > w || r.y + r.h > h))
                    bad++;
                for (int q = p + 1; q < FP_P_COUNT; q++)
                    bad += overlap(r, l.p[q]);
            }
            small += l.too_small;
            bad += !l.p[FP_P_LAYERS].w || !l.p[FP_P_HIST].w || !l.p[FP_P_LOSS].w || !l.p[FP_P_SCALE].w;
        }
    tap_is_int(bad, 0, "layouts 80x24..300x100: inside the screen, no overlaps, essentials present");
    tap_is_int(small, 0, "no layout from 80x24 up is too small");
    fp_layout_t l;
    fp_tui_layout(&l, 79, 24);
    tap_ok(l.too_small, "79x24 is too small");
    fp_tui_layout(&l, 80, 23);
    tap_ok(l.too_small, "80x23 is too small");
    fp_tui_layout(&l, 200, 50);
    tap_ok(l.p[FP_P_EVENTS].w > 0, "200x50 shows the events panel");

    fp_grid_t g;
    fp_grid_init(&g, 40, 10, 0);
    fp_chart_series_t s = {d, FP_C_ARM0};
    fp_chart_draw(&g, 5, 2, 20, 4, FP_TUI_CHART_BRAILLE, &s, 1, NAN, NAN, NULL, NULL);
    int outside = 0, inside = 0;
    for (int y = 0; y < 10; y++)
        for (int x = 0; x < 40; x++) {
            int blank = strcmp(g.cells[y * 40 + x].ch, " ") == 0;
            if (x >= 5 && x < 25 && y >= 2 && y < 6)
                inside += !blank;
            else
                outside += !blank;
        }
    tap_ok(inside > 0 && outside == 0, "braille chart draws only inside its area (%d cells)", inside);
    fp_grid_clear(&g);
    fp_chart_draw(&g, 0, 0, 40, 10, FP_TUI_CHART_ASCII, &s, 1, NAN, NAN, NULL, NULL);
    int ascii = 1;
    for (int i = 0; i < 400; i++)
        ascii &= (unsigned char)g.cells[i].ch[0] < 0x80;
    tap_ok(ascii, "ASCII chart uses ASCII only");
    fp_grid_free(&g);
    free(d);

    fp_tui_ui_t ui;
    fp_tui_ui_init(&ui);
    ui.norder = 10;
    fp_tui_key(&ui, 's', 1);
    tap_is_int(ui.sort_col, FP_COL_NAME, "s: next sort column");
    fp_tui_key(&ui, 'r', 1);
    fp_tui_key(&ui, 'f', 1);
    tap_ok(ui.role == 1 && ui.fmt == 1, "r: next role, f: next format");
    fp_tui_key(&ui, 'f', 1);
    fp_tui_key(&ui, 'f', 1);
    fp_tui_key(&ui, 'f', 1);
    tap_is_int(ui.fmt, 0, "f cycles fp16, bf16, E4M3, E5M2 and back");
    fp_tui_key(&ui, FP_KEY_DOWN, 1);
    fp_tui_key(&ui, 'j', 1);
    fp_tui_key(&ui, 'k', 1);
    tap_is_int(ui.sel, 1, "down, j, k");
    tap_is_int(fp_tui_key(&ui, 'q', 1), FP_ACT_QUIT, "q quits when the dashboard does not own the training");
    ui.owns_training = 1;
    int a1 = fp_tui_key(&ui, 'q', 1), a2 = fp_tui_key(&ui, 'n', 1), a3 = fp_tui_key(&ui, 'q', 1),
        a4 = fp_tui_key(&ui, 'y', 1);
    tap_ok(a1 == FP_ACT_DRAW && a2 == FP_ACT_DRAW && a3 == FP_ACT_DRAW && a4 == FP_ACT_STOP,
           "owned training: q asks, n stays, y stops");
    tap_is_int(fp_tui_key(&ui, 'q', 0), FP_ACT_QUIT, "owned training that has ended: q quits at once");
    const char *p = "j<resize 100x30><C-l>";
    int w = 0, h = 0, k1 = fp_tui_script_key(&p, &w, &h), k2 = fp_tui_script_key(&p, &w, &h),
        k3 = fp_tui_script_key(&p, &w, &h), k4 = fp_tui_script_key(&p, &w, &h);
    tap_ok(k1 == 'j' && k2 == FP_KEY_RESIZE && w == 100 && h == 30 && k3 == FP_KEY_REDRAW && k4 == 0,
           "key scripts parse");
    return tap_done();
}
