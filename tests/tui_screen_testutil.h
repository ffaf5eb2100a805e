/* tui_screen_testutil.h — the dashboard tests' view of a headless screen: the text fp_tui_render_text draws
 * for a database, and the checks the tests make on it (a string is there, the line holding it, the line
 * count). A failed render is a TAP diagnostic and an empty screen, so the checks on it fail, never crash. */
#ifndef FP_TUI_SCREEN_TESTUTIL_H
#define FP_TUI_SCREEN_TESTUTIL_H

/* The w x h screen of db's newest session after keys ("" for none), ASCII when ascii; malloc'd. */
char *ts_screen(const char *db, int w, int h, const char *keys, int ascii);
/* Whether s is in t (a diagnostic names it when not). */
int ts_has(const char *t, const char *s);
/* The line of t that contains s ("" if none; a static buffer, valid until the next call). */
const char *ts_line_with(const char *t, const char *s);
/* The number of lines of t. */
int ts_lines(const char *t);

#endif
