/* linear.c — the fully connected layer y = x W^T + b (W is [out, in], as PyTorch) through fp_sgemm.
 * Promises: forward overwrites y; backward accumulates (+=) into dx, dw, db (each may be NULL). */
#include <limits.h>
#include "error.h"
#include "trainer/cpu/gemm.h"
#include "trainer/layers.h"

static int linear_check(const char *fn, int n, int in, int out)
{
    if (n <= 0 || in <= 0 || out <= 0)
        return fp_fail(FP_EINVAL, "%s: bad dims n=%d in=%d out=%d", fn, n, in, out);
    if ((long long)n * in > INT_MAX || (long long)n * out > INT_MAX || (long long)in * out > INT_MAX)
        return fp_fail(FP_EINVAL, "%s: tensor of more than INT_MAX elements", fn);
    return FP_OK;
}

int fp_linear_forward(float *y, const float *x, int n, int in, int out, const float *w, const float *b)
{
    int rc = linear_check("fp_linear_forward", n, in, out);
    if (rc)
        return rc;
    if (!y || !x || !w)
        return fp_fail(FP_EINVAL, "fp_linear_forward: NULL tensor");
    float beta = 0.0f;
    if (b) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < out; j++)
                y[(size_t)i * out + j] = b[j];
        beta = 1.0f;
    }
    fp_sgemm(0, 1, n, out, in, 1.0f, x, in, w, in, beta, y, out);
    return FP_OK;
}

int fp_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x, int n, int in, int out,
                       const float *w)
{
    int rc = linear_check("fp_linear_backward", n, in, out);
    if (rc)
        return rc;
    if (!dy || (dx && !w) || (dw && !x))
        return fp_fail(FP_EINVAL, "fp_linear_backward: NULL tensor");
    if (dx) /* dx[n, in] += dy[n, out] * W[out, in] */
        fp_sgemm(0, 0, n, in, out, 1.0f, dy, out, w, in, 1.0f, dx, in);
    if (dw) /* dW[out, in] += dy^T[out, n] * x[n, in] */
        fp_sgemm(1, 0, out, in, n, 1.0f, dy, out, x, in, 1.0f, dw, in);
    if (db)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < out; j++)
                db[j] += dy[(size_t)i * out + j];
    return FP_OK;
}
