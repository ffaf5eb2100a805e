/* layer_error.cu — trainer/analysis/analysis.h fp_layer_error on the device: x (fp32, or fp16 / bf16 patterns)
 * against an fp32 reference; per-block double partial sums of (x-r)^2, r^2, x^2, x*r and the max
 * |x - r|, summed on the host in block order. Promise: fp_layer_error's definitions, zero and
 * non-finite cases included (rel_l2 = max_abs = Inf and cosine NaN when anything is non-finite). */
#include <math.h>
#include <cuda_fp16.h>
#include "kernels.h"

#define MAX_BLOCKS 1024u

namespace {

struct partial { double dd, rr, xx, xr, mx; };

template <int DT> __device__ inline double load_x(const void *x, size_t i)
{
    if (DT == 0)
        return (double)((const float *)x)[i];
    const unsigned short q = ((const unsigned short *)x)[i];
    if (DT == 1)
        return (double)__half2float(__ushort_as_half(q));
    return (double)__uint_as_float((uint32_t)q << 16);
}

template <int DT> __global__ void err_kernel(partial *out, const float *ref, const void *x, size_t n)
{
    __shared__ double sh[FP_CUDA_THREADS / 32];
    double dd = 0, rr = 0, xx = 0, xr = 0, mx = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const double r = ref[i], v = load_x<DT>(x, i), d = __dsub_rn(v, r), ad = fabs(d);
        dd = __dadd_rn(dd, __dmul_rn(d, d));
        rr = __dadd_rn(rr, __dmul_rn(r, r));
        xx = __dadd_rn(xx, __dmul_rn(v, v));
        xr = __dadd_rn(xr, __dmul_rn(v, r));
        mx = ad > mx ? ad : mx;   /* a NaN difference never wins, as on the CPU */
    }
    partial p;
    p.dd = fp_block_sum(dd, sh);
    p.rr = fp_block_sum(rr, sh);
    p.xx = fp_block_sum(xx, sh);
    p.xr = fp_block_sum(xr, sh);
    for (int o = 16; o > 0; o >>= 1) {
        const double v = __shfl_down_sync(0xffffffffu, mx, o);
        mx = v > mx ? v : mx;
    }
    if ((threadIdx.x & 31) == 0)
        sh[threadIdx.x >> 5] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
        p.mx = sh[0];
        for (int w = 1; w < FP_CUDA_THREADS / 32; w++)
            p.mx = sh[w] > p.mx ? sh[w] : p.mx;
        out[blockIdx.x] = p;
    }
}

} // namespace

extern "C" size_t fp_cuda_layer_error_work_bytes(void) { return MAX_BLOCKS * sizeof(partial); }

extern "C" int fp_cuda_layer_error(const float *d_ref, const void *d_x, fp_dtype x_dtype, size_t n, double *rel_l2,
                                   double *max_abs, double *cosine, void *d_work, void *stream)
{
    if ((n > 0 && (!d_ref || !d_x)) || !d_work)
        return fp_fail(FP_EINVAL, "fp_cuda_layer_error: %s is NULL", !d_work ? "workspace" : "an input");
    if (x_dtype != FP_DT_F32 && x_dtype != FP_DT_F16 && x_dtype != FP_DT_BF16)
        return fp_fail(FP_EINVAL, "fp_cuda_layer_error: unsupported dtype %s", fp_dtype_name(x_dtype));
    partial tot = {0, 0, 0, 0, 0};
    int nonfinite = 0;
    if (n > 0) {
        cudaStream_t st = (cudaStream_t)stream;
        partial *d_p = (partial *)d_work;
        const unsigned grid = fp_cuda_grid(n, MAX_BLOCKS);
        if (x_dtype == FP_DT_F32)
            err_kernel<0><<<grid, FP_CUDA_THREADS, 0, st>>>(d_p, d_ref, d_x, n);
        else if (x_dtype == FP_DT_F16)
            err_kernel<1><<<grid, FP_CUDA_THREADS, 0, st>>>(d_p, d_ref, d_x, n);
        else
            err_kernel<2><<<grid, FP_CUDA_THREADS, 0, st>>>(d_p, d_ref, d_x, n);
        int rc = fp_cuda_check_launch("layer error");
        partial p[MAX_BLOCKS];
        if (rc != FP_OK ||
            (rc = fp_cuda_check(cudaMemcpyAsync(p, d_p, grid * sizeof(partial), cudaMemcpyDeviceToHost, st),
                                "layer error: copying the sums")) != FP_OK ||
            (rc = fp_cuda_check(cudaStreamSynchronize(st), "layer error")) != FP_OK)
            return rc;
        for (unsigned b = 0; b < grid; b++) {
            tot.dd += p[b].dd;
            tot.rr += p[b].rr;
            tot.xx += p[b].xx;
            tot.xr += p[b].xr;
            tot.mx = p[b].mx > tot.mx ? p[b].mx : tot.mx;
        }
        nonfinite = !isfinite(tot.rr) || !isfinite(tot.xx);
    }
    /* trainer/analysis/precision_analysis.c acc_finish */
    double rel, cs;
    if (nonfinite) {
        rel = INFINITY;
        cs = NAN;
    } else {
        rel = tot.rr > 0 ? sqrt(tot.dd / tot.rr) : sqrt(tot.dd);
        if (tot.rr == 0 && tot.xx == 0)
            cs = 1.0;
        else if (tot.rr == 0 || tot.xx == 0)
            cs = 0.0;
        else
            cs = tot.xr / (sqrt(tot.xx) * sqrt(tot.rr));
    }
    if (rel_l2)
        *rel_l2 = rel;
    if (max_abs)
        *max_abs = nonfinite ? INFINITY : tot.mx;
    if (cosine)
        *cosine = cs;
    return FP_OK;
}
