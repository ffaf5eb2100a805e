/* update_delta.cu — kernels.h fp_cuda_update_delta: a parameter step's update d = new - old and its lost updates
 * counted on the device (the backend op update_delta, the parameter pass of trainer/analysis/). Promise: bit
 * for bit trainer/layers.h fp_update_delta: d by one round-to-nearest fp32 subtraction (__fsub_rn: never
 * contracted, denormals kept), the same finite-nonzero test on the gradient's bits, IEEE == on the weights
 * (-0 == +0, NaN never equal); exact 64-bit counts; only the two counts come back. */
#include "kernels.h"

#define MAX_BLOCKS 1024u

namespace {

__global__ void update_kernel(float *d, const float *nw, const float *old, const float *g, size_t n,
                              unsigned long long *counts)
{
    unsigned long long lost = 0, moved = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float a = nw[i], b = old[i];
        const unsigned gb = __float_as_uint(g[i]);
        const unsigned m = (gb & 0x7FFFFFFFu) - 1u < 0x7F7FFFFFu;   /* finite and nonzero */
        moved += m;
        lost += m & (unsigned)(a == b);
        d[i] = __fsub_rn(a, b);
    }
    lost = fp_warp_sum(lost);
    moved = fp_warp_sum(moved);
    if ((threadIdx.x & 31) == 0 && moved) {   /* lost <= moved */
        atomicAdd(&counts[0], lost);
        atomicAdd(&counts[1], moved);
    }
}

} // namespace

extern "C" int fp_cuda_update_delta(float *d_d, const float *d_nw, const float *d_old, const float *d_g, size_t n,
                                    size_t *lost, size_t *moved, unsigned long long *d_counts, void *stream)
{
    if (!lost || !moved || !d_counts || (n > 0 && (!d_d || !d_nw || !d_old || !d_g)))
        return fp_fail(FP_EINVAL, "fp_cuda_update_delta: %s is NULL", !lost || !moved ? "a count" : !d_counts ? "the "
                       "counters" : "an array");
    *lost = *moved = 0;
    if (n == 0)
        return FP_OK;
    cudaStream_t st = (cudaStream_t)stream;
    int rc = fp_cuda_check(cudaMemsetAsync(d_counts, 0, 2 * sizeof *d_counts, st), "update_delta: clearing");
    if (rc)
        return rc;
    update_kernel<<<fp_cuda_grid(n, MAX_BLOCKS), FP_CUDA_THREADS, 0, st>>>(d_d, d_nw, d_old, d_g, n, d_counts);
    unsigned long long c[2];
    if ((rc = fp_cuda_check_launch("update_delta")) != FP_OK ||
        (rc = fp_cuda_check(cudaMemcpyAsync(c, d_counts, sizeof c, cudaMemcpyDeviceToHost, st),
                            "update_delta: copying the counts")) != FP_OK ||
        (rc = fp_cuda_check(cudaStreamSynchronize(st), "update_delta")) != FP_OK)
        return rc;
    *lost = (size_t)c[0];
    *moved = (size_t)c[1];
    return FP_OK;
}
