/* backend_kernels.cu — the CUDA backend's element-wise and pooling kernels (backend_kernels.h): typed
 * loads / stores through fp32 with round-to-nearest-even narrowing, one grid-stride loop per op, the CPU
 * backend's per-element operation order. Promises: bit-identical to the CPU backend for non-NaN inputs. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "backend_kernels.h"
#include "kernels.h"

#define GRID_CAP 4096u

/* ---------------------------------------------------------------- typed access */

__device__ __forceinline__ float ld(const void *p, fp_dtype t, size_t i)
{
    if (t == FP_DT_F16)
        return __half2float(((const __half *)p)[i]);
    if (t == FP_DT_BF16)
        return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return ((const float *)p)[i];
}

__device__ __forceinline__ float rnd(float v, fp_dtype t)
{
    if (t == FP_DT_F16)
        return __half2float(__float2half_rn(v));
    if (t == FP_DT_BF16)
        return __bfloat162float(__float2bfloat16_rn(v));
    if (t == FP_DT_TF32) {   /* lib/numfmt_scalar.c fp_f32_to_tf32 */
        unsigned u = __float_as_uint(v);
        if ((u & 0x7FFFFFFFu) > 0x7F800000u)
            return __uint_as_float((u | 0x00400000u) & 0xFFFFE000u);
        return __uint_as_float((u + 0xFFFu + ((u >> 13) & 1u)) & 0xFFFFE000u);
    }
    return v;
}

__device__ __forceinline__ void st(void *p, fp_dtype t, size_t i, float v)
{
    if (t == FP_DT_F16)
        ((__half *)p)[i] = __float2half_rn(v);
    else if (t == FP_DT_BF16)
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else
        ((float *)p)[i] = v;
}

__device__ __forceinline__ int is16(fp_dtype t) { return t == FP_DT_F16 || t == FP_DT_BF16; }

#define GRID_STRIDE(i, n) for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
                               i += (size_t)gridDim.x * blockDim.x)

static int launched(const char *what) { return fp_cuda_check_launch(what); }

/* ---------------------------------------------------------------- element-wise */

__global__ void k_round(float *dst, const float *src, size_t n, fp_dtype to)
{
    GRID_STRIDE(i, n) dst[i] = rnd(src[i], to);
}

__global__ void k_cast(void *dst, fp_dtype dt, const void *src, fp_dtype s, size_t n)
{
    GRID_STRIDE(i, n) st(dst, dt, i, ld(src, s, i));
}

__global__ void k_add(void *y, fp_dtype yt, const void *a, fp_dtype at, const void *b, fp_dtype bt, size_t n, int round_b)
{
    GRID_STRIDE(i, n) {
        float vb = ld(b, bt, i);
        if (round_b)
            vb = rnd(vb, yt);
        st(y, yt, i, ld(a, at, i) + vb);
    }
}

__global__ void k_scale(float *x, size_t n, float s)
{
    GRID_STRIDE(i, n) x[i] *= s;
}

__global__ void k_relu_fwd(void *y, const void *x, fp_dtype t, size_t n)
{
    GRID_STRIDE(i, n) {
        if (is16(t)) {   /* bit-wise, as the CPU backend: negative non-zero non-NaN -> +0 */
            unsigned inf = t == FP_DT_BF16 ? 0x7f80u : 0x7c00u;
            unsigned h = ((const unsigned short *)x)[i], mag = h & 0x7fffu;
            ((unsigned short *)y)[i] = (unsigned short)((h & 0x8000u) && mag && mag <= inf ? 0u : h);
        } else {
            float v = ((const float *)x)[i];
            ((float *)y)[i] = v < 0.0f ? 0.0f : v;
        }
    }
}

__global__ void k_relu_bwd(void *dx, const void *dy, const void *y, fp_dtype t, size_t n, int acc)
{
    GRID_STRIDE(i, n) {
        float yv = ld(y, t, i);
        float r = yv > 0.0f ? ld(dy, t, i) : 0.0f;
        st(dx, t, i, acc ? ld(dx, t, i) + r : r);
    }
}

/* ---------------------------------------------------------------- pools */

__global__ void k_maxpool_fwd(void *y, fp_dtype yt, int *argmax, const void *x, fp_dtype xt, int n, int h, int w,
                              int c, int oh, int ow, int k, int stride, int pad)
{
    size_t total = (size_t)n * oh * ow * c;
    GRID_STRIDE(o, total) {
        int ch = (int)(o % c);
        size_t r = o / c;
        int ox = (int)(r % ow);
        r /= ow;
        int oy = (int)(r % oh), img = (int)(r / oh);
        float best = 0.0f;
        int arg = -1;
        for (int ky = 0; ky < k; ky++) {
            int iy = oy * stride - pad + ky;
            if (iy < 0 || iy >= h)
                continue;
            for (int kx = 0; kx < k; kx++) {
                int ix = ox * stride - pad + kx;
                if (ix < 0 || ix >= w)
                    continue;
                int idx = (int)((((size_t)img * h + iy) * w + ix) * c + ch);
                float v = ld(x, xt, idx);
                if (arg < 0 || v > best || v != v) {
                    best = v;
                    arg = idx;
                }
            }
        }
        st(y, yt, o, best);
        if (argmax)
            argmax[o] = arg;
    }
}

/* Finishing a gradient element: s is the fp32 sum started from `start`. */
__device__ __forceinline__ void grad_store(void *dx, fp_dtype t, size_t i, float s, int acc)
{
    if (is16(t) && acc)
        st(dx, t, i, ld(dx, t, i) + rnd(s, t));
    else
        st(dx, t, i, s);
}

__global__ void k_maxpool_bwd(void *dx, fp_dtype dxt, const void *dy, fp_dtype dyt, const int *argmax, int n, int h,
                              int w, int c, int oh, int ow, int k, int stride, int pad, int acc)
{
    size_t total = (size_t)n * h * w * c;
    GRID_STRIDE(i, total) {
        int ch = (int)(i % c);
        size_t r = i / c;
        int ix = (int)(r % w);
        r /= w;
        int iy = (int)(r % h), img = (int)(r / h);
        float s = acc && !is16(dxt) ? ld(dx, dxt, i) : 0.0f;
        /* outputs whose window holds (iy, ix): oy*stride - pad <= iy <= oy*stride - pad + k - 1 */
        int oy0 = iy + pad - k + 1 > 0 ? (iy + pad - k + 1 + stride - 1) / stride : 0;
        int oy1 = (iy + pad) / stride < oh - 1 ? (iy + pad) / stride : oh - 1;
        int ox0 = ix + pad - k + 1 > 0 ? (ix + pad - k + 1 + stride - 1) / stride : 0;
        int ox1 = (ix + pad) / stride < ow - 1 ? (ix + pad) / stride : ow - 1;
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) {
                size_t o = (((size_t)img * oh + oy) * ow + ox) * c + ch;
                if ((size_t)argmax[o] == i)
                    s += ld(dy, dyt, o);
            }
        grad_store(dx, dxt, i, s, acc);
    }
}

__global__ void k_avgpool_fwd(void *y, fp_dtype yt, const void *x, fp_dtype xt, int n, int hw, int c)
{
    size_t total = (size_t)n * c;
    const float inv = 1.0f / (float)hw;
    GRID_STRIDE(o, total) {
        size_t img = o / c, ch = o % c;
        float s = 0.0f;
        for (int i = 0; i < hw; i++)
            s += ld(x, xt, (img * hw + i) * c + ch);
        st(y, yt, o, s * inv);
    }
}

__global__ void k_avgpool_bwd(void *dx, fp_dtype dxt, const void *dy, fp_dtype dyt, int n, int hw, int c, int acc)
{
    size_t total = (size_t)n * hw * c;
    const float inv = 1.0f / (float)hw;
    GRID_STRIDE(i, total) {
        size_t ch = i % c, img = i / ((size_t)hw * c);
        float s = acc && !is16(dxt) ? ld(dx, dxt, i) : 0.0f;
        s += ld(dy, dyt, img * c + ch) * inv;
        grad_store(dx, dxt, i, s, acc);
    }
}

/* ---------------------------------------------------------------- launchers */

#define LAUNCH(n) fp_cuda_grid((n), GRID_CAP), FP_CUDA_THREADS, 0, (cudaStream_t)stream

extern "C" int fp_cbk_round(float *dst, const float *src, size_t n, fp_dtype to, void *stream)
{
    if (!n)
        return FP_OK;
    k_round<<<LAUNCH(n)>>>(dst, src, n, to);
    return launched("cuda backend round");
}

extern "C" int fp_cbk_cast(void *dst, fp_dtype dt, const void *src, fp_dtype s, size_t n, void *stream)
{
    if (!n)
        return FP_OK;
    k_cast<<<LAUNCH(n)>>>(dst, dt, src, s, n);
    return launched("cuda backend cast");
}

extern "C" int fp_cbk_add(void *y, fp_dtype yt, const void *a, fp_dtype at, const void *b, fp_dtype bt, size_t n,
                          int round_b, void *stream)
{
    if (!n)
        return FP_OK;
    k_add<<<LAUNCH(n)>>>(y, yt, a, at, b, bt, n, round_b);
    return launched("cuda backend add");
}

extern "C" int fp_cbk_scale(float *x, size_t n, float s, void *stream)
{
    if (!n)
        return FP_OK;
    k_scale<<<LAUNCH(n)>>>(x, n, s);
    return launched("cuda backend scale");
}

extern "C" int fp_cbk_relu_forward(void *y, const void *x, fp_dtype dt, size_t n, void *stream)
{
    if (!n)
        return FP_OK;
    k_relu_fwd<<<LAUNCH(n)>>>(y, x, dt, n);
    return launched("cuda backend relu forward");
}

extern "C" int fp_cbk_relu_backward(void *dx, const void *dy, const void *y, fp_dtype dt, size_t n, int accumulate,
                                    void *stream)
{
    if (!n)
        return FP_OK;
    k_relu_bwd<<<LAUNCH(n)>>>(dx, dy, y, dt, n, accumulate);
    return launched("cuda backend relu backward");
}

extern "C" int fp_cbk_maxpool_forward(void *y, fp_dtype yt, int *argmax, const void *x, fp_dtype xt, int n, int h,
                                      int w, int c, int oh, int ow, int k, int stride, int pad, void *stream)
{
    size_t total = (size_t)n * oh * ow * c;
    k_maxpool_fwd<<<LAUNCH(total)>>>(y, yt, argmax, x, xt, n, h, w, c, oh, ow, k, stride, pad);
    return launched("cuda backend maxpool forward");
}

extern "C" int fp_cbk_maxpool_backward(void *dx, fp_dtype dxt, const void *dy, fp_dtype dyt, const int *argmax, int n,
                                       int h, int w, int c, int oh, int ow, int k, int stride, int pad, int accumulate,
                                       void *stream)
{
    size_t total = (size_t)n * h * w * c;
    k_maxpool_bwd<<<LAUNCH(total)>>>(dx, dxt, dy, dyt, argmax, n, h, w, c, oh, ow, k, stride, pad, accumulate);
    return launched("cuda backend maxpool backward");
}

extern "C" int fp_cbk_avgpool_forward(void *y, fp_dtype yt, const void *x, fp_dtype xt, int n, int hw, int c,
                                      void *stream)
{
    size_t total = (size_t)n * c;
    k_avgpool_fwd<<<LAUNCH(total)>>>(y, yt, x, xt, n, hw, c);
    return launched("cuda backend avgpool forward");
}

extern "C" int fp_cbk_avgpool_backward(void *dx, fp_dtype dxt, const void *dy, fp_dtype dyt, int n, int hw, int c,
                                       int accumulate, void *stream)
{
    size_t total = (size_t)n * hw * c;
    k_avgpool_bwd<<<LAUNCH(total)>>>(dx, dxt, dy, dyt, n, hw, c, accumulate);
    return launched("cuda backend avgpool backward");
}
