/* store_reader_steps.c — a run's steps read back (store_reader.h: fp_reader_steps_since). Promise: one short
 * read transaction on a statement the reader keeps prepared (the dashboard asks every frame), seeking on
 * (run, step); NULL columns read as -1 / NaN, never as 0. */
#include "store_reader.h"
#include "error.h"
#include "store_columns.h"
#include "store_db.h"
#include "store_reader_internal.h"

#define STEPS_SINCE_SQL                                                                                    \
    "SELECT step, loss, loss_scale, lr, samples_per_s, energy_j, power_w, skipped, start, end,"            \
    " wall_ns, mem_current, mem_peak, host_cpu_ns FROM steps WHERE run = ?1 AND step > ?2"                 \
    " ORDER BY step LIMIT ?3"

int fp_reader_steps_since(fp_reader_t *r, int64_t run, int64_t after_step, size_t limit, fp_step_row_t **rows,
                          size_t *n)
{
    *rows = NULL;
    *n = 0;
    size_t cap = 0;
    sqlite3_stmt *st;
    int rc = fp_reader_begin(r);
    if (rc == FP_OK)
        rc = fp_reader_cached(r, FP_RQ_STEPS_SINCE, STEPS_SINCE_SQL, &st);
    if (rc != FP_OK)
        return fp_reader_end(r, rc);
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int64(st, 2, after_step);
    sqlite3_bind_int64(st, 3, limit ? (sqlite3_int64)limit : -1);
    int src;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        if ((rc = fp_rows_reserve((void **)rows, &cap, *n, sizeof **rows)) != FP_OK)
            break;
        fp_step_row_t *s = &(*rows)[(*n)++];
        s->step = sqlite3_column_int64(st, 0);
        s->loss = fp_col_dbl(st, 1);
        s->loss_scale = fp_col_dbl(st, 2);
        s->lr = fp_col_dbl(st, 3);
        s->samples_per_s = fp_col_dbl(st, 4);
        s->energy_j = fp_col_dbl(st, 5);
        s->power_w = fp_col_dbl(st, 6);
        s->skipped = sqlite3_column_int(st, 7);
        s->start = fp_col_i64(st, 8);
        s->end = fp_col_i64(st, 9);
        s->wall_ns = fp_col_i64(st, 10);
        s->mem_current = fp_col_i64(st, 11);
        s->mem_peak = fp_col_i64(st, 12);
        s->host_cpu_ns = fp_col_i64(st, 13);
    }
    if (rc == FP_OK && src != SQLITE_DONE)
        rc = fp_reader_fail(r, src, "reading steps");
    sqlite3_reset(st);
    return fp_reader_end_rows(r, rc, (void **)rows, n);
}
