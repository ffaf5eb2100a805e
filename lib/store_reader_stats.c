/* store_reader_stats.c — per-group statistics of (group, value) pairs (store_reader_internal.h), what the
 * layer and kernel summaries report. Promise: exact integer sums, min and max; the median of an even count is
 * the mean of the middle two; the standard deviation is the sample one (0 for a single value). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "store_reader_internal.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int fp_group_stats(const fp_gv_t *v, size_t n, size_t ngroups, fp_group_stats_t **stats)
{
    *stats = NULL;
    size_t *off = calloc(ngroups + 1, sizeof *off), *fill = malloc((ngroups ? ngroups : 1) * sizeof *fill);
    int64_t *sorted = malloc((n ? n : 1) * sizeof *sorted);
    fp_group_stats_t *out = malloc((ngroups ? ngroups : 1) * sizeof *out);
    if (!off || !fill || !sorted || !out) {
        free(off);
        free(fill);
        free(sorted);
        free(out);
        return fp_fail(FP_ENOMEM, "reader: out of memory");
    }
    for (size_t i = 0; i < n; i++)
        off[v[i].group + 1]++;
    for (size_t g = 0; g < ngroups; g++)
        off[g + 1] += off[g];
    memcpy(fill, off, ngroups * sizeof *fill);
    for (size_t i = 0; i < n; i++)
        sorted[fill[v[i].group]++] = v[i].value;
    for (size_t g = 0; g < ngroups; g++) {
        int64_t *x = sorted + off[g];
        size_t m = off[g + 1] - off[g];
        fp_group_stats_t *s = &out[g];
        memset(s, 0, sizeof *s);
        s->count = (int64_t)m;
        if (m == 0)
            continue;
        qsort(x, m, sizeof *x, cmp_i64);
        double sum = 0;
        for (size_t i = 0; i < m; i++)
            sum += (double)x[i];
        s->sum = 0;
        for (size_t i = 0; i < m; i++)
            s->sum += x[i];
        s->mean = sum / (double)m;
        double ss = 0;
        for (size_t i = 0; i < m; i++)
            ss += ((double)x[i] - s->mean) * ((double)x[i] - s->mean);
        s->stddev = m > 1 ? sqrt(ss / (double)(m - 1)) : 0.0;
        s->min = x[0];
        s->max = x[m - 1];
        s->median = m % 2 ? (double)x[m / 2] : ((double)x[m / 2 - 1] + (double)x[m / 2]) / 2.0;
    }
    free(fill);
    free(off);
    free(sorted);
    *stats = out;
    return FP_OK;
}
