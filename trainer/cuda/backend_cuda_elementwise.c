/* backend_cuda_elementwise.c — the CUDA backend's element-wise ops and the reductions that come back to the host:
 * casts and rounding, relu, residual add / accumulate, softmax cross-entropy, the fused unscale + check, the probes'
 * histograms, the parameter pass's update_delta and the per-layer error's sums (layer_error_dev.h). Promise:
 * backend.h's semantics (accumulate flags, dtypes); every op checks dims and dtypes first. */
#include "cuda/convert.h"
#include "trainer/cuda/backend_cuda_internal.h"
#include "trainer/cuda/backend_kernels.h"
#include "trainer/cuda/kernels.h"
#include "trainer/cuda/layer_error_dev.h"

int fp_bcu_cast(fp_backend *be, fp_tensor dst, fp_tensor src)
{
    TRY(fp_backend_check("cast", "dst", &dst, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check("cast", "src", &src, FP_BACKEND_ANY, 0));
    size_t n = fp_tensor_count(&src);
    if (fp_tensor_count(&dst) != n)
        return fp_fail(FP_EINVAL, "cast: %zu values into %zu", n, fp_tensor_count(&dst));
    fp_bcu_wc_touch(be, dst.p, n * (size_t)fp_dtype_bytes(dst.dt));
    void *s = be->stream;
    if (dst.dt == src.dt)
        return fp_bcu_copy(be, dst.p, src.p, n * (size_t)fp_dtype_bytes(dst.dt));
    if (src.dt == FP_DT_F32)
        return dst.dt == FP_DT_F16 ? fp_cuda_f32_to_f16(dst.p, src.p, n, s) : fp_cuda_f32_to_bf16(dst.p, src.p, n, s);
    if (dst.dt == FP_DT_F32)
        return src.dt == FP_DT_F16 ? fp_cuda_f16_to_f32(dst.p, src.p, n, s) : fp_cuda_bf16_to_f32(dst.p, src.p, n, s);
    return fp_cbk_cast(dst.p, dst.dt, src.p, src.dt, n, s);   /* one 16-bit format to the other, via fp32 */
}

int fp_bcu_round(fp_backend *be, fp_tensor dst, fp_tensor src, fp_dtype to)
{
    TRY(fp_backend_check("round", "dst", &dst, FP_BACKEND_F32, 0));
    TRY(fp_backend_check("round", "src", &src, FP_BACKEND_F32, 0));
    TRY(fp_backend_check_compute("round", to));
    if (fp_tensor_count(&dst) != fp_tensor_count(&src))
        return fp_fail(FP_EINVAL, "round: %zu values into %zu", fp_tensor_count(&src), fp_tensor_count(&dst));
    fp_bcu_wc_round(be, dst.p, src.p, fp_tensor_count(&dst) * sizeof(float), to);
    return fp_cbk_round(dst.p, src.p, fp_tensor_count(&dst), to, be->stream);
}

int fp_bcu_relu_forward(fp_backend *be, fp_tensor y, fp_tensor x)
{
    TRY(fp_backend_check("relu_forward", "x", &x, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check("relu_forward", "y", &y, FP_BACKEND_ANY, 0));
    if (x.dt != y.dt || fp_tensor_count(&x) != fp_tensor_count(&y))
        return fp_fail(FP_EINVAL, "relu_forward: x and y differ in format or count");
    fp_bcu_wc_touch(be, y.p, fp_tensor_count(&y) * (size_t)fp_dtype_bytes(y.dt));
    return fp_cbk_relu_forward(y.p, x.p, x.dt, fp_tensor_count(&x), be->stream);
}

int fp_bcu_relu_backward(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor y, int accumulate)
{
    TRY(fp_backend_check("relu_backward", "dx", &dx, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check("relu_backward", "dy", &dy, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check("relu_backward", "y", &y, FP_BACKEND_ANY, 0));
    size_t n = fp_tensor_count(&y);
    if (dx.dt != y.dt || dy.dt != y.dt || fp_tensor_count(&dx) != n || fp_tensor_count(&dy) != n)
        return fp_fail(FP_EINVAL, "relu_backward: dx, dy and y differ in format or count");
    if (accumulate && dx.p == dy.p)
        return fp_fail(FP_EINVAL, "relu_backward: dx aliases dy with accumulate");
    fp_bcu_wc_touch(be, dx.p, n * (size_t)fp_dtype_bytes(dx.dt));
    return fp_cbk_relu_backward(dx.p, dy.p, y.p, y.dt, n, accumulate, be->stream);
}

int fp_bcu_add(fp_backend *be, fp_tensor y, fp_tensor a, fp_tensor b)
{
    TRY(fp_backend_check("add", "y", &y, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check("add", "a", &a, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check("add", "b", &b, FP_BACKEND_ANY, 0));
    size_t n = fp_tensor_count(&y);
    if (fp_tensor_count(&a) != n || fp_tensor_count(&b) != n)
        return fp_fail(FP_EINVAL, "add: counts differ");
    fp_bcu_wc_touch(be, y.p, n * (size_t)fp_dtype_bytes(y.dt));
    return fp_cbk_add(y.p, y.dt, a.p, a.dt, b.p, b.dt, n, 0, be->stream);
}

int fp_bcu_accumulate(fp_backend *be, fp_tensor dst, fp_tensor src)
{
    TRY(fp_backend_check("accumulate", "dst", &dst, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check("accumulate", "src", &src, FP_BACKEND_ANY, 0));
    size_t n = fp_tensor_count(&dst);
    if (fp_tensor_count(&src) != n)
        return fp_fail(FP_EINVAL, "accumulate: counts differ");
    fp_bcu_wc_touch(be, dst.p, n * (size_t)fp_dtype_bytes(dst.dt));
    return fp_cbk_add(dst.p, dst.dt, dst.p, dst.dt, src.p, src.dt, n, 0, be->stream);
}

int fp_bcu_softmax_xent(fp_backend *be, float *loss, fp_tensor dlogits, int *correct1, int *correct5,
                             fp_tensor logits, const int *labels, float dscale)
{
    const char *op = "softmax_xent";
    TRY(fp_backend_check(op, "logits", &logits, FP_BACKEND_F32, 0));
    TRY(fp_backend_check(op, "dlogits", &dlogits, FP_BACKEND_F32, 1));
    if (!loss || !labels)
        return fp_fail(FP_EINVAL, "%s: NULL loss or labels", op);
    if (logits.d.h != 1 || logits.d.w != 1)
        return fp_fail(FP_EINVAL, "%s: logits are not {n, 1, 1, classes}", op);
    if (dlogits.p)
        TRY(fp_backend_same_dims(op, "dlogits", &dlogits, "logits", &logits));
    int n = logits.d.n, classes = logits.d.c;
    if (be->defer_loss) {   /* the loss stays on the device (fp_backend_cuda_loss_result) */
        TRY(fp_cuda_softmax_xent(be->xent_out, dlogits.p, logits.p, labels, n, classes, be->stream));
    } else {
        be->host_waits++;
        TRY(fp_cuda_softmax_xent_sync(loss, correct1, correct5, dlogits.p, logits.p, labels, n, classes, be->xent_out,
                                      be->stream));
    }
    if (dlogits.p && be->loss_scale)   /* the factor read on the device: a graph's replays scale by theirs */
        return fp_cuda_scale_by(dlogits.p, fp_tensor_count(&dlogits), be->loss_scale, be->stream);
    if (dlogits.p && dscale != 1.0f)
        TRY(fp_cbk_scale(dlogits.p, fp_tensor_count(&dlogits), dscale, be->stream));
    return FP_OK;
}

int fp_bcu_unscale_check(fp_backend *be, int *found_inf, fp_tensor g, float inv_scale)
{
    TRY(fp_backend_check("unscale_check", "g", &g, FP_BACKEND_F32, 0));
    if (!found_inf)
        return fp_fail(FP_EINVAL, "unscale_check: NULL found_inf");
    fp_cuda_segment seg = {0};
    seg.grad = g.p;
    seg.n = fp_tensor_count(&g);
    fp_bcu_wc_touch(be, g.p, seg.n * sizeof(float));
    TRY(fp_cuda_unscale_and_check(&seg, 1, inv_scale, be->found, be->stream));
    TRY(fp_bcu_download(be, found_inf, be->found, sizeof(int)));
    return fp_bcu_sync(be);
}

/* The probes' histogram (kernels.h fp_cuda_hist_add): counted on the device, only the counts come back. Its
 * own counters, not the scratch: an arm may hold the scratch across the step. */
int fp_bcu_hist(fp_backend *be, fp_hist_t *h, const void *x, fp_dtype dt, size_t n)
{
    if (!h || (!x && n > 0))
        return fp_fail(FP_EINVAL, "hist: %s is NULL", h ? "tensor" : "histogram");
    if (dt != FP_DT_F32 && !fp_bcu_is16(dt))
        return fp_fail(FP_EINVAL, "hist: tensor of storage type %s", fp_dtype_name(dt));
    if (n == 0)
        return FP_OK;
    void *work = fp_bcu_grow_slot(be, &be->hist_work, &be->hist_work_cap, fp_cuda_hist_work_bytes(), "(histogram counters)");
    if (!work)
        return FP_ENOMEM;
    be->host_waits++;   /* the counts come back: the stream is synchronised */
    return fp_cuda_hist_add(h, x, n, dt, work, be->stream);
}

/* The parameter pass's update and lost updates (kernels.h fp_cuda_update_delta): two counts come back, through
 * a staging slot (not kept between ops). */
int fp_bcu_update_delta(fp_backend *be, fp_tensor d, fp_tensor nw, fp_tensor old, fp_tensor g, size_t *lost,
                             size_t *moved)
{
    TRY(fp_backend_update_check("update_delta", &d, &nw, &old, &g, lost, moved));
    void *counts = fp_bcu_stage(be, FP_BCU_OUT2, 2 * sizeof(unsigned long long));
    if (!counts)
        return FP_ENOMEM;
    size_t n = fp_tensor_count(&d);
    fp_bcu_wc_touch(be, d.p, n * sizeof(float));
    be->host_waits++;
    return fp_cuda_update_delta(d.p, nw.p, old.p, g.p, n, lost, moved, counts, be->stream);
}

/* The per-layer error's sums (layer_error_dev.h) on the instance's stream: its own workspace, not the
 * scratch (an arm may hold that across the step). */
int fp_backend_cuda_layer_error_sums(fp_backend *be, const float *ref, const void *x, fp_dtype dt, size_t n,
                                     fp_cuda_err_sums *out)
{
    if (!be)
        return fp_fail(FP_EINVAL, "layer error: no backend instance");
    void *work = fp_bcu_grow_slot(be, &be->err_work, &be->err_work_cap, fp_cuda_layer_error_work_bytes(), "(layer error sums)");
    if (!work)
        return FP_ENOMEM;
    be->host_waits += n > 0;   /* the five sums come back: the stream is synchronised */
    return fp_cuda_layer_error_sums(ref, x, dt, n, out, work, be->stream);
}
