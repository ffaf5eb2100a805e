/* cudnn_bn_act.c — batchnorm + (add +) relu fused on cuDNN: cudnnBatchNormalizationForwardTrainingEx /
 * BackwardEx with CUDNN_BATCHNORM_OPS_BN_ACTIVATION / BN_ADD_ACTIVATION, SPATIAL_PERSISTENT, NHWC, the
 * context's relu descriptor (d->act), the caller's reserve space (sized by fp_cudnn_bn_act_query).
 * Promises: cuDNN's NOT_SUPPORTED (and any refusal of the size queries, at the query or a call) comes back as
 * FP_EUNAVAIL before anything is written, so the caller runs the unfused ops; the query sizes the shared workspace,
 * so a call after it allocates nothing. Compiled, not yet run on a GPU. */
#include "config.h"
#include "error.h"
#include "trainer/cuda/cudnn_internal.h"

#define MODE CUDNN_BATCHNORM_SPATIAL_PERSISTENT   /* NVIDIA's / PyTorch's mode for the fused NHWC kernels */

static cudnnBatchNormOps_t bn_ops(int with_add)
{
    return with_add ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION : CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
}

/* x's descriptor (x, y, z and their gradients share it) in td[0], the parameters' in td[2]. */
static int set_descs(fp_cudnn *d, const fp_dtensor *x, const char *op)
{
    int rc = fpc_check_tensor(d, x, op, "x");
    if (rc == FP_OK)
        rc = fpc_set_nhwc(d, d->td[0], x->dims, x->dtype, op);
    if (rc != FP_OK)
        return rc;
    FPC_DNN(d, cudnnDeriveBNTensorDescriptor(d->td[2], d->td[0], MODE), op);
    return FP_OK;
}

/* The status of a cuDNN call: FP_OK, FP_EUNAVAIL (not fused for this shape / format), or the failure. */
static int status(fp_cudnn *d, cudnnStatus_t s, const fp_dtensor *x, const char *op)
{
    if (s == CUDNN_STATUS_SUCCESS)
        return FP_OK;
    if (CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED)
        return fp_fail(FP_EUNAVAIL, "%s: cuDNN does not fuse %s %dx%dx%dx%d", op, fpc_dtype_name(x->dtype),
                       x->dims.n, x->dims.h, x->dims.w, x->dims.c);
    return fpc_fail_cudnn(d, s, op);
}

/* Forward and backward workspace sizes into ws[0], ws[1]; the reserve space into *reserve. */
static cudnnStatus_t sizes(fp_cudnn *d, int with_add, size_t ws[2], size_t *reserve)
{
    cudnnTensorDescriptor_t t = d->td[0], z = with_add ? d->td[0] : NULL;
    cudnnStatus_t s = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(d->dnn, MODE, bn_ops(with_add), t, z, t,
                                                                               d->td[2], d->act, &ws[0]);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnGetBatchNormalizationBackwardExWorkspaceSize(d->dnn, MODE, bn_ops(with_add), t, t, t, z, t, d->td[2],
                                                              d->act, &ws[1]);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(d->dnn, MODE, bn_ops(with_add), d->act, t, reserve);
    return s;
}

/* The status of the size queries: any refusal (NOT_SUPPORTED, or BAD_PARAM for a shape the fused kernels do not
 * take, e.g. C % 4 != 0) is FP_EUNAVAIL, the layer left unfused rather than the plan failed. */
static int sizes_status(cudnnStatus_t s, const fp_dtensor *x, const char *op)
{
    if (s == CUDNN_STATUS_SUCCESS)
        return FP_OK;
    return fp_fail(FP_EUNAVAIL, "%s: cuDNN does not fuse %s %dx%dx%dx%d (%s)", op, fpc_dtype_name(x->dtype), x->dims.n,
                   x->dims.h, x->dims.w, x->dims.c, cudnnGetErrorString(s));
}

int fp_cudnn_bn_act_query(fp_cudnn *d, const fp_dtensor *x, int with_add, size_t *reserve_bytes)
{
    const char *op = "batchnorm + relu query";
    int rc = set_descs(d, x, op);
    if (rc != FP_OK)
        return rc;
    size_t ws[2];
    if ((rc = sizes_status(sizes(d, with_add, ws, reserve_bytes), x, op)) != FP_OK)
        return rc;
    /* the workspace grows now, at plan time: a first fused call inside a CUDA graph's capture (after an eager
     * sampled step, which runs unfused) must not allocate */
    size_t need = ws[0] > ws[1] ? ws[0] : ws[1];
    return need > d->ws_bytes ? fpc_workspace_ensure(d, need, op) : FP_OK;
}

/* The workspace for direction k (0 forward, 1 backward) and a check of the caller's reserve. */
static int prepare(fp_cudnn *d, const fp_dtensor *x, int with_add, int k, size_t reserve_bytes, size_t *ws,
                   const char *op)
{
    size_t w[2], need = 0;
    int rc = set_descs(d, x, op);
    if (rc == FP_OK)
        rc = sizes_status(sizes(d, with_add, w, &need), x, op);
    if (rc != FP_OK)
        return rc;
    if (need > reserve_bytes)
        return fpc_fail_arg(d, op, "reserve space smaller than cuDNN asks (sized for another shape?)");
    *ws = w[k];
    return w[k] > d->ws_bytes ? fpc_workspace_ensure(d, w[k], op) : FP_OK;
}

int fp_cudnn_bn_act_forward_train(fp_cudnn *d, const fp_dtensor *y, float *save_mean, float *save_invstd,
                                  float *running_mean, float *running_var, const fp_dtensor *x, const fp_dtensor *z,
                                  const float *gamma, const float *beta, const fp_bn_params *p, void *reserve,
                                  size_t reserve_bytes)
{
    const char *op = "batchnorm + relu forward train";
    if (!gamma || !beta || !p || !save_mean || !save_invstd || (!running_mean) != (!running_var))
        return fpc_fail_arg(d, op, "gamma, beta, params and the saved statistics must be given, running statistics "
                                   "both or neither");
    size_t ws = 0;
    int rc = prepare(d, x, z != NULL, 0, reserve_bytes, &ws, op);
    if (rc != FP_OK)
        return rc;
    const float one = 1.0f, zero = 0.0f;
    cudnnStatus_t s = cudnnBatchNormalizationForwardTrainingEx(
        d->dnn, MODE, bn_ops(z != NULL), &one, &zero, d->td[0], x->data, z ? d->td[0] : NULL, z ? z->data : NULL,
        d->td[0], y->data, d->td[2], gamma, beta, (double)p->momentum, running_mean, running_var, (double)p->eps,
        save_mean, save_invstd, d->act, ws ? d->ws : NULL, ws, reserve, reserve_bytes);
    return status(d, s, x, op);
}

int fp_cudnn_bn_act_backward(fp_cudnn *d, const fp_dtensor *dx, float beta_dx, const fp_dtensor *dz, float *dgamma,
                             float *dbeta, const fp_dtensor *dy, const fp_dtensor *y, const fp_dtensor *x,
                             const float *gamma, const float *beta, const float *save_mean, const float *save_invstd,
                             const fp_bn_params *p, void *reserve, size_t reserve_bytes)
{
    const char *op = "batchnorm + relu backward";
    if (!gamma || !beta || !p || !save_mean || !save_invstd || !dx->data)
        return fpc_fail_arg(d, op, "gamma, beta, params, saved statistics and dx must not be NULL");
    size_t ws = 0;
    int rc = prepare(d, x, dz != NULL, 1, reserve_bytes, &ws, op);
    if (rc == FP_OK)
        rc = fpc_bn_param_grads(d, (size_t)x->dims.c, &dgamma, &dbeta, op);
    if (rc != FP_OK)
        return rc;
    const float one = 1.0f;   /* dgamma, dbeta accumulate (beta 1); dx blends with beta_dx; dz is written */
    cudnnStatus_t s = cudnnBatchNormalizationBackwardEx(
        d->dnn, MODE, bn_ops(dz != NULL), &one, &beta_dx, &one, &one, d->td[0], x->data, d->td[0], y->data, d->td[0],
        dy->data, dz ? d->td[0] : NULL, dz ? dz->data : NULL, d->td[0], dx->data, d->td[2], gamma, beta, dgamma,
        dbeta, (double)p->eps, save_mean, save_invstd, d->act, ws ? d->ws : NULL, ws, reserve, reserve_bytes);
    return status(d, s, x, op);
}
