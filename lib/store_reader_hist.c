/* store_reader_hist.c — histograms read back (store_reader.h): a layer's, one per tensor role, and a role's,
 * one per layer, each at the latest sampled step at or before a step. Promise: one short read transaction per
 * call; a blob that does not decode is an error naming the layer and step, never a made-up histogram. */
#include "store_reader.h"
#include <stdio.h>
#include "error.h"
#include "store_columns.h"
#include "store_db.h"
#include "store_reader_internal.h"

/* Columns step, layer, role; the blob (column 3) is the fill's. */
static const fp_col_t hist_cols[] = {
    FP_COL(fp_hist_row_t, step, FP_COL_I64), FP_COL(fp_hist_row_t, layer, FP_COL_INT),
    FP_COL(fp_hist_row_t, role, FP_COL_INT),
};

/* The blob (column 3); a query that also gives the run (column 4) has it named in the error. */
static int fill_hist(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    fp_hist_row_t *h = elem;
    const void *blob = sqlite3_column_blob(st, 3);   /* before its size, as SQLite asks */
    int rc = fp_hist_from_blob(&h->hist, blob, (size_t)sqlite3_column_bytes(st, 3));
    if (rc == FP_OK)
        return FP_OK;
    char run[32] = "";
    if (sqlite3_column_count(st) > 4)
        snprintf(run, sizeof run, "run %lld ", (long long)sqlite3_column_int64(st, 4));
    return fp_fail(rc, "%s: histogram of %slayer %d step %lld: %s", fp_reader_path(r), run, h->layer,
                   (long long)h->step, fp_error_message());
}

int fp_reader_histograms(fp_reader_t *r, int64_t run, int layer, int64_t step, fp_hist_row_t **rows, size_t *n)
{
    static const fp_query_t q = {"SELECT step, layer, role, blob, run FROM histograms WHERE run = ?1 AND layer = ?2"
                                 " AND step = (SELECT max(step) FROM histograms WHERE run = ?1 AND layer = ?2"
                                 " AND step <= ?3) ORDER BY role",
                                 FP_COLS(hist_cols), fill_hist, "reading histograms", FP_RQ_NONE};
    const int64_t args[3] = {run, layer, step < 0 ? INT64_MAX : step};
    return fp_reader_collect(r, &q, args, 3, 0, sizeof **rows, (void **)rows, n);
}

int fp_reader_histograms_role(fp_reader_t *r, int64_t run, int role, int64_t step, fp_hist_row_t **rows,
                              size_t *n)
{
    static const fp_query_t q = {"SELECT h.step, h.layer, h.role, h.blob FROM histograms h JOIN"
                                 " (SELECT layer, max(step) AS s FROM histograms WHERE run = ?1 AND role = ?2"
                                 " AND step <= ?3 GROUP BY layer) m ON m.layer = h.layer AND m.s = h.step"
                                 " WHERE h.run = ?1 AND h.role = ?2 ORDER BY h.layer",
                                 FP_COLS(hist_cols), fill_hist, "reading histograms", FP_RQ_NONE};
    const int64_t args[3] = {run, role, step < 0 ? INT64_MAX : step};
    return fp_reader_collect(r, &q, args, 3, 1, sizeof **rows, (void **)rows, n);
}
