/* tui.c — the interactive dashboard on a terminal (ncurses): the loop that polls the database every
 * refresh interval, reads keys, and shows the frame drawn into the cell grid through one window per
 * panel (wnoutrefresh each, then one doupdate: no flicker). SIGWINCH only sets a flag; the loop
 * resizes. Promise: the terminal is restored on every return; the database is only read. */
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <curses.h>
#include <term.h>
#include "clock.h"
#include "error.h"
#include "store.h"
#include "tui_internal.h"

static volatile sig_atomic_t winch_flag;

static void on_winch(int sig)
{
    (void)sig;
    winch_flag = 1;
}

typedef struct {
    SCREEN *scr;
    WINDOW *win[FP_P_COUNT + 1];
    fp_rect_t rect[FP_P_COUNT + 1];
    int nwin;
    WINDOW *input;
    int color;
} term_t;

static void init_colors(term_t *t, int no_color)
{
    t->color = !no_color && has_colors();
    if (!t->color)
        return;
    start_color();
    use_default_colors();
    static const short fg[FP_C_COUNT] = {-1, COLOR_CYAN, COLOR_MAGENTA, COLOR_GREEN, COLOR_YELLOW,
                                         COLOR_RED, COLOR_YELLOW, COLOR_GREEN, COLOR_BLUE, COLOR_WHITE, COLOR_YELLOW};
    for (short i = 1; i < FP_C_COUNT; i++)
        init_pair(i, fg[i], -1);
}

static attr_t to_attr(const term_t *t, uint16_t a)
{
    attr_t r = A_NORMAL;
    if (a & FP_A_BOLD)
        r |= A_BOLD;
    if (a & FP_A_REV)
        r |= A_REVERSE;
    int c = FP_A_COLOR(a);
    if (c && t->color)
        r |= COLOR_PAIR(c);
    else if (c == FP_C_BAD)
        r |= A_BOLD;
    else if (c == FP_C_DIM && !t->color)
        r |= A_DIM;
    return r;
}

static void drop_windows(term_t *t)
{
    for (int i = 0; i < t->nwin; i++)
        delwin(t->win[i]);
    t->nwin = 0;
}

/* One window per panel (or one for the whole screen when a message replaces the panels). */
static void make_windows(term_t *t, const fp_layout_t *l, int whole)
{
    drop_windows(t);
    if (whole || l->too_small) {
        t->rect[0] = (fp_rect_t){0, 0, l->w, l->h};
        t->win[t->nwin++] = newwin(l->h, l->w, 0, 0);
        return;
    }
    for (int p = 0; p < FP_P_COUNT; p++)
        if (l->p[p].w > 0) {
            WINDOW *w = newwin(l->p[p].h, l->p[p].w, l->p[p].y, l->p[p].x);
            if (!w)
                continue;
            t->rect[t->nwin] = l->p[p];
            t->win[t->nwin++] = w;
        }
}

static void blit(term_t *t, const fp_grid_t *g)
{
    for (int i = 0; i < t->nwin; i++) {
        WINDOW *w = t->win[i];
        fp_rect_t r = t->rect[i];
        for (int y = 0; y < r.h && r.y + y < g->h; y++) {
            char buf[4096];
            size_t n = 0;
            uint16_t cur = 0xffff;
            wmove(w, y, 0);
            for (int x = 0; x < r.w && r.x + x < g->w; x++) {
                const fp_cell_t *c = &g->cells[(r.y + y) * g->w + r.x + x];
                if (c->attr != cur || n + 8 >= sizeof buf) {
                    if (n) {
                        buf[n] = 0;
                        waddstr(w, buf);
                        n = 0;
                    }
                    cur = c->attr;
                    wattrset(w, to_attr(t, cur));
                }
                /* the last cell of the last row: waddstr would scroll; addch-style insert instead */
                if (y == r.h - 1 && x == r.w - 1 && r.y + r.h == g->h && r.x + r.w == g->w) {
                    buf[n] = 0;
                    waddstr(w, buf);
                    n = 0;
                    mvwinsstr(w, y, x, c->ch);
                    break;
                }
                for (const char *p = c->ch; *p; p++)
                    buf[n++] = *p;
            }
            if (n) {
                buf[n] = 0;
                waddstr(w, buf);
            }
        }
        wnoutrefresh(w);
    }
    doupdate();
}

static int map_key(int ch)
{
    switch (ch) {
    case KEY_UP: return FP_KEY_UP;
    case KEY_DOWN: return FP_KEY_DOWN;
    case KEY_LEFT: return FP_KEY_LEFT;
    case KEY_RIGHT: return FP_KEY_RIGHT;
    case KEY_PPAGE: return FP_KEY_PGUP;
    case KEY_NPAGE: return FP_KEY_PGDN;
    case KEY_HOME: return FP_KEY_HOME;
    case KEY_END: return FP_KEY_END;
    case '\t': return FP_KEY_TAB;
    case KEY_BTAB: return FP_KEY_BTAB;
    case '\n': case '\r': case KEY_ENTER: return FP_KEY_ENTER;
    case 12: return FP_KEY_REDRAW;
    case 27: return FP_KEY_ESC;
    case KEY_RESIZE: return FP_KEY_RESIZE;
    default: return ch >= 0 && ch < 256 ? ch : 0;
    }
}

/* 1 when the current terminal can address the cursor and clear the screen (the dashboard's minimum). */
static int can_draw(void)
{
    const char *caps[] = {"cup", "clear"};
    for (size_t i = 0; i < sizeof caps / sizeof *caps; i++) {
        const char *v = tigetstr((char *)caps[i]);
        if (!v || v == (const char *)-1)
            return 0;
    }
    return 1;
}

static void term_size(int *w, int *h)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
        *w = ws.ws_col;
        *h = ws.ws_row;
    } else {
        *w = COLS;
        *h = LINES;
    }
}

int fp_tui_run(const fp_tui_options *o)
{
    if (!o || !o->db_path)
        return fp_fail(FP_EINVAL, "tui: no database given");
    const char *term = getenv("TERM");
    if (!term || !*term)
        return fp_fail(FP_EUNAVAIL, "TERM is not set: the dashboard needs a terminal "
                                    "(for text output use 'fp16probe tui --headless WxH')");
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        return fp_fail(FP_EUNAVAIL, "the dashboard needs a terminal on stdin and stdout "
                                    "(for text output use 'fp16probe tui --headless WxH')");
    setlocale(LC_ALL, "");
    setlocale(LC_NUMERIC, "C");   /* numbers always print the same way */
    int ascii = o->ascii || !fp_tui_locale_utf8();
    int chart = ascii ? FP_TUI_CHART_ASCII : o->chart == FP_TUI_CHART_AUTO ? FP_TUI_CHART_BRAILLE : (int)o->chart;
    int refresh = o->refresh_ms <= 0 ? 500 : o->refresh_ms < 50 ? 50 : o->refresh_ms > 60000 ? 60000 : o->refresh_ms;

    fp_tui_model_t m;
    int rc = fp_tui_model_open(&m, o->db_path, o->session);
    if (rc == FP_OK)
        rc = fp_tui_model_update(&m, FP_ROLE_ACTIVATION);
    if (rc != FP_OK) {
        fp_tui_model_close(&m);
        return rc;
    }
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_winch;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGWINCH, &sa, &old);   /* before newterm, so ncurses keeps its hands off */
    winch_flag = 0;

    term_t t;
    memset(&t, 0, sizeof t);
    t.scr = newterm(NULL, stdout, stdin);
    if (!t.scr) {
        sigaction(SIGWINCH, &old, NULL);
        fp_tui_model_close(&m);
        return fp_fail(FP_EUNAVAIL, "unknown terminal type '%s'", term);
    }
    set_term(t.scr);
    if (!can_draw()) {   /* TERM=dumb and the like: newterm accepts them, the frames would be garbage */
        endwin();
        delscreen(t.scr);
        sigaction(SIGWINCH, &old, NULL);
        fp_tui_model_close(&m);
        return fp_fail(FP_EUNAVAIL, "terminal type '%s' cannot move the cursor: the dashboard needs a full-screen "
                                    "terminal (for text output use 'fp16probe tui --headless WxH')", term);
    }
    cbreak();
    noecho();
    nonl();
    curs_set(0);
    init_colors(&t, o->no_color);
    t.input = newwin(1, 1, 0, 0);
    keypad(t.input, TRUE);
    leaveok(t.input, TRUE);

    fp_tui_ui_t ui;
    fp_tui_ui_init(&ui);
    ui.owns_training = o->owns_training;
    int w, h;
    term_size(&w, &h);
    fp_grid_t g = {0};
    fp_layout_t l;
    int whole = -1;
    int need_layout = 1, stopped = 0;
    int64_t next_poll = m.loading ? fp_clock_mono_ms() : fp_clock_mono_ms() + refresh;
    for (;;) {
        if (winch_flag) {
            winch_flag = 0;
            term_size(&w, &h);
            resizeterm(h, w);
            need_layout = 1;
        }
        if (!need_layout && !l.too_small && fp_tui_header_lines(&m, w) != l.hdr)
            need_layout = 1;   /* the verdict grew (an arm appeared) */
        if (need_layout) {
            fp_grid_free(&g);
            if ((rc = fp_grid_init(&g, w, h, ascii)) != FP_OK)
                break;
            fp_tui_layout_hdr(&l, w, h, fp_tui_header_lines(&m, w));
            whole = -1;
            need_layout = 0;
            clearok(curscr, TRUE);
        }
        int want_whole = l.too_small || m.note[0] || m.narms == 0;
        if (want_whole != whole) {
            make_windows(&t, &l, want_whole);
            whole = want_whole;
        }
        fp_tui_render(&g, &m, &ui, &l, chart, ascii);
        blit(&t, &g);
        int64_t now = fp_clock_mono_ms();
        int wait = next_poll > now ? (int)(next_poll - now) : 0;
        wtimeout(t.input, wait);
        /* ERR is a timeout or an interrupted wait (SIGWINCH): either way poll when due, resize at the
         * top. errno is not looked at: it keeps EINTR from one signal forever, and reading it made every
         * later timeout an "interrupt" that skipped the poll and spun (issue 21). */
        int ch = wgetch(t.input);
        if (ch != ERR) {
            int key = map_key(ch);
            if (key == FP_KEY_RESIZE) {   /* resizeterm queues one too: act only on a real change */
                int nw, nh;
                term_size(&nw, &nh);
                if (nw != w || nh != h)
                    winch_flag = 1;
                continue;
            }
            int act = fp_tui_key(&ui, key, fp_tui_any_running(&m));
            if (act == FP_ACT_QUIT)
                break;
            if (act == FP_ACT_STOP) {
                stopped = 1;
                break;
            }
            if (act == FP_ACT_REDRAW_ALL) {   /* Ctrl-L: redraw, and re-read what is not appended */
                clearok(curscr, TRUE);
                m.force = 1;
            }
            if (!m.force && (ui.role == m.arm[0].hist_role || m.narms == 0))
                continue;   /* redraw now; poll on schedule */
        }
        if (fp_clock_mono_ms() >= next_poll || ch != ERR) {
            if ((rc = fp_tui_model_update(&m, ui.role)) != FP_OK)
                break;
            if (fp_clock_mono_ms() >= next_poll)
                next_poll = fp_clock_mono_ms() + refresh;
        }
        if (m.loading)
            next_poll = fp_clock_mono_ms();   /* a long history: read on at once, a bounded piece per frame */
    }
    drop_windows(&t);
    delwin(t.input);
    endwin();
    delscreen(t.scr);
    sigaction(SIGWINCH, &old, NULL);
    fp_grid_free(&g);
    fp_tui_model_close(&m);
    if (rc != FP_OK)
        return rc;
    if (stopped) {
        if (o->stop_training)
            o->stop_training(o->stop_arg);
        return FP_TUI_STOPPED;
    }
    return FP_OK;
}
