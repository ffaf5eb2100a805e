/* convert.cu — grid-stride cast kernels between fp32 and fp16 / bf16 (RNE via cuda_fp16/bf16
 * intrinsics) and their host launchers. Promise: same bits as numfmt.h for non-NaN inputs; a
 * launch error is returned as FP_EINTERNAL with the CUDA message, never aborts. */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "convert.h"
#include "error.h"

namespace {

__global__ void f32_to_f16_kernel(__half *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2half_rn(src[i]);
}

__global__ void f16_to_f32_kernel(float *dst, const __half *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __half2float(src[i]);
}

__global__ void f32_to_bf16_kernel(__nv_bfloat16 *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void bf16_to_f32_kernel(float *dst, const __nv_bfloat16 *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __bfloat162float(src[i]);
}

unsigned grid_for(size_t n)
{
    size_t blocks = (n + 255) / 256;
    return (unsigned)(blocks > 65535 ? 65535 : (blocks ? blocks : 1));
}

int check_launch(const char *what)
{
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return fp_fail(FP_EINTERNAL, "%s: CUDA launch failed: %s", what, cudaGetErrorString(err));
    return FP_OK;
}

} // namespace

extern "C" int fp_cuda_f32_to_f16(uint16_t *dst, const float *src, size_t n, void *stream)
{
    if (n == 0) return FP_OK;
    f32_to_f16_kernel<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>((__half *)dst, src, n);
    return check_launch("fp32->fp16 cast");
}

extern "C" int fp_cuda_f16_to_f32(float *dst, const uint16_t *src, size_t n, void *stream)
{
    if (n == 0) return FP_OK;
    f16_to_f32_kernel<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(dst, (const __half *)src, n);
    return check_launch("fp16->fp32 cast");
}

extern "C" int fp_cuda_f32_to_bf16(uint16_t *dst, const float *src, size_t n, void *stream)
{
    if (n == 0) return FP_OK;
    f32_to_bf16_kernel<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>((__nv_bfloat16 *)dst, src, n);
    return check_launch("fp32->bf16 cast");
}

extern "C" int fp_cuda_bf16_to_f32(float *dst, const uint16_t *src, size_t n, void *stream)
{
    if (n == 0) return FP_OK;
    bf16_to_f32_kernel<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(dst, (const __nv_bfloat16 *)src, n);
    return check_launch("bf16->fp32 cast");
}
