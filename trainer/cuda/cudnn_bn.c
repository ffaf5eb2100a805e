/* cudnn_bn.c — batch normalisation (spatial: per channel over N*H*W) on cuDNN, NHWC tensors in fp32 /
 * fp16 / bf16 with fp32 parameters and statistics, the semantics of layers.h. Conventions checked:
 * cuDNN updates the running variance with the UNBIASED batch variance (Bessel's correction, as PyTorch and
 * layers.h) and normalises with the biased one; its "saved inverse variance" is 1/sqrt(var + eps), i.e.
 * layers.h's save_invstd; exponentialAverageFactor is PyTorch's momentum. So nothing is compensated here;
 * tests/gpu/test_cudnn_ops.c compares running_var against the CPU kernel to hold cuDNN to it.
 * Training uses CUDNN_BATCHNORM_SPATIAL_PERSISTENT for fp32 / fp16 when configured (PyTorch's choice for
 * channels-last): faster, but cuDNN documents that very large finite inputs may overflow to Inf / NaN where
 * SPATIAL stays finite. bf16 is persistent only through the Ex entry points; evaluation uses SPATIAL; a
 * NOT_SUPPORTED answer in persistent mode switches the context to SPATIAL for good. Training goes through
 * the Ex entry points (PyTorch's for channels-last) whenever cuDNN needs no reserve space between forward
 * and backward: on an H200 the legacy entry points ran NHWC batchnorm in per-channel kernels that took 90%
 * of a ResNet-50 step (fp16 324 -> 2,354 images/s, bf16 267 -> 2,370 at 224x224, batch 256). */
#include "config.h"
#include <string.h>
#include "error.h"
#include "trainer/cuda/cudnn_internal.h"

static cudnnBatchNormMode_t train_mode(const fp_cudnn *d, fp_dtype dt)
{
    if (d->cfg.bn_persistent && !d->bn_persistent_broken && (dt == FP_DT_F32 || dt == FP_DT_F16 || (dt == FP_DT_BF16 && !d->bn_ex_off)))
        return CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
    return CUDNN_BATCHNORM_SPATIAL;
}

/* x / y descriptors in td[0] / td[1], the derived parameter descriptor (1xCx1x1 fp32) in td[2]. */
static int set_descs(fp_cudnn *d, const fp_dtensor *x, const fp_dtensor *y, cudnnBatchNormMode_t mode,
                     const char *op)
{
    int rc;
    if ((rc = fpc_set_nhwc(d, d->td[0], x->dims, x->dtype, op)) != FP_OK ||
        (rc = fpc_set_nhwc(d, d->td[1], y->dims, y->dtype, op)) != FP_OK)
        return rc;
    FPC_DNN(d, cudnnDeriveBNTensorDescriptor(d->td[2], d->td[0], mode), op);
    return FP_OK;
}

static int check_pair(fp_cudnn *d, const char *op, const fp_dtensor *a, const char *an, const fp_dtensor *b,
                      const char *bn)
{
    int rc;
    if ((rc = fpc_check_tensor(d, a, op, an)) != FP_OK || (rc = fpc_check_tensor(d, b, op, bn)) != FP_OK ||
        (rc = fpc_same_dtype(d, op, a, b)) != FP_OK || (rc = fpc_same_dims(d, op, a->dims, b->dims, bn)) != FP_OK)
        return rc;
    return FP_OK;
}

static int is_not_supported(cudnnStatus_t s)
{
    return CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED;
}

/* The legacy training call's status s in mode: 1 when persistent mode was refused (NOT_SUPPORTED: the
 * context switches to SPATIAL for good) and the caller retries; else 0 with *rc FP_OK or the failure. */
static int legacy_retry(fp_cudnn *d, cudnnBatchNormMode_t mode, cudnnStatus_t s, const char *op, int *rc)
{
    *rc = FP_OK;
    if (s == CUDNN_STATUS_SUCCESS)
        return 0;
    if (mode == CUDNN_BATCHNORM_SPATIAL_PERSISTENT && is_not_supported(s)) {
        d->bn_persistent_broken = 1;
        return 1;
    }
    *rc = fpc_fail_cudnn(d, s, op);
    return 0;
}

/* The Ex forward / backward (bnOps BN: no fused activation, no z): *ran is 1 when cuDNN did it, 0 when the
 * caller must use the legacy call (the Ex calls are refused, want reserve space, or no workspace fits). */

/* After the workspace-size query s: *ok when the Ex call can run with ws bytes of the context's workspace. */
static void ex_ready(fp_cudnn *d, cudnnStatus_t s, cudnnBatchNormMode_t mode, size_t ws, const char *op, int *ok)
{
    size_t reserve = 0;
    *ok = 0;
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(d->dnn, mode, CUDNN_BATCHNORM_OPS_BN, NULL, d->td[0],
                                                                 &reserve);
    if (s != CUDNN_STATUS_SUCCESS || reserve != 0) {   /* plain BN keeps nothing but the saved statistics */
        d->bn_ex_off = 1;
        return;
    }
    if (ws > d->ws_bytes && fpc_workspace_ensure(d, ws, op) != FP_OK) {
        fp_error_clear();   /* no room for it: the legacy call needs none */
        return;
    }
    *ok = 1;
}

/* The Ex call's status s: done (*ran), refused (Ex off for the context, legacy call), or an error. */
static int ex_result(fp_cudnn *d, cudnnStatus_t s, const char *op, int *ran)
{
    if (s == CUDNN_STATUS_SUCCESS) {
        *ran = 1;
        return FP_OK;
    }
    if (is_not_supported(s)) {
        d->bn_ex_off = 1;
        return FP_OK;
    }
    return fpc_fail_cudnn(d, s, op);
}

static int bn_forward_ex(fp_cudnn *d, cudnnBatchNormMode_t mode, const fp_dtensor *x, const fp_dtensor *y,
                         const float *gamma, const float *beta, const fp_bn_params *p, float *running_mean,
                         float *running_var, float *save_mean, float *save_invstd, const char *op, int *ran)
{
    *ran = 0;
    if (d->bn_ex_off)
        return FP_OK;
    size_t ws = 0;
    int ok;
    cudnnStatus_t s = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
        d->dnn, mode, CUDNN_BATCHNORM_OPS_BN, d->td[0], NULL, d->td[1], d->td[2], NULL, &ws);
    ex_ready(d, s, mode, ws, op, &ok);
    if (!ok)
        return FP_OK;
    const float one = 1.0f, zero = 0.0f;
    s = cudnnBatchNormalizationForwardTrainingEx(d->dnn, mode, CUDNN_BATCHNORM_OPS_BN, &one, &zero, d->td[0], x->data,
                                                 NULL, NULL, d->td[1], y->data, d->td[2], gamma, beta,
                                                 (double)p->momentum, running_mean, running_var, (double)p->eps,
                                                 save_mean, save_invstd, NULL, ws ? d->ws : NULL, ws, NULL, 0);
    return ex_result(d, s, op, ran);
}

static int bn_backward_ex(fp_cudnn *d, cudnnBatchNormMode_t mode, const fp_dtensor *dx, float *dgamma, float *dbeta,
                          const fp_dtensor *dy, const fp_dtensor *x, const float *gamma, const float *save_mean,
                          const float *save_invstd, const fp_bn_params *p, const char *op, int *ran)
{
    *ran = 0;
    if (d->bn_ex_off)
        return FP_OK;
    size_t ws = 0;
    int ok;
    cudnnStatus_t s = cudnnGetBatchNormalizationBackwardExWorkspaceSize(
        d->dnn, mode, CUDNN_BATCHNORM_OPS_BN, d->td[0], NULL, d->td[1], NULL, d->td[3], d->td[2], NULL, &ws);
    ex_ready(d, s, mode, ws, op, &ok);
    if (!ok)
        return FP_OK;
    const float one = 1.0f;   /* beta = 1 everywhere: dx, dgamma, dbeta accumulate (layers.h) */
    s = cudnnBatchNormalizationBackwardEx(d->dnn, mode, CUDNN_BATCHNORM_OPS_BN, &one, &one, &one, &one, d->td[0],
                                          x->data, NULL, NULL, d->td[1], dy->data, NULL, NULL, d->td[3], dx->data,
                                          d->td[2], gamma, NULL, dgamma, dbeta, (double)p->eps, save_mean,
                                          save_invstd, NULL, ws ? d->ws : NULL, ws, NULL, 0);
    return ex_result(d, s, op, ran);
}

int fp_cudnn_bn_forward_train(fp_cudnn *d, const fp_dtensor *y, float *save_mean, float *save_invstd,
                              float *running_mean, float *running_var, const fp_dtensor *x, const float *gamma,
                              const float *beta, const fp_bn_params *p)
{
    const char *op = "batchnorm forward train";
    int rc = check_pair(d, op, x, "x", y, "y");
    if (rc != FP_OK)
        return rc;
    if (!gamma || !beta || !p)
        return fpc_fail_arg(d, op, "gamma, beta and params must not be NULL");
    if (fpc_elems(x->dims) / (size_t)x->dims.c <= 1)
        return fpc_fail_arg(d, op, "training needs more than one value per channel (N*H*W > 1)");
    /* cuDNN takes both running pointers or neither, both saved pointers or neither: a lone NULL gets
     * scratch. */
    size_t c = (size_t)x->dims.c;
    if ((!running_mean) != (!running_var) || (!save_mean) != (!save_invstd)) {
        if ((rc = fpc_scratch(d, 2 * c, op)) != FP_OK)
            return rc;
        if (!running_mean && running_var)
            running_mean = d->scratch;
        if (!running_var && running_mean)
            running_var = d->scratch;
        if (!save_mean && save_invstd)
            save_mean = d->scratch + c;
        if (!save_invstd && save_mean)
            save_invstd = d->scratch + c;
    }
    const float one = 1.0f, zero = 0.0f;
    for (;;) {
        cudnnBatchNormMode_t mode = train_mode(d, x->dtype);
        if ((rc = set_descs(d, x, y, mode, op)) != FP_OK)
            return rc;
        int ran;
        if ((rc = bn_forward_ex(d, mode, x, y, gamma, beta, p, running_mean, running_var, save_mean, save_invstd,
                                op, &ran)) != FP_OK || ran)
            return rc;
        cudnnStatus_t s = cudnnBatchNormalizationForwardTraining(
            d->dnn, mode, &one, &zero, d->td[0], x->data, d->td[1], y->data, d->td[2], gamma, beta,
            (double)p->momentum, running_mean, running_var, (double)p->eps, save_mean, save_invstd);
        if (!legacy_retry(d, mode, s, op, &rc))
            return rc;
    }
}

int fp_cudnn_bn_forward_eval(fp_cudnn *d, const fp_dtensor *y, const fp_dtensor *x, const float *gamma,
                             const float *beta, const float *running_mean, const float *running_var,
                             const fp_bn_params *p)
{
    const char *op = "batchnorm forward eval";
    int rc = check_pair(d, op, x, "x", y, "y");
    if (rc != FP_OK)
        return rc;
    if (!gamma || !beta || !running_mean || !running_var || !p)
        return fpc_fail_arg(d, op, "gamma, beta, running statistics and params must not be NULL");
    if ((rc = set_descs(d, x, y, CUDNN_BATCHNORM_SPATIAL, op)) != FP_OK)
        return rc;
    const float one = 1.0f, zero = 0.0f;
    FPC_DNN(d, cudnnBatchNormalizationForwardInference(d->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d->td[0],
                                                       x->data, d->td[1], y->data, d->td[2], gamma, beta,
                                                       running_mean, running_var, (double)p->eps), op);
    return FP_OK;
}

int fpc_bn_param_grads(fp_cudnn *d, size_t c, float **dgamma, float **dbeta, const char *op)
{
    if (*dgamma && *dbeta)
        return FP_OK;
    /* cuDNN always writes both parameter gradients: a skipped one lands in zeroed scratch. */
    int rc = fpc_scratch(d, 2 * c, op);
    if (rc != FP_OK)
        return rc;
    cudaError_t e = cudaMemsetAsync(d->scratch, 0, 2 * c * sizeof(float), d->stream);
    if (e != cudaSuccess)
        return fpc_fail_cuda(d, e, op);
    if (!*dgamma)
        *dgamma = d->scratch;
    if (!*dbeta)
        *dbeta = d->scratch + c;
    return FP_OK;
}

int fp_cudnn_bn_backward(fp_cudnn *d, const fp_dtensor *dx, float *dgamma, float *dbeta, const fp_dtensor *dy,
                         const fp_dtensor *x, const float *gamma, const float *save_mean,
                         const float *save_invstd, const fp_bn_params *p)
{
    const char *op = "batchnorm backward";
    int rc;
    if ((rc = check_pair(d, op, x, "x", dy, "dy")) != FP_OK || (rc = check_pair(d, op, x, "x", dx, "dx")) != FP_OK)
        return rc;
    if (!gamma || !save_mean || !save_invstd || !p)
        return fpc_fail_arg(d, op, "gamma, saved mean / invstd and params must not be NULL");
    if ((rc = fpc_bn_param_grads(d, (size_t)x->dims.c, &dgamma, &dbeta, op)) != FP_OK)
        return rc;
    /* beta = 1 everywhere: dx, dgamma, dbeta accumulate (layers.h). */
    const float one = 1.0f;
    for (;;) {
        cudnnBatchNormMode_t mode = train_mode(d, x->dtype);
        if ((rc = set_descs(d, x, dy, mode, op)) != FP_OK)
            return rc;
        if ((rc = fpc_set_nhwc(d, d->td[3], dx->dims, dx->dtype, op)) != FP_OK)
            return rc;
        int ran;
        if ((rc = bn_backward_ex(d, mode, dx, dgamma, dbeta, dy, x, gamma, save_mean, save_invstd, p, op, &ran)) !=
                FP_OK || ran)
            return rc;
        cudnnStatus_t s = cudnnBatchNormalizationBackward(d->dnn, mode, &one, &one, &one, &one, d->td[0], x->data,
                                                          d->td[1], dy->data, d->td[3], dx->data, d->td[2], gamma,
                                                          dgamma, dbeta, (double)p->eps, save_mean, save_invstd);
        if (!legacy_retry(d, mode, s, op, &rc))
            return rc;
    }
}
