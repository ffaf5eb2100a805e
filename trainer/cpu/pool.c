/* pool.c — max pooling (k x k, stride, padding) and global average pooling, NHWC, on the CPU.
 * Promises: PyTorch's results; max-pool ties go to the first maximum in window scan order (ky, then
 * kx), a NaN wins; argmax indexes x; backwards accumulate (+=). */
/* GCC 12 at -O2 vectorises only loops with known trip counts: turn on the usual loop vectoriser. No FMA
 * contraction (where the target has FMA, e.g. aarch64 or -march=native): avgpool backward's dx += dy * inv
 * rounds the product, then the sum, on every target, as the CUDA backend's kernel does (bit for bit). */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic", "fp-contract=off")
#include <limits.h>
#include "error.h"
#include "thread_pool.h"
#include "trainer/layers.h"

#define POOL_PAR_MIN ((size_t)1 << 15)   /* output elements per thread below which a pass stays serial */

typedef struct {
    float *y;
    int *argmax;
    const float *x;
    const int *am;
    fp_dims xd, yd;
    const fp_pool_params *p;
} pool_task;

static int pool_geometry(const char *fn, fp_dims xd, const fp_pool_params *p, fp_dims *yd)
{
    if (!p)
        return fp_fail(FP_EINVAL, "%s: NULL pool params", fn);
    if (xd.n <= 0 || xd.h <= 0 || xd.w <= 0 || xd.c <= 0)
        return fp_fail(FP_EINVAL, "%s: bad input dims n=%d h=%d w=%d c=%d", fn, xd.n, xd.h, xd.w, xd.c);
    if (p->k <= 0 || p->stride <= 0 || p->pad < 0 || p->pad > p->k / 2)
        return fp_fail(FP_EINVAL, "%s: bad pool params k=%d stride=%d pad=%d (need pad <= k/2)", fn, p->k,
                       p->stride, p->pad);
    long long hp = (long long)xd.h + 2LL * p->pad, wp = (long long)xd.w + 2LL * p->pad;
    if (p->k > hp || p->k > wp)
        return fp_fail(FP_EINVAL, "%s: window %d larger than padded input %lldx%lld", fn, p->k, hp, wp);
    if ((long long)xd.n * xd.h * xd.w * xd.c > INT_MAX)
        return fp_fail(FP_EINVAL, "%s: input of more than INT_MAX elements", fn);
    yd->n = xd.n;
    yd->h = (int)((hp - p->k) / p->stride + 1);
    yd->w = (int)((wp - p->k) / p->stride + 1);
    yd->c = xd.c;
    return FP_OK;
}

fp_dims fp_pool_out_dims(fp_dims in, const fp_pool_params *p)
{
    fp_dims d = {0, 0, 0, 0};
    if (pool_geometry("fp_pool_out_dims", in, p, &d) != FP_OK) {
        fp_dims z = {0, 0, 0, 0};
        return z;
    }
    return d;
}

/* Output rows [r0, r1) of all images (row = n*oh + oy): every output cell is computed alone. */
static void maxpool_rows(void *ctx, size_t r0, size_t r1)
{
    const pool_task *t = ctx;
    float *y = t->y;
    int *argmax = t->argmax;
    const float *x = t->x;
    const fp_dims xd = t->xd, yd = t->yd;
    const fp_pool_params *p = t->p;
    const int C = xd.c;
    for (size_t row = r0; row < r1; row++) {
        int n = (int)(row / (size_t)yd.h), oy = (int)(row % (size_t)yd.h);
        for (int ox = 0; ox < yd.w; ox++) {
            size_t o = (((size_t)n * yd.h + oy) * yd.w + ox) * C;
            float *restrict yo = y + o;
            int *restrict ao = argmax ? argmax + o : NULL;
            int first = 1;
            for (int ky = 0; ky < p->k; ky++) {
                int iy = oy * p->stride - p->pad + ky;
                if (iy < 0 || iy >= xd.h)
                    continue;
                for (int kx = 0; kx < p->k; kx++) {
                    int ix = ox * p->stride - p->pad + kx;
                    if (ix < 0 || ix >= xd.w)
                        continue;
                    int base = (int)((((size_t)n * xd.h + iy) * xd.w + ix) * C);
                    const float *restrict xi = x + base;
                    if (first) {
                        for (int c = 0; c < C; c++)
                            yo[c] = xi[c];
                        if (ao)
                            for (int c = 0; c < C; c++)
                                ao[c] = base + c;
                        first = 0;
                    } else if (ao) {
                        for (int c = 0; c < C; c++) {
                            float v = xi[c];
                            int take = v > yo[c] || v != v;
                            yo[c] = take ? v : yo[c];
                            ao[c] = take ? base + c : ao[c];
                        }
                    } else {
                        for (int c = 0; c < C; c++) {
                            float v = xi[c];
                            yo[c] = (v > yo[c] || v != v) ? v : yo[c];
                        }
                    }
                }
            }
        }
    }
}

/* Images [n0, n1): an image's outputs route only into that image's dx, in the serial order. */
static void maxpool_bwd_images(void *ctx, size_t n0, size_t n1)
{
    const pool_task *t = ctx;
    size_t per = (size_t)t->yd.h * t->yd.w * t->yd.c;
    float *dx = t->y;
    const float *dy = t->x;
    const int *argmax = t->am;
    for (size_t i = n0 * per; i < n1 * per; i++)
        dx[argmax[i]] += dy[i];
}

int fp_maxpool_forward(float *y, int *argmax, const float *x, fp_dims xd, const fp_pool_params *p)
{
    fp_dims yd = {0, 0, 0, 0};
    int rc = pool_geometry("fp_maxpool_forward", xd, p, &yd);
    if (rc)
        return rc;
    if (!y || !x)
        return fp_fail(FP_EINVAL, "fp_maxpool_forward: NULL tensor");
    pool_task t = {y, argmax, x, NULL, xd, yd, p};
    size_t nrows = (size_t)yd.n * yd.h;
    fp_parallel_for(nrows, 1, POOL_PAR_MIN / ((size_t)yd.w * yd.c) + 1, maxpool_rows, &t);
    return FP_OK;
}

int fp_maxpool_backward(float *dx, const float *dy, const int *argmax, fp_dims xd, const fp_pool_params *p)
{
    fp_dims yd = {0, 0, 0, 0};
    int rc = pool_geometry("fp_maxpool_backward", xd, p, &yd);
    if (rc)
        return rc;
    if (!dx || !dy || !argmax)
        return fp_fail(FP_EINVAL, "fp_maxpool_backward: NULL tensor");
    size_t ny = (size_t)yd.n * yd.h * yd.w * yd.c;
    size_t nx = (size_t)xd.n * xd.h * xd.w * xd.c;
    for (size_t i = 0; i < ny; i++)
        if (argmax[i] < 0 || (size_t)argmax[i] >= nx)
            return fp_fail(FP_EINVAL, "fp_maxpool_backward: argmax[%zu] = %d outside the input", i, argmax[i]);
    /* Split by image only when every argmax stays in its own image (as the forward makes them). */
    size_t per_image = ny / (size_t)yd.n, xper = nx / (size_t)xd.n;
    int own = 1;
    for (size_t i = 0; i < ny && own; i++)
        own = (size_t)argmax[i] / xper == i / per_image;
    pool_task t = {dx, NULL, dy, argmax, xd, yd, p};
    if (own)
        fp_parallel_for((size_t)yd.n, 1, POOL_PAR_MIN / per_image + 1, maxpool_bwd_images, &t);
    else
        maxpool_bwd_images(&t, 0, (size_t)yd.n);
    return FP_OK;
}

int fp_avgpool_global_forward(float *y, const float *x, fp_dims xd)
{
    if (xd.n <= 0 || xd.h <= 0 || xd.w <= 0 || xd.c <= 0)
        return fp_fail(FP_EINVAL, "fp_avgpool_global_forward: bad dims n=%d h=%d w=%d c=%d", xd.n, xd.h, xd.w,
                       xd.c);
    if (!y || !x)
        return fp_fail(FP_EINVAL, "fp_avgpool_global_forward: NULL tensor");
    const int C = xd.c;
    const size_t hw = (size_t)xd.h * xd.w;
    const float inv = 1.0f / (float)hw;
    for (int n = 0; n < xd.n; n++) {
        float *restrict yn = y + (size_t)n * C;
        const float *restrict xn = x + (size_t)n * hw * C;
        for (int c = 0; c < C; c++)
            yn[c] = 0.0f;
        for (size_t i = 0; i < hw; i++)
            for (int c = 0; c < C; c++)
                yn[c] += xn[i * C + c];
        for (int c = 0; c < C; c++)
            yn[c] *= inv;
    }
    return FP_OK;
}

int fp_avgpool_global_backward(float *dx, const float *dy, fp_dims xd)
{
    if (xd.n <= 0 || xd.h <= 0 || xd.w <= 0 || xd.c <= 0)
        return fp_fail(FP_EINVAL, "fp_avgpool_global_backward: bad dims n=%d h=%d w=%d c=%d", xd.n, xd.h, xd.w,
                       xd.c);
    if (!dx || !dy)
        return fp_fail(FP_EINVAL, "fp_avgpool_global_backward: NULL tensor");
    const int C = xd.c;
    const size_t hw = (size_t)xd.h * xd.w;
    const float inv = 1.0f / (float)hw;
    for (int n = 0; n < xd.n; n++) {
        const float *restrict dyn = dy + (size_t)n * C;
        float *restrict dxn = dx + (size_t)n * hw * C;
        for (size_t i = 0; i < hw; i++)
            for (int c = 0; c < C; c++)
                dxn[i * C + c] += dyn[c] * inv;
    }
    return FP_OK;
}
