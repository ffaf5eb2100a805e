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


static int fill_step(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    fp_dist_step_row_t *d = elem;
    d->step = fp_col_i64(st, 0);
    d->rank = fp_col_int(st, 1);
    d->wall_ns = fp_col_i64(st, 2);
    d->comm_ns = fp_col_i64(st, 3);
    d->exposed_ns = fp_col_i64(st, 4);
    d->bytes = fp_col_i64(st, 5);
    d->skipped = fp_col_int(st, 6) > 0;
    d->compute_ns = d->wall_ns >= 0 && d->exposed_ns >= 0 && d->wall_ns >= d->exposed_ns ? d->wall_ns - d->exposed_ns
                                                                                         : -1;
    return FP_OK;
}

int fp_reader_dist_steps(fp_reader_t *r, int64_t run, int64_t from, int64_t to, fp_dist_step_row_t **rows,
                         size_t *n)
{
    const int64_t args[3] = {run, from, to < 0 ? INT64_MAX : to};
    return fp_reader_collect(r, "SELECT step, rank, wall_ns, comm_ns, exposed_ns, bytes, skipped FROM dist_steps"
                             " WHERE run = ?1 AND step >= ?2 AND step <= ?3 ORDER BY step, rank", args, 3, 1, sizeof **rows,
                             (void **)rows, n, fill_step, "reading the ranks' steps");
}

static int fill_rank(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    fp_dist_rank_row_t *d = elem;
    d->rank = fp_col_int(st, 0);
    d->steps = fp_col_i64(st, 1);
    d->mean_wall_ns = fp_col_dbl(st, 2);
    d->mean_compute_ns = fp_col_dbl(st, 3);
    d->mean_comm_ns = fp_col_dbl(st, 4);
    d->mean_exposed_ns = fp_col_dbl(st, 5);
    d->mean_bytes = fp_col_dbl(st, 6);
    d->max_wall_ns = fp_col_i64(st, 7);
    d->vs_fastest = NAN;
    return FP_OK;
}

int fp_reader_dist_ranks(fp_reader_t *r, int64_t run, fp_dist_rank_row_t **rows, size_t *n)
{
    int rc = fp_reader_collect(r, "SELECT rank, count(*), avg(wall_ns), avg(wall_ns - exposed_ns), avg(comm_ns),"
                               " avg(exposed_ns), avg(bytes), max(wall_ns) FROM dist_steps WHERE run = ?1"
                               " GROUP BY rank ORDER BY rank", &run, 1, 1, sizeof **rows, (void **)rows, n, fill_rank,
                               "reading the ranks' summary");
    if (rc != FP_OK)
        return rc;
    double fastest = INFINITY;
    for (size_t i = 0; i < *n; i++)
        if ((*rows)[i].mean_wall_ns > 0 && (*rows)[i].mean_wall_ns < fastest)
            fastest = (*rows)[i].mean_wall_ns;
    for (size_t i = 0; i < *n && isfinite(fastest); i++)
        if ((*rows)[i].mean_wall_ns > 0)
            (*rows)[i].vs_fastest = (*rows)[i].mean_wall_ns / fastest;
    return FP_OK;
}

static int fill_run(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    fp_dist_run_row_t *d = elem;
    d->run = fp_col_i64(st, 0);
    d->ranks = fp_col_int(st, 1);
    d->steps = fp_col_i64(st, 2);
    return FP_OK;
}

int fp_reader_dist_runs(fp_reader_t *r, int64_t session, fp_dist_run_row_t **rows, size_t *n)
{
    return fp_reader_collect(r, "SELECT run, max(rank) + 1, count(DISTINCT step) FROM dist_steps"
                             " WHERE ?1 <= 0 OR run IN (SELECT id FROM runs WHERE session = ?1) GROUP BY run ORDER BY run",
                             &session, 1, 0, sizeof **rows, (void **)rows, n, fill_run, "reading the data-parallel runs");
}

static int fill_error(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    fp_allreduce_error_row_t *d = elem;
    d->step = fp_col_i64(st, 0);
    d->layer = fp_col_int(st, 1);
    fp_col_text(st, 2, d->wire, sizeof d->wire);
    d->rel_l2 = fp_col_dbl(st, 3);
    d->overflow = fp_col_i64(st, 4);
    d->underflow = fp_col_i64(st, 5);
    return FP_OK;
}

int fp_reader_allreduce_error(fp_reader_t *r, int64_t run, fp_allreduce_error_row_t **rows, size_t *n)
{
    return fp_reader_collect(r, "SELECT step, layer, wire, rel_l2, overflow, underflow FROM allreduce_error WHERE run = ?1"
                             " ORDER BY step, layer", &run, 1, 1, sizeof **rows, (void **)rows, n, fill_error,
                             "reading the all-reduce's rounding");
}
