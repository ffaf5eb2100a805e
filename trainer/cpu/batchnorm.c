/* batchnorm.c — batch normalisation over N*H*W per channel (NHWC, channel innermost) on the CPU.
 * Promises: PyTorch's semantics (biased variance to normalise, unbiased into running_var, running =
 * (1-m)*running + m*batch); statistics and gradient sums accumulated in double; backward += .
 * The fused batchnorm (+ add) + relu pair runs the same arithmetic in one pass each way (layers.h). */
/* GCC 12 at -O2 vectorises only loops with known trip counts: turn on the usual loop vectoriser. */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include "error.h"
#include "thread_pool.h"
#include "trainer/layers.h"

/* Threading (lib/thread_pool.h): every pass splits the rows. The per-channel reductions sum
 * fixed blocks of BN_BLOCK_ROWS rows each into its own partial sums (rows in order), then add the
 * partials in block order: the blocks do not depend on the thread count, so neither do the results,
 * and each thread streams whole rows (a channel split would stride through every row). Each block's
 * partials start on a 64-byte boundary, so two threads never write the same cache line. */
#define BN_BLOCK_ROWS 256
#define BN_PAR_MIN ((size_t)1 << 15)   /* elements per thread below which a pass stays serial */
#define BN_MASK_CHUNK 256              /* channels masked at a time in the fused backward's sums */

static size_t bn_blocks(size_t rows)
{
    return (rows + BN_BLOCK_ROWS - 1) / BN_BLOCK_ROWS;
}

static size_t bn_min_blocks(int C)
{
    return BN_PAR_MIN / ((size_t)BN_BLOCK_ROWS * (size_t)C) + 1;
}

/* Doubles per block of partials: two sums per channel, rounded up to a cache line. */
static size_t bn_block_stride(int C)
{
    return ((size_t)2 * (size_t)C + 7) / 8 * 8;
}

static size_t bn_min_rows(int C)
{
    return BN_PAR_MIN / (size_t)C + 1;
}

/* 64-byte aligned scratch of `bytes` (rounded up to a multiple of 64). */
static void *bn_scratch(size_t bytes)
{
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

/* A pass's scratch: the blocks' partials, then two sums of C doubles each (*s1, *s2), then nf * C floats (*f); NULL
 * with the message set. */
static double *pass_scratch(const char *fn, size_t rows, int C, int nf, double **s1, double **s2, float **f)
{
    size_t parts = bn_blocks(rows) * bn_block_stride(C);
    double *scratch = bn_scratch((parts + 2 * (size_t)C) * sizeof(double) + (size_t)nf * (size_t)C * sizeof(float));
    if (!scratch) {
        fp_fail(FP_ENOMEM, "%s: out of memory (%d channels)", fn, C);
        return NULL;
    }
    *s1 = scratch + parts;
    *s2 = *s1 + C;
    *f = (float *)(*s2 + C);
    return scratch;
}

static int bn_check(const char *fn, fp_dims xd, size_t *rows)
{
    if (xd.n <= 0 || xd.h <= 0 || xd.w <= 0 || xd.c <= 0)
        return fp_fail(FP_EINVAL, "%s: bad dims n=%d h=%d w=%d c=%d", fn, xd.n, xd.h, xd.w, xd.c);
    *rows = (size_t)xd.n * (size_t)xd.h * (size_t)xd.w;
    return FP_OK;
}

typedef struct {
    double *part;              /* per block: s1[C], s2[C] at part + block * bn_block_stride(C) */
    float *y;
    const float *x, *dy, *mean;
    const float *scale, *shift, *a, *b;
    int act;                   /* fused forward: y = relu(bn(x) (+ z)) */
    const float *z;            /* fused forward: the residual (NULL: none) */
    const float *ymask;        /* fused backward: the forward's relu output (the mask); NULL: unfused */
    float *dz;                 /* fused backward: the residual's gradient (NULL: skipped) */
    int acc_dz;                /* 1: dz += g, 0: dz = g */
    size_t rows;
    int C;
} bn_task;

/* Rows [*r0, *r1) of block k, and its partials s1 = out, s2 = out + C, zeroed. */
static double *block_rows(const bn_task *t, size_t k, size_t *r0, size_t *r1)
{
    const size_t C = (size_t)t->C;
    *r0 = k * BN_BLOCK_ROWS;
    *r1 = *r0 + BN_BLOCK_ROWS < t->rows ? *r0 + BN_BLOCK_ROWS : t->rows;
    double *restrict s1 = t->part + k * bn_block_stride(t->C), *restrict s2 = s1 + C;
    for (size_t c = 0; c < C; c++)
        s1[c] = s2[c] = 0.0;
    return s1;
}

/* Per block of [k0, k1): per-channel sum and sum of squares of x over its rows, in double. */
static void channel_sums(void *ctx, size_t k0, size_t k1)
{
    const bn_task *t = ctx;
    const size_t C = (size_t)t->C;
    for (size_t k = k0; k < k1; k++) {
        size_t r0, r1;
        double *restrict s1 = block_rows(t, k, &r0, &r1), *restrict s2 = s1 + C;
        for (size_t r = r0; r < r1; r++) {
            const float *restrict xr = t->x + r * C;
            for (size_t c = 0; c < C; c++) {
                double v = xr[c];
                s1[c] += v;
                s2[c] += v * v;
            }
        }
    }
}

/* The blocks' partials run by fn, added in block order into s1[C], s2[C]. */
static void block_reduce(bn_task *t, fp_range_fn fn, double *s1, double *s2)
{
    size_t nb = bn_blocks(t->rows), C = (size_t)t->C;
    fp_parallel_for(nb, 1, bn_min_blocks(t->C), fn, t);
    for (size_t c = 0; c < C; c++)
        s1[c] = s2[c] = 0.0;
    for (size_t k = 0; k < nb; k++) {
        const double *p = t->part + k * bn_block_stride(t->C);
        for (size_t c = 0; c < C; c++) {
            s1[c] += p[c];
            s2[c] += p[C + c];
        }
    }
}

/* y = x * scale + shift per channel, rows [r0, r1); the fused pass (act): y = relu(x * scale + shift (+ z)), each
 * step the unfused ops' fp32 arithmetic (the above, then fp_add_forward, then fp_relu_forward). y may alias x or z. */
static void scale_shift(void *ctx, size_t r0, size_t r1)
{
    const bn_task *t = ctx;
    const float *restrict scale = t->scale, *restrict shift = t->shift;
    const size_t C = (size_t)t->C;
    for (size_t r = r0; r < r1; r++) {
        const float *xr = t->x + r * C;
        float *yr = t->y + r * C;
        if (!t->act) {
            for (size_t c = 0; c < C; c++)
                yr[c] = xr[c] * scale[c] + shift[c];
        } else if (t->z) {
            const float *zr = t->z + r * C;
            for (size_t c = 0; c < C; c++) {
                float v = xr[c] * scale[c] + shift[c];
                v = v + zr[c];
                yr[c] = v < 0.0f ? 0.0f : v;
            }
        } else {
            for (size_t c = 0; c < C; c++) {
                float v = xr[c] * scale[c] + shift[c];
                yr[c] = v < 0.0f ? 0.0f : v;
            }
        }
    }
}

/* scale_shift over every row (act, z: the fused pass). */
static void scale_shift_par(float *y, const float *x, const float *z, int act, size_t rows, int C, const float *scale,
                            const float *shift)
{
    bn_task t = {.y = y, .x = x, .z = z, .act = act, .scale = scale, .shift = shift, .rows = rows, .C = C};
    fp_parallel_for(rows, 1, bn_min_rows(C), scale_shift, &t);
}

/* Training forward, unfused (act 0: y = bn(x)) or fused (act 1: y = relu(bn(x) + z), z may be NULL). */
static int bn_train(const char *fn, float *y, float *save_mean, float *save_invstd, float *running_mean,
                    float *running_var, const float *x, const float *z, int act, fp_dims xd, const float *gamma,
                    const float *beta, const fp_bn_params *p)
{
    size_t rows = 0;
    int rc = bn_check(fn, xd, &rows);
    if (rc)
        return rc;
    if (!y || !x || !gamma || !beta || !p)
        return fp_fail(FP_EINVAL, "%s: NULL argument", fn);
    if (rows < 2)
        return fp_fail(FP_EINVAL, "%s: need more than one value per channel (n*h*w = %zu)", fn, rows);
    if (!(p->eps > 0.0f) || !(p->momentum >= 0.0f && p->momentum <= 1.0f))
        return fp_fail(FP_EINVAL, "%s: bad eps %g or momentum %g", fn, p->eps, p->momentum);
    int C = xd.c;
    double *s, *s2;
    float *scale;
    double *scratch = pass_scratch(fn, rows, C, 2, &s, &s2, &scale);
    if (!scratch)
        return FP_ENOMEM;
    float *shift = scale + C;
    bn_task t = {.part = scratch, .x = x, .rows = rows, .C = C};
    block_reduce(&t, channel_sums, s, s2);
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
    scale_shift_par(y, x, z, act, rows, C, scale, shift);
    free(scratch);
    return FP_OK;
}

int fp_batchnorm_forward_train(float *y, float *save_mean, float *save_invstd, float *running_mean,
                               float *running_var, const float *x, fp_dims xd, const float *gamma,
                               const float *beta, const fp_bn_params *p)
{
    return bn_train("fp_batchnorm_forward_train", y, save_mean, save_invstd, running_mean, running_var, x, NULL, 0,
                    xd, gamma, beta, p);
}

int fp_batchnorm_relu_forward_train(float *y, float *save_mean, float *save_invstd, float *running_mean,
                                    float *running_var, const float *x, const float *z, fp_dims xd,
                                    const float *gamma, const float *beta, const fp_bn_params *p)
{
    return bn_train("fp_batchnorm_relu_forward_train", y, save_mean, save_invstd, running_mean, running_var, x, z,
                    1, xd, gamma, beta, p);
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
    scale_shift_par(y, x, NULL, 0, rows, C, scale, shift);
    free(scale);
    return FP_OK;
}

/* dz = (or +=, acc) y > 0 ? dy : 0 over one row of C: the relu / add backward's gradient of the residual. */
static void mask_row(float *restrict dz, const float *restrict dy, const float *restrict y, size_t C, int acc)
{
    /* dy loaded unconditionally in each loop, so that they vectorise (elementwise.c's relu_bwd) */
    if (acc)
        for (size_t c = 0; c < C; c++) {
            float g = dy[c];
            dz[c] += y[c] > 0.0f ? g : 0.0f;
        }
    else
        for (size_t c = 0; c < C; c++) {
            float g = dy[c];
            dz[c] = y[c] > 0.0f ? g : 0.0f;
        }
}

/* Backward pass 1, per block of [k0, k1): sums of dy and dy * (x - mean) over its rows (invstd
 * applied afterwards). */
static void bwd_sums(void *ctx, size_t k0, size_t k1)
{
    const bn_task *t = ctx;
    const float *restrict save_mean = t->mean;
    const size_t C = (size_t)t->C;
    for (size_t k = k0; k < k1; k++) {
        size_t r0, r1;
        double *restrict sdy = block_rows(t, k, &r0, &r1), *restrict sdyx = sdy + C;
        for (size_t r = r0; r < r1; r++) {
            const float *restrict dyr = t->dy + r * C;
            const float *restrict xr = t->x + r * C;
            if (t->ymask) {   /* fused: g = relu's masked dy, written to dz on the way (row in cache) */
                const float *restrict yr = t->ymask + r * C;
                if (t->dz)
                    mask_row(t->dz + r * C, dyr, yr, C, t->acc_dz);
                for (size_t c0 = 0; c0 < C; c0 += BN_MASK_CHUNK) {   /* the float select apart: it vectorises */
                    size_t n = C - c0 < BN_MASK_CHUNK ? C - c0 : BN_MASK_CHUNK;
                    float gb[BN_MASK_CHUNK];
                    for (size_t c = 0; c < n; c++) {
                        float d = dyr[c0 + c];
                        gb[c] = yr[c0 + c] > 0.0f ? d : 0.0f;
                    }
                    for (size_t c = 0; c < n; c++) {
                        double g = gb[c];
                        sdy[c0 + c] += g;
                        sdyx[c0 + c] += g * ((double)xr[c0 + c] - (double)save_mean[c0 + c]);
                    }
                }
                continue;
            }
            for (size_t c = 0; c < C; c++) {
                double g = dyr[c];
                sdy[c] += g;
                sdyx[c] += g * ((double)xr[c] - (double)save_mean[c]);
            }
        }
    }
}

/* Backward pass 2, rows [r0, r1): dx += k*dy + a*(x - mean) + b. */
static void bwd_dx(void *ctx, size_t r0, size_t r1)
{
    const bn_task *t = ctx;
    const float *restrict k = t->scale, *restrict a = t->a, *restrict b = t->b, *restrict save_mean = t->mean;
    const size_t C = (size_t)t->C;
    for (size_t r = r0; r < r1; r++) {
        const float *restrict dyr = t->dy + r * C;
        const float *restrict xr = t->x + r * C;
        float *restrict dxr = t->y + r * C;
        if (t->ymask) {   /* fused: the relu mask applied on the fly */
            const float *restrict yr = t->ymask + r * C;
            for (size_t c = 0; c < C; c++) {
                float d = dyr[c];
                float g = yr[c] > 0.0f ? d : 0.0f;
                dxr[c] += k[c] * g + a[c] * (xr[c] - save_mean[c]) + b[c];
            }
            continue;
        }
        for (size_t c = 0; c < C; c++)
            dxr[c] += k[c] * dyr[c] + a[c] * (xr[c] - save_mean[c]) + b[c];
    }
}

/* With xhat = (x - mean) * invstd, M = n*h*w:
 *   dbeta = sum dy, dgamma = sum dy * xhat,
 *   dx = gamma * invstd / M * (M * dy - dbeta - xhat * dgamma). */
/* Backward, unfused (ymask NULL) or fused (g = ymask > 0 ? dy : 0, written to dz when given). */
static int bn_back(const char *fn, float *dx, float *dz, int acc_dz, float *dgamma, float *dbeta, const float *dy,
                   const float *ymask, const float *x, fp_dims xd, const float *gamma, const float *save_mean,
                   const float *save_invstd)
{
    size_t rows = 0;
    int rc = bn_check(fn, xd, &rows);
    if (rc)
        return rc;
    if (!dy || !x || !save_mean || !save_invstd || (dx && !gamma))
        return fp_fail(FP_EINVAL, "%s: NULL argument", fn);
    int C = xd.c;
    double *sdy, *sdyx;
    float *a;
    double *scratch = pass_scratch(fn, rows, C, 3, &sdy, &sdyx, &a);
    if (!scratch)
        return FP_ENOMEM;
    float *b = a + C, *k = b + C;
    bn_task t = {.ymask = ymask, .dz = dz, .acc_dz = acc_dz, .part = scratch, .dy = dy, .x = x, .mean = save_mean,
                 .rows = rows, .C = C};
    block_reduce(&t, bwd_sums, sdy, sdyx);
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
        t.y = dx;
        t.scale = k;
        t.a = a;
        t.b = b;
        fp_parallel_for(rows, 1, bn_min_rows(C), bwd_dx, &t);
    }
    free(scratch);
    return FP_OK;
}

int fp_batchnorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x, fp_dims xd,
                          const float *gamma, const float *save_mean, const float *save_invstd)
{
    return bn_back("fp_batchnorm_backward", dx, NULL, 0, dgamma, dbeta, dy, NULL, x, xd, gamma, save_mean,
                   save_invstd);
}

int fp_batchnorm_relu_backward(float *dx, float *dz, int accumulate_dz, float *dgamma, float *dbeta, const float *dy,
                               const float *y, const float *x, fp_dims xd, const float *gamma,
                               const float *save_mean, const float *save_invstd)
{
    if (!y)
        return fp_fail(FP_EINVAL, "fp_batchnorm_relu_backward: NULL y");
    return bn_back("fp_batchnorm_relu_backward", dx, dz, accumulate_dz, dgamma, dbeta, dy, y, x, xd, gamma,
                   save_mean, save_invstd);
}
