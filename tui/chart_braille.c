/* chart_braille.c — line charts drawn into the cell grid, btop-style: braille (2x4 dots a cell, two
 * samples per cell), or half blocks, or ASCII. Promise: a chart costs O(width x height + buckets),
 * never O(samples) — each column takes the min/max of the downsampled buckets under it. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "tui_internal.h"

/* Min/max of the buckets of ds covering samples [s0, s1). 0 when there are none. */
static int span(const fp_ds_t *ds, int64_t s0, int64_t s1, double *mn, double *mx)
{
    if (ds->nb == 0 || s0 >= ds->total)
        return 0;
    if (s1 > ds->total)
        s1 = ds->total;
    if (s1 <= s0)
        s1 = s0 + 1;
    int64_t b0 = s0 / ds->per, b1 = (s1 - 1) / ds->per;
    if (b1 >= ds->nb)
        b1 = ds->nb - 1;
    double lo = NAN, hi = NAN;
    for (int64_t b = b0; b <= b1; b++) {
        lo = fmin(lo, ds->mn[b]);
        hi = fmax(hi, ds->mx[b]);
    }
    if (isnan(lo))
        return 0;
    *mn = lo;
    *mx = hi;
    return 1;
}

static void put_braille(fp_grid_t *g, int x, int y, uint8_t bits, uint16_t attr)
{
    unsigned cp = 0x2800u + bits;
    char s[4] = {(char)(0xE0 | (cp >> 12)), (char)(0x80 | ((cp >> 6) & 0x3f)), (char)(0x80 | (cp & 0x3f)), 0};
    fp_grid_put(g, x, y, attr, s);
}

void fp_chart_draw(fp_grid_t *g, int x, int y, int w, int h, int mode, const fp_chart_series_t *s, int ns,
                   double lo, double hi, double *out_lo, double *out_hi)
{
    if (w <= 0 || h <= 0)
        return;
    int sx = mode == FP_TUI_CHART_BRAILLE ? 2 : 1;
    int sy = mode == FP_TUI_CHART_BRAILLE ? 4 : mode == FP_TUI_CHART_BLOCK ? 2 : 1;
    int xres = w * sx, yres = h * sy;
    int64_t total = 0;
    for (int i = 0; i < ns; i++)
        if (s[i].ds->total > total)
            total = s[i].ds->total;
    if (isnan(lo) || isnan(hi)) {   /* auto range over everything */
        double a = NAN, b = NAN;
        for (int i = 0; i < ns; i++)
            for (int k = 0; k < s[i].ds->nb; k++) {
                a = fmin(a, s[i].ds->mn[k]);
                b = fmax(b, s[i].ds->mx[k]);
            }
        if (isnan(lo))
            lo = a;
        if (isnan(hi))
            hi = b;
    }
    if (!isnan(lo) && !isnan(hi) && hi - lo < 1e-12 * (fabs(hi) + 1)) {
        lo -= 0.5 * (fabs(lo) + 1e-3);
        hi += 0.5 * (fabs(hi) + 1e-3);
    }
    if (out_lo)
        *out_lo = lo;
    if (out_hi)
        *out_hi = hi;
    if (total == 0 || isnan(lo) || isnan(hi))
        return;
    uint8_t *bits = calloc((size_t)w * (size_t)h, 1);
    uint16_t *attr = calloc((size_t)w * (size_t)h, sizeof *attr);
    if (!bits || !attr) {
        free(bits);
        free(attr);
        return;
    }
    static const uint8_t dot[2][4] = {{0x01, 0x02, 0x04, 0x40}, {0x08, 0x10, 0x20, 0x80}};
    for (int i = 0; i < ns; i++) {
        int have_prev = 0, plo = 0, phi = 0;
        for (int c = 0; c < xres; c++) {
            int64_t s0 = (int64_t)((double)c * (double)total / xres);
            int64_t s1 = (int64_t)((double)(c + 1) * (double)total / xres);
            double mn, mx;
            if (!span(s[i].ds, s0, s1, &mn, &mx)) {
                have_prev = 0;
                continue;
            }
            int ylo = (int)lround((mn - lo) / (hi - lo) * (yres - 1));
            int yhi = (int)lround((mx - lo) / (hi - lo) * (yres - 1));
            ylo = ylo < 0 ? 0 : ylo >= yres ? yres - 1 : ylo;
            yhi = yhi < 0 ? 0 : yhi >= yres ? yres - 1 : yhi;
            int a = ylo, b = yhi;
            if (have_prev && phi < a)
                a = phi + 1 < b ? phi + 1 : b;
            if (have_prev && plo > b)
                b = plo - 1 > a ? plo - 1 : a;
            for (int v = a; v <= b; v++) {
                int row = yres - 1 - v;   /* 0 at the top */
                int cx = c / sx, cy = row / sy;
                size_t k = (size_t)cy * (size_t)w + (size_t)cx;
                if (mode == FP_TUI_CHART_BRAILLE)
                    bits[k] |= dot[c % 2][row % 4];
                else if (mode == FP_TUI_CHART_BLOCK)
                    bits[k] |= (uint8_t)(row % 2 ? 2 : 1);
                else
                    bits[k] |= 1;
                attr[k] = s[i].attr;
            }
            have_prev = 1;
            plo = ylo;
            phi = yhi;
        }
    }
    for (int cy = 0; cy < h; cy++)
        for (int cx = 0; cx < w; cx++) {
            size_t k = (size_t)cy * (size_t)w + (size_t)cx;
            if (!bits[k])
                continue;
            if (mode == FP_TUI_CHART_BRAILLE)
                put_braille(g, x + cx, y + cy, bits[k], attr[k]);
            else if (mode == FP_TUI_CHART_BLOCK)
                fp_grid_put(g, x + cx, y + cy, attr[k], bits[k] == 3 ? "█" : bits[k] == 1 ? "▀" : "▄");
            else
                fp_grid_put(g, x + cx, y + cy, attr[k], "*");
        }
    free(bits);
    free(attr);
}

void fp_chart_marks(fp_grid_t *g, int x, int y, int w, const fp_ds_t *ds, int64_t total, uint16_t attr,
                    const char *mark)
{
    if (w <= 0 || total <= 0)
        return;
    for (int c = 0; c < w; c++) {
        int64_t s0 = (int64_t)((double)c * (double)total / w), s1 = (int64_t)((double)(c + 1) * (double)total / w);
        double mn, mx;
        if (span(ds, s0, s1, &mn, &mx) && mx > 0)
            fp_grid_put(g, x + c, y, attr, mark);
    }
}
