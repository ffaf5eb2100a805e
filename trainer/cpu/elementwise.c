/* elementwise.c — relu, residual add and gradient accumulation on flat fp32 arrays (CPU backend).
 * Promises: relu propagates NaN and may run in place; add may write over an input; n == 0 is a
 * no-op; backward and accumulate add (+=) into their destination; large arrays are split across
 * the thread pool in 64-byte aligned parts (per-element results do not depend on the split). */
/* GCC 12 at -O2 vectorises only loops with known trip counts: turn on the usual loop vectoriser. */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#include "error.h"
#include "thread_pool.h"
#include "trainer/layers.h"

#define EW_ALIGN 16                     /* floats: one cache line */
#define EW_PAR_MIN ((size_t)1 << 15)    /* elements per thread below which a pass stays serial */

typedef struct {
    float *y;
    const float *a, *b;
} ew_task;

static void relu_fwd(void *ctx, size_t b, size_t e)
{
    const ew_task *t = ctx;
    float *y = t->y;
    const float *x = t->a;
    for (size_t i = b; i < e; i++) {
        float v = x[i];
        y[i] = v < 0.0f ? 0.0f : v;
    }
}

static void relu_bwd(void *ctx, size_t b, size_t e)
{
    const ew_task *t = ctx;
    float *dx = t->y;
    const float *dy = t->a, *y = t->b;
    for (size_t i = b; i < e; i++) {
        float g = dy[i]; /* loaded unconditionally so the loop vectorises */
        dx[i] += y[i] > 0.0f ? g : 0.0f;
    }
}

static void add_fwd(void *ctx, size_t b, size_t e)
{
    const ew_task *t = ctx;
    float *y = t->y;
    const float *pa = t->a, *pb = t->b;
    for (size_t i = b; i < e; i++)
        y[i] = pa[i] + pb[i];
}

static void accumulate(void *ctx, size_t b, size_t e)
{
    const ew_task *t = ctx;
    float *dst = t->y;
    const float *src = t->a;
    for (size_t i = b; i < e; i++)
        dst[i] += src[i];
}

int fp_relu_forward(float *y, const float *x, size_t n)
{
    if (n && (!y || !x))
        return fp_fail(FP_EINVAL, "fp_relu_forward: NULL tensor with %zu elements", n);
    ew_task t = {y, x, NULL};
    fp_parallel_for(n, EW_ALIGN, EW_PAR_MIN, relu_fwd, &t);
    return FP_OK;
}

int fp_relu_backward(float *dx, const float *dy, const float *y, size_t n)
{
    if (n && (!dx || !dy || !y))
        return fp_fail(FP_EINVAL, "fp_relu_backward: NULL tensor with %zu elements", n);
    ew_task t = {dx, dy, y};
    fp_parallel_for(n, EW_ALIGN, EW_PAR_MIN, relu_bwd, &t);
    return FP_OK;
}

int fp_add_forward(float *y, const float *a, const float *b, size_t n)
{
    if (n && (!y || !a || !b))
        return fp_fail(FP_EINVAL, "fp_add_forward: NULL tensor with %zu elements", n);
    ew_task t = {y, a, b};
    fp_parallel_for(n, EW_ALIGN, EW_PAR_MIN, add_fwd, &t);
    return FP_OK;
}

int fp_accumulate(float *dst, const float *src, size_t n)
{
    if (n && (!dst || !src))
        return fp_fail(FP_EINVAL, "fp_accumulate: NULL tensor with %zu elements", n);
    ew_task t = {dst, src, NULL};
    fp_parallel_for(n, EW_ALIGN, EW_PAR_MIN, accumulate, &t);
    return FP_OK;
}
