/* hist_ref.c — hist_ref.h: the double-comparison reference histogram the histogram tests trust. */
#include "hist_ref.h"
#include <math.h>

int tu_ref_class(double ax, const fp_format_info_t *fi)
{
    if (ax <= (double)fi->min_subnormal / 2.0)
        return FP_CLASS_UNDERFLOW;
    if (ax < (double)fi->min_normal)
        return FP_CLASS_SUBNORMAL;
    if (ax <= (double)fi->max_finite)
        return FP_CLASS_NORMAL;
    if (ax < (double)fi->overflow_at)
        return FP_CLASS_ROUND_TO_MAX;
    return FP_CLASS_OVERFLOW;
}

void tu_ref_hist(fp_hist_t *h, const float *x, size_t n)
{
    fp_hist_init(h);
    long double sum = 0.0L;
    for (size_t i = 0; i < n; i++) {
        double v = (double)x[i];
        h->count++;
        if (isnan(v)) {
            h->nan++;
        } else if (isinf(v)) {
            if (v > 0)
                h->pos_inf++;
            else
                h->neg_inf++;
        } else if (v == 0.0) {
            h->zero++;
        } else {
            double ax = fabs(v);
            int e;
            (void)frexp(ax, &e);                           /* ax = m * 2^e, 0.5 <= m < 1 */
            h->binade[e - 1 - FP_HIST_EXP_MIN]++;
            for (int f = 0; f < FP_FMT_COUNT; f++)
                h->cls[f][tu_ref_class(ax, fp_format_info((fp_format)f))]++;
            if (ax > (double)h->amax)
                h->amax = (float)ax;
            if (h->min_nonzero == 0.0f || ax < (double)h->min_nonzero)
                h->min_nonzero = (float)ax;
            sum += ax;
        }
    }
    h->sum_abs = (double)sum;
}
