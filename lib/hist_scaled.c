/* hist_scaled.c — fp_hist_add_scaled (hist.h): the histogram of y = fl(x * 2^-k) from one pass over
 * x through fp_hist_add's kernels, the class thresholds mapped back onto x, and the multiply-then-count
 * fallback when a finite nonzero quotient would not be a normal float.
 * Promise: every count, amax, min_nonzero and sum_abs those of fp_hist_add on the multiplied array;
 * log2_div == 0 is fp_hist_add itself. */
#include "hist_internal.h"
#include "error.h"
#include <float.h>
#include <math.h>

/* How it works. |x| -> |y| is monotonic on absolute bit patterns, so each threshold T on a_y
 * becomes the least a_x with g(a_x) >= T (scale_thresholds), and the class counts need no multiply
 * at all (for k > 0 a T at or below FLT_MIN's bits becomes 1, "zeros only", which is what it counts
 * when the fast finish applies; that keeps rounding-made thresholds out of the vector kernels'
 * gate). The rest — binades shifted by -k, zeros, Inf, amax, min, sum |x| scaled by 2^-k — holds
 * when every finite nonzero y is x * 2^-k exactly; scaled_exact checks that after the pass from
 * amax and min nonzero (k < 0: amax * 2^-k <= FLT_MAX; k > 0: also min * 2^-k >= FLT_MIN, so no y
 * is an fp32 subnormal — conservative: an exact subnormal quotient also falls back). When it fails,
 * the call is redone on x * 2^-k computed in chunks of HSCALE_CHUNK floats (the fallback: a second
 * pass, exact by construction). */
#define HSCALE_CHUNK 4096                    /* a multiple of 16: the sum lanes stay aligned */

/* a_y for a_x (both absolute bit patterns; a_x <= INF_BITS) */
static uint32_t scaled_abs_bits(uint32_t a, int k)
{
    return fp_f32_bits(fabsf(scale_down(fp_f32_from_bits(a), k)));
}

static void scale_thresholds(thresholds_t *th, int k)
{
    for (int j = 0; j < NTHR; j++) {
        const uint32_t t = th->t[j];
        if (k > 0 && t <= fp_f32_bits(FLT_MIN)) {
            th->t[j] = 1;          /* the fast finish needs every nonzero |y| >= FLT_MIN: only zeros below */
            continue;
        }
        /* the exact case first: T's value times 2^k, checked; otherwise a binary search */
        int64_t c = (int64_t)t + (int64_t)k * ((int64_t)1 << 23);
        if (c >= 1 && c <= INF_BITS && scaled_abs_bits((uint32_t)c, k) >= t &&
            scaled_abs_bits((uint32_t)c - 1, k) < t) {
            th->t[j] = (uint32_t)c;
            continue;
        }
        uint32_t lo = 0, hi = INF_BITS;                /* g(INF_BITS) = INF_BITS >= every T */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (scaled_abs_bits(mid, k) >= t)
                hi = mid;
            else
                lo = mid + 1;
        }
        th->t[j] = lo;
    }
    fp_hist_set_gate(th);
}

static int scaled_exact(const raw_t *r, int k)
{
    if (r->c.amax_bits && ldexp((double)fp_f32_from_bits(r->c.amax_bits), -k) > (double)FLT_MAX)
        return 0;
    if (k > 0 && r->c.min_m1 < FIN_NZ_M1 && ldexp((double)fp_f32_from_bits(r->c.min_m1 + 1), -k) < (double)FLT_MIN)
        return 0;
    return 1;
}

static int hist_add_scaled(fp_hist_t *h, const float *x, size_t n, int k, kernel_fn vec)
{
    if (k == 0)
        return fp_hist_add_with(h, x, n, vec);
    thresholds_t th;
    raw_t r;
    fp_hist_make_thresholds(&th);
    scale_thresholds(&th, k);
    fp_hist_raw_init(&r);
    fp_hist_run_kernels(&r, &th, x, n, vec);
    if (scaled_exact(&r, k)) {
        fp_hist_finish(h, &r, n, k);
        return FP_OK;
    }
    fp_hist_make_thresholds(&th);                              /* fallback: multiply, then as fp_hist_add */
    fp_hist_raw_init(&r);
    float buf[HSCALE_CHUNK];
    for (size_t done = 0; done < n;) {
        size_t len = n - done < HSCALE_CHUNK ? n - done : HSCALE_CHUNK;
        if (k >= -127 && k <= 126) {
            const float m = fp_f32_from_bits((uint32_t)(127 - k) << 23);    /* 2^-k, as in scale_down */
            for (size_t i = 0; i < len; i++)
                buf[i] = x[done + i] * m;
        } else {
            for (size_t i = 0; i < len; i++)
                buf[i] = scale_down(x[done + i], k);
        }
        fp_hist_run_kernels(&r, &th, buf, len, vec);
        done += len;
    }
    fp_hist_finish(h, &r, n, 0);
    return FP_OK;
}

static int scaled_args(const fp_hist_t *h, const float *x, size_t n, int log2_div)
{
    if (!h || (!x && n > 0))
        return fp_fail(FP_EINVAL, "fp_hist_add_scaled: %s is NULL", h ? "array" : "histogram");
    if (log2_div < -FP_HIST_LOG2_DIV_MAX || log2_div > FP_HIST_LOG2_DIV_MAX)
        return fp_fail(FP_EINVAL, "fp_hist_add_scaled: log2_div %d outside [-%d, %d]", log2_div,
                       FP_HIST_LOG2_DIV_MAX, FP_HIST_LOG2_DIV_MAX);
    return FP_OK;
}

int fp_hist_add_scaled(fp_hist_t *h, const float *x, size_t n, int log2_div)
{
    int rc = scaled_args(h, x, n, log2_div);
    if (rc != FP_OK || n == 0)
        return rc;
    return hist_add_scaled(h, x, n, log2_div,
                           n < VEC_MIN_N ? fp_hist_kernel_scalar : fp_hist_kernel_get(KERNEL_BEST));
}

int fp_hist_add_scaled_kernel(fp_hist_t *h, const float *x, size_t n, int log2_div, int kernel)
{
    int rc = scaled_args(h, x, n, log2_div);
    if (rc != FP_OK)
        return rc;
    kernel_fn kf = fp_hist_kernel_get(kernel);
    if (!kf)
        return fp_fail(FP_EUNAVAIL, "fp_hist_add_scaled: kernel %d is not available on this CPU", kernel);
    if (n == 0)
        return FP_OK;
    return hist_add_scaled(h, x, n, log2_div, kf);
}
