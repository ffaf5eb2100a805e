/* backend_cuda.c — the CUDA backend of backend.h: its instance (arena, cuDNN contexts on one stream, the wait for
 * that stream) and its table of operations (their code: backend_cuda_*.c, upload.c, sync_bn.cu). Promises: backend.h's
 * semantics; all work on one stream (large uploads' and prefetches' host-to-device copies on a copy stream, ordered
 * with it by events); the synchronisation waits for both, so that an upload's source (upload.c says when it is not
 * free at once) is free when it returns. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include "gpu_detect.h"
#include "trainer/cuda/backend_cuda_internal.h"
#include "trainer/cuda/kernels.h"

int fp_bcu_cuda_err(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return FP_OK;
    return fp_fail(e == cudaErrorMemoryAllocation ? FP_ENOMEM : FP_EINTERNAL, "cuda backend: %s: %s (%s)", what,
                   cudaGetErrorString(e), cudaGetErrorName(e));
}

int fp_bcu_gave_up(void)
{
    (void)cudaGetLastError();   /* a failed runtime call is remembered by cudaGetLastError, which the next launch check reads */
    return 0;
}

fp_cudnn *fp_bcu_ctx(fp_backend *be, fp_dtype compute, int *rc)
{
    int i = compute == FP_DT_TF32;
    *rc = FP_OK;
    if (!be->ctx[i]) {
        fp_cudnn_config c;
        fp_cudnn_config_default(&c, i ? FP_DT_TF32 : FP_DT_F32);
        c.stream = be->stream;
        if ((*rc = fp_cudnn_create(&be->ctx[i], &c)) != FP_OK)
            return NULL;
    }
    fp_cudnn_set_label(be->ctx[i], be->label);
    return be->ctx[i];
}

size_t fp_backend_cuda_arena_share(int arms)
{
    fp_gpu_info_t gpu;
    fp_gpu_detect(&gpu);
    size_t fr = 0, total = 0;
    if (!gpu.available || cudaMemGetInfo(&fr, &total) != cudaSuccess)
        return 0;
    return fr / 10 * 9 / (size_t)(arms < 1 ? 1 : arms);
}

size_t fp_backend_cuda_default_arena(void) { return fp_backend_cuda_arena_share(2); }

void fp_backend_cuda_set_loss_scale(fp_backend *be, const float *d_scale) { be->loss_scale = d_scale; }

unsigned long long fp_backend_cuda_layout_gen(const fp_backend *be)
{
    unsigned long long g = be->released;
    for (int i = 0; i < 2; i++)
        if (be->ctx[i]) {
            fp_cudnn_stats st;
            fp_cudnn_get_stats(be->ctx[i], &st);
            g += (unsigned long long)st.allocations + 1;
        }
    return g;
}

static void cuda_destroy(fp_backend *be)
{
    if (!be)
        return;
    if (be->stream)
        cudaStreamSynchronize((cudaStream_t)be->stream);
    fp_bcu_upload_free(be);
    if (be->sync_event)
        cudaEventDestroy((cudaEvent_t)be->sync_event);
    fp_cudnn_free(be->ctx[1]);   /* borrows ctx[0]'s stream: first */
    fp_cudnn_free(be->ctx[0]);
    fp_arena_free_all(be->arena);   /* staging, scratch and every allocation with it */
    free(be->wc.start);   /* the weight copy's tensor table (its memory went with the arena) */
    free(be->wc.pos);
    free(be);
}

int fp_backend_cuda_create_sized(fp_backend **out, size_t arena_bytes, const char *name)
{
    *out = NULL;
    fp_gpu_info_t gpu;
    fp_gpu_detect(&gpu);
    if (!gpu.available)
        return fp_fail(FP_EUNAVAIL, "cuda backend: %s", gpu.reason);
    if (!arena_bytes)
        return fp_fail(FP_EINVAL, "cuda backend: an arena of 0 bytes");
    fp_backend *be = calloc(1, sizeof *be);
    if (!be)
        return fp_fail(FP_ENOMEM, "cuda backend: out of memory");
    snprintf(be->name, sizeof be->name, "%s", name ? name : "cuda backend");
    int rc = fp_arena_new_device(&be->arena, arena_bytes, be->name);
    if (!rc) {
        fp_cudnn_config c;
        fp_cudnn_config_default(&c, FP_DT_F32);
        rc = fp_cudnn_create(&be->ctx[0], &c);
    }
    if (!rc) {
        be->stream = fp_cudnn_stream(be->ctx[0]);
        rc = fp_arena_alloc(be->arena, FP_CUDA_XENT_OUT_BYTES, "cuda backend loss result", &be->xent_out);
    }
    if (!rc)
        rc = fp_arena_alloc(be->arena, sizeof(int), "cuda backend non-finite flag", (void **)&be->found);
    if (rc) {
        cuda_destroy(be);
        return rc;
    }
    *out = be;
    return FP_OK;
}

static int cuda_create(fp_backend **out)
{
    *out = NULL;
    fp_gpu_info_t gpu;
    fp_gpu_detect(&gpu);
    if (!gpu.available)
        return fp_fail(FP_EUNAVAIL, "cuda backend: %s", gpu.reason);
    size_t bytes = fp_backend_cuda_default_arena();
    if (!bytes)
        return fp_fail(FP_EUNAVAIL, "cuda backend: cannot read the device's memory size");
    return fp_backend_cuda_create_sized(out, bytes, NULL);
}

void fp_backend_cuda_set_label(fp_backend *be, const char *label)
{
    snprintf(be->label, sizeof be->label, "%s", label ? label : "");
    for (int i = 0; i < 2; i++)
        if (be->ctx[i])
            fp_cudnn_set_label(be->ctx[i], be->label);
}

void *fp_backend_cuda_stream(fp_backend *be) { return be->stream; }

static void cuda_set_threads(fp_backend *be, int threads) { (void)be; (void)threads; }   /* no host kernels */

/* Waits for the stream. Through an event made with cudaEventBlockingSync where it can be had: the host thread
 * sleeps until the GPU is done instead of spinning (cudaStreamSynchronize under the default scheduling spins
 * when the machine has idle cores), so the training thread's CPU time per step (steps.host_cpu_ns) is the host's
 * own work, not the wait for the GPU, and a core stays free for the data loader. */
int fp_bcu_sync(fp_backend *be)
{
    be->host_waits++;
    if (!be->sync_event) {
        cudaEvent_t e;
        if (cudaEventCreateWithFlags(&e, cudaEventBlockingSync | cudaEventDisableTiming) == cudaSuccess)
            be->sync_event = e;
        else
            fp_bcu_gave_up();
    }
    int rc = FP_OK;
    if (be->sync_event && cudaEventRecord((cudaEvent_t)be->sync_event, (cudaStream_t)be->stream) == cudaSuccess) {
        cudaError_t e = cudaEventSynchronize((cudaEvent_t)be->sync_event);
        if (e != cudaSuccess)
            return fp_fail(FP_EINTERNAL, "%s: waiting for the GPU: CUDA error: %s (%s)", be->name,
                           cudaGetErrorString(e), cudaGetErrorName(e));
    } else if ((rc = fp_cudnn_sync(be->ctx[0]))) {
        return rc;
    }
    if (be->pre.unsynced) {   /* a prefetch on the copy stream, used, dropped or not: its source is free on return too */
        cudaError_t e = cudaEventSynchronize((cudaEvent_t)be->pre.slot.copied);
        if (e != cudaSuccess)
            return fp_fail(FP_EINTERNAL, "%s: waiting for a prefetch: CUDA error: %s (%s)", be->name,
                           cudaGetErrorString(e), cudaGetErrorName(e));
        be->pre.unsynced = 0;
    }
    return FP_OK;
}

long long fp_backend_cuda_host_waits(const fp_backend *be) { return be ? be->host_waits : 0; }

void fp_backend_cuda_defer_loss(fp_backend *be, int on) { be->defer_loss = on != 0; }

const void *fp_backend_cuda_loss_result(fp_backend *be) { return be->xent_out; }

/* ---------------------------------------------------------------- the table */

static const fp_backend_ops cuda_ops = {
    .name = "cuda",
    .host_memory = 0,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .set_threads = cuda_set_threads,
    .sync = fp_bcu_sync,
    .set_label = fp_backend_cuda_set_label,
    .alloc = fp_bcu_alloc,
    .free = fp_bcu_free,
    .upload = fp_bcu_upload,
    .download = fp_bcu_download,
    .copy = fp_bcu_copy,
    .zero = fp_bcu_zero,
    .reserve = fp_bcu_reserve,
    .memory = fp_bcu_memory,
    .cast = fp_bcu_cast,
    .round = fp_bcu_round,
    .conv_forward = fp_bcu_conv_forward,
    .conv_backward_data = fp_bcu_conv_backward_data,
    .conv_backward_weights = fp_bcu_conv_backward_weights,
    .bn_forward_train = fp_bcu_bn_forward_train,
    .bn_forward_eval = fp_bcu_bn_forward_eval,
    .bn_backward = fp_bcu_bn_backward,
    .bn_act_query = fp_bcu_bn_act_query,
    .bn_act_forward_train = fp_bcu_bn_act_forward_train,
    .bn_act_backward = fp_bcu_bn_act_backward,
    .bn_sync_stats = fp_bcu_bn_sync_stats,
    .bn_sync_forward = fp_bcu_bn_sync_forward,
    .bn_sync_backward_sums = fp_bcu_bn_sync_backward_sums,
    .bn_sync_backward_dx = fp_bcu_bn_sync_backward_dx,
    .relu_forward = fp_bcu_relu_forward,
    .relu_backward = fp_bcu_relu_backward,
    .maxpool_forward = fp_bcu_maxpool_forward,
    .maxpool_backward = fp_bcu_maxpool_backward,
    .avgpool_forward = fp_bcu_avgpool_forward,
    .avgpool_backward = fp_bcu_avgpool_backward,
    .linear_forward = fp_bcu_linear_forward,
    .linear_backward_data = fp_bcu_linear_backward_data,
    .linear_backward_weights = fp_bcu_linear_backward_weights,
    .add = fp_bcu_add,
    .accumulate = fp_bcu_accumulate,
    .softmax_xent = fp_bcu_softmax_xent,
    .unscale_check = fp_bcu_unscale_check,
    .hist = fp_bcu_hist,
    .update_delta = fp_bcu_update_delta,
};

const fp_backend_ops *fp_backend_cuda(void) { return &cuda_ops; }
