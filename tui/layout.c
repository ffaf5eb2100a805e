/* layout.c — where each panel goes for a terminal of w x h cells. Promise: every panel rectangle lies
 * inside the screen and none overlap; at 80x24 the essentials fit (the header with the verdict of up to
 * FP_TUI_MAX_ARMS arms, loss, throughput, memory, loss scale, layer table, histogram) and lower-priority
 * panels (events, the separate memory chart column) collapse first; below FP_TUI_MIN_W x FP_TUI_MIN_H the
 * layout says too_small. */
#include <string.h>
#include "tui_internal.h"

static fp_rect_t rect(int x, int y, int w, int h)
{
    fp_rect_t r = {x, y, w > 0 ? w : 0, h > 0 ? h : 0};
    if (r.w == 0 || r.h == 0)
        r.w = r.h = 0;
    return r;
}

void fp_tui_layout(fp_layout_t *l, int w, int h)
{
    fp_tui_layout_hdr(l, w, h, 2);
}

void fp_tui_layout_hdr(fp_layout_t *l, int w, int h, int hdr)
{
    memset(l, 0, sizeof *l);
    l->w = w;
    l->h = h;
    if (hdr < 2)
        hdr = 2;
    if (hdr > 8)   /* FP_TUI_MAX_ARMS arms: 2 + 1 + 3 + 1 */
        hdr = 8;
    l->hdr = hdr;
    if (w < FP_TUI_MIN_W || h < FP_TUI_MIN_H) {
        l->too_small = 1;
        return;
    }
    l->p[FP_P_HEADER] = rect(0, 0, w, hdr);
    l->p[FP_P_FOOTER] = rect(0, h - 1, w, 1);
    int y = hdr, body = h - 1 - hdr;
    /* priority 1: charts row (loss, throughput; memory too on wide screens) */
    int hc = body >= 40 ? body * 3 / 10 : body >= 30 ? 9 : body >= 24 ? 7 : body >= 20 ? 6 : 5;
    int wide = w >= 140;
    if (wide) {
        int cw = w / 3;
        l->p[FP_P_LOSS] = rect(0, y, cw, hc);
        l->p[FP_P_THR] = rect(cw, y, cw, hc);
        l->p[FP_P_MEM] = rect(2 * cw, y, w - 2 * cw, hc);
    } else {
        l->p[FP_P_LOSS] = rect(0, y, w / 2, hc);
        l->p[FP_P_THR] = rect(w / 2, y, w - w / 2, hc);
    }
    y += hc;
    /* priority 2: the strip (loss scale; memory when not in the charts row) */
    int hs = body >= 40 ? 6 : 4;
    if (wide) {
        l->p[FP_P_SCALE] = rect(0, y, w, hs);
    } else {
        l->p[FP_P_SCALE] = rect(0, y, w / 2, hs);
        l->p[FP_P_MEM] = rect(w / 2, y, w - w / 2, hs);
    }
    y += hs;
    /* priority 3: layer table and histogram; events (lowest) when there is room */
    int hb = h - 1 - y;
    int hw = w >= 120 ? w * 38 / 100 : 32;
    l->p[FP_P_LAYERS] = rect(0, y, w - hw, hb);
    if (hb >= 18) {
        int he = hb * 2 / 5;
        l->p[FP_P_HIST] = rect(w - hw, y, hw, hb - he);
        l->p[FP_P_EVENTS] = rect(w - hw, y + hb - he, hw, he);
    } else {
        l->p[FP_P_HIST] = rect(w - hw, y, hw, hb);
    }
}
