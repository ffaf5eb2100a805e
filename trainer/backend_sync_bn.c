/* backend_sync_bn.c — backend_sync_bn.h: the argument checks of the synchronised batchnorm ops.
 * Promise: the same contract as backend_check.c's (messages "<op>: <what>"), nothing but the views read. */
#include "error.h"
#include "trainer/backend_check.h"
#include "trainer/backend_sync_bn.h"

#define TRY(expr) do { int rc_ = (expr); if (rc_) return rc_; } while (0)

int fp_backend_sync_stats_check(const char *op, const fp_tensor *acc, const fp_tensor *x, const fp_tensor *center)
{
    TRY(fp_backend_check(op, "x", x, FP_BACKEND_ANY, 0));
    TRY(fp_backend_vec_check(op, "acc", acc, 2 * x->d.c + 1, 0));
    return fp_backend_vec_check(op, "center", center, 2 * x->d.c + 1, 1);
}

int fp_backend_sync_forward_check(const char *op, const fp_tensor *y, const fp_tensor *save, const fp_tensor *rm,
                                  const fp_tensor *rv, const fp_tensor *x, const fp_tensor *gamma,
                                  const fp_tensor *beta, const fp_tensor *a1, const fp_tensor *a2,
                                  const fp_bn_params *p)
{
    TRY(fp_backend_bn_check(op, y, x, gamma, beta, rm, rv, 1, p));
    TRY(fp_backend_vec_check(op, "save", save, 2 * x->d.c, 0));
    TRY(fp_backend_vec_check(op, "a1", a1, 2 * x->d.c + 1, 0));
    TRY(fp_backend_vec_check(op, "a2", a2, 2 * x->d.c + 1, 0));
    if (!(p->eps > 0.0f) || !(p->momentum >= 0.0f && p->momentum <= 1.0f))
        return fp_fail(FP_EINVAL, "%s: bad eps %g or momentum %g", op, p->eps, p->momentum);
    return FP_OK;
}

int fp_backend_sync_backward_check(const char *op, const fp_tensor *acc, const fp_tensor *dy, const fp_tensor *x,
                                   const fp_tensor *save, const fp_tensor *dx, const fp_tensor *gamma,
                                   const fp_tensor *dgamma, const fp_tensor *dbeta)
{
    TRY(fp_backend_check(op, "dy", dy, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check(op, "x", x, FP_BACKEND_ANY, 0));
    TRY(fp_backend_same_dims(op, "dy", dy, "x", x));
    TRY(fp_backend_vec_check(op, "save", save, 2 * x->d.c, 0));
    TRY(fp_backend_vec_check(op, "acc", acc, 2 * x->d.c + 1, 0));
    if (dx) {
        TRY(fp_backend_check(op, "dx", dx, FP_BACKEND_ANY, 0));
        TRY(fp_backend_same_dims(op, "dx", dx, "x", x));
        TRY(fp_backend_vec_check(op, "gamma", gamma, x->d.c, 0));
    }
    if (dgamma)
        TRY(fp_backend_vec_check(op, "dgamma", dgamma, x->d.c, 1));
    if (dbeta)
        TRY(fp_backend_vec_check(op, "dbeta", dbeta, x->d.c, 1));
    return FP_OK;
}
