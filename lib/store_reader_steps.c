/* store_reader_steps.c — a run's steps read back (store_reader.h: fp_reader_steps_since). Promise: one short
 * read transaction on a statement the reader keeps prepared (the dashboard asks every frame), seeking on
 * (run, step); NULL columns read as -1 / NaN, never as 0. */
#include "store_reader.h"
#include "error.h"
#include "store_columns.h"
#include "store_db.h"
#include "store_reader_internal.h"

static const fp_col_t step_cols[] = {
    FP_COL(fp_step_row_t, step, FP_COL_I64),             FP_COL(fp_step_row_t, loss, FP_COL_DBL),
    FP_COL(fp_step_row_t, loss_scale, FP_COL_DBL),       FP_COL(fp_step_row_t, lr, FP_COL_DBL),
    FP_COL(fp_step_row_t, samples_per_s, FP_COL_DBL),    FP_COL(fp_step_row_t, energy_j, FP_COL_DBL),
    FP_COL(fp_step_row_t, power_w, FP_COL_DBL),          FP_COL(fp_step_row_t, skipped, FP_COL_INT),
    FP_COL(fp_step_row_t, start, FP_COL_I64_NA),         FP_COL(fp_step_row_t, end, FP_COL_I64_NA),
    FP_COL(fp_step_row_t, wall_ns, FP_COL_I64_NA),       FP_COL(fp_step_row_t, mem_current, FP_COL_I64_NA),
    FP_COL(fp_step_row_t, mem_peak, FP_COL_I64_NA),      FP_COL(fp_step_row_t, host_cpu_ns, FP_COL_I64_NA),
};

int fp_reader_steps_since(fp_reader_t *r, int64_t run, int64_t after_step, size_t limit, fp_step_row_t **rows,
                          size_t *n)
{
    static const fp_query_t q = {"SELECT step, loss, loss_scale, lr, samples_per_s, energy_j, power_w, skipped,"
                                 " start, end, wall_ns, mem_current, mem_peak, host_cpu_ns FROM steps"
                                 " WHERE run = ?1 AND step > ?2 ORDER BY step LIMIT ?3",
                                 FP_COLS(step_cols), NULL, "reading steps", FP_RQ_STEPS_SINCE};
    const int64_t args[3] = {run, after_step, limit ? (int64_t)limit : -1};
    return fp_reader_collect(r, &q, args, 3, 0, sizeof **rows, (void **)rows, n);
}
