/* elementwise.c — relu, residual add and gradient accumulation on flat fp32 arrays (CPU backend).
 * Promises: relu propagates NaN and may run in place; add may write over an input; n == 0 is a
 * no-op; backward and accumulate add (+=) into their destination. */
/* GCC 12 at -O2 vectorises only loops with known trip counts: turn on the usual loop vectoriser. */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#include "error.h"
#include "trainer/layers.h"

int fp_relu_forward(float *y, const float *x, size_t n)
{
    if (n && (!y || !x))
        return fp_fail(FP_EINVAL, "fp_relu_forward: NULL tensor with %zu elements", n);
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = v < 0.0f ? 0.0f : v;
    }
    return FP_OK;
}

int fp_relu_backward(float *dx, const float *dy, const float *y, size_t n)
{
    if (n && (!dx || !dy || !y))
        return fp_fail(FP_EINVAL, "fp_relu_backward: NULL tensor with %zu elements", n);
    for (size_t i = 0; i < n; i++) {
        float g = dy[i]; /* loaded unconditionally so the loop vectorises */
        dx[i] += y[i] > 0.0f ? g : 0.0f;
    }
    return FP_OK;
}

int fp_add_forward(float *y, const float *a, const float *b, size_t n)
{
    if (n && (!y || !a || !b))
        return fp_fail(FP_EINVAL, "fp_add_forward: NULL tensor with %zu elements", n);
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
    return FP_OK;
}

int fp_accumulate(float *dst, const float *src, size_t n)
{
    if (n && (!dst || !src))
        return fp_fail(FP_EINVAL, "fp_accumulate: NULL tensor with %zu elements", n);
    for (size_t i = 0; i < n; i++)
        dst[i] += src[i];
    return FP_OK;
}
