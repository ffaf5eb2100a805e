/* amp.cu — the fused unscale + non-finite check of all gradients (trainer/precision.c
 * fp_unscale_and_check over many segments): g *= inv_scale in place, and one device flag set when any
 * value's exponent was all ones (Inf or NaN) before scaling, as torch's _amp_foreach_non_finite_check_and_unscale_. */
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

} // namespace

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
