/* sync_bn.cu — sync_bn.h: the synchronised batchnorm's kernels. Sums: block b of SBN_ROWS rows keeps per
 * channel double partials (thread t takes channels t, t + 256, ...; rows in order), a second kernel adds the
 * blocks' partials in block order per channel. Per-channel arithmetic in double as trainer/cpu/sync_bn.c;
 * element-wise passes y = x*scale + shift and dx = k*dy + a*(x - mean) + b in fp32 with __fmul_rn / __fadd_rn.
 * Promise: the CPU ops' results up to summation order (compiled here, not yet run on a GPU). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "backend_kernels.h"
#include "kernels.h"
#include "sync_bn.h"
#include "typed_access.cuh"

#define SBN_THREADS 256
#define SBN_ROWS 64u                   /* rows per block of the sums */
#define SBN_MAX_PARTS ((size_t)1 << 18) /* doubles of partials at most: blocks grow their rows beyond that */

#define GRID_STRIDE(i, n) for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
                               i += (size_t)gridDim.x * blockDim.x)

/* Rows per block: SBN_ROWS, more when the partials of rows / SBN_ROWS blocks would pass SBN_MAX_PARTS. */
static size_t rows_per_block(size_t rows, int c)
{
    size_t per = SBN_ROWS, cap = SBN_MAX_PARTS / (2 * (size_t)c);
    if (cap < 1)
        cap = 1;
    while ((rows + per - 1) / per > cap)
        per *= 2;
    return per;
}

static size_t blocks_of(size_t rows, int c)
{
    size_t per = rows_per_block(rows, c);
    return (rows + per - 1) / per;
}

extern "C" size_t fp_csbn_work_bytes(size_t rows, int c)
{
    size_t parts = blocks_of(rows, c) * 2 * (size_t)c * sizeof(double), coef = 3 * (size_t)c * sizeof(float);
    return parts > coef ? parts : coef;
}

/* The two per-block sums: mode 0 sum(x - k) and sum((x - k)^2) (k from center, or 0); mode 1 sum(dy) and
 * sum(dy * (x - mean)) (mean from save). Partials at part[b * 2c + j] and part[b * 2c + c + j]. */
__global__ void k_partials(double *part, const void *x, fp_dtype xt, const void *dy, fp_dtype dyt, size_t rows,
                           int c, size_t per, const float *center, const float *save, int mode)
{
    size_t b = blockIdx.x, r0 = b * per, r1 = r0 + per < rows ? r0 + per : rows;
    for (int j = threadIdx.x; j < c; j += blockDim.x) {
        double s1 = 0.0, s2 = 0.0;
        if (mode == 0) {
            double k = center ? (double)__fdiv_rn(center[j], center[2 * c]) : 0.0;
            for (size_t r = r0; r < r1; r++) {
                double v = (double)fp_dev_ld(x, xt, r * (size_t)c + j) - k;
                s1 += v;
                s2 += v * v;
            }
        } else {
            double m = (double)save[j];
            for (size_t r = r0; r < r1; r++) {
                double g = (double)fp_dev_ld(dy, dyt, r * (size_t)c + j);
                s1 += g;
                s2 += g * ((double)fp_dev_ld(x, xt, r * (size_t)c + j) - m);
            }
        }
        part[b * 2 * (size_t)c + j] = s1;
        part[b * 2 * (size_t)c + c + j] = s2;
    }
}

/* The blocks' partials in block order: acc = [s1, s2 (times invstd in mode 1), rows]; mode 1 also adds them into
 * dgamma / dbeta (when given). */
__global__ void k_finish(float *acc, const double *part, size_t nb, size_t rows, int c, const float *save,
                         float *dgamma, float *dbeta, int mode)
{
    GRID_STRIDE(j, (size_t)c) {
        double s1 = 0.0, s2 = 0.0;
        for (size_t b = 0; b < nb; b++) {
            s1 += part[b * 2 * (size_t)c + j];
            s2 += part[b * 2 * (size_t)c + c + j];
        }
        if (mode == 1)
            s2 *= (double)save[c + j];
        acc[j] = (float)s1;
        acc[c + j] = (float)s2;
        if (mode == 1 && dbeta)
            dbeta[j] = __fadd_rn(dbeta[j], (float)s1);
        if (mode == 1 && dgamma)
            dgamma[j] = __fadd_rn(dgamma[j], (float)s2);
        if (j == 0)
            acc[2 * c] = (float)rows;
    }
}

static int sums(float *acc, const void *x, fp_dtype xt, const void *dy, fp_dtype dyt, size_t rows, int c,
                const float *center, const float *save, float *dgamma, float *dbeta, int mode, void *work, void *stream)
{
    size_t per = rows_per_block(rows, c), nb = (rows + per - 1) / per;
    cudaStream_t s = (cudaStream_t)stream;
    k_partials<<<(unsigned)nb, SBN_THREADS, 0, s>>>((double *)work, x, xt, dy, dyt, rows, c, per, center, save, mode);
    int rc = fp_cuda_check_launch("bn_sync sums");
    if (rc)
        return rc;
    k_finish<<<fp_cbk_grid((size_t)c), SBN_THREADS, 0, s>>>(acc, (const double *)work, nb, rows, c, save, dgamma,
                                                          dbeta, mode);
    return fp_cuda_check_launch("bn_sync sums");
}

extern "C" int fp_csbn_stats(float *acc, const void *x, fp_dtype xt, size_t rows, int c, const float *center,
                             void *work, void *stream)
{
    return sums(acc, x, xt, NULL, FP_DT_F32, rows, c, center, NULL, NULL, NULL, 0, work, stream);
}

extern "C" int fp_csbn_backward_sums(float *acc, float *dgamma, float *dbeta, const void *dy, fp_dtype dyt,
                                     const void *x, fp_dtype xt, size_t rows, int c, const float *save, void *work,
                                     void *stream)
{
    return sums(acc, x, xt, dy, dyt, rows, c, NULL, save, dgamma, dbeta, 1, work, stream);
}

/* Per channel: the global mean / variance from a1, a2 (trainer/cpu/sync_bn.c's arithmetic), save, the running
 * statistics, and scale / shift into coef[0..c), coef[c..2c). */
__global__ void k_forward_stats(float *coef, float *save, float *rm, float *rv, const float *gamma,
                                const float *beta, const float *a1, const float *a2, int c, float eps, float momentum)
{
    GRID_STRIDE(j, (size_t)c) {
        double N = (double)a2[2 * c], mom = (double)momentum;
        double d1 = (double)a2[j] / N;
        double mean = (double)__fdiv_rn(a1[j], a1[2 * c]) + d1;
        double var = (double)a2[c + j] / N - d1 * d1;
        if (var < 0.0)
            var = 0.0;
        double invstd = 1.0 / sqrt(var + (double)eps);
        save[j] = (float)mean;
        save[c + j] = (float)invstd;
        if (rm && N > 1.0)
            rm[j] = (float)((1.0 - mom) * rm[j] + mom * mean);
        if (rv && N > 1.0)
            rv[j] = (float)((1.0 - mom) * rv[j] + mom * var * N / (N - 1.0));
        coef[j] = (float)(gamma[j] * invstd);
        coef[c + j] = (float)(beta[j] - mean * gamma[j] * invstd);
    }
}

__global__ void k_scale_shift(void *y, fp_dtype yt, const void *x, fp_dtype xt, size_t n, int c, const float *coef)
{
    GRID_STRIDE(i, n) {
        int j = (int)(i % (size_t)c);
        fp_dev_st(y, yt, i, __fadd_rn(__fmul_rn(fp_dev_ld(x, xt, i), coef[j]), coef[c + j]));
    }
}

extern "C" int fp_csbn_forward(void *y, fp_dtype yt, float *save, float *running_mean, float *running_var,
                               const void *x, fp_dtype xt, size_t rows, int c, const float *gamma, const float *beta,
                               const float *a1, const float *a2, float eps, float momentum, void *work, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    float *coef = (float *)work;
    k_forward_stats<<<fp_cbk_grid((size_t)c), SBN_THREADS, 0, s>>>(coef, save, running_mean, running_var, gamma, beta,
                                                                 a1, a2, c, eps, momentum);
    int rc = fp_cuda_check_launch("bn_sync_forward");
    if (rc)
        return rc;
    size_t n = rows * (size_t)c;
    k_scale_shift<<<fp_cbk_grid(n), SBN_THREADS, 0, s>>>(y, yt, x, xt, n, c, coef);
    return fp_cuda_check_launch("bn_sync_forward");
}

/* Per channel: dx = k*dy + a*(x - mean) + b with k = gamma*invstd, a = -k*invstd*acc[c + j]/N, b = -k*acc[j]/N. */
__global__ void k_dx_coef(float *coef, const float *gamma, const float *save, const float *acc, int c)
{
    GRID_STRIDE(j, (size_t)c) {
        double N = (double)acc[2 * c], in = (double)save[c + j], kk = (double)gamma[j] * in;
        coef[j] = (float)kk;
        coef[c + j] = (float)(-kk * in * (double)acc[c + j] / N);
        coef[2 * c + j] = (float)(-kk * (double)acc[j] / N);
    }
}

/* r = k*dy + a*(x - mean) + b; dx = accumulate ? (16-bit: round(old + round(r)); fp32: old + r) : round(r). */
__global__ void k_dx(void *dx, fp_dtype dxt, const void *dy, fp_dtype dyt, const void *x, fp_dtype xt, size_t n,
                     int c, const float *coef, const float *save, int accumulate)
{
    GRID_STRIDE(i, n) {
        int j = (int)(i % (size_t)c);
        float r = __fadd_rn(__fadd_rn(__fmul_rn(coef[j], fp_dev_ld(dy, dyt, i)),
                                      __fmul_rn(coef[c + j], __fsub_rn(fp_dev_ld(x, xt, i), save[j]))),
                            coef[2 * c + j]);
        if (accumulate)
            r = __fadd_rn(fp_dev_ld(dx, dxt, i), dxt == FP_DT_F32 ? r : fp_dev_rnd(r, dxt));
        fp_dev_st(dx, dxt, i, r);
    }
}

extern "C" int fp_csbn_backward_dx(void *dx, fp_dtype dxt, const void *dy, fp_dtype dyt, const void *x, fp_dtype xt,
                                   size_t rows, int c, const float *gamma, const float *save, const float *acc,
                                   int accumulate, void *work, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    float *coef = (float *)work;
    k_dx_coef<<<fp_cbk_grid((size_t)c), SBN_THREADS, 0, s>>>(coef, gamma, save, acc, c);
    int rc = fp_cuda_check_launch("bn_sync_backward_dx");
    if (rc)
        return rc;
    size_t n = rows * (size_t)c;
    k_dx<<<fp_cbk_grid(n), SBN_THREADS, 0, s>>>(dx, dxt, dy, dyt, x, xt, n, c, coef, save, accumulate);
    return fp_cuda_check_launch("bn_sync_backward_dx");
}
