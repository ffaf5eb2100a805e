/* hist_counts.h — what every exponent-histogram kernel counts (lib/hist.c's CPU kernels, the CUDA kernel
 * of trainer/cuda/hist.cu) and the one fold of those counts into an fp_hist_t, so that every kernel
 * classes values by the same thresholds and turns counts into histograms the same way. */
#ifndef FP_HIST_COUNTS_H
#define FP_HIST_COUNTS_H

#include <stdint.h>
#include "hist.h"

#ifdef __cplusplus
extern "C" {   /* hist.cu */
#endif

#define FP_HIST_NTHR (4 * FP_FMT_COUNT)

/* The class thresholds on a = |x|'s fp32 bits (a < T; zeros below all, Inf and NaN below none):
 * t[4f + 0]: |x| <= min_subnormal / 2, t[4f + 1]: |x| < min_normal, t[4f + 2]: |x| <= max_finite,
 * t[4f + 3]: |x| < overflow_at, for each format f of formats.h (fp_format_info). */
void fp_hist_thresholds(uint32_t t[FP_HIST_NTHR]);

/* The raw counts of n values. */
typedef struct {
    uint64_t lt[FP_HIST_NTHR];               /* #{a < t[k]} */
    uint64_t ehist[256];                     /* by exponent field (field 0: zeros and fp32 subnormals) */
    uint64_t sub_binade[23];                 /* fp32 subnormals by leading mantissa bit */
    uint64_t nan, pos_inf, neg_inf;
    uint32_t amax_bits;                      /* max a over finite values (0 when none) */
    uint32_t min_m1;                         /* min (a - 1) over all values, wrapping: zero -> max */
} fp_hist_counts_t;

/* Adds the counts of n values of x * 2^-k (counted on x; k = 0: x itself) and their sum |x * 2^-k| to h. */
void fp_hist_fold(fp_hist_t *h, const fp_hist_counts_t *c, uint64_t n, int k, double sum_abs);

#ifdef __cplusplus
}
#endif

#endif
