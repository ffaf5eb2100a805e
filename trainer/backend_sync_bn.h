/* backend_sync_bn.h — the argument checks of backend.h's synchronised batchnorm ops (bn_sync_*), shared by
 * the CPU and CUDA backends. Promise: each returns FP_OK or FP_EINVAL "<op>: <what>" and reads nothing but
 * the tensor views (no backend memory). */
#ifndef FP_BACKEND_SYNC_BN_H
#define FP_BACKEND_SYNC_BN_H

#include "trainer/backend.h"

/* bn_sync_stats: x any format; acc F32 of 2c + 1; center F32 of 2c + 1 or skipped. */
int fp_backend_sync_stats_check(const char *op, const fp_tensor *acc, const fp_tensor *x, const fp_tensor *center);
/* bn_sync_forward: bn_forward_train's checks (running stats may be skipped, save not), a1 and a2 F32 of
 * 2c + 1, eps > 0 and momentum in [0, 1]. */
int fp_backend_sync_forward_check(const char *op, const fp_tensor *y, const fp_tensor *save, const fp_tensor *rm,
                                  const fp_tensor *rv, const fp_tensor *x, const fp_tensor *gamma,
                                  const fp_tensor *beta, const fp_tensor *a1, const fp_tensor *a2,
                                  const fp_bn_params *p);
/* bn_sync_backward_sums / _dx: dy and x of one shape, save 2c, acc 2c + 1; dgamma, dbeta (sums) may be
 * skipped; dx (dx op) of x's shape, gamma of c. dx NULL for the sums' check. */
int fp_backend_sync_backward_check(const char *op, const fp_tensor *acc, const fp_tensor *dy, const fp_tensor *x,
                                   const fp_tensor *save, const fp_tensor *dx, const fp_tensor *gamma,
                                   const fp_tensor *dgamma, const fp_tensor *dbeta);

#endif
