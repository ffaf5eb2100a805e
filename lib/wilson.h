/* wilson.h — the 95% Wilson score interval of a proportion, for readers that may not include reports/
 * (the dashboard). Same formula as reports/summary.c's fp_wilson95, so the dashboard's interval is the
 * summary's: p measured on n trials; NaN, NaN when n <= 0 or p is not in [0, 1]. */
#ifndef FP_WILSON_H
#define FP_WILSON_H

#include <stdint.h>

void fp_wilson95_interval(double p, int64_t n, double *lo, double *hi);

#endif
