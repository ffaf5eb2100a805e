/* amp.cu — the fused unscale + non-finite check of all gradients (trainer/precision.c
 * fp_unscale_and_check over many segments): g *= inv_scale in place, and one device flag set when any
 * value's exponent was all ones (Inf or NaN) before scaling, as torch's _amp_foreach_non_finite_check_and_unscale_. */
#include <limits.h>
#include <stdint.h>
#include "kernels.h"

namespace {

__global__ void unscale_kernel(fp_seg_group g, float inv_scale, int *found)
{
    int any = 0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (int k = 0; k < g.count; k++) {
        float *p = g.s[k].grad;
        const size_t n = g.s[k].n;
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) {
            const float v = p[i];
            any |= (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;
            p[i] = __fmul_rn(v, inv_scale);
        }
    }
    if (__any_sync(0xffffffffu, any) && (threadIdx.x & 31) == 0)
        *found = 1;
}

/* A group with each segment's position in the caller's list (3 KiB + 256 B: under the 4 KiB parameter limit). */
struct seg_group_at {
    fp_seg_group g;
    int at[FP_SEG_GROUP];
};

/* unscale_kernel, also the smallest position of a segment holding Inf / NaN into *first (atomicMin). The factor is
 * inv_scale, or with d_scale 1 / *d_scale (rounded to fp32 as the host's 1.0f / scale: __fdiv_rn). */
__global__ void unscale_first_kernel(seg_group_at ga, float inv_scale, const float *d_scale, int *found, int *first)
{
    if (d_scale)
        inv_scale = __fdiv_rn(1.0f, *d_scale);
    int any = 0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (int k = 0; k < ga.g.count; k++) {
        float *p = ga.g.s[k].grad;
        const size_t n = ga.g.s[k].n;
        int here = 0;
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) {
            const float v = p[i];
            here |= (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;
            p[i] = __fmul_rn(v, inv_scale);
        }
        if (__any_sync(0xffffffffu, here) && (threadIdx.x & 31) == 0)
            atomicMin(first, ga.at[k]);
        any |= here;
    }
    if (__any_sync(0xffffffffu, any) && (threadIdx.x & 31) == 0)
        *found = 1;
}

__global__ void unscale_first_clear_kernel(int *found, int *first)
{
    *found = 0;
    *first = INT_MAX;
}

} // namespace

static int unscale_first(const fp_cuda_segment *segs, size_t nseg, float inv_scale, const float *d_scale, int *d_found,
                         int *d_first, void *stream)
{
    if (!d_found || !d_first || (!segs && nseg))
        return fp_fail(FP_EINVAL, "fp_cuda_unscale_and_check_first: NULL argument");
    if (nseg > (size_t)INT_MAX)
        return fp_fail(FP_EINVAL, "fp_cuda_unscale_and_check_first: %zu segments", nseg);
    for (size_t i = 0; i < nseg; i++)
        if (segs[i].n && !segs[i].grad)
            return fp_fail(FP_EINVAL, "fp_cuda_unscale_and_check_first: segment %zu has %zu values and no grad", i,
                           segs[i].n);
    cudaStream_t st = (cudaStream_t)stream;
    unscale_first_clear_kernel<<<1, 1, 0, st>>>(d_found, d_first);   /* a kernel: no host memory to copy from */
    int rc = fp_cuda_check_launch("unscale: clearing the flags");
    size_t i = 0;
    while (rc == FP_OK && i < nseg) {
        seg_group_at ga;
        ga.g.count = 0;
        size_t most = 0;
        for (; i < nseg && ga.g.count < FP_SEG_GROUP; i++) {   /* fp_seg_group_next, keeping positions */
            if (!segs[i].n)
                continue;
            ga.at[ga.g.count] = (int)i;
            ga.g.s[ga.g.count++] = segs[i];
            most = segs[i].n > most ? segs[i].n : most;
        }
        if (!ga.g.count)
            break;
        unscale_first_kernel<<<fp_cuda_grid(most, 1024), FP_CUDA_THREADS, 0, st>>>(ga, inv_scale, d_scale, d_found,
                                                                                    d_first);
        rc = fp_cuda_check_launch("unscale and check");
    }
    return rc;
}

extern "C" int fp_cuda_unscale_and_check_first(const fp_cuda_segment *segs, size_t nseg, float inv_scale, int *d_found,
                                               int *d_first, void *stream)
{
    return unscale_first(segs, nseg, inv_scale, NULL, d_found, d_first, stream);
}

extern "C" int fp_cuda_unscale_and_check_first_by(const fp_cuda_segment *segs, size_t nseg, const float *d_scale,
                                                  int *d_found, int *d_first, void *stream)
{
    if (!d_scale)
        return fp_fail(FP_EINVAL, "fp_cuda_unscale_and_check_first_by: NULL scale");
    return unscale_first(segs, nseg, 1.0f, d_scale, d_found, d_first, stream);
}

extern "C" int fp_cuda_unscale_and_check(const fp_cuda_segment *segs, size_t nseg, float inv_scale, int *d_found,
                                         void *stream)
{
    if (!d_found || (!segs && nseg))
        return fp_fail(FP_EINVAL, "fp_cuda_unscale_and_check: NULL argument");
    for (size_t i = 0; i < nseg; i++)
        if (segs[i].n && !segs[i].grad)
            return fp_fail(FP_EINVAL, "fp_cuda_unscale_and_check: segment %zu has %zu values and no grad", i, segs[i].n);
    cudaStream_t st = (cudaStream_t)stream;
    int rc = fp_cuda_check(cudaMemsetAsync(d_found, 0, sizeof(int), st), "unscale: clearing the found flag");
    fp_seg_group g;
    size_t i = 0;
    while (rc == FP_OK && i < nseg) {
        size_t most = fp_seg_group_next(&g, segs, nseg, &i);
        if (!g.count)
            break;
        unscale_kernel<<<fp_cuda_grid(most, 1024), FP_CUDA_THREADS, 0, st>>>(g, inv_scale, d_found);
        rc = fp_cuda_check_launch("unscale and check");
    }
    return rc;
}
