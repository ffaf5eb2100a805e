/* gate_stats.c — the gate's statistics (gate.h): the Mann–Whitney U test (average ranks for ties, the
 * tie-corrected normal approximation with continuity correction, the exact null distribution for small
 * samples without ties), the normal tail and its inverse, the one-sided two-proportion z-test, Wilson
 * intervals and the standard error of a mean. Promise: p-values in [0, 1]; identical samples give p = 1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "gate.h"
#include "wilson.h"

typedef struct {
    double v;
    int g;
} obs_t;

static int cmp_obs(const void *a, const void *b)
{
    double x = ((const obs_t *)a)->v, y = ((const obs_t *)b)->v;
    return (x > y) - (x < y);
}

/* P(U <= u) and P(U >= u) under H0 for sample sizes m, n without ties, by the recursion
 * c(m, n, u) = c(m - 1, n, u - n) + c(m, n - 1, u) on counts of arrangements (as doubles). */
static int exact_tails(size_t m, size_t n, double u, double *lower, double *upper)
{
    size_t umax = m * n, w = umax + 1;
    double *prev = calloc((n + 1) * w, sizeof *prev), *cur = calloc((n + 1) * w, sizeof *cur);
    if (!prev || !cur) {
        free(prev);
        free(cur);
        return fp_fail(FP_ENOMEM, "out of memory");
    }
    for (size_t j = 0; j <= n; j++)   /* i = 0: U is always 0 */
        prev[j * w] = 1;
    for (size_t i = 1; i <= m; i++) {
        memset(cur, 0, (n + 1) * w * sizeof *cur);
        cur[0] = 1;   /* j = 0 */
        for (size_t j = 1; j <= n; j++)
            for (size_t k = 0; k <= i * j; k++)
                cur[j * w + k] = (k >= j ? prev[j * w + k - j] : 0) + cur[(j - 1) * w + k];
        double *t = prev;
        prev = cur;
        cur = t;
    }
    double total = 0, lo = 0, hi = 0;
    for (size_t k = 0; k <= umax; k++) {
        double c = prev[n * w + k];
        total += c;
        if ((double)k <= u + 1e-9)
            lo += c;
        if ((double)k >= u - 1e-9)
            hi += c;
    }
    *lower = lo / total;
    *upper = hi / total;
    free(prev);
    free(cur);
    return FP_OK;
}

int fp_mann_whitney(const double *a, size_t na, const double *b, size_t nb, fp_mwu_t *out)
{
    memset(out, 0, sizeof *out);
    if (na == 0 || nb == 0)
        return fp_fail(FP_EINVAL, "Mann-Whitney U: an empty sample");
    size_t N = na + nb;
    obs_t *o = malloc(N * sizeof *o);
    if (!o)
        return fp_fail(FP_ENOMEM, "out of memory");
    for (size_t i = 0; i < N; i++) {
        o[i].v = i < na ? a[i] : b[i - na];
        o[i].g = i >= na;
        if (isnan(o[i].v)) {
            free(o);
            return fp_fail(FP_EINVAL, "Mann-Whitney U: a NaN sample value");
        }
    }
    qsort(o, N, sizeof *o, cmp_obs);
    double r1 = 0, ties = 0;
    for (size_t i = 0; i < N;) {
        size_t j = i + 1;
        while (j < N && o[j].v == o[i].v)
            j++;
        double t = (double)(j - i), rank = ((double)i + 1 + (double)j) / 2;   /* average of ranks i+1..j */
        for (size_t k = i; k < j; k++)
            if (o[k].g == 0)
                r1 += rank;
        ties += t * t * t - t;
        i = j;
    }
    free(o);
    double n1 = (double)na, n2 = (double)nb, n = (double)N;
    out->n1 = na;
    out->n2 = nb;
    out->u1 = r1 - n1 * (n1 + 1) / 2;
    if (ties == 0 && na <= FP_MWU_EXACT_MAX && nb <= FP_MWU_EXACT_MAX) {
        double lo = 1, hi = 1;
        int rc = exact_tails(na, nb, out->u1, &lo, &hi);
        if (rc != FP_OK)
            return rc;
        out->exact = 1;
        out->p = fmin(1.0, 2 * fmin(lo, hi));
        return FP_OK;
    }
    double mean = n1 * n2 / 2;
    double var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)));
    if (!(var > 0)) {
        out->p = 1;
        return FP_OK;
    }
    double d = out->u1 - mean;
    double cc = d > 0 ? 0.5 : d < 0 ? -0.5 : 0;
    out->z = (d - cc) / sqrt(var);
    out->p = fmin(1.0, erfc(fabs(out->z) / sqrt(2.0)));
    return FP_OK;
}

double fp_normal_upper(double z)
{
    return 0.5 * erfc(z / sqrt(2.0));
}

double fp_normal_quantile_upper(double p)
{
    if (!(p > 0 && p < 1))
        return NAN;
    double lo = -40, hi = 40;   /* fp_normal_upper falls from 1 to 0 over [lo, hi] */
    for (int i = 0; i < 200; i++) {
        double mid = (lo + hi) / 2;
        if (fp_normal_upper(mid) > p)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

double fp_two_prop_p(double k1, double n1, double k2, double n2)
{
    if (!(n1 >= 1 && n2 >= 1) || isnan(k1) || isnan(k2))
        return NAN;
    double p1 = k1 / n1, p2 = k2 / n2;
    if (p1 <= p2)
        return 1;
    double pool = (k1 + k2) / (n1 + n2);
    double se = sqrt(pool * (1 - pool) * (1 / n1 + 1 / n2));
    if (!(se > 0))
        return 1;
    return fp_normal_upper((p1 - p2) / se);
}

void fp_wilson(double k, double n, double alpha, double *lo, double *hi)
{
    fp_wilson_z(n >= 1 ? k / n : NAN, n, fp_normal_quantile_upper(alpha / 2), lo, hi);
}

size_t fp_mean_se(const double *x, size_t n, double *mean, double *se)
{
    size_t k = 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]))
            sum += x[i], k++;
    *mean = k ? sum / (double)k : NAN;
    *se = NAN;
    if (k < 2)
        return k;
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]))
            ss += (x[i] - *mean) * (x[i] - *mean);
    *se = sqrt(ss / (double)(k - 1)) / sqrt((double)k);
    return k;
}
