/* backend_cpu_bn_act.c — the CPU backend's fused batchnorm (+ add) + relu (backend.h bn_act_*): the fused
 * kernels of layers.h around the backend's fp32 staging. Promises: fp32 tensors give the unfused ops'
 * results bit for bit; 16-bit y is rounded once from the fp32 pre-activation (the unfused ops round bn(x)
 * and the sum apart); every shape and format fuses, with no reserve space. */
#include "trainer/backend_cpu.h"

#define TRY(expr) do { int rc_ = (expr); if (rc_) return rc_; } while (0)

/* staging: x / dy in 0, z / x in 1, dx in 2, y (the backward's mask) in 3, dz in 4 */
enum { S_X = 0, S_Z = 1, S_DX = 2, S_Y = 3, S_DZ = 4 };

int fp_bcpu_bn_act_query(fp_backend *be, size_t *reserve_bytes, fp_tensor x, int with_add)
{
    (void)be;
    (void)with_add;
    TRY(fp_backend_check("bn_act_query", "x", &x, FP_BACKEND_ANY, 0));
    TRY(fp_backend_want(reserve_bytes != NULL, "bn_act_query", "NULL reserve_bytes"));
    *reserve_bytes = 0;
    return FP_OK;
}

int fp_bcpu_bn_act_forward_train(fp_backend *be, fp_tensor y, fp_tensor save, fp_tensor running_mean,
                                 fp_tensor running_var, fp_tensor x, fp_tensor z, fp_tensor gamma, fp_tensor beta,
                                 const fp_bn_params *p, void *reserve, size_t reserve_bytes)
{
    TRY(fp_backend_bn_act_check("bn_act_forward_train", &y, &x, &z, &gamma, &beta, &running_mean, &running_var,
                                &save, p, reserve_bytes, reserve));
    const float *in = fp_bcpu_in(be, &x, S_X), *z32 = NULL;
    if (!in || (z.p && !(z32 = fp_bcpu_in(be, &z, S_Z))))
        return FP_ENOMEM;
    float *y32 = fp_bcpu_is16(y.dt) ? (float *)in : y.p;   /* 16-bit: in place on the widened input */
    float *sv = save.p;
    int rc = fp_batchnorm_relu_forward_train(y32, sv, sv + x.d.c, running_mean.p, running_var.p, in, z32, x.d,
                                             gamma.p, beta.p, p);
    if (!rc)
        fp_bcpu_store(&y, y32);   /* the one rounding of a 16-bit y */
    return rc;
}

int fp_bcpu_bn_act_backward(fp_backend *be, fp_tensor dx, fp_tensor dz, fp_tensor dgamma, fp_tensor dbeta,
                            fp_tensor dy, fp_tensor y, fp_tensor x, fp_tensor gamma, fp_tensor beta, fp_tensor save,
                            const fp_bn_params *p, void *reserve, size_t reserve_bytes, int accumulate_dx,
                            int accumulate_dz)
{
    TRY(fp_backend_bn_act_backward_check("bn_act_backward", &dx, &dz, &dgamma, &dbeta, &dy, &y, &x, &gamma, &beta,
                                         &save, p, reserve_bytes, reserve));
    const float *dy32 = fp_bcpu_in(be, &dy, S_X), *x32 = fp_bcpu_in(be, &x, S_Z), *y32 = fp_bcpu_in(be, &y, S_Y);
    if (!dy32 || !x32 || !y32)
        return FP_ENOMEM;
    float *d = NULL, *gz = NULL;
    if (dx.p && !(d = fp_bcpu_dx_begin(be, &dx, accumulate_dx, S_DX)))
        return FP_ENOMEM;
    /* dz: fp32 written (or added) in place; 16-bit: the masked gradient (exact in dz's format) written into
     * staging, then landed with fp_bcpu_dx_end's rule, as the unfused copy / 16-bit add */
    int is16 = fp_bcpu_is16(dz.dt);
    if (dz.p && !(gz = is16 ? fp_bcpu_stage(be, S_DZ, fp_tensor_count(&dz)) : dz.p))
        return FP_ENOMEM;
    const float *sv = save.p;
    int rc = fp_batchnorm_relu_backward(d, gz, is16 ? 0 : accumulate_dz, dgamma.p, dbeta.p, dy32, y32, x32, x.d,
                                        gamma.p, sv, sv + x.d.c);
    if (!rc && d)
        fp_bcpu_dx_end(&dx, accumulate_dx, d);
    if (!rc && gz && is16)
        fp_bcpu_dx_end(&dz, accumulate_dz, gz);
    return rc;
}
