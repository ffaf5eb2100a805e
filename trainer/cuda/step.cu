/* step.cu — the device side of one arm step (kernels.h fp_cuda_step_*): the loss and the non-finite flags kept
 * on the device, GradScaler.update as a one-thread kernel (torch._amp_update_scale_ with trainer/precision.c's
 * semantics, bit for bit), one readback per step into pinned memory; pinned memory and timing events. */
#include <limits.h>
#include <math.h>
#include "kernels.h"

namespace {

__global__ void set_scaler_kernel(fp_cuda_step_state *s, float scale, int tracker)
{
    s->scale = scale;
    s->growth_tracker = tracker;
}

__global__ void loss_kernel(fp_cuda_step_state *s, const fp_cuda_xent_result *x, int n)
{
    s->xent = *x;
    s->loss_n = n;
    /* as fp_cuda_xent_finish on the host: the double quotient rounded to float */
    const float loss = __double2float_rn(__ddiv_rn(x->loss_sum, (double)n));
    s->flags[0] = 0.0f;
    s->flags[1] = isfinite(loss) ? 0.0f : 1.0f;
    s->flags[2] = x->bad_label != -1 ? 1.0f : 0.0f;
    s->found = 0;
    s->first_nonfinite = INT_MAX;
    s->skip = 0;
}

__global__ void flags_kernel(fp_cuda_step_state *s) { s->flags[0] = s->found ? 1.0f : 0.0f; }

/* mode: fp_scale_mode (0 none, 1 dynamic, 2 static) */
__global__ void update_kernel(fp_cuda_step_state *s, int mode, float growth, float backoff, int interval)
{
    const int found = s->flags[0] > 0.0f, loss_bad = s->flags[1] > 0.0f, bad_label = s->flags[2] > 0.0f;
    if (bad_label) {   /* the step fails on the host: nothing moves */
        s->skip = 1;
        return;
    }
    if (mode == 0) {   /* no scaler: a non-finite loss ends the step (diverged) */
        s->skip = loss_bad;
        return;
    }
    s->skip = found;
    if (mode != 1)
        return;
    if (found) {
        s->scale = __fmul_rn(s->scale, backoff);
        s->growth_tracker = 0;
    } else if (++s->growth_tracker >= interval) {
        const float ns = __fmul_rn(s->scale, growth);
        if (isfinite(ns))
            s->scale = ns;
        s->growth_tracker = 0;
    }
}

} // namespace

extern "C" int fp_cuda_step_set_scaler(fp_cuda_step_state *d_state, float scale, int growth_tracker, void *stream)
{
    if (!d_state)
        return fp_fail(FP_EINVAL, "fp_cuda_step_set_scaler: NULL state");
    set_scaler_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(d_state, scale, growth_tracker);
    return fp_cuda_check_launch("step: setting the loss scale");
}

extern "C" int fp_cuda_step_loss(fp_cuda_step_state *d_state, const fp_cuda_xent_result *d_xent, int n, void *stream)
{
    if (!d_state || !d_xent || n <= 0)
        return fp_fail(FP_EINVAL, "fp_cuda_step_loss: NULL argument or n=%d", n);
    loss_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(d_state, d_xent, n);
    return fp_cuda_check_launch("step: the loss");
}

extern "C" int fp_cuda_step_flags(fp_cuda_step_state *d_state, void *stream)
{
    if (!d_state)
        return fp_fail(FP_EINVAL, "fp_cuda_step_flags: NULL state");
    flags_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(d_state);
    return fp_cuda_check_launch("step: the non-finite flag");
}

extern "C" int fp_cuda_step_update(fp_cuda_step_state *d_state, int mode, float growth_factor, float backoff_factor,
                                   int growth_interval, void *stream)
{
    if (!d_state)
        return fp_fail(FP_EINVAL, "fp_cuda_step_update: NULL state");
    if (mode != FP_SCALE_NONE && mode != FP_SCALE_DYNAMIC && mode != FP_SCALE_STATIC)
        return fp_fail(FP_EINVAL, "fp_cuda_step_update: unknown scaler mode %d", mode);
    update_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(d_state, mode, growth_factor, backoff_factor, growth_interval);
    return fp_cuda_check_launch("step: the loss-scale update");
}

extern "C" int fp_cuda_step_readback(fp_cuda_step_state *h_state, const fp_cuda_step_state *d_state, void *stream)
{
    if (!h_state || !d_state)
        return fp_fail(FP_EINVAL, "fp_cuda_step_readback: NULL state");
    return fp_cuda_check(cudaMemcpyAsync(h_state, d_state, sizeof *h_state, cudaMemcpyDeviceToHost,
                                         (cudaStream_t)stream),
                         "step: reading the step's results back");
}

extern "C" int fp_cuda_host_alloc(void **p, size_t bytes)
{
    *p = NULL;
    if (cudaHostAlloc(p, bytes ? bytes : 1, cudaHostAllocDefault) != cudaSuccess) {
        *p = NULL;
        cudaGetLastError();
        return fp_fail(FP_ENOMEM, "out of pinned host memory asking for %zu bytes", bytes);
    }
    return FP_OK;
}

extern "C" void fp_cuda_host_free(void *p)
{
    if (p)
        cudaFreeHost(p);
}

extern "C" int fp_cuda_event_create(void **ev)
{
    cudaEvent_t e = NULL;
    int rc = fp_cuda_check(cudaEventCreate(&e), "creating a timing event");
    *ev = rc ? NULL : (void *)e;
    return rc;
}

extern "C" void fp_cuda_event_destroy(void *ev)
{
    if (ev)
        cudaEventDestroy((cudaEvent_t)ev);
}

extern "C" int fp_cuda_event_record(void *ev, void *stream)
{
    return fp_cuda_check(cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream), "recording a timing event");
}

extern "C" int fp_cuda_event_elapsed_ns(void *from, void *to, int64_t *ns)
{
    float ms = 0;
    int rc = fp_cuda_check(cudaEventElapsedTime(&ms, (cudaEvent_t)from, (cudaEvent_t)to), "reading a timing event");
    *ns = rc ? 0 : (int64_t)((double)ms * 1e6);
    return rc;
}
