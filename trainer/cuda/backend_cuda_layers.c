/* backend_cuda_layers.c — the layer ops of the CUDA backend: conv and linear on cuDNN / cuBLASLt with the
 * inputs brought to one run format (the 16-bit compute format, else fp32; TF32 rounding to nearest even
 * before a TF32-math call), batchnorm on cuDNN, pools on the backend's kernels. Promises backend.h's
 * accumulate rules: cuDNN's "+=" lands in a zeroed staging tensor that is then copied / added with the
 * 16-bit rounding of the CPU backend; 16-bit weight gradients are rounded before they reach fp32. */
#include <cuda_runtime_api.h>
#include "trainer/cuda/backend_cuda_internal.h"
#include "trainer/cuda/backend_kernels.h"

#define TRY(expr) do { int rc_ = (expr); if (rc_) return rc_; } while (0)

/* The storage format convolutions and matmuls run in for a compute format. */
static fp_dtype run_dt(fp_dtype compute) { return fp_bcu_is16(compute) ? compute : FP_DT_F32; }

/* A staged tensor (contents undefined) of dims d in dtype dt. */
static fp_dtensor staged(fp_backend *be, fp_dims d, fp_dtype dt, int slot, int *rc)
{
    fp_tensor t = fp_tensor_of(NULL, dt, d);
    fp_dtensor o = {fp_bcu_stage(be, slot, fp_tensor_count(&t) * (size_t)fp_dtype_bytes(dt)), dt, d};
    *rc = o.data ? FP_OK : FP_ENOMEM;
    return o;
}

/* Writes a forward result computed in ys (staged or y itself) to y. */
static int finish_out(fp_backend *be, const fp_tensor *y, const fp_dtensor *ys)
{
    if (ys->data == y->p)
        return FP_OK;
    return fp_cbk_cast(y->p, y->dt, ys->data, ys->dtype, fp_tensor_count(y), be->stream);
}

static int zero_t(fp_backend *be, const fp_tensor *t)
{
    return be->stream ? (cudaMemsetAsync(t->p, 0, fp_tensor_count(t) * (size_t)fp_dtype_bytes(t->dt),
                                         (cudaStream_t)be->stream) == cudaSuccess
                             ? FP_OK
                             : fp_fail(FP_EINTERNAL, "cuda backend: zeroing a gradient failed"))
                      : FP_EINTERNAL;
}

static fp_dims flat(fp_dims d)
{
    fp_dims f = {d.n, 1, 1, d.h * d.w * d.c};
    return f;
}

/* ---------------------------------------------------------------- convolution */

int fp_bcu_conv_forward(fp_backend *be, fp_tensor y, fp_tensor x, fp_tensor w, const fp_conv_params *p,
                        fp_dtype compute)
{
    TRY(fp_backend_conv_check("conv_forward", &x, &y, &w, p, FP_BACKEND_ANY, compute));
    int rc, tf = compute == FP_DT_TF32;
    fp_dtype rd = run_dt(compute);
    fp_cudnn *d = fp_bcu_ctx(be, compute, &rc);
    if (!d)
        return rc;
    fp_dtensor xs = fp_bcu_as(be, &x, rd, tf, FP_BCU_A, &rc);
    TRY(rc);
    fp_dtensor ws = fp_bcu_as(be, &w, rd, tf && fp_bcu_is16(w.dt), FP_BCU_W, &rc);
    TRY(rc);
    fp_dtensor ys = y.dt == rd ? fp_bcu_dt(&y) : staged(be, y.d, rd, FP_BCU_OUT, &rc);
    TRY(rc);
    TRY(fp_cudnn_conv_forward(d, &ys, &xs, &ws, p));
    return finish_out(be, &y, &ys);
}

int fp_bcu_conv_backward_data(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor w, const fp_conv_params *p,
                              fp_dtype compute, int accumulate)
{
    TRY(fp_backend_conv_check("conv_backward_data", &dx, &dy, &w, p, FP_BACKEND_ANY, compute));
    int rc, tf = compute == FP_DT_TF32;
    fp_dtype rd = run_dt(compute);
    fp_cudnn *d = fp_bcu_ctx(be, compute, &rc);
    if (!d)
        return rc;
    fp_dtensor dys = fp_bcu_as(be, &dy, rd, tf, FP_BCU_A, &rc);
    TRY(rc);
    fp_dtensor ws = fp_bcu_as(be, &w, rd, tf && fp_bcu_is16(w.dt), FP_BCU_W, &rc);
    TRY(rc);
    if (dx.dt == FP_DT_F32 && rd == FP_DT_F32) {   /* cuDNN's beta = 1 straight into dx */
        if (!accumulate)
            TRY(zero_t(be, &dx));
        fp_dtensor dxs = fp_bcu_dt(&dx);
        return fp_cudnn_conv_backward_data(d, &dxs, &dys, &ws, p);
    }
    fp_dtensor tmp = fp_bcu_zeroed(be, dx.d, rd, FP_BCU_OUT, &rc);
    TRY(rc);
    TRY(fp_cudnn_conv_backward_data(d, &tmp, &dys, &ws, p));
    return fp_bcu_land_grad(be, &dx, &tmp, accumulate);
}

int fp_bcu_conv_backward_weights(fp_backend *be, fp_tensor dw, fp_tensor dy, fp_tensor x, const fp_conv_params *p,
                                 fp_dtype compute)
{
    TRY(fp_backend_conv_check("conv_backward_weights", &x, &dy, &dw, p, FP_BACKEND_F32, compute));
    int rc, tf = compute == FP_DT_TF32;
    fp_dtype rd = run_dt(compute);
    fp_cudnn *d = fp_bcu_ctx(be, compute, &rc);
    if (!d)
        return rc;
    fp_dtensor dys = fp_bcu_as(be, &dy, rd, tf, FP_BCU_A, &rc);
    TRY(rc);
    fp_dtensor xs = fp_bcu_as(be, &x, rd, tf, FP_BCU_B, &rc);
    TRY(rc);
    if (rd == FP_DT_F32) {
        fp_dtensor dws = fp_bcu_dt(&dw);
        return fp_cudnn_conv_backward_filter(d, &dws, &dys, &xs, p);
    }
    /* the gradient of the 16-bit weight copy, rounded (cuDNN's 16-bit output), lands in fp32 */
    fp_dtensor tmp = fp_bcu_zeroed(be, dw.d, rd, FP_BCU_OUT, &rc);
    TRY(rc);
    TRY(fp_cudnn_conv_backward_filter(d, &tmp, &dys, &xs, p));
    return fp_cbk_add(dw.p, FP_DT_F32, dw.p, FP_DT_F32, tmp.data, rd, fp_tensor_count(&dw), 0, be->stream);
}

/* ---------------------------------------------------------------- batchnorm */

int fp_bcu_bn_forward_train(fp_backend *be, fp_tensor y, fp_tensor save, fp_tensor running_mean,
                            fp_tensor running_var, fp_tensor x, fp_tensor gamma, fp_tensor beta,
                            const fp_bn_params *p)
{
    const char *op = "bn_forward_train";
    TRY(fp_backend_bn_check(op, &y, &x, &gamma, &beta, &running_mean, &running_var, 1, p));
    TRY(fp_backend_vec_check(op, "save", &save, 2 * x.d.c, 1));
    int rc;
    fp_cudnn *d = fp_bcu_ctx(be, FP_DT_F32, &rc);
    if (!d)
        return rc;
    fp_dtensor xs = fp_bcu_dt(&x);
    fp_dtensor ys = y.dt == x.dt ? fp_bcu_dt(&y) : staged(be, y.d, x.dt, FP_BCU_OUT, &rc);
    TRY(rc);
    float *sv = save.p;
    TRY(fp_cudnn_bn_forward_train(d, &ys, sv, sv ? sv + x.d.c : NULL, running_mean.p, running_var.p, &xs, gamma.p,
                                  beta.p, p));
    return finish_out(be, &y, &ys);
}

int fp_bcu_bn_forward_eval(fp_backend *be, fp_tensor y, fp_tensor x, fp_tensor gamma, fp_tensor beta,
                           fp_tensor running_mean, fp_tensor running_var, const fp_bn_params *p)
{
    TRY(fp_backend_bn_check("bn_forward_eval", &y, &x, &gamma, &beta, &running_mean, &running_var, 0, p));
    int rc;
    fp_cudnn *d = fp_bcu_ctx(be, FP_DT_F32, &rc);
    if (!d)
        return rc;
    fp_dtensor xs = fp_bcu_dt(&x);
    fp_dtensor ys = y.dt == x.dt ? fp_bcu_dt(&y) : staged(be, y.d, x.dt, FP_BCU_OUT, &rc);
    TRY(rc);
    TRY(fp_cudnn_bn_forward_eval(d, &ys, &xs, gamma.p, beta.p, running_mean.p, running_var.p, p));
    return finish_out(be, &y, &ys);
}

int fp_bcu_bn_backward(fp_backend *be, fp_tensor dx, fp_tensor dgamma, fp_tensor dbeta, fp_tensor dy, fp_tensor x,
                       fp_tensor gamma, fp_tensor save, int accumulate)
{
    const char *op = "bn_backward";
    TRY(fp_backend_bn_backward_check(op, &dx, &dgamma, &dbeta, &dy, &x, &gamma, &save));
    int rc;
    fp_cudnn *d = fp_bcu_ctx(be, FP_DT_F32, &rc);
    if (!d)
        return rc;
    fp_dtensor xs = fp_bcu_dt(&x);
    fp_dtensor dys = fp_bcu_as(be, &dy, x.dt, 0, FP_BCU_A, &rc);
    TRY(rc);
    /* backward reads the saved inverse std (which holds the forward's eps); cuDNN still wants an eps >=
     * CUDNN_BN_MIN_EPSILON "as in forward": PyTorch's default stands in (not used with saved stats) */
    fp_bn_params bp = {0.1f, 1e-5f};
    const float *sv = save.p;
    if (dx.p && dx.dt == FP_DT_F32 && x.dt == FP_DT_F32) {
        if (!accumulate)
            TRY(zero_t(be, &dx));
        fp_dtensor dxs = fp_bcu_dt(&dx);
        return fp_cudnn_bn_backward(d, &dxs, dgamma.p, dbeta.p, &dys, &xs, gamma.p, sv, sv + x.d.c, &bp);
    }
    fp_dtensor tmp = fp_bcu_zeroed(be, x.d, x.dt, FP_BCU_OUT, &rc);
    TRY(rc);
    TRY(fp_cudnn_bn_backward(d, &tmp, dgamma.p, dbeta.p, &dys, &xs, gamma.p, sv, sv + x.d.c, &bp));
    return dx.p ? fp_bcu_land_grad(be, &dx, &tmp, accumulate) : FP_OK;
}

/* ---------------------------------------------------------------- pools */

int fp_bcu_maxpool_forward(fp_backend *be, fp_tensor y, int *argmax, fp_tensor x, const fp_pool_params *p)
{
    TRY(fp_backend_pool_check("maxpool_forward", &x, &y, p));
    return fp_cbk_maxpool_forward(y.p, y.dt, argmax, x.p, x.dt, x.d.n, x.d.h, x.d.w, x.d.c, y.d.h, y.d.w, p->k,
                                  p->stride, p->pad, be->stream);
}

int fp_bcu_maxpool_backward(fp_backend *be, fp_tensor dx, fp_tensor dy, const int *argmax, const fp_pool_params *p,
                            int accumulate)
{
    TRY(fp_backend_pool_check("maxpool_backward", &dx, &dy, p));
    TRY(fp_backend_want(argmax != NULL, "maxpool_backward", "NULL argmax"));
    return fp_cbk_maxpool_backward(dx.p, dx.dt, dy.p, dy.dt, argmax, dx.d.n, dx.d.h, dx.d.w, dx.d.c, dy.d.h, dy.d.w,
                                   p->k, p->stride, p->pad, accumulate, be->stream);
}

int fp_bcu_avgpool_forward(fp_backend *be, fp_tensor y, fp_tensor x)
{
    TRY(fp_backend_avg_check("avgpool_forward", &x, &y));
    return fp_cbk_avgpool_forward(y.p, y.dt, x.p, x.dt, x.d.n, (size_t)x.d.h * (size_t)x.d.w, x.d.c, be->stream);
}

int fp_bcu_avgpool_backward(fp_backend *be, fp_tensor dx, fp_tensor dy, int accumulate)
{
    TRY(fp_backend_avg_check("avgpool_backward", &dx, &dy));
    return fp_cbk_avgpool_backward(dx.p, dx.dt, dy.p, dy.dt, dx.d.n, (size_t)dx.d.h * (size_t)dx.d.w, dx.d.c,
                                   accumulate, be->stream);
}

/* ---------------------------------------------------------------- linear */

int fp_bcu_linear_forward(fp_backend *be, fp_tensor y, fp_tensor x, fp_tensor w, fp_tensor b, fp_dtype compute)
{
    TRY(fp_backend_linear_check("linear_forward", &x, &y, &w, &b, FP_BACKEND_ANY, compute));
    int rc, tf = compute == FP_DT_TF32;
    fp_dtype rd = run_dt(compute);
    fp_cudnn *d = fp_bcu_ctx(be, compute, &rc);
    if (!d)
        return rc;
    fp_dtensor xs = fp_bcu_as(be, &x, rd, tf, FP_BCU_A, &rc);
    TRY(rc);
    xs.dims = flat(x.d);
    fp_dtensor ws = fp_bcu_as(be, &w, rd, tf && fp_bcu_is16(w.dt), FP_BCU_W, &rc);
    TRY(rc);
    fp_dtensor bs = {0};
    if (b.p) {
        bs = fp_bcu_as(be, &b, rd, tf && fp_bcu_is16(b.dt), FP_BCU_B2, &rc);
        TRY(rc);
    }
    fp_dtensor ys = y.dt == rd ? fp_bcu_dt(&y) : staged(be, y.d, rd, FP_BCU_OUT, &rc);
    TRY(rc);
    TRY(fp_cudnn_linear_forward(d, &ys, &xs, &ws, b.p ? &bs : NULL));
    return finish_out(be, &y, &ys);
}

int fp_bcu_linear_backward_data(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor w, fp_dtype compute,
                                int accumulate)
{
    fp_tensor nob = {0};
    TRY(fp_backend_linear_check("linear_backward_data", &dx, &dy, &w, &nob, FP_BACKEND_ANY, compute));
    int rc, tf = compute == FP_DT_TF32;
    fp_dtype rd = run_dt(compute);
    fp_cudnn *d = fp_bcu_ctx(be, compute, &rc);
    if (!d)
        return rc;
    fp_dtensor dys = fp_bcu_as(be, &dy, rd, tf, FP_BCU_A, &rc);
    TRY(rc);
    fp_dtensor ws = fp_bcu_as(be, &w, rd, tf && fp_bcu_is16(w.dt), FP_BCU_W, &rc);
    TRY(rc);
    /* x only carries the shape for dx alone: dx's own view stands in for it */
    if (dx.dt == FP_DT_F32 && rd == FP_DT_F32) {
        if (!accumulate)
            TRY(zero_t(be, &dx));
        fp_dtensor dxs = fp_bcu_dt(&dx);
        dxs.dims = flat(dx.d);
        return fp_cudnn_linear_backward(d, &dxs, NULL, NULL, &dys, &dxs, &ws);
    }
    fp_dtensor tmp = fp_bcu_zeroed(be, flat(dx.d), rd, FP_BCU_OUT, &rc);
    TRY(rc);
    TRY(fp_cudnn_linear_backward(d, &tmp, NULL, NULL, &dys, &tmp, &ws));
    return fp_bcu_land_grad(be, &dx, &tmp, accumulate);
}

int fp_bcu_linear_backward_weights(fp_backend *be, fp_tensor dw, fp_tensor db, fp_tensor dy, fp_tensor x,
                                   fp_tensor w, fp_dtype compute)
{
    const char *op = "linear_backward_weights";
    TRY(fp_backend_linear_check(op, &x, &dy, &dw, &db, FP_BACKEND_F32, compute));
    TRY(fp_backend_check(op, "w", &w, FP_BACKEND_ANY, 0));
    TRY(fp_backend_same_dims(op, "w", &w, "dw", &dw));
    int rc, tf = compute == FP_DT_TF32;
    fp_dtype rd = run_dt(compute);
    fp_cudnn *d = fp_bcu_ctx(be, compute, &rc);
    if (!d)
        return rc;
    fp_dtensor dys = fp_bcu_as(be, &dy, rd, tf, FP_BCU_A, &rc);
    TRY(rc);
    fp_dtensor xs = fp_bcu_as(be, &x, rd, tf, FP_BCU_B, &rc);
    TRY(rc);
    xs.dims = flat(x.d);
    fp_dtensor ws = fp_bcu_as(be, &w, rd, tf && fp_bcu_is16(w.dt), FP_BCU_W, &rc);
    TRY(rc);
    if (rd == FP_DT_F32) {
        fp_dtensor dws = fp_bcu_dt(&dw), dbs = fp_bcu_dt(&db);
        return fp_cudnn_linear_backward(d, NULL, &dws, db.p ? &dbs : NULL, &dys, &xs, &ws);
    }
    /* weight and bias gradients of the 16-bit copies, rounded (cuBLAS's 16-bit outputs), land in fp32 */
    fp_dtensor tw = fp_bcu_zeroed(be, dw.d, rd, FP_BCU_OUT, &rc), tb = {0};
    TRY(rc);
    if (db.p) {
        tb = fp_bcu_zeroed(be, db.d, rd, FP_BCU_OUT2, &rc);
        TRY(rc);
    }
    TRY(fp_cudnn_linear_backward(d, NULL, &tw, db.p ? &tb : NULL, &dys, &xs, &ws));
    TRY(fp_cbk_add(dw.p, FP_DT_F32, dw.p, FP_DT_F32, tw.data, rd, fp_tensor_count(&dw), 0, be->stream));
    return db.p ? fp_cbk_add(db.p, FP_DT_F32, db.p, FP_DT_F32, tb.data, rd, fp_tensor_count(&db), 0, be->stream)
                : FP_OK;
}
