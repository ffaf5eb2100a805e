/* cudnn_ctx.c — the per-arm context of the cuDNN / cuBLASLt layer kernels: handles, stream, the one
 * shared workspace, scratch buffers, and the error reporting every op uses (op, layer label, library
 * status string and cuDNN's last detailed message). Creating it on a machine without a GPU fails cleanly. */
#include "config.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "gpu_detect.h"
#include "trainer/cuda/cudnn_internal.h"

void fp_cudnn_config_default(fp_cudnn_config *c, fp_dtype math)
{
    memset(c, 0, sizeof *c);
    c->math = math;
    c->stream = NULL;
    c->workspace_limit = (size_t)1 << 30;
    c->search = FP_CONV_SEARCH_BENCHMARK;
    c->bn_persistent = 1;
}

static const char *label_of(const fp_cudnn *d)
{
    return d && d->label[0] ? d->label : "-";
}

int fpc_fail_cudnn(const fp_cudnn *d, cudnnStatus_t s, const char *op)
{
    char detail[256] = "";
    cudnnGetLastErrorString(detail, sizeof detail);
    int cat = CUDNN_STATUS_CATEGORY(s);
    int code = cat == CUDNN_STATUS_BAD_PARAM ? FP_EINVAL
             : cat == CUDNN_STATUS_NOT_SUPPORTED ? FP_EUNAVAIL
             : s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
               s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ? FP_ENOMEM : FP_EINTERNAL;
    return fp_fail(code, "cudnn %s [%s]: %s%s%s%s", op, label_of(d), cudnnGetErrorString(s),
                   detail[0] ? " (" : "", detail, detail[0] ? ")" : "");
}

int fpc_fail_cublas(const fp_cudnn *d, cublasStatus_t s, const char *op)
{
    int code = s == CUBLAS_STATUS_INVALID_VALUE ? FP_EINVAL
             : s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH ? FP_EUNAVAIL
             : s == CUBLAS_STATUS_ALLOC_FAILED ? FP_ENOMEM : FP_EINTERNAL;
    return fp_fail(code, "cublasLt %s [%s]: %s (%s)", op, label_of(d), cublasLtGetStatusName(s),
                   cublasLtGetStatusString(s));
}

int fpc_fail_cuda(const fp_cudnn *d, cudaError_t e, const char *op)
{
    return fp_fail(e == cudaErrorMemoryAllocation ? FP_ENOMEM : FP_EINTERNAL, "cuda %s [%s]: %s (%s)", op,
                   label_of(d), cudaGetErrorName(e), cudaGetErrorString(e));
}

int fpc_fail_arg(const fp_cudnn *d, const char *op, const char *why)
{
    return fp_fail(FP_EINVAL, "cudnn %s [%s]: %s", op, label_of(d), why);
}

int fpc_cudnn_type(fp_dtype dt, cudnnDataType_t *out)
{
    switch (dt) {
    case FP_DT_F32: *out = CUDNN_DATA_FLOAT; return 0;
    case FP_DT_F16: *out = CUDNN_DATA_HALF; return 0;
    case FP_DT_BF16: *out = CUDNN_DATA_BFLOAT16; return 0;
    default: return -1;
    }
}

int fpc_cuda_type(fp_dtype dt, cudaDataType_t *out)
{
    switch (dt) {
    case FP_DT_F32: *out = CUDA_R_32F; return 0;
    case FP_DT_F16: *out = CUDA_R_16F; return 0;
    case FP_DT_BF16: *out = CUDA_R_16BF; return 0;
    default: return -1;
    }
}

const char *fpc_dtype_name(fp_dtype dt)
{
    return dt == FP_DT_F32 ? "fp32" : dt == FP_DT_TF32 ? "tf32" : dt == FP_DT_F16 ? "fp16"
         : dt == FP_DT_BF16 ? "bf16" : "?";
}

size_t fpc_elems(fp_dims d)
{
    if (d.n <= 0 || d.h <= 0 || d.w <= 0 || d.c <= 0)
        return 0;
    return (size_t)d.n * (size_t)d.h * (size_t)d.w * (size_t)d.c;
}

int fpc_check_tensor(const fp_cudnn *d, const fp_dtensor *t, const char *op, const char *name)
{
    if (!d)
        return fp_fail(FP_EINVAL, "cudnn %s: NULL context", op);
    if (!t || !t->data)
        return fp_fail(FP_EINVAL, "cudnn %s [%s]: tensor %s is NULL", op, label_of(d), name);
    size_t n = fpc_elems(t->dims);
    if (n == 0)
        return fp_fail(FP_EINVAL, "cudnn %s [%s]: tensor %s has non-positive dims %dx%dx%dx%d", op, label_of(d),
                       name, t->dims.n, t->dims.h, t->dims.w, t->dims.c);
    if (n > (size_t)INT_MAX)
        return fp_fail(FP_EINVAL, "cudnn %s [%s]: tensor %s has %zu elements (more than INT_MAX)", op,
                       label_of(d), name, n);
    cudnnDataType_t ct;
    if (fpc_cudnn_type(t->dtype, &ct) != 0)
        return fp_fail(FP_EINVAL, "cudnn %s [%s]: tensor %s has dtype %s, not a storage type (fp32, fp16, bf16)",
                       op, label_of(d), name, fpc_dtype_name(t->dtype));
    return FP_OK;
}

int fpc_same_dtype(const fp_cudnn *d, const char *op, const fp_dtensor *a, const fp_dtensor *b)
{
    if (a->dtype != b->dtype)
        return fp_fail(FP_EINVAL, "cudnn %s [%s]: mixed dtypes %s and %s in one call", op, label_of(d),
                       fpc_dtype_name(a->dtype), fpc_dtype_name(b->dtype));
    return FP_OK;
}

int fpc_same_dims(const fp_cudnn *d, const char *op, fp_dims a, fp_dims b, const char *what)
{
    if (a.n != b.n || a.h != b.h || a.w != b.w || a.c != b.c)
        return fp_fail(FP_EINVAL, "cudnn %s [%s]: %s: dims %dx%dx%dx%d, expected %dx%dx%dx%d", op, label_of(d),
                       what, a.n, a.h, a.w, a.c, b.n, b.h, b.w, b.c);
    return FP_OK;
}

int fpc_set_nhwc(const fp_cudnn *d, cudnnTensorDescriptor_t td, fp_dims dims, fp_dtype dt, const char *op)
{
    cudnnDataType_t ct;
    if (fpc_cudnn_type(dt, &ct) != 0)
        return fpc_fail_arg(d, op, "not a storage dtype");
    /* cudnnSetTensor4dDescriptor takes n, c, h, w whatever the format; NHWC sets the strides. */
    FPC_DNN(d, cudnnSetTensor4dDescriptor(td, CUDNN_TENSOR_NHWC, ct, dims.n, dims.c, dims.h, dims.w), op);
    return FP_OK;
}

void fpc_workspace_note(fp_cudnn *d, size_t bytes)
{
    if (bytes > d->ws_need)
        d->ws_need = bytes;
}

int fpc_workspace_ensure(fp_cudnn *d, size_t bytes, const char *op)
{
    fpc_workspace_note(d, bytes);
    if (bytes <= d->ws_bytes)
        return FP_OK;
    if (d->ws) {
        /* cudaFree waits for work that may still use the old buffer; if it fails, the old one stays */
        cudaError_t e = cudaFree(d->ws);
        if (e != cudaSuccess)
            return fpc_fail_cuda(d, e, op);
        d->ws = NULL;
        d->ws_bytes = 0;
    }
    cudaError_t e = cudaMalloc(&d->ws, bytes);
    if (e != cudaSuccess) {
        d->ws = NULL;
        return fp_fail(e == cudaErrorMemoryAllocation ? FP_ENOMEM : FP_EINTERNAL,
                       "cuda %s [%s]: workspace of %zu bytes: %s", op, label_of(d), bytes, cudaGetErrorString(e));
    }
    d->ws_bytes = bytes;
    d->ws_allocs++;
    return FP_OK;
}

int fp_cudnn_workspace_commit(fp_cudnn *d)
{
    if (!d)
        return fp_fail(FP_EINVAL, "cudnn workspace commit: NULL context");
    return d->ws_need ? fpc_workspace_ensure(d, d->ws_need, "workspace commit") : FP_OK;
}

int fpc_scratch(fp_cudnn *d, size_t floats, const char *op)
{
    if (floats <= d->scratch_floats)
        return FP_OK;
    if (d->scratch)
        cudaFree(d->scratch);
    d->scratch = NULL;
    d->scratch_floats = 0;
    cudaError_t e = cudaMalloc((void **)&d->scratch, floats * sizeof(float));
    if (e != cudaSuccess) {
        d->scratch = NULL;
        return fpc_fail_cuda(d, e, op);
    }
    d->scratch_floats = floats;
    return FP_OK;
}

void fp_cudnn_get_stats(const fp_cudnn *d, fp_cudnn_stats *s)
{
    memset(s, 0, sizeof *s);
    if (!d)
        return;
    s->bytes = d->ws_bytes;
    s->need = d->ws_need;
    s->limit = d->cfg.workspace_limit;
    s->allocations = d->ws_allocs;
    s->conv_plans = d->nconv;
    s->matmul_plans = d->nmm;
}

void fp_cudnn_set_label(fp_cudnn *d, const char *label)
{
    if (!d)
        return;
    d->label[0] = '\0';
    if (label)
        snprintf(d->label, sizeof d->label, "%s", label);
}

void *fp_cudnn_stream(const fp_cudnn *d)
{
    return d ? (void *)d->stream : NULL;
}

int fp_cudnn_sync(fp_cudnn *d)
{
    if (!d)
        return fp_fail(FP_EINVAL, "cudnn sync: NULL context");
    cudaError_t e = cudaStreamSynchronize(d->stream);
    return e == cudaSuccess ? FP_OK : fpc_fail_cuda(d, e, "stream synchronize");
}

int fp_cudnn_create(fp_cudnn **out, const fp_cudnn_config *c)
{
    if (!out)
        return fp_fail(FP_EINVAL, "cudnn create: NULL output");
    *out = NULL;
    fp_cudnn_config def;
    if (!c) {
        fp_cudnn_config_default(&def, FP_DT_F32);
        c = &def;
    }
    if (c->math != FP_DT_F32 && c->math != FP_DT_TF32 && c->math != FP_DT_F16 && c->math != FP_DT_BF16)
        return fp_fail(FP_EINVAL, "cudnn create: unknown math policy %d", (int)c->math);
    if (c->search != FP_CONV_SEARCH_BENCHMARK && c->search != FP_CONV_SEARCH_HEURISTIC)
        return fp_fail(FP_EINVAL, "cudnn create: unknown algorithm search %d", (int)c->search);
    fp_gpu_info_t gpu;
    fp_gpu_detect(&gpu);
    if (!gpu.available)
        return fp_fail(FP_EUNAVAIL, "cudnn create: no usable GPU: %s", gpu.reason);

    fp_cudnn *d = calloc(1, sizeof *d);
    if (!d)
        return fp_fail(FP_ENOMEM, "cudnn create: out of memory");
    d->cfg = *c;
    int rc = FP_OK;
    cudnnStatus_t s = cudnnCreate(&d->dnn);
    if (s != CUDNN_STATUS_SUCCESS) {
        d->dnn = NULL;
        rc = fpc_fail_cudnn(d, s, "create handle");
        goto fail;
    }
    cublasStatus_t ls = cublasLtCreate(&d->lt);
    if (ls != CUBLAS_STATUS_SUCCESS) {
        d->lt = NULL;
        rc = fpc_fail_cublas(d, ls, "create handle");
        goto fail;
    }
    if (c->stream) {
        d->stream = (cudaStream_t)c->stream;
    } else {
        cudaError_t e = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            d->stream = NULL;
            rc = fpc_fail_cuda(d, e, "create stream");
            goto fail;
        }
        d->own_stream = 1;
    }
    if ((s = cudnnSetStream(d->dnn, d->stream)) != CUDNN_STATUS_SUCCESS) {
        rc = fpc_fail_cudnn(d, s, "set stream");
        goto fail;
    }
    for (int i = 0; i < 4; i++) {
        if ((s = cudnnCreateTensorDescriptor(&d->td[i])) != CUDNN_STATUS_SUCCESS) {
            d->td[i] = NULL;
            rc = fpc_fail_cudnn(d, s, "create tensor descriptor");
            goto fail;
        }
    }
    if ((s = cudnnCreatePoolingDescriptor(&d->pool)) != CUDNN_STATUS_SUCCESS) {
        d->pool = NULL;
        rc = fpc_fail_cudnn(d, s, "create pooling descriptor");
        goto fail;
    }
    if ((s = cudnnCreateActivationDescriptor(&d->act)) != CUDNN_STATUS_SUCCESS) {
        d->act = NULL;
        rc = fpc_fail_cudnn(d, s, "create activation descriptor");
        goto fail;
    }
    /* relu, NaN propagates (layers.h: y = max(x, 0), NaN propagates). */
    if ((s = cudnnSetActivationDescriptor(d->act, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0)) !=
        CUDNN_STATUS_SUCCESS) {
        rc = fpc_fail_cudnn(d, s, "set activation descriptor");
        goto fail;
    }
    *out = d;
    return FP_OK;
fail:
    fp_cudnn_free(d);
    return rc;
}

void fp_cudnn_free(fp_cudnn *d)
{
    if (!d)
        return;
    if (d->stream)
        cudaStreamSynchronize(d->stream);
    fpc_conv_plans_free(d);
    fpc_mm_plans_free(d);
    for (int i = 0; i < 4; i++)
        if (d->td[i])
            cudnnDestroyTensorDescriptor(d->td[i]);
    if (d->pool)
        cudnnDestroyPoolingDescriptor(d->pool);
    if (d->act)
        cudnnDestroyActivationDescriptor(d->act);
    if (d->ws)
        cudaFree(d->ws);
    if (d->scratch)
        cudaFree(d->scratch);
    if (d->ones)
        cudaFree(d->ones);
    if (d->lt)
        cublasLtDestroy(d->lt);
    if (d->dnn)
        cudnnDestroy(d->dnn);
    if (d->own_stream && d->stream)
        cudaStreamDestroy(d->stream);
    free(d);
}
