/* test_tui_screen.c — headless screens of the dashboard on the fixture database (tui_testutil.h):
 * 80x24 against the golden file tests/fixtures/tui/screen_80x24.txt (ASCII) and checked for the
 * numbers (layer names, speedup 2.00x, energy n/a, skipped steps), 200x50 with events, and the keys
 * (sort, role, format, select, Enter, help, resize). TUI_REGEN=1 rewrites the golden file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "store_testutil.h"
#include "tap.h"
#include "tui/tui.h"
#include "tui/tui_internal.h"
#include "tui_screen_testutil.h"
#include "tui_testutil.h"

int main(void)
{
    tap_plan(33);
    char *dir = tu_mkdir();
    char *db = tu_path(dir, "fixture.db");
    if (tt_write_fixture(db, NULL) != FP_OK) {
        tap_diag("fixture: %s", fp_error_message());
        return 1;
    }
    /* 80x24, ASCII: the golden screen and its numbers */
    char *t = ts_screen(db, 80, 24, "", 1);
    tap_is_int(ts_lines(t), 24, "80x24: 24 lines");
    int ascii_only = 1;
    for (const char *p = t; *p; p++)
        ascii_only &= (unsigned char)*p < 0x80;
    tap_ok(ascii_only, "80x24 --ascii: only ASCII bytes");
    tap_ok(ts_has(t, "resnet50") && ts_has(t, "fp32") && ts_has(t, "fp16"), "header: model and arms");
    tap_ok(ts_has(t, "step 120/120") && ts_has(t, "finished"), "header: steps and status");
    tap_ok(ts_has(t, "speedup 2.00x"), "throughput: speedup of median step times 2.00x");
    tap_ok(ts_has(t, "E n/a") && ts_has(t, "P n/a"), "memory/energy: energy and power n/a");
    tap_ok(ts_has(t, "pk 200.0M") && ts_has(t, "pk 120.0M"), "memory/energy: peaks");
    tap_ok(ts_has(t, "skipped 2"), "loss scale: 2 skipped steps counted");
    tap_ok(ts_has(t, "x"), "loss scale: skipped steps marked");
    tap_ok(ts_has(t, "layer3.2.conv2") && ts_has(t, "conv1") && ts_has(t, "bn1"), "layer table: names");
    const char *hot = ts_line_with(t, "layer3.2.conv2");
    tap_ok(strstr(hot, " 3 ") && strstr(hot, " 2 ") && strstr(hot, "2.00x"), "hot layer row: ovf 3, unf 2, 2.00x: %s",
           hot);
    tap_ok(strstr(ts_line_with(t, "bn1"), "0.50x") != NULL, "bn1 slower in fp16: 0.50x");
    char gp[4096];
    snprintf(gp, sizeof gp, "%s/tests/fixtures/tui/screen_80x24.txt", getenv("top_srcdir") ? getenv("top_srcdir") : "..");
    if (getenv("TUI_REGEN")) {
        FILE *f = fopen(gp, "wb");
        if (f) {
            fputs(t, f);
            fclose(f);
        }
    }
    char *golden = tu_slurp(gp, NULL);
    if (golden && *golden) {
        int same = strcmp(golden, t) == 0;
        if (!same)
            tap_diag("screen differs from %s; got:\n%s", gp, t);
        tap_ok(same, "80x24 screen matches %s", gp);
    } else {
        tap_skip(1, "no golden file (TUI_REGEN=1 writes it)");
    }
    free(golden);
    free(t);

    /* 200x50, UTF-8: events, every layer, braille */
    t = ts_screen(db, 200, 50, "", 0);
    tap_is_int(ts_lines(t), 50, "200x50: 50 lines");
    tap_ok(ts_has(t, "first non-finite gradient in layer3.2.conv2"), "events: skipped step with its layer");
    tap_ok(ts_has(t, "loss scale 65536 -> 32768") && ts_has(t, "loss scale 32768 -> 16384"), "events: loss-scale changes");
    tap_ok(ts_has(t, "fc") && ts_has(t, "avgpool") && ts_has(t, "layer4.0.conv3"), "200x50: every layer listed");
    tap_ok(ts_has(t, "val 71.2%") && ts_has(t, "val 70.9%"), "loss panel: validation top-1 of both arms");
    tap_ok(ts_has(t, "\xe2\xa0") || ts_has(t, "\xe2\xa1") || ts_has(t, "\xe2\xa2") || ts_has(t, "\xe2\xa3"), "braille chart cells");
    tap_ok(ts_has(t, "speedup over time"), "200x50: speedup over time chart");
    tap_ok(ts_has(t, "5.0e-02"), "relative error of the hot layer");
    free(t);

    /* keys */
    t = ts_screen(db, 120, 40, "ssssssss", 1);   /* sort by overflow, worst first */
    tap_ok(ts_has(t, "sort overflow"), "s: sort column overflow");
    {
        const char *p = strstr(t, "layer3.2.conv2"), *q = strstr(t, "conv1");
        tap_ok(p && q && p < q, "sorted by overflow: layer3.2.conv2 first");
    }
    free(t);
    t = ts_screen(db, 120, 40, "jjjjjj", 1);     /* select layer 6 */
    tap_ok(ts_has(t, "layer3.2.conv2 activation fp16"), "j: histogram of the selected layer");
    tap_ok(ts_has(t, "ovf 3 sub 4 unf 2"), "histogram: fp16 overflow/subnormal/underflow counts");
    free(t);
    t = ts_screen(db, 120, 40, "jjjjjjf", 1);
    tap_ok(ts_has(t, "layer3.2.conv2 activation bf16") && ts_has(t, "ovf 0 sub 0 unf 0"), "f: bf16 (no overflow)");
    free(t);
    t = ts_screen(db, 120, 40, "jjjjjjr", 1);
    tap_ok(ts_has(t, "layer3.2.conv2 act grad fp16"), "r: role activation gradient");
    free(t);
    t = ts_screen(db, 120, 40, "jjjjjj<enter>", 1);
    tap_ok(ts_has(t, "layer 6: layer3.2.conv2") && ts_has(t, "E4M3"), "Enter: the layer's detail with every format");
    free(t);
    t = ts_screen(db, 100, 30, "?", 1);
    tap_ok(ts_has(t, "Ctrl-L") && ts_has(t, "E4M3"), "?: help");
    free(t);
    t = ts_screen(db, 80, 24, "j<resize 60x20>", 1);
    tap_ok(ts_lines(t) == 20 && ts_has(t, "terminal too small: 60x20") && ts_has(t, "need 80x24"),
           "too small: a clear message");
    free(t);
    /* A history longer than one frame reads: read over several updates (each bounded), in order, the
     * same model and screen in the end as a one-shot read (the headless path settles). */
    char *big = tu_path(dir, "long.db");
    tt_opts_t lo = {.arms = 2, .steps = 3 * FP_TUI_CHUNK + 7, .status = FP_RUN_FINISHED};
    if (tt_write_fixture(big, &lo) != FP_OK) {
        tap_diag("fixture: %s", fp_error_message());
        return 1;
    }
    fp_tui_model_t m;
    fp_tui_ui_t ui;
    fp_tui_ui_init(&ui);
    int updates = 0, rc = fp_tui_model_open(&m, big, 0);
    m.budget_ms = 0;   /* one chunk per arm per update */
    do
        rc = rc == FP_OK ? fp_tui_model_update(&m, ui.role) : rc;
    while (rc == FP_OK && m.loading && ++updates < 1000);
    tap_ok(rc == FP_OK && !m.loading && m.narms == 2 && m.arm[0].nsteps == lo.steps && m.arm[1].nsteps == lo.steps &&
               m.arm[0].loss.total == lo.steps && m.arm[1].lsum != NULL,
           "a long history is read whole over %d updates (4 expected)", updates + 1);
    tap_is_int(updates + 1, 4, "one chunk per arm per update at budget 0");
    fp_grid_t g;
    fp_layout_t l;
    fp_grid_init(&g, 200, 50, 0);
    fp_tui_layout_hdr(&l, 200, 50, fp_tui_header_lines(&m, 200));   /* as the dashboard lays it out */
    fp_tui_render(&g, &m, &ui, &l, FP_TUI_CHART_BRAILLE, 0);
    char *mine = fp_grid_to_text(&g);
    t = ts_screen(big, 200, 50, "", 0);
    tap_ok(mine && strcmp(mine, t) == 0 && ts_has(t, "step 3007"), "read over several updates: the same screen");
    free(mine);
    free(t);
    fp_grid_free(&g);
    fp_tui_model_close(&m);
    free(big);
    free(db);
    tu_rmdir(dir);
    return tap_done();
}
