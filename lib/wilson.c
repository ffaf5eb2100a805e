/* wilson.c — the 95% Wilson score interval (wilson.h). Promise: bounds within [0, 1], NaN (never 0) when
 * there is nothing to measure. */
#include "wilson.h"
#include <math.h>

void fp_wilson95_interval(double p, int64_t n, double *lo, double *hi)
{
    *lo = *hi = NAN;
    if (n <= 0 || !(p >= 0 && p <= 1))
        return;
    const double z = 1.959963984540054, z2 = z * z, nn = (double)n;
    double den = 1 + z2 / nn, mid = (p + z2 / (2 * nn)) / den;
    double half = z * sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn)) / den;
    *lo = fmax(0, mid - half);
    *hi = fmin(1, mid + half);
}
