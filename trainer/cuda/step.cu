/* step.cu — the device side of one arm step (kernels.h fp_cuda_step_*): the loss and the non-finite flags kept
 * on the device, GradScaler.update as a one-thread kernel (torch._amp_update_scale_ with trainer/precision.c's
 * semantics, bit for bit), one readback per step into pinned memory; the loss gradient scaled and the optimizer's
 * per-step scalars uploaded so that a captured step reads each replay's values; pinned memory, timing events and the
 * step's CUDA graph (capture, instantiate, replay). */
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

__global__ void scale_by_kernel(float *x, size_t n, const float *scale)
{
    const float s = *scale;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
        x[i] = __fmul_rn(x[i], s);
}

} // namespace

extern "C" int fp_cuda_scale_by(float *d_x, size_t n, const float *d_scale, void *stream)
{
    if ((!d_x && n) || !d_scale)
        return fp_fail(FP_EINVAL, "fp_cuda_scale_by: NULL argument");
    if (!n)
        return FP_OK;
    scale_by_kernel<<<fp_cuda_grid(n, 1024), FP_CUDA_THREADS, 0, (cudaStream_t)stream>>>(d_x, n, d_scale);
    return fp_cuda_check_launch("step: scaling the loss gradient");
}

extern "C" int fp_cuda_optim_scalars_upload(fp_cuda_optim_scalars *d_scalars, const fp_cuda_optim_scalars *h_scalars,
                                            void *stream)
{
    if (!d_scalars || !h_scalars)
        return fp_fail(FP_EINVAL, "fp_cuda_optim_scalars_upload: NULL argument");
    return fp_cuda_check(cudaMemcpyAsync(d_scalars, h_scalars, sizeof *h_scalars, cudaMemcpyHostToDevice,
                                         (cudaStream_t)stream),
                         "step: the optimizer's scalars");
}

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

/* ---- CUDA graphs: the step captured (thread-local mode: only this thread's capture-unsafe calls, a cudaMalloc say,
 * break it; cuDNN's plans and cuBLASLt's workspace are made before, at the eager warm-up step), instantiated once,
 * replayed; a failed capture always ends it, so the stream runs eagerly again ---- */

static int fail_next;   /* fp_cuda_graph_fail_next_for_test */

static int graph_err(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return FP_OK;
    (void)cudaGetLastError();   /* not left for the next launch check to find */
    return fp_fail(FP_EINTERNAL, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

extern "C" void fp_cuda_graph_fail_next_for_test(void) { fail_next = 1; }

extern "C" int fp_cuda_graph_begin(void *stream)
{
    return graph_err(cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeThreadLocal), "capture");
}

extern "C" int fp_cuda_graph_end(void *stream, void **exec)
{
    *exec = NULL;
    cudaGraph_t g = NULL;
    int rc = graph_err(cudaStreamEndCapture((cudaStream_t)stream, &g), "capture");
    if (!rc && !g)
        rc = fp_fail(FP_EINTERNAL, "capture: no graph");
    if (!rc && fail_next)
        rc = fp_fail(FP_EINTERNAL, "test hook");
    fail_next = 0;
    cudaGraphExec_t x = NULL;
    if (!rc)
        rc = graph_err(cudaGraphInstantiateWithFlags(&x, g, 0), "instantiate");
    if (g)
        cudaGraphDestroy(g);
    *exec = rc ? NULL : (void *)x;
    return rc;
}

extern "C" int fp_cuda_graph_launch(void *exec, void *stream)
{
    if (!exec)
        return fp_fail(FP_EINVAL, "launch: no graph");
    return graph_err(cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)stream), "launch");
}

extern "C" void fp_cuda_graph_destroy(void *exec)
{
    if (exec)
        cudaGraphExecDestroy((cudaGraphExec_t)exec);
}

extern "C" int fp_cuda_event_record_captured(void *ev, void *stream)
{
    return graph_err(cudaEventRecordWithFlags((cudaEvent_t)ev, (cudaStream_t)stream, cudaEventRecordExternal),
                     "recording a timing event in the graph");
}
