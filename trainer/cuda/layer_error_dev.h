/* layer_error_dev.h — the per-layer rounding error's sums on the device, for trainer/analysis (analysis.h
 * fp_layer_error_on): the kernel (layer_error.cu) and its call on a CUDA backend instance
 * (backend_cuda_elementwise.c).
 * Promises: only the five sums come back to the host. Declared in every build, defined only where HAVE_CUDA
 * is set: callers guard their calls with it. */
#ifndef FP_LAYER_ERROR_DEV_H
#define FP_LAYER_ERROR_DEV_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "dtype.h"

struct fp_backend;

/* The sums behind fp_layer_error (trainer/analysis/precision_internal.h fp_err_acc, without its flag: a sum
 * is non-finite exactly when x or ref holds a non-finite value): sum (x - r)^2, r^2, x^2 and x * r in
 * double, and max |x - r| (a NaN difference never counts). */
typedef struct {
    double dd, rr, xx, xr, maxabs;
} fp_cuda_err_sums;

/* d_x (n values of x_dtype: fp32, or fp16 / bf16 bit patterns) against the fp32 d_ref, both device memory,
 * summed on stream (cudaStream_t as void*): per-block partial sums, then one thread adds the blocks' in block
 * order; only *out comes back. d_work: device scratch of kernels.h fp_cuda_layer_error_work_bytes().
 * Synchronises the stream. FP_EINVAL (nothing launched) for a NULL argument or another dtype. */
int fp_cuda_layer_error_sums(const float *d_ref, const void *d_x, fp_dtype x_dtype, size_t n, fp_cuda_err_sums *out,
                             void *d_work, void *stream);

/* The same on the CUDA backend instance be (trainer/backend_cuda.h): ref and x in device memory of its GPU,
 * summed on be's stream after the work queued there (work on another stream that writes them must be
 * finished first), with a workspace of the instance's own (accounted as staging: backend.h memory). n > 0
 * costs one host wait (fp_backend_cuda_host_waits); n = 0 gives zeros without one. FP_ENOMEM when the
 * workspace cannot be had. */
int fp_backend_cuda_layer_error_sums(struct fp_backend *be, const float *ref, const void *x, fp_dtype dt, size_t n,
                                     fp_cuda_err_sums *out);

#ifdef __cplusplus
}
#endif

#endif
