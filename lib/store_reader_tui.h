/* store_reader_tui.h — the extra reader queries the live dashboard (tui/) needs to read only what is
 * new since its last frame: change marks, light run status, events since an id, the latest histogram
 * per layer and the latest precision error per layer. Same promises as store_reader.h: each call is
 * one short read transaction, nothing is written, arrays are freed with free(). */
#ifndef FP_STORE_READER_TUI_H
#define FP_STORE_READER_TUI_H

#include <stddef.h>
#include <stdint.h>
#include "store_reader.h"

/* Cheap change detectors (O(log n) each): the largest row ids of the append-only tables with a
 * rowid, and the largest session and run ids. A mark that did not move means nothing new was committed. */
typedef struct {
    int64_t max_session;
    int64_t max_run, max_hist_id, max_event_id;
} fp_tui_marks_t;
int fp_reader_tui_marks(fp_reader_t *r, fp_tui_marks_t *m);

/* The status of a run without counting its steps (cheap): status as fp_run_row_t derives it
 * ("interrupted" when its writer is gone), stale flag, end time, failure text, last step (-1: none), and
 * a change mark of its evaluations (their row count and latest step, -1: none): an evaluation written
 * after the last step row (the final one) moves it although no step did. */
typedef struct {
    int64_t id, end, last_step;
    int64_t eval_rows, eval_last_step;
    char status[16];
    int stale;
    char failure[256];
} fp_run_status_t;
int fp_reader_tui_run_status(fp_reader_t *r, int64_t run, fp_run_status_t *st);

/* Events of a run with id > after_id, in id order (at most limit; 0: all). */
typedef struct {
    int64_t id, start, step;     /* step < 0: none */
    int kind, layer;             /* fp_event_kind; layer < 0: none */
    char text[200];              /* a longer text ends in "..." (one screen line; report shows it whole) */
} fp_tui_event_t;
int fp_reader_tui_events_since(fp_reader_t *r, int64_t run, int64_t after_id, size_t limit, fp_tui_event_t **rows,
                               size_t *n);

/* For layers 0..nlayers-1 of a run and one tensor role, the histogram at the latest sampled step
 * (one index seek per layer). out[l].step < 0 when layer l has none. */
typedef struct {
    int64_t step;
    fp_hist_t hist;
} fp_tui_hist_t;
int fp_reader_tui_hist_latest(fp_reader_t *r, int64_t run, int role, int nlayers, fp_tui_hist_t *out);

/* The precision error of a run at its latest sampled step: per layer 0..nlayers-1, rel_l2 of the
 * given role when recorded, else of the smallest role recorded for that layer; NaN when none.
 * *step gets the step (-1: none). */
int fp_reader_tui_precision_latest(fp_reader_t *r, int64_t run, int role, int nlayers, double *rel_l2,
                                   int64_t *step);

#endif
