/* layer_error.c — analysis.h fp_layer_error and the accumulation behind it (precision_internal.h):
 * relative L2 error, max abs error and cosine of x against a reference. Promises: sums in double, in a
 * fixed order for a given n (vectorised lanes, then a fixed tree); a non-finite x shows as Inf / NaN. */
#include <math.h>
#include "probe/analysis.h"
#include "probe/precision_internal.h"

/* SUM_LANES independent partial sums (lane = index mod SUM_LANES, then a fixed tree), so the loop
 * vectorises; a non-finite input shows as a non-finite sum of squares (finite squares of floats
 * cannot overflow a double sum). */
#define SUM_LANES 8
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
__attribute__((target_clones("arch=x86-64-v3", "default")))   /* AVX2 + FMA where the CPU has them */
#endif
void fp_err_acc_add(fp_err_acc *a, const float *ref, const float *x, size_t n)
{
    double dd[SUM_LANES] = {0}, rr[SUM_LANES] = {0}, xx[SUM_LANES] = {0}, xr[SUM_LANES] = {0}, mx[SUM_LANES] = {0};
    size_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (int j = 0; j < SUM_LANES; j++) {
            double r = ref[i + j], v = x[i + j], d = v - r, ad = fabs(d);
            dd[j] += d * d;
            rr[j] += r * r;
            xx[j] += v * v;
            xr[j] += v * r;
            mx[j] = ad > mx[j] ? ad : mx[j];
        }
    for (int j = 0; i < n; i++, j++) {
        double r = ref[i], v = x[i], d = v - r, ad = fabs(d);
        dd[j] += d * d;
        rr[j] += r * r;
        xx[j] += v * v;
        xr[j] += v * r;
        mx[j] = ad > mx[j] ? ad : mx[j];
    }
    for (int w = SUM_LANES / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) {
            dd[j] += dd[j + w];
            rr[j] += rr[j + w];
            xx[j] += xx[j + w];
            xr[j] += xr[j + w];
            mx[j] = mx[j + w] > mx[j] ? mx[j + w] : mx[j];
        }
    if (!isfinite(rr[0]) || !isfinite(xx[0]))
        a->nonfinite = 1;
    a->dd += dd[0];
    a->rr += rr[0];
    a->xx += xx[0];
    a->xr += xr[0];
    if (mx[0] > a->maxabs)
        a->maxabs = mx[0];
}

void fp_err_acc_finish(const fp_err_acc *a, double *rel_l2, double *max_abs, double *cosine)
{
    double rel, cs;
    if (a->nonfinite) {
        rel = INFINITY;
        cs = NAN;
    } else {
        rel = a->rr > 0 ? sqrt(a->dd / a->rr) : sqrt(a->dd);
        if (a->rr == 0 && a->xx == 0)
            cs = 1.0;
        else if (a->rr == 0 || a->xx == 0)
            cs = 0.0;
        else
            cs = a->xr / (sqrt(a->xx) * sqrt(a->rr));
    }
    if (rel_l2)
        *rel_l2 = rel;
    if (max_abs)
        *max_abs = a->nonfinite ? INFINITY : a->maxabs;
    if (cosine)
        *cosine = cs;
}

void fp_layer_error(const float *ref, const float *x, size_t n, double *rel_l2, double *max_abs, double *cosine)
{
    fp_err_acc a = {0};
    fp_err_acc_add(&a, ref, x, n);
    fp_err_acc_finish(&a, rel_l2, max_abs, cosine);
}
