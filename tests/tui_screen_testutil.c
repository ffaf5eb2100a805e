/* tui_screen_testutil.c — the headless screen and the checks on its text (tui_screen_testutil.h). Promise: a
 * render that fails gives "" and a diagnostic, never NULL. */
#include "tui_screen_testutil.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "tap.h"
#include "tui/tui.h"

char *ts_screen(const char *db, int w, int h, const char *keys, int ascii)
{
    fp_tui_options o;
    fp_tui_options_init(&o);
    o.db_path = db;
    o.ascii = ascii;
    char *t = NULL;
    if (fp_tui_render_text(&o, w, h, keys, &t) != FP_OK) {
        tap_diag("render of %s failed: %s", db, fp_error_message());
        return strdup("");
    }
    return t;
}

int ts_has(const char *t, const char *s)
{
    int ok = t && strstr(t, s) != NULL;
    if (!ok)
        tap_diag("missing \"%s\"", s);
    return ok;
}

const char *ts_line_with(const char *t, const char *s)
{
    static char buf[4096];
    const char *p = t ? strstr(t, s) : NULL;
    if (!p)
        return "";
    const char *b = p, *e = p;
    while (b > t && b[-1] != '\n')
        b--;
    while (*e && *e != '\n')
        e++;
    snprintf(buf, sizeof buf, "%.*s", (int)(e - b), b);
    return buf;
}

int ts_lines(const char *t)
{
    int n = 0;
    for (; t && *t; t++)
        n += *t == '\n';
    return n;
}
