/* step_time.h — the one definition of an arm's step time and speedup. The end-of-run summary
 * (reports/summary_arm.c: compare's summary, the HTML / CSV reports, the gate) and the live dashboard (tui/)
 * both compute them here, so they never disagree (README's `## CI gate`, reports/summary.h):
 *  - warm-up: the first W step rows of an arm are left out of every timing figure; by default W = 10% of
 *    the arm's step rows, at least 5 and at most 100 (a requested W overrides), never more than it has;
 *  - step times: wall_ns of the step rows after the warm-up that were not skipped and have a time (> 0);
 *  - an arm's step time is the median of its step times; its speedup is the reference arm's step time
 *    divided by its own (NaN when either has none). */
#ifndef FP_STEP_TIME_H
#define FP_STEP_TIME_H

#include <stddef.h>
#include <stdint.h>

/* The warm-up of an arm of nrows step rows (requested < 0: the default rule). */
size_t fp_step_warmup(size_t nrows, int64_t requested);
/* 1 when step row `row` (0-based, in step order) is one of the arm's step times. */
int fp_step_timed(size_t row, size_t warmup, int skipped, int64_t wall_ns);
/* Median of n values (copied and sorted; NaN when n == 0 or out of memory). */
double fp_step_median(const double *x, size_t n);
/* An arm's step time from its rows as arrays (wall_ns[i], skipped[i] of row i, in step order; skipped may
 * be NULL: none skipped), with the warm-up as fp_step_warmup(nrows, warmup_req); NaN when none counts. */
double fp_step_median_ns(const int64_t *wall_ns, const uint8_t *skipped, size_t nrows, int64_t warmup_req);
/* ref_median_ns / median_ns; NaN when either is not a positive time. */
double fp_step_speedup(double ref_median_ns, double median_ns);

#endif
