/* backend_cpu_layers.c — the layer ops of the CPU backend: conv, batchnorm, pools, linear, each the
 * layers.h kernel around fp32 staging (16-bit inputs widened, conv / linear inputs rounded to the
 * compute format, outputs narrowed, 16-bit weight gradients rounded before landing in fp32).
 * Promises: the former model's numerics bit for bit; dims and dtypes checked before any work. */
#include "trainer/backend_cpu.h"

/* staging slots, as the model used them: inputs 0 and 1, forward output 1, input gradient 2 */
enum { S_A = 0, S_B = 1, S_DX = 2, S_W = 3, S_B2 = 4 };

#define TRY(expr) do { int rc_ = (expr); if (rc_) return rc_; } while (0)

static void note_ws(fp_backend *be)
{
    if (be->ws.cap * sizeof(float) > be->ws_peak)
        be->ws_peak = be->ws.cap * sizeof(float);
}

/* A backward-data op's operands (conv, linear, the pools): dy in the compute format (fp32: widened when 16-bit), the
 * weights w when the op has any (NULL: none), and where dx's fp32 result goes (fp_bcpu_dx_begin; fp_bcpu_dx_end lands
 * it); FP_ENOMEM when one cannot be staged. */
static int data_operands(fp_backend *be, const fp_tensor *dx, const fp_tensor *dy, const fp_tensor *w, fp_dtype compute,
                         int accumulate, const float **dyc, const float **w32, float **d)
{
    *dyc = fp_bcpu_in_compute(be, dy, compute, S_A);
    const float *wc = w ? fp_bcpu_weight(be, w, compute, S_W) : NULL;
    if (!*dyc || (w && !wc))
        return FP_ENOMEM;
    if (w32)
        *w32 = wc;
    *d = fp_bcpu_dx_begin(be, dx, accumulate, S_DX);
    return *d ? FP_OK : FP_ENOMEM;
}

/* ---------------------------------------------------------------- convolution */

int fp_bcpu_conv_forward(fp_backend *be, fp_tensor y, fp_tensor x, fp_tensor w, const fp_conv_params *p,
                         fp_dtype compute)
{
    TRY(fp_backend_conv_check("conv_forward", &x, &y, &w, p, FP_BACKEND_ANY, compute));
    const float *xin = fp_bcpu_in_compute(be, &x, compute, S_A);
    const float *w32 = fp_bcpu_weight(be, &w, compute, S_W);
    float *y32 = fp_bcpu_out(be, &y, S_B);
    if (!xin || !w32 || !y32)
        return FP_ENOMEM;
    int rc = fp_conv_forward(y32, xin, x.d, w32, p, &be->ws);
    note_ws(be);
    fp_bcpu_store(&y, y32);
    return rc;
}

int fp_bcpu_conv_backward_data(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor w, const fp_conv_params *p,
                               fp_dtype compute, int accumulate)
{
    TRY(fp_backend_conv_check("conv_backward_data", &dx, &dy, &w, p, FP_BACKEND_ANY, compute));
    const float *dyc, *w32;
    float *d;
    TRY(data_operands(be, &dx, &dy, &w, compute, accumulate, &dyc, &w32, &d));
    int rc = fp_conv_backward_data(d, dyc, dx.d, w32, p, &be->ws);
    note_ws(be);
    if (!rc)
        fp_bcpu_dx_end(&dx, accumulate, d);
    return rc;
}

int fp_bcpu_conv_backward_weights(fp_backend *be, fp_tensor dw, fp_tensor dy, fp_tensor x, const fp_conv_params *p,
                                  fp_dtype compute)
{
    TRY(fp_backend_conv_check("conv_backward_weights", &x, &dy, &dw, p, FP_BACKEND_F32, compute));
    const float *dyc = fp_bcpu_in_compute(be, &dy, compute, S_A);
    const float *xc = fp_bcpu_in_compute(be, &x, compute, S_B);
    if (!dyc || !xc)
        return FP_ENOMEM;
    size_t cnt = fp_tensor_count(&dw);
    int rc;
    if (fp_bcpu_is16(compute)) {   /* the gradient of the 16-bit weight copy, rounded, lands in fp32 */
        float *scr = fp_bcpu_wstage(be, cnt);
        if (!scr)
            return FP_ENOMEM;
        rc = fp_conv_backward_weights(scr, dyc, xc, x.d, p, &be->ws);
        fp_round_add(dw.p, scr, cnt, compute);
    } else {
        rc = fp_conv_backward_weights(dw.p, dyc, xc, x.d, p, &be->ws);
    }
    note_ws(be);
    return rc;
}

/* ---------------------------------------------------------------- batchnorm */

int fp_bcpu_bn_forward_train(fp_backend *be, fp_tensor y, fp_tensor save, fp_tensor running_mean,
                             fp_tensor running_var, fp_tensor x, fp_tensor gamma, fp_tensor beta,
                             const fp_bn_params *p)
{
    const char *op = "bn_forward_train";
    TRY(fp_backend_bn_check(op, &y, &x, &gamma, &beta, &running_mean, &running_var, 1, p));
    TRY(fp_backend_vec_check(op, "save", &save, 2 * x.d.c, 1));
    const float *in = fp_bcpu_in(be, &x, S_A);
    if (!in)
        return FP_ENOMEM;
    float *y32 = fp_bcpu_is16(y.dt) && fp_bcpu_is16(x.dt) ? (float *)in : fp_bcpu_out(be, &y, S_B);
    if (!y32)   /* 16-bit: in place on the widened input, as the model did */
        return FP_ENOMEM;
    float *sv = save.p;
    int rc = fp_batchnorm_forward_train(y32, sv, sv ? sv + x.d.c : NULL, running_mean.p, running_var.p, in, x.d,
                                        gamma.p, beta.p, p);
    fp_bcpu_store(&y, y32);
    return rc;
}

int fp_bcpu_bn_forward_eval(fp_backend *be, fp_tensor y, fp_tensor x, fp_tensor gamma, fp_tensor beta,
                            fp_tensor running_mean, fp_tensor running_var, const fp_bn_params *p)
{
    TRY(fp_backend_bn_check("bn_forward_eval", &y, &x, &gamma, &beta, &running_mean, &running_var, 0, p));
    const float *in = fp_bcpu_in(be, &x, S_A);
    if (!in)
        return FP_ENOMEM;
    float *y32 = fp_bcpu_is16(y.dt) && fp_bcpu_is16(x.dt) ? (float *)in : fp_bcpu_out(be, &y, S_B);
    if (!y32)
        return FP_ENOMEM;
    int rc = fp_batchnorm_forward_eval(y32, in, x.d, gamma.p, beta.p, running_mean.p, running_var.p, p);
    fp_bcpu_store(&y, y32);
    return rc;
}

int fp_bcpu_bn_backward(fp_backend *be, fp_tensor dx, fp_tensor dgamma, fp_tensor dbeta, fp_tensor dy, fp_tensor x,
                        fp_tensor gamma, fp_tensor save, int accumulate)
{
    const char *op = "bn_backward";
    TRY(fp_backend_bn_backward_check(op, &dx, &dgamma, &dbeta, &dy, &x, &gamma, &save));
    const float *dy32 = fp_bcpu_in(be, &dy, S_A), *x32 = fp_bcpu_in(be, &x, S_B);
    if (!dy32 || !x32)
        return FP_ENOMEM;
    float *d = NULL;
    if (dx.p && !(d = fp_bcpu_dx_begin(be, &dx, accumulate, S_DX)))
        return FP_ENOMEM;
    const float *sv = save.p;
    int rc = fp_batchnorm_backward(d, dgamma.p, dbeta.p, dy32, x32, x.d, gamma.p, sv, sv + x.d.c);
    if (!rc && d)
        fp_bcpu_dx_end(&dx, accumulate, d);
    return rc;
}

/* ---------------------------------------------------------------- pools */

int fp_bcpu_maxpool_forward(fp_backend *be, fp_tensor y, int *argmax, fp_tensor x, const fp_pool_params *p)
{
    TRY(fp_backend_pool_check("maxpool_forward", &x, &y, p));
    const float *in = fp_bcpu_in(be, &x, S_A);
    float *y32 = fp_bcpu_out(be, &y, S_B);
    if (!in || !y32)
        return FP_ENOMEM;
    int rc = fp_maxpool_forward(y32, argmax, in, x.d, p);
    fp_bcpu_store(&y, y32);
    return rc;
}

int fp_bcpu_maxpool_backward(fp_backend *be, fp_tensor dx, fp_tensor dy, const int *argmax, const fp_pool_params *p,
                             int accumulate)
{
    TRY(fp_backend_pool_check("maxpool_backward", &dx, &dy, p));
    TRY(fp_backend_want(argmax != NULL, "maxpool_backward", "NULL argmax"));
    const float *dy32;
    float *d;
    TRY(data_operands(be, &dx, &dy, NULL, FP_DT_F32, accumulate, &dy32, NULL, &d));
    int rc = fp_maxpool_backward(d, dy32, argmax, dx.d, p);
    if (!rc)
        fp_bcpu_dx_end(&dx, accumulate, d);
    return rc;
}

int fp_bcpu_avgpool_forward(fp_backend *be, fp_tensor y, fp_tensor x)
{
    TRY(fp_backend_avg_check("avgpool_forward", &x, &y));
    const float *in = fp_bcpu_in(be, &x, S_A);
    float *y32 = fp_bcpu_out(be, &y, S_B);
    if (!in || !y32)
        return FP_ENOMEM;
    int rc = fp_avgpool_global_forward(y32, in, x.d);
    fp_bcpu_store(&y, y32);
    return rc;
}

int fp_bcpu_avgpool_backward(fp_backend *be, fp_tensor dx, fp_tensor dy, int accumulate)
{
    TRY(fp_backend_avg_check("avgpool_backward", &dx, &dy));
    const float *dy32;
    float *d;
    TRY(data_operands(be, &dx, &dy, NULL, FP_DT_F32, accumulate, &dy32, NULL, &d));
    int rc = fp_avgpool_global_backward(d, dy32, dx.d);
    if (!rc)
        fp_bcpu_dx_end(&dx, accumulate, d);
    return rc;
}

/* ---------------------------------------------------------------- linear */

/* x [n, in] (any NHWC dims), y [n, 1, 1, out], w {out, 1, 1, in}, b {1, 1, 1, out} (may be skipped). */
int fp_bcpu_linear_forward(fp_backend *be, fp_tensor y, fp_tensor x, fp_tensor w, fp_tensor b, fp_dtype compute)
{
    TRY(fp_backend_linear_check("linear_forward", &x, &y, &w, &b, FP_BACKEND_ANY, compute));
    const float *xin = fp_bcpu_in_compute(be, &x, compute, S_A);
    const float *w32 = fp_bcpu_weight(be, &w, compute, S_W);
    const float *b32 = b.p ? fp_bcpu_weight(be, &b, compute, S_B2) : NULL;
    float *y32 = fp_bcpu_out(be, &y, S_B);
    if (!xin || !w32 || (b.p && !b32) || !y32)
        return FP_ENOMEM;
    int rc = fp_linear_forward(y32, xin, x.d.n, w.d.c, y.d.c, w32, b32);
    fp_bcpu_store(&y, y32);
    return rc;
}

int fp_bcpu_linear_backward_data(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor w, fp_dtype compute,
                                 int accumulate)
{
    fp_tensor nob = {0};
    TRY(fp_backend_linear_check("linear_backward_data", &dx, &dy, &w, &nob, FP_BACKEND_ANY, compute));
    const float *dyc, *w32;
    float *d;
    TRY(data_operands(be, &dx, &dy, &w, compute, accumulate, &dyc, &w32, &d));
    int rc = fp_linear_backward(d, NULL, NULL, dyc, NULL, dx.d.n, w.d.c, dy.d.c, w32);
    if (!rc)
        fp_bcpu_dx_end(&dx, accumulate, d);
    return rc;
}

int fp_bcpu_linear_backward_weights(fp_backend *be, fp_tensor dw, fp_tensor db, fp_tensor dy, fp_tensor x,
                                    fp_tensor w, fp_dtype compute)
{
    const char *op = "linear_backward_weights";
    TRY(fp_backend_linear_check(op, &x, &dy, &dw, &db, FP_BACKEND_F32, compute));
    TRY(fp_backend_check(op, "w", &w, FP_BACKEND_ANY, 0));
    TRY(fp_backend_same_dims(op, "w", &w, "dw", &dw));
    const float *dyc = fp_bcpu_in_compute(be, &dy, compute, S_A);
    const float *xc = fp_bcpu_in_compute(be, &x, compute, S_B);
    const float *w32 = fp_bcpu_weight(be, &w, compute, S_W);
    if (!dyc || !xc || !w32)
        return FP_ENOMEM;
    int n = x.d.n, fin = w.d.c, fout = dy.d.c;
    size_t nw = (size_t)fin * fout, nb = db.p ? (size_t)fout : 0;
    if (!fp_bcpu_is16(compute))
        return fp_linear_backward(NULL, dw.p, db.p, dyc, xc, n, fin, fout, w32);
    /* weight and bias gradients of the 16-bit copies, rounded, land in fp32 */
    float *scr = fp_bcpu_wstage(be, nw + nb);
    if (!scr)
        return FP_ENOMEM;
    int rc = fp_linear_backward(NULL, scr, db.p ? scr + nw : NULL, dyc, xc, n, fin, fout, w32);
    fp_round_add(dw.p, scr, nw, compute);
    if (nb)
        fp_round_add(db.p, scr + nw, nb, compute);
    return rc;
}
