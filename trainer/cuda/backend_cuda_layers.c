/* backend_cuda_layers.c — the layer ops of the CUDA backend: conv and linear on cuDNN / cuBLASLt with the
 * inputs brought to one run format (the 16-bit compute format, else fp32; under TF32 compute fp32 operands go
 * to the library unrounded: its TF32 math converts them, cudnn_ops.h), batchnorm on cuDNN, pools on the
 * backend's kernels. Promises backend.h's accumulate rules: cuDNN's "+=" lands in a zeroed staging tensor
 * that is then copied / added with the 16-bit rounding of the CPU backend; 16-bit weight gradients are
 * rounded before they reach fp32.
 * Convolution backward writes with cuDNN's beta = 0 wherever the output holds nothing to keep (a staging
 * tensor, or dx with accumulate 0): cuDNN does not read an output under beta 0, so nothing is zeroed first. */
#include <cuda_runtime_api.h>
#include "trainer/cuda/backend_cuda_internal.h"
#include "trainer/cuda/backend_kernels.h"

/* The storage format convolutions and matmuls run in for a compute format. */
static fp_dtype run_dt(fp_dtype compute) { return fp_bcu_is16(compute) ? compute : FP_DT_F32; }

/* *d: the cuDNN context for a compute format; fp_bcu_ctx's error when there is none. */
static int ctx_for(fp_backend *be, fp_dtype compute, fp_cudnn **d)
{
    int rc;
    *d = fp_bcu_ctx(be, compute, &rc);
    return *d ? FP_OK : rc;
}

/* *o: t in storage dtype dt (t itself, or cast into slot: fp_bcu_as). */
static int operand(fp_backend *be, fp_dtensor *o, const fp_tensor *t, fp_dtype dt, int slot)
{
    int rc;
    *o = fp_bcu_as(be, t, dt, slot, &rc);
    return rc;
}

/* A conv / linear op's context and operands, each in the run format rd. */
typedef struct {
    fp_cudnn *d;
    fp_dtype rd;
    fp_dtensor a, b, w, bias;   /* slots A, B, W, B2; {0} where not asked for */
} run_args;

/* Fills *r for compute, staging in this order: a and b (activations or gradients; b may be NULL), w (a
 * weight, may be NULL) and bias (as w; NULL or skipped: none), each only when not already in the run format;
 * w and bias are read from the backend's valid 16-bit weight copy instead when they lie in it
 * (fp_bcu_wc_view). Under TF32 compute the run format is fp32 and nothing is staged: the library's TF32
 * math converts the operands (an fp32 weight arrives already rounded to TF32 by the model's weight copy,
 * which that conversion leaves as it is). */
static int stage_args(fp_backend *be, fp_dtype compute, run_args *r, const fp_tensor *a, const fp_tensor *b,
                      const fp_tensor *w, const fp_tensor *bias)
{
    *r = (run_args){.rd = run_dt(compute)};
    TRY(ctx_for(be, compute, &r->d));
    TRY(operand(be, &r->a, a, r->rd, FP_BCU_A));
    if (b)
        TRY(operand(be, &r->b, b, r->rd, FP_BCU_B));
    if (w && !fp_bcu_wc_view(be, w, r->rd, &r->w))   /* the optimizer's 16-bit copy, else cast now */
        TRY(operand(be, &r->w, w, r->rd, FP_BCU_W));
    if (bias && bias->p && !fp_bcu_wc_view(be, bias, r->rd, &r->bias))
        TRY(operand(be, &r->bias, bias, r->rd, FP_BCU_B2));
    return FP_OK;
}

/* *ys: where a forward computes y in dtype dt: y itself when y is in dt, else staged (contents undefined). */
static int out_for(fp_backend *be, fp_dtensor *ys, const fp_tensor *y, fp_dtype dt)
{
    *ys = fp_bcu_dt(y);
    if (y->dt == dt)
        return FP_OK;
    fp_tensor t = fp_tensor_of(NULL, dt, y->d);
    ys->data = fp_bcu_stage(be, FP_BCU_OUT, fp_tensor_count(&t) * (size_t)fp_dtype_bytes(dt));
    ys->dtype = dt;
    return ys->data ? FP_OK : FP_ENOMEM;
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

/* Whether the input gradient dx, computed in dtype rd, is written by cuDNN / cuBLAS (beta = 1) into dx itself. */
/* Whether a backward writes dx itself: dx in the format the call computes in, and either fp32 (the library's blend,
 * old + r, is backend.h's rule) or written over (round(r) straight into a 16-bit dx is the bits a staging then a
 * copy would give; only a 16-bit accumulation, round(old + round(r)), needs the staging). */
static int grad_direct(const fp_tensor *dx, fp_dtype rd, int accumulate)
{
    return dx->p && dx->dt == rd && (rd == FP_DT_F32 || !accumulate);
}

/* A staging tensor of dims d and dtype dt in slot, contents undefined (for outputs written with beta 0). */
static int staged(fp_backend *be, fp_dtensor *g, fp_dims d, fp_dtype dt, int slot)
{
    fp_tensor t = fp_tensor_of(NULL, dt, d);
    *g = (fp_dtensor){fp_bcu_stage(be, slot, fp_tensor_count(&t) * (size_t)fp_dtype_bytes(dt)), dt, d};
    return g->data ? FP_OK : FP_ENOMEM;
}

/* *g: where a backward writes the input gradient dx (dims d: dx's own or its flattened view) computed in rd:
 * dx itself when grad_direct, else a staging that grad_end lands in dx with backend.h's accumulate rule
 * (nothing for a skipped dx). beta NULL: the library call adds (beta 1), so dx is zeroed first unless
 * accumulate and the staging is zeroed. beta non-NULL (the call takes a beta): *beta = 1 only where the
 * library adds into dx itself (grad_direct and accumulate), else 0, and nothing is zeroed. */
static int grad_begin(fp_backend *be, fp_dtensor *g, const fp_tensor *dx, fp_dims d, fp_dtype rd, int accumulate,
                      float *beta)
{
    int rc;
    if (grad_direct(dx, rd, accumulate)) {
        if (beta)
            *beta = accumulate ? 1.0f : 0.0f;
        else if (!accumulate)
            TRY(zero_t(be, dx));
        *g = fp_bcu_dt(dx);
        g->dims = d;
        return FP_OK;
    }
    if (beta) {
        *beta = 0.0f;
        return staged(be, g, d, rd, FP_BCU_OUT);
    }
    *g = fp_bcu_zeroed(be, d, rd, FP_BCU_OUT, &rc);
    return rc;
}

static int grad_end(fp_backend *be, const fp_tensor *dx, const fp_dtensor *g, int accumulate)
{
    if (!dx->p || grad_direct(dx, g->dtype, accumulate))
        return FP_OK;
    return fp_bcu_land_grad(be, dx, g, accumulate);
}

/* *g: where a backward ACCUMULATES the fp32 weight gradient dw computed in rd: dw itself (beta = 1) when rd is
 * fp32, else a staging in slot: wgrad_end adds that gradient of the 16-bit copy, rounded (cuDNN's /
 * cuBLAS's 16-bit output), to dw in fp32. beta NULL: the staging is zeroed (the call adds); non-NULL: *beta
 * gets 1 for dw itself, 0 for the staging, which is then not zeroed. */
static int wgrad_begin(fp_backend *be, fp_dtensor *g, const fp_tensor *dw, fp_dtype rd, int slot, float *beta)
{
    int rc = FP_OK;
    if (beta)
        *beta = rd == FP_DT_F32 ? 1.0f : 0.0f;
    if (rd == FP_DT_F32)
        *g = fp_bcu_dt(dw);
    else if (beta)
        rc = staged(be, g, dw->d, rd, slot);
    else
        *g = fp_bcu_zeroed(be, dw->d, rd, slot, &rc);
    return rc;
}

static int wgrad_end(fp_backend *be, const fp_tensor *dw, const fp_dtensor *g, fp_dtype rd)
{
    if (rd == FP_DT_F32)
        return FP_OK;
    return fp_cbk_add(dw->p, FP_DT_F32, dw->p, FP_DT_F32, g->data, rd, fp_tensor_count(dw), 0, be->stream);
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
    run_args r;
    fp_dtensor ys;
    TRY(stage_args(be, compute, &r, &x, NULL, &w, NULL));
    TRY(out_for(be, &ys, &y, r.rd));
    TRY(fp_cudnn_conv_forward(r.d, &ys, &r.a, &r.w, p));
    return finish_out(be, &y, &ys);
}

int fp_bcu_conv_backward_data(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor w, const fp_conv_params *p,
                              fp_dtype compute, int accumulate)
{
    TRY(fp_backend_conv_check("conv_backward_data", &dx, &dy, &w, p, FP_BACKEND_ANY, compute));
    run_args r;
    fp_dtensor g;
    TRY(stage_args(be, compute, &r, &dy, NULL, &w, NULL));
    float beta;
    TRY(grad_begin(be, &g, &dx, dx.d, r.rd, accumulate, &beta));
    TRY(fp_cudnn_conv_backward_data_beta(r.d, &g, &r.a, &r.w, p, beta));
    return grad_end(be, &dx, &g, accumulate);
}

int fp_bcu_conv_backward_weights(fp_backend *be, fp_tensor dw, fp_tensor dy, fp_tensor x, const fp_conv_params *p,
                                 fp_dtype compute)
{
    TRY(fp_backend_conv_check("conv_backward_weights", &x, &dy, &dw, p, FP_BACKEND_F32, compute));
    run_args r;
    fp_dtensor g;
    TRY(stage_args(be, compute, &r, &dy, &x, NULL, NULL));
    float beta;
    TRY(wgrad_begin(be, &g, &dw, r.rd, FP_BCU_OUT, &beta));
    TRY(fp_cudnn_conv_backward_filter_beta(r.d, &g, &r.a, &r.b, p, beta));
    return wgrad_end(be, &dw, &g, r.rd);
}

/* ---------------------------------------------------------------- batchnorm (in x's format, fp32 math) */

int fp_bcu_bn_forward_train(fp_backend *be, fp_tensor y, fp_tensor save, fp_tensor running_mean,
                            fp_tensor running_var, fp_tensor x, fp_tensor gamma, fp_tensor beta,
                            const fp_bn_params *p)
{
    const char *op = "bn_forward_train";
    TRY(fp_backend_bn_check(op, &y, &x, &gamma, &beta, &running_mean, &running_var, 1, p));
    TRY(fp_backend_vec_check(op, "save", &save, 2 * x.d.c, 1));
    fp_cudnn *d;
    fp_dtensor xs = fp_bcu_dt(&x), ys;
    TRY(ctx_for(be, FP_DT_F32, &d));
    TRY(out_for(be, &ys, &y, x.dt));
    float *sv = save.p;
    TRY(fp_cudnn_bn_forward_train(d, &ys, sv, sv ? sv + x.d.c : NULL, running_mean.p, running_var.p, &xs, gamma.p,
                                  beta.p, p));
    return finish_out(be, &y, &ys);
}

int fp_bcu_bn_forward_eval(fp_backend *be, fp_tensor y, fp_tensor x, fp_tensor gamma, fp_tensor beta,
                           fp_tensor running_mean, fp_tensor running_var, const fp_bn_params *p)
{
    TRY(fp_backend_bn_check("bn_forward_eval", &y, &x, &gamma, &beta, &running_mean, &running_var, 0, p));
    fp_cudnn *d;
    fp_dtensor xs = fp_bcu_dt(&x), ys;
    TRY(ctx_for(be, FP_DT_F32, &d));
    TRY(out_for(be, &ys, &y, x.dt));
    TRY(fp_cudnn_bn_forward_eval(d, &ys, &xs, gamma.p, beta.p, running_mean.p, running_var.p, p));
    return finish_out(be, &y, &ys);
}

int fp_bcu_bn_backward(fp_backend *be, fp_tensor dx, fp_tensor dgamma, fp_tensor dbeta, fp_tensor dy, fp_tensor x,
                       fp_tensor gamma, fp_tensor save, int accumulate)
{
    const char *op = "bn_backward";
    TRY(fp_backend_bn_backward_check(op, &dx, &dgamma, &dbeta, &dy, &x, &gamma, &save));
    fp_cudnn *d;
    fp_dtensor xs = fp_bcu_dt(&x), dys, g;
    TRY(ctx_for(be, FP_DT_F32, &d));
    TRY(operand(be, &dys, &dy, x.dt, FP_BCU_A));
    /* backward reads the saved inverse std (which holds the forward's eps); cuDNN still wants an eps >=
     * CUDNN_BN_MIN_EPSILON "as in forward": PyTorch's default stands in (not used with saved stats) */
    fp_bn_params bp = {0.1f, 1e-5f};
    const float *sv = save.p;
    TRY(grad_begin(be, &g, &dx, x.d, x.dt, accumulate, NULL));   /* a checked dx has x's dims */
    TRY(fp_cudnn_bn_backward(d, &g, dgamma.p, dbeta.p, &dys, &xs, gamma.p, sv, sv + x.d.c, &bp));
    return grad_end(be, &dx, &g, accumulate);
}

/* ---------------------------------------------------------------- batchnorm + (add +) relu, fused */

int fp_bcu_bn_act_query(fp_backend *be, size_t *reserve_bytes, fp_tensor x, int with_add)
{
    TRY(fp_backend_check("bn_act_query", "x", &x, FP_BACKEND_ANY, 0));
    TRY(fp_backend_want(reserve_bytes != NULL, "bn_act_query", "NULL reserve_bytes"));
    fp_cudnn *d;
    fp_dtensor xs = fp_bcu_dt(&x);
    TRY(ctx_for(be, FP_DT_F32, &d));
    return fp_cudnn_bn_act_query(d, &xs, with_add, reserve_bytes);
}

int fp_bcu_bn_act_forward_train(fp_backend *be, fp_tensor y, fp_tensor save, fp_tensor running_mean,
                                fp_tensor running_var, fp_tensor x, fp_tensor z, fp_tensor gamma, fp_tensor beta,
                                const fp_bn_params *p, void *reserve, size_t reserve_bytes)
{
    const char *op = "bn_act_forward_train";
    TRY(fp_backend_bn_act_check(op, &y, &x, &z, &gamma, &beta, &running_mean, &running_var, &save, p, reserve_bytes,
                                reserve));
    fp_cudnn *d;
    fp_dtensor xs = fp_bcu_dt(&x), ys = fp_bcu_dt(&y), zs = fp_bcu_dt(&z);
    TRY(ctx_for(be, FP_DT_F32, &d));
    if (z.p && z.p == y.p) {   /* y over z (an in-place add): z copied first, cuDNN's in and out kept apart */
        size_t bytes = fp_tensor_count(&z) * (size_t)fp_dtype_bytes(z.dt);
        if (!(zs.data = fp_bcu_stage(be, FP_BCU_B, bytes)))
            return FP_ENOMEM;
        if (cudaMemcpyAsync(zs.data, z.p, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)be->stream) != cudaSuccess)
            return fp_fail(FP_EINTERNAL, "%s: copying z failed", op);
    }
    float *sv = save.p;
    return fp_cudnn_bn_act_forward_train(d, &ys, sv, sv + x.d.c, running_mean.p, running_var.p, &xs,
                                         z.p ? &zs : NULL, gamma.p, beta.p, p, reserve, reserve_bytes);
}

int fp_bcu_bn_act_backward(fp_backend *be, fp_tensor dx, fp_tensor dz, fp_tensor dgamma, fp_tensor dbeta,
                           fp_tensor dy, fp_tensor y, fp_tensor x, fp_tensor gamma, fp_tensor beta, fp_tensor save,
                           const fp_bn_params *p, void *reserve, size_t reserve_bytes, int accumulate_dx,
                           int accumulate_dz)
{
    const char *op = "bn_act_backward";
    TRY(fp_backend_bn_act_backward_check(op, &dx, &dz, &dgamma, &dbeta, &dy, &y, &x, &gamma, &beta, &save, p,
                                         reserve_bytes, reserve));
    fp_cudnn *d;
    fp_dtensor xs = fp_bcu_dt(&x), ys = fp_bcu_dt(&y), dys = fp_bcu_dt(&dy), g, gz = {0};
    float beta_dx = 0.0f;
    TRY(ctx_for(be, FP_DT_F32, &d));
    if (dx.p)
        TRY(grad_begin(be, &g, &dx, x.d, x.dt, accumulate_dx, &beta_dx));
    else   /* cuDNN always writes dx: a skipped one lands in staging */
        TRY(staged(be, &g, x.d, x.dt, FP_BCU_OUT));
    /* dz is written, not blended (cuDNN): dz itself when written over (any format), else staged and landed with
     * backend.h's rule (the masked gradient is exact in dz's format, so a 16-bit landing matches the unfused
     * copy / 16-bit add) */
    int dz_direct = dz.p && !accumulate_dz;
    if (dz_direct)
        gz = fp_bcu_dt(&dz);
    else if (dz.p)
        TRY(staged(be, &gz, dz.d, dz.dt, FP_BCU_OUT2));
    const float *sv = save.p;
    TRY(fp_cudnn_bn_act_backward(d, &g, beta_dx, dz.p ? &gz : NULL, dgamma.p, dbeta.p, &dys, &ys, &xs, gamma.p, beta.p,
                                 sv, sv + x.d.c, p, reserve, reserve_bytes));
    if (dz.p && !dz_direct)
        TRY(fp_bcu_land_grad(be, &dz, &gz, accumulate_dz));
    return dx.p ? grad_end(be, &dx, &g, accumulate_dx) : FP_OK;
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

/* ---------------------------------------------------------------- linear (x flattened per image) */

int fp_bcu_linear_forward(fp_backend *be, fp_tensor y, fp_tensor x, fp_tensor w, fp_tensor b, fp_dtype compute)
{
    TRY(fp_backend_linear_check("linear_forward", &x, &y, &w, &b, FP_BACKEND_ANY, compute));
    run_args r;
    fp_dtensor ys;
    TRY(stage_args(be, compute, &r, &x, NULL, &w, &b));
    r.a.dims = flat(x.d);
    TRY(out_for(be, &ys, &y, r.rd));
    TRY(fp_cudnn_linear_forward(r.d, &ys, &r.a, &r.w, b.p ? &r.bias : NULL));
    return finish_out(be, &y, &ys);
}

int fp_bcu_linear_backward_data(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor w, fp_dtype compute,
                                int accumulate)
{
    fp_tensor nob = {0};
    TRY(fp_backend_linear_check("linear_backward_data", &dx, &dy, &w, &nob, FP_BACKEND_ANY, compute));
    run_args r;
    fp_dtensor g;
    TRY(stage_args(be, compute, &r, &dy, NULL, &w, NULL));
    TRY(grad_begin(be, &g, &dx, flat(dx.d), r.rd, accumulate, NULL));
    /* x only carries the shape for dx alone: dx's own view stands in for it */
    TRY(fp_cudnn_linear_backward(r.d, &g, NULL, NULL, &r.a, &g, &r.w));
    return grad_end(be, &dx, &g, accumulate);
}

int fp_bcu_linear_backward_weights(fp_backend *be, fp_tensor dw, fp_tensor db, fp_tensor dy, fp_tensor x,
                                   fp_tensor w, fp_dtype compute)
{
    const char *op = "linear_backward_weights";
    TRY(fp_backend_linear_check(op, &x, &dy, &dw, &db, FP_BACKEND_F32, compute));
    TRY(fp_backend_check(op, "w", &w, FP_BACKEND_ANY, 0));
    TRY(fp_backend_same_dims(op, "w", &w, "dw", &dw));
    run_args r;
    fp_dtensor gw, gb = {0};
    TRY(stage_args(be, compute, &r, &dy, &x, &w, NULL));
    r.b.dims = flat(x.d);
    TRY(wgrad_begin(be, &gw, &dw, r.rd, FP_BCU_OUT, NULL));
    if (db.p)
        TRY(wgrad_begin(be, &gb, &db, r.rd, FP_BCU_OUT2, NULL));
    TRY(fp_cudnn_linear_backward(r.d, NULL, &gw, db.p ? &gb : NULL, &r.a, &r.b, &r.w));
    TRY(wgrad_end(be, &dw, &gw, r.rd));
    return db.p ? wgrad_end(be, &db, &gb, r.rd) : FP_OK;
}
