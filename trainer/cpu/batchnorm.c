/* batchnorm.c — batch normalisation over N*H*W per channel (NHWC, channel innermost) on the CPU.
 * Promises: PyTorch's semantics (biased variance to normalise, unbiased into running_var, running =
 * (1-m)*running + m*batch); statistics and gradient sums accumulated in double; backward += . */
/* GCC 12 at -O2 vectorises only loops with known trip counts: turn on the usual loop vectoriser. */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include "error.h"
#include "trainer/layers.h"

static int bn_check(const char *fn, fp_dims xd, size_t *rows)
{
    if (xd.n <= 0 || xd.h <= 0 || xd.w <= 0 || xd.c <= 0)
        return fp_fail(FP_EINVAL, "%s: bad dims n=%d h=%d w=%d c=%d", fn, xd.n, xd.h, xd.w, xd.c);
    *rows = (size_t)xd.n * (size_t)xd.h * (size_t)xd.w;
    return FP_OK;
}

/* Per-channel sum and sum of squares of x over all rows, in double. */
static void channel_sums(double *restrict s1, double *restrict s2, const float *restrict x, size_t rows, int C)
{
    for (int c = 0; c < C; c++)
        s1[c] = s2[c] = 0.0;
    for (size_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * (size_t)C;
        for (int c = 0; c < C; c++) {
            double v = xr[c];
            s1[c] += v;
            s2[c] += v * v;
        }
    }
}

/* y = x * scale + shift per channel. y may alias x. */
static void scale_shift(float *y, const float *x, size_t rows, int C, const float *restrict scale,
                        const float *restrict shift)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * (size_t)C;
        float *yr = y + r * (size_t)C;
        for (int c = 0; c < C; c++)
            yr[c] = xr[c] * scale[c] + shift[c];
    }
}

int fp_batchnorm_forward_train(float *y, float *save_mean, float *save_invstd, float *running_mean,
                               float *running_var, const float *x, fp_dims xd, const float *gamma,
                               const float *beta, const fp_bn_params *p)
{
    size_t rows = 0;
    int rc = bn_check("fp_batchnorm_forward_train", xd, &rows);
    if (rc)
        return rc;
    if (!y || !x || !gamma || !beta || !p)
        return fp_fail(FP_EINVAL, "fp_batchnorm_forward_train: NULL argument");
    if (rows < 2)
        return fp_fail(FP_EINVAL, "fp_batchnorm_forward_train: need more than one value per channel (n*h*w = %zu)",
                       rows);
    if (!(p->eps > 0.0f) || !(p->momentum >= 0.0f && p->momentum <= 1.0f))
        return fp_fail(FP_EINVAL, "fp_batchnorm_forward_train: bad eps %g or momentum %g", p->eps, p->momentum);
    int C = xd.c;
    double *s = malloc((size_t)C * (2 * sizeof(double) + 2 * sizeof(float)));
    if (!s)
        return fp_fail(FP_ENOMEM, "fp_batchnorm_forward_train: out of memory (%d channels)", C);
    double *s2 = s + C;
    float *scale = (float *)(s2 + C), *shift = scale + C;
    channel_sums(s, s2, x, rows, C);
    double m = (double)p->momentum;
    for (int c = 0; c < C; c++) {
        double mean = s[c] / (double)rows;
        double var = s2[c] / (double)rows - mean * mean;
        if (var < 0.0)
            var = 0.0;
        double invstd = 1.0 / sqrt(var + (double)p->eps);
        if (save_mean)
            save_mean[c] = (float)mean;
        if (save_invstd)
            save_invstd[c] = (float)invstd;
        if (running_mean)
            running_mean[c] = (float)((1.0 - m) * running_mean[c] + m * mean);
        if (running_var)
            running_var[c] = (float)((1.0 - m) * running_var[c] + m * var * (double)rows / (double)(rows - 1));
        scale[c] = (float)(gamma[c] * invstd);
        shift[c] = (float)(beta[c] - mean * gamma[c] * invstd);
    }
    scale_shift(y, x, rows, C, scale, shift);
    free(s);
    return FP_OK;
}

int fp_batchnorm_forward_eval(float *y, const float *x, fp_dims xd, const float *gamma, const float *beta,
                              const float *running_mean, const float *running_var, const fp_bn_params *p)
{
    size_t rows = 0;
    int rc = bn_check("fp_batchnorm_forward_eval", xd, &rows);
    if (rc)
        return rc;
    if (!y || !x || !gamma || !beta || !running_mean || !running_var || !p)
        return fp_fail(FP_EINVAL, "fp_batchnorm_forward_eval: NULL argument");
    if (!(p->eps > 0.0f))
        return fp_fail(FP_EINVAL, "fp_batchnorm_forward_eval: bad eps %g", p->eps);
    int C = xd.c;
    float *scale = malloc((size_t)C * 2 * sizeof(float));
    if (!scale)
        return fp_fail(FP_ENOMEM, "fp_batchnorm_forward_eval: out of memory (%d channels)", C);
    float *shift = scale + C;
    for (int c = 0; c < C; c++) {
        double invstd = 1.0 / sqrt((double)running_var[c] + (double)p->eps);
        scale[c] = (float)(gamma[c] * invstd);
        shift[c] = (float)(beta[c] - running_mean[c] * (double)gamma[c] * invstd);
    }
    scale_shift(y, x, rows, C, scale, shift);
    free(scale);
    return FP_OK;
}

/* With xhat = (x - mean) * invstd, M = n*h*w:
 *   dbeta = sum dy, dgamma = sum dy * xhat,
 *   dx = gamma * invstd / M * (M * dy - dbeta - xhat * dgamma). */
int fp_batchnorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x, fp_dims xd,
                          const float *gamma, const float *save_mean, const float *save_invstd)
{
    size_t rows = 0;
    int rc = bn_check("fp_batchnorm_backward", xd, &rows);
    if (rc)
        return rc;
    if (!dy || !x || !save_mean || !save_invstd || (dx && !gamma))
        return fp_fail(FP_EINVAL, "fp_batchnorm_backward: NULL argument");
    int C = xd.c;
    double *sdy = malloc((size_t)C * (2 * sizeof(double) + 3 * sizeof(float)));
    if (!sdy)
        return fp_fail(FP_ENOMEM, "fp_batchnorm_backward: out of memory (%d channels)", C);
    double *sdyx = sdy + C;
    float *a = (float *)(sdyx + C), *b = a + C, *k = b + C;
    for (int c = 0; c < C; c++)
        sdy[c] = sdyx[c] = 0.0;
    /* Pass 1: sums of dy and dy * (x - mean); invstd is applied per channel afterwards. */
    for (size_t r = 0; r < rows; r++) {
        const float *restrict dyr = dy + r * (size_t)C;
        const float *restrict xr = x + r * (size_t)C;
        for (int c = 0; c < C; c++) {
            double g = dyr[c];
            sdy[c] += g;
            sdyx[c] += g * ((double)xr[c] - (double)save_mean[c]);
        }
    }
    for (int c = 0; c < C; c++) {
        double inv = save_invstd[c];
        double db = sdy[c], dg = sdyx[c] * inv;
        if (dbeta)
            dbeta[c] += (float)db;
        if (dgamma)
            dgamma[c] += (float)dg;
        if (dx) {
            /* dx = k*dy + a*(x - mean) + b with k = gamma*inv, a = -k*inv*dg/M, b = -k*db/M */
            double kk = (double)gamma[c] * inv;
            double aa = -kk * inv * dg / (double)rows;
            k[c] = (float)kk;
            a[c] = (float)aa;
            b[c] = (float)(-kk * db / (double)rows);
        }
    }
    if (dx) {
        for (size_t r = 0; r < rows; r++) {
            const float *restrict dyr = dy + r * (size_t)C;
            const float *restrict xr = x + r * (size_t)C;
            float *restrict dxr = dx + r * (size_t)C;
            for (int c = 0; c < C; c++)
                dxr[c] += k[c] * dyr[c] + a[c] * (xr[c] - save_mean[c]) + b[c];
        }
    }
    free(sdy);
    return FP_OK;
}
