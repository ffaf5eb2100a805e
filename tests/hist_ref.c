/* hist_ref.c — hist_ref.h: the double-comparison reference histogram the histogram tests trust. */
#include "hist_ref.h"
#include <math.h>
#include <string.h>
#include "tap.h"

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

int tu_hist_same(const fp_hist_t *got, const fp_hist_t *want, double rel_tol)
{
    return got->count == want->count && got->zero == want->zero && got->nan == want->nan &&
           got->pos_inf == want->pos_inf && got->neg_inf == want->neg_inf &&
           memcmp(got->binade, want->binade, sizeof got->binade) == 0 &&
           memcmp(got->cls, want->cls, sizeof got->cls) == 0 && got->amax == want->amax &&
           got->min_nonzero == want->min_nonzero &&
           (got->sum_abs == want->sum_abs || fabs(got->sum_abs - want->sum_abs) <= rel_tol * fabs(want->sum_abs));
}

void tu_hist_diag(const fp_hist_t *got, const fp_hist_t *want)
{
    tap_diag("  count %llu/%llu zero %llu/%llu nan %llu/%llu +inf %llu/%llu -inf %llu/%llu",
             (unsigned long long)got->count, (unsigned long long)want->count,
             (unsigned long long)got->zero, (unsigned long long)want->zero, (unsigned long long)got->nan,
             (unsigned long long)want->nan, (unsigned long long)got->pos_inf,
             (unsigned long long)want->pos_inf, (unsigned long long)got->neg_inf,
             (unsigned long long)want->neg_inf);
    tap_diag("  amax %a/%a min %a/%a sum %.17g/%.17g", got->amax, want->amax, got->min_nonzero,
             want->min_nonzero, got->sum_abs, want->sum_abs);
    for (int i = 0; i < FP_HIST_BINADES; i++)
        if (got->binade[i] != want->binade[i])
            tap_diag("  binade %d: %llu, expected %llu", i + FP_HIST_EXP_MIN,
                     (unsigned long long)got->binade[i], (unsigned long long)want->binade[i]);
    for (int f = 0; f < FP_FMT_COUNT; f++)
        for (int c = 0; c < FP_CLASS_COUNT; c++)
            if (got->cls[f][c] != want->cls[f][c])
                tap_diag("  %s %s: %llu, expected %llu", fp_format_info((fp_format)f)->name,
                         fp_value_class_name((fp_value_class)c), (unsigned long long)got->cls[f][c],
                         (unsigned long long)want->cls[f][c]);
}
