/* backend_cuda_sync_bn.c — the CUDA backend's synchronised batchnorm ops (backend.h bn_sync_*, --sync-bn): the
 * shared checks, then sync_bn.cu's kernels on the backend's stream with their work buffer in a staging slot.
 * Promise: the CPU ops' results up to summation order; nothing waits on the host (compiled, not yet run on a
 * GPU: tests/gpu/test_cuda_sync_bn). */
#include "config.h"
#include "error.h"
#include "trainer/backend_sync_bn.h"
#include "trainer/cuda/backend_cuda_internal.h"
#include "trainer/cuda/sync_bn.h"

static size_t rows_of(const fp_tensor *x)
{
    return (size_t)x->d.n * (size_t)x->d.h * (size_t)x->d.w;
}

/* The kernels' work buffer (partials or coefficients) for x: staging slot FP_BCU_OUT2, which no input of these
 * ops occupies (they read every format directly). */
static void *work_for(fp_backend *be, const fp_tensor *x)
{
    return fp_bcu_stage(be, FP_BCU_OUT2, fp_csbn_work_bytes(rows_of(x), x->d.c));
}

int fp_bcu_bn_sync_stats(fp_backend *be, fp_tensor acc, fp_tensor x, fp_tensor center)
{
    TRY(fp_backend_sync_stats_check("bn_sync_stats", &acc, &x, &center));
    void *w = work_for(be, &x);
    if (!w)
        return FP_ENOMEM;
    return fp_csbn_stats(acc.p, x.p, x.dt, rows_of(&x), x.d.c, center.p, w, be->stream);
}

int fp_bcu_bn_sync_forward(fp_backend *be, fp_tensor y, fp_tensor save, fp_tensor running_mean,
                           fp_tensor running_var, fp_tensor x, fp_tensor gamma, fp_tensor beta, fp_tensor a1,
                           fp_tensor a2, const fp_bn_params *p)
{
    const char *op = "bn_sync_forward";
    TRY(fp_backend_sync_forward_check(op, &y, &save, &running_mean, &running_var, &x, &gamma, &beta, &a1, &a2, p));
    void *w = work_for(be, &x);
    if (!w)
        return FP_ENOMEM;
    fp_bcu_wc_touch(be, y.p, fp_tensor_count(&y) * (size_t)fp_dtype_bytes(y.dt));
    return fp_csbn_forward(y.p, y.dt, save.p, running_mean.p, running_var.p, x.p, x.dt, rows_of(&x), x.d.c, gamma.p,
                           beta.p, a1.p, a2.p, p->eps, p->momentum, w, be->stream);
}

int fp_bcu_bn_sync_backward_sums(fp_backend *be, fp_tensor acc, fp_tensor dgamma, fp_tensor dbeta, fp_tensor dy,
                                 fp_tensor x, fp_tensor save)
{
    TRY(fp_backend_sync_backward_check("bn_sync_backward_sums", &acc, &dy, &x, &save, NULL, NULL, &dgamma, &dbeta));
    void *w = work_for(be, &x);
    if (!w)
        return FP_ENOMEM;
    return fp_csbn_backward_sums(acc.p, dgamma.p, dbeta.p, dy.p, dy.dt, x.p, x.dt, rows_of(&x), x.d.c, save.p, w,
                                 be->stream);
}

int fp_bcu_bn_sync_backward_dx(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor x, fp_tensor gamma,
                               fp_tensor save, fp_tensor acc, int accumulate)
{
    const char *op = "bn_sync_backward_dx";
    TRY(fp_backend_sync_backward_check(op, &acc, &dy, &x, &save, &dx, &gamma, NULL, NULL));
    if (dx.p == dy.p || dx.p == x.p)
        return fp_fail(FP_EINVAL, "%s: dx aliases dy or x", op);
    void *w = work_for(be, &x);
    if (!w)
        return FP_ENOMEM;
    fp_bcu_wc_touch(be, dx.p, fp_tensor_count(&dx) * (size_t)fp_dtype_bytes(dx.dt));
    return fp_csbn_backward_dx(dx.p, dx.dt, dy.p, dy.dt, x.p, x.dt, rows_of(&x), x.d.c, gamma.p, save.p, acc.p,
                               accumulate, w, be->stream);
}
