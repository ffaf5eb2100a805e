/* store_reader_dist.c — the data-parallel tables read back (store_reader_dist.h). Promise: every call is one
 * short read transaction on the reader's read-only connection (nothing is written), seeking on the tables'
 * keys (run, step, rank) / (run, step, layer); NULL columns read as -1 / NaN, never as 0. */
#include "store_reader_dist.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "store_columns.h"
#include "store_db.h"
#include "store_reader_internal.h"

/* Columns step .. bytes; skipped (column 6) and the derived compute time are fill_step's. */
static const fp_col_t step_cols[] = {
    FP_COL(fp_dist_step_row_t, step, FP_COL_I64_NA),        FP_COL(fp_dist_step_row_t, rank, FP_COL_INT_NA),
    FP_COL(fp_dist_step_row_t, wall_ns, FP_COL_I64_NA),     FP_COL(fp_dist_step_row_t, comm_ns, FP_COL_I64_NA),
    FP_COL(fp_dist_step_row_t, exposed_ns, FP_COL_I64_NA),  FP_COL(fp_dist_step_row_t, bytes, FP_COL_I64_NA),
};

static int fill_step(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    fp_dist_step_row_t *d = elem;
    d->skipped = fp_col_int(st, 6) > 0;
    d->compute_ns = d->wall_ns >= 0 && d->exposed_ns >= 0 && d->wall_ns >= d->exposed_ns ? d->wall_ns - d->exposed_ns
                                                                                         : -1;
    return FP_OK;
}

int fp_reader_dist_steps(fp_reader_t *r, int64_t run, int64_t from, int64_t to, fp_dist_step_row_t **rows,
                         size_t *n)
{
    static const fp_query_t q = {"SELECT step, rank, wall_ns, comm_ns, exposed_ns, bytes, skipped FROM dist_steps"
                                 " WHERE run = ?1 AND step >= ?2 AND step <= ?3 ORDER BY step, rank",
                                 FP_COLS(step_cols), fill_step, "reading the ranks' steps", FP_RQ_NONE};
    const int64_t args[3] = {run, from, to < 0 ? INT64_MAX : to};
    return fp_reader_collect(r, &q, args, 3, 1, sizeof **rows, (void **)rows, n);
}

static const fp_col_t rank_cols[] = {
    FP_COL(fp_dist_rank_row_t, rank, FP_COL_INT_NA),
    FP_COL(fp_dist_rank_row_t, steps, FP_COL_I64_NA),
    FP_COL(fp_dist_rank_row_t, mean_wall_ns, FP_COL_DBL),
    FP_COL(fp_dist_rank_row_t, mean_compute_ns, FP_COL_DBL),
    FP_COL(fp_dist_rank_row_t, mean_comm_ns, FP_COL_DBL),
    FP_COL(fp_dist_rank_row_t, mean_exposed_ns, FP_COL_DBL),
    FP_COL(fp_dist_rank_row_t, mean_bytes, FP_COL_DBL),
    FP_COL(fp_dist_rank_row_t, max_wall_ns, FP_COL_I64_NA),
};

int fp_reader_dist_ranks(fp_reader_t *r, int64_t run, fp_dist_rank_row_t **rows, size_t *n)
{
    static const fp_query_t q = {"SELECT rank, count(*), avg(wall_ns), avg(wall_ns - exposed_ns), avg(comm_ns),"
                                 " avg(exposed_ns), avg(bytes), max(wall_ns) FROM dist_steps WHERE run = ?1"
                                 " GROUP BY rank ORDER BY rank",
                                 FP_COLS(rank_cols), NULL, "reading the ranks' summary", FP_RQ_NONE};
    int rc = fp_reader_collect(r, &q, &run, 1, 1, sizeof **rows, (void **)rows, n);
    if (rc != FP_OK)
        return rc;
    double fastest = INFINITY;
    for (size_t i = 0; i < *n; i++)
        if ((*rows)[i].mean_wall_ns > 0 && (*rows)[i].mean_wall_ns < fastest)
            fastest = (*rows)[i].mean_wall_ns;
    for (size_t i = 0; i < *n; i++)
        (*rows)[i].vs_fastest = isfinite(fastest) && (*rows)[i].mean_wall_ns > 0 ? (*rows)[i].mean_wall_ns / fastest
                                                                                 : NAN;
    return FP_OK;
}

static const fp_col_t run_cols[] = {
    FP_COL(fp_dist_run_row_t, run, FP_COL_I64_NA), FP_COL(fp_dist_run_row_t, ranks, FP_COL_INT_NA),
    FP_COL(fp_dist_run_row_t, steps, FP_COL_I64_NA),
};

int fp_reader_dist_runs(fp_reader_t *r, int64_t session, fp_dist_run_row_t **rows, size_t *n)
{
    static const fp_query_t q = {"SELECT run, max(rank) + 1, count(DISTINCT step) FROM dist_steps"
                                 " WHERE ?1 <= 0 OR run IN (SELECT id FROM runs WHERE session = ?1)"
                                 " GROUP BY run ORDER BY run",
                                 FP_COLS(run_cols), NULL, "reading the data-parallel runs", FP_RQ_NONE};
    return fp_reader_collect(r, &q, &session, 1, 0, sizeof **rows, (void **)rows, n);
}

static const fp_col_t error_cols[] = {
    FP_COL(fp_allreduce_error_row_t, step, FP_COL_I64_NA),
    FP_COL(fp_allreduce_error_row_t, layer, FP_COL_INT_NA),
    FP_COL(fp_allreduce_error_row_t, wire, FP_COL_TEXT),
    FP_COL(fp_allreduce_error_row_t, rel_l2, FP_COL_DBL),
    FP_COL(fp_allreduce_error_row_t, overflow, FP_COL_I64_NA),
    FP_COL(fp_allreduce_error_row_t, underflow, FP_COL_I64_NA),
};

int fp_reader_allreduce_error(fp_reader_t *r, int64_t run, fp_allreduce_error_row_t **rows, size_t *n)
{
    static const fp_query_t q = {"SELECT step, layer, wire, rel_l2, overflow, underflow FROM allreduce_error"
                                 " WHERE run = ?1 ORDER BY step, layer",
                                 FP_COLS(error_cols), NULL, "reading the all-reduce's rounding", FP_RQ_NONE};
    return fp_reader_collect(r, &q, &run, 1, 1, sizeof **rows, (void **)rows, n);
}
