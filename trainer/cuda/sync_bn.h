/* sync_bn.h — the CUDA kernels of the synchronised batchnorm (backend.h bn_sync_*, --sync-bn; sync_bn.cu), the
 * CPU backend's trainer/cpu/sync_bn.c on the device: per-channel sums in double (fixed blocks of rows, their
 * partials added in block order: deterministic), carried out in fp32; normalisation and dx from the reduced
 * sums with the CPU's per-channel arithmetic in double. Device pointers (x, y, dy, dx in their own formats: F32,
 * F16 or BF16; everything else fp32); rows = n*h*w, c channels, NHWC; `work` device memory of at least
 * fp_csbn_work_bytes(rows, c); stream a cudaStream_t as void*. Return FP_OK or FP_EINTERNAL naming the CUDA
 * error. Not run on a GPU yet (tests/gpu/test_cuda_sync_bn compares them with the CPU ops). */
#ifndef FP_CUDA_SYNC_BN_H
#define FP_CUDA_SYNC_BN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "../precision.h"   /* fp_dtype (relative: nvcc sees only lib/ on its include path) */

/* Bytes of the work buffer for a layer of rows x c: the blocks' double partials, or 3c floats of
 * per-channel coefficients, whichever is larger. */
size_t fp_csbn_work_bytes(size_t rows, int c);
/* acc[0..2c] = [sum(x - k), sum((x - k)^2), rows], k[j] = center[j] / center[2c] in fp32 (center NULL: 0). */
int fp_csbn_stats(float *acc, const void *x, fp_dtype xt, size_t rows, int c, const float *center, void *work,
                  void *stream);
/* From a1, a2 (backend.h bn_sync_forward): save, the running stats (may be NULL; not updated when the global
 * count N <= 1, where the CPU refuses: it cannot be read on the host without a wait), y. */
int fp_csbn_forward(void *y, fp_dtype yt, float *save, float *running_mean, float *running_var, const void *x,
                    fp_dtype xt, size_t rows, int c, const float *gamma, const float *beta, const float *a1,
                    const float *a2, float eps, float momentum, void *work, void *stream);
/* acc = [sum dy, sum dy * xhat, rows]; dgamma += sum dy * xhat, dbeta += sum dy (either may be NULL). */
int fp_csbn_backward_sums(float *acc, float *dgamma, float *dbeta, const void *dy, fp_dtype dyt, const void *x,
                          fp_dtype xt, size_t rows, int c, const float *save, void *work, void *stream);
/* dx (backend.h's accumulate rule) = gamma * invstd * (dy - acc[j] / N - xhat * acc[c + j] / N). */
int fp_csbn_backward_dx(void *dx, fp_dtype dxt, const void *dy, fp_dtype dyt, const void *x, fp_dtype xt, size_t rows,
                        int c, const float *gamma, const float *save, const float *acc, int accumulate, void *work,
                        void *stream);

#ifdef __cplusplus
}
#endif

#endif
