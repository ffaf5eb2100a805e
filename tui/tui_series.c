/* tui_series.c — the dashboard's downsampled series (tui_internal.h fp_ds_t): a value pushed per step kept in a
 * bounded number of buckets (sum, count, min, max, last), halved in place when full, so a series of any length
 * is O(buckets) to draw; the ratio of two series bucket by bucket. Promise: the buckets of a series pushed
 * in one go equal those of the same values pushed over several updates. */
#include <math.h>
#include <string.h>
#include "tui_internal.h"

void fp_ds_init(fp_ds_t *d)
{
    memset(d, 0, sizeof *d);
    d->per = 1;
}

void fp_ds_push(fp_ds_t *d, double v)
{
    if (d->nb == 0 || d->cnt == d->per) {
        if (d->nb == FP_DS_BUCKETS) {   /* merge pairs: half the buckets, twice as wide */
            for (int i = 0; i < FP_DS_BUCKETS / 2; i++) {
                int a = 2 * i, b = 2 * i + 1;
                d->mn[i] = fmin(d->mn[a], d->mn[b]);
                d->mx[i] = fmax(d->mx[a], d->mx[b]);
                d->last[i] = isnan(d->last[b]) ? d->last[a] : d->last[b];
                d->sum[i] = d->sum[a] + d->sum[b];
                d->nvalid[i] = d->nvalid[a] + d->nvalid[b];
            }
            d->nb = FP_DS_BUCKETS / 2;
            d->per *= 2;
        }
        int i = d->nb++;
        d->mn[i] = d->mx[i] = d->last[i] = NAN;
        d->sum[i] = 0;
        d->nvalid[i] = 0;
        d->cnt = 0;
    }
    int i = d->nb - 1;
    d->cnt++;
    d->total++;
    if (isnan(v))
        return;
    d->mn[i] = fmin(d->mn[i], v);
    d->mx[i] = fmax(d->mx[i], v);
    d->last[i] = v;
    d->sum[i] += v;
    d->nvalid[i]++;
}

/* Mean of the samples of a's buckets that cover [k*per, (k+1)*per) (per >= a->per, a power of 2 times). */
static double mean_over(const fp_ds_t *a, int64_t per, int k)
{
    int64_t f = per / a->per;
    double s = 0;
    int64_t n = 0;
    for (int64_t i = (int64_t)k * f; i < (int64_t)(k + 1) * f && i < a->nb; i++) {
        s += a->sum[i];
        n += a->nvalid[i];
    }
    return n ? s / (double)n : NAN;
}

void fp_ds_ratio(fp_ds_t *dst, const fp_ds_t *a, const fp_ds_t *b)
{
    fp_ds_init(dst);
    int64_t per = a->per > b->per ? a->per : b->per;
    int64_t na = (a->total + per - 1) / per, nbk = (b->total + per - 1) / per;
    int64_t n = na < nbk ? na : nbk;
    if (n > FP_DS_BUCKETS)
        n = FP_DS_BUCKETS;
    dst->per = per;
    for (int k = 0; k < n; k++) {
        double x = mean_over(a, per, k), y = mean_over(b, per, k);
        double v = (isnan(x) || isnan(y) || y == 0) ? NAN : x / y;
        dst->mn[k] = dst->mx[k] = dst->last[k] = v;
        dst->sum[k] = isnan(v) ? 0 : v;
        dst->nvalid[k] = !isnan(v);
    }
    dst->nb = (int)n;
    dst->cnt = per;
    dst->total = n * per;
}
