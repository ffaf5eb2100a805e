/* backend_kernels.cu — the CUDA backend's element-wise and pooling kernels (backend_kernels.h): typed
 * loads / stores through fp32 with round-to-nearest-even narrowing, one 64-bit grid-stride loop per op
 * (element-wise ops: templated on their formats, 16-byte vector loads where aligned, see below),
 * the CPU backend's per-element operation order, every fp32 sum and product spelled __fadd_rn / __fmul_rn
 * (nvcc and ptxas fuse none of them into an FMA). Promises: bit-identical to the CPU backend for non-NaN inputs. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <type_traits>
#include "backend_kernels.h"
#include "typed_access.cuh"
#include "kernels.h"

/* ---------------------------------------------------------------- typed access (typed_access.cuh) */

__device__ __forceinline__ int is16(fp_dtype t) { return t == FP_DT_F16 || t == FP_DT_BF16; }

#define GRID_STRIDE(i, n) for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
                               i += (size_t)gridDim.x * blockDim.x)

static int launched(const char *what) { return fp_cuda_check_launch(what); }

/* ---------------------------------------------------------------- element-wise, typed and vectorised
 * Each element-wise op is one kernel template per combination of formats (the dtype a template argument,
 * not a per-element switch). When every pointer of a launch is 16-byte aligned, a thread takes VEC = 8
 * consecutive elements with 16-byte loads and stores (one uint4 of 16-bit values, two float4 of fp32),
 * all loads of the 8 before any store (so y may alias a or b); the last n % 8 elements, and every
 * element of a launch with a misaligned pointer (a view at an odd offset), go one at a time. Per element
 * the arithmetic is the one above: results do not depend on the path. */
#define VEC 8

template <fp_dtype D> struct io;   /* one storage format: scalar and 8-wide access through fp32 */
template <> struct io<FP_DT_F32> {
    static __device__ __forceinline__ float get(const void *p, size_t i) { return ((const float *)p)[i]; }
    static __device__ __forceinline__ void put(void *p, size_t i, float v) { ((float *)p)[i] = v; }
    static __device__ __forceinline__ float rnd(float v) { return v; }
    static __device__ __forceinline__ void get8(const void *p, size_t i, float v[VEC])
    {
        const float4 *q = (const float4 *)((const float *)p + i);
        const float4 a = q[0], b = q[1];
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
        v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    }
    static __device__ __forceinline__ void put8(void *p, size_t i, const float v[VEC])
    {
        float4 *q = (float4 *)((float *)p + i);
        q[0] = make_float4(v[0], v[1], v[2], v[3]);
        q[1] = make_float4(v[4], v[5], v[6], v[7]);
    }
};

/* The two 16-bit formats: bits <-> fp32, the rest shared. */
struct bits_f16 {
    static __device__ __forceinline__ float widen(unsigned short h) { return __half2float(__ushort_as_half(h)); }
    static __device__ __forceinline__ unsigned short narrow(float v) { return __half_as_ushort(__float2half_rn(v)); }
};
struct bits_bf16 {
    static __device__ __forceinline__ float widen(unsigned short h)
    {
        return __bfloat162float(__ushort_as_bfloat16(h));
    }
    static __device__ __forceinline__ unsigned short narrow(float v)
    {
        return __bfloat16_as_ushort(__float2bfloat16_rn(v));
    }
};
template <class B> struct io16 {
    static __device__ __forceinline__ float get(const void *p, size_t i)
    {
        return B::widen(((const unsigned short *)p)[i]);
    }
    static __device__ __forceinline__ void put(void *p, size_t i, float v) { ((unsigned short *)p)[i] = B::narrow(v); }
    static __device__ __forceinline__ float rnd(float v) { return B::widen(B::narrow(v)); }
    static __device__ __forceinline__ void get8(const void *p, size_t i, float v[VEC])
    {
        const uint4 u = *(const uint4 *)((const unsigned short *)p + i);
        const unsigned w[4] = {u.x, u.y, u.z, u.w};
        for (int k = 0; k < 4; k++) {   /* little-endian: the lower half is the lower element */
            v[2 * k] = B::widen((unsigned short)(w[k] & 0xFFFFu));
            v[2 * k + 1] = B::widen((unsigned short)(w[k] >> 16));
        }
    }
    static __device__ __forceinline__ void put8(void *p, size_t i, const float v[VEC])
    {
        unsigned w[4];
        for (int k = 0; k < 4; k++)
            w[k] = (unsigned)B::narrow(v[2 * k]) | ((unsigned)B::narrow(v[2 * k + 1]) << 16);
        *(uint4 *)((unsigned short *)p + i) = make_uint4(w[0], w[1], w[2], w[3]);
    }
};
template <> struct io<FP_DT_F16> : io16<bits_f16> {};
template <> struct io<FP_DT_BF16> : io16<bits_bf16> {};

/* One grid-stride pass: op.vec(i) for i = 0, 8, 16, ... below n - n % 8 when vec, then op.one(i) for
 * every element left. */
template <class Op> __global__ void k_ew(Op op, size_t n, int vec)
{
    const size_t nv = vec ? n / VEC : 0, done = nv * VEC;
    GRID_STRIDE(j, nv) op.vec(j * VEC);
    GRID_STRIDE(t, n - done) op.one(done + t);
}

static inline int al16(const void *p) { return ((size_t)p & 15u) == 0; }

template <class Op> static int ew_launch(const Op &op, size_t n, int vec, void *stream, const char *what)
{
    if (!n)
        return FP_OK;
    const size_t items = vec ? (n / VEC ? n / VEC : 1) : n;
    k_ew<Op><<<fp_cbk_grid(items), FP_CBK_THREADS, 0, (cudaStream_t)stream>>>(op, n, vec);
    return fp_cuda_check_launch(what);
}

/* Formats outside F32 / F16 / BF16 are read and written as fp32 (as ld / st above do). */
#define FP_CBK_FORMATS(X, dt) \
    ((dt) == FP_DT_F16 ? X(FP_DT_F16) : (dt) == FP_DT_BF16 ? X(FP_DT_BF16) : X(FP_DT_F32))

/* round: dst = fp_dev_rnd(src, To) (fp32 containers; To F32 copies, TF32 as typed_access.cuh). */
template <fp_dtype To> struct round_op {
    float *dst;
    const float *src;
    static __device__ __forceinline__ float r(float v) { return fp_dev_rnd(v, To); }
    __device__ __forceinline__ void one(size_t i) const { dst[i] = r(src[i]); }
    __device__ __forceinline__ void vec(size_t i) const
    {
        float v[VEC];
        io<FP_DT_F32>::get8(src, i, v);
        for (int k = 0; k < VEC; k++)
            v[k] = r(v[k]);
        io<FP_DT_F32>::put8(dst, i, v);
    }
};

/* cast: dst (D) = src (S) through fp32. */
template <fp_dtype D, fp_dtype S> struct cast_op {
    void *dst;
    const void *src;
    __device__ __forceinline__ void one(size_t i) const { io<D>::put(dst, i, io<S>::get(src, i)); }
    __device__ __forceinline__ void vec(size_t i) const
    {
        float v[VEC];
        io<S>::get8(src, i, v);
        io<D>::put8(dst, i, v);
    }
};

/* add: y (Y) = a (A) + b (B), b first rounded to Y when round_b. */
template <fp_dtype Y, fp_dtype A, fp_dtype B> struct add_op {
    void *y;
    const void *a, *b;
    int round_b;
    __device__ __forceinline__ float f(float va, float vb) const
    {
        return __fadd_rn(va, round_b ? io<Y>::rnd(vb) : vb);
    }
    __device__ __forceinline__ void one(size_t i) const
    {
        const float vb = io<B>::get(b, i);   /* b before a: the order k_add read them in (no effect) */
        io<Y>::put(y, i, f(io<A>::get(a, i), vb));
    }
    __device__ __forceinline__ void vec(size_t i) const
    {
        float va[VEC], vb[VEC];
        io<A>::get8(a, i, va);
        io<B>::get8(b, i, vb);
        for (int k = 0; k < VEC; k++)
            va[k] = f(va[k], vb[k]);
        io<Y>::put8(y, i, va);
    }
};

struct scale_op {
    float *x;
    float s;
    __device__ __forceinline__ void one(size_t i) const { x[i] = __fmul_rn(x[i], s); }
    __device__ __forceinline__ void vec(size_t i) const
    {
        float v[VEC];
        io<FP_DT_F32>::get8(x, i, v);
        for (int k = 0; k < VEC; k++)
            v[k] = __fmul_rn(v[k], s);
        io<FP_DT_F32>::put8(x, i, v);
    }
};

/* relu forward: fp32 by value (v < 0 ? 0 : v), 16-bit bit-wise as the CPU backend (negative non-zero
 * non-NaN -> +0; Inf's pattern: 0x7c00 fp16, 0x7f80 bf16). */
__device__ __forceinline__ unsigned short relu16(unsigned short h, unsigned inf)
{
    const unsigned mag = h & 0x7fffu;
    return (unsigned short)((h & 0x8000u) && mag && mag <= inf ? 0u : h);
}
template <fp_dtype T> struct relu_fwd_op {
    void *y;
    const void *x;
    static constexpr unsigned inf = T == FP_DT_BF16 ? 0x7f80u : 0x7c00u;
    __device__ __forceinline__ void one(size_t i) const
    {
        if (T == FP_DT_F32) {
            const float v = ((const float *)x)[i];
            ((float *)y)[i] = v < 0.0f ? 0.0f : v;
        } else
            ((unsigned short *)y)[i] = relu16(((const unsigned short *)x)[i], inf);
    }
    __device__ __forceinline__ void vec(size_t i) const
    {
        if (T == FP_DT_F32) {
            float v[VEC];
            io<FP_DT_F32>::get8(x, i, v);
            for (int k = 0; k < VEC; k++)
                v[k] = v[k] < 0.0f ? 0.0f : v[k];
            io<FP_DT_F32>::put8(y, i, v);
        } else {
            const uint4 u = *(const uint4 *)((const unsigned short *)x + i);
            unsigned w[4] = {u.x, u.y, u.z, u.w};
            for (int k = 0; k < 4; k++)
                w[k] = (unsigned)relu16((unsigned short)(w[k] & 0xFFFFu), inf) |
                       ((unsigned)relu16((unsigned short)(w[k] >> 16), inf) << 16);
            *(uint4 *)((unsigned short *)y + i) = make_uint4(w[0], w[1], w[2], w[3]);
        }
    }
};

/* relu backward: r = y > 0 ? dy : +0; dx = acc ? dx + r (rounded to T) : r. dx may alias dy (acc 0). */
template <fp_dtype T> struct relu_bwd_op {
    void *dx;
    const void *dy, *y;
    int acc;
    __device__ __forceinline__ void one(size_t i) const
    {
        const float yv = io<T>::get(y, i);
        const float r = yv > 0.0f ? io<T>::get(dy, i) : 0.0f;
        io<T>::put(dx, i, acc ? __fadd_rn(io<T>::get(dx, i), r) : r);
    }
    __device__ __forceinline__ void vec(size_t i) const
    {
        float yv[VEC], g[VEC], old[VEC];
        io<T>::get8(y, i, yv);
        io<T>::get8(dy, i, g);
        if (acc)
            io<T>::get8(dx, i, old);
        for (int k = 0; k < VEC; k++) {
            const float r = yv[k] > 0.0f ? g[k] : 0.0f;
            g[k] = acc ? __fadd_rn(old[k], r) : r;
        }
        io<T>::put8(dx, i, g);
    }
};

/* ---------------------------------------------------------------- pools
 * Templates on their tensors' formats (the launchers pick the instance): ld / st / rnd / is16 below see a
 * constant format and keep one branch; a format other than F16 / BF16 runs as fp32, as ld / st read it. */

/* The launcher has checked that x has at most INT_MAX elements (fp_cbk_argmax_fits): idx fits argmax. */
template <fp_dtype yt, fp_dtype xt>
__global__ void k_maxpool_fwd(void *y, int *argmax, const void *x, int n, int h, int w, int c, int oh, int ow, int k,
                              int stride, int pad)
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
                float v = fp_dev_ld(x, xt, idx);
                if (!found || v > best || v != v) {
                    best = v;
                    arg = idx;
                    found = 1;
                }
            }
        }
        fp_dev_st(y, yt, o, best);
        if (argmax)
            argmax[o] = found ? (int)arg : -1;
    }
}

/* Finishing a gradient element: s is the fp32 sum started from `start`. */
__device__ __forceinline__ void grad_store(void *dx, fp_dtype t, size_t i, float s, int acc)
{
    if (is16(t) && acc)
        fp_dev_st(dx, t, i, __fadd_rn(fp_dev_ld(dx, t, i), fp_dev_rnd(s, t)));
    else
        fp_dev_st(dx, t, i, s);
}

template <fp_dtype dxt, fp_dtype dyt>
__global__ void k_maxpool_bwd(void *dx, const void *dy, const int *argmax, int n, int h, int w, int c, int oh, int ow,
                              int k, int stride, int pad, int acc)
{
    size_t total = fp_cbk_count(n, h, w, c);
    GRID_STRIDE(i, total) {
        int img, iy, ix, ch;
        fp_cbk_coords(i, h, w, c, &img, &iy, &ix, &ch);
        float s = acc && !is16(dxt) ? fp_dev_ld(dx, dxt, i) : 0.0f;
        /* the outputs whose window holds (iy, ix), in increasing flat order: the CPU's order of adds */
        int oy0, oy1, ox0, ox1;
        fp_cbk_window(iy, k, stride, pad, oh, &oy0, &oy1);
        fp_cbk_window(ix, k, stride, pad, ow, &ox0, &ox1);
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) {
                size_t o = fp_cbk_nhwc(img, oy, ox, ch, oh, ow, c);
                if (argmax[o] >= 0 && (size_t)argmax[o] == i)
                    s = __fadd_rn(s, fp_dev_ld(dy, dyt, o));
            }
        grad_store(dx, dxt, i, s, acc);
    }
}

/* pool.c fp_avgpool_global_forward: per (image, channel) s = 0, s += x over hw in order from 0, then
 * s * inv with inv = 1.0f / (float)hw. */
template <fp_dtype yt, fp_dtype xt>
__global__ void k_avgpool_fwd(void *y, const void *x, int n, size_t hw, int c)
{
    size_t total = (size_t)n * (size_t)c;
    const float inv = __fdiv_rn(1.0f, (float)hw);
    GRID_STRIDE(o, total) {
        size_t img = o / (size_t)c, ch = o % (size_t)c;
        float s = 0.0f;
        for (size_t i = 0; i < hw; i++)
            s = __fadd_rn(s, fp_dev_ld(x, xt, (img * hw + i) * (size_t)c + ch));
        fp_dev_st(y, yt, o, __fmul_rn(s, inv));
    }
}

/* pool.c fp_avgpool_global_backward: dx += dy * inv, the product rounded before the sum (the CPU build
 * has no FMA contraction there; nvcc would fuse `s += a * b` into one fma.rn.f32). */
template <fp_dtype dxt, fp_dtype dyt>
__global__ void k_avgpool_bwd(void *dx, const void *dy, int n, size_t hw, int c, int acc)
{
    size_t total = (size_t)n * hw * (size_t)c;
    const float inv = __fdiv_rn(1.0f, (float)hw);
    GRID_STRIDE(i, total) {
        size_t ch = i % (size_t)c, img = i / (hw * (size_t)c);
        float s = acc && !is16(dxt) ? fp_dev_ld(dx, dxt, i) : 0.0f;
        s = __fadd_rn(s, __fmul_rn(fp_dev_ld(dy, dyt, img * (size_t)c + ch), inv));
        grad_store(dx, dxt, i, s, acc);
    }
}

/* ---------------------------------------------------------------- launchers */

/* fp_cbk_grid: at most FP_CBK_GRID_CAP blocks, the grid-stride loops' 64-bit stride covers any n. */
#define LAUNCH(n) fp_cbk_grid(n), FP_CBK_THREADS, 0, (cudaStream_t)stream
static_assert(FP_CBK_THREADS == FP_CUDA_THREADS, "backend_kernels.h and kernels.h disagree on the block size");

/* f(std::integral_constant<fp_dtype, d>) for d's instance: F16, BF16, else F32. */
template <fp_dtype D> using dtc = std::integral_constant<fp_dtype, D>;
template <class F> static void with_dtype(fp_dtype d, F &&f)
{
    if (d == FP_DT_F16)
        f(dtc<FP_DT_F16>{});
    else if (d == FP_DT_BF16)
        f(dtc<FP_DT_BF16>{});
    else
        f(dtc<FP_DT_F32>{});
}

extern "C" int fp_cbk_round(float *dst, const float *src, size_t n, fp_dtype to, void *stream)
{
    const int v = al16(dst) && al16(src);
    const char *w = "cuda backend round";
    switch (to) {
    case FP_DT_TF32: return ew_launch(round_op<FP_DT_TF32>{dst, src}, n, v, stream, w);
    case FP_DT_F16: return ew_launch(round_op<FP_DT_F16>{dst, src}, n, v, stream, w);
    case FP_DT_BF16: return ew_launch(round_op<FP_DT_BF16>{dst, src}, n, v, stream, w);
    default: return ew_launch(round_op<FP_DT_F32>{dst, src}, n, v, stream, w);
    }
}

template <fp_dtype D>
static int cast_to(void *dst, const void *src, fp_dtype s, size_t n, int v, void *stream)
{
    const char *w = "cuda backend cast";
#define FP_CBK_CAST(S) ew_launch(cast_op<D, S>{dst, src}, n, v, stream, w)
    return FP_CBK_FORMATS(FP_CBK_CAST, s);
#undef FP_CBK_CAST
}

extern "C" int fp_cbk_cast(void *dst, fp_dtype dt, const void *src, fp_dtype s, size_t n, void *stream)
{
    const int v = al16(dst) && al16(src);
#define FP_CBK_CAST_TO(D) cast_to<D>(dst, src, s, n, v, stream)
    return FP_CBK_FORMATS(FP_CBK_CAST_TO, dt);
#undef FP_CBK_CAST_TO
}

template <fp_dtype Y, fp_dtype A>
static int add_b(void *y, const void *a, const void *b, fp_dtype bt, size_t n, int round_b, int v, void *stream)
{
    const char *w = "cuda backend add";
#define FP_CBK_ADD(B) ew_launch(add_op<Y, A, B>{y, a, b, round_b}, n, v, stream, w)
    return FP_CBK_FORMATS(FP_CBK_ADD, bt);
#undef FP_CBK_ADD
}

template <fp_dtype Y>
static int add_a(void *y, const void *a, fp_dtype at, const void *b, fp_dtype bt, size_t n, int round_b, int v,
                 void *stream)
{
#define FP_CBK_ADD_A(A) add_b<Y, A>(y, a, b, bt, n, round_b, v, stream)
    return FP_CBK_FORMATS(FP_CBK_ADD_A, at);
#undef FP_CBK_ADD_A
}

extern "C" int fp_cbk_add(void *y, fp_dtype yt, const void *a, fp_dtype at, const void *b, fp_dtype bt, size_t n,
                          int round_b, void *stream)
{
    const int v = al16(y) && al16(a) && al16(b);
#define FP_CBK_ADD_Y(Y) add_a<Y>(y, a, at, b, bt, n, round_b, v, stream)
    return FP_CBK_FORMATS(FP_CBK_ADD_Y, yt);
#undef FP_CBK_ADD_Y
}

extern "C" int fp_cbk_scale(float *x, size_t n, float s, void *stream)
{
    return ew_launch(scale_op{x, s}, n, al16(x), stream, "cuda backend scale");
}

extern "C" int fp_cbk_relu_forward(void *y, const void *x, fp_dtype dt, size_t n, void *stream)
{
    const int v = al16(y) && al16(x);
    const char *w = "cuda backend relu forward";
#define FP_CBK_RELU(T) ew_launch(relu_fwd_op<T>{y, x}, n, v, stream, w)
    return FP_CBK_FORMATS(FP_CBK_RELU, dt);
#undef FP_CBK_RELU
}

extern "C" int fp_cbk_relu_backward(void *dx, const void *dy, const void *y, fp_dtype dt, size_t n, int accumulate,
                                    void *stream)
{
    const int v = al16(dx) && al16(dy) && al16(y);
    const char *w = "cuda backend relu backward";
#define FP_CBK_RELU_B(T) ew_launch(relu_bwd_op<T>{dx, dy, y, accumulate}, n, v, stream, w)
    return FP_CBK_FORMATS(FP_CBK_RELU_B, dt);
#undef FP_CBK_RELU_B
}

extern "C" int fp_cbk_maxpool_forward(void *y, fp_dtype yt, int *argmax, const void *x, fp_dtype xt, int n, int h,
                                      int w, int c, int oh, int ow, int k, int stride, int pad, void *stream)
{
    if (!fp_cbk_argmax_fits(n, h, w, c))
        return fp_fail(FP_EINVAL, "cuda backend maxpool forward: input %dx%dx%dx%d: more than INT_MAX elements for "
                       "an int32 argmax", n, h, w, c);
    size_t total = fp_cbk_count(n, oh, ow, c);
    with_dtype(yt, [&](auto Y) {
        with_dtype(xt, [&](auto X) {
            k_maxpool_fwd<decltype(Y)::value, decltype(X)::value>
                <<<LAUNCH(total)>>>(y, argmax, x, n, h, w, c, oh, ow, k, stride, pad);
        });
    });
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
    with_dtype(dxt, [&](auto DX) {
        with_dtype(dyt, [&](auto DY) {
            k_maxpool_bwd<decltype(DX)::value, decltype(DY)::value>
                <<<LAUNCH(total)>>>(dx, dy, argmax, n, h, w, c, oh, ow, k, stride, pad, accumulate);
        });
    });
    return launched("cuda backend maxpool backward");
}

extern "C" int fp_cbk_avgpool_forward(void *y, fp_dtype yt, const void *x, fp_dtype xt, int n, size_t hw, int c,
                                      void *stream)
{
    size_t total = (size_t)n * (size_t)c;
    with_dtype(yt, [&](auto Y) {
        with_dtype(xt, [&](auto X) {
            k_avgpool_fwd<decltype(Y)::value, decltype(X)::value><<<LAUNCH(total)>>>(y, x, n, hw, c);
        });
    });
    return launched("cuda backend avgpool forward");
}

extern "C" int fp_cbk_avgpool_backward(void *dx, fp_dtype dxt, const void *dy, fp_dtype dyt, int n, size_t hw,
                                       int c, int accumulate, void *stream)
{
    size_t total = (size_t)n * hw * (size_t)c;
    with_dtype(dxt, [&](auto DX) {
        with_dtype(dyt, [&](auto DY) {
            k_avgpool_bwd<decltype(DX)::value, decltype(DY)::value><<<LAUNCH(total)>>>(dx, dy, n, hw, c, accumulate);
        });
    });
    return launched("cuda backend avgpool backward");
}
