/* wilson.h — the Wilson score interval of a proportion, the one formula the summary, the gate and the
 * dashboard share (so their accuracy intervals agree): bounds within [0, 1], NaN (never 0) when there
 * is nothing to measure. */
#ifndef FP_WILSON_H
#define FP_WILSON_H

#include <stdint.h>

/* The interval of a proportion p measured on n trials at normal quantile z (1.96 for 95%, two-sided);
 * NaN, NaN when n < 1 or p is not in [0, 1]. */
void fp_wilson_z(double p, double n, double z, double *lo, double *hi);
/* The 95% interval (z = 1.959964): p measured on n trials. */
void fp_wilson95(double p, int64_t n, double *lo, double *hi);

#endif
