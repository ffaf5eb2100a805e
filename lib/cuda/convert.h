/* convert.h — device-side dtype casts (fp32 <-> fp16 / bf16) for the CUDA backend.
 * Pointers are device pointers; stream is a cudaStream_t (NULL: default stream). Rounding is
 * round-to-nearest-even, equal to lib/numfmt.h's scalar functions for every non-NaN input. */
#ifndef FP_CUDA_CONVERT_H
#define FP_CUDA_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Each returns 0 (FP_OK) or FP_EINTERNAL with fp_error_message() naming the CUDA error. */
int fp_cuda_f32_to_f16(uint16_t *dst, const float *src, size_t n, void *stream);
int fp_cuda_f16_to_f32(float *dst, const uint16_t *src, size_t n, void *stream);
int fp_cuda_f32_to_bf16(uint16_t *dst, const float *src, size_t n, void *stream);
int fp_cuda_bf16_to_f32(float *dst, const uint16_t *src, size_t n, void *stream);

#ifdef __cplusplus
}
#endif

#endif
