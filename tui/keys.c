/* keys.c — what each key does to the dashboard's UI state, independent of ncurses (the terminal
 * loop and the headless script feed the same function). Promise: keys only change UI state; the
 * return value tells the caller to draw, redraw everything, quit, or stop the training and quit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "store.h"
#include "tui_internal.h"

void fp_tui_ui_init(fp_tui_ui_t *ui)
{
    memset(ui, 0, sizeof *ui);
    ui->focus = FP_FOCUS_LAYERS;
    ui->sort_col = FP_COL_INDEX;
    ui->role = FP_ROLE_ACTIVATION;
    ui->fmt = FP_FMT_FP16;
    ui->table_rows = 10;
}

const char *fp_tui_col_name(int col)
{
    static const char *const names[FP_COL_COUNT] = {"#", "layer", "fwd ref", "fwd low", "bwd ref", "bwd low",
                                                    "speedup", "share", "overflow", "underflow", "subnormal",
                                                    "rel err"};
    return col >= 0 && col < FP_COL_COUNT ? names[col] : "?";
}

static void move_sel(fp_tui_ui_t *ui, int delta)
{
    int n = ui->norder > 0 ? ui->norder : 1;
    ui->sel += delta;
    if (ui->sel < 0)
        ui->sel = 0;
    if (ui->sel >= n)
        ui->sel = n - 1;
    if (ui->sel < ui->top)
        ui->top = ui->sel;
    int rows = ui->table_rows > 0 ? ui->table_rows : 1;
    if (ui->sel >= ui->top + rows)
        ui->top = ui->sel - rows + 1;
}

int fp_tui_key(fp_tui_ui_t *ui, int key, int running)
{
    if (ui->confirm) {   /* "stop the training? (y/n)" */
        ui->confirm = 0;
        if (key == 'y' || key == 'Y')
            return FP_ACT_STOP;
        return FP_ACT_DRAW;
    }
    if (ui->help && key != 'q') {   /* any key closes the help */
        ui->help = 0;
        return FP_ACT_DRAW;
    }
    int page = ui->table_rows > 1 ? ui->table_rows - 1 : 1;
    switch (key) {
    case 'q':
    case 'Q':
        if (ui->detail || ui->help) {
            ui->detail = ui->help = 0;
            return FP_ACT_DRAW;
        }
        if (ui->owns_training && running) {
            ui->confirm = 1;
            return FP_ACT_DRAW;
        }
        return FP_ACT_QUIT;
    case FP_KEY_ESC:
        ui->detail = ui->help = 0;
        return FP_ACT_DRAW;
    case '?':
    case 'h':
        ui->help = 1;
        return FP_ACT_DRAW;
    case FP_KEY_REDRAW:
        return FP_ACT_REDRAW_ALL;
    case FP_KEY_TAB:
        ui->focus = (ui->focus + 1) % FP_FOCUS_COUNT;
        return FP_ACT_DRAW;
    case FP_KEY_BTAB:
        ui->focus = (ui->focus + FP_FOCUS_COUNT - 1) % FP_FOCUS_COUNT;
        return FP_ACT_DRAW;
    case FP_KEY_ENTER:
        ui->detail = !ui->detail;
        return FP_ACT_DRAW;
    case 's':
        ui->sort_col = (ui->sort_col + 1) % FP_COL_COUNT;
        ui->sort_desc = ui->sort_col != FP_COL_INDEX && ui->sort_col != FP_COL_NAME;   /* worst first */
        return FP_ACT_DRAW;
    case 'S':
        ui->sort_desc = !ui->sort_desc;
        return FP_ACT_DRAW;
    case 'r':
        ui->role = (ui->role + 1) % FP_ROLE_COUNT;
        return FP_ACT_DRAW;
    case 'R':
        ui->role = (ui->role + FP_ROLE_COUNT - 1) % FP_ROLE_COUNT;
        return FP_ACT_DRAW;
    case 'a':   /* the compared arm: fp_tui_cmp_arm takes it modulo the arms */
        ui->arm = ui->arm >= 1000000 ? 0 : ui->arm + 1;
        return FP_ACT_DRAW;
    case 'A':
        ui->arm = ui->arm <= -1000000 ? 0 : ui->arm - 1;
        return FP_ACT_DRAW;
    case 'f':
        ui->fmt = (ui->fmt + 1) % FP_FMT_COUNT;
        return FP_ACT_DRAW;
    case 'F':
        ui->fmt = (ui->fmt + FP_FMT_COUNT - 1) % FP_FMT_COUNT;
        return FP_ACT_DRAW;
    case FP_KEY_UP:
    case 'k':
        if (ui->focus == FP_FOCUS_EVENTS)
            ui->ev_scroll++;
        else
            move_sel(ui, -1);
        return FP_ACT_DRAW;
    case FP_KEY_DOWN:
    case 'j':
        if (ui->focus == FP_FOCUS_EVENTS)
            ui->ev_scroll = ui->ev_scroll > 0 ? ui->ev_scroll - 1 : 0;
        else
            move_sel(ui, 1);
        return FP_ACT_DRAW;
    case FP_KEY_PGUP:
        move_sel(ui, -page);
        return FP_ACT_DRAW;
    case FP_KEY_PGDN:
        move_sel(ui, page);
        return FP_ACT_DRAW;
    case FP_KEY_HOME:
    case 'g':
        move_sel(ui, -1000000);
        return FP_ACT_DRAW;
    case FP_KEY_END:
    case 'G':
        move_sel(ui, 1000000);
        return FP_ACT_DRAW;
    case FP_KEY_LEFT:   /* in the histogram panel: the role backwards / forwards */
        if (ui->focus == FP_FOCUS_HIST)
            ui->role = (ui->role + FP_ROLE_COUNT - 1) % FP_ROLE_COUNT;
        return FP_ACT_DRAW;
    case FP_KEY_RIGHT:
        if (ui->focus == FP_FOCUS_HIST)
            ui->role = (ui->role + 1) % FP_ROLE_COUNT;
        return FP_ACT_DRAW;
    case FP_KEY_RESIZE:
        return FP_ACT_REDRAW_ALL;
    default:
        return FP_ACT_NONE;
    }
}

int fp_tui_script_key(const char **p, int *w, int *h)
{
    const char *s = *p;
    if (!s || !*s)
        return 0;
    if (*s == '<') {
        static const struct {
            const char *name;
            int key;
        } names[] = {{"<up>", FP_KEY_UP},       {"<down>", FP_KEY_DOWN},   {"<left>", FP_KEY_LEFT},
                     {"<right>", FP_KEY_RIGHT}, {"<tab>", FP_KEY_TAB},     {"<btab>", FP_KEY_BTAB},
                     {"<enter>", FP_KEY_ENTER}, {"<C-l>", FP_KEY_REDRAW},  {"<esc>", FP_KEY_ESC},
                     {"<pgup>", FP_KEY_PGUP},   {"<pgdn>", FP_KEY_PGDN},   {"<home>", FP_KEY_HOME},
                     {"<end>", FP_KEY_END}};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            size_t n = strlen(names[i].name);
            if (strncmp(s, names[i].name, n) == 0) {
                *p = s + n;
                return names[i].key;
            }
        }
        int nw, nh, used = 0;
        if (sscanf(s, "<resize %dx%d>%n", &nw, &nh, &used) == 2 && used > 0) {
            *w = nw;
            *h = nh;
            *p = s + used;
            return FP_KEY_RESIZE;
        }
    }
    *p = s + 1;
    if (*s == '\t')
        return FP_KEY_TAB;
    if (*s == '\n' || *s == '\r')
        return FP_KEY_ENTER;
    if (*s == 12)
        return FP_KEY_REDRAW;
    return (unsigned char)*s;
}
