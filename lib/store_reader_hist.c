/* store_reader_hist.c — a layer's histograms read back (store_reader.h: fp_reader_histograms): one per
 * tensor role at the latest sampled step at or before a step. Promise: one short read transaction; a blob
 * that does not decode is an error naming the run, layer and step, never a made-up histogram. */
#include "store_reader.h"
#include "error.h"
#include "store_columns.h"
#include "store_db.h"

int fp_reader_histograms(fp_reader_t *r, int64_t run, int layer, int64_t step, fp_hist_row_t **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    int rc = fp_reader_begin(r);
    if (rc != FP_OK)
        return rc;
    int src = sqlite3_prepare_v2(fp_reader_db(r),
                                 "SELECT step, role, blob FROM histograms WHERE run = ?1 AND layer = ?2 AND step ="
                                 " (SELECT max(step) FROM histograms WHERE run = ?1 AND layer = ?2 AND step <= ?3)"
                                 " ORDER BY role", -1, &st, NULL);
    if (src == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int(st, 2, layer);
        sqlite3_bind_int64(st, 3, step < 0 ? INT64_MAX : step);
    }
    size_t cap = 0;
    while ((src == SQLITE_OK || src == SQLITE_ROW) && (src = sqlite3_step(st)) == SQLITE_ROW) {
        if ((rc = fp_rows_reserve((void **)rows, &cap, *n, sizeof **rows)) != FP_OK)
            break;
        fp_hist_row_t *h = &(*rows)[*n];
        h->step = sqlite3_column_int64(st, 0);
        h->layer = layer;
        h->role = sqlite3_column_int(st, 1);
        const void *blob = sqlite3_column_blob(st, 2);
        int len = sqlite3_column_bytes(st, 2);
        if ((rc = fp_hist_from_blob(&h->hist, blob, (size_t)len)) != FP_OK) {
            rc = fp_fail(rc, "%s: histogram of run %lld layer %d step %lld: %s", fp_reader_path(r), (long long)run, layer,
                         (long long)h->step, fp_error_message());
            break;
        }
        (*n)++;
    }
    if (rc == FP_OK && src != SQLITE_DONE)
        rc = fp_reader_fail(r, src, "reading histograms");
    sqlite3_finalize(st);
    return fp_reader_end_rows(r, rc, (void **)rows, n);
}
