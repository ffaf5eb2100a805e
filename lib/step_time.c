/* step_time.c — an arm's step time and speedup, defined once (step_time.h) for the summary, the reports,
 * the gate and the dashboard. Promise: NaN, never 0, when there is nothing to measure. */
#include "step_time.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t fp_step_warmup(size_t nrows, int64_t requested)
{
    if (requested >= 0)
        return (size_t)requested < nrows ? (size_t)requested : nrows;
    size_t w = nrows / 10;
    if (w < 5)
        w = 5;
    if (w > 100)
        w = 100;
    return w < nrows ? w : nrows;
}

int fp_step_timed(size_t row, size_t warmup, int skipped, int64_t wall_ns)
{
    return row >= warmup && !skipped && wall_ns > 0;
}

/* The k-th smallest of c[0..n) (c reordered; Hoare's selection, expected O(n): a live dashboard takes the
 * median of a long run's steps each frame). NaN-free input. */
static double select_kth(double *c, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = c[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (c[i] < pivot)
                i++;
            while (c[j] > pivot)
                j--;
            if (i <= j) {
                double t = c[i];
                c[i] = c[j];
                c[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return c[k];
    }
    return c[k];
}

double fp_step_median(const double *x, size_t n)
{
    if (n == 0)
        return NAN;
    double *c = malloc(n * sizeof *c);
    if (!c)
        return NAN;
    memcpy(c, x, n * sizeof *c);
    double hi = select_kth(c, n, n / 2), m = hi;
    if (n % 2 == 0) {   /* the largest of the lower half: select_kth left it below n / 2 */
        double lo = c[0];
        for (size_t i = 1; i < n / 2; i++)
            lo = c[i] > lo ? c[i] : lo;
        m = (lo + hi) / 2;
    }
    free(c);
    return m;
}

double fp_step_median_ns(const int64_t *wall_ns, const uint8_t *skipped, size_t nrows, int64_t warmup_req)
{
    size_t warmup = fp_step_warmup(nrows, warmup_req), n = 0;
    if (nrows <= warmup)
        return NAN;
    double *t = malloc((nrows - warmup) * sizeof *t);
    if (!t)
        return NAN;
    for (size_t i = warmup; i < nrows; i++)
        if (fp_step_timed(i, warmup, skipped ? skipped[i] : 0, wall_ns[i]))
            t[n++] = (double)wall_ns[i];
    double m = fp_step_median(t, n);
    free(t);
    return m;
}

double fp_step_speedup(double ref_median_ns, double median_ns)
{
    if (!(ref_median_ns > 0) || !(median_ns > 0))
        return NAN;
    return ref_median_ns / median_ns;
}
