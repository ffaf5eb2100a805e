/* tui.h — the live dashboard of fp16probe (issue 7): an ncurses view of one session of a run
 * database, comparing its arms while they train. It reads only the database (store_reader.h), so it
 * works the same on a live, finished or copied file; and it renders headless to text for tests.
 *
 * Contract for the compare command (running the dashboard in-process on the session it trains):
 *   fp_tui_options o; fp_tui_options_init(&o);
 *   o.db_path = path; o.session = session_id;
 *   o.owns_training = 1; o.stop_training = my_stop; o.stop_arg = ctx;
 *   int rc = fp_tui_run(&o);
 * - fp_tui_run returns when the user quits (or on error: FP_E* with fp_error_message() set; the
 *   terminal is restored first). It never exits the process and never writes to the database.
 * - With owns_training set, q asks "stop the training? (y/n)" while any arm is still running:
 *   y calls stop_training(stop_arg) once (the caller then flushes and marks the session
 *   interrupted, as on Ctrl-C) and returns FP_TUI_STOPPED; n stays. When every arm has ended, or
 *   owns_training is 0, q quits at once and returns FP_OK.
 * - stop_training is called from the dashboard's thread; it must only set a flag or similar.
 * - The dashboard installs a SIGWINCH handler (it only sets a flag) and restores the previous one
 *   before returning; SIGINT/SIGTERM are left to the caller (store_signal.c).
 * - The caller's training must run in other threads; the dashboard polls the file every
 *   refresh_ms and reads only what is new. */
#ifndef FP_TUI_H
#define FP_TUI_H

#include <stdint.h>

#define FP_TUI_MIN_W 80
#define FP_TUI_MIN_H 24
#define FP_TUI_STOPPED 1          /* fp_tui_run: the user chose to stop the training */

typedef enum { FP_TUI_CHART_AUTO = 0, FP_TUI_CHART_BRAILLE, FP_TUI_CHART_BLOCK, FP_TUI_CHART_ASCII } fp_tui_chart;

typedef struct {
    const char *db_path;          /* required */
    int64_t session;              /* <= 0: the newest session (followed as new ones appear) */
    int refresh_ms;               /* poll interval (default 500; clamped to 50..60000) */
    int no_color;                 /* 1: no colours (bold/reverse only) */
    int ascii;                    /* 1: ASCII only (also when the locale is not UTF-8) */
    fp_tui_chart chart;           /* chart glyphs; AUTO: braille in UTF-8, ASCII otherwise */
    int owns_training;            /* 1: the caller is training this session (see the contract) */
    void (*stop_training)(void *arg);
    void *stop_arg;
} fp_tui_options;

void fp_tui_options_init(fp_tui_options *o);

/* Run the interactive dashboard on the terminal (stdin/stdout). FP_OK, FP_TUI_STOPPED, or an FP_E*
 * code with a one-line message (a missing file names it; no TERM, an unknown terminal or one that cannot
 * move the cursor, such as TERM=dumb, says so: FP_EUNAVAIL). */
int fp_tui_run(const fp_tui_options *o);

/* Headless: open the database, read it as the dashboard would, apply a key script, and render one
 * frame of w x h cells to text (h lines, each right-trimmed, '\n'-terminated; UTF-8 unless
 * o->ascii). keys: characters as typed, plus "<up>", "<down>", "<left>", "<right>", "<tab>",
 * "<enter>", "<C-l>", "<resize WxH>" tokens. *text is malloc'd. */
int fp_tui_render_text(const fp_tui_options *o, int w, int h, const char *keys, char **text);

/* 1 when the current locale's codeset is UTF-8 (call setlocale(LC_ALL, "") first). */
int fp_tui_locale_utf8(void);

#endif
