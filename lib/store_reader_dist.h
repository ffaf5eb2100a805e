/* store_reader_dist.h — reading what a data-parallel run recorded (docs/schema.md: dist_steps, allreduce_error):
 * every rank's step figures, each rank's summary (the straggler), the runs that had ranks, the all-reduce's own
 * rounding. Same promises as store_reader.h: read-only, one short read transaction per call, arrays freed with
 * free(); a run without ranks has no rows (n = 0), which is not an error. */
#ifndef FP_STORE_READER_DIST_H
#define FP_STORE_READER_DIST_H

#include <stddef.h>
#include <stdint.h>
#include "store_reader.h"

/* One rank's figures of one step; -1: NULL in the file (not measured). */
typedef struct {
    int64_t step;
    int rank, skipped;
    int64_t wall_ns;            /* the rank's whole step */
    int64_t compute_ns;         /* wall_ns - exposed_ns (-1 when either is not recorded) */
    int64_t comm_ns;            /* the gradient all-reduce's wall time */
    int64_t exposed_ns;         /* the part of it compute waited for */
    int64_t bytes;              /* sent into the reduction by this rank */
} fp_dist_step_row_t;

/* Rows of a run with from <= step <= to (to < 0: no upper bound), by step then rank. FP_EINVAL "no run ID". */
int fp_reader_dist_steps(fp_reader_t *r, int64_t run, int64_t from, int64_t to, fp_dist_step_row_t **rows,
                         size_t *n);

/* Per rank over the run's steps: means (NaN: nothing recorded), the slowest step, and the rank's mean step
 * against the fastest rank's (1: the fastest; a straggler shows as > 1; NaN without times). By rank. */
typedef struct {
    int rank;
    int64_t steps;
    double mean_wall_ns, mean_compute_ns, mean_comm_ns, mean_exposed_ns, mean_bytes;
    int64_t max_wall_ns;        /* -1: none */
    double vs_fastest;
} fp_dist_rank_row_t;
int fp_reader_dist_ranks(fp_reader_t *r, int64_t run, fp_dist_rank_row_t **rows, size_t *n);

/* The runs of a session (session <= 0: all) that trained on ranks, by id: how many ranks (the highest rank
 * recorded + 1) and steps with rows. Runs without dist_steps rows are not listed. */
typedef struct {
    int64_t run;
    int ranks;
    int64_t steps;
} fp_dist_run_row_t;
int fp_reader_dist_runs(fp_reader_t *r, int64_t session, fp_dist_run_row_t **rows, size_t *n);

/* The all-reduce's rounding (allreduce_error) of a run, by step then layer: layer -1 is the whole gradient
 * (with the overflow / underflow counts), layers >= 0 carry rel_l2 only (counts -1). */
typedef struct {
    int64_t step;
    int layer;
    char wire[8];               /* "fp16", "bf16" */
    double rel_l2;              /* NaN: not measured */
    int64_t overflow, underflow;   /* -1: not counted */
} fp_allreduce_error_row_t;
int fp_reader_allreduce_error(fp_reader_t *r, int64_t run, fp_allreduce_error_row_t **rows, size_t *n);

#endif
