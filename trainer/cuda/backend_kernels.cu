/* backend_kernels.cu — the CUDA backend's element-wise and pooling kernels (backend_kernels.h): typed
 * loads / stores through fp32 with round-to-nearest-even narrowing, one 64-bit grid-stride loop per op,
 * the CPU backend's per-element operation order, every fp32 sum and product spelled __fadd_rn / __fmul_rn
 * (nvcc and ptxas fuse none of them into an FMA). Promises: bit-identical to the CPU backend for non-NaN inputs. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "backend_kernels.h"
#include "kernels.h"

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
        st(y, yt, i, __fadd_rn(ld(a, at, i), vb));
    }
}

__global__ void k_scale(float *x, size_t n, float s)
{
    GRID_STRIDE(i, n) x[i] = __fmul_rn(x[i], s);
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
        st(dx, t, i, acc ? __fadd_rn(ld(dx, t, i), r) : r);
    }
}

/* ---------------------------------------------------------------- pools */

/* The launcher has checked that x has at most INT_MAX elements (fp_cbk_argmax_fits): idx fits argmax. */
__global__ void k_maxpool_fwd(void *y, fp_dtype yt, int *argmax, const void *x, fp_dtype xt, int n, int h, int w,
                              int c, int oh, int ow, int k, int stride, int pad)
{
    size_t total = fp_cbk_count(n, oh, ow, c);
    GRID_STRIDE(o, total) {
        int img, oy, ox, ch;
        fp_cbk_coords(o, oh, ow, c, &img, &oy, &ox, &ch);
        float best = 0.0f;
        int found = 0;
        size_t arg = 0;
        for (int ky = 0; ky < k; ky++) {
            long long iy = (long long)oy * stride - pad + ky;
            if (iy < 0 || iy >= h)
                continue;
            for (int kx = 0; kx < k; kx++) {
                long long ix = (long long)ox * stride - pad + kx;
                if (ix < 0 || ix >= w)
                    continue;
                size_t idx = fp_cbk_nhwc(img, (int)iy, (int)ix, ch, h, w, c);
                float v = ld(x, xt, idx);
                if (!found || v > best || v != v) {
                    best = v;
                    arg = idx;
                    found = 1;
                }
            }
        }
        st(y, yt, o, best);
        if (argmax)
            argmax[o] = found ? (int)arg : -1;
    }
}

/* Finishing a gradient element: s is the fp32 sum started from `start`. */
__device__ __forceinline__ void grad_store(void *dx, fp_dtype t, size_t i, float s, int acc)
{
    if (is16(t) && acc)
        st(dx, t, i, __fadd_rn(ld(dx, t, i), rnd(s, t)));
    else
        st(dx, t, i, s);
}

__global__ void k_maxpool_bwd(void *dx, fp_dtype dxt, const void *dy, fp_dtype dyt, const int *argmax, int n, int h,
                              int w, int c, int oh, int ow, int k, int stride, int pad, int acc)
{
    size_t total = fp_cbk_count(n, h, w, c);
    GRID_STRIDE(i, total) {
        int img, iy, ix, ch;
        fp_cbk_coords(i, h, w, c, &img, &iy, &ix, &ch);
        float s = acc && !is16(dxt) ? ld(dx, dxt, i) : 0.0f;
        /* the outputs whose window holds (iy, ix), in increasing flat order: the CPU's order of adds */
        int oy0, oy1, ox0, ox1;
        fp_cbk_window(iy, k, stride, pad, oh, &oy0, &oy1);
        fp_cbk_window(ix, k, stride, pad, ow, &ox0, &ox1);
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) {
                size_t o = fp_cbk_nhwc(img, oy, ox, ch, oh, ow, c);
                if (argmax[o] >= 0 && (size_t)argmax[o] == i)
                    s = __fadd_rn(s, ld(dy, dyt, o));
            }
        grad_store(dx, dxt, i, s, acc);
    }
}

/* pool.c fp_avgpool_global_forward: per (image, channel) s = 0, s += x over hw in order from 0, then
 * s * inv with inv = 1.0f / (float)hw. */
__global__ void k_avgpool_fwd(void *y, fp_dtype yt, const void *x, fp_dtype xt, int n, size_t hw, int c)
{
    size_t total = (size_t)n * (size_t)c;
    const float inv = __fdiv_rn(1.0f, (float)hw);
    GRID_STRIDE(o, total) {
        size_t img = o / (size_t)c, ch = o % (size_t)c;
        float s = 0.0f;
        for (size_t i = 0; i < hw; i++)
            s = __fadd_rn(s, ld(x, xt, (img * hw + i) * (size_t)c + ch));
        st(y, yt, o, __fmul_rn(s, inv));
    }
}

/* pool.c fp_avgpool_global_backward: dx += dy * inv, the product rounded before the sum (the CPU build
 * has no FMA contraction there; nvcc would fuse `s += a * b` into one fma.rn.f32). */
__global__ void k_avgpool_bwd(void *dx, fp_dtype dxt, const void *dy, fp_dtype dyt, int n, size_t hw, int c, int acc)
{
    size_t total = (size_t)n * hw * (size_t)c;
    const float inv = __fdiv_rn(1.0f, (float)hw);
    GRID_STRIDE(i, total) {
        size_t ch = i % (size_t)c, img = i / (hw * (size_t)c);
        float s = acc && !is16(dxt) ? ld(dx, dxt, i) : 0.0f;
        s = __fadd_rn(s, __fmul_rn(ld(dy, dyt, img * (size_t)c + ch), inv));
        grad_store(dx, dxt, i, s, acc);
    }
}

/* ---------------------------------------------------------------- launchers */

/* fp_cbk_grid: at most FP_CBK_GRID_CAP blocks, the grid-stride loops' 64-bit stride covers any n. */
#define LAUNCH(n) fp_cbk_grid(n), FP_CBK_THREADS, 0, (cudaStream_t)stream
static_assert(FP_CBK_THREADS == FP_CUDA_THREADS, "backend_kernels.h and kernels.h disagree on the block size");

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
    if (!fp_cbk_argmax_fits(n, h, w, c))
        return fp_fail(FP_EINVAL, "cuda backend maxpool forward: input %dx%dx%dx%d: more than INT_MAX elements for "
                       "an int32 argmax", n, h, w, c);
    size_t total = fp_cbk_count(n, oh, ow, c);
    k_maxpool_fwd<<<LAUNCH(total)>>>(y, yt, argmax, x, xt, n, h, w, c, oh, ow, k, stride, pad);
    return launched("cuda backend maxpool forward");
}

extern "C" int fp_cbk_maxpool_backward(void *dx, fp_dtype dxt, const void *dy, fp_dtype dyt, const int *argmax, int n,
                                       int h, int w, int c, int oh, int ow, int k, int stride, int pad, int accumulate,
                                       void *stream)
{
    if (!fp_cbk_argmax_fits(n, h, w, c))
        return fp_fail(FP_EINVAL, "cuda backend maxpool backward: input %dx%dx%dx%d: more than INT_MAX elements for "
                       "an int32 argmax", n, h, w, c);
    size_t total = fp_cbk_count(n, h, w, c);
    k_maxpool_bwd<<<LAUNCH(total)>>>(dx, dxt, dy, dyt, argmax, n, h, w, c, oh, ow, k, stride, pad, accumulate);
    return launched("cuda backend maxpool backward");
}

extern "C" int fp_cbk_avgpool_forward(void *y, fp_dtype yt, const void *x, fp_dtype xt, int n, size_t hw, int c,
                                      void *stream)
{
    size_t total = (size_t)n * (size_t)c;
    k_avgpool_fwd<<<LAUNCH(total)>>>(y, yt, x, xt, n, hw, c);
    return launched("cuda backend avgpool forward");
}

extern "C" int fp_cbk_avgpool_backward(void *dx, fp_dtype dxt, const void *dy, fp_dtype dyt, int n, size_t hw,
                                       int c, int accumulate, void *stream)
{
    size_t total = (size_t)n * hw * (size_t)c;
    k_avgpool_bwd<<<LAUNCH(total)>>>(dx, dxt, dy, dyt, n, hw, c, accumulate);
    return launched("cuda backend avgpool backward");
}
