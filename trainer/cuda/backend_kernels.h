/* backend_kernels.h — the element-wise and pooling kernels of the CUDA backend (backend_cuda*.c) that
 * neither cuDNN nor kernels.h / convert.h provide: rounding in fp32 containers, 16-bit <-> 16-bit casts,
 * add / gradient accumulation with the rounding rules of backend.h, relu, max pool with argmax, global
 * average pool, scaling. Each kernel is the CPU backend's arithmetic element by element (same operation
 * order per element), so results are bit-identical to it for every non-NaN input. Device pointers;
 * stream is a cudaStream_t as void*. Return FP_OK or FP_EINTERNAL naming the CUDA error. */
#ifndef FP_CUDA_BACKEND_KERNELS_H
#define FP_CUDA_BACKEND_KERNELS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "../precision.h"   /* fp_dtype (relative: nvcc sees only lib/ on its include path) */

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
 * do); argmax (may be NULL) gets the flat input index. x of dtype xt, y of yt; dims NHWC. */
int fp_cbk_maxpool_forward(void *y, fp_dtype yt, int *argmax, const void *x, fp_dtype xt, int n, int h, int w, int c,
                           int oh, int ow, int k, int stride, int pad, void *stream);
/* dx (accumulate) of the CPU backend: per input element, the dy of every output whose argmax names it,
 * added in output order to 0 (16-bit dx, or accumulate 0) or to the old fp32 value (fp32, accumulate 1);
 * 16-bit dx then stores round(sum) or round(old + round(sum)). */
int fp_cbk_maxpool_backward(void *dx, fp_dtype dxt, const void *dy, fp_dtype dyt, const int *argmax, int n, int h,
                            int w, int c, int oh, int ow, int k, int stride, int pad, int accumulate, void *stream);

/* Global average pool {n,h,w,c} -> {n,1,1,c}: sum over h*w in order from 0, times 1/(h*w), as the CPU. */
int fp_cbk_avgpool_forward(void *y, fp_dtype yt, const void *x, fp_dtype xt, int n, int hw, int c, void *stream);
/* dx (accumulate) += dy / (h*w) broadcast, with the CPU backend's rounding (see maxpool_backward). */
int fp_cbk_avgpool_backward(void *dx, fp_dtype dxt, const void *dy, fp_dtype dyt, int n, int hw, int c,
                            int accumulate, void *stream);

#ifdef __cplusplus
}
#endif

#endif
