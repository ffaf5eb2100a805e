/* store_reader_tui.c — the dashboard's incremental reader queries (store_reader_tui.h). Promise:
 * every call is one short read transaction on the reader's read-only connection, using only index
 * seeks on the keys of docs/schema.md, so a frame's cost does not grow with the file. */
#include "store_reader_tui.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "store.h"
#include "store_columns.h"
#include "store_db.h"
#include "store_reader_internal.h"

static int64_t one_int(sqlite3 *db, const char *sql, int *src)
{
    sqlite3_stmt *st;
    int64_t v = -1;
    *src = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (*src != SQLITE_OK)
        return -1;
    *src = sqlite3_step(st);
    if (*src == SQLITE_ROW) {
        if (sqlite3_column_type(st, 0) != SQLITE_NULL)
            v = sqlite3_column_int64(st, 0);
        *src = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return v;
}

int fp_reader_tui_marks(fp_reader_t *r, fp_tui_marks_t *m)
{
    int rc = fp_reader_begin(r);
    if (rc != FP_OK)
        return rc;
    sqlite3 *db = fp_reader_db(r);
    int src;
    m->max_session = one_int(db, "SELECT max(id) FROM sessions", &src);
    if (src == SQLITE_OK)
        m->max_run = one_int(db, "SELECT max(id) FROM runs", &src);
    if (src == SQLITE_OK)
        m->max_hist_id = one_int(db, "SELECT max(id) FROM histograms", &src);
    if (src == SQLITE_OK)
        m->max_event_id = one_int(db, "SELECT max(id) FROM events", &src);
    if (src != SQLITE_OK)
        rc = fp_reader_fail(r, src, "reading change marks");
    return fp_reader_end(r, rc);
}

int fp_reader_tui_run_status(fp_reader_t *r, int64_t run, fp_run_status_t *out)
{
    memset(out, 0, sizeof *out);
    out->id = run;
    out->end = out->last_step = out->eval_last_step = -1;
    int rc = fp_reader_begin(r);
    if (rc != FP_OK)
        return rc;
    sqlite3 *db = fp_reader_db(r);
    sqlite3_stmt *st = NULL;
    int src = sqlite3_prepare_v2(db, "SELECT status, end, failure, writer_pid, writer_host, heartbeat,"
                                 " (SELECT max(step) FROM steps WHERE run = ?1),"
                                 " (SELECT count(*) FROM evaluations WHERE run = ?1),"
                                 " (SELECT max(step) FROM evaluations WHERE run = ?1) FROM runs WHERE id = ?1",
                                 -1, &st, NULL);
    if (src == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, run);
        src = sqlite3_step(st);
    }
    if (src == SQLITE_ROW) {
        fp_col_text(st, 0, out->status, sizeof out->status);
        out->end = fp_col_i64(st, 1);
        fp_col_text(st, 2, out->failure, sizeof out->failure);
        out->last_step = fp_col_i64(st, 6);
        out->eval_rows = sqlite3_column_int64(st, 7);
        out->eval_last_step = fp_col_i64(st, 8);
        out->stale = fp_run_liveness(out->status, sizeof out->status, out->failure, sizeof out->failure,
                                     sqlite3_column_int64(st, 3), (const char *)sqlite3_column_text(st, 4),
                                     fp_col_i64(st, 5));
        src = SQLITE_DONE;
    } else if (src == SQLITE_DONE) {
        rc = fp_fail(FP_EINVAL, "%s: no run %lld", fp_reader_path(r), (long long)run);
    }
    if (rc == FP_OK && src != SQLITE_DONE)
        rc = fp_reader_fail(r, src, "reading run status");
    sqlite3_finalize(st);
    return fp_reader_end(r, rc);
}

static const fp_col_t event_cols[] = {
    FP_COL(fp_tui_event_t, id, FP_COL_I64),             FP_COL(fp_tui_event_t, start, FP_COL_I64),
    FP_COL(fp_tui_event_t, step, FP_COL_I64_NA),        FP_COL(fp_tui_event_t, kind, FP_COL_EVENT_KIND),
    FP_COL(fp_tui_event_t, layer, FP_COL_INT_NA),       FP_COL(fp_tui_event_t, text, FP_COL_TEXT),
};

/* One screen line: a text longer than the field says it is cut. */
static int fill_event(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    fp_tui_event_t *e = elem;
    if ((size_t)sqlite3_column_bytes(st, 5) >= sizeof e->text)
        memcpy(e->text + sizeof e->text - 4, "...", 4);
    return FP_OK;
}

int fp_reader_tui_events_since(fp_reader_t *r, int64_t run, int64_t after_id, size_t limit, fp_tui_event_t **rows,
                               size_t *n)
{
    static const fp_query_t q = {"SELECT id, start, step, kind, layer, text FROM events"
                                 " WHERE id > ?2 AND run = ?1 ORDER BY id LIMIT ?3",
                                 FP_COLS(event_cols), fill_event, "reading events", FP_RQ_NONE};
    const int64_t args[3] = {run, after_id, limit ? (int64_t)limit : -1};
    return fp_reader_collect(r, &q, args, 3, 0, sizeof **rows, (void **)rows, n);
}

int fp_reader_tui_hist_latest(fp_reader_t *r, int64_t run, int role, int nlayers, fp_tui_hist_t *out)
{
    for (int l = 0; l < nlayers; l++)
        out[l].step = -1;
    int rc = fp_reader_begin(r);
    if (rc != FP_OK)
        return rc;
    sqlite3_stmt *st = NULL;
    int src = sqlite3_prepare_v2(fp_reader_db(r), "SELECT step, blob FROM histograms WHERE run = ?1 AND layer = ?2"
                                 " AND role = ?3 ORDER BY step DESC LIMIT 1", -1, &st, NULL);
    for (int l = 0; src == SQLITE_OK && rc == FP_OK && l < nlayers; l++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int(st, 2, l);
        sqlite3_bind_int(st, 3, role);
        src = sqlite3_step(st);
        if (src == SQLITE_ROW) {
            out[l].step = sqlite3_column_int64(st, 0);
            const void *blob = sqlite3_column_blob(st, 1);
            int len = sqlite3_column_bytes(st, 1);
            if (fp_hist_from_blob(&out[l].hist, blob, (size_t)len) != FP_OK) {
                rc = fp_fail(FP_EFORMAT, "%s: histogram of run %lld layer %d: %s", fp_reader_path(r),
                             (long long)run, l, fp_error_message());
                break;
            }
            src = SQLITE_OK;
        } else if (src == SQLITE_DONE) {
            src = SQLITE_OK;
        }
    }
    if (rc == FP_OK && src != SQLITE_OK)
        rc = fp_reader_fail(r, src, "reading histograms");
    sqlite3_finalize(st);
    return fp_reader_end(r, rc);
}

int fp_reader_tui_precision_latest(fp_reader_t *r, int64_t run, int role, int nlayers, double *rel_l2,
                                   int64_t *step)
{
    for (int l = 0; l < nlayers; l++)
        rel_l2[l] = NAN;
    *step = -1;
    int rc = fp_reader_begin(r);
    if (rc != FP_OK)
        return rc;
    sqlite3_stmt *st = NULL;
    int src = sqlite3_prepare_v2(fp_reader_db(r), "SELECT step, layer, role, rel_l2 FROM precision_error"
                                 " WHERE run = ?1 AND step = (SELECT max(step) FROM precision_error WHERE run = ?1)"
                                 " ORDER BY layer, role", -1, &st, NULL);
    if (src == SQLITE_OK)
        sqlite3_bind_int64(st, 1, run);
    int *best = calloc((size_t)(nlayers > 0 ? nlayers : 1), sizeof *best);
    if (!best)
        rc = fp_fail(FP_ENOMEM, "reader: out of memory");
    while (rc == FP_OK && (src == SQLITE_OK || src == SQLITE_ROW) && (src = sqlite3_step(st)) == SQLITE_ROW) {
        int l = sqlite3_column_int(st, 1), ro = sqlite3_column_int(st, 2);
        *step = sqlite3_column_int64(st, 0);
        if (l < 0 || l >= nlayers || sqlite3_column_type(st, 3) == SQLITE_NULL)
            continue;
        double v = sqlite3_column_double(st, 3);
        if (ro == role || isnan(rel_l2[l])) {   /* the chosen role, else the first one recorded */
            if (!(best[l] && ro != role))
                rel_l2[l] = v;
            if (ro == role)
                best[l] = 1;
        }
    }
    if (rc == FP_OK && src != SQLITE_DONE)
        rc = fp_reader_fail(r, src, "reading precision error");
    free(best);
    sqlite3_finalize(st);
    return fp_reader_end(r, rc);
}
