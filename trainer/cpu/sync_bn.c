/* sync_bn.c — the CPU backend's synchronised batchnorm ops (backend.h bn_sync_*, --sync-bn): this rank's
 * per-channel sums for the ranks' reduction, and the normalisation / dx from the reduced (global) sums.
 * Promises: sums accumulated in double over the widened fp32 values, one pass per op, rows in order (no
 * threads: the result does not depend on the thread count); the normalisation and dx use the arithmetic of
 * batchnorm.c's plain kernels (scale / shift, k*dy + a*(x - mean) + b), so one rank equals plain BN up to
 * the statistics' summation order. */
#include <math.h>
#include <stdlib.h>
#include "error.h"
#include "trainer/backend_cpu.h"
#include "trainer/backend_sync_bn.h"

/* staging slots (backend_cpu.h): x / dy widened, the forward output, the input gradient */
enum { S_A = 0, S_B = 1, S_DX = 2 };

#define TRY(expr) do { int rc_ = (expr); if (rc_) return rc_; } while (0)

static size_t rows_of(const fp_tensor *x)
{
    return (size_t)x->d.n * (size_t)x->d.h * (size_t)x->d.w;
}

/* Per-channel double sums of x[r*C + j] - k[j] and its square (k NULL: 0), rows in order, into s1[C], s2[C]. */
static int centred_sums(const float *x, size_t rows, int C, const float *k, double **s1, double **s2)
{
    double *s = calloc(2 * (size_t)C, sizeof *s);
    if (!s)
        return fp_fail(FP_ENOMEM, "bn_sync: out of memory (%d channels)", C);
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * (size_t)C;
        for (int j = 0; j < C; j++) {
            double v = (double)xr[j] - (k ? (double)k[j] : 0.0);
            s[j] += v;
            s[C + j] += v * v;
        }
    }
    *s1 = s;
    *s2 = s + C;
    return FP_OK;
}

/* The shift of a second pass: the mean of the reduced first-pass acc, in fp32 (the CUDA kernels compute the
 * same float quotient), so both ops of one forward use the same k. */
static float shift_of(const float *a1, int C, int j)
{
    return a1[j] / a1[2 * C];
}

int fp_bcpu_bn_sync_stats(fp_backend *be, fp_tensor acc, fp_tensor x, fp_tensor center)
{
    const char *op = "bn_sync_stats";
    TRY(fp_backend_sync_stats_check(op, &acc, &x, &center));
    const float *in = fp_bcpu_in(be, &x, S_A);
    if (!in)
        return FP_ENOMEM;
    int C = x.d.c;
    float *k = NULL;
    if (center.p) {
        if (!(k = malloc((size_t)C * sizeof *k)))
            return fp_fail(FP_ENOMEM, "%s: out of memory (%d channels)", op, C);
        for (int j = 0; j < C; j++)
            k[j] = shift_of(center.p, C, j);
    }
    double *s1 = NULL, *s2 = NULL;
    size_t rows = rows_of(&x);
    int rc = centred_sums(in, rows, C, k, &s1, &s2);
    free(k);
    if (rc)
        return rc;
    float *a = acc.p;
    for (int j = 0; j < C; j++) {
        a[j] = (float)s1[j];
        a[C + j] = (float)s2[j];
    }
    a[2 * C] = (float)rows;
    free(s1);
    return FP_OK;
}

int fp_bcpu_bn_sync_forward(fp_backend *be, fp_tensor y, fp_tensor save, fp_tensor running_mean,
                            fp_tensor running_var, fp_tensor x, fp_tensor gamma, fp_tensor beta, fp_tensor a1,
                            fp_tensor a2, const fp_bn_params *p)
{
    const char *op = "bn_sync_forward";
    TRY(fp_backend_sync_forward_check(op, &y, &save, &running_mean, &running_var, &x, &gamma, &beta, &a1, &a2, p));
    int C = x.d.c;
    const float *A1 = a1.p, *A2 = a2.p;
    double N = A2[2 * C];
    if (!(N > 1.0))
        return fp_fail(FP_EINVAL, "%s: need more than one value per channel over the ranks (N = %g)", op, N);
    const float *in = fp_bcpu_in(be, &x, S_A);
    if (!in)
        return FP_ENOMEM;
    float *y32 = fp_bcpu_is16(y.dt) && fp_bcpu_is16(x.dt) ? (float *)in : fp_bcpu_out(be, &y, S_B);
    float *scale = malloc(2 * (size_t)C * sizeof *scale);
    if (!y32 || !scale) {
        free(scale);
        return y32 ? fp_fail(FP_ENOMEM, "%s: out of memory (%d channels)", op, C) : FP_ENOMEM;
    }
    float *shift = scale + C, *sv = save.p, *rm = running_mean.p, *rv = running_var.p;
    const float *g = gamma.p, *b = beta.p;
    double m = (double)p->momentum;
    for (int j = 0; j < C; j++) {
        double d1 = (double)A2[j] / N;
        double mean = (double)shift_of(A1, C, j) + d1;
        double var = (double)A2[C + j] / N - d1 * d1;
        if (var < 0.0)
            var = 0.0;
        double invstd = 1.0 / sqrt(var + (double)p->eps);
        sv[j] = (float)mean;
        sv[C + j] = (float)invstd;
        if (rm)
            rm[j] = (float)((1.0 - m) * rm[j] + m * mean);
        if (rv)
            rv[j] = (float)((1.0 - m) * rv[j] + m * var * N / (N - 1.0));
        scale[j] = (float)(g[j] * invstd);
        shift[j] = (float)(b[j] - mean * g[j] * invstd);
    }
    size_t rows = rows_of(&x);
    for (size_t r = 0; r < rows; r++) {
        const float *xr = in + r * (size_t)C;
        float *yr = y32 + r * (size_t)C;
        for (int j = 0; j < C; j++)
            yr[j] = xr[j] * scale[j] + shift[j];
    }
    free(scale);
    fp_bcpu_store(&y, y32);
    return FP_OK;
}

int fp_bcpu_bn_sync_backward_sums(fp_backend *be, fp_tensor acc, fp_tensor dgamma, fp_tensor dbeta, fp_tensor dy,
                                  fp_tensor x, fp_tensor save)
{
    const char *op = "bn_sync_backward_sums";
    TRY(fp_backend_sync_backward_check(op, &acc, &dy, &x, &save, NULL, NULL, &dgamma, &dbeta));
    const float *dy32 = fp_bcpu_in(be, &dy, S_A), *x32 = fp_bcpu_in(be, &x, S_B);
    if (!dy32 || !x32)
        return FP_ENOMEM;
    int C = x.d.c;
    const float *mean = save.p, *inv = (const float *)save.p + C;
    double *s = calloc(2 * (size_t)C, sizeof *s);
    if (!s)
        return fp_fail(FP_ENOMEM, "%s: out of memory (%d channels)", op, C);
    size_t rows = rows_of(&x);
    for (size_t r = 0; r < rows; r++) {   /* sum dy and sum dy * (x - mean): invstd applied after */
        const float *dyr = dy32 + r * (size_t)C, *xr = x32 + r * (size_t)C;
        for (int j = 0; j < C; j++) {
            double gr = dyr[j];
            s[j] += gr;
            s[C + j] += gr * ((double)xr[j] - (double)mean[j]);
        }
    }
    float *a = acc.p, *dg = dgamma.p, *db = dbeta.p;
    for (int j = 0; j < C; j++) {
        double sdyx = s[C + j] * (double)inv[j];
        a[j] = (float)s[j];
        a[C + j] = (float)sdyx;
        if (db)
            db[j] += (float)s[j];
        if (dg)
            dg[j] += (float)sdyx;
    }
    a[2 * C] = (float)rows;
    free(s);
    return FP_OK;
}

int fp_bcpu_bn_sync_backward_dx(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor x, fp_tensor gamma,
                                fp_tensor save, fp_tensor acc, int accumulate)
{
    const char *op = "bn_sync_backward_dx";
    TRY(fp_backend_sync_backward_check(op, &acc, &dy, &x, &save, &dx, &gamma, NULL, NULL));
    int C = x.d.c;
    const float *A = acc.p, *mean = save.p, *inv = (const float *)save.p + C, *g = gamma.p;
    double N = A[2 * C];
    if (!(N > 0.0))
        return fp_fail(FP_EINVAL, "%s: no values per channel over the ranks (N = %g)", op, N);
    const float *dy32 = fp_bcpu_in(be, &dy, S_A), *x32 = fp_bcpu_in(be, &x, S_B);
    if (!dy32 || !x32)
        return FP_ENOMEM;
    float *k = malloc(3 * (size_t)C * sizeof *k);
    if (!k)
        return fp_fail(FP_ENOMEM, "%s: out of memory (%d channels)", op, C);
    float *a = k + C, *b = a + C;
    for (int j = 0; j < C; j++) {   /* dx = k*dy + a*(x - mean) + b, as batchnorm.c's backward */
        double in = inv[j], kk = (double)g[j] * in;
        k[j] = (float)kk;
        a[j] = (float)(-kk * in * (double)A[C + j] / N);
        b[j] = (float)(-kk * (double)A[j] / N);
    }
    float *d = fp_bcpu_dx_begin(be, &dx, accumulate, S_DX);
    if (!d) {
        free(k);
        return FP_ENOMEM;
    }
    size_t rows = rows_of(&x);
    for (size_t r = 0; r < rows; r++) {
        const float *dyr = dy32 + r * (size_t)C, *xr = x32 + r * (size_t)C;
        float *dr = d + r * (size_t)C;
        for (int j = 0; j < C; j++)
            dr[j] += k[j] * dyr[j] + a[j] * (xr[j] - mean[j]) + b[j];
    }
    free(k);
    fp_bcpu_dx_end(&dx, accumulate, d);
    return FP_OK;
}
