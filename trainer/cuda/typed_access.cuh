/* typed_access.cuh — device-side typed access to fp32 / fp16 / bf16 tensors through fp32, shared by the CUDA
 * kernels (backend_kernels.cu, sync_bn.cu): fp_dev_ld widens element i, fp_dev_rnd rounds an fp32 value to a
 * format and back (round to nearest even; TF32 as lib/numfmt_scalar.c fp_f32_to_tf32), fp_dev_st narrows and
 * stores element i. Promise: the same bits as lib/numfmt's host conversions. */
#ifndef FP_CUDA_TYPED_ACCESS_CUH
#define FP_CUDA_TYPED_ACCESS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "dtype.h"

__device__ __forceinline__ float fp_dev_ld(const void *p, fp_dtype t, size_t i)
{
    if (t == FP_DT_F16)
        return __half2float(((const __half *)p)[i]);
    if (t == FP_DT_BF16)
        return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return ((const float *)p)[i];
}

__device__ __forceinline__ float fp_dev_rnd(float v, fp_dtype t)
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

__device__ __forceinline__ void fp_dev_st(void *p, fp_dtype t, size_t i, float v)
{
    if (t == FP_DT_F16)
        ((__half *)p)[i] = __float2half_rn(v);
    else if (t == FP_DT_BF16)
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else
        ((float *)p)[i] = v;
}

#endif
