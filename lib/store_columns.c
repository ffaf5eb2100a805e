/* store_columns.c — the readers' column, row-array and run-liveness helpers (store_columns.h).
 * Promise: NULL columns never read as 0; a failed reserve leaves the array as it was. */
#include "store_columns.h"
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "error.h"
#include "store.h"
#include "store_db.h"
#include "store_reader_internal.h"

void fp_col_text(sqlite3_stmt *st, int i, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

int64_t fp_col_i64(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, i);
}

int fp_col_int(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_int(st, i);
}

double fp_col_dbl(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

int fp_col_event_kind(sqlite3_stmt *st, int i)
{
    const unsigned char *k = sqlite3_column_text(st, i);
    for (int kind = FP_EVENT_LOSS_SCALE; k && kind <= FP_EVENT_INFO; kind++)
        if (strcmp((const char *)k, fp_event_kind_name((fp_event_kind)kind)) == 0)
            return kind;
    return FP_EVENT_INFO;
}

int fp_rows_reserve(void **arr, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return FP_OK;
    size_t nc = *cap ? *cap * 2 : 64;
    void *a = realloc(*arr, nc * sz);
    if (!a)
        return fp_fail(FP_ENOMEM, "reader: out of memory");
    *arr = a;
    *cap = nc;
    return FP_OK;
}

int fp_reader_end_rows(struct fp_reader *r, int rc, void **rows, size_t *n)
{
    rc = fp_reader_end(r, rc);
    if (rc != FP_OK) {
        free(*rows);
        *rows = NULL;
        *n = 0;
    }
    return rc;
}

/* The field's size must be the kind's: FP_COL takes it from the field itself, so a table that names a
 * field of another type fails here (in a debug build) rather than writing past it. */
void fp_cols_read(sqlite3_stmt *st, const fp_col_t *cols, size_t ncols, void *row)
{
    for (size_t i = 0; i < ncols; i++) {
        const fp_col_t *c = &cols[i];
        void *f = (char *)row + c->offset;
        int col = (int)i;
        switch (c->kind) {
        case FP_COL_I64:
        case FP_COL_I64_NA:
            assert(c->size == sizeof(int64_t));
            *(int64_t *)f = c->kind == FP_COL_I64 ? sqlite3_column_int64(st, col) : fp_col_i64(st, col);
            break;
        case FP_COL_INT:
        case FP_COL_INT_NA:
        case FP_COL_EVENT_KIND:
            assert(c->size == sizeof(int));
            *(int *)f = c->kind == FP_COL_INT ? sqlite3_column_int(st, col)
                        : c->kind == FP_COL_INT_NA ? fp_col_int(st, col) : fp_col_event_kind(st, col);
            break;
        case FP_COL_U32:
            assert(c->size == sizeof(uint32_t));
            *(uint32_t *)f = (uint32_t)sqlite3_column_int64(st, col);
            break;
        case FP_COL_DBL:
            assert(c->size == sizeof(double));
            *(double *)f = fp_col_dbl(st, col);
            break;
        case FP_COL_TEXT:
            fp_col_text(st, col, f, c->size);
            break;
        }
    }
}

int fp_reader_collect(struct fp_reader *r, const fp_query_t *q, const int64_t *args, int nargs, int check_run,
                      size_t elem, void **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    size_t cap = 0;
    sqlite3_stmt *st = NULL;
    int rc = fp_reader_begin(r);
    if (rc != FP_OK)
        return rc;
    if (check_run)
        rc = fp_reader_check_run(r, args[0]);
    int src = SQLITE_DONE;
    if (rc == FP_OK && q->keep)
        rc = fp_reader_cached(r, q->keep, q->sql, &st);
    else if (rc == FP_OK && (src = sqlite3_prepare_v2(fp_reader_db(r), q->sql, -1, &st, NULL)) != SQLITE_OK)
        rc = fp_reader_fail(r, src, q->doing);
    for (int i = 0; rc == FP_OK && i < nargs; i++)
        sqlite3_bind_int64(st, i + 1, args[i]);
    while (rc == FP_OK && (src = sqlite3_step(st)) == SQLITE_ROW) {
        if ((rc = fp_rows_reserve(rows, &cap, *n, elem)) != FP_OK)
            break;
        void *e = (char *)*rows + *n * elem;
        memset(e, 0, elem);
        fp_cols_read(st, q->cols, q->ncols, e);
        if (q->fill && (rc = q->fill(st, e, r)) != FP_OK)
            break;
        (*n)++;
    }
    if (rc == FP_OK && src != SQLITE_DONE)
        rc = fp_reader_fail(r, src, q->doing);
    if (q->keep)
        sqlite3_reset(st);
    else
        sqlite3_finalize(st);
    return fp_reader_end_rows(r, rc, rows, n);
}

int fp_run_liveness(char *status, size_t status_cap, char *failure, size_t failure_cap, int64_t pid,
                    const char *host, int64_t heartbeat)
{
    if (strcmp(status, "running") != 0)
        return 0;
    if (fp_store_writer_gone(pid, host)) {
        snprintf(status, status_cap, "interrupted");
        snprintf(failure, failure_cap, "writer process %lld is gone", (long long)pid);
        return 1;
    }
    return heartbeat >= 0 && fp_clock_wall_ns() - heartbeat > FP_STORE_STALE_NS;
}
