/* grid.c — the in-memory cell grid every panel draws into: UTF-8 cells with attributes, clipped
 * text, boxes (Unicode or ASCII lines), and text output. Promise: drawing outside the grid is
 * clipped, never written; with ascii set no byte above 0x7f is stored. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "tui_internal.h"

int fp_grid_init(fp_grid_t *g, int w, int h, int ascii)
{
    g->w = w > 0 ? w : 1;
    g->h = h > 0 ? h : 1;
    g->ascii = ascii;
    g->cells = calloc((size_t)g->w * (size_t)g->h, sizeof *g->cells);
    if (!g->cells)
        return fp_fail(FP_ENOMEM, "tui: out of memory");
    fp_grid_clear(g);
    return FP_OK;
}

void fp_grid_free(fp_grid_t *g)
{
    free(g->cells);
    g->cells = NULL;
}

void fp_grid_clear(fp_grid_t *g)
{
    for (int i = 0; i < g->w * g->h; i++) {
        g->cells[i].ch[0] = ' ';
        g->cells[i].ch[1] = 0;
        g->cells[i].attr = 0;
    }
}

void fp_grid_fill(fp_grid_t *g, int x, int y, int w, int h)
{
    for (int j = y; j < y + h; j++)
        for (int i = x; i < x + w; i++)
            fp_grid_put(g, i, j, 0, " ");
}

/* Length in bytes of the UTF-8 sequence starting with byte c (1 for invalid bytes). */
static int seq_len(unsigned char c)
{
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0)
        return 2;
    if ((c & 0xf0) == 0xe0)
        return 3;
    if ((c & 0xf8) == 0xf0)
        return 4;
    return 1;
}

int fp_utf8_len(const char *s)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int k = seq_len(*p);
        for (int i = 0; i < k && *p; i++)
            p++;
        n++;
    }
    return n;
}

void fp_grid_put(fp_grid_t *g, int x, int y, uint16_t attr, const char *ch)
{
    if (x < 0 || y < 0 || x >= g->w || y >= g->h || !ch || !*ch)
        return;
    fp_cell_t *c = &g->cells[y * g->w + x];
    int k = seq_len((unsigned char)ch[0]);
    if (g->ascii && (unsigned char)ch[0] >= 0x80) {
        c->ch[0] = '?';
        c->ch[1] = 0;
    } else {
        int i = 0;
        for (; i < k && ch[i]; i++)
            c->ch[i] = ch[i];
        c->ch[i] = 0;
    }
    c->attr = attr;
}

int fp_grid_text(fp_grid_t *g, int x, int y, int xmax, uint16_t attr, const char *s)
{
    if (xmax > g->w)
        xmax = g->w;
    for (const char *p = s; *p && x < xmax;) {
        int k = seq_len((unsigned char)*p);
        char ch[5] = {0};
        for (int i = 0; i < k && p[i]; i++)
            ch[i] = p[i];
        fp_grid_put(g, x++, y, attr, ch);
        for (int i = 0; i < k && *p; i++)
            p++;
    }
    return x;
}

int fp_grid_printf(fp_grid_t *g, int x, int y, int xmax, uint16_t attr, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return fp_grid_text(g, x, y, xmax, attr, buf);
}

void fp_grid_box(fp_grid_t *g, int x, int y, int w, int h, uint16_t attr, const char *title, int focused)
{
    if (w < 2 || h < 2)
        return;
    const char *hz = g->ascii ? "-" : (focused ? "━" : "─"), *vt = g->ascii ? "|" : (focused ? "┃" : "│");
    const char *c[4] = {"+", "+", "+", "+"};
    if (!g->ascii) {
        c[0] = focused ? "┏" : "╭";
        c[1] = focused ? "┓" : "╮";
        c[2] = focused ? "┗" : "╰";
        c[3] = focused ? "┛" : "╯";
    }
    uint16_t a = focused ? (uint16_t)(attr | FP_A_BOLD) : attr;
    for (int i = x + 1; i < x + w - 1; i++) {
        fp_grid_put(g, i, y, a, hz);
        fp_grid_put(g, i, y + h - 1, a, hz);
    }
    for (int j = y + 1; j < y + h - 1; j++) {
        fp_grid_put(g, x, j, a, vt);
        fp_grid_put(g, x + w - 1, j, a, vt);
    }
    fp_grid_put(g, x, y, a, c[0]);
    fp_grid_put(g, x + w - 1, y, a, c[1]);
    fp_grid_put(g, x, y + h - 1, a, c[2]);
    fp_grid_put(g, x + w - 1, y + h - 1, a, c[3]);
    if (title && *title) {
        char t[256];
        snprintf(t, sizeof t, " %s ", title);
        fp_grid_text(g, x + 1, y, x + w - 1, (uint16_t)(FP_C_TITLE | FP_A_BOLD), t);
    }
}

char *fp_grid_to_text(const fp_grid_t *g)
{
    size_t cap = (size_t)g->w * (size_t)g->h * 4 + (size_t)g->h + 1, n = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    for (int y = 0; y < g->h; y++) {
        size_t line = n, end = n;
        for (int x = 0; x < g->w; x++) {
            const char *ch = g->cells[y * g->w + x].ch;
            for (const char *p = ch; *p; p++)
                out[n++] = *p;
            if (!(ch[0] == ' ' && ch[1] == 0))
                end = n;
        }
        (void)line;
        n = end;
        out[n++] = '\n';
    }
    out[n] = 0;
    return out;
}
