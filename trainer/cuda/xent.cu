/* xent.cu — softmax cross-entropy on the device with fp_softmax_xent's semantics (trainer/cpu/xent.c):
 * labels checked first (nothing written on a bad one), max subtracted, exps in fp32, sums and logs in
 * double, dlogits = (softmax - onehot) / n, top-1 / top-5 hits with ties in the label's favour; a row whose
 * loss is not finite (a NaN or +Inf logit, a -Inf label logit) is never a hit. */
#include <math.h>
#include "kernels.h"

namespace {

__global__ void check_labels_kernel(fp_cuda_xent_result *out, const int *labels, int n, int classes)
{
    /* 64-bit index: an int one would wrap past INT_MAX when n is within one grid stride of it */
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)n; i += (size_t)gridDim.x * blockDim.x)
        if (labels[i] < 0 || labels[i] >= classes)
            atomicMin((unsigned *)&out->bad_label, (unsigned)i);   /* -1 (all ones) is "none" */
}

/* One block per sample. */
__global__ void xent_kernel(fp_cuda_xent_result *out, float *dlogits, const float *logits, const int *labels,
                            int n, int classes)
{
    __shared__ double shd[FP_CUDA_THREADS / 32];
    __shared__ float shf[FP_CUDA_THREADS / 32];
    __shared__ int shi[FP_CUDA_THREADS / 32];
    if (out->bad_label != -1)
        return;
    const int i = blockIdx.x;
    const float *l = logits + (size_t)i * classes;
    /* max as the CPU loop: starts at l[0], a NaN never wins (v > m is false) unless l[0] is NaN */
    float m = -INFINITY;
    for (int j = threadIdx.x; j < classes; j += blockDim.x)
        m = l[j] > m ? l[j] : m;
    for (int o = 16; o > 0; o >>= 1) {
        float v = __shfl_down_sync(0xffffffffu, m, o);
        m = v > m ? v : m;
    }
    if ((threadIdx.x & 31) == 0)
        shf[threadIdx.x >> 5] = m;
    __syncthreads();
    float mx = shf[0];
    for (int w = 1; w < FP_CUDA_THREADS / 32; w++)
        mx = shf[w] > mx ? shf[w] : mx;
    if (l[0] != l[0])
        mx = l[0];
    double s = 0.0;
    for (int j = threadIdx.x; j < classes; j += blockDim.x)
        s += (double)expf(l[j] - mx);
    const double sum = fp_block_sum(s, shd);
    const float ll = l[labels[i]];
    int greater = 0;
    for (int j = threadIdx.x; j < classes; j += blockDim.x)
        greater += l[j] > ll;
    greater = fp_block_sum(greater, shi);
    const float invn = 1.0f / (float)n;
    if (dlogits) {
        float *d = dlogits + (size_t)i * classes;
        const float inv = (float)(1.0 / sum);
        for (int j = threadIdx.x; j < classes; j += blockDim.x)
            d[j] = __fmul_rn(__fmul_rn(expf(l[j] - mx), inv), invn);
        __syncthreads();
        if (threadIdx.x == 0)
            d[labels[i]] = __fsub_rn(d[labels[i]], invn);
    }
    if (threadIdx.x == 0) {
        const double lse = (double)mx + log(sum);
        const double row = lse - (double)ll;
        atomicAdd(&out->loss_sum, row);
        if (isfinite(row)) {   /* a NaN or +Inf logit anywhere, a -Inf label logit: a wrong prediction */
            if (greater < 1)
                atomicAdd(&out->correct1, 1);
            if (greater < 5)
                atomicAdd(&out->correct5, 1);
        }
    }
}

__global__ void clear_result_kernel(fp_cuda_xent_result *out)
{
    out->loss_sum = 0.0;
    out->correct1 = 0;
    out->correct5 = 0;
    out->bad_label = -1;
    out->pad = 0;
}

} // namespace

extern "C" int fp_cuda_softmax_xent(fp_cuda_xent_result *d_out, float *d_dlogits, const float *d_logits,
                                    const int *d_labels, int n, int classes, void *stream)
{
    if (n <= 0 || classes <= 0)
        return fp_fail(FP_EINVAL, "fp_cuda_softmax_xent: bad dims n=%d classes=%d", n, classes);
    if (!d_out || !d_logits || !d_labels)
        return fp_fail(FP_EINVAL, "fp_cuda_softmax_xent: NULL argument");
    cudaStream_t st = (cudaStream_t)stream;
    /* cleared by a kernel: a cudaMemcpyAsync from the host's (pageable) stack waited for the stream first */
    clear_result_kernel<<<1, 1, 0, st>>>(d_out);
    int rc = fp_cuda_check_launch("softmax xent: clearing the result");
    if (rc != FP_OK)
        return rc;
    check_labels_kernel<<<fp_cuda_grid((size_t)n, 1024), FP_CUDA_THREADS, 0, st>>>(d_out, d_labels, n, classes);
    if ((rc = fp_cuda_check_launch("softmax xent: label check")) != FP_OK)
        return rc;
    xent_kernel<<<n, FP_CUDA_THREADS, 0, st>>>(d_out, d_dlogits, d_logits, d_labels, n, classes);
    return fp_cuda_check_launch("softmax xent");
}

extern "C" int fp_cuda_xent_finish(const fp_cuda_xent_result *res, int n, int classes, float *loss, int *correct1,
                                   int *correct5)
{
    if (!res || !loss || n <= 0)
        return fp_fail(FP_EINVAL, "fp_cuda_xent_finish: NULL argument or n=%d", n);
    if (res->bad_label != -1)
        return fp_fail(FP_EINVAL, "fp_cuda_softmax_xent: label[%d] outside [0, %d)", res->bad_label, classes);
    *loss = (float)(res->loss_sum / (double)n);
    if (correct1)
        *correct1 = res->correct1;
    if (correct5)
        *correct5 = res->correct5;
    return FP_OK;
}

extern "C" int fp_cuda_softmax_xent_sync(float *loss, int *correct1, int *correct5, float *d_dlogits,
                                         const float *d_logits, const int *d_labels, int n, int classes,
                                         fp_cuda_xent_result *d_out, void *stream)
{
    if (!loss)
        return fp_fail(FP_EINVAL, "fp_cuda_softmax_xent: NULL argument");
    int rc = fp_cuda_softmax_xent(d_out, d_dlogits, d_logits, d_labels, n, classes, stream);
    if (rc != FP_OK)
        return rc;
    cudaStream_t st = (cudaStream_t)stream;
    fp_cuda_xent_result res;
    if ((rc = fp_cuda_check(cudaMemcpyAsync(&res, d_out, sizeof res, cudaMemcpyDeviceToHost, st),
                            "softmax xent: copying the result")) != FP_OK ||
        (rc = fp_cuda_check(cudaStreamSynchronize(st), "softmax xent")) != FP_OK)
        return rc;
    if (res.bad_label != -1) {
        int value = 0;
        if (cudaMemcpy(&value, d_labels + res.bad_label, sizeof value, cudaMemcpyDeviceToHost) == cudaSuccess)
            return fp_fail(FP_EINVAL, "fp_cuda_softmax_xent: label[%d] = %d outside [0, %d)", res.bad_label, value,
                           classes);
    }
    return fp_cuda_xent_finish(&res, n, classes, loss, correct1, correct5);
}
