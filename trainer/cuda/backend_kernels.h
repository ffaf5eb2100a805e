/* backend_kernels.h — the element-wise and pooling kernels of the CUDA backend (backend_cuda*.c) that
 * neither cuDNN nor kernels.h / convert.h provide: rounding in fp32 containers, 16-bit <-> 16-bit casts,
 * add / gradient accumulation with the rounding rules of backend.h, relu, max pool with argmax, global
 * average pool, scaling. Each kernel is the CPU backend's arithmetic element by element (same operation
 * order per element, no contraction into FMA), so results are bit-identical to it for every non-NaN
 * input. Device pointers; stream is a cudaStream_t as void*. Return FP_OK or FP_EINTERNAL naming the CUDA
 * error (FP_EINVAL for a max pool input of more than INT_MAX elements). The index and launch arithmetic
 * the kernels use is below, host-callable from C too (64-bit throughout; tests/test_cuda_index.c). */
#ifndef FP_CUDA_BACKEND_KERNELS_H
#define FP_CUDA_BACKEND_KERNELS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "../precision.h"   /* fp_dtype (relative: nvcc sees only lib/ on its include path) */

/* ---- index and launch arithmetic (kernels and host alike; every product in 64 bits) ---- */
#ifdef __CUDACC__
#define FP_CBK_HD __host__ __device__
#else
#define FP_CBK_HD
#endif
#define FP_CBK_THREADS 256u    /* threads per block (kernels.h FP_CUDA_THREADS) */
#define FP_CBK_GRID_CAP 4096u  /* blocks at most: every kernel here is a grid-stride loop */

/* Elements of an {n, h, w, c} tensor. */
static inline FP_CBK_HD size_t fp_cbk_count(int n, int h, int w, int c)
{
    return (size_t)n * (size_t)h * (size_t)w * (size_t)c;
}

/* Flat NHWC index of (img, y, x, ch) in an {., h, w, c} tensor. */
static inline FP_CBK_HD size_t fp_cbk_nhwc(int img, int y, int x, int ch, int h, int w, int c)
{
    return (((size_t)img * (size_t)h + (size_t)y) * (size_t)w + (size_t)x) * (size_t)c + (size_t)ch;
}

/* The inverse: (img, y, x, ch) of flat index o in an {., h, w, c} tensor. */
static inline FP_CBK_HD void fp_cbk_coords(size_t o, int h, int w, int c, int *img, int *y, int *x, int *ch)
{
    *ch = (int)(o % (size_t)c);
    o /= (size_t)c;
    *x = (int)(o % (size_t)w);
    o /= (size_t)w;
    *y = (int)(o % (size_t)h);
    *img = (int)(o / (size_t)h);
}

/* Output positions [*o0, *o1] (along one axis, `out` of them) whose k-wide window at stride / pad holds
 * input position i: o*stride - pad <= i <= o*stride - pad + k - 1. Empty when *o0 > *o1. */
static inline FP_CBK_HD void fp_cbk_window(int i, int k, int stride, int pad, int out, int *o0, int *o1)
{
    long long lo = (long long)i + pad - k + 1, hi = ((long long)i + pad) / stride;
    *o0 = lo > 0 ? (int)((lo + stride - 1) / stride) : 0;
    *o1 = hi < (long long)out - 1 ? (int)hi : out - 1;
}

/* Blocks of FP_CBK_THREADS for a grid-stride loop over n elements: ceil(n / threads), at least 1, at
 * most FP_CBK_GRID_CAP (the loop's 64-bit stride covers the rest). */
static inline FP_CBK_HD unsigned fp_cbk_grid(size_t n)
{
    size_t b = n / FP_CBK_THREADS + (n % FP_CBK_THREADS != 0);   /* n + threads - 1 could wrap */
    return (unsigned)(b > FP_CBK_GRID_CAP ? FP_CBK_GRID_CAP : (b ? b : 1));
}

/* 1 when a max pool input {n, h, w, c} has at most INT_MAX elements, so every flat input index fits the
 * int32 argmax of backend.h (layers.h's limit; the launchers refuse larger inputs with FP_EINVAL). */
static inline FP_CBK_HD int fp_cbk_argmax_fits(int n, int h, int w, int c)
{
    return n > 0 && h > 0 && w > 0 && c > 0 && fp_cbk_count(n, h, w, c) <= (size_t)2147483647;
}

/* dst = src rounded to `to` (FP_DT_F32: copy, FP_DT_TF32: fp_f32_to_tf32, F16 / BF16: round to nearest
 * even and widen back), fp32 containers; dst may be src. */
int fp_cbk_round(float *dst, const float *src, size_t n, fp_dtype to, void *stream);

/* dst (dtype dt) = src (dtype st) converted through fp32 (any of F32, F16, BF16; no overlap). */
int fp_cbk_cast(void *dst, fp_dtype dt, const void *src, fp_dtype st, size_t n, void *stream);

/* y = a + b in fp32, narrowed to y's format (y may alias a or b). round_b: b is first rounded to y's
 * format (backend.h's 16-bit gradient accumulation: round(old + round(result))). */
int fp_cbk_add(void *y, fp_dtype yt, const void *a, fp_dtype at, const void *b, fp_dtype bt, size_t n, int round_b,
               void *stream);

/* x *= s in fp32 (in place). */
int fp_cbk_scale(float *x, size_t n, float s, void *stream);

/* relu of backend.h on one format dt: y = x < 0 ? 0 : x (-0 and NaN pass). */
int fp_cbk_relu_forward(void *y, const void *x, fp_dtype dt, size_t n, void *stream);
/* r = y > 0 ? dy : +0; dx = accumulate ? round(dx + r) : r (dx may alias dy with accumulate 0). */
int fp_cbk_relu_backward(void *dx, const void *dy, const void *y, fp_dtype dt, size_t n, int accumulate,
                         void *stream);

/* Max pool of layers.h (first maximum of the window in (ky, kx) order wins, NaN wins, padded cells never
 * do); argmax (may be NULL) gets the flat input index (int32: x of at most INT_MAX elements, else
 * FP_EINVAL before any launch). x of dtype xt, y of yt; dims NHWC. */
int fp_cbk_maxpool_forward(void *y, fp_dtype yt, int *argmax, const void *x, fp_dtype xt, int n, int h, int w, int c,
                           int oh, int ow, int k, int stride, int pad, void *stream);
/* dx (accumulate) of the CPU backend: per input element, the dy of every output whose argmax names it,
 * added in output order to 0 (16-bit dx, or accumulate 0) or to the old fp32 value (fp32, accumulate 1);
 * 16-bit dx then stores round(sum) or round(old + round(sum)). */
int fp_cbk_maxpool_backward(void *dx, fp_dtype dxt, const void *dy, fp_dtype dyt, const int *argmax, int n, int h,
                            int w, int c, int oh, int ow, int k, int stride, int pad, int accumulate, void *stream);

/* Global average pool {n,h,w,c} -> {n,1,1,c} (hw = h*w): sum over h*w in order from 0, times 1/(h*w),
 * as the CPU. */
int fp_cbk_avgpool_forward(void *y, fp_dtype yt, const void *x, fp_dtype xt, int n, size_t hw, int c, void *stream);
/* dx (accumulate) += dy * (1/(h*w)) broadcast, product and sum rounded separately as the CPU's (no FMA),
 * with the CPU backend's 16-bit rounding (see maxpool_backward). */
int fp_cbk_avgpool_backward(void *dx, fp_dtype dxt, const void *dy, fp_dtype dyt, int n, size_t hw, int c,
                            int accumulate, void *stream);

#ifdef __cplusplus
}
#endif

#endif
