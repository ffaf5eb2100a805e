/* backend_check.h — the argument checks of backend.h's ops, shared by every backend (CPU, CUDA): a
 * tensor's pointer, dtype and dims, and each layer op's shape contract. Promise: each returns FP_OK or
 * FP_EINVAL with a message "<op>: <what>", and reads nothing but the tensor views and parameters. */
#ifndef FP_BACKEND_CHECK_H
#define FP_BACKEND_CHECK_H

#include "trainer/backend.h"

/* dtype masks */
#define FP_BACKEND_F32 1u
#define FP_BACKEND_16 6u                 /* F16 | BF16 */
#define FP_BACKEND_ANY 7u

/* FP_EINVAL "<op>: <what>" unless ok. */
int fp_backend_want(int ok, const char *op, const char *what);
/* FP_EINVAL (message "<op>: <name> ...") unless t has a pointer (or may_skip and none), a dtype in
 * mask (bit 0 F32, bit 1 F16, bit 2 BF16) and dims all >= 1. A skipped tensor passes. */
int fp_backend_check(const char *op, const char *name, const fp_tensor *t, unsigned mask, int may_skip);
/* FP_EINVAL unless a and b have the same dims. */
int fp_backend_same_dims(const char *op, const char *an, const fp_tensor *a, const char *bn, const fp_tensor *b);
/* FP_EINVAL unless compute is F32, TF32, F16 or BF16. */
int fp_backend_check_compute(const char *op, fp_dtype compute);

/* The layer ops' contracts (backend.h): x / y of any format, w in wmask, shapes as the op computes them. */
int fp_backend_conv_check(const char *op, const fp_tensor *x, const fp_tensor *y, const fp_tensor *w,
                          const fp_conv_params *p, unsigned wmask, fp_dtype compute);
/* An F32 per-channel vector {1, 1, 1, c} (may be skipped when may_skip). */
int fp_backend_vec_check(const char *op, const char *name, const fp_tensor *t, int c, int may_skip);
int fp_backend_bn_check(const char *op, const fp_tensor *y, const fp_tensor *x, const fp_tensor *gamma,
                        const fp_tensor *beta, const fp_tensor *rm, const fp_tensor *rv, int stats_may_skip,
                        const fp_bn_params *p);
/* batchnorm backward: dy, x of one shape, dx (may be skipped) too; dgamma, dbeta (may be skipped),
 * gamma {1, 1, 1, c}; save {1, 1, 1, 2c}. */
int fp_backend_bn_backward_check(const char *op, const fp_tensor *dx, const fp_tensor *dgamma,
                                 const fp_tensor *dbeta, const fp_tensor *dy, const fp_tensor *x,
                                 const fp_tensor *gamma, const fp_tensor *save);
/* The fused batchnorm + (add +) relu ops (backend.h bn_act_*): x, y (z, dy, dx, dz where given) of one
 * shape and format, the vectors as batchnorm's, save {1, 1, 1, 2c} required, a reserve where bytes > 0. */
int fp_backend_bn_act_check(const char *op, const fp_tensor *y, const fp_tensor *x, const fp_tensor *z,
                            const fp_tensor *gamma, const fp_tensor *beta, const fp_tensor *rm, const fp_tensor *rv,
                            const fp_tensor *save, const fp_bn_params *p, size_t reserve_bytes, const void *reserve);
int fp_backend_bn_act_backward_check(const char *op, const fp_tensor *dx, const fp_tensor *dz,
                                     const fp_tensor *dgamma, const fp_tensor *dbeta, const fp_tensor *dy,
                                     const fp_tensor *y, const fp_tensor *x, const fp_tensor *gamma,
                                     const fp_tensor *beta, const fp_tensor *save, const fp_bn_params *p,
                                     size_t reserve_bytes, const void *reserve);
int fp_backend_pool_check(const char *op, const fp_tensor *x, const fp_tensor *y, const fp_pool_params *p);
int fp_backend_avg_check(const char *op, const fp_tensor *x, const fp_tensor *y);
int fp_backend_linear_check(const char *op, const fp_tensor *x, const fp_tensor *y, const fp_tensor *w,
                            const fp_tensor *b, unsigned wmask, fp_dtype compute);
/* update_delta: lost and moved not NULL; d, new, old, g F32 of one count; d apart from the three inputs. */
int fp_backend_update_check(const char *op, const fp_tensor *d, const fp_tensor *nw, const fp_tensor *old,
                            const fp_tensor *g, const size_t *lost, const size_t *moved);

#endif
