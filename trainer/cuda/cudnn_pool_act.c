/* cudnn_pool_act.c — relu, max pooling and global average pooling on cuDNN for NHWC tensors in fp32 /
 * fp16 / bf16, with layers.h's semantics: relu and max pooling propagate NaN, padded cells never win a
 * max window (cuDNN pads max pooling with -inf), backward accumulates (beta = 1). */
#include "config.h"
#include "error.h"
#include "trainer/cuda/cudnn_internal.h"

static int check_pair(fp_cudnn *d, const char *op, const fp_dtensor *a, const char *an, const fp_dtensor *b,
                      const char *bn, int same_dims)
{
    int rc;
    if ((rc = fpc_check_tensor(d, a, op, an)) != FP_OK || (rc = fpc_check_tensor(d, b, op, bn)) != FP_OK ||
        (rc = fpc_same_dtype(d, op, a, b)) != FP_OK)
        return rc;
    if (same_dims && (rc = fpc_same_dims(d, op, b->dims, a->dims, bn)) != FP_OK)
        return rc;
    return FP_OK;
}

int fp_cudnn_relu_forward(fp_cudnn *d, const fp_dtensor *y, const fp_dtensor *x)
{
    const char *op = "relu forward";
    int rc = check_pair(d, op, x, "x", y, "y", 1);
    if (rc != FP_OK || (rc = fpc_set_nhwc(d, d->td[0], x->dims, x->dtype, op)) != FP_OK)
        return rc;
    const float one = 1.0f, zero = 0.0f;
    /* In place (y == x) is allowed by cuDNN for activations. */
    FPC_DNN(d, cudnnActivationForward(d->dnn, d->act, &one, d->td[0], x->data, &zero, d->td[0], y->data), op);
    return FP_OK;
}

int fp_cudnn_relu_backward(fp_cudnn *d, const fp_dtensor *dx, const fp_dtensor *dy, const fp_dtensor *y)
{
    const char *op = "relu backward";
    int rc;
    if ((rc = check_pair(d, op, y, "y", dy, "dy", 1)) != FP_OK || (rc = check_pair(d, op, y, "y", dx, "dx", 1)) != FP_OK ||
        (rc = fpc_set_nhwc(d, d->td[0], y->dims, y->dtype, op)) != FP_OK)
        return rc;
    const float one = 1.0f;
    /* The forward input may have been overwritten (in-place relu); y > 0 exactly where x > 0, so y stands
     * in for x, as Caffe's in-place cuDNN relu does. beta = 1: dx += dy where y > 0. */
    FPC_DNN(d, cudnnActivationBackward(d->dnn, d->act, &one, d->td[0], y->data, d->td[0], dy->data, d->td[0],
                                       y->data, &one, d->td[0], dx->data), op);
    return FP_OK;
}

static int set_maxpool(fp_cudnn *d, const fp_dtensor *x, const fp_dtensor *y, const fp_pool_params *p,
                       const char *op)
{
    if (!p)
        return fpc_fail_arg(d, op, "NULL params");
    if (p->k <= 0 || p->stride <= 0 || p->pad < 0 || p->pad > p->k / 2)
        return fpc_fail_arg(d, op, "needs k > 0, stride > 0 and 0 <= pad <= k/2");
    fp_dims yd = fp_pool_out_dims(x->dims, p);
    if (yd.n <= 0)
        return fpc_fail_arg(d, op, "pooling window larger than the padded input");
    int rc = fpc_same_dims(d, op, y->dims, yd, "pooled output");
    if (rc != FP_OK)
        return rc;
    /* MAX_DETERMINISTIC: the backward pass gives the same bits run after run. */
    FPC_DNN(d, cudnnSetPooling2dDescriptor(d->pool, CUDNN_POOLING_MAX_DETERMINISTIC, CUDNN_PROPAGATE_NAN, p->k, p->k,
                                           p->pad, p->pad, p->stride, p->stride), op);
    if ((rc = fpc_set_nhwc(d, d->td[0], x->dims, x->dtype, op)) != FP_OK ||
        (rc = fpc_set_nhwc(d, d->td[1], y->dims, y->dtype, op)) != FP_OK)
        return rc;
    return FP_OK;
}

int fp_cudnn_maxpool_forward(fp_cudnn *d, const fp_dtensor *y, const fp_dtensor *x, const fp_pool_params *p)
{
    const char *op = "maxpool forward";
    int rc = check_pair(d, op, x, "x", y, "y", 0);
    if (rc != FP_OK || (rc = set_maxpool(d, x, y, p, op)) != FP_OK)
        return rc;
    const float one = 1.0f, zero = 0.0f;
    FPC_DNN(d, cudnnPoolingForward(d->dnn, d->pool, &one, d->td[0], x->data, &zero, d->td[1], y->data), op);
    return FP_OK;
}

int fp_cudnn_maxpool_backward(fp_cudnn *d, const fp_dtensor *dx, const fp_dtensor *dy, const fp_dtensor *x,
                              const fp_dtensor *y, const fp_pool_params *p)
{
    const char *op = "maxpool backward";
    int rc;
    if ((rc = check_pair(d, op, x, "x", dx, "dx", 1)) != FP_OK || (rc = check_pair(d, op, y, "y", dy, "dy", 1)) != FP_OK ||
        (rc = fpc_same_dtype(d, op, x, y)) != FP_OK || (rc = set_maxpool(d, x, y, p, op)) != FP_OK)
        return rc;
    const float one = 1.0f;   /* beta = 1: dx += */
    FPC_DNN(d, cudnnPoolingBackward(d->dnn, d->pool, &one, d->td[1], y->data, d->td[1], dy->data, d->td[0], x->data,
                                    &one, d->td[0], dx->data), op);
    return FP_OK;
}

int fp_cudnn_avgpool_global_forward(fp_cudnn *d, const fp_dtensor *y, const fp_dtensor *x)
{
    const char *op = "global avgpool forward";
    int rc = check_pair(d, op, x, "x", y, "y", 0);
    if (rc != FP_OK)
        return rc;
    fp_dims yd = {x->dims.n, 1, 1, x->dims.c};
    if ((rc = fpc_same_dims(d, op, y->dims, yd, "pooled output")) != FP_OK)
        return rc;
    /* One window over the whole plane, no padding: the count is h*w. */
    FPC_DNN(d, cudnnSetPooling2dDescriptor(d->pool, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, CUDNN_PROPAGATE_NAN,
                                           x->dims.h, x->dims.w, 0, 0, x->dims.h, x->dims.w), op);
    if ((rc = fpc_set_nhwc(d, d->td[0], x->dims, x->dtype, op)) != FP_OK ||
        (rc = fpc_set_nhwc(d, d->td[1], y->dims, y->dtype, op)) != FP_OK)
        return rc;
    const float one = 1.0f, zero = 0.0f;
    FPC_DNN(d, cudnnPoolingForward(d->dnn, d->pool, &one, d->td[0], x->data, &zero, d->td[1], y->data), op);
    return FP_OK;
}

int fp_cudnn_avgpool_global_backward(fp_cudnn *d, const fp_dtensor *dx, const fp_dtensor *dy)
{
    const char *op = "global avgpool backward";
    int rc = check_pair(d, op, dx, "dx", dy, "dy", 0);
    if (rc != FP_OK)
        return rc;
    fp_dims yd = {dx->dims.n, 1, 1, dx->dims.c};
    if ((rc = fpc_same_dims(d, op, dy->dims, yd, "dy")) != FP_OK ||
        (rc = fpc_set_nhwc(d, d->td[0], dx->dims, dx->dtype, op)) != FP_OK ||
        (rc = fpc_set_nhwc(d, d->td[1], dy->dims, dy->dtype, op)) != FP_OK)
        return rc;
    /* dx += dy / (h*w), dy broadcast over the plane (cudnnAddTensor broadcasts dims of size 1). */
    const float scale = 1.0f / (float)((double)dx->dims.h * dx->dims.w), one = 1.0f;
    FPC_DNN(d, cudnnAddTensor(d->dnn, &scale, d->td[1], dy->data, &one, d->td[0], dx->data), op);
    return FP_OK;
}
