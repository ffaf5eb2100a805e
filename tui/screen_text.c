/* screen_text.c — the headless renderer (like tig's scripted display): open a database, read it as
 * the dashboard does, apply a key script, and render a frame of w x h to plain text with the very
 * drawing code the terminal uses. Promise: the same database and script give the same text. */
#include <langinfo.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "error.h"
#include "tui_internal.h"

void fp_tui_options_init(fp_tui_options *o)
{
    memset(o, 0, sizeof *o);
    o->refresh_ms = 500;
}

int fp_tui_locale_utf8(void)
{
    const char *cs = nl_langinfo(CODESET);
    return cs && (strcasecmp(cs, "UTF-8") == 0 || strcasecmp(cs, "utf8") == 0);
}

int fp_tui_render_text(const fp_tui_options *o, int w, int h, const char *keys, char **text)
{
    *text = NULL;
    if (!o || !o->db_path)
        return fp_fail(FP_EINVAL, "tui: no database given");
    if (w < 1 || h < 1 || w > 1000 || h > 1000)
        return fp_fail(FP_EINVAL, "tui: bad screen size %dx%d", w, h);
    fp_tui_model_t m;
    int rc = fp_tui_model_open(&m, o->db_path, o->session);
    if (rc != FP_OK)
        return rc;
    fp_tui_ui_t ui;
    fp_tui_ui_init(&ui);
    ui.owns_training = o->owns_training;
    int chart = o->ascii ? FP_TUI_CHART_ASCII : o->chart == FP_TUI_CHART_AUTO ? FP_TUI_CHART_BRAILLE : (int)o->chart;
    fp_grid_t g;
    fp_layout_t l;
    if ((rc = fp_tui_model_update(&m, ui.role)) != FP_OK || (rc = fp_tui_model_settle(&m, ui.role)) != FP_OK ||
        (rc = fp_grid_init(&g, w, h, o->ascii)) != FP_OK) {
        fp_tui_model_close(&m);
        return rc;
    }
    fp_tui_layout_hdr(&l, w, h, fp_tui_header_lines(&m, w));
    fp_tui_render(&g, &m, &ui, &l, chart, o->ascii);   /* the first frame sets the table geometry */
    for (const char *p = keys; rc == FP_OK && p && *p;) {
        int nw = w, nh = h;
        int key = fp_tui_script_key(&p, &nw, &nh);
        if (!key)
            break;
        if (key == FP_KEY_RESIZE && (nw != w || nh != h) && nw > 0 && nh > 0 && nw <= 1000 && nh <= 1000) {
            fp_grid_free(&g);
            w = nw;
            h = nh;
            if ((rc = fp_grid_init(&g, w, h, o->ascii)) != FP_OK)
                break;
            fp_tui_layout_hdr(&l, w, h, fp_tui_header_lines(&m, w));
        }
        int act = fp_tui_key(&ui, key, fp_tui_any_running(&m));
        if (act == FP_ACT_QUIT || act == FP_ACT_STOP)
            break;
        if (act == FP_ACT_REDRAW_ALL)   /* Ctrl-L re-reads, as in the terminal */
            m.force = 1;
        if ((rc = fp_tui_model_update(&m, ui.role)) != FP_OK || (rc = fp_tui_model_settle(&m, ui.role)) != FP_OK)
            break;
        fp_tui_layout_hdr(&l, w, h, fp_tui_header_lines(&m, w));
        fp_tui_render(&g, &m, &ui, &l, chart, o->ascii);
    }
    if (rc == FP_OK) {
        fp_tui_render(&g, &m, &ui, &l, chart, o->ascii);
        *text = fp_grid_to_text(&g);
        if (!*text)
            rc = fp_fail(FP_ENOMEM, "tui: out of memory");
    }
    fp_grid_free(&g);
    fp_tui_model_close(&m);
    return rc;
}
