/* tui_internal.h — what the dashboard's parts share: the cell grid every panel draws into (the same
 * grid is shown by ncurses or dumped as text), the data model read from the database, the UI state
 * the keys change, and the layout. Internal to tui/ (and its tests and bench). */
#ifndef FP_TUI_INTERNAL_H
#define FP_TUI_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "hist.h"
#include "store_reader.h"
#include "store_reader_tui.h"
#include "tui.h"

/* ---------------------------------------------------------------- cell grid (grid.c) */
enum {   /* colours (attribute low bits); 0 = default */
    FP_C_NONE = 0, FP_C_ARM0, FP_C_ARM1, FP_C_ARM2, FP_C_ARM3, FP_C_BAD, FP_C_WARN, FP_C_GOOD, FP_C_DIM,
    FP_C_TITLE, FP_C_MARK, FP_C_COUNT
};
#define FP_A_BOLD 0x100
#define FP_A_REV 0x200
#define FP_A_COLOR(a) ((a) & 0xff)

typedef struct {
    char ch[5];          /* one UTF-8 character, NUL-terminated */
    uint16_t attr;
} fp_cell_t;

typedef struct {
    int w, h;
    fp_cell_t *cells;
    int ascii;           /* draw only ASCII */
} fp_grid_t;

int fp_grid_init(fp_grid_t *g, int w, int h, int ascii);
void fp_grid_free(fp_grid_t *g);
void fp_grid_clear(fp_grid_t *g);
/* Put UTF-8 text at (x, y), clipped to [x, xmax); returns the column after the last cell drawn. */
int fp_grid_text(fp_grid_t *g, int x, int y, int xmax, uint16_t attr, const char *s);
int fp_grid_printf(fp_grid_t *g, int x, int y, int xmax, uint16_t attr, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void fp_grid_put(fp_grid_t *g, int x, int y, uint16_t attr, const char *ch);
/* A box with a title on its top edge. */
void fp_grid_box(fp_grid_t *g, int x, int y, int w, int h, uint16_t attr, const char *title, int focused);
void fp_grid_fill(fp_grid_t *g, int x, int y, int w, int h);
/* The grid as text (lines right-trimmed, '\n' each); malloc'd. */
char *fp_grid_to_text(const fp_grid_t *g);
/* Count codepoints of UTF-8 text. */
int fp_utf8_len(const char *s);

/* ---------------------------------------------------------------- downsampled series (tui_model.c) */
#define FP_DS_BUCKETS 512
/* A series pushed in order, kept as at most FP_DS_BUCKETS buckets of min/max/last; bucket width
 * doubles when full. Drawing is then O(buckets), whatever the number of samples. */
typedef struct {
    double mn[FP_DS_BUCKETS], mx[FP_DS_BUCKETS], last[FP_DS_BUCKETS], sum[FP_DS_BUCKETS];
    int64_t nvalid[FP_DS_BUCKETS];   /* non-NaN samples per bucket (sum / nvalid: the mean) */
    int nb;              /* buckets in use */
    int64_t per;         /* samples per bucket */
    int64_t cnt;         /* samples in the last bucket */
    int64_t total;       /* samples pushed (NaN ones too, they leave gaps) */
} fp_ds_t;
void fp_ds_init(fp_ds_t *d);
void fp_ds_push(fp_ds_t *d, double v);
/* dst = a / b bucket by bucket (means), aligning bucket widths; NaN where either is missing. */
void fp_ds_ratio(fp_ds_t *dst, const fp_ds_t *a, const fp_ds_t *b);

/* ---------------------------------------------------------------- model (tui_model.c) */
#define FP_TUI_MAX_ARMS 4
#define FP_TUI_EVENTS 64
#define FP_TUI_WINDOW 50     /* layer table: the last this many steps */
#define FP_TUI_BUDGET_MS 8.0 /* an update reads steps for about this long, then leaves the rest to the next */
#define FP_TUI_CHUNK 1000    /* steps per read */

typedef struct {
    int64_t step;
    int arm, kind, layer;
    char text[200];
} fp_tui_ev_t;

typedef struct {
    fp_run_row_t run;            /* as read at attach */
    fp_run_status_t status;      /* refreshed each frame */
    int64_t last_step, nsteps, first_start, last_end;
    fp_ds_t loss, thr, scale, skipped, speedup;   /* scale: log2; speedup: thr / ref thr */
    int64_t skipped_total, scale_changes;
    double last_loss, last_thr, last_scale;
    double mem_cur, mem_peak, energy_sum, power_last;   /* NaN: not measured */
    int64_t energy_steps;
    int64_t *walls;              /* wall_ns of every step row read (< 0: none), in step order */
    uint8_t *skips;              /* and whether it was skipped: the step time of lib/step_time.h */
    double *losses;              /* and its loss (NaN: none): the final loss as the summary has it */
    int has_scaler;              /* 1: some step stored a loss scale other than NULL / 1 (else "-") */
    double lost_sum, lost_max;   /* "lost updates at step N: X%" events of the parameter pass */
    int lost_n;                  /* sampled steps with such an event */
    size_t rows_cap;
    double median_ns;            /* fp_step_median_ns of those rows (NaN: none), at median_rows rows */
    int64_t median_rows;
    double val_top1, val_loss;   /* latest evaluation; NaN none */
    int64_t val_step;
    int64_t val_images;          /* images of that evaluation (the store's, else the configuration's); -1 unknown */
    double val_lo, val_hi;       /* its 95% Wilson interval (lib/wilson.h); NaN unknown */
    int64_t eval_rows_seen, eval_last_seen;   /* the evaluation mark (fp_run_status_t) when last read */
    int64_t event_id;
    fp_layer_sum_t *lsum;        /* per layer and phase over the last window */
    size_t nlsum;
    int64_t lsum_step;           /* last_step when lsum was read */
    fp_tui_hist_t *hist;         /* per layer, for the current role */
    int hist_role;
    int64_t hist_mark;
    double *relerr;              /* per layer */
    int64_t prec_step, prec_mark;
    /* data parallel (dist_steps, over every recorded step): ranks 0 when the arm trains alone */
    int ranks, slowest;          /* slowest: the rank with the largest mean step (-1: none) */
    double exposed_share, comm_share;   /* exposed / wall and all-reduce / wall over ranks and steps; NaN none */
    double straggler;            /* the slowest rank's mean step / the fastest's; NaN none */
    int64_t dist_step;           /* last_step when read (-1: never) */
} fp_tui_arm_t;

typedef struct {
    fp_reader_t *reader;
    int64_t session_req;         /* as asked (<= 0: newest) */
    int64_t session;             /* 0: none yet */
    char session_name[128];
    int64_t total_steps;         /* from the configuration; -1 unknown */
    int narms, ref;              /* ref: the reference arm index (fp32) */
    fp_tui_arm_t arm[FP_TUI_MAX_ARMS];
    int nlayers;
    fp_layer_row_t *layers;
    fp_tui_marks_t marks;
    fp_tui_ev_t events[FP_TUI_EVENTS];   /* ring, newest at (nev - 1) % FP_TUI_EVENTS */
    int64_t nev;
    int frames;
    int loading;                 /* 1: some arm's steps are not all read yet (the next update goes on) */
    double budget_ms;            /* steps read per update for about this long (FP_TUI_BUDGET_MS; tests: 0) */
    int force;                   /* 1: the next update re-reads everything it does not append (Ctrl-L) */
    char note[160];              /* "no sessions in FILE" etc.; "" when showing a session */
} fp_tui_model_t;

int fp_tui_model_open(fp_tui_model_t *m, const char *path, int64_t session);
void fp_tui_model_close(fp_tui_model_t *m);
/* Read what is new since the last call (role: the tensor role the histograms are wanted for). */
int fp_tui_model_update(fp_tui_model_t *m, int role);
/* Update until the history is read (m->loading == 0): for one-shot output. */
int fp_tui_model_settle(fp_tui_model_t *m, int role);
/* The default compared arm: the first arm that is not the reference (the only one when alone). */
int fp_tui_model_low(const fp_tui_model_t *m);
/* An arm's throughput (samples/s) from its step time: batch x 1e9 / fp_tui_arm_median_wall (NaN: none), so
 * the rate and the step time shown side by side are one figure. */
double fp_tui_arm_thr(const fp_tui_arm_t *a);
/* The final train loss as the summary defines it (reports/summary.h): mean finite loss of the last
 * max(1, min(50, steps / 20)) unskipped steps; NaN: none. */
double fp_tui_arm_final_loss(const fp_tui_arm_t *a);
/* 1 when the arm ran on the CPU, where low precision is emulated (device "cpu: ..."; a GPU's name is not). */
int fp_tui_arm_emulated(const fp_tui_arm_t *a);
/* What the tool asks, per arm against the reference: speedup, final-loss gap, top-1 gap in points with
 * the arm's 95% interval (within: the arm's and the reference's intervals overlap, as the summary says),
 * skipped steps of all steps, lost updates (mean % over the sampled steps). NaN / -1: unknown. */
typedef struct {
    double speedup, loss_gap, top1_gap, top1_lo, top1_hi, lost_pct;
    int within, lost_n;
    int64_t skipped, steps;
} fp_tui_verdict_t;
void fp_tui_verdict(const fp_tui_model_t *m, int arm, fp_tui_verdict_t *v);
/* 1 when some arm trained on ranks (mpirun): the header then has a data-parallel line. */
int fp_tui_any_ranks(const fp_tui_model_t *m);
/* Lines of the header at width w: 2, plus the verdict (its title line, with the CPU emulation note, and one
 * line per compared arm) with two or more arms, plus one data-parallel line (fp_tui_any_ranks). */
int fp_tui_header_lines(const fp_tui_model_t *m, int w);
#define FP_TUI_EMULATED_NOTE "emulated on the CPU: speed not representative"
/* An arm's step time (ns, NaN: none) as the end-of-run summary defines it (lib/step_time.h: the median
 * wall time of its step rows after the warm-up, skipped ones left out); the reference's over an arm's
 * is the speedup the dashboard shows, the same as compare's summary. */
double fp_tui_arm_median_wall(const fp_tui_arm_t *a);
/* Per-layer mean ns of an arm for a phase (NaN: none). */
double fp_tui_layer_ns(const fp_tui_arm_t *a, int layer, int phase);
int fp_tui_any_running(const fp_tui_model_t *m);

/* ---------------------------------------------------------------- UI state and keys (keys.c) */
enum { FP_FOCUS_LAYERS = 0, FP_FOCUS_HIST, FP_FOCUS_EVENTS, FP_FOCUS_COUNT };
enum {
    FP_KEY_UP = 0x1001, FP_KEY_DOWN, FP_KEY_LEFT, FP_KEY_RIGHT, FP_KEY_PGUP, FP_KEY_PGDN, FP_KEY_HOME,
    FP_KEY_END, FP_KEY_TAB, FP_KEY_BTAB, FP_KEY_ENTER, FP_KEY_ESC, FP_KEY_REDRAW, FP_KEY_RESIZE
};
enum {   /* layer table columns, in display order */
    FP_COL_INDEX = 0, FP_COL_NAME, FP_COL_FWD_REF, FP_COL_FWD_LOW, FP_COL_BWD_REF, FP_COL_BWD_LOW,
    FP_COL_SPEEDUP, FP_COL_SHARE, FP_COL_OVF, FP_COL_UNF, FP_COL_SUB, FP_COL_RELERR, FP_COL_COUNT
};
enum { FP_ACT_NONE = 0, FP_ACT_DRAW, FP_ACT_REDRAW_ALL, FP_ACT_QUIT, FP_ACT_STOP };

typedef struct {
    int focus;
    int sel;                     /* selected row of the layer table (in sorted order) */
    int top;                     /* first visible row */
    int ev_scroll;               /* events: lines scrolled back */
    int sort_col, sort_desc;
    int role, fmt;
    int arm;                     /* the compared arm: the arm-th (mod their number) arm other than the
                                    reference ('a' / 'A' add / take one); 0: the first, fp_tui_model_low */
    int detail, help, confirm;
    int owns_training;
    int table_rows;              /* visible rows, set by the last draw */
    int order[4096];             /* sorted layer order, set by the last draw */
    int norder;
} fp_tui_ui_t;

void fp_tui_ui_init(fp_tui_ui_t *ui);
/* Apply one key; returns FP_ACT_*. running: 1 while an arm still trains. */
int fp_tui_key(fp_tui_ui_t *ui, int key, int running);
/* Parse one key from a headless script (see tui.h); advances *p; 0 at the end. For "<resize WxH>"
 * returns FP_KEY_RESIZE and sets *w, *h. */
int fp_tui_script_key(const char **p, int *w, int *h);
const char *fp_tui_col_name(int col);
/* The compared arm: the ui->arm-th arm other than the reference (mod their number; the reference itself
 * when it is the only arm; -1 without arms). Every panel that compares two arms compares this one. */
int fp_tui_cmp_arm(const fp_tui_model_t *m, const fp_tui_ui_t *ui);

/* ---------------------------------------------------------------- layout (layout.c) */
enum {
    FP_P_HEADER = 0, FP_P_LOSS, FP_P_THR, FP_P_MEM, FP_P_SCALE, FP_P_LAYERS, FP_P_HIST, FP_P_EVENTS,
    FP_P_FOOTER, FP_P_COUNT
};
typedef struct {
    int x, y, w, h;              /* w == 0: collapsed */
} fp_rect_t;
typedef struct {
    int w, h, too_small;
    int hdr;                     /* header lines (fp_tui_header_lines) the layout was made for */
    fp_rect_t p[FP_P_COUNT];
} fp_layout_t;
void fp_tui_layout(fp_layout_t *l, int w, int h);                 /* a 2-line header */
void fp_tui_layout_hdr(fp_layout_t *l, int w, int h, int hdr);    /* hdr header lines */

/* ---------------------------------------------------------------- drawing */
typedef struct {
    fp_grid_t *g;
    const fp_tui_model_t *m;
    fp_tui_ui_t *ui;
    int chart;                   /* fp_tui_chart, resolved (never AUTO) */
    int ascii;
} fp_draw_t;

/* chart_braille.c: series drawn over an area; each series with its colour. lo/hi: the y range
 * (NaN: auto from the data). log: y in log2. */
typedef struct {
    const fp_ds_t *ds;
    uint16_t attr;
} fp_chart_series_t;
void fp_chart_draw(fp_grid_t *g, int x, int y, int w, int h, int mode, const fp_chart_series_t *s, int ns,
                   double lo, double hi, double *out_lo, double *out_hi);
/* One row of markers: a mark at each column whose buckets have a nonzero max in ds. */
void fp_chart_marks(fp_grid_t *g, int x, int y, int w, const fp_ds_t *ds, int64_t total, uint16_t attr,
                    const char *mark);

void fp_panel_header(fp_draw_t *d, fp_rect_t r);
void fp_panel_footer(fp_draw_t *d, fp_rect_t r);
void fp_panel_loss(fp_draw_t *d, fp_rect_t r);
void fp_panel_thr(fp_draw_t *d, fp_rect_t r);
void fp_panel_mem(fp_draw_t *d, fp_rect_t r);
void fp_panel_scale(fp_draw_t *d, fp_rect_t r);
void fp_panel_layers(fp_draw_t *d, fp_rect_t r);
void fp_panel_hist(fp_draw_t *d, fp_rect_t r);
void fp_panel_events(fp_draw_t *d, fp_rect_t r);
void fp_panel_detail(fp_draw_t *d, int w, int h);   /* overlay: the selected layer */
void fp_panel_help(fp_draw_t *d, int w, int h);     /* overlay: keys */
/* panels_layers.c: sort the layer order for the current column (fills ui->order). */
void fp_tui_sort_layers(const fp_tui_model_t *m, fp_tui_ui_t *ui);
/* The layer index of the selected row (-1: none). */
int fp_tui_selected_layer(const fp_tui_ui_t *ui);
/* The value of a column for layer l (NaN: none). */
double fp_tui_col_value(const fp_tui_model_t *m, const fp_tui_ui_t *ui, int l, int col);

/* render.c: a whole frame into g (sized w x h). */
void fp_tui_render(fp_grid_t *g, const fp_tui_model_t *m, fp_tui_ui_t *ui, const fp_layout_t *l, int chart,
                   int ascii);
/* Short number formats. */
void fp_tui_fmt_ns(char *buf, size_t cap, double ns);      /* "812us", "1.23ms", "n/a" */
void fp_tui_fmt_bytes(char *buf, size_t cap, double b);    /* "1.2G", "n/a" */
void fp_tui_fmt_count(char *buf, size_t cap, double v);    /* "0", "12", "3.4k", "-" */
void fp_tui_fmt_dur(char *buf, size_t cap, double s);      /* "1:02:03", "--" */
const char *fp_tui_role_short(int role);               /* "act", "act-grad", ... */
const char *fp_tui_fmt_label(int fmt);                 /* "fp16", "bf16", "E4M3", "E5M2" */

#endif
