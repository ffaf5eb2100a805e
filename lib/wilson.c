/* wilson.c — the Wilson score interval (wilson.h). Promise: bounds within [0, 1], NaN (never 0) when
 * there is nothing to measure. */
#include "wilson.h"
#include <math.h>

void fp_wilson_z(double p, double n, double z, double *lo, double *hi)
{
    *lo = *hi = NAN;
    if (!(n >= 1) || !(p >= 0 && p <= 1))
        return;
    const double z2 = z * z;
    double den = 1 + z2 / n, mid = (p + z2 / (2 * n)) / den;
    double half = z * sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / den;
    *lo = fmax(0, mid - half);
    *hi = fmin(1, mid + half);
}

void fp_wilson95(double p, int64_t n, double *lo, double *hi)
{
    fp_wilson_z(p, (double)n, 1.959963984540054, lo, hi);
}
